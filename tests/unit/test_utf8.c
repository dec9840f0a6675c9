/*
 * test_utf8.c: the UTF-8 decoder and mender (src/util/utf8.c). The class
 * of bug it guards: a text cut at a byte count, or carrying a byte that is
 * not UTF-8, reaching a JSON encoder that then refuses the whole record (a
 * save never stored). The search: every cut of a text of every sequence
 * length mends to its longest whole-character prefix, and random bytes
 * always mend to UTF-8 that the decoder accepts end to end, with text that
 * was UTF-8 already left as it was.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

static int valid(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t len = arb_utf8_len(u + i, n - i);
        if (!len)
            return 0;
        i += len;
    }
    return 1;
}

static void test_decoder(void **st)
{
    (void)st;
    assert_int_equal(arb_utf8_len((const unsigned char *)"a", 1), 1);
    assert_int_equal(arb_utf8_len((const unsigned char *)"\xc3\xa9", 2), 2);
    assert_int_equal(arb_utf8_len((const unsigned char *)"\xe8\xae\xad", 3), 3);
    assert_int_equal(arb_utf8_len((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
    assert_int_equal(arb_utf8_len((const unsigned char *)"\xc0\xaf", 2), 0);         /* overlong */
    assert_int_equal(arb_utf8_len((const unsigned char *)"\xe0\x80\xaf", 3), 0);     /* overlong */
    assert_int_equal(arb_utf8_len((const unsigned char *)"\xed\xa0\x80", 3), 0);     /* surrogate */
    assert_int_equal(arb_utf8_len((const unsigned char *)"\xf4\x90\x80\x80", 4), 0); /* >10FFFF */
    assert_int_equal(arb_utf8_len((const unsigned char *)"\x80", 1), 0);
    assert_int_equal(arb_utf8_len((const unsigned char *)"\xe8\xae", 2), 0); /* cut short */
}

/* Every cut of a text holding each length of sequence (and the edge
 * cases of the lead bytes with narrow second bytes: E0, ED, F0, F4) mends
 * to the prefix of whole characters before the cut. */
static void test_every_cut(void **st)
{
    (void)st;
    static const char *const text[] = {
        "a\xc3\xa9"
        "b\xe8\xae\xad\xe7\xbb\x83\xf0\x9f\x98\x80z",
        "\xe0\xa0\x80\xed\x9f\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf",
    };
    for (size_t t = 0; t < sizeof text / sizeof *text; t++) {
        size_t n = strlen(text[t]);
        for (size_t cut = 0; cut <= n; cut++) {
            char buf[64];
            memcpy(buf, text[t], cut);
            buf[cut] = '\0';
            size_t whole = cut; /* back to the last character boundary */
            while (whole > 0 && whole < n && ((unsigned char)text[t][whole] & 0xC0) == 0x80)
                whole--;
            size_t changed = arb_utf8_fix(buf);
            assert_int_equal(strlen(buf), whole);
            assert_int_equal(changed, cut - whole);
            assert_memory_equal(buf, text[t], whole);
            assert_true(valid(buf));
        }
    }
}

/* Random bytes (seeded, so a failure repeats) mend to UTF-8; mending
 * mended text changes nothing; and text that was UTF-8 is never touched. */
static void test_random_bytes(void **st)
{
    (void)st;
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (int round = 0; round < 20000; round++) {
        char buf[24], copy[24];
        size_t n = 1 + round % 22;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            unsigned b = (unsigned)(x >> 24) & 0xFF;
            buf[i] = (char)(b ? b : 'x');
        }
        buf[n] = '\0';
        memcpy(copy, buf, n + 1);
        int was = valid(buf);
        size_t changed = arb_utf8_fix(buf);
        assert_true(valid(buf));
        assert_int_equal(arb_utf8_fix(buf), 0);
        if (was) {
            assert_int_equal(changed, 0);
            assert_string_equal(buf, copy);
        } else {
            assert_true(changed > 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decoder),
        cmocka_unit_test(test_every_cut),
        cmocka_unit_test(test_random_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
