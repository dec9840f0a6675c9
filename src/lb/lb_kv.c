/*
 * lb_kv.c: least KV-cache use and queue depth, from the model servers' own
 * metrics. The cost of a replica is, in requests (lb_kv_cost in lb.c):
 *
 *   (total + 1 + w_wait * waiting + w_kv * kv_use) x ref_eff / eff
 *
 * total and waiting being what the engine last reported (running + waiting,
 * waiting), corrected by what this balancer sent and saw finish since, the
 * whole weighed by the report's age (lb_engine_load); a replica never
 * scraped is judged on this balancer's in-flight count alone, as least-conn
 * does. A queued request costs more than a running one (it has not even
 * started); a full KV cache costs w_kv requests, as a new request there may
 * have to wait for blocks or preempt one that runs. Saturated replicas
 * (lb_saturated: queue or KV above the thresholds, or max_inflight) and
 * late ones (lb_late: answering past the time budget, predicted in time)
 * are left out while any other may be picked; when all are and the caller
 * queues (r->admit), -EBUSY, and when all are late, -EBUSY whether it
 * queues or not. Ties: round robin from a moving start.
 */
#include "lb/lb.h"

/* The cheapest of the pickable peers, unsaturated ones first; -EBUSY
 * (r->admit, all saturated) or -ENOENT. */
static int kv_pick(lb_policy_t *p, const lb_req_t *r)
{
    int best = -1, start = (int)(p->cursor++ % (uint64_t)p->n);
    double ref = 0, bc = 0;
    bool any_free = false, any_timely = false;

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
        if (!lb_ok(p, r, i) || (any_free ? lb_unfit(p, i, r) : lb_late(p, i, r)))
            continue;
        double c = lb_kv_cost(p, i, r->now_ms, ref);
        if (best < 0 || c < bc) {
            best = i;
            bc = c;
        }
    }
    return best;
}

const lb_ops_t lb_kv_ops = {
    .name = "kv",
    .summary = "least KV-cache use and queue, from the model servers' metrics",
    .pick = kv_pick,
};
