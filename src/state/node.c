/*
 * node.c: nodes in the resource manager: agents' reports (inventory,
 * telemetry, task states, Lamport time), drain and undrain, the node list,
 * and the assignments an agent fetches.
 *
 * A report is validated whole before anything changes (invariant 6). The
 * first report must carry the node's inventory; later ones carry it again
 * only when it changed, which is allowed only while no task is allocated
 * there (the core cannot shrink a node under its allocations). Telemetry
 * and report times are volatile: they are not written to the store, and a
 * restarted controller grants every node a fresh lease.
 *
 * Order: an agent ticks its Lamport clock for every report and sends one
 * at a time, so a report whose "lamport" is older than the last applied
 * one from its node (and carries no inventory) is one its agent gave up on
 * that arrived late; it is refused (-ESTALE) and changes nothing. (The
 * same time again is let through: a resend of the same body.)
 *
 * Leases (liveness.c): a node silent past nodes.lease goes NotReady, past
 * lease + grace it is lost and its tasks with it. A lost node's agent has
 * fenced itself; its next report without an inventory is answered
 * {"lost": true} (so does a report from a node the controller does not
 * know), and the agent registers again with its inventory. Every reply
 * carries the lease (lease_ms) so that the agent's lease is never longer
 * than the controller's.
 *
 * Replays: with several controllers (or a retry after a timeout) a report
 * may arrive after a newer one from the same agent was applied: a report
 * that timed out on one controller is re-sent to the next, while the first
 * copy still waits in a queue. An agent's Lamport time grows with every
 * report, so a report without inventory whose "lamport" is below the last
 * one applied for its node is a replay: nothing of it is applied (its task
 * list would end tasks started since), the clock does not move, and it is
 * answered 200 with "stale": true and no assignments (the agent, if it
 * still listens, gets them with its next report). The same report re-sent
 * (equal Lamport time) is applied again, harmlessly. A registration (with
 * inventory) is always applied: a restarted agent's clock starts again; a
 * report without "lamport" (a client that keeps no clock) is never taken
 * for a replay.
 * The last Lamport time is volatile: a new leader accepts each node's next
 * report.
 *
 * Lives: an agent that restarts without its state starts its Lamport clock
 * again, so a late copy of a report from its previous life may carry a
 * time above the new life's and would be applied: its task list, from
 * before the new life's tasks, would make the controller take a running
 * task for gone and start it elsewhere while it runs (two copies). An
 * agent therefore sends an "incarnation" with every report, one number per
 * life, larger for each new life (its start time in ms, or one more than
 * the last it was told). The controller keeps the incarnation of the last
 * registration it applied for each node; Lamport order holds within one
 * incarnation, registrations included (a late copy of this life's own
 * registration lists none of the tasks it started since). A report of an older incarnation is from
 * a previous life (or from an agent whose clock stepped back): nothing of it is applied, and the
 * reply ({"stale": true, "register": true, "incarnation": I}) tells a live sender to take an
 * incarnation above I and register again. A report without inventory of a newer incarnation, or of
 * any incarnation when the controller knows none (after its own restart: incarnations are
 * volatile), is not applied either: its agent registers again (with its inventory and the tasks it
 * runs: nothing is fenced), and that registration is applied. Reports without "incarnation" keep
 * the rules above.
 *
 * The body (docs/api.md has the full reference) comes decoded and checked
 * by the API (src/api/enc_report.c) as an st_report_t: the Lamport time,
 * the task states, what of the telemetry the scheduler reads, and the
 * inventory and telemetry as the agent sent them (JSON text: the inventory
 * is checked here, as recovery checks stored ones, and both are kept as
 * they came). The reply, and the assignments long poll's list, are typed
 * (st_report_reply_t, st_assign_list_t: codec.c's st_task_assignment
 * builds each entry), encoded by the API.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/jv.h"
#include "state/state_int.h"

static const char *const inv_keys[] = {"cpu",      "memory",   "labels",   "taints",
                                       "datasets", "extended", "gpus",     "address",
                                       "hostname", "log_dir",  "logs_url", NULL};
static const char *const gpu_keys[] = {"model", "memory", "nvlink", "pcie", "numa", "uuid", NULL};
static const char *const taint_keys[] = {"key", "value", "effect", NULL};
static uint64_t list_version(const st_assign_list_t *l);

st_node_t *st_node_ext(st_t *s, const arb_node_t *n)
{
    return &s->nodes[n->id];
}

int st_nodes_grow(st_t *s)
{
    if (s->cluster.nnodes + 1 <= s->capnodes)
        return 0;
    uint32_t cap = s->capnodes ? s->capnodes * 2 : 64;
    st_node_t *v = realloc(s->nodes, cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    memset(v + s->capnodes, 0, (cap - s->capnodes) * sizeof *v);
    s->nodes = v;
    s->capnodes = cap;
    return 0;
}

void st_node_save(st_t *s, arb_node_t *n)
{
    char key[300];
    char *rec;

    st_node_ext(s, n)->version++;
    rec = st_node_record(s, n);
    if (!rec)
        return;
    snprintf(key, sizeof key, "nodes/%s", arb_node_name(&s->cluster, n));
    store_batch_putstr(&s->batch, key, rec);
    free(rec);
}

/* ---- inventory ------------------------------------------------------------------- */

static int str_map(const json_t *inv, const char *key, const char *path, arb_err_t *err)
{
    json_t *m;
    const char *k;
    json_t *v;
    char p[JV_PATH], buf[256];
    int rc = jv_member(inv, key, path, JSON_OBJECT, &m, err);

    if (rc < 0 || !m)
        return rc;
    jv_path_key(p, path, key);
    json_object_foreach(m, k, v)
    {
        if (!k[0] || strlen(k) >= 256)
            return arb_errf(err, -EINVAL, "%s: keys must be 1..255 bytes", p);
        if ((rc = jv_str(m, k, p, buf, sizeof buf, err)) < 0)
            return rc;
        if (!json_is_string(v))
            return arb_errf(err, -EINVAL, "%s.%s: expected a string", p, k);
    }
    return 0;
}

int st_inventory_check(const json_t *inv, arb_err_t *err)
{
    const char *path = "inventory";
    char p[JV_PATH], q[JV_PATH], buf[256];
    int64_t x;
    json_t *a, *m, *v;
    const char *k;
    size_t i;
    int rc;

    if ((rc = jv_object(inv, path, inv_keys, err)) < 0 ||
        (rc = jv_qty(inv, "cpu", path, ARB_QTY_MILLI, &x, err)) < 0 ||
        (rc = jv_qty(inv, "memory", path, ARB_QTY_BYTES, &x, err)) < 0 ||
        (rc = str_map(inv, "labels", path, err)) < 0 ||
        (rc = jv_str(inv, "address", path, buf, 64, err)) < 0 ||
        (rc = jv_str(inv, "hostname", path, buf, 256, err)) < 0)
        return rc;
    {
        char dirbuf[4096];
        if ((rc = jv_str(inv, "log_dir", path, dirbuf, sizeof dirbuf, err)) < 0)
            return rc;
        /* where the agent serves its task logs (src/agent/logserve.c) */
        if ((rc = jv_str(inv, "logs_url", path, dirbuf, 512, err)) < 0)
            return rc;
        const char *u = json_string_value(json_object_get(inv, "logs_url"));
        if (u && strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
            return arb_errf(err, -EINVAL, "%s.logs_url: '%.100s' is not an http:// or https:// URL",
                            path, u);
    }
    if ((rc = jv_member(inv, "gpus", path, JSON_ARRAY, &a, err)) < 0)
        return rc;
    jv_path_key(p, path, "gpus");
    if (a && json_array_size(a) > ARB_MAX_GPUS)
        return arb_errf(err, -EINVAL, "%s: %zu GPUs; a node has at most %d", p, json_array_size(a),
                        ARB_MAX_GPUS);
    json_array_foreach(a, i, v)
    {
        jv_path_idx(q, p, i);
        if ((rc = jv_object(v, q, gpu_keys, err)) < 0 ||
            (rc = jv_str(v, "model", q, buf, 64, err)) < 0 ||
            (rc = jv_str(v, "uuid", q, buf, 128, err)) < 0 ||
            (rc = jv_qty(v, "memory", q, ARB_QTY_MIB, &x, err)) < 0 ||
            (rc = jv_int(v, "nvlink", q, -1, 255, &x, err)) < 0 ||
            (rc = jv_int(v, "pcie", q, -1, 255, &x, err)) < 0 ||
            (rc = jv_int(v, "numa", q, -1, 255, &x, err)) < 0)
            return rc;
        if (x > INT32_MAX)
            return arb_errf(err, -EINVAL, "%s.memory: too large", q);
    }
    if ((rc = jv_member(inv, "taints", path, JSON_ARRAY, &a, err)) < 0)
        return rc;
    jv_path_key(p, path, "taints");
    json_array_foreach(a, i, v)
    {
        jv_path_idx(q, p, i);
        buf[0] = '\0';
        if ((rc = jv_object(v, q, taint_keys, err)) < 0 ||
            (rc = jv_str(v, "key", q, buf, sizeof buf, err)) < 0)
            return rc;
        if (!buf[0])
            return arb_errf(err, -EINVAL, "%s.key: required", q);
        if ((rc = jv_str(v, "value", q, buf, sizeof buf, err)) < 0)
            return rc;
        buf[0] = '\0';
        if ((rc = jv_str(v, "effect", q, buf, sizeof buf, err)) < 0)
            return rc;
        if (!st_taint_effect(buf))
            return arb_errf(err, -EINVAL,
                            "%s.effect: '%s'; use NoSchedule, PreferNoSchedule or NoExecute", q,
                            buf);
    }
    if ((rc = jv_member(inv, "datasets", path, JSON_ARRAY, &a, err)) < 0)
        return rc;
    jv_path_key(p, path, "datasets");
    json_array_foreach(a, i, v)
    {
        jv_path_idx(q, p, i);
        if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > 255)
            return arb_errf(err, -EINVAL, "%s: expected a dataset name (a string)", q);
    }
    if ((rc = jv_member(inv, "extended", path, JSON_OBJECT, &m, err)) < 0)
        return rc;
    jv_path_key(p, path, "extended");
    if (m && json_object_size(m) > ARB_MAX_EXT)
        return arb_errf(err, -EINVAL, "%s: at most %d extended resources", p, ARB_MAX_EXT);
    json_object_foreach(m, k, v)
    {
        if (!strchr(k, '/') || strlen(k) >= ARB_EXT_NAME_MAX)
            return arb_errf(err, -EINVAL,
                            "%s: '%s' is not an extended resource name; use domain/name "
                            "(rdma/hca), under %d bytes",
                            p, k, ARB_EXT_NAME_MAX);
        if ((rc = jv_qty(m, k, p, ARB_QTY_COUNT, &x, err)) < 0)
            return rc;
    }
    return 0;
}

int st_node_apply_inventory(st_t *s, arb_node_t *n, const json_t *inv, arb_err_t *err)
{
    arb_cluster_t *c = &s->cluster;
    json_t *a, *m, *v;
    const char *k;
    size_t i;
    int rc = 0;

    n->ngpus = 0;
    memset(&n->cap, 0, sizeof n->cap);
    n->nlabels = n->ntaints = n->ndatasets = 0;
    n->rack = n->block = n->zone = 0;
    jv_qty(inv, "cpu", "", ARB_QTY_MILLI, &n->cap.cpu_milli, NULL);
    jv_qty(inv, "memory", "", ARB_QTY_BYTES, &n->cap.mem_bytes, NULL);
    a = json_object_get(inv, "gpus");
    json_array_foreach(a, i, v)
    {
        int64_t mem = 0, nv = -1, pc = -1, nu = -1;
        char model[64] = "";
        jv_str(v, "model", "", model, sizeof model, NULL);
        jv_qty(v, "memory", "", ARB_QTY_MIB, &mem, NULL);
        jv_int(v, "nvlink", "", -1, 255, &nv, NULL);
        jv_int(v, "pcie", "", -1, 255, &pc, NULL);
        jv_int(v, "numa", "", -1, 255, &nu, NULL);
        if ((rc = arb_node_add_gpu(c, n, model, (int32_t)mem, (int)nu, (int)pc, (int)nv, err)) < 0)
            return rc;
    }
    m = json_object_get(inv, "labels");
    json_object_foreach(m, k, v)
    {
        if (arb_node_add_label(c, n, k, json_string_value(v)) < 0) /* cleared above; keys unique */
            return arb_errf(err, -ENOMEM, "out of memory");
    }
    a = json_object_get(inv, "taints");
    json_array_foreach(a, i, v)
    {
        const char *eff = json_string_value(json_object_get(v, "effect"));
        const char *val = json_string_value(json_object_get(v, "value"));
        if (arb_node_add_taint(c, n, json_string_value(json_object_get(v, "key")), val ? val : "",
                               (arb_taint_effect_t)st_taint_effect(eff)) < 0)
            return arb_errf(err, -ENOMEM, "out of memory");
    }
    a = json_object_get(inv, "datasets");
    json_array_foreach(a, i, v)
    {
        if (arb_node_add_dataset(c, n, json_string_value(v)) < 0)
            return arb_errf(err, -ENOMEM, "out of memory");
    }
    m = json_object_get(inv, "extended");
    json_object_foreach(m, k, v)
    {
        int64_t x = 0;
        int ix = arb_extnames_index(&c->ext, k, true);
        if (ix < 0)
            return arb_errf(err, -ENOSPC,
                            "inventory.extended.%s: the cluster already has %d extended "
                            "resource names",
                            k, ARB_MAX_EXT);
        jv_qty(m, k, "", ARB_QTY_COUNT, &x, NULL);
        n->cap.ext[ix] = x;
    }
    arb_node_touch(c, n);
    return 0;
}

/* ---- reports ------------------------------------------------------------------------- */

/* Do two inventories offer the same resources (all but the agent's
 * address, host name, log directory and logs URL, and the labels, taints
 * and datasets, which change no capacity and may change under tasks)? */
static bool same_resources(const json_t *a, const json_t *b)
{
    static const char *const meta[] = {"address", "hostname", "log_dir",  "logs_url",
                                       "labels",  "taints",   "datasets", NULL};
    json_t *x = json_copy((json_t *)a), *y = json_copy((json_t *)b);
    bool eq;

    for (int i = 0; meta[i]; i++) {
        json_object_del(x, meta[i]);
        json_object_del(y, meta[i]);
    }
    eq = x && y && json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return eq;
}

/* ---- the per-node job index ------------------------------------------------------ */

static bool holds_on(const st_job_t *sj, uint32_t node)
{
    const arb_job_t *j = sj->j;

    if (sj->active_ix < 0 || (j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING))
        return false;
    for (int t = 0; t < j->nalloc; t++)
        if (j->alloc[t].node == node)
            return true;
    return false;
}

void st_node_index_job(st_t *s, st_job_t *sj)
{
    const arb_job_t *j = sj->j;

    for (int t = 0; t < j->nalloc; t++) {
        if (j->alloc[t].node == ARB_NO_NODE)
            continue;
        st_node_t *x = &s->nodes[j->alloc[t].node];
        int k = 0;
        while (k < x->nheld && x->held[k] != sj)
            k++;
        if (k < x->nheld)
            continue; /* already there (this attempt's other task, or an old entry) */
        if (x->nheld == x->capheld) {
            int cap = x->capheld ? x->capheld * 2 : 8;
            st_job_t **v = realloc(x->held, (size_t)cap * sizeof *v);
            if (!v) {
                s->held_oom = true; /* only slower: readers walk every active job */
                continue;
            }
            x->held = v;
            x->capheld = cap;
        }
        x->held[x->nheld++] = sj;
    }
}

/* The jobs that may hold allocations on n, in *out (borrowed, valid until
 * the next index change; callers still check each task's node); drops
 * stale entries. Every active job when the index could not grow. */
static int held_on(st_t *s, arb_node_t *n, st_job_t ***out)
{
    st_node_t *x = st_node_ext(s, n);

    if (s->held_oom) {
        *out = s->active;
        return s->nactive;
    }
    for (int k = 0; k < x->nheld;)
        if (holds_on(x->held[k], n->id))
            k++;
        else
            x->held[k] = x->held[--x->nheld];
    *out = x->held;
    return x->nheld;
}

/* Apply one task report from node n. Stale attempts and tasks not placed
 * on n are ignored (the agent learns from its assignments list). */
static void apply_task(st_t *s, arb_node_t *n, const st_report_task_t *v, uint64_t lam)
{
    st_job_t *sj = st_job_find(s, v->job);
    int64_t t = v->task;
    char why[160];
    arb_job_t *j;

    bool by = v->fenced_by != ST_FENCED_NONE, sup = v->fenced_by == ST_FENCED_SUPERVISOR;

    bool mine = sj && sj->active_ix >= 0 &&
                (sj->j->state == ARB_JOB_PLACED || sj->j->state == ARB_JOB_RUNNING) && t >= 0 &&
                t < sj->j->nalloc && sj->j->alloc[t].node == n->id &&
                (!v->has_attempt || v->attempt == sj->attempt);

    if (!mine) {
        /* Not (or no longer) a task of this node: a fenced one is what
         * really happened to an attempt the controller gave up on (the
         * node was lost): say how it ended. */
        if (by && sj)
            st_event(s, "task-fenced", sj->id, arb_node_name(&s->cluster, n),
                     "job %llu task %lld (attempt %lld) on node '%s' was killed by its %s when "
                     "the node's lease ran out unrenewed",
                     (unsigned long long)sj->id, (long long)t,
                     (long long)(v->has_attempt ? v->attempt : 0), arb_node_name(&s->cluster, n),
                     sup ? "supervisor" : "agent");
        return;
    }
    j = sj->j;
    st_task_t *tk = &sj->tasks[t];
    uint8_t to = v->state == ST_RT_RUNNING     ? TK_RUNNING
                 : v->state == ST_RT_SUCCEEDED ? TK_SUCCEEDED
                 : v->state == ST_RT_FAILED    ? TK_FAILED
                                               : TK_LOST;
    if (tk->state == to || tk->state >= TK_SUCCEEDED)
        return;
    sj->delivered = true;
    if (to == TK_LOST) { /* fenced: its node lost its lease */
        snprintf(why, sizeof why, "%s on node '%s' fenced it (the node lost its lease)",
                 sup ? "its supervisor" : "its agent", arb_node_name(&s->cluster, n));
        st_task_lost(s, sj, (int)t, why);
        return;
    }
    tk->state = to;
    if (v->has_exit) {
        tk->has_exit = true;
        tk->exit_code = v->exit_code;
    }
    if (to != TK_RUNNING) {
        if (tk->has_exit)
            snprintf(why, sizeof why, "task %lld %s (exit code %d)", (long long)t,
                     to == TK_SUCCEEDED ? "succeeded" : "failed", tk->exit_code);
        else
            snprintf(why, sizeof why, "task %lld %s", (long long)t,
                     to == TK_SUCCEEDED ? "succeeded" : "failed");
        st_job_settle(s, sj, why);
        if (sj->active_ix < 0 || (j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING))
            return; /* ended or requeued: saved */
    }
    int running = 0, ended = 0;
    for (int k = 0; k < j->nalloc; k++) {
        running += sj->tasks[k].state == TK_RUNNING;
        ended += sj->tasks[k].state >= TK_SUCCEEDED;
    }
    if (j->state == ARB_JOB_PLACED && running + ended == j->nalloc && running > 0) {
        arb_job_transition(j, ARB_JOB_RUNNING, NULL);
        sj->running_mono = st_now_ns(s); /* telemetry from before says nothing of its tasks */
        lam = st_event(s, "job-running", sj->id, arb_node_name(&s->cluster, n),
                       "job %llu '%s': all %d tasks running", (unsigned long long)sj->id, j->name,
                       j->nalloc);
    }
    st_job_save(s, sj, lam);
}

/*
 * What a node's report does not list. An agent lists every task it has
 * until the controller stops assigning it, so:
 *  - a task its agent was told to stop before it ever started it (the agent
 *    skips such an assignment) has ended: no process of it exists;
 *  - a task the agent had reported running is gone: its agent lost it (it
 *    restarted without its state, and its tasks died with it). It is lost,
 *    and its job requeued whole like any lost task.
 * Only reports that carry a task list say anything about absence.
 */
static void absent_tasks(st_t *s, arb_node_t *n, const st_report_t *r)
{
    st_job_t **held;
    int nh;

    if (!r->has_tasks)
        return;
    /* Settling never adds to the index; it may retire a job from s->active
     * (the fallback list), moving the last one into its slot: walk backwards. */
    nh = held_on(s, n, &held);
    for (int i = nh - 1; i >= 0; i--) {
        st_job_t *sj = held[i];
        arb_job_t *j = sj->j;
        int stopped = 0, gone = -1, ngone = 0;
        if (j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING)
            continue;
        for (int t = 0; t < j->nalloc; t++) {
            st_task_t *tk = &sj->tasks[t];
            bool listed = false;
            if (j->alloc[t].node != n->id ||
                !(tk->state == TK_RUNNING ||
                  (tk->state == TK_ASSIGNED && st_task_stop(sj, t) && tk->stop_sent)))
                continue;
            for (int k = 0; k < r->ntasks && !listed; k++)
                listed = r->tasks[k].job == sj->id && r->tasks[k].task == t;
            if (listed)
                continue;
            if (tk->state == TK_RUNNING) {
                if (ngone++ == 0)
                    gone = t; /* st_task_lost marks this one and settles the job */
                else
                    tk->state = TK_LOST;
            } else {
                tk->state = TK_CANCELLED;
                stopped++;
            }
        }
        if (gone >= 0) {
            char why[160];
            snprintf(why, sizeof why,
                     "its agent on node '%s' no longer has it (restarted without its state?)",
                     arb_node_name(&s->cluster, n));
            st_task_lost(s, sj, gone, why);
        } else if (stopped) {
            st_job_settle(s, sj, "tasks stopped before they started");
        }
    }
}

void st_assign_list_free(st_assign_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        st_assignment_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

void st_report_reply_free(st_report_reply_t *r)
{
    st_assign_list_free(&r->assigned);
}

/* What runs (or stops) on n, with its version, in *out; marks it
 * delivered. -ENOMEM: *out empty, nothing marked. */
static int assignments(st_t *s, arb_node_t *n, st_assign_list_t *out)
{
    st_job_t **held;
    int nh = held_on(s, n, &held), cap = 0;

    memset(out, 0, sizeof *out);
    for (int i = 0; i < nh; i++) {
        const arb_job_t *j = held[i]->j;
        if (j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING)
            continue;
        for (int t = 0; t < j->nalloc; t++)
            cap += j->alloc[t].node == n->id;
    }
    if (cap && !(out->v = calloc((size_t)cap, sizeof *out->v)))
        return -ENOMEM;
    for (int i = 0; i < nh; i++) {
        const arb_job_t *j = held[i]->j;
        if (j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING)
            continue;
        for (int t = 0; t < j->nalloc; t++)
            if (j->alloc[t].node == n->id) {
                if (st_task_assignment(s, held[i], t, &out->v[out->n]) < 0) {
                    st_assign_list_free(out);
                    return -ENOMEM;
                }
                out->n++;
            }
    }
    /* Built whole: now it counts as told. */
    for (int i = 0; i < nh; i++) {
        st_job_t *sj = held[i];
        const arb_job_t *j = sj->j;
        bool here = false;
        if (j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING)
            continue;
        for (int t = 0; t < j->nalloc; t++)
            if (j->alloc[t].node == n->id) {
                sj->tasks[t].stop_sent |= st_task_stop(sj, t);
                here = true;
            }
        if (here && !sj->delivered) {
            /* Persisted: from now on a cancel waits for the agent. */
            sj->delivered = true;
            st_job_save(s, sj, 0);
        }
    }
    out->version = list_version(out);
    return 0;
}

int st_node_report(st_t *s, const st_who_t *who, const char *name, const st_report_t *r,
                   st_report_reply_t *out, int64_t *ticket, arb_err_t *err)
{
    return st_node_report_if(s, who, name, -1, r, out, ticket, err);
}

/* The inventory or telemetry text the API passed on, as JSON: *out NULL
 * when there is none; -EBADMSG not an object. */
static int kept_json(const char *txt, const char *what, json_t **out, arb_err_t *err)
{
    json_error_t je;

    *out = NULL;
    if (!txt)
        return 0;
    if (!(*out = json_loads(txt, 0, &je)) || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return arb_errf(err, -EBADMSG, "%s: not a JSON object (%s)", what, je.text);
    }
    return 0;
}

int st_node_report_if(st_t *s, const st_who_t *who, const char *name, int64_t if_match,
                      const st_report_t *r, st_report_reply_t *out, int64_t *ticket, arb_err_t *err)
{
    json_t *inv = NULL, *tel = NULL;
    int64_t remote = r->lamport;
    arb_node_t *n;
    st_node_t *x;
    int rc = 0;
    bool touch = false;

    memset(out, 0, sizeof *out);
    out->node = name;
    *ticket = 0;
    if ((rc = st_node_name_check(name, err)) < 0)
        return rc;
    if ((rc = kept_json(r->inventory, "inventory", &inv, err)) < 0 ||
        (inv && (rc = st_inventory_check(inv, err)) < 0) ||
        (rc = kept_json(r->telemetry, "telemetry", &tel, err)) < 0) {
        json_decref(inv);
        return rc;
    }
    if (!r->has_lamport)
        remote = 0;
    pthread_mutex_lock(&s->mu);
    n = arb_cluster_find_node(&s->cluster, name);
    if (if_match >= 0 && (!n || st_node_ext(s, n)->version != (uint64_t)if_match)) {
        /* Checked before anything moves, the clock included. */
        rc = n ? arb_errf(err, -ESTALE,
                          "If-Match: node '%s' is at version %llu, not %lld; read it again "
                          "(GET /v1/nodes/%s) or report without If-Match",
                          name, (unsigned long long)st_node_ext(s, n)->version, (long long)if_match,
                          name)
               : arb_errf(err, -ESTALE,
                          "If-Match: node '%s' is not registered; its first report goes "
                          "without If-Match",
                          name);
        *ticket = st_seen(s);
        pthread_mutex_unlock(&s->mu);
        goto done;
    }
    bool has_lam = r->has_lamport;
    if (has_lam && (uint64_t)remote > s->clock + ST_LAMPORT_STEP) {
        /* DESIGN.md invariant 9: no input moves the clock more than a
         * bounded step. Refused whole, before anything moves; the reply
         * carries the clock so that an honest agent that ran ahead (its
         * reports went unanswered, the controller's store was rewound)
         * takes it and registers again. */
        rc = arb_errf(err, -ERANGE,
                      "lamport %lld is %llu ahead of the controller's clock %llu: a report may "
                      "move it at most %llu beyond its own time (DESIGN.md invariant 9); nothing "
                      "was applied. An agent takes the controller's time (\"lamport\" in this "
                      "reply) and registers again",
                      (long long)remote, (unsigned long long)((uint64_t)remote - s->clock),
                      (unsigned long long)s->clock, (unsigned long long)ST_LAMPORT_STEP);
        out->lamport = s->clock;
        *ticket = st_seen(s);
        pthread_mutex_unlock(&s->mu);
        goto done;
    }
    if (n && r->has_incarnation &&
        (r->incarnation < st_node_ext(s, n)->incarnation ||
         (!inv && !st_node_ext(s, n)->lost && r->incarnation != st_node_ext(s, n)->incarnation))) {
        /* Another life of its agent (see "Lives"): an older one's late report, or a
         * life this controller has not seen register. Nothing is applied. */
        x = st_node_ext(s, n);
        x->stale_reports++;
        out->kind = ST_REPORT_STALE;
        out->reregister = true;
        out->incarnation = x->incarnation;
        if (r->incarnation < x->incarnation)
            snprintf(out->message, sizeof out->message,
                     "from a previous life of node '%s''s agent: incarnation %lld, older than the "
                     "registered %lld; nothing of it was applied (a live agent takes a higher "
                     "incarnation and registers again)",
                     name, (long long)r->incarnation, (long long)x->incarnation);
        else
            snprintf(out->message, sizeof out->message,
                     "incarnation %lld of node '%s''s agent has not registered with this "
                     "controller; nothing of it was applied: register again with the inventory",
                     (long long)r->incarnation, name);
        goto reply;
    }
    if (n && has_lam && !st_node_ext(s, n)->lost &&
        (!inv || (r->has_incarnation && r->incarnation == st_node_ext(s, n)->incarnation)) &&
        remote < st_node_ext(s, n)->agent_lamport) {
        /* A registration too, within one life: only a new life starts its clock again. */
        x = st_node_ext(s, n);
        x->stale_reports++;
        out->kind = ST_REPORT_STALE;
        snprintf(out->message, sizeof out->message,
                 "a replay: this report (lamport %lld) is older than one already applied for "
                 "node '%s' (lamport %lld); nothing of it was applied",
                 (long long)remote, name, (long long)x->agent_lamport);
        goto reply;
    }
    uint64_t lam = st_tick(s, (uint64_t)remote);
    if ((!n || st_node_ext(s, n)->lost) && !inv) {
        /* Not registered, or declared lost (its tasks requeued): the agent
         * must fence (it has, if its clock kept time) and register again. */
        out->kind = ST_REPORT_LOST;
        snprintf(out->message, sizeof out->message, "%s",
                 n ? "this node was declared lost and its tasks requeued; fence and "
                     "register again with the inventory"
                   : "this node is not registered; its first report must carry its "
                     "inventory");
        goto reply;
    }
    if (!n) {
        if ((rc = st_nodes_grow(s)) < 0 ||
            (rc = arb_cluster_add_node(&s->cluster, name, &n, err)) < 0)
            goto out;
        x = st_node_ext(s, n);
        memset(x, 0, sizeof *x);
        if ((rc = st_node_apply_inventory(s, n, inv, err)) < 0) {
            /* Cannot happen after report_check but for ENOMEM/ENOSPC: the
             * node stays, empty and drained, rather than half built. */
            arb_node_transition(&s->cluster, n, ARB_NODE_DRAINING, NULL);
        }
        x->inventory = json_deep_copy(inv);
        st_node_apply_meta(s, n);
        st_node_save(s, n);
        st_event(s, "node-registered", 0, name, "node '%s' registered: %d GPUs", name, n->ngpus);
        s->dirty = true;
    } else {
        x = st_node_ext(s, n);
        if (inv && !json_equal(inv, x->inventory) && same_resources(inv, x->inventory)) {
            /* Where it is reached, its host name, its log directory: kept,
             * never scheduled on. Labels, taints, datasets: applied under
             * what operators set (nodeops.c), also while tasks run there. */
            bool meta = !json_equal(json_object_get(inv, "labels"),
                                    json_object_get(x->inventory, "labels")) ||
                        !json_equal(json_object_get(inv, "taints"),
                                    json_object_get(x->inventory, "taints")) ||
                        !json_equal(json_object_get(inv, "datasets"),
                                    json_object_get(x->inventory, "datasets"));
            json_decref(x->inventory);
            x->inventory = json_deep_copy(inv);
            if (meta) {
                st_node_apply_meta(s, n);
                st_event(s, "node-updated", 0, name,
                         "node '%s': labels, taints or datasets from its inventory", name);
                st_node_noexecute(s, n, "from its agent's inventory");
                s->dirty = true;
            }
            st_node_save(s, n);
        } else if (inv && !json_equal(inv, x->inventory)) {
            if (n->ntasks > 0) {
                rc = arb_errf(err, -EBUSY,
                              "inventory: node '%s' changed its inventory while %d tasks are "
                              "allocated on it; drain it and let them end first",
                              name, n->ntasks);
                goto out;
            }
            if ((rc = st_node_apply_inventory(s, n, inv, err)) < 0)
                goto out;
            json_decref(x->inventory);
            x->inventory = json_deep_copy(inv);
            st_node_apply_meta(s, n);
            st_node_save(s, n);
            st_event(s, "node-updated", 0, name, "node '%s': new inventory, %d GPUs", name,
                     n->ngpus);
            s->dirty = true;
        }
    }
    x = st_node_ext(s, n);
    x->report_mono = st_now_ns(s);
    x->report_ms = st_now_ms(s);
    x->lamport = lam;
    if (has_lam)
        x->agent_lamport = remote;
    if (r->has_incarnation)
        x->incarnation = r->incarnation; /* a registration's, or the same life's */
    x->reports++;
    /* The scheduler sees report times to the second: nodes that report at
     * different moments of one second stay one node class (nodeclass.c
     * keys on report_ns), and staleness is measured in tens of seconds. */
    {
        int64_t q = x->report_mono - x->report_mono % 1000000000LL;
        if (n->report_ns != q) {
            n->report_ns = q;
            touch = true;
        }
    }
    if (inv) {
        const char *a = json_string_value(json_object_get(inv, "address"));
        if (a && a[0])
            snprintf(x->addr, sizeof x->addr, "%s", a);
        else if (who && who->addr)
            snprintf(x->addr, sizeof x->addr, "%s", who->addr);
    } else if (!json_string_value(json_object_get(x->inventory, "address")) && who && who->addr) {
        snprintf(x->addr, sizeof x->addr, "%s", who->addr);
    }
    if (x->lost) { /* registered again after it was declared lost */
        x->lost = false;
        st_event(s, "node-rejoined", 0, name, "node '%s' registered again after it was lost", name);
        s->dirty = true;
    }
    if (n->state == ARB_NODE_NOT_READY &&
        arb_node_transition(&s->cluster, n, ARB_NODE_READY, NULL) == 0) {
        st_event(s, "node-ready", 0, name, "node '%s' reports again; ready", name);
        s->dirty = true;
    }
    if (tel) {
        for (int i = 0; i < r->ngpus; i++) {
            const st_report_gpu_t *g = &r->gpus[i];
            int ix = g->index;
            if (ix >= n->ngpus)
                continue;
            if (g->has_util && n->gpu[ix].util_pct != (uint8_t)g->util) {
                n->gpu[ix].util_pct = (uint8_t)g->util;
                touch = true;
            }
            if (g->has_temp)
                n->gpu[ix].temp_c = (int16_t)g->temp_c;
            if (g->has_healthy && n->gpu[ix].healthy != g->healthy) {
                n->gpu[ix].healthy = g->healthy;
                touch = true;
                st_event(s, g->healthy ? "gpu-healthy" : "gpu-unhealthy", 0, name,
                         "node '%s' GPU %d is %s", name, ix,
                         g->healthy ? "healthy again; back in capacity"
                                    : "unhealthy; out of capacity, its tasks stopped");
                s->dirty = true;
                if (!g->healthy)
                    st_gpu_lost(s, n, ix);
            }
        }
        /* the least-loaded score's */
        if (r->has_queue_length && n->queue_len != r->queue_length) {
            n->queue_len = r->queue_length;
            touch = true;
        }
        json_decref(x->telemetry);
        x->telemetry = tel; /* kept, as its agent sent it */
        tel = NULL;
        x->tel_mono = x->report_mono;
        st_telhist_note(x, n->ngpus, x->telemetry, x->report_mono);
    }
    /* Only what the scheduler reads (report time, utilisation, health)
     * makes the node "changed" for its indexes. */
    if (touch)
        arb_node_touch(&s->cluster, n);
    for (int i = 0; i < r->ntasks; i++)
        apply_task(s, n, &r->tasks[i], lam);
    absent_tasks(s, n, r);
    if ((rc = assignments(s, n, &out->assigned)) < 0) {
        arb_errf(err, rc, "out of memory listing node '%s''s assignments", name);
        goto out;
    }
    out->kind = ST_REPORT_APPLIED;
    out->version = st_node_ext(s, n)->version;
    st_node_ext(s, n)->told_version = out->assigned.version;
    if (s->dirty)
        st_kick(s);
reply:
    out->lamport = s->clock;
    out->epoch = s->epoch;
    out->lease_ms = s->conf.lease_ns / 1000000;
out:
    *ticket = st_flush(s);
    pthread_mutex_unlock(&s->mu);
done:
    json_decref(inv);
    json_decref(tel);
    if (rc < 0 && rc != -ERANGE)
        st_report_reply_free(out);
    return rc;
}

int st_node_held(st_t *s, arb_node_t *n, st_job_t ***out)
{
    return held_on(s, n, out);
}

void st_node_assign_hint(st_t *s, const st_job_t *sj)
{
    const arb_job_t *j = sj->j;
    uint32_t last = UINT32_MAX;

    if (!s->node_fn)
        return;
    for (int t = 0; t < j->nalloc; t++)
        if (j->alloc[t].node != ARB_NO_NODE && j->alloc[t].node != last) {
            last = j->alloc[t].node; /* a gang's tasks on one node: told once or so */
            s->node_fn(s->node_arg, last + 1);
        }
}

/* The list's version: what the agent acts on, entry by entry (FNV-1a),
 * combined so that the order of the list does not matter; 1..2^63-1. */
static uint64_t list_version(const st_assign_list_t *l)
{
    uint64_t v = 0;

    for (int i = 0; i < l->n; i++) {
        const st_assignment_t *a = &l->v[i];
        const uint64_t keys[] = {a->job, (uint64_t)a->task, a->attempt, a->epoch,
                                 a->elastic ? a->generation : 0};
        uint64_t h = 1469598103934665603ULL;
        for (int k = 0; k < 5; k++) {
            uint64_t x = keys[k];
            for (int b = 0; b < 8; b++) {
                h ^= (x >> (8 * b)) & 0xff;
                h *= 1099511628211ULL;
            }
        }
        h ^= a->stop;
        h *= 1099511628211ULL;
        v += h * 0x9e3779b97f4a7c15ULL + (h >> 29);
    }
    v >>= 1; /* a JSON integer */
    return v ? v : 1;
}

int st_node_assignments_wait(st_t *s, const char *name, int64_t epoch, uint64_t have, bool *same,
                             uint32_t *key, st_assign_list_t *out, uint64_t *lamport,
                             uint64_t *epoch_out, int64_t *ticket, arb_err_t *err)
{
    int rc = 0;

    *same = false;
    *key = 0;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    arb_node_t *n = arb_cluster_find_node(&s->cluster, name);
    *lamport = s->clock;
    *epoch_out = s->epoch;
    if (!n) {
        rc = arb_errf(err, -ENOENT, "node '%s': no such node", name);
    } else if (epoch >= 0 && ((uint64_t)epoch != s->epoch || st_node_ext(s, n)->lost)) {
        /* Fencing: nothing new goes to an agent that has not registered
         * under this controller, or whose node was declared lost. */
        rc = arb_errf(err, -ESTALE,
                      "node '%s': %s; nothing is sent through the assignments channel until its "
                      "agent reports (registers) again",
                      name,
                      st_node_ext(s, n)->lost ? "declared lost, its tasks requeued"
                                              : "the agent's epoch is not this controller's");
    } else if ((rc = assignments(s, n, out)) < 0) {
        arb_errf(err, rc, "out of memory listing node '%s''s assignments", name);
    } else {
        *key = n->id + 1;
        /* The list the agent has, or the last one sent to it (the reply to
         * its last report, or its channel's last answer): a poll sent
         * before that reply came, resumed by the report's own change (a
         * task's exit), would only say it again. A reply lost on the way
         * costs the agent that list until its next report or the poll's
         * deadline, not the list itself. */
        st_node_t *x = st_node_ext(s, n);
        *same = have != 0 && (out->version == have || out->version == x->told_version);
        if (!*same && epoch >= 0)
            x->told_version = out->version; /* the agent's channel: it has this one next */
    }
    *ticket = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}
