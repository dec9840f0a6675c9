/*
 * http.c: HTTP/1.x head parsing and body framing for the proxy; see http.h.
 * Everything works in place on the caller's buffer.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lb/http.h"

/* RFC 9110 tchar. */
static bool tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool ieq(const char *a, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(a, lit, n) == 0;
}

static const struct {
    const char *s;
    http_method_t m;
} methods[] = {
    {"GET", HTTP_GET},     {"HEAD", HTTP_HEAD},     {"POST", HTTP_POST},
    {"PUT", HTTP_PUT},     {"DELETE", HTTP_DELETE}, {"OPTIONS", HTTP_OPTIONS},
    {"TRACE", HTTP_TRACE}, {"PATCH", HTTP_PATCH},   {"CONNECT", HTTP_CONNECT},
};

bool http_idempotent(http_method_t m)
{
    return m == HTTP_GET || m == HTTP_HEAD || m == HTTP_PUT || m == HTTP_DELETE ||
           m == HTTP_OPTIONS || m == HTTP_TRACE;
}

bool http_keepalive(const http_head_t *req)
{
    if (req->conn_close)
        return false;
    return req->minor >= 1 || req->conn_keep;
}

/* Walk a comma-separated list; calls back per trimmed element. */
typedef void (*elem_fn)(const char *e, size_t n, void *arg);
static void each_elem(const char *v, size_t n, elem_fn fn, void *arg)
{
    size_t i = 0;
    while (i < n) {
        size_t s, e;
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        s = i;
        while (i < n && v[i] != ',')
            i++;
        e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e > s)
            fn(v + s, e - s, arg);
    }
}

static void conn_elem(const char *e, size_t n, void *arg)
{
    http_head_t *h = arg;
    if (ieq(e, n, "close"))
        h->conn_close = true;
    else if (ieq(e, n, "keep-alive"))
        h->conn_keep = true;
    else if (ieq(e, n, "upgrade"))
        h->upgrade = true;
}

/* Transfer-Encoding: chunked must be the last coding; anything else marks
 * te_other (a request with it is refused; a response is read to close). */
typedef struct te_st {
    int n;
    bool last_chunked, other;
} te_st_t;
static void te_elem(const char *e, size_t n, void *arg)
{
    te_st_t *t = arg;
    t->n++;
    if (ieq(e, n, "chunked")) {
        t->other = t->other || t->last_chunked; /* chunked twice */
        t->last_chunked = true;
    } else {
        t->last_chunked = false;
        t->other = true;
    }
}

/* "a=1; b=2": the value of cookie `name`. */
static bool find_cookie(const char *v, size_t n, const char *name, const char **out, size_t *olen)
{
    size_t nl = strlen(name), i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == ';'))
            i++;
        size_t s = i;
        while (i < n && v[i] != ';')
            i++;
        if (i - s > nl && v[s + nl] == '=' && memcmp(v + s, name, nl) == 0) {
            *out = v + s + nl + 1;
            *olen = i - s - nl - 1;
            return true;
        }
    }
    return false;
}

/* Parse header lines from p (just after the start line) to end (the final
 * CRLF CRLF's last byte + 1). */
static int parse_fields(const char *p, const char *end, bool request, const http_want_t *want,
                        http_head_t *h)
{
    te_st_t te = {0};
    bool have_cl = false;

    while (p < end) {
        const char *name = p, *colon, *v, *ve, *eol;
        if (p[0] == '\r' && p + 1 < end && p[1] == '\n')
            break; /* the empty line */
        while (p < end && tchar((unsigned char)*p))
            p++;
        if (p == name || p >= end || *p != ':')
            return -EINVAL; /* empty name, space before colon, folding, junk */
        colon = p++;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        v = p;
        while (p < end && *p != '\r') {
            unsigned char c = (unsigned char)*p;
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return -EINVAL;
            p++;
        }
        if (p + 1 >= end || p[1] != '\n')
            return -EINVAL;
        eol = p;
        ve = eol;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        p = eol + 2;
        size_t nl = (size_t)(colon - name), vl = (size_t)(ve - v);

        if (ieq(name, nl, "content-length")) {
            int64_t x = 0;
            if (vl == 0 || vl > 18)
                return -EINVAL;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return -EINVAL;
                x = x * 10 + (v[i] - '0');
            }
            if (have_cl && x != h->clen)
                return -EINVAL;
            have_cl = true;
            h->clen = x;
        } else if (ieq(name, nl, "transfer-encoding")) {
            each_elem(v, vl, te_elem, &te);
        } else if (ieq(name, nl, "connection")) {
            each_elem(v, vl, conn_elem, h);
        } else if (!request && ieq(name, nl, "x-arbiter-load")) {
            h->load = v;
            h->llen = vl;
        } else if (request && ieq(name, nl, "expect")) {
            h->expect_continue = ieq(v, vl, "100-continue");
        } else if (request && want && want->tenant && !h->tenant && ieq(name, nl, want->tenant)) {
            h->tenant = v;
            h->tnlen = vl;
            if (want->hdr && !h->key && ieq(name, nl, want->hdr)) {
                h->key = v;
                h->klen = vl;
            }
        } else if (request && want && want->auth && !h->auth && ieq(name, nl, "authorization")) {
            h->auth = v;
            h->alen = vl;
            if (want->hdr && !h->key && ieq(name, nl, want->hdr)) {
                h->key = v;
                h->klen = vl;
            }
        } else if (request && want && want->hdr && !h->key && ieq(name, nl, want->hdr)) {
            h->key = v;
            h->klen = vl;
        } else if (request && want && want->cookie && !h->key && ieq(name, nl, "cookie")) {
            find_cookie(v, vl, want->cookie, &h->key, &h->klen);
        }
    }
    if (te.n) {
        h->chunked = te.last_chunked && !te.other;
        h->te_other = !h->chunked;
        if (request && (have_cl || h->te_other || h->minor == 0))
            return -EINVAL; /* the smuggling shapes */
        if (!request && have_cl)
            h->clen = -1; /* Transfer-Encoding wins (RFC 9112 6.3) */
    }
    return 0;
}

/* A bare LF (no CR before it) in buf[0..n): a head this parser would never
 * see end (it waits for CRLF CRLF), so it is refused at once instead. */
static bool bare_lf(const char *buf, size_t n)
{
    for (const char *p = memchr(buf, '\n', n); p;
         p = memchr(p + 1, '\n', n - (size_t)(p + 1 - buf)))
        if (p == buf || p[-1] != '\r')
            return true;
    return false;
}

static void head_reset(http_head_t *h)
{
    memset(h, 0, sizeof *h);
    h->clen = -1;
}

int http_parse_request(const char *buf, size_t n, const http_want_t *want, http_head_t *h)
{
    const char *end, *p = buf, *lend;
    int rc;

    head_reset(h);
    end = memmem(buf, n, "\r\n\r\n", 4);
    if (bare_lf(buf, end ? (size_t)(end - buf) + 4 : n))
        return -EINVAL; /* "GET / HTTP/1.1\n": never waited on */
    if (!end)
        return 0;
    end += 4;
    lend = memchr(buf, '\r', (size_t)(end - buf));
    /* METHOD SP target SP HTTP/1.d CRLF */
    while (p < lend && tchar((unsigned char)*p))
        p++;
    if (p == buf || p >= lend || *p != ' ')
        return -EINVAL;
    h->mstr = buf;
    h->mlen = (size_t)(p - buf);
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strlen(methods[i].s) == h->mlen && memcmp(methods[i].s, buf, h->mlen) == 0)
            h->method = methods[i].m;
    h->target = ++p;
    while (p < lend && (unsigned char)*p > ' ' && *p != 0x7f)
        p++;
    h->tlen = (size_t)(p - h->target);
    if (h->tlen == 0 || lend - p != 9 || memcmp(p, " HTTP/1.", 8) != 0 || p[8] < '0' || p[8] > '9')
        return -EINVAL;
    h->minor = p[8] - '0';
    if (lend[1] != '\n')
        return -EINVAL;
    rc = parse_fields(lend + 2, end, true, want, h);
    if (rc < 0)
        return rc;
    h->len = (size_t)(end - buf);
    return (int)h->len;
}

int http_parse_response(const char *buf, size_t n, http_head_t *h)
{
    const char *end, *lend;
    int rc;

    head_reset(h);
    end = memmem(buf, n, "\r\n\r\n", 4);
    if (bare_lf(buf, end ? (size_t)(end - buf) + 4 : n))
        return -EINVAL;
    if (!end)
        return 0;
    end += 4;
    lend = memchr(buf, '\r', (size_t)(end - buf));
    /* HTTP/1.d SP 3DIGIT [SP reason] CRLF */
    if (lend - buf < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[7] < '0' || buf[7] > '9' ||
        buf[8] != ' ')
        return -EINVAL;
    h->minor = buf[7] - '0';
    for (int i = 9; i < 12; i++)
        if (buf[i] < '0' || buf[i] > '9')
            return -EINVAL;
    h->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    if (lend - buf > 12 && buf[12] != ' ')
        return -EINVAL;
    if (lend[1] != '\n')
        return -EINVAL;
    rc = parse_fields(lend + 2, end, false, NULL, h);
    if (rc < 0)
        return rc;
    h->len = (size_t)(end - buf);
    return (int)h->len;
}

void http_body_request(http_body_t *b, const http_head_t *req)
{
    memset(b, 0, sizeof *b);
    if (req->chunked) {
        b->mode = HTTP_BODY_CHUNKED;
    } else if (req->clen > 0) {
        b->mode = HTTP_BODY_LENGTH;
        b->left = (uint64_t)req->clen;
    } else {
        b->mode = HTTP_BODY_NONE;
        b->done = true;
    }
}

void http_body_response(http_body_t *b, const http_head_t *resp, bool head_req)
{
    memset(b, 0, sizeof *b);
    if (head_req || (resp->status >= 100 && resp->status < 200) || resp->status == 204 ||
        resp->status == 304) {
        b->mode = HTTP_BODY_NONE;
        b->done = true;
    } else if (resp->chunked) {
        b->mode = HTTP_BODY_CHUNKED;
    } else if (resp->te_other || resp->clen < 0) {
        b->mode = HTTP_BODY_CLOSE;
    } else if (resp->clen > 0) {
        b->mode = HTTP_BODY_LENGTH;
        b->left = (uint64_t)resp->clen;
    } else {
        b->mode = HTTP_BODY_NONE;
        b->done = true;
    }
}

enum {
    CS_SIZE = 0,
    CS_EXT,
    CS_SIZE_LF,
    CS_DATA,
    CS_DATA_CR,
    CS_DATA_LF,
    CS_TR_START,
    CS_TR_LINE,
    CS_TR_LF,
    CS_END_LF
};

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

ssize_t http_body_feed(http_body_t *b, const char *p, size_t n)
{
    size_t i = 0;

    if (b->done)
        return 0;
    switch (b->mode) {
    case HTTP_BODY_NONE:
        b->done = true;
        return 0;
    case HTTP_BODY_CLOSE:
        return (ssize_t)n;
    case HTTP_BODY_LENGTH:
        if (n >= b->left) {
            i = (size_t)b->left;
            b->left = 0;
            b->done = true;
            return (ssize_t)i;
        }
        b->left -= n;
        return (ssize_t)n;
    case HTTP_BODY_CHUNKED:
        break;
    }
    while (i < n && !b->done) {
        char c = p[i];
        switch (b->cs) {
        case CS_SIZE: {
            int v = hexval(c);
            if (v >= 0) {
                if (++b->digits > 15)
                    return -EINVAL;
                b->left = b->left * 16 + (uint64_t)v;
            } else if (b->digits && (c == ';' || c == ' ' || c == '\t')) {
                b->cs = CS_EXT;
            } else if (b->digits && c == '\r') {
                b->cs = CS_SIZE_LF;
            } else {
                return -EINVAL;
            }
            i++;
            break;
        }
        case CS_EXT:
            if (c == '\r')
                b->cs = CS_SIZE_LF;
            else if (c == '\n' || c == 0)
                return -EINVAL;
            i++;
            break;
        case CS_SIZE_LF:
            if (c != '\n')
                return -EINVAL;
            i++;
            b->digits = 0;
            b->cs = b->left ? CS_DATA : CS_TR_START;
            break;
        case CS_DATA: {
            size_t take = n - i < b->left ? n - i : (size_t)b->left;
            i += take;
            b->left -= take;
            if (b->left == 0)
                b->cs = CS_DATA_CR;
            break;
        }
        case CS_DATA_CR:
            if (c != '\r')
                return -EINVAL;
            b->cs = CS_DATA_LF;
            i++;
            break;
        case CS_DATA_LF:
            if (c != '\n')
                return -EINVAL;
            b->cs = CS_SIZE;
            i++;
            break;
        case CS_TR_START:
            b->cs = c == '\r' ? CS_END_LF : CS_TR_LINE;
            i++;
            break;
        case CS_TR_LINE:
            if (c == '\r')
                b->cs = CS_TR_LF;
            else if (c == '\n')
                return -EINVAL;
            i++;
            break;
        case CS_TR_LF:
            if (c != '\n')
                return -EINVAL;
            b->cs = CS_TR_START;
            i++;
            break;
        case CS_END_LF:
            if (c != '\n')
                return -EINVAL;
            b->done = true;
            i++;
            break;
        }
    }
    return (ssize_t)i;
}

size_t http_dechunk(const char *p, size_t n, char *out)
{
    size_t i = 0, o = 0;

    while (i < n) {
        uint64_t len = 0;
        int v;
        while (i < n && (v = hexval(p[i])) >= 0) {
            len = len * 16 + (uint64_t)v;
            i++;
        }
        while (i < n && p[i] != '\n') /* extensions, CR */
            i++;
        i++;
        if (len == 0 || len > n - (i < n ? i : n))
            break; /* the last chunk (trailers follow), or not what feed accepted */
        memmove(out + o, p + i, (size_t)len); /* out may be p (in place) */
        o += (size_t)len;
        i += (size_t)len + 2; /* data CRLF */
    }
    return o;
}

int http_parse_load(const char *s, size_t n, double *queue, double *gpu, double *inflight)
{
    char buf[256];
    char *save = NULL, *tok;

    if (n >= sizeof buf)
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        char *eq = strchr(tok, '='), *endp;
        double v;
        if (!eq)
            return -EINVAL;
        *eq = '\0';
        v = strtod(eq + 1, &endp);
        if (endp == eq + 1 || *endp || v < 0 || v != v || v > 1e9)
            return -EINVAL;
        if (strcmp(tok, "q") == 0 || strcmp(tok, "queue") == 0)
            *queue = v;
        else if (strcmp(tok, "gpu") == 0)
            *gpu = v > 1 ? v / 100 : v; /* 82 and 0.82 both mean 82% */
        else if (strcmp(tok, "inflight") == 0)
            *inflight = v;
    }
    return 0;
}
