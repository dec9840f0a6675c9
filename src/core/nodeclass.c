/*
 * nodeclass.c: node equivalence classes, the scheduler's index.
 *
 * Two nodes are equivalent when every field a filter or score can read is
 * equal: lifecycle state, report time, capacity and usage, whether it holds
 * a task and how many exclusive ones (the exclusive filter reads no more of
 * the task count: two 1-GPU tasks and one 2-GPU task leave nodes alike;
 * with random ties the count itself, since the draws go class by class and
 * a seeded run must draw as it always did),
 * every GPU (model, memory, usage, topology coordinates, temperature,
 * health), labels other than the topology ones (rack, block, zone), taints
 * and datasets. For a
 * task whose placement cannot depend on node identity, the engine filters,
 * picks and scores one representative per class instead of every node, and
 * then binds to a member of the best class. In a 5,000-node cluster most
 * nodes share a few hundred states at most, so a decision costs O(classes)
 * rather than O(nodes).
 *
 * Classes are kept current incrementally: the engine re-keys the node it
 * has just changed (sched_index_touch); any other change to the cluster
 * bumps cluster.version, and the next sync re-keys exactly the nodes whose
 * node.version moved. Code that writes node fields directly must call
 * arb_node_touch() afterwards (cluster.h).
 *
 * The topology domain indexes (domidx.c) ride on the same re-keying: every
 * node re-keyed here is re-counted there.
 *
 * Invariants: (1) every non-LEFT node is a member of exactly one class;
 * (2) all members of a class are equivalent (node_equiv) to its
 * representative, and sorted by node id (so mem[0] is the lowest);
 * (3) a class with no members is on the free list and not
 * in the hash table, and its summary is not ready; (4) a live class's
 * summary (sum[], what it has room for) is its representative's.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static bool topo_key(const sched_index_t *x, uint32_t key)
{
    return key && (key == x->k_rack || key == x->k_block || key == x->k_zone);
}

static uint64_t mix_res(uint64_t h, const arb_res_t *r)
{
    h = mix(h, (uint64_t)r->gpu_milli);
    h = mix(h, (uint64_t)r->gpu_mem_mib);
    h = mix(h, (uint64_t)r->cpu_milli);
    h = mix(h, (uint64_t)r->mem_bytes);
    for (int i = 0; i < ARB_MAX_EXT; i++)
        h = mix(h, (uint64_t)r->ext[i]);
    return h;
}

static uint64_t node_key(const sched_index_t *x, const arb_node_t *n)
{
    uint64_t h = mix(0, (uint64_t)n->state), acc;

    h = mix(h, (uint64_t)n->report_ns);
    h = mix_res(h, &n->cap);
    h = mix_res(h, &n->used);
    h = mix(h, (uint64_t)n->ngpus);
    h = mix(h, (uint64_t)(x->count_tasks ? n->ntasks : n->ntasks > 0));
    h = mix(h, (uint64_t)n->nexcl);
    for (int i = 0; i < n->ngpus; i++) {
        const arb_gpu_t *g = &n->gpu[i];
        h = mix(h, g->model);
        h = mix(h, (uint64_t)g->mem_mib << 32 | (uint32_t)g->used_milli);
        h = mix(h, (uint64_t)(uint32_t)g->mem_used_mib << 32 | (uint64_t)(uint16_t)g->numa << 16 |
                       (uint64_t)(uint16_t)g->pcie);
        h = mix(h, (uint64_t)(uint16_t)g->nvlink << 32 | (uint64_t)(uint16_t)g->temp_c << 16 |
                       (uint64_t)g->util_pct << 8 | (uint64_t)g->healthy);
    }
    /* Sets: order-independent sums of member hashes. */
    acc = 0;
    for (int i = 0; i < n->nlabels; i++)
        if (!topo_key(x, n->labels[i].key))
            acc += mix(mix(1, n->labels[i].key), n->labels[i].val);
    h = mix(h, acc);
    acc = 0;
    for (int i = 0; i < n->ntaints; i++)
        acc += mix(mix(mix(2, n->taints[i].key), n->taints[i].val), n->taints[i].effect);
    h = mix(h, acc);
    acc = 0;
    for (int i = 0; i < n->ndatasets; i++)
        acc += mix(3, n->datasets[i]);
    h = mix(h, acc);
    for (int k = 0; x->s && k < x->s->conf.profile.nscores; k++)
        if (x->s->conf.profile.score[k].ops->node_key)
            h = mix(h, x->s->conf.profile.score[k].ops->node_key(x->s->pstate[k], n));
    return h | 1; /* never 0: 0 marks a free class slot */
}

static int count_nontopo(const sched_index_t *x, const arb_node_t *n)
{
    int c = 0;
    for (int i = 0; i < n->nlabels; i++)
        c += !topo_key(x, n->labels[i].key);
    return c;
}

/* Exactly the fields node_key hashes. */
static bool node_equiv(const sched_index_t *x, const arb_node_t *a, const arb_node_t *b)
{
    if (a->state != b->state || a->report_ns != b->report_ns || a->ngpus != b->ngpus ||
        (x->count_tasks ? a->ntasks != b->ntasks : (a->ntasks > 0) != (b->ntasks > 0)) ||
        a->nexcl != b->nexcl || memcmp(&a->cap, &b->cap, sizeof a->cap) != 0 ||
        memcmp(&a->used, &b->used, sizeof a->used) != 0 ||
        memcmp(a->gpu, b->gpu, (size_t)a->ngpus * sizeof a->gpu[0]) != 0 ||
        a->ntaints != b->ntaints || a->ndatasets != b->ndatasets ||
        count_nontopo(x, a) != count_nontopo(x, b))
        return false;
    for (int i = 0; i < a->nlabels; i++)
        if (!topo_key(x, a->labels[i].key) &&
            arb_node_label(b, a->labels[i].key) != a->labels[i].val)
            return false;
    for (int i = 0; i < a->ntaints; i++) {
        bool found = false;
        for (int k = 0; k < b->ntaints && !found; k++)
            found = memcmp(&a->taints[i], &b->taints[k], sizeof a->taints[i]) == 0;
        if (!found)
            return false;
    }
    for (int i = 0; i < a->ndatasets; i++)
        if (!arb_node_has_dataset(b, a->datasets[i]))
            return false;
    for (int k = 0; x->s && k < x->s->conf.profile.nscores; k++) {
        const arb_score_ops_t *ops = x->s->conf.profile.score[k].ops;
        if (ops->node_key && ops->node_key(x->s->pstate[k], a) != ops->node_key(x->s->pstate[k], b))
            return false;
    }
    return true;
}

/* What a class has room for, read before its representative is (sched.c):
 * the node's free CPU, memory and GPU milli, its healthy GPUs with nothing
 * on them and the largest free share of a healthy GPU: exactly the counts
 * the fit filter (filters.c, gpu_shortfall) starts from, so a class these
 * cannot hold is one the filters would reject. */
static void summarize(sched_csum_t *m, const arb_node_t *n)
{
    memset(m, 0, sizeof *m);
    m->ready = n->state == ARB_NODE_READY;
    m->share = -1;
    for (int i = 0; i < n->ngpus; i++) {
        int f = 1000 - n->gpu[i].used_milli;
        if (!n->gpu[i].healthy)
            continue;
        m->whole += n->gpu[i].used_milli == 0;
        if (f > m->share)
            m->share = (int16_t)f;
    }
    m->cpu = n->cap.cpu_milli - n->used.cpu_milli;
    m->mem = n->cap.mem_bytes - n->used.mem_bytes;
    m->gpu_milli = n->cap.gpu_milli - n->used.gpu_milli;
}

/* ---- the hash table: class slot by key (linear probing) ------------------ */

static int ht_grow(sched_index_t *x)
{
    uint32_t nsz = x->htsize ? x->htsize * 2 : 256;
    uint32_t *t = calloc(nsz, sizeof *t);
    if (!t)
        return -ENOMEM;
    for (uint32_t i = 0; i < x->htsize; i++) {
        uint32_t c = x->ht[i];
        if (!c)
            continue;
        uint32_t p = (uint32_t)x->cls[c - 1].key & (nsz - 1);
        while (t[p])
            p = (p + 1) & (nsz - 1);
        t[p] = c;
    }
    free(x->ht);
    x->ht = t;
    x->htsize = nsz;
    return 0;
}

static void ht_delete(sched_index_t *x, uint32_t cls)
{
    uint32_t m = x->htsize - 1, p = (uint32_t)x->cls[cls].key & m;
    while (x->ht[p] != cls + 1)
        p = (p + 1) & m;
    /* Backward-shift deletion keeps every probe chain unbroken. */
    for (uint32_t q = (p + 1) & m; x->ht[q]; q = (q + 1) & m) {
        uint32_t home = (uint32_t)x->cls[x->ht[q] - 1].key & m;
        if (((q - home) & m) >= ((q - p) & m)) {
            x->ht[p] = x->ht[q];
            p = q;
        }
    }
    x->ht[p] = 0;
}

/* ---- membership ------------------------------------------------------------ */

/* Position of node in k's sorted member list (or where it would go). */
static uint32_t member_pos(const sched_class_t *k, uint32_t node)
{
    uint32_t lo = 0, hi = k->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (k->mem[mid] < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void leave(sched_index_t *x, uint32_t node)
{
    uint32_t c = x->node_cls[node], pos;
    sched_class_t *k;

    if (c == UINT32_MAX)
        return;
    k = &x->cls[c];
    pos = member_pos(k, node);
    memmove(k->mem + pos, k->mem + pos + 1, (k->n - pos - 1) * sizeof *k->mem);
    k->n--;
    x->node_cls[node] = UINT32_MAX;
    if (k->n == 0) {
        ht_delete(x, c);
        k->key = 0;
        x->sum[c].ready = false;
        k->next_free = x->free_head;
        x->free_head = c;
        x->nlive--;
    } else if (k->rep == node) {
        k->rep = k->mem[0];
    }
}

static int join(sched_index_t *x, const arb_cluster_t *c, uint32_t node)
{
    const arb_node_t *n = &c->nodes[node];
    uint64_t key;
    uint32_t p, cls;
    sched_class_t *k;

    if (n->state == ARB_NODE_LEFT)
        return 0;
    key = node_key(x, n);
    if ((x->nlive + 1) * 2 > x->htsize && ht_grow(x) < 0)
        return -ENOMEM;
    for (p = (uint32_t)key & (x->htsize - 1); x->ht[p]; p = (p + 1) & (x->htsize - 1)) {
        k = &x->cls[x->ht[p] - 1];
        if (k->key == key && node_equiv(x, &c->nodes[k->rep], n))
            goto add;
    }
    /* A new class, in a free slot when there is one. */
    if (x->free_head != UINT32_MAX) {
        cls = x->free_head;
        x->free_head = x->cls[cls].next_free;
    } else {
        if (x->ncls == x->capcls) {
            uint32_t cap = x->capcls ? x->capcls * 2 : 64;
            sched_class_t *v = realloc(x->cls, cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            memset(v + x->capcls, 0, (cap - x->capcls) * sizeof *v);
            x->cls = v;
            sched_csum_t *m = realloc(x->sum, cap * sizeof *m);
            if (!m)
                return -ENOMEM;
            memset(m + x->capcls, 0, (cap - x->capcls) * sizeof *m);
            x->sum = m;
            x->capcls = cap;
        }
        cls = x->ncls++;
    }
    k = &x->cls[cls];
    k->key = key;
    k->rep = node;
    k->n = 0;
    k->picked = k->pick_ok = 0; /* a new state: nothing picked on it yet */
    summarize(&x->sum[cls], n);
    x->ht[p] = cls + 1;
    x->nlive++;
add:
    cls = x->ht[p] - 1;
    k = &x->cls[cls];
    if (k->n == k->cap) {
        uint32_t cap = k->cap ? k->cap * 2 : 4;
        uint32_t *m = realloc(k->mem, cap * sizeof *m);
        if (!m)
            return -ENOMEM;
        k->mem = m;
        k->cap = cap;
    }
    {
        uint32_t pos = member_pos(k, node);
        memmove(k->mem + pos + 1, k->mem + pos, (k->n - pos) * sizeof *k->mem);
        k->mem[pos] = node;
        k->n++;
    }
    x->node_cls[node] = cls;
    return 0;
}

static int rekey(sched_index_t *x, const arb_cluster_t *c, uint32_t node)
{
    leave(x, node);
    x->node_ver[node] = c->nodes[node].version;
    if (join(x, c, node) < 0)
        return -ENOMEM;
    return sched_domidx_node(x, c, node); /* the topology domains, in step */
}

void sched_index_free(sched_index_t *x)
{
    for (uint32_t i = 0; i < x->ncls; i++)
        free(x->cls[i].mem);
    free(x->cls);
    free(x->sum);
    free(x->ht);
    free(x->node_cls);
    free(x->node_ver);
    sched_domidx_free(x);
    memset(x, 0, sizeof *x);
}

static bool ties_at_random(const arb_sched_t *s)
{
    return s->conf.profile.random_ties;
}

int sched_index_sync(arb_sched_t *s)
{
    sched_index_t *x = &s->idx;
    const arb_cluster_t *c = s->c;

    if (x->valid && x->count_tasks != ties_at_random(s)) {
        /* The profile's ties changed: re-key every node. */
        for (uint32_t i = 0; i < x->nnodes; i++)
            x->node_ver[i] = c->nodes[i].version - 1;
        x->count_tasks = ties_at_random(s);
        x->seen_version = c->version - 1;
    }
    if (x->valid && x->seen_version == c->version && x->nnodes == c->nnodes)
        return 0;
    if (!x->k_rack) {
        x->k_rack = arb_intern(&s->c->strs, "rack");
        x->k_block = arb_intern(&s->c->strs, "block");
        x->k_zone = arb_intern(&s->c->strs, "zone");
        x->free_head = UINT32_MAX;
        x->s = s;
        x->count_tasks = ties_at_random(s);
    }
    if (c->nnodes > x->nnodes) {
        uint32_t *a = realloc(x->node_cls, c->nnodes * sizeof *a);
        if (a)
            x->node_cls = a;
        uint64_t *v = realloc(x->node_ver, c->nnodes * sizeof *v);
        if (v)
            x->node_ver = v;
        if (!a || !v || sched_domidx_grow(x, x->nnodes, c->nnodes) < 0) {
            x->valid = false;
            return -ENOMEM;
        }
        for (uint32_t i = x->nnodes; i < c->nnodes; i++) {
            x->node_cls[i] = UINT32_MAX;
            x->node_ver[i] = c->nodes[i].version - 1; /* forces a key below */
        }
        x->nnodes = c->nnodes;
    }
    for (uint32_t i = 0; i < c->nnodes; i++)
        if (x->node_ver[i] != c->nodes[i].version || x->node_cls[i] == UINT32_MAX) {
            if (c->nodes[i].state == ARB_NODE_LEFT && x->node_cls[i] == UINT32_MAX) {
                x->node_ver[i] = c->nodes[i].version;
                continue;
            }
            if (rekey(x, c, i) < 0) {
                x->valid = false;
                return -ENOMEM;
            }
        }
    x->seen_version = c->version;
    x->valid = true;
    return 0;
}

void sched_index_touch(arb_sched_t *s, uint32_t node, uint64_t version_before)
{
    sched_index_t *x = &s->idx;

    /* A node added since the last sync is not in the index yet: the next
     * sync keys it (the cluster's version moved when it was added). */
    if (!x->valid || node >= x->nnodes)
        return;
    if (rekey(x, s->c, node) < 0) {
        x->valid = false;
        return;
    }
    /* Still current only if nothing else changed the cluster meanwhile. */
    if (x->seen_version == version_before)
        x->seen_version = s->c->version;
}

int sched_index_check(const arb_sched_t *s)
{
    const sched_index_t *x = &s->idx;

    if (!x->valid || x->seen_version != s->c->version)
        return 0; /* stale by design until the next sync */
    for (uint32_t i = 0; i < x->ncls; i++) {
        const sched_class_t *k = &x->cls[i];
        sched_csum_t sm;
        if (!k->key) {
            if (x->sum[i].ready)
                return -EFAULT;
            continue;
        }
        summarize(&sm, &s->c->nodes[k->rep]);
        if (memcmp(&sm, &x->sum[i], sizeof sm) != 0)
            return -EFAULT;
        for (uint32_t m = 0; m < k->n; m++) {
            if (x->node_cls[k->mem[m]] != i || (m > 0 && k->mem[m - 1] >= k->mem[m]))
                return -EFAULT;
            if (!node_equiv(x, &s->c->nodes[k->rep], &s->c->nodes[k->mem[m]]))
                return -EDOM;
        }
    }
    for (uint32_t i = 0; i < s->c->nnodes; i++)
        if (s->c->nodes[i].state != ARB_NODE_LEFT && x->node_cls[i] == UINT32_MAX)
            return -ENOENT;
    return sched_domidx_check(s);
}
