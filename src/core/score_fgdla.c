/*
 * score_fgdla.c: fgd-la, Arbiter's own placement policy: FGD (Weng et al.,
 * ATC'23) with its ties broken by a look-ahead over the task-shape mix.
 * Not the paper's; its measured gain over FGD is in docs/results.md.
 *
 * Why. FGD's score is an integer, int(100 sigmoid(-dF/1000)): about 40
 * GPU-milli of fragmentation growth per step near zero, coarser further
 * out. Most nodes tie (every node where a CPU-only task leaves F as it is
 * scores 50), and the tie goes to the first node in a fixed order. Making
 * FGD's score exact is worse (the first-fit order among near-equals is a
 * good packer; see docs/results.md), so fgd-la keeps FGD's integer as the
 * first key and adds a second one that sees what FGD's measure does not:
 *
 *   1. several tasks, not one: F asks "does one task of shape m fit?"; a
 *      G2 node with 8 free GPUs and 12 free CPUs passes for every 1-GPU
 *      shape, yet can run one of them. The look-ahead counts the copies of
 *      m the node can still hold, limited by GPUs, CPU and memory together.
 *   2. memory, which F leaves out;
 *   3. every observed shape, not only the 95% most common, each weighted by
 *      how rare the nodes are that could ever hold it, so that the few nodes
 *      able to run a rare large task are not used up first.
 *
 *   F2_n = sum over shapes m of w_m * (idle_n - copies_n(m) * gpu_m)
 *
 * idle_n: n's idle GPU milli; gpu_m: the GPU milli one task of m takes;
 * copies_n(m) = min(GPU copies, CPU left / cpu_m, memory left / mem_m),
 * GPU copies being sum_i floor(free_i / share) for a share and
 * floor(free GPUs / count) for whole GPUs, 0 on a GPU model m may not use;
 * a CPU-only shape uses no GPU (copies count 0). w_m = p_m * N / H_m, p_m
 * the share of tasks with shape m, N the GPU nodes, H_m those whose capacity
 * could hold one task of m (w_m = 0 when none can).
 *
 * The score is FGD's integer plus int(100 sigmoid(-dF2/4000)) / 100, so it
 * orders nodes by FGD first, then by the growth of F2, then (the profile's
 * rule) by node id. For a GPU share, the GPU is one of those with FGD's best
 * score, the one where F2 grows least.
 *
 * Cost: F2 is a pass over the shapes (tens to a few hundred) per GPU
 * arrangement tried. Results are cached per (task key, node) and keyed by
 * the node's version and both tables' generations, as FGD does, so a task
 * costs real work only on the nodes that changed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fgdla_plan.h"
#include "core/paper.h"
#include "sched_int.h"

#define LA_DEFAULT_CPU 100  /* kube-scheduler's CPU request for a pod that sets none */
#define LA_SEC_SCALE 4000.0 /* dF2 per unit of the sigmoid (F2 counts ~4x F's milli) */
#define LA_MAX_POOLS 16     /* GPU models the pool balance tells apart */
#define LA_MAX_CLASSES 64   /* distinct allowed-model lists it tracks */
#define LA_PLAN_GROWTH 1.5  /* re-plan when the observed tasks grew by half */
#define LA_LOSS_MAX 1e6     /* plan losses (milli) are capped here for the score */

/* Tasks restricted to the same set of GPU models, and what they asked. */
typedef struct la_class {
    int32_t nmodels;
    uint32_t models[8]; /* sorted, no repeats */
    double demand;      /* GPU milli observed */
} la_class_t;

/* A weighted shape of the look-ahead. */
typedef struct la_shape {
    int64_t cpu;
    double mem;
    int32_t milli, num;
    int32_t nmodels;
    uint32_t models[8];
    double w;
} la_shape_t;

/* The key of a task for the caches: what the look-ahead reads of it. */
typedef struct la_key {
    int64_t cpu, mem;
    int32_t milli, num, nmodels;
    uint32_t models[8];
} la_key_t;

typedef struct la_entry {
    uint64_t ver;
    uint32_t gen, fgen;
    int8_t gpu;  /* the share's GPU; -1 none */
    int8_t ok;   /* 0: FGD says it does not fit */
    int8_t fs;   /* FGD's integer */
    double sec;  /* the second key */
    double df;   /* FGD's raw delta F for gpu; NAN until needed */
    double loss; /* the plan's loss, whole milli */
} la_entry_t;

typedef struct la_ncache {
    uint64_t ver;
    uint32_t gen;
    double f2;
} la_ncache_t;

typedef struct la_state {
    void *fgd; /* FGD's own state: its score and GPU scores */
    const arb_cluster_t *c;
    fgd_table_t *tab; /* every shape observed */
    double next_build;
    bool dirty;
    uint32_t gen;
    la_shape_t *w;
    int nw;
    /* caches: per node F2 before; per task key and node the result */
    uint32_t cap;
    la_ncache_t *f0;
    la_key_t *keys;
    la_entry_t **ent;
    int nkeys, capkeys;
    /* the task being placed */
    const arb_job_t *job;
    uint32_t job_id;
    uint64_t job_seq;
    const arb_tgroup_t *grp;
    la_key_t cur;
    int key; /* index in keys, -1 uncached */
    /* Model pools: the observed demand by allowed-model class, and for the
     * task being placed the expected loss of using each pool. */
    la_class_t cls[LA_MAX_CLASSES];
    int ncls;
    double demand; /* GPU milli observed, all tasks */
    int npools;
    uint32_t pool_model[LA_MAX_POOLS];
    double pool_free[LA_MAX_POOLS], pool_need[LA_MAX_POOLS];
    double share[LA_MAX_CLASSES][LA_MAX_POOLS]; /* a class's part of pool_need */
    double loss[LA_MAX_POOLS];                  /* for the task being placed */
    bool any_loss;
    uint64_t pools_ver; /* the cluster's version st->loss was computed at */
    /* The plan (fgdla_plan.c): prices from the LP of the observed mix. */
    la_plan_t *plan;
    double plan_tasks;    /* observed tasks at the last solve */
    la_plan_task_t ptask; /* the task being placed, as the plan sees it */
    double pbase;         /* its least cost anywhere */
} la_state_t;

/* ---- the weighted shapes ---------------------------------------------------- */

static bool model_ok(const uint32_t *models, int n, uint32_t model)
{
    if (n == 0)
        return true;
    for (int i = 0; i < n; i++)
        if (models[i] == model)
            return true;
    return false;
}

/* Could node n, empty, hold one task of shape m? */
static bool could_hold(const arb_node_t *n, const fgd_shape_info_t *m)
{
    if ((double)n->cap.cpu_milli < (double)m->cpu_milli || (double)n->cap.mem_bytes < m->mem_bytes)
        return false;
    if (m->gpus == 0 || m->gpu_milli == 0)
        return true;
    return n->ngpus >= m->gpus && model_ok(m->models, m->nmodels, n->gpu[0].model);
}

/* Rebuild w from the table and the cluster's capacity. 0 or -ENOMEM. */
static int la_build(la_state_t *st)
{
    int ns = fgd_table_nshapes(st->tab), nw = 0, ngpu_nodes = 0;
    double tasks = fgd_table_tasks(st->tab);
    la_shape_t *w = realloc(st->w, (size_t)(ns > 0 ? ns : 1) * sizeof *w);

    if (!w)
        return -ENOMEM;
    st->w = w;
    for (uint32_t i = 0; i < st->c->nnodes; i++)
        ngpu_nodes += st->c->nodes[i].ngpus > 0 && st->c->nodes[i].state != ARB_NODE_LEFT;
    for (int k = 0; k < ns && tasks > 0; k++) {
        fgd_shape_info_t m;
        int h = 0;
        fgd_table_shape(st->tab, k, &m);
        if (m.count <= 0)
            continue;
        for (uint32_t i = 0; i < st->c->nnodes; i++) {
            const arb_node_t *n = &st->c->nodes[i];
            h += n->ngpus > 0 && n->state != ARB_NODE_LEFT && could_hold(n, &m);
        }
        if (h == 0)
            continue; /* nothing could ever hold it: no node is to blame */
        w[nw].cpu = m.cpu_milli;
        w[nw].mem = m.mem_bytes;
        w[nw].milli = m.gpus > 0 ? m.gpu_milli : 0;
        w[nw].num = m.gpu_milli > 0 ? m.gpus : 0;
        w[nw].nmodels = m.nmodels;
        memcpy(w[nw].models, m.models, sizeof w[nw].models);
        w[nw].w = m.count / tasks * (double)ngpu_nodes / (double)h;
        nw++;
    }
    st->nw = nw;
    return 0;
}

/* ---- F2 --------------------------------------------------------------------- */

typedef struct la_view {
    int ng;
    int32_t free[ARB_MAX_GPUS];
    int64_t cpu_left, mem_left;
    uint32_t model;
} la_view_t;

static void view_of(const arb_node_t *n, la_view_t *v)
{
    v->ng = n->ngpus;
    for (int i = 0; i < n->ngpus; i++)
        v->free[i] = n->gpu[i].healthy ? 1000 - n->gpu[i].used_milli : 0;
    v->cpu_left = n->cap.cpu_milli - n->used.cpu_milli;
    v->mem_left = n->cap.mem_bytes - n->used.mem_bytes;
    v->model = n->ngpus ? n->gpu[0].model : 0;
}

static double f2_eval(const la_state_t *st, const la_view_t *v)
{
    int64_t idle = 0;
    int whole = 0;
    double out = 0;

    for (int i = 0; i < v->ng; i++) {
        idle += v->free[i];
        whole += v->free[i] == 1000;
    }
    if (idle == 0)
        return 0;
    for (int k = 0; k < st->nw; k++) {
        const la_shape_t *m = &st->w[k];
        int64_t copies = 0;

        if (m->milli == 0 || (m->nmodels && !model_ok(m->models, m->nmodels, v->model))) {
            out += m->w * (double)idle;
            continue;
        }
        if (m->milli < 1000) {
            for (int i = 0; i < v->ng; i++)
                copies += v->free[i] / m->milli;
        } else {
            copies = whole / (m->num > 0 ? m->num : 1);
        }
        if (copies > v->cpu_left / m->cpu)
            copies = v->cpu_left / m->cpu;
        if (m->mem > 0 && (double)copies > (double)v->mem_left / m->mem)
            copies = (int64_t)((double)v->mem_left / m->mem);
        if (copies < 0)
            copies = 0;
        out += m->w * (double)(idle - copies * (int64_t)m->milli * m->num);
    }
    return out;
}

/* The second key, 0..0.99: int(100 sigmoid(-dF2 / scale)) / 100. */
static double sec_key(double df2)
{
    double s = 1.0 / (1.0 + exp(df2 / LA_SEC_SCALE));
    return (double)(int64_t)(s * 100.0) / 100.0; /* s < 1: at most 0.99 */
}

/* ---- model pools -------------------------------------------------------------
 *
 * Nodes of one GPU model form a pool. A task restricted to some models can
 * only use their pools; a task that may use any model can go anywhere. When
 * the restricted tasks of the mix need more of a pool than it has, every
 * GPU milli an unrestricted task takes there is one a restricted task will
 * miss, and the restricted task then fails while other pools stay idle
 * (gpuspec33: 240 GPUs of T4-only tasks fail with 490 G2 GPUs idle). FGD's
 * F cannot see this: it measures one node against the mix, not the pools
 * against each other.
 *
 * So, for each task: the cluster's free GPU milli F, and pool M's, free_M.
 * The restricted demand still to come is taken to be each class's share of
 * the observed GPU demand times F (the cluster filling up with the mix, the
 * regime where placement matters). It is poured into the pools the class
 * may use, most restricted classes first, levelling need / free among them
 * (water-filling), which gives need_M and each class's part of it. A task of
 * class c (or of none) that takes g milli in pool M then loses
 *
 *   loss_M = max(0, g - max(0, free_M - need_M + part_c,M))
 *
 * milli of someone else's planned room: 0 while the pool has room beyond
 * what restricted tasks will need. loss_M is added to FGD's dF (both GPU
 * milli that future tasks cannot use) before FGD's sigmoid, so a pool
 * without room to spare scores lower exactly where it matters, and not at
 * all in a mix without restricted tasks, where fgd-la is FGD with its look-
 * ahead tie-break.
 */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* j's allowed models as a class key (sorted, unique); 0 when any. */
static int class_key(const arb_job_t *j, uint32_t *m)
{
    int n = 0;

    for (int i = 0; i < j->nmodels && n < 8; i++)
        m[n++] = j->models[i];
    qsort(m, (size_t)n, sizeof *m, cmp_u32);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || m[k - 1] != m[i])
            m[k++] = m[i];
    return k;
}

/* Index of j's class (added when new and room is left), -1 when j may use
 * any model or the table is full. */
static int class_of(la_state_t *st, const arb_job_t *j, bool add)
{
    uint32_t m[8] = {0};
    int n = class_key(j, m);

    if (n == 0)
        return -1;
    for (int c = 0; c < st->ncls; c++)
        if (st->cls[c].nmodels == n && memcmp(st->cls[c].models, m, (size_t)n * sizeof *m) == 0)
            return c;
    if (!add || st->ncls == LA_MAX_CLASSES)
        return -1;
    st->cls[st->ncls].nmodels = n;
    memcpy(st->cls[st->ncls].models, m, (size_t)n * sizeof *m);
    st->cls[st->ncls].demand = 0;
    return st->ncls++;
}

/* GPU milli one task of group g takes. */
static double task_gpu(const arb_tgroup_t *g)
{
    return g->gpus > 0 ? 1000.0 * g->gpus : (double)g->gpu_share;
}

static void pools_observe(la_state_t *st, const arb_job_t *j)
{
    double d = 0;
    int c;

    for (int i = 0; i < j->ngroups; i++)
        d += task_gpu(&j->groups[i]) * (j->groups[i].replicas > 0 ? j->groups[i].replicas : 1);
    if (d <= 0)
        return;
    st->demand += d;
    if ((c = class_of(st, j, true)) >= 0)
        st->cls[c].demand += d;
}

static int pool_of(const la_state_t *st, uint32_t model)
{
    for (int p = 0; p < st->npools; p++)
        if (st->pool_model[p] == model)
            return p;
    return -1;
}

/* Pour r milli of class c into the pools in mask, levelling need / free. */
static void pour(la_state_t *st, int c, const bool *in, double r)
{
    int ord[LA_MAX_POOLS], n = 0;
    double lvl, sum_need = 0, sum_free = 0;

    for (int p = 0; p < st->npools; p++)
        if (in[p] && st->pool_free[p] > 0)
            ord[n++] = p;
    if (n == 0 || r <= 0)
        return;
    for (int i = 1; i < n; i++) { /* by need / free, ascending */
        int x = ord[i], k = i;
        double rx = st->pool_need[x] / st->pool_free[x];
        while (k > 0 && st->pool_need[ord[k - 1]] / st->pool_free[ord[k - 1]] > rx) {
            ord[k] = ord[k - 1];
            k--;
        }
        ord[k] = x;
    }
    /* The level: the first k pools share r so that all reach need/free = lvl,
     * lvl not above the (k+1)th pool's ratio. */
    int k = 0;
    for (;;) {
        sum_need += st->pool_need[ord[k]];
        sum_free += st->pool_free[ord[k]];
        k++;
        lvl = (r + sum_need) / sum_free;
        if (k == n || lvl <= st->pool_need[ord[k]] / st->pool_free[ord[k]])
            break;
    }
    for (int i = 0; i < k; i++) {
        int p = ord[i];
        double x = lvl * st->pool_free[p] - st->pool_need[p];
        if (x > 0) {
            st->pool_need[p] += x;
            st->share[c][p] += x;
        }
    }
}

/* The loss of each pool for the task of job j, group g (st->loss). */
static void pools_prepare(la_state_t *st, const arb_job_t *j, const arb_tgroup_t *g)
{
    const arb_cluster_t *cl = st->c;
    int ord[LA_MAX_CLASSES], n = 0, mine;
    double total = 0, want = task_gpu(g);

    st->any_loss = false;
    st->npools = 0;
    memset(st->pool_free, 0, sizeof st->pool_free);
    memset(st->pool_need, 0, sizeof st->pool_need);
    memset(st->loss, 0, sizeof st->loss);
    if (want <= 0 || st->ncls == 0 || st->demand <= 0)
        return;
    for (uint32_t i = 0; i < cl->nnodes; i++) {
        const arb_node_t *nd = &cl->nodes[i];
        int p;
        if (nd->ngpus == 0 || nd->state != ARB_NODE_READY)
            continue;
        if ((p = pool_of(st, nd->gpu[0].model)) < 0) {
            if (st->npools == LA_MAX_POOLS)
                return; /* too many models to tell apart: no balance */
            p = st->npools++;
            st->pool_model[p] = nd->gpu[0].model;
        }
        st->pool_free[p] += (double)(nd->cap.gpu_milli - nd->used.gpu_milli);
    }
    for (int p = 0; p < st->npools; p++)
        total += st->pool_free[p];
    if (total <= 0)
        return;
    /* Classes by how many pools they may use, fewest first. */
    int reach[LA_MAX_CLASSES];
    for (int c = 0; c < st->ncls; c++) {
        reach[c] = 0;
        for (int p = 0; p < st->npools; p++)
            reach[c] += model_ok(st->cls[c].models, st->cls[c].nmodels, st->pool_model[p]);
        memset(st->share[c], 0, sizeof st->share[c]);
        if (reach[c] == 0 || reach[c] == st->npools)
            continue; /* nowhere, or anywhere: no pool is reserved for it */
        int k = n++;
        while (k > 0 && reach[ord[k - 1]] > reach[c]) {
            ord[k] = ord[k - 1];
            k--;
        }
        ord[k] = c;
    }
    for (int i = 0; i < n; i++) {
        int c = ord[i];
        bool in[LA_MAX_POOLS];
        for (int p = 0; p < st->npools; p++)
            in[p] = model_ok(st->cls[c].models, st->cls[c].nmodels, st->pool_model[p]);
        pour(st, c, in, st->cls[c].demand / st->demand * total);
    }
    mine = class_of(st, j, false);
    for (int p = 0; p < st->npools; p++) {
        double room = st->pool_free[p] - st->pool_need[p] + (mine >= 0 ? st->share[mine][p] : 0);
        st->loss[p] = want - (room > 0 ? room : 0);
        if (st->loss[p] < 0)
            st->loss[p] = 0;
        st->any_loss |= st->loss[p] > 0;
    }
}

/* The loss of placing the current task on n (0 outside a known pool). */
static double node_loss(const la_state_t *st, const arb_node_t *n)
{
    int p;

    if (!st->any_loss || n->ngpus == 0 || (p = pool_of(st, n->gpu[0].model)) < 0)
        return 0;
    return st->loss[p];
}

/* ---- state and caches --------------------------------------------------------- */

static void *la_init(const arb_sched_t *s)
{
    la_state_t *st = calloc(1, sizeof *st);

    if (!st)
        return NULL;
    st->c = s->c;
    st->fgd = arb_score_fgd.init(s);
    st->tab = fgd_table_new(&s->c->strs);
    st->plan = la_plan_new();
    if (!st->fgd || !st->tab || !st->plan) {
        arb_score_fgd.fini(st->fgd);
        fgd_table_free(st->tab);
        la_plan_free(st->plan);
        free(st);
        return NULL;
    }
    st->gen = 1;
    st->next_build = 1;
    st->key = -1;
    return st;
}

static void la_fini(void *state)
{
    la_state_t *st = state;

    if (!st)
        return;
    for (int i = 0; i < st->nkeys; i++)
        free(st->ent[i]);
    free(st->ent);
    free(st->keys);
    free(st->f0);
    free(st->w);
    la_plan_free(st->plan);
    fgd_table_free(st->tab);
    arb_score_fgd.fini(st->fgd);
    free(st);
}

/* Rebuild the weighted shapes (and, on its geometric schedule or when the
 * nodes changed, the plan) now. Called from observe, never from a score: a
 * placement that scores nothing (one candidate node, or one class of alike
 * nodes) must not move the rebuild, or the indexed and the full-scan
 * engines would learn the mix and price the nodes at different moments and
 * disagree later (test_domidx's test_all_profiles). */
static void la_rebuild(la_state_t *st)
{
    if (la_build(st) < 0) {
        st->dirty = true; /* out of memory: the next score tries again */
        return;
    }
    double t = fgd_table_tasks(st->tab);
    /* A solve costs a few hundred ms on openb: on a geometric schedule, and
     * when the nodes changed. Failure leaves it off (fgd-la is then FGD with
     * its look-ahead and pool balance). */
    if (t >= st->plan_tasks * LA_PLAN_GROWTH || la_plan_nodes(st->plan) != st->c->nnodes) {
        la_plan_solve(st->plan, st->c, st->tab, NULL);
        st->plan_tasks = t;
    }
    st->gen++;
    st->next_build = t + (t / 8 > 1 ? t / 8 : 1);
    st->job = NULL; /* the memoised task's base price is stale */
    st->dirty = false;
}

/* Each arrival: learn its shape, and rebuild when the mix grew past the
 * threshold or nodes joined since the plan was made (checked here, at an
 * arrival both engines see, not at the next score, so a joined node is
 * priced from the same arrival on either engine). */
static void la_observe(void *state, const arb_job_t *j)
{
    la_state_t *st = state;

    arb_score_fgd.observe(st->fgd, j);
    pools_observe(st, j);
    bool grew = fgd_table_count(st->tab, j) == 0 && fgd_table_tasks(st->tab) >= st->next_build;
    bool joined = la_plan_ok(st->plan) && la_plan_nodes(st->plan) != st->c->nnodes;
    if (grew || joined)
        la_rebuild(st);
}

static bool key_eq(const la_key_t *a, const la_key_t *b)
{
    return a->cpu == b->cpu && a->mem == b->mem && a->milli == b->milli && a->num == b->num &&
           a->nmodels == b->nmodels &&
           memcmp(a->models, b->models, (size_t)a->nmodels * sizeof a->models[0]) == 0;
}

/* Make the caches cover every node; the index of key k (added when new), or
 * -1 when memory runs out (the plugin then works uncached). */
static int cache_slot(la_state_t *st, const la_key_t *k)
{
    uint32_t nn = st->c->nnodes;
    int i;

    if (nn > st->cap) {
        uint32_t cap = nn + nn / 2 + 16;
        la_ncache_t *f0 = realloc(st->f0, cap * sizeof *f0);
        if (!f0)
            return -1;
        memset(f0 + st->cap, 0, (cap - st->cap) * sizeof *f0);
        st->f0 = f0;
        for (i = 0; i < st->nkeys; i++) {
            la_entry_t *e = realloc(st->ent[i], cap * sizeof *e);
            if (!e)
                return -1;
            memset(e + st->cap, 0, (cap - st->cap) * sizeof *e);
            st->ent[i] = e;
        }
        st->cap = cap;
    }
    /* Few keys (one per distinct request), looked up once per task. */
    for (i = 0; i < st->nkeys; i++)
        if (key_eq(&st->keys[i], k))
            return i;
    if (st->nkeys == st->capkeys) {
        int cap = st->capkeys ? st->capkeys * 2 : 64;
        la_key_t *keys = realloc(st->keys, (size_t)cap * sizeof *keys);
        la_entry_t **ent;
        if (!keys)
            return -1;
        st->keys = keys;
        ent = realloc(st->ent, (size_t)cap * sizeof *ent);
        if (!ent)
            return -1;
        st->ent = ent;
        st->capkeys = cap;
    }
    if (!(st->ent[st->nkeys] = calloc(st->cap, sizeof **st->ent)))
        return -1;
    st->keys[st->nkeys] = *k;
    return st->nkeys++;
}

/* Rebuild if due and memoise the task pc places; pc with FGD's state in fp. */
static la_state_t *prepare(const arb_pctx_t *pc, arb_pctx_t *fp)
{
    la_state_t *st = pc->state;
    const arb_job_t *j = pc->job;

    *fp = *pc;
    fp->state = st->fgd;
    if (st->dirty)
        la_rebuild(st);
    if (j != st->job || j->id != st->job_id || j->seq != st->job_seq || pc->group != st->grp) {
        const arb_tgroup_t *g = pc->group;
        la_key_t *k = &st->cur;
        memset(k, 0, sizeof *k);
        k->cpu = g->req.cpu_milli > 0 ? g->req.cpu_milli : LA_DEFAULT_CPU;
        k->mem = g->req.mem_bytes;
        k->milli = g->gpus > 0 ? 1000 : g->gpu_share;
        k->num = g->gpus > 0 ? g->gpus : g->gpu_share > 0;
        if (k->num > 0 && j->nmodels > 0) {
            k->nmodels = j->nmodels < 8 ? j->nmodels : 8;
            memcpy(k->models, j->models, (size_t)k->nmodels * sizeof k->models[0]);
        }
        st->job = j;
        st->job_id = j->id;
        st->job_seq = j->seq;
        st->grp = g;
        st->key = cache_slot(st, k);
        pools_prepare(st, j, g);
        st->pools_ver = st->c->version;
        st->ptask.cpu = k->cpu;
        st->ptask.mem = (double)k->mem;
        st->ptask.milli = k->milli;
        st->ptask.num = k->num;
        st->ptask.nmodels = k->nmodels;
        st->ptask.models = k->models;
        st->pbase = la_plan_base(st->plan, &st->ptask);
    }
    /* The pools read what is free now: a task bound (a gang's earlier one,
     * another job's) or a node changed since they were computed makes them
     * stale. Recomputed on the cluster's version, not only per job: the
     * indexed engine does not score a task with one candidate, so a memo
     * kept from the first score would differ between the engines. */
    if (st->pools_ver != st->c->version) {
        pools_prepare(st, j, pc->group);
        st->pools_ver = st->c->version;
    }
    return st;
}

static double node_f2(la_state_t *st, const arb_node_t *n, const la_view_t *v)
{
    la_ncache_t *e;

    if (st->key < 0)
        return f2_eval(st, v);
    e = &st->f0[n->id];
    if (e->ver != n->version || e->gen != st->gen) {
        e->f2 = f2_eval(st, v);
        e->ver = n->version;
        e->gen = st->gen;
    }
    return e->f2;
}

/* F2 after the memoised task takes GPU `gpu` (a share), or its whole GPUs
 * (fully free ones; which does not matter to F2), or only CPU and memory. */
static double f2_after(const la_state_t *st, la_view_t v, int gpu)
{
    const la_key_t *k = &st->cur;

    if (k->milli > 0 && k->milli < 1000) {
        v.free[gpu] -= k->milli;
    } else if (k->milli >= 1000) {
        for (int i = 0, need = k->num; i < v.ng && need > 0; i++)
            if (v.free[i] == 1000) {
                v.free[i] = 0;
                need--;
            }
    }
    v.cpu_left -= k->cpu;
    v.mem_left -= k->mem;
    return f2_eval(st, &v);
}

/* FGD's integer fs with the pool loss of n added to its dF (the same
 * sigmoid and rounding), plus the second key. e (may be NULL) caches FGD's
 * raw dF for the node's state. */
static double with_loss(const arb_pctx_t *fp, la_state_t *st, const arb_node_t *n, la_entry_t *e,
                        int fs, int gpu, double sec)
{
    double loss = node_loss(st, n), df;

    if (loss <= 0)
        return fs + sec;
    df = e && !isnan(e->df) ? e->df : fgd_delta(fp, n, gpu);
    if (e)
        e->df = df;
    if (isnan(df))
        return fs + sec;
    double s = 1.0 / (1.0 + exp((df + loss) / 1000));
    int adj = (int)(int64_t)(s * 100.0);
    return (adj < fs ? adj : fs) + sec;
}

/* The plan's loss of the memoised task on n, its share from a GPU with
 * free_before milli free: whole milli, 0 when the plan is off. */
static double plan_loss(const la_state_t *st, const arb_node_t *n, int free_before)
{
    double l;

    if (!la_plan_ok(st->plan))
        return 0;
    l = nearbyint(la_plan_cost(st->plan, n, &st->ptask, free_before) - st->pbase);
    return l < 0 ? 0 : l > LA_LOSS_MAX ? LA_LOSS_MAX : l;
}

/* The score from its keys: the plan's loss first (when there is a plan),
 * then FGD's integer with the pool loss, then the second key. */
static double compose(const la_state_t *st, double loss, double fgd_and_sec)
{
    return la_plan_ok(st->plan) ? (LA_LOSS_MAX - loss) * 100 + fgd_and_sec : fgd_and_sec;
}

/*
 * The composite score of the memoised task on n and, for a share, its GPU:
 * the GPU with the least plan loss, among those FGD's integer best, among
 * those the one where F2 grows least. want >= 0 scores that GPU instead of
 * choosing one (another plugin picked it). false when FGD finds no fit.
 */
static bool la_eval(const arb_pctx_t *fp, la_state_t *st, const arb_node_t *n, int want,
                    double *score, int *gpu)
{
    uint32_t fgen = fgd_generation(fp);
    la_entry_t *e = st->key >= 0 && want < 0 ? &st->ent[st->key][n->id] : NULL;
    int8_t per[ARB_MAX_GPUS];
    la_view_t v;
    double f0, best_df = 0, best_loss = 0;
    int fs, best = -1;

    if (e && e->ver == n->version && e->gen == st->gen && e->fgen == fgen) {
        *gpu = e->gpu;
        *score = e->ok ? compose(st, e->loss, with_loss(fp, st, n, e, e->fs, e->gpu, e->sec)) : 0;
        return e->ok;
    }
    fs = fgd_gpu_scores(fp, n, per);
    view_of(n, &v);
    f0 = node_f2(st, n, &v);
    if (fs >= 0 && st->cur.milli > 0 && st->cur.milli < 1000) {
        int32_t seen[ARB_MAX_GPUS];
        double seen_df[ARB_MAX_GPUS];
        int nseen = 0, best_fs = -1;
        for (int i = 0; i < v.ng; i++) {
            double df = NAN, loss;
            if (per[i] < 0 || (want >= 0 && i != want))
                continue;
            loss = plan_loss(st, n, v.free[i]);
            if (best >= 0 && (loss > best_loss || (loss == best_loss && per[i] < best_fs)))
                continue;
            if (best >= 0 && (loss < best_loss || per[i] > best_fs))
                best = -1; /* a better key: F2 starts over */
            /* GPUs with the same free share give the same F2. */
            for (int s = 0; s < nseen && isnan(df); s++)
                if (seen[s] == v.free[i])
                    df = seen_df[s];
            if (isnan(df)) {
                df = f2_after(st, v, i) - f0;
                seen[nseen] = v.free[i];
                seen_df[nseen++] = df;
            }
            if (best < 0 || df < best_df - 1e-9) {
                best = i;
                best_df = df;
                best_fs = per[i];
                best_loss = loss;
            }
        }
        fs = best < 0 ? -1 : best_fs;
    } else if (fs >= 0) {
        best_df = f2_after(st, v, -1) - f0;
        best_loss = plan_loss(st, n, 1000);
    }
    *gpu = best;
    if (e) {
        e->ver = n->version;
        e->gen = st->gen;
        e->fgen = fgen;
        e->gpu = (int8_t)best;
        e->ok = fs >= 0;
        e->fs = (int8_t)(fs >= 0 ? fs : 0);
        e->sec = sec_key(best_df);
        e->df = NAN;
        e->loss = best_loss;
    }
    *score =
        fs >= 0 ? compose(st, best_loss, with_loss(fp, st, n, e, fs, best, sec_key(best_df))) : 0;
    return fs >= 0;
}

/* ---- the plugin --------------------------------------------------------------- */

static int la_pick(const arb_pctx_t *pc, const arb_node_t *n, arb_pick_t *pick)
{
    if (pc->group->gpu_share > 0) {
        arb_pctx_t fp;
        la_state_t *st = prepare(pc, &fp);
        double score;
        int gpu;
        memset(pick, 0, sizeof *pick);
        if (!la_eval(&fp, st, n, -1, &score, &gpu) || gpu < 0)
            return -ENOSPC;
        pick->gpu_mask = (uint16_t)(1u << gpu);
        pick->gpu_milli = (int16_t)pc->group->gpu_share;
        return 0;
    }
    /* Whole GPUs: neither F nor F2 depends on which free GPUs are taken. */
    return sched_pick_bestfit(pc, n, -1, pick);
}

static double la_score(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pick)
{
    arb_pctx_t fp;
    la_state_t *st = prepare(pc, &fp);
    double score;
    int gpu;

    if (!la_eval(&fp, st, n, -1, &score, &gpu))
        return 0;
    /* Another plugin picked a different GPU for the share: score that one. */
    if (gpu >= 0 && pick->gpu_mask && pick->gpu_mask != (1u << gpu) &&
        !la_eval(&fp, st, n, __builtin_ctz(pick->gpu_mask), &score, &gpu))
        return 0;
    return score;
}

/* Scores are FGD's 0..99 plus a fraction: keep them as they are. */
static void la_normalize(double *scores, int n)
{
}

const arb_score_ops_t arb_score_fgd_la = {
    .name = "fgd-la",
    .init = la_init,
    .fini = la_fini,
    .observe = la_observe,
    .pick = la_pick,
    .score = la_score,
    .normalize = la_normalize,
};
