/*
 * failover.c: one request to whichever of several controllers leads (see
 * failover.h for the contract). The loop, per request:
 *
 *   for each pass (until the budget is spent; one pass when it is 0):
 *     for each URL, starting at the one that last answered:
 *       send; 307/308 -> send again to Location (same method, headers,
 *                        body), at most FO_MAX_REDIRECTS times
 *             connect error, timeout, 503 -> next URL
 *             anything else -> the answer: remember the URL, return
 *     back off (100 ms doubling to 1 s, or Retry-After up to 2 s)
 *
 * Time is the monotonic clock: a wall-clock step cannot stretch or cut the
 * budget. No state outside the caller's fo_urls_t and CURL handle.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "client/failover.h"
#include "util/buf.h"
#include "util/mtime.h"

#define FO_DEFAULT_MAX_REPLY (64u << 20)

typedef struct fo_buf {
    arb_buf_t body;   /* its max: the largest reply taken */
    bool too_big;     /* the reply passed body.max (else a full body is out of memory) */
    int64_t retry_ms; /* Retry-After of this reply; -1 none */
} fo_buf_t;

static int64_t now_ms(void)
{
    return arb_mono_ms();
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (ms > 0 && nanosleep(&ts, &ts) != 0)
        ;
}

int fo_urls_parse(const char *list, const char *what, fo_urls_t *u, arb_err_t *err)
{
    const char *p = list;

    memset(u, 0, sizeof *u);
    if (!list || !*list)
        return arb_errf(err, -EINVAL,
                        "%s: empty; give the controller's URL, e.g. "
                        "http://127.0.0.1:7070 (several: comma-separated)",
                        what);
    while (*p) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        while (len && isspace((unsigned char)*p))
            p++, len--;
        while (len && (isspace((unsigned char)p[len - 1]) || p[len - 1] == '/'))
            len--;
        if (len == 0)
            return arb_errf(err, -EINVAL,
                            "%s '%s': an empty URL in the list; give "
                            "http://HOST:PORT[,http://HOST:PORT...]",
                            what, list);
        if (u->n == FO_MAX_URLS)
            return arb_errf(err, -EINVAL, "%s '%s': more than %d URLs", what, list, FO_MAX_URLS);
        if (len >= FO_URL_MAX)
            return arb_errf(err, -EINVAL, "%s: URL %d is longer than %d bytes", what, u->n + 1,
                            FO_URL_MAX - 1);
        memcpy(u->url[u->n], p, len);
        u->url[u->n][len] = '\0';
        if ((strncmp(u->url[u->n], "http://", 7) != 0 || len == 7) &&
            (strncmp(u->url[u->n], "https://", 8) != 0 || len == 8))
            return arb_errf(err, -EINVAL,
                            "%s: '%s' is not an http:// or https:// URL; give e.g. "
                            "http://127.0.0.1:7070",
                            what, u->url[u->n]);
        if (strpbrk(u->url[u->n], " \t\r\n?#"))
            return arb_errf(err, -EINVAL,
                            "%s: '%s': a base URL has no spaces, query or "
                            "fragment",
                            what, u->url[u->n]);
        u->n++;
        if (!q)
            break;
        p = q + 1;
        if (!*p)
            return arb_errf(err, -EINVAL, "%s '%s': a trailing comma; drop it", what, list);
    }
    return 0;
}

int64_t fo_retry_after_ms(const char *v)
{
    char *end;
    long s;

    while (*v == ' ' || *v == '\t')
        v++;
    if (!isdigit((unsigned char)*v))
        return -1;
    s = strtol(v, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
        end++;
    if (*end || s < 0 || s > 86400)
        return -1;
    return (int64_t)s * 1000;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
    fo_buf_t *b = arg;
    size_t k = size * nmemb;

    if (b->body.len + k > b->body.max) {
        b->too_big = true;
        return 0;
    }
    return arb_buf_write_cb(ptr, size, nmemb, &b->body);
}

static size_t on_header(char *ptr, size_t size, size_t nitems, void *arg)
{
    fo_buf_t *b = arg;
    size_t k = size * nitems;
    char v[32];

    if (k > 12 && k < 12 + sizeof v && strncasecmp(ptr, "Retry-After:", 12) == 0) {
        memcpy(v, ptr + 12, k - 12);
        v[k - 12] = '\0';
        b->retry_ms = fo_retry_after_ms(v);
    }
    return k;
}

static void buf_reset(fo_buf_t *b)
{
    arb_buf_free(&b->body);
    b->too_big = false;
    b->retry_ms = -1;
}

static CURLcode try_once(CURL *h, const char *url, const fo_req_t *rq, int64_t connect_ms,
                         int64_t total_ms, fo_buf_t *b, char *cerr, long *status)
{
    CURLcode cc;

    curl_easy_reset(h); /* keeps the connection cache: keep-alive survives */
    cerr[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    if (rq->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->n);
    } else if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "DELETE") != 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    if (rq->hdr)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, rq->hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L); /* followed by hand: see the top */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)total_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    tls_client_apply(rq->tls, h);
    *status = 0;
    cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    return cc;
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
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
        return -EACCES; /* TLS: not the cluster's controller, or our own files */
    default:
        return -EIO;
    }
}

/* The list entry url starts with (followed by '/' or its end), or -1. */
static int list_index(const fo_urls_t *u, const char *url)
{
    for (int i = 0; i < u->n; i++) {
        size_t l = strlen(u->url[i]);
        if (strncmp(url, u->url[i], l) == 0 && (url[l] == '/' || url[l] == '\0' || url[l] == '?'))
            return i;
    }
    return -1;
}

int fo_do(fo_urls_t *u, CURL *h, const fo_req_t *rq, fo_resp_t *rs, arb_err_t *err)
{
    fo_buf_t b = {.body.max = rq->max_reply ? rq->max_reply : FO_DEFAULT_MAX_REPLY, .retry_ms = -1};
    char cerr[CURL_ERROR_SIZE], url[sizeof rs->url], last[700] = "";
    int64_t t0 = now_ms(), deadline = t0 + (rq->budget_ms > 0 ? rq->budget_ms : 0);
    int64_t connect_ms = rq->connect_ms > 0 ? rq->connect_ms : 2000;
    int64_t attempt_ms = rq->attempt_ms > 0 ? rq->attempt_ms : 120000;
    int64_t backoff = 100, retry_ms = -1;
    int last_rc = -EIO, start = u->cur >= 0 && u->cur < u->n ? u->cur : 0;
    char *busy = NULL; /* the last 503's body */
    size_t busy_n = 0;

    memset(rs, 0, sizeof *rs);
    for (int pass = 0;; pass++) {
        for (int k = 0; k < u->n; k++) {
            int i = (start + k) % u->n;
            int64_t left = rq->budget_ms > 0 ? deadline - now_ms() : attempt_ms;
            if (rq->budget_ms > 0 && left <= 0 && (rq->hard_budget ? rs->tries > 0 : pass > 0))
                goto spent;
            if (left < 100)
                left = 100;
            snprintf(url, sizeof url, "%s%s", u->url[i], rq->path);
            for (int redir = 0;; redir++) {
                long status;
                int64_t tot = rq->hard_budget && left < attempt_ms ? left : attempt_ms;
                int64_t con = connect_ms < tot ? connect_ms : tot;
                buf_reset(&b);
                CURLcode cc = try_once(h, url, rq, con, tot, &b, cerr, &status);
                rs->tries++;
                snprintf(rs->url, sizeof rs->url, "%s", url);
                if (cc != CURLE_OK) {
                    last_rc = b.too_big ? -EIO : map_curl(cc);
                    snprintf(last, sizeof last, "%.200s: %.240s%s", url,
                             b.too_big ? "reply too large"
                             : cerr[0] ? cerr
                                       : curl_easy_strerror(cc),
                             last_rc == -EACCES ? " (TLS: the cluster CA is --cacert or "
                                                  "ARBITER_CACERT; a client certificate "
                                                  "--cert-file or ARBITER_CERT_FILE)"
                                                : "");
                    break;
                }
                if (status == 307 || status == 308) {
                    char *loc = NULL;
                    curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc);
                    if (!loc || redir == FO_MAX_REDIRECTS) {
                        last_rc = -EIO;
                        snprintf(last, sizeof last, "%.200s: %.300s", url,
                                 loc ? "redirected too many times (a redirect loop between "
                                       "controllers?)"
                                     : "a redirect without Location");
                        break;
                    }
                    snprintf(url, sizeof url, "%s", loc);
                    rs->redirects++;
                    continue;
                }
                if (status == 503) {
                    free(busy);
                    busy = b.body.p; /* the body is kept: NULL when empty */
                    busy_n = b.body.len;
                    b.body = (arb_buf_t){.max = b.body.max};
                    retry_ms = b.retry_ms;
                    last_rc = -EAGAIN;
                    snprintf(last, sizeof last,
                             "%.200s: 503 (no leader yet, or the controller "
                             "failed)",
                             url);
                    break;
                }
                /* An answer. */
                int j = list_index(u, url);
                u->cur = j >= 0 ? j : i;
                rs->status = status;
                rs->body = b.body.p;
                rs->n = b.body.len;
                free(busy);
                return 0;
            }
        }
        if (rq->budget_ms <= 0 || now_ms() >= deadline)
            break;
        {
            int64_t pause = retry_ms >= 0 ? (retry_ms < 2000 ? retry_ms : 2000) : backoff;
            int64_t left = deadline - now_ms();
            if (pause > left)
                pause = left;
            sleep_ms(pause);
            backoff = backoff * 2 < 1000 ? backoff * 2 : 1000;
            retry_ms = -1;
        }
    }
spent:
    buf_reset(&b);
    if (busy || last_rc == -EAGAIN) {
        rs->status = 503;
        rs->body = busy;
        rs->n = busy_n;
        return 0;
    }
    return arb_errf(err, last_rc, "no controller answered (%d URL%s, %d tr%s in %.1f s); last: %s",
                    u->n, u->n == 1 ? "" : "s", rs->tries, rs->tries == 1 ? "y" : "ies",
                    (double)(now_ms() - t0) / 1000.0, last);
}
