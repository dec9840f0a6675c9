/* test_jsonstrict.c: arb_json_sure_object (src/util/jsonstrict.c), the
 * check that lets a JSON job spec skip jansson's tree: what it is sure of
 * (job specs as clients send them), what it leaves to jansson (each rule
 * where jansson is stricter than the RFC, or the check chooses not to
 * decide), and, for every text here, that "sure" is never wrong: jansson
 * reads each one it is sure of strictly, as an object. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "util/jsonstrict.h"

static bool jansson_reads(const char *t, size_t n)
{
    json_error_t je;
    json_t *v = json_loadb(t, n, JSON_REJECT_DUPLICATES, &je);
    bool ok = v && json_is_object(v);

    json_decref(v);
    return ok;
}

static const char *const sure[] = {
    "{}",
    " \t\r\n{ }\n",
    "{\"name\": \"e2e\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}, \"command\": "
    "[\"true\"]}",
    "{\"a\": [1, -2, 0, -0, 3.25, 1e5, 1E+2, -7.5e-3, 123456789012345678], \"b\": null}",
    "{\"t\": true, \"f\": false, \"n\": null, \"e\": \"\", \"s\": "
    "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"}",
    "{\"utf8\": \"gr\xc3\xbc\xc3\x9f \xe6\xbc\xa2 \xf0\x9f\x98\x80\"}",
    "{\"nested\": {\"a\": {\"b\": [[], {}, [{\"c\": 1}]]}}}",
    "{\"env\": {\"A\": \"1\", \"B\": {\"value\": \"x\", \"secret\": true}}, \"A\": 2}",
};

static const char *const not_sure[] = {
    "",
    "   ",
    "[1, 2]",                       /* not an object */
    "\"s\"",                        /* a string at the top */
    "{\"a\": 1} x",                 /* something after it */
    "{\"a\": 1}{}",                 /* a second value */
    "{\"a\": 1,}",                  /* a trailing comma */
    "{\"a\" 1}",                    /* no colon */
    "{a: 1}",                       /* a bare key (YAML, not JSON) */
    "{\"a\": 'x'}",                 /* single quotes */
    "{\"a\": 01}",                  /* a leading zero */
    "{\"a\": 1.}",                  /* no digits after the point */
    "{\"a\": .5}",                  /* none before it */
    "{\"a\": 1e}",                  /* no exponent digits */
    "{\"a\": +1}",                  /* a plus sign */
    "{\"a\": -}",                   /* a lone minus */
    "{\"a\": 1234567890123456789}", /* past 18 digits: maybe past long long */
    "{\"a\": 1e400}",               /* a 3-digit exponent: maybe an overflow */
    "{\"a\": tru}",                 /* a word cut short */
    "{\"a\": truex}",               /* a word run on */
    "{\"a\": nul}",
    "{\"a\": \"x}",         /* no closing quote */
    "{\"a\": \"\\u0041\"}", /* any \\u escape: jansson decides */
    "{\"a\": \"\\u0000\"}", /* a NUL: jansson refuses it */
    "{\"a\": \"\\x\"}",     /* not an escape */
    "{\"a\\n\": 1}",        /* an escaped key: compared decoded */
    "{\"a\": 1, \"a\": 2}", /* a duplicate key */
    "{\"a\": {\"b\": 1, \"b\": 1}}",
    "{\"a\": \"tab\there\"}",    /* a control character in a string */
    "{\"a\": \"\xc3\"}",         /* UTF-8 cut short */
    "{\"a\": \"\xc0\xaf\"}",     /* an overlong form */
    "{\"a\": \"\xed\xa0\x80\"}", /* a surrogate */
    "\xef\xbb\xbf{}",            /* a byte order mark */
    "{\"a\": 1 /* c */}",        /* a comment */
};

static void test_sure(void **unused)
{
    (void)unused;
    for (size_t i = 0; i < sizeof sure / sizeof *sure; i++) {
        size_t n = strlen(sure[i]);
        if (!arb_json_sure_object(sure[i], n))
            fail_msg("not sure of %s", sure[i]);
        assert_true(jansson_reads(sure[i], n));
    }
}

static void test_not_sure(void **unused)
{
    (void)unused;
    for (size_t i = 0; i < sizeof not_sure / sizeof *not_sure; i++)
        if (arb_json_sure_object(not_sure[i], strlen(not_sure[i])))
            fail_msg("sure of %s", not_sure[i]);
    assert_false(arb_json_sure_object(NULL, 0));
    /* a NUL byte in the text, and a text cut anywhere short of its end */
    const char nul[] = "{\"a\": \"x\0y\"}";
    assert_false(arb_json_sure_object(nul, sizeof nul - 1));
    const char *whole = sure[2];
    for (size_t n = 0; n < strlen(whole); n++)
        if (arb_json_sure_object(whole, n))
            fail_msg("sure of the first %zu bytes of %s", n, whole);
}

/* The limits: ARB_JSON_SURE_KEYS keys in one object, ARB_JSON_SURE_DEPTH
 * containers deep; one more of either is left to jansson (which reads
 * both). */
static void test_limits(void **unused)
{
    char buf[4096];
    size_t used;

    (void)unused;
    for (int k = ARB_JSON_SURE_KEYS; k <= ARB_JSON_SURE_KEYS + 1; k++) {
        used = (size_t)snprintf(buf, sizeof buf, "{");
        for (int i = 0; i < k; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s\"k%d\": %d", i ? ", " : "",
                                     i, i);
        used += (size_t)snprintf(buf + used, sizeof buf - used, "}");
        assert_true(jansson_reads(buf, used));
        assert_int_equal(arb_json_sure_object(buf, used), k == ARB_JSON_SURE_KEYS);
    }
    for (int d = ARB_JSON_SURE_DEPTH; d <= ARB_JSON_SURE_DEPTH + 1; d++) {
        used = 0;
        for (int i = 0; i < d; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "{\"a\": ");
        used += (size_t)snprintf(buf + used, sizeof buf - used, "1");
        for (int i = 0; i < d; i++)
            buf[used++] = '}';
        assert_true(jansson_reads(buf, used));
        assert_int_equal(arb_json_sure_object(buf, used), d == ARB_JSON_SURE_DEPTH);
    }
}

/* Sure is never wrong, on every text above and each of its prefixes. */
static void test_never_wrong(void **unused)
{
    const char *const *sets[] = {sure, not_sure};
    size_t counts[] = {sizeof sure / sizeof *sure, sizeof not_sure / sizeof *not_sure};

    (void)unused;
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < counts[s]; i++)
            for (size_t n = 0; n <= strlen(sets[s][i]); n++)
                if (arb_json_sure_object(sets[s][i], n) && !jansson_reads(sets[s][i], n))
                    fail_msg("sure of the first %zu bytes of %s; jansson refuses them", n,
                             sets[s][i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sure),
        cmocka_unit_test(test_not_sure),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_never_wrong),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
