/*
 * bound.c: an offline upper bound on GPU allocation, for the headroom above
 * any placement policy: the most GPU milli any placement of any subset of a
 * run's arrived tasks could allocate, relaxed to a linear program that GLPK
 * solves (docs/sim.md, "The offline bound").
 *
 * The instance. Node types tau (GPU model, GPUs G, CPU, memory: the openb
 * cluster has 15), n_tau nodes each; task shapes m (CPU, memory, GPU count,
 * milli per GPU, allowed models), a_m tasks each. CPU-only tasks allocate
 * no GPU and are left out (taking them out only frees room: still a bound).
 *
 * The LP (maximise allocated GPU milli):
 *
 *   x[m,tau] >= 0  tasks of shape m on nodes of type tau (where one fits an
 *                  empty node: model allowed, G >= GPUs, CPU, memory)
 *   w[tau,p] >= 0  GPUs of type tau holding share pattern p, a multiset of
 *                  GPU shares summing to at most 1000 milli
 *
 *   sum_tau x[m,tau]                         <= a_m          each shape
 *   sum_m cpu_m x[m,tau]                     <= n_tau CPU     each type (and memory)
 *   sum_m whole GPUs x + sum_p w[tau,p]      <= n_tau G       each type
 *   sum_{m share v} x[m,tau] - sum_p p(v) w  <= 0             each type and share v
 *   sum_{m: cpu_m > CPU/(k+1)} x[m,tau]      <= k n_tau       k = 1..4 (and memory)
 *
 * Every real placement is a solution (count its tasks per shape and type,
 * and each GPU's shares as a pattern), so the optimum bounds every policy;
 * what it relaxes is that a node's CPU and memory are pooled over its type
 * (the last rows keep what no two tasks of more than half a node can share)
 * and that tasks are fractional. The GPU share packing, where most idle
 * GPU milli of a full cluster sits (holes of 190 next to 810 shares), is
 * kept exactly in the patterns.
 *
 * Patterns come by column generation: from the share rows' duals sigma_v
 * and the GPU row's rho, the best pattern for a type is an unbounded
 * knapsack (max sum p(v) sigma_v, sum p(v) v <= 1000), solved by dynamic
 * programming over 0..1000 milli; it enters when sum p(v) sigma_v > rho.
 * The value reported is the restricted LP's optimum plus, for each type,
 * its GPUs times the best pattern's positive reduced cost (0 at the end),
 * an upper bound at every round (Farley's), so a round cap cannot make it
 * invalid.
 */
#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/sim.h"

#define BD_MAX_MODELS 8
#define BD_MAX_TYPES 256
#define BD_CUT_K 4        /* per-node count rows: k = 1..BD_CUT_K */
#define BD_MAX_ROUNDS 400 /* column-generation rounds (the bound stays valid) */
#define BD_EPS 1e-6
/* LP units: cores and GiB keep the coefficients near the GPU counts'. */
#define BD_CPU(milli) ((double)(milli) / 1000)
#define BD_MEM(mib) ((double)(mib) / 1024)

typedef struct bd_type {
    const char *model;
    int gpus;
    int64_t cpu, mem;
    int count;
    int row_cpu, row_mem, row_gpu; /* GLPK rows */
    int row_share[1001];           /* by share milli; 0: no row */
    int row_cut[2][BD_CUT_K];      /* cpu, memory; 0: none */
} bd_type_t;

typedef struct bd_shape {
    int64_t cpu, mem;
    int num, milli;
    int nmodels;
    char models[BD_MAX_MODELS][SIM_MODEL_MAX];
    int count;
    int row;
} bd_shape_t;

typedef struct bd {
    bd_type_t *ty;
    int nty;
    bd_shape_t *sh;
    int nsh, capsh;
    int shares[1001]; /* share milli values present (1 = present) */
    glp_prob *lp;
    int patterns;
} bd_t;

/* ---- the instance ------------------------------------------------------------ */

static int add_type(bd_t *b, const sim_node_t *n, arb_err_t *err)
{
    for (int i = 0; i < b->nty; i++) {
        bd_type_t *t = &b->ty[i];
        if (t->gpus == n->gpus && t->cpu == n->cpu_milli && t->mem == n->memory_mib &&
            strcmp(t->model, n->model) == 0) {
            t->count++;
            return 0;
        }
    }
    if (b->nty == BD_MAX_TYPES)
        return arb_errf(err, -EINVAL,
                        "bound: more than %d node types (GPU model, GPUs, CPU, memory); the LP "
                        "groups nodes by type",
                        BD_MAX_TYPES);
    memset(&b->ty[b->nty], 0, sizeof b->ty[b->nty]);
    b->ty[b->nty].model = n->model;
    b->ty[b->nty].gpus = n->gpus;
    b->ty[b->nty].cpu = n->cpu_milli;
    b->ty[b->nty].mem = n->memory_mib;
    b->ty[b->nty].count = 1;
    b->nty++;
    return 0;
}

/* t's allowed models (gpu_spec split at '|', empty entries skipped). */
static int spec_models(const sim_task_t *t, char (*m)[SIM_MODEL_MAX])
{
    int n = 0;
    for (const char *p = t->gpu_spec; *p;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && len < SIM_MODEL_MAX && n < BD_MAX_MODELS) {
            memcpy(m[n], p, len);
            m[n++][len] = 0;
        }
        p += len + (e ? 1 : 0);
    }
    return n;
}

static int add_shape(bd_t *b, const sim_task_t *t)
{
    bd_shape_t s;

    memset(&s, 0, sizeof s);
    s.cpu = t->cpu_milli;
    s.mem = t->memory_mib;
    s.num = t->gpu_milli >= 1000 ? t->num_gpu : 1;
    s.milli = t->gpu_milli >= 1000 ? 1000 : t->gpu_milli;
    s.nmodels = spec_models(t, s.models);
    for (int i = 0; i < b->nsh; i++) {
        bd_shape_t *x = &b->sh[i];
        if (x->cpu == s.cpu && x->mem == s.mem && x->num == s.num && x->milli == s.milli &&
            x->nmodels == s.nmodels && memcmp(x->models, s.models, sizeof s.models) == 0) {
            x->count++;
            return 0;
        }
    }
    if (b->nsh == b->capsh) {
        int cap = b->capsh ? b->capsh * 2 : 256;
        bd_shape_t *v = realloc(b->sh, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        b->sh = v;
        b->capsh = cap;
    }
    s.count = 1;
    b->sh[b->nsh++] = s;
    if (s.milli < 1000)
        b->shares[s.milli] = 1;
    return 0;
}

static bool fits(const bd_shape_t *s, const bd_type_t *t)
{
    bool model = s->nmodels == 0;
    for (int i = 0; i < s->nmodels && !model; i++)
        model = strcmp(s->models[i], t->model) == 0;
    return model && t->gpus >= s->num && t->cpu >= s->cpu && t->mem >= s->mem;
}

/* ---- the LP ------------------------------------------------------------------- */

static int add_row(glp_prob *lp, double ub)
{
    int r = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, r, GLP_UP, 0, ub);
    return r;
}

static void build_rows(bd_t *b)
{
    for (int i = 0; i < b->nsh; i++)
        b->sh[i].row = add_row(b->lp, b->sh[i].count);
    for (int k = 0; k < b->nty; k++) {
        bd_type_t *t = &b->ty[k];
        t->row_cpu = add_row(b->lp, (double)t->count * BD_CPU(t->cpu));
        t->row_mem = add_row(b->lp, (double)t->count * BD_MEM(t->mem));
        t->row_gpu = add_row(b->lp, (double)t->count * t->gpus);
        for (int i = 0; i < b->nsh; i++) {
            const bd_shape_t *s = &b->sh[i];
            if (s->milli < 1000 && fits(s, t) && !t->row_share[s->milli])
                t->row_share[s->milli] = add_row(b->lp, 0);
        }
        /* At most k tasks per node that each need more than 1/(k+1) of it. */
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < BD_CUT_K; c++) {
                double cap = r == 0 ? (double)t->cpu : (double)t->mem;
                bool any = false;
                for (int i = 0; i < b->nsh && !any; i++) {
                    const bd_shape_t *s = &b->sh[i];
                    double need = r == 0 ? (double)s->cpu : (double)s->mem;
                    any = fits(s, t) && need * (c + 2) > cap;
                }
                if (any)
                    t->row_cut[r][c] = add_row(b->lp, (double)(c + 1) * t->count);
            }
    }
}

static void build_task_cols(bd_t *b)
{
    int ind[8 + 2 * BD_CUT_K];
    double val[8 + 2 * BD_CUT_K];

    for (int i = 0; i < b->nsh; i++) {
        const bd_shape_t *s = &b->sh[i];
        for (int k = 0; k < b->nty; k++) {
            const bd_type_t *t = &b->ty[k];
            int n = 0, col;
            if (!fits(s, t))
                continue;
            col = glp_add_cols(b->lp, 1);
            glp_set_col_bnds(b->lp, col, GLP_LO, 0, 0);
            glp_set_obj_coef(b->lp, col, (double)s->num * s->milli);
            ind[++n] = s->row;
            val[n] = 1;
            ind[++n] = t->row_cpu;
            val[n] = BD_CPU(s->cpu);
            ind[++n] = t->row_mem;
            val[n] = BD_MEM(s->mem);
            if (s->milli < 1000) {
                ind[++n] = t->row_share[s->milli];
                val[n] = 1;
            } else {
                ind[++n] = t->row_gpu;
                val[n] = s->num;
            }
            for (int r = 0; r < 2; r++)
                for (int c = 0; c < BD_CUT_K; c++) {
                    double need = r == 0 ? (double)s->cpu : (double)s->mem;
                    double cap = r == 0 ? (double)t->cpu : (double)t->mem;
                    if (t->row_cut[r][c] && need * (c + 2) > cap) {
                        ind[++n] = t->row_cut[r][c];
                        val[n] = 1;
                    }
                }
            glp_set_mat_col(b->lp, col, n, ind, val);
        }
    }
}

/* A pattern column for type t: cnt[v] shares of milli v on one GPU. */
static void add_pattern(bd_t *b, const bd_type_t *t, const int *cnt)
{
    int ind[1 + 1001 + 1], n = 0, col;
    double val[1 + 1001 + 1];

    ind[++n] = t->row_gpu;
    val[n] = 1;
    for (int v = 1; v < 1000; v++)
        if (cnt[v] > 0 && t->row_share[v]) {
            ind[++n] = t->row_share[v];
            val[n] = -cnt[v];
        }
    col = glp_add_cols(b->lp, 1);
    glp_set_col_bnds(b->lp, col, GLP_LO, 0, 0);
    glp_set_obj_coef(b->lp, col, 0);
    glp_set_mat_col(b->lp, col, n, ind, val);
    b->patterns++;
}

/* Best pattern for type t under share duals: max sum cnt[v] sigma(v) with
 * sum cnt[v] v <= 1000 (unbounded knapsack). Fills cnt, returns the value. */
static double price(const bd_t *b, const bd_type_t *t, int *cnt)
{
    static const int cap = 1000;
    double best[1001], sigma[1001];
    int from[1001];

    for (int v = 0; v <= cap; v++) {
        sigma[v] = v < 1000 && t->row_share[v] ? glp_get_row_dual(b->lp, t->row_share[v]) : 0;
        cnt[v] = 0;
    }
    best[0] = 0;
    from[0] = 0;
    for (int c = 1; c <= cap; c++) {
        best[c] = best[c - 1];
        from[c] = 0; /* 0: one milli left idle */
        for (int v = 1; v <= c && v < 1000; v++)
            if (sigma[v] > BD_EPS && best[c - v] + sigma[v] > best[c] + 1e-12) {
                best[c] = best[c - v] + sigma[v];
                from[c] = v;
            }
    }
    for (int c = cap; c > 0;) {
        if (from[c] == 0) {
            c--;
        } else {
            cnt[from[c]]++;
            c -= from[c];
        }
    }
    return best[cap];
}

static int solve(bd_t *b, sim_bound_info_t *info, arb_err_t *err)
{
    glp_smcp parm;
    int cnt[1001], rounds = 0, rc;
    double ub = 0;

    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = GLP_OFF;
    /* Start: for each type and share, the GPU full of that share alone. */
    for (int k = 0; k < b->nty; k++)
        for (int v = 1; v < 1000; v++)
            if (b->ty[k].row_share[v]) {
                memset(cnt, 0, sizeof cnt);
                cnt[v] = 1000 / v;
                add_pattern(b, &b->ty[k], cnt);
            }
    glp_scale_prob(b->lp, GLP_SF_AUTO);
    for (;;) {
        double gap = 0, z;
        bool added = false;

        if ((rc = glp_simplex(b->lp, &parm)) != 0 || glp_get_status(b->lp) != GLP_OPT)
            return arb_errf(err, -EINVAL,
                            "bound: GLPK's simplex did not reach an optimum (code %d, status %d)",
                            rc, glp_get_status(b->lp));
        z = glp_get_obj_val(b->lp);
        rounds++;
        for (int k = 0; k < b->nty; k++) {
            const bd_type_t *t = &b->ty[k];
            double rho = glp_get_row_dual(b->lp, t->row_gpu), v = price(b, t, cnt);
            if (v - rho > BD_EPS * (1 + fabs(rho))) {
                gap += (v - rho) * (double)t->count * t->gpus;
                if (rounds < BD_MAX_ROUNDS) {
                    add_pattern(b, t, cnt);
                    added = true;
                }
            }
        }
        ub = z + gap;
        if (!added)
            break;
    }
    info->bound_milli = ub;
    info->rounds = rounds;
    info->patterns = b->patterns;
    info->rows = glp_get_num_rows(b->lp);
    info->cols = glp_get_num_cols(b->lp);
    return 0;
}

int sim_bound(const sim_nodes_t *nodes, const sim_task_t *const *t, int n, sim_bound_info_t *info,
              arb_err_t *err)
{
    bd_t b;
    int rc = 0;

    memset(&b, 0, sizeof b);
    memset(info, 0, sizeof *info);
    if (!(b.ty = calloc(BD_MAX_TYPES, sizeof *b.ty))) {
        rc = arb_errf(err, -ENOMEM, "bound: out of memory");
        goto out;
    }
    for (int i = 0; i < nodes->n && rc == 0; i++)
        if (nodes->v[i].gpus > 0)
            rc = add_type(&b, &nodes->v[i], err);
    for (int i = 0; i < n && rc == 0; i++)
        if (sim_task_gpu(t[i]) > 0) {
            info->demand_milli += (double)sim_task_gpu(t[i]);
            if (add_shape(&b, t[i]) < 0)
                rc = arb_errf(err, -ENOMEM, "bound: out of memory");
        }
    if (rc < 0)
        goto out;
    info->shapes = b.nsh;
    info->types = b.nty;
    if (b.nsh == 0 || b.nty == 0)
        goto out; /* nothing to place, or nowhere: 0 */
    glp_term_out(GLP_OFF);
    if (!(b.lp = glp_create_prob())) {
        rc = arb_errf(err, -ENOMEM, "bound: out of memory");
        goto out;
    }
    glp_set_obj_dir(b.lp, GLP_MAX);
    build_rows(&b);
    build_task_cols(&b);
    rc = solve(&b, info, err);
out:
    if (b.lp)
        glp_delete_prob(b.lp);
    free(b.ty);
    free(b.sh);
    return rc;
}

/* ---- as a run ----------------------------------------------------------------- */

int sim_run_bound(const sim_nodes_t *nodes, const sim_tasks_t *tasks, const sim_opts_t *o,
                  sim_result_t *res, arb_err_t *err)
{
    double t0 = sim_clock_s(CLOCK_MONOTONIC), tp;
    const sim_task_t **pre = NULL;
    sim_bound_info_t info;
    arb_rng_t rng;
    int *ev = NULL, nev = 0, npre = 0, rc;
    int64_t cap, arrived = 0;

    memset(res, 0, sizeof *res);
    snprintf(res->workload, sizeof res->workload, "%s", tasks->workload);
    snprintf(res->policy, sizeof res->policy, "%s", SIM_BOUND_POLICY);
    res->seed = o->seed;
    res->inflate = o->inflate;
    for (int k = 0; k < SIM_NPCT; k++)
        res->alloc_pct[k] = res->frag_pct[k] = res->frag_ratio_pct[k] = NAN;
    for (int i = 0; i < nodes->n; i++)
        res->total_gpus += nodes->v[i].gpus;
    if (res->total_gpus == 0) {
        rc = arb_errf(err, -EINVAL, "the node list has no GPUs; nothing to bound");
        goto out;
    }
    cap = (int64_t)res->total_gpus * 1000;
    arb_rng_seed(&rng, o->seed);
    if ((rc = sim_arrival_order(tasks, cap, o->inflate, &rng, &ev, &nev)) < 0 ||
        !(pre = malloc((size_t)(nev > 0 ? nev : 1) * sizeof *pre))) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    /* The arrivals whose sample falls at 100% or before (arrived percent
     * rounded to a whole number, as the metric's): a superset of what any
     * policy has placed at every sample of alloc@100. */
    for (int e = 0; e < nev; e++) {
        int64_t next = arrived + sim_task_gpu(&tasks->v[ev[e]]);
        if (nearbyint((double)next / (double)res->total_gpus / 10) > 100)
            break;
        arrived = next;
        pre[npre++] = &tasks->v[ev[e]];
    }
    tp = sim_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if ((rc = sim_bound(nodes, pre, npre, &info, err)) < 0)
        goto out;
    res->place_s = sim_clock_s(CLOCK_PROCESS_CPUTIME_ID) - tp;
    res->tasks_arrived = npre;
    res->alloc_pct[100] = 100 * info.bound_milli / (double)cap;
out:
    free(ev);
    free(pre);
    res->run_s = sim_clock_s(CLOCK_MONOTONIC) - t0;
    res->rc = rc;
    if (rc < 0)
        snprintf(res->err, sizeof res->err, "%.*s", (int)sizeof res->err - 1,
                 err ? err->msg : strerror(-rc));
    return rc;
}
