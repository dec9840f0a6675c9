/*
 * enc_telemetry.c: a node's telemetry history as the console's charts read
 * it (GET /v1/nodes/{name}/telemetry) and the log tickets (POST
 * /v1/jobs/{id}/logs-ticket, GET /v1/logs/tickets/{ticket}): the state's
 * typed views (st_telemetry_view_t, st_logs_ticket_t) encoded to JSON,
 * field by field in the order the console, `arbiter logs`, the agent and
 * docs/api.md know. An unknown value is null.
 */
#include "api/api_int.h"

static json_t *num_json(double v)
{
    return v < 0 ? json_null() : json_real(v);
}

/* {"interval_s", "capacity", "samples": [{"age_s", "cpu_util",
 * "memory_used_bytes", "net_rx_bps", "net_tx_bps", "disk_read_bps",
 * "disk_write_bps", "gpus": [{"util", "memory_used_mib", "temp_c",
 * "healthy"}]}], "node"}, oldest first. */
json_t *api_telemetry_json(const st_telemetry_view_t *v)
{
    json_t *arr = json_array(), *o;

    for (int k = 0; arr && k < v->nsamples; k++) {
        const st_tel_sample_t *s = &v->samples[k];
        json_t *gpus = json_array();
        for (int i = 0; i < v->ngpus; i++) {
            const st_tel_gpu_t *g = &s->gpus[i];
            json_t *e = json_object();
            json_object_set_new(e, "util", g->has_util ? json_integer(g->util) : json_null());
            json_object_set_new(e, "memory_used_mib",
                                g->has_mem ? json_integer(g->memory_used_mib) : json_null());
            json_object_set_new(e, "temp_c", g->has_temp ? json_integer(g->temp_c) : json_null());
            json_object_set_new(e, "healthy", json_boolean(g->healthy));
            json_array_append_new(gpus, e);
        }
        json_t *e = json_object();
        json_object_set_new(e, "age_s", json_real(s->age_s));
        json_object_set_new(e, "cpu_util", num_json(s->cpu_util));
        json_object_set_new(e, "memory_used_bytes", num_json(s->memory_used_bytes));
        json_object_set_new(e, "net_rx_bps", num_json(s->net_rx_bps));
        json_object_set_new(e, "net_tx_bps", num_json(s->net_tx_bps));
        json_object_set_new(e, "disk_read_bps", num_json(s->disk_read_bps));
        json_object_set_new(e, "disk_write_bps", num_json(s->disk_write_bps));
        json_object_set_new(e, "gpus", gpus);
        json_array_append_new(arr, e);
    }
    o = json_pack("{s:f,s:i,s:o}", "interval_s", v->interval_s, "capacity", v->capacity, "samples",
                  arr);
    if (o && v->node)
        json_object_set_new(o, "node", json_string(v->node));
    return o;
}

/* {"job", "task", "node", "logs_url", "ticket", "ttl_ms"} */
json_t *api_logs_ticket_json(const st_logs_ticket_t *v)
{
    return json_pack("{s:I,s:I,s:s,s:s,s:s,s:I}", "job", (json_int_t)v->job, "task",
                     (json_int_t)v->task, "node", v->node, "logs_url", v->logs_url, "ticket",
                     v->ticket, "ttl_ms", (json_int_t)v->ttl_ms);
}

/* {"ok": true, "ttl_ms"}: what is left of a ticket's life */
json_t *api_ticket_ok_json(int64_t ttl_ms)
{
    return json_pack("{s:b,s:I}", "ok", 1, "ttl_ms", (json_int_t)ttl_ms);
}
