/*
 * transport_http.c: the http transport row (see transport.h): each report
 * is POST TARGET/v1/nodes/NAME/report (docs/api.md) over libcurl, with
 * Authorization: Bearer TOKEN when a token is given, on one keep-alive
 * connection (or a connection several emulated nodes share).
 *
 * What comes back, and what it means for the lease:
 *   2xx            agent_reply_parse: 0 (acknowledged), or -EPROTO when the
 *                  reply does not parse; {"lost": true} is 0 with reply->lost
 *   401, 403       -EACCES: the token is missing, unknown or not an agent's
 *   other 4xx      -EPROTO: the controller refused the report (its message)
 *   5xx            -EIO: the controller failed (a store error: it restarts)
 *   no connection  -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH or -EIO
 * Only 0 renews the lease.
 *
 * libcurl must have been initialised (curl_global_init) before threads
 * start; `arbiter agent` does it first thing.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/transport.h"

#define MAX_REPLY (64u << 20) /* a node's assignments are far smaller */

struct agent_http_conn {
    CURL *h;
};

typedef struct http_state {
    agent_http_conn_t *conn;
    bool own;
    char url[2048];
    struct curl_slist *hdr;
} http_state_t;

typedef struct rbuf {
    char *p;
    size_t n;
    bool too_big;
} rbuf_t;

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

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
    rbuf_t *b = arg;
    size_t k = size * nmemb;
    char *q;

    if (b->n + k > MAX_REPLY) {
        b->too_big = true;
        return 0;
    }
    if (!(q = realloc(b->p, b->n + k + 1)))
        return 0;
    b->p = q;
    memcpy(b->p + b->n, ptr, k);
    b->n += k;
    b->p[b->n] = '\0';
    return k;
}

static int http_open(const agent_transport_conf_t *c, void **state, arb_err_t *err)
{
    http_state_t *st;
    char *esc = NULL, auth[700];
    size_t tl;
    CURL *tmp;
    int rc = 0;

    if (!c->target ||
        (strncmp(c->target, "http://", 7) != 0 && strncmp(c->target, "https://", 8) != 0))
        return arb_errf(err, -EINVAL,
                        "--controller '%s': give the controller's URL, e.g. "
                        "http://127.0.0.1:7070",
                        c->target ? c->target : "");
    if (c->token && (strlen(c->token) > 512 || strpbrk(c->token, "\r\n \t")))
        return arb_errf(err, -EINVAL, "the token must be one word of at most 512 bytes");
    if (!(st = calloc(1, sizeof *st)))
        return arb_errf(err, -ENOMEM, "out of memory");
    tmp = curl_easy_init();
    esc = tmp ? curl_easy_escape(tmp, c->node, 0) : NULL;
    curl_easy_cleanup(tmp);
    tl = strlen(c->target);
    while (tl > 0 && c->target[tl - 1] == '/')
        tl--;
    if (!esc || snprintf(st->url, sizeof st->url, "%.*s/v1/nodes/%s/report", (int)tl, c->target,
                         esc) >= (int)sizeof st->url) {
        rc = arb_errf(err, esc ? -ENAMETOOLONG : -ENOMEM, "--controller: URL too long");
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
static void their_words(const rbuf_t *b, char *out, size_t n)
{
    json_t *o = b->p ? json_loadb(b->p, b->n, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(json_object_get(o, "error"), "message"));

    snprintf(out, n, "%.300s", m ? m : b->p ? b->p : "(no body)");
    json_decref(o);
}

static int map_curl(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
        return -EHOSTUNREACH;
    default:
        return -EIO;
    }
}

static int http_report(void *state, const char *body, size_t len, int64_t timeout_ns,
                       agent_reply_t *reply, arb_err_t *err)
{
    http_state_t *st = state;
    CURL *h = st->conn->h;
    char cerr[CURL_ERROR_SIZE] = "", words[400];
    rbuf_t b = {0};
    long status = 0, ms = (long)(timeout_ns / 1000000);
    CURLcode cc;
    int rc;

    if (ms < 50)
        ms = 50;
    curl_easy_reset(h); /* keeps the connection cache: keep-alive survives */
    curl_easy_setopt(h, CURLOPT_URL, st->url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, st->hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        rc =
            arb_errf(err, map_curl(cc), "%s: %s", st->url, cerr[0] ? cerr : curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
        arb_err_t perr = {{0}};
        if ((rc = agent_reply_parse(b.p ? b.p : "", b.n, reply, &perr)) < 0)
            rc = arb_errf(err, -EPROTO, "the controller's reply: %s", perr.msg);
        goto out;
    }
    their_words(&b, words, sizeof words);
    if (status == 401 || status == 403)
        rc = arb_errf(err, -EACCES, "%ld: %s (--token-file: an agent token)", status, words);
    else if (status >= 500)
        rc = arb_errf(err, -EIO, "%ld: %s", status, words);
    else
        rc = arb_errf(err, -EPROTO, "%ld: %s", status, words);
out:
    free(b.p);
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
    .summary = "POST each report to the controller (--controller URL), apply its reply",
    .open = http_open,
    .report = http_report,
    .close = http_close,
};
