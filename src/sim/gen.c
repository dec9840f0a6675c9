/*
 * gen.c: the workload generator (gen.h): openb-like task lists built from a
 * base one by the trace authors' method, one step kind per function, all
 * draws from one seeded generator. Also the task-list CSV writer and the
 * measured shares a generated list is checked by.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/sched.h"
#include "sim/gen.h"

/* ---- parsing -------------------------------------------------------------------- */

static const struct gen_kind {
    const char *name;
    sim_gen_kind_t kind;
} gen_kinds[] = {
    {"gpushare", SIM_GEN_GPUSHARE},
    {"multigpu", SIM_GEN_MULTIGPU},
    {"gpuspec", SIM_GEN_GPUSPEC},
    {"cpu", SIM_GEN_CPU},
};

#define NKINDS (sizeof gen_kinds / sizeof gen_kinds[0])

static const char *kind_name(sim_gen_kind_t k)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (gen_kinds[i].kind == k)
            return gen_kinds[i].name;
    return "?";
}

/* The artifact's spelling of a step: gpushare60, cpu050, gpuspec05. */
static void step_name(const sim_gen_step_t *st, char *buf, size_t len)
{
    double v = st->kind == SIM_GEN_CPU ? st->pct * 10 : st->pct;
    int w = st->kind == SIM_GEN_CPU ? 3 : 2;

    if (v == 0)
        snprintf(buf, len, "%s0", kind_name(st->kind)); /* the artifact's cpu0 */
    else if (fabs(v - round(v)) < 1e-9)
        snprintf(buf, len, "%s%0*d", kind_name(st->kind), w, (int)round(v));
    else
        snprintf(buf, len, "%s%g", kind_name(st->kind), v);
}

/* One point: "default" or STEP[+STEP...], STEP = KIND:PCT. */
static int parse_point(const char *s, size_t len, sim_gen_point_t *p, arb_err_t *err)
{
    char item[128];
    char *save = NULL;

    memset(p, 0, sizeof *p);
    if (len == 0 || len >= sizeof item)
        return arb_errf(err, -EINVAL,
                        "--gen: empty or overlong item; write KIND:PCT[+KIND:PCT], KIND one of "
                        "gpushare, multigpu, gpuspec, cpu (e.g. gpushare:60,gpuspec:33+cpu:20)");
    memcpy(item, s, len);
    item[len] = 0;
    if (strcmp(item, "default") == 0) {
        snprintf(p->name, sizeof p->name, "default");
        return 0;
    }
    for (char *tok = strtok_r(item, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
        char *colon = strchr(tok, ':'), *end;
        sim_gen_step_t *st;
        const struct gen_kind *k = NULL;
        double v;

        if (p->nsteps == SIM_GEN_MAX_STEPS)
            return arb_errf(err, -EINVAL, "--gen '%.*s': at most %d steps joined by '+'", (int)len,
                            s, SIM_GEN_MAX_STEPS);
        if (!colon)
            return arb_errf(err, -EINVAL,
                            "--gen '%s': write KIND:PCT (e.g. gpushare:60), KIND one of gpushare, "
                            "multigpu, gpuspec, cpu",
                            tok);
        *colon = 0;
        for (size_t i = 0; i < NKINDS && !k; i++)
            if (strcmp(tok, gen_kinds[i].name) == 0)
                k = &gen_kinds[i];
        if (!k)
            return arb_errf(err, -EINVAL,
                            "--gen: unknown kind '%s'; use gpushare, multigpu, gpuspec or cpu",
                            tok);
        v = strtod(colon + 1, &end);
        if (end == colon + 1 || *end || !(v >= 0) || v > 100 ||
            (k->kind == SIM_GEN_CPU && v >= 100))
            return arb_errf(err, -EINVAL,
                            "--gen %s:%s: give a percent, 0..100 (cpu: below 100), e.g. %s:20", tok,
                            colon + 1, tok);
        st = &p->step[p->nsteps++];
        st->kind = k->kind;
        st->pct = v;
    }
    if (p->nsteps == 0)
        return arb_errf(err, -EINVAL, "--gen '%.*s': no step; write KIND:PCT", (int)len, s);
    for (int i = 0; i < p->nsteps; i++) {
        char nm[24];
        size_t at = strlen(p->name);
        step_name(&p->step[i], nm, sizeof nm);
        snprintf(p->name + at, sizeof p->name - at, "%s%s", i ? "+" : "", nm);
    }
    return 0;
}

int sim_gen_parse(const char *s, sim_gen_point_t *v, int max, int *n, arb_err_t *err)
{
    *n = 0;
    while (*s) {
        const char *e = strchr(s, ','), *fam = SIM_GEN_FAMILY;
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int rc;

        if (len == 6 && strncmp(s, "family", 6) == 0) {
            int k = 0;
            sim_gen_point_t *sub = calloc(SIM_GEN_MAX_POINTS, sizeof *sub);
            if (!sub)
                return arb_errf(err, -ENOMEM, "--gen: out of memory");
            rc = sim_gen_parse(fam, sub, SIM_GEN_MAX_POINTS, &k, err);
            for (int i = 0; rc == 0 && i < k; i++) {
                if (*n == max) {
                    rc = arb_errf(err, -EINVAL, "--gen: at most %d workloads", max);
                    break;
                }
                v[(*n)++] = sub[i];
            }
            free(sub);
            if (rc < 0)
                return rc;
        } else {
            if (*n == max)
                return arb_errf(err, -EINVAL, "--gen: at most %d workloads", max);
            if ((rc = parse_point(s, len, &v[*n], err)) < 0)
                return rc;
            (*n)++;
        }
        s += len;
        if (*s == ',')
            s++;
    }
    if (*n == 0)
        return arb_errf(err, -EINVAL, "--gen: name at least one workload (e.g. gpushare:60)");
    return 0;
}

/* ---- task classes and shares ------------------------------------------------------ */

enum { C_CPU, C_SHARE, C_ONE, C_MULTI };

static int task_class(const sim_task_t *t)
{
    if (t->num_gpu == 0 || t->gpu_milli == 0)
        return C_CPU;
    if (t->num_gpu == 1 && t->gpu_milli < 1000)
        return C_SHARE;
    return t->num_gpu == 1 ? C_ONE : C_MULTI;
}

/* GPU milli a task asks for. */
static double demand(const sim_task_t *t)
{
    return task_class(t) == C_CPU ? 0 : (double)t->num_gpu * t->gpu_milli;
}

void sim_gen_stats(const sim_tasks_t *t, sim_gen_stats_t *s)
{
    double d = 0, ds = 0, dm = 0, dc = 0;

    memset(s, 0, sizeof *s);
    s->tasks = t->n;
    for (int i = 0; i < t->n; i++) {
        const sim_task_t *x = &t->v[i];
        int c = task_class(x);
        double m = demand(x);
        d += m;
        s->cpu_only += c == C_CPU;
        if (c == C_SHARE) {
            s->sharing++;
            ds += m;
        } else if (c == C_MULTI) {
            s->multi++;
            dm += m;
        }
        if (c != C_CPU && x->gpu_spec[0]) {
            s->constrained++;
            dc += m;
        }
    }
    s->gpus = d / 1000;
    s->share_pct = d > 0 ? 100 * ds / d : 0;
    s->multi_pct = d > 0 ? 100 * dm / d : 0;
    s->spec_pct = d > 0 ? 100 * dc / d : 0;
    s->cpu_pct = t->n > 0 ? 100.0 * s->cpu_only / t->n : 0;
}

/* ---- a growable list --------------------------------------------------------------- */

typedef struct tlist {
    sim_task_t *v;
    int n, cap;
} tlist_t;

static int tl_push(tlist_t *l, const sim_task_t *t)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 1024;
        sim_task_t *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *t;
    return 0;
}

#define M_(c) (1u << (c))

/* Indices of the tasks of l whose class is in mask (M_(C_SHARE) | ...),
 * malloc'd; *n set. */
static int *of_class(const tlist_t *l, unsigned mask, int *n)
{
    int *ix = malloc((size_t)(l->n > 0 ? l->n : 1) * sizeof *ix);

    *n = 0;
    if (!ix)
        return NULL;
    for (int i = 0; i < l->n; i++)
        if (mask & M_(task_class(&l->v[i])))
            ix[(*n)++] = i;
    return ix;
}

static void shuffle(int *v, int n, arb_rng_t *r)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)arb_rng_below(r, (uint64_t)i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* Append k draws from src[ix[0..n)] to dst: without replacement (a random
 * subset in random order) when k <= n, else with replacement. */
static int draw(tlist_t *dst, const tlist_t *src, int *ix, int n, int k, arb_rng_t *r)
{
    if (k <= n) {
        shuffle(ix, n, r);
        for (int i = 0; i < k; i++)
            if (tl_push(dst, &src->v[ix[i]]) < 0)
                return -ENOMEM;
        return 0;
    }
    for (int i = 0; i < k; i++)
        if (tl_push(dst, &src->v[ix[arb_rng_below(r, (uint64_t)n)]]) < 0)
            return -ENOMEM;
    return 0;
}

static double mean_demand(const tlist_t *l, const int *ix, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += demand(&l->v[ix[i]]);
    return n > 0 ? s / n : 0;
}

/* ---- the steps ----------------------------------------------------------------------- */

/* gpushare:P. n_s sharing tasks of mean demand s and n_gpu - n_s others of
 * mean w give P = n_s s / (n_s s + (n_gpu - n_s) w) on average. */
static int step_gpushare(tlist_t *l, double pct, arb_rng_t *r, arb_err_t *err)
{
    int ns = 0, nw = 0, nc = 0, rc = -ENOMEM, want;
    int *is = of_class(l, M_(C_SHARE), &ns), *iw = of_class(l, M_(C_ONE) | M_(C_MULTI), &nw);
    int *ic = of_class(l, M_(C_CPU), &nc);
    tlist_t out = {0};
    double x = pct / 100, s, w;

    if (!is || !iw || !ic) {
        arb_errf(err, rc, "gpushare: out of memory");
        goto out;
    }
    if ((x > 0 && ns == 0) || (x < 1 && nw == 0 && ns + nw > 0)) {
        rc = arb_errf(err, -EINVAL,
                      "gpushare:%g: the base has no %s GPU tasks to draw from; start from a "
                      "list with both kinds (the trace's default)",
                      pct, ns == 0 ? "GPU-sharing" : "whole-GPU");
        goto out;
    }
    s = mean_demand(l, is, ns);
    w = mean_demand(l, iw, nw);
    want = x >= 1 ? ns + nw : x <= 0 ? 0 : (int)lround(x * (ns + nw) * w / ((1 - x) * s + x * w));
    for (int i = 0; i < nc; i++)
        if (tl_push(&out, &l->v[ic[i]]) < 0) {
            arb_errf(err, rc, "gpushare: out of memory");
            goto out;
        }
    if ((want > 0 && draw(&out, l, is, ns, want, r) < 0) ||
        (ns + nw - want > 0 && draw(&out, l, iw, nw, ns + nw - want, r) < 0)) {
        arb_errf(err, rc, "gpushare: out of memory");
        goto out;
    }
    free(l->v);
    *l = out;
    out.v = NULL;
    rc = 0;
out:
    free(out.v);
    free(is);
    free(iw);
    free(ic);
    return rc;
}

/* multigpu:P: copies of multi-GPU tasks added until their share of the GPU
 * request reaches P (random ones removed while above it). */
static int step_multigpu(tlist_t *l, double pct, arb_rng_t *r, arb_err_t *err)
{
    int nm = 0, *im;
    double x = pct / 100, d = 0, dm = 0;

    for (int i = 0; i < l->n; i++) {
        d += demand(&l->v[i]);
        dm += task_class(&l->v[i]) == C_MULTI ? demand(&l->v[i]) : 0;
    }
    if (!(im = malloc((size_t)(l->n > 0 ? l->n : 1) * sizeof *im)))
        return arb_errf(err, -ENOMEM, "multigpu: out of memory");
    for (int i = 0; i < l->n; i++)
        if (task_class(&l->v[i]) == C_MULTI)
            im[nm++] = i;
    if (nm == 0 && x > 0) {
        free(im);
        return arb_errf(err, -EINVAL,
                        "multigpu:%g: the base has no multi-GPU tasks to copy; start from a list "
                        "with some (the trace's default has 75)",
                        pct);
    }
    if (x >= 1 && d > dm) {
        free(im);
        return arb_errf(err, -EINVAL,
                        "multigpu:%g: only multi-GPU tasks would be left, and they are added, not "
                        "swapped in; give a percent below 100",
                        pct);
    }
    if (d > 0 && dm / d > x) {
        /* Remove random multi-GPU tasks while the share is above P. */
        char *drop = calloc((size_t)l->n + 1, 1);
        int k = 0;
        if (!drop) {
            free(im);
            return arb_errf(err, -ENOMEM, "multigpu: out of memory");
        }
        shuffle(im, nm, r);
        for (int i = 0; i < nm && d > 0 && dm / d > x; i++) {
            double m = demand(&l->v[im[i]]);
            drop[im[i]] = 1;
            d -= m;
            dm -= m;
        }
        for (int i = 0; i < l->n; i++)
            if (!drop[i])
                l->v[k++] = l->v[i];
        l->n = k;
        free(drop);
        free(im);
        return 0;
    }
    int limit = 20 * l->n + 1000;
    while (d <= 0 || dm / d < x) {
        sim_task_t t = l->v[im[arb_rng_below(r, (uint64_t)nm)]];
        if (l->n >= limit) {
            free(im);
            return arb_errf(err, -EINVAL,
                            "multigpu:%g: more than %d tasks would be needed (20x the list); "
                            "give a lower percent",
                            pct, limit);
        }
        if (tl_push(l, &t) < 0) {
            free(im);
            return arb_errf(err, -ENOMEM, "multigpu: out of memory");
        }
        d += demand(&t);
        dm += demand(&t);
    }
    free(im);
    return 0;
}

/* Could a node of this list, empty, run t if t may use the GPU model m? */
static bool node_fits(const sim_node_t *n, const sim_task_t *t)
{
    return n->gpus >= t->num_gpu && n->cpu_milli >= t->cpu_milli && n->memory_mib >= t->memory_mib;
}

/* No pool: one model, drawn in proportion to the GPUs of the nodes that
 * could hold t. */
static int spec_by_nodes(const sim_nodes_t *nodes, sim_task_t *t, arb_rng_t *r, arb_err_t *err)
{
    int64_t total = 0, pick;

    if (!nodes)
        return arb_errf(err, -EINVAL,
                        "gpuspec: no gpu_spec values to draw from; give --spec-from FILE (a "
                        "task list with a gpu_spec column, e.g. the trace's gpuspec10)");
    for (int i = 0; i < nodes->n; i++)
        if (nodes->v[i].gpus > 0 && node_fits(&nodes->v[i], t))
            total += nodes->v[i].gpus;
    if (total == 0)
        return 0; /* nothing can hold it anyway: leave it free */
    pick = (int64_t)arb_rng_below(r, (uint64_t)total);
    for (int i = 0; i < nodes->n; i++) {
        const sim_node_t *n = &nodes->v[i];
        if (n->gpus <= 0 || !node_fits(n, t))
            continue;
        if (pick < n->gpus) {
            snprintf(t->gpu_spec, sizeof t->gpu_spec, "%s", n->model);
            return 0;
        }
        pick -= n->gpus;
    }
    return 0;
}

/* gpuspec:P. Specs by class from the pool; GPU tasks in a random order get
 * one until their share of the GPU request reaches P. */
static int step_gpuspec(tlist_t *l, double pct, const sim_tasks_t *pool, const sim_nodes_t *nodes,
                        arb_rng_t *r, arb_err_t *err)
{
    /* Pool entries per class (share, one, multi): pointers into pool. */
    const char **spec[3] = {NULL, NULL, NULL};
    int nspec[3] = {0, 0, 0}, *ix = NULL, ng = 0, rc = 0;
    double d = 0, dc = 0, x = pct / 100;

    for (int c = 0; c < 3 && pool; c++) {
        spec[c] = malloc((size_t)(pool->n > 0 ? pool->n : 1) * sizeof *spec[c]);
        if (!spec[c]) {
            rc = arb_errf(err, -ENOMEM, "gpuspec: out of memory");
            goto out;
        }
        for (int i = 0; i < pool->n; i++)
            if (pool->v[i].gpu_spec[0] && task_class(&pool->v[i]) == C_SHARE + c)
                spec[c][nspec[c]++] = pool->v[i].gpu_spec;
    }
    if (!(ix = malloc((size_t)(l->n > 0 ? l->n : 1) * sizeof *ix))) {
        rc = arb_errf(err, -ENOMEM, "gpuspec: out of memory");
        goto out;
    }
    for (int i = 0; i < l->n; i++) {
        l->v[i].gpu_spec[0] = 0;
        if (task_class(&l->v[i]) != C_CPU) {
            ix[ng++] = i;
            d += demand(&l->v[i]);
        }
    }
    shuffle(ix, ng, r);
    for (int k = 0; k < ng && dc < x * d - 1e-9; k++) {
        sim_task_t *t = &l->v[ix[k]];
        int c = task_class(t) - C_SHARE, from = c;
        if (nspec[from] == 0) /* no spec of this class: any observed one */
            for (from = 0; from < 3 && nspec[from] == 0; from++)
                ;
        if (from < 3)
            snprintf(t->gpu_spec, sizeof t->gpu_spec, "%s",
                     spec[from][arb_rng_below(r, (uint64_t)nspec[from])]);
        else if ((rc = spec_by_nodes(nodes, t, r, err)) < 0)
            goto out;
        dc += demand(t);
    }
out:
    for (int c = 0; c < 3; c++)
        free(spec[c]);
    free(ix);
    return rc;
}

/* cpu:P: n_c = P / (100 - P) x the GPU tasks, drawn from the CPU-only ones. */
static int step_cpu(tlist_t *l, double pct, arb_rng_t *r, arb_err_t *err)
{
    int nc = 0, ng = 0, want, rc = -ENOMEM;
    int *ic = of_class(l, M_(C_CPU), &nc);
    tlist_t out = {0};

    if (!ic)
        return arb_errf(err, rc, "cpu: out of memory");
    ng = l->n - nc;
    if (pct / (100 - pct) * ng > 20.0 * l->n + 1000) {
        free(ic);
        return arb_errf(err, -EINVAL,
                        "cpu:%g: more than %d tasks would be needed (20x the list); give a lower "
                        "percent",
                        pct, 20 * l->n + 1000);
    }
    want = (int)lround(pct / (100 - pct) * ng);
    if (want > 0 && nc == 0) {
        free(ic);
        return arb_errf(err, -EINVAL,
                        "cpu:%g: the base has no CPU-only tasks to draw from; start from a list "
                        "with some (the trace's default has 1,088)",
                        pct);
    }
    if (draw(&out, l, ic, nc, want, r) < 0)
        goto out;
    for (int i = 0; i < l->n; i++)
        if (task_class(&l->v[i]) != C_CPU && tl_push(&out, &l->v[i]) < 0)
            goto out;
    free(l->v);
    *l = out;
    out.v = NULL;
    rc = 0;
out:
    if (rc < 0)
        arb_errf(err, rc, "cpu: out of memory");
    free(out.v);
    free(ic);
    return rc;
}

/* ---- a point ---------------------------------------------------------------------- */

static void workload_name(const char *base, const char *point, char *out, size_t len)
{
    size_t bl = strlen(base);

    /* Names are at most SIM_NAME_MAX * 2 - 1: the base's part is cut at 72. */
    if (strcmp(point, "default") == 0)
        snprintf(out, len, "%s", base);
    else if (bl >= 7 && strcmp(base + bl - 7, "default") == 0)
        snprintf(out, len, "%.*s%.47s", (int)(bl - 7 > 72 ? 72 : bl - 7), base, point);
    else
        snprintf(out, len, "%.72s_%.47s", base, point);
}

int sim_gen_make(const sim_tasks_t *base, const sim_gen_point_t *p, const sim_tasks_t *pool,
                 const sim_nodes_t *nodes, uint64_t seed, sim_tasks_t *out, arb_err_t *err)
{
    tlist_t l = {0};
    arb_rng_t r;
    char stem[SIM_NAME_MAX] = "pod";
    int rc = 0;

    memset(out, 0, sizeof *out);
    arb_rng_seed(&r, seed);
    for (int i = 0; i < base->n; i++)
        if (tl_push(&l, &base->v[i]) < 0) {
            rc = arb_errf(err, -ENOMEM, "out of memory for %d tasks", base->n);
            goto out;
        }
    if (!pool || pool->n == 0)
        pool = base;
    for (int s = 0; s < p->nsteps && rc == 0; s++) {
        const sim_gen_step_t *st = &p->step[s];
        switch (st->kind) {
        case SIM_GEN_GPUSHARE:
            rc = step_gpushare(&l, st->pct, &r, err);
            break;
        case SIM_GEN_MULTIGPU:
            rc = step_multigpu(&l, st->pct, &r, err);
            break;
        case SIM_GEN_GPUSPEC: {
            /* The pool's specs, else (none constrained) the base's. */
            bool any = false;
            for (int i = 0; i < pool->n && !any; i++)
                any = pool->v[i].gpu_spec[0] != 0;
            rc = step_gpuspec(&l, st->pct, any ? pool : NULL, nodes, &r, err);
            break;
        }
        case SIM_GEN_CPU:
            rc = step_cpu(&l, st->pct, &r, err);
            break;
        }
    }
    if (rc < 0)
        goto out;
    if (l.n == 0) {
        rc = arb_errf(err, -EINVAL, "--gen %s: no task is left", p->name);
        goto out;
    }
    if (base->n > 0) {
        const char *dash = strrchr(base->v[0].name, '-');
        if (dash && dash > base->v[0].name)
            snprintf(stem, sizeof stem, "%.*s", (int)(dash - base->v[0].name), base->v[0].name);
    }
    for (int i = 0; i < l.n; i++) {
        snprintf(l.v[i].name, sizeof l.v[i].name, "%.40s-%04d", stem, i);
        l.v[i].line = i + 2;
    }
    workload_name(base->workload, p->name, out->workload, sizeof out->workload);
    out->v = l.v;
    out->n = l.n;
    l.v = NULL;
out:
    free(l.v);
    return rc;
}

/* ---- writing ---------------------------------------------------------------------- */

static void put_time(FILE *f, int64_t v)
{
    if (v >= 0)
        fprintf(f, ",%lld", (long long)v);
    else
        fputc(',', f);
}

int sim_tasks_write(FILE *f, const sim_tasks_t *t)
{
    bool extra = false;

    for (int i = 0; i < t->n && !extra; i++)
        extra = t->v[i].queue[0] || t->v[i].priority != SIM_PRIO_UNSET || t->v[i].replicas > 1 ||
                t->v[i].topo_level;
    fputs("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,"
          "scheduled_time",
          f);
    fputs(extra ? ",queue,priority,replicas,topology\n" : "\n", f);
    for (int i = 0; i < t->n; i++) {
        const sim_task_t *x = &t->v[i];
        fprintf(f, "%s,%lld,%lld,%d,%d,%s,%s", x->name, (long long)x->cpu_milli,
                (long long)x->memory_mib, x->num_gpu, x->gpu_milli, x->gpu_spec, x->qos);
        put_time(f, x->creation_s);
        put_time(f, x->deletion_s);
        put_time(f, x->scheduled_s);
        if (extra) {
            fprintf(f, ",%s,", x->queue);
            if (x->priority != SIM_PRIO_UNSET)
                fprintf(f, "%d", (int)x->priority);
            fprintf(f, ",%d,", x->replicas > 0 ? x->replicas : 1);
            if (x->topo_level)
                fprintf(f, "%s%s", x->topo_required ? "" : "prefer-",
                        arb_topo_level_name((arb_topo_level_t)x->topo_level));
        }
        fputc('\n', f);
    }
    return ferror(f) ? -EIO : 0;
}
