/*
 * filters.c: the filter plugins. Each answers "may node n take one task of
 * this group?" with ARB_R_OK or the reason it may not; the engine runs them
 * in table order and records the first failing reason per node, which is
 * what `explain` counts. Also the GPU eligibility rule and the best-fit,
 * NVLink-local GPU picker, since fit and pick must agree exactly.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

/* ---- node condition and report age ---------------------------------- */

static arb_reason_t f_condition(const arb_pctx_t *pc, const arb_node_t *n)
{
    const arb_profile_t *p = &pc->sched->conf.profile;

    if (n->state == ARB_NODE_NOT_READY || n->state == ARB_NODE_LEFT)
        return ARB_R_NOT_READY;
    if (n->state == ARB_NODE_DRAINING)
        return ARB_R_DRAINING;
    if (p->stale_ns > 0 && pc->ctx && pc->ctx->now_ns - n->report_ns > p->stale_ns)
        return ARB_R_STALE;
    return ARB_R_OK;
}

/* ---- taints and tolerations ------------------------------------------- */

static bool tolerated(const arb_job_t *j, const arb_taint_t *t)
{
    for (int i = 0; i < j->ntolerations; i++) {
        const arb_toleration_t *o = &j->tolerations[i];
        if (o->effect && o->effect != (int)t->effect)
            continue;
        if (o->exists && (o->key == 0 || o->key == t->key))
            return true;
        if (!o->exists && o->key == t->key && o->val == t->val)
            return true;
    }
    return false;
}

int sched_untolerated(const arb_job_t *j, const arb_node_t *n, arb_taint_effect_t e)
{
    int c = 0;
    for (int i = 0; i < n->ntaints; i++)
        c += n->taints[i].effect == e && !tolerated(j, &n->taints[i]);
    return c;
}

int arb_job_untolerated(const arb_job_t *j, const arb_node_t *n, arb_taint_effect_t e)
{
    return sched_untolerated(j, n, e);
}

static arb_reason_t f_taints(const arb_pctx_t *pc, const arb_node_t *n)
{
    return sched_untolerated(pc->job, n, ARB_TAINT_NO_SCHEDULE) ||
                   sched_untolerated(pc->job, n, ARB_TAINT_NO_EXECUTE)
               ? ARB_R_TAINT
               : ARB_R_OK;
}

/* ---- selector and affinity --------------------------------------------- */

static arb_reason_t f_selector(const arb_pctx_t *pc, const arb_node_t *n)
{
    for (int i = 0; i < pc->job->nselector; i++)
        if (arb_node_label(n, pc->job->selector[i].key) != pc->job->selector[i].val)
            return ARB_R_SELECTOR;
    return ARB_R_OK;
}

static bool parse_i64(const char *s, int64_t *v)
{
    char *end;
    long long x;
    if (!*s)
        return false;
    errno = 0;
    x = strtoll(s, &end, 10);
    if (errno || *end)
        return false;
    *v = x;
    return true;
}

static bool expr_matches(const arb_cluster_t *c, const arb_node_t *n, const arb_match_expr_t *e)
{
    uint32_t v = arb_node_label(n, e->key);
    int64_t x;

    switch (e->op) {
    case ARB_OP_IN:
    case ARB_OP_NOT_IN: {
        bool in = false;
        for (int i = 0; i < e->nvals && !in; i++)
            in = v && e->vals[i] == v;
        return e->op == ARB_OP_IN ? in : !in;
    }
    case ARB_OP_EXISTS:
        return v != 0;
    case ARB_OP_DOES_NOT_EXIST:
        return v == 0;
    case ARB_OP_GT:
    case ARB_OP_LT:
        if (!v || !parse_i64(arb_str(&c->strs, v), &x))
            return false;
        return e->op == ARB_OP_GT ? x > e->num : x < e->num;
    }
    return false;
}

bool sched_term_matches(const arb_cluster_t *c, const arb_node_t *n, const arb_aff_term_t *t)
{
    if (t->nexpr == 0)
        return false; /* as in Kubernetes: an empty term matches no node */
    for (int i = 0; i < t->nexpr; i++)
        if (!expr_matches(c, n, &t->expr[i]))
            return false;
    return true;
}

static arb_reason_t f_affinity(const arb_pctx_t *pc, const arb_node_t *n)
{
    if (pc->job->nrequired == 0)
        return ARB_R_OK;
    for (int i = 0; i < pc->job->nrequired; i++)
        if (sched_term_matches(pc->cluster, n, &pc->job->required[i]))
            return ARB_R_OK;
    return ARB_R_AFFINITY;
}

/* ---- GPUs --------------------------------------------------------------- */

static bool model_ok(const arb_job_t *j, const arb_gpu_t *g)
{
    if (j->nmodels == 0)
        return true;
    for (int i = 0; i < j->nmodels; i++)
        if (j->models[i] == g->model)
            return true;
    return false;
}

bool sched_gpu_eligible(const arb_pctx_t *pc, const arb_node_t *n, int i)
{
    const arb_gpu_t *g = &n->gpu[i];
    int lim = pc->sched->conf.profile.thermal_limit_c;

    if (!g->healthy || !model_ok(pc->job, g))
        return false;
    if (lim > 0 && g->temp_c >= lim)
        return false;
    if (g->mem_mib > 0 && pc->group->req.gpu_mem_mib > g->mem_mib - g->mem_used_mib)
        return false;
    return true;
}

static arb_reason_t f_gpu_model(const arb_pctx_t *pc, const arb_node_t *n)
{
    if (pc->group->req.gpu_milli == 0 || pc->job->nmodels == 0)
        return ARB_R_OK;
    for (int i = 0; i < n->ngpus; i++)
        if (model_ok(pc->job, &n->gpu[i]))
            return ARB_R_OK;
    return ARB_R_GPU_MODEL;
}

static arb_reason_t f_thermal(const arb_pctx_t *pc, const arb_node_t *n)
{
    int lim = pc->sched->conf.profile.thermal_limit_c, cool = 0;

    if (pc->group->req.gpu_milli == 0 || lim <= 0)
        return ARB_R_OK;
    for (int i = 0; i < n->ngpus; i++)
        cool += n->gpu[i].temp_c < lim;
    return cool >= (pc->group->gpus ? pc->group->gpus : 1) ? ARB_R_OK : ARB_R_THERMAL;
}

/*
 * GPUs of n with room for one task of pc's group, counted through each
 * condition of sched_gpu_eligible in turn (free share or whole GPU, model,
 * heat, device memory), so the reason names the first condition that leaves
 * fewer than `need`: a node with 8 free GPUs of which 4 are the allowed
 * model is short of the model, not of memory. The last count is exactly the
 * number of GPUs the pickers may take.
 */
static arb_reason_t gpu_shortfall(const arb_pctx_t *pc, const arb_node_t *n, int need)
{
    const arb_tgroup_t *g = pc->group;
    int lim = pc->sched->conf.profile.thermal_limit_c;
    int room = 0, model = 0, cool = 0, mem = 0;

    for (int i = 0; i < n->ngpus; i++) {
        const arb_gpu_t *d = &n->gpu[i];
        bool room_here = g->gpus > 0 ? d->used_milli == 0 : 1000 - d->used_milli >= g->gpu_share;
        if (!d->healthy || !room_here)
            continue;
        room++;
        if (!model_ok(pc->job, d))
            continue;
        model++;
        if (lim > 0 && d->temp_c >= lim)
            continue;
        cool++;
        if (d->mem_mib > 0 && g->req.gpu_mem_mib > d->mem_mib - d->mem_used_mib)
            continue;
        mem++;
    }
    if (room < need) {
        if (g->gpus == 0)
            return ARB_R_GPU_SHARE;
        /* for an NVLink job, the domain is what counts */
        if (g->topo.level == ARB_TOPO_NVLINK && g->topo.required && g->gpus > 1)
            return ARB_R_NVLINK;
        return ARB_R_GPUS;
    }
    if (model < need)
        return ARB_R_GPU_MODEL;
    if (cool < need)
        return ARB_R_THERMAL;
    if (mem < need)
        return ARB_R_GPU_MEM;
    return ARB_R_OK;
}

static arb_reason_t f_fit(const arb_pctx_t *pc, const arb_node_t *n)
{
    const arb_res_t *r = &pc->group->req;

    if (r->cpu_milli > n->cap.cpu_milli - n->used.cpu_milli)
        return ARB_R_CPU;
    if (r->mem_bytes > n->cap.mem_bytes - n->used.mem_bytes)
        return ARB_R_MEM;
    for (int i = 0; i < ARB_MAX_EXT; i++)
        if (r->ext[i] > n->cap.ext[i] - n->used.ext[i])
            return ARB_R_EXT;
    if (pc->group->gpus > 0)
        return gpu_shortfall(pc, n, pc->group->gpus);
    if (pc->group->gpu_share > 0)
        return gpu_shortfall(pc, n, 1);
    return ARB_R_OK;
}

/* Largest number of free, eligible GPUs inside one NVLink domain of n. */
int sched_nvlink_free(const arb_pctx_t *pc, const arb_node_t *n, int16_t *dom)
{
    uint32_t usable = 0;
    for (int i = 0; i < n->ngpus; i++)
        usable |= (uint32_t)(n->gpu[i].used_milli == 0 && sched_gpu_eligible(pc, n, i)) << i;
    return arb_node_nvlink_largest(n, usable, dom);
}

static arb_reason_t f_nvlink(const arb_pctx_t *pc, const arb_node_t *n)
{
    const arb_tgroup_t *g = pc->group;

    if (g->gpus <= 1 || g->topo.level != ARB_TOPO_NVLINK || !g->topo.required)
        return ARB_R_OK;
    return sched_nvlink_free(pc, n, NULL) >= g->gpus ? ARB_R_OK : ARB_R_NVLINK;
}

/* ---- exclusive nodes ------------------------------------------------------ */

/* An exclusive job's task takes only a node with no task on it; nobody
 * joins a node holding one. (n->ntasks, n->nexcl are in the node classes'
 * key, so the rule is the same for every member of a class.) */
static arb_reason_t f_exclusive(const arb_pctx_t *pc, const arb_node_t *n)
{
    if (pc->job->exclusive ? n->ntasks > 0 : n->nexcl > 0)
        return ARB_R_EXCLUSIVE;
    return ARB_R_OK;
}

static const arb_filter_ops_t filter_condition = {"condition", f_condition};
static const arb_filter_ops_t filter_taints = {"taints", f_taints};
static const arb_filter_ops_t filter_selector = {"selector", f_selector};
static const arb_filter_ops_t filter_affinity = {"affinity", f_affinity};
static const arb_filter_ops_t filter_gpu_model = {"gpu-model", f_gpu_model};
static const arb_filter_ops_t filter_thermal = {"thermal", f_thermal};
static const arb_filter_ops_t filter_fit = {"fit", f_fit};
static const arb_filter_ops_t filter_nvlink = {"nvlink", f_nvlink};
static const arb_filter_ops_t filter_exclusive = {"exclusive", f_exclusive};

/* Run order: cheap and decisive first. */
const arb_filter_ops_t *const arb_filters[] = {
    &filter_condition, &filter_taints, &filter_selector, &filter_affinity,  &filter_gpu_model,
    &filter_thermal,   &filter_fit,    &filter_nvlink,   &filter_exclusive, NULL,
};

const arb_filter_ops_t *arb_filter_lookup(const char *name)
{
    for (int i = 0; arb_filters[i]; i++)
        if (strcmp(arb_filters[i]->name, name) == 0)
            return arb_filters[i];
    return NULL;
}

arb_reason_t sched_filter_node(const arb_pctx_t *pc, const arb_node_t *n)
{
    for (int i = 0; arb_filters[i]; i++) {
        arb_reason_t r = arb_filters[i]->filter(pc, n);
        if (r != ARB_R_OK)
            return r;
    }
    return ARB_R_OK;
}

/* ---- the best-fit picker ------------------------------------------------ */

/*
 * Whole GPUs: prefer one NVLink domain, the one with the fewest free GPUs
 * that still holds the task (best fit keeps big domains whole); inside it,
 * take GPUs PCIe switch by switch, fullest switch first. When no single
 * domain holds the task (and NVLink is not required), take the largest
 * domains first so the task spans as few as possible.
 * Shares: the eligible GPU with the least free share that holds it.
 */
int sched_pick_bestfit(const arb_pctx_t *pc, const arb_node_t *n, int nvlink, arb_pick_t *pick)
{
    const arb_tgroup_t *g = pc->group;
    bool ok[ARB_MAX_GPUS];
    int need = g->gpus;

    memset(pick, 0, sizeof *pick);
    if (g->req.gpu_milli == 0)
        return 0;
    if (g->gpu_share > 0) {
        int best = -1, bestfree = 1001;
        for (int i = 0; i < n->ngpus; i++) {
            int f = 1000 - n->gpu[i].used_milli;
            if (f >= g->gpu_share && f < bestfree && sched_gpu_eligible(pc, n, i) &&
                (nvlink < 0 || n->gpu[i].nvlink == nvlink)) {
                best = i;
                bestfree = f;
            }
        }
        if (best < 0)
            return -ENOSPC;
        pick->gpu_mask = (uint16_t)(1u << best);
        pick->gpu_milli = (int16_t)g->gpu_share;
        return 0;
    }
    for (int i = 0; i < n->ngpus; i++)
        ok[i] = n->gpu[i].used_milli == 0 && sched_gpu_eligible(pc, n, i) &&
                (nvlink < 0 || n->gpu[i].nvlink == nvlink);
    pick->gpu_milli = 1000;
    while (need > 0) {
        /* Free count per NVLink domain (GPUs with nvlink -1: singletons). */
        int bestdom = -2, bestcnt = 0, bigdom = -2, bigcnt = 0;
        for (int i = 0; i < n->ngpus; i++) {
            int cnt = 0;
            if (!ok[i])
                continue;
            if (n->gpu[i].nvlink < 0) {
                cnt = 1;
            } else {
                for (int k = 0; k < n->ngpus; k++)
                    cnt += ok[k] && n->gpu[k].nvlink == n->gpu[i].nvlink;
            }
            int dom = n->gpu[i].nvlink < 0 ? -100 - i : n->gpu[i].nvlink;
            if (cnt >= need && (bestdom == -2 || cnt < bestcnt)) {
                bestdom = dom;
                bestcnt = cnt;
            }
            if (cnt > bigcnt) {
                bigdom = dom;
                bigcnt = cnt;
            }
        }
        int dom = bestdom != -2 ? bestdom : bigdom;
        if (dom == -2)
            return -ENOSPC;
        if (bestdom == -2 && g->topo.level == ARB_TOPO_NVLINK && g->topo.required)
            return -ENOSPC;
        /* Take from this domain switch by switch: the PCIe switch with the
         * fewest free GPUs that holds what is left (best fit), else the one
         * with the most (so the task spans as few switches as possible);
         * all of a switch's GPUs before the next. */
        while (need > 0) {
            int bestsw = INT32_MIN, swcnt = 0;
            bool fits = false;
            for (int i = 0; i < n->ngpus; i++) {
                int d = n->gpu[i].nvlink < 0 ? -100 - i : n->gpu[i].nvlink, sw = 0;
                if (!ok[i] || d != dom)
                    continue;
                for (int k = 0; k < n->ngpus; k++) {
                    int dk = n->gpu[k].nvlink < 0 ? -100 - k : n->gpu[k].nvlink;
                    sw += ok[k] && dk == dom && n->gpu[k].pcie == n->gpu[i].pcie;
                }
                bool f = sw >= need;
                if (bestsw == INT32_MIN || (f && !fits) || (f && fits && sw < swcnt) ||
                    (!f && !fits && sw > swcnt)) {
                    bestsw = n->gpu[i].pcie;
                    swcnt = sw;
                    fits = f;
                }
            }
            if (bestsw == INT32_MIN)
                break;
            for (int i = 0; i < n->ngpus && need > 0; i++) {
                int d = n->gpu[i].nvlink < 0 ? -100 - i : n->gpu[i].nvlink;
                if (ok[i] && d == dom && n->gpu[i].pcie == bestsw) {
                    ok[i] = false;
                    pick->gpu_mask |= (uint16_t)(1u << i);
                    need--;
                }
            }
        }
    }
    return 0;
}
