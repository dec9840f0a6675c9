/*
 * proxy.c: the client session machine of `arbiter lb`. The event loops are
 * in loop.c; backends, pools and health checks in backend.c; /metrics and
 * the access log in admin.c. See proxy.h for what the proxy does.
 *
 * Sockets are registered once, edge-triggered, for in, out and peer-close;
 * each object keeps its own "readable"/"writable" flags, set by events and
 * cleared only by EAGAIN (or a short read when no close is pending). So a
 * session can stop reading when its buffer is full and resume later without
 * touching epoll: one epoll_ctl per socket for its whole life.
 *
 * A client session, one request at a time (pipelined requests wait in the
 * input buffer for their turn; with --cert-file the TLS handshake runs in
 * S_HEAD before the first byte of a head, and the client is read and
 * written through px_crecv/px_csend, ltls.c; to a TLS backend the
 * handshake runs in S_CONNECT, within the connect timeout, and the backend
 * is read and written through px_brecv/px_bsend, btls.c):
 *
 *        +-----------+  head parsed, picked, pooled conn   +-------+
 *   ---->|  S_HEAD   |------------------------------------>| S_FWD |--+
 *        +-----------+                                     +-------+  |
 *          |  ^   | new conn in progress    connect ok ^    |   ^     | response done,
 *          |  |   v                                    |    |   |     | keep-alive:
 *          |  | +-----------+------------------------+    |   |     | back to S_HEAD
 *          |  | | S_CONNECT |  connect failed: retry      |   |     |
 *          |  | +-----------+  another backend (sess_   |   +-----+ pump: stream both ways
 *          |  |       |        assign) or reply 502/503  |
 *          |  +-------+--------------------+-------------+ backend died before answering:
 *          |                               |               retry (idempotent) or 502/504
 *          v                               v
 *   bad request, no backend:         +-----------+   written: close (or S_HEAD when kept)
 *   a reply of our own ------------->|  S_REPLY  |
 *                                    +-----------+
 * Invariants:
 *  1. in[0..req_end) is the current request as known so far (head and the
 *     body bytes fed to its framing); req_sent <= req_end bytes of it went to
 *     the backend; bytes after req_end are the next request.
 *  2. replayable: in still starts at the request's first byte, so the
 *     request can be sent again to another backend (retries).
 *  3. out[out_sent..resp_off) is parsed response, ready for the client;
 *     out[resp_off..out_len) is read but not yet parsed.
 *  4. A session holds at most one backend connection (bc); the backend's
 *     inflight count includes the session exactly while bc is attached.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "lb/proxy_int.h"
#include "util/log.h"

static void sess_assign(px_t *px, px_sess_t *s);
static void sess_route(px_t *px, px_sess_t *s);

bool px_own_errno(int err)
{
    err = err < 0 ? -err : err;
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM ||
           err == EADDRNOTAVAIL;
}

void px_own_failure(px_t *px, int err, const char *doing)
{
    px->own_failures++;
    px->own_unsaid++;
    if (px->own_said_ms && px->now_ms - px->own_said_ms < 10000)
        return;
    arb_log(ARB_LOG_WARN, NULL,
            "out of resources %s: %s (%llu time%s since the last word); no backend is blamed for "
            "it: raise the open-file limit (ulimit -n, LimitNOFILE=) or lower --max-conns",
            doing, strerror(err < 0 ? -err : err), (unsigned long long)px->own_unsaid,
            px->own_unsaid == 1 ? "" : "s");
    px->own_said_ms = px->now_ms;
    px->own_unsaid = 0;
}

/* Has the client of a session waiting for its response gone? Its socket
 * says end of stream (or an error), with nothing left to read: a request
 * sent and then the connection closed. Pipelined bytes waiting mean no. */
static bool client_gone(px_sess_t *s)
{
    char c;
    if (!s->hup)
        return false;
    ssize_t n = recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* ---- clock, timers, buffers ------------------------------------------------- */

void px_timer_del(px_tnode_t *n)
{
    px_tlist_t *l = n->list;
    if (!l)
        return;
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
    n->list = NULL;
}

void px_timer_set(px_t *px, px_tlist_t *l, px_tnode_t *n)
{
    px_timer_del(n);
    n->at = px->now_ms + l->len_ms;
    n->list = l;
    n->prev = l->tail;
    n->next = NULL;
    if (l->tail)
        l->tail->next = n;
    else
        l->head = n;
    l->tail = n;
}

char *px_buf_get(px_t *px)
{
    if (px->nfree > 0)
        return px->freebufs[--px->nfree];
    return malloc(PX_BUF);
}

void px_buf_put(px_t *px, char *b)
{
    if (!b)
        return;
    if (px->nfree == px->capfree) {
        int cap = px->capfree ? px->capfree * 2 : 64;
        char **nb = cap <= 4096 ? realloc(px->freebufs, (size_t)cap * sizeof *nb) : NULL;
        if (!nb) {
            free(b);
            return;
        }
        px->freebufs = nb;
        px->capfree = cap;
    }
    px->freebufs[px->nfree++] = b;
}

static int ep_add(px_t *px, int fd, void *obj)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = obj};
    return epoll_ctl(px->ep, EPOLL_CTL_ADD, fd, &ev);
}

/* ---- sessions ------------------------------------------------------------- */

/* Give back the input buffer: a pool buffer, or one grown for a body. */
static void in_free(px_t *px, px_sess_t *s)
{
    if (s->in_malloc)
        free(s->in);
    else
        px_buf_put(px, s->in);
    s->in = NULL;
    s->in_malloc = false;
}

void px_sess_close(px_t *px, px_sess_t *s)
{
    if (s->state == S_QUEUED)
        px_admit_remove(px, s);
    px_timer_del(&s->t);
    if (s->bc) {
        px_bconn_close(px, s->bc);
        s->bc = NULL;
    }
    px_tls_end(s);
    close(s->fd);
    in_free(px, s);
    free(s->inf.blocks);
    s->inf.blocks = NULL;
    if (s->out_malloc)
        free(s->out);
    else
        px_buf_put(px, s->out);
    s->in = s->out = NULL;
    s->kind = PX_DEAD;
    s->next = px->dead_s;
    px->dead_s = s;
    px->nsess--;
    if (!s->admin)
        px->nclients--;
    if (px->accept_paused && !px->stopping) {
        px->accept_paused = false;
        px_accept(px);
    }
}

void px_sess_new(px_t *px, int fd, bool admin, const struct sockaddr_storage *peer)
{
    px_sess_t *s = calloc(1, sizeof *s);

    if (s)
        s->in = px_buf_get(px);
    if (!s || !s->in || ep_add(px, fd, s) < 0) {
        if (s)
            px_buf_put(px, s->in);
        free(s);
        close(fd);
        return;
    }
    s->kind = PX_CLIENT;
    s->fd = fd;
    s->in_cap = PX_BUF;
    s->admin = admin;
    s->t.owner = s;
    s->peer = *peer;
    if (px_tls_session(px, s) < 0) { /* --cert-file: a TLS server session (ltls.c) */
        epoll_ctl(px->ep, EPOLL_CTL_DEL, fd, NULL);
        px_buf_put(px, s->in);
        free(s);
        close(fd);
        return;
    }
    px->nsess++;
    if (!admin)
        px->nclients++;
    px_timer_set(px, &px->t_client, &s->t);
}

/* A reply of our own; the connection closes after it. extra: header lines
 * ("Retry-After: 2\r\n") or "". */
void px_sess_reply(px_t *px, px_sess_t *s, int code, const char *reason, const char *ctype,
                   const char *extra, const char *body)
{
    if (s->bc) {
        px_bconn_close(px, s->bc);
        s->bc = NULL;
    }
    if (!s->out) {
        s->out = px_buf_get(px);
        s->out_cap = PX_BUF;
        if (!s->out) {
            px_sess_close(px, s);
            return;
        }
    }
    if (s->state == S_QUEUED)
        px_admit_remove(px, s);
    int n = snprintf(s->out, PX_BUF,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                     "Connection: close\r\n\r\n%s\n",
                     code, reason, ctype, strlen(body) + 1, extra, body);
    if (n < 0 || n >= PX_BUF)
        n = snprintf(s->out, PX_BUF, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", code, reason);
    s->out_len = s->resp_off = (uint32_t)n;
    s->out_sent = 0;
    s->status = code;
    s->keep = false;
    s->state = S_REPLY;
    if (!s->admin) {
        px_stats_response(&px->total, code, (double)(px->now_ns - s->t0_ns) / 1e9);
        px_log(px, s, NULL);
    }
    px_timer_set(px, &px->t_client, &s->t);
}

/* A plain-text reply of our own; for an OpenAI request, its JSON error. */
void px_sess_reply_text(px_t *px, px_sess_t *s, int code, const char *reason, const char *msg)
{
    if (s->inf.kind != OAI_NONE) {
        char body[640];
        snprintf(body, sizeof body, "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"code\":%d}}",
                 msg, code >= 500 ? "server_error" : "invalid_request_error", code);
        px_sess_reply(px, s, code, reason, "application/json", "", body);
    } else {
        px_sess_reply(px, s, code, reason, "text/plain", "", msg);
    }
}

/* May the request go to another backend? When the connection failed the
 * backend saw nothing, so any request may; once bytes were sent only an
 * idempotent one may, as the first backend may have acted on it. */
static bool can_retry(const px_t *px, const px_sess_t *s, bool connect_failed)
{
    return (connect_failed || http_idempotent(s->req.method)) && s->replayable &&
           !s->resp_started && s->ntried <= px->c->retries &&
           s->ntried < (int)(sizeof s->tried / sizeof s->tried[0]);
}

/* Forget any response bytes of a failed attempt (none reached the client). */
static void resp_reset(px_sess_t *s)
{
    s->out_len = s->out_sent = s->resp_off = 0;
    s->resp_head = false;
    s->bc_reusable = true;
    s->status = 0;
}

/* The backend failed this request before the client saw any of the
 * response, or in the middle of it. */
void px_sess_backend_failed(px_t *px, px_sess_t *s, int why)
{
    px_bconn_t *bc = s->bc;
    px_backend_t *b = bc->be;
    bool race = bc->reused && why == F_IO && !s->resp_started && s->out_len == 0;

    if (why == F_SERVER_TIMEOUT && px->svc_on)
        px_svc_done(px, s, b); /* it takes at least this long there */
    s->bc = NULL;
    px_bconn_close(px, bc); /* drops b's inflight count; b stays alive (tried[] compare only) */
    if (race && s->reuse_retries < 3 && http_idempotent(s->req.method) && s->replayable) {
        /* A pooled connection the backend had closed: not the backend's fault. */
        s->reuse_retries++;
        s->req_sent = 0;
        resp_reset(s);
        sess_assign(px, s);
        return;
    }
    bool unsent = why == F_CONNECT || why == F_CONNECT_TIMEOUT || why == F_TLS;

    if (why == F_CONNECT || why == F_CONNECT_TIMEOUT)
        b->st.connect_fail++;
    else if (why == F_TLS)
        ; /* counted and logged by btls.c (tls_fail) */
    else if (why == F_SERVER_TIMEOUT)
        b->st.timeouts++;
    else
        b->st.io_fail++;
    px_backend_failed(px, b);
    if (s->ntried < (int)(sizeof s->tried / sizeof s->tried[0]))
        s->tried[s->ntried++] = b;
    if (why != F_SERVER_TIMEOUT && why != F_BAD_RESPONSE && can_retry(px, s, unsent)) {
        s->req_sent = 0;
        resp_reset(s);
        px->retries++;
        b->st.retries++;
        sess_assign(px, s);
        return;
    }
    if (s->resp_started) {
        px_sess_close(px, s); /* half a response went out: only closing tells the client */
        return;
    }
    if (why == F_SERVER_TIMEOUT)
        px_sess_reply_text(px, s, 504, "Gateway Timeout", "backend did not answer in time");
    else if (why == F_BAD_RESPONSE)
        px_sess_reply_text(px, s, 502, "Bad Gateway", "backend sent a malformed response");
    else if (why == F_TLS)
        px_sess_reply_text(px, s, 502, "Bad Gateway", "the TLS handshake with the backend failed");
    else
        px_sess_reply_text(px, s, 502, "Bad Gateway", "backend failed before answering");
}

static void sess_attach(px_t *px, px_sess_t *s, px_bconn_t *bc)
{
    s->bc = bc;
    bc->s = s;
    s->t_att_ns = px->now_ns;
    if (px->svc_on)
        px_svc_sent(px, s, bc->be);
    px_inflight(px, bc->be, +1);
    if (s->inf.charge) {
        s->inf.charged = s->inf.charge;
        px_prefill_add(px, bc->be, s->inf.charged);
    }
    bc->be->st.requests++;
    if (bc->connected && (!bc->tls || bc->tls_up)) {
        s->state = S_FWD;
        px_timer_set(px, &px->t_server, &s->t);
    } else {
        s->state = S_CONNECT;
        px_timer_set(px, &px->t_connect, &s->t);
    }
}

/* Pick a backend and get a connection to it; on failure retry or reply.
 * -EBUSY: every replica is saturated and s is as it was (admit.c queues it). */
int px_sess_assign(px_t *px, px_sess_t *s)
{
    for (;;) {
        px_backend_t *b;
        px_bconn_t *bc;
        int err = 0, rc = px_pick(px, s, &b);

        if (rc == -EBUSY)
            return rc;
        if (rc < 0) {
            px->no_backend++;
            if (s->ntried)
                px_sess_reply_text(px, s, 502, "Bad Gateway", "every backend tried failed");
            else
                px_sess_reply_text(px, s, 503, "Service Unavailable", "no backend available");
            return 0;
        }
        bc = px_pool_take(px, b);
        if (!bc)
            bc = px_bconn_open(px, b, &err);
        if (bc) {
            sess_attach(px, s, bc);
            return 0;
        }
        if (px_own_errno(err)) { /* ours, not the backend's: no ejection, no retry */
            px_own_failure(px, err, "connecting to a backend");
            px_sess_reply_text(px, s, 503, "Service Unavailable",
                               "the balancer is out of resources (open files); retry");
            return 0;
        }
        b->st.connect_fail++;
        px_backend_failed(px, b);
        if (s->ntried < (int)(sizeof s->tried / sizeof s->tried[0]))
            s->tried[s->ntried++] = b;
        if (!can_retry(px, s, true)) {
            px_sess_reply_text(px, s, 502, "Bad Gateway", "could not connect to a backend");
            return 0;
        }
        px->retries++;
        b->st.retries++;
    }
}

void px_sess_kick(px_t *px, px_sess_t *s)
{
    if (s->kind == PX_CLIENT)
        px_sess_run(px, s);
}

/* A retry: to another backend now, or back into the queue when all are saturated. */
static void sess_assign(px_t *px, px_sess_t *s)
{
    if (px_sess_assign(px, s) == -EBUSY)
        px_admit(px, s);
}

/* ---- OpenAI requests: the body before routing ---------------------------- */

/* The tenant: the tenant header, else the API key (Authorization), else none. */
static uint64_t tenant_of(const http_head_t *h)
{
    if (h->tenant && h->tnlen)
        return lb_hash64(h->tenant, h->tnlen, 0x74656eULL);
    if (h->auth && h->alen)
        return lb_hash64(h->auth, h->alen, 0x74656eULL);
    return 0;
}

static void inf_start(px_t *px, px_sess_t *s)
{
    free(s->inf.blocks);
    memset(&s->inf, 0, sizeof s->inf);
    if (!px->c->openai || s->req.method != HTTP_POST)
        return;
    s->inf.kind = oai_route(s->req.target, s->req.tlen);
    if (s->inf.kind == OAI_NONE)
        return;
    px->ad.infer_requests[s->inf.kind]++;
    s->inf.tenant = tenant_of(&s->req);
}

/* Is the body small enough to read before routing? Grows the input buffer
 * to hold it (a length known) or by doubling (chunked), up to body_max. */
static bool body_wanted(px_t *px, px_sess_t *s)
{
    uint64_t want;

    if (s->req.chunked)
        want = s->in_cap < px->c->body_max ? (uint64_t)s->in_cap * 2 : 0;
    else
        want = s->req.clen >= 0 ? s->req.len + (uint64_t)s->req.clen : 0;
    if (want == 0 || want > (uint64_t)px->c->body_max + s->req.len)
        return s->req.chunked && s->in_len < s->in_cap; /* chunked: room left, keep reading */
    if (want <= s->in_cap)
        return true;
    char *n = malloc((size_t)want);
    if (!n)
        return false;
    memcpy(n, s->in, s->in_len);
    in_free(px, s);
    s->in = n;
    s->in_cap = (uint32_t)want;
    s->in_malloc = true;
    return true;
}

/* The body is in (or as much of it as will be read): parse, then route. */
static void inf_parse(px_t *px, px_sess_t *s)
{
    const char *body = s->in + s->req.len;
    size_t n = s->req_end - s->req.len;
    char *plain = NULL;
    oai_req_t o;
    arb_err_t err;

    if (!s->reqb.done || n > px->c->body_max) {
        px->ad.unparsed++;
        return; /* too big to read first: routed without its prompt */
    }
    if (s->req.chunked) {
        plain = malloc(n ? n : 1);
        if (!plain)
            return;
        n = http_dechunk(body, n, plain);
        body = plain;
    }
    s->inf.blocks = malloc((size_t)px->c->max_blocks * sizeof *s->inf.blocks);
    if (s->inf.blocks && oai_parse(body, n, s->inf.kind, px->c->block_bytes, s->inf.blocks,
                                   px->c->max_blocks, &o, &err) == 0) {
        s->inf.parsed = true;
        s->inf.stream = o.stream;
        s->inf.nblocks = o.nblocks;
        s->inf.model = o.model[0] ? lb_hash64(o.model, strlen(o.model), 0) : 0;
    } else if (s->inf.blocks) {
        px->ad.parse_errors++;
        px->bad_requests++;
        px_sess_reply_text(px, s, 400, "Bad Request", err.msg);
    }
    free(plain);
}

/* Route a request whose body is read as far as it will be. */
static void sess_route(px_t *px, px_sess_t *s)
{
    if (s->inf.kind != OAI_NONE) {
        inf_parse(px, s);
        if (s->kind == PX_DEAD || s->state == S_REPLY)
            return;
        px_admit(px, s);
        return;
    }
    sess_assign(px, s);
}

/* S_BODY: read the rest of an OpenAI request's body. */
static void sess_body(px_t *px, px_sess_t *s)
{
    while (!s->reqb.done) {
        if (s->in_len == s->in_cap && !(s->req.chunked && body_wanted(px, s))) {
            sess_route(px, s); /* a chunked body past body_max: route without the prompt */
            return;
        }
        if (!s->rd)
            return;
        size_t want = s->in_cap - s->in_len;
        ssize_t n = px_crecv(s, s->in + s->in_len, want);
        if (n > 0) {
            size_t old = s->in_len;
            s->in_len += (uint32_t)n;
            if (px_cdrained(s, (size_t)n, want))
                s->rd = false;
            if (s->req_end == old) {
                ssize_t k = http_body_feed(&s->reqb, s->in + old, (size_t)n);
                if (k < 0) {
                    px->bad_requests++;
                    px_sess_reply_text(px, s, 400, "Bad Request", "malformed chunked request body");
                    return;
                }
                s->req_end += (uint32_t)k;
            }
            px_timer_set(px, &px->t_client, &s->t);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            s->rd = false;
            return;
        }
        px_sess_close(px, s); /* the client left mid-body */
        return;
    }
    sess_route(px, s);
}

/* A complete request head is in in[0..head): set up and dispatch it. */
static void sess_start(px_t *px, px_sess_t *s)
{
    ssize_t k;

    s->t0_ns = px->now_ns;
    if (px->log)
        snprintf(s->what, sizeof s->what, "%.*s %.*s", (int)(s->req.mlen > 16 ? 16 : s->req.mlen),
                 s->req.mstr, (int)(s->req.tlen > 100 ? 100 : s->req.tlen), s->req.target);
    s->keep = http_keepalive(&s->req) && !px->stopping;
    s->ntried = s->reuse_retries = 0;
    s->replayable = true;
    s->resp_started = false;
    s->bc_reusable = true;
    s->req_sent = 0;
    if (!s->out) {
        s->out = px_buf_get(px);
        s->out_cap = PX_BUF;
        if (!s->out) {
            px_sess_close(px, s);
            return;
        }
    }
    resp_reset(s);
    if (s->admin) {
        size_t len;
        char *r = px_admin_reply(px, &s->req, &len);
        if (!r) {
            px_sess_close(px, s);
            return;
        }
        px_buf_put(px, s->out);
        s->out = r;
        s->out_malloc = true;
        s->out_cap = s->out_len = s->resp_off = (uint32_t)len;
        s->keep = false;
        s->state = S_REPLY;
        return;
    }
    if (s->req.method == HTTP_CONNECT) {
        px_sess_reply_text(px, s, 405, "Method Not Allowed", "CONNECT is not proxied");
        return;
    }
    inf_start(px, s);
    http_body_request(&s->reqb, &s->req);
    k = http_body_feed(&s->reqb, s->in + s->req.len, s->in_len - s->req.len);
    if (k < 0) {
        px->bad_requests++;
        px_sess_reply_text(px, s, 400, "Bad Request", "malformed chunked request body");
        return;
    }
    s->req_end = (uint32_t)(s->req.len + (size_t)k);
    if (s->inf.kind != OAI_NONE && !s->reqb.done && body_wanted(px, s)) {
        /* read the whole body first: routing needs the prompt */
        if (s->req.expect_continue)
            (void)!px_csend(s, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        s->state = S_BODY;
        px_timer_set(px, &px->t_client, &s->t);
        return;
    }
    sess_route(px, s);
}

/* The response is complete and written: account, recycle, next request. */
static void sess_finish(px_t *px, px_sess_t *s)
{
    px_bconn_t *bc = s->bc;
    px_backend_t *b = bc->be;
    double secs = (double)(px->now_ns - s->t0_ns) / 1e9;

    px_stats_response(&b->st, s->status, secs);
    px_stats_response(&px->total, s->status, secs);
    if (px->svc_on && s->status >= 200 && s->status < 300)
        px_svc_done(px, s, b);
    px_log(px, s, b);
    px_backend_ok(px, b);
    s->bc = NULL;
    if (s->bc_reusable && s->reqb.done && !b->removed && !px->stopping)
        px_bconn_release(px, bc);
    else
        px_bconn_close(px, bc);
    if (s->inf.kind != OAI_NONE) {
        free(s->inf.blocks);
        memset(&s->inf, 0, sizeof s->inf);
        px_admit_done(px);
        px_admit_pump(px); /* a replica may have room now */
    } else if (px->nqueued > 0 && px->c->maxconn > 0) {
        px_admit_pump(px); /* a backend slot under --maxconn is free now */
    }
    if (!s->keep || !s->reqb.done) {
        px_sess_close(px, s);
        return;
    }
    px_buf_put(px, s->out);
    s->out = NULL;
    memmove(s->in, s->in + s->req_end, s->in_len - s->req_end);
    s->in_len -= s->req_end;
    s->req_end = s->req_sent = 0;
    if (s->in_malloc && s->in_len <= PX_BUF) {
        char *nb = px_buf_get(px);
        if (nb) {
            memcpy(nb, s->in, s->in_len);
            free(s->in);
            s->in = nb;
            s->in_cap = PX_BUF;
            s->in_malloc = false;
        }
    }
    s->state = S_HEAD;
    px_timer_set(px, &px->t_client, &s->t);
}

/* The response head at out[at..resp_off), from a backend that closes its
 * connection after it (HTTP/1.0, Connection: close), told as the client's
 * connection stays open (its framing is a length or chunks): the status
 * line gets the request's HTTP/1.x, and the hop-by-hop Connection and
 * Keep-Alive lines go, so that a client with requests pipelined behind this
 * one reads on. The head only shrinks, in place, before any of it is sent. */
static void head_for_client(px_sess_t *s, uint32_t at)
{
    char *h = s->out + at;
    uint32_t len = s->resp_off - at, i = 0;

    if (len > 8 && memcmp(h, "HTTP/1.", 7) == 0 && s->req.minor == 1)
        h[7] = '1';
    while (i < len && h[i] != '\n') /* past the status line */
        i++;
    i++;
    while (i + 2 <= len && !(h[i] == '\r' && h[i + 1] == '\n')) {
        uint32_t e = i;
        while (e < len && h[e] != '\n')
            e++;
        e = e < len ? e + 1 : len;
        if ((e - i > 11 && strncasecmp(h + i, "connection:", 11) == 0) ||
            (e - i > 11 && strncasecmp(h + i, "keep-alive:", 11) == 0)) {
            memmove(h + i, h + e, s->out_len - (at + e));
            s->out_len -= e - i;
            s->resp_off -= e - i;
            len -= e - i;
            continue;
        }
        i = e;
    }
}

/* Parse what arrived from the backend: out[resp_off..out_len). Returns -1
 * when the session was failed. */
static int resp_parse(px_t *px, px_sess_t *s)
{
    while (s->resp_off < s->out_len) {
        if (!s->resp_head) {
            int rc = http_parse_response(s->out + s->resp_off, s->out_len - s->resp_off, &s->resp);
            if (rc == 0) {
                if (s->resp_off == 0 && s->out_len == s->out_cap)
                    rc = -EINVAL; /* a head bigger than the buffer */
                else
                    return 0;
            }
            if (rc < 0) {
                s->bc_reusable = false;
                px_sess_backend_failed(px, s, F_BAD_RESPONSE);
                return -1;
            }
            uint32_t head_at = s->resp_off;
            s->resp_off += (uint32_t)rc;
            if (s->resp.status >= 100 && s->resp.status < 200 && s->resp.status != 101)
                continue; /* 100 Continue and friends: pass on, a final head follows */
            s->resp_head = true;
            s->status = s->resp.status;
            http_body_response(&s->respb, &s->resp, s->req.method == HTTP_HEAD);
            px_backend_load_report(px, s->bc->be, &s->resp);
            px_backend_latency(px, s->bc->be, (double)(px->now_ns - s->t_att_ns) / 1e6);
            if (s->resp.status == 101) {
                /* Upgraded (WebSocket): a byte tunnel both ways until close. */
                s->respb.mode = HTTP_BODY_CLOSE;
                s->respb.done = false;
                s->reqb.mode = HTTP_BODY_CLOSE;
                s->reqb.done = false;
                s->req_end = s->in_len;
            }
            bool backend_closes = s->resp.conn_close || (s->resp.minor == 0 && !s->resp.conn_keep);
            if (backend_closes || s->respb.mode == HTTP_BODY_CLOSE)
                s->bc_reusable = false;
            if (s->respb.mode == HTTP_BODY_CLOSE)
                s->keep = false; /* only the end of the stream ends this body */
            else if (backend_closes && s->keep)
                head_for_client(s, head_at); /* the client's connection outlives the backend's */
        } else {
            ssize_t k = http_body_feed(&s->respb, s->out + s->resp_off, s->out_len - s->resp_off);
            if (k < 0) {
                s->bc_reusable = false;
                px_sess_backend_failed(px, s, F_BAD_RESPONSE);
                return -1;
            }
            if (k > 0 && s->inf.kind != OAI_NONE && !s->inf.first_byte) {
                /* the first token (streamed) or the whole answer: time to first byte */
                double ms = (double)(px->now_ns - s->t0_ns) / 1e6;
                s->inf.first_byte = true;
                px_prefill_done(px, s, s->bc->be);
                if (s->resp.status >= 200 && s->resp.status < 300) {
                    px_stats_ttft(&px->ad, ms / 1e3);
                    px_backend_t *b = s->bc->be;
                    b->ttft_ms = b->ttft_ms > 0 ? b->ttft_ms + 0.2 * (ms - b->ttft_ms) : ms;
                }
            }
            s->resp_off += (uint32_t)k;
            if (s->respb.done) {
                if (s->resp_off < s->out_len) {
                    s->out_len = s->resp_off; /* bytes past the response: drop, no reuse */
                    s->bc_reusable = false;
                }
                break;
            }
        }
        if (s->resp_head && s->respb.done)
            break;
    }
    return 0;
}

/* Move bytes both ways. Returns 1 on progress, 0 when blocked, -1 when the
 * session moved on (finished, failed, closed). */
static int sess_pump(px_t *px, px_sess_t *s)
{
    px_bconn_t *bc = s->bc;
    bool prog = false;
    int last = 0; /* a TLS error's code (btls.c) */
    ssize_t n;

    /* 1. client -> in: the rest of the request body */
    if (!s->reqb.done && s->rd) {
        if (s->in_len == s->in_cap && s->req_sent > 0) {
            memmove(s->in, s->in + s->req_sent, s->in_len - s->req_sent);
            s->in_len -= s->req_sent;
            s->req_end -= s->req_sent;
            s->req_sent = 0;
            s->replayable = false;
        }
        if (s->in_len < s->in_cap) {
            size_t want = s->in_cap - s->in_len;
            n = px_crecv(s, s->in + s->in_len, want);
            if (n > 0) {
                size_t old = s->in_len;
                s->in_len += (uint32_t)n;
                if (s->req_end == old) {
                    ssize_t k = http_body_feed(&s->reqb, s->in + old, (size_t)n);
                    if (k < 0) {
                        px_sess_close(px, s);
                        return -1;
                    }
                    s->req_end += (uint32_t)k;
                }
                if (px_cdrained(s, (size_t)n, want))
                    s->rd = false;
                prog = true;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                px_sess_close(px, s); /* the client left mid-request */
                return -1;
            } else {
                s->rd = false;
            }
        }
    }
    /* 2. in -> backend */
    if (s->req_sent < s->req_end && bc->wr) {
        size_t want = s->req_end - s->req_sent;
        n = px_bsend(bc->tls, bc->fd, s->in + s->req_sent, want, &last);
        if (n > 0) {
            s->req_sent += (uint32_t)n;
            if ((size_t)n < want && !bc->tls) /* TLS sends a record at a time: on to EAGAIN */
                bc->wr = false;
            prog = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            bc->wr = false;
        } else {
            if (bc->tls)
                px_btls_io_failed(px, bc->be, bc->tls, last, "session failed (proxying)");
            px_sess_backend_failed(px, s, F_IO);
            return -1;
        }
    }
    /* 3. backend -> out */
    if (!(s->resp_head && s->respb.done) && bc->rd) {
        if (s->out_sent == s->out_len) {
            s->out_sent = s->out_len = s->resp_off = 0;
        } else if (s->out_len == s->out_cap && s->out_sent > 0) {
            memmove(s->out, s->out + s->out_sent, s->out_len - s->out_sent);
            s->out_len -= s->out_sent;
            s->resp_off -= s->out_sent;
            s->out_sent = 0;
        }
        if (s->out_len < s->out_cap) {
            size_t want = s->out_cap - s->out_len;
            n = px_brecv(bc->tls, bc->fd, s->out + s->out_len, want, &last);
            if (n > 0) {
                s->out_len += (uint32_t)n;
                if ((size_t)n < want && !bc->hup && !bc->tls) /* TLS: read on to EAGAIN */
                    bc->rd = false;
                if (resp_parse(px, s) < 0)
                    return -1;
                px_timer_set(px, &px->t_server, &s->t);
                prog = true;
            } else if (n == 0 && s->resp_head && s->respb.mode == HTTP_BODY_CLOSE) {
                s->respb.done = true; /* the end of a close-delimited body */
                s->bc_reusable = false;
                prog = true;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                if (bc->tls)
                    px_btls_io_failed(px, bc->be, bc->tls, last, "session failed (proxying)");
                px_sess_backend_failed(px, s, F_IO);
                return -1;
            } else {
                bc->rd = false;
            }
        }
    }
    /* 4. out -> client */
    if (s->out_sent < s->resp_off && s->wr) {
        size_t want = s->resp_off - s->out_sent;
        n = px_csend(s, s->out + s->out_sent, want);
        if (n > 0) {
            s->out_sent += (uint32_t)n;
            s->resp_started = true;
            if ((size_t)n < want)
                s->wr = false;
            prog = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            s->wr = false;
        } else {
            px_sess_close(px, s);
            return -1;
        }
    }
    /* 5. done */
    if (s->resp_head && s->respb.done && s->out_sent == s->resp_off) {
        sess_finish(px, s);
        return -1;
    }
    return prog;
}

/* Write our own reply; then close, or read the next request. */
static int sess_write_reply(px_t *px, px_sess_t *s)
{
    while (s->out_sent < s->out_len && s->wr) {
        ssize_t n = px_csend(s, s->out + s->out_sent, s->out_len - s->out_sent);
        if (n > 0) {
            s->out_sent += (uint32_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            s->wr = false;
        } else {
            px_sess_close(px, s);
            return -1;
        }
    }
    if (s->out_sent < s->out_len)
        return 0;
    px_sess_close(px, s); /* our replies always close */
    return -1;
}

void px_sess_run(px_t *px, px_sess_t *s)
{
    for (;;) {
        switch (s->state) {
        case S_HEAD: {
            if (s->in_len > 0) {
                int rc = http_parse_request(s->in, s->in_len, s->admin ? NULL : &px->want, &s->req);
                if (rc > 0) {
                    sess_start(px, s);
                    if (s->kind == PX_DEAD)
                        return;
                    continue;
                }
                if (rc < 0 || s->in_len == s->in_cap) {
                    px->bad_requests++;
                    s->t0_ns = px->now_ns;
                    s->what[0] = '\0';
                    if (rc < 0)
                        px_sess_reply_text(px, s, 400, "Bad Request",
                                           "malformed HTTP/1.x request head");
                    else
                        px_sess_reply_text(px, s, 431, "Request Header Fields Too Large",
                                           "request head over 16 KiB");
                    if (s->kind == PX_DEAD)
                        return;
                    continue;
                }
            } else if (px->stopping) {
                px_sess_close(px, s);
                return;
            }
            int hs = px_tls_handshake(s); /* TLS first (ltls.c), either way it waits */
            if (hs < 0) {
                px_sess_close(px, s);
                return;
            }
            if (hs == 0 || !s->rd)
                return;
            size_t want = s->in_cap - s->in_len;
            ssize_t n = px_crecv(s, s->in + s->in_len, want);
            if (n > 0) {
                s->in_len += (uint32_t)n;
                if (px_cdrained(s, (size_t)n, want))
                    s->rd = false;
                px_timer_set(px, &px->t_client, &s->t);
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                s->rd = false;
                return;
            }
            px_sess_close(px, s);
            return;
        }
        case S_BODY:
            sess_body(px, s);
            if (s->kind == PX_DEAD || s->state == S_BODY || s->state == S_QUEUED)
                return;
            continue;
        case S_QUEUED:
            if (s->hup) /* the client left while waiting its turn */
                px_sess_close(px, s);
            return;
        case S_CONNECT:
            if (s->reqb.done && client_gone(s)) { /* no one will read the answer */
                px->client_aborts++;
                px_sess_close(px, s); /* closes the backend connection too, at once */
                return;
            }
            return; /* the backend connection's event moves us on */
        case S_FWD: {
            if (s->reqb.done && client_gone(s)) {
                px->client_aborts++;
                px_sess_close(px, s);
                return;
            }
            int rc = sess_pump(px, s);
            if (rc < 0) {
                if (s->kind == PX_DEAD)
                    return;
                continue;
            }
            if (rc == 0)
                return;
            px_timer_set(px, &px->t_server, &s->t);
            continue;
        }
        case S_REPLY:
            if (sess_write_reply(px, s) <= 0)
                return;
            continue;
        }
    }
}

/* An event on a backend connection. */
void px_bconn_event(px_t *px, px_bconn_t *bc, uint32_t ev)
{
    px_sess_t *s = bc->s;

    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))
        bc->rd = true;
    if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        bc->wr = true;
    if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        bc->hup = true;
    if (!s) {
        /* pooled: the backend closed it, or sent what nobody asked for (over TLS,
         * a message of TLS's own, a session ticket, is taken and the connection kept) */
        if ((ev & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) ||
            ((ev & EPOLLIN) && !px_btls_idle_ok(bc->tls, bc->fd)))
            px_bconn_close(px, bc);
        return;
    }
    if (s->state == S_CONNECT) {
        if (!bc->connected) {
            int soerr = 0;
            socklen_t len = sizeof soerr;
            if (!bc->wr && !(ev & (EPOLLERR | EPOLLHUP)))
                return;
            if (getsockopt(bc->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
                soerr = errno;
            if (soerr || (ev & (EPOLLERR | EPOLLHUP))) {
                px_sess_backend_failed(px, s, F_CONNECT);
                if (s->kind != PX_DEAD)
                    px_sess_run(px, s);
                return;
            }
            bc->connected = true;
        }
        if (bc->tls && !bc->tls_up) { /* the handshake, within the connect timeout (btls.c) */
            int hs = px_btls_handshake(px, bc->be, bc->tls, &bc->rd, &bc->wr, "proxying");
            if (hs == -ENOMEM) { /* ours: no backend is blamed */
                s->bc = NULL;
                px_bconn_close(px, bc);
                px_own_failure(px, hs, "in a TLS handshake with a backend");
                px_sess_reply_text(px, s, 503, "Service Unavailable",
                                   "the balancer is out of resources (memory); retry");
                if (s->kind != PX_DEAD)
                    px_sess_run(px, s);
                return;
            }
            if (hs < 0) {
                px_sess_backend_failed(px, s, F_TLS);
                if (s->kind != PX_DEAD)
                    px_sess_run(px, s);
                return;
            }
            if (hs == 0)
                return;
            bc->tls_up = true;
        }
        s->state = S_FWD;
        px_timer_set(px, &px->t_server, &s->t);
    }
    px_sess_run(px, s);
}
