/*
 * lb_rr.c: round robin. Each pick takes the next pickable peer after the
 * last one picked; weights are ignored (use "weighted" for them). Peers that
 * may not be picked are stepped over, so a down peer's turn goes to the next.
 */
#include "lb/lb.h"

static int rr_pick(lb_policy_t *p, const lb_req_t *r)
{
    for (int k = 0; k < p->n; k++) {
        int i = (int)(p->cursor++ % (uint64_t)p->n);
        if (lb_ok(p, r, i))
            return i;
    }
    return -ENOENT;
}

const lb_ops_t lb_rr_ops = {
    .name = "round-robin",
    .summary = "each peer in turn",
    .pick = rr_pick,
};
