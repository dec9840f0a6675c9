/*
 * enc_node.c: the nodes as clients read them (GET /v1/nodes, GET
 * /v1/nodes/{name}, the node operations' replies): the state's typed view
 * (st_node_view_t) encoded to JSON, field by field in the order the CLI
 * (`arbiter nodes`), the console's GPU map and docs/api.md know. Telemetry,
 * inventory and what operators set come as the JSON text the state kept.
 * A cordon's or drain's body ({"reason": TEXT}) is decoded here.
 */
#include "api/api_int.h"
#include "state/jv.h"

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
