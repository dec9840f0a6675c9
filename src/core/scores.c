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

/* freshness: a bounded penalty for a report older than half the stale
 * threshold (or 30 s when the profile sets none), falling to 0 at the
 * threshold; every fresher node scores 100, so report-age differences of
 * nodes that report on time never break a tie (absolute, not rescaled). */
static double s_freshness(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pk)
{
    int64_t lim =
        pc->sched->conf.profile.stale_ns ? pc->sched->conf.profile.stale_ns : 60LL * 1000000000;
    int64_t age = (pc->ctx ? pc->ctx->now_ns : 0) - n->report_ns, fresh = lim / 2;
    if (age <= fresh)
        return 100;
    if (age >= lim)
        return 0;
    return 100 * (1 - (double)(age - fresh) / (double)(lim - fresh));
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
SCORE(prefer, s_prefer);

const arb_score_ops_t *const arb_scores[] = {
    &arb_score_pack,    &arb_score_spread,    &arb_score_topology,       &arb_score_data,
    &arb_score_thermal, &arb_score_freshness, &arb_score_prefer,         &arb_score_fgd,
    &arb_score_random,  &arb_score_dotprod,   &arb_score_gpu_clustering, &arb_score_gpu_packing,
    &arb_score_bestfit, &arb_score_fgd_la,    &arb_score_least_loaded,   NULL,
};

const arb_score_ops_t *arb_score_lookup(const char *name)
{
    for (int i = 0; arb_scores[i]; i++)
        if (strcmp(arb_scores[i]->name, name) == 0)
            return arb_scores[i];
    return NULL;
}
