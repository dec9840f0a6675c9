/*
 * lb_leastconn.c: least connections, weighted. Picks the peer with the
 * fewest requests in flight per unit of weight, (inflight + 1) / eff, the
 * "+1" counting the request being placed, so a heavy peer with as many
 * requests as a light one still wins. Ties go round robin from a moving
 * start, so equal peers share evenly instead of the first one taking all.
 * O(peers) per pick; compares by cross-multiplication, no division.
 */
#include "lb/lb.h"

static int lc_pick(lb_policy_t *p, const lb_req_t *r)
{
    int best = -1, start = (int)(p->cursor++ % (uint64_t)p->n);

    for (int k = 0; k < p->n; k++) {
        int i = start + k < p->n ? start + k : start + k - p->n;
        if (!lb_ok(p, r, i))
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        uint64_t ci = ((uint64_t)p->peers[i].inflight + 1) * p->peers[best].eff;
        uint64_t cb = ((uint64_t)p->peers[best].inflight + 1) * p->peers[i].eff;
        if (ci < cb)
            best = i;
    }
    return best >= 0 ? best : -ENOENT;
}

const lb_ops_t lb_leastconn_ops = {
    .name = "least-conn",
    .summary = "fewest requests in flight per unit of weight",
    .pick = lc_pick,
};
