/*
 * sched.c: the placement engine: the scheduler object, job submission, the
 * per-task filter -> pick -> score -> bind step, and gang placement as one
 * transaction with topology domains. The cycle that calls it is cycle.c.
 *
 * Complexity: placing one task filters and scores one representative per
 * node class (nodeclass.c), O(C x P) for C classes and P score plugins, or
 * every node, O(N x P), where classes cannot stand in; a gang confined to a
 * domain tries, in best-fit order, only the domains the domain indexes
 * (domidx.c) say can hold it, O(B + D_fit x tasks x N_d) steps, evaluating
 * a rack's or block's members in groups of one class, rack and block
 * (domain_units). The full listing (list_domains, O(N x GPUs)) remains for
 * conf.full_scan, the reference the indexes are tested against, and for
 * explain. A gang's later tasks, which the topology score rates by where
 * the earlier ones went, are evaluated near/far (near_units): the nodes
 * holding a placed task one by one, the other near ones in groups of one
 * class, rack and block, the rest by class; this assumes an
 * ARB_SCORE_PLACED score reads only whether a node shares a node, rack or
 * block with a placed task. A class summary (nodeclass.c) skips classes
 * that cannot hold the task before their node is read. See
 * docs/complexity.md.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

/* ---- construction ------------------------------------------------------- */

/* The per-cycle scratch arrays, for every node and (raw) every score of
 * the profile in use. Both can grow: nodes join, and the idle-fit trial
 * runs with no score at all (cycle.c) before a cycle that runs them all,
 * so the raw scores are sized by the largest count seen, not the first. */
static int ensure_scratch(arb_sched_t *s)
{
    uint32_t n = s->c->nnodes;
    int ns = s->conf.profile.nscores > 0 ? s->conf.profile.nscores : 1;

    if (n <= s->scratch_nodes && ns <= s->scratch_scores)
        return 0;
    if (n < s->scratch_nodes)
        n = s->scratch_nodes;
    if (ns < s->scratch_scores)
        ns = s->scratch_scores;
    free(s->cand);
    free(s->picks);
    free(s->raw);
    free(s->total);
    s->cand = malloc(n * sizeof *s->cand);
    s->picks = malloc(n * sizeof *s->picks);
    s->raw = malloc((size_t)n * (size_t)ns * sizeof *s->raw);
    s->total = malloc(n * sizeof *s->total);
    if (!s->cand || !s->picks || !s->raw || !s->total) {
        s->scratch_nodes = 0;
        s->scratch_scores = 0;
        return -ENOMEM;
    }
    s->scratch_nodes = n;
    s->scratch_scores = ns;
    return 0;
}

arb_sched_t *arb_sched_new(arb_cluster_t *c, const arb_sched_conf_t *conf, arb_err_t *err)
{
    arb_sched_t *s = calloc(1, sizeof *s);

    if (!s) {
        arb_errf(err, -ENOMEM, "out of memory creating the scheduler");
        return NULL;
    }
    s->c = c;
    s->conf = *conf;
    s->picker = -1;
    if (s->conf.profile.nscores == 0 && arb_profile_lookup("default", &s->conf.profile, err) < 0) {
        free(s);
        return NULL;
    }
    for (int i = 0; i < s->conf.profile.nscores; i++) {
        const arb_score_ops_t *ops = s->conf.profile.score[i].ops;
        if (ops->init)
            s->pstate[i] = ops->init(s);
        if (ops->pick && s->picker < 0)
            s->picker = i;
    }
    s->use_classes = !s->conf.full_scan;
    for (int i = 0; i < s->conf.profile.nscores; i++) {
        unsigned f = s->conf.profile.score[i].ops->flags;
        s->use_classes &= !(f & ARB_SCORE_PERNODE);
        s->placed_dep |= (f & ARB_SCORE_PLACED) != 0;
    }
    return s;
}

void arb_sched_free(arb_sched_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->conf.profile.nscores; i++)
        if (s->conf.profile.score[i].ops->fini)
            s->conf.profile.score[i].ops->fini(s->pstate[i]);
    for (uint32_t i = 0; i < s->njobs; i++)
        arb_job_free(s->jobs[i]);
    free(s->jobs);
    free(s->byid);
    free(s->todo);
    free(s->placed);
    free(s->holders);
    free(s->queues);
    free(s->cand);
    free(s->picks);
    free(s->raw);
    free(s->total);
    free(s->fence);
    free(s->fence_owner);
    free(s->u_node);
    free(s->u_w);
    free(s->u_cls);
    free(s->near_stamp);
    free(s->cls_stamp);
    free(s->cls_near);
    free(s->gk_stamp);
    free(s->gk_cls);
    free(s->gk_rack);
    free(s->gk_block);
    free(s->gk_unit);
    sched_index_free(&s->idx);
    free(s);
}

arb_cluster_t *arb_sched_cluster(arb_sched_t *s)
{
    return s->c;
}

const arb_sched_conf_t *arb_sched_conf(const arb_sched_t *s)
{
    return &s->conf;
}

arb_job_t *arb_sched_job(arb_sched_t *s, uint32_t id)
{
    return id < s->nids ? s->byid[id] : NULL;
}

uint32_t arb_sched_njobs(const arb_sched_t *s)
{
    return s->nids;
}

uint32_t arb_sched_nclasses(const arb_sched_t *s, uint64_t *evaluated)
{
    if (evaluated)
        *evaluated = s->nevaluated;
    return s->idx.nlive;
}

/* Room for need jobs in *v (capacity *cap). 0 or -ENOMEM. */
static int grow_jobs(arb_job_t ***v, uint32_t *cap, uint32_t need)
{
    uint32_t c = *cap ? *cap : 256;
    arb_job_t **p;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    if (!(p = realloc(*v, c * sizeof *p)))
        return -ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

int sched_list_push(arb_job_t ***v, uint32_t *n, uint32_t *cap, arb_job_t *j)
{
    if (grow_jobs(v, cap, *n + 1) < 0)
        return -ENOMEM;
    (*v)[(*n)++] = j;
    return 0;
}

int arb_sched_forget(arb_sched_t *s, arb_job_t *j, arb_err_t *err)
{
    uint32_t lo = 0, hi = s->njobs;

    if (j->state < ARB_JOB_SUCCEEDED || j->nalloc > 0)
        return arb_errf(err, -EPERM, "job '%s' is %s; only an ended job leaves the scheduler",
                        j->name, arb_job_state_name(j->state));
    if (j->id >= s->nids || s->byid[j->id] != j)
        return arb_errf(err, -ENOENT, "job '%s' is not in this scheduler", j->name);
    while (lo < hi) { /* the live array is in id order */
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->jobs[mid]->id < j->id)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&s->jobs[lo], &s->jobs[lo + 1], (size_t)(s->njobs - lo - 1) * sizeof *s->jobs);
    s->njobs--;
    s->byid[j->id] = NULL;
    s->nelastic -= j->elastic;
    sched_claim_drop(j);
    sched_changed(s); /* todo may name it: the next cycle starts over */
    return 0;
}

/* ---- queues ------------------------------------------------------------- */

arb_queue_t *sched_queue_get(arb_sched_t *s, uint32_t name)
{
    for (int i = 0; i < s->nqueues; i++)
        if (s->queues[i].name == name)
            return &s->queues[i];
    return NULL;
}

const arb_queue_t *arb_sched_queue(const arb_sched_t *s, uint32_t name)
{
    return sched_queue_get((arb_sched_t *)s, name);
}

int arb_sched_set_queue(arb_sched_t *s, const arb_queue_t *q, arb_err_t *err)
{
    arb_queue_t *cur = sched_queue_get(s, q->name);

    sched_changed(s);
    if (!q->name)
        return arb_errf(err, -EINVAL, "queue has no name");
    if (q->weight < 0)
        return arb_errf(err, -EINVAL, "queue '%s': weight %g must not be negative",
                        arb_str(&s->c->strs, q->name), q->weight);
    if (!arb_res_nonneg(&q->nominal) || !arb_res_nonneg(&q->borrow_limit))
        return arb_errf(err, -EINVAL,
                        "queue '%s': nominal quota and borrowing limit must not be negative",
                        arb_str(&s->c->strs, q->name));
    if (!cur) {
        arb_queue_t *v = realloc(s->queues, (size_t)(s->nqueues + 1) * sizeof *v);
        if (!v)
            return arb_errf(err, -ENOMEM, "out of memory");
        s->queues = v;
        cur = &s->queues[s->nqueues++];
        memset(cur, 0, sizeof *cur);
    }
    arb_res_t used = cur->used;
    *cur = *q;
    cur->used = used;
    if (cur->weight == 0)
        cur->weight = 1;
    return 0;
}

void sched_queue_charge(arb_sched_t *s, const arb_job_t *j, int sign)
{
    arb_queue_t *q = sched_queue_get(s, j->queue);
    if (!q) {
        arb_queue_t nq = {.name = j->queue, .weight = 1};
        if (arb_sched_set_queue(s, &nq, NULL) < 0)
            return;
        q = sched_queue_get(s, j->queue);
    }
    for (int t = 0; t < j->nalloc; t++) {
        const arb_tgroup_t *g = arb_job_task_group(j, t, NULL);
        if (j->alloc[t].node == ARB_NO_NODE)
            continue;
        if (sign > 0)
            arb_res_add(&q->used, &g->req);
        else
            arb_res_sub(&q->used, &g->req);
    }
}

/* ---- submission ----------------------------------------------------------- */

int arb_sched_submit(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, arb_err_t *err)
{
    if (j->ntasks <= 0 || !j->alloc)
        return arb_errf(err, -EINVAL, "job '%s' was not finalized (arb_job_finalize)", j->name);
    if (j->seq) /* a second submit would queue it twice and free it twice */
        return arb_errf(err, -EEXIST, "job '%s' was already submitted (id %u)", j->name, j->id);
    if (s->nids == UINT32_MAX - 1)
        return arb_errf(err, -ENOSPC, "job '%s': the scheduler ran out of job ids", j->name);
    if (grow_jobs(&s->jobs, &s->capjobs, s->njobs + 1) < 0 ||
        grow_jobs(&s->byid, &s->capids, s->nids + 1) < 0)
        return arb_errf(err, -ENOMEM, "out of memory queueing job '%s'", j->name);
    if (s->settled_ok && sched_list_push(&s->todo, &s->ntodo, &s->captodo, j) < 0)
        return arb_errf(err, -ENOMEM, "out of memory queueing job '%s'", j->name);
    if (!j->queue)
        j->queue = arb_intern(&s->c->strs, "default");
    if (!sched_queue_get(s, j->queue)) {
        arb_queue_t q = {.name = j->queue, .weight = 1};
        int rc = arb_sched_set_queue(s, &q, err);
        if (rc < 0)
            return rc;
    }
    j->id = s->nids;
    j->seq = ++s->seq;
    j->state = ARB_JOB_PENDING;
    j->submit_ns = ctx ? ctx->now_ns : 0;
    j->nalloc = 0;
    s->byid[s->nids++] = j;
    s->jobs[s->njobs++] = j;
    s->nelastic += j->elastic;
    for (int i = 0; i < s->conf.profile.nscores; i++)
        if (s->conf.profile.score[i].ops->observe)
            s->conf.profile.score[i].ops->observe(s->pstate[i], j);
    return 0;
}

/* ---- one task ------------------------------------------------------------- */

bool sched_in_domain(const arb_node_t *n, const sched_dom_t *d)
{
    if (!d)
        return true;
    switch (d->level) {
    case ARB_TOPO_ANY:
        return true;
    case ARB_TOPO_NVLINK:
    case ARB_TOPO_NODE:
        return n->id == d->node;
    case ARB_TOPO_RACK:
        return d->rack ? n->rack == d->rack : n->id == d->node;
    case ARB_TOPO_BLOCK:
        return d->block ? n->block == d->block : n->id == d->node;
    }
    return false;
}

static void normalize_minmax(double *v, int n)
{
    double lo = v[0], hi = v[0];
    for (int i = 1; i < n; i++) {
        if (v[i] < lo)
            lo = v[i];
        if (v[i] > hi)
            hi = v[i];
    }
    for (int i = 0; i < n; i++)
        v[i] = hi > lo ? 100 * (v[i] - lo) / (hi - lo) : 100;
}

bool sched_names_topo_labels(const arb_sched_t *s, const arb_job_t *j)
{
    const sched_index_t *x = &s->idx;

    if (!x->k_rack) /* the index was never synced: the keys are interned there */
        return j->nselector > 0 || j->nrequired > 0 || j->npreferred > 0;
    for (int i = 0; i < j->nselector; i++)
        if (j->selector[i].key == x->k_rack || j->selector[i].key == x->k_block ||
            j->selector[i].key == x->k_zone)
            return true;
    for (int pass = 0; pass < 2; pass++) {
        const arb_aff_term_t *t = pass ? j->preferred : j->required;
        int nt = pass ? j->npreferred : j->nrequired;
        for (int i = 0; i < nt; i++)
            for (int e = 0; e < t[i].nexpr; e++)
                if (t[i].expr[e].key == x->k_rack || t[i].expr[e].key == x->k_block ||
                    t[i].expr[e].key == x->k_zone)
                    return true;
    }
    return false;
}

/* May this task be placed by node class? Not when a score reads where the
 * job's other tasks are, when the task is confined to a domain, or when the
 * job's constraints name the topology labels the class key leaves out. */
static bool class_path_ok(const arb_sched_t *s, const arb_job_t *j, const sched_dom_t *d)
{
    if (!s->use_classes || (d && d->level != ARB_TOPO_ANY))
        return false;
    if (s->placed_dep && j->nalloc > 0)
        return false;
    return !sched_names_topo_labels(s, j);
}

/* The class summary's version of quick_reject and of the fit filter's GPU
 * room (filters.c, gpu_shortfall): false only for a class they reject. */
static inline bool class_may_fit(const sched_csum_t *m, const arb_tgroup_t *g)
{
    return m->ready && g->req.cpu_milli <= m->cpu && g->req.mem_bytes <= m->mem &&
           g->req.gpu_milli <= m->gpu_milli &&
           (g->gpus > 0 ? m->whole >= g->gpus : g->gpu_share <= 0 || m->share >= g->gpu_share);
}

/* A cheap test that implies the filter chain would reject n (not ready, or
 * short of CPU, memory or free GPU capacity in total). Most nodes of a busy
 * cluster fail it, so the full chain runs only on plausible ones. */
static inline bool quick_reject(const arb_tgroup_t *g, const arb_node_t *n)
{
    return n->state != ARB_NODE_READY || g->req.cpu_milli > n->cap.cpu_milli - n->used.cpu_milli ||
           g->req.mem_bytes > n->cap.mem_bytes - n->used.mem_bytes ||
           g->req.gpu_milli > n->cap.gpu_milli - n->used.gpu_milli;
}

/*
 * Best-fit whole GPUs on class u's representative n, remembered in the
 * class (its members are alike, and a class's state never changes while it
 * has members) for the plain shapes: 1..8 whole GPUs, no model list, no
 * device memory asked, no NVLink domain required or given. Of such a task
 * best fit reads only the GPU count (and the profile's thermal limit, kept
 * with the answers). Anything else is picked afresh.
 */
static int class_pick(arb_sched_t *s, uint32_t u, const arb_pctx_t *pc, const arb_node_t *n,
                      int nvlink, arb_pick_t *pk)
{
    const arb_tgroup_t *g = pc->group;
    sched_class_t *k = &s->idx.cls[u];
    int b = g->gpus - 1, lim = s->conf.profile.thermal_limit_c, rc;

    if (g->gpus < 1 || g->gpus > 8 || g->gpu_share > 0 || g->req.gpu_milli <= 0 || nvlink >= 0 ||
        pc->job->nmodels > 0 || g->req.gpu_mem_mib > 0 ||
        (g->topo.level == ARB_TOPO_NVLINK && g->topo.required))
        return sched_pick_bestfit(pc, n, nvlink, pk);
    if (k->pick_lim != lim) {
        k->picked = k->pick_ok = 0;
        k->pick_lim = lim;
    }
    if (k->picked >> b & 1) {
        memset(pk, 0, sizeof *pk);
        if (!(k->pick_ok >> b & 1))
            return -ENOSPC;
        pk->gpu_mask = k->pick[b];
        pk->gpu_milli = 1000;
        return 0;
    }
    rc = sched_pick_bestfit(pc, n, nvlink, pk);
    if (rc == 0 && pk->gpu_milli == 1000) { /* what the replay above makes */
        k->picked |= (uint8_t)(1u << b);
        k->pick_ok |= (uint8_t)(1u << b);
        k->pick[b] = pk->gpu_mask;
    } else if (rc == -ENOSPC) {
        k->picked |= (uint8_t)(1u << b);
    }
    return rc;
}

int sched_bind_task(arb_sched_t *s, arb_job_t *j, int t, const arb_task_alloc_t *a)
{
    const arb_tgroup_t *g = arb_job_task_group(j, t, NULL);
    uint64_t before = s->c->version;
    int rc;

    if (a->node == ARB_NO_NODE) { /* an ended task's slot: nothing to charge */
        j->alloc[t] = *a;
        return 0;
    }
    rc = arb_node_alloc(s->c, &g->req, a, NULL);

    if (rc < 0)
        return rc;
    s->c->nodes[a->node].nexcl += j->exclusive;
    j->alloc[t] = *a;
    for (int k = 0; k < s->conf.profile.nscores; k++)
        if (s->conf.profile.score[k].ops->bound)
            s->conf.profile.score[k].ops->bound(s->pstate[k], s->c, j, t, a, +1);
    sched_index_touch(s, a->node, before);
    return 0;
}

void sched_restore_task(arb_sched_t *s, arb_job_t *j, int t, const arb_task_alloc_t *a)
{
    const arb_tgroup_t *g = arb_job_task_group(j, t, NULL);
    uint64_t before = s->c->version;

    j->alloc[t] = *a;
    if (a->node == ARB_NO_NODE)
        return;
    arb_node_recharge(s->c, &g->req, a);
    s->c->nodes[a->node].nexcl += j->exclusive;
    for (int k = 0; k < s->conf.profile.nscores; k++)
        if (s->conf.profile.score[k].ops->bound)
            s->conf.profile.score[k].ops->bound(s->pstate[k], s->c, j, t, a, +1);
    sched_index_touch(s, a->node, before);
}

void sched_release_task(arb_sched_t *s, arb_job_t *j, int t)
{
    const arb_tgroup_t *g = arb_job_task_group(j, t, NULL);
    uint64_t before = s->c->version;

    if (j->alloc[t].node == ARB_NO_NODE)
        return;
    arb_node_release(s->c, &g->req, &j->alloc[t]);
    s->c->nodes[j->alloc[t].node].nexcl -= j->exclusive;
    for (int k = 0; k < s->conf.profile.nscores; k++)
        if (s->conf.profile.score[k].ops->bound)
            s->conf.profile.score[k].ops->bound(s->pstate[k], s->c, j, t, &j->alloc[t], -1);
    sched_index_touch(s, j->alloc[t].node, before);
}

/* Room for n units and the per-node and per-class marks. 0 or -ENOMEM. */
static int ensure_units(arb_sched_t *s, uint32_t n)
{
    const sched_index_t *x = &s->idx;

    if (n > s->capu) {
        uint32_t *a = realloc(s->u_node, n * sizeof *a);
        if (a)
            s->u_node = a;
        uint32_t *b = realloc(s->u_w, n * sizeof *b);
        if (b)
            s->u_w = b;
        uint32_t *c = realloc(s->u_cls, n * sizeof *c);
        if (c)
            s->u_cls = c;
        if (!a || !b || !c)
            return -ENOMEM;
        s->capu = n;
    }
    if (s->c->nnodes > s->capnear) {
        uint32_t *a = realloc(s->near_stamp, s->c->nnodes * sizeof *a);
        if (!a)
            return -ENOMEM;
        memset(a + s->capnear, 0, (s->c->nnodes - s->capnear) * sizeof *a);
        s->near_stamp = a;
        s->capnear = s->c->nnodes;
    }
    if (x->ncls > s->capcs) {
        uint32_t *a = realloc(s->cls_stamp, x->ncls * sizeof *a);
        if (a)
            s->cls_stamp = a;
        uint32_t *b = realloc(s->cls_near, x->ncls * sizeof *b);
        if (b)
            s->cls_near = b;
        if (!a || !b)
            return -ENOMEM;
        memset(a + s->capcs, 0, (x->ncls - s->capcs) * sizeof *a);
        s->capcs = x->ncls;
    }
    return 0;
}

/* Count node among its class's near members (once per stamp). */
static void near_mark(arb_sched_t *s, uint32_t node)
{
    uint32_t k = s->idx.node_cls[node];

    s->near_stamp[node] = s->stamp;
    if (k != UINT32_MAX) {
        if (s->cls_stamp[k] != s->stamp) {
            s->cls_stamp[k] = s->stamp;
            s->cls_near[k] = 0;
        }
        s->cls_near[k]++;
    }
}

static int near_add(arb_sched_t *s, uint32_t node, uint32_t *nu)
{
    if (s->near_stamp[node] == s->stamp)
        return 0;
    near_mark(s, node);
    if (*nu >= s->capu && ensure_units(s, s->capu * 2 + 64) < 0)
        return -ENOMEM;
    s->u_node[*nu] = node;
    s->u_w[*nu] = 1;
    s->u_cls[*nu] = UINT32_MAX;
    (*nu)++;
    return 0;
}

/* The group of near nodes that share class k, rack domain r and block
 * domain b (racks and blocks as domidx.c numbers them): the unit that
 * stands for them, or a new one. Open addressing over gk_*, cleared by
 * stamp; sized to hold every node. */
static int near_group(arb_sched_t *s, uint32_t node, uint32_t *nu)
{
    const sched_index_t *x = &s->idx;
    uint32_t k = x->node_cls[node], r = x->dl[0].node_dom[node], b = x->dl[1].node_dom[node];
    uint32_t m = s->gk_size - 1, p = (uint32_t)((k * 0x9e3779b1u) ^ (r * 0x85ebca6bu) ^ b) & m;

    near_mark(s, node);
    for (; s->gk_stamp[p] == s->stamp; p = (p + 1) & m)
        if (s->gk_cls[p] == k && s->gk_rack[p] == r && s->gk_block[p] == b) {
            uint32_t u = s->gk_unit[p];
            s->u_w[u]++;
            if (node < s->u_node[u])
                s->u_node[u] = node;
            return 0;
        }
    if (*nu >= s->capu && ensure_units(s, s->capu * 2 + 64) < 0)
        return -ENOMEM;
    s->gk_stamp[p] = s->stamp;
    s->gk_cls[p] = k;
    s->gk_rack[p] = r;
    s->gk_block[p] = b;
    s->gk_unit[p] = *nu;
    s->u_node[*nu] = node;
    s->u_w[*nu] = 1;
    s->u_cls[*nu] = UINT32_MAX;
    (*nu)++;
    return 0;
}

/* Room for the near groups' table: twice the nodes, a power of two. */
static int ensure_groups(arb_sched_t *s)
{
    uint32_t sz = 64;

    while (sz < 2 * s->c->nnodes)
        sz *= 2;
    if (sz <= s->gk_size)
        return 0;
    free(s->gk_stamp);
    free(s->gk_cls);
    free(s->gk_rack);
    free(s->gk_block);
    free(s->gk_unit);
    s->gk_stamp = calloc(sz, sizeof *s->gk_stamp);
    s->gk_cls = malloc(sz * sizeof *s->gk_cls);
    s->gk_rack = malloc(sz * sizeof *s->gk_rack);
    s->gk_block = malloc(sz * sizeof *s->gk_block);
    s->gk_unit = malloc(sz * sizeof *s->gk_unit);
    s->gk_size = sz;
    if (!s->gk_stamp || !s->gk_cls || !s->gk_rack || !s->gk_block || !s->gk_unit) {
        s->gk_size = 0;
        return -ENOMEM;
    }
    return 0;
}

/* A new mark for near_stamp, cls_stamp and gk_stamp. */
static void next_stamp(arb_sched_t *s)
{
    if (++s->stamp == 0) { /* wrapped: clear the marks */
        memset(s->near_stamp, 0, s->capnear * sizeof *s->near_stamp);
        memset(s->cls_stamp, 0, s->capcs * sizeof *s->cls_stamp);
        if (s->gk_stamp)
            memset(s->gk_stamp, 0, s->gk_size * sizeof *s->gk_stamp);
        s->stamp = 1;
    }
}

/*
 * The units to evaluate a task of j on when a score reads j's placed
 * tasks (topology: the same node, rack or block as one of them) and the
 * classes cannot stand in for every node: each node holding a placed task
 * on its own; the other nodes near one (sharing its rack or block) in
 * groups of one class, rack and block, through their lowest member (they
 * stand alike to every placed task, so they score alike; with random ties
 * each on its own, so that a draw can land on any of them); and each class
 * through its lowest member that is not near (all of its far members score
 * alike), weighing as many nodes as it has far members. The near nodes come
 * from the domain indexes' member lists, and only their ids, classes and
 * domains are read: O(T + near + C) instead of O(N) node evaluations.
 * Returns the unit count, or -ENOMEM / -ENOENT (no index: scan every node).
 */
static int near_units(arb_sched_t *s, const arb_job_t *j, bool rnd)
{
    sched_index_t *x = &s->idx;
    uint32_t nu = 0;

    if (ensure_units(s, x->ncls + 64) < 0 || (!rnd && ensure_groups(s) < 0))
        return -ENOMEM;
    next_stamp(s);
    /* The placed tasks' nodes first, so that none joins a group (with
     * random ties: in the order of old, which the draws follow). */
    for (int t = 0; t < j->nalloc && !rnd; t++) {
        uint32_t o = j->alloc[t].node;
        if (o != ARB_NO_NODE && o < x->nnodes && near_add(s, o, &nu) < 0)
            return -ENOMEM;
    }
    for (int t = 0; t < j->nalloc; t++) {
        uint32_t o = j->alloc[t].node;
        const arb_node_t *on;
        if (o == ARB_NO_NODE || o >= x->nnodes)
            continue;
        on = &s->c->nodes[o];
        if (rnd && near_add(s, o, &nu) < 0)
            return -ENOMEM;
        for (int lv = 0; lv < 2; lv++) {
            uint32_t key = lv == 0 ? on->rack : on->block, dom;
            if (!key || (dom = x->dl[lv].node_dom[o]) == UINT32_MAX)
                continue;
            const sched_dent_t *e = &x->dl[lv].d[dom];
            for (uint32_t m = 0; m < e->n; m++) {
                uint32_t node = e->mem[m];
                if (s->near_stamp[node] == s->stamp)
                    continue;
                if ((rnd ? near_add(s, node, &nu) : near_group(s, node, &nu)) < 0)
                    return -ENOMEM;
            }
        }
    }
    for (uint32_t u = 0; u < x->ncls; u++) {
        const sched_class_t *k = &x->cls[u];
        uint32_t nnear = s->cls_stamp[u] == s->stamp ? s->cls_near[u] : 0, m = 0;
        if (!k->key || nnear >= k->n)
            continue;
        while (s->near_stamp[k->mem[m]] == s->stamp)
            m++;
        if (nu >= s->capu && ensure_units(s, s->capu * 2 + 64) < 0)
            return -ENOMEM;
        s->u_node[nu] = k->mem[m];
        s->u_w[nu] = k->n - nnear;
        s->u_cls[nu] = u;
        nu++;
    }
    return (int)nu;
}

/*
 * The units to evaluate a task of j on inside domain d, whose members are
 * memb: each member holding one of j's placed tasks on its own, the other
 * members in groups of one class, rack and block through their lowest
 * member, as near_units groups near nodes (they score alike whatever the
 * scores read of the placed tasks). A gang's task in a rack of 32 nodes is
 * then evaluated on a few groups rather than 32 nodes. Deterministic ties
 * only (a random draw must be able to land on any member). Returns the unit
 * count or -ENOMEM.
 */
static int domain_units(arb_sched_t *s, const arb_job_t *j, const sched_dom_t *d,
                        const uint32_t *memb, uint32_t nmemb)
{
    uint32_t nu = 0;

    if (ensure_units(s, 64) < 0 || ensure_groups(s) < 0)
        return -ENOMEM;
    next_stamp(s);
    for (int t = 0; t < j->nalloc; t++) {
        uint32_t o = j->alloc[t].node;
        if (o != ARB_NO_NODE && o < s->idx.nnodes && sched_in_domain(&s->c->nodes[o], d) &&
            near_add(s, o, &nu) < 0)
            return -ENOMEM;
    }
    for (uint32_t m = 0; m < nmemb; m++)
        if (s->near_stamp[memb[m]] != s->stamp && near_group(s, memb[m], &nu) < 0)
            return -ENOMEM;
    return (int)nu;
}

int sched_place_task(arb_sched_t *s, arb_job_t *j, int t, const sched_dom_t *d,
                     const arb_ctx_t *ctx)
{
    const arb_profile_t *p = &s->conf.profile;
    arb_pctx_t pc = {.sched = s, .cluster = s->c, .ctx = ctx, .job = j};
    int gi, ncand = 0, ns = p->nscores, best = -1;
    int nvlink = d && d->level == ARB_TOPO_NVLINK ? d->nvlink : -1;
    uint64_t nties = 0;
    bool by_class, near = false;
    uint32_t nunits = 0, nmemb = 0;
    const uint32_t *memb = NULL;

    pc.group = arb_job_task_group(j, t, &gi);
    if (!pc.group || ensure_scratch(s) < 0)
        return -ENOMEM;
    /* Reserved nodes (cycle.c) are skipped one by one: no classes then. */
    by_class = !s->fence_on && s->use_classes && sched_index_sync(s) == 0 && class_path_ok(s, j, d);
    /* A gang's later tasks where a score reads the placed ones: near/far. */
    if (!by_class && !s->fence_on && s->use_classes && s->placed_dep && j->nalloc > 0 &&
        (!d || d->level == ARB_TOPO_ANY) && s->idx.valid && !sched_names_topo_labels(s, j)) {
        int nu = near_units(s, j, p->random_ties && ctx && ctx->rng);
        if (nu >= 0) {
            near = true;
            nunits = (uint32_t)nu;
        }
    }
    /* A node or NVLink domain is one node: scan only it. */
    if (d && !d->members && (d->level == ARB_TOPO_NODE || d->level == ARB_TOPO_NVLINK)) {
        memb = &d->node;
        nmemb = 1;
    } else if (d && d->members) {
        memb = d->members;
        nmemb = d->nmembers;
    }
    /* A domain's members by class (a rack or block), deterministic ties. */
    if (!near && !by_class && memb && nmemb > 2 && !s->fence_on && s->use_classes && s->idx.valid &&
        !(p->random_ties && ctx && ctx->rng) && !sched_names_topo_labels(s, j)) {
        int nu = domain_units(s, j, d, memb, nmemb);
        if (nu >= 0) {
            near = true;
            nunits = (uint32_t)nu;
        }
    }
    if (!near)
        nunits = by_class ? s->idx.ncls : memb ? nmemb : s->c->nnodes;

    /* Filter and pick: once per node, or once per class on its representative. */
    for (uint32_t u = 0; u < nunits; u++) {
        const arb_node_t *n;
        arb_pick_t pk;
        int rc;

        if (near) {
            uint32_t k = s->idx.node_cls[s->u_node[u]];
            if (k != UINT32_MAX && !class_may_fit(&s->idx.sum[k], pc.group))
                continue;
            n = &s->c->nodes[s->u_node[u]];
        } else if (by_class) {
            if (!class_may_fit(&s->idx.sum[u], pc.group))
                continue;
            n = &s->c->nodes[s->idx.cls[u].rep];
        } else {
            n = &s->c->nodes[memb ? memb[u] : u];
            if (!sched_in_domain(n, d) ||
                (s->fence_on && n->id < s->nfence && (s->fence[n->id] & s->fence_mask) &&
                 s->fence_owner[n->id] != s->fence_self))
                continue;
        }
        if (quick_reject(pc.group, n))
            continue;
        s->nevaluated += by_class;
        if (sched_filter_node(&pc, n) != ARB_R_OK)
            continue;
        if (pc.group->gpu_share > 0 && s->picker >= 0 && nvlink < 0) {
            pc.state = s->pstate[s->picker];
            rc = p->score[s->picker].ops->pick(&pc, n, &pk);
        } else if (by_class) {
            rc = class_pick(s, u, &pc, n, nvlink, &pk);
        } else {
            rc = sched_pick_bestfit(&pc, n, nvlink, &pk);
        }
        if (rc < 0)
            continue;
        s->cand[ncand] = by_class || near ? u : n->id;
        s->picks[ncand] = pk;
        ncand++;
    }
    if (ncand == 0)
        return -ENOSPC;

    /* Score, normalize, weigh. */
    for (int c = 0; c < ncand; c++)
        s->total[c] = 0;
    for (int k = 0; k < ns && ncand > 1; k++) {
        const arb_score_ops_t *ops = p->score[k].ops;
        double *raw = s->raw + (size_t)k * s->scratch_nodes;
        pc.state = s->pstate[k];
        for (int c = 0; c < ncand; c++) {
            uint32_t node = near       ? s->u_node[s->cand[c]]
                            : by_class ? s->idx.cls[s->cand[c]].rep
                                       : s->cand[c];
            raw[c] = ops->score(&pc, &s->c->nodes[node], &s->picks[c]);
        }
        if (ops->normalize)
            ops->normalize(raw, ncand);
        else
            normalize_minmax(raw, ncand);
        for (int c = 0; c < ncand; c++)
            s->total[c] += p->score[k].weight * raw[c];
    }

    /* Select the maximum. Ties: at random over nodes (a class weighs as
     * many nodes as it has members), or the first candidate. */
    bool rnd = p->random_ties && ctx && ctx->rng;
    uint32_t node = UINT32_MAX, cnode;
    for (int c = 0; c < ncand; c++) {
        uint64_t w = near ? s->u_w[s->cand[c]] : by_class ? s->idx.cls[s->cand[c]].n : 1;
        /* Deterministic ties go to the lowest node id, on both paths alike
         * (a near/far unit's node is its class's lowest far member). */
        cnode = near               ? s->u_node[s->cand[c]]
                : by_class && !rnd ? s->idx.cls[s->cand[c]].mem[0]
                                   : s->cand[c];
        if (best < 0 || s->total[c] > s->total[best] + 1e-9) {
            best = c;
            nties = w;
            node = cnode;
        } else if (s->total[c] >= s->total[best] - 1e-9) {
            /* >=: an exact tie is one at any magnitude (near 1e8, fgd-la's
             * scale, 1e-9 is below half a unit in the last place, so
             * total - 1e-9 == total and > would miss it: the first in
             * iteration order, class or node, would win). */
            nties += w;
            if (rnd ? arb_rng_below(ctx->rng, nties) < w : cnode < node) {
                best = c;
                node = cnode;
            }
        }
    }
    if (by_class && rnd) {
        const sched_class_t *k = &s->idx.cls[s->cand[best]];
        node = k->mem[k->n > 1 ? arb_rng_below(ctx->rng, k->n) : 0];
    } else if (near && rnd && s->u_cls[s->cand[best]] != UINT32_MAX) {
        /* A far member at random: the i-th of the class not near. */
        const sched_class_t *k = &s->idx.cls[s->u_cls[s->cand[best]]];
        uint64_t w = s->u_w[s->cand[best]], i = w > 1 ? arb_rng_below(ctx->rng, w) : 0;
        for (uint32_t m = 0; m < k->n; m++)
            if (s->near_stamp[k->mem[m]] != s->stamp && i-- == 0) {
                node = k->mem[m];
                break;
            }
    }

    arb_task_alloc_t a = {.node = node,
                          .gpu_mask = s->picks[best].gpu_mask,
                          .gpu_milli = s->picks[best].gpu_mask ? s->picks[best].gpu_milli : 0,
                          .gpu_mem_mib = s->picks[best].gpu_mask && pc.group->gpu_share > 0
                                             ? (int32_t)pc.group->req.gpu_mem_mib
                                             : 0};
    /* A filter/pick disagreement fails here; never over-allocate. */
    return sched_bind_task(s, j, t, &a);
}

void sched_unbind(arb_sched_t *s, arb_job_t *j)
{
    while (j->nalloc > 0) {
        sched_release_task(s, j, --j->nalloc);
    }
}

/* ---- gangs and topology domains ------------------------------------------ */

/*
 * The distinct domains at level l with their free whole GPUs and member
 * nodes, in one pass over the nodes (O(N x GPUs)): racks and blocks are
 * found through a small hash of label values; a node without the label is
 * a domain of its own. *out and *members are allocated; the caller frees
 * both. Returns the number of domains or -ENOMEM.
 */
static int list_domains(const arb_sched_t *s, arb_topo_level_t l, dom_cand_t **out,
                        uint32_t **members)
{
    uint32_t nn = s->c->nnodes, hsz = 64, *ht = NULL, *memb = NULL, *dom_of = NULL;
    dom_cand_t *v =
        malloc((size_t)(nn * (l == ARB_TOPO_NVLINK ? ARB_MAX_GPUS : 1) + 1) * sizeof *v);
    int n = 0, rc = -ENOMEM;

    while (hsz < 2 * nn)
        hsz *= 2;
    ht = calloc(hsz, sizeof *ht);
    memb = malloc((size_t)(nn + 1) * sizeof *memb);
    dom_of = malloc((size_t)(nn + 1) * sizeof *dom_of);
    if (!v || !ht || !memb || !dom_of)
        goto out;
    for (uint32_t i = 0; i < nn; i++) {
        const arb_node_t *nd = &s->c->nodes[i];
        sched_dom_t d = {.level = l, .node = i, .nvlink = -1, .rack = nd->rack, .block = nd->block};
        uint32_t key = l == ARB_TOPO_RACK ? nd->rack : l == ARB_TOPO_BLOCK ? nd->block : 0;
        int free_gpus = arb_node_free_gpus(nd);

        if (nd->state == ARB_NODE_LEFT) {
            dom_of[i] = UINT32_MAX;
            continue;
        }
        if (l == ARB_TOPO_NVLINK) {
            for (int g = 0; g < nd->ngpus; g++) {
                bool seen = false;
                int f = 0;
                for (int k = 0; k < g && !seen; k++)
                    seen = nd->gpu[k].nvlink == nd->gpu[g].nvlink && nd->gpu[g].nvlink >= 0;
                if (seen)
                    continue;
                for (int k = g; k < nd->ngpus; k++)
                    f += (k == g ||
                          (nd->gpu[g].nvlink >= 0 && nd->gpu[k].nvlink == nd->gpu[g].nvlink)) &&
                         nd->gpu[k].used_milli == 0 && nd->gpu[k].healthy;
                d.nvlink = nd->gpu[g].nvlink;
                v[n].d = d;
                v[n].free = f;
                n++;
            }
            dom_of[i] = UINT32_MAX; /* the node itself is the member list */
            continue;
        }
        if (key) {
            uint32_t p = (key * 2654435761u) & (hsz - 1);
            while (ht[p] &&
                   (l == ARB_TOPO_RACK ? v[ht[p] - 1].d.rack : v[ht[p] - 1].d.block) != key)
                p = (p + 1) & (hsz - 1);
            if (ht[p]) {
                dom_cand_t *c = &v[ht[p] - 1];
                c->free += free_gpus;
                c->d.nmembers++;
                dom_of[i] = ht[p] - 1;
                continue;
            }
            ht[p] = (uint32_t)n + 1;
        }
        v[n].d = d;
        v[n].d.nmembers = 1;
        v[n].free = free_gpus;
        dom_of[i] = (uint32_t)n;
        n++;
    }
    if (l != ARB_TOPO_NVLINK) {
        /* Member lists: prefix sums over the counts, then fill. */
        uint32_t off = 0;
        for (int k = 0; k < n; k++) {
            uint32_t cnt = v[k].d.nmembers;
            v[k].d.members = (const uint32_t *)(uintptr_t)off; /* offset for now */
            v[k].d.nmembers = 0;
            off += cnt;
        }
        for (uint32_t i = 0; i < nn; i++) {
            if (dom_of[i] == UINT32_MAX)
                continue;
            dom_cand_t *c = &v[dom_of[i]];
            memb[(uintptr_t)c->d.members + c->d.nmembers++] = i;
        }
        for (int k = 0; k < n; k++)
            v[k].d.members = memb + (uintptr_t)v[k].d.members;
    }
    rc = n;
out:
    free(ht);
    free(dom_of);
    if (rc < 0) {
        free(v);
        free(memb);
        return rc;
    }
    *out = v;
    *members = memb;
    return rc;
}

/* Place tasks [t0, t0+cnt) of j (one group) confined to some domain at the
 * group's level: the domain with the fewest free GPUs that holds them all
 * (best fit keeps large domains whole). Appends to j->alloc/nalloc. */
static int place_group_in_domain(arb_sched_t *s, arb_job_t *j, int t0, int cnt,
                                 const arb_tgroup_t *g, const arb_ctx_t *ctx)
{
    dom_cand_t *v;
    uint32_t *memb = NULL;
    /* Leaving out a domain that cannot hold the group skips its failed
     * attempt: with random ties that attempt would have drawn. */
    bool prune = !(s->conf.profile.random_ties && ctx && ctx->rng);
    int n = sched_domidx_list(s, j, g, cnt, prune, &v), need = g->gpus * cnt;

    if (n == -ENOENT) {
        n = list_domains(s, g->topo.level, &v, &memb);
        if (n > 0)
            qsort(v, (size_t)n, sizeof *v, sched_dom_cmp);
    }
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++) {
        int base = j->nalloc, t;
        if (v[i].free < need)
            continue;
        for (t = t0; t < t0 + cnt; t++) {
            if (sched_place_task(s, j, t, &v[i].d, ctx) < 0)
                break;
            j->nalloc++;
        }
        if (t == t0 + cnt) {
            free(v);
            free(memb);
            return 0;
        }
        while (j->nalloc > base) { /* roll back this domain's attempt */
            sched_release_task(s, j, --j->nalloc);
        }
    }
    free(v);
    free(memb);
    return -ENOSPC;
}

/* An elastic job whose required domain holds fewer than all its tasks:
 * the domain with the most free GPUs that holds at least its min, filled
 * with as many tasks as fit (growth later stays in it, elastic.c). */
static int place_elastic_in_domain(arb_sched_t *s, arb_job_t *j, const arb_tgroup_t *g,
                                   const arb_ctx_t *ctx)
{
    dom_cand_t *v;
    uint32_t *memb;
    int n = list_domains(s, g->topo.level, &v, &memb);

    if (n < 0)
        return n;
    qsort(v, (size_t)n, sizeof *v, sched_dom_cmp);
    for (int i = n - 1; i >= 0; i--) { /* the most free first */
        if (v[i].free < g->gpus * j->gang_min)
            break;
        while (j->nalloc < g->replicas && sched_place_task(s, j, j->nalloc, &v[i].d, ctx) == 0)
            j->nalloc++;
        if (j->nalloc >= j->gang_min)
            break;
        while (j->nalloc > 0)
            sched_release_task(s, j, --j->nalloc);
    }
    free(v);
    free(memb);
    return j->nalloc >= j->gang_min && j->nalloc > 0 ? 0 : -ENOSPC;
}

int sched_place_job(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    int t0 = 0;

    j->nalloc = 0;
    for (int gi = 0; gi < j->ngroups; gi++) {
        const arb_tgroup_t *g = &j->groups[gi];
        bool confine =
            g->topo.level >= ARB_TOPO_NODE || (g->topo.level == ARB_TOPO_NVLINK && g->replicas > 1);
        int rc = -ENOSPC;

        if (confine && g->replicas > 1) {
            rc = place_group_in_domain(s, j, t0, g->replicas, g, ctx);
            if (rc < 0 && g->topo.required && j->elastic && j->ngroups == 1)
                rc = place_elastic_in_domain(s, j, g, ctx);
            if (rc < 0 && g->topo.required) {
                if (j->nalloc >= j->gang_min)
                    return 0;
                sched_unbind(s, j);
                return rc;
            }
        }
        if (rc < 0) {
            for (int t = t0; t < t0 + g->replicas; t++) {
                if (sched_place_task(s, j, t, NULL, ctx) < 0) {
                    /* Elastic jobs start once gang_min tasks are bound. */
                    if (j->nalloc >= j->gang_min)
                        return 0;
                    sched_unbind(s, j);
                    return -ENOSPC;
                }
                j->nalloc++;
            }
        }
        t0 += g->replicas;
    }
    return 0;
}

/* How many tasks of group gi would be placed now (for explain). */
static void note_fit(const arb_job_t *j, int t0, int k, uint32_t *nodes, int *counts, int max,
                     int *nout)
{
    *nout = 0;
    for (int t = t0; t < t0 + k; t++) {
        int i = 0;
        while (i < *nout && nodes[i] != j->alloc[t].node)
            i++;
        if (i == *nout && *nout < max) {
            nodes[i] = j->alloc[t].node;
            counts[i] = 0;
            (*nout)++;
        }
        if (i < *nout)
            counts[i]++;
    }
}

int sched_group_fit(arb_sched_t *s, arb_job_t *j, int gi, const arb_ctx_t *ctx, uint32_t *nodes,
                    int *counts, int max, int *nout)
{
    const arb_tgroup_t *g = &j->groups[gi];
    int t0 = 0, best = 0, nalloc = j->nalloc;
    bool confine = g->topo.required && (g->topo.level >= ARB_TOPO_NODE ||
                                        (g->topo.level == ARB_TOPO_NVLINK && g->replicas > 1));

    for (int k = 0; k < gi; k++)
        t0 += j->groups[k].replicas;
    *nout = 0;
    j->nalloc = 0; /* scores that read placed tasks see none */
    if (confine && g->replicas > 1) {
        dom_cand_t *v;
        uint32_t *memb;
        int n = list_domains(s, g->topo.level, &v, &memb);
        for (int i = 0; i < n; i++) {
            int k = 0;
            while (k < g->replicas && sched_place_task(s, j, t0 + k, &v[i].d, ctx) == 0)
                k++;
            if (k > best) {
                best = k;
                note_fit(j, t0, k, nodes, counts, max, nout);
            }
            while (k > 0)
                sched_release_task(s, j, t0 + --k);
        }
        if (n >= 0) {
            free(v);
            free(memb);
        }
    } else {
        while (best < g->replicas && sched_place_task(s, j, t0 + best, NULL, ctx) == 0)
            best++;
        note_fit(j, t0, best, nodes, counts, max, nout);
        for (int k = best - 1; k >= 0; k--)
            sched_release_task(s, j, t0 + k);
    }
    j->nalloc = nalloc;
    return best;
}

/* ---- public placement and the cycle --------------------------------------- */

int sched_bind_job(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    int rc = sched_place_job(s, j, ctx);
    if (rc < 0)
        return rc;
    sched_elastic_trim(s, j); /* an elastic job's tasks beyond its queue's quota */
    j->state = ARB_JOB_PLACED;
    j->start_ns = ctx ? ctx->now_ns : 0;
    j->waiting = false;
    j->yield_to = 0; /* placed again: it yields to nobody any more */
    sched_claim_drop(j);
    j->gang_closed = false;
    j->wait = ARB_WAIT_NONE;
    sched_queue_charge(s, j, +1);
    return 0;
}

int arb_sched_place(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    if (j->state != ARB_JOB_PENDING)
        return -EPERM;
    sched_changed(s);
    return sched_bind_job(s, j, ctx);
}

int arb_sched_restore(arb_sched_t *s, arb_job_t *j, const arb_task_alloc_t *a, int n,
                      const arb_ctx_t *ctx, arb_err_t *err)
{
    if (j->state != ARB_JOB_PENDING)
        return arb_errf(err, -EPERM, "job '%s' is %s; only a pending job can be restored", j->name,
                        arb_job_state_name(j->state));
    if (n < j->gang_min || n > j->ntasks)
        return arb_errf(err, -EINVAL, "job '%s': %d allocations for %d tasks (gang minimum %d)",
                        j->name, n, j->ntasks, j->gang_min);
    sched_changed(s);
    j->nalloc = 0;
    for (int t = 0; t < n; t++) {
        if ((a[t].node >= s->c->nnodes && a[t].node != ARB_NO_NODE) ||
            sched_bind_task(s, j, t, &a[t]) < 0) {
            int rc = arb_errf(err, -ENOSPC,
                              "job '%s' task %d: its recorded place no longer fits (node %u)",
                              j->name, t, a[t].node);
            sched_unbind(s, j);
            return rc;
        }
        j->nalloc = t + 1;
    }
    j->state = ARB_JOB_PLACED;
    j->start_ns = ctx ? ctx->now_ns : 0;
    sched_queue_charge(s, j, +1);
    return 0;
}

bool arb_job_partial_gang(const arb_job_t *j)
{
    return !j->elastic && j->gang_min > 0 && j->gang_min < j->ntasks;
}

int arb_sched_task_done(arb_sched_t *s, arb_job_t *j, int t, arb_err_t *err)
{
    if (!arb_job_partial_gang(j) || (j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING) ||
        t < 0 || t >= j->nalloc || j->alloc[t].node == ARB_NO_NODE)
        return arb_errf(err, -EINVAL,
                        "job '%s' task %d: only a held task of a gang whose gangMin is below "
                        "its size ends on its own",
                        j->name, t);
    sched_changed(s);
    sched_task_charge(s, j, t, -1);
    sched_release_task(s, j, t);
    j->alloc[t] = (arb_task_alloc_t){.node = ARB_NO_NODE};
    return 0;
}

int arb_sched_finish(arb_sched_t *s, arb_job_t *j, arb_job_state_t to, arb_err_t *err)
{
    bool held = j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING;
    int rc;

    /* Only an end or an eviction: PLACED/RUNNING reached here would hold
     * nothing (job.h invariant 1). */
    if (to != ARB_JOB_SUCCEEDED && to != ARB_JOB_FAILED && to != ARB_JOB_CANCELLED &&
        to != ARB_JOB_TIMEOUT && to != ARB_JOB_PREEMPTED)
        return arb_errf(err, -EINVAL,
                        "job '%s': finish takes succeeded, failed, cancelled or preempted, not "
                        "%s",
                        j->name, arb_job_state_name(to));
    rc = arb_job_transition(j, to, err);

    if (rc < 0)
        return rc;
    sched_changed(s);
    if (held) {
        sched_queue_charge(s, j, -1);
        sched_unbind(s, j);
    }
    j->evicting = false; /* whatever was marked for it is settled now */
    j->shrink_to = 0;
    j->waiting = false;
    return 0;
}
