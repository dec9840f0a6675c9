/*
 * jobs.c: the operations on jobs that the API calls: submit (every check a
 * spec passes first, an Idempotency-Key's retry), get, list, cancel,
 * explain; and the reads beside them, the queues and the event log, as a
 * user of a team may see them. Each takes s->mu, works in memory, queues
 * its store operations as one batch (st_flush) and returns its ticket.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state/service.h"
#include "state/state_int.h"
#include "util/mtime.h"

/* ---- the job's owned parts ---------------------------------------------------------- */

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

int st_job_submit(st_t *s, const st_who_t *who, const char *body, size_t n, bool yaml,
                  st_job_view_t *out, int64_t *ticket, arb_err_t *err)
{
    bool created;
    return st_job_submit_key(s, who, NULL, body, n, yaml, out, &created, ticket, err);
}

/* Every check a submission passes before anything is made: the spec (read
 * before the lock into rd, st_spec_read; its job made here), the service
 * settings, the dependencies, the queue (a user's team's own), the time
 * limit and whether any node could ever hold it. On success *j and the
 * rest are the caller's; on failure they may be partly set, and the caller
 * frees them either way. The caller holds s->mu. */
static int submit_checks(st_t *s, const st_who_t *who, st_spec_read_t *rd, arb_job_t **j,
                         json_t **command, json_t **env, bool *restartable, st_dep_t **dep,
                         st_svc_conf_t *svc, char *pclass, arb_err_t *err)
{
    const char *team = who->team ? who->team : "";
    int rc;

    rc = st_spec_job(s, rd, NULL, j, command, env, restartable, dep, svc, pclass, err);
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
    char pclass[ST_PCLASS_MAX];
    st_spec_read_t *rd = NULL;
    int rc = st_spec_read(body, n, yaml, false, &rd, err); /* no lock: st_spec_read */
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&s->mu);
    rc = submit_checks(s, who, rd, &j, &command, &env, &restartable, &dep, &svc, pclass, err);
    pthread_mutex_unlock(&s->mu);
    st_spec_read_free(rd);
    arb_job_free(j);
    json_decref(command);
    json_decref(env);
    st_dep_free(dep);
    return rc;
}

int st_job_submit_key(st_t *s, const st_who_t *who, const char *key, const char *body, size_t n,
                      bool yaml, st_job_view_t *out, bool *created, int64_t *ticket, arb_err_t *err)
{
    arb_job_t *j = NULL;
    json_t *command = NULL, *env = NULL;
    st_dep_t *dep = NULL;
    st_job_t *sj = NULL;
    int rc;
    const char *team = who->team ? who->team : "";

    *created = false;
    memset(out, 0, sizeof *out);
    if (key && (rc = st_idem_check(key, err)) < 0) {
        *ticket = 0;
        return rc;
    }
    /* Most of the spec's parse needs no state, so it is done before the
     * lock (st_spec_read). A spec it refuses changes nothing and waits for
     * no commit; with a key the refusal waits until the key is looked up,
     * as a retry's answer comes first. */
    st_spec_read_t *rd = NULL;
    arb_err_t rerr = {{0}};
    int rrc = st_spec_read(body, n, yaml, false, &rd, key ? &rerr : err);
    if (rrc < 0 && !key) {
        *ticket = 0;
        return rrc;
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
        } else if ((rc = st_job_spec_same(s, pj, body, n, err)) < 0) {
            /* err says why its spec could not be read back */
        } else if (rc == 0) {
            rc = arb_errf(err, -EINVAL,
                          "Idempotency-Key: '%s' was used for job %llu with a different body; "
                          "send a new key with a new job",
                          key, (unsigned long long)prev);
        } else if ((rc = st_job_view_of(s, pj, true, who, out)) < 0) {
            rc = arb_errf(err, rc, "out of memory");
        }
        st_job_free(stored);
        *ticket = st_seen(s);
        pthread_mutex_unlock(&s->mu);
        st_spec_read_free(rd);
        return rc;
    }
    bool restartable = true;
    st_svc_conf_t svc;
    char pclass[ST_PCLASS_MAX];
    if (rrc < 0) { /* a keyed submission's spec, refused before the lock */
        if (err)
            *err = rerr;
        rc = rrc;
        goto out;
    }
    if ((rc = submit_checks(s, who, rd, &j, &command, &env, &restartable, &dep, &svc, pclass,
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
    sj->speclen = (uint32_t)n; /* at most API_MAX_BODY */
    sj->yaml = yaml;
    sj->ntasks = j->ntasks;
    sj->id = s->next_id;
    sj->team = st_name(s, team);
    sj->owner = st_name(s, who->name);
    sj->pclass = pclass[0] ? arb_intern(&s->names, pclass) : 0;
    if (!sj->team || !sj->owner || (pclass[0] && !sj->pclass)) {
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
    if (!svc.is) { /* its spec, written once; its record carries the compact form (jobcore.c) */
        char skey[40];
        snprintf(skey, sizeof skey, "specs/%020llu", (unsigned long long)sj->id);
        store_batch_put(&s->batch, skey, sj->spec, sj->speclen);
        free(sj->spec);
        sj->spec = NULL;
    }
    st_job_save(s, sj, sj->lamport_submit);
    s->m_submitted++;
    st_kick(s);
    if (st_job_view_of(s, sj, true, who, out) < 0) /* the job stands: only the reply is lost */
        rc = arb_errf(err, -ENOMEM, "out of memory");
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
    st_spec_read_free(rd);
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

int st_job_get(st_t *s, const st_who_t *who, uint64_t id, st_job_view_t *out, int64_t *ticket,
               arb_err_t *err)
{
    st_job_t *sj;
    int rc;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    rc = find_visible(s, who, id, &sj, err);
    if (rc == -ENOENT && s->nstored && id > 0 && id < s->next_id) {
        /* ended past the history: read back from the store (history.c) */
        if ((rc = st_job_stored(s, id, &sj, err)) == 0) {
            if (!may_see(who, sj))
                rc = arb_errf(err, -EACCES, "job %llu belongs to team '%s', not to yours ('%s')",
                              (unsigned long long)id, sj->team, who->team ? who->team : "");
            else if ((rc = st_job_view_of(s, sj, true, who, out)) < 0)
                rc = arb_errf(err, rc, "out of memory");
            st_job_free(sj);
        }
        *ticket = st_seen(s);
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    if (rc == 0 && (rc = st_job_view_of(s, sj, true, who, out)) < 0)
        rc = arb_errf(err, rc, "out of memory");
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int st_jobs_list(st_t *s, const st_who_t *who, const char *state, const char *queue, uint64_t after,
                 int limit, st_job_list_t *out, int64_t *ticket, arb_err_t *err)
{
    arb_job_state_t want = ARB_JOB_PENDING;
    int rc = 0, cap = 0;
    uint32_t q = 0;

    memset(out, 0, sizeof *out);
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
    pthread_mutex_lock(&s->mu);
    if (queue && queue[0] && !(q = arb_strtab_find(&s->cluster.strs, queue)))
        q = UINT32_MAX; /* no job can be in a queue never named */
    for (uint64_t id = after + 1; rc == 0 && id < s->next_id && (limit <= 0 || out->n < limit);
         id++) {
        st_job_t *sj = s->jobs[id];
        if (!sj || !may_see(who, sj))
            continue;
        if (state && state[0]) {
            if (strcmp(state, "active") == 0 ? sj->active_ix < 0 : sj->j->state != want)
                continue;
        }
        if (q && sj->j->queue != q)
            continue;
        if (out->n == cap) {
            int nc = cap ? 2 * cap : 16;
            st_job_view_t *v = realloc(out->v, (size_t)nc * sizeof *v);
            if (!v) {
                rc = arb_errf(err, -ENOMEM, "out of memory");
                break;
            }
            out->v = v;
            cap = nc;
        }
        if (st_job_view_of(s, sj, false, NULL, &out->v[out->n]) < 0)
            rc = arb_errf(err, -ENOMEM, "out of memory");
        else
            out->n++;
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    if (rc < 0)
        st_job_list_free(out);
    return rc;
}

int st_job_cancel(st_t *s, const st_who_t *who, uint64_t id, int64_t if_match, st_job_view_t *out,
                  int64_t *ticket, arb_err_t *err)
{
    st_job_t *sj;
    int rc;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    rc = find_visible(s, who, id, &sj, err);
    if (rc < 0)
        goto out;
    if (if_match >= 0 && (uint64_t)if_match != sj->version) {
        rc = arb_errf(err, -ESTALE, "job %llu is at version %llu, not %lld; read it again",
                      (unsigned long long)id, (unsigned long long)sj->version, (long long)if_match);
        goto out;
    }
    if (sj->active_ix >= 0 && st_service_cancel(s, sj, who->name))
        goto reply;
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
reply:
    if (st_job_view_of(s, sj, true, who, out) < 0) /* cancelled: only the reply is lost */
        rc = arb_errf(err, -ENOMEM, "out of memory");
out:
    *ticket = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void st_explain_view_free(st_explain_view_t *v)
{
    free(v->explain_json);
    free(v->summary);
    free(v->hint);
    free(v->node_reasons);
    free(v->message);
    free(v->waiting_for);
    free(v->unhealthy);
    free(v->stragglers);
    memset(v, 0, sizeof *v);
}

/* Each node's first failing filter for the group explain found stuck (the
 * console highlights the nodes that could take a task); -ENOMEM. */
static int explain_nodes(st_t *s, st_job_t *sj, const arb_ctx_t *ctx, int group,
                         st_explain_view_t *v)
{
    arb_reason_t *why = calloc(s->cluster.nnodes + 1, sizeof *why);
    int g = group < 0 ? 0 : group, rc = 0;

    if (!why)
        return -ENOMEM;
    if (arb_sched_explain_nodes(s->sched, sj->j, ctx, g, why) == 0) {
        if (s->cluster.nnodes &&
            !(v->node_reasons = calloc(s->cluster.nnodes, sizeof *v->node_reasons))) {
            rc = -ENOMEM;
        } else {
            for (uint32_t i = 0; i < s->cluster.nnodes; i++)
                v->node_reasons[v->nnode_reasons++] = (st_node_reason_t){
                    arb_node_name(&s->cluster, &s->cluster.nodes[i]), arb_reason_name(why[i])};
            v->has_node_reasons = true;
            snprintf(v->node_reasons_group, sizeof v->node_reasons_group, "%s",
                     sj->j->groups[g].name);
        }
    }
    free(why);
    return rc;
}

int st_job_explain(st_t *s, const st_who_t *who, uint64_t id, st_explain_view_t *out,
                   int64_t *ticket, arb_err_t *err)
{
    return st_job_explain_ex(s, who, id, false, out, ticket, err);
}

/* A pending (or preempted) job: the scheduler's explanation and the
 * state's additions. The caller holds s->mu; -ENOMEM. */
static int explain_pending(st_t *s, st_job_t *sj, bool nodes, st_explain_view_t *v)
{
    arb_explain_t ex;
    arb_ctx_t ctx = {.now_ns = st_now_ns(s), .rng = &s->rng};

    v->pending = true;
    memset(&ex, 0, sizeof ex);
    arb_sched_explain(s->sched, sj->j, &ctx, &ex);
    int need = arb_explain_json(s->sched, &ex, NULL, 0);
    if (!(v->explain_json = malloc((size_t)need + 1)))
        return -ENOMEM;
    arb_explain_json(s->sched, &ex, v->explain_json, (size_t)need + 1);
    if (sj->dep && (ex.wait == ARB_WAIT_DEPENDENCY || ex.wait == ARB_WAIT_DEP_NEVER ||
                    ex.wait == ARB_WAIT_THROTTLE)) /* name the jobs it waits for */
        st_dep_explain(s, sj, ex.wait, ex.summary, sizeof ex.summary);
    if (!(v->summary = strdup(ex.summary)) || !(v->hint = strdup(ex.hint)))
        return -ENOMEM;
    if (nodes && explain_nodes(s, sj, &ctx, ex.group, v) < 0)
        return -ENOMEM;
    if (sj->message && !(v->message = strdup(sj->message))) /* e.g. who preempted it, and why */
        return -ENOMEM;
    if (sj->j->waiting && st_resize_explain(s, sj, v) < 0) /* resize.c: its victims stop */
        return -ENOMEM;
    return st_explain_unhealthy(s, sj, v);
}

/* A job not pending: what it is doing, its stragglers. The caller holds s->mu. */
static int explain_other(st_t *s, st_job_t *sj, st_explain_view_t *v)
{
    char txt[600], hint[600] = "";
    size_t used = 0;

    snprintf(txt, sizeof txt, "job %llu is %s, not pending%s%s", (unsigned long long)sj->id,
             arb_job_state_name(sj->j->state), sj->message ? ": " : "", st_job_msg(sj));
    for (int t = 0; t < sj->j->nalloc && held_job(sj->j); t++) {
        const st_task_t *tk = &sj->tasks[t];
        const char *node = arb_node_name(&s->cluster, &s->cluster.nodes[sj->j->alloc[t].node]);
        if (tk->straggler == ST_STRAG_NONE)
            continue;
        st_straggler_view_t *g = realloc(v->stragglers, (size_t)(v->nstragglers + 1) * sizeof *g);
        if (!g)
            return -ENOMEM;
        v->stragglers = g;
        g[v->nstragglers++] = (st_straggler_view_t){
            t, node, tk->straggler == ST_STRAG_STALE ? "stale-report" : "low-gpu-utilization"};
        if (used < sizeof hint)
            used += (size_t)snprintf(
                hint + used, sizeof hint - used, "%stask %d on node '%s' is a straggler: %s",
                used ? "; " : "", t, node,
                tk->straggler == ST_STRAG_STALE ? "its node's reports are late"
                                                : "its GPUs are far less busy than its peers'");
    }
    if (!(v->summary = strdup(txt)) || !(v->hint = strdup(hint)))
        return -ENOMEM;
    return 0;
}

int st_job_explain_ex(st_t *s, const st_who_t *who, uint64_t id, bool nodes, st_explain_view_t *out,
                      int64_t *ticket, arb_err_t *err)
{
    st_job_t *sj;
    int rc;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    rc = find_visible(s, who, id, &sj, err);
    if (rc == 0) {
        out->job = sj->id;
        snprintf(out->name, sizeof out->name, "%s", sj->j->name);
        out->state = arb_job_state_name(sj->j->state);
        if ((sj->j->state == ARB_JOB_PENDING || sj->j->state == ARB_JOB_PREEMPTED
                 ? explain_pending(s, sj, nodes, out)
                 : explain_other(s, sj, out)) < 0)
            rc = arb_errf(err, -ENOMEM, "out of memory");
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    if (rc < 0)
        st_explain_view_free(out);
    return rc;
}

/* ---- queues, events, checks, status --------------------------------------------------------- */

int st_queues_list(st_t *s, st_queue_list_t *out, int64_t *ticket, arb_err_t *err)
{
    arb_res_t total = {0};
    int rc = 0;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; i < s->cluster.nnodes; i++)
        if (s->cluster.nodes[i].state != ARB_NODE_LEFT)
            arb_res_add(&total, &s->cluster.nodes[i].cap);
    if (s->nqueues > 0 && !(out->v = calloc((size_t)s->nqueues, sizeof *out->v)))
        rc = arb_errf(err, -ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < s->nqueues; i++) {
        const arb_queue_t *q = arb_sched_queue(s->sched, s->queues[i]);
        st_queue_view_t *v = &out->v[out->n++];
        for (int k = 0; k < s->nactive; k++) {
            const arb_job_t *j = s->active[k]->j;
            if (j->queue != s->queues[i] || s->active[k]->svc)
                continue; /* a service is a record: its replicas are the jobs that run */
            v->pending += j->state == ARB_JOB_PENDING || j->state == ARB_JOB_PREEMPTED;
            v->running += j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
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
        v->used = *used;
        v->weight = q ? q->weight : 1.0;
        v->dominant_share = share;
        v->name = strdup(arb_str(&s->cluster.strs, s->queues[i]));
        if (q && q->cohort)
            v->cohort = strdup(arb_str(&s->cluster.strs, q->cohort));
        if (q && q->has_quota) {
            v->has_quota = true;
            v->nominal = q->nominal;
            v->borrow_limit = q->borrow_limit;
        }
        if (!v->name || (q && q->cohort && !v->cohort))
            rc = arb_errf(err, -ENOMEM, "out of memory");
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    if (rc < 0)
        st_queue_list_free(out);
    return rc;
}

void st_queue_list_free(st_queue_list_t *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].cohort);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

void st_event_list_free(st_event_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i].message);
    free(l->v);
    memset(l, 0, sizeof *l);
}

int st_events(st_t *s, const st_who_t *who, uint64_t since, int limit, int64_t wait_ms,
              st_event_list_t *out, int64_t *ticket, arb_err_t *err)
{
    struct timespec dl;
    int n = 0, rc = 0;

    memset(out, 0, sizeof *out);
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
    int want = s->ring_n - lo < limit ? s->ring_n - lo : limit;
    if (want > 0 && !(out->v = calloc((size_t)want, sizeof *out->v)))
        rc = arb_errf(err, -ENOMEM, "out of memory");
    uint64_t last = since;
    for (int i = lo; rc == 0 && i < s->ring_n && n < limit; i++) {
        const st_event_t *ev = &s->ring[(s->ring_head + i) % s->ring_cap];
        last = ev->lamport;
        if (ev->job && who->role == ST_ROLE_USER) {
            st_job_t *sj = st_job_find(s, ev->job);
            if (sj && !may_see(who, sj))
                continue;
        }
        n++; /* an unreadable stored one counts, and is shown to nobody */
        if (ev->type && st_event_view_of(ev, &out->v[out->n++]) < 0)
            rc = arb_errf(err, -ENOMEM, "out of memory");
    }
    out->last = last;
    out->oldest = s->ring_n ? s->ring[s->ring_head].lamport : 0;
    out->truncated = since + 1 < out->oldest;
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    if (rc < 0)
        st_event_list_free(out);
    return rc;
}
