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
 *   {"lamport": 41, "incarnation": 1764680000000,
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
#include "util/jsonw.h"
#include "state/jv.h"

static const char *const report_keys[] = {"lamport",   "incarnation", "inventory",
                                          "telemetry", "tasks",       NULL};
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
        (rc = jv_int(body, "incarnation", "", 1, INT64_MAX, &x, err)) < 0 ||
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
    out->has_incarnation = json_is_integer(json_object_get(body, "incarnation"));
    out->incarnation =
        out->has_incarnation ? json_integer_value(json_object_get(body, "incarnation")) : 0;
    /* The inventory and telemetry go on as the agent sent them: the
     * state keeps them (its record, the node's view) as they came: the
     * bytes of json_dumps(JSON_COMPACT | JSON_PRESERVE_ORDER), written by
     * jsonw.c (jansson's dump was a tenth of a report's cost). */
    if (inv && !(out->inventory = arb_jsonw_dumps(inv)))
        goto oom;
    if (tel && !(out->telemetry = arb_jsonw_dumps(tel)))
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
/* One assignment, written straight (util/jsonw.h): the agents' long poll
 * and their reports' replies carry a node's whole list every time it moves,
 * so its encoding is paid per task start and end, not per list. */
static void assignment_write(arb_jw_t *w, const st_assignment_t *a)
{
    arb_jw_obj(w);
    arb_jw_key(w, "job");
    arb_jw_int(w, (int64_t)a->job);
    arb_jw_key(w, "name");
    arb_jw_str(w, a->name);
    arb_jw_key(w, "task");
    arb_jw_int(w, a->task);
    arb_jw_key(w, "ntasks");
    arb_jw_int(w, a->ntasks);
    arb_jw_key(w, "attempt");
    arb_jw_int(w, (int64_t)a->attempt);
    arb_jw_key(w, "epoch");
    arb_jw_int(w, (int64_t)a->epoch);
    arb_jw_key(w, "gpus");
    arb_jw_arr(w);
    for (int g = 0; g < ARB_MAX_GPUS; g++)
        if (a->gpus & (1u << g))
            arb_jw_int(w, g);
    arb_jw_arr_end(w);
    arb_jw_key(w, "gpu_milli");
    arb_jw_int(w, a->gpu_milli);
    arb_jw_key(w, "gpu_memory_mib");
    arb_jw_int(w, a->gpu_memory_mib);
    arb_jw_key(w, "command");
    arb_jw_arr(w);
    for (int i = 0; i < a->ncommand; i++)
        arb_jw_str(w, a->command[i]);
    arb_jw_arr_end(w);
    arb_jw_key(w, "env");
    arb_jw_obj(w);
    for (int i = 0; i < a->nenv; i++) { /* keys unique (env_set, src/state/codec.c) */
        arb_jw_key(w, a->env[i].key);
        arb_jw_str(w, a->env[i].value);
    }
    arb_jw_obj_end(w);
    arb_jw_key(w, "state");
    arb_jw_str(w, a->state);
    arb_jw_key(w, "stop");
    arb_jw_bool(w, a->stop);
    if (a->cpu[0]) {
        arb_jw_key(w, "cpu");
        arb_jw_str(w, a->cpu);
    }
    if (a->memory[0]) {
        arb_jw_key(w, "memory");
        arb_jw_str(w, a->memory);
    }
    if (a->has_grace) {
        arb_jw_key(w, "grace_s");
        arb_jw_int(w, a->grace_s);
    }
    if (a->has_time_limit) {
        arb_jw_key(w, "time_limit_ms");
        arb_jw_int(w, a->time_limit_ms);
    }
    if (a->elastic) {
        arb_jw_key(w, "elastic");
        arb_jw_bool(w, true);
        arb_jw_key(w, "generation");
        arb_jw_int(w, (int64_t)a->generation);
        arb_jw_key(w, "hosts");
        arb_jw_arr(w);
        for (int i = 0; i < a->nhosts; i++)
            arb_jw_str(w, a->hosts[i]);
        arb_jw_arr_end(w);
    }
    if (a->gang) {
        arb_jw_key(w, "rank");
        arb_jw_int(w, a->rank);
        arb_jw_key(w, "world_size");
        arb_jw_int(w, a->world_size);
        arb_jw_key(w, "master_addr");
        arb_jw_str(w, a->master_addr);
        arb_jw_key(w, "master_port");
        arb_jw_int(w, a->master_port);
    }
    arb_jw_obj_end(w);
}

static void list_write(arb_jw_t *w, const st_assign_list_t *l)
{
    arb_jw_arr(w);
    for (int i = 0; i < l->n; i++)
        assignment_write(w, &l->v[i]);
    arb_jw_arr_end(w);
}

int api_report_reply_write(arb_buf_t *b, const st_report_reply_t *r)
{
    arb_jw_t w;

    arb_jw_begin(&w, b);
    arb_jw_obj(&w);
    arb_jw_key(&w, "node");
    arb_jw_str(&w, r->node);
    arb_jw_key(&w, "lamport");
    arb_jw_int(&w, (int64_t)r->lamport);
    arb_jw_key(&w, "epoch");
    arb_jw_int(&w, (int64_t)r->epoch);
    arb_jw_key(&w, "lease_ms");
    arb_jw_int(&w, (int64_t)r->lease_ms);
    switch (r->kind) {
    case ST_REPORT_APPLIED:
        arb_jw_key(&w, "version");
        arb_jw_int(&w, (int64_t)r->version);
        arb_jw_key(&w, "assignments_version");
        arb_jw_int(&w, (int64_t)r->assigned.version);
        arb_jw_key(&w, "assignments");
        list_write(&w, &r->assigned);
        break;
    case ST_REPORT_STALE:
    case ST_REPORT_LOST:
        arb_jw_key(&w, r->kind == ST_REPORT_STALE ? "stale" : "lost");
        arb_jw_bool(&w, true);
        arb_jw_key(&w, "message");
        arb_jw_str(&w, r->message);
        if (r->kind == ST_REPORT_STALE && r->reregister) {
            arb_jw_key(&w, "register");
            arb_jw_bool(&w, true);
            arb_jw_key(&w, "incarnation");
            arb_jw_int(&w, r->incarnation);
        }
        break;
    default:
        w.err = -EINVAL;
    }
    arb_jw_obj_end(&w);
    return arb_jw_end(&w);
}

json_t *api_report_reply_json(const st_report_reply_t *r)
{
    arb_buf_t b = {0};
    json_t *o = api_report_reply_write(&b, r) == 0 ? json_loadb(b.p, b.len, 0, NULL) : NULL;

    arb_buf_free(&b);
    return o;
}

int api_assignments_write(arb_buf_t *b, const char *node, uint64_t lamport, uint64_t epoch,
                          const st_assign_list_t *l)
{
    arb_jw_t w;

    arb_jw_begin(&w, b);
    arb_jw_obj(&w);
    arb_jw_key(&w, "node");
    arb_jw_str(&w, node);
    arb_jw_key(&w, "lamport");
    arb_jw_int(&w, (int64_t)lamport);
    arb_jw_key(&w, "epoch");
    arb_jw_int(&w, (int64_t)epoch);
    arb_jw_key(&w, "assignments_version");
    arb_jw_int(&w, (int64_t)l->version);
    arb_jw_key(&w, "assignments");
    list_write(&w, l);
    arb_jw_obj_end(&w);
    return arb_jw_end(&w);
}

json_t *api_assignments_json(const char *node, uint64_t lamport, uint64_t epoch,
                             const st_assign_list_t *l)
{
    arb_buf_t b = {0};
    json_t *o = api_assignments_write(&b, node, lamport, epoch, l) == 0
                    ? json_loadb(b.p, b.len, 0, NULL)
                    : NULL;

    arb_buf_free(&b);
    return o;
}

int api_node_report_text(st_t *s, const st_who_t *who, const char *name, int64_t if_match,
                         const json_t *body, char **text, size_t *len, json_t **out,
                         int64_t *ticket, arb_err_t *err)
{
    st_report_t rep;
    st_report_reply_t v = {0};
    arb_buf_t b = {0};

    *out = NULL;
    *ticket = 0;
    if (text) {
        *text = NULL;
        *len = 0;
    }
    /* The name first, as the state checks it: its message before the body's. */
    int rc = st_node_name_check(name, err);
    if (rc == 0 && (rc = api_report_decode(body, &rep, err)) == 0) {
        rc = st_node_report_if(s, who, name, if_match, &rep, &v, ticket, err);
        api_report_free(&rep);
    }
    if (rc == 0 && text) {
        (void)arb_buf_reserve(&b, 1024);
        if (api_report_reply_write(&b, &v) < 0 || arb_buf_putc(&b, '\n') < 0) {
            rc = arb_errf(err, -ENOMEM, "out of memory encoding the reply to node '%s'", name);
        } else {
            *len = b.len;
            *text = arb_buf_take(&b);
        }
    } else if (rc == 0 && !(*out = api_report_reply_json(&v))) {
        rc = arb_errf(err, -ENOMEM, "out of memory encoding the reply to node '%s'", name);
    } else if (rc == -ERANGE) { /* a Lamport time too far ahead: the refusal carries the clock */
        *out = json_pack("{s:I}", "lamport", (json_int_t)v.lamport);
    }
    st_report_reply_free(&v);
    arb_buf_free(&b);
    return rc;
}

int api_node_report(st_t *s, const st_who_t *who, const char *name, int64_t if_match,
                    const json_t *body, json_t **out, int64_t *ticket, arb_err_t *err)
{
    return api_node_report_text(s, who, name, if_match, body, NULL, NULL, out, ticket, err);
}

int api_node_assignments(st_t *s, const char *name, int64_t epoch, uint64_t have, bool *same,
                         uint32_t *key, char **text, size_t *len, int64_t *ticket, arb_err_t *err)
{
    st_assign_list_t l;
    uint64_t lamport = 0, cur = 0;
    arb_buf_t b = {0};
    int rc =
        st_node_assignments_wait(s, name, epoch, have, same, key, &l, &lamport, &cur, ticket, err);

    *text = NULL;
    *len = 0;
    if (rc == 0) {
        (void)arb_buf_reserve(&b, 1024);
        if (api_assignments_write(&b, name, lamport, cur, &l) < 0 || arb_buf_putc(&b, '\n') < 0) {
            rc = arb_errf(err, -ENOMEM, "out of memory encoding node '%s''s assignments", name);
        } else {
            *len = b.len;
            *text = arb_buf_take(&b);
        }
    }
    st_assign_list_free(&l);
    arb_buf_free(&b);
    return rc;
}
