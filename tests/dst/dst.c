/*
 * dst.c: the deterministic simulation test of the controller.
 *
 *   arb_dst [--seeds A-B] [--steps N] [--budget-s S] [--replay FILE] [--out FILE] [-k]
 *           [--skip CHECKS] [-v]
 *
 * Each seed makes a world and a list of steps (dst_gen.c), run against the
 * controller's own state machine and scheduler on a virtual clock with
 * simulated agents (src/vc) and a real SQLite store in a temporary
 * directory: one thread, no sockets, the same answer every time.
 *
 * After every step it checks safety:
 *   S1 no capacity oversubscribed and the allocations add up (st_check);
 *   S2 as the agents see it: no GPU shared beyond its capacity by live
 *      processes, no task live on two nodes (vc_check_agents);
 *   S3 gangs whole: a placed job holds at least its gang minimum;
 *   S4 no acknowledged job lost: every accepted job is found after any
 *      restart, and an ended job stays ended as it ended;
 * (faults include GPUs that fall off the bus and come back) and progress:
 *   P1 no job evicted more than 6 times in any virtual minute, nor 3 times
 *      in a minute for the same claim of one preemptor (the same attempt:
 *      a preemptor that lost its own place to a fault or a reclaim and
 *      evicts again makes a new claim), a preemption livelock;
 *   P2 explain's "fits now" is followed by a placement in the next cycle;
 *   P3 at the end the faults stop, every node comes back, services are
 *      cancelled and the cluster is left to drain; a job still pending when
 *      nothing holds anything must not fit the idle eligible cluster: each
 *      such job is tried alone on a fresh controller with the same nodes
 *      and config (a queue freeze otherwise).
 * A failure is shrunk (steps removed while the same check still fails) and
 * the minimal replay printed, and written to --out (default
 * /tmp/arb_dst_fail.txt): `arb_dst --replay FILE` runs it again.
 * With --budget-s, seeds run until the time is spent or the range's end
 * (--seeds A: from A on, no end; make soak), whichever comes first;
 * without, exactly the seeds given (CI: a fixed list, about a minute). It stops at
 * the first failing seed unless -k (keep going: every failing seed is
 * shrunk and written to FILE.SEED). --skip P2,P3 leaves checks out, to see
 * what else a seed finds.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h" /* api_explain_json: explain as the API answers it */
#include "dst.h"
#include "state/state_int.h"
#include "vc/vcluster.h"
#include "../unit/api_fixture.h" /* job_explain */

static int verbose;
static char skip[64]; /* checks not to make, e.g. "P2" (to see what else fails) */

static bool skipped(const char *check)
{
    return strstr(skip, check) != NULL;
}

static const st_who_t who_of[3] = {
    {ST_ROLE_ADMIN, "", "root", NULL},
    {ST_ROLE_USER, "team-a", "alice", NULL},
    {ST_ROLE_USER, "team-b", "bob", NULL},
};

/* ---- one run ----------------------------------------------------------------------------- */

typedef struct ev_count {
    uint64_t job;
    int n;
    int64_t at[8]; /* the last evictions' times, a ring */
    uint64_t by[8];
    int by_gen[8]; /* the preemptor's generation then */
    int gen;       /* this job's attempts that ended (job-requeued events seen) */
} ev_count_t;

typedef struct run {
    const dst_world_t *w;
    st_conf_t conf;
    char dir[64];
    vc_t *v;
    uint64_t *acked; /* accepted submissions, in order: job ids */
    int nacked;
    int8_t *ended; /* per job id: its terminal state + 1, 0 while active */
    size_t capended;
    ev_count_t *evs;
    int nevs;
    uint64_t ev_seen;
    char fail[1024]; /* the first failure: "P1 ..." */
    int fail_step;
} run_t;

static int failf(run_t *r, int step, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int failf(run_t *r, int step, const char *fmt, ...)
{
    va_list ap;
    if (r->fail[0])
        return -1;
    va_start(ap, fmt);
    vsnprintf(r->fail, sizeof r->fail, fmt, ap);
    va_end(ap);
    r->fail_step = step;
    return -1;
}

static st_t *S(run_t *r)
{
    return vc_state(r->v);
}

static bool held(const arb_job_t *j)
{
    return j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
}

static bool queued(const arb_job_t *j)
{
    return j->state == ARB_JOB_PENDING || j->state == ARB_JOB_PREEMPTED;
}

/* The eviction record of job (made on first use). */
static ev_count_t *count_of(run_t *r, uint64_t job)
{
    for (int k = 0; k < r->nevs; k++)
        if (r->evs[k].job == job)
            return &r->evs[k];
    ev_count_t *n = realloc(r->evs, (size_t)(r->nevs + 1) * sizeof *r->evs);
    if (!n)
        abort();
    r->evs = n;
    memset(&r->evs[r->nevs], 0, sizeof *r->evs);
    r->evs[r->nevs].job = job;
    return &r->evs[r->nevs++];
}

/* The controller's id of the job that job's latest eviction was for: the
 * scheduler's own record of it (preempted_by, set when the victim was
 * chosen, and the preemptor's ext_id), read in the cycle's wake, before a
 * later one can choose the victim again. A service evicts for one of its
 * replicas: the replica is the claim (its own job, whose attempts move
 * when it loses its place; the service's never do). 0: none known. */
static uint64_t preemptor_of(run_t *r, uint64_t job)
{
    st_t *s = S(r);
    st_job_t *v = st_job_find(s, job);
    const arb_job_t *p;

    if (!v || v->own_j || !v->j)
        return 0;
    p = arb_sched_job(s->sched, v->j->preempted_by);
    return p && p != v->j ? p->ext_id : 0;
}

/* P1: count evictions from the new events. An eviction is counted against
 * its preemptor's current attempt: a preemptor that was placed and then
 * lost its place (its node lost, its quota reclaimed: a job-requeued event
 * of its own) and evicts the same job again makes a new claim, bounded by
 * those faults and by the 6-a-minute rule. A livelock is the same claim
 * evicting the same job again and again. Called after every cycle (tick)
 * and every step (check). */
static int scan_events(run_t *r, int step)
{
    static const st_who_t admin = {ST_ROLE_ADMIN, "", "dst", NULL};
    st_event_list_t out;
    int64_t t;
    int rc = 0;

    if (st_events(S(r), &admin, r->ev_seen, 10000, 0, &out, &t, NULL) < 0)
        return 0;
    r->ev_seen = out.last;
    for (int i = 0; i < out.n; i++) {
        const char *type = out.v[i].type;
        const char *msg = out.v[i].message;
        uint64_t job = out.v[i].job;
        bool evicted = !strcmp(type, "job-preempting") || !strcmp(type, "job-preempted") ||
                       !strcmp(type, "job-reclaiming") ||
                       (!strcmp(type, "job-requeued") && msg && strstr(msg, "before it started"));
        if (job && !strcmp(type, "job-requeued"))
            count_of(r, job)->gen++; /* after the eviction it may also be */
        if (!evicted || !job)
            continue;
        uint64_t pre = preemptor_of(r, job);
        int pre_gen = pre ? count_of(r, pre)->gen : 0;
        ev_count_t *c = count_of(r, job);
        int64_t now = vc_now(r->v);
        int same = 0, recent = 0;
        c->at[c->n % 8] = now;
        c->by[c->n % 8] = pre;
        c->by_gen[c->n % 8] = pre_gen;
        c->n++;
        for (int k = 0; k < 8 && k < c->n; k++)
            if (now - c->at[k] <= 60000000000LL) {
                recent++;
                same += pre && c->by[k] == pre && c->by_gen[k] == pre_gen;
            }
        if ((recent > 6 || same >= 3) && !skipped("P1")) {
            rc = failf(r, step,
                       "P1 livelock: job %llu evicted %d times in the last minute, %d of them for "
                       "job %llu (last: %s: %s)",
                       (unsigned long long)job, recent, same, (unsigned long long)pre, type,
                       msg ? msg : "");
            break;
        }
    }
    st_event_list_free(&out);
    return rc;
}

static int check(run_t *r, int step)
{
    st_t *s = S(r);
    arb_err_t err = {{0}};

    if (st_check(s, &err) < 0)
        return failf(r, step, "S1 capacity: %s", err.msg);
    if (vc_check_agents(r->v, &err) < 0)
        return failf(r, step, "S2 agents: %s", err.msg);
    for (int i = 0; i < s->nactive; i++) {
        const arb_job_t *j = s->active[i]->j;
        if (held(j) && !s->active[i]->own_j && j->nalloc < j->gang_min)
            return failf(r, step, "S3 gang: job %llu holds %d tasks, its gang minimum is %d",
                         (unsigned long long)s->active[i]->id, j->nalloc, j->gang_min);
    }
    for (int k = 0; k < r->nacked; k++) {
        uint64_t id = r->acked[k];
        st_job_t *sj = st_job_find(s, id);
        if (!sj)
            return failf(r, step, "S4 lost: accepted job %llu is gone", (unsigned long long)id);
        arb_job_state_t st = sj->j->state;
        bool end = st == ARB_JOB_SUCCEEDED || st == ARB_JOB_FAILED || st == ARB_JOB_CANCELLED;
        if (id >= r->capended) {
            size_t cap = (id + 1) * 2;
            r->ended = realloc(r->ended, cap);
            memset(r->ended + r->capended, 0, cap - r->capended);
            r->capended = cap;
        }
        if (r->ended[id] && (!end || r->ended[id] != (int8_t)(st + 1)))
            return failf(r, step, "S4 ended job %llu is %s now (it was %s)", (unsigned long long)id,
                         arb_job_state_name(st),
                         arb_job_state_name((arb_job_state_t)(r->ended[id] - 1)));
        if (end)
            r->ended[id] = (int8_t)(st + 1);
    }
    return scan_events(r, step);
}

/* P2: every pending job that explain says fits now is placed by the next cycle. */
static int tick(run_t *r, int step, int64_t dt)
{
    arb_err_t err = {{0}};
    st_t *s;
    uint64_t fits[64];
    int nfits = 0;

    vc_advance(r->v, dt);
    if (vc_heartbeats(r->v, &err) < 0 || vc_cycle(r->v, NULL, &err) < 0)
        return failf(r, step, "E tick: %s", err.msg);
    if (scan_events(r, step) < 0)
        return -1;
    s = S(r);
    for (int i = 0; i < s->nactive && nfits < 64; i++) {
        st_job_t *sj = s->active[i];
        json_t *out = NULL;
        int64_t t;
        if (!queued(sj->j) || sj->own_j)
            continue;
        if (job_explain(s, &who_of[0], sj->id, &out, &t, &err) < 0)
            return failf(r, step, "E explain %llu: %s", (unsigned long long)sj->id, err.msg);
        json_t *fn = json_object_get(json_object_get(out, "explain"), "fits_now");
        const char *sum = json_string_value(json_object_get(out, "summary"));
        if (json_is_true(fn) || (!fn && sum && strstr(sum, "fits now;"))) /* older explains */
            fits[nfits++] = sj->id;
        if (verbose > 2) {
            char *txt = json_dumps(out, JSON_COMPACT);
            fprintf(stderr, "  explain %llu: %s\n", (unsigned long long)sj->id, txt);
            free(txt);
        }
        json_decref(out);
    }
    if (vc_cycle(r->v, NULL, &err) < 0)
        return failf(r, step, "E cycle: %s", err.msg);
    if (scan_events(r, step) < 0)
        return -1;
    for (int i = 0; i < nfits; i++) {
        st_job_t *sj = st_job_find(s, fits[i]);
        if (sj && queued(sj->j) && !sj->j->waiting && !skipped("P2"))
            return failf(r, step,
                         "P2 explain: job %llu was told it \"fits now\", but the next cycle did "
                         "not place it",
                         (unsigned long long)fits[i]);
    }
    return 0;
}

static int node_of(run_t *r, int a)
{
    int n = vc_nnodes(r->v);
    return n ? a % n : -1;
}

static int apply_op(run_t *r, int step, const dst_op_t *o)
{
    arb_err_t err = {{0}};
    int64_t t = 0;
    int i = node_of(r, o->a), rc;

    switch (o->k) {
    case OP_TICK:
        return tick(r, step, o->dt);
    case OP_SUBMIT: {
        uint64_t id = 0;
        if (vc_submit(r->v, &who_of[o->who], o->text, &id, &err) == 0) {
            r->acked = realloc(r->acked, (size_t)(r->nacked + 1) * sizeof *r->acked);
            r->acked[r->nacked++] = id;
        } else if (verbose) {
            fprintf(stderr, "  submit refused: %s\n", err.msg);
        }
        return 0;
    }
    case OP_CANCEL:
        if (r->nacked == 0)
            return 0;
        {
            st_job_view_t cv;
            st_job_cancel(S(r), &who_of[0], r->acked[o->a % r->nacked], -1, &cv, &t, &err);
            st_job_view_free(&cv);
            st_wait(S(r), t, NULL);
            return 0;
        }
    case OP_JOIN: {
        char name[16];
        json_error_t je;
        json_t *inv = json_loads(r->w->shape[o->a % r->w->nshapes], 0, &je);
        if (!inv)
            return failf(r, step, "E shape: %s", je.text);
        snprintf(name, sizeof name, "n%d", vc_nnodes(r->v) + 1);
        vc_node_add(r->v, name, inv);
        json_decref(inv);
        if ((rc = vc_report(r->v, vc_nnodes(r->v) - 1, &err)) < 0 && verbose)
            fprintf(stderr, "  join refused: %s\n", err.msg);
        return 0;
    }
    case OP_DOWN:
        if (i >= 0)
            vc_agent_down(r->v, i, true);
        return 0;
    case OP_UP:
        if (i >= 0)
            vc_agent_up(r->v, i);
        return 0;
    case OP_CUT:
    case OP_HEAL:
        if (i >= 0)
            vc_cut(r->v, i, o->k == OP_CUT);
        return 0;
    case OP_DRAIN:
    case OP_UNDRAIN:
        if (i < 0)
            return 0;
        {
            static const st_who_t op = {ST_ROLE_ADMIN, "", "dst", NULL};
            st_node_view_t nv;
            st_node_cordon(S(r), &op, vc_node(r->v, i)->name,
                           o->k == OP_DRAIN ? ST_CORDON : ST_UNCORDON, NULL, -1, &nv, &t, &err);
            st_node_view_free(&nv);
        }
        st_wait(S(r), t, NULL);
        return 0;
    case OP_REPLAY:
        if (i >= 0)
            vc_replay(r->v, i, &err);
        return 0;
    case OP_GPU: /* its next report says so */
        if (i >= 0) {
            vc_node_t *n = vc_node(r->v, i);
            n->sick ^= (uint16_t)(1u << (o->who % 16));
        }
        return 0;
    case OP_RESTART:
        if (vc_restart(r->v, &err) < 0)
            return failf(r, step, "E restart: %s", err.msg);
        return 0;
    default:
        return 0;
    }
}

/* Would spec (submitted by who) be placed alone on a fresh controller with
 * the nodes that are in service now and the same config? */
static bool fits_alone(run_t *r, st_job_t *sj)
{
    char dir[64] = "/tmp/arb_dst_o.XXXXXX";
    vc_conf_t vcc = {.dir = dir, .st = &r->conf};
    vc_t *o = NULL;
    arb_err_t err;
    bool ok = false;
    uint64_t id = 0;
    st_who_t who = {ST_ROLE_ADMIN, sj->team, "oracle", NULL};
    char cmd[128];

    if (!mkdtemp(dir) || vc_open(&vcc, &o, &err) < 0)
        return false;
    for (int i = 0; i < vc_nnodes(r->v); i++) {
        vc_node_t *n = vc_node(r->v, i);
        arb_node_t *an = arb_cluster_find_node(&S(r)->cluster, n->name);
        if (!an || an->state != ARB_NODE_READY)
            continue;
        vc_report(o, vc_node_add(o, n->name, n->inv), &err);
    }
    /* the job as it is now (its queue: a user's team queue is explicit in
     * the spec only for admins) */
    if (sj->team[0])
        who.role = ST_ROLE_USER;
    char *spec = NULL; /* as submitted: kept in the store (specs/ID), not in memory */
    size_t speclen = 0;
    if (st_job_spec_text(S(r), sj, &spec, &speclen, &err) == 0 &&
        vc_submit(o, &who, spec, &id, &err) == 0) {
        vc_settle(o, 3, 20, &err);
        st_job_t *x = st_job_find(vc_state(o), id);
        ok = x && !queued(x->j);
    }
    free(spec);
    vc_close(o);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "arb_dst: could not remove %s\n", dir);
    return ok;
}

/* P3: stop the faults, bring every node back, cancel services, drain. */
static int drain_phase(run_t *r, int step)
{
    arb_err_t err = {{0}};
    st_t *s;
    int idle = 0;

    for (int i = 0; i < vc_nnodes(r->v); i++) {
        st_node_view_t nv;
        int64_t t;
        vc_cut(r->v, i, false);
        vc_agent_up(r->v, i);
        vc_node(r->v, i)->sick = 0;
        static const st_who_t op = {ST_ROLE_ADMIN, "", "dst", NULL};
        st_node_cordon(S(r), &op, vc_node(r->v, i)->name, ST_UNCORDON, NULL, -1, &nv, &t, &err);
        st_node_view_free(&nv);
        st_wait(S(r), t, NULL);
    }
    s = S(r);
    for (int i = 0; i < s->nactive; i++)
        if (s->active[i]->svc) {
            st_job_view_t out;
            int64_t t;
            st_job_cancel(s, &who_of[0], s->active[i]->id, -1, &out, &t, &err);
            st_job_view_free(&out);
            st_wait(s, t, NULL);
        }
    /* up to 20 minutes of virtual time, a second at a time (no job runs
     * longer than 90 s; a queue that has not drained by then is busy) */
    for (int k = 0; k < 1200 && idle < 30; k++) {
        bool any_held = false;
        if (tick(r, step, 1000000000LL) < 0 || check(r, step) < 0)
            return -1;
        s = S(r);
        for (int i = 0; i < s->nactive; i++)
            any_held |= held(s->active[i]->j) && !s->active[i]->own_j;
        idle = any_held ? 0 : idle + 1;
    }
    s = S(r);
    if (idle < 30 || skipped("P3"))
        return 0; /* still busy: nothing to judge */
    for (int i = 0; i < s->nactive; i++) {
        st_job_t *sj = s->active[i];
        if (!queued(sj->j) || sj->own_j || sj->svc_of)
            continue;
        if (fits_alone(r, sj)) {
            json_t *out = NULL;
            int64_t t;
            job_explain(s, &who_of[0], sj->id, &out, &t, &err);
            int rc = failf(r, step,
                           "P3 freeze: job %llu '%s' fits the idle cluster alone but stays "
                           "pending on an idle cluster; explain: %s",
                           (unsigned long long)sj->id, sj->j->name,
                           json_string_value(json_object_get(out, "summary")));
            json_decref(out);
            return rc;
        }
    }
    return 0;
}

/* Run the steps; 0 when every check held, -1 with r->fail set. */
static int run(const dst_world_t *w, const dst_op_t *ops, int nops, bool drain, char *fail,
               size_t nfail, int *fail_step)
{
    run_t r;
    vc_conf_t vcc;
    arb_err_t err = {{0}};
    char cmd[128];
    int rc = 0;

    memset(&r, 0, sizeof r);
    r.w = w;
    dst_conf(w, &r.conf);
    snprintf(r.dir, sizeof r.dir, "/tmp/arb_dst.XXXXXX");
    if (!mkdtemp(r.dir)) {
        snprintf(fail, nfail, "E mkdtemp failed");
        return -1;
    }
    vcc = (vc_conf_t){.dir = r.dir, .st = &r.conf};
    if (vc_open(&vcc, &r.v, &err) < 0) {
        snprintf(fail, nfail, "E open: %s", err.msg);
        rc = -1;
        goto out;
    }
    for (int i = 0; i < nops && rc == 0; i++) {
        if (verbose > 1)
            fprintf(stderr, "step %d: %s\n", i, dst_op_names[ops[i].k]);
        rc = apply_op(&r, i, &ops[i]);
        if (rc == 0)
            rc = check(&r, i);
    }
    if (rc == 0 && drain)
        rc = drain_phase(&r, nops);
    if (rc < 0) {
        snprintf(fail, nfail, "%s", r.fail);
        *fail_step = r.fail_step;
        if (verbose > 1 && r.v) { /* the event log, to read what happened */
            static const st_who_t admin = {ST_ROLE_ADMIN, "", "dst", NULL};
            st_event_list_t out;
            int64_t t;
            if (st_events(S(&r), &admin, 0, 10000, 0, &out, &t, NULL) == 0) {
                for (int i = 0; i < out.n; i++)
                    fprintf(stderr, "  event %s: %s\n", out.v[i].type, out.v[i].message);
                st_event_list_free(&out);
            }
        }
    }
out:
    vc_close(r.v);
    st_conf_free(&r.conf);
    free(r.acked);
    free(r.ended);
    free(r.evs);
    snprintf(cmd, sizeof cmd, "rm -rf %s", r.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "arb_dst: could not remove %s\n", r.dir);
    return rc;
}

/* ---- shrinking ---------------------------------------------------------------------------- */

/* Same failure: the same check (its first two words, "P1 livelock:"). */
static bool same_kind(const char *a, const char *b)
{
    const char *sa = strchr(a, ' '), *sb = strchr(b, ' ');
    size_t na = sa ? (size_t)(sa - a) : strlen(a), nb = sb ? (size_t)(sb - b) : strlen(b);
    return na == nb && strncmp(a, b, na) == 0;
}

/* Remove chunks of steps (halves, then quarters, ... then single steps)
 * while the same check still fails. ops is rewritten in place. */
static int shrink(const dst_world_t *w, dst_op_t *ops, int n, const char *want, char *fail,
                  size_t nfail)
{
    dst_op_t *tmp = malloc((size_t)(n + 1) * sizeof *tmp);
    int chunk = n / 2 > 0 ? n / 2 : 1, runs = 0;

    while (chunk >= 1 && runs < 400) {
        bool progress = false;
        for (int at = 0; at + chunk <= n && runs < 400;) {
            int m = 0, fs = 0;
            char f[1024] = "";
            for (int i = 0; i < n; i++)
                if (i < at || i >= at + chunk)
                    tmp[m++] = ops[i];
            runs++;
            /* the drain phase only when that is where it failed (P3) */
            if (run(w, tmp, m, strncmp(want, "P3", 2) == 0, f, sizeof f, &fs) < 0 &&
                same_kind(f, want)) {
                for (int i = at; i < at + chunk; i++)
                    free(ops[i].text);
                memcpy(ops, tmp, (size_t)m * sizeof *ops);
                n = m;
                snprintf(fail, nfail, "%s", f);
                progress = true;
            } else {
                at += chunk;
            }
        }
        if (!progress)
            chunk /= 2;
    }
    free(tmp);
    return n;
}

/* ---- main -------------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int report_failure(const dst_world_t *w, dst_op_t *ops, int nops, const char *fail, int step,
                          const char *outpath)
{
    char f[1024];
    int n;

    fprintf(stderr, "arb_dst: seed %llu FAILED at step %d of %d: %s\n", (unsigned long long)w->seed,
            step, nops, fail);
    snprintf(f, sizeof f, "%s", fail);
    n = step + 1 < nops ? step + 1 : nops; /* nothing after the failing step matters */
    for (int i = n; i < nops; i++) {
        free(ops[i].text);
        ops[i].text = NULL;
    }
    n = shrink(w, ops, n, fail, f, sizeof f);
    fprintf(stderr, "arb_dst: minimal replay (%d steps), failing with: %s\n", n, f);
    dst_write(stderr, w, ops, n);
    FILE *o = fopen(outpath, "w");
    if (o) {
        fprintf(o, "# arb_dst --replay %s\n# %s\n", outpath, f);
        dst_write(o, w, ops, n);
        fclose(o);
        fprintf(stderr, "arb_dst: written to %s; rerun: arb_dst --replay %s\n", outpath, outpath);
    }
    return n;
}

int main(int argc, char **argv)
{
    unsigned long long a = 1, b = 20;
    int steps = 300, failed = 0, seeds = 0, keep = 0, open_end = 1;
    double budget = 0, t0 = now_s();
    const char *replay = NULL, *outpath = "/tmp/arb_dst_fail.txt";

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
            if (sscanf(argv[++i], "%llu-%llu", &a, &b) == 1) {
                b = a;
                open_end = 1; /* one seed: or, with --budget-s, every seed from it */
            } else {
                open_end = 0;
            }
        } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--budget-s") && i + 1 < argc) {
            budget = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--replay") && i + 1 < argc) {
            replay = argv[++i];
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            outpath = argv[++i];
        } else if (!strcmp(argv[i], "--skip") && i + 1 < argc) {
            snprintf(skip, sizeof skip, "%s", argv[++i]);
        } else if (!strcmp(argv[i], "-k")) {
            keep = 1;
        } else if (!strcmp(argv[i], "-v")) {
            verbose++;
        } else {
            fprintf(stderr,
                    "usage: arb_dst [--seeds A-B] [--steps N] [--budget-s S] [--replay FILE] "
                    "[--out FILE] [-k] [--skip P2,...] [-v]\n");
            return 2;
        }
    }
    if (replay) {
        dst_world_t w;
        dst_op_t *ops;
        int nops, fs = 0;
        char f[1024] = "";
        arb_err_t err;
        FILE *in = fopen(replay, "r");
        if (!in || dst_read(in, &w, &ops, &nops, &err) < 0) {
            fprintf(stderr, "arb_dst: %s: %s\n", replay, in ? err.msg : "cannot open");
            return 2;
        }
        fclose(in);
        int failed_at = run(&w, ops, nops, true, f, sizeof f, &fs);
        dst_free(&w, ops, nops);
        if (failed_at < 0) {
            fprintf(stderr, "arb_dst: replay FAILED at step %d: %s\n", fs, f);
            return 1;
        }
        printf("arb_dst: replay passed (%d steps)\n", nops);
        return 0;
    }
    for (unsigned long long seed = a; seed <= b || (budget > 0 && open_end); seed++) {
        dst_world_t w;
        dst_op_t *ops;
        int nops, fs = 0;
        char f[1024] = "";
        if (budget > 0 && now_s() - t0 > budget)
            break;
        if (budget > 0) /* a soak: should a seed crash the process, its log names it */
            fprintf(stderr, "arb_dst: seed %llu\n", seed);
        dst_generate(seed, steps, &w, &ops, &nops);
        seeds++;
        if (run(&w, ops, nops, true, f, sizeof f, &fs) < 0) {
            char path[512];
            failed++;
            snprintf(path, sizeof path, keep ? "%s.%llu" : "%s", outpath, seed);
            nops = report_failure(&w, ops, nops, f, fs, path);
            dst_free(&w, ops, nops);
            if (!keep)
                break; /* the first failure is the one to fix */
            continue;
        }
        if (verbose)
            printf("seed %llu ok\n", seed);
        dst_free(&w, ops, nops);
    }
    printf("arb_dst: %d seed%s x %d steps, %d failed, %.1f s\n", seeds, seeds == 1 ? "" : "s",
           steps, failed, now_s() - t0);
    return failed ? 1 : 0;
}
