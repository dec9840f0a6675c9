/* test_quantity.c: Kubernetes quantity parsing and formatting, table-driven. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "arbiter/resource.h"

#define C ARB_QTY_COUNT
#define M ARB_QTY_MILLI
#define B ARB_QTY_BYTES
#define MIB ARB_QTY_MIB

#define UNITS "use Ki, Mi, Gi, Ti, Pi, Ei, or k, M, G, T, P, E, or m"

/* One case: input, kind, field; then the value on success (rc 0), or the
 * error code and a piece of text the message must hold. */
typedef struct qcase {
    const char *s;
    arb_qty_kind_t kind;
    const char *field;
    int rc;
    int64_t want;
    const char *msg;
} qcase_t;

static const qcase_t cases[] = {
    /* counts */
    {"32", C, "nvidia.com/gpu", 0, 32, NULL},
    {"+5", C, "nvidia.com/gpu", 0, 5, NULL},
    {"007", C, "nvidia.com/gpu", 0, 7, NULL},
    {"0", C, "nvidia.com/gpu", 0, 0, NULL},
    {"2e3", C, "pods", 0, 2000, NULL},
    {"2E3", C, "pods", 0, 2000, NULL},
    {"1e+2", C, "pods", 0, 100, NULL},
    {"100e-2", C, "pods", 0, 1, NULL},
    {"1k", C, "pods", 0, 1000, NULL},
    {"1.5k", C, "pods", 0, 1500, NULL},
    {"1Ki", C, "pods", 0, 1024, NULL},
    {"5.", C, "pods", 0, 5, NULL},
    {".5k", C, "pods", 0, 500, NULL},
    {"1000m", C, "pods", 0, 1, NULL},
    {"1000000000n", C, "pods", 0, 1, NULL},
    {"0.000000000000000000000000000000001e33", C, "pods", 0, 1, NULL},
    {"9223372036854775807", C, "pods", 0, INT64_MAX, NULL},
    {"7Ei", C, "pods", 0, 7LL << 60, NULL},
    {"0.5", C, "nvidia.com/gpu", -EINVAL, 0,
     "nvidia.com/gpu: '0.5' is not a whole number; request whole GPUs here, or a GPU share "
     "(e.g. arbiter.io/gpu-share: 500m) to share one device"},
    {".5", C, "nvidia.com/gpu", -EINVAL, 0, "request whole GPUs"},
    {"1.5", C, "rdma/hca", -EINVAL, 0, "is not a whole number; rdma/hca counts whole items"},
    {"1e-1", C, "pods", -EINVAL, 0, "not a whole number"},
    {"1m", C, "pods", -EINVAL, 0, "not a whole number"},
    {"1u", C, "pods", -EINVAL, 0, "not a whole number"},
    {"9223372036854775808", C, "pods", -ERANGE, 0, "too large; the most is 9223372036854775807"},
    {"8Ei", C, "pods", -ERANGE, 0, "too large"},
    {"99999999999999999999999999999999999999999999", C, "pods", -ERANGE, 0, "too large"},
    {"1e2147483647", C, "pods", -ERANGE, 0, "too large"},
    {"1e-2147483648", C, "pods", -EINVAL, 0, "not a whole number"},
    {"0e2147483648", C, "pods", -EINVAL, 0, "exponent is out of range"},
    {"1e", C, "pods", -EINVAL, 0, "unknown unit 'e'; " UNITS},
    {"1e3Ki", C, "pods", -EINVAL, 0, "unknown unit 'e3Ki'"},
    {"1e+", C, "pods", -EINVAL, 0, "unknown unit"},

    /* thousandths */
    {"500m", M, "cpu", 0, 500, NULL},
    {"1.5", M, "cpu", 0, 1500, NULL},
    {"2", M, "cpu", 0, 2000, NULL},
    {"0m", M, "cpu", 0, 0, NULL},
    {"0.001", M, "cpu", 0, 1, NULL},
    {"1000u", M, "cpu", 0, 1, NULL},
    {"1500000u", M, "cpu", 0, 1500, NULL},
    {"250e-3", M, "cpu", 0, 250, NULL},
    {"9223372036854775.807", M, "cpu", 0, INT64_MAX, NULL},
    {"0.1m", M, "cpu", -EINVAL, 0, "cpu: '0.1m' is finer than 1m"},
    {"0.0001", M, "cpu", -EINVAL, 0, "finer than 1m"},
    {"100n", M, "arbiter.io/gpu-share", -EINVAL, 0, "finer than 1m"},
    {"9223372036854776", M, "cpu", -ERANGE, 0, "the most is 9223372036854775807m"},

    /* bytes */
    {"256Gi", B, "memory", 0, 256LL << 30, NULL},
    {"100M", B, "memory", 0, 100000000, NULL},
    {"1.5Ki", B, "memory", 0, 1536, NULL},
    {"0.5Ki", B, "memory", 0, 512, NULL},
    {"1.5e3", B, "memory", 0, 1500, NULL},
    {"1Ei", B, "memory", 0, 1LL << 60, NULL},
    {"1E", B, "memory", 0, 1000000000000000000LL, NULL},
    {"1000m", B, "memory", 0, 1, NULL},
    {"0Gi", B, "memory", 0, 0, NULL},
    {"5.Gi", B, "memory", 0, 5LL << 30, NULL},
    /* 2^-30 written out: exact only with exact arithmetic. */
    {"0.000000000931322574615478515625Ei", B, "memory", 0, 1LL << 30, NULL},
    {"0.00000000093132257461547851562Ei", B, "memory", -EINVAL, 0, "whole number of bytes"},
    {"1.1Ki", B, "memory", -EINVAL, 0, "memory: '1.1Ki' is not a whole number of bytes"},
    {"0.5", B, "memory", -EINVAL, 0, "whole number of bytes"},
    {"500m", B, "memory", -EINVAL, 0, "whole number of bytes"},
    {"1e-3", B, "memory", -EINVAL, 0, "whole number of bytes"},
    {"8Ei", B, "memory", -ERANGE, 0, "the most is 9223372036854775807 bytes"},
    {"256Gx", B, "memory", -EINVAL, 0, "memory: '256Gx': unknown unit 'Gx'; " UNITS},
    {"256gi", B, "memory", -EINVAL, 0, "unknown unit 'gi'"},
    {"1K", B, "memory", -EINVAL, 0, "unknown unit 'K'"},
    {"1ki", B, "memory", -EINVAL, 0, "unknown unit 'ki'"},
    {"0x10", B, "memory", -EINVAL, 0, "unknown unit 'x10'"},
    {"Gi", B, "memory", -EINVAL, 0, "memory: 'Gi' has no number"},
    {".", B, "memory", -EINVAL, 0, "has no number"},
    {"+", B, "memory", -EINVAL, 0, "has no number"},
    {"++1", B, "memory", -EINVAL, 0, "has no number"},
    {"1.2.3", B, "memory", -EINVAL, 0, "'1.2.3' is not a quantity"},
    {"1..2", B, "memory", -EINVAL, 0, "is not a quantity"},
    {"1,5Gi", B, "memory", -EINVAL, 0, "is not a quantity"},
    {"1 Gi", B, "memory", -EINVAL, 0, "'1 Gi' has spaces in it; write it without them, e.g. '1Gi'"},
    {" 16Gi", B, "memory", -EINVAL, 0, "has spaces"},
    {"16Gi\n", B, "memory", -EINVAL, 0, "'16Gi?' has spaces"},
    {"", B, "memory", -EINVAL, 0, "memory: '' is empty"},
    {"   ", B, "memory", -EINVAL, 0, "is blank"},
    {"-1Gi", B, "memory", -EINVAL, 0, "memory: '-1Gi' is negative"},
    {"-0", B, "memory", -EINVAL, 0, "is negative"},

    /* MiB: bytes rounded up */
    {"16Gi", MIB, "gpu_mem", 0, 16384, NULL},
    {"80G", MIB, "gpu_mem", 0, 76294, NULL},
    {"1", MIB, "gpu_mem", 0, 1, NULL},
    {"0", MIB, "gpu_mem", 0, 0, NULL},
    {"1Mi", MIB, "gpu_mem", 0, 1, NULL},
    {"1048577", MIB, "gpu_mem", 0, 2, NULL},
    {"8Ei", MIB, "gpu_mem", 0, 8LL << 40, NULL},
    {"0.5", MIB, "gpu_mem", -EINVAL, 0, "whole number of bytes"},
    {"8388608Ei", MIB, "gpu_mem", -ERANGE, 0, "the most is 9223372036854775807Mi"},
};

static bool printable(const char *s)
{
    for (; *s; s++)
        if (!isprint((unsigned char)*s))
            return false;
    return true;
}

static void test_parse_table(void **st)
{
    size_t n = sizeof cases / sizeof cases[0];

    assert_true(n >= 45);
    for (size_t i = 0; i < n; i++) {
        const qcase_t *c = &cases[i];
        int64_t out = -42;
        arb_err_t e = {{0}};
        int rc = arb_qty_parse(c->s, c->kind, c->field, &out, &e);

        if (rc != c->rc || (rc == 0 && out != c->want))
            fail_msg("case %zu '%s' kind %d: rc %d out %lld, want rc %d out %lld (%s)", i, c->s,
                     (int)c->kind, rc, (long long)out, c->rc, (long long)c->want, e.msg);
        if (rc == 0)
            continue;
        if (out != -42)
            fail_msg("case %zu '%s': *out changed on failure", i, c->s);
        if (!strstr(e.msg, c->msg))
            fail_msg("case %zu '%s': message '%s' lacks '%s'", i, c->s, e.msg, c->msg);
        /* Every message names the field and quotes the value. */
        char quoted[128];
        snprintf(quoted, sizeof quoted, "'%s'", c->s);
        if (!strstr(e.msg, c->field) || (printable(c->s) && !strstr(e.msg, quoted)))
            fail_msg("case %zu: message '%s' must name %s and quote %s", i, e.msg, c->field,
                     quoted);
    }
}

static void test_parse_edges(void **st)
{
    int64_t out = 7;
    arb_err_t e;
    char s[400];

    /* Exponent cancels many trailing zeros: 10^300 x 10^-300 is 1. */
    s[0] = '1';
    memset(s + 1, '0', 300);
    strcpy(s + 301, "e-300");
    assert_int_equal(arb_qty_parse(s, C, "pods", &out, &e), 0);
    assert_int_equal(out, 1);
    /* Many leading zeros are no overflow. */
    memset(s, '0', 350);
    strcpy(s + 350, "12Ki");
    assert_int_equal(arb_qty_parse(s, B, "memory", &out, &e), 0);
    assert_int_equal(out, 12288);
    /* A long value is cut in the message, never overflowing it. */
    memset(s, '9', 399);
    s[399] = '\0';
    out = 7;
    assert_int_equal(arb_qty_parse(s, C, "pods", &out, &e), -ERANGE);
    assert_int_equal(out, 7);
    assert_non_null(strstr(e.msg, "...'"));
    /* NULL text and NULL err are allowed; NULL field reads "quantity". */
    assert_int_equal(arb_qty_parse(NULL, C, NULL, &out, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "quantity: '' is empty"));
    assert_int_equal(arb_qty_parse("1.5", C, "pods", &out, NULL), -EINVAL);
    assert_int_equal(arb_qty_parse("8", (arb_qty_kind_t)99, "pods", &out, &e), -EINVAL);
    assert_int_equal(out, 7);
}

typedef struct fcase {
    int64_t v;
    arb_qty_kind_t kind;
    const char *want;
} fcase_t;

static const fcase_t fcases[] = {
    {8, C, "8"},
    {0, C, "0"},
    {1500, M, "1500m"},
    {2000, M, "2"},
    {500, M, "500m"},
    {0, M, "0"},
    {-1500, M, "-1500m"},
    {256LL << 30, B, "256Gi"},
    {1024, B, "1Ki"},
    {1536, B, "1536"},
    {100000000, B, "100000000"},
    {3LL << 60, B, "3Ei"},
    {0, B, "0"},
    {INT64_MIN, B, "-8Ei"},
    {16384, MIB, "16Gi"},
    {500, MIB, "500Mi"},
    {1536, MIB, "1536Mi"},
    {1LL << 20, MIB, "1Ti"},
    {1LL << 40, MIB, "1Ei"},
    {0, MIB, "0"},
};

static void test_format(void **st)
{
    char buf[64];

    for (size_t i = 0; i < sizeof fcases / sizeof fcases[0]; i++) {
        arb_qty_format(fcases[i].v, fcases[i].kind, buf, sizeof buf);
        assert_string_equal(buf, fcases[i].want);
    }
    /* Truncated, always terminated; n == 0 writes nothing. */
    arb_qty_format(256LL << 30, C, buf, 4);
    assert_string_equal(buf, "274");
    buf[0] = 'x';
    arb_qty_format(1, C, buf, 0);
    assert_int_equal(buf[0], 'x');
}

static void test_round_trip(void **st)
{
    static const int64_t vals[] = {
        0,          1,         7,         999,       1000,          1500,
        1024,       1536,      1048576,   16384,     76294,         256LL << 30,
        1000000007, 1LL << 62, 3LL << 60, INT64_MAX, INT64_MAX - 1, INT64_MAX / 1000 * 1000,
    };
    static const arb_qty_kind_t kinds[] = {C, M, B, MIB};
    char buf[64];

    for (size_t k = 0; k < 4; k++) {
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
            int64_t back = -1;
            arb_err_t e = {{0}};
            arb_qty_format(vals[i], kinds[k], buf, sizeof buf);
            if (arb_qty_parse(buf, kinds[k], "x", &back, &e) != 0 || back != vals[i])
                fail_msg("kind %zu: %lld -> '%s' -> %lld (%s)", k, (long long)vals[i], buf,
                         (long long)back, e.msg);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),
        cmocka_unit_test(test_parse_edges),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
