/*
 * admin.c: what the proxy tells about itself: /metrics (Prometheus text),
 * /backends (JSON), /healthz on the admin listener; the access log; the
 * per-backend and total response counters and latency histograms; for
 * inference requests, time to first byte, the admission queue and what each
 * model server's own metrics said.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lb/proxy_int.h"

/* Latency histogram bounds, seconds; the last bucket is +Inf. */
static const double px_lat_le[14] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                     0.1,    0.25,  0.5,    1,     2.5,  5,     10};

void px_stats_response(px_stats_t *st, int status, double secs)
{
    int b = 0;
    int cls = status / 100;

    st->resp[cls >= 1 && cls <= 5 ? cls : 0]++;
    while (b < 14 && secs > px_lat_le[b])
        b++;
    st->lat_bucket[b]++;
    st->lat_sum += secs;
}

void px_stats_ttft(px_admit_stats_t *st, double secs)
{
    int b = 0;
    while (b < 14 && secs > px_lat_le[b])
        b++;
    st->ttft_bucket[b]++;
    st->ttft_sum += secs;
}

/* A growing text buffer. */
typedef struct sbuf {
    char *d;
    size_t len, cap;
    bool oom;
} sbuf_t;

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->d + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *d = realloc(b->d, cap);
        if (!d) {
            b->oom = true;
            return;
        }
        b->d = d;
        b->cap = cap;
    }
}

static const char *state_of(const px_t *px, const px_backend_t *b)
{
    if (b->removed)
        return "draining";
    if (!b->hc_up)
        return "down";
    if (b->eject_until && px->now_ms < b->eject_until)
        return "ejected";
    if (b->up_since)
        return "slow-start";
    return "up";
}

static void hist(sbuf_t *b, const char *name, const char *labels, const px_stats_t *st)
{
    uint64_t cum = 0, n = 0;
    for (int i = 0; i < 15; i++)
        n += st->lat_bucket[i];
    for (int i = 0; i < 14; i++) {
        cum += st->lat_bucket[i];
        sb_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, *labels ? "," : "",
                  px_lat_le[i], (unsigned long long)cum);
    }
    sb_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, *labels ? "," : "",
              (unsigned long long)n);
    sb_printf(b, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels, st->lat_sum, name, labels,
              (unsigned long long)n);
}

/* This loop's counters, or with several loops their sums (hub.c). */
static void totals(px_t *px, px_snap_t *t)
{
    if (px->hub) {
        px_hub_sync(px);
        px_hub_totals(px, t);
        return;
    }
    t->total = px->total;
    t->ad = px->ad;
    t->accepted = px->accepted;
    t->retries = px->retries;
    t->no_backend = px->no_backend;
    t->bad_requests = px->bad_requests;
    t->nclients = px->nclients;
    t->nqueued = px->nqueued;
}

static uint32_t inflight_of(const px_backend_t *e)
{
    return e->sh ? atomic_load(&e->sh->inflight) : e->inflight;
}

static void metrics(px_t *px, sbuf_t *b)
{
    static const char *cls[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    px_snap_t T;

    totals(px, &T);

    sb_printf(b,
              "# HELP arbiter_lb_connections_accepted_total Client connections accepted.\n"
              "# TYPE arbiter_lb_connections_accepted_total counter\n"
              "arbiter_lb_connections_accepted_total %llu\n",
              (unsigned long long)T.accepted);
    sb_printf(b, "# TYPE arbiter_lb_client_connections gauge\narbiter_lb_client_connections %d\n",
              T.nclients);
    sb_printf(b, "# TYPE arbiter_lb_retries_total counter\narbiter_lb_retries_total %llu\n",
              (unsigned long long)T.retries);
    sb_printf(b, "# TYPE arbiter_lb_no_backend_total counter\narbiter_lb_no_backend_total %llu\n",
              (unsigned long long)T.no_backend);
    sb_printf(b,
              "# TYPE arbiter_lb_bad_requests_total counter\narbiter_lb_bad_requests_total %llu\n",
              (unsigned long long)T.bad_requests);
    sb_printf(b, "# HELP arbiter_lb_responses_total Responses to clients, by class.\n"
                 "# TYPE arbiter_lb_responses_total counter\n");
    for (int i = 1; i < 6; i++)
        sb_printf(b, "arbiter_lb_responses_total{code=\"%s\"} %llu\n", cls[i],
                  (unsigned long long)T.total.resp[i]);
    sb_printf(b, "# HELP arbiter_lb_request_duration_seconds Time from request head to last "
                 "response byte.\n# TYPE arbiter_lb_request_duration_seconds histogram\n");
    hist(b, "arbiter_lb_request_duration_seconds", "", &T.total);

    if (px->c->openai) {
        static const char *kinds[3] = {"", "completions", "chat"};
        const px_admit_stats_t *a = &T.ad;
        sb_printf(b,
                  "# HELP arbiter_lb_inference_requests_total OpenAI API requests, by endpoint.\n"
                  "# TYPE arbiter_lb_inference_requests_total counter\n");
        for (int i = 1; i < 3; i++)
            sb_printf(b, "arbiter_lb_inference_requests_total{endpoint=\"%s\"} %llu\n", kinds[i],
                      (unsigned long long)a->infer_requests[i]);
        sb_printf(b,
                  "# TYPE arbiter_lb_inference_unparsed_total counter\n"
                  "arbiter_lb_inference_unparsed_total %llu\n"
                  "# TYPE arbiter_lb_inference_bad_body_total counter\n"
                  "arbiter_lb_inference_bad_body_total %llu\n",
                  (unsigned long long)a->unparsed, (unsigned long long)a->parse_errors);
        sb_printf(b,
                  "# HELP arbiter_lb_queued_requests Requests held while every replica is "
                  "saturated.\n# TYPE arbiter_lb_queued_requests gauge\n"
                  "arbiter_lb_queued_requests %d\n",
                  T.nqueued);
        sb_printf(b,
                  "# TYPE arbiter_lb_queue_admitted_total counter\n"
                  "arbiter_lb_queue_admitted_total %llu\n"
                  "# TYPE arbiter_lb_queue_dispatched_total counter\n"
                  "arbiter_lb_queue_dispatched_total %llu\n",
                  (unsigned long long)a->queued, (unsigned long long)a->dispatched);
        sb_printf(b,
                  "# HELP arbiter_lb_rejected_total Requests answered 429, by reason.\n"
                  "# TYPE arbiter_lb_rejected_total counter\n"
                  "arbiter_lb_rejected_total{reason=\"queue_full\"} %llu\n"
                  "arbiter_lb_rejected_total{reason=\"fair_share\"} %llu\n"
                  "arbiter_lb_rejected_total{reason=\"slo\"} %llu\n"
                  "arbiter_lb_rejected_total{reason=\"expired\"} %llu\n",
                  (unsigned long long)a->rejected_full, (unsigned long long)a->rejected_share,
                  (unsigned long long)a->rejected_slo, (unsigned long long)a->expired);
        if (px->pindex)
            sb_printf(b,
                      "# TYPE arbiter_lb_prefix_index_blocks gauge\n"
                      "arbiter_lb_prefix_index_blocks %u\n",
                      lb_pindex_size(px->pindex));
        px_stats_t t = {0};
        memcpy(t.lat_bucket, a->ttft_bucket, sizeof t.lat_bucket);
        t.lat_sum = a->ttft_sum;
        sb_printf(b, "# HELP arbiter_lb_ttft_seconds Inference requests: time from request head "
                     "to the first response body byte (the first token when streamed).\n"
                     "# TYPE arbiter_lb_ttft_seconds histogram\n");
        hist(b, "arbiter_lb_ttft_seconds", "", &t);
    }

    sb_printf(b, "# TYPE arbiter_lb_backend_up gauge\n# TYPE arbiter_lb_backend_weight gauge\n"
                 "# TYPE arbiter_lb_backend_inflight gauge\n"
                 "# TYPE arbiter_lb_backend_idle_connections gauge\n"
                 "# TYPE arbiter_lb_backend_requests_total counter\n"
                 "# TYPE arbiter_lb_backend_responses_total counter\n"
                 "# TYPE arbiter_lb_backend_failures_total counter\n"
                 "# TYPE arbiter_lb_backend_ejections_total counter\n"
                 "# TYPE arbiter_lb_backend_checks_total counter\n"
                 "# TYPE arbiter_lb_backend_reported_queue gauge\n"
                 "# TYPE arbiter_lb_backend_reported_gpu_util gauge\n"
                 "# TYPE arbiter_lb_backend_request_duration_seconds histogram\n");
    if (px->c->scrape_path)
        sb_printf(b, "# TYPE arbiter_lb_backend_engine_waiting gauge\n"
                     "# TYPE arbiter_lb_backend_engine_running gauge\n"
                     "# TYPE arbiter_lb_backend_engine_kv_cache_usage gauge\n"
                     "# TYPE arbiter_lb_backend_engine_lora_adapters gauge\n"
                     "# TYPE arbiter_lb_backend_scrapes_total counter\n");
    for (int i = 0; i < px->nbes; i++) {
        const px_backend_t *e = px->bes[i];
        px_stats_t est;
        char lab[300];
        px_hub_backend_stats(px, e, &est);
        snprintf(lab, sizeof lab, "backend=\"%s\"", e->name);
        sb_printf(b, "arbiter_lb_backend_up{%s,state=\"%s\"} %d\n", lab, state_of(px, e),
                  e->eff > 0);
        sb_printf(b, "arbiter_lb_backend_weight{%s} %.3f\n", lab, e->eff / 16.0);
        sb_printf(b, "arbiter_lb_backend_inflight{%s} %u\n", lab, inflight_of(e));
        sb_printf(b, "arbiter_lb_backend_idle_connections{%s} %d\n", lab, e->nidle);
        sb_printf(b, "arbiter_lb_backend_requests_total{%s} %llu\n", lab,
                  (unsigned long long)est.requests);
        for (int c = 1; c < 6; c++)
            sb_printf(b, "arbiter_lb_backend_responses_total{%s,code=\"%s\"} %llu\n", lab, cls[c],
                      (unsigned long long)est.resp[c]);
        sb_printf(b, "arbiter_lb_backend_failures_total{%s,kind=\"connect\"} %llu\n", lab,
                  (unsigned long long)est.connect_fail);
        sb_printf(b, "arbiter_lb_backend_failures_total{%s,kind=\"io\"} %llu\n", lab,
                  (unsigned long long)est.io_fail);
        sb_printf(b, "arbiter_lb_backend_failures_total{%s,kind=\"timeout\"} %llu\n", lab,
                  (unsigned long long)est.timeouts);
        sb_printf(b, "arbiter_lb_backend_ejections_total{%s} %llu\n", lab,
                  (unsigned long long)est.ejections);
        sb_printf(b, "arbiter_lb_backend_checks_total{%s,result=\"ok\"} %llu\n", lab,
                  (unsigned long long)est.checks_ok);
        sb_printf(b, "arbiter_lb_backend_checks_total{%s,result=\"bad\"} %llu\n", lab,
                  (unsigned long long)est.checks_bad);
        if (e->load.at_ms) {
            sb_printf(b, "arbiter_lb_backend_reported_queue{%s} %g\n", lab, e->load.queue);
            sb_printf(b, "arbiter_lb_backend_reported_gpu_util{%s} %g\n", lab, e->load.gpu_util);
        }
        if (px->c->scrape_path) {
            sb_printf(b, "arbiter_lb_backend_scrapes_total{%s,result=\"ok\"} %llu\n", lab,
                      (unsigned long long)e->scrapes_ok);
            sb_printf(b, "arbiter_lb_backend_scrapes_total{%s,result=\"bad\"} %llu\n", lab,
                      (unsigned long long)e->scrapes_bad);
        }
        if (e->eng.at_ms) {
            sb_printf(b, "arbiter_lb_backend_engine_waiting{%s} %g\n", lab, e->eng.waiting);
            sb_printf(b, "arbiter_lb_backend_engine_running{%s} %g\n", lab, e->eng.running);
            if (e->eng.kv >= 0)
                sb_printf(b, "arbiter_lb_backend_engine_kv_cache_usage{%s} %g\n", lab, e->eng.kv);
            sb_printf(b, "arbiter_lb_backend_engine_lora_adapters{%s} %d\n", lab, e->eng.nlora);
        }
        hist(b, "arbiter_lb_backend_request_duration_seconds", lab, &est);
    }
}

static void backends_json(px_t *px, sbuf_t *b)
{
    sb_printf(b, "{\"policy\":\"%s\",\"backends\":[", px->c->policy->name);
    for (int i = 0; i < px->nbes; i++) {
        const px_backend_t *e = px->bes[i];
        px_stats_t est;
        px_hub_backend_stats(px, e, &est);
        sb_printf(b,
                  "%s{\"name\":\"%s\",\"state\":\"%s\",\"weight\":%u,\"eff\":%.3f,"
                  "\"inflight\":%u,\"prefill_blocks\":%u,\"requests\":%llu,\"fails\":%d,"
                  "\"ejections\":%llu,"
                  "\"load\":{\"queue\":%g,\"gpu\":%g,\"inflight\":%g,\"age_ms\":%lld}",
                  i ? "," : "", e->name, state_of(px, e), e->weight, e->eff / 16.0, inflight_of(e),
                  e->prefill, (unsigned long long)est.requests, e->fails,
                  (unsigned long long)est.ejections, e->load.queue, e->load.gpu_util,
                  e->load.inflight, e->load.at_ms ? (long long)(px->now_ms - e->load.at_ms) : -1LL);
        if (e->eng.at_ms)
            sb_printf(b,
                      ",\"engine\":{\"kind\":\"%s\",\"waiting\":%g,\"running\":%g,\"kv\":%g,"
                      "\"lora\":%d,\"max_lora\":%d,\"age_ms\":%lld,\"ttft_ms\":%.1f}",
                      e->engine, e->eng.waiting, e->eng.running, e->eng.kv, e->eng.nlora,
                      e->eng.max_lora, (long long)(px->now_ms - e->eng.at_ms), e->ttft_ms);
        sb_printf(b, "}");
    }
    px_snap_t T;
    totals(px, &T);
    sb_printf(b, "],\"queued\":%d,\"loops\":%d,\"accepted_by_loop\":[", T.nqueued,
              px->hub ? px->hub->nloops : 1);
    if (px->hub) {
        pthread_mutex_lock(&px->hub->mu);
        for (int k = 0; k < px->hub->nloops; k++)
            sb_printf(b, "%s%llu", k ? "," : "", (unsigned long long)px->hub->snap[k].accepted);
        pthread_mutex_unlock(&px->hub->mu);
    } else {
        sb_printf(b, "%llu", (unsigned long long)px->accepted);
    }
    sb_printf(b, "]}\n");
}

char *px_admin_reply(px_t *px, const http_head_t *req, size_t *len)
{
    sbuf_t body = {0}, out = {0};
    const char *ctype = "text/plain; charset=utf-8";
    int code = 200;
    size_t tl = req->tlen;
    const char *q = memchr(req->target, '?', tl);

    if (q)
        tl = (size_t)(q - req->target);
    if (tl == 8 && memcmp(req->target, "/metrics", 8) == 0) {
        metrics(px, &body);
        ctype = "text/plain; version=0.0.4";
    } else if (tl == 9 && memcmp(req->target, "/backends", 9) == 0) {
        backends_json(px, &body);
        ctype = "application/json";
    } else if (tl == 8 && memcmp(req->target, "/healthz", 8) == 0) {
        sb_printf(&body, "ok\n");
    } else {
        code = 404;
        sb_printf(&body, "not found; try /metrics, /backends, /healthz\n");
    }
    sb_printf(&out,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              code, code == 200 ? "OK" : "Not Found", ctype, body.len);
    if (!out.oom && !body.oom && req->method != HTTP_HEAD)
        sb_printf(&out, "%.*s", (int)body.len, body.d ? body.d : "");
    free(body.d);
    if (out.oom || body.oom) {
        free(out.d);
        return NULL;
    }
    *len = out.len;
    return out.d;
}

void px_log(px_t *px, px_sess_t *s, px_backend_t *b)
{
    struct timespec ts;
    struct tm tm;
    char peer[64], when[32];

    if (!px->log)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    px_addr_text(&s->peer, peer, sizeof peer);
    fprintf(px->log, "%s.%03ldZ %s \"%s HTTP/1.%d\" %d %s %.3fms tries=%d\n", when,
            ts.tv_nsec / 1000000, peer, s->what[0] ? s->what : "-", s->req.minor, s->status,
            b ? b->name : "-", (double)(px->now_ns - s->t0_ns) / 1e6, s->ntried + 1);
    px->log_dirty = true;
}
