/*
 * preempt.c: make room for a job by evicting others, and only when that
 * really makes it fit.
 *
 * Who may be evicted for job J: a placed or running job V that is
 * preemptible and either has a lower priority than J, or belongs to a queue
 * of J's cohort that is borrowing (above its nominal quota) while J's queue
 * stays within its own nominal after J starts (quota reclaim). Gangs are
 * evicted whole: a victim loses all of its tasks.
 *
 * How the set is chosen: evict candidates one at a time, cheapest first
 * (reclaimable borrowers, then lowest priority, then most recently started,
 * then smallest), until J fits; then give back ("reprieve") every victim,
 * last evicted first, whose return still lets J fit. What remains is a
 * minimal set in the sense that no single victim can be spared.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

typedef struct victim {
    arb_job_t *j;
    int reclaim;     /* 1: evicted to reclaim quota */
    int nalloc;      /* its allocations, saved for a restore */
    arb_task_alloc_t *saved;
    bool evicted;
} victim_t;

static bool under_nominal_after(arb_sched_t *s, const arb_job_t *j)
{
    arb_queue_t *q = sched_queue_get(s, j->queue);
    arb_res_t need, after;

    if (!q || !q->has_quota)
        return false;
    arb_job_total(j, &need);
    after = q->used;
    arb_res_add(&after, &need);
    return after.gpu_milli <= q->nominal.gpu_milli &&
           (q->nominal.cpu_milli == 0 || after.cpu_milli <= q->nominal.cpu_milli);
}

static bool borrowing(arb_sched_t *s, const arb_job_t *v)
{
    arb_queue_t *q = sched_queue_get(s, v->queue);
    return q && q->has_quota && q->used.gpu_milli > q->nominal.gpu_milli;
}

static int cmp_victim(const void *a, const void *b)
{
    const victim_t *x = a, *y = b;
    if (x->reclaim != y->reclaim)
        return y->reclaim - x->reclaim;
    if (x->j->priority != y->j->priority)
        return x->j->priority < y->j->priority ? -1 : 1;
    if (x->j->start_ns != y->j->start_ns)
        return x->j->start_ns > y->j->start_ns ? -1 : 1;
    if (x->j->ntasks != y->j->ntasks)
        return x->j->ntasks < y->j->ntasks ? -1 : 1;
    return x->j->seq < y->j->seq ? -1 : 1;
}

static void evict(arb_sched_t *s, victim_t *v)
{
    sched_queue_charge(s, v->j, -1);
    sched_unbind(s, v->j);
    v->evicted = true;
}

/* Put v's tasks back exactly where they were. */
static int restore(arb_sched_t *s, victim_t *v)
{
    arb_job_t *j = v->j;
    for (int t = 0; t < v->nalloc; t++) {
        if (arb_node_alloc(s->c, &arb_job_task_group(j, t, NULL)->req, &v->saved[t], NULL) < 0) {
            sched_unbind(s, j); /* cannot happen: its room was kept free */
            return -ENOSPC;
        }
        j->alloc[t] = v->saved[t];
        j->nalloc = t + 1;
    }
    sched_queue_charge(s, j, +1);
    v->evicted = false;
    return 0;
}

/* Does j fit now? Trial placement, undone before returning. */
static bool fits(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    if (sched_place_job(s, j, ctx) < 0)
        return false;
    sched_unbind(s, j);
    return true;
}

int sched_preempt_for(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, bool dry_run,
                      int *nvictims)
{
    victim_t *v = calloc(s->njobs + 1, sizeof *v);
    int nv = 0, rc = -ENOSPC, last = -1;
    bool reclaim_ok = under_nominal_after(s, j);

    if (!v)
        return -ENOMEM;
    for (uint32_t i = 0; i < s->njobs; i++) {
        arb_job_t *o = s->jobs[i];
        arb_queue_t *oq, *jq;
        int reclaim = 0;
        if (o == j || !o->preemptible ||
            (o->state != ARB_JOB_PLACED && o->state != ARB_JOB_RUNNING))
            continue;
        oq = sched_queue_get(s, o->queue);
        jq = sched_queue_get(s, j->queue);
        if (reclaim_ok && oq && jq && oq != jq && oq->cohort && oq->cohort == jq->cohort &&
            borrowing(s, o))
            reclaim = 1;
        if (!reclaim && o->priority >= j->priority)
            continue;
        v[nv].j = o;
        v[nv].reclaim = reclaim;
        v[nv].nalloc = o->nalloc;
        v[nv].saved = malloc((size_t)(o->nalloc > 0 ? o->nalloc : 1) * sizeof *v[nv].saved);
        if (!v[nv].saved) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(v[nv].saved, o->alloc, (size_t)o->nalloc * sizeof *o->alloc);
        nv++;
    }
    qsort(v, (size_t)nv, sizeof *v, cmp_victim);

    for (int i = 0; i < nv; i++) {
        evict(s, &v[i]);
        if (fits(s, j, ctx)) {
            last = i;
            break;
        }
    }
    if (last < 0)
        goto out; /* even evicting every candidate does not help */

    /* Reprieve: give back every victim J can do without. */
    for (int i = last; i >= 0; i--) {
        if (restore(s, &v[i]) < 0)
            continue;
        if (!fits(s, j, ctx))
            evict(s, &v[i]);
    }
    int count = 0;
    for (int i = 0; i <= last; i++)
        count += v[i].evicted;
    if (nvictims)
        *nvictims = count;
    if (dry_run) {
        rc = 0;
        goto out;
    }
    if (sched_place_job(s, j, ctx) < 0)
        goto out; /* cannot happen: it fitted a moment ago */
    for (int i = 0; i <= last; i++) {
        if (!v[i].evicted)
            continue;
        arb_job_transition(v[i].j, ARB_JOB_PREEMPTED, NULL);
        v[i].evicted = false; /* stays evicted: not restored below */
        v[i].nalloc = 0;
    }
    rc = 0;
out:
    /* Anything still marked evicted goes back where it was. */
    for (int i = nv - 1; i >= 0; i--)
        if (v[i].evicted)
            restore(s, &v[i]);
    for (int i = 0; i < nv; i++)
        free(v[i].saved);
    free(v);
    return rc;
}
