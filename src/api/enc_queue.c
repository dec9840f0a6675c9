/*
 * enc_queue.c: the queues as clients read them (GET /v1/queues), the
 * priority classes jobs may name (GET /v1/priorityclasses), and the
 * controller's counters (GET /v1/status): the state's typed views
 * (st_queue_list_t, st_prio_list_t, st_status_t) encoded to JSON, field by
 * field in the order the CLI, the console and docs/api.md know.
 */
#include "api/api_int.h"

/* {"nvidia.com/gpu": GPUs (a fraction), "cpu": "1500m", "memory": "3Gi"} */
json_t *api_res_json(const arb_res_t *r)
{
    char cpu[32], mem[32];
    arb_qty_format(r->cpu_milli, ARB_QTY_MILLI, cpu, sizeof cpu);
    arb_qty_format(r->mem_bytes, ARB_QTY_BYTES, mem, sizeof mem);
    return json_pack("{s:f,s:s,s:s}", "nvidia.com/gpu", (double)r->gpu_milli / 1000.0, "cpu", cpu,
                     "memory", mem);
}

/* {"lamport", "epoch", "revision", "jobs", "active_jobs", "nodes"} */
json_t *api_status_json(const st_status_t *v)
{
    return json_pack("{s:I,s:I,s:I,s:I,s:i,s:i}", "lamport", (json_int_t)v->lamport, "epoch",
                     (json_int_t)v->epoch, "revision", (json_int_t)v->revision, "jobs",
                     (json_int_t)v->jobs, "active_jobs", v->active_jobs, "nodes", v->nodes);
}

/* {"priorityClasses": [{"name", "value", "description", "preemptible" (when set)}]} */
json_t *api_prio_classes_json(const st_prio_list_t *l)
{
    json_t *a = json_array();

    for (int i = 0; a && i < l->n; i++) {
        const spec_prio_class_t *c = &l->v[i];
        json_t *o = json_pack("{s:s,s:i,s:s}", "name", c->name, "value", (int)c->value,
                              "description", c->description);
        if (o && c->preemptible >= 0)
            json_object_set_new(o, "preemptible", json_boolean(c->preemptible));
        json_array_append_new(a, o);
    }
    return a ? json_pack("{s:o}", "priorityClasses", a) : NULL;
}

json_t *api_queues_json(const st_queue_list_t *l)
{
    json_t *arr = json_array();

    for (int i = 0; i < l->n; i++) {
        const st_queue_view_t *q = &l->v[i];
        json_t *o = json_pack("{s:s,s:o,s:i,s:i,s:f,s:f}", "name", q->name, "used",
                              api_res_json(&q->used), "pending", q->pending, "running", q->running,
                              "weight", q->weight, "dominant_share", q->dominant_share);
        if (q->cohort)
            json_object_set_new(o, "cohort", json_string(q->cohort));
        if (q->has_quota) {
            json_object_set_new(o, "nominal", api_res_json(&q->nominal));
            json_object_set_new(o, "borrowing_limit", api_res_json(&q->borrow_limit));
        }
        json_array_append_new(arr, o);
    }
    return json_pack("{s:o}", "queues", arr);
}
