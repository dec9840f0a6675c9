/*
 * enc_service.c: the services as clients read them (GET /v1/services, GET
 * /v1/services/{name}, what `arbiter lb --service` follows) and a
 * balancer's load report (POST /v1/services/{name}/load): the state's
 * typed views (st_service_view_t, st_load_ack_t) encoded to JSON, field by
 * field in the order the balancer, the CLI and docs/api.md know, and the
 * report's body decoded into st_replica_load_t, checked field by field.
 */
#include <stdlib.h>

#include "api/api_int.h"

/* {"index", "job", "state", "ready", "draining", "restarts", "node",
 * "address", "load": {"gpu_util", "queue", "age_ms"}, "port", "inflight"}:
 * node, address and load null while the replica holds nothing. */
static json_t *replica_json(const st_replica_view_t *r)
{
    json_t *o = json_pack("{s:i,s:I,s:s,s:b,s:b,s:i}", "index", r->index, "job", (json_int_t)r->job,
                          "state", r->state, "ready", r->ready, "draining", r->draining, "restarts",
                          r->restarts);
    if (!o)
        return NULL;
    json_object_set_new(o, "node", r->node ? json_string(r->node) : json_null());
    json_object_set_new(o, "address", r->node ? json_string(r->address) : json_null());
    json_object_set_new(o, "load",
                        r->has_load ? json_pack("{s:f,s:i,s:I}", "gpu_util", r->gpu_util, "queue",
                                                r->queue, "age_ms", (json_int_t)r->age_ms)
                                    : json_null());
    json_object_set_new(o, "port", json_integer(r->port));
    json_object_set_new(o, "inflight", r->has_inflight ? json_real(r->inflight) : json_null());
    return o;
}

json_t *api_service_json(const st_service_view_t *v)
{
    json_t *reps = json_array(), *o;

    for (int i = 0; reps && i < v->nreplicas; i++)
        json_array_append_new(reps, replica_json(&v->replicas[i]));
    o = json_pack("{s:s,s:I,s:I,s:i,s:i,s:i,s:s,s:o}", "service", v->name, "job",
                  (json_int_t)v->job, "version", (json_int_t)v->version, "desired", v->desired,
                  "min", v->min, "port", v->port, "health", v->health, "replicas", reps);
    if (o && v->autoscale) {
        json_t *a = json_pack("{s:i,s:i,s:f,s:f,s:I,s:I}", "min", v->as.min, "max", v->as.max,
                              "target_inflight", v->as.target, "target_gpu_util", v->as.gpu_target,
                              "window_s", (json_int_t)(v->as.window_ns / 1000000000LL),
                              "cooldown_s", (json_int_t)(v->as.cooldown_ns / 1000000000LL));
        if (a && v->has_last) {
            json_object_set_new(a, "recommended", json_integer(v->recommended));
            json_object_set_new(a, "per_replica", json_real(v->per_replica));
            json_object_set_new(a, "last", json_string(v->last));
        }
        json_object_set_new(o, "autoscale", a);
    }
    return o;
}

json_t *api_services_json(const st_service_list_t *l)
{
    json_t *arr = json_array();

    for (int i = 0; arr && i < l->n; i++)
        json_array_append_new(arr, api_service_json(&l->v[i]));
    return json_pack("{s:o}", "services", arr);
}

json_t *api_load_ack_json(const char *service, const st_load_ack_t *v)
{
    return json_pack("{s:s,s:i,s:I}", "service", service, "matched", v->matched, "version",
                     (json_int_t)v->version);
}

int api_load_decode(const json_t *body, st_replica_load_t **out, int *n, arb_err_t *err)
{
    json_t *reps = json_object_get(body, "replicas"), *e;
    size_t k;

    *out = NULL;
    *n = 0;
    if (!json_is_object(body) || !json_is_array(reps))
        return arb_errf(err, -EINVAL,
                        "body: give {\"replicas\": [{\"address\": \"HOST:PORT\", \"inflight\": "
                        "N}]}");
    json_array_foreach(reps, k, e)
    {
        json_t *a = json_object_get(e, "address"), *f = json_object_get(e, "inflight");
        json_t *q = json_object_get(e, "queue");
        if (!json_is_string(a) || !json_is_number(f) || json_number_value(f) < 0 ||
            json_number_value(f) > 1e9)
            return arb_errf(err, -EINVAL,
                            "replicas[%zu]: give address (\"HOST:PORT\") and inflight (a "
                            "number >= 0)",
                            k);
        if (q && (!json_is_number(q) || json_number_value(q) < 0 || json_number_value(q) > 1e9))
            return arb_errf(err, -EINVAL, "replicas[%zu].queue: give a number >= 0", k);
    }
    if (json_array_size(reps) > 0 && !(*out = calloc(json_array_size(reps), sizeof **out)))
        return arb_errf(err, -ENOMEM, "out of memory reading the load report");
    json_array_foreach(reps, k, e)
    {
        /* borrowed from body: valid while the request is */
        (*out)[k].address = json_string_value(json_object_get(e, "address"));
        (*out)[k].inflight = json_number_value(json_object_get(e, "inflight"));
        (*out)[k].queue = json_number_value(json_object_get(e, "queue"));
    }
    *n = (int)json_array_size(reps);
    return 0;
}
