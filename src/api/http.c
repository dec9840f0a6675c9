/*
 * http.c: the HTTP side of the API: libmicrohttpd in thread-per-connection
 * mode, request bodies (at most API_MAX_BODY, else 413), route matching
 * against the one table in routes.c, bearer-token auth (401 without a
 * known token, 403 for a role the route does not allow), and replies.
 *
 * A request's life in the access handler (libmicrohttpd calls it several
 * times per request):
 *
 *   first call ----> HEADERS: check Content-Length (too big: 413 at once when
 *                    the client waits for "100 Continue" or the body is past
 *                    API_DRAIN_MAX, else read and drop the body first)
 *   upload calls --> BODY: append, or count and drop once past the limit
 *   last call -----> DISPATCH: 413 | 404 | 405 | 401 | 403 | handler
 *
 * Why drop a too-big body rather than answer at once: a client that sends
 * its body without waiting (libcurl with "Expect:" cleared, as the CLI does)
 * is still writing when the 413 comes and the connection closes; the
 * unread bytes make the kernel reset the connection, and the client may
 * see "connection reset" instead of the 413 and its message. Read to the
 * end, the 413 always arrives.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "api/api_int.h"
#include "util/mtime.h"

#define API_DRAIN_MAX (64ull << 20) /* a too-big body up to this is read (and dropped) */

struct api_server {
    struct MHD_Daemon *d;
    st_t *st; /* NULL while a follower; read and set atomically */
    const api_tokens_t *tokens;
    const api_ha_t *ha;
    int port;
    char name[64], url[300];
    int busy; /* requests between their first byte and their reply sent (atomic) */
};

typedef struct conn_ctx {
    api_server_t *a; /* whose busy count this request is in */
    char *body;
    size_t n, cap;
    bool too_big;
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

int api_finish(api_req_t *r, int rc, json_t *out, int64_t ticket, const arb_err_t *err,
               int ok_status)
{
    arb_err_t werr = {{0}};

    /* Wait for durability even on failure: the call may have seen state
     * that is not yet durable. */
    if (st_wait(r->st, ticket, &werr) < 0) {
        json_decref(out);
        return api_error(r, 503, "%s", werr.msg);
    }
    if (rc == 0) {
        r->json = out;
        r->status = ok_status;
        return ok_status;
    }
    json_decref(out);
    int status = rc == -EBADMSG                                                   ? 400
                 : rc == -EINVAL                                                  ? 422
                 : rc == -ENOENT                                                  ? 404
                 : rc == -EACCES                                                  ? 403
                 : rc == -ESTALE || rc == -EPERM || rc == -EBUSY || rc == -EEXIST ? 409
                 : rc == -E2BIG                                                   ? 413
                 : rc == -EIO                                                     ? 503
                                                                                  : 500;
    return api_error(r, status, "%s", err->msg[0] ? err->msg : strerror(-rc));
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

static int dispatch(api_server_t *a, api_req_t *r, const char *auth, char *loc, size_t locsz)
{
    const api_route_t *hit = NULL;
    char allow[128] = "";
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
    if (!hit && used)
        return api_error(r, 405, "%s %s: method not allowed; use %s", r->method, r->url, allow);
    if (!hit)
        return api_error(r, 404, "%s: no such endpoint; see docs/api.md", r->url);
    if (strcmp(hit->path, "/healthz") != 0 && strcmp(hit->path, "/v1/leader") != 0) {
        char n[128], u[256];
        int64_t term;
        /* A follower, or a leader whose lease may have run out (it was paused):
         * send the client on rather than answer from memory that may be stale. */
        if (!r->st || (r->ha && r->ha->leader(r->ha->arg, n, sizeof n, u, sizeof u, &term) != 1))
            return to_leader(r, loc, locsz);
    }
    if (hit->roles && a->tokens) {
        const api_token_t *t = NULL;
        if (auth && strncasecmp(auth, "Bearer ", 7) == 0)
            t = api_tokens_find(a->tokens, auth + 7);
        if (!t)
            return api_error(r, 401,
                             "%s: a valid bearer token is required (Authorization: "
                             "Bearer TOKEN; the CLI reads ARBITER_TOKEN)",
                             r->url);
        r->who.role = t->role;
        r->who.team = t->team;
        r->who.name = t->name;
        if (!(hit->roles & t->role))
            return api_error(r, 403, "%s %s: not allowed for role '%s'", r->method, hit->path,
                             api_role_name(t->role));
    }
    return hit->fn(r);
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, api_req_t *r)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;
    char *txt = r->text;
    size_t len = r->textlen;
    const char *ctype = r->ctype ? r->ctype : "application/json";

    if (!txt) {
        txt = r->json ? json_dumps(r->json, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (!txt)
            txt = strdup("{}");
        len = txt ? strlen(txt) : 0;
        if (txt) { /* a trailing newline for people using curl */
            char *t2 = realloc(txt, len + 2);
            if (t2) {
                txt = t2;
                txt[len++] = '\n';
                txt[len] = '\0';
            }
        }
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

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    api_server_t *a = cls;
    conn_ctx_t *cc = *con_cls;
    api_req_t r;
    enum MHD_Result ret;

    (void)version;
    if (!cc) { /* HEADERS */
        cc = calloc(1, sizeof *cc);
        if (!cc)
            return MHD_NO;
        *con_cls = cc;
        cc->a = a;
        __atomic_add_fetch(&a->busy, 1, __ATOMIC_ACQ_REL);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        const char *ex = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");
        unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
        if (len > API_MAX_BODY)
            cc->too_big = true;
        if (!cc->too_big || (len <= API_DRAIN_MAX && !(ex && strcasecmp(ex, "100-continue") == 0)))
            return MHD_YES; /* too big: BODY drops it, DISPATCH answers 413 */
        /* fall to DISPATCH now: answer 413 without reading the body */
    } else if (*upload_size > 0) { /* BODY */
        if (!cc->too_big && cc->n + *upload_size > API_MAX_BODY)
            cc->too_big = true;
        if (!cc->too_big) {
            if (cc->n + *upload_size + 1 > cc->cap) {
                size_t cap = (cc->n + *upload_size + 1) * 2;
                if (cap > API_MAX_BODY + 1)
                    cap = API_MAX_BODY + 1;
                char *b = realloc(cc->body, cap);
                if (!b)
                    return MHD_NO;
                cc->body = b;
                cc->cap = cap;
            }
            memcpy(cc->body + cc->n, upload, *upload_size);
            cc->n += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    /* DISPATCH */
    memset(&r, 0, sizeof r);
    r.conn = conn;
    r.method = method;
    r.url = url;
    r.st = __atomic_load_n(&a->st, __ATOMIC_ACQUIRE);
    r.ha = a->ha;
    r.self_name = a->name;
    r.self_url = a->url;
    r.body = cc->body ? cc->body : "";
    if (cc->body)
        cc->body[cc->n] = '\0';
    r.n = cc->n;
    r.yaml = is_yaml(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"));
    r.who.role = ST_ROLE_ADMIN; /* without tokens: everyone is admin (loopback only) */
    r.who.team = "";
    r.who.name = "local";
    {
        /* The caller's address: where a node's gang rendezvous is reached. */
        static __thread char peer[INET6_ADDRSTRLEN];
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;
        peer[0] = '\0';
        if (sa && sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, peer,
                      sizeof peer);
        else if (sa && sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, peer,
                      sizeof peer);
        r.who.addr = peer[0] ? peer : NULL;
    }
    char loc[2048];
    if (cc->too_big)
        api_error(&r, 413, "request body is larger than %u bytes (1 MiB)", API_MAX_BODY);
    else
        dispatch(a, &r, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"), loc,
                 sizeof loc);
    ret = send_reply(conn, &r);
    json_decref(r.json);
    free(r.text);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    conn_ctx_t *cc = *con_cls;

    (void)cls;
    (void)conn;
    (void)toe;
    if (cc) {
        __atomic_sub_fetch(&cc->a->busy, 1, __ATOMIC_ACQ_REL);
        free(cc->body);
        free(cc);
        *con_cls = NULL;
    }
}

int api_server_start(st_t *s, const api_opts_t *o, api_server_t **out, arb_err_t *err)
{
    api_server_t *a = calloc(1, sizeof *a);
    struct sockaddr_in sin;

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
    a->st = s;
    a->tokens = o->tokens;
    a->ha = o->ha;
    snprintf(a->name, sizeof a->name, "%s", o->name ? o->name : "local");
    a->d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
            MHD_USE_ITC, /* ITC: api_server_stop can quiesce the listener first */
        0, NULL, NULL, handler, a, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
        MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_LISTENING_ADDRESS_REUSE,
        (unsigned)1, MHD_OPTION_END);
    if (!a->d) {
        free(a);
        return arb_errf(err, -EADDRINUSE,
                        "cannot listen on %s:%d (in use, or not an address of this machine)",
                        o->host, o->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(a->d, MHD_DAEMON_INFO_BIND_PORT);
    a->port = di ? di->port : o->port;
    snprintf(a->url, sizeof a->url, "http://%s:%d", o->host, a->port);
    *out = a;
    return 0;
}

void api_server_set_state(api_server_t *a, st_t *s)
{
    __atomic_store_n(&a->st, s, __ATOMIC_RELEASE);
}

int api_server_port(const api_server_t *a)
{
    return a->port;
}

/* Stop accepting, give the requests already in progress up to DRAIN_MS to
 * send their replies (a leader stepping down answers the writes it could
 * not commit with their 503, instead of dropping the connection under
 * them), then close everything. */
#define DRAIN_MS 2000

void api_server_stop(api_server_t *a)
{
    if (!a)
        return;
    MHD_socket ls = MHD_quiesce_daemon(a->d);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    for (int64_t until = arb_mono_ms() + DRAIN_MS;
         __atomic_load_n(&a->busy, __ATOMIC_ACQUIRE) > 0 && arb_mono_ms() < until;)
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    MHD_stop_daemon(a->d);
    free(a);
}
