/*
 * scenario_match.c: where a job may go by labels and taints: affinity
 * terms (required and preferred, Kubernetes' nodeSelectorTerms with
 * In/NotIn/Exists/DoesNotExist/Gt/Lt expressions) and tolerations.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/scenario_int.h"

static const char *const op_names[] = {
    [ARB_OP_IN] = "In",         [ARB_OP_NOT_IN] = "NotIn",
    [ARB_OP_EXISTS] = "Exists", [ARB_OP_DOES_NOT_EXIST] = "DoesNotExist",
    [ARB_OP_GT] = "Gt",         [ARB_OP_LT] = "Lt",
};

/* Resource names, as in Kubernetes (plus Arbiter's GPU share). */

static const char *const tol_ops[] = {"Equal", "Exists"};
static const char *const effects[] = {[ARB_TAINT_NO_SCHEDULE] = "NoSchedule",
                                      [ARB_TAINT_PREFER_NO_SCHEDULE] = "PreferNoSchedule",
                                      [ARB_TAINT_NO_EXECUTE] = "NoExecute"};

/* A label key or value, interned (key: SC_WHOLE setters write it where
 * their object keeps it). */
static int read_interned(sx_t *x, const sval_t *v, bool allow_empty, uint32_t *id)
{
    char buf[SPEC_STR];
    int rc = sv_text(x, v, buf, sizeof buf, allow_empty);

    if (rc < 0 || !buf[0])
        return rc;
    return scn_intern(x, v, buf, id);
}

/* ---- expressions: {key: zone, operator: In, values: [z1]} -------------------- */

_Static_assert(sizeof(arb_sel_op_t) == sizeof(int), "operator is an SC_ENUM row");

static int set_expr_key(sx_t *x, const sval_t *v, void *at)
{
    return read_interned(x, v, false, at);
}

static bool op_is_num(int op)
{
    return op == ARB_OP_GT || op == ARB_OP_LT;
}

/* values: for Gt and Lt one integer (Kubernetes writes it as a string,
 * "4"), for the others label values; how many each takes is the rule
 * below the row (rule_expr_values), so a wrong count is not read. */
static int set_expr_values(sx_t *x, const sval_t *v, void *obj)
{
    arb_match_expr_t *e = obj;
    char val[SPEC_STR];
    void *it = NULL;
    sval_t iv;
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);

    if (rc < 0 || count == 0 || e->op == ARB_OP_EXISTS || e->op == ARB_OP_DOES_NOT_EXIST)
        return rc;
    if (op_is_num(e->op)) {
        if (count != 1)
            return 0;
        sv_item(&iv, v, fy_node_sequence_iterate(v->n, &it), 0);
        if (sv_text(x, &iv, val, sizeof val, false) == 0 && fy_node_is_scalar(iv.n) &&
            fy_node_get_style(iv.n) != FYNS_PLAIN) {
            char *end;
            errno = 0;
            e->num = strtoll(val, &end, 10);
            if (!*end && end != val && errno == 0)
                return 0;
            return sv_fail(x, &iv, -EINVAL, "'%s' is not an integer", val);
        }
        return sv_int(x, &iv, INT64_MIN, INT64_MAX, &e->num);
    }
    if (!(e->vals = calloc((size_t)count, sizeof *e->vals)))
        return sv_oom(x, v);
    for (int i = 0; i < count; i++) {
        sv_item(&iv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_text(x, &iv, val, sizeof val, true)) < 0 ||
            (rc = scn_intern(x, &iv, val, &e->vals[e->nvals])) < 0)
            return rc;
        e->nvals++;
    }
    return 0;
}

/* How many values the operator takes. */
static int rule_expr_values(sx_t *x, const sval_t *map, void *obj)
{
    const arb_match_expr_t *e = obj;
    const char *op = op_names[e->op];
    sval_t f;
    bool has = sv_get(map, "values", &f);
    int count = has && f.n && fy_node_is_sequence(f.n) ? fy_node_sequence_item_count(f.n) : 0;

    if ((e->op == ARB_OP_IN || e->op == ARB_OP_NOT_IN) && count == 0)
        return sv_fail(x, map, -EINVAL, "%s needs values: [one or more]", op);
    if ((e->op == ARB_OP_EXISTS || e->op == ARB_OP_DOES_NOT_EXIST) && count)
        return sv_fail(x, &f, -EINVAL, "%s takes no values", op);
    if (op_is_num(e->op) && count != 1)
        return sv_fail(x, count ? &f : map, -EINVAL, "%s needs exactly one integer value", op);
    return 0;
}

static const sc_field_t expr_fields[] = {
    {.key = "key",
     .type = SC_CUSTOM,
     .off = offsetof(arb_match_expr_t, key),
     .set = set_expr_key,
     .type_doc = "string",
     .flags = SC_REQUIRED,
     .missing = "missing key:",
     .help = "a node label's key"},
    {.key = "operator",
     .type = SC_ENUM,
     .off = offsetof(arb_match_expr_t, op),
     .names = op_names,
     .nnames = 6,
     .flags = SC_REQUIRED,
     .missing = "missing operator: (In, NotIn, Exists, DoesNotExist, Gt, Lt)",
     .help = "In and NotIn take values, Exists and DoesNotExist none, Gt and Lt one integer"},
    {.key = "values",
     .type = SC_CUSTOM,
     .set = set_expr_values,
     .flags = SC_WHOLE,
     .type_doc = "list of strings",
     .def_doc = "[]",
     .help = "the label values"},
    {.key = "operator, values",
     .type = SC_RULE,
     .check = rule_expr_values,
     .help = "In and NotIn take one or more values, Exists and DoesNotExist none, Gt and Lt "
             "exactly one integer"},
    {.key = NULL},
};
static const sc_table_t expr_table = {"expression", expr_fields, NULL};

/* A term (a list of expressions, all of which must hold). */
static int parse_term(sx_t *x, const sval_t *v, arb_aff_term_t *t)
{
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);
    void *it = NULL;

    if (rc < 0)
        return rc;
    if (count == 0)
        return sv_fail(x, v, -EINVAL,
                       "a term needs at least one expression "
                       "[{key: zone, operator: In, values: [z1]}]");
    t->expr = calloc((size_t)count, sizeof *t->expr);
    if (!t->expr)
        return sv_oom(x, v);
    t->nexpr = count;
    for (int i = 0; i < count; i++) {
        sval_t ev;
        bool is;
        sv_item(&ev, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &ev, &is)) < 0)
            return rc;
        if (!is)
            return sv_fail(x, &ev, -EINVAL, "an expression needs key: and operator:");
        if ((rc = sc_walk(x, &ev, &expr_table, SC_CTX_SCENARIO, &t->expr[i])) < 0)
            return rc;
    }
    return 0;
}

/* ---- affinity: required terms, preferred weighted terms ---------------------- */

static int set_match(sx_t *x, const sval_t *v, void *obj)
{
    return parse_term(x, v, obj);
}

static const sc_field_t pref_fields[] = {
    {.key = "weight",
     .type = SC_INT,
     .off = offsetof(arb_aff_term_t, weight),
     .size = sizeof(int),
     .lo = 1,
     .hi = 100,
     .flags = SC_REQUIRED,
     .missing = "missing weight: (1..100)",
     .help = "added to the score of nodes the term matches, 1..100"},
    {.key = "match",
     .type = SC_CUSTOM,
     .sub = &expr_table,
     .set = set_match,
     .flags = SC_LIST | SC_REQUIRED | SC_WHOLE,
     .missing = "missing match: [expressions]",
     .type_doc = "list",
     .help = "expressions, all of which must hold"},
    {.key = NULL},
};
static const sc_table_t pref_table = {"preferred term", pref_fields, NULL};

/* A list of terms into *terms (n of them); preferred ones are mappings
 * {weight, match}, required ones bare lists. */
static int read_terms(sx_t *x, const sval_t *v, bool preferred, arb_aff_term_t **terms, int *n)
{
    void *it = NULL;
    sval_t tv;
    bool is;
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);

    if (rc < 0)
        return rc;
    if (count && !(*terms = calloc((size_t)count, sizeof **terms)))
        return sv_oom(x, v);
    *n = count;
    for (int i = 0; i < count; i++) {
        sv_item(&tv, v, fy_node_sequence_iterate(v->n, &it), i);
        if (!preferred) {
            if ((rc = parse_term(x, &tv, &(*terms)[i])) < 0)
                return rc;
            continue;
        }
        if ((rc = sv_map(x, &tv, &is)) < 0)
            return rc;
        if (!is)
            return sv_fail(x, &tv, -EINVAL, "a preferred term needs weight: and match:");
        if ((rc = sc_walk(x, &tv, &pref_table, SC_CTX_SCENARIO, &(*terms)[i])) < 0)
            return rc;
    }
    return 0;
}

static int set_required(sx_t *x, const sval_t *v, void *obj)
{
    arb_job_t *j = obj;

    return read_terms(x, v, false, &j->required, &j->nrequired);
}

static int set_preferred(sx_t *x, const sval_t *v, void *obj)
{
    arb_job_t *j = obj;

    return read_terms(x, v, true, &j->preferred, &j->npreferred);
}

static const sc_field_t affinity_fields[] = {
    {.key = "required",
     .type = SC_CUSTOM,
     .set = set_required,
     .flags = SC_WHOLE,
     .type_doc = "list of lists",
     .def_doc = "none",
     .help = "a list of terms, each a list of expressions (as in preferred[].match); a node must "
             "match one term (all of its expressions)"},
    {.key = "preferred",
     .type = SC_CUSTOM,
     .sub = &pref_table,
     .set = set_preferred,
     .flags = SC_LIST | SC_WHOLE,
     .type_doc = "list",
     .def_doc = "none",
     .help = "weighted terms the score prefers"},
    {.key = NULL},
};
const sc_table_t scn_affinity_table = {"affinity", affinity_fields, NULL};

int scn_affinity(sx_t *x, const sval_t *v, arb_job_t *j)
{
    return sc_walk(x, v, &scn_affinity_table, SC_CTX_SCENARIO, j);
}

/* ---- tolerations --------------------------------------------------------------- */

static int set_tol_key(sx_t *x, const sval_t *v, void *at)
{
    return read_interned(x, v, false, at);
}

static int set_tol_operator(sx_t *x, const sval_t *v, void *obj)
{
    arb_toleration_t *t = obj;
    int op = 0, rc = sv_enum(x, v, tol_ops, 2, &op);

    t->exists = op == 1;
    return rc;
}

static int set_tol_value(sx_t *x, const sval_t *v, void *at)
{
    return read_interned(x, v, true, at);
}

static int rule_tol_key(sx_t *x, const sval_t *map, void *obj)
{
    const arb_toleration_t *t = obj;
    sval_t f;

    if (t->exists || sv_get(map, "key", &f))
        return 0;
    return sv_fail(x, map, -EINVAL,
                   "missing key:; only operator: Exists may leave it out (it then tolerates "
                   "every taint)");
}

static int rule_tol_value(sx_t *x, const sval_t *map, void *obj)
{
    const arb_toleration_t *t = obj;
    sval_t f;

    if (t->exists && sv_get(map, "value", &f))
        return sv_fail(x, &f, -EINVAL, "operator Exists takes no value:");
    return 0;
}

static const sc_field_t tol_fields[] = {
    {.key = "key",
     .type = SC_CUSTOM,
     .off = offsetof(arb_toleration_t, key),
     .set = set_tol_key,
     .type_doc = "string",
     .help = "the taint's key (required but with Exists, which then tolerates every taint)"},
    {.key = "operator",
     .type = SC_CUSTOM,
     .set = set_tol_operator,
     .flags = SC_WHOLE,
     .type_doc = "Equal\\|Exists",
     .def = "Equal",
     .help = "Equal matches key and value, Exists the key alone"},
    {.key = "key, operator",
     .type = SC_RULE,
     .check = rule_tol_key,
     .help = "key is required but with operator Exists"},
    {.key = "operator, value",
     .type = SC_RULE,
     .check = rule_tol_value,
     .help = "operator Exists takes no value"},
    {.key = "value",
     .type = SC_CUSTOM,
     .off = offsetof(arb_toleration_t, val),
     .set = set_tol_value,
     .type_doc = "string",
     .def_doc = "\"\"",
     .help = "the taint's value (not with Exists)"},
    {.key = "effect",
     .type = SC_ENUM,
     .off = offsetof(arb_toleration_t, effect),
     .names = effects,
     .nnames = 4,
     .flags = SC_EMPTY_OK,
     .def_doc = "every effect",
     .help = "the effect tolerated: NoSchedule, PreferNoSchedule or NoExecute"},
    {.key = NULL},
};
const sc_table_t scn_toleration_table = {"toleration", tol_fields, NULL};

int scn_tolerations(sx_t *x, const sval_t *v, arb_job_t *j)
{
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);
    void *it = NULL;

    if (rc < 0)
        return rc;
    if (count && !(j->tolerations = calloc((size_t)count, sizeof *j->tolerations)))
        return sv_oom(x, v);
    j->ntolerations = count;
    for (int i = 0; i < count; i++) {
        sval_t tv;
        sv_item(&tv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sc_walk(x, &tv, &scn_toleration_table, SC_CTX_SCENARIO, &j->tolerations[i])) < 0)
            return rc;
    }
    return 0;
}
