/*
 * resize.c: the controller's side of preemption with a grace period and of
 * elastic jobs: what the scheduler decided in a cycle (victims marked,
 * shrink marks, growth) turned into stops, assignments and events. Every
 * function expects s->mu held.
 *
 * The scheduler runs with deferred preemption (state.c, build_sched): a
 * victim keeps its allocations until its processes are gone, so a GPU is
 * never given to the preemptor while a victim may still run on it.
 *
 *   victim marked (j->evicting) --not delivered--> requeued now (nothing runs)
 *        | delivered
 *        v
 *   stop (stop_then REQUEUE): agents SIGTERM each task's group, wait the
 *   job's terminationGracePeriodSeconds (else the agent's grace), SIGKILL
 *        | every task reported ended (liveness.c, st_job_settle)
 *        v
 *   requeued whole: its GPUs are released; the preemptor places next cycle
 *
 * An elastic job marked to shrink (j->shrink_to = k) gets "stop" on the
 * assignments of tasks k..nalloc-1 only; once those have ended,
 * arb_sched_shrink releases them, the job goes on with k tasks and the
 * remaining tasks get a resize notice (a new generation in their
 * assignments: the agent rewrites ARBITER_RESIZE_FILE and sends SIGUSR1).
 * Growth (the scheduler added tasks) is the same notice for the running
 * tasks plus new assignments for the added ones. Every resize is an event:
 *   job 5 'train' resized 4 -> 6: capacity freed on node-c
 *   job 5 'train' resized 6 -> 4: tasks 4..5 stopped for job 7 'serve'
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"

static bool held(const arb_job_t *j)
{
    return j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
}

/* The controller's job for scheduler id sid, or NULL. */
static st_job_t *by_sched_id(st_t *s, uint32_t sid)
{
    for (int i = 0; i < s->nactive; i++)
        if (s->active[i]->j->id == sid && !s->active[i]->own_j) /* a service has no sched id */
            return s->active[i];
    return NULL;
}

/* "job 7 'serve' (priority 1000)" into buf; for a quota reclaim "job 7
 * 'serve' of queue 'team-b', within its nominal quota". */
static void who_preempts(st_t *s, const arb_job_t *j, char *buf, size_t n)
{
    st_job_t *p = by_sched_id(s, j->preempted_by);

    if (p && j->reclaimed)
        snprintf(buf, n, "job %llu '%s' of queue '%s', within its nominal quota",
                 (unsigned long long)p->id, p->j->name, arb_str(&s->cluster.strs, p->j->queue));
    else if (p && st_service_who(s, p, buf, n)) /* a service's replica: name the service */
        return;
    else if (p)
        snprintf(buf, n, "job %llu '%s' (priority %d)", (unsigned long long)p->id, p->j->name,
                 p->j->priority);
    else
        snprintf(buf, n,
                 j->reclaimed ? "a job of its cohort within its nominal quota"
                              : "a higher-priority job");
}

/* How a victim is taken: "preempted" for priority, "reclaimed" when its
 * queue's borrowed quota is taken back. */
static const char *taken(const arb_job_t *j)
{
    return j->reclaimed ? "quota reclaimed" : "preempted";
}

static void grace_text(const arb_job_t *j, char *buf, size_t n)
{
    if (j->grace_s >= 0)
        snprintf(buf, n, "%d s grace", j->grace_s);
    else
        snprintf(buf, n, "the agent's grace");
}

bool st_resize_settle(st_t *s, st_job_t *sj)
{
    arb_job_t *j = sj->j;
    int from = j->nalloc, to = j->shrink_to;
    char by[160];
    arb_err_t err;

    if (!held(j) || to <= 0 || to >= from)
        return false;
    for (int t = to; t < from; t++) {
        uint8_t st = sj->tasks[t].state;
        bool gone = st >= TK_SUCCEEDED || (!sj->delivered && st == TK_ASSIGNED);
        if (!gone)
            return false;
    }
    who_preempts(s, j, by, sizeof by);
    if (arb_sched_shrink(s->sched, j, to, &err) < 0)
        return false;
    for (int t = to; t < from; t++) {
        st_task_t *tk = &sj->tasks[t];
        tk->state = TK_PENDING;
        tk->has_exit = false;
        tk->stop_sent = false;
        tk->straggler = ST_STRAG_NONE;
    }
    sj->nalloc_seen = j->nalloc;
    sj->shrink_noted = 0;
    uint64_t lam = st_event(s, "job-resized", sj->id, NULL,
                            "job %llu '%s' resized %d -> %d: task%s %d..%d stopped for %s",
                            (unsigned long long)sj->id, j->name, from, to,
                            from - to == 1 ? "" : "s", to, from - 1, by);
    st_job_save(s, sj, lam);
    st_kick(s);
    return true;
}

void st_resize_after_cycle(st_t *s, st_job_t *sj)
{
    arb_job_t *j = sj->j;
    char by[160], grace[32];

    if (sj->active_ix < 0 || !held(j))
        return;
    if (sj->nalloc_seen == 0)
        sj->nalloc_seen = j->nalloc; /* placed in this cycle, or recovered */
    if (j->evicting && !sj->stop) {
        who_preempts(s, j, by, sizeof by);
        grace_text(j, grace, sizeof grace);
        if (!sj->delivered) { /* no agent has it: nothing runs, release it now */
            char why[256];
            snprintf(why, sizeof why, "%s by %s before it started", taken(j), by);
            st_job_requeue(s, sj, why);
            s->m_preempted++;
            return;
        }
        sj->stop = true;
        sj->stop_then = ST_THEN_REQUEUE;
        st_job_say(sj, "%s by %s", taken(j), by);
        uint64_t lam;
        if (j->reclaimed)
            lam = st_event(s, "job-reclaiming", sj->id, NULL,
                           "job %llu '%s' of queue '%s', which borrows above its nominal quota, "
                           "quota reclaimed by %s: SIGTERM to its %d task%s, SIGKILL after %s; "
                           "its GPUs are handed over once they have exited",
                           (unsigned long long)sj->id, j->name, arb_str(&s->cluster.strs, j->queue),
                           by, j->nalloc, j->nalloc == 1 ? "" : "s", grace);
        else
            lam = st_event(s, "job-preempting", sj->id, NULL,
                           "job %llu '%s' (priority %d) preempted by %s: SIGTERM to its %d "
                           "task%s, SIGKILL after %s; its GPUs are handed over once they "
                           "have exited",
                           (unsigned long long)sj->id, j->name, j->priority, by, j->nalloc,
                           j->nalloc == 1 ? "" : "s", grace);
        st_job_save(s, sj, lam);
        s->m_preempted++;
        return;
    }
    if (j->shrink_to > 0 && sj->shrink_noted != j->shrink_to && !sj->stop) {
        who_preempts(s, j, by, sizeof by);
        grace_text(j, grace, sizeof grace);
        sj->shrink_noted = j->shrink_to;
        uint64_t lam =
            st_event(s, "job-shrinking", sj->id, NULL,
                     "job %llu '%s' shrinking %d -> %d for %s: SIGTERM to task%s "
                     "%d..%d, SIGKILL after %s",
                     (unsigned long long)sj->id, j->name, j->nalloc, j->shrink_to, by,
                     j->nalloc - j->shrink_to == 1 ? "" : "s", j->shrink_to, j->nalloc - 1, grace);
        st_job_save(s, sj, lam);
        st_resize_settle(s, sj); /* tasks no agent has: gone already */
        return;
    }
    if (j->nalloc > sj->nalloc_seen && sj->stop) {
        /* Grown while its tasks are being stopped (cancel, lost member):
         * give the new ones straight back, unassigned. */
        arb_err_t err;
        arb_sched_shrink(s->sched, j, sj->nalloc_seen, &err);
        return;
    }
    if (j->nalloc > sj->nalloc_seen) { /* grown */
        char where[256];
        size_t used = 0;
        int from = sj->nalloc_seen;
        where[0] = '\0';
        for (int t = from; t < j->nalloc; t++) {
            st_task_t *tk = &sj->tasks[t];
            const char *nn = arb_node_name(&s->cluster, &s->cluster.nodes[j->alloc[t].node]);
            bool dup = false;
            tk->state = TK_ASSIGNED;
            tk->has_exit = false;
            tk->stop_sent = false;
            tk->straggler = ST_STRAG_NONE;
            tk->node1 = j->alloc[t].node + 1;
            for (int k = from; k < t && !dup; k++)
                dup = j->alloc[k].node == j->alloc[t].node;
            if (!dup && used < sizeof where)
                used += (size_t)snprintf(where + used, sizeof where - used, "%s%s",
                                         used ? ", " : "", nn);
        }
        sj->nalloc_seen = j->nalloc;
        st_node_index_job(s, sj);
        char which[48]; /* "task 2", "tasks 2..3" */
        if (j->nalloc - from == 1)
            snprintf(which, sizeof which, "task %d", from);
        else
            snprintf(which, sizeof which, "tasks %d..%d", from, j->nalloc - 1);
        uint64_t lam = arb_job_partial_gang(j)
                           ? st_event(s, "job-tasks-started", sj->id, NULL,
                                      "job %llu '%s': %s of %d started as room freed on %s "
                                      "(gangMin %d: the rest start as room frees)",
                                      (unsigned long long)sj->id, j->name, which, j->ntasks, where,
                                      j->gang_min)
                           : st_event(s, "job-resized", sj->id, NULL,
                                      "job %llu '%s' resized %d -> %d: capacity freed on %s",
                                      (unsigned long long)sj->id, j->name, from, j->nalloc, where);
        st_job_save(s, sj, lam);
    }
}

/* ---- the shrink mark across a restart ----------------------------------------------------
 * A shrink takes a grace period; a controller restarted meanwhile must not
 * lose it: its agents go on stopping ranks K.. (their SIGTERM was sent),
 * and without the mark the controller would take those exits for failures
 * and the preemptor would look for victims anew. */
void st_resize_record(st_t *s, const st_job_t *sj, json_t *o)
{
    const arb_job_t *j = sj->j;
    st_job_t *p;

    if (j->shrink_to <= 0 || !held(j))
        return;
    p = by_sched_id(s, j->preempted_by);
    json_object_set_new(
        o, "shrink",
        json_pack("{s:i,s:I}", "to", j->shrink_to, "for", (json_int_t)(p ? p->id : 0)));
}

void st_resize_recover(st_job_t *sj, const json_t *o)
{
    arb_job_t *j = sj->j;
    const json_t *m = json_object_get(o, "shrink");
    json_int_t to = json_integer_value(json_object_get(m, "to"));

    if (!m || !held(j) || to < j->gang_min || to <= 0 || to >= j->nalloc)
        return;
    j->shrink_to = (int)to;
    sj->shrink_noted = (int)to; /* announced before the restart */
    sj->shrink_for = (uint64_t)json_integer_value(json_object_get(m, "for"));
}

void st_resize_recover_all(st_t *s)
{
    for (int i = 0; i < s->nactive; i++) {
        st_job_t *sj = s->active[i], *p;
        if (!sj->shrink_for)
            continue;
        p = st_job_find(s, sj->shrink_for);
        if (p && p->active_ix >= 0 && !p->own_j) {
            sj->j->preempted_by = p->j->id;
            p->j->waiting = true; /* the room is on its way: no victims of its own */
        }
        sj->shrink_for = 0;
    }
}

int st_resize_explain(st_t *s, st_job_t *sj, st_explain_view_t *v)
{
    char hint[512];
    size_t used = 0;

    hint[0] = '\0';
    for (int i = 0; i < s->nactive; i++) {
        st_job_t *o = s->active[i];
        const arb_job_t *j = o->j;
        if (o == sj || j->preempted_by != sj->j->id || !(j->evicting || j->shrink_to > 0) ||
            !held(j))
            continue;
        st_victim_view_t *w = realloc(v->waiting_for, (size_t)(v->nwaiting_for + 1) * sizeof *w);
        if (!w)
            return -ENOMEM;
        v->waiting_for = w;
        w = &w[v->nwaiting_for++];
        w->job = o->id;
        snprintf(w->name, sizeof w->name, "%s", j->name);
        w->action = j->evicting ? "preempted" : "shrinking";
        if (used < sizeof hint)
            used += (size_t)snprintf(hint + used, sizeof hint - used, "%sjob %llu '%s' (%s)",
                                     used ? ", " : "", (unsigned long long)o->id, j->name,
                                     j->evicting ? "preempted whole" : "shrinking");
    }
    if (v->nwaiting_for > 0) {
        char txt[700], *h;
        snprintf(txt, sizeof txt,
                 "its victims are stopping: %s; it starts once their tasks have exited (SIGTERM, "
                 "the grace period, SIGKILL)",
                 hint);
        if (!(h = strdup(txt)))
            return -ENOMEM;
        free(v->hint);
        v->hint = h;
    }
    return 0;
}
