/*
 * score_load.c: the `least-loaded` score, the compute-load layer of hybrid
 * clusters: send new work to the least busy node, and to its least busy
 * GPU, judged by what the agents last reported.
 *
 * Busy-ness of a node for one task, 0..100:
 *   util   the reported utilisation of the GPUs the task would use (the
 *          picked GPUs; the node's mean for a task without GPUs)
 *   queue  the node's reported queue length (requests or work items
 *          waiting), min(100, 10 x queue_len): ten queued is saturated
 *   busy   = 0.7 x util + 0.3 x queue
 * A report ages: its weight is w = 2^(-age / 15 s) (age = ctx->now_ns -
 * report_ns, the scheduler's clock, never the wall clock), and what the
 * weight does not cover is assumed middling (50):
 *   estimate = w x busy + (1 - w) x 50,   score = 100 - estimate
 * So a fresh idle node beats a stale idle one, and a stale busy node is
 * not shunned as hard as a fresh busy one. For GPU-sharing tasks (gpu_share) its pick chooses,
 * among the GPUs with room, the least utilised (ties: the fuller, to keep others free; then the
 * lowest index). Whole-GPU tasks keep the best-fit pick.
 *
 * It applies to GPU-sharing tasks and service replicas (job->service, set
 * by the controller) only: for a whole-GPU batch or training task it gives
 * every node the same score, so it is neutral there and fragmentation-aware
 * scoring (FGD, in the default profile) decides alone. That is why the
 * default profile can list it: whole-GPU placements, and the paper's
 * figures, do not move.
 *
 * It reads the node's own fields only (utilisation, queue length, report
 * time; queue length through node_key), so node classes stay valid.
 */
#include <math.h>

#include "sched_int.h"

#define LOAD_HALF_LIFE_NS (15LL * 1000000000LL)

double arb_least_loaded_estimate(const arb_node_t *n, uint16_t gpu_mask, int64_t now_ns)
{
    double util = 0, busy, w, age;
    int k = 0;

    for (int i = 0; i < n->ngpus; i++)
        if (!gpu_mask || (gpu_mask & (1u << i))) {
            util += n->gpu[i].util_pct;
            k++;
        }
    util = k ? util / k : 0;
    busy = 0.7 * util +
           0.3 * (n->queue_len >= 10 ? 100.0 : 10.0 * (n->queue_len > 0 ? n->queue_len : 0));
    age = (double)(now_ns - n->report_ns);
    w = age <= 0 ? 1.0 : exp2(-age / (double)LOAD_HALF_LIFE_NS);
    return w * busy + (1 - w) * 50;
}

/* Does the least-loaded score weigh this task? GPU-share tasks and service
 * replicas; not whole-GPU (or CPU-only) batch and training tasks. */
static bool load_scored(const arb_pctx_t *pc)
{
    return (pc->group && pc->group->gpu_share > 0) || (pc->job && pc->job->service);
}

static double s_least_loaded(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    if (!load_scored(pc))
        return 0; /* neutral: the same for every node */
    return 100 - arb_least_loaded_estimate(n, pk->gpu_mask, pc->ctx ? pc->ctx->now_ns : 0);
}

static int p_least_loaded(const arb_pctx_t *pc, const arb_node_t *n, arb_pick_t *pick)
{
    const arb_tgroup_t *g = pc->group;
    int best = -1;

    if (g->gpu_share <= 0)
        return sched_pick_bestfit(pc, n, -1, pick);
    for (int i = 0; i < n->ngpus; i++) {
        int f = 1000 - n->gpu[i].used_milli;
        if (f < g->gpu_share || !sched_gpu_eligible(pc, n, i))
            continue;
        if (best < 0 || n->gpu[i].util_pct < n->gpu[best].util_pct ||
            (n->gpu[i].util_pct == n->gpu[best].util_pct &&
             n->gpu[i].used_milli > n->gpu[best].used_milli))
            best = i;
    }
    if (best < 0)
        return -ENOSPC;
    pick->gpu_mask = (uint16_t)(1u << best);
    pick->gpu_milli = (int16_t)g->gpu_share;
    return 0;
}

/* The score is already on an absolute 0..100 scale: keep it, so a node a
 * few points busier loses a few points, not the whole range (min-max would
 * make a 1% difference outweigh fragmentation). Neutral (all 0) stays 0. */
static void n_least_loaded(double *scores, int n)
{
    (void)scores;
    (void)n;
}

static uint64_t k_least_loaded(void *state, const arb_node_t *n)
{
    (void)state;
    return (uint64_t)(uint32_t)n->queue_len;
}

const arb_score_ops_t arb_score_least_loaded = {
    .name = "least-loaded",
    .pick = p_least_loaded,
    .score = s_least_loaded,
    .normalize = n_least_loaded,
    .node_key = k_least_loaded,
};
