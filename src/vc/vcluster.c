/*
 * vcluster.c: the virtual cluster of vcluster.h: the controller's state
 * machine on a virtual clock and the simulated agents around it.
 *
 * A simulated agent's heartbeat (vc_report), as src/agent/agent.c does it:
 *   1. its tasks advance to now: natural exits, SIGTERMed tasks that have
 *      exited; the lease is checked (lease.c) and a fence kills every task;
 *   2. the report: its Lamport time, the inventory when it registers, GPU
 *      telemetry, every task it has with its state and exit code;
 *   3. the reply (parsed by report.c's parser): "lost" fences and makes it
 *      register again; otherwise the lease is renewed from the send time
 *      and the assignments are applied: a task no longer ours is SIGTERMed,
 *      a new one starts unless it is to stop, comes from an older epoch, or
 *      needs a GPU that a stopping task still holds; an ended task is
 *      forgotten once the controller no longer lists it.
 * A cut node's agent still runs and its lease still runs out; its reports
 * just never arrive.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/lease.h"
#include "agent/report.h"
#include "api/api.h"
#include "vc/vcluster.h"

struct vc {
    vc_conf_t conf;
    st_conf_t st_conf;
    st_t *s;
    int64_t now;
    vc_node_t *nodes;
    int nnodes, capnodes;
    uint64_t ev_seen; /* vc_settle: the last event seen */
};

static int64_t vc_mono(void *arg)
{
    return ((vc_t *)arg)->now;
}

/* Wall time for people: a fixed epoch plus the virtual time. */
static int64_t vc_wall(void *arg)
{
    return 1700000000000LL + ((vc_t *)arg)->now / 1000000;
}

st_t *vc_state(vc_t *v)
{
    return v->s;
}

int64_t vc_now(const vc_t *v)
{
    return v->now;
}

void vc_advance(vc_t *v, int64_t dt_ns)
{
    if (dt_ns > 0)
        v->now += dt_ns;
}

static int open_st(vc_t *v, arb_err_t *err)
{
    v->st_conf = *v->conf.st;
    v->st_conf.clock.mono_ns = vc_mono;
    v->st_conf.clock.wall_ms = vc_wall;
    v->st_conf.clock.arg = v;
    return st_open(v->conf.dir, &v->st_conf, &v->s, err);
}

int vc_open(const vc_conf_t *c, vc_t **out, arb_err_t *err)
{
    vc_t *v = calloc(1, sizeof *v);
    int rc;

    if (!v)
        return arb_errf(err, -ENOMEM, "out of memory");
    v->conf = *c;
    if (v->conf.start_ns <= 0)
        v->conf.start_ns = 1000000000000LL;
    if (v->conf.heartbeat_ns <= 0)
        v->conf.heartbeat_ns = 1000000000LL;
    if (v->conf.grace_ns <= 0)
        v->conf.grace_ns = 10000000000LL;
    v->now = v->conf.start_ns;
    if ((rc = open_st(v, err)) < 0) {
        free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void vc_close(vc_t *v)
{
    if (!v)
        return;
    st_close(v->s);
    for (int i = 0; i < v->nnodes; i++) {
        json_decref(v->nodes[i].inv);
        free(v->nodes[i].t);
        free(v->nodes[i].prev_body);
        free(v->nodes[i].last_body);
        free(v->nodes[i].lease);
    }
    free(v->nodes);
    free(v);
}

int vc_restart(vc_t *v, arb_err_t *err)
{
    st_close(v->s);
    v->s = NULL;
    v->ev_seen = 0;
    return open_st(v, err);
}

/* ---- nodes ---------------------------------------------------------------------------- */

int vc_node_add(vc_t *v, const char *name, json_t *inv)
{
    if (v->nnodes == v->capnodes) {
        int cap = v->capnodes ? v->capnodes * 2 : 16;
        vc_node_t *nv = realloc(v->nodes, (size_t)cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        v->nodes = nv;
        v->capnodes = cap;
    }
    vc_node_t *n = &v->nodes[v->nnodes];
    memset(n, 0, sizeof *n);
    n->lease = calloc(1, sizeof(agent_lease_t));
    if (!n->lease)
        return -ENOMEM;
    snprintf(n->name, sizeof n->name, "%s", name);
    n->inv = json_incref(inv);
    n->up = true;
    n->incarnation = 1;
    agent_lease_init(n->lease, v->st_conf.lease_ns);
    return v->nnodes++;
}

int vc_nnodes(const vc_t *v)
{
    return v->nnodes;
}

vc_node_t *vc_node(vc_t *v, int i)
{
    return i >= 0 && i < v->nnodes ? &v->nodes[i] : NULL;
}

/* Kill every live task of n now (a fence, or the agent dying with them). */
static void kill_all(vc_node_t *n, int64_t now, bool fenced)
{
    for (int k = 0; k < n->nt; k++) {
        vc_task_t *t = &n->t[k];
        if (t->state == VC_EXITED)
            continue;
        t->state = VC_EXITED;
        t->exit_code = -1;
        t->lost = fenced;
        t->stop_at = now;
    }
}

void vc_agent_down(vc_t *v, int i, bool kill)
{
    vc_node_t *n = vc_node(v, i);
    if (!n)
        return;
    n->up = false;
    if (kill)
        kill_all(n, v->now, false);
}

void vc_agent_up(vc_t *v, int i)
{
    vc_node_t *n = vc_node(v, i);
    if (!n || n->up)
        return;
    /* A restart without its state: nothing of what it ran is known to it. */
    kill_all(n, v->now, false);
    n->nt = 0;
    n->up = true;
    n->registered = false;
    n->lamport = 0;
    n->incarnation++; /* a new life: its old reports, replayed, are told apart */
    agent_lease_init(n->lease, v->st_conf.lease_ns);
    n->next_report = v->now;
}

void vc_cut(vc_t *v, int i, bool cut)
{
    vc_node_t *n = vc_node(v, i);
    if (n)
        n->cut = cut;
}

/* ---- tasks --------------------------------------------------------------------------------- */

static int64_t secs(const char *s)
{
    return (int64_t)(strtod(s, NULL) * 1e9);
}

/* What a task's command says it does (vcluster.h). */
static void behaviour(const agent_assignment_t *as, int64_t now, vc_task_t *t)
{
    t->end_at = INT64_MAX;
    t->exit_code = 0;
    t->term_ns = 0;
    if (!as->argv || !as->argv[0] || strcmp(as->argv[0], "vc") != 0)
        return;
    for (int i = 1; as->argv[i]; i++) {
        const char *a = as->argv[i];
        if (!strncmp(a, "run=", 4) && secs(a + 4) > 0)
            t->end_at = now + secs(a + 4);
        else if (!strncmp(a, "exit=", 5))
            t->exit_code = atoi(a + 5);
        else if (!strncmp(a, "term=", 5))
            t->term_ns = secs(a + 5);
    }
}

/* SIGTERM to t at `at`: it exits after its term time, or is killed at its grace. */
static void sigterm(vc_task_t *t, int64_t at)
{
    t->state = VC_STOPPING;
    t->stop_at = at + (t->term_ns < t->grace_ns ? t->term_ns : t->grace_ns);
}

/* Tasks advance to now; time limits as the agent's executor keeps them;
 * the lease is checked. */
static void advance_tasks(vc_t *v, vc_node_t *n)
{
    for (int k = 0; k < n->nt; k++) {
        vc_task_t *t = &n->t[k];
        if (t->state == VC_RUNNING && t->deadline && t->deadline <= v->now &&
            t->end_at > t->deadline)
            sigterm(t, t->deadline);
        if (t->state == VC_RUNNING && t->end_at <= v->now) {
            t->state = VC_EXITED;
            t->stop_at = t->end_at;
        } else if (t->state == VC_STOPPING && t->stop_at <= v->now) {
            t->state = VC_EXITED;
            t->exit_code = 143;
        }
    }
    if (agent_lease_tick(n->lease, v->now) == AGENT_LEASE_FENCE) {
        kill_all(n, v->now, true);
        n->fences++;
    }
}

static vc_task_t *find_task(vc_node_t *n, uint64_t job, int task)
{
    for (int k = 0; k < n->nt; k++)
        if (n->t[k].job == job && n->t[k].task == task)
            return &n->t[k];
    return NULL;
}

static const agent_assignment_t *listed(const agent_reply_t *r, const vc_task_t *t)
{
    char job[32];
    snprintf(job, sizeof job, "%llu", (unsigned long long)t->job);
    for (int i = 0; i < r->nassign; i++)
        if (r->assign[i].ref.task == t->task && strcmp(r->assign[i].ref.job, job) == 0)
            return &r->assign[i];
    return NULL;
}

static bool gpu_held_by_stopping(const vc_node_t *n, const agent_assignment_t *as)
{
    for (int k = 0; k < n->nt; k++) {
        const vc_task_t *t = &n->t[k];
        if (t->state != VC_STOPPING)
            continue;
        for (int x = 0; x < t->ngpus; x++)
            for (int y = 0; y < as->ngpus; y++)
                if (t->gpus[x] == as->gpus[y])
                    return true;
    }
    return false;
}

static void apply(vc_t *v, vc_node_t *n, const agent_reply_t *r, const json_t *raw)
{
    /* Stop what is not ours any more; forget ended tasks no longer listed. */
    for (int k = 0; k < n->nt; k++) {
        vc_task_t *t = &n->t[k];
        const agent_assignment_t *as = listed(r, t);
        bool ours = as && as->ref.attempt == t->attempt && !as->ref.stop;
        if (t->state == VC_RUNNING && !ours) {
            sigterm(t, v->now);
            if (t->stop_at <= v->now) {
                t->state = VC_EXITED;
                t->exit_code = 143;
            }
        } else if (t->state == VC_EXITED && !as) {
            n->t[k--] = n->t[--n->nt];
        }
    }
    /* Start what is new. */
    for (int i = 0; i < r->nassign; i++) {
        const agent_assignment_t *as = &r->assign[i];
        uint64_t job = strtoull(as->ref.job, NULL, 10);
        vc_task_t *t = find_task(n, job, as->ref.task);
        arb_err_t err;
        if (as->ref.stop || (t && (t->attempt == as->ref.attempt || t->state != VC_EXITED)))
            continue;
        if (agent_lease_check_assignment(n->lease, as->ref.epoch, v->now, NULL, &err) < 0)
            continue;
        if (gpu_held_by_stopping(n, as))
            continue;
        if (!t) {
            if (n->nt == n->cap) {
                int cap = n->cap ? n->cap * 2 : 16;
                vc_task_t *nt = realloc(n->t, (size_t)cap * sizeof *nt);
                if (!nt)
                    continue;
                n->t = nt;
                n->cap = cap;
            }
            t = &n->t[n->nt++];
        }
        memset(t, 0, sizeof *t);
        t->job = job;
        t->task = as->ref.task;
        t->attempt = as->ref.attempt;
        t->epoch = as->ref.epoch;
        t->state = VC_RUNNING;
        t->start_ns = v->now;
        t->ngpus = as->ngpus;
        memcpy(t->gpus, as->gpus, sizeof t->gpus);
        json_t *a = json_array_get(json_object_get(raw, "assignments"), (size_t)i);
        t->gpu_milli = (int)json_integer_value(json_object_get(a, "gpu_milli"));
        t->grace_ns = as->grace_ns >= 0 ? as->grace_ns : v->conf.grace_ns;
        t->deadline = as->limit_ns >= 0 ? v->now + (as->limit_ns > 0 ? as->limit_ns : 1) : 0;
        if (t->gpu_milli <= 0)
            t->gpu_milli = 1000;
        behaviour(as, v->now, t);
    }
}

static json_t *report_body(vc_t *v, vc_node_t *n)
{
    json_t *o = json_object(), *tasks = json_array(), *gpus = json_array();
    size_t ngpus = json_array_size(json_object_get(n->inv, "gpus"));
    uint32_t busy = 0;

    json_object_set_new(o, "lamport", json_integer(++n->lamport));
    json_object_set_new(o, "incarnation", json_integer(n->incarnation));
    if (!n->registered)
        json_object_set_new(o, "inventory", json_deep_copy(n->inv));
    for (int k = 0; k < n->nt; k++) {
        const vc_task_t *t = &n->t[k];
        const char *st = t->state != VC_EXITED ? "running"
                         : t->lost             ? "lost"
                         : t->exit_code == 0   ? "succeeded"
                                               : "failed";
        json_t *e = json_pack("{s:I,s:i,s:I,s:s}", "job", (json_int_t)t->job, "task", t->task,
                              "attempt", (json_int_t)t->attempt, "state", st);
        if (t->state == VC_EXITED && !t->lost)
            json_object_set_new(e, "exit_code", json_integer(t->exit_code));
        json_array_append_new(tasks, e);
        if (t->state != VC_EXITED)
            for (int g = 0; g < t->ngpus; g++)
                busy |= 1u << t->gpus[g];
    }
    for (size_t g = 0; g < ngpus; g++)
        json_array_append_new(gpus, json_pack("{s:i,s:i,s:i,s:b}", "index", (int)g, "util",
                                              busy & (1u << g) ? 80 : 0, "temp_c",
                                              busy & (1u << g) ? 65 : 30, "healthy",
                                              !(n->sick & (1u << g))));
    json_object_set_new(o, "telemetry", json_pack("{s:o}", "gpus", gpus));
    json_object_set_new(o, "tasks", tasks);
    (void)v;
    return o;
}

/* Send body as node n's report; apply the reply when it is live. */
static int send_report(vc_t *v, vc_node_t *n, json_t *body, bool live, arb_err_t *err)
{
    static const st_who_t agent = {ST_ROLE_AGENT, "nodes", "agent", "127.0.0.1"};
    json_t *out = NULL;
    int64_t ticket = 0;
    agent_reply_t r;
    char *txt = NULL; /* the reply's text, as the route sends it to an agent */
    size_t len = 0;
    int rc = api_node_report_text(v->s, &agent, n->name, -1, body, &txt, &len, &out, &ticket, err);

    if (st_wait(v->s, ticket, NULL) < 0 && rc == 0)
        rc = arb_errf(err, -EIO, "the store failed");
    if (rc < 0 || !live) {
        json_decref(out);
        free(txt);
        return rc;
    }
    out = json_loadb(txt, len, 0, NULL); /* the assignments' raw members (apply) */
    if (!out || agent_reply_parse(txt, len, &r, err) < 0) {
        free(txt);
        json_decref(out);
        return arb_errf(err, -EPROTO, "node '%s': the controller's reply does not parse: %s",
                        n->name, err ? err->msg : "");
    }
    free(txt);
    if (r.lost) {
        if (agent_lease_lost(n->lease, v->now, "the controller says lost") == AGENT_LEASE_FENCE)
            n->fences++;
        kill_all(n, v->now, true);
        n->registered = false;
    } else if (r.stale && r.reregister) { /* a life the controller does not know */
        if (r.incarnation >= n->incarnation)
            n->incarnation = r.incarnation + 1;
        n->registered = false;
        n->next_report = v->now; /* at once, as the agent does */
    } else if (!r.stale) {
        int lrc = 0;
        if (!n->registered) {
            agent_lease_registered(n->lease, r.epoch, v->now, v->now, NULL);
            n->registered = true;
        } else if (agent_lease_heartbeat_ok(n->lease, r.epoch, v->now, v->now, &lrc) ==
                   AGENT_LEASE_FENCE) {
            kill_all(n, v->now, true);
            n->fences++;
        }
        if (r.lease_ns > 0)
            agent_lease_set_length(n->lease, v->st_conf.lease_ns, r.lease_ns);
        if (r.have_assignments)
            apply(v, n, &r, out);
    }
    agent_reply_free(&r);
    json_decref(out);
    return 0;
}

int vc_report(vc_t *v, int i, arb_err_t *err)
{
    vc_node_t *n = vc_node(v, i);
    json_t *body;
    int rc;

    if (!n || !n->up)
        return 0;
    advance_tasks(v, n);
    n->next_report = v->now + v->conf.heartbeat_ns;
    body = report_body(v, n);
    free(n->prev_body);
    n->prev_body = n->last_body;
    n->last_body = json_dumps(body, JSON_COMPACT);
    if (n->cut) { /* lost in the network */
        json_decref(body);
        return 0;
    }
    rc = send_report(v, n, body, true, err);
    json_decref(body);
    return rc;
}

int vc_replay(vc_t *v, int i, arb_err_t *err)
{
    vc_node_t *n = vc_node(v, i);
    json_t *body;
    int rc;

    if (!n || !n->prev_body || n->cut)
        return 0;
    body = json_loads(n->prev_body, 0, NULL);
    if (!body)
        return 0;
    rc = send_report(v, n, body, false, err); /* its agent no longer waits for the answer */
    json_decref(body);
    return rc;
}

/* Does n have news its agent would report at once (a task ended)? */
static bool urgent(vc_t *v, vc_node_t *n)
{
    for (int k = 0; k < n->nt; k++) {
        const vc_task_t *t = &n->t[k];
        if ((t->state == VC_RUNNING && t->end_at <= v->now) ||
            (t->state == VC_STOPPING && t->stop_at <= v->now))
            return true;
    }
    return false;
}

int vc_heartbeats(vc_t *v, arb_err_t *err)
{
    for (int i = 0; i < v->nnodes; i++) {
        vc_node_t *n = &v->nodes[i];
        int rc;
        if (!n->up)
            continue;
        if (n->next_report > v->now && !urgent(v, n)) {
            advance_tasks(v, n); /* a cut-off agent fences on time */
            continue;
        }
        if ((rc = vc_report(v, i, err)) < 0)
            return rc;
    }
    return 0;
}

int vc_cycle(vc_t *v, arb_cycle_stats_t *st, arb_err_t *err)
{
    int64_t ticket = 0;
    int rc = st_cycle(v->s, st, &ticket);

    if (st_wait(v->s, ticket, err) < 0)
        return -EIO;
    if (rc < 0)
        return arb_errf(err, rc, "scheduling cycle failed: %s", strerror(-rc));
    return 0;
}

/* How many events happened since the last call (the event log's tail). */
static int new_events(vc_t *v)
{
    static const st_who_t admin = {ST_ROLE_ADMIN, "", "vc", NULL};
    st_event_list_t out;
    int64_t ticket;
    int n = 0;

    if (st_events(v->s, &admin, v->ev_seen, 10000, 0, &out, &ticket, NULL) == 0) {
        n = out.n;
        v->ev_seen = out.last;
        st_event_list_free(&out);
    }
    return n;
}

int vc_settle(vc_t *v, int quiet, int max, arb_err_t *err)
{
    int calm = 0, rounds = 0;

    new_events(v);
    while (rounds < max && calm < quiet) {
        int rc;
        if ((rc = vc_heartbeats(v, err)) < 0 || (rc = vc_cycle(v, NULL, err)) < 0 ||
            (rc = vc_heartbeats(v, err)) < 0)
            return rc;
        calm = new_events(v) == 0 ? calm + 1 : 0;
        rounds++;
        vc_advance(v, v->conf.heartbeat_ns);
    }
    return rounds;
}

int vc_submit(vc_t *v, const st_who_t *who, const char *yaml, uint64_t *id, arb_err_t *err)
{
    st_job_view_t out;
    int64_t ticket = 0;
    int rc = st_job_submit(v->s, who, yaml, strlen(yaml), true, &out, &ticket, err);

    if (st_wait(v->s, ticket, NULL) < 0 && rc == 0)
        rc = arb_errf(err, -EIO, "the store failed");
    if (rc == 0 && id)
        *id = out.id;
    st_job_view_free(&out);
    return rc;
}

/* ---- what the agents see ------------------------------------------------------------------ */

int vc_check_agents(vc_t *v, arb_err_t *err)
{
    for (int i = 0; i < v->nnodes; i++) {
        const vc_node_t *n = &v->nodes[i];
        int milli[16] = {0};
        for (int k = 0; k < n->nt; k++) {
            const vc_task_t *t = &n->t[k];
            if (t->state == VC_EXITED)
                continue;
            for (int g = 0; g < t->ngpus; g++)
                if (t->gpus[g] >= 0 && t->gpus[g] < 16 &&
                    (milli[t->gpus[g]] += t->gpu_milli) > 1000)
                    return arb_errf(err, -EFAULT,
                                    "node '%s' GPU %d: live tasks hold %d milli of it (job %llu "
                                    "task %d among them)",
                                    n->name, t->gpus[g], milli[t->gpus[g]],
                                    (unsigned long long)t->job, t->task);
            for (int j = i; j < v->nnodes; j++) {
                const vc_node_t *o = &v->nodes[j];
                for (int q = j == i ? k + 1 : 0; q < o->nt; q++) {
                    const vc_task_t *u = &o->t[q];
                    if (u->state != VC_EXITED && u->job == t->job && u->task == t->task)
                        return arb_errf(err, -EFAULT,
                                        "job %llu task %d is live twice: attempt %llu on node "
                                        "'%s' and attempt %llu on node '%s'",
                                        (unsigned long long)t->job, t->task,
                                        (unsigned long long)t->attempt, n->name,
                                        (unsigned long long)u->attempt, o->name);
                }
            }
        }
    }
    return 0;
}
