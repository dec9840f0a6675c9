/*
 * enc_asks.c: what a job asks for and where it may run (st_job_asks_t,
 * state.h), as GET /v1/jobs/{id} and a submit's reply show it: the fields
 * of the object `arbiter submit --dry-run` prints (src/spec/job_json.c's
 * spec_job_json, less its "gpus"), in its order and with its quantities
 * (tests/unit/test_api_enc2.c holds the two to the same bytes).
 */
#include <stdio.h>
#include <string.h>

#include "api/api_int.h"

static json_t *qty(int64_t v, arb_qty_kind_t kind)
{
    char buf[32];

    arb_qty_format(v, kind, buf, sizeof buf);
    return json_string(buf);
}

/* {"name", "replicas", "gpus", "cpu", "memory", then what is set of
 * "gpu_share", "gpu_memory", "cpu_limit", "memory_limit",
 * "ephemeral_storage", "extended" {NAME: count}, "topology" {level, mode}} */
static json_t *group_json(const st_job_asks_t *a, const st_ask_group_t *g)
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
static json_t *term_json(const st_job_asks_t *a, const st_ask_term_t *t)
{
    json_t *arr = json_array();

    for (int i = 0; arr && i < t->nexpr; i++) {
        const st_ask_expr_t *e = &a->exprs[t->expr0 + i];
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

json_t *api_asks_json(const st_job_asks_t *a)
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
            const st_ask_term_t *t = &a->terms[a->nrequired + i];
            json_array_append_new(
                pref, json_pack("{s:i,s:o}", "weight", t->weight, "match", term_json(a, t)));
        }
        json_object_set_new(o, "affinity",
                            json_pack("{s:o,s:o}", "required", req, "preferred", pref));
    }
    if (a->ntolerations) {
        json_t *arr = json_array();
        for (int i = 0; arr && i < a->ntolerations; i++) {
            const st_ask_toleration_t *t = &a->tolerations[i];
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
