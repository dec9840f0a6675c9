/*
 * transport_http.c: the http transport row (see transport.h): each report
 * is POST URL/v1/nodes/NAME/report (docs/api.md) over libcurl, with
 * Authorization: Bearer TOKEN when a token is given, on one keep-alive
 * connection (or a connection several emulated nodes share). Over https
 * the controller is checked against --cacert and the node presents its
 * certificate (--cert-file, --key-file: its identity, docs/security.md).
 *
 * The target may list several controllers ("http://a,http://b"): each
 * report goes through src/client/failover.c, which starts at the URL that
 * last answered, moves on after a connect error, a timeout or a 503 (no
 * leader yet), and follows a follower's 307 to the leader re-sending the
 * body. One report makes one pass over the list, inside its time (what is
 * left of the lease), without backoff sleeps; the next heartbeat makes the
 * next pass (and the agent sees SIGTERM in between). So the lease counts
 * time without ANY controller acknowledging, never time without the first
 * URL.
 *
 * What comes back, and what it means for the lease:
 *   2xx            agent_reply_parse: 0 (acknowledged), or -EPROTO when the
 *                  reply does not parse; {"lost": true} is 0 with reply->lost
 *   401, 403       -EACCES: the token is missing, unknown or not an agent's
 *   other 4xx      -EPROTO: the controller refused the report (its message)
 *   5xx            -EIO: the controller failed (a store error: it restarts),
 *                  or every controller said 503 (no leader) in this pass
 *   no connection  -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH or -EIO
 * Only 0 renews the lease.
 *
 * libcurl must have been initialised (curl_global_init) before threads
 * start; `arbiter agent` does it first thing.
 */
#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/transport.h"
#include "client/failover.h"

#define MAX_REPLY (64u << 20) /* a node's assignments are far smaller */

struct agent_http_conn {
    CURL *h;
};

typedef struct http_state {
    agent_http_conn_t *conn;
    bool own;
    fo_urls_t urls;  /* the controllers; remembers the one that last answered */
    char path[1024]; /* /v1/nodes/NAME/report */
    struct curl_slist *hdr;
    char cacert[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
    tls_client_t tls; /* pointing into the three above */
} http_state_t;

agent_http_conn_t *agent_http_conn_new(void)
{
    agent_http_conn_t *c = calloc(1, sizeof *c);

    if (c && !(c->h = curl_easy_init())) {
        free(c);
        c = NULL;
    }
    return c;
}

void agent_http_conn_free(agent_http_conn_t *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->h);
    free(c);
}

static int http_open(const agent_transport_conf_t *c, void **state, arb_err_t *err)
{
    http_state_t *st;
    char *esc = NULL, auth[700];
    CURL *tmp;
    int rc = 0;

    if (c->token && (strlen(c->token) > 512 || strpbrk(c->token, "\r\n \t")))
        return arb_errf(err, -EINVAL, "the token must be one word of at most 512 bytes");
    if (!(st = calloc(1, sizeof *st)))
        return arb_errf(err, -ENOMEM, "out of memory");
    if ((rc = fo_urls_parse(c->target, "--controller", &st->urls, err)) < 0)
        goto out;
    tmp = curl_easy_init();
    esc = tmp ? curl_easy_escape(tmp, c->node, 0) : NULL;
    curl_easy_cleanup(tmp);
    if (!esc ||
        snprintf(st->path, sizeof st->path, "/v1/nodes/%s/report", esc) >= (int)sizeof st->path) {
        rc = arb_errf(err, esc ? -ENAMETOOLONG : -ENOMEM, "--name: too long for a URL");
        goto out;
    }
    st->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    st->hdr = st->hdr ? curl_slist_append(st->hdr, "Expect:") : NULL;
    if (st->hdr && c->token && c->token[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
        st->hdr = curl_slist_append(st->hdr, auth);
    }
    if (!st->hdr) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (c->tls) { /* copied: the conf's strings are the caller's */
        snprintf(st->cacert, sizeof st->cacert, "%s", c->tls->cacert ? c->tls->cacert : "");
        snprintf(st->cert, sizeof st->cert, "%s", c->tls->cert_file ? c->tls->cert_file : "");
        snprintf(st->key, sizeof st->key, "%s", c->tls->key_file ? c->tls->key_file : "");
        st->tls.cacert = st->cacert[0] ? st->cacert : NULL;
        st->tls.cert_file = st->cert[0] ? st->cert : NULL;
        st->tls.key_file = st->key[0] ? st->key : NULL;
    }
    if (c->conn) {
        st->conn = c->conn;
    } else if ((st->conn = agent_http_conn_new())) {
        st->own = true;
    } else {
        rc = arb_errf(err, -ENOMEM, "cannot make a libcurl handle");
        goto out;
    }
    *state = st;
    st = NULL;
out:
    curl_free(esc);
    if (st) {
        curl_slist_free_all(st->hdr);
        free(st);
    }
    return rc;
}

/* The controller's error message in a non-2xx reply, or the body's start. */
static void their_words(const fo_resp_t *r, char *out, size_t n)
{
    json_t *o = r->body ? json_loadb(r->body, r->n, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(json_object_get(o, "error"), "message"));

    snprintf(out, n, "%.300s", m ? m : r->body ? r->body : "(no body)");
    json_decref(o);
}

/* A refusal of the report's Lamport time carries the controller's clock
 * (error.lamport): true, and *out set, when r is one. */
static bool clock_of_refusal(const fo_resp_t *r, uint64_t *out)
{
    json_t *o = r->body ? json_loadb(r->body, r->n, 0, NULL) : NULL;
    json_t *l = json_object_get(json_object_get(o, "error"), "lamport");
    bool yes = json_is_integer(l) && json_integer_value(l) >= 0;

    if (yes)
        *out = (uint64_t)json_integer_value(l);
    json_decref(o);
    return yes;
}

static int http_report(void *state, const char *body, size_t len, int64_t timeout_ns,
                       agent_reply_t *reply, arb_err_t *err)
{
    http_state_t *st = state;
    char words[400];
    fo_resp_t r;
    int64_t ms = timeout_ns / 1000000;
    int rc;

    if (ms < 50)
        ms = 50;
    /* One pass over the controllers, no backoff sleeps: the heartbeat loop
     * is the retry loop (and sees SIGTERM between reports). Each try may
     * take its share of the time left, so that a controller that accepts
     * but never answers cannot eat the others' turn. */
    int64_t per = st->urls.n > 1 ? ms / st->urls.n : ms;
    fo_req_t rq = {.method = "POST",
                   .path = st->path,
                   .body = body,
                   .n = len,
                   .hdr = st->hdr,
                   .connect_ms = per < 250 ? 250 : per,
                   .attempt_ms = per < 250 ? 250 : per,
                   .budget_ms = 0,
                   .hard_budget = true,
                   .max_reply = MAX_REPLY,
                   .tls = &st->tls};
    if ((rc = fo_do(&st->urls, st->conn->h, &rq, &r, err)) < 0)
        return rc;
    if (r.status >= 200 && r.status < 300) {
        arb_err_t perr = {{0}};
        if ((rc = agent_reply_parse(r.body ? r.body : "", r.n, reply, &perr)) < 0)
            rc = arb_errf(err, -EPROTO, "the controller's reply: %s", perr.msg);
        goto out;
    }
    their_words(&r, words, sizeof words);
    if (r.status == 422 && clock_of_refusal(&r, &reply->lamport)) {
        rc = arb_errf(err, -ERANGE, "%s: %ld: %s", r.url, r.status, words);
        goto out;
    }
    if (r.status == 401 || r.status == 403)
        rc = arb_errf(err, -EACCES, "%s: %ld: %s (--token-file: an agent token)", r.url, r.status,
                      words);
    else if (r.status >= 500)
        rc = arb_errf(err, -EIO, "%s: %ld: %s", r.url, r.status, words);
    else
        rc = arb_errf(err, -EPROTO, "%s: %ld: %s", r.url, r.status, words);
out:
    free(r.body);
    return rc;
}

static void http_close(void *state)
{
    http_state_t *st = state;

    if (!st)
        return;
    if (st->own)
        agent_http_conn_free(st->conn);
    curl_slist_free_all(st->hdr);
    free(st);
}

const agent_transport_ops_t agent_transport_http = {
    .name = "http",
    .summary = "POST each report to the controller (--controller URL[,URL...]), apply its reply",
    .open = http_open,
    .report = http_report,
    .close = http_close,
};
