/*
 * lb_inference.c: the default policy for LLM replicas: prefix-cache
 * affinity weighed against the prefill work queued at each replica, sticky
 * until the replica is saturated; LoRA-adapter affinity when the request
 * names an adapter.
 *
 * What makes a request's time to first token is the prefill ahead of it at
 * the replica plus its own, and its own is only the part of the prompt the
 * replica's cache does not hold. So the cost of replica i, in prompt blocks
 * (oai.h: 64 bytes, ~16 tokens):
 *
 *   cost_i = prefill_i                          blocks this balancer sent there, not yet
 *                                               prefilled (no answer byte back)
 *          + (blocks - w_prefix * matched_i)    this prompt's blocks not cached there, as far
 *                                               as the prefix index knows (lb_prefix.c)
 *          + kv_cost_i                          the load the engine reports, the kv policy's
 *                                               cost in requests (lb_kv.c: in flight, queued,
 *                                               KV use), each request worth one block: a
 *                                               tie-breaker beside prefill work
 *          - w_lora * lora_i                    the adapter loaded (1), or a free slot (0.5);
 *                                               w_lora = 16 blocks, about one adapter load
 *
 * all per unit of weight. A tenant's requests stay with the replica that has
 * its context until the questions queued there cost more than prefilling the
 * whole context elsewhere; then the next goes where it can start sooner, and
 * that replica holds the prefix too (the chain is recorded for the pick).
 *
 *   Saturated replicas (lb_saturated: engine queue above sat_queue, KV use
 *   above sat_kv, or max_inflight of ours) and late ones (lb_late: the
 *   predicted first byte past late_ms, or the predicted wait past slo_ms, in
 *   time: requests ahead x time per request) are left out: affinity is
 *   released there whatever the cost says. When every replica is one of
 *   those: -EBUSY if the caller queues (r->admit), else the ones not late
 *   are candidates; when every one is late, -EBUSY either way: a request is
 *   never sent where it would time out.
 *
 * lora_i counts only when some replica lists the adapter (a model name no
 * replica lists is a base model). Ties go round robin from a moving start.
 * With no prompt blocks and no metrics it is least-conn.
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
    bool lora = adapter_known(p, r->model), any_free = false, any_timely = false;
    int best = -1, start = (int)(p->cursor++ % (uint64_t)p->n);
    double ref = 0, bc = 0;

    for (int i = 0; i < p->n; i++) {
        if (!lb_ok(p, r, i))
            continue;
        if (p->peers[i].eff > ref)
            ref = p->peers[i].eff;
        if (!lb_late(p, i, r)) {
            any_timely = true;
            if (!lb_saturated(p, i, r->now_ms))
                any_free = true;
        }
    }
    if (ref == 0)
        return -ENOENT;
    if ((!any_free && r->admit) || !any_timely)
        return -EBUSY; /* never where it would answer late: the caller queues or refuses */
    for (int k = 0; k < p->n; k++) {
        int i = start + k < p->n ? start + k : start + k - p->n;
        const lb_peer_t *e = &p->peers[i];
        if (!lb_ok(p, r, i) || (any_free ? lb_unfit(p, i, r) : lb_late(p, i, r)))
            continue;
        double scale = ref / (double)e->eff;
        double own = r->nblocks - (m ? p->opt.w_prefix * m[i] : 0);
        double c = ((double)e->prefill + own + lb_kv_cost(p, i, r->now_ms, (double)e->eff)) * scale;
        if (lora)
            c -= p->opt.w_lora * lora_of(e, r->model);
        if (best < 0 || c < bc) {
            best = i;
            bc = c;
        }
    }
    if (best >= 0) {
        if (r->matched)
            *r->matched = m ? m[best] : 0;
        lb_prefix_chose(p, r, best);
    }
    return best;
}

const lb_ops_t lb_inference_ops = {
    .name = "inference",
    .summary = "prefix affinity against queued prefill work, until saturated; LoRA affinity",
    .update = lb_prefix_update,
    .fini = lb_prefix_fini,
    .pick = inf_pick,
};
