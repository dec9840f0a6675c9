/*
 * http.c: the HTTP side of the API: libmicrohttpd with a pool of epoll
 * event-loop threads (thousands of keep-alive agent connections cost no
 * thread each), optionally TLS (GnuTLS, with client certificates checked
 * against the cluster CA), strict framing, request bodies (at most
 * API_MAX_BODY, else 413), route matching against the one table in
 * routes.c, authentication (auth.c: 401 without a known principal, 403 for
 * a role the route does not allow, or an agent acting for another node),
 * and replies. Deadlines and long polls: conn.c.
 *
 * A request's life in the access handler (libmicrohttpd calls it several
 * times per request):
 *
 *   first call ----> HEADERS: strict framing (400 and close: Content-Length
 *                    with Transfer-Encoding, conflicting or malformed
 *                    Content-Length, a Transfer-Encoding other than
 *                    chunked, no or several Host in HTTP/1.1, a NUL in the
 *                    target); check Content-Length (too big: 413 at once when
 *                    the client waits for "100 Continue" or the body is past
 *                    API_DRAIN_MAX, else read and drop the body first)
 *   upload calls --> BODY: append, or count and drop once past the limit
 *   last call -----> DISPATCH: 413 | 404 | 405 | 401 | 403 | handler; a long
 *                    poll with nothing to say suspends the connection
 *                    (api_poll) and DISPATCH runs again when it is resumed
 *
 * Why drop a too-big body rather than answer at once: a client that sends
 * its body without waiting (libcurl with "Expect:" cleared, as the CLI does)
 * is still writing when the 413 comes and the connection closes; the
 * unread bytes make the kernel reset the connection, and the client may
 * see "connection reset" instead of the 413 and its message. Read to the
 * end, the 413 always arrives.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "api/api_int.h"
#include "util/buf.h"
#include "util/jsonw.h"
#include "util/mtime.h"
#include "util/log.h"

#define API_DRAIN_MAX (64ull << 20) /* a too-big body up to this is read (and dropped) */

struct api_server {
    struct MHD_Daemon *d;
    st_t *st; /* NULL while a follower; read and set atomically */
    api_auth_conf_t auth;
    const api_ha_t *ha;
    api_hk_t *hk;
    tls_server_t tls; /* copies of the PEM texts libmicrohttpd serves */
    int port;
    char name[64], url[300];
    int busy; /* requests between their first byte and their reply sent (atomic) */
    /* Requests by route (api_routes' index; the last slot: no route), each
     * counted once however often a long poll or a held reply runs again;
     * and those runs again (atomic): arbiter_http_requests_total. */
    uint64_t *hits;
    int nroutes;
    uint64_t reruns;
};

typedef struct conn_ctx {
    api_server_t *a; /* whose busy count this request is in */
    bool counted;    /* in a->hits already (a long poll resumed runs again) */
    arb_buf_t body;  /* the request's body as it arrives (at most API_MAX_BODY) */
    bool too_big;
    api_park_t park;       /* a suspended long poll, or a reply after its commit */
    int64_t poll_until_ms; /* the long poll's deadline, kept across runs */
    api_defer_t defer;     /* the reply waiting for its commit */
    st_t *defer_st;
} conn_ctx_t;

/* ---- helpers for handlers ------------------------------------------------------------ */

const char *api_query(api_req_t *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *api_header(api_req_t *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

static const char *reason(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 413:
        return "Payload Too Large";
    case 422:
        return "Unprocessable Entity";
    case 503:
        return "Service Unavailable";
    default:
        return status >= 500 ? "Internal Server Error" : "Error";
    }
}

int api_error(api_req_t *r, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(r->json);
    r->json = json_pack("{s:{s:i,s:s,s:s}}", "error", "status", status, "reason", reason(status),
                        "message", msg);
    r->status = status;
    return status;
}

/* The reply of a state call whose ticket is durable (or failed). */
static int finish_now(api_req_t *r, int rc, json_t *out, char *text, size_t textlen, int64_t ticket,
                      const char *msg, int ok_status)
{
    arb_err_t werr = {{0}};

    /* Wait for durability even on failure: the call may have seen state
     * that is not yet durable. */
    if (st_wait(r->st, ticket, &werr) < 0) {
        json_decref(out);
        free(text);
        return api_error(r, 503, "%s", werr.msg);
    }
    if (rc == 0 && text) { /* written straight: sent as it is (send_reply) */
        json_decref(out);
        r->text = text;
        r->textlen = textlen;
        r->ctype = NULL;
        r->status = ok_status;
        return ok_status;
    }
    free(text);
    if (rc == 0) {
        r->json = out;
        r->status = ok_status;
        return ok_status;
    }
    json_decref(out);
    int status = rc == -EBADMSG                                                   ? 400
                 : rc == -EINVAL || rc == -ERANGE                                 ? 422
                 : rc == -ENOENT                                                  ? 404
                 : rc == -EACCES                                                  ? 403
                 : rc == -ESTALE || rc == -EPERM || rc == -EBUSY || rc == -EEXIST ? 409
                 : rc == -E2BIG                                                   ? 413
                 : rc == -EIO                                                     ? 503
                                                                                  : 500;
    return api_error(r, status, "%s", msg && msg[0] ? msg : strerror(-rc));
}

static int finish(api_req_t *r, int rc, json_t *out, char *text, size_t len, int64_t ticket,
                  const arb_err_t *err, int ok_status)
{
    /* Not durable yet: the reply waits for its commit without holding this
     * event-loop thread (its other connections go on); see conn.c. */
    if (r->st && ticket > 0 && !r->no_defer && !st_done(r->st, ticket)) {
        api_defer_t *d = &r->defer;
        d->on = true;
        d->ticket = ticket;
        d->rc = rc;
        d->ok = ok_status;
        d->out = out;
        d->text = text;
        d->textlen = len;
        size_t ml = err ? strnlen(err->msg, sizeof d->msg - 1) : 0;
        memcpy(d->msg, err ? err->msg : "", ml); /* no printf a reply: most have no message */
        d->msg[ml] = '\0';
        return ok_status;
    }
    return finish_now(r, rc, out, text, len, ticket, err ? err->msg : NULL, ok_status);
}

int api_finish(api_req_t *r, int rc, json_t *out, int64_t ticket, const arb_err_t *err,
               int ok_status)
{
    return finish(r, rc, out, NULL, 0, ticket, err, ok_status);
}

int api_finish_text(api_req_t *r, int rc, char *text, size_t len, int64_t ticket,
                    const arb_err_t *err, int ok_status)
{
    return finish(r, rc, NULL, text, len, ticket, err, ok_status);
}

/* ---- routing ------------------------------------------------------------------------------- */

/* Does url match pattern? Captures {x} segments into r->params. */
static bool match(const char *pattern, const char *url, api_req_t *r)
{
    int np = 0;

    while (*pattern && *url) {
        if (*pattern == '{') {
            const char *pe = strchr(pattern, '}');
            const char *ue = strchr(url, '/');
            size_t len = ue ? (size_t)(ue - url) : strlen(url);
            if (!pe || len == 0 || len >= sizeof r->params[0] || np >= API_MAX_PARAMS)
                return false;
            memcpy(r->params[np], url, len);
            r->params[np++][len] = '\0';
            pattern = pe + 1;
            url += len;
            continue;
        }
        if (*pattern != *url)
            return false;
        pattern++;
        url++;
    }
    return *pattern == '\0' && *url == '\0';
}

/* ---- followers: send the request to the leader ------------------------------------------- */

typedef struct qbuf {
    char *p;
    size_t n, cap;
} qbuf_t;

static void qb_add(qbuf_t *q, const char *s, bool esc)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; s && *s && q->n + 4 < q->cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (!esc || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            q->p[q->n++] = (char)c;
        } else {
            q->p[q->n++] = '%';
            q->p[q->n++] = hex[c >> 4];
            q->p[q->n++] = hex[c & 15];
        }
    }
    q->p[q->n] = '\0';
}

static enum MHD_Result q_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    qbuf_t *q = cls;
    (void)kind;
    qb_add(q, q->p[q->n - 1] == '?' ? "" : "&", false);
    qb_add(q, key, true);
    if (value) {
        qb_add(q, "=", false);
        qb_add(q, value, true);
    }
    return MHD_YES;
}

/* A follower (no state yet): 307 to the leader's URL with the same path and
 * query, or 503 while no leader is known (or this one is still loading). */
static int to_leader(api_req_t *r, char *loc, size_t locsz)
{
    char name[128], url[256];
    int64_t term = 0;
    int rc = r->ha ? r->ha->leader(r->ha->arg, name, sizeof name, url, sizeof url, &term) : -ENOENT;

    r->retry_after = 1;
    if (rc == 1)
        return api_error(r, 503,
                         "this controller (%s) won the election and is loading the "
                         "state; retry in a moment",
                         r->self_name);
    if (rc < 0 && r->st)
        return api_error(r, 503,
                         "this controller (%s) cannot renew its leader lease; it is "
                         "stepping down; retry, or ask GET /v1/leader",
                         r->self_name);
    if (rc < 0 || !url[0])
        return api_error(r, 503,
                         "no leader is known yet (an election is under way); retry, or "
                         "ask GET /v1/leader");
    qbuf_t q = {loc, 0, locsz};
    loc[0] = '\0';
    qb_add(&q, url, false);
    qb_add(&q, r->url, false);
    qb_add(&q, "?", false);
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, q_arg, &q);
    if (q.n > 0 && loc[q.n - 1] == '?')
        loc[--q.n] = '\0';
    r->location = loc;
    r->retry_after = 0;
    api_error(r, 307, "%s leads (term %lld): send this request to %s", name, (long long)term, url);
    return 307;
}

/* The client certificate of r's connection, checked once per connection
 * (a TLS session keeps its certificate). */
static const api_cert_t *conn_cert(api_server_t *a, api_conn_t *ac, struct MHD_Connection *conn)
{
    if (!a->tls.cert || !a->auth.certs || !ac)
        return NULL;
    if (!ac->cert_checked) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        arb_err_t err = {{0}};
        int rc = tls_peer_verify(ci ? ci->tls_session : NULL, &ac->cert.peer, &err);
        ac->cert.state = rc == 0 ? API_CERT_OK : rc == 1 ? API_CERT_NONE : API_CERT_BAD;
        snprintf(ac->cert.why, sizeof ac->cert.why, "%.299s", rc < 0 ? err.msg : "");
        ac->cert_checked = true;
    }
    return &ac->cert;
}

/* An agent on a route of its own node: the node the path or query names. */
static const char *self_node(const api_route_t *rt, api_req_t *r)
{
    if (strstr(rt->path, "{name}"))
        return r->params[0];
    return api_query(r, "node");
}

/* Count one request (count: its first run) under the route it hit; hit
 * NULL: none (404, 405). */
static void count_hit(api_server_t *a, const api_route_t *hit, bool count)
{
    if (count)
        __atomic_add_fetch(&a->hits[hit ? hit - api_routes : a->nroutes], 1, __ATOMIC_RELAXED);
    else
        __atomic_add_fetch(&a->reruns, 1, __ATOMIC_RELAXED);
}

static int dispatch(api_server_t *a, api_req_t *r, const char *auth, const api_cert_t *cert,
                    char *loc, size_t locsz, bool count)
{
    const api_route_t *hit = NULL;
    char allow[128] = "", msg[512];
    size_t used = 0;

    for (const api_route_t *rt = api_routes; rt->method; rt++) {
        if (!match(rt->path, r->url, r))
            continue;
        if (strcmp(rt->method, r->method) == 0) {
            hit = rt;
            break;
        }
        if (used < sizeof allow)
            used += (size_t)snprintf(allow + used, sizeof allow - used, "%s%s", used ? ", " : "",
                                     rt->method);
    }
    count_hit(a, hit, count);
    if (!hit && used)
        return api_error(r, 405, "%s %s: method not allowed; use %s", r->method, r->url, allow);
    if (!hit)
        return api_error(r, 404, "%s: no such endpoint; see docs/api.md", r->url);
    if (!(hit->flags & API_HERE)) {
        char n[128], u[256];
        int64_t term;
        /* A follower, or a leader whose lease may have run out (it was paused):
         * send the client on rather than answer from memory that may be stale. */
        if (!r->st || (r->ha && r->ha->leader(r->ha->arg, n, sizeof n, u, sizeof u, &term) != 1))
            return to_leader(r, loc, locsz);
    }
    if (r->st && !(hit->flags & API_UNCHECKED)) {
        /* A failed commit: what memory holds may never have been written.
         * Nothing is answered from it (not /healthz: it says so), and the
         * controller exits (cli/controller.c) for a supervisor to restart. */
        arb_err_t serr = {{0}};
        if (st_store_status(r->st, &serr) < 0) {
            r->retry_after = 1;
            return api_error(r, 503,
                             "this controller stops serving: %s; it exits and a restart "
                             "recovers what was committed",
                             serr.msg);
        }
    }
    if (hit->roles || a->auth.require_cert) {
        api_principal_t p;
        int st =
            hit->flags & API_OPEN ? 0 : api_authenticate(&a->auth, auth, cert, &p, msg, sizeof msg);
        if (st)
            return api_error(r, st, "%s: %s", r->url, msg);
        if (hit->roles && !(hit->flags & API_OPEN)) {
            r->who.role = p.role;
            r->who.team = p.team;
            r->who.name = p.name;
            r->node = p.node;
            if (!(hit->roles & p.role))
                return api_error(r, 403, "%s %s: not allowed for role '%s'", r->method, hit->path,
                                 api_role_name(p.role));
            const char *want =
                p.role == ST_ROLE_AGENT && (hit->roles & API_SELF) ? self_node(hit, r) : NULL;
            if (p.role == ST_ROLE_AGENT && (hit->roles & API_SELF) &&
                (!p.node || !want || strcmp(p.node, want) != 0)) {
                if (!p.node)
                    return api_error(r, 403,
                                     "%s %s: this agent credential is bound to no node; give "
                                     "each agent its own (a token line 'TOKEN agent TEAM NODE', "
                                     "or a certificate from `arbiter init node NODE DIR`)",
                                     r->method, r->url);
                return api_error(r, 403,
                                 "%s %s: this agent acts as node '%s' only, not '%s'; nothing "
                                 "was applied",
                                 r->method, r->url, p.node, want ? want : "(none named)");
            }
        }
    }
    return api_route_run(hit, r);
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, api_req_t *r, bool close)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;
    char *txt = r->text;
    size_t len = r->textlen;
    const char *ctype = r->ctype ? r->ctype : "application/json";

    if (!txt) { /* json_dumps(JSON_COMPACT)'s text, written straight (util/jsonw.h) */
        arb_buf_t b = {0};
        (void)arb_buf_reserve(&b, 1024); /* most replies fit: no regrowth */
        if (!r->json || arb_jsonw_compact(&b, r->json) < 0) {
            arb_buf_reset(&b);
            arb_buf_put(&b, "{}", 2);
        }
        arb_buf_putc(&b, '\n'); /* a trailing newline for people using curl */
        len = b.len;
        txt = arb_buf_take(&b);
        if (!txt)
            len = 0;
        ctype = "application/json";
    }
    resp = MHD_create_response_from_buffer(
        len, txt ? txt : (char *)"", r->asset ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        if (!r->asset)
            free(txt);
        r->text = NULL;
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", ctype);
    if (r->asset) { /* a console file (ui.c) */
        MHD_add_response_header(resp, "ETag", r->etag);
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'self'; script-src 'self'; style-src 'self'; "
                                "img-src 'self' data:; connect-src 'self' http: https:; "
                                "frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    }
    if (r->status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"arbiter\"");
    if (r->location)
        MHD_add_response_header(resp, "Location", r->location);
    if (close) /* the framing could not be trusted: nothing more is read from it */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    ret = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    r->text = NULL;
    return ret;
}

static bool is_yaml(const char *ctype)
{
    return ctype && (strstr(ctype, "yaml") != NULL);
}

static api_conn_t *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* ---- strict framing ---------------------------------------------------------------------- */

typedef struct frame {
    int ncl, nte, nhost;
    bool cl_bad, cl_conflict, te_bad, name_bad;
    char cl[32];
} frame_t;

/* RFC 9110's token characters: what a header name is made of. */
static bool is_token(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s)))
            return false;
    return true;
}

static enum MHD_Result frame_hdr(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    frame_t *f = cls;
    (void)kind;
    if (!key)
        return MHD_YES;
    if (!is_token(key)) /* "Content-Length : 5": another parser may take it, this one did not */
        f->name_bad = true;
    if (strcasecmp(key, "Content-Length") == 0) {
        const char *v = value ? value : "";
        bool digits = *v != '\0' && strspn(v, "0123456789") == strlen(v) && strlen(v) < 20;
        if (!digits)
            f->cl_bad = true;
        else if (f->ncl > 0 && strcmp(f->cl, v) != 0)
            f->cl_conflict = true;
        else
            memcpy(f->cl, v, strlen(v) + 1); /* < 20 digits: fits */
        f->ncl++;
    } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        if (!value || strcasecmp(value, "chunked") != 0)
            f->te_bad = true;
        f->nte++;
    } else if (strcasecmp(key, "Host") == 0) {
        f->nhost++;
    }
    return MHD_YES;
}

/* A request whose framing two parsers could read two ways (a proxy in front
 * and this server): RFC 9112's ambiguities, refused rather than guessed.
 * NULL when it is sound, else what is wrong. */
static const char *frame_check(struct MHD_Connection *conn, api_conn_t *ac, const char *url,
                               const char *version)
{
    frame_t f = {0};

    MHD_get_connection_values(conn, MHD_HEADER_KIND, frame_hdr, &f);
    if (f.name_bad)
        return "a header name with a space or another character outside RFC 9110's token";
    if (f.ncl && f.nte)
        return "Content-Length together with Transfer-Encoding (RFC 9112 6.3): send one of them";
    if (f.cl_bad)
        return "Content-Length is not one decimal number";
    if (f.cl_conflict)
        return "several Content-Length headers that differ";
    if (f.te_bad || f.nte > 1)
        return "Transfer-Encoding other than one 'chunked'";
    if (version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && f.nhost != 1)
        return f.nhost ? "several Host headers" : "HTTP/1.1 without a Host header";
    if (ac && ac->nul_in_target)
        return "a NUL (%00) in the request target";
    /* A raw NUL byte ends the target early as libmicrohttpd hands it on;
     * the version follows the target in its buffer (url, decoded in place,
     * starts where the raw target did), right after the space that ended
     * it, so a gap between the raw target's length and the version means
     * bytes were hidden behind a NUL. */
    if (ac && ac->raw_uri && url && version && version > url && version - url < 65536 &&
        url + ac->raw_len + 1 != version)
        return "a NUL byte in the request target";
    return NULL;
}

/* libmicrohttpd's URI log callback: the request line has arrived. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    api_server_t *a = cls;
    api_conn_t *ac = conn_of(conn);
    if (ac) {
        ac->raw_uri = uri;
        ac->raw_len = uri ? strlen(uri) : 0;
        ac->nul_in_target = false;
        api_conn_phase(a->hk, ac, API_PH_HEAD);
    }
    return NULL;
}

/* Percent-decoding of the path and query (MHD's own), noting a %00. */
static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    size_t n = MHD_http_unescape(s);
    api_conn_t *ac = conn_of(conn);
    (void)cls;
    if (ac && strlen(s) != n)
        ac->nul_in_target = true;
    return n;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    api_server_t *a = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_ctx = ci ? api_conn_open(a->hk, ci->connect_fd) : NULL;
    } else {
        api_conn_close(a->hk, *socket_ctx);
        *socket_ctx = NULL;
    }
}

/* ---- the access handler ------------------------------------------------------------------ */

_Static_assert(sizeof((api_conn_t *)0)->peer >= INET6_ADDRSTRLEN, "api_conn_t.peer: too short");

static void fill_peer(struct MHD_Connection *conn, api_conn_t *ac, api_req_t *r)
{
    /* The caller's address: where a node's gang rendezvous is reached.
     * Written once per connection (inet_ntop formats with sprintf), or per
     * request into this thread's buffer when the connection has no record. */
    static __thread char tpeer[INET6_ADDRSTRLEN];
    char *peer = ac ? ac->peer : tpeer;

    if (!ac || !ac->peer_set) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;
        peer[0] = '\0';
        if (sa && sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, peer,
                      INET6_ADDRSTRLEN);
        else if (sa && sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, peer,
                      INET6_ADDRSTRLEN);
        if (ac)
            ac->peer_set = true;
    }
    r->who.addr = peer[0] ? peer : NULL;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    api_server_t *a = cls;
    conn_ctx_t *cc = *con_cls;
    api_conn_t *ac = conn_of(conn);
    api_req_t r;
    enum MHD_Result ret;

    if (!cc) { /* HEADERS */
        cc = calloc(1, sizeof *cc);
        if (!cc)
            return MHD_NO;
        *con_cls = cc;
        cc->a = a;
        __atomic_add_fetch(&a->busy, 1, __ATOMIC_ACQ_REL);
        api_conn_phase(a->hk, ac, API_PH_BODY);
        const char *bad = frame_check(conn, ac, url, version);
        if (bad) {
            memset(&r, 0, sizeof r);
            api_error(&r, 400, "%s; nothing was applied, and this connection is closed", bad);
            ret = send_reply(conn, &r, true);
            json_decref(r.json);
            return ret;
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        const char *ex = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");
        unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
        if (len > API_MAX_BODY)
            cc->too_big = true;
        if (!cc->too_big || (len <= API_DRAIN_MAX && !(ex && strcasecmp(ex, "100-continue") == 0)))
            return MHD_YES; /* too big: BODY drops it, DISPATCH answers 413 */
        /* fall to DISPATCH now: answer 413 without reading the body */
    } else if (*upload_size > 0) { /* BODY */
        if (!cc->too_big && cc->body.len + *upload_size > API_MAX_BODY)
            cc->too_big = true;
        if (!cc->too_big && arb_buf_put(&cc->body, upload, *upload_size) < 0)
            return MHD_NO; /* out of memory */
        *upload_size = 0;
        return MHD_YES;
    }
    /* DISPATCH (again, for a long poll resumed, or a reply after its commit) */
    api_conn_phase(a->hk, ac, API_PH_BUSY);
    memset(&r, 0, sizeof r);
    if (cc->defer.on) { /* the commit it waited for is done (or failed) */
        api_defer_t *d = &cc->defer;
        count_hit(a, NULL, false);
        r.st = cc->defer_st;
        finish_now(&r, d->rc, d->out, d->text, d->textlen, d->ticket, d->msg, d->ok);
        if (d->report_t0)
            st_note_report(r.st, arb_mono_ns() - d->report_t0);
        d->on = false;
        d->out = NULL;
        d->text = NULL;
        ret = send_reply(conn, &r, false);
        json_decref(r.json);
        free(r.text);
        return ret;
    }
    r.conn = conn;
    r.method = method;
    r.url = url;
    r.st = __atomic_load_n(&a->st, __ATOMIC_ACQUIRE);
    r.ha = a->ha;
    r.self_name = a->name;
    r.self_url = a->url;
    r.srv = a;
    r.body = cc->body.p ? cc->body.p : ""; /* NUL-terminated (util/buf.h) */
    r.n = cc->body.len;
    r.yaml = is_yaml(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"));
    r.who.role = ST_ROLE_ADMIN; /* without authentication: everyone is admin (loopback only) */
    r.who.team = "";
    r.who.name = "local";
    r.poll_until_ms = cc->poll_until_ms;
    uint64_t gen, kgen; /* before the handler looks at the state */
    bool stopping;
    api_hk_snap(a->hk, &gen, &kgen, &stopping);
    r.poll_over = stopping || (cc->poll_until_ms && arb_mono_ms() >= cc->poll_until_ms);
    fill_peer(conn, ac, &r);
    char loc[2048];
    if (cc->too_big)
        api_error(&r, 413, "request body is larger than %u bytes (1 MiB)", API_MAX_BODY);
    else
        dispatch(a, &r, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"),
                 conn_cert(a, ac, conn), loc, sizeof loc, !cc->counted);
    cc->counted = true;
    if (r.defer.on) { /* the reply waits for its commit, this thread does not */
        json_decref(r.json);
        free(r.text);
        cc->defer = r.defer;
        cc->defer_st = r.st;
        MHD_suspend_connection(conn);
        if (!api_hk_after_commit(a->hk, &cc->park, conn, r.st, r.defer.ticket))
            MHD_resume_connection(conn);
        return MHD_YES;
    }
    if (r.suspend) { /* a long poll with nothing to say yet */
        json_decref(r.json);
        free(r.text);
        cc->poll_until_ms = r.poll_until_ms;
        MHD_suspend_connection(conn);
        if (!(r.poll_key
                  ? api_hk_park_key(a->hk, &cc->park, conn, r.poll_key, kgen, r.poll_until_ms)
                  : api_hk_park(a->hk, &cc->park, conn, gen, r.poll_until_ms)))
            MHD_resume_connection(conn); /* the state moved meanwhile: run it again */
        return MHD_YES;
    }
    ret = send_reply(conn, &r, false);
    json_decref(r.json);
    free(r.text);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    conn_ctx_t *cc = *con_cls;
    api_server_t *a = cls;

    (void)toe;
    api_conn_phase(a->hk, conn_of(conn), API_PH_IDLE);
    if (cc) {
        __atomic_sub_fetch(&cc->a->busy, 1, __ATOMIC_ACQ_REL);
        json_decref(cc->defer.out); /* a reply never sent (the connection died) */
        free(cc->defer.text);
        arb_buf_free(&cc->body);
        free(cc);
        *con_cls = NULL;
    }
}

/* libmicrohttpd's own messages (a connection reset, a TLS handshake gone
 * wrong): what a hostile client provokes at will, so at most LOG_BURST of
 * them a minute reach stderr, then one line saying how many were dropped. */
#define LOG_BURST 20

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    static int64_t window;
    static int n, dropped;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int64_t now = arb_mono_ms();
    char line[512];

    (void)cls;
    vsnprintf(line, sizeof line, fmt, ap);
    pthread_mutex_lock(&mu);
    if (now - window > 60000) {
        if (dropped)
            arb_log(ARB_LOG_WARN, "api",
                    "%d more libmicrohttpd messages in the last minute were not shown", dropped);
        window = now;
        n = dropped = 0;
    }
    size_t len = strlen(line);
    if (len && line[len - 1] == '\n')
        line[len - 1] = '\0';
    if (n++ < LOG_BURST)
        arb_log(ARB_LOG_WARN, "api", "%s", line);
    else
        dropped++;
    pthread_mutex_unlock(&mu);
}

/* Raise the open-file limit to its hard limit (each connection is a
 * descriptor); the connections that fit in what it allows. */
static unsigned conn_budget(int want)
{
    struct rlimit rl;
    rlim_t have = 1024;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t cur = rl.rlim_cur;
            rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
                rl.rlim_cur = cur;
        }
        have = rl.rlim_cur;
    }
    /* the store, logs, the scheduler and clients of etcd need some too */
    rlim_t room = have > 256 ? have - 128 : have / 2;
    if ((rlim_t)want > room) {
        arb_log(ARB_LOG_WARN, "api",
                "the open-file limit (%llu) allows %llu connections, not %d; raise it (ulimit "
                "-n, LimitNOFILE=) for more agents",
                (unsigned long long)have, (unsigned long long)room, want);
        return (unsigned)room;
    }
    return (unsigned)want;
}

/* One event loop per CPU (at least 2, at most 64): a reply waits for its
 * commit without its thread (conn.c) and no long poll holds one, so loops
 * beyond the CPUs mostly add context switches (4 per CPU cost 1.2 more a
 * job in bench e2e on 2 CPUs, docs/complexity.md). Not 1, though one loop
 * on 2 CPUs switches less: with a pool size of 1 libmicrohttpd 0.9.75 runs
 * its single-thread loop, which at its connection limit was seen to leave
 * connections their clients had closed open for good (the controller
 * under a 256-descriptor limit in tests/cli/hostile.sh, 7 runs in 11). */
int api_loop_threads(int want, long ncpu)
{
    if (want > 0)
        return want > 256 ? 256 : want;
    long n = ncpu > 2 ? ncpu : 2;
    return n > 64 ? 64 : (int)n;
}

int api_server_start(st_t *s, const api_opts_t *o, api_server_t **out, arb_err_t *err)
{
    api_server_t *a = calloc(1, sizeof *a);
    struct sockaddr_in sin;
    int rc = 0;

    if (!a)
        return arb_errf(err, -ENOMEM, "out of memory");
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &sin.sin_addr) != 1) {
        free(a);
        return arb_errf(err, -EINVAL, "listen address '%s': not an IPv4 address (127.0.0.1)",
                        o->host);
    }
    for (const api_route_t *rt = api_routes; rt->method; rt++)
        a->nroutes++;
    if (!(a->hits = calloc((size_t)a->nroutes + 1, sizeof *a->hits))) {
        free(a);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    a->st = s;
    a->ha = o->ha;
    snprintf(a->name, sizeof a->name, "%s", o->name ? o->name : "local");
    if (o->tls && o->tls->cert) {
        a->tls.cert = strdup(o->tls->cert);
        a->tls.key = strdup(o->tls->key);
        a->tls.ca = o->tls->ca ? strdup(o->tls->ca) : NULL;
        a->tls.client_cert_auth = o->tls->client_cert_auth;
        if (!a->tls.cert || !a->tls.key || (o->tls->ca && !a->tls.ca)) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
            goto fail;
        }
    }
    a->auth.tokens = o->tokens;
    a->auth.certs = a->tls.ca != NULL;
    a->auth.require_cert = a->tls.ca && a->tls.client_cert_auth;
    if ((rc = api_hk_start(&a->hk, o->idle_timeout_ms > 0 ? o->idle_timeout_ms : 60000,
                           o->head_timeout_ms > 0 ? o->head_timeout_ms : 10000,
                           o->body_timeout_ms > 0 ? o->body_timeout_ms : 60000, err)) < 0)
        goto fail;
    int threads = api_loop_threads(o->threads, sysconf(_SC_NPROCESSORS_ONLN));
    unsigned limit = conn_budget(o->max_conns > 0 ? o->max_conns : 16384);
    /* one address may not take the whole budget, whatever the fd limit left */
    unsigned per_ip = (unsigned)(o->max_conns_per_client > 0 ? o->max_conns_per_client : 256);
    if (o->max_conns_per_client <= 0 && per_ip > limit / 4)
        per_ip = limit / 4 > 0 ? limit / 4 : 1;
    /* The listening socket is made here so that what it allows is plain:
     * SO_REUSEADDR (a restart binds at once, past TIME_WAIT) and never
     * SO_REUSEPORT, with which a second controller bound the same port and
     * the kernel split the clients between two states. A port in use fails
     * the bind. */
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(lfd, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(lfd, 1024) != 0) {
        int e = errno;
        if (lfd >= 0)
            close(lfd);
        rc = arb_errf(err, -e, "cannot listen on %s:%d: %s%s", o->host, o->port, strerror(e),
                      e == EADDRINUSE ? " (another process, perhaps another controller, has it)"
                                      : "");
        goto fail;
    }
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    if (a->tls.cert)
        flags |= MHD_USE_TLS;
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL}, /* first: all messages */
        {MHD_OPTION_LISTEN_SOCKET, lfd, NULL},
        {MHD_OPTION_THREAD_POOL_SIZE, threads, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, a},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, a},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, a},
        {MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)on_unescape, a},
        {MHD_OPTION_CONNECTION_TIMEOUT, 120, NULL}, /* inactivity; conn.c has the deadlines */
        {MHD_OPTION_CONNECTION_LIMIT, limit, NULL},
        /* a request's head and the read buffer: 16 KiB (libmicrohttpd's 32 KiB
         * default made 10,000 idle agents cost 320 MB) */
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, 16 * 1024, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, NULL},
        /* TLS last: without a certificate the list ends here, without a CA below */
        {a->tls.cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, a->tls.cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, a->tls.key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
        {a->tls.ca ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, a->tls.ca},
        {MHD_OPTION_END, 0, NULL},
    };
    a->d =
        MHD_start_daemon(flags, 0, NULL, NULL, handler, a, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!a->d) {
        close(lfd);
        rc = arb_errf(err, -EIO, "cannot serve on %s:%d (libmicrohttpd would not start%s)", o->host,
                      o->port, a->tls.cert ? "; the TLS files were refused?" : "");
        goto fail;
    }
    struct sockaddr_in bound;
    socklen_t blen = sizeof bound;
    a->port =
        getsockname(lfd, (struct sockaddr *)&bound, &blen) == 0 ? ntohs(bound.sin_port) : o->port;
    snprintf(a->url, sizeof a->url, "%s://%s:%d", a->tls.cert ? "https" : "http", o->host, a->port);
    if (s) {
        st_set_change_hook(s, api_hk_changed, a->hk);
        st_set_node_hook(s, api_hk_changed_key, a->hk);
        st_set_durable_hook(s, api_hk_durable, a->hk);
    }
    *out = a;
    return 0;
fail:
    api_hk_stop(a->hk);
    tls_server_free(&a->tls);
    free(a->hits);
    free(a);
    return rc;
}

void api_server_set_state(api_server_t *a, st_t *s)
{
    if (s) {
        st_set_change_hook(s, api_hk_changed, a->hk);
        st_set_node_hook(s, api_hk_changed_key, a->hk);
        st_set_durable_hook(s, api_hk_durable, a->hk);
    }
    __atomic_store_n(&a->st, s, __ATOMIC_RELEASE);
}

int api_server_port(const api_server_t *a)
{
    return a->port;
}

int api_server_metrics(const api_server_t *a, arb_buf_t *b)
{
    arb_buf_printf(b, "# HELP arbiter_http_requests_total HTTP requests by route (method and "
                      "path pattern; route=\"none\": no route matched), each counted once.\n"
                      "# TYPE arbiter_http_requests_total counter\n");
    for (int i = 0; i <= a->nroutes; i++) {
        uint64_t n = __atomic_load_n(&a->hits[i], __ATOMIC_RELAXED);
        if (n || i == a->nroutes)
            arb_buf_printf(b, "arbiter_http_requests_total{route=\"%s%s%s\"} %llu\n",
                           i < a->nroutes ? api_routes[i].method : "none",
                           i < a->nroutes ? " " : "", i < a->nroutes ? api_routes[i].path : "",
                           (unsigned long long)n);
    }
    arb_buf_printf(b,
                   "# HELP arbiter_http_request_reruns_total Requests run again: long polls "
                   "resumed, replies sent after their commit.\n"
                   "# TYPE arbiter_http_request_reruns_total counter\n"
                   "arbiter_http_request_reruns_total %llu\n",
                   (unsigned long long)__atomic_load_n(&a->reruns, __ATOMIC_RELAXED));
    return b->oom ? -ENOMEM : 0;
}

uint64_t api_server_hk_signals(api_server_t *a)
{
    return api_hk_signals(a->hk);
}

/* Stop accepting, answer the parked long polls, give the requests already
 * in progress up to DRAIN_MS to send their replies (a leader stepping down
 * answers the writes it could not commit with their 503, instead of
 * dropping the connection under them), then close everything. */
#define DRAIN_MS 2000

void api_server_stop(api_server_t *a)
{
    if (!a)
        return;
    /* The listening socket is ours once quiesced, but MHD's own threads may
     * still be polling it: close it only after MHD_stop_daemon (libmicrohttpd's
     * rule; closing it here raced the worker thread under TSan). */
    MHD_socket ls = MHD_quiesce_daemon(a->d);
    api_hk_wake_all(a->hk);
    for (int64_t until = arb_mono_ms() + DRAIN_MS;
         __atomic_load_n(&a->busy, __ATOMIC_ACQUIRE) > 0 && arb_mono_ms() < until;)
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    st_t *s = __atomic_load_n(&a->st, __ATOMIC_ACQUIRE);
    if (s) {
        st_set_change_hook(s, NULL, NULL);
        st_set_node_hook(s, NULL, NULL);
        st_set_durable_hook(s, NULL, NULL);
    }
    MHD_stop_daemon(a->d);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    api_hk_stop(a->hk);
    tls_server_free(&a->tls);
    free(a->hits);
    free(a);
}
