/*
 * enc_event.c: the event log as clients read it (GET /v1/events, a job's
 * recent "events"): the state's typed view (st_event_view_t) encoded to
 * JSON, field by field in the order `arbiter events`, the console and
 * docs/api.md know: lamport, time, type, message, then job and node where
 * the event has them.
 */
#include "api/api_int.h"

json_t *api_event_json(const st_event_view_t *v)
{
    json_t *o = json_pack("{s:I,s:s,s:s,s:s}", "lamport", (json_int_t)v->lamport, "time", v->time,
                          "type", v->type, "message", v->message);

    if (o && v->job)
        json_object_set_new(o, "job", json_integer((json_int_t)v->job));
    if (o && v->node)
        json_object_set_new(o, "node", json_string(v->node));
    return o;
}

/* {"events": [...], "last", "oldest", "truncated"} */
json_t *api_events_json(const st_event_list_t *l)
{
    json_t *arr = json_array();

    for (int i = 0; arr && i < l->n; i++)
        json_array_append_new(arr, api_event_json(&l->v[i]));
    return arr ? json_pack("{s:o,s:I,s:I,s:b}", "events", arr, "last", (json_int_t)l->last,
                           "oldest", (json_int_t)l->oldest, "truncated", l->truncated)
               : NULL;
}
