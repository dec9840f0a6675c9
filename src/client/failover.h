/*
 * failover.h: how every client of the controller (the CLI, agents, the load
 * balancer's controller source) reaches the leader when there are several
 * controllers (issue 7, high availability). One request goes through
 * fo_do(), which owns the whole contract:
 *
 *   - a list of base URLs ("http://a:7070,http://b:7070"), parsed once by
 *     fo_urls_parse; the list remembers the URL that last answered (cur)
 *     and starts there next time;
 *   - a connect error, a timeout or a 503 (no leader yet; Retry-After
 *     honoured, capped) moves on to the next URL; after a full pass with no
 *     answer it backs off (100 ms, doubling to 1 s) and goes round again
 *     until the request's budget is spent (the first pass always visits
 *     every URL, unless hard_budget);
 *   - a 307 or 308 is followed by hand (libcurl is not asked to: it would
 *     turn some re-sent POSTs into GETs): the same method, headers and body
 *     go to CURLINFO_REDIRECT_URL, at most FO_MAX_REDIRECTS times; when the
 *     leader's URL is one of the list, the list remembers it.
 *
 * Any other status (2xx, 4xx, 500) is an answer and is returned as it is:
 * the caller decides what it means.
 *
 * Return convention (arbiter.h): 0 when a controller answered (rs->status
 * set; a last 503 after the budget is also returned as an answer), else
 * -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH or -EIO with text naming the
 * URLs tried. Nothing here keeps global state: the caller owns the fo_urls_t
 * and the libcurl handle (which keeps its connection cache across calls).
 */
#ifndef ARB_CLIENT_FAILOVER_H
#define ARB_CLIENT_FAILOVER_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arbiter/arbiter.h"
#include "tls/tls.h"

#define FO_MAX_URLS 8
#define FO_URL_MAX 256
#define FO_MAX_REDIRECTS 2

typedef struct fo_urls {
    int n;                             /* 1..FO_MAX_URLS */
    int cur;                           /* the one that last answered: tried first */
    char url[FO_MAX_URLS][FO_URL_MAX]; /* base URLs, no trailing '/' */
} fo_urls_t;

/* Parse a comma-separated list of http:// or https:// base URLs (spaces
 * around the commas allowed, trailing '/' dropped). what names the option
 * in messages ("ARBITER_URL", "--controller"). */
int fo_urls_parse(const char *list, const char *what, fo_urls_t *u, arb_err_t *err);

typedef struct fo_req {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* "/v1/jobs?state=active": appended to a base URL */
    const char *body;   /* NULL: no body */
    size_t n;
    struct curl_slist *hdr;  /* borrowed; sent on every try */
    int64_t connect_ms;      /* one try's connect limit (0: 2000) */
    int64_t attempt_ms;      /* one try's whole limit (0: 120000) */
    int64_t budget_ms;       /* keep trying this long in all (0: one pass over the URLs) */
    bool hard_budget;        /* true: no try runs past the budget (an agent's lease);
                                false: a try begun within it may take its attempt_ms
                                (a CLI's long-poll) */
    size_t max_reply;        /* 0: 64 MiB */
    const tls_client_t *tls; /* https: the CA to check the controller with, a client
                                certificate to present (NULL: libcurl's defaults) */
    const bool *cancel;      /* set (atomically) by another thread: the try ends within
                                about a second (-EIO); NULL: none */
} fo_req_t;

typedef struct fo_resp {
    long status; /* the answer's HTTP status; 0: none */
    char *body;  /* malloc'd, NUL-terminated (free it); NULL when empty */
    size_t n;
    int tries;                  /* requests sent, redirects included */
    int redirects;              /* 307/308 followed */
    char url[FO_URL_MAX + 512]; /* the URL that answered, or the last one tried */
} fo_resp_t;

/* One request with failover (see above). h is reset before each try, so
 * its connection cache survives. rs is the caller's; free rs->body. */
int fo_do(fo_urls_t *u, CURL *h, const fo_req_t *rq, fo_resp_t *rs, arb_err_t *err);

/* Parse a Retry-After value in seconds (the HTTP-date form is not used by
 * the controller): milliseconds, or -1 when it is not a number. */
int64_t fo_retry_after_ms(const char *v);

#endif
