/*
 * enc_node.c: the nodes as clients read them (GET /v1/nodes, GET
 * /v1/nodes/{name}, the node operations' replies): the state's typed view
 * (st_node_view_t) encoded to JSON, field by field in the order the CLI
 * (`arbiter nodes`), the console's GPU map and docs/api.md know. Telemetry,
 * inventory and what operators set come as the JSON text the state kept.
 * A cordon's or drain's body ({"reason": TEXT}) and a patch's ({"labels":
 * {K: V|null}, "taints": {"add": [...], "remove": [...]}}) are decoded here,
 * checked field by field (Kubernetes' label and taint syntax).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "state/jv.h"

/* A label name part: 1..63 of [A-Za-z0-9-_.], alphanumeric at both ends. */
static bool label_name_ok(const char *s, size_t n)
{
    if (n < 1 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* A Kubernetes label (or taint) key: [PREFIX/]NAME, PREFIX a DNS subdomain. */
static int key_check(const char *what, const char *k, arb_err_t *err)
{
    const char *slash = strchr(k, '/');
    const char *name = slash ? slash + 1 : k;
    bool ok = label_name_ok(name, strlen(name));

    if (ok && slash) {
        size_t pn = (size_t)(slash - k);
        ok = pn >= 1 && pn <= 253 && isalnum((unsigned char)k[0]) &&
             isalnum((unsigned char)k[pn - 1]);
        for (size_t i = 0; ok && i < pn; i++)
            ok = (k[i] >= 'a' && k[i] <= 'z') || isdigit((unsigned char)k[i]) || k[i] == '-' ||
                 k[i] == '.';
    }
    if (!ok)
        return arb_errf(err, -EINVAL,
                        "%s key '%.80s': use [PREFIX/]NAME, NAME 1..63 letters, digits, '-', '_' "
                        "or '.' starting and ending with a letter or digit, PREFIX a DNS name "
                        "(example.com/rack)",
                        what, k);
    return 0;
}

static int value_check(const char *what, const char *k, const char *v, arb_err_t *err)
{
    if (v[0] && !label_name_ok(v, strlen(v)))
        return arb_errf(err, -EINVAL,
                        "%s '%.80s': value '%.80s': empty, or 1..63 letters, digits, '-', '_' "
                        "or '.' starting and ending with a letter or digit",
                        what, k, v);
    return 0;
}

void api_patch_free(st_patch_t *p)
{
    free(p->labels);
    free(p->add);
    free(p->remove);
    memset(p, 0, sizeof *p);
}

int api_patch_decode(const json_t *b, st_patch_t *out, arb_err_t *err)
{
    static const char *const keys[] = {"labels", "taints", NULL};
    static const char *const tkeys[] = {"add", "remove", NULL};
    static const char *const akeys[] = {"key", "value", "effect", NULL};
    static const char *const rkeys[] = {"key", "effect", NULL};
    json_t *labels, *taints, *a[2] = {NULL, NULL}, *v;
    const char *k;
    size_t i;
    int rc;

    memset(out, 0, sizeof *out);
    if (!json_is_object(b))
        return arb_errf(err, -EINVAL, "body: expected {\"labels\": {...}, \"taints\": {...}}");
    if ((rc = jv_object(b, "", keys, err)) < 0 ||
        (rc = jv_member(b, "labels", "", JSON_OBJECT, &labels, err)) < 0 ||
        (rc = jv_member(b, "taints", "", JSON_OBJECT, &taints, err)) < 0)
        return rc;
    json_object_foreach(labels, k, v)
    {
        if ((rc = key_check("label", k, err)) < 0)
            return rc;
        if (!json_is_string(v) && !json_is_null(v))
            return arb_errf(err, -EINVAL, "labels.%s: a string (set it) or null (remove it)", k);
        if (json_is_string(v) && (rc = value_check("label", k, json_string_value(v), err)) < 0)
            return rc;
    }
    if (taints && (rc = jv_object(taints, "taints", tkeys, err)) < 0)
        return rc;
    for (int pass = 0; pass < 2; pass++) {
        const char *what = pass ? "remove" : "add";
        char path[64];
        if ((rc = jv_member(taints, what, "taints", JSON_ARRAY, &a[pass], err)) < 0)
            return rc;
        json_array_foreach(a[pass], i, v)
        {
            char key[256] = "", val[256] = "", eff[32] = "";
            snprintf(path, sizeof path, "taints.%s[%zu]", what, i);
            if ((rc = jv_object(v, path, pass ? rkeys : akeys, err)) < 0 ||
                (rc = jv_str(v, "key", path, key, sizeof key, err)) < 0 ||
                (!pass && (rc = jv_str(v, "value", path, val, sizeof val, err)) < 0) ||
                (rc = jv_str(v, "effect", path, eff, sizeof eff, err)) < 0)
                return rc;
            if ((rc = key_check("taint", key, err)) < 0 ||
                (rc = value_check("taint", key, val, err)) < 0)
                return rc;
            if ((!pass || eff[0]) && !st_taint_effect(eff))
                return arb_errf(err, -EINVAL,
                                "%s.effect: '%s'; use NoSchedule, PreferNoSchedule or NoExecute",
                                path, eff);
        }
    }
    /* Checked whole: the edits, their strings borrowed from b. */
    if ((json_object_size(labels) &&
         !(out->labels = calloc(json_object_size(labels), sizeof *out->labels))) ||
        (json_array_size(a[0]) && !(out->add = calloc(json_array_size(a[0]), sizeof *out->add))) ||
        (json_array_size(a[1]) &&
         !(out->remove = calloc(json_array_size(a[1]), sizeof *out->remove)))) {
        api_patch_free(out);
        return arb_errf(err, -ENOMEM, "out of memory reading the patch");
    }
    json_object_foreach(labels, k, v)
    {
        out->labels[out->nlabels].key = k;
        out->labels[out->nlabels++].value = json_string_value(v); /* null: NULL, removed */
    }
    for (int pass = 0; pass < 2; pass++)
        json_array_foreach(a[pass], i, v)
        {
            st_taint_edit_t *e = pass ? &out->remove[out->nremove++] : &out->add[out->nadd++];
            const char *val = json_string_value(json_object_get(v, "value"));
            const char *eff = json_string_value(json_object_get(v, "effect"));
            e->key = json_string_value(json_object_get(v, "key"));
            e->value = val ? val : "";
            e->effect = eff ? eff : "";
        }
    return 0;
}

int api_cordon_decode(const json_t *body, char *reason, size_t n, arb_err_t *err)
{
    static const char *const keys[] = {"reason", NULL};
    int rc;

    reason[0] = '\0';
    if (!body)
        return 0;
    if ((rc = jv_object(body, "", keys, err)) < 0 ||
        (rc = jv_str(body, "reason", "", reason, n, err)) < 0) {
        reason[0] = '\0';
        return rc;
    }
    return 0;
}

/* A task's GPU mask as the list of its device indices. */
json_t *api_gpu_list(uint16_t mask)
{
    json_t *a = json_array();
    for (int g = 0; g < ARB_MAX_GPUS; g++)
        if (mask & (1u << g))
            json_array_append_new(a, json_integer(g));
    return a;
}

/* The JSON document of a text the state kept (NULL when there is none). */
static json_t *doc(const char *text)
{
    return text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
}

json_t *api_node_json(const st_node_view_t *v)
{
    json_t *gpus = json_array(), *labels = json_object(), *o;
    char cpu[32], mem[32], ucpu[32], umem[32];

    for (int g = 0; g < v->ngpus; g++) {
        const st_gpu_view_t *d = &v->gpus[g];
        json_t *jobs = json_array();
        for (int k = 0; k < d->njobs; k++)
            json_array_append_new(jobs, json_integer((json_int_t)d->jobs[k]));
        json_array_append_new(gpus,
                              json_pack("{s:i,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:o}", "index",
                                        d->index, "model", d->model, "memory_mib", d->memory_mib,
                                        "used_milli", d->used_milli, "nvlink", d->nvlink, "pcie",
                                        d->pcie, "numa", d->numa, "util", d->util, "temp_c",
                                        d->temp_c, "healthy", d->healthy, "jobs", jobs));
    }
    for (int i = 0; i < v->nlabels; i++)
        json_object_set_new(labels, v->labels[i].key, json_string(v->labels[i].value));
    arb_qty_format(v->cap.cpu_milli, ARB_QTY_MILLI, cpu, sizeof cpu);
    arb_qty_format(v->cap.mem_bytes, ARB_QTY_BYTES, mem, sizeof mem);
    arb_qty_format(v->used.cpu_milli, ARB_QTY_MILLI, ucpu, sizeof ucpu);
    arb_qty_format(v->used.mem_bytes, ARB_QTY_BYTES, umem, sizeof umem);
    o = json_pack("{s:s,s:s,s:I,s:o,s:{s:i,s:s,s:s},s:{s:f,s:s,s:s},s:i,s:o}", "name", v->name,
                  "state", v->state, "version", (json_int_t)v->version, "gpus", gpus, "capacity",
                  "gpus", (int)(v->cap.gpu_milli / 1000), "cpu", cpu, "memory", mem, "allocated",
                  "gpus", (double)v->used.gpu_milli / 1000.0, "cpu", ucpu, "memory", umem, "tasks",
                  v->tasks, "labels", labels);
    if (!o)
        return NULL;
    json_t *taints = json_array(), *datasets = json_array();
    for (int i = 0; i < v->ntaints; i++)
        json_array_append_new(taints, json_pack("{s:s,s:s,s:s}", "key", v->taints[i].key, "value",
                                                v->taints[i].value, "effect", v->taints[i].effect));
    for (int i = 0; i < v->ndatasets; i++)
        json_array_append_new(datasets, json_string(v->datasets[i]));
    json_object_set_new(o, "taints", taints);
    json_object_set_new(o, "datasets", datasets);
    json_object_set_new(o, "schedulable", json_boolean(v->schedulable));
    if (v->reason[0])
        json_object_set_new(o, "reason", json_string(v->reason));
    if (v->full) {
        json_object_set_new(
            o, "topology",
            json_pack("{s:s?,s:s?,s:s?}", "rack", v->rack, "block", v->block, "zone", v->zone));
        if (v->op_json)
            json_object_set_new(o, "operator", doc(v->op_json));
    }
    if (v->lost) /* silent past lease + grace; its tasks were requeued */
        json_object_set_new(o, "lost", json_true());
    if (v->reported) {
        json_object_set_new(o, "report_age_s", json_real(v->report_age_s));
        json_object_set_new(o, "last_report", json_string(v->last_report));
        json_object_set_new(o, "report_lamport", json_integer((json_int_t)v->report_lamport));
    } else {
        json_object_set_new(o, "report_age_s", json_null());
    }
    if (v->full && v->telemetry_json)
        json_object_set_new(o, "telemetry", doc(v->telemetry_json));
    if (v->full && v->inventory_json)
        json_object_set_new(o, "inventory", doc(v->inventory_json));
    if (v->detail) {
        json_t *here = json_array();
        json_object_set_new(o, "stale_reports", json_integer((json_int_t)v->stale_reports));
        for (int i = 0; i < v->nrunning; i++) {
            const st_task_here_t *h = &v->running[i];
            json_array_append_new(
                here,
                json_pack("{s:I,s:s,s:i,s:I,s:s,s:o,s:b}", "job", (json_int_t)h->job, "name",
                          h->name, "task", h->task, "attempt", (json_int_t)h->attempt, "state",
                          h->state, "gpus", api_gpu_list(h->gpu_mask), "stopping", h->stopping));
        }
        json_object_set_new(o, "running", here);
    }
    if (v->has_evicted)
        json_object_set_new(o, "evicted", json_integer(v->evicted));
    return o;
}

json_t *api_nodes_json(const st_node_list_t *l)
{
    json_t *arr = json_array();

    for (int i = 0; i < l->n; i++)
        json_array_append_new(arr, api_node_json(&l->v[i]));
    return json_pack("{s:o}", "nodes", arr);
}
