/*
 * report.c: the node report body and the controller's reply, in the wire
 * format of docs/api.md (see report.h).
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/report.h"

/* ---- the report ------------------------------------------------------------------ */

const char *agent_task_wire_state(const agent_task_t *t)
{
    if (t->state != AGENT_TASK_EXITED)
        return "running";
    /* Fenced: killed because this node lost its lease, not for anything the
     * task did; the controller may run it elsewhere. */
    if (!strcmp(t->reason, "lost") || !strcmp(t->reason, "fenced"))
        return "lost";
    return t->exit_code == 0 && t->signal == 0 ? "succeeded" : "failed";
}

static int set(json_t *o, const char *k, json_t *v)
{
    return v ? json_object_set_new(o, k, v) : -1;
}

static json_t *qty(int64_t v, arb_qty_kind_t kind)
{
    char buf[48];
    arb_qty_format(v, kind, buf, sizeof buf);
    return json_string(buf);
}

/* A job id on the wire: the controller's ids are integers. */
static json_t *job_id(const char *job)
{
    char *end;
    unsigned long long v = strtoull(job, &end, 10);

    if (isdigit((unsigned char)job[0]) && !*end && v > 0 && v <= INT64_MAX)
        return json_integer((json_int_t)v);
    return json_string(job);
}

static json_t *inventory(const agent_inv_t *inv)
{
    json_t *o = json_object(), *labels = json_object(), *gpus = json_array();
    int bad = 0;

    if (!o || !labels || !gpus) {
        json_decref(o), json_decref(labels), json_decref(gpus);
        return NULL;
    }
    bad |= set(o, "cpu", qty((int64_t)inv->cpus * 1000, ARB_QTY_MILLI));
    bad |= set(o, "memory", qty(inv->mem_bytes, ARB_QTY_BYTES));
    for (int i = 0; i < inv->nlabels; i++)
        bad |= set(labels, inv->labels[i].key, json_string(inv->labels[i].val));
    bad |= set(o, "labels", labels);
    if (inv->ntaints) {
        json_t *t = json_array();
        for (int i = 0; t && i < inv->ntaints; i++)
            bad |= json_array_append_new(t, json_pack("{s:s,s:s,s:s}", "key", inv->taints[i].key,
                                                      "value", inv->taints[i].val, "effect",
                                                      inv->taints[i].effect));
        bad |= set(o, "taints", t);
    }
    if (inv->ndatasets) {
        json_t *d = json_array();
        for (int i = 0; d && i < inv->ndatasets; i++)
            bad |= json_array_append_new(d, json_string(inv->datasets[i]));
        bad |= set(o, "datasets", d);
    }
    for (int i = 0; i < inv->ngpus; i++) {
        const agent_gpu_info_t *g = &inv->gpu[i];
        char mem[32];
        json_t *e;
        snprintf(mem, sizeof mem, "%" PRId32 "Mi", g->mem_mib);
        e = json_pack("{s:s,s:s,s:i,s:i,s:i}", "model", g->model, "memory", mem, "nvlink",
                      g->nvlink, "pcie", g->pcie, "numa", g->numa);
        if (e && g->uuid[0])
            bad |= set(e, "uuid", json_string(g->uuid));
        bad |= e ? json_array_append_new(gpus, e) : -1;
    }
    bad |= set(o, "gpus", gpus);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *inventory_in(const agent_report_in_t *in)
{
    json_t *o = inventory(in->inv);
    int bad = 0;

    if (o && in->address && in->address[0])
        bad |= set(o, "address", json_string(in->address));
    if (o && in->hostname && in->hostname[0])
        bad |= set(o, "hostname", json_string(in->hostname));
    if (o && in->log_dir && in->log_dir[0])
        bad |= set(o, "log_dir", json_string(in->log_dir));
    if (o && in->logs_url && in->logs_url[0])
        bad |= set(o, "logs_url", json_string(in->logs_url));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *telemetry(const agent_tel_sample_t *s)
{
    json_t *o = json_object(), *gpus = json_array();
    int bad = 0;

    if (!o || !gpus) {
        json_decref(o), json_decref(gpus);
        return NULL;
    }
    if (s->cpu_util_pct >= 0)
        bad |= set(o, "cpu_util", json_real(s->cpu_util_pct / 100.0));
    if (s->mem_total_bytes >= 0 && s->mem_available_bytes >= 0)
        bad |= set(o, "memory_used",
                   qty(s->mem_total_bytes > s->mem_available_bytes
                           ? s->mem_total_bytes - s->mem_available_bytes
                           : 0,
                       ARB_QTY_BYTES));
    if (s->net_rx_bps >= 0)
        bad |= set(o, "net_rx_bps", json_real(s->net_rx_bps));
    if (s->net_tx_bps >= 0)
        bad |= set(o, "net_tx_bps", json_real(s->net_tx_bps));
    if (s->disk_read_bps >= 0)
        bad |= set(o, "disk_read_bps", json_real(s->disk_read_bps));
    if (s->disk_write_bps >= 0)
        bad |= set(o, "disk_write_bps", json_real(s->disk_write_bps));
    for (int i = 0; i < s->ngpus; i++) {
        const agent_gpu_sample_t *g = &s->gpu[i];
        json_t *e = json_pack("{s:i,s:b}", "index", i, "healthy", !g->unhealthy);
        if (e && g->util_pct >= 0)
            bad |= set(e, "util", json_integer(g->util_pct));
        if (e && g->mem_used_mib >= 0)
            bad |= set(e, "memory_used_mib", json_integer(g->mem_used_mib));
        if (e && g->temp_c >= 0)
            bad |= set(e, "temp_c", json_integer(g->temp_c));
        bad |= e ? json_array_append_new(gpus, e) : -1;
    }
    bad |= set(o, "gpus", gpus);
    if (s->has_queue_len)
        bad |= set(o, "queue_length", json_integer(s->queue_len));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *tasks(const agent_exec_t *x)
{
    json_t *a = json_array();

    for (int i = 0; a && i < x->ntasks; i++) {
        const agent_task_t *t = x->tasks[i];
        json_t *e = json_pack("{s:o,s:i,s:I,s:s}", "job", job_id(t->job), "task", t->task,
                              "attempt", (json_int_t)t->attempt, "state", agent_task_wire_state(t));
        if (e && t->state == AGENT_TASK_EXITED && (t->exit_code >= 0 || t->signal > 0))
            set(e, "exit_code", json_integer(t->exit_code >= 0 ? t->exit_code : 128 + t->signal));
        /* Who fenced it: the agent itself, or its supervisor because the
         * lease passed while the agent did not run. */
        if (e && t->state == AGENT_TASK_EXITED && !strcmp(t->reason, "fenced"))
            set(e, "fenced_by", json_string(t->fenced_by_sup ? "supervisor" : "agent"));
        if (!e || json_array_append_new(a, e) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *agent_report_build(const agent_report_in_t *in)
{
    json_t *o = json_pack("{s:I}", "lamport", (json_int_t)in->lamport);
    int bad = !o;

    if (o && in->incarnation > 0)
        bad |= set(o, "incarnation", json_integer((json_int_t)in->incarnation));
    if (o && in->inv)
        bad |= set(o, "inventory", inventory_in(in));
    if (o && in->tel)
        bad |= set(o, "telemetry", telemetry(in->tel));
    if (o && in->exec)
        bad |= set(o, "tasks", tasks(in->exec));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *agent_report_json(const agent_report_in_t *in)
{
    json_t *o = agent_report_build(in);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

    json_decref(o);
    return s;
}

/* ---- the reply -------------------------------------------------------------------- */

void agent_reply_free(agent_reply_t *r)
{
    for (int i = 0; i < r->nassign; i++) {
        for (int k = 0; r->assign[i].argv && r->assign[i].argv[k]; k++)
            free(r->assign[i].argv[k]);
        for (int k = 0; r->assign[i].env && r->assign[i].env[k]; k++)
            free(r->assign[i].env[k]);
        free(r->assign[i].argv);
        free(r->assign[i].env);
    }
    free(r->assign);
    memset(r, 0, sizeof *r);
}

/* An integer member in lo..hi; absent is allowed when !need. */
static int get_int(json_t *o, const char *key, const char *path, int64_t lo, int64_t hi, bool need,
                   int64_t *out, arb_err_t *err)
{
    json_t *v = json_object_get(o, key);

    if (!v) {
        if (need)
            return arb_errf(err, -EINVAL, "reply: %s%s%s: missing", path, path[0] ? "." : "", key);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return arb_errf(err, -EINVAL, "reply: %s%s%s: expected an integer %lld..%lld", path,
                        path[0] ? "." : "", key, (long long)lo, (long long)hi);
    *out = json_integer_value(v);
    return 0;
}

static int get_qty(json_t *o, const char *key, const char *path, arb_qty_kind_t kind, int64_t *out,
                   arb_err_t *err)
{
    json_t *v = json_object_get(o, key);
    char field[128];

    if (!v)
        return 0;
    snprintf(field, sizeof field, "%s.%s", path, key);
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return arb_qty_parse(buf, kind, field, out, err) < 0 ? -EINVAL : 0;
    }
    if (!json_is_string(v))
        return arb_errf(err, -EINVAL, "reply: %s: expected a quantity", field);
    return arb_qty_parse(json_string_value(v), kind, field, out, err) < 0 ? -EINVAL : 0;
}

/* A NULL-terminated copy of the strings of array a (or "K=V" of object o). */
static int str_vec(json_t *v, bool kv, const char *path, char ***out, arb_err_t *err)
{
    size_t n = !v ? 0 : kv ? json_object_size(v) : json_array_size(v), i = 0;
    char **vec = calloc(n + 1, sizeof *vec);

    if (!vec)
        return arb_errf(err, -ENOMEM, "out of memory");
    *out = vec;
    if (!v)
        return 0;
    if (kv) {
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val)
        {
            if (!json_is_string(val) || !k[0] || strchr(k, '='))
                return arb_errf(err, -EINVAL,
                                "reply: %s.%s: expected a string value and a "
                                "key without '='",
                                path, k);
            if (!(vec[i] = malloc(strlen(k) + json_string_length(val) + 2)))
                return arb_errf(err, -ENOMEM, "out of memory");
            sprintf(vec[i++], "%s=%s", k, json_string_value(val));
        }
    } else {
        json_t *val;
        size_t k;
        json_array_foreach(v, k, val)
        {
            if (!json_is_string(val) ||
                memchr(json_string_value(val), 0, json_string_length(val)) != NULL)
                return arb_errf(err, -EINVAL, "reply: %s[%zu]: expected a string", path, k);
            if (!(vec[i++] = strdup(json_string_value(val))))
                return arb_errf(err, -ENOMEM, "out of memory");
        }
    }
    return 0;
}

static int parse_one(json_t *v, const char *path, agent_assignment_t *a, arb_err_t *err)
{
    int64_t job = 0, task = 0, attempt = 0, epoch = 0, ntasks = 1;
    json_t *g, *stop, *name;
    size_t i;
    int rc;

    if (!json_is_object(v))
        return arb_errf(err, -EINVAL, "reply: %s: expected an object", path);
    if ((rc = get_int(v, "job", path, 1, INT64_MAX, true, &job, err)) < 0 ||
        (rc = get_int(v, "task", path, 0, INT32_MAX, true, &task, err)) < 0 ||
        (rc = get_int(v, "attempt", path, 0, INT64_MAX, false, &attempt, err)) < 0 ||
        (rc = get_int(v, "epoch", path, 0, INT64_MAX, true, &epoch, err)) < 0 ||
        (rc = get_int(v, "ntasks", path, 1, INT32_MAX, false, &ntasks, err)) < 0 ||
        (rc = get_qty(v, "cpu", path, ARB_QTY_MILLI, &a->cpu_milli, err)) < 0 ||
        (rc = get_qty(v, "memory", path, ARB_QTY_BYTES, &a->mem_bytes, err)) < 0)
        return rc;
    snprintf(a->ref.job, sizeof a->ref.job, "%lld", (long long)job);
    a->ref.task = (int)task;
    a->ref.attempt = (uint64_t)attempt;
    a->ref.epoch = (uint64_t)epoch;
    a->ntasks = (int)ntasks;
    stop = json_object_get(v, "stop");
    if (stop && !json_is_boolean(stop))
        return arb_errf(err, -EINVAL, "reply: %s.stop: expected true or false", path);
    a->ref.stop = json_is_true(stop);
    name = json_object_get(v, "name");
    if (json_is_string(name))
        snprintf(a->name, sizeof a->name, "%s", json_string_value(name));
    {
        int64_t rank = 0, world = 0, port = 0;
        json_t *ma = json_object_get(v, "master_addr");
        if ((rc = get_int(v, "rank", path, 0, 65535, false, &rank, err)) < 0 ||
            (rc = get_int(v, "world_size", path, 0, 65536, false, &world, err)) < 0 ||
            (rc = get_int(v, "master_port", path, 1, 65535, false, &port, err)) < 0)
            return rc;
        if (ma && (!json_is_string(ma) || json_string_length(ma) == 0 ||
                   json_string_length(ma) >= sizeof a->master_addr))
            return arb_errf(err, -EINVAL, "reply: %s.master_addr: expected a host (1..%zu bytes)",
                            path, sizeof a->master_addr - 1);
        if (world > 1 && (rank >= world || !ma || !port))
            return arb_errf(err, -EINVAL,
                            "reply: %s: a gang member needs rank < world_size, master_addr and "
                            "master_port",
                            path);
        if (world > 1) {
            a->rank = (int)rank;
            a->world_size = (int)world;
            a->master_port = (int)port;
            snprintf(a->master_addr, sizeof a->master_addr, "%s", json_string_value(ma));
        }
    }
    {
        int64_t grace = -1, gen = 0, rank = 0, world = 0;
        json_t *el = json_object_get(v, "elastic"), *hosts = json_object_get(v, "hosts"), *h;
        size_t k, used = 0;
        if ((rc = get_int(v, "grace_s", path, 0, 3600, false, &grace, err)) < 0 ||
            (rc = get_int(v, "generation", path, 0, UINT32_MAX, false, &gen, err)) < 0)
            return rc;
        if (el && !json_is_boolean(el))
            return arb_errf(err, -EINVAL, "reply: %s.elastic: expected true or false", path);
        a->grace_ns = grace >= 0 ? grace * 1000000000LL : -1;
        int64_t lim = -1;
        if ((rc = get_int(v, "time_limit_ms", path, 0, INT64_MAX / 1000000, false, &lim, err)) < 0)
            return rc;
        a->limit_ns = json_object_get(v, "time_limit_ms") ? lim * 1000000 : -1;
        a->elastic = json_is_true(el);
        a->generation = (uint32_t)gen;
        if (hosts && !json_is_array(hosts))
            return arb_errf(err, -EINVAL, "reply: %s.hosts: expected a list of host names", path);
        json_array_foreach(hosts, k, h)
        {
            if (!json_is_string(h) || strchr(json_string_value(h), ',') ||
                strchr(json_string_value(h), '\n'))
                return arb_errf(err, -EINVAL, "reply: %s.hosts[%zu]: expected a host name", path,
                                k);
            if (used + json_string_length(h) + 2 >= sizeof a->hosts)
                used = sizeof a->hosts; /* too long for the notice: it says none */
            else
                used += (size_t)snprintf(a->hosts + used, sizeof a->hosts - used, "%s%s",
                                         k ? "," : "", json_string_value(h));
        }
        if (used >= sizeof a->hosts)
            a->hosts[0] = '\0';
        if (a->elastic) { /* a world of one is a world too */
            get_int(v, "rank", path, 0, 65535, false, &rank, NULL);
            get_int(v, "world_size", path, 0, 65536, false, &world, NULL);
            if (world < 1 || rank >= world)
                return arb_errf(err, -EINVAL, "reply: %s: an elastic task needs rank < world_size",
                                path);
            a->rank = (int)rank;
            a->world_size = (int)world;
            if (!a->master_addr[0] && json_is_string(json_object_get(v, "master_addr"))) {
                int64_t port = 0;
                get_int(v, "master_port", path, 1, 65535, false, &port, NULL);
                snprintf(a->master_addr, sizeof a->master_addr, "%s",
                         json_string_value(json_object_get(v, "master_addr")));
                a->master_port = (int)port;
            }
        }
    }
    g = json_object_get(v, "gpus");
    if (g && (!json_is_array(g) || json_array_size(g) > ARB_MAX_GPUS))
        return arb_errf(err, -EINVAL, "reply: %s.gpus: expected a list of at most %d GPU indices",
                        path, ARB_MAX_GPUS);
    json_array_foreach(g, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= ARB_MAX_GPUS)
            return arb_errf(err, -EINVAL, "reply: %s.gpus[%zu]: expected a GPU index 0..%d", path,
                            i, ARB_MAX_GPUS - 1);
        a->gpus[a->ngpus++] = (int)json_integer_value(v);
    }
    return 0;
}

int agent_reply_parse(const char *text, size_t len, agent_reply_t *out, arb_err_t *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je), *arr, *v;
    agent_reply_t r;
    int64_t lamport = 0, epoch = 0;
    size_t i;
    int rc = 0;

    memset(&r, 0, sizeof r);
    if (!root)
        return arb_errf(err, -EINVAL, "reply:%d:%d: not JSON: %s", je.line, je.column, je.text);
    if (!json_is_object(root)) {
        rc = arb_errf(err, -EINVAL, "reply: expected an object");
        goto out;
    }
    if ((rc = get_int(root, "lamport", "", 0, INT64_MAX, false, &lamport, err)) < 0 ||
        (rc = get_int(root, "epoch", "", 0, INT64_MAX, true, &epoch, err)) < 0)
        goto out;
    {
        int64_t lease_ms = 0, ver = 0;
        json_t *lost = json_object_get(root, "lost"), *msg = json_object_get(root, "message");
        if ((rc = get_int(root, "lease_ms", "", 0, INT64_MAX / 1000000, false, &lease_ms, err)) < 0)
            goto out;
        if (lost && !json_is_boolean(lost)) {
            rc = arb_errf(err, -EINVAL, "reply: lost: expected true or false");
            goto out;
        }
        if ((rc = get_int(root, "assignments_version", "", 0, INT64_MAX, false, &ver, err)) < 0)
            goto out;
        r.version = (uint64_t)ver;
        r.lease_ns = lease_ms * 1000000;
        r.lost = json_is_true(lost);
        r.stale = json_is_true(json_object_get(root, "stale"));
        r.reregister = r.stale && json_is_true(json_object_get(root, "register"));
        if (r.reregister &&
            (rc = get_int(root, "incarnation", "", 0, INT64_MAX, false, &r.incarnation, err)) < 0)
            goto out;
        if (json_is_string(msg))
            snprintf(r.message, sizeof r.message, "%s", json_string_value(msg));
    }
    r.lamport = (uint64_t)lamport;
    r.epoch = (uint64_t)epoch;
    arr = json_object_get(root, "assignments");
    if (arr && !json_is_array(arr)) {
        rc = arb_errf(err, -EINVAL, "reply: assignments: expected a list");
        goto out;
    }
    if (arr) {
        r.have_assignments = true;
        r.assign = calloc(json_array_size(arr) + 1, sizeof *r.assign);
        if (!r.assign) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
            goto out;
        }
        json_array_foreach(arr, i, v)
        {
            char path[48];
            agent_assignment_t *a = &r.assign[r.nassign++];
            json_t *cmd = json_is_object(v) ? json_object_get(v, "command") : NULL;
            json_t *env = json_is_object(v) ? json_object_get(v, "env") : NULL;
            snprintf(path, sizeof path, "assignments[%zu]", i);
            if ((rc = parse_one(v, path, a, err)) < 0)
                goto out;
            if (cmd && !json_is_array(cmd)) {
                rc = arb_errf(err, -EINVAL, "reply: %s.command: expected a list of strings", path);
                goto out;
            }
            if (env && !json_is_object(env)) {
                rc = arb_errf(err, -EINVAL, "reply: %s.env: expected an object of strings", path);
                goto out;
            }
            snprintf(path + strlen(path), sizeof path - strlen(path), ".command");
            if ((rc = str_vec(cmd, false, path, &a->argv, err)) < 0)
                goto out;
            path[strlen(path) - strlen(".command")] = '\0';
            snprintf(path + strlen(path), sizeof path - strlen(path), ".env");
            if ((rc = str_vec(env, true, path, &a->env, err)) < 0)
                goto out;
        }
    }
    *out = r;
    memset(&r, 0, sizeof r);
out:
    agent_reply_free(&r);
    json_decref(root);
    return rc;
}
