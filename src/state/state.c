/*
 * state.c: the resource manager assembled: opening (the configuration
 * copied, the scheduler built with its queues, recovery, the store's
 * group-commit thread), quiescing and closing; and the checks over the
 * whole state (st_check's invariants, st_status). The layers below it:
 * ledger.c the ground (clock, events, batches, the job table), the
 * operations (jobs.c, node.c, service.c, liveness.c, ...), cycle.c the
 * scheduler thread. state_int.h draws them; scripts/lint.sh checks them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"
#include "util/mtime.h"

/* What the ledger (the ground, ledger.c) asks of the layers above it. */
static const st_ledger_ops_t ledger_ops = {
    .record = st_job_record,
    .saved = st_node_assign_hint,
    .retired = st_history_push,
};

/* ---- open, close --------------------------------------------------------------------- */

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
    s->lops = &ledger_ops;
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

/* ---- checks, status ---------------------------------------------------------------------- */

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

void st_status(st_t *s, st_status_t *out)
{
    pthread_mutex_lock(&s->mu);
    *out = (st_status_t){.lamport = s->clock,
                         .epoch = s->epoch,
                         .revision = store_revision(s->store),
                         .jobs = s->njobs,
                         .active_jobs = s->nactive,
                         .nodes = st_nodes_live(s)};
    pthread_mutex_unlock(&s->mu);
}

int st_priority_classes(st_t *s, st_prio_list_t *out)
{
    spec_prio_class_t bi[16];
    const spec_prio_class_t *v = s->conf.classes;
    int n = s->conf.nclasses;

    if (!n) { /* no priorityClasses: in the config */
        n = spec_priority_builtins(bi, 16);
        v = bi;
    }
    out->n = 0;
    out->v = n ? malloc((size_t)n * sizeof *out->v) : NULL;
    if (n && !out->v)
        return -ENOMEM;
    if (n)
        memcpy(out->v, v, (size_t)n * sizeof *out->v);
    out->n = n;
    return 0;
}

void st_prio_list_free(st_prio_list_t *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}
