/*
 * enc_report.c: an agent's side of the wire (POST /v1/nodes/{name}/report,
 * GET /v1/nodes/{name}/assignments): the report's body decoded into the
 * state's st_report_t, checked field by field with the path of the field
 * in every message (the inventory's own fields are the state's to check:
 * it is kept as it came, and recovery checks stored ones the same way),
 * and the state's typed reply (st_report_reply_t, st_assign_list_t)
 * encoded in the order the agent (src/agent/report.c) and docs/api.md know.
 *
 * Body (docs/api.md has the full reference):
 *   {"lamport": 41,
 *    "inventory": {"cpu": "128", "memory": "1Ti", "gpus": [...], ...},
 *    "telemetry": {"cpu_util": 0.4, "memory_used": "100Gi", "net_rx_bps": 1e9,
 *                  "net_tx_bps": 1e9, "disk_read_bps": 0, "disk_write_bps": 0,
 *                  "queue_length": 3,
 *                  "gpus": [{"index": 0, "util": 87, "memory_used_mib": 70000,
 *                            "temp_c": 61, "healthy": true}]},
 *    "tasks": [{"job": 7, "task": 0, "attempt": 1, "state": "running",
 *               "exit_code": null, "fenced_by": "agent"}]}
 * A null member is as if absent.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "state/jv.h"

static const char *const report_keys[] = {"lamport", "inventory", "telemetry", "tasks", NULL};
static const char *const tel_keys[] = {"cpu_util",   "memory_used",   "net_rx_bps",
                                       "net_tx_bps", "disk_read_bps", "disk_write_bps",
                                       "gpus",       "queue_length",  NULL};
static const char *const tgpu_keys[] = {"index",  "util",    "memory_used_mib",
                                        "temp_c", "healthy", NULL};
static const char *const task_keys[] = {"job",       "task",      "attempt", "state",
                                        "exit_code", "fenced_by", NULL};
static const char *const rtask_states[] = {"running", "succeeded", "failed", "lost", NULL};

/* Every check of the body, in the order a message names the first fault. */
static int report_check(const json_t *body, arb_err_t *err)
{
    json_t *inv, *tel, *tasks, *a, *v;
    int64_t x;
    double d;
    size_t i;
    char p[JV_PATH], buf[32];
    int rc;

    if ((rc = jv_object(body, "", report_keys, err)) < 0 ||
        (rc = jv_int(body, "lamport", "", 0, (int64_t)ST_LAMPORT_MAX, &x, err)) < 0 ||
        (rc = jv_member(body, "inventory", "", JSON_OBJECT, &inv, err)) < 0 ||
        (rc = jv_member(body, "telemetry", "", JSON_OBJECT, &tel, err)) < 0 ||
        (rc = jv_member(body, "tasks", "", JSON_ARRAY, &tasks, err)) < 0)
        return rc;
    if (tel) {
        if ((rc = jv_object(tel, "telemetry", tel_keys, err)) < 0 ||
            (rc = jv_num(tel, "cpu_util", "telemetry", 0, 1, &d, err)) < 0 ||
            (rc = jv_qty(tel, "memory_used", "telemetry", ARB_QTY_BYTES, &x, err)) < 0 ||
            (rc = jv_num(tel, "net_rx_bps", "telemetry", 0, 1e15, &d, err)) < 0 ||
            (rc = jv_num(tel, "net_tx_bps", "telemetry", 0, 1e15, &d, err)) < 0 ||
            (rc = jv_num(tel, "disk_read_bps", "telemetry", 0, 1e15, &d, err)) < 0 ||
            (rc = jv_num(tel, "disk_write_bps", "telemetry", 0, 1e15, &d, err)) < 0 ||
            (rc = jv_member(tel, "gpus", "telemetry", JSON_ARRAY, &a, err)) < 0 ||
            (rc = jv_int(tel, "queue_length", "telemetry", 0, INT32_MAX, &x, err)) < 0)
            return rc;
        json_array_foreach(a, i, v)
        {
            bool b;
            jv_path_idx(p, "telemetry.gpus", i);
            if ((rc = jv_object(v, p, tgpu_keys, err)) < 0 ||
                (rc = jv_int(v, "index", p, 0, ARB_MAX_GPUS - 1, &x, err)) < 0 ||
                (rc = jv_int(v, "util", p, 0, 100, &x, err)) < 0 ||
                (rc = jv_int(v, "memory_used_mib", p, 0, INT32_MAX, &x, err)) < 0 ||
                (rc = jv_int(v, "temp_c", p, -100, 300, &x, err)) < 0 ||
                (rc = jv_bool(v, "healthy", p, &b, err)) < 0)
                return rc;
            if (!json_object_get(v, "index"))
                return arb_errf(err, -EINVAL, "%s.index: required", p);
        }
    }
    json_array_foreach(tasks, i, v)
    {
        jv_path_idx(p, "tasks", i);
        buf[0] = '\0';
        if ((rc = jv_object(v, p, task_keys, err)) < 0 ||
            (rc = jv_int(v, "job", p, 1, INT64_MAX, &x, err)) < 0 ||
            (rc = jv_int(v, "task", p, 0, INT32_MAX, &x, err)) < 0 ||
            (rc = jv_int(v, "attempt", p, 0, INT64_MAX, &x, err)) < 0 ||
            (rc = jv_int(v, "exit_code", p, INT32_MIN, INT32_MAX, &x, err)) < 0 ||
            (rc = jv_str(v, "state", p, buf, sizeof buf, err)) < 0)
            return rc;
        if (!json_object_get(v, "job") || !json_object_get(v, "task") || !buf[0])
            return arb_errf(err, -EINVAL, "%s: job, task and state are required", p);
        int k = 0;
        while (rtask_states[k] && strcmp(rtask_states[k], buf))
            k++;
        if (!rtask_states[k])
            return arb_errf(err, -EINVAL, "%s.state: '%s'; use running, succeeded, failed or lost",
                            p, buf);
        buf[0] = '\0';
        if ((rc = jv_str(v, "fenced_by", p, buf, sizeof buf, err)) < 0)
            return rc;
        if (buf[0] && strcmp(buf, "agent") && strcmp(buf, "supervisor"))
            return arb_errf(err, -EINVAL, "%s.fenced_by: '%s'; use agent or supervisor", p, buf);
    }
    return 0;
}

void api_report_free(st_report_t *r)
{
    free((char *)r->inventory);
    free((char *)r->telemetry);
    free(r->gpus);
    free(r->tasks);
    memset(r, 0, sizeof *r);
}

static json_t *member(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

int api_report_decode(const json_t *body, st_report_t *out, arb_err_t *err)
{
    json_t *inv, *tel, *tasks, *g, *v;
    size_t i;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = report_check(body, err)) < 0)
        return rc;
    inv = member(body, "inventory");
    tel = member(body, "telemetry");
    tasks = member(body, "tasks");
    g = json_object_get(tel, "gpus");
    out->has_lamport = json_is_integer(json_object_get(body, "lamport"));
    out->lamport = out->has_lamport ? json_integer_value(json_object_get(body, "lamport")) : 0;
    /* The inventory and telemetry go on as the agent sent them: the
     * state keeps them (its record, the node's view) as they came. */
    if (inv && !(out->inventory = json_dumps(inv, JSON_COMPACT | JSON_PRESERVE_ORDER)))
        goto oom;
    if (tel && !(out->telemetry = json_dumps(tel, JSON_COMPACT | JSON_PRESERVE_ORDER)))
        goto oom;
    if (json_array_size(g) && !(out->gpus = calloc(json_array_size(g), sizeof *out->gpus)))
        goto oom;
    json_array_foreach(g, i, v)
    {
        st_report_gpu_t *o = &out->gpus[out->ngpus++];
        json_t *f;
        o->index = (int)json_integer_value(json_object_get(v, "index")); /* null: 0 */
        if ((o->has_util = json_is_integer(f = json_object_get(v, "util"))))
            o->util = (int)json_integer_value(f);
        if ((o->has_temp = json_is_integer(f = json_object_get(v, "temp_c"))))
            o->temp_c = (int)json_integer_value(f);
        if ((o->has_healthy = json_is_boolean(f = json_object_get(v, "healthy"))))
            o->healthy = json_is_true(f);
    }
    if (json_is_integer(v = json_object_get(tel, "queue_length"))) {
        out->has_queue_length = true;
        out->queue_length = (int32_t)json_integer_value(v);
    }
    out->has_tasks = tasks != NULL;
    if (json_array_size(tasks) &&
        !(out->tasks = calloc(json_array_size(tasks), sizeof *out->tasks)))
        goto oom;
    json_array_foreach(tasks, i, v)
    {
        st_report_task_t *t = &out->tasks[out->ntasks++];
        const char *state = json_string_value(json_object_get(v, "state"));
        const char *by = json_string_value(json_object_get(v, "fenced_by"));
        json_t *f;
        t->job = (uint64_t)json_integer_value(json_object_get(v, "job"));
        t->task = json_integer_value(json_object_get(v, "task"));
        if ((f = json_object_get(v, "attempt"))) { /* null: attempt 0, as it always was */
            t->has_attempt = true;
            t->attempt = (uint64_t)json_integer_value(f);
        }
        t->state = strcmp(state, "running") == 0     ? ST_RT_RUNNING
                   : strcmp(state, "succeeded") == 0 ? ST_RT_SUCCEEDED
                   : strcmp(state, "failed") == 0    ? ST_RT_FAILED
                                                     : ST_RT_LOST;
        if ((t->has_exit = json_is_integer(f = json_object_get(v, "exit_code"))))
            t->exit_code = (int32_t)json_integer_value(f);
        t->fenced_by = !by                             ? ST_FENCED_NONE
                       : strcmp(by, "supervisor") == 0 ? ST_FENCED_SUPERVISOR
                                                       : ST_FENCED_AGENT;
    }
    return 0;
oom:
    api_report_free(out);
    return arb_errf(err, -ENOMEM, "out of memory reading the report");
}

/* One task as its agent is told it: {"job", "name", "task", "ntasks",
 * "attempt", "epoch", "gpus", "gpu_milli", "gpu_memory_mib", "command",
 * "env", "state", "stop"}, then what applies of "cpu", "memory", "grace_s",
 * "time_limit_ms", "elastic", "generation", "hosts", "rank", "world_size",
 * "master_addr", "master_port". */
static json_t *assignment_json(const st_assignment_t *a)
{
    json_t *cmd = json_array(), *env = json_object(), *o;

    for (int i = 0; cmd && i < a->ncommand; i++)
        json_array_append_new(cmd, json_string(a->command[i]));
    for (int i = 0; env && i < a->nenv; i++)
        json_object_set_new(env, a->env[i].key, json_string(a->env[i].value));
    o = json_pack("{s:I,s:s,s:i,s:i,s:I,s:I,s:o,s:i,s:i,s:o,s:o,s:s,s:b}", "job",
                  (json_int_t)a->job, "name", a->name, "task", a->task, "ntasks", a->ntasks,
                  "attempt", (json_int_t)a->attempt, "epoch", (json_int_t)a->epoch, "gpus",
                  api_gpu_list(a->gpus), "gpu_milli", a->gpu_milli, "gpu_memory_mib",
                  a->gpu_memory_mib, "command", cmd, "env", env, "state", a->state, "stop",
                  a->stop);
    if (!o)
        return NULL;
    if (a->cpu[0])
        json_object_set_new(o, "cpu", json_string(a->cpu));
    if (a->memory[0])
        json_object_set_new(o, "memory", json_string(a->memory));
    if (a->has_grace)
        json_object_set_new(o, "grace_s", json_integer(a->grace_s));
    if (a->has_time_limit)
        json_object_set_new(o, "time_limit_ms", json_integer(a->time_limit_ms));
    if (a->elastic) {
        json_t *hosts = json_array();
        for (int i = 0; hosts && i < a->nhosts; i++)
            json_array_append_new(hosts, json_string(a->hosts[i]));
        json_object_set_new(o, "elastic", json_true());
        json_object_set_new(o, "generation", json_integer((json_int_t)a->generation));
        json_object_set_new(o, "hosts", hosts);
    }
    if (a->gang) {
        json_object_set_new(o, "rank", json_integer(a->rank));
        json_object_set_new(o, "world_size", json_integer(a->world_size));
        json_object_set_new(o, "master_addr", json_string(a->master_addr));
        json_object_set_new(o, "master_port", json_integer(a->master_port));
    }
    return o;
}

static json_t *list_json(const st_assign_list_t *l)
{
    json_t *arr = json_array();

    for (int i = 0; arr && i < l->n; i++)
        json_array_append_new(arr, assignment_json(&l->v[i]));
    return arr;
}

json_t *api_report_reply_json(const st_report_reply_t *r)
{
    json_t *o;

    switch (r->kind) {
    case ST_REPORT_APPLIED:
        return json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:o}", "node", r->node, "lamport",
                         (json_int_t)r->lamport, "epoch", (json_int_t)r->epoch, "lease_ms",
                         (json_int_t)r->lease_ms, "version", (json_int_t)r->version,
                         "assignments_version", (json_int_t)r->assigned.version, "assignments",
                         list_json(&r->assigned));
    case ST_REPORT_STALE:
    case ST_REPORT_LOST:
        o = json_pack("{s:s,s:I,s:I,s:I,s:b}", "node", r->node, "lamport", (json_int_t)r->lamport,
                      "epoch", (json_int_t)r->epoch, "lease_ms", (json_int_t)r->lease_ms,
                      r->kind == ST_REPORT_STALE ? "stale" : "lost", 1);
        if (o)
            json_object_set_new(o, "message", json_string(r->message));
        return o;
    }
    return NULL;
}

json_t *api_assignments_json(const char *node, uint64_t lamport, uint64_t epoch,
                             const st_assign_list_t *l)
{
    return json_pack("{s:s,s:I,s:I,s:I,s:o}", "node", node, "lamport", (json_int_t)lamport, "epoch",
                     (json_int_t)epoch, "assignments_version", (json_int_t)l->version,
                     "assignments", list_json(l));
}

int api_node_report(st_t *s, const st_who_t *who, const char *name, int64_t if_match,
                    const json_t *body, json_t **out, int64_t *ticket, arb_err_t *err)
{
    st_report_t rep;
    st_report_reply_t v = {0};

    *out = NULL;
    *ticket = 0;
    /* The name first, as the state checks it: its message before the body's. */
    int rc = st_node_name_check(name, err);
    if (rc == 0 && (rc = api_report_decode(body, &rep, err)) == 0) {
        rc = st_node_report_if(s, who, name, if_match, &rep, &v, ticket, err);
        api_report_free(&rep);
    }
    if (rc == 0 && !(*out = api_report_reply_json(&v)))
        rc = arb_errf(err, -ENOMEM, "out of memory encoding the reply to node '%s'", name);
    else if (rc == -ERANGE) /* a Lamport time too far ahead: the refusal carries the clock */
        *out = json_pack("{s:I}", "lamport", (json_int_t)v.lamport);
    st_report_reply_free(&v);
    return rc;
}

int api_node_assignments(st_t *s, const char *name, int64_t epoch, uint64_t have, bool *same,
                         uint32_t *key, json_t **out, int64_t *ticket, arb_err_t *err)
{
    st_assign_list_t l;
    uint64_t lamport = 0, cur = 0;
    int rc =
        st_node_assignments_wait(s, name, epoch, have, same, key, &l, &lamport, &cur, ticket, err);

    *out = NULL;
    if (rc == 0 && !(*out = api_assignments_json(name, lamport, cur, &l)))
        rc = arb_errf(err, -ENOMEM, "out of memory encoding node '%s''s assignments", name);
    st_assign_list_free(&l);
    return rc;
}
