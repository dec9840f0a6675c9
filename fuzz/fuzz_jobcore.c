/*
 * fuzz_jobcore.c: libFuzzer target for st_core_read (a job's compact form
 * in its store record, src/state/jobcore.c). Checked: no crash, leak or
 * sanitizer report; a failure returns -EINVAL (or -ENOMEM) with a message
 * and no job; a success is a finalized job whose form, written again and
 * read again, is the same text (what was read is what is kept).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    arb_cluster_t c;
    arb_job_t *j = NULL, *k = NULL;
    st_dep_t *dep = NULL, *dep2 = NULL;
    char pc[ST_PCLASS_MAX], pc2[ST_PCLASS_MAX];
    arb_err_t err = {{0}};

    arb_cluster_init(&c);
    arb_extnames_index(&c.ext, "rdma/hca", true); /* one extended resource a node offers */
    int rc = st_core_read(&c, (const char *)data, size, &j, pc, sizeof pc, &dep, &err);
    if (rc < 0 && ((rc != -EINVAL && rc != -ENOMEM) || !err.msg[0] || j || dep))
        abort();
    if (rc == 0) {
        if (!j || j->ntasks < 1 || j->gang_min < 1 || j->gang_min > j->ntasks)
            abort();
        char *t1 = st_core_text(&c, j, pc, dep);
        if (t1) {
            if (st_core_read(&c, t1, strlen(t1), &k, pc2, sizeof pc2, &dep2, &err) < 0)
                abort();
            char *t2 = st_core_text(&c, k, pc2, dep2);
            if (t2 && strcmp(t1, t2) != 0)
                abort();
            free(t2);
        }
        free(t1);
    }
    arb_job_free(j);
    arb_job_free(k);
    st_dep_free(dep);
    st_dep_free(dep2);
    arb_cluster_free(&c);
    return 0;
}
