/*
 * state.c: the resource manager's heart: opening and closing, the Lamport
 * clock and the event log, jobs (submit, get, list, cancel, explain), the
 * scheduling cycle and its thread, queues, invariant checks. Nodes are in
 * node.c, JSON in codec.c, recovery in recover.c, metrics in metrics.c.
 *
 * Every public function takes s->mu, does its work in memory, queues the
 * store operations of that work as one batch (st_flush) and returns the
 * batch's ticket; the API waits for the ticket before it answers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state/jv.h"
#include "state/service.h"
#include "state/state_int.h"
#include "util/mtime.h"

const char *const st_task_state_names[] = {"pending", "assigned", "running",  "succeeded",
                                           "failed",  "lost",     "cancelled"};
#define ST_CHECK_GAP_NS 200000000LL /* 200 ms between the clock-driven checks */

const double st_cycle_buckets_ms[ST_HIST - 1] = {0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000};

#define CLOCK_BLOCK 1024 /* Lamport values reserved per persisted high-water mark */

/* ---- clocks, events, batches ------------------------------------------------------ */

int64_t st_mono_ns(void)
{
    return arb_mono_ns();
}

int64_t st_wall_ms(void)
{
    return arb_wall_ms();
}

int64_t st_now_ns(const st_t *s)
{
    return s->conf.clock.mono_ns ? s->conf.clock.mono_ns(s->conf.clock.arg) : st_mono_ns();
}

int64_t st_now_ms(const st_t *s)
{
    return s->conf.clock.wall_ms ? s->conf.clock.wall_ms(s->conf.clock.arg) : st_wall_ms();
}

struct timespec st_deadline(int64_t ms)
{
    return arb_deadline_ms(ms);
}

uint64_t st_tick(st_t *s, uint64_t remote)
{
    char v[32];

    s->clock = (remote > s->clock ? remote : s->clock) + 1;
    if (s->clock >= ST_LAMPORT_MAX)
        s->clock_spent = true; /* st_store_status says so: the process exits, a start renumbers */
    if (s->clock >= s->clock_hwm) {
        s->clock_hwm = s->clock + CLOCK_BLOCK;
        snprintf(v, sizeof v, "%llu", (unsigned long long)s->clock_hwm);
        store_batch_putstr(&s->batch, "meta/clock", v);
    }
    return s->clock;
}

uint64_t st_event(st_t *s, const char *type, uint64_t job, const char *node, const char *fmt, ...)
{
    char msg[512], key[40], tbuf[40];
    va_list ap;
    uint64_t lam = st_tick(s, 0);
    json_t *o;
    char *txt;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jv_time(st_now_ms(s), tbuf, sizeof tbuf);
    o = json_pack("{s:I,s:s,s:s,s:s}", "lamport", (json_int_t)lam, "time", tbuf, "type", type,
                  "message", msg);
    if (!o)
        return lam;
    if (job)
        json_object_set_new(o, "job", json_integer((json_int_t)job));
    if (node)
        json_object_set_new(o, "node", json_string(node));
    txt = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!txt)
        return lam;
    snprintf(key, sizeof key, "events/%020llu", (unsigned long long)lam);
    store_batch_putstr(&s->batch, key, txt);
    if (s->ring_n == s->ring_cap) { /* evict the oldest, in memory and in the store */
        st_event_t *old = &s->ring[s->ring_head];
        snprintf(key, sizeof key, "events/%020llu", (unsigned long long)old->lamport);
        store_batch_del(&s->batch, key);
        free(old->json);
        s->ring_head = (s->ring_head + 1) % s->ring_cap;
        s->ring_n--;
    }
    st_event_t *e = &s->ring[(s->ring_head + s->ring_n) % s->ring_cap];
    e->lamport = lam;
    e->job = job;
    e->json = txt;
    s->ring_n++;
    st_changed(s);
    return lam;
}

int64_t st_flush(st_t *s)
{
    if (s->batch.nops == 0)
        return store_gc_last(s->gc);
    return store_gc_enqueue(s->gc, &s->batch);
}

int64_t st_seen(st_t *s)
{
    return store_gc_last(s->gc);
}

void st_changed(st_t *s)
{
    pthread_cond_broadcast(&s->ev_cond);
    if (s->chg_fn)
        s->chg_fn(s->chg_arg);
}

void st_set_change_hook(st_t *s, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&s->mu);
    s->chg_fn = fn;
    s->chg_arg = arg;
    pthread_mutex_unlock(&s->mu);
}

void st_set_node_hook(st_t *s, void (*fn)(void *arg, uint32_t key), void *arg)
{
    pthread_mutex_lock(&s->mu);
    s->node_fn = fn;
    s->node_arg = arg;
    pthread_mutex_unlock(&s->mu);
}

bool st_stopping(st_t *s)
{
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

bool st_done(st_t *s, int64_t ticket)
{
    return ticket <= 0 || store_gc_done(s->gc, ticket);
}

int st_wait(st_t *s, int64_t ticket, arb_err_t *err)
{
    if (ticket < 0)
        return arb_errf(err, -EIO, "the store failed earlier; the controller must restart");
    return store_gc_wait(s->gc, ticket, err);
}

int st_store_status(st_t *s, arb_err_t *err)
{
    if (__atomic_load_n(&s->clock_spent, __ATOMIC_RELAXED))
        return arb_errf(err, -ERANGE,
                        "the Lamport clock reached its limit (%llu); a restart renumbers it",
                        (unsigned long long)ST_LAMPORT_MAX);
    return store_gc_status(s->gc, err);
}

void st_inject_store_failure(st_t *s, int n)
{
    store_gc_inject_failure(s->gc, n);
}

/* ---- job bookkeeping ------------------------------------------------------------------ */

st_job_t *st_job_find(st_t *s, uint64_t id)
{
    return id > 0 && id < s->next_id && id < s->capjobs ? s->jobs[id] : NULL;
}

const char *st_name(st_t *s, const char *name)
{
    char cut[ST_NAME_MAX];
    uint32_t id;

    snprintf(cut, sizeof cut, "%s", name ? name : "");
    if (!cut[0])
        return "";
    if (!(id = arb_intern(&s->names, cut)))
        return NULL;
    return arb_str(&s->names, id); /* each string its own allocation: it never moves */
}

int st_job_say(st_job_t *sj, const char *fmt, ...)
{
    char buf[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (sj->message && strcmp(sj->message, buf) == 0)
        return 0; /* the same words: kept (a caller may hold the old pointer) */
    free(sj->message);
    sj->message = NULL;
    if (!buf[0])
        return 0;
    return (sj->message = strdup(buf)) ? 0 : -ENOMEM;
}

void st_job_free(st_job_t *sj)
{
    if (!sj)
        return;
    if (sj->own_j)
        arb_job_free(sj->j);
    free(sj->message);
    free(sj->spec);
    free(sj->tasks);
    json_decref(sj->command);
    json_decref(sj->env);
    st_service_free(sj);
    st_dep_free(sj->dep);
    free(sj);
}

int st_job_add(st_t *s, st_job_t *sj)
{
    if (sj->id >= s->capjobs) {
        uint64_t cap = s->capjobs ? s->capjobs : 1024;
        while (cap <= sj->id)
            cap *= 2;
        st_job_t **v = realloc(s->jobs, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        memset(v + s->capjobs, 0, (cap - s->capjobs) * sizeof *v);
        s->jobs = v;
        s->capjobs = cap;
    }
    sj->active_ix = -1;
    if (sj->j->state < ARB_JOB_SUCCEEDED) { /* not ended */
        if (s->nactive == s->capactive) {
            int cap = s->capactive ? s->capactive * 2 : 1024;
            st_job_t **v = realloc(s->active, (size_t)cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            s->active = v;
            s->capactive = cap;
        }
        sj->active_ix = s->nactive;
        s->active[s->nactive++] = sj;
    }
    if (!s->jobs[sj->id])
        s->njobs++;
    s->jobs[sj->id] = sj;
    if (sj->id >= s->next_id)
        s->next_id = sj->id + 1;
    st_queue_seen(s, sj->j->queue);
    return 0;
}

void st_job_retire(st_t *s, st_job_t *sj)
{
    int i = sj->active_ix;

    if (i < 0)
        return;
    s->active[i] = s->active[--s->nactive];
    s->active[i]->active_ix = i;
    sj->active_ix = -1;
    st_history_push(s, sj);
}

void st_queue_seen(st_t *s, uint32_t name)
{
    for (int i = 0; i < s->nqueues; i++)
        if (s->queues[i] == name)
            return;
    uint32_t *v = realloc(s->queues, (size_t)(s->nqueues + 1) * sizeof *v);
    if (!v)
        return;
    s->queues = v;
    s->queues[s->nqueues++] = name;
}

void st_job_save(st_t *s, st_job_t *sj, uint64_t lamport)
{
    char key[40];
    char *rec;

    sj->version++;
    if (lamport)
        sj->lamport_update = lamport;
    sj->last = sj->j->state;
    st_node_assign_hint(s, sj); /* its nodes' agents' long polls look again */
    rec = st_job_record(s, sj);
    if (!rec)
        return;
    snprintf(key, sizeof key, "jobs/%020llu", (unsigned long long)sj->id);
    store_batch_putstr(&s->batch, key, rec);
    free(rec);
}

/* End sj (SUCCEEDED, FAILED, CANCELLED, TIMEOUT): release what it holds,
 * event, record. */
void st_finish_job(st_t *s, st_job_t *sj, arb_job_state_t to, const char *why)
{
    arb_err_t err;
    int nalloc = sj->j->nalloc;

    if (arb_sched_finish(s->sched, sj->j, to, &err) < 0)
        return;
    for (int t = 0; t < sj->ntasks; t++)
        if (sj->tasks[t].state == TK_ASSIGNED || sj->tasks[t].state == TK_RUNNING)
            sj->tasks[t].state = to == ARB_JOB_SUCCEEDED ? TK_SUCCEEDED
                                 : to == ARB_JOB_FAILED
                                     ? TK_FAILED
                                     : TK_CANCELLED; /* or stopped at its limit */
    (void)nalloc;
    sj->end_ms = st_now_ms(s);
    sj->stop = false;
    sj->stop_then = ST_THEN_CANCEL;
    st_job_say(sj, "%s", why);
    uint64_t lam =
        st_event(s,
                 to == ARB_JOB_CANCELLED   ? "job-cancelled"
                 : to == ARB_JOB_SUCCEEDED ? "job-succeeded"
                 : to == ARB_JOB_TIMEOUT   ? "job-timeout"
                                           : "job-failed",
                 sj->id, NULL, "job %llu '%s': %s", (unsigned long long)sj->id, sj->j->name, why);
    st_job_save(s, sj, lam);
    st_job_retire(s, sj);
    /* Out of the scheduler's working set: every later cycle would walk it.
     * The record stays here, as a recovered ended job's does. */
    if (!sj->own_j && arb_sched_forget(s->sched, sj->j, NULL) == 0)
        sj->own_j = true;
    if (to == ARB_JOB_CANCELLED)
        s->m_cancelled++;
    else
        s->m_finished++;
    s->dirty = true;
    pthread_cond_signal(&s->kick);
}

/* ---- open, close, the scheduler thread ----------------------------------------------- */

static int build_sched(st_t *s, arb_err_t *err)
{
    arb_sched_conf_t sc = {0};
    int rc = arb_profile_lookup(s->conf.policy, &sc.profile, err);

    if (rc < 0)
        return rc;
    sc.profile.stale_ns = s->conf.stale_ns;
    sc.queue_policy = s->conf.queue_policy;
    sc.backfill = s->conf.backfill;
    sc.preemption = s->conf.preemption;
    sc.starvation_ns = s->conf.starvation_ns;
    sc.preempt_defer = true;     /* victims keep their GPUs until they exited (resize.c) */
    sc.grace_ns = 10000000000LL; /* an agent's default SIGTERM -> SIGKILL (docs/agent.md) */
    s->sched = arb_sched_new(&s->cluster, &sc, err);
    if (!s->sched)
        return -ENOMEM;
    arb_sched_set_hold(s->sched, st_dep_hold, s); /* dependencies, array throttles */
    for (int i = 0; i < s->conf.nqueues; i++) {
        const st_queue_conf_t *qc = &s->conf.queues[i];
        arb_queue_t q = {0};
        q.name = arb_intern(&s->cluster.strs, qc->name);
        q.cohort = qc->cohort[0] ? arb_intern(&s->cluster.strs, qc->cohort) : 0;
        q.has_quota = qc->has_quota;
        q.nominal = qc->nominal;
        q.borrow_limit = qc->borrow_limit;
        q.weight = qc->weight;
        if ((rc = arb_sched_set_queue(s->sched, &q, err)) < 0)
            return rc;
        st_queue_seen(s, q.name);
    }
    return 0;
}

int st_open(const char *uri, const st_conf_t *conf, st_t **out, arb_err_t *err)
{
    st_t *s = calloc(1, sizeof *s);
    store_opts_t so = {0};
    int rc;

    if (!s)
        return arb_errf(err, -ENOMEM, "out of memory");
    arb_strtab_init(&s->names);
    s->conf = *conf;
    s->conf.queues = NULL;
    s->conf.nqueues = 0;
    if (conf->nqueues > 0) {
        s->conf.queues = malloc((size_t)conf->nqueues * sizeof *s->conf.queues);
        if (!s->conf.queues) {
            free(s);
            return arb_errf(err, -ENOMEM, "out of memory");
        }
        memcpy(s->conf.queues, conf->queues, (size_t)conf->nqueues * sizeof *s->conf.queues);
        s->conf.nqueues = conf->nqueues;
    }
    s->conf.classes = NULL;
    s->conf.nclasses = 0;
    if (conf->nclasses > 0) {
        s->conf.classes = malloc((size_t)conf->nclasses * sizeof *s->conf.classes);
        if (!s->conf.classes) {
            free(s->conf.queues);
            free(s);
            return arb_errf(err, -ENOMEM, "out of memory");
        }
        memcpy(s->conf.classes, conf->classes, (size_t)conf->nclasses * sizeof *s->conf.classes);
        s->conf.nclasses = conf->nclasses;
    }
    if (s->conf.event_retention < 16)
        s->conf.event_retention = 16;
    pthread_mutex_init(&s->mu, NULL);
    arb_cond_init(&s->ev_cond); /* both waited on with monotonic deadlines */
    arb_cond_init(&s->kick);
    arb_cluster_init(&s->cluster);
    arb_rng_seed(&s->rng, conf->seed ? conf->seed : 1);
    s->next_id = 1;
    s->m_start_mono = s->m_window_mono = st_now_ns(s);
    s->ring_cap = s->conf.event_retention;
    s->ring = calloc((size_t)s->ring_cap, sizeof *s->ring);
    so.sync = s->conf.sync;
    so.accept_rewind = s->conf.accept_rewind;
    if (!s->ring) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = store_open(uri, &so, &s->store, err)) < 0)
        goto fail;
    if ((rc = build_sched(s, err)) < 0)
        goto fail;
    if ((rc = st_recover(s, err)) < 0)
        goto fail;
    if ((rc = store_gc_start(s->store, &s->gc, err)) < 0)
        goto fail;
    *out = s;
    return 0;
fail:
    st_close(s);
    return rc;
}

static void *sched_main(void *arg)
{
    st_t *s = arg;

    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec ts = arb_deadline_ns(s->conf.interval_ns);
        if (!s->dirty)
            arb_cond_wait_until(&s->kick, &s->mu, &ts);
        if (s->stop)
            break;
        st_history_trim(s); /* ended jobs past jobs.history leave memory (history.c) */
        pthread_mutex_unlock(&s->mu);
        st_cycle(s, NULL, NULL); /* a failed store stops every waiter, not this loop */
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int st_start(st_t *s, arb_err_t *err)
{
    if (pthread_create(&s->thr, NULL, sched_main, s) != 0)
        return arb_errf(err, -EAGAIN, "cannot start the scheduler thread");
    s->running = true;
    if (st_probe_start(s) < 0)
        return arb_errf(err, -EAGAIN, "cannot start the health-probe thread");
    return 0;
}

void st_quiesce(st_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->kick);
    st_changed(s);
    if (s->node_fn) /* every agent's long poll answers now too */
        s->node_fn(s->node_arg, 0);
    pthread_mutex_unlock(&s->mu);
}

void st_close(st_t *s)
{
    if (!s)
        return;
    st_probe_stop(s);
    if (s->running) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_broadcast(&s->kick);
        st_changed(s);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thr, NULL);
    }
    if (s->gc) {
        pthread_mutex_lock(&s->mu);
        st_flush(s);
        pthread_mutex_unlock(&s->mu);
        store_gc_stop(s->gc);
    }
    store_batch_free(&s->batch);
    store_close(s->store);
    st_idem_free(s);
    st_history_free(s);
    for (uint64_t i = 0; i < s->capjobs; i++)
        st_job_free(s->jobs[i]);
    free(s->jobs);
    free(s->active);
    st_tickets_free(s);
    arb_sched_free(s->sched);
    for (uint32_t i = 0; i < s->capnodes && i < s->cluster.nnodes; i++) {
        json_decref(s->nodes[i].inventory);
        json_decref(s->nodes[i].telemetry);
        json_decref(s->nodes[i].op);
        st_telhist_free(&s->nodes[i]);
        free(s->nodes[i].held);
    }
    free(s->nodes);
    arb_cluster_free(&s->cluster);
    arb_strtab_free(&s->names);
    for (int i = 0; s->ring && i < s->ring_n; i++)
        free(s->ring[(s->ring_head + i) % s->ring_cap].json);
    free(s->ring);
    free(s->queues);
    free(s->conf.queues);
    free(s->conf.classes);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->ev_cond);
    pthread_cond_destroy(&s->kick);
    free(s);
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
    /* The checks driven by the clock walk every active job: at most every
     * ST_CHECK_GAP_NS, so a burst of cycles (one per batch of submissions)
     * does not walk the whole backlog each time. */
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

/* ---- jobs ------------------------------------------------------------------------------- */

int st_time_limit(st_t *s, arb_job_t *j, arb_err_t *err)
{
    int64_t def = s->conf.default_limit_s, max = s->conf.max_limit_s;
    const char *qn = arb_str(&s->cluster.strs, j->queue);

    for (int i = 0; i < s->conf.nqueues; i++)
        if (!strcmp(s->conf.queues[i].name, qn) &&
            (s->conf.queues[i].default_limit_s || s->conf.queues[i].max_limit_s)) {
            def = s->conf.queues[i].default_limit_s;
            max = s->conf.queues[i].max_limit_s;
        }
    if (j->time_limit_s == 0)
        j->time_limit_s = def ? def : max;
    if (max && j->time_limit_s > max)
        return arb_errf(err, -EINVAL,
                        "timeLimit: %llds is longer than the %llds queue '%s' allows "
                        "(maxTimeLimit); ask for at most %llds",
                        (long long)j->time_limit_s, (long long)max, qn, (long long)max);
    return 0;
}

/* The largest capacity any registered node offers, for "no node could ever
 * hold it". */
static int check_fittable(st_t *s, const arb_job_t *j, arb_err_t *err)
{
    if (!s->conf.reject_unfittable || s->cluster.nnodes == 0)
        return 0;
    for (int gi = 0; gi < j->ngroups; gi++) {
        const arb_tgroup_t *g = &j->groups[gi];
        int best_gpus = 0;
        bool ok = false;
        for (uint32_t i = 0; i < s->cluster.nnodes && !ok; i++) {
            const arb_node_t *n = &s->cluster.nodes[i];
            int gpus = 0;
            if (n->state == ARB_NODE_LEFT)
                continue;
            for (int k = 0; k < n->ngpus; k++)
                gpus += n->gpu[k].mem_mib >= g->req.gpu_mem_mib;
            if (gpus > best_gpus)
                best_gpus = gpus;
            ok = gpus >= (g->gpus        ? g->gpus
                          : g->gpu_share ? 1
                                         : 0) &&
                 n->cap.cpu_milli >= g->req.cpu_milli && n->cap.mem_bytes >= g->req.mem_bytes;
            for (int e = 0; e < ARB_MAX_EXT && ok; e++)
                ok = n->cap.ext[e] >= g->req.ext[e];
        }
        if (!ok) {
            char cpu[32], mem[32];
            arb_qty_format(g->req.cpu_milli, ARB_QTY_MILLI, cpu, sizeof cpu);
            arb_qty_format(g->req.mem_bytes, ARB_QTY_BYTES, mem, sizeof mem);
            return arb_errf(err, -EINVAL,
                            "groups[%d] ('%s'): a task asks for %d GPUs, cpu %s, memory %s; no "
                            "registered node could ever hold it (the most GPUs on one node: "
                            "%d); lower the request, or split it into more replicas",
                            gi, g->name, g->gpus, cpu, mem, best_gpus);
        }
    }
    return 0;
}

static bool held_job(const arb_job_t *j)
{
    return j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
}

static bool may_see(const st_who_t *who, const st_job_t *sj)
{
    return who->role != ST_ROLE_USER || strcmp(who->team ? who->team : "", sj->team) == 0;
}

int st_job_submit(st_t *s, const st_who_t *who, const char *body, size_t n, bool yaml, json_t **out,
                  int64_t *ticket, arb_err_t *err)
{
    bool created;
    return st_job_submit_key(s, who, NULL, body, n, yaml, out, &created, ticket, err);
}

/* Every check a submission passes before anything is made: the spec, the
 * service settings, the dependencies, the queue (a user's team's own), the
 * time limit and whether any node could ever hold it. On success *j and the
 * rest are the caller's; on failure they may be partly set, and the caller
 * frees them either way. The caller holds s->mu. */
static int submit_checks(st_t *s, const st_who_t *who, const char *body, size_t n, bool yaml,
                         arb_job_t **j, json_t **command, json_t **env, bool *restartable,
                         st_dep_t **dep, st_svc_conf_t *svc, arb_err_t *err)
{
    const char *team = who->team ? who->team : "";
    int rc;

    rc = st_spec_parse_svc(s, body, n, yaml, j, command, env, restartable, dep, svc, err);
    if (rc < 0 || (rc = st_service_check(s, *j, svc, err)) < 0 ||
        (rc = st_dep_check(s, *dep, err)) < 0)
        return rc;
    if (*dep && svc->is) {
        rc = arb_errf(err, -EINVAL, "dependency, array: a service takes neither");
        return rc;
    }
    /* Which queue: users submit to their team's queue (the default). */
    uint32_t dflt = arb_intern(&s->cluster.strs, "default");
    if (who->role == ST_ROLE_USER) {
        uint32_t tq = arb_intern(&s->cluster.strs, team[0] ? team : "default");
        if ((*j)->queue == 0 || (*j)->queue == dflt)
            (*j)->queue = tq;
        if ((*j)->queue != tq) {
            rc = arb_errf(err, -EACCES,
                          "queue: '%s' is not your team's; members of team '%s' submit to "
                          "queue '%s'",
                          arb_str(&s->cluster.strs, (*j)->queue), team,
                          arb_str(&s->cluster.strs, tq));
            return rc;
        }
    } else if ((*j)->queue == 0) {
        (*j)->queue = dflt;
    }
    if (s->conf.nqueues > 0 && (*j)->queue != dflt) { /* 'default' is always there, quota-less */
        const char *qn = arb_str(&s->cluster.strs, (*j)->queue);
        bool known = false;
        char list[256];
        size_t used = 0;
        list[0] = '\0';
        for (int i = 0; i < s->conf.nqueues; i++) {
            known |= strcmp(s->conf.queues[i].name, qn) == 0;
            if (used < sizeof list)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                         s->conf.queues[i].name);
        }
        if (!known) {
            rc = arb_errf(err, -EINVAL,
                          "queue: '%s' is not configured (queues: %s, and 'default', the "
                          "quota-less queue of jobs without queue:)",
                          qn, list);
            return rc;
        }
    }
    if ((rc = st_time_limit(s, *j, err)) < 0)
        return rc;
    if ((rc = check_fittable(s, *j, err)) < 0)
        return rc;
    return 0;
}

int st_job_submit_check(st_t *s, const st_who_t *who, const char *body, size_t n, bool yaml,
                        arb_err_t *err)
{
    arb_job_t *j = NULL;
    json_t *command = NULL, *env = NULL;
    st_dep_t *dep = NULL;
    bool restartable = true;
    st_svc_conf_t svc;
    pthread_mutex_lock(&s->mu);
    int rc =
        submit_checks(s, who, body, n, yaml, &j, &command, &env, &restartable, &dep, &svc, err);
    pthread_mutex_unlock(&s->mu);
    arb_job_free(j);
    json_decref(command);
    json_decref(env);
    st_dep_free(dep);
    return rc;
}

int st_job_submit_key(st_t *s, const st_who_t *who, const char *key, const char *body, size_t n,
                      bool yaml, json_t **out, bool *created, int64_t *ticket, arb_err_t *err)
{
    arb_job_t *j = NULL;
    json_t *command = NULL, *env = NULL;
    st_dep_t *dep = NULL;
    st_job_t *sj = NULL;
    int rc;
    const char *team = who->team ? who->team : "";

    *created = false;
    if (key && (rc = st_idem_check(key, err)) < 0) {
        *ticket = 0;
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    uint64_t prev = key ? st_idem_find(s, who, key) : 0;
    if (prev) {
        /* A retry: the job this key created, as durable as it was. */
        st_job_t *pj = st_job_find(s, prev), *stored = NULL;
        if (!pj && s->nstored && prev < s->next_id && st_job_stored(s, prev, &stored, err) == 0)
            pj = stored; /* ended past jobs.history: its record (history.c) */
        if (!pj) {
            rc = arb_errf(err, -ENOENT, "Idempotency-Key: '%s' created job %llu, which is gone",
                          key, (unsigned long long)prev);
        } else if (pj->speclen != n || memcmp(pj->spec, body, n) != 0) {
            rc = arb_errf(err, -EINVAL,
                          "Idempotency-Key: '%s' was used for job %llu with a different body; "
                          "send a new key with a new job",
                          key, (unsigned long long)prev);
        } else {
            *out = st_job_json_for(s, pj, who);
            rc = 0;
        }
        st_job_free(stored);
        *ticket = st_seen(s);
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    bool restartable = true;
    st_svc_conf_t svc;
    if ((rc = submit_checks(s, who, body, n, yaml, &j, &command, &env, &restartable, &dep, &svc,
                            err)) < 0)
        goto out;

    sj = calloc(1, sizeof *sj);
    if (sj)
        sj->tasks = calloc((size_t)j->ntasks, sizeof *sj->tasks);
    if (sj)
        sj->spec = malloc(n + 1);
    if (!sj || !sj->tasks || !sj->spec) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    memcpy(sj->spec, body, n);
    sj->spec[n] = '\0';
    sj->speclen = n;
    sj->yaml = yaml;
    sj->ntasks = j->ntasks;
    sj->id = s->next_id;
    sj->team = st_name(s, team);
    sj->owner = st_name(s, who->name);
    if (!sj->team || !sj->owner) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    sj->command = command;
    sj->env = env;
    sj->restartable = restartable;
    sj->dep = dep;
    dep = NULL;
    command = env = NULL;
    sj->submit_ms = st_now_ms(s);
    arb_ctx_t ctx = {.now_ns = st_now_ns(s), .rng = &s->rng};
    j->ext_id = sj->id; /* messages of the core name it by its public id */
    if (svc.is) {       /* a service: the scheduler sees its replicas, never it (service.h) */
        sj->own_j = true;
        j->state = ARB_JOB_RUNNING;
    } else if ((rc = arb_sched_submit(s->sched, j, &ctx, err)) < 0)
        goto out;
    sj->j = j;
    j = NULL; /* the scheduler owns it now */
    if ((rc = st_job_add(s, sj)) < 0) {
        /* Cannot index it: take it out of the queue again. */
        if (!svc.is)
            arb_sched_finish(s->sched, sj->j, ARB_JOB_CANCELLED, NULL);
        else
            arb_job_free(sj->j);
        sj->j = NULL;
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    sj->last = ARB_JOB_PENDING;
    if (key)
        (void)st_idem_put(s, who, key, sj->id); /* -ENOMEM: the job stands, unkeyed */
    *created = true;
    sj->lamport_submit =
        st_event(s, "job-submitted", sj->id, NULL, "job %llu '%s' submitted to queue '%s' by %s",
                 (unsigned long long)sj->id, sj->j->name, arb_str(&s->cluster.strs, sj->j->queue),
                 sj->owner[0] ? sj->owner : "anonymous");
    if (svc.is && st_service_attach(s, sj, &svc, 0) == 0)
        sj->last = ARB_JOB_RUNNING;
    st_job_save(s, sj, sj->lamport_submit);
    s->m_submitted++;
    s->dirty = true;
    pthread_cond_signal(&s->kick);
    *out = st_job_json_for(s, sj, who);
    sj = NULL;
out:
    if (sj) {
        free(sj->spec);
        free(sj->tasks);
        free(sj);
    }
    arb_job_free(j);
    json_decref(command);
    json_decref(env);
    st_dep_free(dep);
    *ticket = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int find_visible(st_t *s, const st_who_t *who, uint64_t id, st_job_t **sj, arb_err_t *err)
{
    *sj = st_job_find(s, id);
    if (!*sj && s->nstored && id > 0 && id < s->next_id)
        return arb_errf(err, -ENOENT,
                        "job %llu ended and is past the controller's memory of ended jobs "
                        "(jobs.history: %d): its record stays in the store, where `arbiter job "
                        "%llu` reads it",
                        (unsigned long long)id, s->conf.job_history, (unsigned long long)id);
    if (!*sj)
        return arb_errf(err, -ENOENT, "job %llu: no such job", (unsigned long long)id);
    if (!may_see(who, *sj))
        return arb_errf(err, -EACCES, "job %llu belongs to team '%s', not to yours ('%s')",
                        (unsigned long long)id, (*sj)->team, who->team ? who->team : "");
    return 0;
}

int st_job_get(st_t *s, const st_who_t *who, uint64_t id, json_t **out, int64_t *ticket,
               arb_err_t *err)
{
    st_job_t *sj;
    int rc;

    pthread_mutex_lock(&s->mu);
    rc = find_visible(s, who, id, &sj, err);
    if (rc == -ENOENT && s->nstored && id > 0 && id < s->next_id) {
        /* ended past the history: read back from the store (history.c) */
        if ((rc = st_job_stored(s, id, &sj, err)) == 0) {
            if (!may_see(who, sj))
                rc = arb_errf(err, -EACCES, "job %llu belongs to team '%s', not to yours ('%s')",
                              (unsigned long long)id, sj->team, who->team ? who->team : "");
            else
                *out = st_job_json_for(s, sj, who);
            st_job_free(sj);
        }
        *ticket = st_seen(s);
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    if (rc == 0)
        *out = st_job_json_for(s, sj, who);
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int st_jobs_list(st_t *s, const st_who_t *who, const char *state, const char *queue, uint64_t after,
                 int limit, json_t **out, int64_t *ticket, arb_err_t *err)
{
    arb_job_state_t want = ARB_JOB_PENDING;
    json_t *arr;
    int rc = 0, n = 0;
    uint32_t q = 0;

    if (state && state[0]) {
        int k = 0;
        while (k < ARB_JOB_NSTATES && strcmp(arb_job_state_name((arb_job_state_t)k), state))
            k++;
        if (k >= ARB_JOB_NSTATES && strcmp(state, "active") != 0)
            return arb_errf(err, -EINVAL,
                            "state: '%s' is not a job state (pending, placed, running, "
                            "preempted, succeeded, failed, cancelled, timeout, active)",
                            state);
        want = (arb_job_state_t)k;
    }
    arr = json_array();
    if (!arr)
        return arb_errf(err, -ENOMEM, "out of memory");
    pthread_mutex_lock(&s->mu);
    if (queue && queue[0] && !(q = arb_strtab_find(&s->cluster.strs, queue)))
        q = UINT32_MAX; /* no job can be in a queue never named */
    for (uint64_t id = after + 1; id < s->next_id && (limit <= 0 || n < limit); id++) {
        st_job_t *sj = s->jobs[id];
        if (!sj || !may_see(who, sj))
            continue;
        if (state && state[0]) {
            if (strcmp(state, "active") == 0 ? sj->active_ix < 0 : sj->j->state != want)
                continue;
        }
        if (q && sj->j->queue != q)
            continue;
        json_array_append_new(arr, st_job_json(s, sj, false));
        n++;
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    *out = json_pack("{s:o}", "jobs", arr);
    return rc;
}

int st_job_cancel(st_t *s, const st_who_t *who, uint64_t id, int64_t if_match, json_t **out,
                  int64_t *ticket, arb_err_t *err)
{
    st_job_t *sj;
    int rc;

    pthread_mutex_lock(&s->mu);
    rc = find_visible(s, who, id, &sj, err);
    if (rc < 0)
        goto out;
    if (if_match >= 0 && (uint64_t)if_match != sj->version) {
        rc = arb_errf(err, -ESTALE, "job %llu is at version %llu, not %lld; read it again",
                      (unsigned long long)id, (unsigned long long)sj->version, (long long)if_match);
        goto out;
    }
    if (sj->active_ix >= 0 && st_service_cancel(s, sj, who->name)) {
        *out = st_job_json_for(s, sj, who);
        goto out;
    }
    switch (sj->j->state) {
    case ARB_JOB_SUCCEEDED:
    case ARB_JOB_FAILED:
    case ARB_JOB_CANCELLED:
    case ARB_JOB_TIMEOUT:
        rc = arb_errf(err, -EPERM, "job %llu already ended (%s); nothing to cancel",
                      (unsigned long long)id, arb_job_state_name(sj->j->state));
        goto out;
    case ARB_JOB_RUNNING:
    case ARB_JOB_PLACED:
        if (sj->delivered) {
            /* An agent may be running it: its GPUs are freed only when the
             * agent reports the tasks ended (never two users of one GPU). */
            if (!sj->stop || sj->stop_then != ST_THEN_CANCEL) {
                /* A cancel wins over a requeue or failure already underway. */
                sj->stop = true;
                sj->stop_then = ST_THEN_CANCEL;
                st_job_say(sj, "cancel requested by %s", who->name ? who->name : "anonymous");
                uint64_t lam = st_event(s, "job-cancel-requested", sj->id, NULL,
                                        "job %llu: cancel requested; waiting for its agents to "
                                        "stop it",
                                        (unsigned long long)sj->id);
                st_job_save(s, sj, lam);
            }
            break;
        }
        /* not started anywhere: free it now */
        __attribute__((fallthrough));
    default: {
        char why[128];
        snprintf(why, sizeof why, "cancelled by %s",
                 who->name && who->name[0] ? who->name : "user");
        st_finish_job(s, sj, ARB_JOB_CANCELLED, why);
    }
    }
    *out = st_job_json_for(s, sj, who);
out:
    *ticket = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* "node_reasons": {NODE: reason} for the group explain found stuck (the
 * console highlights the nodes that could take a task). */
static void explain_nodes(st_t *s, st_job_t *sj, const arb_ctx_t *ctx, int group, json_t *o)
{
    arb_reason_t *why = calloc(s->cluster.nnodes + 1, sizeof *why);
    json_t *m = json_object();
    int g = group < 0 ? 0 : group;

    if (why && m && arb_sched_explain_nodes(s->sched, sj->j, ctx, g, why) == 0) {
        for (uint32_t i = 0; i < s->cluster.nnodes; i++)
            json_object_set_new(m, arb_node_name(&s->cluster, &s->cluster.nodes[i]),
                                json_string(arb_reason_name(why[i])));
        json_object_set_new(o, "node_reasons", m);
        json_object_set_new(o, "node_reasons_group", json_string(sj->j->groups[g].name));
        m = NULL;
    }
    json_decref(m);
    free(why);
}

int st_job_explain(st_t *s, const st_who_t *who, uint64_t id, json_t **out, int64_t *ticket,
                   arb_err_t *err)
{
    return st_job_explain_ex(s, who, id, false, out, ticket, err);
}

int st_job_explain_ex(st_t *s, const st_who_t *who, uint64_t id, bool nodes, json_t **out,
                      int64_t *ticket, arb_err_t *err)
{
    st_job_t *sj;
    int rc;

    pthread_mutex_lock(&s->mu);
    rc = find_visible(s, who, id, &sj, err);
    if (rc == 0) {
        json_t *o = json_pack("{s:I,s:s,s:s}", "job", (json_int_t)sj->id, "name", sj->j->name,
                              "state", arb_job_state_name(sj->j->state));
        if (sj->j->state == ARB_JOB_PENDING || sj->j->state == ARB_JOB_PREEMPTED) {
            arb_explain_t ex;
            arb_ctx_t ctx = {.now_ns = st_now_ns(s), .rng = &s->rng};
            memset(&ex, 0, sizeof ex);
            arb_sched_explain(s->sched, sj->j, &ctx, &ex);
            int need = arb_explain_json(s->sched, &ex, NULL, 0);
            char *buf = malloc((size_t)need + 1);
            if (buf) {
                arb_explain_json(s->sched, &ex, buf, (size_t)need + 1);
                json_t *e = json_loads(buf, 0, NULL);
                if (e)
                    json_object_set_new(o, "explain", e);
                free(buf);
            }
            if (sj->dep && (ex.wait == ARB_WAIT_DEPENDENCY || ex.wait == ARB_WAIT_DEP_NEVER ||
                            ex.wait == ARB_WAIT_THROTTLE)) { /* name the jobs it waits for */
                st_dep_explain(s, sj, ex.wait, ex.summary, sizeof ex.summary);
            }
            json_object_set_new(o, "summary", json_string(ex.summary));
            json_object_set_new(o, "hint", json_string(ex.hint));
            if (nodes)
                explain_nodes(s, sj, &ctx, ex.group, o);
            if (sj->message) /* e.g. who preempted it, and why */
                json_object_set_new(o, "message", json_string(sj->message));
            if (sj->j->waiting) /* resize.c: its victims are being stopped */
                st_resize_explain(s, sj, o);
            st_explain_unhealthy(s, sj, o);
        } else {
            char txt[600], hint[600] = "";
            json_t *strag = json_array();
            size_t used = 0;
            snprintf(txt, sizeof txt, "job %llu is %s, not pending%s%s", (unsigned long long)sj->id,
                     arb_job_state_name(sj->j->state), sj->message ? ": " : "", st_job_msg(sj));
            for (int t = 0; t < sj->j->nalloc && held_job(sj->j); t++) {
                const st_task_t *tk = &sj->tasks[t];
                const char *node =
                    arb_node_name(&s->cluster, &s->cluster.nodes[sj->j->alloc[t].node]);
                if (tk->straggler == ST_STRAG_NONE)
                    continue;
                json_array_append_new(
                    strag, json_pack("{s:i,s:s,s:s}", "task", t, "node", node, "reason",
                                     tk->straggler == ST_STRAG_STALE ? "stale-report"
                                                                     : "low-gpu-utilization"));
                if (used < sizeof hint)
                    used += (size_t)snprintf(hint + used, sizeof hint - used,
                                             "%stask %d on node '%s' is a straggler: %s",
                                             used ? "; " : "", t, node,
                                             tk->straggler == ST_STRAG_STALE
                                                 ? "its node's reports are late"
                                                 : "its GPUs are far less busy than its peers'");
            }
            json_object_set_new(o, "summary", json_string(txt));
            json_object_set_new(o, "hint", json_string(hint));
            if (json_array_size(strag))
                json_object_set_new(o, "stragglers", strag);
            else
                json_decref(strag);
        }
        *out = o;
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- queues, events, checks, status --------------------------------------------------------- */

static json_t *res_json(const arb_res_t *r)
{
    char cpu[32], mem[32];
    arb_qty_format(r->cpu_milli, ARB_QTY_MILLI, cpu, sizeof cpu);
    arb_qty_format(r->mem_bytes, ARB_QTY_BYTES, mem, sizeof mem);
    return json_pack("{s:f,s:s,s:s}", "nvidia.com/gpu", (double)r->gpu_milli / 1000.0, "cpu", cpu,
                     "memory", mem);
}

int st_queues_list(st_t *s, json_t **out, int64_t *ticket, arb_err_t *err)
{
    json_t *arr = json_array();
    arb_res_t total = {0};

    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; i < s->cluster.nnodes; i++)
        if (s->cluster.nodes[i].state != ARB_NODE_LEFT)
            arb_res_add(&total, &s->cluster.nodes[i].cap);
    for (int i = 0; i < s->nqueues; i++) {
        const arb_queue_t *q = arb_sched_queue(s->sched, s->queues[i]);
        int pending = 0, running = 0;
        for (int k = 0; k < s->nactive; k++) {
            const arb_job_t *j = s->active[k]->j;
            if (j->queue != s->queues[i] || s->active[k]->svc)
                continue; /* a service is a record: its replicas are the jobs that run */
            pending += j->state == ARB_JOB_PENDING || j->state == ARB_JOB_PREEMPTED;
            running += j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
        }
        arb_res_t zero = {0};
        const arb_res_t *used = q ? &q->used : &zero;
        double share = 0;
        if (total.gpu_milli > 0 && (double)used->gpu_milli / (double)total.gpu_milli > share)
            share = (double)used->gpu_milli / (double)total.gpu_milli;
        if (total.cpu_milli > 0 && (double)used->cpu_milli / (double)total.cpu_milli > share)
            share = (double)used->cpu_milli / (double)total.cpu_milli;
        if (total.mem_bytes > 0 && (double)used->mem_bytes / (double)total.mem_bytes > share)
            share = (double)used->mem_bytes / (double)total.mem_bytes;
        json_t *o =
            json_pack("{s:s,s:o,s:i,s:i,s:f,s:f}", "name", arb_str(&s->cluster.strs, s->queues[i]),
                      "used", res_json(used), "pending", pending, "running", running, "weight",
                      q ? q->weight : 1.0, "dominant_share", share);
        if (q && q->cohort)
            json_object_set_new(o, "cohort", json_string(arb_str(&s->cluster.strs, q->cohort)));
        if (q && q->has_quota) {
            json_object_set_new(o, "nominal", res_json(&q->nominal));
            json_object_set_new(o, "borrowing_limit", res_json(&q->borrow_limit));
        }
        json_array_append_new(arr, o);
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    *out = json_pack("{s:o}", "queues", arr);
    (void)err;
    return 0;
}

int st_events(st_t *s, const st_who_t *who, uint64_t since, int limit, int64_t wait_ms,
              json_t **out, int64_t *ticket, arb_err_t *err)
{
    json_t *arr = json_array();
    struct timespec dl;
    int n = 0;

    if (limit <= 0 || limit > 10000)
        limit = 1000;
    dl = st_deadline(wait_ms);
    pthread_mutex_lock(&s->mu);
    if (since > s->clock) /* a cursor from before the clock was renumbered (recover.c) */
        since = 0;
    while (
        wait_ms > 0 && !s->stop &&
        (s->ring_n == 0 || s->ring[(s->ring_head + s->ring_n - 1) % s->ring_cap].lamport <= since))
        if (arb_cond_wait_until(&s->ev_cond, &s->mu, &dl) != 0)
            break;
    /* Binary search for the first event after since: lamports increase. */
    int lo = 0, hi = s->ring_n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->ring[(s->ring_head + mid) % s->ring_cap].lamport <= since)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t last = since;
    for (int i = lo; i < s->ring_n && n < limit; i++) {
        const st_event_t *ev = &s->ring[(s->ring_head + i) % s->ring_cap];
        last = ev->lamport;
        if (ev->job && who->role == ST_ROLE_USER) {
            st_job_t *sj = st_job_find(s, ev->job);
            if (sj && !may_see(who, sj))
                continue;
        }
        json_t *e = json_loads(ev->json, 0, NULL);
        if (e)
            json_array_append_new(arr, e);
        n++;
    }
    uint64_t oldest = s->ring_n ? s->ring[s->ring_head].lamport : 0;
    *out = json_pack("{s:o,s:I,s:I,s:b}", "events", arr, "last", (json_int_t)last, "oldest",
                     (json_int_t)oldest, "truncated", since + 1 < oldest);
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    (void)err;
    return 0;
}

int st_check(st_t *s, arb_err_t *err)
{
    int rc;
    uint32_t nn;
    int32_t *milli;

    pthread_mutex_lock(&s->mu);
    rc = arb_cluster_check(&s->cluster, err);
    nn = s->cluster.nnodes;
    milli = calloc((size_t)nn * ARB_MAX_GPUS + 1, sizeof *milli);
    if (rc == 0 && !milli)
        rc = arb_errf(err, -ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < s->nactive; i++) {
        const arb_job_t *j = s->active[i]->j;
        bool holds = j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
        if (!holds && j->nalloc)
            rc = arb_errf(err, -EFAULT, "job %llu is %s but holds %d allocations",
                          (unsigned long long)s->active[i]->id, arb_job_state_name(j->state),
                          j->nalloc);
        for (int t = 0; rc == 0 && t < j->nalloc; t++)
            for (int g = 0; g < ARB_MAX_GPUS; g++)
                if (j->alloc[t].gpu_mask & (1u << g))
                    milli[(size_t)j->alloc[t].node * ARB_MAX_GPUS + (size_t)g] +=
                        j->alloc[t].gpu_milli;
    }
    for (uint32_t n = 0; rc == 0 && n < nn; n++) {
        const arb_node_t *nd = &s->cluster.nodes[n];
        for (int g = 0; rc == 0 && g < nd->ngpus; g++) {
            int32_t m = milli[(size_t)n * ARB_MAX_GPUS + (size_t)g];
            if (m > 1000 || m != nd->gpu[g].used_milli)
                rc = arb_errf(err, -EFAULT,
                              "node '%s' GPU %d: jobs hold %d milli, the node counts %d",
                              arb_node_name(&s->cluster, nd), g, m, nd->gpu[g].used_milli);
        }
    }
    free(milli);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

json_t *st_status(st_t *s)
{
    pthread_mutex_lock(&s->mu);
    json_t *o =
        json_pack("{s:I,s:I,s:I,s:I,s:i,s:i}", "lamport", (json_int_t)s->clock, "epoch",
                  (json_int_t)s->epoch, "revision", (json_int_t)store_revision(s->store), "jobs",
                  (json_int_t)s->njobs, "active_jobs", s->nactive, "nodes", st_nodes_live(s));
    pthread_mutex_unlock(&s->mu);
    return o;
}
