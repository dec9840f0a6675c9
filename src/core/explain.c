/*
 * explain.c: why is my job pending? The answer is what the next cycle
 * does with it: the cycle runs as a trial up to this job (cycle.c,
 * sched_cycle_try) and says whether it is placed, and if not, why: its
 * queue's quota, a job ahead that holds it back (fifo order, a starving
 * job's reserved nodes, a backfill reservation), its victims, or that it
 * does not fit. For a job that does not fit it counts the nodes each filter
 * rejected (stale nodes left out and named), says how many tasks of a gang
 * fit and where, whether it could ever fit the idle cluster (and if not,
 * the resource and the numbers), whether free capacity is fragmented,
 * what the largest request of its shape that would start now is, and what
 * would make it fit (freeing GPUs on the nearest node, preemption, quota
 * reclaim). Text and JSON come from the same struct.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

static const struct {
    const char *name, *text;
} reasons[ARB_R_COUNT] = {
    [ARB_R_OK] = {"ok", "available"},
    [ARB_R_NOT_READY] = {"not-ready", "node(s) not ready"},
    [ARB_R_STALE] = {"stale-report", "node(s) with a stale report"},
    [ARB_R_DRAINING] = {"draining", "node(s) draining"},
    [ARB_R_TAINT] = {"untolerated-taint", "node(s) with a taint the job does not tolerate"},
    [ARB_R_SELECTOR] = {"node-selector", "node(s) not matching the node selector"},
    [ARB_R_AFFINITY] = {"node-affinity", "node(s) not matching the required node affinity"},
    [ARB_R_GPU_MODEL] = {"gpu-model", "node(s) without an allowed GPU model"},
    [ARB_R_THERMAL] = {"thermal", "node(s) with GPUs over the thermal limit"},
    [ARB_R_GPUS] = {"insufficient-gpus", "insufficient GPUs"},
    [ARB_R_GPU_SHARE] = {"insufficient-gpu-share", "no GPU with a large enough free share"},
    [ARB_R_GPU_MEM] = {"insufficient-gpu-memory", "insufficient GPU memory"},
    [ARB_R_NVLINK] = {"insufficient-gpus-nvlink", "insufficient GPUs in one NVLink domain"},
    [ARB_R_CPU] = {"insufficient-cpu", "insufficient CPU"},
    [ARB_R_MEM] = {"insufficient-memory", "insufficient memory"},
    [ARB_R_EXT] = {"insufficient-extended", "insufficient extended resources"},
    [ARB_R_TOPOLOGY] = {"topology", "node(s) outside a domain that holds the whole group"},
    [ARB_R_EXCLUSIVE] = {"exclusive", "node(s) not shared: an exclusive job's, or (for an "
                                      "exclusive job) running other tasks"},
};

const char *arb_reason_name(arb_reason_t r)
{
    return (unsigned)r < ARB_R_COUNT ? reasons[r].name : "?";
}

const char *arb_reason_text(arb_reason_t r)
{
    return (unsigned)r < ARB_R_COUNT ? reasons[r].text : "?";
}

static const char *domain_text(arb_topo_level_t l)
{
    switch (l) {
    case ARB_TOPO_NVLINK:
        return "NVLink domain";
    case ARB_TOPO_RACK:
        return "rack";
    case ARB_TOPO_BLOCK:
        return "block";
    default:
        return "node";
    }
}

static size_t app(char *buf, size_t n, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Append at off; past the end of buf, only count (so callers learn the
 * length they needed, like snprintf). */
static size_t app(char *buf, size_t n, size_t off, const char *fmt, ...)
{
    va_list ap;
    int k;
    va_start(ap, fmt);
    k = vsnprintf(off < n ? buf + off : NULL, off < n ? n - off : 0, fmt, ap);
    va_end(ap);
    return k > 0 ? off + (size_t)k : off;
}

/* ---- small helpers ------------------------------------------------------------------------- */

static bool stale(const arb_sched_t *s, const arb_ctx_t *ctx, const arb_node_t *n)
{
    return s->conf.profile.stale_ns > 0 && ctx &&
           ctx->now_ns - n->report_ns > s->conf.profile.stale_ns;
}

/* A node new work may go to: ready, with a fresh report. */
static bool eligible(const arb_sched_t *s, const arb_ctx_t *ctx, const arb_node_t *n)
{
    return n->state == ARB_NODE_READY && !stale(s, ctx, n);
}

/* "job 7 'big'" for scheduler id id (the caller's id when it gave one). */
static void job_label(const arb_sched_t *s, uint32_t id, char *buf, size_t n)
{
    const arb_job_t *o = id < s->nids ? s->byid[id] : NULL;
    if (!o)
        snprintf(buf, n, "another job");
    else
        snprintf(buf, n, "job %llu '%s'", (unsigned long long)(o->ext_id ? o->ext_id : o->id),
                 o->name);
}

static void dur_text(int64_t ns, char *buf, size_t n)
{
    int64_t s = ns / 1000000000LL;
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(buf, n, "%lld s", (long long)s);
    else if (s < 7200)
        snprintf(buf, n, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else
        snprintf(buf, n, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
}

static void mem_text(int64_t bytes, char *buf, size_t n)
{
    /* one decimal of the largest binary unit: 23.5Gi */
    static const char *const u[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
    double v = (double)bytes;
    int k = 0;
    while (v >= 1024 && k < 5) {
        v /= 1024;
        k++;
    }
    if (v == (double)(int64_t)v)
        snprintf(buf, n, "%lld%s", (long long)v, u[k]);
    else
        snprintf(buf, n, "%.1f%s", v, u[k]);
}

static void cpu_text(int64_t milli, char *buf, size_t n)
{
    arb_qty_format(milli, ARB_QTY_MILLI, buf, n);
}

/* Free whole eligible GPUs of node n for pc's group. */
static int node_free(const arb_pctx_t *pc, const arb_node_t *n)
{
    int f = 0;
    for (int i = 0; i < n->ngpus; i++)
        f += n->gpu[i].used_milli == 0 && sched_gpu_eligible(pc, n, i);
    return f;
}

/* Round f down to whole tasks of `unit` GPUs: a task never spans nodes (or
 * NVLink domains), so 7 free GPUs hold one 4-GPU task, not 7/4 of one. */
static int whole_units(int f, int unit)
{
    return unit > 1 ? f - f % unit : f;
}

/* GPUs of n a task of pc's group could ever use (healthy, allowed model,
 * device memory large enough): all of them, or those of its largest NVLink
 * domain. */
static int node_cap(const arb_pctx_t *pc, const arb_node_t *n, bool nvlink)
{
    const arb_tgroup_t *g = pc->group;
    uint32_t ok = 0;
    for (int i = 0; i < n->ngpus; i++) {
        const arb_gpu_t *d = &n->gpu[i];
        bool model = pc->job->nmodels == 0;
        for (int k = 0; k < pc->job->nmodels && !model; k++)
            model = pc->job->models[k] == d->model;
        if (d->healthy && model && (d->mem_mib <= 0 || d->mem_mib >= g->req.gpu_mem_mib))
            ok |= 1u << i;
    }
    return nvlink ? arb_node_nvlink_largest(n, ok, NULL) : __builtin_popcount(ok);
}

/*
 * Largest free whole-GPU block in one domain of level l over eligible
 * nodes, counted in whole tasks of `unit` GPUs per node. *node: a node of
 * the domain nearest to fitting `need` (the most free among domains big
 * enough to hold it at all, UINT32_MAX when none is), *dom_free: that
 * domain's free GPUs; *dom_cap: the largest such domain's capacity.
 */
static int largest_block(const arb_sched_t *s, const arb_pctx_t *pc, arb_topo_level_t l, int unit,
                         int need, uint32_t *node, int *dom_free, int *dom_cap)
{
    int best = -1, bestfit = -1;
    *node = UINT32_MAX;
    *dom_free = 0;
    *dom_cap = 0;
    for (uint32_t i = 0; i < s->c->nnodes; i++) {
        const arb_node_t *n = &s->c->nodes[i];
        int f = 0, cap = 0;
        if (!eligible(s, pc->ctx, n))
            continue;
        if (l == ARB_TOPO_NVLINK) {
            f = whole_units(sched_nvlink_free(pc, n, NULL), unit);
            cap = whole_units(node_cap(pc, n, true), unit);
        } else if (l == ARB_TOPO_NODE || l == ARB_TOPO_ANY) {
            f = whole_units(node_free(pc, n), unit);
            cap = whole_units(node_cap(pc, n, false), unit);
        } else {
            uint32_t key = l == ARB_TOPO_RACK ? n->rack : n->block;
            for (uint32_t k = 0; k < s->c->nnodes; k++) {
                const arb_node_t *o = &s->c->nodes[k];
                uint32_t ok = l == ARB_TOPO_RACK ? o->rack : o->block;
                if (eligible(s, pc->ctx, o) && (key ? ok == key : k == i)) {
                    f += whole_units(node_free(pc, o), unit);
                    cap += whole_units(node_cap(pc, o, false), unit);
                }
            }
        }
        if (f > best)
            best = f;
        if (cap > *dom_cap)
            *dom_cap = cap;
        if (cap >= need && f > bestfit) {
            bestfit = f;
            *node = i;
            *dom_free = f;
        }
    }
    return best < 0 ? 0 : best;
}

/* Does j fit now (a trial placement, undone)? */
static bool fits(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    if (sched_place_job(s, j, ctx) < 0)
        return false;
    sched_unbind(s, j);
    return true;
}

/* ---- could it ever fit? ------------------------------------------------------------------- */

/* Why no eligible node could ever hold a task of group g, with the numbers:
 * "needs 64Gi memory per task, the largest node has 23.5Gi". Appends to
 * buf at off; the new offset. */
static size_t never_text(arb_sched_t *s, arb_job_t *j, const arb_pctx_t *pc0, char *buf, size_t n,
                         size_t off)
{
    arb_pctx_t pc = *pc0;
    const arb_tgroup_t *g = pc.group;
    int hist[ARB_R_COUNT] = {0}, usable = 0, best_gpus = 0, best_nv = 0, ready = 0;
    int64_t best_cpu = 0, best_mem = 0, best_gmem = 0;
    int need_gpus = g->gpus ? g->gpus : g->gpu_share ? 1 : 0;
    bool nvlink = g->topo.required && g->topo.level == ARB_TOPO_NVLINK && g->gpus > 1;
    char a[48], b[48];

    for (uint32_t i = 0; i < s->c->nnodes; i++) {
        const arb_node_t *nd = &s->c->nodes[i];
        arb_reason_t r = sched_filter_node(&pc, nd);
        if (nd->state == ARB_NODE_LEFT)
            continue;
        if (r != ARB_R_OK && r < ARB_R_GPUS) {
            hist[r]++;
            continue;
        }
        ready++;
        int gp = node_cap(&pc, nd, false), nv = node_cap(&pc, nd, true);
        best_cpu = nd->cap.cpu_milli > best_cpu ? nd->cap.cpu_milli : best_cpu;
        best_mem = nd->cap.mem_bytes > best_mem ? nd->cap.mem_bytes : best_mem;
        best_gpus = gp > best_gpus ? gp : best_gpus;
        best_nv = nv > best_nv ? nv : best_nv;
        for (int k = 0; k < nd->ngpus; k++)
            best_gmem = nd->gpu[k].mem_mib > best_gmem ? nd->gpu[k].mem_mib : best_gmem;
        bool ok = g->req.cpu_milli <= nd->cap.cpu_milli && g->req.mem_bytes <= nd->cap.mem_bytes &&
                  gp >= need_gpus && (!nvlink || nv >= g->gpus);
        for (int e = 0; e < ARB_MAX_EXT; e++)
            ok &= g->req.ext[e] <= nd->cap.ext[e];
        usable += ok;
    }
    if (ready == 0) {
        /* Every node fails a condition or constraint: name the commonest. */
        int top = -1;
        for (int r = 1; r < ARB_R_GPUS; r++)
            if (hist[r] > 0 && (top < 0 || hist[r] > hist[top]))
                top = r;
        if (top < 0)
            return app(buf, n, off, "no node is in service");
        off = app(buf, n, off, "no node in service may take it: ");
        bool first = true;
        for (int r = 1; r < ARB_R_GPUS; r++)
            if (hist[r] > 0) {
                off = app(buf, n, off, "%s%d %s", first ? "" : ", ", hist[r], reasons[r].text);
                first = false;
                if (r == ARB_R_SELECTOR)
                    for (int k = 0; k < j->nselector; k++)
                        off = app(buf, n, off, "%s%s=%s", k ? ", " : " (nodeSelector ",
                                  arb_str(&s->c->strs, j->selector[k].key),
                                  arb_str(&s->c->strs, j->selector[k].val));
                if (r == ARB_R_SELECTOR && j->nselector)
                    off = app(buf, n, off, ")");
            }
        return off;
    }
    if (usable == 0) {
        if (g->req.mem_bytes > best_mem) {
            mem_text(g->req.mem_bytes, a, sizeof a);
            mem_text(best_mem, b, sizeof b);
            return app(buf, n, off,
                       "no node could ever hold a task of group '%s': it needs %s memory, the "
                       "largest node has %s",
                       g->name, a, b);
        }
        if (g->req.cpu_milli > best_cpu) {
            cpu_text(g->req.cpu_milli, a, sizeof a);
            cpu_text(best_cpu, b, sizeof b);
            return app(buf, n, off,
                       "no node could ever hold a task of group '%s': it needs %s CPUs, the "
                       "largest node has %s",
                       g->name, a, b);
        }
        if (g->req.gpu_mem_mib > best_gmem && need_gpus > 0) {
            mem_text(g->req.gpu_mem_mib << 20, a, sizeof a);
            mem_text(best_gmem << 20, b, sizeof b);
            return app(buf, n, off,
                       "no GPU could ever hold a task of group '%s': it needs %s of GPU memory "
                       "on each GPU, the largest GPU has %s",
                       g->name, a, b);
        }
        if (nvlink && best_nv < g->gpus)
            return app(buf, n, off,
                       "no node could ever hold a task of group '%s': it needs %d GPUs in one "
                       "NVLink domain, the largest domain has %d",
                       g->name, g->gpus, best_nv);
        if (need_gpus > best_gpus)
            return app(buf, n, off,
                       "no node could ever hold a task of group '%s': it needs %d GPUs%s, the "
                       "most on one node: %d",
                       g->name, need_gpus, g->req.gpu_mem_mib ? " with that much memory" : "",
                       best_gpus);
        return app(buf, n, off,
                   "no node has all that a task of group '%s' needs at once (extended "
                   "resources, or CPU, memory and GPUs together)",
                   g->name);
    }
    /* Single tasks fit somewhere; the whole group does not, even idle. */
    if (g->topo.required && g->topo.level >= ARB_TOPO_NODE && g->replicas > 1)
        return app(buf, n, off,
                   "group '%s' needs its %d tasks in one %s, and no %s could ever hold them "
                   "all",
                   g->name, g->replicas, domain_text(g->topo.level), domain_text(g->topo.level));
    return app(buf, n, off,
               "the cluster could never hold all %d tasks at once even when idle (%d node(s) "
               "could each take a task of group '%s')",
               j->elastic ? j->gang_min : j->ntasks, usable, g->name);
}

/* ---- what fits now ------------------------------------------------------------------------- */

/* The largest value of *field below need with which j fits now (a binary
 * search; the field restored), or -1. */
static int64_t largest_fit(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, int64_t *field,
                           int64_t need)
{
    int64_t lo = 1, hi = need - 1, best = -1, save = *field;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        *field = mid;
        if (fits(s, j, ctx)) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    *field = save;
    return best;
}

/* For a one-task job: lower the resource that blocks it until it fits. */
static void fit_now(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, arb_reason_t top,
                    arb_explain_t *ex)
{
    arb_tgroup_t *g = &j->groups[0];

    if (j->ntasks != 1 || j->ngroups != 1)
        return;
    if ((top == ARB_R_GPUS || top == ARB_R_NVLINK) && g->gpus > 1) {
        int save = g->gpus;
        for (int v = save - 1; v >= 1 && ex->fit_gpus < 0; v--) {
            g->gpus = v;
            g->req.gpu_milli = (int64_t)v * 1000;
            if (fits(s, j, ctx))
                ex->fit_gpus = v;
        }
        g->gpus = save;
        g->req.gpu_milli = (int64_t)save * 1000;
    } else if (top == ARB_R_MEM) {
        ex->fit_mem_bytes = largest_fit(s, j, ctx, &g->req.mem_bytes, g->req.mem_bytes);
    } else if (top == ARB_R_CPU) {
        ex->fit_cpu_milli = largest_fit(s, j, ctx, &g->req.cpu_milli, g->req.cpu_milli);
    }
}

/* ---- the diagnosis of a job that does not fit now ----------------------------------------- */

static void diagnose(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, arb_explain_t *ex)
{
    arb_pctx_t pc = {.sched = s, .cluster = s->c, .ctx = ctx, .job = j};
    size_t off = strlen(ex->summary);
    int fit_nodes = 0, best_free = 0, dom_cap = 0;
    uint32_t stale_ids[3];
    int nstale_named = 0;
    char a[48], b[48];

    /* Which group fails? The first with no feasible node; else the gang as a whole. */
    for (int g = 0; g < j->ngroups && ex->group < 0; g++) {
        pc.group = &j->groups[g];
        memset(ex->hist, 0, sizeof ex->hist);
        fit_nodes = 0;
        nstale_named = 0;
        for (uint32_t i = 0; i < s->c->nnodes; i++) {
            const arb_node_t *n = &s->c->nodes[i];
            arb_reason_t r;
            if (n->state == ARB_NODE_LEFT)
                continue;
            r = sched_filter_node(&pc, n);
            ex->hist[r]++;
            fit_nodes += r == ARB_R_OK;
            if (r == ARB_R_STALE && nstale_named < 3)
                stale_ids[nstale_named++] = i;
        }
        if (fit_nodes == 0)
            ex->group = g;
    }
    bool whole_gang = ex->group < 0;
    if (whole_gang) {
        ex->group = 0;
        for (int g = 0; g < j->ngroups; g++)
            if (j->groups[g].replicas > 1 || j->groups[g].topo.level >= ARB_TOPO_NODE)
                ex->group = g;
    }
    pc.group = &j->groups[ex->group];
    const arb_tgroup_t *g = pc.group;
    ex->nstale = ex->hist[ARB_R_STALE];

    /* Fragmentation diagnostic. */
    ex->domain = ARB_TOPO_NODE;
    ex->need_gpus = g->gpus;
    if (g->topo.required && g->topo.level == ARB_TOPO_NVLINK) {
        ex->domain = ARB_TOPO_NVLINK;
        if (g->replicas > 1)
            ex->need_gpus = g->gpus * g->replicas;
    } else if (g->topo.required && g->topo.level >= ARB_TOPO_NODE && g->replicas > 1) {
        ex->domain = g->topo.level;
        ex->need_gpus = g->gpus * g->replicas;
    }
    if (ex->need_gpus > 0)
        ex->largest_free = largest_block(s, &pc, ex->domain, ex->need_gpus > g->gpus ? g->gpus : 1,
                                         ex->need_gpus, &ex->best_node, &best_free, &dom_cap);

    /* Gangs: how many of the group's tasks fit now, and where. */
    uint32_t fnodes[4];
    int fcounts[4], nfn = 0;
    if (g->replicas > 1) {
        ex->tasks_need = j->elastic ? j->gang_min : g->replicas;
        ex->tasks_fit = sched_group_fit(s, j, ex->group, ctx, fnodes, fcounts, 4, &nfn);
    }

    if (ex->never) {
        off = app(ex->summary, sizeof ex->summary, off,
                  "job '%s' can never start as it is: ", j->name);
        off = never_text(s, j, &pc, ex->summary, sizeof ex->summary, off);
        for (int k = 0; k < nstale_named; k++) { /* until they report again */
            const arb_node_t *n = &s->c->nodes[stale_ids[k]];
            dur_text(ctx->now_ns - n->report_ns, a, sizeof a);
            off = app(ex->summary, sizeof ex->summary, off, "%s%s (last report %s ago)",
                      k ? ", " : "; left out for a stale report: ", arb_node_name(s->c, n), a);
        }
        if (nstale_named && nstale_named < ex->nstale)
            off = app(ex->summary, sizeof ex->summary, off, ", ...");
    } else {
        /* Kubernetes-style: "0/N nodes are available: ...", with numbers. */
        off = app(ex->summary, sizeof ex->summary, off, "%d/%d nodes are available", fit_nodes,
                  ex->nnodes);
        bool first = true;
        int hist[ARB_R_COUNT];
        memcpy(hist, ex->hist, sizeof hist);
        for (;;) { /* reasons by count, largest first */
            int best = -1;
            for (int r = 1; r < ARB_R_COUNT; r++)
                if (hist[r] > 0 && (best < 0 || hist[r] > hist[best]))
                    best = r;
            if (best < 0)
                break;
            off = app(ex->summary, sizeof ex->summary, off, "%s %d %s", first ? ":" : ",",
                      hist[best], reasons[best].text);
            if (ex->best_node_reason == ARB_R_OK)
                ex->best_node_reason = (arb_reason_t)best;
            int64_t most = 0;
            for (uint32_t i = 0; i < s->c->nnodes; i++) {
                const arb_node_t *n = &s->c->nodes[i];
                int64_t f = 0;
                if (!eligible(s, ctx, n))
                    continue;
                if (best == ARB_R_MEM)
                    f = n->cap.mem_bytes - n->used.mem_bytes;
                else if (best == ARB_R_CPU)
                    f = n->cap.cpu_milli - n->used.cpu_milli;
                else if (best == ARB_R_GPU_MEM)
                    for (int k = 0; k < n->ngpus; k++)
                        f = n->gpu[k].healthy && n->gpu[k].mem_mib - n->gpu[k].mem_used_mib > f
                                ? n->gpu[k].mem_mib - n->gpu[k].mem_used_mib
                                : f;
                most = f > most ? f : most;
            }
            if (best == ARB_R_NVLINK || (best == ARB_R_GPUS && ex->need_gpus > 0))
                off = app(ex->summary, sizeof ex->summary, off, " (needs %d, largest free %d)",
                          ex->need_gpus, ex->largest_free);
            else if (best == ARB_R_MEM) {
                mem_text(g->req.mem_bytes, a, sizeof a);
                mem_text(most, b, sizeof b);
                off = app(ex->summary, sizeof ex->summary, off,
                          " (needs %s, the most free on one node %s)", a, b);
            } else if (best == ARB_R_CPU) {
                cpu_text(g->req.cpu_milli, a, sizeof a);
                cpu_text(most, b, sizeof b);
                off = app(ex->summary, sizeof ex->summary, off,
                          " (needs %s CPUs, the most free on one node %s)", a, b);
            } else if (best == ARB_R_GPU_MEM) {
                mem_text(g->req.gpu_mem_mib << 20, a, sizeof a);
                mem_text(most << 20, b, sizeof b);
                off = app(ex->summary, sizeof ex->summary, off,
                          " (needs %s on each GPU, the most free on one GPU %s)", a, b);
            } else if (best == ARB_R_STALE) {
                for (int k = 0; k < nstale_named; k++) {
                    const arb_node_t *n = &s->c->nodes[stale_ids[k]];
                    dur_text(ctx->now_ns - n->report_ns, a, sizeof a);
                    off = app(ex->summary, sizeof ex->summary, off, "%s%s, last report %s ago",
                              k ? "; " : " (", arb_node_name(s->c, n), a);
                }
                off = app(ex->summary, sizeof ex->summary, off, "%s: left out",
                          nstale_named < ex->nstale ? "; ..." : "");
                off = app(ex->summary, sizeof ex->summary, off, ")");
            }
            first = false;
            hist[best] = 0;
        }
        if (ex->tasks_need > 1)
            off = app(ex->summary, sizeof ex->summary, off,
                      "; group '%s' (%d tasks x %d GPUs%s%s): %d of %d tasks fit now", g->name,
                      g->replicas, g->gpus, g->topo.required ? ", in one " : "",
                      g->topo.required ? domain_text(g->topo.level) : "", ex->tasks_fit,
                      ex->tasks_need);
        for (int k = 0; ex->tasks_need > 1 && k < nfn; k++)
            off = app(ex->summary, sizeof ex->summary, off, "%snode %s takes %d", k ? ", " : ": ",
                      arb_node_name(s->c, &s->c->nodes[fnodes[k]]), fcounts[k]);
    }

    /* What would make it fit. */
    off = strlen(ex->hint);
    int64_t free_gpus = ex->free_gpu_milli / 1000;
    if (ex->never) {
        if (g->topo.required && g->topo.level != ARB_TOPO_ANY && dom_cap < ex->need_gpus)
            off = app(ex->hint, sizeof ex->hint, off,
                      "No %s holds %d usable GPUs even when idle: relax the topology "
                      "requirement or make the tasks smaller. ",
                      domain_text(ex->domain), ex->need_gpus);
        else
            off = app(ex->hint, sizeof ex->hint, off,
                      "Lower the request (or split it into more tasks), or add a node that can "
                      "hold it; it waits until then and holds no job behind it back. ");
    } else {
        if (ex->need_gpus > 1 && ex->largest_free < ex->need_gpus && free_gpus >= ex->need_gpus)
            off = app(ex->hint, sizeof ex->hint, off,
                      "%lld GPUs are free in the cluster but at most %d in any one %s: the free "
                      "GPUs are fragmented. ",
                      (long long)free_gpus, ex->largest_free, domain_text(ex->domain));
        if (ex->need_gpus > 0 && ex->best_node != UINT32_MAX && best_free < ex->need_gpus &&
            (ex->best_node_reason == ARB_R_GPUS || ex->best_node_reason == ARB_R_NVLINK ||
             ex->best_node_reason == ARB_R_TOPOLOGY || whole_gang)) {
            if (ex->domain == ARB_TOPO_NODE || ex->domain == ARB_TOPO_ANY)
                off = app(ex->hint, sizeof ex->hint, off,
                          "Freeing %d more GPU(s) on node '%s' would fit it. ",
                          ex->need_gpus - best_free,
                          arb_node_name(s->c, &s->c->nodes[ex->best_node]));
            else
                off = app(ex->hint, sizeof ex->hint, off,
                          "Freeing %d more GPU(s) in the %s of node '%s' would fit it. ",
                          ex->need_gpus - best_free, domain_text(ex->domain),
                          arb_node_name(s->c, &s->c->nodes[ex->best_node]));
        }
        fit_now(s, j, ctx, ex->best_node_reason, ex);
        if (ex->fit_gpus > 0)
            off = app(ex->hint, sizeof ex->hint, off,
                      "What fits now: the same job with at most %d GPUs per task. ", ex->fit_gpus);
        else if (ex->fit_mem_bytes > 0) {
            mem_text(ex->fit_mem_bytes, a, sizeof a);
            off = app(ex->hint, sizeof ex->hint, off,
                      "What fits now: the same job with at most %s memory per task. ", a);
        } else if (ex->fit_cpu_milli > 0) {
            cpu_text(ex->fit_cpu_milli, a, sizeof a);
            off = app(ex->hint, sizeof ex->hint, off,
                      "What fits now: the same job with at most %s CPUs per task. ", a);
        } else if (ex->tasks_need > 1 && ex->tasks_fit > 0)
            off = app(ex->hint, sizeof ex->hint, off,
                      "What fits now: %d of the %d tasks of group '%s'. ", ex->tasks_fit,
                      ex->tasks_need, g->name);
    }
    if (!ex->never) {
        int nv = 0, nr = 0;
        if (sched_preempt_for(s, j, ctx, true, &nv, &nr) == 0 && nv > 0) {
            ex->preemption_helps = true;
            ex->preempt_victims = nv - nr;
            ex->reclaim_victims = nr;
            if (nr > 0)
                off = app(ex->hint, sizeof ex->hint, off,
                          "Reclaiming quota from %d job(s) of queues borrowing above their "
                          "nominal in its cohort%s would fit it%s. ",
                          nr, nv > nr ? " (and preempting lower-priority ones)" : "",
                          s->conf.preemption ? " (preemption is on: it happens at the next cycle)"
                                             : " (preemption is off for this scheduler)");
            else
                off = app(ex->hint, sizeof ex->hint, off,
                          "Preempting %d lower-priority job(s) would fit it%s. ", nv,
                          s->conf.preemption ? " (preemption is on: it happens at the next cycle)"
                                             : " (preemption is off for this scheduler)");
        }
        const arb_queue_t *sq;
        if (!ex->preemption_helps && s->conf.preemption && (sq = sched_preempt_spared(s, j)))
            off = app(ex->hint, sizeof ex->hint, off,
                      "Lower-priority jobs of queue '%s' are not preempted for it: that queue is "
                      "within its nominal quota in what it asks for, and preemption takes from "
                      "another queue of cohort '%s' only what that queue borrows (else a quota "
                      "reclaim would take the room back). ",
                      arb_str(&s->c->strs, sq->name), arb_str(&s->c->strs, sq->cohort));
        const arb_job_t *oj;
        if (!ex->preemption_helps && s->conf.preemption && (oj = sched_preempt_once(s, j)))
            off = app(ex->hint, sizeof ex->hint, off,
                      "Job '%s', which it preempted for room it then lost (the quota its queue "
                      "borrows was taken back by a queue within its nominal), is not preempted for "
                      "it again while its queue would borrow: it starts there when '%s' ends. ",
                      oj->name, oj->name);
    }
    if (strcmp(s->conf.profile.name, "spread") == 0 && ex->need_gpus > 1 && !ex->never)
        off = app(ex->hint, sizeof ex->hint, off,
                  "The 'spread' policy scatters small jobs over every node; a packing policy "
                  "(pack, fgd or default) keeps whole domains free.");
    (void)off;
}

/* ---- the answer ------------------------------------------------------------------------------ */

int arb_sched_explain(arb_sched_t *s, const arb_job_t *cj, const arb_ctx_t *ctx, arb_explain_t *ex)
{
    arb_job_t *j = (arb_job_t *)cj; /* trial placements are undone before return */
    sched_outcome_t out;
    char qwhy[256] = "", who[160], a[48];
    size_t off = 0;
    int rc;

    memset(ex, 0, sizeof *ex);
    ex->group = -1;
    ex->best_node = UINT32_MAX;
    ex->wait_for = UINT32_MAX;
    ex->fit_gpus = -1;
    ex->fit_mem_bytes = -1;
    ex->fit_cpu_milli = -1;
    for (uint32_t i = 0; i < s->c->nnodes; i++) {
        const arb_node_t *n = &s->c->nodes[i];
        ex->nnodes += n->state != ARB_NODE_LEFT;
        if (eligible(s, ctx, n))
            ex->free_gpu_milli += n->cap.gpu_milli - n->used.gpu_milli;
    }
    if (j->state != ARB_JOB_PENDING && j->state != ARB_JOB_PREEMPTED) {
        snprintf(ex->summary, sizeof ex->summary, "job '%s' is %s, not pending", j->name,
                 arb_job_state_name(j->state));
        return 0;
    }
    if (ex->nnodes == 0) {
        ex->wait = ARB_WAIT_NEVER;
        snprintf(ex->summary, sizeof ex->summary,
                 "no node is registered yet: job '%s' is placed once a node that can hold it "
                 "joins",
                 j->name);
        snprintf(ex->hint, sizeof ex->hint,
                 "Start an agent (arbiter agent --controller URL) on a node with what it asks "
                 "for.");
        return 0;
    }
    if ((rc = sched_cycle_try(s, j, ctx, &out)) < 0)
        return rc;
    ex->fits_now = out.placed;
    ex->wait = out.placed ? ARB_WAIT_NONE : out.wait;
    ex->wait_for = out.wait_for;
    if (out.placed) {
        snprintf(ex->summary, sizeof ex->summary,
                 "job '%s' fits now; it is placed at the next scheduling cycle", j->name);
        ex->placeable = true;
        return 0;
    }
    if (out.wait == ARB_WAIT_DEPENDENCY || out.wait == ARB_WAIT_DEP_NEVER ||
        out.wait == ARB_WAIT_THROTTLE) { /* the caller's hold; the caller names the jobs */
        ex->never = out.wait == ARB_WAIT_DEP_NEVER;
        ex->placeable = !ex->never && fits(s, j, ctx);
        snprintf(ex->summary, sizeof ex->summary, "job '%s' is held: %s", j->name,
                 out.wait == ARB_WAIT_DEPENDENCY
                     ? "a job it depends on has not done what it waits for"
                 : out.wait == ARB_WAIT_DEP_NEVER
                     ? "its dependency can never be met (a job it depends on ended otherwise)"
                     : "its array runs as many elements at once as its throttle allows");
        snprintf(ex->hint, sizeof ex->hint,
                 out.wait == ARB_WAIT_DEP_NEVER
                     ? "Cancel it (arbiter cancel ID, or scancel), and submit it again with a "
                       "dependency that can be met."
                     : "It is tried when the jobs it waits for change state; it holds no job "
                       "back meanwhile.");
        return 0;
    }
    if (out.wait == ARB_WAIT_QUOTA) {
        ex->quota_blocked = true;
        if (sched_quota_never(s, j, qwhy, sizeof qwhy)) {
            ex->never = true;
            snprintf(ex->summary, sizeof ex->summary, "job '%s' can never start in its queue: %s",
                     j->name, qwhy);
            snprintf(ex->hint, sizeof ex->hint,
                     "Lower the request, or ask for a larger quota (nominal or borrowingLimit).");
            return 0;
        }
        sched_quota_admits(s, j, qwhy, sizeof qwhy);
        snprintf(ex->summary, sizeof ex->summary, "waiting for quota: %s", qwhy);
        snprintf(ex->hint, sizeof ex->hint,
                 "It starts when its queue's usage falls, or when its cohort has idle quota to "
                 "lend; it holds no job of another queue back.");
        return 0;
    }
    ex->never = out.wait == ARB_WAIT_NEVER;
    ex->placeable = !ex->never && fits(s, j, ctx);
    job_label(s, out.wait_for, who, sizeof who);
    switch (out.wait) {
    case ARB_WAIT_ORDER:
        off = app(ex->summary, sizeof ex->summary, off, "%s%s (queue order fifo)%s",
                  ex->placeable ? "it fits now, but is held behind " : "held behind ", who,
                  ex->placeable ? ", which cannot start yet" : "; and ");
        break;
    case ARB_WAIT_STARVING:
        off =
            app(ex->summary, sizeof ex->summary, off,
                "%s: %s has waited longer than scheduler.starvation and goes first on the "
                "nodes it could use%s",
                ex->placeable ? "it fits now, but only on nodes another job reserves" : "held back",
                who, ex->placeable ? "" : "; and ");
        break;
    case ARB_WAIT_CLAIMED:
        off = app(ex->summary, sizeof ex->summary, off,
                  "%s: %s preempts jobs there and the room they free is its own%s",
                  ex->placeable ? "it fits now, but only on nodes another job is making room on"
                                : "held back",
                  who, ex->placeable ? "" : "; and ");
        break;
    case ARB_WAIT_TAKEN:
        off = app(ex->summary, sizeof ex->summary, off,
                  "it fits now, but %s would take that room back in the same cycle (%s); it "
                  "waits",
                  who, out.reclaim ? "reclaiming the quota its queue borrows" : "it preempts it");
        break;
    case ARB_WAIT_RESERVED: {
        int64_t room = out.shadow_ns - ctx->now_ns - out.grace_ns;
        dur_text(out.shadow_ns - ctx->now_ns, a, sizeof a);
        off = app(ex->summary, sizeof ex->summary, off,
                  "%sstarting it would delay %s, which holds a backfill reservation from %s from "
                  "now",
                  ex->placeable ? "it fits now, but " : "", who, a);
        if (ex->placeable && room >= 1000000000LL) {
            dur_text(room, a, sizeof a);
            off = app(ex->summary, sizeof ex->summary, off,
                      ": with a time limit of at most %s (it has %s) it could start now", a,
                      j->time_limit_s > 0 ? "a longer one" : "none");
        } else if (ex->placeable) {
            off = app(ex->summary, sizeof ex->summary, off,
                      ": it could start now only on nodes the reservation does not need");
        }
        if (!ex->placeable)
            off = app(ex->summary, sizeof ex->summary, off, "; and ");
        break;
    }
    case ARB_WAIT_VICTIMS:
        off = app(ex->summary, sizeof ex->summary, off,
                  j->waiting ? "job '%s' waits for the jobs it preempted to stop; "
                             : "job '%s' does not fit now, but preemption makes room: the next "
                               "cycle stops its victims; ",
                  j->name);
        break;
    default:
        if (out.reserved && out.shadow_ns > ctx->now_ns) {
            dur_text(out.shadow_ns - ctx->now_ns, a, sizeof a);
            off = app(ex->summary, sizeof ex->summary, off,
                      "it holds the backfill reservation: it starts in %s at the latest, when "
                      "the time limits of the jobs in its way run out; ",
                      a);
        } else if (out.reserved) {
            off = app(ex->summary, sizeof ex->summary, off,
                      "it is first in line (jobs behind it may start only where they delay it "
                      "not); ");
        }
        break;
    }
    if (out.wait == ARB_WAIT_VICTIMS || !ex->placeable || ex->never)
        diagnose(s, j, ctx, ex);
    return 0;
}

int arb_sched_explain_nodes(arb_sched_t *s, const arb_job_t *j, const arb_ctx_t *ctx, int group,
                            arb_reason_t *out)
{
    if (group < 0 || group >= j->ngroups)
        return -EINVAL;
    arb_pctx_t pc = {
        .sched = s, .cluster = s->c, .ctx = ctx, .job = (arb_job_t *)j, .group = &j->groups[group]};
    for (uint32_t i = 0; i < s->c->nnodes; i++)
        out[i] = sched_filter_node(&pc, &s->c->nodes[i]);
    return 0;
}

static size_t json_str(char *buf, size_t n, size_t off, const char *s)
{
    off = app(buf, n, off, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            off = app(buf, n, off, "\\%c", c);
        else if (c < 0x20)
            off = app(buf, n, off, "\\u%04x", c);
        else
            off = app(buf, n, off, "%c", c);
    }
    return app(buf, n, off, "\"");
}

int arb_explain_json(const arb_sched_t *s, const arb_explain_t *ex, char *buf, size_t n)
{
    size_t off = 0;
    bool first = true;

    if (n)
        buf[0] = '\0';
    off = app(buf, n, off, "{\"summary\":");
    off = json_str(buf, n, off, ex->summary);
    off = app(buf, n, off, ",\"nodes\":%d,\"reasons\":{", ex->nnodes);
    for (int r = 1; r < ARB_R_COUNT; r++)
        if (ex->hist[r] > 0) {
            off = app(buf, n, off, "%s\"%s\":%d", first ? "" : ",", reasons[r].name, ex->hist[r]);
            first = false;
        }
    off = app(buf, n, off,
              "},\"fragmentation\":{\"free_gpus\":%.3f,\"need_gpus\":%d,\"domain\":\"%s\","
              "\"largest_free\":%d},\"fits_now\":%s,\"placeable\":%s,\"wait\":\"%s\","
              "\"never\":%s,\"quota_blocked\":%s,\"preemption_helps\":%s",
              (double)ex->free_gpu_milli / 1000.0, ex->need_gpus, arb_topo_level_name(ex->domain),
              ex->largest_free, ex->fits_now ? "true" : "false", ex->placeable ? "true" : "false",
              arb_wait_name(ex->fits_now ? ARB_WAIT_NONE : ex->wait), ex->never ? "true" : "false",
              ex->quota_blocked ? "true" : "false", ex->preemption_helps ? "true" : "false");
    if (ex->wait_for != UINT32_MAX && ex->wait_for < s->nids && s->byid[ex->wait_for]) {
        const arb_job_t *o = s->byid[ex->wait_for];
        off = app(buf, n, off, ",\"held_by\":{\"job\":%llu,\"name\":",
                  (unsigned long long)(o->ext_id ? o->ext_id : o->id));
        off = json_str(buf, n, off, o->name);
        off = app(buf, n, off, "}");
    }
    if (ex->preemption_helps)
        off = app(buf, n, off, ",\"victims\":{\"lower_priority\":%d,\"quota_reclaim\":%d}",
                  ex->preempt_victims, ex->reclaim_victims);
    if (ex->tasks_need > 1)
        off = app(buf, n, off, ",\"tasks\":{\"fit_now\":%d,\"need\":%d}", ex->tasks_fit,
                  ex->tasks_need);
    if (ex->fit_gpus > 0 || ex->fit_mem_bytes > 0 || ex->fit_cpu_milli > 0) {
        off = app(buf, n, off, ",\"fits_now_with\":{");
        if (ex->fit_gpus > 0)
            off = app(buf, n, off, "\"gpus\":%d", ex->fit_gpus);
        else if (ex->fit_mem_bytes > 0)
            off = app(buf, n, off, "\"memory_bytes\":%lld", (long long)ex->fit_mem_bytes);
        else
            off = app(buf, n, off, "\"cpu_milli\":%lld", (long long)ex->fit_cpu_milli);
        off = app(buf, n, off, "}");
    }
    if (ex->nstale)
        off = app(buf, n, off, ",\"stale_nodes\":%d", ex->nstale);
    off = app(buf, n, off, ",\"best_node\":");
    if (ex->best_node != UINT32_MAX && ex->best_node < s->c->nnodes)
        off = json_str(buf, n, off, arb_node_name(s->c, &s->c->nodes[ex->best_node]));
    else
        off = app(buf, n, off, "null");
    off = app(buf, n, off, ",\"hint\":");
    off = json_str(buf, n, off, ex->hint);
    off = app(buf, n, off, "}");
    return (int)off;
}
