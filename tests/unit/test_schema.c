/*
 * test_schema.c: the schema walker (src/spec/schema.c) on a table of its
 * own: an unknown key gets a suggestion and the list of valid keys, a
 * wrong type and a value out of range are refused with the field's path
 * and position, defaults come from the table (sc_init), a nested object is
 * read through its sub-table, a field of another format is unknown, and
 * the reference lists every field of the format with its default. Also
 * the shared tables: the scheduler settings and queues read the same in a
 * scenario and in the controller config, a node's GPUs and taints the same
 * in a scenario and an agent's inventory, and the config's defaults are
 * the table's. Runs under LeakSanitizer in the ASan pass.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "agent/discovery.h"
#include "spec/scenario.h"
#include "spec/scenario_int.h" /* scn_job_table */
#include "spec/schema.h"
#include "spec/schema_node.h" /* spec_node_table */
#include "spec/schema_sched.h"
#include "state/state.h"

typedef struct inner {
    int64_t every_ns;
    bool on;
} inner_t;

typedef struct obj {
    char name[16];
    int64_t count;
    int small;
    double ratio;
    int color;
    int64_t mem;
    int64_t limit_s;
    inner_t in;
    int customs;
    bool only_config;
} obj_t;

static const char *const colors[] = {"red", "green", "blue"};

static int count_custom(sx_t *x, const sval_t *v, void *at)
{
    int64_t n;
    int rc = sv_int(x, v, 0, 9, &n);

    if (rc == 0)
        *(int *)at += (int)n;
    return rc;
}

static const sc_field_t inner_fields[] = {
    {.key = "every",
     .type = SC_DURATION,
     .off = offsetof(inner_t, every_ns),
     .lo = 1000000,
     .hi = INT64_MAX,
     .def = "1s",
     .help = "how often"},
    {.key = "on", .type = SC_BOOL, .off = offsetof(inner_t, on), .def = "true", .help = "on"},
    {.key = NULL},
};
static const sc_table_t inner_table = {"inner", inner_fields, NULL};

static const sc_field_t fields[] = {
    {.key = "name",
     .type = SC_STR,
     .off = offsetof(obj_t, name),
     .size = 16,
     .flags = SC_REQUIRED,
     .help = "a name"},
    {.key = "count",
     .type = SC_INT,
     .off = offsetof(obj_t, count),
     .size = 8,
     .lo = 1,
     .hi = 100,
     .def = "7",
     .help = "how many"},
    {.key = "small",
     .type = SC_INT,
     .off = offsetof(obj_t, small),
     .size = sizeof(int),
     .lo = -5,
     .hi = 5,
     .range_msg = "small is -5..5; pick a smaller one",
     .def = "-2"},
    {.key = "ratio",
     .type = SC_DOUBLE,
     .off = offsetof(obj_t, ratio),
     .dlo = 0,
     .dhi = 1,
     .def = "0.5"},
    {.key = "color",
     .type = SC_ENUM,
     .off = offsetof(obj_t, color),
     .names = colors,
     .nnames = 3,
     .def = "green"},
    {.key = "memory",
     .type = SC_QTY,
     .off = offsetof(obj_t, mem),
     .qty = ARB_QTY_BYTES,
     .def = "1Ki"},
    {.key = "limit",
     .type = SC_DURATION,
     .off = offsetof(obj_t, limit_s),
     .lo = 1000000000LL,
     .hi = INT64_MAX,
     .flags = SC_SECONDS,
     .def = "2m"},
    {.key = "inner", .type = SC_OBJECT, .off = offsetof(obj_t, in), .sub = &inner_table},
    {.key = "custom",
     .type = SC_CUSTOM,
     .off = offsetof(obj_t, customs),
     .set = count_custom,
     .def_doc = "0",
     .help = "added up"},
    {.key = "onlyConfig",
     .type = SC_BOOL,
     .off = offsetof(obj_t, only_config),
     .def = "false",
     .ctx = SC_CTX_CONFIG},
    {.key = NULL},
};
static const sc_table_t table = {"thing", fields, NULL};

/* Walk yaml (one mapping) into o in ctx: rc, err filled. */
static int walk(const char *yaml, unsigned ctx, obj_t *o, arb_err_t *err)
{
    sv_doc_t d;
    sx_t x = {.file = "t.yaml", .err = err};
    sval_t root;
    int rc;

    memset(o, 0, sizeof *o);
    assert_int_equal(sc_init(&table, ctx, o, err), 0);
    if ((rc = sv_doc_open("t.yaml", yaml, strlen(yaml), &d, err)) < 0)
        return rc;
    sv_root(&root, fy_document_root(d.doc), "");
    rc = sc_walk(&x, &root, &table, ctx, o);
    sv_doc_close(&d);
    return rc;
}

static void test_defaults_and_values(void **st)
{
    arb_err_t err = {{0}};
    obj_t o;

    (void)st;
    /* only name: every other field is the table's default */
    assert_int_equal(walk("name: a\n", SC_CTX_SCENARIO, &o, &err), 0);
    assert_string_equal(o.name, "a");
    assert_int_equal(o.count, 7);
    assert_int_equal(o.small, -2);
    assert_true(o.ratio == 0.5);
    assert_int_equal(o.color, 1);
    assert_int_equal(o.mem, 1024);
    assert_int_equal(o.limit_s, 120);
    assert_int_equal(o.in.every_ns, 1000000000LL); /* the sub-table's default */
    assert_true(o.in.on);
    assert_int_equal(o.customs, 0);

    /* every field given, the nested object too */
    assert_int_equal(walk("name: b\ncount: 100\nsmall: 5\nratio: 0.25\ncolor: blue\n"
                          "memory: 2Mi\nlimit: 1h30m\ninner: {every: 500ms, on: false}\n"
                          "custom: 4\n",
                          SC_CTX_SCENARIO, &o, &err),
                     0);
    assert_int_equal(o.count, 100);
    assert_int_equal(o.small, 5);
    assert_true(o.ratio == 0.25);
    assert_int_equal(o.color, 2);
    assert_int_equal(o.mem, 2 << 20);
    assert_int_equal(o.limit_s, 5400);
    assert_int_equal(o.in.every_ns, 500000000LL);
    assert_false(o.in.on);
    assert_int_equal(o.customs, 4);
}

static void test_errors(void **st)
{
    static const struct {
        const char *yaml, *want;
        unsigned ctx;
    } cases[] = {
        /* unknown key: a suggestion and the valid keys (of this format only) */
        {"name: a\ncuont: 3\n", "t.yaml:2:1: unknown field 'cuont'; did you mean 'count'?",
         SC_CTX_SCENARIO},
        {"name: a\nzzz: 3\n",
         "valid fields: name, count, small, ratio, color, memory, limit, "
         "inner, custom",
         SC_CTX_SCENARIO},
        {"name: a\nonlyConfig: true\n", "unknown field 'onlyConfig'", SC_CTX_SCENARIO},
        /* wrong types */
        {"name: a\ncount: many\n", "t.yaml:2:8: count: 'many' is not an integer", SC_CTX_SCENARIO},
        {"name: a\ninner: {on: yes}\n", "t.yaml:2:13: inner.on: ", SC_CTX_SCENARIO},
        {"name: [a]\n", "name: ", SC_CTX_SCENARIO},
        {"name: a\ncolor: pink\n", "unknown value 'pink'; use one of: red, green, blue",
         SC_CTX_SCENARIO},
        {"name: a\ninner: 3\n", "inner: expected a mapping", SC_CTX_SCENARIO},
        /* ranges: the table's bounds, or its own message */
        {"name: a\ncount: 101\n", "count: 101 is out of range; use 1..100", SC_CTX_SCENARIO},
        {"name: a\nsmall: 6\n", "small: small is -5..5; pick a smaller one", SC_CTX_SCENARIO},
        {"name: a\ninner: {every: 10us}\n", "inner.every: every must be at least 1ms",
         SC_CTX_SCENARIO},
        {"name: a\nlimit: 1500ms\n", "limit: limit is whole seconds", SC_CTX_SCENARIO},
        {"name: a\nratio: 2\n", "ratio: 2 is out of range", SC_CTX_SCENARIO},
        {"name: a\ncustom: 10\n", "custom: 10 is out of range", SC_CTX_SCENARIO},
        /* required */
        {"count: 3\n", "missing name: (a name)", SC_CTX_SCENARIO},
    };
    arb_err_t err;
    obj_t o;

    (void)st;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_true(walk(cases[i].yaml, cases[i].ctx, &o, &err) < 0);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("%s: got '%s', want '%s'", cases[i].yaml, err.msg, cases[i].want);
    }
    /* the field of the other format is a field there */
    assert_int_equal(walk("name: a\nonlyConfig: true\n", SC_CTX_CONFIG, &o, &err), 0);
    assert_true(o.only_config);
}

static void test_doc(void **st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    (void)st;
    assert_non_null(f);
    sc_doc_markdown(f, &table, SC_CTX_SCENARIO, "thing");
    fclose(f);
    assert_non_null(strstr(buf, "| key | type | default | what |\n|---|---|---|---|\n"));
    assert_non_null(strstr(buf, "| `thing.name` | string | required | a name |\n"));
    assert_non_null(strstr(buf, "| `thing.count` | int | 7 | how many |\n"));
    assert_non_null(strstr(buf, "| `thing.color` | red\\|green\\|blue | green |"));
    assert_non_null(strstr(buf, "| `thing.inner.every` | duration | 1s | how often |\n"));
    assert_non_null(strstr(buf, "| `thing.custom` | value | 0 | added up |\n"));
    assert_null(strstr(buf, "onlyConfig")); /* not a field of scenarios */
    free(buf);
}

/* A table with a rule row and a whole-object setter: the mechanism the
 * job table is read by. */
typedef struct span {
    int lo, hi;
    int width, seen_lo; /* set by span's setter, from the whole object */
    int after;          /* a field below the rule */
} span_t;

static int set_span(sx_t *x, const sval_t *v, void *obj)
{
    span_t *s = obj;
    int rc = sv_int32(x, v, 0, 1000, &s->width);

    s->seen_lo = s->lo; /* read by the field above it */
    return rc;
}

static int rule_lo_hi(sx_t *x, const sval_t *map, void *obj)
{
    const span_t *s = obj;
    sval_t f;

    if (s->lo <= s->hi)
        return 0;
    sv_get(map, "lo", &f);
    return sv_fail(x, &f, -EINVAL, "lo %d is above hi %d; give lo <= hi", s->lo, s->hi);
}

static const sc_field_t span_fields[] = {
    {.key = "lo",
     .type = SC_INT,
     .off = offsetof(span_t, lo),
     .size = sizeof(int),
     .flags = SC_REQUIRED,
     .missing = "missing lo:; give the span's start",
     .help = "start"},
    {.key = "hi", .type = SC_INT, .off = offsetof(span_t, hi), .size = sizeof(int), .help = "end"},
    {.key = "lo, hi", .type = SC_RULE, .check = rule_lo_hi, .help = "lo <= hi"},
    {.key = "width",
     .type = SC_CUSTOM,
     .set = set_span,
     .flags = SC_WHOLE,
     .type_doc = "int",
     .help = "the width"},
    {.key = "after",
     .type = SC_INT,
     .off = offsetof(span_t, after),
     .size = sizeof(int),
     .lo = 0,
     .hi = 9,
     .help = "a field below the rule"},
    {.key = NULL},
};
static const sc_table_t span_table = {"span", span_fields, NULL};

static int walk_span(const char *yaml, span_t *s, arb_err_t *err)
{
    sv_doc_t d;
    sx_t x = {.file = "s.yaml", .err = err};
    sval_t root;
    int rc;

    memset(s, 0, sizeof *s);
    memset(err, 0, sizeof *err);
    if ((rc = sv_doc_open("s.yaml", yaml, strlen(yaml), &d, err)) < 0)
        return rc;
    sv_root(&root, fy_document_root(d.doc), "");
    rc = sc_walk(&x, &root, &span_table, SC_CTX_SCENARIO, s);
    sv_doc_close(&d);
    return rc;
}

/* Rule rows run where they sit (after the rows above, before those below)
 * with the object as read, their errors at the field they name; a
 * SC_WHOLE setter gets the whole object; a required field's own missing
 * text; rule rows are no keys; the reference lists the rules. */
static void test_rules(void **st)
{
    const char *keys[16];
    char *buf = NULL;
    size_t len = 0;
    arb_err_t err;
    span_t s;
    FILE *f;

    (void)st;
    assert_int_equal(walk_span("lo: 2\nhi: 5\nwidth: 3\nafter: 1\n", &s, &err), 0);
    assert_int_equal(s.width, 3);
    assert_int_equal(s.seen_lo, 2);
    assert_int_equal(s.after, 1);
    /* the rule refuses, at lo's line, and the field below it is not read */
    assert_int_equal(walk_span("hi: 1\nlo: 4\nafter: 99\n", &s, &err), -EINVAL);
    if (!strstr(err.msg, "s.yaml:2:") || !strstr(err.msg, "lo 4 is above hi 1; give lo <= hi"))
        fail_msg("rule: %s", err.msg);
    /* a bad field above the rule is read (and refused) before it */
    assert_int_equal(walk_span("lo: 4\nhi: x\n", &s, &err), -EINVAL);
    if (!strstr(err.msg, "'x' is not an integer"))
        fail_msg("above: %s", err.msg);
    assert_int_equal(walk_span("hi: 1\n", &s, &err), -EINVAL);
    if (!strstr(err.msg, "missing lo:; give the span's start"))
        fail_msg("missing: %s", err.msg);
    /* a rule's key is no field: unknown, and not in the valid list */
    assert_int_equal(walk_span("lo: 1\n'lo, hi': 2\n", &s, &err), -EINVAL);
    if (!strstr(err.msg, "unknown field 'lo, hi'") || !strstr(err.msg, "lo, hi, width, after"))
        fail_msg("keys: %s", err.msg);
    assert_int_equal(sc_keys(&span_table, SC_CTX_SCENARIO, keys, 16), 4);
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    sc_doc_markdown(f, &span_table, SC_CTX_SCENARIO, "");
    fclose(f);
    assert_non_null(strstr(buf, "| `width` | int | none | the width |\n"));
    assert_null(strstr(buf, "| `lo, hi`"));
    assert_non_null(strstr(buf, "\nRules between fields:\n\n- `span` (lo, hi): lo <= hi\n"));
    free(buf);
    /* the shared tables' rules are rows too: a scenario's node GPUs */
    const char *scen = "nodes:\n  - name: n\n    gpus: {count: 2, nvlinkDomains: 1}\n";
    spec_scenario_t sc;
    memset(&err, 0, sizeof err);
    assert_int_equal(spec_scenario_load_mem("g.yaml", scen, strlen(scen), &sc, &err), -EINVAL);
    if (!strstr(err.msg, "g.yaml:3:12: nodes[0].gpus: missing memory: (device memory per GPU"))
        fail_msg("gpus: %s", err.msg);
    scen = "nodes:\n  - name: n\n    gpus: {count: 2, memory: 1Gi, numaNodes: 3}\n";
    memset(&err, 0, sizeof err);
    assert_int_equal(spec_scenario_load_mem("g.yaml", scen, strlen(scen), &sc, &err), -ERANGE);
    if (!strstr(err.msg, "numaNodes: 3 is out of range; use 0..2"))
        fail_msg("gpus: %s", err.msg);
    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(sc_doc_rules(f, &spec_gpus_table, SC_CTX_SCENARIO, "gpus"), 2);
    fclose(f);
    assert_non_null(strstr(buf, "- `gpus` (count, memory): "));
    free(buf);
}

/* The shared tables: the same text means the same in both formats. */
static void test_shared_tables(void **st)
{
    static const char nodes[] =
        "nodes:\n  - {name: n, gpus: {count: 8, model: A100, memory: 80Gi}}\n";
    const char *common = "scheduler: {policy: pack, queue: drf, backfill: true, preemption: "
                         "true, starvation: 90m}\n"
                         "queues:\n"
                         "  - {name: a, cohort: c, weight: 2, nominal: {nvidia.com/gpu: 4, "
                         "cpu: 8, memory: 1Gi, nvidia.com/gpu-memory: 80Gi}, borrowingLimit: "
                         "{nvidia.com/gpu: 2}}\n";
    char buf[1024];
    arb_err_t err = {{0}};
    spec_scenario_t s;
    st_conf_t c;

    (void)st;
    snprintf(buf, sizeof buf, "%s%s", common, nodes);
    if (spec_scenario_load_mem("s.yaml", buf, strlen(buf), &s, &err) != 0)
        fail_msg("scenario: %s", err.msg);
    st_conf_init(&c);
    if (st_conf_load_mem("c.yaml", common, strlen(common), &c, &err) != 0)
        fail_msg("config: %s", err.msg);
    assert_string_equal(s.policy, c.policy);
    assert_int_equal(s.queue_policy, ARB_QP_DRF);
    assert_int_equal(c.queue_policy, ARB_QP_DRF);
    assert_true(s.backfill && c.backfill && s.preemption && c.preemption);
    assert_int_equal(s.starvation_ns, c.starvation_ns);
    assert_int_equal(s.nqueues, 1);
    assert_int_equal(c.nqueues, 1);
    assert_string_equal(arb_str(&s.cluster.strs, s.queues[0].name), c.queues[0].name);
    assert_string_equal(arb_str(&s.cluster.strs, s.queues[0].cohort), c.queues[0].cohort);
    assert_true(s.queues[0].weight == c.queues[0].weight);
    assert_memory_equal(&s.queues[0].nominal, &c.queues[0].nominal, sizeof(arb_res_t));
    assert_memory_equal(&s.queues[0].borrow_limit, &c.queues[0].borrow_limit, sizeof(arb_res_t));
    assert_int_equal(c.queues[0].nominal.gpu_milli, 4000);
    assert_int_equal(c.queues[0].nominal.gpu_mem_mib, 80 * 1024);
    spec_scenario_free(&s);

    /* the same refusals, with the same words */
    static const char *const bad[] = {
        "queues:\n  - {name: q, borrowingLimit: {cpu: 1}}\n",
        "queues:\n  - {name: q, nominal: {nvidia.com/gpus: 1}}\n",
        "queues:\n  - {name: q}\n  - {name: q}\n",
        "scheduler: {queue: lifo}\n",
        "scheduler: {starvation: 5 parsecs}\n",
    };
    static const char *const want[] = {
        "borrowingLimit: needs nominal:", "did you mean 'nvidia.com/gpu'?",
        "queue 'q' is defined twice",     "unknown value 'lifo'",
        "scheduler.starvation: ",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char e1[600], e2[600];
        snprintf(buf, sizeof buf, "%s%s", bad[i], nodes);
        assert_int_equal(spec_scenario_load_mem("s.yaml", buf, strlen(buf), &s, &err), -EINVAL);
        snprintf(e1, sizeof e1, "%s", err.msg);
        assert_int_equal(st_conf_load_mem("c.yaml", bad[i], strlen(bad[i]), &c, &err), -EINVAL);
        snprintf(e2, sizeof e2, "%s", err.msg);
        if (!strstr(e1, want[i]) || !strstr(e2, want[i]))
            fail_msg("%s: scenario '%s', config '%s'", bad[i], e1, e2);
        assert_string_equal(strchr(e1, ' '), strchr(e2, ' ')); /* past FILE:LINE:COL */
    }
    /* keys only the controller acts on are unknown in a scenario */
    snprintf(buf, sizeof buf, "scheduler: {interval: 1s}\n%s", nodes);
    assert_int_equal(spec_scenario_load_mem("s.yaml", buf, strlen(buf), &s, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "unknown field 'interval'"));
    st_conf_free(&c);
}

/* A node's GPUs and taints: one table for scenarios and inventories. */
static void test_node_tables(void **st)
{
    static const struct {
        const char *node; /* the fields of one node (an inventory's top level) */
        const char *want;
    } cases[] = {
        {"gpus: {count: 2, memory: 8Gi, nvlinkDomain: 1}\n",
         "gpus: unknown field 'nvlinkDomain'; did you mean 'nvlinkDomains'?"},
        {"gpus:\n  - {memory: 8Gi, nvlnk: 0}\n", "unknown field 'nvlnk'; did you mean 'nvlink'?"},
        {"taints: [{key: k, effect: Evict}]\n",
         "unknown value 'Evict'; use one of: NoSchedule, PreferNoSchedule, NoExecute"},
        {"taints: [{key: k, efect: NoSchedule}]\n", "did you mean 'effect'?"},
        {"taints: [{value: v, effect: NoSchedule}]\n", "missing key:"},
    };
    char scen[512], ind[256];
    arb_err_t err;
    spec_scenario_t s;
    agent_inv_t *inv = calloc(1, sizeof *inv);

    (void)st;
    assert_non_null(inv);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* the node's fields, indented under "nodes: - name: n" */
        size_t o = 0;
        for (const char *p = cases[i].node; *p && o < sizeof ind - 8; p++) {
            ind[o++] = *p;
            if (*p == '\n' && p[1])
                o += (size_t)snprintf(ind + o, sizeof ind - o, "    ");
        }
        ind[o] = '\0';
        snprintf(scen, sizeof scen, "nodes:\n  - name: n\n    %s", ind);
        memset(&err, 0, sizeof err);
        assert_int_equal(spec_scenario_load_mem("s.yaml", scen, strlen(scen), &s, &err), -EINVAL);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("scenario %s: %s", scen, err.msg);
        memset(&err, 0, sizeof err);
        assert_true(
            agent_inventory_parse("inv.yaml", cases[i].node, strlen(cases[i].node), inv, &err) < 0);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("inventory %s: %s", cases[i].node, err.msg);
    }
    /* the inventory's own GPU fields are not a scenario's */
    const char *uuid = "nodes:\n  - name: n\n    gpus: [{memory: 8Gi, uuid: GPU-1}]\n";
    assert_int_equal(spec_scenario_load_mem("s.yaml", uuid, strlen(uuid), &s, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "unknown field 'uuid'"));
    const char *ok = "taints: [{key: k, value: v, effect: NoExecute}]\n"
                     "gpus: [{memory: 8Gi, uuid: GPU-1, numa: 600}]\n";
    if (agent_inventory_parse("inv.yaml", ok, strlen(ok), inv, &err) != 0)
        fail_msg("inventory: %s", err.msg);
    assert_int_equal(inv->ntaints, 1);
    assert_string_equal(inv->taints[0].key, "k");
    assert_string_equal(inv->taints[0].val, "v");
    assert_string_equal(inv->taints[0].effect, "NoExecute");
    assert_int_equal(inv->gpu[0].numa, 600);
    free(inv);
}

/* The default a table documents for key, or NULL. */
static const char *doc_default(const sc_table_t *t, const char *key)
{
    for (const sc_field_t *f = t->fields; f->key; f++)
        if (!strcmp(f->key, key))
            return f->def;
    return NULL;
}

/* The job table's setters and the node parser do not take their defaults
 * from sc_init (a job's come from arb_job_new), so the defaults their
 * tables document are checked here against what the parsers give a spec
 * that leaves the field out. */
static void test_documented_defaults(void **st)
{
    static const char scen[] = "nodes:\n  - name: n\njobs:\n  - name: j\n";
    char buf[32];
    arb_err_t err = {{0}};
    spec_scenario_t s;

    (void)st;
    if (spec_scenario_load_mem("s.yaml", scen, strlen(scen), &s, &err) != 0)
        fail_msg("%s", err.msg);
    const arb_job_t *j = s.jobs[0];
    assert_string_equal(doc_default(&scn_job_table, "preemptible"),
                        j->preemptible ? "true" : "false");
    assert_string_equal(doc_default(&scn_job_table, "exclusive"), j->exclusive ? "true" : "false");
    snprintf(buf, sizeof buf, "%d", (int)j->priority);
    assert_string_equal(doc_default(&scn_job_table, "priority"), buf);
    snprintf(buf, sizeof buf, "%d", j->groups[0].replicas);
    assert_string_equal(doc_default(&scn_job_table, "replicas"), buf);
    assert_int_equal(j->queue, 0); /* "default" */
    assert_string_equal(doc_default(&scn_job_table, "queue"), "default");
    assert_int_equal(s.cluster.nnodes, 1); /* count: 1 */
    assert_string_equal(doc_default(&spec_node_table, "count"), "1");
    assert_string_equal(doc_default(&spec_node_table, "condition"), "Ready");
    assert_int_equal(s.cluster.nodes[0].state, ARB_NODE_READY);
    spec_scenario_free(&s);
}

/* One node table serves both formats: each format's keys are its rows, and
 * a key of the other format's only is an unknown field there, with the
 * format's own list of valid keys in the message. */
static void test_node_table_formats(void **st)
{
    const char *keys[32];
    char list[256] = "";
    arb_err_t err;
    spec_scenario_t s;
    agent_inv_t *inv = calloc(1, sizeof *inv);

    (void)st;
    assert_non_null(inv);
    int n = sc_keys(&spec_node_table, SC_CTX_INVENTORY, keys, 32);
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "", keys[i]);
    assert_string_equal(list, "name cpu memory labels taints datasets gpus");
    list[0] = '\0';
    n = sc_keys(&spec_node_table, SC_CTX_SCENARIO, keys, 32);
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "", keys[i]);
    assert_string_equal(list, "name count labels taints datasets condition allocatable gpus");
    /* a scenario's count: in an inventory, an inventory's cpu: in a scenario */
    const char *inv_bad = "count: 2\n";
    memset(&err, 0, sizeof err);
    assert_true(agent_inventory_parse("inv.yaml", inv_bad, strlen(inv_bad), inv, &err) < 0);
    if (!strstr(err.msg, "unknown field 'count'") || !strstr(err.msg, "cpu"))
        fail_msg("inventory: %s", err.msg);
    const char *scen_bad = "nodes:\n  - name: n\n    cpu: 4\n";
    memset(&err, 0, sizeof err);
    assert_int_equal(spec_scenario_load_mem("s.yaml", scen_bad, strlen(scen_bad), &s, &err),
                     -EINVAL);
    if (!strstr(err.msg, "unknown field 'cpu'") || !strstr(err.msg, "allocatable"))
        fail_msg("scenario: %s", err.msg);
    free(inv);
}

/* A job's flat fields are read through its table's rows (offsets and
 * setters): each lands in the job, a bad value is refused naming its line,
 * and a rule between fields beside them keeps its text. */
static void test_job_flat_fields(void **st)
{
    const char *y = "name: j\nqueue: default\npreemptible: false\ntimeLimit: 1h30m\n"
                    "dataset: c4\nterminationGracePeriodSeconds: 30\ngpuSharing: deny\n"
                    "exclusive: true\nresources:\n  requests: {arbiter.io/gpu-share: 500m}\n";
    static const struct {
        const char *y, *want;
    } bad[] = {
        {"name: j\nexclusive: maybe\n", "job.yaml:2:"},
        {"name: j\ntimeLimit: 1.5s\n", "is counted in whole seconds"},
        {"name: j\nterminationGracePeriodSeconds: 4000\n", "out of range; use 0..3600"},
        {"name: j\ngpuSharing: maybe\n", "maybe"},
        {"name: j\npriority: 1\npriorityClassName: high\n", "not both"},
    };
    arb_cluster_t c;
    arb_job_t *j = NULL;
    arb_err_t err = {{0}};

    (void)st;
    arb_cluster_init(&c);
    if (spec_job_load_mem("job.yaml", y, strlen(y), &c, &j, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(j->queue, 0);
    assert_false(j->preemptible);
    assert_int_equal(j->time_limit_s, 5400);
    assert_string_equal(arb_str(&c.strs, j->dataset), "c4");
    assert_int_equal(j->grace_s, 30);
    assert_int_equal(j->gpu_sharing, -1);
    assert_true(j->exclusive);
    arb_job_free(j);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = NULL;
        memset(&err, 0, sizeof err);
        assert_true(spec_job_load_mem("job.yaml", bad[i].y, strlen(bad[i].y), &c, &j, &err) < 0);
        assert_null(j);
        if (!strstr(err.msg, bad[i].want))
            fail_msg("%s: %s (want %s)", bad[i].y, err.msg, bad[i].want);
    }
    arb_cluster_free(&c);
}

/* The fields a job table may leave to another reader, and why. */
static const char *const job_hand[] = {
    "count", /* a jobs[] item's repeat count: the jobs list reads it (scn_count) */
    NULL,
};

static bool in_list(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s))
            return true;
    return false;
}

/* Every key of the job table is read by its row: a typed row, a setter,
 * or an object's sub-table or setter; no row is left to a hand-written
 * branch but those job_hand lists; every rule row has its check and help;
 * and the reference (arbiter help spec) lists every key with its help and
 * every rule. Then the texts of the rules and of the fields that were read
 * by hand, from the table now. */
/*
 * The walker reads a mapping's keys once for its rows' lookups when it
 * has at most 16 keys, and asks sv_get for each row beyond (schema.c,
 * SC_WALK_KEYS). Either way a row finds its value and a bad one gets the
 * same message: the same fields read from a spec of 17 top-level keys and
 * from the same spec cut to 3, and a bad priority in each.
 */
static void test_walk_many_keys(void **st)
{
    static const char *const many =
        "name: j\nqueue: q\npriority: 7\npreemptible: false\ntimeLimit: 1h\ndataset: d\n"
        "nodeSelector: {zone: a}\ngpuModels: [H100]\nreplicas: 2\n"
        "resources: {requests: {nvidia.com/gpu: 1}}\nterminationGracePeriodSeconds: 30\n"
        "gpuSharing: deny\nexclusive: true\ntolerations: [{key: k, operator: Exists}]\n"
        "affinity: {required: [[{key: z, operator: Exists}]]}\ntopology: node\ngangMin: 1\n";
    static const char *const few = "name: j\nqueue: q\npriority: 7\n";
    const char *const texts[] = {many, few};
    arb_cluster_t c;
    arb_job_t *j = NULL;
    arb_err_t err = {{0}}, err2 = {{0}};
    char bad[2][1024];

    (void)st;
    arb_cluster_init(&c);
    for (int i = 0; i < 2; i++) {
        if (spec_job_load_mem("job.yaml", texts[i], strlen(texts[i]), &c, &j, &err) != 0)
            fail_msg("%s", err.msg);
        assert_string_equal(arb_str(&c.strs, j->queue), "q");
        assert_int_equal(j->priority, 7);
        if (i == 0) {
            assert_int_equal(j->ntasks, 2);
            assert_int_equal(j->gang_min, 1);
            assert_int_equal(j->time_limit_s, 3600);
            assert_int_equal(j->grace_s, 30);
            assert_true(j->exclusive);
        }
        arb_job_free(j);
        j = NULL;
        /* the same spec with priority: 1.5 in place of 7 */
        snprintf(bad[i], sizeof bad[i], "%s", texts[i]);
        char *at = strstr(bad[i], "priority: 7");
        memcpy(at, "priority: x", 11);
    }
    assert_true(spec_job_load_mem("job.yaml", bad[0], strlen(bad[0]), &c, &j, &err) < 0);
    assert_true(spec_job_load_mem("job.yaml", bad[1], strlen(bad[1]), &c, &j, &err2) < 0);
    assert_string_equal(err.msg, err2.msg);
    assert_non_null(strstr(err.msg, "job.yaml:3:11: priority: 'x' is not an integer"));
    arb_cluster_free(&c);
}

static void test_job_table_reads_every_field(void **st)
{
    static const struct {
        const char *y, *want;
    } bad[] = {
        {"name: j\nqueue: default\ncount: 2\n",
         "job.yaml:3:8: count: count: repeats a job in a scenario; submit one job here"},
        {"queue: default\n", "missing name:; give every job a unique name"},
        {"name: j\ngroups: [{replicas: 1}]\nreplicas: 2\n",
         "replicas: replicas: belongs inside each of groups:, or drop groups: for a one-group "
         "job"},
        {"name: j\ngroups: []\n", "groups: needs at least one group"},
        {"name: j\ngroups: [{name: a}, {name: a}]\n", "group name 'a' is used twice in this job"},
        {"name: j\ngroups: [~]\n", "a group needs resources: at least"},
        {"name: j\ngroups: [{replicas: {min: 1, max: 2}}]\n",
         "elastic replicas {min, max} are for a one-group job; give this group a number"},
        {"name: j\nreplicas: {min: 2}\n", "elastic replicas need both min: and max:"},
        {"name: j\nreplicas: {min: 3, max: 2}\n", "min 3 is above max 2; give min <= max"},
        {"name: j\nreplicas: {min: 1, max: 2}\ngangMin: 1\n",
         "gangMin: replicas {min, max} already sets the gang minimum; drop gangMin"},
        {"name: j\nreplicas: 3\ngangMin: 4\n",
         "job.yaml:3:10: gangMin: gangMin must be 0..3 (the job's tasks; 0 means all)"},
        {"name: j\nreplicas: 3\ngangMin: -1\n", "gangMin must be 0..3 (the job's tasks"},
        {"name: j\ngroups: [{replicas: 2}, {replicas: 2}]\ngangMin: 5\n",
         "gangMin must be 0..4 (the job's tasks"},
        {"name: j\ngangMin: 99999999999\n", "gangMin must be 0..the job's tasks"},
        {"name: j\nreplicas: 100001\n", "100001 is out of range; use 1..100000"},
        {"name: j\ntopology: nvlink\nresources: {requests: {cpu: 1}}\n",
         "topology: an NVLink requirement needs whole GPUs (nvidia.com/gpu) in the request"},
        {"name: j\ngroups: [{topology: {level: nvlink}}]\n",
         "groups[0].topology: an NVLink requirement needs whole GPUs"},
        {"name: j\ntopology: {mode: preferred}\n", "missing level: (nvlink, node, rack or block)"},
        {"name: j\npriorityClassName: urgent\n", "unknown priority class 'urgent'; use"},
        {"name: j\npriority: 1.5\n", "'1.5' is not an integer"},
        {"name: j\nnodeSelector: [a]\n", "nodeSelector"},
        {"name: j\ngpuModels: {a: b}\n", "gpuModels"},
        {"name: j\ntolerations: [{value: v}]\n", "missing key:; only operator: Exists"},
        {"name: j\naffinity: {required: [[]]}\n", "a term needs at least one expression"},
        {"name: j\naffinity: {required: [[{key: z, operator: In}]]}\n",
         "job.yaml:2:25: affinity.required[0][0]: In needs values: [one or more]"},
        {"name: j\naffinity: {required: [[{key: z, operator: Exists, values: [a]}]]}\n",
         "affinity.required[0][0].values: Exists takes no values"},
        {"name: j\naffinity: {required: [[{key: z, operator: Gt, values: [1, 2]}]]}\n",
         "affinity.required[0][0].values: Gt needs exactly one integer value"},
        {"name: j\naffinity: {required: [[{key: z, operator: Lt, values: [\"x\"]}]]}\n",
         "'x' is not an integer"},
        {"name: j\naffinity: {required: [[{operator: In}]]}\n", "missing key:"},
        {"name: j\naffinity: {required: [[{key: z}]]}\n",
         "missing operator: (In, NotIn, Exists, DoesNotExist, Gt, Lt)"},
        {"name: j\naffinity: {required: [[~]]}\n", "an expression needs key: and operator:"},
        {"name: j\naffinity: {preferred: [~]}\n", "a preferred term needs weight: and match:"},
        {"name: j\naffinity: {preferred: [{match: [{key: z, operator: Exists}]}]}\n",
         "missing weight: (1..100)"},
        {"name: j\naffinity: {preferred: [{weight: 101, match: []}]}\n",
         "101 is out of range; use 1..100"},
        {"name: j\naffinity: {preferred: [{weight: 1}]}\n", "missing match: [expressions]"},
        {"name: j\ntolerations: [{key: k, operator: Exists, value: v}]\n",
         "tolerations[0].value: operator Exists takes no value:"},
        {"name: j\ntolerations: [~]\n", "missing key:; only operator: Exists"},
        {"name: j\ntolerations: [{key: k, effect: Never}]\n", "Never"},
        {"name: j\nresources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}\n",
         "job.yaml:2:53: resources.limits: the limit of nvidia.com/gpu must equal its request"},
        {"name: j\nresources: {limits: {nvidia.com/gpu-memory: 1Gi}}\n",
         "resources: nvidia.com/gpu-memory is memory on each GPU the task gets; ask for"},
        {"name: j\nresources: {limits: {nvidia.com/gpu: 1, arbiter.io/gpu-share: 500m}}\n",
         "asks for both whole GPUs (nvidia.com/gpu) and a GPU share"},
    };
    const sc_field_t *f;
    char *buf = NULL, want[512];
    size_t len = 0;
    FILE *doc = open_memstream(&buf, &len);
    arb_cluster_t c;
    arb_job_t *j;
    arb_err_t err;
    int nrules = 0;

    (void)st;
    for (f = scn_job_table.fields; f->key; f++) {
        if (f->type == SC_RULE) {
            assert_non_null(f->check);
            assert_non_null(f->help);
            nrules++;
            continue;
        }
        if (f->flags & SC_HAND) {
            if (!in_list(job_hand, f->key))
                fail_msg("job field %s is read by hand, and job_hand does not say why", f->key);
            continue;
        }
        if (f->type == SC_CUSTOM && !f->set)
            fail_msg("job field %s has no reader", f->key);
        if (f->type == SC_OBJECT && !f->sub)
            fail_msg("job field %s has no sub-table", f->key);
    }
    assert_true(nrules >= 7);
    assert_non_null(doc);
    spec_job_doc(doc);
    fclose(doc);
    for (f = scn_job_table.fields; f->key; f++) {
        if (f->type == SC_RULE)
            snprintf(want, sizeof want, "- `job` (%s): %s\n", f->key, f->help);
        else if (f->type == SC_OBJECT)
            snprintf(want, sizeof want, "| `%s.", f->key);
        else
            snprintf(want, sizeof want, "| `%s%s` |", f->key, (f->flags & SC_LIST) ? "[]" : "");
        if (!strstr(buf, want))
            fail_msg("arbiter help spec lacks %s", want);
        if (f->type != SC_RULE && f->help && !strstr(buf, f->help))
            fail_msg("arbiter help spec lacks the help of %s", f->key);
    }
    assert_non_null(strstr(buf, "- `groups[]` (topology, resources): "));
    assert_non_null(strstr(buf, "- `replicas` (min, max): min <= max\n"));
    free(buf);

    arb_cluster_init(&c);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = NULL;
        memset(&err, 0, sizeof err);
        assert_true(spec_job_load_mem("job.yaml", bad[i].y, strlen(bad[i].y), &c, &j, &err) < 0);
        assert_null(j);
        if (!strstr(err.msg, bad[i].want))
            fail_msg("%s: %s (want %s)", bad[i].y, err.msg, bad[i].want);
    }
    /* what the table reads, it reads into the job */
    const char *y = "name: j\naffinity:\n  required: [[{key: z, operator: Gt, values: [\"4\"]}]]\n"
                    "  preferred: [{weight: 7, match: [{key: r, operator: In, values: [a, b]}]}]\n"
                    "tolerations: [{operator: Exists}, {key: k, value: v, effect: ~}]\n";
    j = NULL;
    memset(&err, 0, sizeof err);
    if (spec_job_load_mem("job.yaml", y, strlen(y), &c, &j, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(j->nrequired, 1);
    assert_int_equal(j->required[0].expr[0].op, ARB_OP_GT);
    assert_int_equal(j->required[0].expr[0].num, 4);
    assert_int_equal(j->preferred[0].weight, 7);
    assert_int_equal(j->preferred[0].expr[0].nvals, 2);
    assert_int_equal(j->ntolerations, 2);
    assert_true(j->tolerations[0].exists);
    assert_int_equal(j->tolerations[0].key, 0);
    assert_string_equal(arb_str(&c.strs, j->tolerations[1].val), "v");
    assert_int_equal(j->tolerations[1].effect, 0);
    arb_job_free(j);
    arb_cluster_free(&c);
}

/* The fields the node table may leave to another reader, and why. */
static const char *const node_hand[] = {
    "count", /* a scenario's nodes[] item's repeat count: the nodes list reads it (scn_count) */
    NULL,
};

/* What a test sink saw of one node. */
typedef struct seen {
    int named, labels, taints, datasets, condition, allocatable, gpus;
    char label[64], taint[64], dataset[64], gpu[128];
} seen_t;

static int seen_named(sx_t *x, const sval_t *v, spec_node_rd_t *rd)
{
    ((seen_t *)rd->dst)->named++;
    return 0;
}

static int seen_label(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const char *k, const char *val)
{
    seen_t *s = rd->dst;
    snprintf(s->label, sizeof s->label, "%d %.20s=%.20s", rd->nlabels, k, val);
    s->labels++;
    return 0;
}

static int seen_taint(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_taint_t *t)
{
    seen_t *s = rd->dst;
    snprintf(s->taint, sizeof s->taint, "%d %.16s=%.16s:%.16s", rd->ntaints, t->key, t->val,
             spec_taint_effects[t->effect]);
    s->taints++;
    return 0;
}

static int seen_dataset(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const char *name)
{
    seen_t *s = rd->dst;
    snprintf(s->dataset, sizeof s->dataset, "%d %.40s", rd->ndatasets, name);
    s->datasets++;
    return 0;
}

static int seen_condition(sx_t *x, const sval_t *v, spec_node_rd_t *rd)
{
    ((seen_t *)rd->dst)->condition++;
    return 0;
}

static int seen_allocatable(sx_t *x, const sval_t *v, spec_node_rd_t *rd)
{
    ((seen_t *)rd->dst)->allocatable++;
    return 0;
}

static int seen_gpu(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_gpu_t *g)
{
    seen_t *s = rd->dst;
    snprintf(s->gpu, sizeof s->gpu, "%d %.20s %lld %d/%d/%d %.40s", rd->ngpus, g->model,
             (long long)g->mem_mib, g->nvlink, g->pcie, g->numa, g->uuid);
    s->gpus++;
    return 0;
}

static const spec_node_ops_t seen_ops = {
    .named = seen_named,
    .label = seen_label,
    .taint = seen_taint,
    .dataset = seen_dataset,
    .condition = seen_condition,
    .allocatable = seen_allocatable,
    .gpu = seen_gpu,
};

/* The node mapping y read by spec_node_read alone in ctx, into s and rd. */
static int read_node(const char *y, unsigned ctx, seen_t *s, spec_node_rd_t *rd, arb_err_t *err)
{
    sv_doc_t d;
    sx_t x = {.file = "n.yaml", .err = err};
    sval_t root;
    int rc;

    memset(s, 0, sizeof *s);
    memset(rd, 0, sizeof *rd);
    rd->ops = &seen_ops;
    rd->dst = s;
    rd->ctx = ctx;
    if ((rc = sv_doc_open("n.yaml", y, strlen(y), &d, err)) < 0)
        return rc;
    sv_root(&root, fy_document_root(d.doc), "");
    if ((rc = sc_check_keys(&x, &root, &spec_node_table, ctx)) == 0)
        rc = spec_node_read(&x, &root, rd);
    sv_doc_close(&d);
    return rc;
}

/* Every key of the node table is read by its row, in both formats: a
 * typed row, or a setter that hands each value to the format's sink; no
 * row is left to a hand-written branch but those node_hand lists (so a
 * node read by spec_node_read alone, with a sink that only counts, sees
 * every field of a node that has them all); every rule row of the node's
 * tables has its check and help; and the references (arbiter help
 * scenario, arbiter help inventory) list every key with its help. Then a
 * scenario and an inventory built from the same reading, and the texts
 * the formats had when they read these fields by hand. */
static void test_node_table_reads_every_field(void **st)
{
    static const unsigned ctxs[] = {SC_CTX_SCENARIO, SC_CTX_INVENTORY};
    static const char scen_node[] =
        "name: n\ncount: 2\nlabels: {rack: r1, zone: z1}\n"
        "taints: [{key: a, effect: NoSchedule}, {key: k, value: v, effect: NoExecute}]\n"
        "datasets: [c4, imagenet]\ncondition: Draining\n"
        "allocatable: {cpu: 8, memory: 64Gi, rdma/hca: 4}\n"
        "gpus: [{model: H100, memory: 80Gi, nvlink: 0, pcie: 1, numa: 0}, "
        "{model: H100, memory: 80Gi, nvlink: 0, pcie: 1, numa: 1}]\n";
    static const char inv_node[] =
        "name: n\ncpu: 64\nmemory: 512Gi\nlabels: {rack: r1, zone: z1}\n"
        "taints: [{key: a, effect: NoSchedule}, {key: k, value: v, effect: NoExecute}]\n"
        "datasets: [c4, imagenet]\n"
        "gpus: [{model: H100, memory: 80Gi, nvlink: 0, pcie: 1, numa: 0}, "
        "{model: H100, memory: 80Gi, nvlink: 0, pcie: 1, numa: 1, uuid: GPU-2, "
        "pciBusId: \"0000:17:00.0\"}]\n";
    static const struct {
        unsigned ctx; /* 0: both */
        const char *y, *want;
    } bad[] = {
        {SC_CTX_SCENARIO, "count: 2\n", "n.yaml:1:1: missing name:; give every node a unique name"},
        {0, "labels: {? [a]: b}\n", "n.yaml:1:13: labels.?: a label key must be a plain string"},
        {0, "labels: {\"a\\x01\": b}\n", ": label key with a control character"},
        {SC_CTX_INVENTORY,
         "labels: {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10, k: 11, l: 12, "
         "m: 13, n: 14, o: 15, p: 16, q: 17}\n",
         "labels.q: more than 16 labels"},
        {0, "taints: [~]\n", "n.yaml:1:10: taints[0]: a taint needs key: and effect:"},
        {0, "taints: {key: k}\n", "taints: expected a list"},
        {0, "datasets: [~]\n", "datasets[0]: has no value"},
        {0, "gpus: 8\n", "n.yaml:1:7: gpus: expected a list of GPUs or {count: N"},
        {0, "gpus: [~]\n", "gpus[0]: a GPU needs at least memory: (e.g. 80Gi)"},
        {0, "gpus: {count: 2, memory: 1Gi, numaNodes: 3}\n",
         "gpus.numaNodes: 3 is out of range; use 0..2"},
        {SC_CTX_SCENARIO, "name: n\ncondition: Up\n", "condition: unknown value 'Up'"},
        {SC_CTX_INVENTORY, "cpu: 0\n", "cpu: 0 is out of range; use 1..1048576"},
        {SC_CTX_INVENTORY, "memory: 0\n", "memory: memory must be more than 0"},
        {SC_CTX_INVENTORY, "name: n\ncount: 2\n", "unknown field 'count'"},
    };
    const sc_field_t *f;
    char *buf = NULL;
    size_t len = 0;
    char want[512];
    spec_node_rd_t rd;
    seen_t s;
    arb_err_t err;
    int nrules = 0;

    (void)st;
    for (f = spec_node_table.fields; f->key; f++) {
        assert_true(f->type != SC_RULE);
        if (f->flags & SC_HAND) {
            if (!in_list(node_hand, f->key))
                fail_msg("node field %s is read by hand, and node_hand does not say why", f->key);
            continue;
        }
        if (f->ctx == SC_CTX_DOC) /* a second form the reference shows */
            continue;
        if (f->type == SC_CUSTOM && !f->set)
            fail_msg("node field %s has no reader", f->key);
        if (f->type == SC_OBJECT && !f->sub && !f->set)
            fail_msg("node field %s has no sub-table", f->key);
    }
    for (const sc_table_t *const *t = (const sc_table_t *const[]){&spec_gpus_table, &spec_gpu_table,
                                                                  &spec_taint_table, NULL};
         *t; t++)
        for (f = (*t)->fields; f->key; f++)
            if (f->type == SC_RULE) {
                assert_non_null(f->check);
                assert_non_null(f->help);
                nrules++;
            }
    assert_true(nrules >= 2);

    /* the rows alone read every field, each value to the sink */
    assert_int_equal(read_node(scen_node, SC_CTX_SCENARIO, &s, &rd, &err), 0);
    assert_string_equal(rd.name, "n");
    assert_int_equal(s.named, 1);
    assert_int_equal(rd.nlabels, 2);
    assert_int_equal(s.labels, 2);
    assert_string_equal(s.label, "1 zone=z1");
    assert_int_equal(s.taints, 2);
    assert_string_equal(s.taint, "1 k=v:NoExecute");
    assert_int_equal(s.datasets, 2);
    assert_string_equal(s.dataset, "1 imagenet");
    assert_int_equal(s.condition, 1);
    assert_int_equal(rd.condition, 2);
    assert_int_equal(s.allocatable, 1);
    assert_int_equal(s.gpus, 2);
    assert_int_equal(rd.ngpus, 2);
    assert_string_equal(s.gpu, "1 H100 81920 0/1/1 ");
    if (read_node(inv_node, SC_CTX_INVENTORY, &s, &rd, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(rd.cpus, 64);
    assert_int_equal(rd.mem_bytes, 512LL << 30);
    assert_int_equal(s.labels + s.taints + s.datasets, 6);
    assert_int_equal(s.condition + s.allocatable, 0);
    assert_string_equal(s.gpu, "1 H100 81920 0/1/1 GPU-2");
    assert_int_equal(read_node("gpus: {count: 8, model: A, memory: 1Gi, nvlinkDomains: 2, "
                               "pcieSwitches: 4, numaNodes: 2}\n",
                               SC_CTX_INVENTORY, &s, &rd, &err),
                     0);
    assert_int_equal(s.gpus, 8);
    assert_string_equal(s.gpu, "7 A 1024 1/3/1 ");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (size_t c = 0; c < 2; c++) {
            if (bad[i].ctx && bad[i].ctx != ctxs[c])
                continue;
            /* a scenario node has its name (last, so the lines stay) */
            snprintf(want, sizeof want, "%s%s", bad[i].y,
                     ctxs[c] == SC_CTX_SCENARIO && !strstr(bad[i].y, "name:") &&
                             !strstr(bad[i].want, "missing name:")
                         ? "name: n\n"
                         : "");
            memset(&err, 0, sizeof err);
            assert_true(read_node(want, ctxs[c], &s, &rd, &err) < 0);
            if (!strstr(err.msg, bad[i].want))
                fail_msg("%s (ctx %u): %s (want %s)", bad[i].y, ctxs[c], err.msg, bad[i].want);
        }

    /* the references list every row of their format */
    for (size_t c = 0; c < 2; c++) {
        FILE *doc = open_memstream(&buf, &len);
        assert_non_null(doc);
        if (ctxs[c] == SC_CTX_SCENARIO)
            spec_scenario_doc(doc);
        else
            agent_inventory_doc(doc);
        fclose(doc);
        for (f = spec_node_table.fields; f->key; f++) {
            if (f->ctx && !(f->ctx & (ctxs[c] | SC_CTX_DOC)))
                continue;
            snprintf(want, sizeof want, "| `%s%s%s", ctxs[c] == SC_CTX_SCENARIO ? "nodes[]." : "",
                     f->key, (f->flags & SC_LIST) ? "[]" : "");
            if (!strstr(buf, want))
                fail_msg("the reference (ctx %u) lacks %s", ctxs[c], want);
            if (f->help && !strstr(buf, f->help))
                fail_msg("the reference (ctx %u) lacks the help of %s", ctxs[c], f->key);
        }
        free(buf);
        buf = NULL;
    }

    /* a scenario and an inventory built from the same reading */
    char y[1024];
    size_t o = (size_t)snprintf(y, sizeof y, "nodes:\n  - ");
    for (const char *p = scen_node; *p && o < sizeof y - 8; p++) {
        y[o++] = *p;
        if (*p == '\n' && p[1])
            o += (size_t)snprintf(y + o, sizeof y - o, "    ");
    }
    y[o] = '\0';
    spec_scenario_t sc;
    memset(&err, 0, sizeof err);
    if (spec_scenario_load_mem("s.yaml", y, strlen(y), &sc, &err) != 0)
        fail_msg("%s: %s", y, err.msg);
    assert_int_equal(sc.cluster.nnodes, 2);
    arb_node_t *n = arb_cluster_find_node(&sc.cluster, "n-2");
    assert_non_null(n);
    assert_int_equal(n->state, ARB_NODE_DRAINING);
    assert_int_equal(n->nlabels, 2);
    assert_int_equal(n->ntaints, 2);
    assert_int_equal(n->ndatasets, 2);
    assert_int_equal(n->cap.cpu_milli, 8000);
    assert_int_equal(n->ngpus, 2);
    assert_int_equal(n->gpu[1].numa, 1);
    assert_int_equal(n->gpu[1].pcie, 1);
    assert_string_equal(arb_str(&sc.cluster.strs, n->taints[1].val), "v");
    spec_scenario_free(&sc);
    agent_inv_t *inv = calloc(1, sizeof *inv);
    assert_non_null(inv);
    inv->cpus = 4;
    if (agent_inventory_parse("inv.yaml", inv_node, strlen(inv_node), inv, &err) != 0)
        fail_msg("%s", err.msg);
    assert_string_equal(inv->name, "n");
    assert_int_equal(inv->cpus, 64);
    assert_int_equal(inv->nlabels, 2);
    assert_string_equal(inv->labels[1].val, "z1");
    assert_int_equal(inv->ntaints, 2);
    assert_int_equal(inv->ndatasets, 2);
    assert_string_equal(inv->datasets[1], "imagenet");
    assert_int_equal(inv->ngpus, 2);
    assert_string_equal(inv->gpu[1].uuid, "GPU-2");
    assert_string_equal(inv->gpu[1].pci_bus_id, "0000:17:00.0");
    /* what the file leaves out keeps what the host shows */
    inv->cpus = 4;
    const char *few = "labels: {a: b}\n";
    if (agent_inventory_parse("inv.yaml", few, strlen(few), inv, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(inv->cpus, 4);
    assert_string_equal(inv->name, "n");
    assert_int_equal(inv->nlabels, 1);
    assert_int_equal(inv->ngpus, 0);
    free(inv);
}

/* st_conf_init's defaults are the table's, and the reference says them. */
static void test_config_defaults(void **st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    st_conf_t c;

    (void)st;
    st_conf_init(&c);
    assert_string_equal(c.policy, "default");
    assert_int_equal(c.queue_policy, ARB_QP_PRIORITY);
    assert_int_equal(c.interval_ns, 1000000000LL);
    assert_int_equal(c.lease_ns, 10000000000LL);
    assert_int_equal(c.grace_ns, 5000000000LL);
    assert_int_equal(c.stale_ns, 5000000000LL);
    assert_int_equal(c.event_retention, 100000);
    assert_int_equal(c.job_history, 10000);
    assert_int_equal(c.sync, STORE_SYNC_FULL);
    assert_true(c.reject_unfittable);
    assert_false(c.cap_requests);
    assert_int_equal(c.idem_retention_ns, 24 * 3600000000000LL);
    assert_non_null(f);
    st_conf_doc(f);
    fclose(f);
    assert_non_null(strstr(buf, "| `scheduler.queue` | fifo\\|priority\\|drf | priority |"));
    assert_non_null(strstr(buf, "| `scheduler.interval` | duration | 1s |"));
    assert_non_null(strstr(buf, "| `queues[].maxTimeLimit` | duration |"));
    assert_non_null(strstr(buf, "| `priorityClasses[].value` | int32 |"));
    assert_non_null(strstr(buf, "| `api.idempotencyRetention` | duration | 24h |"));
    free(buf);
    st_conf_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_values),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_doc),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_shared_tables),
        cmocka_unit_test(test_node_tables),
        cmocka_unit_test(test_node_table_formats),
        cmocka_unit_test(test_job_flat_fields),
        cmocka_unit_test(test_job_table_reads_every_field),
        cmocka_unit_test(test_walk_many_keys),
        cmocka_unit_test(test_node_table_reads_every_field),
        cmocka_unit_test(test_documented_defaults),
        cmocka_unit_test(test_config_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
