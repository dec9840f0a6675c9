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
#include "util/buf.h"

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

static void hist(arb_buf_t *b, const char *name, const char *labels, const px_stats_t *st)
{
    uint64_t cum = 0, n = 0;
    for (int i = 0; i < 15; i++)
        n += st->lat_bucket[i];
    for (int i = 0; i < 14; i++) {
        cum += st->lat_bucket[i];
        arb_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, *labels ? "," : "",
                       px_lat_le[i], (unsigned long long)cum);
    }
    arb_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, *labels ? "," : "",
                   (unsigned long long)n);
    arb_buf_printf(b, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels, st->lat_sum, name,
                   labels, (unsigned long long)n);
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

/* HELP and TYPE of one family (promtool check metrics wants both). */
static void fam(arb_buf_t *b, const char *name, const char *type, const char *help)
{
    arb_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The states state_of() names, for the one-series-per-state family. */
static const char *const px_states[] = {"up", "slow-start", "ejected", "down", "draining"};

/* The per-backend families: each family's HELP and TYPE once, then its
 * samples for every backend (a family's samples must not be interleaved
 * with another's). */
enum {
    BF_UP,
    BF_STATE,
    BF_WEIGHT,
    BF_INFLIGHT,
    BF_IDLE,
    BF_REQUESTS,
    BF_RESPONSES,
    BF_FAILURES,
    BF_EJECTIONS,
    BF_CHECKS,
    BF_QUEUE,
    BF_GPU,
    BF_SCRAPES,
    BF_ENG_WAITING,
    BF_ENG_RUNNING,
    BF_ENG_KV,
    BF_ENG_LORA,
    BF_DURATION,
    BF_COUNT
};

static const struct {
    const char *name, *type, *help;
} px_bfam[BF_COUNT] = {
    [BF_UP] = {"arbiter_lb_backend_up", "gauge",
               "1 when the backend takes new requests (up or slow-start), else 0."},
    [BF_STATE] = {"arbiter_lb_backend_state", "gauge",
                  "The backend's state: 1 for the state it is in, 0 for the others."},
    [BF_WEIGHT] = {"arbiter_lb_backend_weight", "gauge",
                   "The backend's effective weight (configured weight, slow start, feedback)."},
    [BF_INFLIGHT] = {"arbiter_lb_backend_inflight", "gauge",
                     "Requests sent to the backend and not yet answered."},
    [BF_IDLE] = {"arbiter_lb_backend_idle_connections", "gauge",
                 "Idle keep-alive connections to the backend."},
    [BF_REQUESTS] = {"arbiter_lb_backend_requests_total", "counter",
                     "Requests sent to the backend."},
    [BF_RESPONSES] = {"arbiter_lb_backend_responses_total", "counter",
                      "Responses from the backend, by class."},
    [BF_FAILURES] = {"arbiter_lb_backend_failures_total", "counter",
                     "Failed requests to the backend, by kind (connect, io, timeout; tls: failed "
                     "handshakes of any connection to it)."},
    [BF_EJECTIONS] = {"arbiter_lb_backend_ejections_total", "counter",
                      "Times the backend was ejected after consecutive failures."},
    [BF_CHECKS] = {"arbiter_lb_backend_checks_total", "counter",
                   "Health checks of the backend, by result."},
    [BF_QUEUE] = {"arbiter_lb_backend_reported_queue", "gauge",
                  "Queue length the backend (or its node's agent) last reported."},
    [BF_GPU] = {"arbiter_lb_backend_reported_gpu_util", "gauge",
                "GPU utilisation (0..1) the backend's node last reported."},
    [BF_SCRAPES] = {"arbiter_lb_backend_scrapes_total", "counter",
                    "Scrapes of the backend's own /metrics (--scrape-path), by result."},
    [BF_ENG_WAITING] = {"arbiter_lb_backend_engine_waiting", "gauge",
                        "Requests waiting in the model server, as it last reported."},
    [BF_ENG_RUNNING] = {"arbiter_lb_backend_engine_running", "gauge",
                        "Requests running in the model server, as it last reported."},
    [BF_ENG_KV] = {"arbiter_lb_backend_engine_kv_cache_usage", "gauge",
                   "The model server's KV-cache use (0..1), as it last reported."},
    [BF_ENG_LORA] = {"arbiter_lb_backend_engine_lora_adapters", "gauge",
                     "LoRA adapters loaded in the model server, as it last reported."},
    [BF_DURATION] = {"arbiter_lb_backend_request_duration_seconds", "histogram",
                     "Time from request head to last response byte, per backend."},
};

static void backend_family(px_t *px, arb_buf_t *b, int f)
{
    static const char *cls[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

    if (f == BF_SCRAPES && !px->c->scrape_path)
        return;
    if (f >= BF_ENG_WAITING && f <= BF_ENG_LORA && !px->c->scrape_path)
        return;
    fam(b, px_bfam[f].name, px_bfam[f].type, px_bfam[f].help);
    for (int i = 0; i < px->nbes; i++) {
        const px_backend_t *e = px->bes[i];
        const char *n = px_bfam[f].name;
        char lab[300];
        px_stats_t est; /* the backend's counters, summed over the event loops */
        px_hub_backend_stats(px, e, &est);
        snprintf(lab, sizeof lab, "backend=\"%s\"", e->name);
        switch (f) {
        case BF_UP:
            arb_buf_printf(b, "%s{%s} %d\n", n, lab, e->eff > 0);
            break;
        case BF_STATE:
            for (size_t k = 0; k < sizeof px_states / sizeof px_states[0]; k++)
                arb_buf_printf(b, "%s{%s,state=\"%s\"} %d\n", n, lab, px_states[k],
                               strcmp(px_states[k], state_of(px, e)) == 0);
            break;
        case BF_WEIGHT:
            arb_buf_printf(b, "%s{%s} %.3f\n", n, lab, e->eff / 16.0);
            break;
        case BF_INFLIGHT:
            arb_buf_printf(b, "%s{%s} %u\n", n, lab, inflight_of(e));
            break;
        case BF_IDLE:
            arb_buf_printf(b, "%s{%s} %d\n", n, lab, e->nidle);
            break;
        case BF_REQUESTS:
            arb_buf_printf(b, "%s{%s} %llu\n", n, lab, (unsigned long long)est.requests);
            break;
        case BF_RESPONSES:
            for (int c = 1; c < 6; c++)
                arb_buf_printf(b, "%s{%s,code=\"%s\"} %llu\n", n, lab, cls[c],
                               (unsigned long long)est.resp[c]);
            break;
        case BF_FAILURES:
            arb_buf_printf(b, "%s{%s,kind=\"connect\"} %llu\n", n, lab,
                           (unsigned long long)est.connect_fail);
            arb_buf_printf(b, "%s{%s,kind=\"io\"} %llu\n", n, lab, (unsigned long long)est.io_fail);
            arb_buf_printf(b, "%s{%s,kind=\"timeout\"} %llu\n", n, lab,
                           (unsigned long long)est.timeouts);
            arb_buf_printf(b, "%s{%s,kind=\"tls\"} %llu\n", n, lab,
                           (unsigned long long)est.tls_fail);
            break;
        case BF_EJECTIONS:
            arb_buf_printf(b, "%s{%s} %llu\n", n, lab, (unsigned long long)est.ejections);
            break;
        case BF_CHECKS:
            arb_buf_printf(b, "%s{%s,result=\"ok\"} %llu\n", n, lab,
                           (unsigned long long)est.checks_ok);
            arb_buf_printf(b, "%s{%s,result=\"bad\"} %llu\n", n, lab,
                           (unsigned long long)est.checks_bad);
            break;
        case BF_QUEUE:
            if (e->load.at_ms)
                arb_buf_printf(b, "%s{%s} %g\n", n, lab, e->load.queue);
            break;
        case BF_GPU:
            if (e->load.at_ms)
                arb_buf_printf(b, "%s{%s} %g\n", n, lab, e->load.gpu_util);
            break;
        case BF_SCRAPES:
            arb_buf_printf(b, "%s{%s,result=\"ok\"} %llu\n", n, lab,
                           (unsigned long long)e->scrapes_ok);
            arb_buf_printf(b, "%s{%s,result=\"bad\"} %llu\n", n, lab,
                           (unsigned long long)e->scrapes_bad);
            break;
        case BF_ENG_WAITING:
            if (e->eng.at_ms)
                arb_buf_printf(b, "%s{%s} %g\n", n, lab, e->eng.waiting);
            break;
        case BF_ENG_RUNNING:
            if (e->eng.at_ms)
                arb_buf_printf(b, "%s{%s} %g\n", n, lab, e->eng.running);
            break;
        case BF_ENG_KV:
            if (e->eng.at_ms && e->eng.kv >= 0)
                arb_buf_printf(b, "%s{%s} %g\n", n, lab, e->eng.kv);
            break;
        case BF_ENG_LORA:
            if (e->eng.at_ms)
                arb_buf_printf(b, "%s{%s} %d\n", n, lab, e->eng.nlora);
            break;
        case BF_DURATION:
            hist(b, n, lab, &est);
            break;
        }
    }
}

static void metrics(px_t *px, arb_buf_t *b)
{
    static const char *cls[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    px_snap_t T;

    totals(px, &T);
    fam(b, "arbiter_lb_connections_accepted_total", "counter", "Client connections accepted.");
    arb_buf_printf(b, "arbiter_lb_connections_accepted_total %llu\n",
                   (unsigned long long)T.accepted);
    fam(b, "arbiter_lb_client_connections", "gauge", "Client connections open now.");
    arb_buf_printf(b, "arbiter_lb_client_connections %d\n", T.nclients);
    fam(b, "arbiter_lb_retries_total", "counter",
        "Requests sent again to another backend after a failure.");
    arb_buf_printf(b, "arbiter_lb_retries_total %llu\n", (unsigned long long)T.retries);
    fam(b, "arbiter_lb_no_backend_total", "counter",
        "Requests no backend could take (answered 502 or 503).");
    arb_buf_printf(b, "arbiter_lb_no_backend_total %llu\n", (unsigned long long)T.no_backend);
    fam(b, "arbiter_lb_bad_requests_total", "counter",
        "Client requests refused as malformed (400, 431).");
    arb_buf_printf(b, "arbiter_lb_bad_requests_total %llu\n", (unsigned long long)T.bad_requests);
    fam(b, "arbiter_lb_responses_total", "counter", "Responses to clients, by class.");
    for (int i = 1; i < 6; i++)
        arb_buf_printf(b, "arbiter_lb_responses_total{code=\"%s\"} %llu\n", cls[i],
                       (unsigned long long)T.total.resp[i]);
    fam(b, "arbiter_lb_request_duration_seconds", "histogram",
        "Time from request head to last response byte.");
    hist(b, "arbiter_lb_request_duration_seconds", "", &T.total);

    if (px->c->openai) {
        static const char *kinds[3] = {"", "completions", "chat"};
        const px_admit_stats_t *a = &T.ad;
        fam(b, "arbiter_lb_inference_requests_total", "counter",
            "OpenAI API requests, by endpoint.");
        for (int i = 1; i < 3; i++)
            arb_buf_printf(b, "arbiter_lb_inference_requests_total{endpoint=\"%s\"} %llu\n",
                           kinds[i], (unsigned long long)a->infer_requests[i]);
        fam(b, "arbiter_lb_inference_unparsed_total", "counter",
            "Inference requests routed without reading their prompt (body over --body-max).");
        arb_buf_printf(b, "arbiter_lb_inference_unparsed_total %llu\n",
                       (unsigned long long)a->unparsed);
        fam(b, "arbiter_lb_inference_bad_body_total", "counter",
            "Inference requests whose body was not the JSON the API takes (answered 400).");
        arb_buf_printf(b, "arbiter_lb_inference_bad_body_total %llu\n",
                       (unsigned long long)a->parse_errors);
        fam(b, "arbiter_lb_queued_requests", "gauge",
            "Requests held while every replica is saturated.");
        arb_buf_printf(b, "arbiter_lb_queued_requests %d\n", T.nqueued);
        fam(b, "arbiter_lb_queue_admitted_total", "counter",
            "Requests admitted to the saturation queue.");
        arb_buf_printf(b, "arbiter_lb_queue_admitted_total %llu\n", (unsigned long long)a->queued);
        fam(b, "arbiter_lb_queue_dispatched_total", "counter",
            "Queued requests sent on to a replica.");
        arb_buf_printf(b, "arbiter_lb_queue_dispatched_total %llu\n",
                       (unsigned long long)a->dispatched);
        fam(b, "arbiter_lb_rejected_total", "counter", "Requests answered 429, by reason.");
        arb_buf_printf(b,
                       "arbiter_lb_rejected_total{reason=\"queue_full\"} %llu\n"
                       "arbiter_lb_rejected_total{reason=\"fair_share\"} %llu\n"
                       "arbiter_lb_rejected_total{reason=\"slo\"} %llu\n"
                       "arbiter_lb_rejected_total{reason=\"saturated\"} %llu\n"
                       "arbiter_lb_rejected_total{reason=\"expired\"} %llu\n",
                       (unsigned long long)a->rejected_full, (unsigned long long)a->rejected_share,
                       (unsigned long long)a->rejected_slo, (unsigned long long)a->rejected_late,
                       (unsigned long long)a->expired);
        if (px->pindex) {
            fam(b, "arbiter_lb_prefix_index_blocks", "gauge",
                "Prompt blocks the prefix index remembers (bounded LRU).");
            arb_buf_printf(b, "arbiter_lb_prefix_index_blocks %u\n", lb_pindex_size(px->pindex));
        }
        px_stats_t t = {0};
        memcpy(t.lat_bucket, a->ttft_bucket, sizeof t.lat_bucket);
        t.lat_sum = a->ttft_sum;
        fam(b, "arbiter_lb_ttft_seconds", "histogram",
            "Inference requests: time from request head to the first response body byte (the "
            "first token when streamed).");
        hist(b, "arbiter_lb_ttft_seconds", "", &t);
    }
    for (int f = 0; f < BF_COUNT; f++)
        backend_family(px, b, f);
}

static void backends_json(px_t *px, arb_buf_t *b)
{
    arb_buf_printf(b, "{\"policy\":\"%s\",\"backends\":[", px->c->policy->name);
    for (int i = 0; i < px->nbes; i++) {
        const px_backend_t *e = px->bes[i];
        px_stats_t est;
        px_hub_backend_stats(px, e, &est);
        arb_buf_printf(b,
                       "%s{\"name\":\"%s\",\"state\":\"%s\",\"weight\":%u,\"eff\":%.3f,"
                       "\"inflight\":%u,\"prefill_blocks\":%u,\"requests\":%llu,\"fails\":%d,"
                       "\"ejections\":%llu,"
                       "\"load\":{\"queue\":%g,\"gpu\":%g,\"inflight\":%g,\"age_ms\":%lld}",
                       i ? "," : "", e->name, state_of(px, e), e->weight, e->eff / 16.0,
                       inflight_of(e), e->prefill, (unsigned long long)est.requests, e->fails,
                       (unsigned long long)est.ejections, e->load.queue, e->load.gpu_util,
                       e->load.inflight,
                       e->load.at_ms ? (long long)(px->now_ms - e->load.at_ms) : -1LL);
        if (e->eng.at_ms)
            arb_buf_printf(b,
                           ",\"engine\":{\"kind\":\"%s\",\"waiting\":%g,\"running\":%g,\"kv\":%g,"
                           "\"lora\":%d,\"max_lora\":%d,\"age_ms\":%lld,\"ttft_ms\":%.1f}",
                           e->engine, e->eng.waiting, e->eng.running, e->eng.kv, e->eng.nlora,
                           e->eng.max_lora, (long long)(px->now_ms - e->eng.at_ms), e->ttft_ms);
        if (px->svc_on)
            arb_buf_printf(b, ",\"svc_ms\":%.1f", px_svc_ms(px, e));
        arb_buf_printf(b, "}");
    }
    px_snap_t T;
    totals(px, &T);
    arb_buf_printf(b, "],\"queued\":%d,\"loops\":%d,\"accepted_by_loop\":[", T.nqueued,
                   px->hub ? px->hub->nloops : 1);
    if (px->hub) {
        pthread_mutex_lock(&px->hub->mu);
        for (int k = 0; k < px->hub->nloops; k++)
            arb_buf_printf(b, "%s%llu", k ? "," : "",
                           (unsigned long long)px->hub->snap[k].accepted);
        pthread_mutex_unlock(&px->hub->mu);
    } else {
        arb_buf_printf(b, "%llu", (unsigned long long)px->accepted);
    }
    arb_buf_printf(b, "]}\n");
}

char *px_admin_reply(px_t *px, const http_head_t *req, size_t *len)
{
    arb_buf_t body = {0}, out = {0};
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
        arb_buf_printf(&body, "ok\n");
    } else {
        code = 404;
        arb_buf_printf(&body, "not found; try /metrics, /backends, /healthz\n");
    }
    arb_buf_printf(&out,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n",
                   code, code == 200 ? "OK" : "Not Found", ctype, body.len);
    if (!body.oom && req->method != HTTP_HEAD)
        arb_buf_put(&out, body.p, body.len);
    if (body.oom)
        out.oom = true;
    arb_buf_free(&body);
    *len = out.len;
    return arb_buf_take(&out); /* NULL when either ran out of memory */
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
