/*
 * config.c: the controller's configuration file (YAML), read through one
 * schema table per section (src/spec/schema.h) with the spec loader's
 * value layer, so its messages have the same "FILE:LINE:COL: PATH: what;
 * fix" form. The scheduler settings and queues are the tables a scenario
 * reads too (src/spec/schema_sched.c); the reference in docs/api.md
 * (`arbiter controller --api-doc`) and `arbiter help config` are made from
 * the same tables (st_conf_doc).
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/schema_sched.h"
#include "spec/sval.h"
#include "state/state.h"
#include "util/buf.h"

/* The document as the tables read it; st_conf_t is filled from it. */
typedef struct conf_nodes {
    int64_t lease_ns, grace_ns, stale_ns;
} conf_nodes_t;

typedef struct conf_doc {
    spec_sched_t sched;
    conf_nodes_t nodes;
    int nqueues;
    spec_queue_t *queues; /* NULL: no queues: section */
    int nclasses;
    spec_prio_class_t *classes; /* NULL: no priorityClasses: section */
    int sync;                   /* store_sync_t */
    int event_retention, job_history;
    bool reject_unfittable, cap_requests;
    int64_t idem_retention_ns;
} conf_doc_t;

/* ---- nodes ---------------------------------------------------------------------- */

static int check_staleness(sx_t *x, const sval_t *v, void *obj)
{
    const conf_nodes_t *n = obj;

    if (n->stale_ns >= n->lease_ns)
        return sv_fail(x, v, -EINVAL,
                       "staleness %.1fs is not below the lease (%.1fs): a silent node goes "
                       "NotReady before its report counts as stale, so the filter would never "
                       "act; use less than the lease, or 0 to turn it off",
                       (double)n->stale_ns / 1e9, (double)n->lease_ns / 1e9);
    return 0;
}

/* A staleness the file does not give follows the lease. */
static int nodes_check(sx_t *x, const sval_t *map, void *obj, unsigned ctx)
{
    conf_nodes_t *n = obj;
    sval_t f;

    (void)x;
    (void)ctx;
    if (!sv_get(map, "staleness", &f))
        n->stale_ns = n->lease_ns / 2;
    return 0;
}

static const sc_field_t nodes_fields[] = {
    {.key = "lease",
     .type = SC_DURATION,
     .off = offsetof(conf_nodes_t, lease_ns),
     .lo = 100000000LL,
     .hi = INT64_MAX,
     .range_msg = "the lease must be at least 100ms",
     .def = "10s",
     .help = "a node silent longer goes NotReady (its agent fences itself at the same point)"},
    /* The grace covers the agent's reaction to its own lease running out
     * (it fences within 100 ms) and the two clocks' rates: never less than
     * a second. */
    {.key = "grace",
     .type = SC_DURATION,
     .off = offsetof(conf_nodes_t, grace_ns),
     .lo = 1000000000LL,
     .hi = INT64_MAX,
     .range_msg = "the grace must be at least 1s: the controller may re-place a silent node's "
                  "tasks only after its agent has surely fenced them",
     .def = "5s",
     .help = "a NotReady node's tasks are declared lost this long after its lease ran out, "
             "then requeued (or failed: restartable: false); at least 1s"},
    {.key = "staleness",
     .type = SC_DURATION,
     .off = offsetof(conf_nodes_t, stale_ns),
     .check = check_staleness,
     .def = "5s",
     .def_doc = "half the lease (5s)",
     .help = "nodes whose report is older get no new work (0: off); below the lease, or a node "
             "would go NotReady first and the filter never act"},
    {.key = NULL},
};
static const sc_table_t nodes_table = {"nodes", nodes_fields, nodes_check};

/* ---- queues and priority classes -------------------------------------------------- */

static int set_queues(sx_t *x, const sval_t *v, void *obj)
{
    conf_doc_t *d = obj;
    spec_queue_t *q;
    int n, rc = spec_queues_read(x, v, SC_CTX_CONFIG, &q, &n);

    if (rc < 0)
        return rc;
    free(d->queues);
    d->queues = q;
    d->nqueues = n; /* queues: [] (none) keeps the queues there were */
    return 0;
}

static int set_class_preemptible(sx_t *x, const sval_t *v, void *obj)
{
    int8_t *p = obj;
    bool b;
    int rc = sv_bool(x, v, &b);

    if (rc == 0)
        *p = b;
    return rc;
}

static int class_check(sx_t *x, const sval_t *map, void *obj, unsigned ctx)
{
    const spec_prio_class_t *k = obj;
    sval_t f;

    (void)ctx;
    if (!sv_get(map, "value", &f))
        return sv_fail(x, map, -EINVAL, "priority class '%s' needs a value (an integer)", k->name);
    return 0;
}

static const sc_field_t class_fields[] = {
    {.key = "name",
     .type = SC_STR,
     .off = offsetof(spec_prio_class_t, name),
     .size = 64,
     .flags = SC_REQUIRED,
     .help = "what priorityClassName names"},
    {.key = "value",
     .type = SC_INT,
     .off = offsetof(spec_prio_class_t, value),
     .size = sizeof(int32_t),
     .lo = INT32_MIN,
     .hi = INT32_MAX,
     .type_doc = "int32",
     .help = "the priority of the class's jobs (required)"},
    {.key = "preemptible",
     .type = SC_CUSTOM,
     .set = set_class_preemptible,
     .off = offsetof(spec_prio_class_t, preemptible),
     .type_doc = "bool",
     .help = "the default of the class's jobs (their own preemptible: wins)"},
    {.key = "description",
     .type = SC_STR,
     .off = offsetof(spec_prio_class_t, description),
     .size = 160,
     .flags = SC_EMPTY_OK,
     .help = "for people"},
    {.key = NULL},
};
static const sc_table_t class_table = {"priority class", class_fields, class_check};

/* priorityClasses: the built-ins first, each config entry redefining one of
 * them (same name) or adding one. */
static int set_classes(sx_t *x, const sval_t *v, void *obj)
{
    conf_doc_t *d = obj;
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
        bool is;
        spec_prio_class_t k = {.preemptible = -1};
        sv_item(&iv, v, fy_node_sequence_get_by_index(v->n, i), i);
        if ((rc = sv_map(x, &iv, &is)) == 0 && !is)
            rc = sv_fail(x, &iv, -EINVAL, "a priority class needs a name");
        if (rc == 0)
            rc = sc_walk(x, &iv, &class_table, SC_CTX_CONFIG, &k);
        for (int m = nb; rc == 0 && m < total; m++)
            if (strcmp(t[m].name, k.name) == 0 && sv_get(&iv, "name", &f))
                rc = sv_fail(x, &f, -EINVAL, "priority class '%s' is defined twice", k.name);
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
    free(d->classes);
    d->classes = t;
    d->nclasses = total;
    return 0;
}

/* ---- the other sections ----------------------------------------------------------- */

static const char *const syncs[] = {[STORE_SYNC_FULL] = "full", [STORE_SYNC_NORMAL] = "normal"};

static const sc_field_t store_fields[] = {
    {.key = "synchronous",
     .type = SC_ENUM,
     .off = offsetof(conf_doc_t, sync),
     .names = syncs,
     .nnames = 2,
     .def = "full",
     .help = "fsync per commit (normal: kill -9 safe only)"},
    {.key = NULL},
};
static const sc_field_t events_fields[] = {
    {.key = "retention",
     .type = SC_INT,
     .off = offsetof(conf_doc_t, event_retention),
     .size = sizeof(int),
     .lo = 16,
     .hi = 10000000,
     .def = "100000",
     .help = "events kept in the log"},
    {.key = NULL},
};
static const sc_field_t jobs_fields[] = {
    {.key = "history",
     .type = SC_INT,
     .off = offsetof(conf_doc_t, job_history),
     .size = sizeof(int),
     .lo = 0,
     .hi = 10000000,
     .def = "10000",
     .help = "ended jobs kept in memory (the newest to end); older ones stay in the store, "
             "where `arbiter job ID` still reads them, but leave `arbiter jobs` lists; "
             "0..10000000"},
    {.key = NULL},
};
static const sc_field_t admission_fields[] = {
    {.key = "rejectUnfittable",
     .type = SC_BOOL,
     .off = offsetof(conf_doc_t, reject_unfittable),
     .def = "true",
     .help = "reject jobs no registered node could ever hold"},
    {.key = NULL},
};
static const sc_field_t resources_fields[] = {
    {.key = "capRequests",
     .type = SC_BOOL,
     .off = offsetof(conf_doc_t, cap_requests),
     .def = "false",
     .help = "cap a task's CPU and memory at its request when it gives no limit (as in "
             "Kubernetes, limits are the caps and a request alone caps nothing)"},
    {.key = NULL},
};

static int check_idem(sx_t *x, const sval_t *v, void *obj)
{
    const conf_doc_t *d = obj;

    if (d->idem_retention_ns > 0 && d->idem_retention_ns < 1000000000LL)
        return sv_fail(x, v, -EINVAL,
                       "keep keys at least 1s (clients retry for longer); 0 keeps them for ever");
    return 0;
}

static const sc_field_t api_fields[] = {
    {.key = "idempotencyRetention",
     .type = SC_DURATION,
     .off = offsetof(conf_doc_t, idem_retention_ns),
     .check = check_idem,
     .def = "24h",
     .help = "an Idempotency-Key answers with its job this long after the job's submit time "
             "(wall clock), then it is deleted and the key makes a new job; 0 keeps keys for "
             "ever"},
    {.key = NULL},
};

/* Sections whose fields are members of conf_doc_t itself: their tables'
 * offsets are the document's, so they hang at offset 0. */
static const sc_table_t store_table = {"store", store_fields, NULL};
static const sc_table_t events_table = {"events", events_fields, NULL};
static const sc_table_t jobs_table = {"jobs", jobs_fields, NULL};
static const sc_table_t admission_table = {"admission", admission_fields, NULL};
static const sc_table_t resources_table = {"resources", resources_fields, NULL};
static const sc_table_t api_table = {"api", api_fields, NULL};

static const sc_field_t conf_fields[] = {
    {.key = "scheduler",
     .type = SC_OBJECT,
     .off = offsetof(conf_doc_t, sched),
     .sub = &spec_sched_table},
    {.key = "nodes", .type = SC_OBJECT, .off = offsetof(conf_doc_t, nodes), .sub = &nodes_table},
    {.key = "queues",
     .type = SC_CUSTOM,
     .set = set_queues,
     .sub = &spec_queue_table,
     .flags = SC_LIST,
     .type_doc = "list",
     .def_doc = "none",
     .help = "queues with quotas; a job without queue: goes to the quota-less queue 'default'"},
    {.key = "priorityClasses",
     .type = SC_CUSTOM,
     .set = set_classes,
     .sub = &class_table,
     .flags = SC_LIST,
     .type_doc = "list",
     .def_doc = "the built-ins",
     .help = "priorityClassName resolves through them (unknown: 422 listing them); they add "
             "to, or redefine, the built-ins best-effort 0, low 100, normal 500, high 1000, "
             "critical 10000; a job keeps the value (and preemptible) it was given at "
             "submission across restarts, also when its class is changed or removed (event "
             "job-priority-kept)"},
    {.key = "store", .type = SC_OBJECT, .sub = &store_table},
    {.key = "events", .type = SC_OBJECT, .sub = &events_table},
    {.key = "jobs", .type = SC_OBJECT, .sub = &jobs_table},
    {.key = "admission", .type = SC_OBJECT, .sub = &admission_table},
    {.key = "resources", .type = SC_OBJECT, .sub = &resources_table},
    {.key = "api", .type = SC_OBJECT, .sub = &api_table},
    {.key = NULL},
};
static const sc_table_t conf_table = {"config", conf_fields, NULL};

/* ---- st_conf_t and the document ------------------------------------------------------ */

static void to_doc(conf_doc_t *d, const st_conf_t *c)
{
    memset(d, 0, sizeof *d);
    snprintf(d->sched.policy, sizeof d->sched.policy, "%s", c->policy);
    d->sched.queue_policy = (int)c->queue_policy;
    d->sched.backfill = c->backfill;
    d->sched.preemption = c->preemption;
    d->sched.starvation_ns = c->starvation_ns;
    d->sched.interval_ns = c->interval_ns;
    d->sched.default_limit_s = c->default_limit_s;
    d->sched.max_limit_s = c->max_limit_s;
    d->nodes.lease_ns = c->lease_ns;
    d->nodes.grace_ns = c->grace_ns;
    d->nodes.stale_ns = c->stale_ns;
    d->sync = (int)c->sync;
    d->event_retention = c->event_retention;
    d->job_history = c->job_history;
    d->reject_unfittable = c->reject_unfittable;
    d->cap_requests = c->cap_requests;
    d->idem_retention_ns = c->idem_retention_ns;
}

/* The scalars of d into c (queues and classes: the caller). */
static void from_doc(st_conf_t *c, const conf_doc_t *d)
{
    snprintf(c->policy, sizeof c->policy, "%s", d->sched.policy);
    c->queue_policy = (arb_queue_policy_t)d->sched.queue_policy;
    c->backfill = d->sched.backfill;
    c->preemption = d->sched.preemption;
    c->starvation_ns = d->sched.starvation_ns;
    c->interval_ns = d->sched.interval_ns;
    c->default_limit_s = d->sched.default_limit_s;
    c->max_limit_s = d->sched.max_limit_s;
    c->lease_ns = d->nodes.lease_ns;
    c->grace_ns = d->nodes.grace_ns;
    c->stale_ns = d->nodes.stale_ns;
    c->sync = (store_sync_t)d->sync;
    c->event_retention = d->event_retention;
    c->job_history = d->job_history;
    c->reject_unfittable = d->reject_unfittable;
    c->cap_requests = d->cap_requests;
    c->idem_retention_ns = d->idem_retention_ns;
}

void st_conf_init(st_conf_t *c)
{
    conf_doc_t d;

    memset(c, 0, sizeof *c);
    memset(&d, 0, sizeof d);
    (void)sc_init(&conf_table, SC_CTX_CONFIG, &d, NULL); /* tests/unit/test_schema.c */
    from_doc(c, &d);
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

void st_conf_doc(FILE *f)
{
    sc_doc_markdown(f, &conf_table, SC_CTX_CONFIG, "");
}

/* The queues of the document as the controller keeps them (calloc'd). */
static st_queue_conf_t *conf_queues(const conf_doc_t *d)
{
    st_queue_conf_t *q = calloc((size_t)(d->nqueues ? d->nqueues : 1), sizeof *q);

    for (int i = 0; q && i < d->nqueues; i++) {
        const spec_queue_t *s = &d->queues[i];
        /* the config's table holds both to ST_NAME_MAX - 1 bytes */
        memcpy(q[i].name, s->name, sizeof q[i].name - 1);
        memcpy(q[i].cohort, s->cohort, sizeof q[i].cohort - 1);
        q[i].weight = s->weight;
        q[i].has_quota = s->has_quota;
        q[i].nominal = s->nominal;
        q[i].borrow_limit = s->borrow_limit;
        q[i].default_limit_s = s->default_limit_s;
        q[i].max_limit_s = s->max_limit_s;
    }
    return q;
}

int st_conf_load_mem(const char *name, const char *buf, size_t len, st_conf_t *c, arb_err_t *err)
{
    st_conf_t n = *c;
    st_queue_conf_t *queues = NULL;
    conf_doc_t d;
    sv_doc_t doc;
    sval_t root;
    sx_t x = {.file = name, .err = err};
    int rc;

    to_doc(&d, c);
    if ((rc = sv_doc_open(name, buf, len, &doc, err)) < 0)
        return rc;
    sv_root(&root, fy_document_root(doc.doc), "");
    rc = sc_walk(&x, &root, &conf_table, SC_CTX_CONFIG, &d);
    sv_doc_close(&doc);
    if (rc == 0 && d.queues && !(queues = conf_queues(&d)))
        rc = arb_errf(err, -ENOMEM, "%s: out of memory", name);
    if (rc < 0) {
        free(d.queues);
        free(d.classes);
        return rc;
    }
    from_doc(&n, &d);
    if (d.classes) { /* else no priorityClasses: section, keep c's */
        free(c->classes);
        n.classes = d.classes;
        n.nclasses = d.nclasses;
    }
    if (d.queues) { /* else no queues: section, keep the ones c had */
        free(c->queues);
        n.queues = queues;
        n.nqueues = d.nqueues;
        free(d.queues);
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
