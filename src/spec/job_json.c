/*
 * job_json.c: what a job asks for and where it may run (job_json.h): read
 * off the core job into a typed copy (spec_asks_read), and its one JSON
 * writer (spec_asks_json), which the controller's job view (GET
 * /v1/jobs/{id}, src/api/enc_job.c) and `arbiter submit --dry-run`
 * (spec_job_json, wl_dry.c) both call, so the two print the same bytes for
 * the same job (tests/unit/test_jobasks.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/job_json.h"

/* A name from c's table: "" for none. */
static const char *name_of(const arb_cluster_t *c, uint32_t id)
{
    const char *n = id ? arb_str(&c->strs, id) : NULL;
    return n ? n : "";
}

static void group_ask(const arb_cluster_t *c, const arb_tgroup_t *g, spec_ask_group_t *a)
{
    snprintf(a->name, sizeof a->name, "%s", g->name);
    a->replicas = g->replicas;
    a->gpus = g->gpus;
    a->gpu_share = g->gpu_share;
    a->cpu_milli = g->req.cpu_milli;
    a->mem_bytes = g->req.mem_bytes;
    a->gpu_mem_mib = g->req.gpu_mem_mib;
    if (g->lim.cpu_milli != g->req.cpu_milli)
        a->cpu_limit_milli = g->lim.cpu_milli;
    if (g->lim.mem_bytes != g->req.mem_bytes)
        a->mem_limit_bytes = g->lim.mem_bytes;
    a->ephemeral_bytes = g->ephemeral_bytes;
    for (int i = 0; i < c->ext.n && i < ARB_MAX_EXT; i++)
        a->ext[i] = g->req.ext[i];
    if (g->topo.level != ARB_TOPO_ANY) {
        a->topo_level = arb_topo_level_name(g->topo.level);
        a->topo_required = g->topo.required;
    }
}

/* Count the expressions and values of n terms. */
static void terms_size(const arb_aff_term_t *t, int n, int *nexpr, int *nvals)
{
    for (int i = 0; i < n; i++) {
        *nexpr += t[i].nexpr;
        for (int k = 0; k < t[i].nexpr; k++)
            *nvals += t[i].expr[k].nvals;
    }
}

static void term_ask(const arb_cluster_t *c, const arb_aff_term_t *t, spec_asks_t *a)
{
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
    spec_ask_term_t *at = &a->terms[a->nrequired + a->npreferred];

    at->weight = t->weight;
    at->expr0 = a->nexprs;
    at->nexpr = t->nexpr;
    for (int i = 0; i < t->nexpr; i++) {
        const arb_match_expr_t *e = &t->expr[i];
        spec_ask_expr_t *x = &a->exprs[a->nexprs++];
        x->key = name_of(c, e->key);
        x->op = (unsigned)e->op < 6 ? ops[e->op] : "?";
        x->num = e->num;
        x->val0 = a->nvals;
        if (e->op == ARB_OP_GT || e->op == ARB_OP_LT)
            continue;
        x->nvals = e->nvals;
        for (int k = 0; k < e->nvals; k++)
            a->vals[a->nvals++] = name_of(c, e->vals[k]);
    }
}

void spec_asks_free(spec_asks_t *a)
{
    free(a->groups);
    free(a->selector);
    free(a->terms);
    free(a->exprs);
    free(a->vals);
    free(a->tolerations);
    free(a->models);
    memset(a, 0, sizeof *a);
}

int spec_asks_read(const arb_cluster_t *c, const arb_job_t *j, spec_asks_t *a)
{
    static const char *const eff[] = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"};
    int nexpr = 0, nvals = 0, nterms = j->nrequired + j->npreferred;

    memset(a, 0, sizeof *a);
    a->ntasks = j->ntasks;
    a->gang_min = j->gang_min;
    a->elastic = j->elastic;
    a->grace_s = j->grace_s < 0 ? -1 : j->grace_s;
    if (j->gpu_sharing)
        a->gpu_sharing = j->gpu_sharing > 0 ? "allow" : "deny";
    a->preemptible = j->preemptible;
    a->exclusive = j->exclusive;
    a->time_limit_s = j->time_limit_s;
    a->dataset = j->dataset ? name_of(c, j->dataset) : NULL;
    for (int i = 0; i < c->ext.n && i < ARB_MAX_EXT; i++)
        a->ext_name[a->next++] = c->ext.name[i];
    terms_size(j->required, j->nrequired, &nexpr, &nvals);
    terms_size(j->preferred, j->npreferred, &nexpr, &nvals);
    if ((j->ngroups && !(a->groups = calloc((size_t)j->ngroups, sizeof *a->groups))) ||
        (j->nselector && !(a->selector = calloc((size_t)j->nselector, sizeof *a->selector))) ||
        (nterms && !(a->terms = calloc((size_t)nterms, sizeof *a->terms))) ||
        (nexpr && !(a->exprs = calloc((size_t)nexpr, sizeof *a->exprs))) ||
        (nvals && !(a->vals = calloc((size_t)nvals, sizeof *a->vals))) ||
        (j->ntolerations &&
         !(a->tolerations = calloc((size_t)j->ntolerations, sizeof *a->tolerations))) ||
        (j->nmodels && !(a->models = calloc((size_t)j->nmodels, sizeof *a->models)))) {
        spec_asks_free(a);
        return -ENOMEM;
    }
    for (int i = 0; i < j->ngroups; i++)
        group_ask(c, &j->groups[i], &a->groups[a->ngroups++]);
    for (int i = 0; i < j->nselector; i++, a->nselector++) {
        a->selector[i].key = name_of(c, j->selector[i].key);
        a->selector[i].value = name_of(c, j->selector[i].val);
    }
    for (int i = 0; i < j->nrequired; i++, a->nrequired++)
        term_ask(c, &j->required[i], a);
    for (int i = 0; i < j->npreferred; i++, a->npreferred++)
        term_ask(c, &j->preferred[i], a);
    for (int i = 0; i < j->ntolerations; i++) {
        const arb_toleration_t *t = &j->tolerations[i];
        spec_ask_toleration_t *at = &a->tolerations[a->ntolerations++];
        at->key = t->key ? name_of(c, t->key) : NULL;
        at->value = t->exists ? NULL : name_of(c, t->val);
        at->effect = t->effect > 0 && t->effect < 4 ? eff[t->effect] : NULL;
    }
    for (int i = 0; i < j->nmodels; i++)
        a->models[a->nmodels++] = name_of(c, j->models[i]);
    return 0;
}

static json_t *qty(int64_t v, arb_qty_kind_t kind)
{
    char buf[32];

    arb_qty_format(v, kind, buf, sizeof buf);
    return json_string(buf);
}

/* {"name", "replicas", "gpus", "cpu", "memory", then what is set of
 * "gpu_share", "gpu_memory", "cpu_limit", "memory_limit",
 * "ephemeral_storage", "extended" {NAME: count}, "topology" {level, mode}} */
static json_t *group_json(const spec_asks_t *a, const spec_ask_group_t *g)
{
    json_t *o = json_pack("{s:s,s:i,s:i,s:o,s:o}", "name", g->name, "replicas", g->replicas, "gpus",
                          g->gpus, "cpu", qty(g->cpu_milli, ARB_QTY_MILLI), "memory",
                          qty(g->mem_bytes, ARB_QTY_BYTES)),
           *ext = NULL;

    if (!o)
        return NULL;
    if (g->gpu_share)
        json_object_set_new(o, "gpu_share", json_integer(g->gpu_share));
    if (g->gpu_mem_mib)
        json_object_set_new(o, "gpu_memory", qty(g->gpu_mem_mib * 1024 * 1024, ARB_QTY_BYTES));
    if (g->cpu_limit_milli)
        json_object_set_new(o, "cpu_limit", qty(g->cpu_limit_milli, ARB_QTY_MILLI));
    if (g->mem_limit_bytes)
        json_object_set_new(o, "memory_limit", qty(g->mem_limit_bytes, ARB_QTY_BYTES));
    if (g->ephemeral_bytes)
        json_object_set_new(o, "ephemeral_storage", qty(g->ephemeral_bytes, ARB_QTY_BYTES));
    for (int i = 0; i < a->next && i < ARB_MAX_EXT; i++)
        if (g->ext[i]) {
            if (!ext)
                ext = json_object();
            json_object_set_new(ext, a->ext_name[i], json_integer(g->ext[i]));
        }
    if (ext)
        json_object_set_new(o, "extended", ext);
    if (g->topo_level)
        json_object_set_new(o, "topology",
                            json_pack("{s:s,s:s}", "level", g->topo_level, "mode",
                                      g->topo_required ? "required" : "preferred"));
    return o;
}

/* [{"key", "operator", "values"}]: Gt/Lt's one number as a string. */
static json_t *term_json(const spec_asks_t *a, const spec_ask_term_t *t)
{
    json_t *arr = json_array();

    for (int i = 0; arr && i < t->nexpr; i++) {
        const spec_ask_expr_t *e = &a->exprs[t->expr0 + i];
        json_t *x = json_pack("{s:s,s:s}", "key", e->key, "operator", e->op);
        if (strcmp(e->op, "Gt") == 0 || strcmp(e->op, "Lt") == 0) {
            char n[32];
            snprintf(n, sizeof n, "%lld", (long long)e->num);
            json_object_set_new(x, "values", json_pack("[s]", n));
        } else if (e->nvals) {
            json_t *v = json_array();
            for (int k = 0; k < e->nvals; k++)
                json_array_append_new(v, json_string(a->vals[e->val0 + k]));
            json_object_set_new(x, "values", v);
        }
        json_array_append_new(arr, x);
    }
    return arr;
}

static json_t *names_json(const char *const *names, int n)
{
    json_t *a = json_array();

    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(names[i]));
    return a;
}

json_t *spec_asks_json(const spec_asks_t *a)
{
    json_t *o = json_object(), *groups = json_array();

    if (!o || !groups) {
        json_decref(o);
        json_decref(groups);
        return NULL;
    }
    for (int i = 0; i < a->ngroups; i++)
        json_array_append_new(groups, group_json(a, &a->groups[i]));
    json_object_set_new(o, "ntasks", json_integer(a->ntasks));
    json_object_set_new(o, "groups", groups);
    json_object_set_new(o, "gang_min", json_integer(a->gang_min));
    if (a->elastic)
        json_object_set_new(o, "elastic",
                            json_pack("{s:i,s:i}", "min", a->gang_min, "max", a->ntasks));
    if (a->grace_s >= 0)
        json_object_set_new(o, "termination_grace_s", json_integer(a->grace_s));
    if (a->gpu_sharing)
        json_object_set_new(o, "gpu_sharing", json_string(a->gpu_sharing));
    json_object_set_new(o, "preemptible", json_boolean(a->preemptible));
    if (a->exclusive)
        json_object_set_new(o, "exclusive", json_true());
    if (a->time_limit_s)
        json_object_set_new(o, "time_limit_s", json_integer(a->time_limit_s));
    if (a->nselector) {
        json_t *sel = json_object();
        for (int i = 0; sel && i < a->nselector; i++)
            json_object_set_new(sel, a->selector[i].key, json_string(a->selector[i].value));
        json_object_set_new(o, "node_selector", sel);
    }
    if (a->nrequired || a->npreferred) {
        json_t *req = json_array(), *pref = json_array();
        for (int i = 0; i < a->nrequired; i++)
            json_array_append_new(req, term_json(a, &a->terms[i]));
        for (int i = 0; i < a->npreferred; i++) {
            const spec_ask_term_t *t = &a->terms[a->nrequired + i];
            json_array_append_new(
                pref, json_pack("{s:i,s:o}", "weight", t->weight, "match", term_json(a, t)));
        }
        json_object_set_new(o, "affinity",
                            json_pack("{s:o,s:o}", "required", req, "preferred", pref));
    }
    if (a->ntolerations) {
        json_t *arr = json_array();
        for (int i = 0; arr && i < a->ntolerations; i++) {
            const spec_ask_toleration_t *t = &a->tolerations[i];
            json_t *x = json_pack("{s:s}", "operator", t->value ? "Equal" : "Exists");
            if (t->key)
                json_object_set_new(x, "key", json_string(t->key));
            if (t->value)
                json_object_set_new(x, "value", json_string(t->value));
            if (t->effect)
                json_object_set_new(x, "effect", json_string(t->effect));
            json_array_append_new(arr, x);
        }
        json_object_set_new(o, "tolerations", arr);
    }
    if (a->nmodels)
        json_object_set_new(o, "gpu_models", names_json(a->models, a->nmodels));
    if (a->dataset)
        json_object_set_new(o, "dataset", json_string(a->dataset));
    return o;
}

json_t *spec_job_json(const arb_cluster_t *c, const arb_job_t *j)
{
    spec_asks_t a;
    json_t *o = NULL, *asks = NULL;
    int gpus = 0;

    if (spec_asks_read(c, j, &a) < 0)
        return NULL;
    for (int i = 0; i < a.ngroups; i++)
        gpus += a.groups[i].gpus * a.groups[i].replicas;
    if (!(asks = spec_asks_json(&a)) || !(o = json_pack("{s:i}", "gpus", gpus)) ||
        json_object_update(o, asks) < 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(asks);
    spec_asks_free(&a);
    return o;
}
