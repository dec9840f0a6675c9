/*
 * sim.c: one simulator run (the FGD artifact's method, see sim.h) and the
 * discretisation of its metrics. Placement is the scheduler core's: this
 * file builds a cluster and one job per task, submits them, calls
 * arb_sched_place, and measures.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arbiter/sched.h"
#include "core/paper.h"
#include "sim/sim.h"

#define SIM_MAX_MODELS 8
#define NBUCKET (SIM_NPCT + 1) /* 0..131: 131 only feeds 130's fallback window */

static const struct {
    const char *policy, *paper;
} paper_names[] = {
    {"random", "01-Random"},
    {"dotprod", "02-DotProd"},
    {"gpu-clustering", "03-GpuClustering"},
    {"gpu-packing", "04-GpuPacking"},
    {"bestfit", "05-BestFit"},
    {"fgd", "06-FGD"},
};

const char *sim_paper_policy(const char *policy)
{
    for (size_t i = 0; i < sizeof paper_names / sizeof paper_names[0]; i++)
        if (strcmp(paper_names[i].policy, policy) == 0)
            return paper_names[i].paper;
    return NULL;
}

/* Wall clock (run_s), and this process's CPU time (place_s: robust to other
 * load on the machine, and what "one core" means). */
double sim_clock_s(int id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t sim_task_gpu(const sim_task_t *t)
{
    return t->num_gpu > 0 ? (int64_t)t->num_gpu * t->gpu_milli : 0;
}

/* The per-GPU milli the artifact's inflation compares (its MilliGpu). */
static int64_t task_gpu_each(const sim_task_t *t)
{
    return t->num_gpu > 0 ? t->gpu_milli : 0;
}

/* Python's round(x, 2), near enough: the artifact rounds each sample. */
static double round2(double x)
{
    return nearbyint(x * 100) / 100;
}

/* ---- the cluster and the jobs ------------------------------------------------ */

int sim_build_cluster(arb_cluster_t *c, const sim_nodes_t *nodes, const int *order, arb_err_t *err)
{
    int rc = 0;

    for (int i = 0; i < nodes->n && rc == 0; i++) {
        const sim_node_t *sn = &nodes->v[order[i]];
        arb_node_t *n;
        if ((rc = arb_cluster_add_node(c, sn->name, &n, err)) < 0) {
            arb_err_prefix(err, "node list line %d: ", sn->line);
            break;
        }
        n->cap.cpu_milli = sn->cpu_milli;
        n->cap.mem_bytes = sn->memory_mib * 1048576;
        arb_node_touch(c, n);
        for (int g = 0; g < sn->gpus && rc == 0; g++)
            rc = arb_node_add_gpu(c, n, sn->model, 0, -1, -1, g < 16 ? sn->nvlink[g] : -1, err);
        if (rc == 0 && sn->rack[0])
            rc = arb_node_set_label(c, n, "rack", sn->rack);
        if (rc == 0 && sn->block[0])
            rc = arb_node_set_label(c, n, "block", sn->block);
        if (rc < 0 && err && !err->msg[0])
            arb_errf(err, rc, "out of memory building node '%s'", sn->name);
    }
    return rc;
}

static int node_by_name(const void *a, const void *b, void *arg)
{
    const sim_nodes_t *t = arg;
    int x = *(const int *)a, y = *(const int *)b, c = strcmp(t->v[x].name, t->v[y].name);
    return c ? c : (x > y) - (x < y);
}

/*
 * The artifact renames the name-sorted nodes with a seeded random prefix
 * before creating them, so the order in which its scheduler meets nodes,
 * and so which of equally scored nodes it takes, is a per-run random
 * permutation. Node ids here follow the same kind of permutation; the
 * paper's profiles break ties by the lowest node id.
 */
int *sim_node_order(const sim_nodes_t *nodes, arb_rng_t *rng)
{
    int *v = malloc((size_t)nodes->n * sizeof *v);
    if (!v)
        return NULL;
    for (int i = 0; i < nodes->n; i++)
        v[i] = i;
    qsort_r(v, (size_t)nodes->n, sizeof *v, node_by_name, (void *)nodes);
    for (int i = nodes->n - 1; i > 0; i--) {
        int k = (int)arb_rng_below(rng, (uint64_t)i + 1), x = v[i];
        v[i] = v[k];
        v[k] = x;
    }
    return v;
}

/* Fill g (and the model ids) with task t's request; its name is the
 * caller's to set (a job's group: "task"). */
static int task_group(arb_cluster_t *c, const sim_task_t *t, arb_tgroup_t *g, uint32_t *models,
                      int *nmodels)
{
    memset(g, 0, sizeof *g);
    g->replicas = 1;
    g->req.cpu_milli = t->cpu_milli;
    g->req.mem_bytes = t->memory_mib * 1048576;
    *nmodels = 0;
    if (t->num_gpu <= 0 || t->gpu_milli <= 0)
        return 0; /* no GPU (the artifact ignores a 0 share) */
    if (t->gpu_milli >= 1000)
        g->gpus = t->num_gpu;
    else
        g->gpu_share = t->gpu_milli;
    /* gpu_spec: models separated by '|', empty entries skipped. */
    for (const char *p = t->gpu_spec; *p;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && *nmodels < SIM_MAX_MODELS) {
            char name[SIM_SPEC_MAX];
            memcpy(name, p, len);
            name[len] = 0;
            if (!(models[(*nmodels)++] = arb_intern(&c->strs, name)))
                return -ENOMEM;
        }
        p += len + (e ? 1 : 0);
    }
    return 0;
}

arb_job_t *sim_make_job(arb_cluster_t *c, const sim_task_t *t, int replicas, arb_topo_level_t level,
                        bool required, arb_err_t *err)
{
    arb_job_t *j = arb_job_new(t->name, 1);
    uint32_t models[SIM_MAX_MODELS];
    int nm;

    if (!j) {
        arb_errf(err, -ENOMEM, "out of memory");
        return NULL;
    }
    if (task_group(c, t, &j->groups[0], models, &nm) < 0 ||
        arb_tgroup_set_name(&j->groups[0], "task") < 0)
        goto fail;
    j->groups[0].replicas = replicas > 0 ? replicas : 1;
    j->groups[0].topo.level = level;
    j->groups[0].topo.required = required;
    if (nm > 0) {
        if (!(j->models = malloc((size_t)nm * sizeof *j->models)))
            goto fail;
        memcpy(j->models, models, (size_t)nm * sizeof *models);
        j->nmodels = nm;
    }
    if (arb_job_finalize(j, err) < 0) {
        arb_err_prefix(err, "task list line %d: ", t->line);
        arb_job_free(j);
        return NULL;
    }
    return j;
fail:
    arb_errf(err, -ENOMEM, "out of memory");
    arb_job_free(j);
    return NULL;
}

/* The artifact's typical shapes: every task of the unshuffled trace. */
static int metric_table(arb_cluster_t *c, const sim_tasks_t *tasks, fgd_table_t **out)
{
    fgd_table_t *t = fgd_table_new(&c->strs);
    int rc = t ? 0 : -ENOMEM;

    for (int i = 0; i < tasks->n && rc == 0; i++) {
        arb_job_t j;
        arb_tgroup_t g;
        uint32_t models[SIM_MAX_MODELS];
        memset(&j, 0, sizeof j);
        if ((rc = task_group(c, &tasks->v[i], &g, models, &j.nmodels)) < 0)
            break;
        j.ngroups = 1;
        j.groups = &g;
        j.models = models;
        rc = fgd_table_count(t, &j);
    }
    if (rc == 0)
        rc = fgd_table_build(t);
    if (rc < 0) {
        fgd_table_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* ---- the arrival order ---------------------------------------------------------- */

static int by_name(const void *a, const void *b, void *arg)
{
    const sim_tasks_t *t = arg;
    int x = *(const int *)a, y = *(const int *)b, c = strcmp(t->v[x].name, t->v[y].name);
    return c ? c : (x > y) - (x < y);
}

int sim_arrival_order(const sim_tasks_t *tasks, int64_t cap_milli, double inflate, arb_rng_t *rng,
                      int **ev, int *nev)
{
    int n = tasks->n, len = n, cap = n + n / 2 + 16;
    int *named = malloc((size_t)n * sizeof *named), *v = malloc((size_t)cap * sizeof *v);
    int64_t demand = 0;

    if (!named || !v) {
        free(named);
        free(v);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        named[i] = i;
        demand += sim_task_gpu(&tasks->v[i]);
    }
    qsort_r(named, (size_t)n, sizeof *named, by_name, (void *)tasks);
    memcpy(v, named, (size_t)n * sizeof *v);
    for (int i = n - 1; i > 0; i--) { /* Fisher-Yates, as Go's rand.Shuffle */
        int k = (int)arb_rng_below(rng, (uint64_t)i + 1), x = v[i];
        v[i] = v[k];
        v[k] = x;
    }
    if (inflate > 0) {
        double target = inflate * (double)cap_milli;
        if ((double)demand < target) {
            for (;;) {
                int k = named[arb_rng_below(rng, (uint64_t)n)];
                if ((double)(demand + task_gpu_each(&tasks->v[k])) > target)
                    break;
                demand += sim_task_gpu(&tasks->v[k]);
                if (len == cap) {
                    int *p = realloc(v, (size_t)(cap *= 2) * sizeof *v);
                    if (!p) {
                        free(named);
                        free(v);
                        return -ENOMEM;
                    }
                    v = p;
                }
                v[len++] = k;
            }
        } else {
            while ((double)demand > target && len > 0) {
                int i = (int)arb_rng_below(rng, (uint64_t)len);
                demand -= sim_task_gpu(&tasks->v[v[i]]);
                memmove(v + i, v + i + 1, (size_t)(len - i - 1) * sizeof *v);
                len--;
            }
        }
    }
    free(named);
    *ev = v;
    *nev = len;
    return 0;
}

/* ---- metrics ------------------------------------------------------------------- */

typedef struct sim_buckets {
    int total_gpus;
    int n[NBUCKET];
    double alloc[NBUCKET], frag[NBUCKET], ratio[NBUCKET];
    int nratio[NBUCKET];
} sim_buckets_t;

/* One sample after an arrival (or before the first). */
static void sample(sim_buckets_t *b, int64_t arrived, int64_t used, double frag)
{
    double tg = b->total_gpus, a = nearbyint((double)arrived / tg / 10);
    int64_t idle = (int64_t)b->total_gpus * 1000 - used;
    int k;

    if (!(a >= 0 && a < NBUCKET))
        return;
    k = (int)a;
    b->n[k]++;
    b->alloc[k] += round2((double)used / tg / 10);
    b->frag[k] += frag;
    if (idle > 0) {
        b->ratio[k] += 100 * frag / (double)idle;
        b->nratio[k]++;
    }
}

/* The artifact's discretisation: the mean of the samples whose arrived
 * percent rounds to k, else of those within k-1..k+1, else none. */
static void discretise(const sim_buckets_t *b, sim_result_t *r)
{
    for (int k = 0; k < SIM_NPCT; k++) {
        int lo = k, hi = k, n = 0, nr = 0;
        double al = 0, fr = 0, ra = 0;
        if (b->n[k] == 0) {
            lo = k > 0 ? k - 1 : 0;
            hi = k + 1;
        }
        for (int i = lo; i <= hi; i++) {
            n += b->n[i];
            al += b->alloc[i];
            fr += b->frag[i];
            ra += b->ratio[i];
            nr += b->nratio[i];
        }
        r->alloc_pct[k] = n ? round2(al / n) : NAN;
        r->frag_pct[k] = n ? round2(100 * (fr / n) / 1000 / b->total_gpus) : NAN;
        r->frag_ratio_pct[k] = nr ? ra / nr : NAN;
    }
}

/* ---- one run ---------------------------------------------------------------------- */

int sim_run(const sim_nodes_t *nodes, const sim_tasks_t *tasks, const sim_opts_t *o,
            sim_result_t *res, arb_err_t *err)
{
    double t0 = sim_clock_s(CLOCK_MONOTONIC), tp = 0;
    arb_cluster_t c;
    arb_sched_conf_t conf;
    arb_sched_t *s = NULL;
    arb_rng_t rng;
    arb_ctx_t ctx = {.now_ns = 0, .rng = &rng};
    fgd_table_t *tab = NULL;
    sim_buckets_t *b = calloc(1, sizeof *b);
    double *nf = NULL, frag = 0;
    arb_job_t **jobs = NULL;
    int *ev = NULL, *norder = NULL, nev = 0, rc;
    int64_t arrived = 0, used = 0;

    if (strcmp(o->policy, SIM_BOUND_POLICY) == 0) {
        free(b);
        return sim_run_bound(nodes, tasks, o, res, err);
    }
    memset(res, 0, sizeof *res);
    snprintf(res->workload, sizeof res->workload, "%s", tasks->workload);
    snprintf(res->policy, sizeof res->policy, "%s", o->policy);
    res->seed = o->seed;
    res->inflate = o->inflate;
    arb_cluster_init(&c);
    memset(&conf, 0, sizeof conf);
    arb_rng_seed(&rng, o->seed);

    if (!b) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = arb_profile_lookup(o->policy, &conf.profile, err)) < 0)
        goto out;
    for (int i = 0; i < nodes->n; i++)
        res->total_gpus += nodes->v[i].gpus;
    if (res->total_gpus == 0) {
        rc = arb_errf(err, -EINVAL, "the node list has no GPUs; nothing to measure");
        goto out;
    }
    b->total_gpus = res->total_gpus;
    /* The artifact's order of draws: tasks shuffled, inflated, then nodes. */
    if ((rc = sim_arrival_order(tasks, (int64_t)res->total_gpus * 1000, o->inflate, &rng, &ev,
                                &nev)) < 0 ||
        !(norder = sim_node_order(nodes, &rng))) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = sim_build_cluster(&c, nodes, norder, err)) < 0)
        goto out;
    if ((rc = metric_table(&c, tasks, &tab)) < 0) {
        arb_errf(err, rc, "out of memory");
        goto out;
    }
    if (!(s = arb_sched_new(&c, &conf, err))) {
        rc = -EINVAL;
        goto out;
    }
    nf = calloc(c.nnodes, sizeof *nf);
    jobs = calloc((size_t)nev, sizeof *jobs);
    if (!nf || !jobs) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < c.nnodes; i++)
        frag += nf[i] = fgd_node_frag(tab, &c.nodes[i]);
    sample(b, 0, 0, frag);

    /* Arrivals. By default all are submitted first (see sim.h). */
    for (int e = 0; e < nev && !o->online; e++) {
        if (!(jobs[e] = sim_make_job(&c, &tasks->v[ev[e]], 1, ARB_TOPO_ANY, false, err))) {
            rc = -EINVAL;
            goto out;
        }
        if ((rc = arb_sched_submit(s, jobs[e], &ctx, err)) < 0) {
            arb_job_free(jobs[e]);
            jobs[e] = NULL;
            goto out;
        }
    }
    tp = sim_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int e = 0; e < nev; e++) {
        const sim_task_t *t = &tasks->v[ev[e]];
        arb_job_t *j = jobs[e];

        ctx.now_ns = (int64_t)e * 1000000000;
        if (o->online) {
            if (!(j = jobs[e] = sim_make_job(&c, t, 1, ARB_TOPO_ANY, false, err))) {
                rc = -EINVAL;
                goto out;
            }
            if ((rc = arb_sched_submit(s, j, &ctx, err)) < 0) {
                arb_job_free(j);
                jobs[e] = NULL;
                goto out;
            }
        }
        arrived += sim_task_gpu(t);
        rc = arb_sched_place(s, j, &ctx);
        if (rc == 0) {
            for (int k = 0; k < j->nalloc; k++) {
                const arb_task_alloc_t *a = &j->alloc[k];
                double f = fgd_node_frag(tab, &c.nodes[a->node]);
                used += (int64_t)__builtin_popcount(a->gpu_mask) * a->gpu_milli;
                frag += f - nf[a->node];
                nf[a->node] = f;
            }
        } else if (rc == -ENOSPC) {
            res->tasks_failed++;
            arb_sched_finish(s, j, ARB_JOB_CANCELLED, NULL);
        } else {
            rc = arb_errf(err, rc, "placing task '%s' (line %d) failed: %s", t->name, t->line,
                          strerror(-rc));
            goto out;
        }
        res->tasks_arrived++;
        sample(b, arrived, used, frag);
    }
    tp = sim_clock_s(CLOCK_PROCESS_CPUTIME_ID) - tp;
    discretise(b, res);
    rc = 0;
out:
    res->place_s = rc == 0 ? tp : 0;
    if (s)
        arb_sched_free(s); /* frees the submitted jobs */
    arb_cluster_free(&c);
    fgd_table_free(tab);
    free(jobs);
    free(ev);
    free(norder);
    free(nf);
    free(b);
    res->run_s = sim_clock_s(CLOCK_MONOTONIC) - t0;
    res->rc = rc;
    if (rc < 0)
        snprintf(res->err, sizeof res->err, "%.*s", (int)sizeof res->err - 1,
                 err ? err->msg : strerror(-rc));
    return rc;
}
