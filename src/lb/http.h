/*
 * http.h: the HTTP/1.x a proxy needs, and no more: parse a request or
 * response head in place (nothing is copied; fields point into the buffer),
 * and find where a body ends (Content-Length, chunked, or at close) so the
 * proxy can stream bytes through without buffering a whole message.
 *
 * Strict where leniency lets requests be smuggled past a backend: lines end
 * in CRLF, no folded headers, no spaces before the colon, Content-Length and
 * Transfer-Encoding together are refused in a request, as are two different
 * Content-Lengths and any transfer coding but chunked.
 *
 * Return convention: arbiter.h; http_parse_* return the head's length (> 0)
 * when complete, 0 when more bytes are needed, -EINVAL when malformed.
 */
#ifndef ARB_LB_HTTP_H
#define ARB_LB_HTTP_H

#include <sys/types.h>

#include "arbiter/arbiter.h"

typedef enum http_method {
    HTTP_OTHER = 0,
    HTTP_GET,
    HTTP_HEAD,
    HTTP_POST,
    HTTP_PUT,
    HTTP_DELETE,
    HTTP_OPTIONS,
    HTTP_TRACE,
    HTTP_PATCH,
    HTTP_CONNECT
} http_method_t;

/* Which header values to capture besides the framing ones. */
typedef struct http_want {
    const char *hdr;    /* e.g. the hash header ("X-User"); NULL: none */
    const char *cookie; /* a cookie's name in Cookie:; NULL: none */
    const char *tenant; /* the tenant header ("X-Tenant"); NULL: none */
    bool auth;          /* capture Authorization (the tenant when no tenant header) */
} http_want_t;

typedef struct http_head {
    http_method_t method; /* requests */
    const char *mstr;     /* method text */
    size_t mlen;
    const char *target; /* request target */
    size_t tlen;
    int minor;       /* HTTP/1.<minor> */
    int status;      /* responses */
    int64_t clen;    /* Content-Length, -1 when absent */
    bool chunked;    /* Transfer-Encoding: chunked */
    bool te_other;   /* a Transfer-Encoding that is not chunked */
    bool conn_close; /* Connection: close */
    bool conn_keep;  /* Connection: keep-alive */
    bool upgrade;    /* Connection: upgrade */
    const char *key; /* the wanted header's, or cookie's, value; NULL */
    size_t klen;
    const char *load; /* X-Arbiter-Load value; NULL */
    size_t llen;
    const char *tenant; /* the wanted tenant header's value; NULL */
    size_t tnlen;
    const char *auth; /* Authorization's value when wanted; NULL */
    size_t alen;
    bool expect_continue; /* Expect: 100-continue */
    size_t len;           /* head bytes, final CRLF CRLF included */
} http_head_t;

int http_parse_request(const char *buf, size_t n, const http_want_t *want, http_head_t *h);
int http_parse_response(const char *buf, size_t n, http_head_t *h);

/* Does the request want the connection kept after its response? */
bool http_keepalive(const http_head_t *req);
/* Is the method safe to send twice (RFC 9110 9.2.2)? */
bool http_idempotent(http_method_t m);

/* Body framing: where a message's body ends. */
typedef enum http_body_mode {
    HTTP_BODY_NONE = 0, /* no body: the message ends with its head */
    HTTP_BODY_LENGTH,   /* Content-Length bytes */
    HTTP_BODY_CHUNKED,  /* chunked; ends after the last chunk's trailers */
    HTTP_BODY_CLOSE     /* until the sender closes (responses, tunnels) */
} http_body_mode_t;

typedef struct http_body {
    http_body_mode_t mode;
    uint64_t left; /* LENGTH: bytes to go; CHUNKED: data bytes left in this chunk */
    int cs;        /* chunked parser state */
    int digits;    /* hex digits in the size line so far */
    bool done;
} http_body_t;

/* Framing of a request's body (after a successful parse). */
void http_body_request(http_body_t *b, const http_head_t *req);
/* Framing of a response's body; head_req: the request was HEAD. */
void http_body_response(http_body_t *b, const http_head_t *resp, bool head_req);
/* Feed n bytes that follow what was fed before. Returns how many of them
 * belong to the body (all of them, or fewer when it ended inside), or
 * -EINVAL on a malformed chunk. b->done tells when the body is complete. */
ssize_t http_body_feed(http_body_t *b, const char *p, size_t n);

/* The data of a complete, valid chunked body p[0..n) (http_body_feed said
 * so) into out (room for n bytes; out == p works, in place): returns the
 * data's length. */
size_t http_dechunk(const char *p, size_t n, char *out);

/* Parse "q=3,gpu=0.82,inflight=5" (X-Arbiter-Load) into its fields; the
 * ones absent stay as they were. Returns 0, or -EINVAL. */
int http_parse_load(const char *s, size_t n, double *queue, double *gpu, double *inflight);

#endif
