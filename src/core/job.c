/*
 * job.c: the job model: construction, validation of a job's request, and
 * the job lifecycle drawn in job.h.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/job.h"

/* A name not set yet, or set to "": never freed. */
static const char no_name[] = "";

/* A copy of name cut to max - 1 bytes (as snprintf into a char[max] cut it),
 * or no_name for "". NULL: out of memory. */
static const char *name_dup(const char *name, size_t max)
{
    size_t n = name ? strnlen(name, max - 1) : 0;
    char *p;

    if (n == 0)
        return no_name;
    if (!(p = malloc(n + 1)))
        return NULL;
    memcpy(p, name, n);
    p[n] = '\0';
    return p;
}

static void name_free(const char *name)
{
    if (name && name != no_name)
        free((char *)name);
}

static int set_name(const char **at, const char *name, size_t max)
{
    const char *p = name_dup(name, max);

    if (!p)
        return -ENOMEM;
    name_free(*at);
    *at = p;
    return 0;
}

int arb_job_set_name(arb_job_t *j, const char *name)
{
    return set_name(&j->name, name, ARB_JOB_NAME_MAX);
}

int arb_tgroup_set_name(arb_tgroup_t *g, const char *name)
{
    return set_name(&g->name, name, ARB_GROUP_NAME_MAX);
}

/* The job and its groups are one allocation (the groups right after the job:
 * a queued job's two largest parts, one allocator header); the names are
 * apart, each sized to it (arb_job_set_name). */
arb_job_t *arb_job_new(const char *name, int ngroups)
{
    size_t ng = ngroups > 0 ? (size_t)ngroups : 0;
    arb_job_t *j;

    _Static_assert(sizeof(arb_job_t) % _Alignof(arb_tgroup_t) == 0, "groups follow the job");
    if (ng > (SIZE_MAX - sizeof *j) / sizeof(arb_tgroup_t) ||
        !(j = calloc(1, sizeof *j + ng * sizeof(arb_tgroup_t))))
        return NULL;
    if (ng > 0) {
        j->groups = (arb_tgroup_t *)(j + 1);
        for (size_t i = 0; i < ng; i++) {
            j->groups[i].replicas = 1;
            j->groups[i].name = no_name;
        }
    }
    j->ngroups = ngroups;
    if (!(j->name = name_dup(name, ARB_JOB_NAME_MAX))) {
        free(j);
        return NULL;
    }
    j->preemptible = true;
    j->grace_s = -1;
    return j;
}

static void free_terms(arb_aff_term_t *t, int n)
{
    for (int i = 0; i < n; i++) {
        for (int e = 0; e < t[i].nexpr; e++)
            free(t[i].expr[e].vals);
        free(t[i].expr);
    }
    free(t);
}

void arb_job_free(arb_job_t *j)
{
    if (!j)
        return;
    name_free(j->name);
    for (int i = 0; j->groups && i < j->ngroups; i++)
        name_free(j->groups[i].name);
    if (j->groups != (arb_tgroup_t *)(j + 1)) /* set by a caller, not arb_job_new */
        free(j->groups);
    free(j->selector);
    free_terms(j->required, j->nrequired);
    free_terms(j->preferred, j->npreferred);
    free(j->tolerations);
    free(j->models);
    free(j->alloc);
    free(j->claim);
    free(j);
}

int arb_job_finalize(arb_job_t *j, arb_err_t *err)
{
    int total = 0;

    if (!j->name[0])
        return arb_errf(err, -EINVAL, "job name is empty; give every job a name");
    if (j->ngroups <= 0)
        return arb_errf(err, -EINVAL, "job '%s' has no task groups; add at least one", j->name);
    for (int i = 0; i < j->ngroups; i++) {
        arb_tgroup_t *g = &j->groups[i];
        if (j->gpu_sharing < 0 && g->gpu_share > 0 && g->gpus == 0) {
            /* gpuSharing: deny: a GPU of its own, so no other task shares it */
            g->gpu_share = 0;
            g->gpus = 1;
        }
        if (g->replicas <= 0)
            return arb_errf(err, -EINVAL, "job '%s' group %d: replicas %d must be at least 1",
                            j->name, i, g->replicas);
        if (g->gpus < 0 || g->gpus > 16)
            return arb_errf(err, -EINVAL,
                            "job '%s' group %d: %d GPUs per task; a task gets 0..16 GPUs of "
                            "one node (use more replicas for more GPUs)",
                            j->name, i, g->gpus);
        if (g->gpu_share < 0 || g->gpu_share >= 1000)
            return arb_errf(err, -EINVAL,
                            "job '%s' group %d: GPU share %dm must be 1m..999m; use whole GPUs "
                            "for 1000m and more",
                            j->name, i, g->gpu_share);
        if (g->gpus && g->gpu_share)
            return arb_errf(err, -EINVAL,
                            "job '%s' group %d: asks for both whole GPUs and a GPU share; "
                            "choose one",
                            j->name, i);
        if (g->req.cpu_milli < 0 || g->req.mem_bytes < 0 || g->req.gpu_mem_mib < 0)
            return arb_errf(err, -EINVAL, "job '%s' group %d: negative request", j->name, i);
        g->req.gpu_milli = g->gpus ? (int64_t)g->gpus * 1000 : g->gpu_share;
        if (g->topo.level == ARB_TOPO_NVLINK && g->replicas > 1 && g->topo.required && g->gpus == 0)
            return arb_errf(err, -EINVAL,
                            "job '%s' group %d: an NVLink requirement needs whole GPUs", j->name,
                            i);
        if (total > INT32_MAX / 2 - g->replicas)
            return arb_errf(err, -EINVAL, "job '%s': too many tasks", j->name);
        total += g->replicas;
    }
    if (j->gang_min < 0 || j->gang_min > total)
        return arb_errf(err, -EINVAL,
                        "job '%s': gangMin %d is outside 0..%d (its task count; 0 means all)",
                        j->name, j->gang_min, total);
    if (j->gang_min == 0)
        j->gang_min = total;
    if (j->grace_s < -1 || j->grace_s > ARB_GRACE_MAX_S)
        return arb_errf(err, -EINVAL, "job '%s': terminationGracePeriodSeconds %d is outside 0..%d",
                        j->name, j->grace_s, ARB_GRACE_MAX_S);
    if (j->elastic && j->ngroups != 1)
        return arb_errf(err, -EINVAL,
                        "job '%s': replicas {min, max} needs a one-group job (its tasks are "
                        "interchangeable ranks); drop groups: or give fixed replicas",
                        j->name);
    if (j->time_limit_s < 0)
        return arb_errf(err, -EINVAL, "job '%s': timeLimit %lld must not be negative", j->name,
                        (long long)j->time_limit_s);
    if (!j->alloc || j->ntasks != total) {
        arb_task_alloc_t *a = realloc(j->alloc, (size_t)total * sizeof *a);
        if (!a)
            return arb_errf(err, -ENOMEM, "out of memory");
        j->alloc = a;
    }
    j->ntasks = total;
    j->nalloc = 0;
    return 0;
}

const arb_tgroup_t *arb_job_task_group(const arb_job_t *j, int t, int *gi)
{
    for (int i = 0; i < j->ngroups; i++) {
        if (t < j->groups[i].replicas) {
            if (gi)
                *gi = i;
            return &j->groups[i];
        }
        t -= j->groups[i].replicas;
    }
    return NULL;
}

void arb_job_total(const arb_job_t *j, arb_res_t *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < j->ngroups; i++)
        for (int r = 0; r < (j->elastic ? j->gang_min : j->groups[i].replicas); r++)
            arb_res_add(out, &j->groups[i].req);
}

static const char *const job_state_names[ARB_JOB_NSTATES] = {
    "pending", "placed", "running", "preempted", "succeeded", "failed", "cancelled", "timeout"};

const char *arb_job_state_name(arb_job_state_t s)
{
    return (unsigned)s < ARB_JOB_NSTATES ? job_state_names[s] : "?";
}

/* The arrows of the lifecycle diagram in job.h: allowed[from][to]. */
static const bool job_allowed[ARB_JOB_NSTATES][ARB_JOB_NSTATES] = {
    /*              PEND   PLACED RUN    PREEMP SUCC   FAIL   CANC   TIMEOUT */
    /* PENDING   */ {false, true, false, false, false, false, true, false},
    /* PLACED    */ {false, false, true, true, false, true, true, true},
    /* RUNNING   */ {false, false, false, true, true, true, true, true},
    /* PREEMPTED */ {true, false, false, false, false, false, true, false},
    /* SUCCEEDED */ {false},
    /* FAILED    */ {false},
    /* CANCELLED */ {false},
    /* TIMEOUT   */ {false},
};

int arb_job_transition(arb_job_t *j, arb_job_state_t to, arb_err_t *err)
{
    if ((unsigned)to >= ARB_JOB_NSTATES || !job_allowed[j->state][to])
        return arb_errf(err, -EPERM, "job '%s' cannot go from %s to %s", j->name,
                        arb_job_state_name(j->state), arb_job_state_name(to));
    j->state = to;
    return 0;
}

static const char *const topo_names[] = {"any", "nvlink", "node", "rack", "block"};

const char *arb_topo_level_name(arb_topo_level_t l)
{
    return (unsigned)l <= ARB_TOPO_BLOCK ? topo_names[l] : "?";
}

int arb_topo_level_parse(const char *s, arb_topo_level_t *out)
{
    for (int i = 0; i <= ARB_TOPO_BLOCK; i++)
        if (strcmp(s, topo_names[i]) == 0) {
            *out = (arb_topo_level_t)i;
            return 0;
        }
    return -EINVAL;
}
