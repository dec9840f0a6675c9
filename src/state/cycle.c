/*
 * cycle.c: the scheduling cycle and its thread: once per interval, or when
 * something changed, the clock-driven checks (leases, time limits,
 * stragglers), the services' reconcile, one arb_sched_cycle, then what the
 * cycle changed recorded job by job (placed, preempted, resized) and the
 * batch queued. The top of src/state: it calls the operations below it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/service.h"
#include "state/state_int.h"
#include "util/mtime.h"

#define ST_CHECK_GAP_NS 200000000LL /* 200 ms between the clock-driven checks */
/* The least time between the ends of two cycles that a change starts: what
 * arrives meanwhile is taken by one cycle (one batch, one commit, one push
 * per agent) instead of a cycle each. The first change after a quiet spell
 * starts a cycle at once; a busy one waits at most this long. */
#define ST_GATHER_NS 1000000LL

/* ---- the scheduler thread ------------------------------------------------------------- */

/*
 * The thread's loop, under s->mu except while a cycle runs:
 *
 *           interval passed, or st_kick (dirty)
 *   IDLE ------------------------------------------> GATHER: dirty, and the
 *   (sched_idle: kicks signal)                        last cycle ended less than
 *     ^                                               ST_GATHER_NS ago: wait out
 *     |                                               the rest (kicks only mark)
 *     | dirty false                                          |
 *     +------------------ CYCLE (st_cycle) <-----------------+
 *                            | dirty again (set while it ran): GATHER
 *
 * Lost wakeups cannot happen: dirty is read under s->mu before every wait,
 * and st_kick signals whenever the thread waits in IDLE.
 */
static void *sched_main(void *arg)
{
    st_t *s = arg;
    int64_t last = 0; /* st_mono_ns when the last cycle ended; 0 none yet */

    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec ts = arb_deadline_ns(s->conf.interval_ns);
        if (!s->dirty) {
            s->sched_idle = true;
            arb_cond_wait_until(&s->kick, &s->mu, &ts);
            s->sched_idle = false;
        }
        for (int64_t now = st_mono_ns();
             s->dirty && last && !s->stop && now >= last && now < last + ST_GATHER_NS;
             now = st_mono_ns()) {
            struct timespec g = arb_deadline_ns(last + ST_GATHER_NS - now);
            arb_cond_wait_until(&s->kick, &s->mu, &g); /* only st_close wakes it early */
        }
        if (s->stop)
            break;
        st_history_trim(s); /* ended jobs past jobs.history leave memory (history.c) */
        pthread_mutex_unlock(&s->mu);
        st_cycle(s, NULL, NULL); /* a failed store stops every waiter, not this loop */
        last = st_mono_ns();
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int st_start(st_t *s, arb_err_t *err)
{
    if (pthread_create(&s->thr, NULL, sched_main, s) != 0)
        return arb_errf(err, -EAGAIN, "cannot start the scheduler thread");
    pthread_setname_np(s->thr, "arb-sched"); /* top, perf, bench backlog's CPU split */
    s->running = true;
    if (st_probe_start(s) < 0)
        return arb_errf(err, -EAGAIN, "cannot start the health-probe thread");
    return 0;
}

/* ---- the cycle ------------------------------------------------------------------------- */

/* Record what the cycle changed for one job. */
static void job_after_cycle(st_t *s, st_job_t *sj)
{
    arb_job_t *j = sj->j;
    bool was_queued = sj->last == ARB_JOB_PENDING || sj->last == ARB_JOB_PREEMPTED;
    bool queued = j->state == ARB_JOB_PENDING || j->state == ARB_JOB_PREEMPTED;
    char where[256];
    size_t used = 0;
    uint64_t lam;

    if (was_queued && !queued) { /* placed */
        sj->attempt++;
        sj->epoch = s->epoch;
        sj->delivered = false;
        sj->start_ms = st_now_ms(s);
        where[0] = '\0';
        for (int t = 0; t < j->nalloc; t++) {
            sj->tasks[t].state = TK_ASSIGNED;
            sj->tasks[t].has_exit = false;
            sj->tasks[t].straggler = ST_STRAG_NONE;
            sj->tasks[t].node1 = j->alloc[t].node + 1;
            if (used < sizeof where) /* the message may be cut short; every task is marked */
                used += (size_t)snprintf(
                    where + used, sizeof where - used, "%s%s", t ? "," : "",
                    arb_node_name(&s->cluster, &s->cluster.nodes[j->alloc[t].node]));
        }
        st_job_say(sj, "%s", "");
        sj->nalloc_seen = j->nalloc;
        sj->shrink_noted = 0;
        st_node_index_job(s, sj);
        lam = st_event(s, "job-placed", sj->id, NULL,
                       "job %llu '%s' placed on %s (attempt %llu, epoch %llu)",
                       (unsigned long long)sj->id, j->name, where, (unsigned long long)sj->attempt,
                       (unsigned long long)sj->epoch);
        st_job_save(s, sj, lam);
        s->m_placed++;
        s->m_placed_window++;
    } else if (!was_queued && queued) { /* preempted */
        char why[400];
        for (int t = 0; t < sj->ntasks; t++)
            sj->tasks[t].state = TK_PENDING;
        st_service_preempted(s, sj, why, sizeof why); /* who preempted it, and why */
        st_job_say(sj, "%.255s", why);
        lam = st_event(s, "job-preempted", sj->id, NULL, "%s", why);
        st_job_save(s, sj, lam);
        s->m_preempted++;
    }
}

/* After a cycle that only placed jobs (no preemption configured, nothing
 * preempted, shrunk, grown or continued), only the jobs it placed changed:
 * record those, without walking every active job. false (nothing done)
 * when the cycle may have changed others, or a placed job is not ours. */
static bool after_placed(st_t *s, const arb_cycle_stats_t *st)
{
    arb_job_t *const *v;
    uint32_t n = arb_sched_placed(s->sched, &v);

    if (s->m_cycles <= 1 || /* the first cycle notes what recovery held, too */
        arb_sched_conf(s->sched)->preemption || st->preempted || st->shrunk || st->grown ||
        st->continued)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        st_job_t *sj = st_job_find(s, v[i]->ext_id);
        if (!sj || sj->j != v[i] || sj->active_ix < 0)
            return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        st_job_t *sj = st_job_find(s, v[i]->ext_id);
        if (sj->j->state != sj->last)
            job_after_cycle(s, sj);
        st_resize_after_cycle(s, sj);
    }
    return true;
}

int st_cycle(st_t *s, arb_cycle_stats_t *stats, int64_t *ticket)
{
    arb_cycle_stats_t st = {0};
    int64_t now = st_now_ns(s), t0 = st_mono_ns(), t;
    arb_ctx_t ctx = {.now_ns = now, .rng = &s->rng};
    int rc;

    pthread_mutex_lock(&s->mu);
    st_check_leases(s, now);
    /* The checks driven by the clock walk the jobs that hold allocations
     * (the nodes' job indexes, liveness.c: never the pending backlog), at
     * most every ST_CHECK_GAP_NS. */
    if (!s->checks_ns || now - s->checks_ns >= ST_CHECK_GAP_NS || now < s->checks_ns) {
        st_check_time_limits(s, now);
        st_check_stragglers(s, now);
        s->checks_ns = now;
    }
    if (s->nsvc_ever) /* a walk of every active job for the services among them */
        st_service_reconcile(s, now);
    s->dirty = false;
    rc = arb_sched_cycle(s->sched, &ctx, &st);
    double ms = (double)(st_mono_ns() - t0) / 1e6;
    int k = 0;
    while (k < ST_HIST - 1 && ms > st_cycle_buckets_ms[k])
        k++;
    s->m_cycle_hist[k]++;
    s->m_cycle_sum_s += ms / 1e3;
    s->m_cycles++;
    if (rc == 0 && !after_placed(s, &st)) {
        for (int i = 0; i < s->nactive; i++)
            if (s->active[i]->j->state != s->active[i]->last)
                job_after_cycle(s, s->active[i]);
        for (int i = 0; i < s->nactive; i++) /* victims to stop, shrink marks, growth */
            st_resize_after_cycle(s, s->active[i]);
    }
    if (s->nsvc_ever)
        st_service_refresh(s); /* replicas just placed get their address */
    if (now - s->m_window_mono >= 5000000000LL) {
        s->m_decisions_per_s = (double)s->m_placed_window * 1e9 / (double)(now - s->m_window_mono);
        s->m_placed_window = 0;
        s->m_window_mono = now;
    }
    t = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    if (stats)
        *stats = st;
    if (ticket)
        *ticket = t;
    return rc;
}
