/*
 * fuzz_dependency.c: libFuzzer target for spec_dep_parse (Slurm's
 * --dependency text). Checked: no crash or sanitizer report; a failure
 * returns -EINVAL with a message naming "dependency"; a success has 1..64
 * terms, each of a known type, a job id on every term but singleton.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/depend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    arb_err_t err = {{0}};
    spec_dep_t d;

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int rc = spec_dep_parse(s, &d, &err);
    if (rc < 0 && (rc != -EINVAL || !strstr(err.msg, "dependency")))
        abort();
    if (rc == 0) {
        if (d.n < 1 || d.n > SPEC_DEP_MAX)
            abort();
        for (int i = 0; i < d.n; i++)
            if (d.t[i].type > SPEC_DEP_SINGLETON ||
                (d.t[i].type != SPEC_DEP_SINGLETON && d.t[i].job == 0))
                abort();
    }
    free(s);
    return 0;
}
