/* test_lb_http.c: the proxy's HTTP/1.x head parser and body framing,
 * including the request-smuggling shapes it must refuse. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "lb/http.h"

static int req(const char *s, http_head_t *h)
{
    http_want_t w = {.hdr = "X-User", .cookie = "sid"};
    return http_parse_request(s, strlen(s), &w, h);
}

static void test_request_ok(void **state)
{
    http_head_t h;
    const char *s = "GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nX-User:  alice \r\n\r\nNEXT";
    assert_int_equal(req(s, &h), (int)(strlen(s) - 4));
    assert_int_equal(h.method, HTTP_GET);
    assert_int_equal(h.minor, 1);
    assert_int_equal(h.tlen, strlen("/v1/models?x=1"));
    assert_int_equal(h.klen, 5);
    assert_memory_equal(h.key, "alice", 5);
    assert_int_equal(h.clen, -1);
    assert_true(http_keepalive(&h));
    assert_true(http_idempotent(h.method));

    assert_true(req("POST / HTTP/1.0\r\nContent-Length: 12\r\nConnection: keep-alive\r\n"
                    "Cookie: a=1; sid=xyz; b=2\r\n\r\n",
                    &h) > 0);
    assert_int_equal(h.method, HTTP_POST);
    assert_int_equal(h.clen, 12);
    assert_true(http_keepalive(&h));
    assert_false(http_idempotent(h.method));
    assert_int_equal(h.klen, 3);
    assert_memory_equal(h.key, "xyz", 3);

    assert_true(req("GET / HTTP/1.1\r\nConnection: Upgrade, close\r\n\r\n", &h) > 0);
    assert_false(http_keepalive(&h));
    assert_true(h.upgrade);
    assert_true(req("PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &h) > 0);
    assert_true(h.chunked);
    assert_true(req("BREW /pot HTTP/1.1\r\n\r\n", &h) > 0);
    assert_int_equal(h.method, HTTP_OTHER);
}

static void test_request_incomplete(void **state)
{
    http_head_t h;
    assert_int_equal(req("GET / HTTP/1.1\r\nHost: a\r\n", &h), 0);
    assert_int_equal(req("GET / HTTP/1.1\r\nHost: a\r\n\r", &h), 0);
    assert_int_equal(req("", &h), 0);
}

static void test_request_refused(void **state)
{
    static const char *bad[] = {
        "GET / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "GET / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        "GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
        "GET / HTTP/1.1\r\n Folded: a\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET /\x01 HTTP/1.1\r\n\r\n",
        " GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",
        /* bare LF line ends: refused at once, complete or not (never waited on) */
        "GET / HTTP/1.1\nHost: x\n\n",
        "GET / HTTP/1.1\n",
        "GET / HTTP/1.1\r\nHost: x\n",
        "GET / HTTP/1.1\r\nHost: x\r\n\n",
    };
    http_head_t h;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = req(bad[i], &h);
        if (rc != -EINVAL)
            print_error("case %zu accepted: %s\n", i, bad[i]);
        assert_int_equal(rc, -EINVAL);
    }
}

static void test_response(void **state)
{
    http_head_t h;
    http_body_t b;
    const char *lf = "HTTP/1.1 200 OK\nContent-Length: 0\n\n";
    assert_int_equal(http_parse_response(lf, strlen(lf), &h), -EINVAL); /* not a hang */
    const char *s =
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Arbiter-Load: q=3,gpu=0.5\r\n\r\nhello";
    assert_int_equal(http_parse_response(s, strlen(s), &h), (int)strlen(s) - 5);
    assert_int_equal(h.status, 200);
    http_body_response(&b, &h, false);
    assert_int_equal(b.mode, HTTP_BODY_LENGTH);
    assert_int_equal(http_body_feed(&b, "hel", 3), 3);
    assert_false(b.done);
    assert_int_equal(http_body_feed(&b, "loHTTP", 6), 2);
    assert_true(b.done);
    double q = 0, g = 0, inf = 7;
    assert_int_equal(http_parse_load(h.load, h.llen, &q, &g, &inf), 0);
    assert_true(q == 3 && g == 0.5 && inf == 7);
    assert_int_equal(http_parse_load("q=x", 3, &q, &g, &inf), -EINVAL);

    /* HEAD, 204, 304: no body whatever the headers say */
    http_body_response(&b, &h, true);
    assert_true(b.done);
    s = "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
    assert_true(http_parse_response(s, strlen(s), &h) > 0);
    http_body_response(&b, &h, false);
    assert_true(b.done);
    /* no length: read to close */
    s = "HTTP/1.0 200 OK\r\n\r\n";
    assert_true(http_parse_response(s, strlen(s), &h) > 0);
    assert_int_equal(h.minor, 0);
    http_body_response(&b, &h, false);
    assert_int_equal(b.mode, HTTP_BODY_CLOSE);
    /* TE wins over CL in a response */
    s = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_true(http_parse_response(s, strlen(s), &h) > 0);
    http_body_response(&b, &h, false);
    assert_int_equal(b.mode, HTTP_BODY_CHUNKED);
    s = "HTTP/1.1 200\r\n\r\n";
    assert_true(http_parse_response(s, strlen(s), &h) > 0);
    s = "HTTP/1.1 20 OK\r\n\r\n";
    assert_int_equal(http_parse_response(s, strlen(s), &h), -EINVAL);
    s = "HTTX/1.1 200 OK\r\n\r\n";
    assert_int_equal(http_parse_response(s, strlen(s), &h), -EINVAL);
}

/* A chunked body fed one byte at a time and all at once ends at the same
 * byte, trailers included, and leaves what follows alone. */
static void test_chunked(void **state)
{
    const char *body = "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n"
                       "Trailer: x\r\n\r\nNEXT";
    size_t total = strlen(body) - 4;
    http_body_t b = {.mode = HTTP_BODY_CHUNKED};
    assert_int_equal(http_body_feed(&b, body, strlen(body)), (ssize_t)total);
    assert_true(b.done);
    http_body_t c = {.mode = HTTP_BODY_CHUNKED};
    size_t used = 0;
    for (size_t i = 0; i < strlen(body) && !c.done; i++)
        used += (size_t)http_body_feed(&c, body + i, 1);
    assert_true(c.done);
    assert_int_equal(used, total);

    static const char *bad[] = {
        "g\r\n", "\r\n", "4\r\nWikiX\r\n", "4\nWiki", "1234567890abcdef0\r\n", "0\r\nTrailer\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_body_t d = {.mode = HTTP_BODY_CHUNKED};
        assert_int_equal(http_body_feed(&d, bad[i], strlen(bad[i])), -EINVAL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_ok),      cmocka_unit_test(test_request_incomplete),
        cmocka_unit_test(test_request_refused), cmocka_unit_test(test_response),
        cmocka_unit_test(test_chunked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
