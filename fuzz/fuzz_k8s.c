/*
 * fuzz_k8s.c: libFuzzer target for the Kubernetes manifest reader (src/spec/k8s.c, k8s_pod.c),
 * from a memory buffer, through the dry run (src/spec/wl_dry.c) so the
 * native specs it makes are read back by the controller's own spec reader.
 *
 * Checked: no crash, hang or sanitizer report on any input; a failure has a
 * message; a success made at least one job, and every job it made is a
 * JSON object with a name that the dry run reads or refuses with a message.
 *
 * Seed inputs: fuzz/seeds/fuzz_k8s/ (files of tests/fixtures/compat).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/wl.h"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_k8s: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    arb_err_t err;
    wl_t w;
    json_t *out = NULL;

    if (size > (1u << 16))
        return 0;
    memset(&err, 0, sizeof err);
    if (wl_init(&w, "fuzz", &err) < 0)
        return 0;
    int rc = wl_k8s(&w, (const char *)data, size);
    if (rc < 0) {
        check(err.msg[0] != '\0', "a failure without a message", NULL);
        check(json_array_size(w.jobs) == 0 || rc != -ENOMEM, "jobs kept after -ENOMEM", err.msg);
    } else {
        check(json_array_size(w.jobs) > 0, "success without a job", NULL);
        size_t i;
        json_t *j;
        json_array_foreach(w.jobs, i, j)
            check(json_is_object(j) && json_string_value(json_object_get(j, "name")),
                  "a job without a name", NULL);
        memset(&err, 0, sizeof err);
        if (wl_dry(&w, &out) < 0)
            check(err.msg[0] != '\0', "a dry-run failure without a message", NULL);
        json_decref(out);
    }
    wl_free(&w);
    return 0;
}
