/*
 * fuzz_quantity.c: libFuzzer target for arb_qty_parse/arb_qty_format.
 *
 * The input, as a NUL-terminated string, is parsed as every kind. Checked:
 * no crash or sanitizer report; a failure leaves *out alone, names the field
 * and returns -EINVAL or -ERANGE; a success is >= 0 and survives
 * parse(format(v)) == v; the kinds agree (MiB is bytes rounded up, milli is
 * a count x 1000).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/resource.h"

#define FIELD "fuzz/field"
#define SENTINEL ((int64_t)-7)

static void check(bool ok, const char *what, const char *s)
{
    if (!ok) {
        fprintf(stderr, "fuzz_quantity: %s for input '%s'\n", what, s);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const arb_qty_kind_t kinds[] = {ARB_QTY_COUNT, ARB_QTY_MILLI, ARB_QTY_BYTES,
                                           ARB_QTY_MIB};
    int64_t v[4];
    int rc[4];
    char *s = malloc(size + 1);

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    for (int k = 0; k < 4; k++) {
        arb_err_t e = {{0}};
        char buf[64];
        int64_t back = SENTINEL;

        v[k] = SENTINEL;
        rc[k] = arb_qty_parse(s, kinds[k], FIELD, &v[k], &e);
        if (rc[k] != 0) {
            check(rc[k] == -EINVAL || rc[k] == -ERANGE, "odd error code", s);
            check(v[k] == SENTINEL, "*out changed on failure", s);
            check(strstr(e.msg, FIELD) != NULL, "message lacks the field", s);
            continue;
        }
        check(v[k] >= 0, "negative result", s);
        arb_qty_format(v[k], kinds[k], buf, sizeof buf);
        check(arb_qty_parse(buf, kinds[k], FIELD, &back, &e) == 0, "format does not parse", s);
        check(back == v[k], "parse(format(v)) != v", s);
    }
    /* The same number read as bytes and as MiB: MiB is bytes rounded up. */
    if (rc[2] == 0)
        check(rc[3] == 0 && v[3] == v[2] / 1048576 + (v[2] % 1048576 != 0), "MiB != bytes", s);
    /* A whole count is a thousand milli, if that fits. */
    if (rc[0] == 0 && v[0] <= INT64_MAX / 1000)
        check(rc[1] == 0 && v[1] == v[0] * 1000, "milli != count x 1000", s);
    /* Whole milli that fits a count is that count. */
    if (rc[1] == 0 && v[1] % 1000 == 0)
        check(rc[0] == 0 && v[0] == v[1] / 1000, "count != milli / 1000", s);
    /* Counts and bytes are read the same way. */
    check(rc[0] == rc[2] && (rc[0] != 0 || v[0] == v[2]), "count != bytes", s);
    free(s);
    return 0;
}
