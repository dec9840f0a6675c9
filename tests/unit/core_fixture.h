/*
 * core_fixture.h: small helpers shared by the core's unit tests: build a
 * hand-made cluster, make jobs with constraints, drive a scheduler, take and
 * compare snapshots of every node's accounting, run one job stream indexed
 * and by full scan and compare the two (fx_ab_*), and check that a string
 * is one well-formed JSON value. Header-only (static inline), so each test
 * executable stays one file plus this.
 *
 * Include after <cmocka.h>.
 */
#ifndef ARB_TEST_CORE_FIXTURE_H
#define ARB_TEST_CORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/sched.h"
#include "core/sched_int.h" /* sched_index_check, sched_index_sync (fx_ab_step) */

#define GIB (1LL << 30)

typedef struct fx {
    arb_cluster_t c;
    arb_sched_t *s;
    arb_rng_t rng;
    arb_ctx_t ctx;
    arb_err_t err;
} fx_t;

static inline void fx_init(fx_t *f)
{
    memset(f, 0, sizeof *f);
    arb_cluster_init(&f->c);
    arb_rng_seed(&f->rng, 42);
    f->ctx.now_ns = 0;
    f->ctx.rng = &f->rng;
}

static inline uint32_t S(fx_t *f, const char *s)
{
    return arb_intern(&f->c.strs, s);
}

/* A node with ngpus GPUs of model (mem_mib each) split evenly into ndom
 * NVLink domains, PCIe switches of 2 GPUs, two NUMA nodes (ndom 0: no
 * topology known at all, every coordinate -1), 128 CPUs, 1 TiB memory.
 * Returns its id. */
static inline uint32_t fx_node(fx_t *f, const char *name, int ngpus, int ndom, const char *model,
                               int32_t mem_mib)
{
    arb_node_t *n;
    assert_int_equal(arb_cluster_add_node(&f->c, name, &n, &f->err), 0);
    n->cap.cpu_milli = 128000;
    n->cap.mem_bytes = 1024 * GIB;
    for (int g = 0; g < ngpus; g++) {
        int nv = ndom > 0 ? g / (ngpus / ndom) : -1;
        assert_int_equal(arb_node_add_gpu(&f->c, n, model ? model : "A100",
                                          mem_mib ? mem_mib : 81920,
                                          ndom > 0 ? (g < ngpus / 2 ? 0 : 1) : -1,
                                          ndom > 0 ? g / 2 : -1, nv, &f->err),
                         0);
    }
    arb_node_touch(&f->c, n);
    return n->id;
}

static inline arb_node_t *N(fx_t *f, uint32_t id)
{
    return &f->c.nodes[id];
}

/* Mark a node changed after writing its fields directly. */
static inline void fx_touch(fx_t *f, uint32_t id)
{
    arb_node_touch(&f->c, N(f, id));
}

static inline void fx_label(fx_t *f, uint32_t id, const char *k, const char *v)
{
    assert_int_equal(arb_node_set_label(&f->c, N(f, id), k, v), 0);
}

/* The scheduler over f->c with a named profile and the given knobs. */
static inline void fx_sched_conf(fx_t *f, const char *policy, const arb_sched_conf_t *base)
{
    arb_sched_conf_t conf = base ? *base : (arb_sched_conf_t){0};
    assert_int_equal(arb_profile_lookup(policy, &conf.profile, &f->err), 0);
    if (base) {
        conf.profile.thermal_limit_c = base->profile.thermal_limit_c;
        conf.profile.stale_ns = base->profile.stale_ns;
    }
    f->s = arb_sched_new(&f->c, &conf, &f->err);
    assert_non_null(f->s);
}

static inline void fx_sched(fx_t *f, const char *policy)
{
    fx_sched_conf(f, policy, NULL);
}

/* A queue with a GPU quota (nominal and borrowing limit, in GPUs), weight
 * 1, in cohort (NULL: none), set on the scheduler. */
static inline void fx_quota_queue(fx_t *f, const char *name, const char *cohort, int nominal_gpus,
                                  int borrow_gpus)
{
    arb_queue_t q = {
        .name = S(f, name), .cohort = cohort ? S(f, cohort) : 0, .has_quota = true, .weight = 1};
    q.nominal.gpu_milli = nominal_gpus * 1000LL;
    q.borrow_limit.gpu_milli = borrow_gpus * 1000LL;
    assert_int_equal(arb_sched_set_queue(f->s, &q, &f->err), 0);
}

static inline void fx_free(fx_t *f)
{
    arb_err_t e;
    int rc = arb_cluster_check(&f->c, &e);
    if (rc < 0)
        fail_msg("cluster invariant broken at teardown: %s", e.msg);
    arb_sched_free(f->s);
    arb_cluster_free(&f->c);
}

/* A one-group job: replicas tasks of gpus whole GPUs or a share (milli). */
static inline arb_job_t *fx_job_new(const char *name, int replicas, int gpus, int share)
{
    arb_job_t *j = arb_job_new(name, 1);
    assert_non_null(j);
    arb_tgroup_set_name(&j->groups[0], "main");
    j->groups[0].replicas = replicas;
    j->groups[0].gpus = gpus;
    j->groups[0].gpu_share = share;
    j->groups[0].req.cpu_milli = 1000;
    j->groups[0].req.mem_bytes = 1 * GIB;
    return j;
}

/* Finalize and submit; the scheduler owns j afterwards. */
static inline arb_job_t *fx_submit(fx_t *f, arb_job_t *j)
{
    int rc = arb_job_finalize(j, &f->err);
    if (rc < 0)
        fail_msg("finalize %s: %s", j->name, f->err.msg);
    assert_int_equal(arb_sched_submit(f->s, j, &f->ctx, &f->err), 0);
    return j;
}

static inline arb_job_t *fx_add(fx_t *f, const char *name, int replicas, int gpus, int share)
{
    return fx_submit(f, fx_job_new(name, replicas, gpus, share));
}

/* Submit and place now; asserts it placed. */
static inline arb_job_t *fx_run(fx_t *f, const char *name, int replicas, int gpus, int share)
{
    arb_job_t *j = fx_add(f, name, replicas, gpus, share);
    int rc = arb_sched_place(f->s, j, &f->ctx);
    if (rc != 0)
        fail_msg("job %s did not place (%d)", name, rc);
    return j;
}

static inline void fx_check(fx_t *f)
{
    arb_err_t e;
    int rc = arb_cluster_check(&f->c, &e);
    if (rc < 0)
        fail_msg("cluster invariant broken: %s", e.msg);
}

/* ---- constraint builders (arrays are malloc'd: arb_job_free frees them) -- */

static inline void fx_selector(fx_t *f, arb_job_t *j, const char *k, const char *v)
{
    j->selector = realloc(j->selector, (size_t)(j->nselector + 1) * sizeof *j->selector);
    j->selector[j->nselector].key = S(f, k);
    j->selector[j->nselector].val = S(f, v);
    j->nselector++;
}

static inline void fx_toleration(fx_t *f, arb_job_t *j, const char *k, const char *v, bool exists,
                                 int effect)
{
    j->tolerations =
        realloc(j->tolerations, (size_t)(j->ntolerations + 1) * sizeof *j->tolerations);
    j->tolerations[j->ntolerations] = (arb_toleration_t){
        .key = k ? S(f, k) : 0, .val = v ? S(f, v) : 0, .exists = exists, .effect = effect};
    j->ntolerations++;
}

static inline void fx_model(fx_t *f, arb_job_t *j, const char *m)
{
    j->models = realloc(j->models, (size_t)(j->nmodels + 1) * sizeof *j->models);
    j->models[j->nmodels++] = S(f, m);
}

/* Append a term (required or preferred) and return it. */
static inline arb_aff_term_t *fx_term(arb_job_t *j, bool required, int weight)
{
    arb_aff_term_t **v = required ? &j->required : &j->preferred;
    int *n = required ? &j->nrequired : &j->npreferred;
    arb_aff_term_t *grown = realloc(*v, (size_t)(*n + 1) * sizeof **v);
    assert_non_null(grown);
    *v = grown;
    (*v)[*n] = (arb_aff_term_t){.nexpr = 0, .expr = NULL, .weight = weight};
    return &(*v)[(*n)++];
}

/* Add an expression to term t: vals is a NULL-terminated list (In/NotIn). */
static inline void fx_expr(fx_t *f, arb_aff_term_t *t, const char *key, arb_sel_op_t op,
                           int64_t num, const char *const *vals)
{
    arb_match_expr_t e = {.key = S(f, key), .op = op, .num = num};
    for (int i = 0; vals && vals[i]; i++) {
        e.vals = realloc(e.vals, (size_t)(e.nvals + 1) * sizeof *e.vals);
        e.vals[e.nvals++] = S(f, vals[i]);
    }
    t->expr = realloc(t->expr, (size_t)(t->nexpr + 1) * sizeof *t->expr);
    t->expr[t->nexpr++] = e;
}

/* The first filter (engine order) that rejects node id for group g of j, as
 * the engine and explain see it; ARB_R_OK when all pass. */
static inline arb_reason_t fx_reason(fx_t *f, const arb_job_t *j, int g, uint32_t id)
{
    arb_pctx_t pc = {
        .sched = f->s, .cluster = &f->c, .ctx = &f->ctx, .job = j, .group = &j->groups[g]};
    for (int i = 0; arb_filters[i]; i++) {
        arb_reason_t r = arb_filters[i]->filter(&pc, N(f, id));
        if (r != ARB_R_OK)
            return r;
    }
    return ARB_R_OK;
}

/* ---- snapshots of the cluster's accounting -------------------------------- */

typedef struct fx_snap {
    uint32_t n;
    arb_res_t used[64];
    int32_t gpu_used[64][ARB_MAX_GPUS];
    int32_t gpu_mem[64][ARB_MAX_GPUS];
    int ntasks[64];
} fx_snap_t;

static inline void fx_snap(const fx_t *f, fx_snap_t *sn)
{
    memset(sn, 0, sizeof *sn);
    assert_true(f->c.nnodes <= 64);
    sn->n = f->c.nnodes;
    for (uint32_t i = 0; i < f->c.nnodes; i++) {
        const arb_node_t *n = &f->c.nodes[i];
        sn->used[i] = n->used;
        sn->ntasks[i] = n->ntasks;
        for (int g = 0; g < n->ngpus; g++) {
            sn->gpu_used[i][g] = n->gpu[g].used_milli;
            sn->gpu_mem[i][g] = n->gpu[g].mem_used_mib;
        }
    }
}

static inline void fx_snap_equal(const fx_snap_t *a, const fx_snap_t *b)
{
    assert_int_equal(a->n, b->n);
    for (uint32_t i = 0; i < a->n; i++) {
        assert_memory_equal(&a->used[i], &b->used[i], sizeof a->used[i]);
        assert_memory_equal(a->gpu_used[i], b->gpu_used[i], sizeof a->gpu_used[i]);
        assert_memory_equal(a->gpu_mem[i], b->gpu_mem[i], sizeof a->gpu_mem[i]);
        assert_int_equal(a->ntasks[i], b->ntasks[i]);
    }
}

/* Whole GPUs in use on node id. */
static inline int fx_busy(fx_t *f, uint32_t id)
{
    int b = 0;
    for (int g = 0; g < N(f, id)->ngpus; g++)
        b += N(f, id)->gpu[g].used_milli > 0;
    return b;
}

/* ---- A/B runs: the scheduler's indexes against a full scan ----------------
 * A test builds a cluster and a job stream from a seed (its run function),
 * once indexed and once with conf.full_scan; with deterministic ties every
 * decision must be the same. fx_ab_sched starts such a run's scheduler,
 * fx_ab_record keeps job i's outcome, fx_ab_step checks the indexes after
 * every step, fx_ab_compare runs both sides over seeds and compares them. */

#define FX_AB_JOBS 3000 /* the most jobs one stream records */
#define FX_AB_TASKS 12  /* the most tasks of a job it compares */

typedef struct fx_ab {
    int rc[FX_AB_JOBS];     /* arb_sched_place's answer */
    int nalloc[FX_AB_JOBS]; /* the tasks placed (0 when it did not place) */
    arb_task_alloc_t a[FX_AB_JOBS][FX_AB_TASKS];
    uint32_t max_classes; /* the most node classes the indexed side held at once */
} fx_ab_t;

static inline void fx_ab_sched(fx_t *f, const char *policy, bool full_scan)
{
    arb_sched_conf_t base = {.full_scan = full_scan};
    fx_sched_conf(f, policy, &base);
    f->s->conf.profile.random_ties = false; /* deterministic: comparable */
}

/* Job i was placed with answer rc: keep its first FX_AB_TASKS tasks, and
 * mark it running when it placed. */
static inline void fx_ab_record(fx_ab_t *t, int i, arb_job_t *j, int rc)
{
    assert_true(i >= 0 && i < FX_AB_JOBS);
    t->rc[i] = rc;
    t->nalloc[i] = rc == 0 ? j->nalloc : 0;
    memset(t->a[i], 0, sizeof t->a[i]);
    if (rc == 0) {
        memcpy(t->a[i], j->alloc,
               (size_t)(j->nalloc < FX_AB_TASKS ? j->nalloc : FX_AB_TASKS) * sizeof j->alloc[0]);
        arb_job_transition(j, ARB_JOB_RUNNING, NULL);
    }
}

/* After every step: the indexes' invariants hold (again after a sync when
 * indexed), and the cluster's. */
static inline void fx_ab_step(fx_t *f, bool full_scan, fx_ab_t *t)
{
    assert_int_equal(sched_index_check(f->s), 0);
    if (!full_scan) {
        assert_int_equal(sched_index_sync(f->s), 0);
        assert_int_equal(sched_index_check(f->s), 0);
        if (arb_sched_nclasses(f->s, NULL) > t->max_classes)
            t->max_classes = arb_sched_nclasses(f->s, NULL);
    }
    fx_check(f);
}

/* Run policy's stream for seeds 1..nseeds indexed and by full scan (run
 * records njobs jobs) and fail at the first decision that differs: its
 * answer, its task count or any task's node and GPUs. *placed and *gangs
 * (optional) count the indexed side's placements and gangs placed.
 * Returns the fewest node classes any seed's indexed run reached at its
 * peak (a long run must have made many, or it tests little). */
static inline uint32_t fx_ab_compare(const char *policy, int nseeds, int njobs,
                                     void (*run)(const char *policy, bool full_scan, uint64_t seed,
                                                 int njobs, fx_ab_t *t),
                                     int *placed, int *gangs)
{
    static fx_ab_t a, b;
    uint32_t least = UINT32_MAX;

    assert_true(njobs <= FX_AB_JOBS);
    for (uint64_t seed = 1; seed <= (uint64_t)nseeds; seed++) {
        a.max_classes = b.max_classes = 0;
        run(policy, false, seed, njobs, &a);
        run(policy, true, seed, njobs, &b);
        if (a.max_classes < least)
            least = a.max_classes;
        for (int i = 0; i < njobs; i++) {
            if (a.rc[i] != b.rc[i] || a.nalloc[i] != b.nalloc[i])
                fail_msg("%s seed %llu job %d: rc %d/%d, %d/%d tasks (indexed/full scan)", policy,
                         (unsigned long long)seed, i, a.rc[i], b.rc[i], a.nalloc[i], b.nalloc[i]);
            for (int t = 0; t < a.nalloc[i] && t < FX_AB_TASKS; t++)
                if (memcmp(&a.a[i][t], &b.a[i][t], sizeof a.a[i][t]) != 0)
                    fail_msg("%s seed %llu job %d task %d: node %u gpus %#x, full scan node %u "
                             "gpus %#x",
                             policy, (unsigned long long)seed, i, t, a.a[i][t].node,
                             a.a[i][t].gpu_mask, b.a[i][t].node, b.a[i][t].gpu_mask);
            if (placed)
                *placed += a.rc[i] == 0;
            if (gangs)
                *gangs += a.rc[i] == 0 && a.nalloc[i] > 1;
        }
    }
    return least;
}

/* fx_ab_compare for every profile in src/core/profiles.c's table (the
 * names arb_profile_names lists), so a profile added there is compared
 * too, but those that break ties at random (their scores draw too: only
 * the distribution is the engines' to share). Fails naming the profile,
 * seed and first differing decision. */
static inline void fx_ab_compare_all(int nseeds, int njobs,
                                     void (*run)(const char *policy, bool full_scan, uint64_t seed,
                                                 int njobs, fx_ab_t *t))
{
    char names[512];
    int nprofiles = 0;

    arb_profile_names(names, sizeof names);
    assert_true(strlen(names) + 1 < sizeof names); /* the list was not cut short */
    for (char *p = names, *next; *p; p = next) {
        int placed = 0;
        char *comma = strstr(p, ", ");
        next = comma ? comma + 2 : p + strlen(p);
        arb_profile_t prof;
        if (comma)
            *comma = '\0';
        assert_int_equal(arb_profile_lookup(p, &prof, NULL), 0);
        if (prof.random_ties)
            continue; /* draws, not decisions: the engines draw alike, not the same */
        fx_ab_compare(p, nseeds, njobs, run, &placed, NULL);
        if (placed == 0)
            fail_msg("%s placed nothing: the comparison tests little", p);
        nprofiles++;
    }
    assert_true(nprofiles >= 2);
}

/* ---- a tiny JSON validator: one value, nothing after it ------------------- */

typedef struct fx_json {
    const char *p;
    int depth;
} fx_json_t;

static inline void fx_json_ws(fx_json_t *j)
{
    while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')
        j->p++;
}

static inline bool fx_json_value(fx_json_t *j);

static inline bool fx_json_string(fx_json_t *j)
{
    if (*j->p != '"')
        return false;
    for (j->p++; *j->p != '"'; j->p++) {
        unsigned char ch = (unsigned char)*j->p;
        if (ch < 0x20)
            return false;
        if (ch == '\\') {
            j->p++;
            if (*j->p == 'u') {
                for (int i = 0; i < 4; i++) {
                    j->p++;
                    if (!*j->p || !strchr("0123456789abcdefABCDEF", *j->p))
                        return false;
                }
            } else if (!*j->p || !strchr("\"\\/bfnrt", *j->p)) {
                return false;
            }
        }
    }
    j->p++;
    return true;
}

static inline bool fx_json_number(fx_json_t *j)
{
    const char *s = j->p;
    if (*j->p == '-')
        j->p++;
    if (*j->p < '0' || *j->p > '9')
        return false;
    while ((*j->p >= '0' && *j->p <= '9') || *j->p == '.' || *j->p == 'e' || *j->p == 'E' ||
           *j->p == '+' || *j->p == '-')
        j->p++;
    return j->p > s;
}

static inline bool fx_json_value(fx_json_t *j)
{
    bool ok = true;
    fx_json_ws(j);
    if (++j->depth > 64)
        return false;
    if (*j->p == '{' || *j->p == '[') {
        char close = *j->p == '{' ? '}' : ']';
        bool obj = *j->p == '{';
        j->p++;
        fx_json_ws(j);
        if (*j->p == close) {
            j->p++;
        } else {
            for (;;) {
                fx_json_ws(j);
                if (obj) {
                    if (!fx_json_string(j))
                        return false;
                    fx_json_ws(j);
                    if (*j->p++ != ':')
                        return false;
                }
                if (!fx_json_value(j))
                    return false;
                fx_json_ws(j);
                if (*j->p == ',') {
                    j->p++;
                    continue;
                }
                if (*j->p++ != close)
                    return false;
                break;
            }
        }
    } else if (*j->p == '"') {
        ok = fx_json_string(j);
    } else if (strncmp(j->p, "true", 4) == 0) {
        j->p += 4;
    } else if (strncmp(j->p, "false", 5) == 0) {
        j->p += 5;
    } else if (strncmp(j->p, "null", 4) == 0) {
        j->p += 4;
    } else {
        ok = fx_json_number(j);
    }
    j->depth--;
    return ok;
}

static inline bool fx_json_valid(const char *s)
{
    fx_json_t j = {.p = s, .depth = 0};
    if (!fx_json_value(&j))
        return false;
    fx_json_ws(&j);
    return *j.p == '\0';
}

/* Explain j and render both forms; asserts the JSON is valid. */
static inline void fx_explain(fx_t *f, arb_job_t *j, arb_explain_t *ex, char *json, size_t n)
{
    assert_int_equal(arb_sched_explain(f->s, j, &f->ctx, ex), 0);
    int len = arb_explain_json(f->s, ex, json, n);
    assert_true(len > 0 && (size_t)len < n);
    if (!fx_json_valid(json))
        fail_msg("invalid JSON: %s", json);
}

#endif
