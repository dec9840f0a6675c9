/*
 * jobview.c: the jobs as the state answers for them: a typed view of each
 * (st_job_view_t, state.h), a snapshot taken under s->mu that the caller
 * owns; src/api/enc_job.c makes the JSON clients read of it. The replies
 * of submit, get, list and cancel (jobs.c) are built here.
 *
 * Names (the queue, team, owner, the nodes of its tasks) are borrowed from
 * the state's interned strings, which never move nor go before st_close;
 * the rest (the message, the command, env values, events) is copied. What
 * the job asks for (st_job_asks_t) is read off its spec the way src/spec's
 * spec_job_json reads it for a dry run (the API encodes both the same:
 * tests/unit/test_api_enc2.c holds them to it); a service's block is its
 * st_service_view_t (service.c).
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
    free(v->asks.groups);
    free(v->asks.selector);
    free(v->asks.terms);
    free(v->asks.exprs);
    free(v->asks.vals);
    free(v->asks.tolerations);
    free(v->asks.models);
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

/* A name from c's table: "" for none (as spec_job_json writes it). */
static const char *name_of(const arb_cluster_t *c, uint32_t id)
{
    const char *n = id ? arb_str(&c->strs, id) : NULL;
    return n ? n : "";
}

static void group_ask(const arb_cluster_t *c, const arb_tgroup_t *g, st_ask_group_t *a)
{
    snprintf(a->name, sizeof a->name, "%s", g->name);
    a->replicas = g->replicas;
    a->gpus = g->gpus;
    a->gpu_share = g->gpu_share;
    a->cpu_milli = g->req.cpu_milli;
    a->mem_bytes = g->req.mem_bytes;
    a->gpu_mem_mib = g->req.gpu_mem_mib;
    if (g->lim.cpu_milli != g->req.cpu_milli)
        a->cpu_limit_milli = g->lim.cpu_milli;
    if (g->lim.mem_bytes != g->req.mem_bytes)
        a->mem_limit_bytes = g->lim.mem_bytes;
    a->ephemeral_bytes = g->ephemeral_bytes;
    for (int i = 0; i < c->ext.n && i < ARB_MAX_EXT; i++)
        a->ext[i] = g->req.ext[i];
    if (g->topo.level != ARB_TOPO_ANY) {
        a->topo_level = arb_topo_level_name(g->topo.level);
        a->topo_required = g->topo.required;
    }
}

/* Count the expressions and values of n terms. */
static void terms_size(const arb_aff_term_t *t, int n, int *nexpr, int *nvals)
{
    for (int i = 0; i < n; i++) {
        *nexpr += t[i].nexpr;
        for (int k = 0; k < t[i].nexpr; k++)
            *nvals += t[i].expr[k].nvals;
    }
}

static void term_ask(const arb_cluster_t *c, const arb_aff_term_t *t, st_job_asks_t *a)
{
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
    st_ask_term_t *at = &a->terms[a->nrequired + a->npreferred];

    at->weight = t->weight;
    at->expr0 = a->nexprs;
    at->nexpr = t->nexpr;
    for (int i = 0; i < t->nexpr; i++) {
        const arb_match_expr_t *e = &t->expr[i];
        st_ask_expr_t *x = &a->exprs[a->nexprs++];
        x->key = name_of(c, e->key);
        x->op = (unsigned)e->op < 6 ? ops[e->op] : "?";
        x->num = e->num;
        x->val0 = a->nvals;
        if (e->op == ARB_OP_GT || e->op == ARB_OP_LT)
            continue;
        x->nvals = e->nvals;
        for (int k = 0; k < e->nvals; k++)
            a->vals[a->nvals++] = name_of(c, e->vals[k]);
    }
}

/* What j asks for, read off its spec (spec_job_json's fields). */
static int asks_view(const arb_cluster_t *c, const arb_job_t *j, st_job_asks_t *a)
{
    static const char *const eff[] = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"};
    int nexpr = 0, nvals = 0, nterms = j->nrequired + j->npreferred;

    a->ntasks = j->ntasks;
    a->gang_min = j->gang_min;
    a->elastic = j->elastic;
    a->grace_s = j->grace_s < 0 ? -1 : j->grace_s;
    if (j->gpu_sharing)
        a->gpu_sharing = j->gpu_sharing > 0 ? "allow" : "deny";
    a->preemptible = j->preemptible;
    a->exclusive = j->exclusive;
    a->time_limit_s = j->time_limit_s;
    a->dataset = j->dataset ? name_of(c, j->dataset) : NULL;
    for (int i = 0; i < c->ext.n && i < ARB_MAX_EXT; i++)
        a->ext_name[a->next++] = c->ext.name[i];
    terms_size(j->required, j->nrequired, &nexpr, &nvals);
    terms_size(j->preferred, j->npreferred, &nexpr, &nvals);
    if ((j->ngroups && !(a->groups = calloc((size_t)j->ngroups, sizeof *a->groups))) ||
        (j->nselector && !(a->selector = calloc((size_t)j->nselector, sizeof *a->selector))) ||
        (nterms && !(a->terms = calloc((size_t)nterms, sizeof *a->terms))) ||
        (nexpr && !(a->exprs = calloc((size_t)nexpr, sizeof *a->exprs))) ||
        (nvals && !(a->vals = calloc((size_t)nvals, sizeof *a->vals))) ||
        (j->ntolerations &&
         !(a->tolerations = calloc((size_t)j->ntolerations, sizeof *a->tolerations))) ||
        (j->nmodels && !(a->models = calloc((size_t)j->nmodels, sizeof *a->models))))
        return -ENOMEM;
    for (int i = 0; i < j->ngroups; i++)
        group_ask(c, &j->groups[i], &a->groups[a->ngroups++]);
    for (int i = 0; i < j->nselector; i++, a->nselector++) {
        a->selector[i].key = name_of(c, j->selector[i].key);
        a->selector[i].value = name_of(c, j->selector[i].val);
    }
    for (int i = 0; i < j->nrequired; i++, a->nrequired++)
        term_ask(c, &j->required[i], a);
    for (int i = 0; i < j->npreferred; i++, a->npreferred++)
        term_ask(c, &j->preferred[i], a);
    for (int i = 0; i < j->ntolerations; i++) {
        const arb_toleration_t *t = &j->tolerations[i];
        st_ask_toleration_t *at = &a->tolerations[a->ntolerations++];
        at->key = t->key ? name_of(c, t->key) : NULL;
        at->value = t->exists ? NULL : name_of(c, t->val);
        at->effect = t->effect > 0 && t->effect < 4 ? eff[t->effect] : NULL;
    }
    for (int i = 0; i < j->nmodels; i++)
        a->models[a->nmodels++] = name_of(c, j->models[i]);
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
    if (asks_view(&s->cluster, j, &v->asks) < 0)
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
