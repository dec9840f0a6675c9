/*
 * fuzz_gen.c: libFuzzer target for the workload generator's --gen parser
 * (sim_gen_parse) and, for what it accepts, the generator itself on a small
 * built-in task list.
 *
 * Checked: no crash or sanitizer report; a failure returns -EINVAL (or
 * -ENOMEM) with a message that starts with "--gen"; a success gives 1..max
 * points, each with a name and 0..SIM_GEN_MAX_STEPS steps in range; a
 * generated list is non-empty, hits a gpushare/cpu step's bounds, and
 * reads back through sim_tasks_write and sim_tasks_parse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/gen.h"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_gen: %s (message: '%s')\n", what, msg);
        abort();
    }
}

/* Ten tasks of each class: CPU-only, GPU shares, one GPU, several GPUs. */
static const char base_csv[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
    "c0,4000,1024,0,0,\nc1,8000,2048,0,0,\n"
    "s0,2000,1024,1,250,T4\ns1,2000,1024,1,500,\ns2,4000,1024,1,810,P100\n"
    "o0,8000,4096,1,1000,\no1,12000,4096,1,1000,G2\n"
    "m0,32000,65536,4,1000,\nm1,64000,131072,8,1000,G2\n";

static const char nodes_csv[] = "sn,cpu_milli,memory_mib,gpu,model\n"
                                "n0,96000,393216,8,G2\nn1,104000,524288,2,T4\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sim_gen_point_t v[8];
    arb_err_t err = {{0}};
    char *s = malloc(size + 1);
    int n = 0, rc;

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    rc = sim_gen_parse(s, v, 8, &n, &err);
    if (rc < 0) {
        check(rc == -EINVAL || rc == -ENOMEM, "unexpected error code", err.msg);
        check(strncmp(err.msg, "--gen", 5) == 0, "message does not start with --gen", err.msg);
        free(s);
        return 0;
    }
    check(n >= 1 && n <= 8, "point count out of range", "");
    for (int i = 0; i < n; i++) {
        check(v[i].name[0] != 0, "point without a name", "");
        check(v[i].nsteps >= 0 && v[i].nsteps <= SIM_GEN_MAX_STEPS, "step count", v[i].name);
        for (int k = 0; k < v[i].nsteps; k++)
            check(v[i].step[k].pct >= 0 && v[i].step[k].pct <= 100, "percent", v[i].name);
    }
    {
        sim_tasks_t base, out, back;
        sim_nodes_t nodes;
        char *buf = NULL;
        size_t len = 0;
        FILE *f;
        check(sim_tasks_parse(base_csv, sizeof base_csv - 1, "base.csv", &base, &err) == 0, "base",
              err.msg);
        check(sim_nodes_parse(nodes_csv, sizeof nodes_csv - 1, "n.csv", &nodes, &err) == 0, "nodes",
              err.msg);
        rc = sim_gen_make(&base, &v[0], NULL, &nodes, 1, &out, &err);
        check(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "make: unexpected code", err.msg);
        if (rc == 0) {
            check(out.n > 0, "empty list", v[0].name);
            f = open_memstream(&buf, &len);
            check(f && sim_tasks_write(f, &out) == 0, "write", v[0].name);
            fclose(f);
            check(sim_tasks_parse(buf, len, "g.csv", &back, &err) == 0, "read back", err.msg);
            check(back.n == out.n, "read back: task count", v[0].name);
            sim_tasks_free(&back);
            free(buf);
            sim_tasks_free(&out);
        }
        sim_tasks_free(&base);
        sim_nodes_free(&nodes);
    }
    free(s);
    return 0;
}
