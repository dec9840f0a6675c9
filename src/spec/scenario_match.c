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

/* {key: zone, operator: In, values: [z1]} */
static const sc_field_t expr_fields[] = {
    {.key = "key", .type = SC_STR, .flags = SC_REQUIRED, .help = "a node label's key"},
    {.key = "operator",
     .type = SC_ENUM,
     .names = op_names,
     .nnames = 6,
     .flags = SC_REQUIRED,
     .help = "In and NotIn take values, Exists and DoesNotExist none, Gt and Lt one integer"},
    {.key = "values",
     .type = SC_CUSTOM,
     .type_doc = "list of strings",
     .def_doc = "[]",
     .help = "the label values"},
    {.key = NULL},
};
static const sc_table_t expr_table = {"expression", expr_fields, NULL};

static const sc_field_t pref_fields[] = {
    {.key = "weight",
     .type = SC_INT,
     .lo = 1,
     .hi = 100,
     .flags = SC_REQUIRED,
     .help = "added to the score of nodes the term matches, 1..100"},
    {.key = "match",
     .type = SC_CUSTOM,
     .sub = &expr_table,
     .flags = SC_LIST | SC_REQUIRED,
     .type_doc = "list",
     .help = "expressions, all of which must hold"},
    {.key = NULL},
};
static const sc_table_t pref_table = {"preferred term", pref_fields, NULL};

static const sc_field_t affinity_fields[] = {
    {.key = "required",
     .type = SC_CUSTOM,
     .type_doc = "list of lists",
     .def_doc = "none",
     .help = "a list of terms, each a list of expressions (as in preferred[].match); a node must "
             "match one term (all of its expressions)"},
    {.key = "preferred",
     .type = SC_CUSTOM,
     .sub = &pref_table,
     .flags = SC_LIST,
     .type_doc = "list",
     .def_doc = "none",
     .help = "weighted terms the score prefers"},
    {.key = NULL},
};
const sc_table_t scn_affinity_table = {"affinity", affinity_fields, NULL};

static const sc_field_t tol_fields[] = {
    {.key = "key",
     .type = SC_STR,
     .help = "the taint's key (required but with Exists, which then tolerates every taint)"},
    {.key = "operator",
     .type = SC_ENUM,
     .names = tol_ops,
     .nnames = 2,
     .def = "Equal",
     .help = "Equal matches key and value, Exists the key alone"},
    {.key = "value",
     .type = SC_STR,
     .def_doc = "\"\"",
     .help = "the taint's value (not with Exists)"},
    {.key = "effect",
     .type = SC_ENUM,
     .names = effects,
     .nnames = 4,
     .def_doc = "every effect",
     .help = "the effect tolerated: NoSchedule, PreferNoSchedule or NoExecute"},
    {.key = NULL},
};
const sc_table_t scn_toleration_table = {"toleration", tol_fields, NULL};

static int parse_expr(sx_t *x, const sval_t *v, arb_match_expr_t *e)
{
    char key[SPEC_STR], val[SPEC_STR];
    int op, count = 0, rc;
    sval_t f, iv;
    bool is;

    if ((rc = sv_map(x, v, &is)) < 0)
        return rc;
    if (!is)
        return sv_fail(x, v, -EINVAL, "an expression needs key: and operator:");
    if ((rc = sc_check_keys(x, v, &expr_table, SC_CTX_SCENARIO)) < 0)
        return rc;
    if (!sv_get(v, "key", &f))
        return sv_fail(x, v, -EINVAL, "missing key:");
    if ((rc = sv_text(x, &f, key, sizeof key, false)) < 0 || (rc = scn_intern(x, &f, key, &e->key)))
        return rc;
    if (!sv_get(v, "operator", &f))
        return sv_fail(x, v, -EINVAL,
                       "missing operator: (In, NotIn, Exists, DoesNotExist, Gt, Lt)");
    if ((rc = sv_enum(x, &f, op_names, 6, &op)) < 0)
        return rc;
    e->op = (arb_sel_op_t)op;
    if (sv_get(v, "values", &f) && (rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
        return rc;
    if ((op == ARB_OP_IN || op == ARB_OP_NOT_IN) && count == 0)
        return sv_fail(x, v, -EINVAL, "%s needs values: [one or more]", op_names[op]);
    if ((op == ARB_OP_EXISTS || op == ARB_OP_DOES_NOT_EXIST) && count)
        return sv_fail(x, &f, -EINVAL, "%s takes no values", op_names[op]);
    if ((op == ARB_OP_GT || op == ARB_OP_LT)) {
        void *it = NULL;
        if (count != 1)
            return sv_fail(x, count ? &f : v, -EINVAL, "%s needs exactly one integer value",
                           op_names[op]);
        sv_item(&iv, &f, fy_node_sequence_iterate(f.n, &it), 0);
        if (sv_text(x, &iv, val, sizeof val, false) == 0 && fy_node_is_scalar(iv.n) &&
            fy_node_get_style(iv.n) != FYNS_PLAIN) {
            /* Kubernetes writes these values as strings: "4". */
            char *end;
            errno = 0;
            e->num = strtoll(val, &end, 10);
            if (!*end && end != val && errno == 0)
                return 0;
            return sv_fail(x, &iv, -EINVAL, "'%s' is not an integer", val);
        }
        return sv_int(x, &iv, INT64_MIN, INT64_MAX, &e->num);
    }
    if (count) {
        void *it = NULL;
        e->vals = calloc((size_t)count, sizeof *e->vals);
        if (!e->vals)
            return sv_oom(x, &f);
        for (int i = 0; i < count; i++) {
            sv_item(&iv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = sv_text(x, &iv, val, sizeof val, true)) < 0 ||
                (rc = scn_intern(x, &iv, val, &e->vals[e->nvals])) < 0)
                return rc;
            e->nvals++;
        }
    }
    return 0;
}

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
        sv_item(&ev, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = parse_expr(x, &ev, &t->expr[i])) < 0)
            return rc;
    }
    return 0;
}

int scn_affinity(sx_t *x, const sval_t *v, arb_job_t *j)
{
    sval_t f, tv, w;
    int count, rc;
    bool is;

    if ((rc = sv_map(x, v, &is)) < 0 || !is ||
        (rc = sc_check_keys(x, v, &scn_affinity_table, SC_CTX_SCENARIO)) < 0)
        return rc;
    if (sv_get(v, "required", &f)) {
        void *it = NULL;
        if ((rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
            return rc;
        if (count && !(j->required = calloc((size_t)count, sizeof *j->required)))
            return sv_oom(x, &f);
        j->nrequired = count;
        for (int i = 0; i < count; i++) {
            sv_item(&tv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = parse_term(x, &tv, &j->required[i])) < 0)
                return rc;
        }
    }
    if (sv_get(v, "preferred", &f)) {
        void *it = NULL;
        if ((rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
            return rc;
        if (count && !(j->preferred = calloc((size_t)count, sizeof *j->preferred)))
            return sv_oom(x, &f);
        j->npreferred = count;
        for (int i = 0; i < count; i++) {
            sv_item(&tv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = sv_map(x, &tv, &is)) < 0)
                return rc;
            if (!is)
                return sv_fail(x, &tv, -EINVAL, "a preferred term needs weight: and match:");
            if ((rc = sc_check_keys(x, &tv, &pref_table, SC_CTX_SCENARIO)) < 0)
                return rc;
            if (!sv_get(&tv, "weight", &w))
                return sv_fail(x, &tv, -EINVAL, "missing weight: (1..100)");
            if ((rc = sv_int32(x, &w, 1, 100, &j->preferred[i].weight)) < 0)
                return rc;
            if (!sv_get(&tv, "match", &w))
                return sv_fail(x, &tv, -EINVAL, "missing match: [expressions]");
            if ((rc = parse_term(x, &w, &j->preferred[i])) < 0)
                return rc;
        }
    }
    return 0;
}

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
        arb_toleration_t *t = &j->tolerations[i];
        char buf[SPEC_STR];
        int op = 0;
        bool is, has_val;
        sval_t tv, f;

        sv_item(&tv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &tv, &is)) < 0 ||
            (is && (rc = sc_check_keys(x, &tv, &scn_toleration_table, SC_CTX_SCENARIO)) < 0))
            return rc;
        if (sv_get(&tv, "operator", &f) && (rc = sv_enum(x, &f, tol_ops, 2, &op)) < 0)
            return rc;
        t->exists = op == 1;
        if (sv_get(&tv, "key", &f)) {
            if ((rc = sv_text(x, &f, buf, sizeof buf, false)) < 0 ||
                (rc = scn_intern(x, &f, buf, &t->key)) < 0)
                return rc;
        } else if (!t->exists) {
            return sv_fail(x, &tv, -EINVAL,
                           "missing key:; only operator: Exists may leave it out (it then "
                           "tolerates every taint)");
        }
        has_val = sv_get(&tv, "value", &f);
        if (has_val && t->exists)
            return sv_fail(x, &f, -EINVAL, "operator Exists takes no value:");
        if (has_val) {
            if ((rc = sv_text(x, &f, buf, sizeof buf, true)) < 0)
                return rc;
            if (buf[0] && (rc = scn_intern(x, &f, buf, &t->val)) < 0)
                return rc;
        }
        if (sv_get(&tv, "effect", &f) && !sv_null(&f) &&
            (rc = sv_enum(x, &f, effects, 4, &t->effect)) < 0)
            return rc;
    }
    return 0;
}

/* priorityClassName through the caller's table (spec_prio_table_t). */
