/*
 * test_jsonw.c: the compact JSON writer (src/util/jsonw.c) against jansson's
 * json_dumps(JSON_COMPACT), the text it must give byte for byte (the API's
 * replies and the event log's records are written by it). The class of bug
 * it guards: a reply or record whose bytes differ from what jansson wrote
 * (an escape, an integer's edge, a key's order), or a dump that succeeds
 * where jansson's fails. The search: every byte value in strings and keys,
 * integers at their edges, reals, empty and deep containers, and 3,000
 * random trees, each compared with jansson's text (both NULL, or equal);
 * the same trees replayed through the streaming writer (arb_jw_*).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw_replay.h"
#include "util/jsonw.h"
#include "util/utf8.h"

/* Both writers on v: the same text, or both refuse. */
static void same(json_t *v)
{
    char *want = json_dumps(v, JSON_COMPACT);
    char *got = arb_jsonw_dumps(v);

    if (!want)
        assert_null(got);
    else {
        assert_non_null(got);
        assert_string_equal(got, want);
    }
    free(want);
    free(got);
}

static void test_bytes(void **st)
{
    (void)st;
    for (int c = 0; c < 256; c++) { /* every byte alone, as a value and as a key */
        char s[3] = {'a', (char)c, 'z'};
        json_t *o = json_object(), *a = json_array();
        json_array_append_new(a, json_stringn_nocheck(s, 3));
        json_object_setn_new_nocheck(o, s, 3, json_integer(c));
        same(a);
        same(o);
        json_decref(a);
        json_decref(o);
    }
    const char *texts[] = {"",
                           "plain",
                           "q\"uote\\back/slash",
                           "\xc3\xa9t\xc3\xa9",
                           "\xe8\xae\xad",
                           "\xf0\x9f\x98\x80 emoji",
                           "\xc0\xaf overlong",
                           "\xed\xa0\x80 surrogate",
                           "cut \xe8\xae",
                           "\x7f del",
                           "tab\tnl\ncr\rbs\bff\f\x01\x1f"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        json_t *a = json_array(), *o = json_object();
        json_array_append_new(a, json_stringn_nocheck(texts[i], strlen(texts[i])));
        json_object_set_new_nocheck(o, texts[i], json_true());  /* as a key */
        json_object_set_new_nocheck(o, "a\n\xff", json_null()); /* bad after an escape */
        same(a);
        same(o);
        json_decref(a);
        json_decref(o);
    }
}

static void test_scalars(void **st)
{
    (void)st;
    json_int_t ints[] = {0, 1, -1, 9, 10, -10, 123456789, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    double reals[] = {0.0, -0.0, 1.0, 0.1, 1e300, -2.5e-300, 123456789012345678.0, 3.14159};
    json_t *a = json_array();
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        json_array_append_new(a, json_integer(ints[i]));
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        json_array_append_new(a, json_real(reals[i]));
    json_array_append_new(a, json_true());
    json_array_append_new(a, json_false());
    json_array_append_new(a, json_null());
    json_array_append_new(a, json_object());
    json_array_append_new(a, json_array());
    same(a);
    json_decref(a);
    /* not an object or an array: jansson says NULL without JSON_ENCODE_ANY */
    json_t *s = json_string("x");
    same(s);
    json_decref(s);
    assert_null(arb_jsonw_dumps(NULL));
}

static void test_deep(void **st)
{
    (void)st;
    for (int depth = ARB_JSONW_MAX_DEPTH - 2; depth <= ARB_JSONW_MAX_DEPTH + 2; depth++) {
        json_t *root = json_array(), *at = root;
        for (int i = 0; i < depth; i++) {
            json_t *n = i % 2 ? json_array() : json_object();
            if (json_is_array(at))
                json_array_append_new(at, n);
            else
                json_object_set_new(at, "k", n);
            at = n;
        }
        same(root);
        json_decref(root);
    }
}

static uint64_t rng = 88172645463325252ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static json_t *gen(int depth)
{
    static const char *pieces[] = {"a",
                                   "Z",
                                   "\"",
                                   "\\",
                                   "/",
                                   "\n",
                                   "\t",
                                   "\x01",
                                   "\xc3\xa9",
                                   "\xe2\x82\xac",
                                   "\xf0\x9f\x98\x80",
                                   " ",
                                   "0",
                                   "\xff"};
    char s[64];
    size_t n = 0;
    int k = (int)(next() % (depth > 4 ? 6 : 9));

    switch (k) {
    case 0:
        return json_integer((json_int_t)next());
    case 1:
        return json_real((double)(int64_t)next() / (double)(next() % 1000 + 1));
    case 2:
        return next() % 2 ? json_true() : json_null();
    case 3:
    case 4:
    case 5:
        for (int i = (int)(next() % 6); i > 0; i--) {
            const char *p = pieces[next() % (sizeof pieces / sizeof pieces[0])];
            memcpy(s + n, p, strlen(p));
            n += strlen(p);
        }
        return json_stringn_nocheck(s, n);
    case 6:
    case 7: {
        json_t *o = json_object();
        for (int i = (int)(next() % 5); i > 0; i--) {
            snprintf(s, sizeof s, "k%d%s", (int)(next() % 8),
                     next() % 4   ? ""
                     : next() % 2 ? "\"\n\xc3\xa9"
                                  : "\t\xff");
            json_object_set_new_nocheck(o, s, gen(depth + 1));
        }
        return o;
    }
    default: {
        json_t *a = json_array();
        for (int i = (int)(next() % 5); i > 0; i--)
            json_array_append_new(a, gen(depth + 1));
        return a;
    }
    }
}

static void test_random(void **st)
{
    (void)st;
    for (int i = 0; i < 3000; i++) {
        json_t *a = json_array();
        json_array_append_new(a, gen(0));
        json_array_append_new(a, gen(0));
        same(a);
        json_decref(a);
    }
}

/* A reply of the API's shape, and the buffer form: appended after text
 * already there, and nothing appended when it refuses. */
static void test_append(void **st)
{
    (void)st;
    json_t *o = json_pack("{s:I,s:s,s:[{s:i,s:n}],s:b}", "id", (json_int_t)7, "name", "e2e",
                          "tasks", "index", 0, "node", "ok", 1);
    arb_buf_t b = {0};
    arb_buf_puts(&b, "x");
    assert_int_equal(arb_jsonw_compact(&b, o), 0);
    char *want = json_dumps(o, JSON_COMPACT);
    assert_int_equal(b.len, 1 + strlen(want));
    assert_string_equal(b.p + 1, want);
    free(want);
    json_t *bad = json_array();
    json_array_append_new(bad, json_stringn_nocheck("\xff", 1));
    size_t len = b.len;
    assert_int_equal(arb_jsonw_compact(&b, bad), -EINVAL);
    assert_int_equal(b.len, len);
    assert_int_equal(b.p[len], '\0');
    arb_buf_free(&b);
    json_decref(bad);
    json_decref(o);
}

/* The streaming writer (arb_jw_*) replaying v's shape call by call: false
 * when v holds what its C-string calls cannot say (a NUL inside a string
 * or key) or a key that is not UTF-8 (which it refuses, where jansson
 * writes on). */
static bool expressible(const json_t *v)
{
    const char *k;
    json_t *x;
    size_t i;

    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, x)
        {
            size_t n = strlen(k);
            const unsigned char *u = (const unsigned char *)k;
            for (size_t p = 0; p < n;) {
                size_t l = u[p] < 0x80 ? 1 : arb_utf8_len(u + p, n - p);
                if (!l)
                    return false;
                p += l;
            }
            if (!expressible(x))
                return false;
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x) if (!expressible(x)) return false;
    } else if (json_is_string(v)) {
        return strlen(json_string_value(v)) == json_string_length(v);
    }
    return true;
}

/* The streaming writer over the random trees: jansson's text, or both
 * refuse; and what it refuses by itself. */
static void test_stream(void **st)
{
    (void)st;
    int compared = 0;
    for (int i = 0; i < 3000; i++) {
        json_t *a = json_array();
        json_array_append_new(a, gen(0));
        json_array_append_new(a, gen(0));
        if (expressible(a)) {
            char *want = json_dumps(a, JSON_COMPACT);
            arb_buf_t b = {0};
            arb_jw_t w;
            arb_jw_begin(&w, &b);
            replay(&w, a);
            int rc = arb_jw_end(&w);
            if (!want) {
                assert_int_equal(rc, -EINVAL);
            } else {
                assert_int_equal(rc, 0);
                assert_string_equal(b.p, want);
                compared++;
            }
            free(want);
            arb_buf_free(&b);
        }
        json_decref(a);
    }
    assert_true(compared > 1000);

    arb_buf_t b = {0};
    arb_jw_t w;
    arb_jw_begin(&w, &b); /* a NULL string, as json_pack refuses it */
    arb_jw_obj(&w);
    arb_jw_key(&w, "name");
    arb_jw_str(&w, NULL);
    arb_jw_obj_end(&w);
    assert_int_equal(arb_jw_end(&w), -EINVAL);
    arb_buf_reset(&b);
    arb_jw_begin(&w, &b); /* unclosed, and a key without its value */
    arb_jw_obj(&w);
    arb_jw_key(&w, "a");
    assert_int_equal(arb_jw_end(&w), -EINVAL);
    arb_buf_reset(&b);
    arb_jw_begin(&w, &b); /* deeper than ARB_JW_MAX_DEPTH */
    for (int d = 0; d <= ARB_JW_MAX_DEPTH; d++)
        arb_jw_arr(&w);
    for (int d = 0; d <= ARB_JW_MAX_DEPTH; d++)
        arb_jw_arr_end(&w);
    assert_int_equal(arb_jw_end(&w), -EINVAL);
    arb_buf_reset(&b);
    arb_jw_begin(&w, &b); /* the empty containers, and ints at their edges */
    arb_jw_obj(&w);
    arb_jw_key(&w, "a");
    arb_jw_arr(&w);
    arb_jw_arr_end(&w);
    arb_jw_key(&w, "o");
    arb_jw_obj(&w);
    arb_jw_obj_end(&w);
    arb_jw_key(&w, "min");
    arb_jw_int(&w, INT64_MIN);
    arb_jw_key(&w, "max");
    arb_jw_int(&w, INT64_MAX);
    arb_jw_obj_end(&w);
    assert_int_equal(arb_jw_end(&w), 0);
    assert_string_equal(b.p, "{\"a\":[],\"o\":{},\"min\":-9223372036854775808,"
                             "\"max\":9223372036854775807}");
    arb_buf_reset(&b);
    /* an optional member is left out where jansson's json_string refuses its text */
    json_t *o = json_object();
    const char *vals[] = {"ok", "\xff", "caf\xc3\xa9", "cut \xe2\x82", NULL};
    arb_jw_begin(&w, &b);
    arb_jw_obj(&w);
    for (int i = 0; i < 5; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        arb_jw_kstr_opt(&w, k, vals[i]);
        json_object_set_new(o, k, vals[i] ? json_string(vals[i]) : NULL);
    }
    arb_jw_obj_end(&w);
    assert_int_equal(arb_jw_end(&w), 0);
    char *want = json_dumps(o, JSON_COMPACT);
    assert_string_equal(b.p, want);
    free(want);
    json_decref(o);
    arb_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),  cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_deep),   cmocka_unit_test(test_random),
        cmocka_unit_test(test_append), cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
