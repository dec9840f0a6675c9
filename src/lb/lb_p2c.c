/*
 * lb_p2c.c: power of two choices. Draw two distinct pickable peers at random
 * and take the one with fewer requests in flight per unit of weight. Nearly
 * as good as least-conn at spreading load, O(1) in the number of peers when
 * all are pickable, and it does not herd: many balancers with stale counts
 * do not all pile onto the same "least loaded" peer.
 */
#include "lb/lb.h"

static int p2c_pick(lb_policy_t *p, const lb_req_t *r)
{
    int a, b;

    if (lb_two_choices(p, r, &a, &b) < 0)
        return -ENOENT;
    uint64_t ca = ((uint64_t)p->peers[a].inflight + 1) * p->peers[b].eff;
    uint64_t cb = ((uint64_t)p->peers[b].inflight + 1) * p->peers[a].eff;
    return cb < ca ? b : a;
}

const lb_ops_t lb_p2c_ops = {
    .name = "p2c",
    .summary = "power of two random choices on requests in flight",
    .pick = p2c_pick,
};
