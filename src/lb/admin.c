/*
 * admin.c: what the proxy tells about itself: /metrics (Prometheus text),
 * /backends (JSON), /healthz on the admin listener; the access log; the
 * per-backend and total response counters and latency histograms.
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

/* HELP and TYPE of one family (promtool check metrics wants both). */
static void fam(sbuf_t *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
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
                     "Failed requests to the backend, by kind (connect, io, timeout)."},
    [BF_EJECTIONS] = {"arbiter_lb_backend_ejections_total", "counter",
                      "Times the backend was ejected after consecutive failures."},
    [BF_CHECKS] = {"arbiter_lb_backend_checks_total", "counter",
                   "Health checks of the backend, by result."},
    [BF_QUEUE] = {"arbiter_lb_backend_reported_queue", "gauge",
                  "Queue length the backend (or its node's agent) last reported."},
    [BF_GPU] = {"arbiter_lb_backend_reported_gpu_util", "gauge",
                "GPU utilisation (0..1) the backend's node last reported."},
    [BF_DURATION] = {"arbiter_lb_backend_request_duration_seconds", "histogram",
                     "Time from request head to last response byte, per backend."},
};

static void backend_family(px_t *px, sbuf_t *b, int f)
{
    static const char *cls[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

    fam(b, px_bfam[f].name, px_bfam[f].type, px_bfam[f].help);
    for (int i = 0; i < px->nbes; i++) {
        const px_backend_t *e = px->bes[i];
        const char *n = px_bfam[f].name;
        char lab[300];
        snprintf(lab, sizeof lab, "backend=\"%s\"", e->name);
        switch (f) {
        case BF_UP:
            sb_printf(b, "%s{%s} %d\n", n, lab, e->eff > 0);
            break;
        case BF_STATE:
            for (size_t k = 0; k < sizeof px_states / sizeof px_states[0]; k++)
                sb_printf(b, "%s{%s,state=\"%s\"} %d\n", n, lab, px_states[k],
                          strcmp(px_states[k], state_of(px, e)) == 0);
            break;
        case BF_WEIGHT:
            sb_printf(b, "%s{%s} %.3f\n", n, lab, e->eff / 16.0);
            break;
        case BF_INFLIGHT:
            sb_printf(b, "%s{%s} %u\n", n, lab, e->inflight);
            break;
        case BF_IDLE:
            sb_printf(b, "%s{%s} %d\n", n, lab, e->nidle);
            break;
        case BF_REQUESTS:
            sb_printf(b, "%s{%s} %llu\n", n, lab, (unsigned long long)e->st.requests);
            break;
        case BF_RESPONSES:
            for (int c = 1; c < 6; c++)
                sb_printf(b, "%s{%s,code=\"%s\"} %llu\n", n, lab, cls[c],
                          (unsigned long long)e->st.resp[c]);
            break;
        case BF_FAILURES:
            sb_printf(b, "%s{%s,kind=\"connect\"} %llu\n", n, lab,
                      (unsigned long long)e->st.connect_fail);
            sb_printf(b, "%s{%s,kind=\"io\"} %llu\n", n, lab, (unsigned long long)e->st.io_fail);
            sb_printf(b, "%s{%s,kind=\"timeout\"} %llu\n", n, lab,
                      (unsigned long long)e->st.timeouts);
            break;
        case BF_EJECTIONS:
            sb_printf(b, "%s{%s} %llu\n", n, lab, (unsigned long long)e->st.ejections);
            break;
        case BF_CHECKS:
            sb_printf(b, "%s{%s,result=\"ok\"} %llu\n", n, lab,
                      (unsigned long long)e->st.checks_ok);
            sb_printf(b, "%s{%s,result=\"bad\"} %llu\n", n, lab,
                      (unsigned long long)e->st.checks_bad);
            break;
        case BF_QUEUE:
            if (e->load.at_ms)
                sb_printf(b, "%s{%s} %g\n", n, lab, e->load.queue);
            break;
        case BF_GPU:
            if (e->load.at_ms)
                sb_printf(b, "%s{%s} %g\n", n, lab, e->load.gpu_util);
            break;
        case BF_DURATION:
            hist(b, n, lab, &e->st);
            break;
        }
    }
}

static void metrics(px_t *px, sbuf_t *b)
{
    static const char *cls[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

    fam(b, "arbiter_lb_connections_accepted_total", "counter", "Client connections accepted.");
    sb_printf(b, "arbiter_lb_connections_accepted_total %llu\n", (unsigned long long)px->accepted);
    fam(b, "arbiter_lb_client_connections", "gauge", "Client connections open now.");
    sb_printf(b, "arbiter_lb_client_connections %d\n", px->nclients);
    fam(b, "arbiter_lb_retries_total", "counter",
        "Requests sent again to another backend after a failure.");
    sb_printf(b, "arbiter_lb_retries_total %llu\n", (unsigned long long)px->retries);
    fam(b, "arbiter_lb_no_backend_total", "counter",
        "Requests no backend could take (answered 502 or 503).");
    sb_printf(b, "arbiter_lb_no_backend_total %llu\n", (unsigned long long)px->no_backend);
    fam(b, "arbiter_lb_bad_requests_total", "counter",
        "Client requests refused as malformed (400, 431).");
    sb_printf(b, "arbiter_lb_bad_requests_total %llu\n", (unsigned long long)px->bad_requests);
    fam(b, "arbiter_lb_responses_total", "counter", "Responses to clients, by class.");
    for (int i = 1; i < 6; i++)
        sb_printf(b, "arbiter_lb_responses_total{code=\"%s\"} %llu\n", cls[i],
                  (unsigned long long)px->total.resp[i]);
    fam(b, "arbiter_lb_request_duration_seconds", "histogram",
        "Time from request head to last response byte.");
    hist(b, "arbiter_lb_request_duration_seconds", "", &px->total);
    for (int f = 0; f < BF_COUNT; f++)
        backend_family(px, b, f);
}

static void backends_json(px_t *px, sbuf_t *b)
{
    sb_printf(b, "{\"policy\":\"%s\",\"backends\":[", px->c->policy->name);
    for (int i = 0; i < px->nbes; i++) {
        const px_backend_t *e = px->bes[i];
        sb_printf(b,
                  "%s{\"name\":\"%s\",\"state\":\"%s\",\"weight\":%u,\"eff\":%.3f,"
                  "\"inflight\":%u,\"requests\":%llu,\"fails\":%d,\"ejections\":%llu,"
                  "\"load\":{\"queue\":%g,\"gpu\":%g,\"inflight\":%g,\"age_ms\":%lld}}",
                  i ? "," : "", e->name, state_of(px, e), e->weight, e->eff / 16.0, e->inflight,
                  (unsigned long long)e->st.requests, e->fails, (unsigned long long)e->st.ejections,
                  e->load.queue, e->load.gpu_util, e->load.inflight,
                  e->load.at_ms ? (long long)(px->now_ms - e->load.at_ms) : -1LL);
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
