/*
 * config.c: the controller's configuration file (YAML), read with the spec
 * loader's value layer (src/spec/sval.h) so its messages have the same
 * "FILE:LINE:COL: PATH: what; fix" form. The keys are one table,
 * st_conf_keys, from which `arbiter controller --help-config` and
 * docs/api.md are made.
 *
 *   scheduler: {policy: default, queue: priority, backfill: false,
 *               preemption: false, starvation: 1h, interval: 1s}
 *   nodes:     {lease: 10s, grace: 5s, staleness: 5s}
 *   queues:    [{name: team-a, cohort: research, weight: 1,
 *                nominal: {nvidia.com/gpu: 16, cpu: 128, memory: 1Ti},
 *                borrowingLimit: {nvidia.com/gpu: 8}}]
 *   store:     {synchronous: full}
 *   events:    {retention: 100000}
 *   jobs:      {history: 10000}
 *   admission: {rejectUnfittable: true}
 *   api:       {idempotencyRetention: 24h}
 */
#include <libfyaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/sval.h"
#include "state/state.h"
#include "util/buf.h"

const st_conf_key_t st_conf_keys[] = {
    {"scheduler.policy", "string", "default", "scoring profile (pack, spread, fgd, ...)"},
    {"scheduler.queue", "fifo|priority|drf", "priority", "queue order"},
    {"scheduler.backfill", "bool", "false", "EASY backfill behind a blocked head job"},
    {"scheduler.preemption", "bool", "false", "evict lower-priority preemptible jobs"},
    {"scheduler.starvation", "duration", "0 (off)", "a job waiting longer goes first"},
    {"scheduler.interval", "duration", "1s", "a cycle at least this often (and after changes)"},
    {"scheduler.defaultTimeLimit", "duration", "none",
     "the timeLimit of a job that gives none, in a queue without its own (Slurm's DefaultTime)"},
    {"scheduler.maxTimeLimit", "duration", "none",
     "the longest timeLimit a job may ask for, in a queue without its own (Slurm's MaxTime); "
     "a job that gives none gets it when there is no default"},
    {"nodes.lease", "duration", "10s",
     "a node silent longer goes NotReady (its agent fences itself at the same point)"},
    {"nodes.grace", "duration", "5s",
     "a NotReady node's tasks are declared lost this long after its lease ran out, then "
     "requeued (or failed: restartable: false); at least 1s"},
    {"nodes.staleness", "duration", "half the lease (5s)",
     "nodes whose report is older get no new work (0: off); below the lease, or a node would "
     "go NotReady first and the filter never act"},
    {"queues[]", "list", "none",
     "name, cohort, weight, nominal, borrowingLimit, defaultTimeLimit, maxTimeLimit; a job "
     "without queue: goes to the quota-less queue 'default'"},
    {"store.synchronous", "full|normal", "full", "fsync per commit (normal: kill -9 safe only)"},
    {"events.retention", "int", "100000", "events kept in the log"},
    {"jobs.history", "int", "10000",
     "ended jobs kept in memory (the newest to end); older ones stay in the store, where "
     "`arbiter job ID` still reads them, but leave `arbiter jobs` lists; 0..10000000"},
    {"admission.rejectUnfittable", "bool", "true",
     "reject jobs no registered node could ever hold"},
    {"resources.capRequests", "bool", "false",
     "cap a task's CPU and memory at its request when it gives no limit (as in Kubernetes, "
     "limits are the caps and a request alone caps nothing)"},
    {"api.idempotencyRetention", "duration", "24h",
     "an Idempotency-Key answers with its job this long after the job's submit time (wall "
     "clock), then it is deleted and the key makes a new job; 0 keeps keys for ever"},
    {"priorityClasses[]", "list", "the built-ins",
     "name, value (int32), preemptible (the default of the class's jobs), description; "
     "priorityClassName resolves through them (unknown: 422 listing them); they add to, or "
     "redefine, the built-ins best-effort 0, low 100, normal 500, high 1000, critical 10000; "
     "a job keeps the value (and preemptible) it was given at submission across restarts, "
     "also when its class is changed or removed (event job-priority-kept)"},
    {NULL, NULL, NULL, NULL},
};

static const char *const root_keys[] = {
    "scheduler",       "nodes", "queues",    "store", "events", "admission",
    "priorityClasses", "api",   "resources", "jobs",  NULL};
static const char *const resources_keys[] = {"capRequests", NULL};
static const char *const class_keys[] = {"name", "value", "preemptible", "description", NULL};
static const char *const sched_keys[] = {"policy",           "queue",        "backfill",
                                         "preemption",       "starvation",   "interval",
                                         "defaultTimeLimit", "maxTimeLimit", NULL};
static const char *const nodes_keys[] = {"lease", "grace", "staleness", NULL};
static const char *const queue_keys[] = {
    "name",           "cohort",           "weight",       "nominal",
    "borrowingLimit", "defaultTimeLimit", "maxTimeLimit", NULL};
static const char *const res_keys[] = {"nvidia.com/gpu", "cpu", "memory", NULL};
static const char *const store_keys[] = {"synchronous", NULL};
static const char *const events_keys[] = {"retention", NULL};
static const char *const jobs_keys[] = {"history", NULL};
static const char *const adm_keys[] = {"rejectUnfittable", NULL};
static const char *const api_keys[] = {"idempotencyRetention", NULL};

void st_conf_init(st_conf_t *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->policy, sizeof c->policy, "default");
    c->queue_policy = ARB_QP_PRIORITY;
    c->interval_ns = 1000000000LL;
    c->lease_ns = 10000000000LL;
    c->grace_ns = 5000000000LL;
    c->stale_ns = 5000000000LL; /* half the lease */
    c->event_retention = 100000;
    c->job_history = 10000;
    c->sync = STORE_SYNC_FULL;
    c->reject_unfittable = true;
    c->idem_retention_ns = 24 * 3600000000000LL;
}

void st_conf_free(st_conf_t *c)
{
    free(c->classes);
    c->classes = NULL;
    c->nclasses = 0;
    free(c->queues);
    c->queues = NULL;
    c->nqueues = 0;
}

/* A duration in the one grammar (src/util/duration.h), into ns. */
static int duration(sx_t *x, const sval_t *v, int64_t *ns)
{
    return sv_duration_ns(x, v, ns);
}

static int resmap(sx_t *x, const sval_t *v, arb_res_t *r)
{
    bool is = false;
    sval_t f;
    int rc;

    memset(r, 0, sizeof *r);
    if ((rc = sv_map(x, v, &is)) < 0 || !is)
        return rc;
    if ((rc = sv_check_keys(x, v, res_keys)) < 0)
        return rc;
    if (sv_get(v, "nvidia.com/gpu", &f)) {
        int64_t g = 0;
        if ((rc = sv_qty(x, &f, ARB_QTY_MILLI, &g)) < 0)
            return rc;
        r->gpu_milli = g;
    }
    if (sv_get(v, "cpu", &f) && (rc = sv_qty(x, &f, ARB_QTY_MILLI, &r->cpu_milli)) < 0)
        return rc;
    if (sv_get(v, "memory", &f) && (rc = sv_qty(x, &f, ARB_QTY_BYTES, &r->mem_bytes)) < 0)
        return rc;
    return 0;
}

/* defaultTimeLimit and maxTimeLimit of mapping v, in seconds. */
static int time_limits(sx_t *x, const sval_t *v, int64_t *def_s, int64_t *max_s)
{
    sval_t f, fm;
    int64_t ns = 0;
    int rc = 0;

    if (sv_get(v, "defaultTimeLimit", &f) && (rc = duration(x, &f, &ns)) == 0) {
        if (ns % 1000000000LL || ns == 0)
            return sv_fail(x, &f, -EINVAL, "a time limit is whole seconds, at least 1s");
        *def_s = ns / 1000000000LL;
    }
    if (rc == 0 && sv_get(v, "maxTimeLimit", &fm) && (rc = duration(x, &fm, &ns)) == 0) {
        if (ns % 1000000000LL || ns == 0)
            return sv_fail(x, &fm, -EINVAL, "a time limit is whole seconds, at least 1s");
        *max_s = ns / 1000000000LL;
        if (*def_s > *max_s)
            return sv_fail(x, &fm, -EINVAL,
                           "maxTimeLimit %llds is below defaultTimeLimit %llds; raise it or "
                           "lower the default",
                           (long long)*max_s, (long long)*def_s);
    }
    return rc;
}

static int queues(sx_t *x, const sval_t *v, st_conf_t *c)
{
    int n = 0, rc = sv_seq(x, v, 1000, &n);

    if (rc < 0 || n == 0)
        return rc;
    st_queue_conf_t *q = calloc((size_t)n, sizeof *q);
    if (!q)
        return sv_oom(x, v);
    for (int i = 0; i < n && rc == 0; i++) {
        sval_t iv, f;
        bool is;
        sv_item(&iv, v, fy_node_sequence_get_by_index(v->n, i), i);
        q[i].weight = 1;
        if ((rc = sv_map(x, &iv, &is)) < 0 || (rc = sv_check_keys(x, &iv, queue_keys)) < 0)
            break;
        if (!sv_get(&iv, "name", &f)) {
            rc = sv_fail(x, &iv, -EINVAL, "a queue needs a name");
            break;
        }
        if ((rc = sv_text(x, &f, q[i].name, sizeof q[i].name, false)) < 0)
            break;
        if (!strcmp(q[i].name, "default")) {
            rc = sv_fail(x, &f, -EINVAL,
                         "'default' is the quota-less queue of jobs without queue:; give this "
                         "queue another name");
            break;
        }
        for (int k = 0; k < i; k++)
            if (strcmp(q[k].name, q[i].name) == 0)
                rc = sv_fail(x, &f, -EINVAL, "queue '%s' is defined twice", q[i].name);
        if (rc == 0 && sv_get(&iv, "cohort", &f))
            rc = sv_text(x, &f, q[i].cohort, sizeof q[i].cohort, true);
        if (rc == 0 && sv_get(&iv, "weight", &f))
            rc = sv_double(x, &f, 0.001, 1e6, &q[i].weight);
        if (rc == 0 && sv_get(&iv, "nominal", &f)) {
            q[i].has_quota = true;
            rc = resmap(x, &f, &q[i].nominal);
        }
        if (rc == 0 && sv_get(&iv, "borrowingLimit", &f))
            rc = resmap(x, &f, &q[i].borrow_limit);
        if (rc == 0)
            rc = time_limits(x, &iv, &q[i].default_limit_s, &q[i].max_limit_s);
    }
    if (rc < 0) {
        free(q);
        return rc;
    }
    free(c->queues);
    c->queues = q;
    c->nqueues = n;
    return 0;
}

/* priorityClasses: the built-ins first, each config entry redefining one of
 * them (same name) or adding one. */
static int classes(sx_t *x, const sval_t *v, st_conf_t *c)
{
    int n = 0, rc = sv_seq(x, v, 1000, &n), nb;
    spec_prio_class_t *t;

    if (rc < 0)
        return rc;
    if (!(t = calloc((size_t)n + 16, sizeof *t)))
        return sv_oom(x, v);
    nb = spec_priority_builtins(t, 16);
    int total = nb;
    for (int i = 0; i < n && rc == 0; i++) {
        sval_t iv, f;
        bool is, b;
        spec_prio_class_t k = {.preemptible = -1};
        int64_t val;
        sv_item(&iv, v, fy_node_sequence_get_by_index(v->n, i), i);
        if ((rc = sv_map(x, &iv, &is)) < 0 || (rc = sv_check_keys(x, &iv, class_keys)) < 0)
            break;
        if (!sv_get(&iv, "name", &f)) {
            rc = sv_fail(x, &iv, -EINVAL, "a priority class needs a name");
            break;
        }
        if ((rc = sv_text(x, &f, k.name, sizeof k.name, false)) < 0)
            break;
        for (int m = nb; m < total; m++)
            if (strcmp(t[m].name, k.name) == 0)
                rc = sv_fail(x, &f, -EINVAL, "priority class '%s' is defined twice", k.name);
        if (rc == 0 && !sv_get(&iv, "value", &f))
            rc = sv_fail(x, &iv, -EINVAL, "priority class '%s' needs a value (an integer)", k.name);
        if (rc == 0 && (rc = sv_int(x, &f, INT32_MIN, INT32_MAX, &val)) == 0)
            k.value = (int32_t)val;
        if (rc == 0 && sv_get(&iv, "preemptible", &f) && (rc = sv_bool(x, &f, &b)) == 0)
            k.preemptible = b;
        if (rc == 0 && sv_get(&iv, "description", &f))
            rc = sv_text(x, &f, k.description, sizeof k.description, true);
        if (rc < 0)
            break;
        int at = total;
        for (int m = 0; m < nb; m++)
            if (strcmp(t[m].name, k.name) == 0)
                at = m;
        t[at] = k;
        if (at == total)
            total++;
    }
    if (rc < 0) {
        free(t);
        return rc;
    }
    free(c->classes);
    c->classes = t;
    c->nclasses = total;
    return 0;
}

int st_conf_load_mem(const char *name, const char *buf, size_t len, st_conf_t *c, arb_err_t *err)
{
    static const char *const qp[] = {"fifo", "priority", "drf"};
    static const char *const syncs[] = {"full", "normal"};
    st_conf_t n = *c;
    sv_doc_t d;
    sval_t root, sec, f;
    sx_t x = {.file = name, .err = err};
    bool is;
    int rc, k;

    n.queues = NULL;
    n.nqueues = 0;
    n.classes = NULL;
    n.nclasses = 0;
    if ((rc = sv_doc_open(name, buf, len, &d, err)) < 0)
        return rc;
    sv_root(&root, fy_document_root(d.doc), "");
    rc = sv_check_keys(&x, &root, root_keys);
    if (rc == 0 && sv_get(&root, "scheduler", &sec)) {
        if ((rc = sv_map(&x, &sec, &is)) == 0 && is)
            rc = sv_check_keys(&x, &sec, sched_keys);
        if (rc == 0 && sv_get(&sec, "policy", &f)) {
            arb_profile_t p;
            if ((rc = sv_text(&x, &f, n.policy, sizeof n.policy, false)) == 0 &&
                arb_profile_lookup(n.policy, &p, err) < 0)
                rc = sv_prefix(&x, &f, -EINVAL, true);
        }
        if (rc == 0 && sv_get(&sec, "queue", &f) && (rc = sv_enum(&x, &f, qp, 3, &k)) == 0)
            n.queue_policy = (arb_queue_policy_t)k;
        if (rc == 0 && sv_get(&sec, "backfill", &f))
            rc = sv_bool(&x, &f, &n.backfill);
        if (rc == 0 && sv_get(&sec, "preemption", &f))
            rc = sv_bool(&x, &f, &n.preemption);
        if (rc == 0 && sv_get(&sec, "starvation", &f))
            rc = duration(&x, &f, &n.starvation_ns);
        if (rc == 0)
            rc = time_limits(&x, &sec, &n.default_limit_s, &n.max_limit_s);
        if (rc == 0 && sv_get(&sec, "interval", &f) &&
            (rc = duration(&x, &f, &n.interval_ns)) == 0 && n.interval_ns < 1000000)
            rc = sv_fail(&x, &f, -EINVAL, "the interval must be at least 1ms");
    }
    if (rc == 0 && sv_get(&root, "nodes", &sec)) {
        if ((rc = sv_map(&x, &sec, &is)) == 0 && is)
            rc = sv_check_keys(&x, &sec, nodes_keys);
        if (rc == 0 && sv_get(&sec, "lease", &f) && (rc = duration(&x, &f, &n.lease_ns)) == 0 &&
            n.lease_ns < 100000000LL)
            rc = sv_fail(&x, &f, -EINVAL, "the lease must be at least 100ms");
        /* The grace covers the agent's reaction to its own lease running
         * out (it fences within 100 ms) and the two clocks' rates: never
         * less than a second. */
        if (rc == 0 && sv_get(&sec, "grace", &f) && (rc = duration(&x, &f, &n.grace_ns)) == 0 &&
            n.grace_ns < 1000000000LL)
            rc = sv_fail(&x, &f, -EINVAL,
                         "the grace must be at least 1s: the controller may re-place a silent "
                         "node's tasks only after its agent has surely fenced them");
        bool stale_set = false;
        if (rc == 0 && sv_get(&sec, "staleness", &f) && (rc = duration(&x, &f, &n.stale_ns)) == 0) {
            stale_set = true;
            if (n.stale_ns >= n.lease_ns)
                rc = sv_fail(&x, &f, -EINVAL,
                             "staleness %.1fs is not below the lease (%.1fs): a silent node goes "
                             "NotReady before its report counts as stale, so the filter would "
                             "never act; use less than the lease, or 0 to turn it off",
                             (double)n.stale_ns / 1e9, (double)n.lease_ns / 1e9);
        }
        if (rc == 0 && !stale_set)
            n.stale_ns = n.lease_ns / 2; /* follows the lease */
    }
    if (rc == 0 && sv_get(&root, "queues", &sec))
        rc = queues(&x, &sec, &n);
    if (rc == 0 && sv_get(&root, "priorityClasses", &sec))
        rc = classes(&x, &sec, &n);
    if (rc == 0 && sv_get(&root, "store", &sec)) {
        if ((rc = sv_map(&x, &sec, &is)) == 0 && is)
            rc = sv_check_keys(&x, &sec, store_keys);
        if (rc == 0 && sv_get(&sec, "synchronous", &f) && (rc = sv_enum(&x, &f, syncs, 2, &k)) == 0)
            n.sync = (store_sync_t)k;
    }
    if (rc == 0 && sv_get(&root, "events", &sec)) {
        int64_t r;
        if ((rc = sv_map(&x, &sec, &is)) == 0 && is)
            rc = sv_check_keys(&x, &sec, events_keys);
        if (rc == 0 && sv_get(&sec, "retention", &f) &&
            (rc = sv_int(&x, &f, 16, 10000000, &r)) == 0)
            n.event_retention = (int)r;
    }
    if (rc == 0 && sv_get(&root, "jobs", &sec)) {
        int64_t h;
        if ((rc = sv_map(&x, &sec, &is)) == 0 && is)
            rc = sv_check_keys(&x, &sec, jobs_keys);
        if (rc == 0 && sv_get(&sec, "history", &f) && (rc = sv_int(&x, &f, 0, 10000000, &h)) == 0)
            n.job_history = (int)h;
    }
    if (rc == 0 && sv_get(&root, "admission", &sec)) {
        if ((rc = sv_map(&x, &sec, &is)) == 0 && is)
            rc = sv_check_keys(&x, &sec, adm_keys);
        if (rc == 0 && sv_get(&sec, "rejectUnfittable", &f))
            rc = sv_bool(&x, &f, &n.reject_unfittable);
    }
    if (rc == 0 && sv_get(&root, "resources", &sec)) {
        if ((rc = sv_map(&x, &sec, &is)) == 0 && is)
            rc = sv_check_keys(&x, &sec, resources_keys);
        if (rc == 0 && sv_get(&sec, "capRequests", &f))
            rc = sv_bool(&x, &f, &n.cap_requests);
    }
    if (rc == 0 && sv_get(&root, "api", &sec)) {
        if ((rc = sv_map(&x, &sec, &is)) == 0 && is)
            rc = sv_check_keys(&x, &sec, api_keys);
        if (rc == 0 && sv_get(&sec, "idempotencyRetention", &f) &&
            (rc = duration(&x, &f, &n.idem_retention_ns)) == 0 && n.idem_retention_ns > 0 &&
            n.idem_retention_ns < 1000000000LL)
            rc = sv_fail(&x, &f, -EINVAL,
                         "keep keys at least 1s (clients retry for longer); 0 keeps them for ever");
    }
    sv_doc_close(&d);
    if (rc < 0) {
        free(n.queues);
        free(n.classes);
        return rc;
    }
    if (!n.classes) { /* no priorityClasses: section, keep c's */
        n.classes = c->classes;
        n.nclasses = c->nclasses;
    } else {
        free(c->classes);
    }
    if (!n.queues) { /* no queues: section, keep the ones c had */
        n.queues = c->queues;
        n.nqueues = c->nqueues;
    } else {
        free(c->queues);
    }
    *c = n;
    return 0;
}

int st_conf_load_file(const char *path, st_conf_t *c, arb_err_t *err)
{
    FILE *f = fopen(path, "rb");
    arb_buf_t b = {.max = 16u << 20};
    int rc;

    if (!f)
        return arb_errf(err, -errno, "config '%s': %s", path, strerror(errno));
    rc = arb_buf_read(&b, f);
    fclose(f);
    if (rc == 0)
        rc = st_conf_load_mem(path, b.p ? b.p : "", b.len, c, err);
    else if (rc == -EIO)
        rc = arb_errf(err, rc, "config '%s': read error", path);
    else
        rc = arb_errf(err, -EFBIG, "config '%s': too large", path);
    arb_buf_free(&b);
    return rc;
}
