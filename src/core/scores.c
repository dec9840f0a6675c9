/*
 * scores.c: Arbiter's own score plugins and the plugin table. A score
 * plugin rates placing one task on one node (with the GPUs already picked);
 * the engine normalizes each plugin's scores over the feasible nodes to
 * 0..100 and sums them by the profile's weights. The paper's policies
 * (FGD and its baselines) live in score_fgd.c and score_paper.c.
 */
#include <string.h>

#include "sched_int.h"
#include "core/paper.h"

static int popcount16(uint16_t m)
{
    return __builtin_popcount(m);
}

/* Share of n allocated after the task, averaged over GPU, CPU and memory
 * (GPU counted twice: it is the scarce resource), 0..1. */
static double allocated_after(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    const arb_res_t *r = &pc->group->req;
    double sum = 0, w = 0;

    if (n->cap.gpu_milli > 0) {
        double g = (double)(n->used.gpu_milli + popcount16(pk->gpu_mask) * pk->gpu_milli);
        sum += 2 * g / (double)n->cap.gpu_milli;
        w += 2;
    }
    if (n->cap.cpu_milli > 0) {
        sum += (double)(n->used.cpu_milli + r->cpu_milli) / (double)n->cap.cpu_milli;
        w += 1;
    }
    if (n->cap.mem_bytes > 0) {
        sum += (double)(n->used.mem_bytes + r->mem_bytes) / (double)n->cap.mem_bytes;
        w += 1;
    }
    return w > 0 ? sum / w : 0;
}

/* pack: most-allocated first, so whole nodes and NVLink domains stay free. */
static double s_pack(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    return 100 * allocated_after(pc, n, pk);
}

/* spread: least-allocated first (the Kubernetes default the seed warns of). */
static double s_spread(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    return 100 * (1 - allocated_after(pc, n, pk));
}

/*
 * topology: keep a task's GPUs in one NVLink domain and one PCIe switch, and
 * a job's tasks near the ones already placed (same node, rack, block).
 */
static double s_topology(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    double s = 0;
    int16_t nv = -1, sw = -1;
    bool one_nv = true, one_sw = true, first = true;
    const arb_job_t *j = pc->job;

    for (int i = 0; i < n->ngpus; i++) {
        if (!(pk->gpu_mask & (1u << i)))
            continue;
        if (first) {
            nv = n->gpu[i].nvlink;
            sw = n->gpu[i].pcie;
            first = false;
        }
        one_nv &= n->gpu[i].nvlink == nv && nv >= 0;
        one_sw &= n->gpu[i].pcie == sw;
    }
    if (popcount16(pk->gpu_mask) > 1)
        s += (one_nv ? 30 : 0) + (one_sw ? 10 : 0);
    else
        s += 40;
    if (j->nalloc > 0) {
        int near = 0;
        for (int t = 0; t < j->nalloc; t++) {
            if (j->alloc[t].node == ARB_NO_NODE)
                continue;
            const arb_node_t *o = &pc->cluster->nodes[j->alloc[t].node];
            if (o->id == n->id)
                near = 60 > near ? 60 : near;
            else if (o->rack && o->rack == n->rack)
                near = 40 > near ? 40 : near;
            else if (o->block && o->block == n->block)
                near = 20 > near ? 20 : near;
        }
        s += near;
    } else {
        s += 60;
    }
    return s;
}

/* data: nodes that cache the job's dataset. */
static double s_data(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    return pc->job->dataset && arb_node_has_dataset(n, pc->job->dataset) ? 100 : 0;
}

/* Absolute scores: not rescaled over the candidates, so that a difference
 * of a degree or a second between two otherwise equal nodes stays a point
 * or less and never decides a placement on its own. */
static void normalize_none(double *scores, int n)
{
    (void)scores;
    (void)n;
}

/* thermal: headroom of the hottest picked GPU below 100 C (absolute). */
static double s_thermal(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    int hot = 0;
    for (int i = 0; i < n->ngpus; i++)
        if ((pk->gpu_mask & (1u << i)) && n->gpu[i].temp_c > hot)
            hot = n->gpu[i].temp_c;
    return hot >= 100 ? 0 : 100 - hot;
}

/* freshness: exactly flat (100) while a report is fresh, younger than the
 * stale threshold (nodes.staleness; 30 s when the profile sets none), then
 * falling to 0 at twice the threshold. Where the threshold is set, a node
 * past it is filtered out (filters.c) before this is read, so a late
 * heartbeat within the threshold never moves a placement: report-age noise
 * (an agent starved on a loaded machine, report times floored to the
 * second) cannot break a tie. Where none is set (the simulator, `place`),
 * nodes silent 30 to 60 s lose up to the whole score. Absolute, not
 * rescaled. */
static double s_freshness(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    int64_t fresh =
        pc->sched->conf.profile.stale_ns ? pc->sched->conf.profile.stale_ns : 30LL * 1000000000;
    int64_t age = (pc->ctx ? pc->ctx->now_ns : 0) - n->report_ns, lim = 2 * fresh;
    (void)pk;
    if (age <= fresh)
        return 100;
    if (age >= lim)
        return 0;
    return 100 * (1 - (double)(age - fresh) / (double)(lim - fresh));
}

/*
 * whole: keep whole nodes and whole NVLink domains free for the jobs that
 * need them (the seed's 16-GPU job in one NVLink domain). 100, less 50 when
 * the task is the first to use a node with nothing on it, less 50 when one
 * of its GPUs comes from an NVLink domain with nothing on it (a GPU of
 * unknown domain counts the node as its domain). FGD cannot see this when
 * the learned mix has no shape as large as a node: a node with 12 free GPUs
 * and one with 16 both fit every 4-GPU shape, so they tie; this makes the
 * tie go to the used node on purpose, as Kubernetes' MostAllocated does for
 * every resource, but counting only what a large job loses. Absolute (0, 50
 * or 100, not rescaled): in the default profile (weight 0.25: 25 points at
 * most) it outweighs a temperature difference under 50 C (thermal, 0.5 a
 * degree) and freshness (flat while reports are fresh), and gives way to a
 * fragmentation difference of more than 6 of FGD's points (FGD's 0..99 is
 * not rescaled, at weight 4). Neutral (100) for tasks
 * without whole GPUs, GPU shares (FGD weighs their fragments) and service
 * replicas (least-loaded spreads them by live load).
 */
static double s_whole(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    bool node_whole = true, dom_whole = false;

    if (!pk->gpu_mask || pc->group->gpus <= 0 || pc->job->service)
        return 100;
    for (int i = 0; i < n->ngpus && node_whole; i++)
        node_whole = n->gpu[i].used_milli == 0;
    for (int i = 0; i < n->ngpus && !dom_whole; i++) {
        if (!(pk->gpu_mask & (1u << i)))
            continue;
        if (n->gpu[i].nvlink < 0) {
            dom_whole = node_whole;
            continue;
        }
        dom_whole = true;
        for (int k = 0; k < n->ngpus && dom_whole; k++)
            if (n->gpu[k].nvlink == n->gpu[i].nvlink && n->gpu[k].used_milli > 0)
                dom_whole = false;
    }
    return 100 - (node_whole ? 50 : 0) - (dom_whole ? 50 : 0);
}

/* prefer: preferred node affinity weights, minus untolerated
 * PreferNoSchedule taints. */
static double s_prefer(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    double s = 0;
    for (int i = 0; i < pc->job->npreferred; i++)
        if (sched_term_matches(pc->cluster, n, &pc->job->preferred[i]))
            s += pc->job->preferred[i].weight;
    s -= 100 * sched_untolerated(pc->job, n, ARB_TAINT_PREFER_NO_SCHEDULE);
    return s;
}

extern const arb_score_ops_t arb_score_least_loaded; /* score_load.c */

#define SCORE(id, fn) const arb_score_ops_t arb_score_##id = {.name = #id, .score = fn}
SCORE(pack, s_pack);
SCORE(spread, s_spread);
const arb_score_ops_t arb_score_topology = {
    .name = "topology", .score = s_topology, .flags = ARB_SCORE_PLACED};
SCORE(data, s_data);
const arb_score_ops_t arb_score_thermal = {
    .name = "thermal", .score = s_thermal, .normalize = normalize_none};
const arb_score_ops_t arb_score_freshness = {
    .name = "freshness", .score = s_freshness, .normalize = normalize_none};
const arb_score_ops_t arb_score_whole = {
    .name = "whole", .score = s_whole, .normalize = normalize_none};
SCORE(prefer, s_prefer);

const arb_score_ops_t *const arb_scores[] = {
    &arb_score_pack,
    &arb_score_spread,
    &arb_score_topology,
    &arb_score_data,
    &arb_score_thermal,
    &arb_score_freshness,
    &arb_score_prefer,
    &arb_score_fgd,
    &arb_score_random,
    &arb_score_dotprod,
    &arb_score_gpu_clustering,
    &arb_score_gpu_packing,
    &arb_score_bestfit,
    &arb_score_fgd_la,
    &arb_score_least_loaded,
    &arb_score_whole,
    NULL,
};

const arb_score_ops_t *arb_score_lookup(const char *name)
{
    for (int i = 0; arb_scores[i]; i++)
        if (strcmp(arb_scores[i]->name, name) == 0)
            return arb_scores[i];
    return NULL;
}
