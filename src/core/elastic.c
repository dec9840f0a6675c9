/*
 * elastic.c: elastic training jobs in the scheduler core: growing a running
 * job toward its max when capacity frees, and shrinking it toward its min.
 *
 * An elastic job (j->elastic, spec `replicas: {min: 2, max: 8}`) has
 * ntasks = max interchangeable tasks of one group and gang_min = min. It
 * is placed like a gang whose first gang_min tasks are all or nothing, plus
 * as many more as fit at that moment (sched.c, sched_place_job). Its tasks
 * are always the prefix 0..nalloc-1: a rank is a task index.
 *
 *   placed with n tasks (min <= n <= max)
 *        |            grow (cycle, capacity left)       shrink (preemption)
 *        v          +-------------------------+    +-------------------------+
 *     HOLDING n ----+  n -> n + k, k <= max-n  +----+  n -> n - k, n - k >= min|
 *        |          +-------------------------+    +-------------------------+
 *        | whole-job preemption (the min gang), end, cancel
 *        v
 *     released (job.h lifecycle)
 *
 * Growth rule (chosen to never starve queued jobs): a cycle grows elastic
 * jobs only after every pending job had its turn, and only when none is
 * left pending and no preemption is under way (no victim stopping, no
 * preemptor waiting). So capacity that a queued job could use, now or once
 * victims have stopped, is never taken by growth. A pending job that
 * growth cannot affect does not count: one that would not fit even on the
 * empty cluster (growth_cannot_matter: every node either fails a filter
 * that is no matter of free capacity, such as a selector, affinity, taint,
 * GPU model, a node not ready or too hot, or could not hold the job's
 * tasks even empty). Growth only takes free capacity, so such a job is no
 * worse off for it; anything that might fit once capacity frees still
 * blocks growth. Jobs grow one task per round, highest priority first
 * (then oldest), so two elastic jobs share what is free. A grown task
 * keeps the group's required topology (topology: {level, required: true}):
 * it goes into the domain (NVLink domain, node, rack, block) of the job's
 * task 0, or not at all; without a requirement it goes to any node. Growth
 * stays within the queue's quota.
 * Quotas: admission counts an elastic job's min (arb_job_total); the tasks
 * beyond it obey the same rule as a job's start (sched_quota_admits_more):
 * within the queue's nominal, or borrowed within its borrowing limit from
 * what its cohort leaves idle, never what is held for a waiting preemptor
 * (queue.c, "Holds"). A first placement beyond min is trimmed to that
 * (sched_elastic_trim), and growth checks it per task: a queue without a
 * cohort has nobody to borrow from, so its nominal is its ceiling.
 *
 * Shrinking is preemption's cheapest move (preempt.c): an elastic job's
 * tasks above its min are victims one task at a time, highest rank first,
 * before any job is evicted whole; the min is a gang. Every change of
 * nalloc while the job holds bumps j->resize_gen, which the controller
 * turns into a resize event and a resize notice to the job's tasks.
 *
 * Invariants: (1) gang_min <= nalloc <= ntasks while an elastic job holds;
 * (2) its queue's usage is the sum of its nalloc tasks' requests.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

void sched_task_charge(arb_sched_t *s, const arb_job_t *j, int t, int sign)
{
    arb_queue_t *q = sched_queue_get(s, j->queue);
    const arb_tgroup_t *g = arb_job_task_group(j, t, NULL);

    if (!q || !g || (t < j->nalloc && j->alloc[t].node == ARB_NO_NODE && sign < 0))
        return;
    if (sign > 0)
        arb_res_add(&q->used, &g->req);
    else
        arb_res_sub(&q->used, &g->req);
}

static bool held(const arb_job_t *j)
{
    return j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
}

void sched_elastic_trim(arb_sched_t *s, arb_job_t *j)
{
    const arb_queue_t *q = sched_queue_get(s, j->queue);
    arb_res_t all = {0};

    if (!j->elastic || !q || !q->has_quota)
        return;
    for (int t = 0; t < j->nalloc; t++)
        arb_res_add(&all, &arb_job_task_group(j, t, NULL)->req);
    while (j->nalloc > j->gang_min && !sched_quota_admits_more(s, j, &all)) {
        arb_res_sub(&all, &arb_job_task_group(j, j->nalloc - 1, NULL)->req);
        sched_release_task(s, j, --j->nalloc);
    }
}

/* How many tasks of group g node n could hold if it were empty (its
 * allocatable capacity; healthy GPUs only). */
static int64_t cap_tasks(const arb_node_t *n, const arb_tgroup_t *g)
{
    int64_t k = INT64_MAX, gpus = n->cap.gpu_milli / 1000;

    if (g->gpus > 0)
        k = gpus / g->gpus;
    else if (g->gpu_share > 0)
        k = gpus * (1000 / g->gpu_share);
    if (g->req.cpu_milli > 0 && n->cap.cpu_milli / g->req.cpu_milli < k)
        k = n->cap.cpu_milli / g->req.cpu_milli;
    if (g->req.mem_bytes > 0 && n->cap.mem_bytes / g->req.mem_bytes < k)
        k = n->cap.mem_bytes / g->req.mem_bytes;
    return k;
}

/* Is pending job j one that growth cannot affect: would it not fit even on
 * the empty cluster? Per group: the nodes whose first failing filter is a
 * matter of free capacity (or that pass) could together hold fewer tasks
 * than the group needs (an elastic job: its min), even empty. A necessary
 * test of fit, so "cannot fit" is certain; a job it cannot rule out blocks
 * growth as before. */
static bool growth_cannot_matter(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    for (int gi = 0; gi < j->ngroups; gi++) {
        const arb_tgroup_t *g = &j->groups[gi];
        arb_pctx_t pc = {.sched = s, .cluster = s->c, .ctx = ctx, .job = j, .group = g};
        int64_t need = j->elastic ? j->gang_min : g->replicas, room = 0;
        for (uint32_t i = 0; i < s->c->nnodes && room < need; i++) {
            const arb_node_t *n = &s->c->nodes[i];
            arb_reason_t r = sched_filter_node(&pc, n);
            if (r != ARB_R_OK && r < ARB_R_GPUS)
                continue; /* condition, taints, selector, affinity, model, thermal */
            int64_t k = cap_tasks(n, g);
            room = k > need - room ? need : room + k;
        }
        if (room < need)
            return true;
    }
    return false;
}

/* The domain a grown task of j must stay in: that of task 0, at the
 * group's required topology level. false: no requirement. */
static bool grow_domain(const arb_sched_t *s, const arb_job_t *j, const arb_tgroup_t *g,
                        sched_dom_t *d)
{
    const arb_task_alloc_t *a = &j->alloc[0];
    const arb_node_t *n;

    if (!g->topo.required || g->topo.level == ARB_TOPO_ANY || j->nalloc == 0)
        return false;
    n = &s->c->nodes[a->node];
    memset(d, 0, sizeof *d);
    d->level = g->topo.level;
    d->node = a->node;
    d->nvlink = a->gpu_mask ? n->gpu[__builtin_ctz(a->gpu_mask)].nvlink : 0;
    d->rack = n->rack;
    d->block = n->block;
    return true;
}

static int cmp_grow(const void *a, const void *b)
{
    const arb_job_t *x = *(arb_job_t *const *)a, *y = *(arb_job_t *const *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int sched_elastic_grow(arb_sched_t *s, const arb_ctx_t *ctx)
{
    arb_job_t **v;
    int nv = 0, grown = 0;
    bool progress = true;

    if (s->nelastic == 0) /* nothing to grow: skip the walks */
        return 0;
    for (uint32_t i = 0; i < s->njobs; i++) {
        arb_job_t *j = s->jobs[i];
        if (j->waiting || j->evicting || j->shrink_to > 0)
            return 0; /* the growth rule: preemptions come first */
    }
    for (uint32_t i = 0; i < s->njobs; i++)
        if (s->jobs[i]->state == ARB_JOB_PENDING && !growth_cannot_matter(s, s->jobs[i], ctx))
            return 0; /* and queued jobs, unless growth cannot affect them */
    v = malloc((s->njobs + 1) * sizeof *v);
    if (!v)
        return 0;
    for (uint32_t i = 0; i < s->njobs; i++) {
        arb_job_t *j = s->jobs[i];
        if (j->elastic && held(j) && j->nalloc < j->ntasks)
            v[nv++] = j;
    }
    qsort(v, (size_t)nv, sizeof *v, cmp_grow);
    while (progress) {
        progress = false;
        for (int i = 0; i < nv; i++) {
            arb_job_t *j = v[i];
            const arb_tgroup_t *g;
            sched_dom_t d;
            if (!j || j->nalloc >= j->ntasks)
                continue;
            g = arb_job_task_group(j, j->nalloc, NULL);
            if (!sched_quota_admits_more(s, j, &g->req) ||
                sched_place_task(s, j, j->nalloc, grow_domain(s, j, g, &d) ? &d : NULL, ctx) < 0) {
                v[i] = NULL; /* nothing more fits it this cycle */
                continue;
            }
            sched_task_charge(s, j, j->nalloc, +1);
            j->nalloc++;
            j->resize_gen++;
            grown++;
            progress = true;
        }
    }
    free(v);
    return grown;
}

int arb_sched_shrink(arb_sched_t *s, arb_job_t *j, int n, arb_err_t *err)
{
    if (!held(j))
        return arb_errf(err, -EPERM, "job '%s' is %s; only a placed or running job shrinks",
                        j->name, arb_job_state_name(j->state));
    if (n < j->gang_min || n > j->nalloc)
        return arb_errf(err, -EINVAL, "job '%s': cannot shrink from %d to %d tasks (its min is %d)",
                        j->name, j->nalloc, n, j->gang_min);
    if (n < j->nalloc)
        j->resize_gen++;
    while (j->nalloc > n) {
        int t = j->nalloc - 1;
        sched_task_charge(s, j, t, -1);
        sched_release_task(s, j, t);
        j->nalloc--;
    }
    j->shrink_to = 0;
    return 0;
}
