/*
 * enc_explain.c: why a job waits, as clients read it (GET
 * /v1/jobs/{id}/explain, `arbiter explain`, the console's job panel, `arbiter
 * place`): the state's typed view (st_explain_view_t) encoded to JSON, field
 * by field in the order they know. The scheduler's own explanation comes as
 * core's encoding of it (arb_explain_json), kept as its text.
 */
#include "api/api_int.h"

json_t *api_explain_json(const st_explain_view_t *v)
{
    json_t *o =
        json_pack("{s:I,s:s,s:s}", "job", (json_int_t)v->job, "name", v->name, "state", v->state);

    if (!o)
        return NULL;
    if (v->pending && v->explain_json) {
        json_t *e = json_loads(v->explain_json, 0, NULL);
        if (e)
            json_object_set_new(o, "explain", e);
    }
    json_object_set_new(o, "summary", json_string(v->summary ? v->summary : ""));
    json_object_set_new(o, "hint", json_string(v->hint ? v->hint : ""));
    if (!v->pending) {
        if (v->nstragglers) {
            json_t *a = json_array();
            for (int i = 0; a && i < v->nstragglers; i++)
                json_array_append_new(a, json_pack("{s:i,s:s,s:s}", "task", v->stragglers[i].task,
                                                   "node", v->stragglers[i].node, "reason",
                                                   v->stragglers[i].reason));
            json_object_set_new(o, "stragglers", a);
        }
        return o;
    }
    if (v->has_node_reasons) {
        json_t *m = json_object();
        for (int i = 0; m && i < v->nnode_reasons; i++)
            json_object_set_new(m, v->node_reasons[i].node, json_string(v->node_reasons[i].reason));
        json_object_set_new(o, "node_reasons", m);
        json_object_set_new(o, "node_reasons_group", json_string(v->node_reasons_group));
    }
    if (v->message)
        json_object_set_new(o, "message", json_string(v->message));
    if (v->nwaiting_for) {
        json_t *a = json_array();
        for (int i = 0; a && i < v->nwaiting_for; i++)
            json_array_append_new(
                a, json_pack("{s:I,s:s,s:s}", "job", (json_int_t)v->waiting_for[i].job, "name",
                             v->waiting_for[i].name, "action", v->waiting_for[i].action));
        json_object_set_new(o, "waiting_for", a);
    }
    if (v->nunhealthy) {
        json_t *a = json_array();
        for (int i = 0; a && i < v->nunhealthy; i++)
            json_array_append_new(a, json_pack("{s:s,s:i}", "node", v->unhealthy[i].node, "gpu",
                                               v->unhealthy[i].gpu));
        json_object_set_new(o, "unhealthy_gpus", a);
    }
    return o;
}
