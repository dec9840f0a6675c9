/*
 * fuzz_scenario.c: libFuzzer target for the YAML scenario and job-spec
 * loaders (src/spec/scenario.c), from a memory buffer.
 *
 * Checked: no crash, hang or sanitizer report on any input; a failure
 * returns -EINVAL/-ERANGE/-ENOMEM, names the file in its message and leaves
 * the output untouched; a success yields a cluster whose invariants hold
 * (arb_cluster_check) and finalized jobs, all freed without a leak. The
 * same bytes are also read as one job spec against a small cluster.
 *
 * Seed corpus: the .yaml files of examples/ (copy them into the corpus).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/scenario.h"

#define NAME "fuzz.yaml"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_scenario: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

static void check_failure(int rc, const arb_err_t *err)
{
    check(rc == -EINVAL || rc == -ERANGE || rc == -ENOMEM || rc == -EFBIG, "unexpected code",
          err->msg);
    check(strncmp(err->msg, NAME, strlen(NAME)) == 0, "message does not name the file", err->msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    spec_scenario_t s, untouched;
    arb_cluster_t c;
    arb_job_t *j = NULL;
    arb_err_t err;
    int rc;

    if (size > (1u << 16))
        return 0; /* big inputs only slow the search down */

    memset(&s, 0x5A, sizeof s);
    untouched = s;
    memset(&err, 0, sizeof err);
    rc = spec_scenario_load_mem(NAME, (const char *)data, size, &s, &err);
    if (rc == 0) {
        check(arb_cluster_check(&s.cluster, &err) == 0, "cluster invariants", err.msg);
        check(s.cluster.nnodes > 0, "a scenario without nodes", NULL);
        for (int i = 0; i < s.njobs; i++)
            check(s.jobs[i] && s.jobs[i]->ntasks > 0 && s.jobs[i]->gang_min > 0 &&
                      s.jobs[i]->gang_min <= s.jobs[i]->ntasks,
                  "job not finalized", s.jobs[i] ? s.jobs[i]->name : NULL);
        spec_scenario_free(&s);
    } else {
        check_failure(rc, &err);
        check(memcmp(&s, &untouched, sizeof s) == 0, "output changed on failure", err.msg);
    }

    arb_cluster_init(&c);
    arb_extnames_index(&c.ext, "rdma/hca", true);
    memset(&err, 0, sizeof err);
    rc = spec_job_load_mem(NAME, (const char *)data, size, &c, &j, &err);
    if (rc == 0) {
        check(j && j->ntasks > 0, "job not finalized", NULL);
        arb_job_free(j);
    } else {
        check_failure(rc, &err);
        check(j == NULL, "job set on failure", err.msg);
    }
    arb_cluster_free(&c);
    return 0;
}
