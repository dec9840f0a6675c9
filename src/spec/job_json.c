/*
 * job_json.c: what a job asks for, as JSON (job_json.h): the part of a job
 * object that comes from its spec. The controller's job read-back
 * (GET /v1/jobs/{id}, src/state/codec.c) and `arbiter submit --dry-run`
 * both print it, so what a file was understood as can be checked before
 * and after it is submitted.
 */
#include <stdio.h>
#include <string.h>

#include "spec/job_json.h"

static const char *s_of(const arb_cluster_t *c, uint32_t id)
{
    const char *s = id ? arb_str(&c->strs, id) : NULL;
    return s ? s : "";
}

static json_t *group_json(const arb_cluster_t *c, const arb_tgroup_t *g)
{
    char cpu[32], mem[32], gmem[32], buf[32];
    json_t *o, *ext = NULL;

    arb_qty_format(g->req.cpu_milli, ARB_QTY_MILLI, cpu, sizeof cpu);
    arb_qty_format(g->req.mem_bytes, ARB_QTY_BYTES, mem, sizeof mem);
    arb_qty_format(g->req.gpu_mem_mib * 1024 * 1024, ARB_QTY_BYTES, gmem, sizeof gmem);
    o = json_pack("{s:s,s:i,s:i,s:s,s:s}", "name", g->name, "replicas", g->replicas, "gpus",
                  g->gpus, "cpu", cpu, "memory", mem);
    if (g->gpu_share)
        json_object_set_new(o, "gpu_share", json_integer(g->gpu_share));
    if (g->req.gpu_mem_mib)
        json_object_set_new(o, "gpu_memory", json_string(gmem));
    if (g->lim.cpu_milli && g->lim.cpu_milli != g->req.cpu_milli) {
        arb_qty_format(g->lim.cpu_milli, ARB_QTY_MILLI, buf, sizeof buf);
        json_object_set_new(o, "cpu_limit", json_string(buf));
    }
    if (g->lim.mem_bytes && g->lim.mem_bytes != g->req.mem_bytes) {
        arb_qty_format(g->lim.mem_bytes, ARB_QTY_BYTES, buf, sizeof buf);
        json_object_set_new(o, "memory_limit", json_string(buf));
    }
    if (g->ephemeral_bytes) {
        arb_qty_format(g->ephemeral_bytes, ARB_QTY_BYTES, buf, sizeof buf);
        json_object_set_new(o, "ephemeral_storage", json_string(buf));
    }
    for (int i = 0; i < c->ext.n && i < ARB_MAX_EXT; i++)
        if (g->req.ext[i]) {
            if (!ext)
                ext = json_object();
            json_object_set_new(ext, c->ext.name[i], json_integer(g->req.ext[i]));
        }
    if (ext)
        json_object_set_new(o, "extended", ext);
    if (g->topo.level != ARB_TOPO_ANY)
        json_object_set_new(o, "topology",
                            json_pack("{s:s,s:s}", "level", arb_topo_level_name(g->topo.level),
                                      "mode", g->topo.required ? "required" : "preferred"));
    return o;
}

static json_t *term_json(const arb_cluster_t *c, const arb_aff_term_t *t)
{
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
    json_t *a = json_array();

    for (int i = 0; i < t->nexpr; i++) {
        const arb_match_expr_t *e = &t->expr[i];
        json_t *x = json_pack("{s:s,s:s}", "key", s_of(c, e->key), "operator",
                              (unsigned)e->op < 6 ? ops[e->op] : "?");
        if (e->op == ARB_OP_GT || e->op == ARB_OP_LT) {
            char n[32];
            snprintf(n, sizeof n, "%lld", (long long)e->num);
            json_object_set_new(x, "values", json_pack("[s]", n));
        } else if (e->nvals) {
            json_t *v = json_array();
            for (int k = 0; k < e->nvals; k++)
                json_array_append_new(v, json_string(s_of(c, e->vals[k])));
            json_object_set_new(x, "values", v);
        }
        json_array_append_new(a, x);
    }
    return a;
}

json_t *spec_job_json(const arb_cluster_t *c, const arb_job_t *j)
{
    json_t *o = json_object(), *groups = json_array();
    int gpus = 0;

    for (int i = 0; i < j->ngroups; i++) {
        gpus += j->groups[i].gpus * j->groups[i].replicas;
        json_array_append_new(groups, group_json(c, &j->groups[i]));
    }
    json_object_set_new(o, "gpus", json_integer(gpus));
    json_object_set_new(o, "ntasks", json_integer(j->ntasks));
    json_object_set_new(o, "groups", groups);
    json_object_set_new(o, "gang_min", json_integer(j->gang_min));
    if (j->elastic)
        json_object_set_new(o, "elastic",
                            json_pack("{s:i,s:i}", "min", j->gang_min, "max", j->ntasks));
    if (j->grace_s >= 0)
        json_object_set_new(o, "termination_grace_s", json_integer(j->grace_s));
    if (j->gpu_sharing)
        json_object_set_new(o, "gpu_sharing", json_string(j->gpu_sharing > 0 ? "allow" : "deny"));
    json_object_set_new(o, "preemptible", json_boolean(j->preemptible));
    if (j->exclusive)
        json_object_set_new(o, "exclusive", json_true());
    if (j->time_limit_s)
        json_object_set_new(o, "time_limit_s", json_integer(j->time_limit_s));
    if (j->nselector) {
        json_t *sel = json_object();
        for (int i = 0; i < j->nselector; i++)
            json_object_set_new(sel, s_of(c, j->selector[i].key),
                                json_string(s_of(c, j->selector[i].val)));
        json_object_set_new(o, "node_selector", sel);
    }
    if (j->nrequired || j->npreferred) {
        json_t *aff = json_object(), *req = json_array(), *pref = json_array();
        for (int i = 0; i < j->nrequired; i++)
            json_array_append_new(req, term_json(c, &j->required[i]));
        for (int i = 0; i < j->npreferred; i++)
            json_array_append_new(pref, json_pack("{s:i,s:o}", "weight", j->preferred[i].weight,
                                                  "match", term_json(c, &j->preferred[i])));
        json_object_set_new(aff, "required", req);
        json_object_set_new(aff, "preferred", pref);
        json_object_set_new(o, "affinity", aff);
    }
    if (j->ntolerations) {
        static const char *const eff[] = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"};
        json_t *a = json_array();
        for (int i = 0; i < j->ntolerations; i++) {
            const arb_toleration_t *t = &j->tolerations[i];
            json_t *x = json_pack("{s:s}", "operator", t->exists ? "Exists" : "Equal");
            if (t->key)
                json_object_set_new(x, "key", json_string(s_of(c, t->key)));
            if (!t->exists)
                json_object_set_new(x, "value", json_string(s_of(c, t->val)));
            if (t->effect > 0 && t->effect < 4)
                json_object_set_new(x, "effect", json_string(eff[t->effect]));
            json_array_append_new(a, x);
        }
        json_object_set_new(o, "tolerations", a);
    }
    if (j->nmodels) {
        json_t *a = json_array();
        for (int i = 0; i < j->nmodels; i++)
            json_array_append_new(a, json_string(s_of(c, j->models[i])));
        json_object_set_new(o, "gpu_models", a);
    }
    if (j->dataset)
        json_object_set_new(o, "dataset", json_string(s_of(c, j->dataset)));
    return o;
}
