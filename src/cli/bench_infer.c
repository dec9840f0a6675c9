/*
 * bench_infer.c: `arbiter bench infer`: LLM request routing, side by side.
 * For every balancer (HAProxy roundrobin and leastconn, and each `arbiter
 * lb` policy) and every arrival rate it starts --replicas fresh emulated
 * replicas (tests/arb_llmemu: an OpenAI API and a continuous-batching
 * engine model with a prefix-reusing KV cache, vLLM-style /metrics; empty
 * caches each run), the balancer in front of them, and drives an open-loop
 * Poisson arrival process through it: a warm-up (every tenant's context once,
 * then --warmup seconds), then --duration seconds measured:
 *
 *   shared-prefix  --tenants tenants (llm-d's many-tenant mix), each with a
 *                  long context of --context tokens sent as the system
 *                  message of a chat completion, and a short question of
 *                  --question tokens (uniform, half to one and a half times)
 *   no-prefix      completions of unique prompts, 500 to 3000 tokens
 *   mixed          half of each
 *
 * every request streamed (SSE) with max_tokens --output (half to 1.5x).
 * Measured, for the requests that arrive after the warm-up: time to the
 * first token (ttft p50/p90/p99), time per output token after it (tpot
 * p50), output tokens received per second in the window (offered_tok_s:
 * those the window's arrivals asked for; measured_tok_s: those of them
 * received by the end of the drain, so a backlog from before the window
 * does not count), and how the
 * requests ended (ok, rejected with 429, errors; unfinished ones, still
 * waiting at the end of the drain, count in the TTFT percentiles with the
 * time they had waited: a lower bound). The emulators' prefix-cache hit
 * rate over the window comes from their own /metrics. One JSON line per
 * balancer and rate (-o json), or a table; the first line notes the machine
 * and its load average. Everything runs on this machine, on loopback.
 *
 * The emulators' costs are divided by --speedup, so a run takes a fraction
 * of the model's time: every latency it prints is in the emulator's (sped
 * up) time, and the rates are requests per second of that time; ratios
 * between balancers do not depend on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_proc.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "util/buf.h"
#include "util/mtime.h"
#include "lb/http.h"
#include "lb/lb.h"

#define MAXR 64   /* replicas */
#define MAXPOL 16 /* balancers in one run */

typedef enum wl { WL_SHARED, WL_NOPREFIX, WL_MIXED } wl_t;

typedef struct bi_conf {
    wl_t wl;
    int replicas, tenants, context, question, output;
    double rates[16];
    int nrates;
    double warmup, duration, drain, speedup;
    const char *pols[MAXPOL];
    int npols;
    const char *emulator, *haproxy, *emu_args;
    uint64_t seed;
    bool json;
} bi_conf_t;

typedef struct bi_res {
    double ttft_p50, ttft_p90, ttft_p99, tpot_p50, out_tok_s, hit_rate, proxy_cpu_s;
    /* the output tokens the window's arrivals asked for, and those of them
     * received by the end of the drain, per second of the window */
    double offered_tok_s, measured_tok_s;
    long ok, rejected, errors, unfinished, measured;
} bi_res_t;

static int64_t mono_us(void)
{
    return arb_mono_ns() / 1000;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

/* ---- processes ---------------------------------------------------------------- */

static char tmpdir[64];

/* Wait up to 10 s for a file holding a port (first number on a "listen"
 * line, or the whole file). */
static int wait_port(const char *name, bool ready_file)
{
    char path[PATH_MAX], line[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        if (f) {
            int port = 0;
            while (fgets(line, sizeof line, f)) {
                char *c = strrchr(line, ':');
                if (!ready_file)
                    port = atoi(line);
                else if (strncmp(line, "listen ", 7) == 0 && c)
                    port = atoi(c + 1);
            }
            fclose(f);
            if (port > 0)
                return port;
        }
        bench_sleep_ms(20);
    }
    return -1;
}

static int dial(int port, bool nonblock)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0) | SOCK_CLOEXEC, 0),
        one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* GET path on port, blocking; the body (malloc) or NULL. */
static char *http_get(int port, const char *path)
{
    int fd = dial(port, false);
    char req[256];
    arb_buf_t b = {0};
    struct timeval tv = {.tv_sec = 2};

    if (fd < 0)
        return NULL;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int n =
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return NULL;
    }
    while (arb_buf_reserve(&b, 16384) == 0) {
        ssize_t k = recv(fd, b.p + b.len, b.cap - b.len - 1, 0);
        if (k <= 0)
            break;
        b.len += (size_t)k;
        b.p[b.len] = '\0';
    }
    close(fd);
    return arb_buf_take(&b); /* "" when nothing came; NULL out of memory */
}

/* Sum of a metric's series in a Prometheus text. */
static double metric_sum(const char *txt, const char *name)
{
    double v = 0;
    size_t nl = strlen(name);
    for (const char *p = txt; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, nl) == 0 && (p[nl] == '{' || p[nl] == ' ')) {
            const char *sp = p[nl] == '{' ? strchr(p, '}') : p + nl;
            if (sp)
                v += strtod(sp + 1, NULL);
        }
    }
    return v;
}

/* The emulators' prefix-cache hits and queries (tokens), summed. */
static void cache_counts(const int *ports, int n, double *hits, double *queries)
{
    *hits = *queries = 0;
    for (int i = 0; i < n; i++) {
        char *m = http_get(ports[i], "/metrics");
        if (!m)
            continue;
        *hits += metric_sum(m, "vllm:prefix_cache_hits_total");
        *queries += metric_sum(m, "vllm:prefix_cache_queries_total");
        free(m);
    }
}

/* ---- the workload -------------------------------------------------------------- */

typedef struct wk {
    char **ctx; /* per tenant */
    int ntenants;
    int *perm, nperm; /* the warm-up's first tenants: each once, in random order */
    uint64_t rng;
} wk_t;

static void words(char *out, size_t bytes, uint64_t *rng)
{
    size_t i = 0;
    while (i + 1 < bytes) {
        int w = 2 + (int)(rng_next(rng) % 7);
        for (int k = 0; k < w && i + 1 < bytes; k++)
            out[i++] = (char)('a' + rng_next(rng) % 26);
        if (i + 1 < bytes)
            out[i++] = ' ';
    }
    out[i] = '\0';
}

static int wk_init(wk_t *w, const bi_conf_t *c)
{
    w->rng = c->seed;
    w->ntenants = c->tenants;
    w->ctx = calloc((size_t)c->tenants, sizeof *w->ctx);
    w->perm = calloc((size_t)c->tenants, sizeof *w->perm);
    if (!w->ctx || !w->perm)
        return -1;
    for (int t = 0; t < c->tenants; t++)
        w->perm[t] = t;
    for (int t = c->tenants - 1; t > 0; t--) {
        int j = (int)(rng_next(&w->rng) % (uint64_t)(t + 1)), x = w->perm[t];
        w->perm[t] = w->perm[j];
        w->perm[j] = x;
    }
    for (int t = 0; t < c->tenants; t++) {
        size_t n = (size_t)c->context * 4 + 1;
        w->ctx[t] = malloc(n);
        if (!w->ctx[t])
            return -1;
        char head[64];
        int k = snprintf(head, sizeof head, "You are the assistant of tenant %d. ", t);
        words(w->ctx[t], n, &w->rng);
        memcpy(w->ctx[t], head, (size_t)k < n - 1 ? (size_t)k : n - 1);
    }
    return 0;
}

static void wk_free(wk_t *w)
{
    for (int t = 0; w->ctx && t < w->ntenants; t++)
        free(w->ctx[t]);
    free(w->ctx);
    free(w->perm);
}

/* One request, as bytes on the wire (malloc). */
static char *wk_request(wk_t *w, const bi_conf_t *c, size_t *len, int *want)
{
    bool shared = c->wl == WL_SHARED || (c->wl == WL_MIXED && rng_next(&w->rng) % 2 == 0);
    int out = (int)(c->output * (0.5 + rng_unit(&w->rng)));
    char *body, *q, *msg;
    size_t qb, bl;
    int tenant;

    if (out < 1)
        out = 1;
    *want = out;
    if (shared) {
        /* every tenant once first (the warm-up sees them all), then at random */
        tenant = w->nperm < w->ntenants ? w->perm[w->nperm++]
                                        : (int)(rng_next(&w->rng) % (uint64_t)w->ntenants);
        qb = (size_t)(c->question * (0.5 + rng_unit(&w->rng))) * 4 + 1;
    } else {
        tenant = (int)(rng_next(&w->rng) % 1000);
        qb = (size_t)(500 + rng_next(&w->rng) % 2501) * 4 + 1;
    }
    q = malloc(qb);
    if (!q)
        return NULL;
    words(q, qb, &w->rng);
    bl = qb + (shared ? strlen(w->ctx[tenant]) : 0) + 512;
    body = malloc(bl);
    msg = malloc(bl + 512);
    if (!body || !msg) {
        free(q);
        free(body);
        free(msg);
        return NULL;
    }
    int n;
    if (shared)
        n = snprintf(
            body, bl,
            "{\"model\":\"emu-7b\",\"stream\":true,\"max_tokens\":%d,\"messages\":["
            "{\"role\":\"system\",\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"%s\"}]}",
            out, w->ctx[tenant], q);
    else
        n = snprintf(body, bl,
                     "{\"model\":\"emu-7b\",\"stream\":true,\"max_tokens\":%d,\"prompt\":\"%s\"}",
                     out, q);
    int m = snprintf(msg, bl + 512,
                     "POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                     "X-Tenant: %s%d\r\nContent-Length: %d\r\n\r\n%s",
                     shared ? "/v1/chat/completions" : "/v1/completions", shared ? "t" : "u",
                     tenant, n, body);
    free(q);
    free(body);
    *len = (size_t)m;
    return msg;
}

/* ---- the client -------------------------------------------------------------- */

typedef struct rq {
    int64_t sched, start, first, last, done; /* us since the run's start */
    int tokens, status, want;                /* want: max_tokens asked for */
    bool measured, finished;
} rq_t;

typedef struct cconn {
    int fd;
    int req; /* -1: idle in the pool */
    bool connected, head_done, keep;
    char *out;
    size_t out_len, out_sent;
    char in[16384];
    size_t in_len;
    http_body_t body;
    int match; /* progress through "data: {" */
    int slot;  /* in run.all */
    struct cconn *next_idle;
} cconn_t;

typedef struct run {
    const bi_conf_t *c;
    int ep, port;
    rq_t *rq;
    int nrq;
    int64_t t0, win_lo, win_hi;
    long tokens_in_win;
    cconn_t *idle;
    cconn_t **all; /* every open connection */
    int open, capall;
    int pending; /* measured requests not finished */
} run_t;

static const char PAT[] = "data: {";

static void conn_free(run_t *r, cconn_t *cc)
{
    epoll_ctl(r->ep, EPOLL_CTL_DEL, cc->fd, NULL);
    close(cc->fd);
    free(cc->out);
    r->all[cc->slot] = r->all[--r->open];
    r->all[cc->slot]->slot = cc->slot;
    for (cconn_t **pp = &r->idle; *pp; pp = &(*pp)->next_idle)
        if (*pp == cc) {
            *pp = cc->next_idle;
            break;
        }
    free(cc);
}

static void req_end(run_t *r, cconn_t *cc, int status)
{
    rq_t *q = &r->rq[cc->req];
    q->status = status;
    q->finished = true;
    q->done = mono_us() - r->t0;
    r->pending -= q->measured;
    cc->req = -1;
}

/* Bytes of the response body: tokens are "data: {" events (chunk framing
 * never holds that text, so the framing needs no decoding here). */
static void body_bytes(run_t *r, cconn_t *cc, const char *p, size_t n, int64_t now)
{
    rq_t *q = &r->rq[cc->req];
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == PAT[cc->match])
            cc->match++;
        else
            cc->match = ch == 'd';
        if (cc->match == 7) {
            cc->match = 0;
            if (q->tokens++ == 0)
                q->first = now;
            q->last = now;
            if (now >= r->win_lo && now < r->win_hi)
                r->tokens_in_win++;
        }
    }
}

static void conn_fail(run_t *r, cconn_t *cc)
{
    if (cc->req >= 0)
        req_end(r, cc, 0);
    conn_free(r, cc);
}

static void conn_read(run_t *r, cconn_t *cc)
{
    for (;;) {
        ssize_t k = recv(cc->fd, cc->in + cc->in_len, sizeof cc->in - cc->in_len, 0);
        int64_t now = mono_us() - r->t0;
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
            if (cc->req >= 0 && cc->head_done && cc->body.mode == HTTP_BODY_CLOSE) {
                req_end(r, cc, r->rq[cc->req].status);
            } else if (cc->req >= 0) {
                conn_fail(r, cc);
                return;
            }
            conn_free(r, cc);
            return;
        }
        if (k < 0)
            return;
        if (cc->req < 0) { /* bytes on an idle connection: drop it */
            conn_free(r, cc);
            return;
        }
        cc->in_len += (size_t)k;
        size_t off = 0;
        if (!cc->head_done) {
            http_head_t h;
            int rc = http_parse_response(cc->in, cc->in_len, &h);
            if (rc < 0 || (rc == 0 && cc->in_len == sizeof cc->in)) {
                conn_fail(r, cc);
                return;
            }
            if (rc == 0)
                continue;
            if (h.status >= 100 && h.status < 200) {
                memmove(cc->in, cc->in + rc, cc->in_len - (size_t)rc);
                cc->in_len -= (size_t)rc;
                continue;
            }
            cc->head_done = true;
            r->rq[cc->req].status = h.status;
            cc->keep = !h.conn_close && h.minor >= 1;
            http_body_response(&cc->body, &h, false);
            off = (size_t)rc;
        }
        ssize_t used = http_body_feed(&cc->body, cc->in + off, cc->in_len - off);
        if (used < 0) {
            conn_fail(r, cc);
            return;
        }
        body_bytes(r, cc, cc->in + off, (size_t)used, now);
        cc->in_len = 0;
        if (cc->body.done) {
            req_end(r, cc, r->rq[cc->req].status);
            if (cc->keep) {
                cc->next_idle = r->idle;
                r->idle = cc;
            } else {
                conn_free(r, cc);
            }
            return;
        }
    }
}

/* -1: the connection failed and is gone. */
static int conn_write(run_t *r, cconn_t *cc)
{
    while (cc->out && cc->out_sent < cc->out_len) {
        ssize_t k = send(cc->fd, cc->out + cc->out_sent, cc->out_len - cc->out_sent, MSG_NOSIGNAL);
        if (k > 0) {
            cc->out_sent += (size_t)k;
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        conn_fail(r, cc);
        return -1;
    }
    if (cc->out) {
        free(cc->out);
        cc->out = NULL;
    }
    return 0;
}

static void issue(run_t *r, wk_t *w, int i)
{
    cconn_t *cc = r->idle;
    size_t len;
    char *msg = wk_request(w, r->c, &len, &r->rq[i].want);

    r->rq[i].start = mono_us() - r->t0;
    if (!msg) {
        r->rq[i].finished = true;
        r->pending -= r->rq[i].measured;
        return;
    }
    if (cc) {
        r->idle = cc->next_idle;
    } else {
        if (r->open == r->capall) {
            int ncap = r->capall ? r->capall * 2 : 256;
            cconn_t **v = realloc(r->all, (size_t)ncap * sizeof *v);
            if (v) {
                r->all = v;
                r->capall = ncap;
            }
        }
        cc = r->open < r->capall ? calloc(1, sizeof *cc) : NULL;
        if (!cc || (cc->fd = dial(r->port, true)) < 0) {
            free(cc);
            free(msg);
            r->rq[i].finished = true;
            r->pending -= r->rq[i].measured;
            return;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                 .data.ptr = cc};
        epoll_ctl(r->ep, EPOLL_CTL_ADD, cc->fd, &ev);
        cc->slot = r->open;
        r->all[r->open++] = cc;
    }
    cc->req = i;
    cc->head_done = false;
    cc->in_len = 0;
    cc->match = 0;
    cc->out = msg;
    cc->out_len = len;
    cc->out_sent = 0;
    conn_write(r, cc);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, int n, double p)
{
    if (n <= 0)
        return 0;
    int k = (int)ceil(p * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* Drive one balancer at one rate. */
static int drive(const bi_conf_t *c, int port, double rate, const int *eports, pid_t proxy,
                 bi_res_t *res)
{
    run_t r = {.c = c, .port = port};
    wk_t w = {0};
    uint64_t rng = c->seed ^ (uint64_t)(rate * 1000);
    /* the warm-up: every tenant once (at the offered rate), then --warmup more */
    double prime = c->wl == WL_SHARED  ? c->tenants / rate
                   : c->wl == WL_MIXED ? 2 * c->tenants / rate
                                       : 0;
    double warm = prime + c->warmup, t = 0, total = warm + c->duration, h0 = 0, q0 = 0, h1, q1;
    struct epoll_event evs[256];
    long long cpu0 = -1, cpu1;
    int cap = (int)(rate * total * 1.5) + 64, next = 0;

    memset(res, 0, sizeof *res);
    if (wk_init(&w, c) < 0)
        return -1;
    r.rq = calloc((size_t)cap, sizeof *r.rq);
    r.ep = epoll_create1(EPOLL_CLOEXEC);
    if (!r.rq || r.ep < 0) {
        wk_free(&w);
        free(r.rq);
        return -1;
    }
    while (r.nrq < cap) { /* Poisson arrivals */
        t += -log(1 - rng_unit(&rng)) / rate;
        if (t >= total)
            break;
        r.rq[r.nrq].sched = (int64_t)(t * 1e6);
        r.rq[r.nrq].measured = t >= warm;
        r.pending += r.rq[r.nrq].measured;
        r.nrq++;
    }
    w.rng ^= rng;
    r.win_lo = (int64_t)(warm * 1e6);
    r.win_hi = (int64_t)(total * 1e6);
    bool in_win = false;
    r.t0 = mono_us();
    int64_t end = (int64_t)((total + c->drain) * 1e6);
    for (;;) {
        int64_t now = mono_us() - r.t0;
        if (!in_win && now >= r.win_lo) {
            in_win = true;
            cache_counts(eports, c->replicas, &h0, &q0);
            cpu0 = bench_cpu_ticks(proxy, false);
        }
        while (next < r.nrq && r.rq[next].sched <= now)
            issue(&r, &w, next++);
        if (next >= r.nrq && r.pending <= 0 && now >= r.win_hi)
            break;
        if (now >= end)
            break;
        int64_t wake = next < r.nrq ? r.rq[next].sched : end;
        if (!in_win && r.win_lo < wake)
            wake = r.win_lo;
        int to = wake > now ? (int)((wake - now + 999) / 1000) : 0;
        if (to > 50)
            to = 50;
        int n = epoll_wait(r.ep, evs, 256, to);
        for (int i = 0; i < n; i++) {
            cconn_t *cc = evs[i].data.ptr;
            uint32_t ev = evs[i].events;
            if ((ev & EPOLLOUT) && conn_write(&r, cc) < 0)
                continue; /* gone */
            if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                conn_read(&r, cc);
        }
    }
    cpu1 = bench_cpu_ticks(proxy, false);
    if (getenv("ARB_BENCH_DEBUG")) { /* what the balancer and the replicas said at the end */
        char path[PATH_MAX], line[256];
        int ap = -1;
        snprintf(path, sizeof path, "%s/lb.ready", tmpdir);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "admin ", 6) && strrchr(line, ':'))
                ap = atoi(strrchr(line, ':') + 1);
        if (f)
            fclose(f);
        char *b = ap > 0 ? http_get(ap, "/backends") : NULL;
        fprintf(stderr, "%s\n", b ? b : "(no /backends)");
        free(b);
        for (int i = 0; i < c->replicas; i++) {
            char *m = http_get(eports[i], "/metrics");
            fprintf(stderr, "replica %d: running %.0f waiting %.0f kv %.3f hits %.0f/%.0f\n", i,
                    m ? metric_sum(m, "vllm:num_requests_running") : -1,
                    m ? metric_sum(m, "vllm:num_requests_waiting") : -1,
                    m ? metric_sum(m, "vllm:kv_cache_usage_perc") : -1,
                    m ? metric_sum(m, "vllm:prefix_cache_hits_total") : -1,
                    m ? metric_sum(m, "vllm:prefix_cache_queries_total") : -1);
            free(m);
        }
    }
    cache_counts(eports, c->replicas, &h1, &q1);
    res->hit_rate = q1 > q0 ? (h1 - h0) / (q1 - q0) : 0;
    res->proxy_cpu_s = cpu0 >= 0 && cpu1 >= cpu0 ? (double)(cpu1 - cpu0) / sysconf(_SC_CLK_TCK) : 0;

    double *ttft = calloc((size_t)r.nrq + 1, sizeof *ttft),
           *tpot = calloc((size_t)r.nrq + 1, sizeof *tpot);
    int nt = 0, np = 0;
    int64_t stop_at = mono_us() - r.t0;
    for (int i = 0; ttft && tpot && i < r.nrq; i++) {
        rq_t *q = &r.rq[i];
        if (!q->measured)
            continue;
        res->measured++;
        res->offered_tok_s += q->want;
        res->measured_tok_s += q->tokens;
        if (!q->finished) {
            res->unfinished++;
            if (q->tokens == 0)
                ttft[nt++] = (double)(stop_at - q->start) / 1e3;
            else
                ttft[nt++] = (double)(q->first - q->start) / 1e3;
            continue;
        }
        if (q->status == 429) {
            res->rejected++;
            continue;
        }
        if (q->status < 200 || q->status >= 300 || q->tokens == 0) {
            res->errors++;
            continue;
        }
        res->ok++;
        ttft[nt++] = (double)(q->first - q->start) / 1e3;
        if (q->tokens >= 2)
            tpot[np++] = (double)(q->last - q->first) / 1e3 / (q->tokens - 1);
    }
    if (ttft && tpot) {
        qsort(ttft, (size_t)nt, sizeof *ttft, cmp_d);
        qsort(tpot, (size_t)np, sizeof *tpot, cmp_d);
        res->ttft_p50 = pct(ttft, nt, 0.5);
        res->ttft_p90 = pct(ttft, nt, 0.9);
        res->ttft_p99 = pct(ttft, nt, 0.99);
        res->tpot_p50 = pct(tpot, np, 0.5);
    }
    res->out_tok_s = (double)r.tokens_in_win / c->duration;
    res->offered_tok_s /= c->duration;
    res->measured_tok_s /= c->duration;
    free(ttft);
    free(tpot);
    while (r.open > 0)
        conn_free(&r, r.all[r.open - 1]);
    free(r.all);
    close(r.ep);
    free(r.rq);
    wk_free(&w);
    return 0;
}

/* ---- one run: replicas, a balancer, the load ------------------------------------- */

static char self_exe[PATH_MAX];

static int split_args(char *s, char **v, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
        v[n++] = t;
    return n;
}

static int run_one(const bi_conf_t *c, const char *pol, double rate, bi_res_t *res)
{
    pid_t emu[MAXR] = {0}, px = 0;
    int eport[MAXR], port = -1, rc = -1;
    char name[64], speed[32], extra[512];
    bool haproxy = strncmp(pol, "haproxy-", 8) == 0;

    snprintf(speed, sizeof speed, "%g", c->speedup);
    for (int i = 0; i < c->replicas; i++) {
        char pf[PATH_MAX], id[32], *argv[64];
        int n = 0;
        snprintf(pf, sizeof pf, "%s/emu%d.port", tmpdir, i);
        unlink(pf);
        snprintf(id, sizeof id, "r%d", i);
        argv[n++] = (char *)c->emulator;
        argv[n++] = "--port-file";
        argv[n++] = pf;
        argv[n++] = "--id";
        argv[n++] = id;
        argv[n++] = "--speedup";
        argv[n++] = speed;
        snprintf(extra, sizeof extra, "%s", c->emu_args ? c->emu_args : "");
        n += split_args(extra, argv + n, 50);
        argv[n] = NULL;
        snprintf(name, sizeof name, "emu%d.log", i);
        emu[i] = bench_spawn(c->emulator, argv, tmpdir, name, name, false);
    }
    for (int i = 0; i < c->replicas; i++) {
        snprintf(name, sizeof name, "emu%d.port", i);
        if ((eport[i] = wait_port(name, false)) < 0) {
            fprintf(stderr, "bench infer: emulator %d did not start (%s); see %s/emu%d.log\n", i,
                    c->emulator, tmpdir, i);
            goto out;
        }
    }
    if (haproxy) {
        char cfg[PATH_MAX];
        snprintf(cfg, sizeof cfg, "%s/haproxy.cfg", tmpdir);
        FILE *f = fopen(cfg, "w");
        port = free_port();
        if (!f || port < 0)
            goto out;
        fprintf(f,
                "global\n    maxconn 4000\n    nbthread 1\n"
                "defaults\n    mode http\n    timeout connect 5s\n    timeout client 600s\n"
                "    timeout server 600s\n    http-reuse safe\n"
                "frontend fe\n    bind 127.0.0.1:%d\n    default_backend be\n"
                "backend be\n    balance %s\n",
                port, pol + 8);
        for (int i = 0; i < c->replicas; i++)
            fprintf(f, "    server r%d 127.0.0.1:%d\n", i, eport[i]);
        fclose(f);
        char *argv[] = {(char *)c->haproxy, "-db", "-f", cfg, NULL};
        px = bench_spawn(c->haproxy, argv, tmpdir, "haproxy.log", "haproxy.log", false);
        for (int i = 0; i < 250; i++) {
            int fd = dial(port, false);
            if (fd >= 0) {
                close(fd);
                break;
            }
            if (i == 249) {
                fprintf(stderr, "bench infer: haproxy did not start; see %s/haproxy.log\n", tmpdir);
                goto out;
            }
            bench_sleep_ms(20);
        }
    } else {
        char ready[PATH_MAX], *argv[16 + 2 * MAXR], bk[MAXR][32];
        int n = 0;
        snprintf(ready, sizeof ready, "%s/lb.ready", tmpdir);
        unlink(ready);
        argv[n++] = self_exe;
        argv[n++] = "lb";
        argv[n++] = "--listen";
        argv[n++] = "127.0.0.1:0";
        argv[n++] = "--ready-file";
        argv[n++] = ready;
        argv[n++] = "--policy";
        argv[n++] = (char *)pol;
        argv[n++] = "--server-timeout";
        argv[n++] = "600000";
        argv[n++] = "--max-conns";
        argv[n++] = "100000";
        argv[n++] = "--admin";
        argv[n++] = "127.0.0.1:0";
        if (strcmp(pol, "hash") == 0) {
            argv[n++] = "--hash-header";
            argv[n++] = "X-Tenant";
        }
        for (int i = 0; i < c->replicas; i++) {
            snprintf(bk[i], sizeof bk[i], "127.0.0.1:%d", eport[i]);
            argv[n++] = "--backend";
            argv[n++] = bk[i];
        }
        argv[n] = NULL;
        px = bench_spawn(self_exe, argv, tmpdir, "balancer.log", "balancer.log", false);
        if ((port = wait_port("lb.ready", true)) < 0) {
            fprintf(stderr, "bench infer: arbiter lb did not start; see %s/balancer.log\n", tmpdir);
            goto out;
        }
    }
    bench_sleep_ms(300); /* the first scrapes */
    rc = drive(c, port, rate, eport, px, res);
out:
    bench_stop(px, 1000);
    for (int i = 0; i < c->replicas; i++)
        bench_stop(emu[i], 1000);
    return rc;
}

/* ---- the verb ------------------------------------------------------------------ */

static const char *WL_NAMES[] = {"shared-prefix", "no-prefix", "mixed"};
static const char *DEFAULT_POLS[] = {"haproxy-roundrobin",
                                     "haproxy-leastconn",
                                     "round-robin",
                                     "weighted",
                                     "least-conn",
                                     "p2c",
                                     "feedback",
                                     "hash",
                                     "prefix",
                                     "kv",
                                     "inference"};

/* The flags: most straight into the run's conf; the workload, the output,
 * the seed and the two lists beside it, checked and converted after. */
typedef struct bi_opts {
    bi_conf_t c;
    int wl, json;
    const char *rates, *policies;
    long long seed;
} bi_opts_t;

static const fl_flag_t bi_flags[] = {
    FL_OPT(bi_opts_t, wl, "--workload", NULL, FL_CHOICE, NULL, "the requests' shape",
           .def = "shared-prefix", .choices = "shared-prefix|no-prefix|mixed"),
    FL_OPT(bi_opts_t, c.replicas, "--replicas", NULL, FL_I32, "N", "emulated replicas", .def = "8",
           .min = 1, .max = MAXR),
    FL_OPT(bi_opts_t, rates, "--rates", NULL, FL_STR, "R,R,R",
           "requests/s to offer, one run each (at most 16; default by workload: 20,30,40, "
           "12,24,36 or 16,24,32)"),
    FL_OPT(bi_opts_t, c.warmup, "--warmup", NULL, FL_NUM, "S", "seconds before the window",
           .def = "2", .min = 0, .max = 3600),
    FL_OPT(bi_opts_t, c.duration, "--duration", NULL, FL_NUM, "S", "the measured window, seconds",
           .def = "6", .min = 0, .max = 3600),
    FL_OPT(bi_opts_t, c.drain, "--drain", NULL, FL_NUM, "S", "seconds after it to finish",
           .def = "3", .min = 0, .max = 3600),
    FL_OPT(bi_opts_t, c.speedup, "--speedup", NULL, FL_NUM, "X", "the replicas' speed-up of time",
           .def = "4", .min = 0, .max = 100),
    FL_OPT(bi_opts_t, c.tenants, "--tenants", NULL, FL_I32, "N", "tenants (shared prefixes)",
           .def = "64", .min = 1, .max = 100000),
    FL_OPT(bi_opts_t, c.context, "--context", NULL, FL_I32, "TOKENS", "a tenant's shared context",
           .def = "6000", .min = 1, .max = 200000),
    FL_OPT(bi_opts_t, c.question, "--question", NULL, FL_I32, "TOKENS", "each request's own part",
           .def = "200", .min = 1, .max = 200000),
    FL_OPT(bi_opts_t, c.output, "--output", NULL, FL_I32, "TOKENS", "tokens each request generates",
           .def = "48", .min = 1, .max = 100000),
    FL_OPT(bi_opts_t, policies, "--policies", NULL, FL_STR, "P,P,...",
           "the policies to compare (default: the haproxy pair and every arbiter lb policy)"),
    FL_OPT(bi_opts_t, c.emulator, "--emulator", NULL, FL_STR, "PATH",
           "the replica emulator (default: tests/arb_llmemu beside this binary)"),
    FL_OPT(bi_opts_t, c.haproxy, "--haproxy", NULL, FL_STR, "PATH", "the HAProxy binary",
           .def = "haproxy"),
    FL_OPT(bi_opts_t, c.emu_args, "--emulator-args", NULL, FL_STR, "\"...\"",
           "more arguments for each replica"),
    FL_OPT(bi_opts_t, seed, "--seed", NULL, FL_INT, "N", "the workload's seed", .def = "42"),
    FL_OPT(bi_opts_t, json, NULL, "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t bi_verb = {
    .name = "bench infer",
    .summary = "LLM routing: every lb policy against HAProxy on emulated replicas (TTFT, TPOT, "
               "cache hits)",
    .flags = bi_flags,
    .more = "policies: haproxy-roundrobin, haproxy-leastconn and every arbiter lb policy"};

static bool parse_rates(bi_conf_t *c, const char *s)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", s);
    c->nrates = 0;
    for (char *t = strtok_r(buf, ",", &save); t && c->nrates < 16; t = strtok_r(NULL, ",", &save)) {
        char *e;
        double v = strtod(t, &e);
        if (e == t || *e || v <= 0 || v > 10000)
            return false;
        c->rates[c->nrates++] = v;
    }
    return c->nrates > 0;
}

static void print_line(const bi_conf_t *c, const char *pol, double rate, const bi_res_t *r)
{
    bool hp = strncmp(pol, "haproxy-", 8) == 0;
    if (c->json) {
        printf("{\"bench\":\"infer\",\"workload\":\"%s\",\"policy\":\"%s\",\"proxy\":\"%s\","
               "\"rate\":%g,\"ttft_p50_ms\":%.1f,\"ttft_p90_ms\":%.1f,\"ttft_p99_ms\":%.1f,"
               "\"tpot_p50_ms\":%.2f,\"output_tok_s\":%.1f,\"requests_ok\":%ld,\"rejected\":%ld,"
               "\"errors\":%ld,\"unfinished\":%ld,\"measured\":%ld,\"cache_hit_rate\":%.3f,"
               "\"proxy_cpu_s\":%.2f,\"offered_tok_s\":%.1f,\"measured_tok_s\":%.1f,"
               "\"replicas\":%d,\"speedup\":%g}\n",
               WL_NAMES[c->wl], pol, hp ? "haproxy" : "arbiter", rate, r->ttft_p50, r->ttft_p90,
               r->ttft_p99, r->tpot_p50, r->out_tok_s, r->ok, r->rejected, r->errors, r->unfinished,
               r->measured, r->hit_rate, r->proxy_cpu_s, r->offered_tok_s, r->measured_tok_s,
               c->replicas, c->speedup);
    } else {
        printf("%-19s %6g %9.0f %9.0f %9.0f %8.1f %9.0f %6ld %5ld %5ld %5ld %6.1f%%\n", pol, rate,
               r->ttft_p50, r->ttft_p90, r->ttft_p99, r->tpot_p50, r->out_tok_s, r->ok, r->rejected,
               r->errors, r->unfinished, 100 * r->hit_rate);
    }
    fflush(stdout);
}

int cli_bench_infer(int argc, char **argv)
{
    static bi_res_t res[16][MAXPOL];
    char emu[PATH_MAX + 32];
    double la[3] = {0};

    bi_opts_t o = {0};
    fl_args_t fa;
    int frc;
    if (!fl_run(&bi_verb, argc, argv, &o, &fa, &frc))
        return frc;
    bi_conf_t c = o.c;
    c.wl = (wl_t)o.wl;
    c.seed = (uint64_t)o.seed;
    c.json = o.json == 1;
    if (c.warmup >= 3600 || c.duration <= 0 || c.duration >= 3600 || c.drain >= 3600 ||
        c.speedup <= 0) {
        fprintf(stderr, "arbiter bench infer: --warmup and --drain 0..3599 s, --duration more than "
                        "0 and under 3600 s, --speedup more than 0 (at most 100)\n");
        return 2;
    }
    if (o.rates && !parse_rates(&c, o.rates)) {
        fprintf(stderr,
                "arbiter bench infer: --rates '%s': give requests/s above 0 (at most "
                "10000), comma-separated, e.g. 20,30,40\n",
                o.rates);
        return 2;
    }
    if (o.policies) {
        static char buf[1024];
        char *save = NULL;
        snprintf(buf, sizeof buf, "%s", o.policies);
        c.npols = 0;
        for (char *t = strtok_r(buf, ",", &save); t && c.npols < MAXPOL;
             t = strtok_r(NULL, ",", &save))
            c.pols[c.npols++] = t;
        if (c.npols == 0) {
            fprintf(stderr, "arbiter bench infer: --policies '%s': name at least one policy\n",
                    o.policies);
            return 2;
        }
    }
    if (c.nrates == 0) {
        static const double def[3][3] = {{20, 30, 40}, {12, 24, 36}, {16, 24, 32}};
        memcpy(c.rates, def[c.wl], sizeof def[0]);
        c.nrates = 3;
    }
    if (c.npols == 0) {
        c.npols = (int)(sizeof DEFAULT_POLS / sizeof DEFAULT_POLS[0]);
        memcpy(c.pols, DEFAULT_POLS, sizeof DEFAULT_POLS);
    }
    if (bench_self_exe("infer", self_exe, sizeof self_exe) < 0)
        return 1;
    if (!c.emulator) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", self_exe);
        char *sl = strrchr(dir, '/');
        if (sl)
            *sl = '\0';
        snprintf(emu, sizeof emu, "%s/tests/arb_llmemu", dir);
        c.emulator = emu;
    }
    if (access(c.emulator, X_OK) != 0) {
        fprintf(stderr,
                "arbiter bench infer: no emulator at %s (make build builds tests/arb_llmemu; "
                "or give --emulator PATH)\n",
                c.emulator);
        return 1;
    }
    bool have_haproxy = false;
    for (int i = 0; i < c.npols; i++) {
        if (strncmp(c.pols[i], "haproxy-", 8) == 0) {
            if (strcmp(c.pols[i] + 8, "roundrobin") != 0 &&
                strcmp(c.pols[i] + 8, "leastconn") != 0) {
                fprintf(stderr,
                        "arbiter bench infer: '%s': use haproxy-roundrobin or haproxy-leastconn\n",
                        c.pols[i]);
                return 2;
            }
            have_haproxy = true;
        } else if (!lb_find(c.pols[i])) {
            fprintf(stderr, "arbiter bench infer: '%s': not a policy of arbiter lb\n", c.pols[i]);
            return 2;
        }
    }
    if (have_haproxy) {
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", c.haproxy);
        if (system(cmd) != 0) {
            fprintf(stderr,
                    "arbiter bench infer: %s not found; install Debian's haproxy (make "
                    "bench-infer does), or leave the haproxy rows out with --policies\n",
                    c.haproxy);
            return 1;
        }
    }
    if (bench_tmpdir("infer", tmpdir, sizeof tmpdir) < 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    getloadavg(la, 3);
    if (c.json)
        printf("{\"bench\":\"infer\",\"workload\":\"%s\",\"cpus\":%ld,\"loadavg\":[%.2f,%.2f,%.2f],"
               "\"replicas\":%d,\"tenants\":%d,\"context_tokens\":%d,\"question_tokens\":%d,"
               "\"output_tokens\":%d,\"warmup_s\":%g,\"duration_s\":%g,\"speedup\":%g}\n",
               WL_NAMES[c.wl], sysconf(_SC_NPROCESSORS_ONLN), la[0], la[1], la[2], c.replicas,
               c.tenants, c.context, c.question, c.output, c.warmup, c.duration, c.speedup);
    else
        printf("# bench infer, %s: %d replicas, %ld cpus, load %.2f; times in ms (speedup %g)\n"
               "%-19s %6s %9s %9s %9s %8s %9s %6s %5s %5s %5s %7s\n",
               WL_NAMES[c.wl], c.replicas, sysconf(_SC_NPROCESSORS_ONLN), la[0], c.speedup,
               "policy", "rate", "ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "out_tok/s", "ok",
               "429", "err", "unfin", "cache");
    int failed = 0;
    for (int ri = 0; ri < c.nrates; ri++)
        for (int pi = 0; pi < c.npols; pi++) {
            if (run_one(&c, c.pols[pi], c.rates[ri], &res[ri][pi]) < 0) {
                failed++;
                continue;
            }
            print_line(&c, c.pols[pi], c.rates[ri], &res[ri][pi]);
        }
    /* the issue's comparisons, rate by rate */
    for (int ri = 0; ri < c.nrates; ri++) {
        int inf = -1, rr = -1, hlc = -1, lc = -1;
        for (int pi = 0; pi < c.npols; pi++) {
            if (!strcmp(c.pols[pi], "inference"))
                inf = pi;
            else if (!strcmp(c.pols[pi], "round-robin"))
                rr = pi;
            else if (!strcmp(c.pols[pi], "haproxy-leastconn"))
                hlc = pi;
            else if (!strcmp(c.pols[pi], "least-conn"))
                lc = pi;
        }
        if (inf < 0)
            continue;
        const bi_res_t *I = &res[ri][inf];
#define RATIO(a, b) ((b) > 0 ? (a) / (b) : 0)
        getloadavg(la, 3);
        if (c.json)
            printf("{\"bench\":\"infer\",\"summary\":true,\"workload\":\"%s\",\"rate\":%g,"
                   "\"ttft_p90_x_vs_round_robin\":%.2f,\"ttft_p90_x_vs_haproxy_leastconn\":%.2f,"
                   "\"output_x_vs_round_robin\":%.2f,\"output_x_vs_haproxy_leastconn\":%.2f,"
                   "\"output_vs_least_conn\":%.3f,\"ttft_p90_vs_least_conn\":%.3f,"
                   "\"loadavg\":%.2f}\n",
                   WL_NAMES[c.wl], c.rates[ri],
                   rr >= 0 ? RATIO(res[ri][rr].ttft_p90, I->ttft_p90) : 0,
                   hlc >= 0 ? RATIO(res[ri][hlc].ttft_p90, I->ttft_p90) : 0,
                   rr >= 0 ? RATIO(I->out_tok_s, res[ri][rr].out_tok_s) : 0,
                   hlc >= 0 ? RATIO(I->out_tok_s, res[ri][hlc].out_tok_s) : 0,
                   lc >= 0 ? RATIO(I->out_tok_s, res[ri][lc].out_tok_s) : 0,
                   lc >= 0 ? RATIO(I->ttft_p90, res[ri][lc].ttft_p90) : 0, la[0]);
        else
            printf(
                "# rate %g: inference ttft_p90 %.1fx better than round-robin, %.1fx than haproxy "
                "leastconn; output %.2fx and %.2fx; vs least-conn output %.3f (load %.2f)\n",
                c.rates[ri], rr >= 0 ? RATIO(res[ri][rr].ttft_p90, I->ttft_p90) : 0,
                hlc >= 0 ? RATIO(res[ri][hlc].ttft_p90, I->ttft_p90) : 0,
                rr >= 0 ? RATIO(I->out_tok_s, res[ri][rr].out_tok_s) : 0,
                hlc >= 0 ? RATIO(I->out_tok_s, res[ri][hlc].out_tok_s) : 0,
                lc >= 0 ? RATIO(I->out_tok_s, res[ri][lc].out_tok_s) : 0, la[0]);
#undef RATIO
    }
    if (failed == 0)
        bench_rmtree(tmpdir);
    else
        fprintf(stderr, "bench infer: %d run(s) failed; logs kept in %s\n", failed, tmpdir);
    return failed ? 1 : 0;
}
