/*
 * fuzz_lb_http.c: libFuzzer target for the proxy's HTTP/1.x parser
 * (src/lb/http.c): request and response heads, chunked framing fed in
 * pieces, and X-Arbiter-Load values. The parser is compiled into this
 * target (the fuzz build links the core libraries only). Invariants
 * checked: a parsed head's length is within the input and ends in CRLF
 * CRLF; feeding a body in two pieces consumes what feeding it whole does; a
 * complete chunked body de-chunks to no more bytes, the same in place.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lb/http.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    http_head_t h;
    http_want_t w = {.hdr = "X-User", .cookie = "sid"};
    int rc;

    rc = http_parse_request(p, size, &w, &h);
    if (rc > 0) {
        if ((size_t)rc > size || memcmp(p + rc - 4, "\r\n\r\n", 4) != 0)
            abort();
        if (h.key && (h.key < p || h.key + h.klen > p + size))
            abort();
    }
    rc = http_parse_response(p, size, &h);
    if (rc > 0) {
        double q = 0, g = 0, i = 0;
        if ((size_t)rc > size)
            abort();
        if (h.load)
            http_parse_load(h.load, h.llen, &q, &g, &i);
    }
    /* chunked framing: whole vs split at byte size/3 */
    http_body_t a = {.mode = HTTP_BODY_CHUNKED}, b = {.mode = HTTP_BODY_CHUNKED};
    ssize_t whole = http_body_feed(&a, p, size);
    size_t cut = size / 3;
    ssize_t k1 = http_body_feed(&b, p, cut), k2 = 0;
    if (k1 >= 0 && !b.done && (size_t)k1 == cut)
        k2 = http_body_feed(&b, p + cut, size - cut);
    if (whole >= 0 && k1 >= 0 && k2 >= 0 && (size_t)k1 == cut && !(k1 < (ssize_t)cut)) {
        if (a.done != b.done || (a.done && whole != k1 + k2))
            abort();
    }
    /* a complete chunked body de-chunks into no more than it was, in place too */
    if (whole > 0 && a.done) {
        char *copy = malloc((size_t)whole), *out = malloc((size_t)whole);
        if (copy && out) {
            memcpy(copy, p, (size_t)whole);
            size_t n1 = http_dechunk(p, (size_t)whole, out);
            size_t n2 = http_dechunk(copy, (size_t)whole, copy);
            if (n1 > (size_t)whole || n1 != n2 || memcmp(out, copy, n1) != 0)
                abort();
        }
        free(copy);
        free(out);
    }
    return 0;
}
