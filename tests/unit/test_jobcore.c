/* test_jobcore.c: a job's compact form (src/state/jobcore.c) and recovery
 * from it (real SQLite store): every field the scheduler reads survives a
 * write and a read (text, then the same text again); a restart rebuilds
 * jobs of every kind (selectors, affinity, tolerations, models, dataset,
 * topology, gangs, elastic, exclusive, sharing, grace, time limit, a
 * priority class, a dependency and an array) as they were (their read-back
 * the same before and after), the spec under specs/ID, not in the record;
 * a store written by the controller before the compact form (records with
 * their spec, no "core") still recovers, and its jobs take the compact form
 * at their next save; a damaged form is refused naming its token, and such
 * a record without a spec is kept visible, failed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "state/state_int.h"
#include "state_fixture.h"
#include "store/store.h"

static void add_node(st_t *s, const char *name)
{
    const char *body =
        "{\"lamport\": 3, \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"labels\": "
        "{\"rack\": \"r1\", \"zone\": \"z1\"}, \"gpus\": [{\"model\": \"H100\", \"memory\": "
        "\"80Gi\", \"nvlink\": 0}, {\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}]}}";
    sf_report(s, name, body);
}

static uint64_t submit(st_t *s, const char *yaml)
{
    return sf_submit_yaml(s, yaml);
}

/* GET /v1/jobs/ID, as text, less what a restart changes by design */
static char *job_text(st_t *s, uint64_t id)
{
    st_job_view_t v;
    int64_t t;

    assert_int_equal(st_job_get(s, &admin, id, &v, &t, NULL), 0);
    json_t *out = api_job_json(&v); /* as the API shows it (src/api/enc_job.c) */
    st_job_view_free(&v);
    assert_non_null(out);
    json_object_del(out, "version");
    json_object_del(out, "epoch");
    json_object_del(out, "events"); /* a restart adds its own */
    char *txt = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(out);
    return txt;
}

static char *record_of(st_t *s, uint64_t id)
{
    char key[40], *v = NULL;
    snprintf(key, sizeof key, "jobs/%020llu", (unsigned long long)id);
    assert_int_equal(store_get(s->store, key, &v, NULL, NULL, NULL), 0);
    return v;
}

static void test_core_text_round_trip(void **unused)
{
    (void)unused;
    arb_cluster_t c;
    arb_err_t err = {{0}};
    st_dep_parts_t dp = {.text = "afterok:3?afterany:4",
                         .array = true,
                         .array_of = 7,
                         .task = 2,
                         .count = 10,
                         .throttle = 3};
    st_dep_t *dep = NULL, *dep2 = NULL;

    arb_cluster_init(&c);
    int ext = arb_extnames_index(&c.ext, "rdma/hca", true);
    assert_true(ext >= 0);
    arb_job_t *j = arb_job_new("a name with spaces, % and \xc3\xa9", 2);
    assert_non_null(j);
    j->queue = arb_intern(&c.strs, "team a");
    j->priority = -7;
    j->preemptible = false;
    j->gang_min = 2;
    j->exclusive = true;
    j->gpu_sharing = -1;
    j->grace_s = 45;
    j->time_limit_s = 5400;
    j->dataset = arb_intern(&c.strs, "imagenet");
    arb_tgroup_set_name(&j->groups[0], "launcher");
    j->groups[0].req.cpu_milli = 500;
    j->groups[0].req.mem_bytes = 1 << 30;
    arb_tgroup_set_name(&j->groups[1], "worker");
    j->groups[1].replicas = 4;
    j->groups[1].gpus = 2;
    j->groups[1].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, false};
    j->groups[1].req.gpu_mem_mib = 40960;
    j->groups[1].req.ext[ext] = 1;
    j->groups[1].lim.cpu_milli = 8000;
    j->groups[1].lim.mem_bytes = 64LL << 30;
    j->groups[1].ephemeral_bytes = 1000;
    j->selector = calloc(1, sizeof *j->selector);
    j->selector[0] = (arb_label_t){arb_intern(&c.strs, "rack"), arb_intern(&c.strs, "r1")};
    j->nselector = 1;
    j->required = calloc(1, sizeof *j->required);
    j->nrequired = 1;
    j->required[0].nexpr = 2;
    j->required[0].expr = calloc(2, sizeof *j->required[0].expr);
    j->required[0].expr[0] = (arb_match_expr_t){.key = arb_intern(&c.strs, "zone"),
                                                .op = ARB_OP_IN,
                                                .nvals = 2,
                                                .vals = calloc(2, sizeof(uint32_t))};
    j->required[0].expr[0].vals[0] = arb_intern(&c.strs, "z1");
    j->required[0].expr[0].vals[1] = arb_intern(&c.strs, "z 2");
    j->required[0].expr[1] =
        (arb_match_expr_t){.key = arb_intern(&c.strs, "gpus"), .op = ARB_OP_GT, .num = 4};
    j->preferred = calloc(1, sizeof *j->preferred);
    j->npreferred = 1;
    j->preferred[0].weight = 50;
    j->tolerations = calloc(2, sizeof *j->tolerations);
    j->ntolerations = 2;
    j->tolerations[0] =
        (arb_toleration_t){arb_intern(&c.strs, "dedicated"), arb_intern(&c.strs, "infer"), false,
                           ARB_TAINT_NO_SCHEDULE};
    j->tolerations[1] = (arb_toleration_t){0, 0, true, 0};
    j->models = calloc(1, sizeof *j->models);
    j->models[0] = arb_intern(&c.strs, "A100-80G");
    j->nmodels = 1;
    assert_int_equal(arb_job_finalize(j, &err), 0);
    assert_int_equal(st_dep_make(&dp, &dep, &err), 0);

    char *text = st_core_text(&c, j, "batch low", dep);
    assert_non_null(text);
    assert_null(strpbrk(text, "\"\\\n")); /* nothing JSON would escape */
    arb_job_t *k = NULL;
    char pc[ST_PCLASS_MAX];
    if (st_core_read(&c, text, strlen(text), &k, pc, sizeof pc, &dep2, &err) < 0)
        fail_msg("read: %s (%s)", err.msg, text);
    assert_string_equal(pc, "batch low");
    assert_string_equal(k->name, j->name);
    assert_int_equal(k->queue, j->queue);
    assert_int_equal(k->ntasks, 5);
    assert_int_equal(k->gang_min, 2);
    assert_int_equal(k->groups[1].req.gpu_milli, 2000);
    assert_int_equal(k->groups[1].req.ext[ext], 1);
    assert_int_equal(k->required[0].expr[0].vals[1], j->required[0].expr[0].vals[1]);
    assert_int_equal(k->required[0].expr[1].num, 4);
    assert_int_equal(k->tolerations[0].effect, ARB_TAINT_NO_SCHEDULE);
    assert_true(k->tolerations[1].exists);
    assert_int_equal(k->models[0], j->models[0]);
    assert_int_equal(k->time_limit_s, 5400);
    assert_int_equal(k->grace_s, 45);
    assert_int_equal(k->gpu_sharing, -1);
    st_dep_parts_t dq;
    assert_true(st_dep_parts(dep2, &dq));
    assert_string_equal(dq.text, dp.text);
    assert_int_equal(dq.array_of, 7);
    assert_int_equal(dq.throttle, 3);
    char *again = st_core_text(&c, k, pc, dep2);
    assert_string_equal(again, text);

    /* damaged forms: refused, naming the token; nothing leaks */
    static const char *const bad[] = {
        "",
        "a2",
        "a1 =j",
        "a1 =j ~ 0 1 0 0 0 0 -1 0 ~ ~ G 1",
        "a1 =j ~ x",
        "a1 =j ~ 0 1 0 0 0 0 -1 0 ~ ~ G 99999999999999999999",
        "a1 =%ZZ",
        "a1 =j ~ 0 1 0 0 0 0 -1 0 ~ ~ G 0 S 0 R 0 P 0 T 0 M 0 D 0", /* no groups */
        "a1 =j ~ 0 1 0 0 0 0 -1 0 ~ ~ G 1 =g 1 1 0 0 0 0 0 0 0 0 0 0 S 0 R 0 P 0 T 0 M 0 D 0 x",
        ("a1 =j ~ 0 1 0 0 0 0 -1 0 ~ ~ G 1 =g 1 1 0 0 0 0 0 0 0 0 0 1 =no/such 1 S 0 R 0 P 0 T 0 "
         "M 0 D 0"), /* an unknown extended resource (one string, two lines) */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        arb_job_t *x = NULL;
        st_dep_t *dx = NULL;
        arb_err_t e = {{0}};
        int rc = st_core_read(&c, bad[i], strlen(bad[i]), &x, pc, sizeof pc, &dx, &e);
        if (rc != -EINVAL)
            fail_msg("'%s': rc %d, wanted -EINVAL", bad[i], rc);
        assert_null(x);
        assert_null(dx);
        assert_true(e.msg[0] != '\0');
    }
    /* the smallest form reads */
    const char *ok =
        "a1 =j ~ 0 1 0 0 0 0 -1 0 ~ ~ G 1 =g 1 1 0 0 0 0 0 0 0 0 0 0 S 0 R 0 P 0 T 0 M 0 D 0";
    arb_job_t *x = NULL;
    st_dep_t *dx = NULL;
    assert_int_equal(st_core_read(&c, ok, strlen(ok), &x, pc, sizeof pc, &dx, &err), 0);
    assert_int_equal(x->groups[0].req.gpu_milli, 1000);
    arb_job_free(x);
    free(again);
    free(text);
    arb_job_free(k);
    arb_job_free(j);
    st_dep_free(dep);
    st_dep_free(dep2);
    arb_cluster_free(&c);
}

/* ---- the form's bytes: the writer before util/textw.h, as the oracle ---- */

typedef struct ocw {
    char *p;
    size_t n, cap;
} ocw_t;

static void ocw_put(ocw_t *w, const char *s, size_t n)
{
    if (w->n + n + 2 > w->cap) {
        size_t cap = w->cap ? w->cap : 128;
        while (cap < w->n + n + 2)
            cap *= 2;
        w->p = realloc(w->p, cap);
        assert_non_null(w->p);
        w->cap = cap;
    }
    if (w->n)
        w->p[w->n++] = ' ';
    memcpy(w->p + w->n, s, n);
    w->n += n;
    w->p[w->n] = '\0';
}

static void ocw_tok(ocw_t *w, const char *t)
{
    ocw_put(w, t, strlen(t));
}

static void ocw_num(ocw_t *w, long long v)
{
    char b[24];
    ocw_put(w, b, (size_t)snprintf(b, sizeof b, "%lld", v));
}

static void ocw_text(ocw_t *w, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s), k = 1;
    char *b = malloc(3 * n + 2);
    assert_non_null(b);
    b[0] = '=';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '/' || c == ':' || c == '-') {
            b[k++] = (char)c;
        } else {
            b[k++] = '%';
            b[k++] = hex[c >> 4];
            b[k++] = hex[c & 15];
        }
    }
    ocw_put(w, b, k);
    free(b);
}

static void ocw_id(ocw_t *w, const arb_cluster_t *c, uint32_t id)
{
    if (id == 0)
        ocw_tok(w, "~");
    else
        ocw_text(w, arb_str(&c->strs, id));
}

static void ocw_terms(ocw_t *w, const arb_cluster_t *c, const char *tag, const arb_aff_term_t *t,
                      int n)
{
    ocw_tok(w, tag);
    ocw_num(w, n);
    for (int i = 0; i < n; i++) {
        ocw_num(w, t[i].weight);
        ocw_num(w, t[i].nexpr);
        for (int e = 0; e < t[i].nexpr; e++) {
            const arb_match_expr_t *x = &t[i].expr[e];
            ocw_id(w, c, x->key);
            ocw_num(w, (int)x->op);
            ocw_num(w, (long long)x->num);
            ocw_num(w, x->nvals);
            for (int v = 0; v < x->nvals; v++)
                ocw_id(w, c, x->vals[v]);
        }
    }
}

static char *old_core_text(const arb_cluster_t *c, const arb_job_t *j, const char *pclass,
                           const st_dep_t *dep)
{
    ocw_t w = {0};
    st_dep_parts_t dp;

    ocw_tok(&w, "a1");
    ocw_text(&w, j->name);
    ocw_id(&w, c, j->queue);
    ocw_num(&w, j->priority);
    ocw_num(&w, j->preemptible);
    ocw_num(&w, j->gang_min);
    ocw_num(&w, j->elastic);
    ocw_num(&w, j->exclusive);
    ocw_num(&w, j->gpu_sharing);
    ocw_num(&w, j->grace_s);
    ocw_num(&w, (long long)j->time_limit_s);
    ocw_id(&w, c, j->dataset);
    if (pclass && pclass[0])
        ocw_text(&w, pclass);
    else
        ocw_tok(&w, "~");
    ocw_tok(&w, "G");
    ocw_num(&w, j->ngroups);
    for (int i = 0; i < j->ngroups; i++) {
        const arb_tgroup_t *g = &j->groups[i];
        int next = 0;
        ocw_text(&w, g->name);
        ocw_num(&w, g->replicas);
        ocw_num(&w, g->gpus);
        ocw_num(&w, g->gpu_share);
        ocw_num(&w, (int)g->topo.level);
        ocw_num(&w, g->topo.required);
        ocw_num(&w, (long long)g->req.gpu_mem_mib);
        ocw_num(&w, (long long)g->req.cpu_milli);
        ocw_num(&w, (long long)g->req.mem_bytes);
        ocw_num(&w, (long long)g->lim.cpu_milli);
        ocw_num(&w, (long long)g->lim.mem_bytes);
        ocw_num(&w, (long long)g->ephemeral_bytes);
        for (int e = 0; e < ARB_MAX_EXT; e++)
            next += g->req.ext[e] != 0;
        ocw_num(&w, next);
        for (int e = 0; e < ARB_MAX_EXT; e++)
            if (g->req.ext[e]) {
                ocw_text(&w, e < c->ext.n ? c->ext.name[e] : "");
                ocw_num(&w, (long long)g->req.ext[e]);
            }
    }
    ocw_tok(&w, "S");
    ocw_num(&w, j->nselector);
    for (int i = 0; i < j->nselector; i++) {
        ocw_id(&w, c, j->selector[i].key);
        ocw_id(&w, c, j->selector[i].val);
    }
    ocw_terms(&w, c, "R", j->required, j->nrequired);
    ocw_terms(&w, c, "P", j->preferred, j->npreferred);
    ocw_tok(&w, "T");
    ocw_num(&w, j->ntolerations);
    for (int i = 0; i < j->ntolerations; i++) {
        const arb_toleration_t *t = &j->tolerations[i];
        ocw_id(&w, c, t->key);
        ocw_id(&w, c, t->val);
        ocw_num(&w, t->exists);
        ocw_num(&w, t->effect);
    }
    ocw_tok(&w, "M");
    ocw_num(&w, j->nmodels);
    for (int i = 0; i < j->nmodels; i++)
        ocw_id(&w, c, j->models[i]);
    ocw_tok(&w, "D");
    if (st_dep_parts(dep, &dp)) {
        ocw_num(&w, 1);
        ocw_text(&w, dp.text);
        ocw_num(&w, dp.array);
        ocw_num(&w, (long long)dp.array_of);
        ocw_num(&w, dp.task);
        ocw_num(&w, dp.count);
        ocw_num(&w, dp.throttle);
    } else {
        ocw_num(&w, 0);
    }
    return w.p;
}

static uint64_t rnd = 88172645463325252ULL;

static uint64_t rnext(void)
{
    rnd ^= rnd << 13;
    rnd ^= rnd >> 7;
    rnd ^= rnd << 17;
    return rnd;
}

/* Any value, the extremes often (the field's type cuts it as C does). */
static int64_t rval(void)
{
    static const int64_t edge[] = {0, 1, -1, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, 1000};
    uint64_t r = rnext();
    return r % 3 == 0 ? edge[(r >> 8) % 8] : (int64_t)(rnext() >> (r % 64));
}

/* A text with bytes of every kind: plain, escaped (%XX), UTF-8. */
static void rtext(char *s, size_t max)
{
    static const char *const piece[] = {"a",  "Z",  "9",  ".",    "_",        "/",
                                        ":",  "-",  " ",  "%",    "~",        "=",
                                        "\"", "\\", "\t", "\x7f", "\xc3\xa9", "\xf0\x9f\x98\x80"};
    size_t n = 0, want = rnext() % (max / 4);
    while (n < want) {
        const char *p = piece[rnext() % (sizeof piece / sizeof piece[0])];
        memcpy(s + n, p, strlen(p));
        n += strlen(p);
    }
    s[n] = '\0';
}

static uint32_t rid(arb_cluster_t *c)
{
    char t[64];
    if (rnext() % 4 == 0)
        return 0;
    rtext(t, sizeof t);
    return arb_intern(&c->strs, t[0] ? t : "x");
}

/* Random jobs of every shape: the form's bytes are the old writer's. */
static void test_core_text_bytes(void **unused)
{
    (void)unused;
    arb_cluster_t c;
    char name[128], pclass[ST_PCLASS_MAX], dtext[128];

    arb_cluster_init(&c);
    int ext = arb_extnames_index(&c.ext, "rdma/hca", true);
    assert_true(ext >= 0);
    for (int i = 0; i < 3000; i++) {
        rtext(name, sizeof name);
        int ng = 1 + (int)(rnext() % 3);
        arb_job_t *j = arb_job_new(name, ng);
        assert_non_null(j);
        j->queue = rid(&c);
        j->priority = (int)rval();
        j->preemptible = rnext() % 2;
        j->gang_min = (int)rval();
        j->elastic = rnext() % 2;
        j->exclusive = rnext() % 2;
        j->gpu_sharing = (int)rval();
        j->grace_s = (int)rval();
        j->time_limit_s = rval();
        j->dataset = rid(&c);
        for (int g = 0; g < ng; g++) {
            arb_tgroup_t *t = &j->groups[g];
            char gname[32];
            rtext(gname, sizeof gname);
            arb_tgroup_set_name(t, gname);
            t->replicas = (int)rval();
            t->gpus = (int)rval();
            t->gpu_share = (int)rval();
            t->topo.required = rnext() % 2;
            t->req.gpu_mem_mib = rval();
            t->req.cpu_milli = rval();
            t->req.mem_bytes = rval();
            t->lim.cpu_milli = rval();
            t->lim.mem_bytes = rval();
            t->ephemeral_bytes = rval();
            t->req.ext[ext] = rnext() % 2 ? rval() : 0;
        }
        j->nselector = (int)(rnext() % 3);
        j->selector = calloc(2, sizeof *j->selector);
        for (int k = 0; k < j->nselector; k++)
            j->selector[k] = (arb_label_t){rid(&c), rid(&c)};
        j->nrequired = (int)(rnext() % 2);
        j->required = calloc(1, sizeof *j->required);
        if (j->nrequired) {
            j->required[0].weight = (int)rval();
            j->required[0].nexpr = 1;
            j->required[0].expr = calloc(1, sizeof *j->required[0].expr);
            arb_match_expr_t *x = &j->required[0].expr[0];
            x->key = rid(&c);
            x->op = (arb_sel_op_t)(rnext() % 4);
            x->num = rval();
            x->nvals = (int)(rnext() % 3);
            x->vals = calloc(2, sizeof(uint32_t));
            for (int v = 0; v < x->nvals; v++)
                x->vals[v] = rid(&c);
        }
        j->ntolerations = (int)(rnext() % 2);
        j->tolerations = calloc(1, sizeof *j->tolerations);
        if (j->ntolerations)
            j->tolerations[0] = (arb_toleration_t){rid(&c), rid(&c), rnext() % 2, 0};
        j->nmodels = (int)(rnext() % 2);
        j->models = calloc(1, sizeof *j->models);
        if (j->nmodels)
            j->models[0] = rid(&c);
        rtext(pclass, sizeof pclass);
        st_dep_t *dep = NULL;
        if (rnext() % 3 == 0) {
            rtext(dtext, sizeof dtext);
            st_dep_parts_t dp = {.array = rnext() % 2,
                                 .array_of = (uint64_t)rval(),
                                 .task = (int32_t)rval(),
                                 .count = (int32_t)rval(),
                                 .throttle = (int32_t)rval()};
            arb_err_t err = {{0}};
            snprintf(dp.text, sizeof dp.text, "%s", dtext[0] ? dtext : "afterok:1");
            (void)st_dep_make(&dp, &dep, &err); /* refused: written without one */
        }
        char *got = st_core_text(&c, j, NULL, dep);
        char *want0 = old_core_text(&c, j, NULL, dep);
        char *got1 = st_core_text(&c, j, pclass, dep);
        char *want1 = old_core_text(&c, j, pclass, dep);
        assert_non_null(got);
        assert_string_equal(got, want0);
        assert_string_equal(got1, want1);
        arb_buf_t b = {0};
        arb_buf_puts(&b, "{\"core\":\""); /* in place, after what the record holds */
        assert_int_equal(st_core_put(&b, &c, j, pclass, dep), 0);
        assert_string_equal(b.p + 9, want1);
        arb_buf_free(&b);
        free(want0);
        free(got);
        free(got1);
        free(want1);
        st_dep_free(dep);
        arb_job_free(j);
    }
    arb_cluster_free(&c);
}

#define CLASSES "priorityClasses:\n  - {name: batch-low, value: 50, preemptible: true}\n"

static void test_restart_from_core(void **unused)
{
    (void)unused;
    st_t *s = sf_open(CLASSES, -1);
    add_node(s, "n1");
    static const char *const specs[] = {
        "name: rich\npriorityClassName: batch-low\ngangMin: 1\ntimeLimit: 1h30m\n"
        "dataset: imagenet\nnodeSelector: {rack: r1}\n"
        "affinity:\n  required: [[{key: zone, operator: In, values: [z1, z2]},\n"
        "              {key: gpus, operator: Gt, values: [\"1\"]}]]\n"
        "  preferred: [{weight: 50, match: [{key: rack, operator: NotIn, values: [r9]}]}]\n"
        "tolerations: [{key: dedicated, operator: Equal, value: infer, effect: NoSchedule},\n"
        "              {operator: Exists}]\ngpuModels: [H100]\n"
        "terminationGracePeriodSeconds: 20\n"
        "groups:\n  - name: launcher\n    resources: {requests: {cpu: 500m, memory: 1Gi}}\n"
        "  - name: worker\n    replicas: 2\n    topology: {level: nvlink, mode: preferred}\n"
        "    resources:\n      requests: {nvidia.com/gpu: 1, nvidia.com/gpu-memory: 40Gi}\n"
        "      limits: {nvidia.com/gpu: 1, cpu: 8, memory: 64Gi}\n"
        "command: [sh, -c, 'echo \"hi\"']\nenv: {A: \"b\\tc\"}\nrestartable: false\n",
        "name: el\nreplicas: {min: 1, max: 4}\nresources: {requests: {nvidia.com/gpu: 1}}\n",
        "name: ex\nexclusive: true\ngpuSharing: deny\n"
        "resources: {requests: {arbiter.io/gpu-share: \"0.25\"}}\n",
        "name: dep\ndependency: afterok:1\narray: {count: 3, throttle: 1}\n"
        "resources: {requests: {nvidia.com/gpu: 8}}\n",
        "name: \"q\\\"uo\\\\te \xc3\xa9\"\npriority: 42\nresources: {requests: {nvidia.com/gpu: "
        "8}}\n",
    };
    enum { N = sizeof specs / sizeof specs[0] };
    uint64_t ids[N];
    char *before[N];
    for (int i = 0; i < N; i++)
        ids[i] = submit(s, specs[i]);
    int64_t t;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    for (int i = 0; i < N; i++) {
        before[i] = job_text(s, ids[i]);
        char *rec = record_of(s, ids[i]);
        assert_null(strstr(rec, "\"spec\":")); /* the spec is apart: specs/ID */
        assert_non_null(strstr(rec, "\"core\":\"a1 "));
        free(rec);
    }
    st_close(s);
    /* the class is gone from the config: the job keeps its priority, an event says so */
    s = sf_open(NULL, -1);
    assert_int_equal(st_cycle(s, NULL, &t), 0); /* what the cycle says of each, again */
    assert_int_equal(st_wait(s, t, NULL), 0);
    for (int i = 0; i < N; i++) {
        char *after = job_text(s, ids[i]);
        if (strcmp(after, before[i]) != 0) {
            size_t k = 0;
            while (after[k] == before[i][k])
                k++;
            k = k > 60 ? k - 60 : 0;
            fail_msg("job %llu changed at a restart:\n before ...%.160s\n after  ...%.160s",
                     (unsigned long long)ids[i], before[i] + k, after + k);
        }
        free(after);
        /* the spec still reads back exactly (an Idempotency-Key's retry compares it) */
        char *spec = NULL;
        size_t n = 0;
        assert_int_equal(st_job_spec_text(s, st_job_find(s, ids[i]), &spec, &n, NULL), 0);
        assert_int_equal(n, strlen(specs[i]));
        assert_memory_equal(spec, specs[i], n);
        free(spec);
    }
    assert_true(has_event(s, "job-priority-kept", "batch-low"));
    st_job_t *rich = st_job_find(s, ids[0]);
    assert_null(rich->spec); /* out of memory */
    assert_false(rich->restartable);
    assert_non_null(rich->command);
    assert_non_null(st_job_find(s, ids[3])->dep);
    st_close(s);
    for (int i = 0; i < N; i++)
        free(before[i]);
}

/* A record as the controller wrote it before the compact form (main at
 * 6ff25ce, jobrec.c's key order): its spec inside, no "core". */
static char *old_record(uint64_t id, const char *spec_json, const char *state)
{
    json_t *o = json_pack(
        "{s:I,s:s,s:s,s:b,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:b,s:s,s:[[i,n]],s:[],"
        "s:i,s:i,s:b}",
        "id", (json_int_t)id, "team", "", "owner", "root", "yaml", 0, "spec", spec_json, "state",
        state, "version", (json_int_t)1, "lamport_submit", (json_int_t)(10 + id), "lamport_update",
        (json_int_t)(10 + id), "attempt", (json_int_t)0, "epoch", (json_int_t)0, "submit_ms",
        (json_int_t)1700000000000LL, "start_ms", (json_int_t)0, "end_ms", (json_int_t)0,
        "delivered", 0, "stop", 0, "message", "", "tasks", 0, "alloc", "priority", 7,
        "time_limit_s", 0, "preemptible", 1);
    char *txt = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return txt;
}

static void test_old_store_recovers(void **unused)
{
    (void)unused;
    st_t *s = sf_open(NULL, -1);
    add_node(s, "n1");
    st_close(s);
    store_t *st = NULL;
    store_opts_t so = {.sync = STORE_SYNC_NORMAL};
    store_batch_t b = {0};
    arb_err_t err = {{0}};
    assert_int_equal(store_open(dir, &so, &st, &err), 0);
    const char *spec1 = "{\"name\": \"old\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": "
                        "1}}, \"command\": [\"true\"]}";
    const char *spec2 = "{\"name\": \"old2\", \"dependency\": \"afterok:1\", \"resources\": "
                        "{\"requests\": {\"nvidia.com/gpu\": 8}}}";
    char *r1 = old_record(1, spec1, "pending"), *r2 = old_record(2, spec2, "pending");
    /* a compact form that does not read, and no spec: kept visible, failed */
    const char *r3 = "{\"id\":3,\"team\":\"\",\"owner\":\"\",\"yaml\":false,\"state\":\"pending\","
                     "\"core\":\"a1 =j ~ 0 1 nope\",\"tasks\":[[0,null]],\"alloc\":[]}";
    store_batch_putstr(&b, "jobs/00000000000000000001", r1);
    store_batch_putstr(&b, "jobs/00000000000000000002", r2);
    store_batch_putstr(&b, "jobs/00000000000000000003", r3);
    /* a form that does not read, its spec under specs/ID: read from the spec */
    const char *r4 = "{\"id\":4,\"team\":\"\",\"owner\":\"\",\"yaml\":false,\"state\":\"pending\","
                     "\"core\":\"a1 =j ~ 0 1 nope\",\"tasks\":[[0,null]],\"alloc\":[]}";
    store_batch_putstr(&b, "jobs/00000000000000000004", r4);
    store_batch_putstr(&b, "specs/00000000000000000004", spec1);
    store_batch_putstr(&b, "meta/clock", "100");
    assert_int_equal(store_apply(st, &b, NULL, &err), 0);
    store_batch_free(&b);
    store_close(st);
    free(r1);
    free(r2);

    s = sf_open(NULL, -1);
    st_job_t *j1 = st_job_find(s, 1), *j2 = st_job_find(s, 2), *j3 = st_job_find(s, 3);
    assert_non_null(j1);
    assert_non_null(j2);
    assert_non_null(j3);
    assert_string_equal(j1->j->name, "old");
    assert_int_equal(j1->j->priority, 7);
    assert_int_equal(j1->j->groups[0].req.gpu_milli, 1000);
    assert_non_null(j1->command);
    assert_non_null(j2->dep);
    assert_int_equal(j3->j->state, ARB_JOB_FAILED);
    assert_non_null(strstr(st_job_msg(j3), "token"));
    assert_non_null(st_job_find(s, 4));
    assert_int_equal(st_job_find(s, 4)->j->state, ARB_JOB_PENDING);
    assert_string_equal(st_job_find(s, 4)->j->name, "old");
    assert_non_null(j1->spec); /* the old form keeps it in memory, the record keeps it */
    /* the next save writes the compact form beside the spec */
    int64_t t;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    char *rec = record_of(s, 1);
    assert_non_null(strstr(rec, "\"core\":\"a1 "));
    assert_non_null(strstr(rec, "\"spec\":"));
    free(rec);
    char *spec = NULL;
    size_t n = 0;
    assert_int_equal(st_job_spec_text(s, j2, &spec, &n, NULL), 0);
    assert_string_equal(spec, spec2);
    free(spec);
    st_close(s);
    s = sf_open(NULL, -1); /* and it reads back again */
    assert_string_equal(st_job_find(s, 1)->j->name, "old");
    assert_int_equal(st_job_find(s, 3)->j->state, ARB_JOB_FAILED);
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_text_round_trip),
        cmocka_unit_test(test_core_text_bytes),
        cmocka_unit_test_setup_teardown(test_restart_from_core, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_store_recovers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
