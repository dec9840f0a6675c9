/*
 * backfill.c: the EASY reservation. When the job at the head of the queue
 * is blocked, it gets a reservation: the earliest time at which, going by
 * the time limits of the running jobs, enough would be free for it. Jobs
 * behind it may then start only if their own time limit ends before that
 * reservation, so they can never delay it (cycle.c, invariant 4). A job's
 * end is its start plus its time limit plus its grace to exit after the
 * SIGTERM at the limit. A running job without a time limit never ends as
 * far as the reservation knows.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

typedef struct ending {
    arb_job_t *j;
    int64_t end_ns;
    int nalloc;
    arb_task_alloc_t *saved;
} ending_t;

static int cmp_end(const void *a, const void *b)
{
    const ending_t *x = a, *y = b;
    return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

int64_t sched_reservation(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    ending_t *e = calloc(s->njobs + 1, sizeof *e);
    int ne = 0, released = 0;
    int64_t shadow = ctx->now_ns;

    if (!e)
        return shadow;
    for (uint32_t i = 0; i < s->njobs; i++) {
        arb_job_t *o = s->jobs[i];
        if ((o->state != ARB_JOB_PLACED && o->state != ARB_JOB_RUNNING) || o->time_limit_s <= 0)
            continue;
        e[ne].j = o;
        /* Stopped at its limit, then its grace to exit (time limits are
         * enforced: src/state, src/agent). */
        e[ne].end_ns = o->start_ns + o->time_limit_s * 1000000000LL +
                       (o->grace_s >= 0 ? (int64_t)o->grace_s * 1000000000LL : s->conf.grace_ns);
        e[ne].nalloc = o->nalloc;
        e[ne].saved = malloc((size_t)(o->nalloc > 0 ? o->nalloc : 1) * sizeof *e[ne].saved);
        if (!e[ne].saved)
            goto out;
        memcpy(e[ne].saved, o->alloc, (size_t)o->nalloc * sizeof *o->alloc);
        ne++;
    }
    qsort(e, (size_t)ne, sizeof *e, cmp_end);
    for (int i = 0; i < ne; i++) {
        sched_unbind(s, e[i].j);
        released = i + 1;
        if (sched_place_job(s, j, ctx) == 0) {
            sched_unbind(s, j);
            shadow = e[i].end_ns > ctx->now_ns ? e[i].end_ns : ctx->now_ns;
            break;
        }
    }
out:
    /* Put every released job back exactly where it was. */
    for (int i = released - 1; i >= 0; i--) {
        arb_job_t *o = e[i].j;
        for (int t = 0; t < e[i].nalloc; t++)
            sched_restore_task(s, o, t, &e[i].saved[t]);
        o->nalloc = e[i].nalloc;
    }
    for (int i = 0; i < ne; i++)
        free(e[i].saved);
    free(e);
    return shadow;
}
