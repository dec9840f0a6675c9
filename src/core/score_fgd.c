/*
 * score_fgd.c: Fragmentation Gradient Descent (FGD), the placement policy of
 * Weng et al., USENIX ATC'23, as a core score plugin, and the fragmentation
 * measure F_n (paper.h) that the plugin and the simulator's metrics share.
 *
 * The plugin learns the task-shape mix from arrivals (observe), keeps the
 * shapes covering 95% of them, and scores a node by how little placing the
 * task there grows the node's fragmentation:
 *
 *   score = int(100 * sigmoid((F_before - F_after) / 1000))   0..99
 *
 * exactly the artifact's integer, kept as is (no rescaling), so equal
 * growths tie as they do there (see paper.h on how ties are broken).
 * For a GPU-sharing task the plugin also picks the GPU inside the node with
 * the best score (the first such GPU); whole GPUs are taken best-fit, which
 * leaves F unchanged whichever free GPUs are taken.
 *
 * Cost. F_n is a sum over the kept shapes (tens) of a pass over the node's
 * GPUs. A placement changes one node, so F_before is cached per node and the
 * best (score, GPU) per (task shape, node), both keyed by the node's version
 * and the table's generation; a task then costs a cache probe per node and
 * real work only on the nodes that changed. The table is rebuilt when the
 * tasks observed grow by an eighth (about 60 rebuilds for 10^4 arrivals),
 * each rebuild invalidating the caches.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/paper.h"
#include "sched_int.h"

#define FGD_MAX_MODELS 8
#define FGD_DEFAULT_CPU 100 /* kube-scheduler's CPU request for a pod that sets none */
#define FGD_COVER_PCT 95    /* the artifact's podPopularityThreshold */

/* A task shape, the artifact's PodResource: CPU (never 0), GPU per device,
 * GPU count, allowed models (as listed, order and repeats kept). */
typedef struct fgd_shape {
    int64_t cpu;
    int32_t milli;
    int32_t num;
    int32_t nmodels;
    uint32_t models[FGD_MAX_MODELS];
    double count;
    double mem_sum; /* host memory of the tasks counted (not part of the key) */
} fgd_shape_t;

struct fgd_table {
    const arb_strtab_t *strs;
    fgd_shape_t *shapes;
    int n, cap;
    int32_t *slots; /* open addressing: shape index + 1; 0 empty */
    uint32_t nslots;
    double tasks;
    /* The last build: kept shapes, most popular first, and their p_m. */
    int nkept;
    int *kept;
    double *p;
};

/* The artifact's fragment classes (utils.FragRatioDataMap), in its order:
 * F is the sum of every class but Q3, added in this order. */
enum {
    Q1_LACK_BOTH,
    Q2_LACK_GPU,
    Q3_SATISFIED,
    Q4_LACK_CPU,
    XL_SATISFIED,
    XR_LACK_CPU,
    NO_ACCESS,
    NCLASS
};

/* ---- shapes and the table ------------------------------------------------ */

static void shape_of(const arb_job_t *j, const arb_tgroup_t *g, fgd_shape_t *s)
{
    memset(s, 0, sizeof *s);
    s->cpu = g->req.cpu_milli > 0 ? g->req.cpu_milli : FGD_DEFAULT_CPU;
    if (g->gpus > 0) {
        s->milli = 1000;
        s->num = g->gpus;
    } else if (g->gpu_share > 0) {
        s->milli = g->gpu_share;
        s->num = 1;
    }
    if (s->num > 0) {
        s->nmodels = j->nmodels < FGD_MAX_MODELS ? j->nmodels : FGD_MAX_MODELS;
        for (int i = 0; i < s->nmodels; i++)
            s->models[i] = j->models[i];
    }
}

static uint32_t shape_hash(const fgd_shape_t *s)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    uint64_t v[4] = {(uint64_t)s->cpu, (uint64_t)(uint32_t)s->milli, (uint64_t)(uint32_t)s->num,
                     (uint64_t)(uint32_t)s->nmodels};
    for (int i = 0; i < 4; i++)
        h = (h ^ v[i]) * 0x100000001b3ULL;
    for (int i = 0; i < s->nmodels; i++)
        h = (h ^ s->models[i]) * 0x100000001b3ULL;
    return (uint32_t)(h ^ (h >> 32));
}

static bool shape_eq(const fgd_shape_t *a, const fgd_shape_t *b)
{
    return a->cpu == b->cpu && a->milli == b->milli && a->num == b->num &&
           a->nmodels == b->nmodels &&
           memcmp(a->models, b->models, (size_t)a->nmodels * sizeof a->models[0]) == 0;
}

static int table_rehash(fgd_table_t *t, uint32_t nslots)
{
    int32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (int i = 0; i < t->n; i++) {
        uint32_t h = shape_hash(&t->shapes[i]) & (nslots - 1);
        while (slots[h])
            h = (h + 1) & (nslots - 1);
        slots[h] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

/* Index of shape k in t, added with count 0 when absent and add is set;
 * -ENOENT or -ENOMEM otherwise. */
static int table_find(fgd_table_t *t, const fgd_shape_t *k, bool add)
{
    uint32_t h;

    if (t->nslots) {
        for (h = shape_hash(k) & (t->nslots - 1); t->slots[h]; h = (h + 1) & (t->nslots - 1))
            if (shape_eq(&t->shapes[t->slots[h] - 1], k))
                return t->slots[h] - 1;
    }
    if (!add)
        return -ENOENT;
    if ((uint32_t)(t->n + 1) * 2 > t->nslots &&
        table_rehash(t, t->nslots ? t->nslots * 2 : 64) != 0)
        return -ENOMEM;
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 32;
        fgd_shape_t *s = realloc(t->shapes, (size_t)cap * sizeof *s);
        if (!s)
            return -ENOMEM;
        t->shapes = s;
        t->cap = cap;
    }
    t->shapes[t->n] = *k;
    t->shapes[t->n].count = 0;
    t->shapes[t->n].mem_sum = 0;
    for (h = shape_hash(k) & (t->nslots - 1); t->slots[h]; h = (h + 1) & (t->nslots - 1))
        ;
    t->slots[h] = t->n + 1;
    return t->n++;
}

fgd_table_t *fgd_table_new(const arb_strtab_t *strs)
{
    fgd_table_t *t = calloc(1, sizeof *t);
    if (t)
        t->strs = strs;
    return t;
}

void fgd_table_free(fgd_table_t *t)
{
    if (!t)
        return;
    free(t->shapes);
    free(t->slots);
    free(t->kept);
    free(t->p);
    free(t);
}

int fgd_table_count(fgd_table_t *t, const arb_job_t *j)
{
    for (int g = 0; g < j->ngroups; g++) {
        fgd_shape_t s;
        int i;
        shape_of(j, &j->groups[g], &s);
        if ((i = table_find(t, &s, true)) < 0)
            return i;
        t->shapes[i].count += j->groups[g].replicas;
        t->shapes[i].mem_sum += (double)j->groups[g].req.mem_bytes * j->groups[g].replicas;
        t->tasks += j->groups[g].replicas;
    }
    return 0;
}

/* The artifact's GpuType string: the allowed models joined by '|'. */
static void type_string(const fgd_table_t *t, const fgd_shape_t *s, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < s->nmodels && off < n; i++) {
        int w = snprintf(buf + off, n - off, "%s%s", i ? "|" : "",
                         t->strs ? arb_str(t->strs, s->models[i]) : "");
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

/* Most popular first; equal counts in decreasing (CPU, GPU milli, GPU count,
 * model string) order, the artifact's sort.Reverse(TargetPodList). */
static int kept_cmp(const void *a, const void *b, void *arg)
{
    const fgd_table_t *t = arg;
    const fgd_shape_t *x = &t->shapes[*(const int *)a], *y = &t->shapes[*(const int *)b];
    char bx[256], by[256];

    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->cpu != y->cpu)
        return x->cpu > y->cpu ? -1 : 1;
    if (x->milli != y->milli)
        return x->milli > y->milli ? -1 : 1;
    if (x->num != y->num)
        return x->num > y->num ? -1 : 1;
    type_string(t, x, bx, sizeof bx);
    type_string(t, y, by, sizeof by);
    return -strcmp(bx, by);
}

int fgd_table_build(fgd_table_t *t)
{
    int n = 0, i = 0, step = 0;
    double total = 0, cum = 0, want;
    int *kept = realloc(t->kept, (size_t)(t->n ? t->n : 1) * sizeof *kept);
    double *p;

    if (!kept)
        return -ENOMEM;
    t->kept = kept;
    p = realloc(t->p, (size_t)(t->n ? t->n : 1) * sizeof *p);
    if (!p)
        return -ENOMEM;
    t->p = p;
    for (int k = 0; k < t->n; k++)
        if (t->shapes[k].count > 0) {
            kept[n++] = k;
            total += t->shapes[k].count;
        }
    qsort_r(kept, (size_t)n, sizeof *kept, kept_cmp, t);
    /* Take shapes one at a time until they cover the threshold. */
    want = (double)FGD_COVER_PCT * total / 100.0;
    while (cum < want) {
        step++;
        for (; i < step && i < n; i++) {
            cum += t->shapes[kept[i]].count;
            p[i] = t->shapes[kept[i]].count / total;
        }
        if (i >= n)
            break;
    }
    if (i < n) /* renormalise what was kept to sum to 1 */
        for (int k = 0; k < i; k++)
            p[k] /= cum / total;
    t->nkept = i;
    return 0;
}

int fgd_table_kept(const fgd_table_t *t)
{
    return t->nkept;
}

double fgd_table_tasks(const fgd_table_t *t)
{
    return t->tasks;
}

int fgd_table_nshapes(const fgd_table_t *t)
{
    return t->n;
}

void fgd_table_shape(const fgd_table_t *t, int i, fgd_shape_info_t *out)
{
    const fgd_shape_t *s = &t->shapes[i];

    memset(out, 0, sizeof *out);
    out->cpu_milli = s->cpu;
    out->gpu_milli = s->milli;
    out->gpus = s->num;
    out->nmodels = s->nmodels;
    memcpy(out->models, s->models, (size_t)s->nmodels * sizeof s->models[0]);
    out->count = s->count;
    out->mem_bytes = s->count > 0 ? s->mem_sum / s->count : 0;
}

/* ---- F_n ------------------------------------------------------------------ */

/* A node as the measure sees it: free milli per GPU (unhealthy GPUs have
 * none), CPU left and its GPU model. */
typedef struct fgd_view {
    int ng;
    int32_t free[ARB_MAX_GPUS];
    int64_t cpu_left;
    uint32_t model;
} fgd_view_t;

static void view_of(const arb_node_t *n, fgd_view_t *v)
{
    v->ng = n->ngpus;
    for (int i = 0; i < n->ngpus; i++)
        v->free[i] = n->gpu[i].healthy ? 1000 - n->gpu[i].used_milli : 0;
    v->cpu_left = n->cap.cpu_milli - n->used.cpu_milli;
    v->model = n->ngpus ? n->gpu[0].model : 0;
}

static bool model_access(const fgd_shape_t *s, uint32_t model)
{
    if (s->nmodels == 0)
        return true;
    if (model == 0)
        return false;
    for (int i = 0; i < s->nmodels; i++)
        if (s->models[i] == model)
            return true;
    return false;
}

/* F of a node in state v: the artifact's NodeGpuShareFragAmountScore, with
 * its order of floating-point additions (so that equal states give equal
 * sums and Delta F = 0 scores exactly 50). */
static double frag_eval(const fgd_table_t *t, const fgd_view_t *v)
{
    double d[NCLASS] = {0}, out = 0;
    int64_t idle = 0;

    for (int i = 0; i < v->ng; i++)
        idle += v->free[i];
    for (int k = 0; k < t->nkept; k++) {
        const fgd_shape_t *s = &t->shapes[t->kept[k]];
        double p = t->p[k];
        bool cpu_ok = v->cpu_left >= s->cpu;
        int fit = 0;
        int64_t frag = 0;

        if (s->milli == 0) {
            d[cpu_ok ? XL_SATISFIED : XR_LACK_CPU] += p * (double)idle;
            continue;
        }
        if (!model_access(s, v->model)) {
            d[NO_ACCESS] += p * (double)idle;
            continue;
        }
        for (int i = 0; i < v->ng; i++) {
            if (v->free[i] >= s->milli)
                fit++;
            else
                frag += v->free[i];
        }
        if (fit >= s->num && s->num > 0) {
            if (cpu_ok) {
                d[Q2_LACK_GPU] += p * (double)frag;
                d[Q3_SATISFIED] += p * (double)(idle - frag);
            } else {
                d[Q4_LACK_CPU] += p * (double)idle;
            }
        } else {
            d[cpu_ok ? Q2_LACK_GPU : Q1_LACK_BOTH] += p * (double)idle;
        }
    }
    for (int c = 0; c < NCLASS; c++)
        if (c != Q3_SATISFIED)
            out += d[c];
    return out;
}

double fgd_node_frag(const fgd_table_t *t, const arb_node_t *n)
{
    fgd_view_t v;
    view_of(n, &v);
    return frag_eval(t, &v);
}

/* The artifact's score of a change from F0 to F1. */
static int frag_score(double f0, double f1)
{
    double s = 1.0 / (1.0 + exp(-((f0 - f1) / 1000)));
    return (int)(int64_t)(s * 100.0);
}

/* ---- the plugin ------------------------------------------------------------ */

typedef struct fgd_ncache {
    uint64_t ver;
    uint32_t gen;
    double f;
} fgd_ncache_t;

typedef struct fgd_scache {
    uint64_t ver;
    uint32_t gen;
    int16_t score; /* -1: the task does not fit */
    int8_t gpu;    /* the GPU for a share; -1 otherwise */
} fgd_scache_t;

typedef struct fgd_state {
    fgd_table_t *tab;
    const arb_cluster_t *c;
    uint32_t gen;      /* bumped by every build; caches of other generations are stale */
    double next_build; /* rebuild once this many tasks were observed */
    bool dirty;
    uint32_t cap;      /* nodes the caches cover */
    fgd_ncache_t *f0;  /* F before, per node */
    fgd_scache_t **sc; /* best (score, GPU), per shape index then node */
    int nsc;
    /* The task being placed, memoised across the engine's per-node calls. */
    const arb_job_t *job;
    uint32_t job_id;
    uint64_t job_seq;
    const arb_tgroup_t *grp;
    int shape;
    fgd_shape_t cur;
} fgd_state_t;

static void *fgd_init(const arb_sched_t *s)
{
    fgd_state_t *st = calloc(1, sizeof *st);

    if (!st)
        return NULL;
    st->c = s->c;
    st->tab = fgd_table_new(&s->c->strs);
    if (!st->tab) {
        free(st);
        return NULL;
    }
    st->gen = 1;
    st->next_build = 1;
    st->shape = -1;
    return st;
}

static void fgd_fini(void *state)
{
    fgd_state_t *st = state;

    if (!st)
        return;
    for (int i = 0; i < st->nsc; i++)
        free(st->sc[i]);
    free(st->sc);
    free(st->f0);
    fgd_table_free(st->tab);
    free(st);
}

/* Rebuild the table now, not at the next score: a placement that scores
 * nothing (one candidate node, or one class of alike nodes) must not move
 * the rebuild, or the indexed and the full-scan engines would learn the mix
 * at different moments and disagree later (test_nodeclass, test_domidx). */
static void table_rebuild(fgd_state_t *st)
{
    if (fgd_table_build(st->tab) == 0) {
        st->gen++;
        st->next_build = st->tab->tasks + (st->tab->tasks / 8 > 1 ? st->tab->tasks / 8 : 1);
        st->dirty = false;
    } else {
        st->dirty = true; /* out of memory: the next score tries again */
    }
}

static void fgd_observe(void *state, const arb_job_t *j)
{
    fgd_state_t *st = state;

    if (fgd_table_count(st->tab, j) == 0 && st->tab->tasks >= st->next_build)
        table_rebuild(st);
}

/* Make the caches cover every node and every shape index; false on ENOMEM
 * (the plugin then works uncached). */
static bool caches_fit(fgd_state_t *st)
{
    uint32_t nn = st->c->nnodes;

    if (nn > st->cap) {
        uint32_t cap = nn + nn / 2 + 16;
        fgd_ncache_t *f0 = realloc(st->f0, cap * sizeof *f0);
        if (!f0)
            return false;
        memset(f0 + st->cap, 0, (cap - st->cap) * sizeof *f0);
        st->f0 = f0;
        for (int i = 0; i < st->nsc; i++) {
            if (!st->sc[i])
                continue;
            fgd_scache_t *e = realloc(st->sc[i], cap * sizeof *e);
            if (!e)
                return false;
            memset(e + st->cap, 0, (cap - st->cap) * sizeof *e);
            st->sc[i] = e;
        }
        st->cap = cap;
    }
    if (st->shape >= st->nsc) {
        int n = st->shape + 16;
        fgd_scache_t **sc = realloc(st->sc, (size_t)n * sizeof *sc);
        if (!sc)
            return false;
        memset(sc + st->nsc, 0, (size_t)(n - st->nsc) * sizeof *sc);
        st->sc = sc;
        st->nsc = n;
    }
    if (st->shape >= 0 && !st->sc[st->shape] &&
        !(st->sc[st->shape] = calloc(st->cap, sizeof **st->sc)))
        return false;
    return true;
}

/* Rebuild the table if due, and memoise the task pc places. */
static fgd_state_t *prepare(const arb_pctx_t *pc)
{
    fgd_state_t *st = pc->state;
    const arb_job_t *j = pc->job;

    if (st->dirty)
        table_rebuild(st);
    if (j != st->job || j->id != st->job_id || j->seq != st->job_seq || pc->group != st->grp) {
        st->job = j;
        st->job_id = j->id;
        st->job_seq = j->seq;
        st->grp = pc->group;
        shape_of(j, pc->group, &st->cur);
        st->shape = table_find(st->tab, &st->cur, true);
    }
    return st;
}

static double node_f0(fgd_state_t *st, const arb_node_t *n, const fgd_view_t *v, bool cached)
{
    fgd_ncache_t *e;

    if (!cached)
        return frag_eval(st->tab, v);
    e = &st->f0[n->id];
    if (e->ver != n->version || e->gen != st->gen) {
        e->f = frag_eval(st->tab, v);
        e->ver = n->version;
        e->gen = st->gen;
    }
    return e->f;
}

/* Score of the memoised task on n with its GPU share on GPU i. */
static int share_score(fgd_state_t *st, fgd_view_t *v, double f0, int i)
{
    double f1;
    v->free[i] -= st->cur.milli;
    v->cpu_left -= st->cur.cpu;
    f1 = frag_eval(st->tab, v);
    v->free[i] += st->cur.milli;
    v->cpu_left += st->cur.cpu;
    return frag_score(f0, f1);
}

/* Score of the memoised GPU share on each GPU of n (-1 where it cannot go);
 * returns the first GPU with the best score, or -1. */
static int share_scores(const arb_pctx_t *pc, fgd_state_t *st, const arb_node_t *n, fgd_view_t *v,
                        double f0, int8_t *out)
{
    int32_t seen[ARB_MAX_GPUS];
    int seen_score[ARB_MAX_GPUS], nseen = 0, best = -1;

    for (int i = 0; i < v->ng; i++) {
        int sc = -1;
        out[i] = -1;
        if (v->free[i] < st->cur.milli || !sched_gpu_eligible(pc, n, i))
            continue;
        /* GPUs with the same free share score the same. */
        for (int k = 0; k < nseen && sc < 0; k++)
            if (seen[k] == v->free[i])
                sc = seen_score[k];
        if (sc < 0) {
            sc = share_score(st, v, f0, i);
            seen[nseen] = v->free[i];
            seen_score[nseen++] = sc;
        }
        out[i] = (int8_t)sc;
        if (best < 0 || sc > out[best])
            best = i;
    }
    return best;
}

/*
 * The artifact's calculateGpuShareFragExtendScore for the memoised task on
 * n: the score, and for a GPU share the GPU that earns it (the first of the
 * best). -1 when the task fits no GPU of n.
 */
static int fgd_eval(const arb_pctx_t *pc, fgd_state_t *st, const arb_node_t *n, int *gpu)
{
    const fgd_shape_t *s = &st->cur;
    bool cached = st->shape >= 0 && caches_fit(st);
    fgd_scache_t *e = cached ? &st->sc[st->shape][n->id] : NULL;
    fgd_view_t v;
    double f0;
    int score = -1, best = -1;

    if (e && e->ver == n->version && e->gen == st->gen) {
        *gpu = e->gpu;
        return e->score;
    }
    view_of(n, &v);
    f0 = node_f0(st, n, &v, cached);
    if (s->num == 1 && s->milli > 0 && s->milli < 1000) {
        int8_t per[ARB_MAX_GPUS];
        best = share_scores(pc, st, n, &v, f0, per);
        score = best >= 0 ? per[best] : -1;
    } else if (v.cpu_left < s->cpu || v.ng < s->num) {
        score = frag_score(f0, f0); /* the artifact's Sub fails and leaves F as is */
    } else {
        /* Take GPUs least free first, as the artifact's Sub does. */
        int need = s->num, order[ARB_MAX_GPUS];
        for (int i = 0; i < v.ng; i++) {
            int k = i;
            while (k > 0 && v.free[order[k - 1]] > v.free[i]) {
                order[k] = order[k - 1];
                k--;
            }
            order[k] = i;
        }
        for (int k = 0; k < v.ng && need > 0; k++)
            if (v.free[order[k]] >= s->milli) {
                v.free[order[k]] -= s->milli;
                need--;
            }
        if (need == 0) {
            v.cpu_left -= s->cpu;
            score = frag_score(f0, frag_eval(st->tab, &v));
        }
    }
    if (e) {
        e->ver = n->version;
        e->gen = st->gen;
        e->score = (int16_t)score;
        e->gpu = (int8_t)best;
    }
    *gpu = best;
    return score;
}

static int fgd_pick(const arb_pctx_t *pc, const arb_node_t *n, arb_pick_t *pick)
{
    if (pc->group->gpu_share > 0) {
        fgd_state_t *st = prepare(pc);
        int gpu;
        memset(pick, 0, sizeof *pick);
        if (fgd_eval(pc, st, n, &gpu) < 0 || gpu < 0)
            return -ENOSPC;
        pick->gpu_mask = (uint16_t)(1u << gpu);
        pick->gpu_milli = (int16_t)pc->group->gpu_share;
        return 0;
    }
    /* Whole GPUs: F depends only on how many free GPUs are taken. */
    return sched_pick_bestfit(pc, n, -1, pick);
}

static double fgd_score(const arb_pctx_t *pc, const arb_node_t *n, const arb_pick_t *pick)
{
    fgd_state_t *st = prepare(pc);
    int gpu, score = fgd_eval(pc, st, n, &gpu);

    /* Another plugin picked a different GPU for the share: score that one. */
    if (score >= 0 && gpu >= 0 && pick->gpu_mask && pick->gpu_mask != (1u << gpu)) {
        fgd_view_t v;
        int i = __builtin_ctz(pick->gpu_mask);
        view_of(n, &v);
        if (i < v.ng && v.free[i] >= st->cur.milli)
            score = share_score(st, &v, frag_eval(st->tab, &v), i);
    }
    return score < 0 ? 0 : score;
}

double fgd_delta(const arb_pctx_t *pc, const arb_node_t *n, int gpu)
{
    fgd_state_t *st = prepare(pc);
    const fgd_shape_t *s = &st->cur;
    fgd_view_t v;
    double f0;

    view_of(n, &v);
    f0 = node_f0(st, n, &v, st->shape >= 0 && caches_fit(st));
    if (s->num == 1 && s->milli > 0 && s->milli < 1000) {
        if (gpu < 0 || gpu >= v.ng || v.free[gpu] < s->milli)
            return NAN;
        v.free[gpu] -= s->milli;
    } else if (v.cpu_left < s->cpu || v.ng < s->num) {
        return 0; /* as fgd_eval: the artifact's Sub fails and leaves F as is */
    } else {
        /* Whole GPUs: F depends only on how many free GPUs are taken. */
        int need = s->num;
        for (int i = 0; i < v.ng && need > 0; i++)
            if (v.free[i] >= s->milli) {
                v.free[i] -= s->milli;
                need--;
            }
        if (need > 0)
            return NAN;
    }
    v.cpu_left -= s->cpu;
    return frag_eval(st->tab, &v) - f0;
}

uint32_t fgd_generation(const arb_pctx_t *pc)
{
    return prepare(pc)->gen;
}

int fgd_gpu_scores(const arb_pctx_t *pc, const arb_node_t *n, int8_t gpu_scores[ARB_MAX_GPUS])
{
    fgd_state_t *st = prepare(pc);
    int gpu, score = fgd_eval(pc, st, n, &gpu);
    fgd_view_t v;

    for (int i = 0; i < ARB_MAX_GPUS; i++)
        gpu_scores[i] = -1;
    if (score < 0 || gpu < 0)
        return score;
    view_of(n, &v);
    share_scores(pc, st, n, &v, node_f0(st, n, &v, st->shape >= 0 && caches_fit(st)), gpu_scores);
    return score;
}

/* The artifact does not rescale FGD's scores: keep them. */
static void fgd_normalize(double *scores, int n)
{
}

const arb_score_ops_t arb_score_fgd = {
    .name = "fgd",
    .init = fgd_init,
    .fini = fgd_fini,
    .observe = fgd_observe,
    .pick = fgd_pick,
    .score = fgd_score,
    .normalize = fgd_normalize,
};
