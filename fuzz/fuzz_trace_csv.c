/*
 * fuzz_trace_csv.c: libFuzzer target for the simulator's CSV readers
 * (node list, task list, published results).
 *
 * The first input byte picks the reader, the rest is the file. Checked: no
 * crash or sanitizer report; a failure returns -EINVAL (or -ENOMEM) with a
 * message that starts with the file name and a line:column; a success
 * holds values inside the documented ranges.
 *
 * The readers live in the arbsim library, which fuzz/CMakeLists.txt does not
 * link; they are compiled into this target directly (trace.c needs only
 * arbutil).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/trace.h"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_trace_csv: %s (message: '%s')\n", what, msg);
        abort();
    }
}

/* "f.csv:LINE:COL: ..." */
static bool located(const char *msg)
{
    int line, col, n = 0;
    return sscanf(msg, "f.csv:%d:%d: %n", &line, &col, &n) == 2 && n > 0 && line >= 1 && col >= 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    arb_err_t err = {{0}};
    const char *buf;
    int rc;

    if (size < 1)
        return 0;
    buf = (const char *)data + 1;
    size--;
    switch (data[0] % 3) {
    case 0: {
        sim_nodes_t n;
        rc = sim_nodes_parse(buf, size, "f.csv", &n, &err);
        if (rc == 0) {
            for (int i = 0; i < n.n; i++)
                check(n.v[i].name[0] && n.v[i].cpu_milli >= 0 && n.v[i].memory_mib >= 0 &&
                          n.v[i].gpus >= 0 && n.v[i].gpus <= 16 &&
                          (n.v[i].gpus == 0 || n.v[i].model[0]),
                      "node out of range", "");
            sim_nodes_free(&n);
        }
        break;
    }
    case 1: {
        sim_tasks_t t;
        rc = sim_tasks_parse(buf, size, "f.csv", &t, &err);
        if (rc == 0) {
            for (int i = 0; i < t.n; i++) {
                const sim_task_t *k = &t.v[i];
                check(k->name[0] && k->cpu_milli >= 0 && k->memory_mib >= 0 && k->num_gpu >= 0 &&
                          k->num_gpu <= 16 && k->gpu_milli >= 0 && k->gpu_milli <= 1000 &&
                          !(k->num_gpu > 1 && k->gpu_milli > 0 && k->gpu_milli < 1000),
                      "task out of range", "");
            }
            sim_tasks_free(&t);
        }
        break;
    }
    default: {
        sim_expect_t e;
        rc = sim_expect_parse(buf, size, "f.csv", &e, &err);
        if (rc == 0)
            sim_expect_free(&e);
        break;
    }
    }
    check(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "unexpected return code", err.msg);
    if (rc == -EINVAL)
        check(located(err.msg), "error without file:line:column", err.msg);
    return 0;
}
