/*
 * cluster.c: nodes, GPUs, labels, taints and datasets, the node lifecycle,
 * and the one place where allocations are charged (arb_node_alloc), so the
 * capacity invariants of cluster.h hold on every code path.
 */
#include <stdlib.h>
#include <string.h>

#include "arbiter/cluster.h"

void arb_cluster_init(arb_cluster_t *c)
{
    memset(c, 0, sizeof *c);
    arb_strtab_init(&c->strs);
    arb_intern(&c->strs, "default"); /* id 1 */
}

void arb_cluster_free(arb_cluster_t *c)
{
    for (uint32_t i = 0; i < c->nnodes; i++) {
        free(c->nodes[i].labels);
        free(c->nodes[i].taints);
        free(c->nodes[i].datasets);
    }
    free(c->nodes);
    arb_strtab_free(&c->strs);
    memset(c, 0, sizeof *c);
}

arb_node_t *arb_cluster_find_node(arb_cluster_t *c, const char *name)
{
    uint32_t id = arb_strtab_find(&c->strs, name);
    if (!id)
        return NULL;
    for (uint32_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].name == id && c->nodes[i].state != ARB_NODE_LEFT)
            return &c->nodes[i];
    return NULL;
}

int arb_cluster_add_node(arb_cluster_t *c, const char *name, arb_node_t **out, arb_err_t *err)
{
    arb_node_t *n;

    if (!name || !*name)
        return arb_errf(err, -EINVAL, "node name is empty; give every node a unique name");
    if (arb_cluster_find_node(c, name))
        return arb_errf(err, -EEXIST, "node '%s' already exists; node names must be unique", name);
    if (c->nnodes == c->capnodes) {
        uint32_t cap = c->capnodes ? c->capnodes * 2 : 64;
        arb_node_t *nodes = realloc(c->nodes, cap * sizeof *nodes);
        if (!nodes)
            return arb_errf(err, -ENOMEM, "out of memory adding node '%s'", name);
        c->nodes = nodes;
        c->capnodes = cap;
    }
    n = &c->nodes[c->nnodes];
    memset(n, 0, sizeof *n);
    n->id = c->nnodes;
    n->name = arb_intern(&c->strs, name);
    if (!n->name)
        return arb_errf(err, -ENOMEM, "out of memory adding node '%s'", name);
    n->state = ARB_NODE_READY;
    c->nnodes++;
    c->version++;
    if (out)
        *out = n;
    return 0;
}

const char *arb_node_name(const arb_cluster_t *c, const arb_node_t *n)
{
    return arb_str(&c->strs, n->name);
}

int arb_node_add_gpu(arb_cluster_t *c, arb_node_t *n, const char *model, int32_t mem_mib, int numa,
                     int pcie, int nvlink, arb_err_t *err)
{
    arb_gpu_t *g;

    if (n->ngpus >= ARB_MAX_GPUS)
        return arb_errf(err, -ENOSPC, "node '%s': more than %d GPUs; the most is %d",
                        arb_node_name(c, n), ARB_MAX_GPUS, ARB_MAX_GPUS);
    if (mem_mib < 0)
        return arb_errf(err, -EINVAL, "node '%s': GPU memory %d MiB is negative",
                        arb_node_name(c, n), mem_mib);
    g = &n->gpu[n->ngpus++];
    memset(g, 0, sizeof *g);
    g->model = model && *model ? arb_intern(&c->strs, model) : 0;
    g->mem_mib = mem_mib;
    g->numa = (int16_t)numa;
    g->pcie = (int16_t)pcie;
    g->nvlink = (int16_t)nvlink;
    g->healthy = 1;
    n->cap.gpu_milli += 1000;
    n->cap.gpu_mem_mib += mem_mib;
    n->version++;
    c->version++;
    return 0;
}

/* Put label key=val at n->labels[i] (i == n->nlabels: a new one). */
static int label_put(arb_cluster_t *c, arb_node_t *n, int i, const char *key, const char *val)
{
    uint32_t k = arb_intern(&c->strs, key), v = arb_intern(&c->strs, val ? val : "");

    if (!k || (!v && val && *val))
        return -ENOMEM;
    if (i == n->nlabels) {
        arb_label_t *l = realloc(n->labels, (n->nlabels + 1) * sizeof *l);
        if (!l)
            return -ENOMEM;
        n->labels = l;
        n->nlabels++;
    }
    n->labels[i].key = k;
    n->labels[i].val = v;
    if (strcmp(key, "rack") == 0)
        n->rack = v;
    else if (strcmp(key, "block") == 0)
        n->block = v;
    else if (strcmp(key, "zone") == 0)
        n->zone = v;
    n->version++;
    c->version++;
    return 0;
}

int arb_node_set_label(arb_cluster_t *c, arb_node_t *n, const char *key, const char *val)
{
    uint32_t k = arb_intern(&c->strs, key);
    int i;

    if (!k)
        return -ENOMEM;
    for (i = 0; i < n->nlabels && n->labels[i].key != k; i++)
        ;
    return label_put(c, n, i, key, val);
}

int arb_node_add_label(arb_cluster_t *c, arb_node_t *n, const char *key, const char *val)
{
    return label_put(c, n, n->nlabels, key, val);
}

uint32_t arb_node_label(const arb_node_t *n, uint32_t key)
{
    for (int i = 0; i < n->nlabels; i++)
        if (n->labels[i].key == key)
            return n->labels[i].val;
    return 0;
}

int arb_node_add_taint(arb_cluster_t *c, arb_node_t *n, const char *key, const char *val,
                       arb_taint_effect_t effect)
{
    arb_taint_t *t = realloc(n->taints, (n->ntaints + 1) * sizeof *t);
    if (!t)
        return -ENOMEM;
    n->taints = t;
    t[n->ntaints].key = arb_intern(&c->strs, key);
    t[n->ntaints].val = val && *val ? arb_intern(&c->strs, val) : 0;
    t[n->ntaints].effect = effect;
    n->ntaints++;
    n->version++;
    c->version++;
    return 0;
}

int arb_node_add_dataset(arb_cluster_t *c, arb_node_t *n, const char *dataset)
{
    uint32_t *d = realloc(n->datasets, (n->ndatasets + 1) * sizeof *d);
    if (!d)
        return -ENOMEM;
    n->datasets = d;
    d[n->ndatasets++] = arb_intern(&c->strs, dataset);
    n->version++;
    c->version++;
    return 0;
}

bool arb_node_has_dataset(const arb_node_t *n, uint32_t dataset)
{
    for (int i = 0; i < n->ndatasets; i++)
        if (n->datasets[i] == dataset)
            return true;
    return false;
}

void arb_node_touch(arb_cluster_t *c, arb_node_t *n)
{
    n->version++;
    c->version++;
}

static const char *const node_state_names[] = {"Ready", "NotReady", "Draining", "Left"};

const char *arb_node_state_name(arb_node_state_t s)
{
    return (unsigned)s <= ARB_NODE_LEFT ? node_state_names[s] : "?";
}

int arb_node_state_parse(const char *s, arb_node_state_t *out)
{
    for (int i = 0; i <= ARB_NODE_LEFT; i++)
        if (strcmp(s, node_state_names[i]) == 0) {
            *out = (arb_node_state_t)i;
            return 0;
        }
    return -EINVAL;
}

/* The arrows of the lifecycle diagram in cluster.h: allowed[from][to]. */
static const bool node_allowed[4][4] = {
    /*               READY  NOT_READY DRAINING LEFT */
    /* READY     */ {false, true, true, true},
    /* NOT_READY */ {true, false, true, true},
    /* DRAINING  */ {true, false, false, true},
    /* LEFT      */ {false, false, false, false},
};

int arb_node_transition(arb_cluster_t *c, arb_node_t *n, arb_node_state_t to, arb_err_t *err)
{
    if ((unsigned)to > ARB_NODE_LEFT || !node_allowed[n->state][to])
        return arb_errf(err, -EPERM, "node cannot go from %s to %s", arb_node_state_name(n->state),
                        arb_node_state_name(to));
    n->state = to;
    n->version++;
    c->version++;
    return 0;
}

int arb_node_free_gpus(const arb_node_t *n)
{
    int f = 0;
    for (int i = 0; i < n->ngpus; i++)
        f += n->gpu[i].healthy && n->gpu[i].used_milli == 0;
    return f;
}

int arb_node_nvlink_largest(const arb_node_t *n, uint32_t usable, int16_t *dom)
{
    int best = 0;
    for (int i = 0; i < n->ngpus; i++) {
        int f = 0;
        if (n->gpu[i].nvlink < 0) { /* no NVLink: a domain of its own */
            f = (usable >> i) & 1;
        } else {
            bool seen = false;
            for (int k = 0; k < i && !seen; k++)
                seen = n->gpu[k].nvlink == n->gpu[i].nvlink;
            if (seen)
                continue;
            for (int k = i; k < n->ngpus; k++)
                f += n->gpu[k].nvlink == n->gpu[i].nvlink && ((usable >> k) & 1);
        }
        if (f > best) {
            best = f;
            if (dom)
                *dom = n->gpu[i].nvlink;
        }
    }
    return best;
}

int arb_node_largest_nvlink_free(const arb_node_t *n)
{
    uint32_t usable = 0;
    for (int i = 0; i < n->ngpus; i++)
        usable |= (uint32_t)(n->gpu[i].healthy && n->gpu[i].used_milli == 0) << i;
    return arb_node_nvlink_largest(n, usable, NULL);
}

int arb_node_alloc(arb_cluster_t *c, const arb_res_t *req, const arb_task_alloc_t *a,
                   arb_err_t *err)
{
    arb_node_t *n;
    arb_res_t add = *req;
    int ng = 0;

    if (a->node >= c->nnodes)
        return arb_errf(err, -EINVAL, "allocation names node %u; the cluster has %u", a->node,
                        c->nnodes);
    n = &c->nodes[a->node];
    if (a->gpu_mask >> n->ngpus)
        return arb_errf(err, -EINVAL, "allocation names GPUs beyond node '%s' (%d GPUs)",
                        arb_node_name(c, n), n->ngpus);
    if (a->gpu_mask && (a->gpu_milli <= 0 || a->gpu_milli > 1000))
        return arb_errf(err, -EINVAL, "allocation GPU share %d milli is outside 1..1000",
                        a->gpu_milli);
    /* A negative amount would shrink usage below what is really held. */
    if (a->gpu_mem_mib < 0 || req->cpu_milli < 0 || req->mem_bytes < 0)
        return arb_errf(err, -EINVAL, "allocation on node '%s' has a negative amount",
                        arb_node_name(c, n));
    for (int i = 0; i < ARB_MAX_EXT; i++)
        if (req->ext[i] < 0)
            return arb_errf(err, -EINVAL, "allocation on node '%s' has a negative amount",
                            arb_node_name(c, n));
    for (int i = 0; i < n->ngpus; i++) {
        const arb_gpu_t *g = &n->gpu[i];
        if (!(a->gpu_mask & (1u << i)))
            continue;
        if (!g->healthy || g->used_milli + a->gpu_milli > 1000 ||
            (g->mem_mib > 0 && (int64_t)g->mem_used_mib + a->gpu_mem_mib > g->mem_mib))
            return arb_errf(err, -ENOSPC, "node '%s' GPU %d: %d milli and %d MiB would exceed it",
                            arb_node_name(c, n), i, a->gpu_milli, a->gpu_mem_mib);
        ng++;
    }
    add.gpu_milli = (int64_t)ng * a->gpu_milli;
    add.gpu_mem_mib = (int64_t)ng * a->gpu_mem_mib;
    {
        /* Compare with what is left, not used + add, which could overflow.
         * GPU memory is checked per device above (unknown sizes, 0, are not). */
        bool over = add.gpu_milli > n->cap.gpu_milli - n->used.gpu_milli ||
                    add.cpu_milli > n->cap.cpu_milli - n->used.cpu_milli ||
                    add.mem_bytes > n->cap.mem_bytes - n->used.mem_bytes;
        for (int i = 0; i < ARB_MAX_EXT; i++)
            over |= add.ext[i] > n->cap.ext[i] - n->used.ext[i];
        if (over)
            return arb_errf(err, -ENOSPC, "node '%s': the task would exceed its allocatable",
                            arb_node_name(c, n));
    }
    for (int i = 0; i < n->ngpus; i++)
        if (a->gpu_mask & (1u << i)) {
            n->gpu[i].used_milli += a->gpu_milli;
            n->gpu[i].mem_used_mib += a->gpu_mem_mib;
        }
    arb_res_add(&n->used, &add);
    n->ntasks++;
    n->version++;
    c->version++;
    return 0;
}

void arb_node_release(arb_cluster_t *c, const arb_res_t *req, const arb_task_alloc_t *a)
{
    arb_node_t *n = &c->nodes[a->node];
    arb_res_t sub = *req;
    int ng = 0;

    for (int i = 0; i < n->ngpus; i++)
        if (a->gpu_mask & (1u << i)) {
            n->gpu[i].used_milli -= a->gpu_milli;
            n->gpu[i].mem_used_mib -= a->gpu_mem_mib;
            ng++;
        }
    sub.gpu_milli = (int64_t)ng * a->gpu_milli;
    sub.gpu_mem_mib = (int64_t)ng * a->gpu_mem_mib;
    arb_res_sub(&n->used, &sub);
    n->ntasks--;
    n->version++;
    c->version++;
}

void arb_node_recharge(arb_cluster_t *c, const arb_res_t *req, const arb_task_alloc_t *a)
{
    arb_node_t *n = &c->nodes[a->node];
    arb_res_t add = *req;
    int ng = 0;

    for (int i = 0; i < n->ngpus; i++)
        if (a->gpu_mask & (1u << i)) {
            n->gpu[i].used_milli += a->gpu_milli;
            n->gpu[i].mem_used_mib += a->gpu_mem_mib;
            ng++;
        }
    add.gpu_milli = (int64_t)ng * a->gpu_milli;
    add.gpu_mem_mib = (int64_t)ng * a->gpu_mem_mib;
    arb_res_add(&n->used, &add);
    n->ntasks++;
    n->version++;
    c->version++;
}

int arb_cluster_check(const arb_cluster_t *c, arb_err_t *err)
{
    for (uint32_t i = 0; i < c->nnodes; i++) {
        const arb_node_t *n = &c->nodes[i];
        int64_t milli = 0;
        for (int g = 0; g < n->ngpus; g++) {
            const arb_gpu_t *gp = &n->gpu[g];
            if (gp->used_milli < 0 || gp->used_milli > 1000 || gp->mem_used_mib < 0 ||
                (gp->mem_mib > 0 && gp->mem_used_mib > gp->mem_mib))
                return arb_errf(err, -EFAULT, "node '%s' GPU %d over capacity: %d milli, %d MiB",
                                arb_node_name(c, n), g, gp->used_milli, gp->mem_used_mib);
            milli += gp->used_milli;
        }
        if (milli != n->used.gpu_milli)
            return arb_errf(err, -EFAULT, "node '%s': GPU accounting mismatch (%lld vs %lld)",
                            arb_node_name(c, n), (long long)milli, (long long)n->used.gpu_milli);
        arb_res_t capx = n->cap;
        capx.gpu_mem_mib = INT64_MAX;
        if (!arb_res_fits(&n->used, &capx) || n->used.cpu_milli < 0 || n->used.mem_bytes < 0)
            return arb_errf(err, -EFAULT, "node '%s': allocated beyond allocatable",
                            arb_node_name(c, n));
    }
    return 0;
}
