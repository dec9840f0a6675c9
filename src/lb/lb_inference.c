/*
 * lb_inference.c: the default policy for LLM replicas: prefix-cache
 * affinity, sticky until the replica is saturated, weighed against load;
 * LoRA-adapter affinity when the request names an adapter.
 *
 *   1. Saturated replicas (lb_saturated: engine queue above sat_queue, KV
 *      use above sat_kv, or max_inflight of ours) are left out: affinity is
 *      released there, and the request goes where it can start. When every
 *      replica is saturated: -EBUSY if the caller queues (r->admit), else
 *      all of them are candidates.
 *   2. Each candidate's cost, in requests of load:
 *
 *        cost = kv cost (lb_kv.c: total, queue, KV use; per unit of weight)
 *               - w_prefix * matched / blocks     (the prefix index, lb_prefix.c)
 *               - w_lora * lora
 *
 *      matched/blocks: the share of the prompt's blocks this replica was
 *      sent (1: the whole prompt, its prefill all but free); lora: 1 when
 *      the replica has the adapter loaded, 0.5 when it has a free adapter
 *      slot, 0 else, counted only when some replica lists the adapter (a
 *      name no replica lists is a base model). With w_prefix = 8, a replica
 *      holding the whole prompt wins against one with 8 fewer requests: the
 *      saved prefill is worth that much queueing, and step 1 bounds how far
 *      it goes.
 *   3. The cheapest wins (ties round robin from a moving start), and the
 *      prompt's chain is recorded for it: the next request of that prefix
 *      finds it there, and a released prefix now has two homes.
 *
 * With no prompt blocks and no scraped metrics it is least-conn.
 */
#include "lb/lb.h"

static double lora_of(const lb_peer_t *e, uint64_t model)
{
    for (int j = 0; j < e->eng.nlora && j < LB_MAX_LORA; j++)
        if (e->eng.lora[j] == model)
            return 1;
    return e->eng.max_lora > 0 && e->eng.nlora < e->eng.max_lora ? 0.5 : 0;
}

static bool adapter_known(const lb_policy_t *p, uint64_t model)
{
    if (!model)
        return false;
    for (int i = 0; i < p->n; i++)
        for (int j = 0; j < p->peers[i].eng.nlora && j < LB_MAX_LORA; j++)
            if (p->peers[i].eng.lora[j] == model)
                return true;
    return false;
}

static int inf_pick(lb_policy_t *p, const lb_req_t *r)
{
    const int *m = lb_prefix_match(p, r);
    bool lora = adapter_known(p, r->model), any_free = false;
    int best = -1, start = (int)(p->cursor++ % (uint64_t)p->n);
    double ref = 0, bc = 0;

    for (int i = 0; i < p->n; i++) {
        if (!lb_ok(p, r, i))
            continue;
        if (p->peers[i].eff > ref)
            ref = p->peers[i].eff;
        if (!lb_saturated(p, i, r->now_ms))
            any_free = true;
    }
    if (ref == 0)
        return -ENOENT;
    if (!any_free && r->admit)
        return -EBUSY;
    for (int k = 0; k < p->n; k++) {
        int i = start + k < p->n ? start + k : start + k - p->n;
        if (!lb_ok(p, r, i) || (any_free && lb_saturated(p, i, r->now_ms)))
            continue;
        double c = lb_kv_cost(p, i, r->now_ms, ref);
        if (m)
            c -= p->opt.w_prefix * (double)m[i] / (double)r->nblocks;
        if (lora)
            c -= p->opt.w_lora * lora_of(&p->peers[i], r->model);
        if (best < 0 || c < bc) {
            best = i;
            bc = c;
        }
    }
    if (best >= 0)
        lb_prefix_chose(p, r, best);
    return best;
}

const lb_ops_t lb_inference_ops = {
    .name = "inference",
    .summary = "prefix affinity until saturated, KV use and queue, LoRA affinity",
    .update = lb_prefix_update,
    .fini = lb_prefix_fini,
    .pick = inf_pick,
};
