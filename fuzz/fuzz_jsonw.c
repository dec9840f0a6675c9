/*
 * fuzz_jsonw.c: libFuzzer target for the compact JSON writer
 * (src/util/jsonw.c). The input is read by jansson (any value, duplicates
 * allowed, embedded NULs kept), and the tree written by both jansson's
 * json_dumps(JSON_COMPACT) and arb_jsonw_dumps, and replayed call by call
 * through the streaming writer (arb_jw_*) where its C strings can say it (no
 * NUL inside a string or key). Checked: no crash or sanitizer report, and
 * the same text from all (or a refusal from all: the streaming writer also
 * refuses a key that is not UTF-8, which jansson writes on past).
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/unit/jsonw_replay.h"
#include "util/jsonw.h"

/* -1: not expressible through arb_jw_*; 0 fine; 1 a key that is not UTF-8. */
static int check(const json_t *v, int depth)
{
    const char *k;
    json_t *x;
    size_t i;
    int bad = 0, rc;

    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, x)
        {
            if (strlen(k) != json_object_iter_key_len(json_object_key_to_iter(k)))
                return -1;
            json_t *probe = json_string(k); /* jansson's own UTF-8 check */
            if (!probe)
                bad = 1;
            json_decref(probe);
            if ((rc = check(x, depth + 1)) < 0)
                return rc;
            bad |= rc;
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x)
        {
            if ((rc = check(x, depth + 1)) < 0)
                return rc;
            bad |= rc;
        }
    } else if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v)) {
        return -1;
    }
    return depth >= ARB_JW_MAX_DEPTH - 1 ? -1 : bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);

    if (!v)
        return 0;
    char *want = json_dumps(v, JSON_COMPACT), *got = arb_jsonw_dumps(v);
    if ((want == NULL) != (got == NULL) || (want && strcmp(want, got) != 0)) {
        fprintf(stderr, "fuzz_jsonw: jansson wrote '%s', arb_jsonw '%s'\n", want ? want : "(NULL)",
                got ? got : "(NULL)");
        abort();
    }
    int ok = json_is_object(v) || json_is_array(v) ? check(v, 0) : -1;
    if (ok >= 0) {
        arb_buf_t b = {0};
        arb_jw_t w;
        arb_jw_begin(&w, &b);
        replay(&w, v);
        int rc = arb_jw_end(&w);
        bool same = ok == 1 ? rc == -EINVAL
                    : want  ? rc == 0 && strcmp(b.p ? b.p : "", want) == 0
                            : rc == -EINVAL;
        if (!same && rc != -ENOMEM) {
            fprintf(stderr, "fuzz_jsonw: jansson wrote '%s', arb_jw (%d) '%s'\n",
                    want ? want : "(NULL)", rc, b.p ? b.p : "");
            abort();
        }
        arb_buf_free(&b);
    }
    free(want);
    free(got);
    json_decref(v);
    return 0;
}
