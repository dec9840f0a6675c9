/*
 * liveness.c: what the controller does when nodes fall silent or tasks are
 * lost: node leases, lost tasks, stopping and requeueing whole jobs (gangs
 * included), and stragglers. Every function expects s->mu held.
 *
 * The timeline of a node that falls silent (controller's monotonic clock;
 * r = when its last report arrived, s <= r when its agent sent it):
 *
 *   r + lease          NotReady: no new tasks go there (event node-not-ready)
 *   r + lease + grace  lost: its tasks are lost (event node-lost); each job
 *                      holding one is stopped and requeued whole, or failed
 *                      when its spec says restartable: false
 *
 * The agent renews its lease from the send time of each acknowledged
 * report and fences (kills every task) when it runs out: by s + lease, a
 * few milliseconds later in practice. The controller's lease for the node
 * ends at r + lease >= s + lease, and it waits the grace on top (at least
 * 1 s, default 5 s) for the agent's reaction time and the two clocks'
 * rates before anything is placed elsewhere. So a task never has two live
 * copies (DESIGN.md invariant 4). A restarted controller grants every node
 * a fresh lease from its start, which only makes this later.
 *
 * A job's lost task (node lost, or its agent fenced it and says "lost"):
 *
 *   every task ended --------------------------> requeue (restartable) | failed
 *   others still live -- stop (stop_then) -----> their agents stop them and
 *                                                report; then as above
 *
 * Its GPUs stay held until every task has ended, so no GPU is ever given
 * to a new attempt while an old one may still run on it. Tasks whose agent
 * never started them count as ended once the agent was told to stop them
 * (node.c, absent_tasks), and so do all tasks of a job no agent fetched.
 *
 * A GPU that its agent reports unhealthy (NVML: fallen off the bus) leaves
 * the scheduler's capacity at once (node.c clears arb_gpu_t.healthy, which
 * every filter and picker checks). Each job with a live task on it is
 * stopped whole (st_gpu_lost): its agents SIGTERM every task, and once all
 * have ended it is requeued whole (or failed, restartable: false) like a
 * job with a lost task. It is stopped rather than marked lost at once
 * because its agent is alive and its processes still hold the node's other
 * GPUs: a new attempt gets GPUs only after the old one has ended. The GPU
 * returns to capacity when a report says it is healthy again.
 *
 * Stragglers: in a running gang spread over several nodes, a task whose
 * node's report is older than lease/3, or whose GPUs' utilisation is less
 * than half its peers' median (and at least 30 points below it), is
 * flagged; an event marks each change, `arbiter explain` lists them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"

static bool held(const arb_job_t *j)
{
    return j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
}

/* ---- jobs ------------------------------------------------------------------------- */

void st_job_requeue(st_t *s, st_job_t *sj, const char *why)
{
    arb_err_t err;
    uint64_t attempt = sj->attempt, lam;

    if (arb_sched_finish(s->sched, sj->j, ARB_JOB_PREEMPTED, &err) < 0)
        return;
    for (int t = 0; t < sj->ntasks; t++) {
        sj->tasks[t].state = TK_PENDING;
        sj->tasks[t].straggler = ST_STRAG_NONE;
        sj->tasks[t].stop_sent = false;
    }
    sj->stop = false;
    sj->stop_then = ST_THEN_CANCEL;
    sj->delivered = false;
    sj->nalloc_seen = 0;
    sj->shrink_noted = 0;
    st_job_say(sj, "requeued: %.200s", why);
    s->m_requeued++;
    lam = st_event(s, "job-requeued", sj->id, NULL,
                   "job %llu '%s': attempt %llu ended, requeued whole: %s",
                   (unsigned long long)sj->id, sj->j->name, (unsigned long long)attempt, why);
    st_job_save(s, sj, lam); /* last = PREEMPTED: the next placement is a new attempt */
    st_kick(s);
}

void st_job_settle(st_t *s, st_job_t *sj, const char *why)
{
    arb_job_t *j = sj->j;
    int ended = 0, ok = 0, lost = 0;
    char msg[256];

    if (!held(j))
        return;
    st_resize_settle(s, sj); /* an elastic job's stopped tasks above its shrink mark */
    if (arb_job_partial_gang(j) && !sj->stop)
        for (int t = 0; t < j->nalloc; t++) {
            /* A gang that starts as room frees: an ended task's room is freed
             * at once; a failed one lets no more of its tasks start. */
            if (sj->tasks[t].state == TK_SUCCEEDED && j->alloc[t].node != ARB_NO_NODE)
                arb_sched_task_done(s->sched, j, t, NULL);
            if (sj->tasks[t].state == TK_FAILED && !j->gang_closed) {
                j->gang_closed = true;
                s->dirty = true;
            }
            if (sj->tasks[t].state == TK_SUCCEEDED)
                s->dirty = true;
        }
    for (int t = 0; t < j->nalloc; t++) {
        uint8_t st = sj->tasks[t].state;
        /* No agent fetched the job: nothing of it can be running anywhere. */
        bool gone = st >= TK_SUCCEEDED || (sj->stop && !sj->delivered && st == TK_ASSIGNED);
        ended += gone;
        ok += st == TK_SUCCEEDED;
        lost += st == TK_LOST;
    }
    if (ended == j->nalloc && ok == ended && !sj->stop && j->nalloc < j->ntasks &&
        arb_job_partial_gang(j) && !j->gang_closed) {
        /* every task so far succeeded; the rest start as room frees */
        st_job_save(s, sj, 0);
        return;
    }
    if (ended == j->nalloc) {
        if (sj->stop && sj->stop_then == ST_THEN_CANCEL) {
            st_finish_job(s, sj, ARB_JOB_CANCELLED, "cancelled; its tasks stopped");
        } else if ((sj->stop && sj->stop_then == ST_THEN_TIMEOUT) ||
                   (ok < ended && st_timed_out(sj, st_now_ns(s)))) {
            /* stopped at its limit: by the controller, or by its agent on
             * its own (the controller out of reach, or just ahead of it);
             * past its limit it is not run again, lost node or not */
            snprintf(msg, sizeof msg, "%.200s; its tasks stopped",
                     sj->stop ? st_job_msg(sj) : "its time limit was reached");
            st_finish_job(s, sj, ARB_JOB_TIMEOUT, msg);
        } else if (sj->stop && sj->stop_then == ST_THEN_REQUEUE) {
            snprintf(msg, sizeof msg, "%s", st_job_msg(sj));
            st_job_requeue(s, sj, msg);
        } else if (sj->stop) {
            snprintf(msg, sizeof msg, "%s", st_job_msg(sj));
            st_finish_job(s, sj, ARB_JOB_FAILED, msg);
        } else if (ok == ended) {
            /* Tasks that ended before their agent ever reported them
             * running: they ran (PLACED cannot go straight to SUCCEEDED). */
            if (j->state == ARB_JOB_PLACED)
                arb_job_transition(j, ARB_JOB_RUNNING, NULL);
            st_finish_job(s, sj, ARB_JOB_SUCCEEDED, "all tasks exited 0");
        } else if (lost && sj->restartable) {
            st_job_requeue(s, sj, why);
        } else {
            snprintf(msg, sizeof msg, "%s%s", why,
                     lost ? " (restartable: false, so it is not requeued)" : "");
            st_finish_job(s, sj, ARB_JOB_FAILED, msg);
        }
        return;
    }
    if (lost && !sj->stop) {
        /* A gang with a lost member: stop the rest first; its GPUs stay
         * held until they have stopped. */
        sj->stop = true;
        sj->stop_then = sj->restartable ? ST_THEN_REQUEUE : ST_THEN_FAIL;
        st_job_say(sj, "%.200s", why);
        uint64_t lam = st_event(
            s, "job-stopping", sj->id, NULL,
            "job %llu '%s': %s; stopping its other %d task%s, then %s", (unsigned long long)sj->id,
            j->name, why, j->nalloc - ended, j->nalloc - ended == 1 ? "" : "s",
            sj->restartable ? "requeueing it whole" : "failing it (restartable: false)");
        st_job_save(s, sj, lam);
        return;
    }
    st_job_save(s, sj, 0);
}

/* ---- time limits ----------------------------------------------------------------------- */

bool st_timed_out(const st_job_t *sj, int64_t now)
{
    const arb_job_t *j = sj->j;
    return j->time_limit_s > 0 && held(j) && now >= j->start_ns + j->time_limit_s * 1000000000LL;
}

static int cmp_active_ix(const void *a, const void *b)
{
    int x = (*(st_job_t *const *)a)->active_ix, y = (*(st_job_t *const *)b)->active_ix;
    return (x > y) - (x < y);
}

static bool first_node_is(const arb_job_t *j, uint32_t node)
{
    for (int t = 0; t < j->nalloc; t++)
        if (j->alloc[t].node != ARB_NO_NODE)
            return j->alloc[t].node == node;
    return false;
}

/* The jobs that hold allocations (placed or running), each once, in the
 * order of s->active, from the nodes' job indexes (node.c): what the
 * clock-driven checks walk, so that they cost what runs (nodes plus their
 * entries), not what waits: a backlog of pending jobs adds nothing. A job
 * is listed at the node of its first placed task. *out is malloc'd (the
 * caller frees it); -ENOMEM: walk s->active instead. */
static int held_jobs(st_t *s, st_job_t ***out)
{
    st_job_t **v = NULL;
    int n = 0, cap = 0;

    *out = NULL;
    if (s->held_oom) /* the index is short: the walk of every active job it stands for */
        return -ENOMEM;
    for (uint32_t i = 0; i < s->cluster.nnodes; i++) {
        st_job_t **h;
        int nh = st_node_held(s, &s->cluster.nodes[i], &h); /* live entries only */
        for (int k = 0; k < nh; k++) {
            if (!held(h[k]->j) || !first_node_is(h[k]->j, i))
                continue;
            if (n == cap) {
                int nc = cap ? cap * 2 : 64;
                st_job_t **nv = realloc(v, (size_t)nc * sizeof *nv);
                if (!nv) {
                    free(v);
                    return -ENOMEM;
                }
                v = nv;
                cap = nc;
            }
            v[n++] = h[k];
        }
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cmp_active_ix);
    *out = v;
    return n;
}

static void time_limit_one(st_t *s, st_job_t *sj, int64_t now)
{
    arb_job_t *j = sj->j;
    char why[200], grace[32];

    s->m_check_visits++;
    if (sj->own_j || sj->active_ix < 0 || !st_timed_out(sj, now) ||
        (sj->stop && (sj->stop_then == ST_THEN_TIMEOUT || sj->stop_then == ST_THEN_CANCEL)))
        return;
    snprintf(why, sizeof why, "its time limit (%lld s) was reached", (long long)j->time_limit_s);
    if (!sj->delivered) { /* no agent has it: nothing runs */
        st_finish_job(s, sj, ARB_JOB_TIMEOUT, why);
        return;
    }
    if (j->grace_s >= 0)
        snprintf(grace, sizeof grace, "%d s", j->grace_s);
    else
        snprintf(grace, sizeof grace, "the agent's grace");
    sj->stop = true;
    sj->stop_then = ST_THEN_TIMEOUT;
    st_job_say(sj, "%s", why);
    uint64_t lam = st_event(s, "job-time-limit", sj->id, NULL,
                            "job %llu '%s': %s: SIGTERM to its %d task%s, SIGKILL after %s; "
                            "it ends as timeout",
                            (unsigned long long)sj->id, j->name, why, j->nalloc,
                            j->nalloc == 1 ? "" : "s", grace);
    st_job_save(s, sj, lam);
    s->dirty = true;
}

void st_check_time_limits(st_t *s, int64_t now)
{
    st_job_t **v;
    int n = held_jobs(s, &v);

    /* Backwards, as the walk of s->active goes: ending a job retires it,
     * which moves the last active one into its slot. */
    if (n < 0)
        for (int i = s->nactive - 1; i >= 0; i--)
            time_limit_one(s, s->active[i], now);
    for (int i = n - 1; i >= 0; i--)
        time_limit_one(s, v[i], now);
    free(v);
}

void st_task_lost(st_t *s, st_job_t *sj, int t, const char *why)
{
    char msg[256];
    st_task_t *tk = &sj->tasks[t];

    if (!held(sj->j) || t >= sj->j->nalloc || tk->state >= TK_SUCCEEDED)
        return;
    tk->state = TK_LOST;
    s->m_tasks_lost++;
    snprintf(msg, sizeof msg, "task %d lost: %.200s", t, why);
    st_event(s, "task-lost", sj->id,
             arb_node_name(&s->cluster, &s->cluster.nodes[sj->j->alloc[t].node]),
             "job %llu '%s': %s", (unsigned long long)sj->id, sj->j->name, msg);
    st_job_settle(s, sj, msg);
}

void st_gpu_lost(st_t *s, arb_node_t *n, int gpu)
{
    const char *name = arb_node_name(&s->cluster, n);

    for (int i = 0; i < s->nactive; i++) {
        st_job_t *sj = s->active[i];
        arb_job_t *j = sj->j;
        int hit = -1;
        if (!held(j))
            continue;
        for (int t = 0; t < j->nalloc && hit < 0; t++)
            if (j->alloc[t].node == n->id && (j->alloc[t].gpu_mask & (1u << gpu)) &&
                sj->tasks[t].state < TK_SUCCEEDED)
                hit = t;
        if (hit < 0)
            continue;
        s->m_tasks_lost++;
        st_event(s, "task-gpu-lost", sj->id, name,
                 "job %llu '%s' task %d: GPU %d on node '%s' is unhealthy (lost from the bus)",
                 (unsigned long long)sj->id, j->name, hit, gpu, name);
        if (sj->stop)
            continue; /* already stopping: it ends as that stop says */
        sj->stop = true;
        sj->stop_then = sj->restartable ? ST_THEN_REQUEUE : ST_THEN_FAIL;
        st_job_say(sj, "task %d lost: GPU %d on node '%s' is unhealthy", hit, gpu, name);
        uint64_t lam = st_event(
            s, "job-stopping", sj->id, NULL, "job %llu '%s': %s; stopping its %d task%s, then %s",
            (unsigned long long)sj->id, j->name, st_job_msg(sj), j->nalloc,
            j->nalloc == 1 ? "" : "s",
            sj->restartable ? "requeueing it whole" : "failing it (restartable: false)");
        st_job_save(s, sj, lam);
    }
    s->dirty = true;
}

int st_explain_unhealthy(st_t *s, const st_job_t *sj, st_explain_view_t *v)
{
    char txt[1024];
    size_t used = 0;
    bool gpus = false;

    for (int g = 0; g < sj->j->ngroups; g++)
        gpus |= sj->j->groups[g].gpus > 0 || sj->j->groups[g].gpu_share > 0;
    used = (size_t)snprintf(txt, sizeof txt, "%s", v->summary ? v->summary : "");
    for (uint32_t i = 0; gpus && i < s->cluster.nnodes; i++) {
        const arb_node_t *n = &s->cluster.nodes[i];
        if (n->state == ARB_NODE_LEFT || st_node_ext(s, n)->lost)
            continue;
        for (int k = 0; k < n->ngpus; k++) {
            if (n->gpu[k].healthy)
                continue;
            const char *name = arb_node_name(&s->cluster, n);
            st_gpu_ref_t *u = realloc(v->unhealthy, (size_t)(v->nunhealthy + 1) * sizeof *u);
            if (!u)
                return -ENOMEM;
            v->unhealthy = u;
            u[v->nunhealthy++] = (st_gpu_ref_t){name, k};
            if (v->nunhealthy <= 8 && used < sizeof txt)
                used += (size_t)snprintf(
                    txt + used, sizeof txt - used, "%sGPU %d on node '%s' unhealthy",
                    v->nunhealthy == 1 ? "; out of capacity: " : ", ", k, name);
        }
    }
    if (v->nunhealthy > 8 && used < sizeof txt)
        snprintf(txt + used, sizeof txt - used, " and %d more", v->nunhealthy - 8);
    if (v->nunhealthy) {
        char *sum = strdup(txt);
        if (!sum)
            return -ENOMEM;
        free(v->summary);
        v->summary = sum;
    }
    return 0;
}

/* ---- nodes ---------------------------------------------------------------------------- */

static void node_lost(st_t *s, arb_node_t *n, int64_t age)
{
    st_node_t *x = st_node_ext(s, n);
    const char *name = arb_node_name(&s->cluster, n);
    char why[200];

    x->lost = true;
    s->m_nodes_lost++;
    st_event(s, "node-lost", 0, name,
             "node '%s': no report for %.1f s (lease %.1f s + grace %.1f s); its tasks are "
             "lost: each was killed when the agent's lease ran out, by the agent or, if the "
             "agent did not run, by the task's supervisor",
             name, (double)age / 1e9, (double)s->conf.lease_ns / 1e9,
             (double)s->conf.grace_ns / 1e9);
    snprintf(why, sizeof why, "node '%s' was lost (no report for %.0f s)", name, (double)age / 1e9);
    /* Backwards: settling may retire a job, which moves the last one into its slot. */
    for (int i = s->nactive - 1; i >= 0; i--) {
        st_job_t *sj = s->active[i];
        arb_job_t *j = sj->j;
        int hit = 0;
        if (!held(j))
            continue;
        for (int t = 0; t < j->nalloc; t++) {
            st_task_t *tk = &sj->tasks[t];
            if (j->alloc[t].node != n->id || tk->state >= TK_SUCCEEDED)
                continue;
            tk->state = TK_LOST;
            s->m_tasks_lost++;
            hit++;
        }
        if (!hit)
            continue;
        char msg[256];
        snprintf(msg, sizeof msg, "%d task%s lost: %s", hit, hit == 1 ? "" : "s", why);
        st_event(s, "task-lost", sj->id, name, "job %llu '%s': %s", (unsigned long long)sj->id,
                 j->name, msg);
        st_job_settle(s, sj, msg);
    }
    s->dirty = true;
}

void st_check_leases(st_t *s, int64_t now)
{
    if (s->conf.lease_ns <= 0)
        return;
    for (uint32_t i = 0; i < s->cluster.nnodes; i++) {
        arb_node_t *n = &s->cluster.nodes[i];
        st_node_t *x = &s->nodes[i];
        int64_t age = now - x->report_mono;
        if (n->state == ARB_NODE_LEFT || x->report_mono == 0)
            continue;
        if (n->state == ARB_NODE_READY && age > s->conf.lease_ns &&
            arb_node_transition(&s->cluster, n, ARB_NODE_NOT_READY, NULL) == 0)
            st_event(s, "node-not-ready", 0, arb_node_name(&s->cluster, n),
                     "node '%s': no report for %.1f s (lease %.1f s); no new tasks go there",
                     arb_node_name(&s->cluster, n), (double)age / 1e9,
                     (double)s->conf.lease_ns / 1e9);
        if (!x->lost && age > s->conf.lease_ns + s->conf.grace_ns)
            node_lost(s, n, age);
    }
}

/* ---- stragglers ------------------------------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Mean utilisation of the GPUs of task t, or -1 when it has none, or when
 * its node's telemetry was sampled before the job was known running (an
 * agent's report of a task's start carries no telemetry: its last figures
 * are of the GPUs idle, not of the task). */
static int task_util(st_t *s, const st_job_t *sj, int t)
{
    const arb_job_t *j = sj->j;
    const arb_task_alloc_t *a = &j->alloc[t];
    if (a->node == ARB_NO_NODE)
        return -1;
    const arb_node_t *n = &s->cluster.nodes[a->node];
    if (st_node_ext(s, n)->tel_mono <= sj->running_mono)
        return -1;
    int sum = 0, k = 0;

    for (int g = 0; g < n->ngpus; g++)
        if (a->gpu_mask & (1u << g)) {
            sum += n->gpu[g].util_pct;
            k++;
        }
    return k ? sum / k : -1;
}

static void straggler_one(st_t *s, st_job_t *sj, int64_t now, int64_t stale)
{
    arb_job_t *j = sj->j;
    int util[64], sorted[64], nu = 0, median = -1;
    bool multi = false;

    s->m_check_visits++;
    if (j->state != ARB_JOB_RUNNING || j->nalloc < 2 || sj->stop || arb_job_partial_gang(j))
        return; /* (a gang that starts as room frees has no peers in step) */
    for (int t = 1; t < j->nalloc && !multi; t++)
        multi = j->alloc[t].node != j->alloc[0].node;
    if (!multi)
        return;
    for (int t = 0; t < j->nalloc && t < 64; t++) {
        util[t] = task_util(s, sj, t);
        if (util[t] >= 0)
            sorted[nu++] = util[t];
    }
    if (nu >= 2) {
        qsort(sorted, (size_t)nu, sizeof *sorted, cmp_int);
        median = sorted[nu / 2];
    }
    for (int t = 0; t < j->nalloc && t < 64; t++) {
        st_task_t *tk = &sj->tasks[t];
        const arb_node_t *n = &s->cluster.nodes[j->alloc[t].node];
        int64_t age = now - st_node_ext(s, n)->report_mono;
        uint8_t flag = ST_STRAG_NONE;
        if (age > stale)
            flag = ST_STRAG_STALE;
        else if (util[t] >= 0 && median >= 30 && util[t] * 2 < median && median - util[t] >= 30)
            flag = ST_STRAG_SLOW;
        if (flag == tk->straggler)
            continue;
        tk->straggler = flag;
        if (flag == ST_STRAG_STALE)
            st_event(s, "task-straggler", sj->id, arb_node_name(&s->cluster, n),
                     "job %llu '%s' task %d on node '%s' is a straggler: its node's last "
                     "report is %.1f s old",
                     (unsigned long long)sj->id, j->name, t, arb_node_name(&s->cluster, n),
                     (double)age / 1e9);
        else if (flag == ST_STRAG_SLOW)
            st_event(s, "task-straggler", sj->id, arb_node_name(&s->cluster, n),
                     "job %llu '%s' task %d on node '%s' is a straggler: its GPUs are %d%% "
                     "busy, its peers' median %d%%",
                     (unsigned long long)sj->id, j->name, t, arb_node_name(&s->cluster, n), util[t],
                     median);
        else
            st_event(s, "task-caught-up", sj->id, arb_node_name(&s->cluster, n),
                     "job %llu '%s' task %d on node '%s' keeps pace again",
                     (unsigned long long)sj->id, j->name, t, arb_node_name(&s->cluster, n));
    }
}

void st_check_stragglers(st_t *s, int64_t now)
{
    int64_t stale = s->conf.lease_ns / 3;
    st_job_t **v;
    int n = held_jobs(s, &v); /* only running jobs can straggle */

    if (n < 0)
        for (int i = 0; i < s->nactive; i++)
            straggler_one(s, s->active[i], now, stale);
    for (int i = 0; i < n; i++)
        straggler_one(s, v[i], now, stale);
    free(v);
}

void st_note_report(st_t *s, int64_t ns)
{
    double ms = (double)ns / 1e6;
    int k = 0;

    pthread_mutex_lock(&s->mu);
    while (k < ST_HIST - 1 && ms > st_cycle_buckets_ms[k])
        k++;
    s->m_report_hist[k]++;
    s->m_report_sum_s += ms / 1e3;
    s->m_reports++;
    pthread_mutex_unlock(&s->mu);
}
