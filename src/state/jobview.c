/*
 * jobview.c: the jobs as the state answers for them: a typed view of each
 * (st_job_view_t, state.h), a snapshot taken under s->mu that the caller
 * owns; src/api/enc_job.c makes the JSON clients read of it. The replies
 * of submit, get, list and cancel (jobs.c) are built here.
 *
 * Names (the queue, team, owner, the nodes of its tasks) are borrowed from
 * the state's interned strings, which never move nor go before st_close;
 * the rest (the message, the command, env values, events) is copied. What
 * the job asks for (spec_asks_t) is read off its spec by src/spec's
 * spec_asks_read, and written by its spec_asks_json, the dry run's writer
 * (tests/unit/test_jobasks.c holds the two to the same bytes); a service's
 * block is its st_service_view_t (service.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/jv.h"
#include "state/state_int.h"

void st_job_view_free(st_job_view_t *v)
{
    free(v->message);
    free(v->tasks);
    free(v->dependency);
    if (v->service)
        st_service_view_free(v->service);
    free(v->service);
    spec_asks_free(&v->asks);
    for (int i = 0; i < v->ncommand; i++)
        free(v->command[i]);
    free(v->command);
    for (int i = 0; i < v->nenv; i++) {
        free(v->env[i].name);
        if (v->env[i].value) /* a secret does not stay in freed memory */
            memset(v->env[i].value, 0, strlen(v->env[i].value));
        free(v->env[i].value);
    }
    free(v->env);
    for (int i = 0; i < v->nevents; i++)
        free(v->events[i].message);
    free(v->events);
    memset(v, 0, sizeof *v);
}

void st_job_list_free(st_job_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        st_job_view_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

bool st_may_see_secrets(const st_who_t *who, const st_job_t *sj)
{
    if (who->role == ST_ROLE_ADMIN)
        return true;
    return who->role == ST_ROLE_USER && who->name && strcmp(who->name, sj->owner) == 0 &&
           strcmp(who->team ? who->team : "", sj->team) == 0;
}

static void task_view(st_t *s, st_job_t *sj, int t, st_task_view_t *v)
{
    const arb_job_t *j = sj->j;
    const arb_tgroup_t *g = arb_job_task_group(j, t, NULL);
    const st_task_t *tk = &sj->tasks[t];
    bool held = t < j->nalloc && (j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING) &&
                j->alloc[t].node != ARB_NO_NODE;

    v->index = t;
    snprintf(v->group, sizeof v->group, "%s", g ? g->name : "");
    v->state = st_task_state_names[tk->state];
    if (held) {
        const arb_task_alloc_t *a = &j->alloc[t];
        v->node = arb_node_name(&s->cluster, &s->cluster.nodes[a->node]);
        v->gpu_mask = a->gpu_mask;
        v->gpu_milli = a->gpu_milli;
    }
    /* Where it last ran (its logs are there), after it ended too. */
    if (tk->node1 && tk->node1 <= s->cluster.nnodes)
        v->last_node = arb_node_name(&s->cluster, &s->cluster.nodes[tk->node1 - 1]);
    v->has_exit = tk->has_exit;
    v->exit_code = tk->exit_code;
    if (held && tk->straggler != ST_STRAG_NONE)
        v->straggler = tk->straggler == ST_STRAG_STALE ? "stale-report" : "low-gpu-utilization";
}

/* The command and env the job was given (env: secrets shown when reveal). */
static int command_env(const st_job_t *sj, bool reveal, st_job_view_t *v)
{
    size_t n = json_array_size(sj->command), i;
    const char *k;
    json_t *e;

    if (n && !(v->command = calloc(n, sizeof *v->command)))
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        const char *a = json_string_value(json_array_get(sj->command, i));
        if (!(v->command[v->ncommand++] = strdup(a ? a : "")))
            return -ENOMEM;
    }
    if (!sj->env)
        return 0;
    v->has_env = true;
    n = json_object_size(sj->env);
    if (n && !(v->env = calloc(n, sizeof *v->env)))
        return -ENOMEM;
    json_object_foreach(sj->env, k, e)
    {
        st_env_view_t *ev = &v->env[v->nenv++];
        json_t *val = json_is_object(e) ? json_object_get(e, "value") : e;
        ev->secret = json_is_object(e);
        if (!(ev->name = strdup(k)))
            return -ENOMEM;
        if ((!ev->secret || reveal) &&
            !(ev->value = strdup(json_string_value(val) ? json_string_value(val) : "")))
            return -ENOMEM;
    }
    return 0;
}

/* The job's recent events, oldest first (at most 32). */
static int job_events(st_t *s, const st_job_t *sj, st_job_view_t *v)
{
    int found = 0, idx[32];

    for (int i = s->ring_n - 1; i >= 0 && found < 32; i--) {
        int k = (s->ring_head + i) % s->ring_cap;
        if (s->ring[k].job == sj->id && s->ring[k].type)
            idx[found++] = k;
        if (s->ring[k].lamport < sj->lamport_submit)
            break;
    }
    if (found && !(v->events = calloc((size_t)found, sizeof *v->events)))
        return -ENOMEM;
    while (found > 0)
        if (st_event_view_of(&s->ring[idx[--found]], &v->events[v->nevents++]) < 0)
            return -ENOMEM;
    return 0;
}

/* The service's view and kind. */
static int service_part(st_t *s, st_job_t *sj, st_job_view_t *v)
{
    if (sj->svc) {
        v->kind = "service";
        if (!(v->service = calloc(1, sizeof *v->service)))
            return -ENOMEM;
        if (st_service_view_of(s, sj, v->service) < 0) {
            free(v->service);
            v->service = NULL;
            return -ENOMEM;
        }
        return 0;
    }
    if (sj->svc_of) {
        const st_job_t *p = st_job_find(s, sj->svc_of);
        v->kind = "replica";
        v->replica_of = sj->svc_of;
        snprintf(v->replica_of_name, sizeof v->replica_of_name, "%s", p ? p->j->name : "");
        v->replica = sj->replica;
    }
    return 0;
}

int st_job_view_of(st_t *s, st_job_t *sj, bool full, const st_who_t *who, st_job_view_t *v)
{
    const arb_job_t *j = sj->j;

    memset(v, 0, sizeof *v);
    v->id = sj->id;
    snprintf(v->name, sizeof v->name, "%s", j->name);
    v->queue = arb_str(&s->cluster.strs, j->queue);
    v->team = sj->team;
    v->owner = sj->owner;
    v->state = arb_job_state_name(j->state);
    v->priority = j->priority;
    for (int i = 0; i < j->ngroups; i++)
        v->gpus += j->groups[i].gpus * j->groups[i].replicas;
    v->version = sj->version;
    v->submitted_lamport = sj->lamport_submit;
    v->updated_lamport = sj->lamport_update;
    v->attempt = sj->attempt;
    v->epoch = sj->epoch;
    jv_time(sj->submit_ms, v->submitted_at, sizeof v->submitted_at);
    if (sj->start_ms)
        jv_time(sj->start_ms, v->started_at, sizeof v->started_at);
    if (sj->end_ms)
        jv_time(sj->end_ms, v->ended_at, sizeof v->ended_at);
    v->stop_requested = sj->stop;
    if (sj->message && !(v->message = strdup(sj->message)))
        goto oom;
    if (sj->ntasks && !(v->tasks = calloc((size_t)sj->ntasks, sizeof *v->tasks)))
        goto oom;
    for (int t = 0; t < sj->ntasks; t++)
        task_view(s, sj, t, &v->tasks[v->ntasks++]);
    if ((j->state == ARB_JOB_PENDING || j->state == ARB_JOB_PREEMPTED) && j->wait)
        v->wait = arb_wait_name((arb_wait_t)j->wait);
    if (st_dep_view(sj, v) < 0 || service_part(s, sj, v) < 0)
        goto oom;
    if (!full)
        return 0;
    v->full = true;
    if (spec_asks_read(&s->cluster, j, &v->asks) < 0)
        goto oom;
    if (j->elastic) {
        v->elastic = true;
        v->elastic_min = j->gang_min;
        v->elastic_max = j->ntasks;
        v->elastic_current = j->nalloc;
        v->elastic_generation = (int)j->resize_gen;
    }
    if (command_env(sj, who && st_may_see_secrets(who, sj), v) < 0 || job_events(s, sj, v) < 0)
        goto oom;
    return 0;
oom:
    st_job_view_free(v);
    return -ENOMEM;
}
