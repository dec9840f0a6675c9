/*
 * fgdla_plan.c: fgd-la's plan: what each resource of the cluster is worth
 * when the cluster fills with the learned task mix, from a linear program,
 * and the loss of a placement against those prices.
 *
 * Why. A full cluster's idle GPU milli sits in holes (an 810-milli share
 * leaves 190 that few tasks fit) and in pairings that waste (a 470 next to a
 * 320 leaves 210, where 470 + 470 leaves 60 and 650 + 320 leaves 30). FGD
 * judges a hole by the chance that the next task cannot use it; it does not
 * see that holes of one size compete for the same future tasks, so it pairs
 * a 230 with a 650 when a 320 would have come. The packing that fits the
 * most of the mix is a cutting-stock problem; its LP dual prices say what a
 * GPU's free room of each size is worth, and a placement that keeps to an
 * optimal packing loses nothing against them. Placing each task where it
 * loses least follows that packing online (on the openb shares alone, one
 * GPU per node, it reaches the LP's value: 88.0% against FGD's 87.1%).
 *
 * The LP. Nodes by type (GPU model, GPUs, CPU, memory), READY ones; task
 * shapes from the plugin's table (CPU, mean memory, GPU request, models),
 * the mix scaled so that its GPU demand equals the cluster's GPUs. As in
 * the simulator's offline bound (src/sim/bound.c): x[m,t] tasks of shape m
 * on type t, w[t,p] GPUs of type t holding share pattern p; rows for CPU,
 * memory and GPUs per type, per type and share size, and at most k tasks
 * per node that each need more than 1/(k+1) of its CPU or memory. Two
 * stages, as a greedy scheduler fills a cluster (every task that fits is
 * placed, so the mix goes in in proportion until it no longer fits, then
 * what still fits): stage 1 maximises theta, the fraction of every shape
 * placed (x summed over types >= theta a_m); stage 2 keeps theta and
 * maximises the GPU milli placed. Patterns come by column generation (the
 * best pattern for a type is an unbounded knapsack over the share rows'
 * duals). GLPK solves it (Debian's libglpk); an error inside GLPK returns
 * through its error hook and leaves the plan off.
 *
 * The prices, from stage 2's duals, per type t: pi_cpu, pi_mem, the count
 * rows' duals, and V_t(h), the most a GPU with h milli free can still earn
 * (knapsack over the share duals; V_t(1000) at least the GPU row's dual).
 * The cost of a task on node n of type t, its share on a GPU with h free:
 *
 *   cost = pi_cpu cpu + pi_mem mem + count rows + V_t(h) - V_t(h - share)
 *        (whole GPUs: + GPUs x V_t(1000))
 *
 * and its loss is cost minus the least cost it has anywhere (its own share
 * price, on the cheapest type): 0 for a placement some optimal packing
 * makes, positive for one that wastes room the mix needs.
 */
#include <glpk.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "core/fgdla_plan.h"

#define PL_MAX_TYPES 128
#define PL_CUT_K 4        /* count rows: k = 1..PL_CUT_K */
#define PL_MAX_ROUNDS 300 /* column-generation rounds per stage */
#define PL_EPS 1e-6
/* LP units: cores and GiB keep the coefficients near the GPU counts'. */
#define PL_CPU(milli) ((double)(milli) / 1000)
#define PL_MEM(bytes) ((double)(bytes) / (1024.0 * 1024 * 1024))

typedef struct pl_type {
    uint32_t model; /* of GPU 0; 0 without GPUs */
    int gpus;
    int64_t cpu, mem;
    int count;
    /* LP rows (GLPK indices; 0 none) */
    int row_cpu, row_mem, row_gpu;
    int row_share[1000]; /* by share milli */
    int row_cut[2][PL_CUT_K];
    int nsizes, sizes[1000]; /* share sizes with a row */
    /* prices */
    double pcpu, pmem, pcut[2][PL_CUT_K];
} pl_type_t;

typedef struct pl_shape {
    int64_t cpu;
    double mem;
    int num, milli; /* milli 1000: whole GPUs; num 0: no GPU */
    int nmodels;
    uint32_t models[8];
    double count; /* scaled to the cluster */
    int row, row_prop;
} pl_shape_t;

struct la_plan {
    bool ok;
    int nty;
    pl_type_t *ty;   /* PL_MAX_TYPES */
    double *V;       /* [type][1001] */
    double *sigma;   /* [type][1000]: the share rows' duals */
    int *node_type;  /* by node id at the solve; -1 unknown (a hint: see type_of) */
    uint32_t nnodes; /* that node_type covers */
};

/* One solve's working state (the GLPK part runs under an error hook). */
typedef struct pl_lp {
    la_plan_t *p;
    pl_shape_t *sh;
    int nsh;
    glp_prob *lp;
    int col_theta, ntask_cols;
    int rounds;
    double theta;
    jmp_buf fail;
} pl_lp_t;

/* ---- the instance --------------------------------------------------------------- */

static bool fits(const pl_shape_t *s, const pl_type_t *t)
{
    bool model = s->num == 0 || s->nmodels == 0;

    for (int i = 0; i < s->nmodels && !model; i++)
        model = s->models[i] == t->model;
    return model && t->gpus >= s->num && t->cpu >= s->cpu && (double)t->mem >= s->mem;
}

/* Group c's READY nodes by type; node_type filled. */
static int build_types(la_plan_t *p, const arb_cluster_t *c)
{
    int *nt = realloc(p->node_type, (size_t)(c->nnodes ? c->nnodes : 1) * sizeof *nt);

    if (!nt)
        return -ENOMEM;
    p->node_type = nt;
    p->nnodes = c->nnodes;
    p->nty = 0;
    for (uint32_t i = 0; i < c->nnodes; i++) {
        const arb_node_t *n = &c->nodes[i];
        uint32_t model = n->ngpus ? n->gpu[0].model : 0;
        int k;

        nt[i] = -1;
        if (n->state != ARB_NODE_READY)
            continue;
        for (k = 0; k < p->nty; k++)
            if (p->ty[k].model == model && p->ty[k].gpus == n->ngpus &&
                p->ty[k].cpu == n->cap.cpu_milli && p->ty[k].mem == n->cap.mem_bytes)
                break;
        if (k == p->nty) {
            if (p->nty == PL_MAX_TYPES)
                return -E2BIG;
            memset(&p->ty[k], 0, sizeof p->ty[k]);
            p->ty[k].model = model;
            p->ty[k].gpus = n->ngpus;
            p->ty[k].cpu = n->cap.cpu_milli;
            p->ty[k].mem = n->cap.mem_bytes;
            p->nty++;
        }
        p->ty[k].count++;
        nt[i] = k;
    }
    return 0;
}

/* The table's shapes that fit some type, scaled so that their GPU demand is
 * the cluster's GPUs. The number kept, or -ENOMEM. */
static int build_shapes(const la_plan_t *p, const fgd_table_t *tab, pl_shape_t **out)
{
    int ns = fgd_table_nshapes(tab), n = 0;
    pl_shape_t *sh = calloc((size_t)(ns > 0 ? ns : 1), sizeof *sh);
    double demand = 0, gpus = 0;

    if (!sh)
        return -ENOMEM;
    for (int k = 0; k < ns; k++) {
        fgd_shape_info_t m;
        pl_shape_t *s = &sh[n];
        bool any = false;

        fgd_table_shape(tab, k, &m);
        if (m.count <= 0)
            continue;
        s->cpu = m.cpu_milli;
        s->mem = m.mem_bytes;
        s->milli = m.gpus > 0 ? m.gpu_milli : 0;
        s->num = m.gpu_milli > 0 ? m.gpus : 0;
        s->nmodels = s->num ? m.nmodels : 0;
        memcpy(s->models, m.models, sizeof s->models);
        s->count = m.count;
        for (int t = 0; t < p->nty && !any; t++)
            any = fits(s, &p->ty[t]);
        if (!any)
            continue; /* no node could ever run it: not part of the plan */
        demand += m.count * s->num * s->milli;
        n++;
    }
    for (int t = 0; t < p->nty; t++)
        gpus += (double)p->ty[t].count * p->ty[t].gpus;
    for (int i = 0; i < n && demand > 0; i++)
        sh[i].count *= 1000 * gpus / demand;
    *out = sh;
    return demand > 0 ? n : 0;
}

/* ---- the LP (under GLPK's error hook) ----------------------------------------------- */

static int add_row(glp_prob *lp, int type, double bound)
{
    int r = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, r, type, type == GLP_LO ? bound : 0, type == GLP_UP ? bound : 0);
    return r;
}

static void build_rows(pl_lp_t *b)
{
    la_plan_t *p = b->p;

    for (int i = 0; i < b->nsh; i++) {
        b->sh[i].row = add_row(b->lp, GLP_UP, b->sh[i].count);
        b->sh[i].row_prop = add_row(b->lp, GLP_LO, 0);
    }
    for (int k = 0; k < p->nty; k++) {
        pl_type_t *t = &p->ty[k];
        t->row_cpu = add_row(b->lp, GLP_UP, t->count * PL_CPU(t->cpu));
        t->row_mem = add_row(b->lp, GLP_UP, t->count * PL_MEM(t->mem));
        t->row_gpu = add_row(b->lp, GLP_UP, (double)t->count * t->gpus);
        for (int i = 0; i < b->nsh; i++) {
            const pl_shape_t *s = &b->sh[i];
            if (s->num == 1 && s->milli < 1000 && fits(s, t) && !t->row_share[s->milli]) {
                t->row_share[s->milli] = add_row(b->lp, GLP_UP, 0);
                t->sizes[t->nsizes++] = s->milli;
            }
        }
        for (int r = 0; r < 2; r++)
            for (int q = 0; q < PL_CUT_K; q++) {
                double cap = r == 0 ? (double)t->cpu : (double)t->mem;
                bool any = false;
                for (int i = 0; i < b->nsh && !any; i++) {
                    double need = r == 0 ? (double)b->sh[i].cpu : b->sh[i].mem;
                    any = fits(&b->sh[i], t) && need * (q + 2) > cap;
                }
                if (any)
                    t->row_cut[r][q] = add_row(b->lp, GLP_UP, (double)(q + 1) * t->count);
            }
    }
}

/* x[m,t] for every shape and type it fits, in that order; theta last. */
static void build_cols(pl_lp_t *b)
{
    la_plan_t *p = b->p;
    int ind[8 + 2 * PL_CUT_K], *tind;
    double val[8 + 2 * PL_CUT_K], *tval;

    for (int i = 0; i < b->nsh; i++) {
        const pl_shape_t *s = &b->sh[i];
        for (int k = 0; k < p->nty; k++) {
            const pl_type_t *t = &p->ty[k];
            int n = 0, col;
            if (!fits(s, t))
                continue;
            col = glp_add_cols(b->lp, 1);
            glp_set_col_bnds(b->lp, col, GLP_LO, 0, 0);
            ind[++n] = s->row;
            val[n] = 1;
            ind[++n] = s->row_prop;
            val[n] = 1;
            ind[++n] = t->row_cpu;
            val[n] = PL_CPU(s->cpu);
            ind[++n] = t->row_mem;
            val[n] = PL_MEM(s->mem);
            if (s->num == 1 && s->milli < 1000) {
                ind[++n] = t->row_share[s->milli];
                val[n] = 1;
            } else if (s->num > 0) {
                ind[++n] = t->row_gpu;
                val[n] = s->num;
            }
            for (int r = 0; r < 2; r++)
                for (int q = 0; q < PL_CUT_K; q++) {
                    double need = r == 0 ? (double)s->cpu : s->mem;
                    double cap = r == 0 ? (double)t->cpu : (double)t->mem;
                    if (t->row_cut[r][q] && need * (q + 2) > cap) {
                        ind[++n] = t->row_cut[r][q];
                        val[n] = 1;
                    }
                }
            glp_set_mat_col(b->lp, col, n, ind, val);
        }
    }
    b->ntask_cols = glp_get_num_cols(b->lp);
    /* theta: sum_t x[m,t] - a_m theta >= 0 for every shape. GLPK's arrays
     * are 1-based; its own allocator reports failure through the hook. */
    b->col_theta = glp_add_cols(b->lp, 1);
    tind = glp_alloc(b->nsh + 1, sizeof *tind);
    tval = glp_alloc(b->nsh + 1, sizeof *tval);
    for (int i = 0; i < b->nsh; i++) {
        tind[i + 1] = b->sh[i].row_prop;
        tval[i + 1] = -b->sh[i].count;
    }
    glp_set_mat_col(b->lp, b->col_theta, b->nsh, tind, tval);
    glp_free(tind);
    glp_free(tval);
}

static void add_pattern(pl_lp_t *b, const pl_type_t *t, const int *cnt)
{
    int ind[2 + 1000], n = 0, col;
    double val[2 + 1000];

    ind[++n] = t->row_gpu;
    val[n] = 1;
    for (int i = 0; i < t->nsizes; i++)
        if (cnt[t->sizes[i]] > 0) {
            ind[++n] = t->row_share[t->sizes[i]];
            val[n] = -cnt[t->sizes[i]];
        }
    col = glp_add_cols(b->lp, 1);
    glp_set_col_bnds(b->lp, col, GLP_LO, 0, 0);
    glp_set_mat_col(b->lp, col, n, ind, val);
}

/* Best value of a GPU with 0..1000 milli free under share prices sigma (by
 * milli): best[h] for every h; cnt (may be NULL) the pattern for 1000. */
static void knapsack(const pl_type_t *t, const double *sigma, double *best, int *cnt)
{
    int from[1001];

    best[0] = 0;
    from[0] = 0;
    for (int h = 1; h <= 1000; h++) {
        best[h] = best[h - 1];
        from[h] = 0;
        for (int i = 0; i < t->nsizes; i++) {
            int v = t->sizes[i];
            if (v <= h && sigma[v] > PL_EPS && best[h - v] + sigma[v] > best[h] + 1e-12) {
                best[h] = best[h - v] + sigma[v];
                from[h] = v;
            }
        }
    }
    if (!cnt)
        return;
    memset(cnt, 0, 1001 * sizeof *cnt);
    for (int h = 1000; h > 0;) {
        if (from[h] == 0) {
            h--;
        } else {
            cnt[from[h]]++;
            h -= from[h];
        }
    }
}

/* Simplex with patterns added until none prices out. */
static void column_generation(pl_lp_t *b, const glp_smcp *parm)
{
    la_plan_t *p = b->p;
    double sigma[1000], best[1001];
    int cnt[1001];

    for (int round = 0; round < PL_MAX_ROUNDS; round++) {
        bool added = false;
        if (glp_simplex(b->lp, parm) != 0 || glp_get_status(b->lp) != GLP_OPT)
            longjmp(b->fail, 2);
        b->rounds++;
        for (int k = 0; k < p->nty; k++) {
            const pl_type_t *t = &p->ty[k];
            double rho = glp_get_row_dual(b->lp, t->row_gpu);
            if (t->nsizes == 0)
                continue;
            for (int i = 0; i < t->nsizes; i++)
                sigma[t->sizes[i]] = glp_get_row_dual(b->lp, t->row_share[t->sizes[i]]);
            knapsack(t, sigma, best, cnt);
            if (best[1000] - rho > PL_EPS * (1 + fabs(rho))) {
                add_pattern(b, t, cnt);
                added = true;
            }
        }
        if (!added)
            break;
    }
}

static void run_lp(pl_lp_t *b)
{
    la_plan_t *p = b->p;
    glp_smcp parm;
    int cnt[1001];

    glp_term_out(GLP_OFF);
    b->lp = glp_create_prob();
    glp_set_obj_dir(b->lp, GLP_MAX);
    build_rows(b);
    build_cols(b);
    for (int k = 0; k < p->nty; k++) /* start: each share size alone on a GPU */
        for (int i = 0; i < p->ty[k].nsizes; i++) {
            int v = p->ty[k].sizes[i];
            memset(cnt, 0, sizeof cnt);
            cnt[v] = 1000 / v;
            add_pattern(b, &p->ty[k], cnt);
        }
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    glp_scale_prob(b->lp, GLP_SF_AUTO);
    /* Stage 1: the largest fraction of the mix that fits in proportion. */
    glp_set_col_bnds(b->lp, b->col_theta, GLP_DB, 0, 1);
    glp_set_obj_coef(b->lp, b->col_theta, 1);
    column_generation(b, &parm);
    b->theta = glp_get_col_prim(b->lp, b->col_theta);
    /* Stage 2: keeping it, the most GPU milli. */
    if (b->theta >= 1)
        glp_set_col_bnds(b->lp, b->col_theta, GLP_FX, 1, 1);
    else
        glp_set_col_bnds(b->lp, b->col_theta, GLP_DB, b->theta * (1 - 1e-6), 1);
    glp_set_obj_coef(b->lp, b->col_theta, 0);
    for (int i = 0, col = 0; i < b->nsh; i++)
        for (int k = 0; k < p->nty; k++)
            if (fits(&b->sh[i], &p->ty[k]))
                glp_set_obj_coef(b->lp, ++col, (double)b->sh[i].num * b->sh[i].milli);
    column_generation(b, &parm);
    /* The prices. */
    for (int k = 0; k < p->nty; k++) {
        pl_type_t *t = &p->ty[k];
        double *sigma = &p->sigma[k * 1000], *V = &p->V[k * 1001], rho;
        memset(sigma, 0, 1000 * sizeof *sigma);
        for (int i = 0; i < t->nsizes; i++)
            sigma[t->sizes[i]] = glp_get_row_dual(b->lp, t->row_share[t->sizes[i]]);
        knapsack(t, sigma, V, NULL);
        rho = glp_get_row_dual(b->lp, t->row_gpu);
        if (V[1000] < rho)
            V[1000] = rho;
        t->pcpu = glp_get_row_dual(b->lp, t->row_cpu);
        t->pmem = glp_get_row_dual(b->lp, t->row_mem);
        for (int r = 0; r < 2; r++)
            for (int q = 0; q < PL_CUT_K; q++)
                t->pcut[r][q] = t->row_cut[r][q] ? glp_get_row_dual(b->lp, t->row_cut[r][q]) : 0;
    }
}

static void on_glpk_error(void *info)
{
    longjmp(((pl_lp_t *)info)->fail, 1);
}

/* ---- the plan ----------------------------------------------------------------------- */

la_plan_t *la_plan_new(void)
{
    la_plan_t *p = calloc(1, sizeof *p);

    if (p && !(p->ty = calloc(PL_MAX_TYPES, sizeof *p->ty))) {
        free(p);
        return NULL;
    }
    return p;
}

void la_plan_free(la_plan_t *p)
{
    if (!p)
        return;
    free(p->ty);
    free(p->V);
    free(p->sigma);
    free(p->node_type);
    free(p);
}

int la_plan_solve(la_plan_t *p, const arb_cluster_t *c, const fgd_table_t *tab,
                  la_plan_info_t *info)
{
    pl_lp_t b;
    int rc;

    memset(&b, 0, sizeof b);
    if (info)
        memset(info, 0, sizeof *info);
    b.p = p;
    p->ok = false;
    if ((rc = build_types(p, c)) < 0)
        goto out;
    if ((rc = b.nsh = build_shapes(p, tab, &b.sh)) <= 0)
        goto out; /* nothing asks for GPUs yet: no prices */
    free(p->V);
    free(p->sigma);
    p->V = malloc((size_t)p->nty * 1001 * sizeof *p->V);
    p->sigma = malloc((size_t)p->nty * 1000 * sizeof *p->sigma);
    if (!p->V || !p->sigma) {
        rc = -ENOMEM;
        goto out;
    }
    /* GLPK reports its errors (out of memory included) through the hook,
     * which returns here; freeing its environment then frees what it held. */
    if (setjmp(b.fail)) {
        glp_free_env();
        rc = -EDOM;
        goto out;
    }
    glp_error_hook(on_glpk_error, &b);
    run_lp(&b);
    if (info) {
        info->rows = glp_get_num_rows(b.lp);
        info->cols = glp_get_num_cols(b.lp);
        info->rounds = b.rounds;
        info->theta = b.theta;
    }
    glp_delete_prob(b.lp);
    glp_error_hook(NULL, NULL);
    p->ok = true;
    rc = 0;
out:
    if (info) {
        info->types = p->nty;
        info->shapes = p->ok ? b.nsh : 0;
    }
    free(b.sh);
    return rc;
}

bool la_plan_ok(const la_plan_t *p)
{
    return p && p->ok;
}

uint32_t la_plan_nodes(const la_plan_t *p)
{
    return p ? p->nnodes : 0;
}

/* CPU, memory and count rows of t on type k. */
static double resource_cost(const la_plan_t *p, int k, const la_plan_task_t *t)
{
    const pl_type_t *ty = &p->ty[k];
    double c = ty->pcpu * PL_CPU(t->cpu) + ty->pmem * PL_MEM(t->mem);

    for (int q = 0; q < PL_CUT_K; q++) {
        if ((double)t->cpu * (q + 2) > (double)ty->cpu)
            c += ty->pcut[0][q];
        if (t->mem * (q + 2) > (double)ty->mem)
            c += ty->pcut[1][q];
    }
    return c;
}

static bool is_share(const la_plan_task_t *t)
{
    return t->num == 1 && t->milli > 0 && t->milli < 1000;
}

double la_plan_base(const la_plan_t *p, const la_plan_task_t *t)
{
    pl_shape_t s;
    double best = INFINITY;

    if (!la_plan_ok(p))
        return 0;
    memset(&s, 0, sizeof s);
    s.cpu = t->cpu;
    s.mem = t->mem;
    s.num = t->milli > 0 ? t->num : 0;
    s.nmodels = t->nmodels < 8 ? t->nmodels : 8;
    for (int i = 0; i < s.nmodels; i++)
        s.models[i] = t->models[i];
    for (int k = 0; k < p->nty; k++) {
        const double *V = &p->V[k * 1001];
        double c;
        if (!fits(&s, &p->ty[k]))
            continue;
        c = resource_cost(p, k, t);
        if (is_share(t))
            c += p->ty[k].row_share[t->milli] ? p->sigma[k * 1000 + t->milli]
                                              : V[1000] - V[1000 - t->milli];
        else if (t->milli > 0)
            c += t->num * V[1000];
        if (c < best)
            best = c;
    }
    return isfinite(best) ? best : 0;
}

/* n's type: the one of its model, GPU count, CPU and memory, whatever n's
 * state was at the solve. By its own fields, not by its id at the solve, so
 * that alike nodes price alike (the node classes evaluate them as one) and
 * a node drained then or joined since is priced as its type. -1: none. */
static int type_of(const la_plan_t *p, const arb_node_t *n)
{
    uint32_t model = n->ngpus ? n->gpu[0].model : 0;
    int hint = n->id < p->nnodes ? p->node_type[n->id] : -1;

    for (int i = -1; i < p->nty; i++) {
        int k = i < 0 ? hint : i;
        if (k >= 0 && p->ty[k].model == model && p->ty[k].gpus == n->ngpus &&
            p->ty[k].cpu == n->cap.cpu_milli && p->ty[k].mem == n->cap.mem_bytes)
            return k;
    }
    return -1;
}

double la_plan_cost(const la_plan_t *p, const arb_node_t *n, const la_plan_task_t *t,
                    int free_before)
{
    const double *V;
    double c;
    int k;

    if (!la_plan_ok(p) || (k = type_of(p, n)) < 0)
        return 0;
    V = &p->V[k * 1001];
    c = resource_cost(p, k, t);
    if (is_share(t)) {
        int h = free_before > 1000 ? 1000 : free_before;
        if (h >= t->milli)
            c += V[h] - V[h - t->milli];
    } else if (t->milli > 0) {
        c += t->num * V[1000];
    }
    return c;
}
