/*
 * explain.c: why is my job pending? For a pending job it finds the task
 * group that cannot be placed, counts the nodes each filter rejected, checks
 * whether free capacity exists but is fragmented across domains, and says
 * what would make the job fit: which node is nearest, how much to free
 * there, whether preemption would help, and whether the queue's quota (not
 * capacity) is what holds it. Text and JSON come from the same struct.
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

/* Healthy GPUs of n: all of them, or those of its largest NVLink domain. */
static int node_cap(const arb_node_t *n, bool nvlink)
{
    int best = 0, all = 0;
    for (int i = 0; i < n->ngpus; i++) {
        int c = 0;
        all += n->gpu[i].healthy;
        if (!nvlink)
            continue;
        for (int k = 0; k < n->ngpus; k++)
            c += n->gpu[k].healthy &&
                 (k == i || (n->gpu[i].nvlink >= 0 && n->gpu[k].nvlink == n->gpu[i].nvlink));
        best = c > best ? c : best;
    }
    return nvlink ? best : all;
}

/*
 * Largest free whole-GPU block in one domain of level l, counted in whole
 * tasks of `unit` GPUs per node. *node: a node of the domain that is
 * nearest to fitting `need` (the most free among domains big enough to hold
 * it at all, UINT32_MAX when none is), *dom_free: that domain's free GPUs.
 */
static int largest_block(const arb_sched_t *s, const arb_pctx_t *pc, arb_topo_level_t l, int unit,
                         int need, uint32_t *node, int *dom_free)
{
    int best = -1, bestfit = -1;
    *node = UINT32_MAX;
    *dom_free = 0;
    for (uint32_t i = 0; i < s->c->nnodes; i++) {
        const arb_node_t *n = &s->c->nodes[i];
        int f = 0, cap = 0;
        if (n->state != ARB_NODE_READY)
            continue;
        if (l == ARB_TOPO_NVLINK) {
            f = whole_units(sched_nvlink_free(pc, n, NULL), unit);
            cap = whole_units(node_cap(n, true), unit);
        } else if (l == ARB_TOPO_NODE || l == ARB_TOPO_ANY) {
            f = whole_units(node_free(pc, n), unit);
            cap = whole_units(node_cap(n, false), unit);
        } else {
            uint32_t key = l == ARB_TOPO_RACK ? n->rack : n->block;
            for (uint32_t k = 0; k < s->c->nnodes; k++) {
                const arb_node_t *o = &s->c->nodes[k];
                uint32_t ok = l == ARB_TOPO_RACK ? o->rack : o->block;
                if (o->state == ARB_NODE_READY && (key ? ok == key : k == i)) {
                    f += whole_units(node_free(pc, o), unit);
                    cap += whole_units(node_cap(o, false), unit);
                }
            }
        }
        if (f > best)
            best = f;
        if (cap >= need && f > bestfit) {
            bestfit = f;
            *node = i;
            *dom_free = f;
        }
    }
    return best < 0 ? 0 : best;
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

int arb_sched_explain(arb_sched_t *s, const arb_job_t *cj, const arb_ctx_t *ctx, arb_explain_t *ex)
{
    arb_job_t *j = (arb_job_t *)cj; /* trial placements are undone before return */
    arb_pctx_t pc = {.sched = s, .cluster = s->c, .ctx = ctx, .job = j};
    char qwhy[256] = "";
    size_t off = 0;
    int fit_nodes = 0, nv = 0, best_free = 0;

    memset(ex, 0, sizeof *ex);
    ex->group = -1;
    ex->best_node = UINT32_MAX;
    ex->nnodes = (int)s->c->nnodes;
    for (uint32_t i = 0; i < s->c->nnodes; i++) {
        const arb_node_t *n = &s->c->nodes[i];
        if (n->state == ARB_NODE_READY)
            ex->free_gpu_milli += n->cap.gpu_milli - n->used.gpu_milli;
    }
    if (j->state != ARB_JOB_PENDING) {
        snprintf(ex->summary, sizeof ex->summary, "job '%s' is %s, not pending", j->name,
                 arb_job_state_name(j->state));
        return 0;
    }
    if (!sched_quota_admits(s, j, qwhy, sizeof qwhy)) {
        ex->quota_blocked = true;
        snprintf(ex->summary, sizeof ex->summary, "waiting for quota: %s", qwhy);
        snprintf(ex->hint, sizeof ex->hint,
                 "it starts when its queue's usage falls, or when the cohort has idle quota "
                 "to lend");
        return 0;
    }

    /* Which group fails? The first with no feasible node; else the gang as a whole. */
    for (int g = 0; g < j->ngroups && ex->group < 0; g++) {
        pc.group = &j->groups[g];
        memset(ex->hist, 0, sizeof ex->hist);
        fit_nodes = 0;
        for (uint32_t i = 0; i < s->c->nnodes; i++) {
            arb_reason_t r = sched_filter_node(&pc, &s->c->nodes[i]);
            ex->hist[r]++;
            fit_nodes += r == ARB_R_OK;
        }
        if (fit_nodes == 0)
            ex->group = g;
    }
    bool whole_gang = ex->group < 0;
    if (whole_gang) {
        if (sched_place_job(s, j, ctx) == 0) {
            sched_unbind(s, j);
            snprintf(ex->summary, sizeof ex->summary,
                     "job '%s' fits now; it is placed at the next scheduling cycle", j->name);
            return 0;
        }
        /* Every group has feasible nodes one task at a time, but not all at once. */
        ex->group = 0;
        for (int g = 0; g < j->ngroups; g++)
            if (j->groups[g].replicas > 1 || j->groups[g].topo.level >= ARB_TOPO_NODE)
                ex->group = g;
        pc.group = &j->groups[ex->group];
    }
    const arb_tgroup_t *g = pc.group;

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
                                         ex->need_gpus, &ex->best_node, &best_free);

    /* Summary, Kubernetes-style: "0/N nodes are available: ...". */
    off = app(ex->summary, sizeof ex->summary, off, "%d/%d nodes are available", fit_nodes,
              ex->nnodes);
    bool first = true;
    for (;;) { /* reasons by count, largest first */
        int best = -1;
        for (int r = 1; r < ARB_R_COUNT; r++)
            if (ex->hist[r] > 0 && (best < 0 || ex->hist[r] > ex->hist[best]))
                best = r;
        if (best < 0)
            break;
        off = app(ex->summary, sizeof ex->summary, off, "%s %d %s", first ? ":" : ",",
                  ex->hist[best], reasons[best].text);
        if (best == ARB_R_NVLINK || (best == ARB_R_GPUS && ex->need_gpus > 0))
            off = app(ex->summary, sizeof ex->summary, off, " (needs %d, largest free %d)",
                      ex->need_gpus, ex->largest_free);
        first = false;
        if (ex->best_node_reason == ARB_R_OK)
            ex->best_node_reason = (arb_reason_t)best;
        ex->hist[best] = -ex->hist[best]; /* mark printed */
    }
    for (int r = 0; r < ARB_R_COUNT; r++)
        if (ex->hist[r] < 0)
            ex->hist[r] = -ex->hist[r];
    if (whole_gang)
        off =
            app(ex->summary, sizeof ex->summary, off,
                "%sbut the group '%s' (%d tasks x %d GPUs, topology %s%s) does not fit all "
                "at once",
                fit_nodes ? "; each node may take one task, " : "; ", g->name, g->replicas, g->gpus,
                arb_topo_level_name(g->topo.level), g->topo.required ? ", required" : "");

    /* What would make it fit. */
    off = 0;
    int64_t free_gpus = ex->free_gpu_milli / 1000;
    if (ex->need_gpus > 0 && ex->largest_free < ex->need_gpus && free_gpus >= ex->need_gpus)
        off = app(ex->hint, sizeof ex->hint, off,
                  "%lld GPUs are free in the cluster but at most %d in any one %s: the free "
                  "GPUs are fragmented. ",
                  (long long)free_gpus, ex->largest_free, domain_text(ex->domain));
    if (ex->need_gpus > 0 && ex->best_node != UINT32_MAX && best_free < ex->need_gpus &&
        strcmp(domain_text(ex->domain), "node") == 0)
        off = app(ex->hint, sizeof ex->hint, off,
                  "Freeing %d more GPU(s) on node '%s' would fit it. ", ex->need_gpus - best_free,
                  arb_node_name(s->c, &s->c->nodes[ex->best_node]));
    else if (ex->need_gpus > 0 && ex->best_node != UINT32_MAX && best_free < ex->need_gpus)
        off = app(ex->hint, sizeof ex->hint, off,
                  "Freeing %d more GPU(s) in the %s of node '%s' would fit it. ",
                  ex->need_gpus - best_free, domain_text(ex->domain),
                  arb_node_name(s->c, &s->c->nodes[ex->best_node]));
    else if (ex->need_gpus > 0 && ex->best_node == UINT32_MAX && ex->largest_free < ex->need_gpus)
        off = app(ex->hint, sizeof ex->hint, off,
                  "No ready %s has %d usable GPUs even when idle: relax the topology "
                  "requirement or make the tasks smaller. ",
                  domain_text(ex->domain), ex->need_gpus);
    if (sched_preempt_for(s, j, ctx, true, &nv) == 0) {
        ex->preemption_helps = true;
        off = app(ex->hint, sizeof ex->hint, off,
                  "Preempting %d lower-priority job(s) would fit it%s. ", nv,
                  s->conf.preemption ? " (preemption is on: it happens at the next cycle)"
                                     : " (preemption is off for this scheduler)");
    }
    if (strcmp(s->conf.profile.name, "spread") == 0 && ex->need_gpus > 1)
        off = app(ex->hint, sizeof ex->hint, off,
                  "The 'spread' policy scatters small jobs over every node; a packing policy "
                  "(pack, fgd or default) keeps whole domains free.");
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
              "\"largest_free\":%d},\"quota_blocked\":%s,\"preemption_helps\":%s,\"best_node\":",
              (double)ex->free_gpu_milli / 1000.0, ex->need_gpus, arb_topo_level_name(ex->domain),
              ex->largest_free, ex->quota_blocked ? "true" : "false",
              ex->preemption_helps ? "true" : "false");
    if (ex->best_node != UINT32_MAX && ex->best_node < s->c->nnodes)
        off = json_str(buf, n, off, arb_node_name(s->c, &s->c->nodes[ex->best_node]));
    else
        off = app(buf, n, off, "null");
    off = app(buf, n, off, ",\"hint\":");
    off = json_str(buf, n, off, ex->hint);
    off = app(buf, n, off, "}");
    return (int)off;
}
