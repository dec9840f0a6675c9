/*
 * lb_wrr.c: smooth weighted round robin (the algorithm NGINX uses). On each
 * pick every pickable peer adds its weight to its running value; the peer
 * with the largest value is picked and the total weight is subtracted from
 * it. Over any window of sum(weights) picks each peer is picked exactly
 * weight times, and picks of a heavy peer are spread out rather than bunched
 * (weights 5,1,1 give a a b a c a a, not a a a a a b c).
 *
 * The weight used is the peer's current one (eff), so slow start works. The
 * running values live in the policy's state, one per peer, reset whenever
 * the peer set changes.
 */
#include <stdlib.h>

#include "lb/lb.h"

static int wrr_update(lb_policy_t *p)
{
    free(p->st);
    p->st = NULL;
    if (p->n == 0)
        return 0;
    p->st = calloc((size_t)p->n, sizeof(int64_t));
    return p->st ? 0 : -ENOMEM;
}

static void wrr_fini(lb_policy_t *p)
{
    free(p->st);
}

static int wrr_pick(lb_policy_t *p, const lb_req_t *r)
{
    int64_t *cur = p->st, total = 0;
    int best = -1;

    for (int i = 0; i < p->n; i++) {
        if (!lb_ok(p, r, i))
            continue;
        cur[i] += p->peers[i].eff;
        total += p->peers[i].eff;
        if (best < 0 || cur[i] > cur[best])
            best = i;
    }
    if (best < 0)
        return -ENOENT;
    cur[best] -= total;
    return best;
}

const lb_ops_t lb_wrr_ops = {
    .name = "weighted",
    .summary = "smooth weighted round robin",
    .update = wrr_update,
    .fini = wrr_fini,
    .pick = wrr_pick,
};
