/*
 * score_paper.c: the FGD paper's baseline policies as core score plugins,
 * each the artifact's definition (Weng et al., USENIX ATC'23, and its
 * Kubernetes scheduler simulator):
 *
 *   random          every feasible node alike; the engine's random tie-break
 *                   makes the choice. A GPU share goes to a random GPU.
 *   dotprod         Tetris: least aligned (request . free), both normalised
 *                   by the largest node (128 CPUs, 8 GPUs), as 100 * (1 - dot/2).
 *   gpu-clustering  nodes already running tasks of the same GPU request
 *                   first (only that kind 75..100, mixed 50..75, idle 25..50,
 *                   other kinds 0..25), fuller nodes first inside a band.
 *   gpu-packing     shared GPUs first (50..100), then free GPUs of used
 *                   nodes (33..50), then idle nodes (0..33).
 *   bestfit         least leftover: 0.5 * CPU/128 cores + 0.5 * GPU/8 GPUs,
 *                   rescaled min-max with integer arithmetic.
 *
 * Scores are the artifact's integers (truncated, as Go's int64() does), kept
 * without rescaling except for bestfit, so that ties match the artifact's
 * (see paper.h on how ties are broken). GPUs inside the node are chosen
 * best-fit by the engine, except by the uniform-pick policy (its own picker).
 */
#include <stdlib.h>
#include <string.h>

#include "core/paper.h"
#include "sched_int.h"

#define MAX_SPEC_CPU 128000 /* milli: the artifact's largest node, for normalising */
#define MAX_SPEC_GPU 8000
#define DEFAULT_CPU 100 /* kube-scheduler's CPU request for a pod that sets none */

/* The task's CPU as the artifact's plugins see it (never 0). */
static int64_t task_cpu(const arb_tgroup_t *g)
{
    return g->req.cpu_milli > 0 ? g->req.cpu_milli : DEFAULT_CPU;
}

static int64_t node_gpu_free(const arb_node_t *n)
{
    int64_t f = 0;
    for (int i = 0; i < n->ngpus; i++)
        f += n->gpu[i].healthy ? 1000 - n->gpu[i].used_milli : 0;
    return f;
}

static int gpu_free(const arb_node_t *n, int i)
{
    return n->gpu[i].healthy ? 1000 - n->gpu[i].used_milli : 0;
}

/* Scores already on the artifact's 0..100 scale are kept as they are. */
static void keep_scores(double *scores, int n)
{
}

/* ---- random ------------------------------------------------------------- */

static double random_score(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pick)
{
    return 0;
}

/* A share goes to a GPU drawn uniformly among those that hold it (the
 * artifact's reservoir draw); whole GPUs are taken best-fit. */
static int random_pick(const arb_pctx_t *pc, const arb_node_t *n, arb_pick_t *pick)
{
    int share = pc->group->gpu_share, seen = 0, gpu = -1;

    if (share <= 0)
        return sched_pick_bestfit(pc, n, -1, pick);
    memset(pick, 0, sizeof *pick);
    for (int i = 0; i < n->ngpus; i++) {
        if (gpu_free(n, i) < share || !sched_gpu_eligible(pc, n, i))
            continue;
        seen++;
        if (gpu < 0 || (pc->ctx->rng && arb_rng_below(pc->ctx->rng, (uint64_t)seen) == 0))
            gpu = i;
    }
    if (gpu < 0)
        return -ENOSPC;
    pick->gpu_mask = (uint16_t)(1u << gpu);
    pick->gpu_milli = (int16_t)share;
    return 0;
}

const arb_score_ops_t arb_score_random = {
    .name = "random",
    .pick = random_pick,
    .score = random_score,
    .normalize = keep_scores,
};

/* ---- dotprod ------------------------------------------------------------ */

static double dotprod_score(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pick)
{
    const arb_tgroup_t *g = pc->group;
    int64_t cpu_left = n->cap.cpu_milli - n->used.cpu_milli, cpu = task_cpu(g);
    double node[2], task[2], dot = 0, s;

    if (cpu_left < cpu)
        return 0;
    node[0] = (double)cpu_left / MAX_SPEC_CPU;
    node[1] = (double)node_gpu_free(n) / MAX_SPEC_GPU;
    task[0] = (double)cpu / MAX_SPEC_CPU;
    task[1] = (double)g->req.gpu_milli / MAX_SPEC_GPU;
    for (int i = 0; i < 2; i++)
        dot += node[i] * task[i];
    s = 1 - dot / 2;
    return (double)(int64_t)(100.0 * s);
}

const arb_score_ops_t arb_score_dotprod = {
    .name = "dotprod",
    .score = dotprod_score,
    .normalize = keep_scores,
};

/* ---- gpu-clustering ------------------------------------------------------ */

/*
 * A task's kind, the artifact's GPU affinity tag: 0 a GPU share, k the
 * count of whole GPUs (1..16), -1 no GPU.
 *
 * The plugin keeps, per node, how many tasks of each kind it runs, from
 * the engine's bound callbacks (every bind and release, on every path), and
 * gives the engine the set of kinds present as its node-class key: the
 * score reads nothing else of that state, so nodes with equal keys score
 * alike and node classes stay usable.
 */
#define CLU_KINDS (ARB_MAX_GPUS + 1)

static int task_kind(const arb_tgroup_t *g)
{
    if (g->gpus > 0)
        return g->gpus <= ARB_MAX_GPUS ? g->gpus : ARB_MAX_GPUS;
    return g->gpu_share > 0 ? 0 : -1;
}

typedef struct clu_state {
    uint32_t nnodes;
    uint16_t (*cnt)[CLU_KINDS]; /* tasks per node and kind */
    uint32_t *present;          /* per node: bit k set when kind k runs there */
} clu_state_t;

static void *clu_init(const arb_sched_t *s)
{
    return calloc(1, sizeof(clu_state_t));
}

static void clu_fini(void *state)
{
    clu_state_t *st = state;
    if (!st)
        return;
    free(st->cnt);
    free(st->present);
    free(st);
}

static int clu_grow(clu_state_t *st, uint32_t nn)
{
    uint16_t(*cnt)[CLU_KINDS];
    uint32_t *present;

    if (nn <= st->nnodes)
        return 0;
    nn += nn / 2 + 16;
    if (!(cnt = realloc(st->cnt, nn * sizeof *cnt)))
        return -ENOMEM;
    st->cnt = cnt;
    if (!(present = realloc(st->present, nn * sizeof *present)))
        return -ENOMEM;
    st->present = present;
    memset(cnt + st->nnodes, 0, (nn - st->nnodes) * sizeof *cnt);
    memset(present + st->nnodes, 0, (nn - st->nnodes) * sizeof *present);
    st->nnodes = nn;
    return 0;
}

static void clu_bound(void *state, const arb_cluster_t *c, const arb_job_t *j, int t,
                      const arb_task_alloc_t *a, int sign)
{
    clu_state_t *st = state;
    int kind = task_kind(arb_job_task_group(j, t, NULL));
    uint16_t *n;

    if (kind < 0 || clu_grow(st, c->nnodes) < 0 || a->node >= st->nnodes)
        return;
    n = &st->cnt[a->node][kind];
    if (sign > 0 && (*n)++ == 0)
        st->present[a->node] |= 1u << kind;
    else if (sign < 0 && *n > 0 && --(*n) == 0)
        st->present[a->node] &= ~(1u << kind);
}

static uint64_t clu_node_key(void *state, const arb_node_t *n)
{
    const clu_state_t *st = state;
    return n->id < st->nnodes ? st->present[n->id] : 0;
}

static double clu_score(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pick)
{
    const clu_state_t *st = pc->state;
    int kind = task_kind(pc->group);
    int64_t fill = 25 * (MAX_SPEC_GPU - node_gpu_free(n)) / MAX_SPEC_GPU;
    uint32_t present = n->id < st->nnodes ? st->present[n->id] : 0;
    int kinds = __builtin_popcount(present);

    if (kind < 0)
        return 0;
    if (present & (1u << kind))
        return (double)(fill + (kinds == 1 ? 75 : 50));
    return (double)(fill + (kinds == 0 ? 25 : 0));
}

const arb_score_ops_t arb_score_gpu_clustering = {
    .name = "gpu-clustering",
    .init = clu_init,
    .fini = clu_fini,
    .score = clu_score,
    .normalize = keep_scores,
    .bound = clu_bound,
    .node_key = clu_node_key,
};

/* ---- gpu-packing --------------------------------------------------------- */

static double packing_score(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pick)
{
    const arb_tgroup_t *g = pc->group;
    int milli = g->gpus > 0 ? 1000 : g->gpu_share, need = g->gpus > 0 ? g->gpus : 1;
    int idle = 0, idle_used = 0, order[ARB_MAX_GPUS];
    int64_t free_pct = 0;

    if (milli <= 0)
        return 0;
    for (int i = 0; i < n->ngpus; i++)
        idle += gpu_free(n, i) == 1000;
    if (idle == n->ngpus) { /* an idle node: fewer GPUs first */
        int s = 100 / 3 - idle;
        return s > idle ? s : idle;
    }
    /* The GPUs the task would take, least free first. */
    for (int i = 0; i < n->ngpus; i++) {
        int k = i;
        while (k > 0 && gpu_free(n, order[k - 1]) > gpu_free(n, i)) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    for (int k = 0; k < n->ngpus && need > 0; k++) {
        int f = gpu_free(n, order[k]);
        if (milli <= f) {
            need--;
            idle_used += f == 1000;
            free_pct += (int64_t)f * 100 / 1000;
        }
    }
    if (need != 0)
        return 0;
    if (idle_used > 0) { /* free GPUs of a used node */
        int s = 100 / 2 - idle_used;
        return s > 100 / 3 ? s : 100 / 3;
    }
    { /* shared GPUs, the fuller the better */
        int64_t s = 100 - free_pct / 10;
        return (double)(s > 100 / 2 ? s : 100 / 2);
    }
}

const arb_score_ops_t arb_score_gpu_packing = {
    .name = "gpu-packing",
    .score = packing_score,
    .normalize = keep_scores,
};

/* ---- bestfit --------------------------------------------------------------- */

static double bestfit_score(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pick)
{
    const arb_tgroup_t *g = pc->group;
    double fr[2], rq[2], spec[2] = {MAX_SPEC_CPU, MAX_SPEC_GPU}, w[2] = {0.5, 0.5}, s = 0;

    fr[0] = (double)(n->cap.cpu_milli - n->used.cpu_milli);
    fr[1] = (double)node_gpu_free(n);
    rq[0] = (double)task_cpu(g);
    rq[1] = (double)g->req.gpu_milli;
    for (int i = 0; i < 2; i++) {
        if (fr[i] < rq[i])
            return 0;
        s += (fr[i] - rq[i]) / spec[i] * w[i];
    }
    return (double)(int64_t)((1.0 - s) * 100);
}

/* The artifact's NormalizeScore: min-max to 0..100 in integers. */
static void bestfit_normalize(double *scores, int n)
{
    int64_t hi = INT64_MIN, lo = INT64_MAX;

    for (int i = 0; i < n; i++) {
        int64_t v = (int64_t)scores[i];
        hi = v > hi ? v : hi;
        lo = v < lo ? v : lo;
    }
    for (int i = 0; i < n; i++)
        scores[i] = hi == lo ? 0 : (double)(((int64_t)scores[i] - lo) * 100 / (hi - lo));
}

const arb_score_ops_t arb_score_bestfit = {
    .name = "bestfit",
    .score = bestfit_score,
    .normalize = bestfit_normalize,
};
