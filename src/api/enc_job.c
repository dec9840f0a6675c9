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

static json_t *task_json(const st_task_view_t *t)
{
    json_t *o = json_pack("{s:i,s:s,s:s}", "index", t->index, "group", t->group, "state", t->state);

    if (!o)
        return NULL;
    if (t->node) {
        json_object_set_new(o, "node", json_string(t->node));
        json_object_set_new(o, "gpus", api_gpu_list(t->gpu_mask));
        if (t->gpu_mask)
            json_object_set_new(o, "gpu_milli", json_integer(t->gpu_milli));
    } else {
        json_object_set_new(o, "node", json_null());
        json_object_set_new(o, "gpus", json_array());
    }
    if (t->last_node)
        json_object_set_new(o, "last_node", json_string(t->last_node));
    json_object_set_new(o, "exit_code", t->has_exit ? json_integer(t->exit_code) : json_null());
    if (t->straggler)
        json_object_set_new(o, "straggler", json_string(t->straggler));
    return o;
}

/* {NAME: VALUE}; a secret {"value", "secret": true} where shown, else {"secret": true}. */
static json_t *env_json(const st_job_view_t *v)
{
    json_t *o = json_object();

    for (int i = 0; o && i < v->nenv; i++) {
        const st_env_view_t *e = &v->env[i];
        json_object_set_new(o, e->name,
                            !e->secret ? json_string(e->value)
                            : e->value ? json_pack("{s:s,s:b}", "value", e->value, "secret", 1)
                                       : json_pack("{s:b}", "secret", 1));
    }
    return o;
}

json_t *api_job_json(const st_job_view_t *v)
{
    json_t *o, *tasks = json_array();

    o = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:I,s:I,s:I,s:I,s:I}", "id", (json_int_t)v->id,
                  "name", v->name, "queue", v->queue, "team", v->team, "owner", v->owner, "state",
                  v->state, "priority", v->priority, "gpus", v->gpus, "version",
                  (json_int_t)v->version, "submitted_lamport", (json_int_t)v->submitted_lamport,
                  "updated_lamport", (json_int_t)v->updated_lamport, "attempt",
                  (json_int_t)v->attempt, "epoch", (json_int_t)v->epoch);
    if (!o || !tasks) {
        json_decref(o);
        json_decref(tasks);
        return NULL;
    }
    json_object_set_new(o, "submitted_at", json_string(v->submitted_at));
    if (v->started_at[0])
        json_object_set_new(o, "started_at", json_string(v->started_at));
    if (v->ended_at[0])
        json_object_set_new(o, "ended_at", json_string(v->ended_at));
    if (v->stop_requested)
        json_object_set_new(o, "stop_requested", json_true());
    if (v->message)
        json_object_set_new(o, "message", json_string(v->message));
    for (int t = 0; t < v->ntasks; t++)
        json_array_append_new(tasks, task_json(&v->tasks[t]));
    json_object_set_new(o, "tasks", tasks);
    if (v->wait)
        json_object_set_new(o, "wait", json_string(v->wait));
    if (v->dependency)
        json_object_set_new(o, "dependency", json_string(v->dependency));
    if (v->array) {
        json_t *a = json_pack("{s:I,s:i}", "job", (json_int_t)v->array_job, "task", v->array_task);
        if (a && v->array_count)
            json_object_set_new(a, "count", json_integer(v->array_count));
        if (a && v->array_throttle)
            json_object_set_new(a, "throttle", json_integer(v->array_throttle));
        json_object_set_new(o, "array", a);
    }
    if (v->kind) {
        json_object_set_new(o, "kind", json_string(v->kind));
        json_object_set_new(o, "service",
                            v->service
                                ? api_service_json(v->service)
                                : json_pack("{s:I,s:s,s:i}", "job", (json_int_t)v->replica_of,
                                            "name", v->replica_of_name, "replica", v->replica));
    }
    if (!v->full)
        return o;
    /* What it asks for and where it may run: the dry run's object (its one
     * writer, src/spec's spec_asks_json), merged (its "elastic" replaced by
     * the live size below). */
    json_t *asks = spec_asks_json(&v->asks);
    if (asks)
        json_object_update(o, asks);
    json_decref(asks);
    if (v->elastic)
        json_object_set_new(o, "elastic",
                            json_pack("{s:i,s:i,s:i,s:i}", "min", v->elastic_min, "max",
                                      v->elastic_max, "current", v->elastic_current, "generation",
                                      v->elastic_generation));
    json_t *cmd = json_array();
    for (int i = 0; cmd && i < v->ncommand; i++)
        json_array_append_new(cmd, json_string(v->command[i]));
    json_object_set_new(o, "command", cmd);
    if (v->has_env)
        json_object_set_new(o, "env", env_json(v));
    json_t *evs = json_array();
    for (int i = 0; evs && i < v->nevents; i++)
        json_array_append_new(evs, api_event_json(&v->events[i]));
    json_object_set_new(o, "events", evs);
    return o;
}

/* {"jobs": [...]} */
json_t *api_jobs_json(const st_job_list_t *l)
{
    json_t *arr = json_array();

    for (int i = 0; arr && i < l->n; i++)
        json_array_append_new(arr, api_job_json(&l->v[i]));
    return arr ? json_pack("{s:o}", "jobs", arr) : NULL;
}
