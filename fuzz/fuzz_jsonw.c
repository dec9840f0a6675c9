/*
 * fuzz_jsonw.c: libFuzzer target for the compact JSON writer
 * (src/util/jsonw.c). The input is read by jansson (any value, duplicates
 * allowed, embedded NULs kept), and the tree written by both jansson's
 * json_dumps(JSON_COMPACT) and arb_jsonw_dumps. Checked: no crash or
 * sanitizer report, and the same text from both (or NULL from both).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/jsonw.h"

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
    free(want);
    free(got);
    json_decref(v);
    return 0;
}
