/* test_textw.c: the shared text writers (src/util/textw.c) give the bytes of
 * the calls they replaced, over random and extreme values: integers as
 * snprintf's "%lld" and "%020llu", JSON strings as jansson's json_dumps
 * (and, for bytes that are not UTF-8, as the writers they replaced: the
 * job record's U+FFFD and jsonw.c's partial text, kept here as oracles),
 * times as jv_time's snprintf; and an event's store record as json_pack
 * and json_dumps wrote it (state/ledger.c), stores written by either
 * binary being read by the other. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state/jv.h"
#include "state/state_int.h"
#include "util/textw.h"
#include "util/utf8.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A value of every magnitude, the extremes and their neighbours often. */
static int64_t any_i64(void)
{
    static const int64_t edge[] = {0,
                                   1,
                                   -1,
                                   9,
                                   10,
                                   -10,
                                   99,
                                   100,
                                   INT32_MAX,
                                   INT32_MIN,
                                   INT64_MAX,
                                   INT64_MIN,
                                   INT64_MAX - 1,
                                   INT64_MIN + 1,
                                   999999999999999999LL,
                                   1000000000000000000LL};
    uint64_t r = next();
    if (r % 4 == 0)
        return edge[(r >> 8) % (sizeof edge / sizeof edge[0])];
    return (int64_t)(next() >> (r % 64));
}

static void test_integers(void **unused)
{
    (void)unused;
    for (int i = 0; i < 200000; i++) {
        int64_t v = any_i64();
        char want[64], got[ARB_TW_I64_MAX + 1];
        int n = snprintf(want, sizeof want, "%lld", (long long)v);
        size_t k = arb_tw_i64(got, v);
        got[k] = '\0';
        assert_int_equal(k, (size_t)n);
        assert_string_equal(got, want);

        uint64_t u = (uint64_t)any_i64();
        int w = (int)(next() % 24);
        char pw[64], pg[64];
        snprintf(pw, sizeof pw, "%0*llu", w, (unsigned long long)u);
        pg[arb_tw_u64_pad(pg, u, w)] = '\0';
        assert_string_equal(pg, pw);
        snprintf(pw, sizeof pw, "%020llu", (unsigned long long)u);
        pg[arb_tw_u64_pad(pg, u, 20)] = '\0';
        assert_string_equal(pg, pw);
    }
    arb_buf_t b = {0};
    arb_buf_i64(&b, INT64_MIN);
    arb_buf_i64(&b, 0);
    arb_buf_i64(&b, INT64_MAX);
    assert_string_equal(b.p, "-922337203685477580809223372036854775807");
    arb_buf_free(&b);
}

/* Random text: plain ASCII, quotes and backslashes, every control
 * character, DEL, UTF-8 of 2, 3 and 4 bytes (U+2028 among them), and now
 * and then a byte that is not UTF-8 (a stray continuation, a cut
 * sequence, an overlong form, a surrogate, past U+10FFFF). */
static size_t any_text(char *s, size_t max, bool bad)
{
    static const char *const piece[] = {
        "a",
        "Z",
        "0",
        " ",
        "/",
        "\"",
        "\\",
        "\b",
        "\f",
        "\n",
        "\r",
        "\t",
        "\x01",
        "\x1f",
        "\x7f",
        "\xc3\xa9",
        "\xe2\x80\xa8",
        "\xe6\x97\xa5",
        "\xf0\x9f\x98\x80",
        "\xef\xbf\xbd",
        "%",
        "~",
    };
    static const char *const wrong[] = {"\x80",     "\xc3",         "\xe2\x80",
                                        "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                        "\xff",     "\xf0\x9f\x98"};
    size_t n = 0, want = next() % (max / 4);

    while (n < want) {
        const char *p = bad && next() % 16 == 0 ? wrong[next() % (sizeof wrong / sizeof wrong[0])]
                                                : piece[next() % (sizeof piece / sizeof piece[0])];
        size_t k = strlen(p);
        if (n + k >= max)
            break;
        memcpy(s + n, p, k);
        n += k;
    }
    if (next() % 8 == 0 && n + 1 < max) /* a NUL inside: strings with a length */
        s[n++] = '\0';
    s[n] = '\0';
    return n;
}

/* The job record's string writer before textw.c (state/jobrec.c, str()):
 * a byte that is not UTF-8 as U+FFFD. */
static void old_record_str(arb_buf_t *r, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0;

    arb_buf_putc(r, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t len = arb_utf8_len(u + i, n - i);
        if (!len) {
            arb_buf_put(r, s + i - run, run);
            run = 0;
            arb_buf_put(r, "\xef\xbf\xbd", 3);
            i++;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            i += len;
            run += len;
            continue;
        }
        arb_buf_put(r, s + i - run, run);
        run = 0;
        static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
        const char *f = memchr(from, c, sizeof from - 1);
        char esc[6] = {'\\', f ? to[f - from] : 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        arb_buf_put(r, esc, f ? 2 : 6);
        i++;
    }
    arb_buf_put(r, s + n - run, run);
    arb_buf_putc(r, '"');
}

/* jsonw.c's string writer before textw.c: on a byte that is not UTF-8,
 * -EINVAL with the quote and the text up to the last escape written. */
static int old_jsonw_str(arb_buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;

    arb_buf_putc(b, '"');
    while (i < n) {
        unsigned c = u[i];
        if (c >= 0x80) {
            size_t len = arb_utf8_len(u + i, n - i);
            if (!len)
                return -EINVAL;
            i += len;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        arb_buf_put(b, s + run, i - run);
        static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
        const char *f = memchr(from, (int)c, sizeof from - 1);
        char esc[6] = {'\\', f ? to[f - from] : 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        arb_buf_put(b, esc, f ? 2 : 6);
        run = ++i;
    }
    arb_buf_put(b, s + run, n - run);
    arb_buf_putc(b, '"');
    return 0;
}

static void check_strings(size_t max)
{
    char *s = malloc(max);
    assert_non_null(s);
    for (int i = 0; i < 20000; i++) {
        size_t n = any_text(s, max, i % 2 == 1);
        arb_buf_t got = {0}, want = {0}, capped = {.max = 64 * max};
        /* valid text: jansson's own bytes */
        json_t *js = json_stringn(s, n);
        int rc = arb_buf_jstr(&got, s, n, false);
        assert_int_equal(arb_buf_jstr(&capped, s, n, false), rc); /* the counting path */
        if (js) {
            char *t = json_dumps(js, JSON_ENCODE_ANY);
            assert_int_equal(rc, 0);
            assert_int_equal(got.len, strlen(t));
            assert_memory_equal(got.p, t, got.len);
            free(t);
            json_decref(js);
        }
        int wrc = old_jsonw_str(&want, s, n);
        assert_int_equal(rc, wrc);
        assert_int_equal(got.len, want.len);
        assert_memory_equal(got.p, want.p, got.len);
        assert_int_equal(capped.len, want.len);
        assert_memory_equal(capped.p, want.p, got.len);
        /* with fix: the job record's bytes, a whole string every time */
        arb_buf_reset(&got);
        arb_buf_reset(&want);
        arb_buf_reset(&capped);
        assert_int_equal(arb_buf_jstr(&got, s, n, true), 0);
        assert_int_equal(arb_buf_jstr(&capped, s, n, true), 0);
        old_record_str(&want, s, n);
        assert_int_equal(got.len, want.len);
        assert_memory_equal(got.p, want.p, got.len);
        assert_int_equal(capped.len, want.len);
        assert_memory_equal(capped.p, want.p, got.len);
        json_t *back = json_loadb(got.p, got.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        assert_non_null(back); /* always JSON */
        json_decref(back);
        arb_buf_free(&got);
        arb_buf_free(&want);
        arb_buf_free(&capped);
    }
    free(s);
}

static void test_strings(void **unused)
{
    (void)unused;
    check_strings(64);
    check_strings(4096); /* past the short path: counted first */
}

/* jv_time before textw.c. */
static void old_time(int64_t wall_ms, char *buf, size_t n)
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;

    memset(&tm, 0, sizeof tm);
    gmtime_r(&t, &tm);
    char whole[96]; /* the text, then cut to n as snprintf cuts it */
    snprintf(whole, sizeof whole, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(wall_ms % 1000));
    if (n) {
        size_t k = strlen(whole) < n - 1 ? strlen(whole) : n - 1;
        memcpy(buf, whole, k);
        buf[k] = '\0';
    }
}

static void test_times(void **unused)
{
    (void)unused;
    static const int64_t edge[] = {0,
                                   -1,
                                   1,
                                   999,
                                   -999,
                                   -1000,
                                   1764770000123LL,
                                   253402300799999LL, /* 9999-12-31T23:59:59.999Z */
                                   253402300800000LL, /* year 10000 */
                                   -62167219200000LL, /* year 0 */
                                   -62167219200001LL,
                                   INT64_MAX,
                                   INT64_MIN};
    for (int i = 0; i < 200000; i++) {
        int64_t v;
        if (i < (int)(sizeof edge / sizeof edge[0]))
            v = edge[i];
        else if (i % 3)
            v = (int64_t)(next() % 4102444800000ULL); /* 1970..2100 */
        else
            v = any_i64();
        size_t n = i % 7 == 0 ? next() % 32 : 32;
        char want[32], got[32];
        memset(want, 'x', sizeof want);
        memset(got, 'x', sizeof got);
        old_time(v, want, n);
        arb_tw_time(v, got, n);
        assert_memory_equal(got, want, sizeof want);
    }
}

/* An event's record as ledger.c wrote it before (json_pack, then the dump). */
static char *old_event_record(const st_event_t *e, const char *time)
{
    json_t *o = json_pack("{s:I,s:s,s:s,s:s}", "lamport", (json_int_t)e->lamport, "time", time,
                          "type", e->type ? e->type : "", "message", e->msg ? e->msg : "");
    if (!o)
        return NULL;
    if (e->job)
        json_object_set_new(o, "job", json_integer((json_int_t)e->job));
    if (e->node)
        json_object_set_new(o, "node", json_string(e->node));
    char *t = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return t;
}

static void test_event_records(void **unused)
{
    (void)unused;
    char msg[600], type[40], node[40];
    int same = 0, refused = 0;

    for (int i = 0; i < 50000; i++) {
        st_event_t e = {.lamport = (uint64_t)any_i64(),
                        .job = next() % 3 ? (uint64_t)any_i64() : 0};
        char time[32];
        size_t n = any_text(msg, 512, i % 4 == 3);
        (void)n; /* a NUL inside cuts it, as a C string */
        any_text(type, sizeof type, i % 8 == 7);
        any_text(node, sizeof node, i % 5 == 4);
        e.type = next() % 16 ? type : NULL;
        e.node = next() % 2 ? node : NULL;
        if (next() % 8 == 0) { /* a time kept as its stored text, after the message's NUL */
            size_t a = strlen(msg) + 1;
            snprintf(msg + a, sizeof msg - a, "%s", next() % 2 ? "yesterday \xc3\xa9" : "\xff");
            e.time_ms = ST_EVENT_TIME_TEXT;
        } else {
            e.time_ms = next() % 4 ? (int64_t)(next() % 4102444800000ULL) : any_i64();
            if (e.time_ms == ST_EVENT_TIME_TEXT)
                e.time_ms = 0;
        }
        e.msg = next() % 32 ? msg : NULL;
        if (e.time_ms == ST_EVENT_TIME_TEXT)
            snprintf(time, sizeof time, "%s", e.msg ? e.msg + strlen(e.msg) + 1 : "");
        else
            jv_time(e.time_ms, time, sizeof time);
        char *want = old_event_record(&e, time), *got = st_event_record(&e);
        if (!want) {
            assert_null(got); /* refused alike: not UTF-8 */
            refused++;
            continue;
        }
        assert_non_null(got);
        assert_string_equal(got, want);
        same++;
        free(want);
        free(got);
    }
    assert_true(same > 20000 && refused > 1000); /* both ways were taken */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_event_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
