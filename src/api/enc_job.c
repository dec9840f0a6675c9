/*
 * enc_job.c: the jobs as clients read them (GET /v1/jobs/{id}, GET
 * /v1/jobs, the replies of submit and cancel): the state's typed view
 * (st_job_view_t) encoded to JSON, field by field in the order the CLI
 * (`arbiter job`, `arbiter queue`), the console, the Slurm verbs (squeue,
 * sacct) and docs/api.md know. What the job asks for is written by the
 * dry run's writer (src/spec/job_json.c's spec_asks_json); a service's block is enc_service.c's, as
 * GET /v1/services/{name} shows it.
 */
#include "api/api_int.h"
#include "spec/job_json.h"
#include "util/jsonw.h"

static void jw_kstr(arb_jw_t *w, const char *k, const char *v)
{
    arb_jw_key(w, k);
    arb_jw_str(w, v);
}

static void jw_kint(arb_jw_t *w, const char *k, int64_t v)
{
    arb_jw_key(w, k);
    arb_jw_int(w, v);
}

static void gpus_write(arb_jw_t *w, uint16_t mask)
{
    arb_jw_arr(w);
    for (int g = 0; g < ARB_MAX_GPUS; g++)
        if (mask & (1u << g))
            arb_jw_int(w, g);
    arb_jw_arr_end(w);
}

static void task_write(arb_jw_t *w, const st_task_view_t *t)
{
    arb_jw_obj(w);
    jw_kint(w, "index", t->index);
    jw_kstr(w, "group", t->group);
    jw_kstr(w, "state", t->state);
    if (t->node) {
        arb_jw_kstr_opt(w, "node", t->node);
        arb_jw_key(w, "gpus");
        gpus_write(w, t->gpu_mask);
        if (t->gpu_mask)
            jw_kint(w, "gpu_milli", t->gpu_milli);
    } else {
        arb_jw_key(w, "node");
        arb_jw_null(w);
        arb_jw_key(w, "gpus");
        gpus_write(w, 0);
    }
    arb_jw_kstr_opt(w, "last_node", t->last_node);
    arb_jw_key(w, "exit_code");
    if (t->has_exit)
        arb_jw_int(w, t->exit_code);
    else
        arb_jw_null(w);
    arb_jw_kstr_opt(w, "straggler", t->straggler);
    arb_jw_obj_end(w);
}

/* {NAME: VALUE}; a secret {"value", "secret": true} where shown, else {"secret": true}. */
static void env_write(arb_jw_t *w, const st_job_view_t *v)
{
    arb_jw_obj(w);
    for (int i = 0; i < v->nenv; i++) { /* names unique: a JSON object's keys */
        const st_env_view_t *e = &v->env[i];
        if (!e->secret) {
            arb_jw_kstr_opt(w, e->name, e->value);
            continue;
        }
        arb_jw_key(w, e->name);
        arb_jw_obj(w);
        if (e->value)
            jw_kstr(w, "value", e->value);
        arb_jw_key(w, "secret");
        arb_jw_bool(w, true);
        arb_jw_obj_end(w);
    }
    arb_jw_obj_end(w);
}

static void event_write(arb_jw_t *w, const st_event_view_t *e)
{
    arb_jw_obj(w);
    jw_kint(w, "lamport", (int64_t)e->lamport);
    jw_kstr(w, "time", e->time);
    jw_kstr(w, "type", e->type);
    jw_kstr(w, "message", e->message);
    if (e->job)
        jw_kint(w, "job", (int64_t)e->job);
    arb_jw_kstr_opt(w, "node", e->node);
    arb_jw_obj_end(w);
}

/* What it asks for and where it may run: the dry run's object (its one
 * writer, src/spec's spec_asks_json), its members merged into the job's (its
 * "elastic" replaced in place by the live size, or added after them). */
static void asks_write(arb_jw_t *w, const st_job_view_t *v)
{
    json_t *asks = spec_asks_json(&v->asks);

    if (!asks) {
        w->err = w->err ? w->err : -ENOMEM;
        return;
    }
    if (v->elastic)
        json_object_set_new(asks, "elastic",
                            json_pack("{s:i,s:i,s:i,s:i}", "min", v->elastic_min, "max",
                                      v->elastic_max, "current", v->elastic_current, "generation",
                                      v->elastic_generation));
    const char *k;
    json_t *x;
    json_object_foreach(asks, k, x)
    {
        arb_jw_key(w, k);
        arb_jw_json(w, x);
    }
    json_decref(asks);
}

/* One job, written straight (util/jsonw.h): a submission's reply is one. */
static void job_write(arb_jw_t *w, const st_job_view_t *v)
{
    arb_jw_obj(w);
    jw_kint(w, "id", (int64_t)v->id);
    jw_kstr(w, "name", v->name);
    jw_kstr(w, "queue", v->queue);
    jw_kstr(w, "team", v->team);
    jw_kstr(w, "owner", v->owner);
    jw_kstr(w, "state", v->state);
    jw_kint(w, "priority", v->priority);
    jw_kint(w, "gpus", v->gpus);
    jw_kint(w, "version", (int64_t)v->version);
    jw_kint(w, "submitted_lamport", (int64_t)v->submitted_lamport);
    jw_kint(w, "updated_lamport", (int64_t)v->updated_lamport);
    jw_kint(w, "attempt", (int64_t)v->attempt);
    jw_kint(w, "epoch", (int64_t)v->epoch);
    arb_jw_kstr_opt(w, "submitted_at", v->submitted_at);
    if (v->started_at[0])
        arb_jw_kstr_opt(w, "started_at", v->started_at);
    if (v->ended_at[0])
        arb_jw_kstr_opt(w, "ended_at", v->ended_at);
    if (v->stop_requested) {
        arb_jw_key(w, "stop_requested");
        arb_jw_bool(w, true);
    }
    arb_jw_kstr_opt(w, "message", v->message);
    arb_jw_key(w, "tasks");
    arb_jw_arr(w);
    for (int t = 0; t < v->ntasks; t++)
        task_write(w, &v->tasks[t]);
    arb_jw_arr_end(w);
    arb_jw_kstr_opt(w, "wait", v->wait);
    arb_jw_kstr_opt(w, "dependency", v->dependency);
    if (v->array) {
        arb_jw_key(w, "array");
        arb_jw_obj(w);
        jw_kint(w, "job", (int64_t)v->array_job);
        jw_kint(w, "task", v->array_task);
        if (v->array_count)
            jw_kint(w, "count", v->array_count);
        if (v->array_throttle)
            jw_kint(w, "throttle", v->array_throttle);
        arb_jw_obj_end(w);
    }
    if (v->kind) {
        arb_jw_kstr_opt(w, "kind", v->kind);
        if (v->service) {
            json_t *svc = api_service_json(v->service);
            arb_jw_key(w, "service");
            arb_jw_json(w, svc);
            json_decref(svc);
        } else {
            arb_jw_key(w, "service");
            arb_jw_obj(w);
            jw_kint(w, "job", (int64_t)v->replica_of);
            jw_kstr(w, "name", v->replica_of_name);
            jw_kint(w, "replica", v->replica);
            arb_jw_obj_end(w);
        }
    }
    if (v->full) {
        asks_write(w, v);
        arb_jw_key(w, "command");
        arb_jw_arr(w);
        for (int i = 0; i < v->ncommand; i++)
            arb_jw_str(w, v->command[i]);
        arb_jw_arr_end(w);
        if (v->has_env) {
            arb_jw_key(w, "env");
            env_write(w, v);
        }
        arb_jw_key(w, "events");
        arb_jw_arr(w);
        for (int i = 0; i < v->nevents; i++)
            event_write(w, &v->events[i]);
        arb_jw_arr_end(w);
    }
    arb_jw_obj_end(w);
}

int api_job_write(arb_buf_t *b, const st_job_view_t *v)
{
    arb_jw_t w;

    arb_jw_begin(&w, b);
    job_write(&w, v);
    return arb_jw_end(&w);
}

int api_jobs_write(arb_buf_t *b, const st_job_list_t *l)
{
    arb_jw_t w;

    arb_jw_begin(&w, b);
    arb_jw_obj(&w);
    arb_jw_key(&w, "jobs");
    arb_jw_arr(&w);
    for (int i = 0; i < l->n; i++)
        job_write(&w, &l->v[i]);
    arb_jw_arr_end(&w);
    arb_jw_obj_end(&w);
    return arb_jw_end(&w);
}

/* The trees (the workload route's list, tests): the text parsed. */
static json_t *parsed(arb_buf_t *b, int rc)
{
    json_t *o = rc == 0 ? json_loadb(b->p, b->len, 0, NULL) : NULL;

    arb_buf_free(b);
    return o;
}

json_t *api_job_json(const st_job_view_t *v)
{
    arb_buf_t b = {0};
    return parsed(&b, api_job_write(&b, v));
}

json_t *api_jobs_json(const st_job_list_t *l)
{
    arb_buf_t b = {0};
    return parsed(&b, api_jobs_write(&b, l));
}
