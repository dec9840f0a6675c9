/*
 * domidx.c: topology domain indexes, so that a gang confined to a rack,
 * block, node or NVLink domain visits only the domains that can hold it.
 *
 * Racks and blocks: per level, every domain (one per label value, and a
 * node without the label is a domain of its own) with its members (sorted
 * node ids), its free whole GPUs and its members counted by free GPUs, the
 * domains kept in buckets by free GPUs. The node classes' re-keying
 * (nodeclass.c, on every bind, release and node change) calls
 * sched_domidx_node, so the index is current whenever the classes are:
 * O(levels + log) per change, a sorted insert when a node joins a domain.
 * Listing the domains for a group reads only the buckets with at least the
 * GPUs it needs: O(B + D_fit log D_fit) for B buckets and D_fit domains
 * that pass, against O(N x GPUs) for listing every domain.
 *
 * Nodes and NVLink domains (one node each): the node classes stand in,
 * since every member of a class tries a single-node domain alike (no
 * scoring: one candidate; no random draw). The domains of each class's
 * representative are listed once with its lowest member: O(C x GPUs^2).
 *
 * Either way the order is the full listing's (sched.c, list_domains: fewest
 * free GPUs first, then lowest node id, then NVLink id), and what is left
 * out would have failed its attempt, so decisions are the same as with
 * conf.full_scan (tests/unit/test_domidx.c).
 *
 * Invariants: (1) every non-LEFT node is a member of exactly one domain per
 * level, the one of its label value (its own when unlabeled), and
 * node_free is its free GPU count; (2) a domain's free and hist are the
 * sums over its members; (3) a domain is in bucket[free] at bpos iff it
 * has members.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

#define NONE UINT32_MAX

static uint32_t level_key(const arb_node_t *n, int lv)
{
    return lv == 0 ? n->rack : n->block;
}

int sched_domidx_grow(sched_index_t *x, uint32_t old_nnodes, uint32_t nnodes)
{
    uint8_t *f = realloc(x->node_free, nnodes);

    if (!f)
        return -ENOMEM;
    x->node_free = f;
    for (int lv = 0; lv < 2; lv++) {
        sched_dlevel_t *L = &x->dl[lv];
        uint32_t *a = realloc(L->node_dom, nnodes * sizeof *a);
        if (a)
            L->node_dom = a;
        uint32_t *b = realloc(L->solo, nnodes * sizeof *b);
        if (b)
            L->solo = b;
        if (!a || !b)
            return -ENOMEM;
        for (uint32_t i = old_nnodes; i < nnodes; i++)
            L->node_dom[i] = L->solo[i] = NONE;
    }
    for (uint32_t i = old_nnodes; i < nnodes; i++)
        x->node_free[i] = 0;
    return 0;
}

void sched_domidx_free(sched_index_t *x)
{
    for (int lv = 0; lv < 2; lv++) {
        sched_dlevel_t *L = &x->dl[lv];
        for (uint32_t i = 0; i < L->nd; i++)
            free(L->d[i].mem);
        for (uint32_t i = 0; i < L->nbk; i++)
            free(L->bk[i].v);
        free(L->d);
        free(L->ht);
        free(L->node_dom);
        free(L->solo);
        free(L->bk);
    }
    free(x->node_free);
}

/* ---- buckets by free GPUs ------------------------------------------------- */

static int bucket_add(sched_dlevel_t *L, uint32_t id)
{
    sched_dent_t *e = &L->d[id];
    uint32_t f = (uint32_t)e->free;
    sched_bucket_t *b;

    if (f >= L->nbk) {
        uint32_t nb = L->nbk ? L->nbk : 32;
        while (nb <= f)
            nb *= 2;
        sched_bucket_t *v = realloc(L->bk, nb * sizeof *v);
        if (!v)
            return -ENOMEM;
        memset(v + L->nbk, 0, (nb - L->nbk) * sizeof *v);
        L->bk = v;
        L->nbk = nb;
    }
    b = &L->bk[f];
    if (b->n == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 8;
        uint32_t *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        b->v = v;
        b->cap = cap;
    }
    e->bpos = b->n;
    b->v[b->n++] = id;
    return 0;
}

static void bucket_del(sched_dlevel_t *L, uint32_t id)
{
    sched_bucket_t *b = &L->bk[L->d[id].free];
    uint32_t pos = L->d[id].bpos, last = b->v[--b->n];

    b->v[pos] = last;
    L->d[last].bpos = pos;
}

/* ---- domains ------------------------------------------------------------- */

static int dom_new(sched_dlevel_t *L, uint32_t key, uint32_t *id)
{
    if (L->nd == L->capd) {
        uint32_t cap = L->capd ? L->capd * 2 : 64;
        sched_dent_t *v = realloc(L->d, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        L->d = v;
        L->capd = cap;
    }
    memset(&L->d[L->nd], 0, sizeof L->d[0]);
    L->d[L->nd].key = key;
    *id = L->nd++;
    return 0;
}

/* The domain of label value key (created when new). */
static int dom_of_key(sched_dlevel_t *L, uint32_t key, uint32_t *id)
{
    uint32_t p;

    if ((L->nlabeled + 1) * 2 > L->htsize) {
        uint32_t nsz = L->htsize ? L->htsize * 2 : 64;
        uint32_t *t = calloc(nsz, sizeof *t);
        if (!t)
            return -ENOMEM;
        for (uint32_t i = 0; i < L->htsize; i++) {
            if (!L->ht[i])
                continue;
            for (p = (L->d[L->ht[i] - 1].key * 2654435761u) & (nsz - 1); t[p];)
                p = (p + 1) & (nsz - 1);
            t[p] = L->ht[i];
        }
        free(L->ht);
        L->ht = t;
        L->htsize = nsz;
    }
    for (p = (key * 2654435761u) & (L->htsize - 1); L->ht[p]; p = (p + 1) & (L->htsize - 1))
        if (L->d[L->ht[p] - 1].key == key) {
            *id = L->ht[p] - 1;
            return 0;
        }
    if (dom_new(L, key, id) < 0)
        return -ENOMEM;
    L->ht[p] = *id + 1;
    L->nlabeled++;
    return 0;
}

static uint32_t member_pos(const sched_dent_t *e, uint32_t node)
{
    uint32_t lo = 0, hi = e->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (e->mem[mid] < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int dom_join(sched_dlevel_t *L, uint32_t id, uint32_t node, int f)
{
    sched_dent_t *e = &L->d[id];
    uint32_t pos;

    if (e->n == e->cap) {
        uint32_t cap = e->cap ? e->cap * 2 : 4;
        uint32_t *m = realloc(e->mem, cap * sizeof *m);
        if (!m)
            return -ENOMEM;
        e->mem = m;
        e->cap = cap;
    }
    if (e->n > 0)
        bucket_del(L, id);
    pos = member_pos(e, node);
    memmove(e->mem + pos + 1, e->mem + pos, (e->n - pos) * sizeof *e->mem);
    e->mem[pos] = node;
    e->n++;
    e->free += f;
    e->hist[f]++;
    L->node_dom[node] = id;
    return bucket_add(L, id);
}

static int dom_leave(sched_dlevel_t *L, uint32_t node, int f)
{
    uint32_t id = L->node_dom[node];
    sched_dent_t *e = &L->d[id];
    uint32_t pos = member_pos(e, node);

    bucket_del(L, id);
    memmove(e->mem + pos, e->mem + pos + 1, (e->n - pos - 1) * sizeof *e->mem);
    e->n--;
    e->free -= f;
    e->hist[f]--;
    L->node_dom[node] = NONE;
    return e->n > 0 ? bucket_add(L, id) : 0;
}

static int dom_refree(sched_dlevel_t *L, uint32_t node, int from, int to)
{
    uint32_t id = L->node_dom[node];
    sched_dent_t *e = &L->d[id];

    bucket_del(L, id);
    e->free += to - from;
    e->hist[from]--;
    e->hist[to]++;
    return bucket_add(L, id);
}

int sched_domidx_node(sched_index_t *x, const arb_cluster_t *c, uint32_t node)
{
    const arb_node_t *n = &c->nodes[node];
    bool live = n->state != ARB_NODE_LEFT;
    int f = live ? arb_node_free_gpus(n) : 0, old = x->node_free[node];

    for (int lv = 0; lv < 2; lv++) {
        sched_dlevel_t *L = &x->dl[lv];
        uint32_t key = level_key(n, lv), want = NONE, cur = L->node_dom[node];
        int rc = 0;

        if (live && key) {
            rc = dom_of_key(L, key, &want);
        } else if (live) {
            if (L->solo[node] == NONE)
                rc = dom_new(L, 0, &L->solo[node]);
            want = L->solo[node];
        }
        if (rc < 0)
            return rc;
        if (cur == want) {
            if (cur != NONE && f != old && dom_refree(L, node, old, f) < 0)
                return -ENOMEM;
            continue;
        }
        if (cur != NONE && dom_leave(L, node, old) < 0)
            return -ENOMEM;
        if (want != NONE && dom_join(L, want, node, f) < 0)
            return -ENOMEM;
    }
    x->node_free[node] = (uint8_t)f;
    return 0;
}

int sched_domidx_check(const arb_sched_t *s)
{
    const sched_index_t *x = &s->idx;

    if (!x->valid || x->seen_version != s->c->version)
        return 0; /* stale by design until the next sync */
    for (int lv = 0; lv < 2; lv++) {
        const sched_dlevel_t *L = &x->dl[lv];
        for (uint32_t i = 0; i < s->c->nnodes; i++) {
            const arb_node_t *n = &s->c->nodes[i];
            uint32_t id = L->node_dom[i];
            if (n->state == ARB_NODE_LEFT) {
                if (id != NONE)
                    return -EFAULT;
                continue;
            }
            if (id == NONE || L->d[id].key != level_key(n, lv) ||
                x->node_free[i] != arb_node_free_gpus(n))
                return -ENOENT;
            if (!level_key(n, lv) && L->solo[i] != id)
                return -ENOENT;
        }
        for (uint32_t id = 0; id < L->nd; id++) {
            const sched_dent_t *e = &L->d[id];
            uint32_t hist[ARB_MAX_GPUS + 1] = {0};
            int free = 0;
            for (uint32_t m = 0; m < e->n; m++) {
                if (L->node_dom[e->mem[m]] != id || (m > 0 && e->mem[m - 1] >= e->mem[m]))
                    return -EFAULT;
                free += x->node_free[e->mem[m]];
                hist[x->node_free[e->mem[m]]]++;
            }
            if (free != e->free || memcmp(hist, e->hist, sizeof hist) != 0)
                return -EDOM;
            if (e->n > 0 && ((uint32_t)e->free >= L->nbk || e->bpos >= L->bk[e->free].n ||
                             L->bk[e->free].v[e->bpos] != id))
                return -EDOM;
        }
    }
    return 0;
}

/* ---- listing the domains for a group --------------------------------------- */

int sched_dom_cmp(const void *a, const void *b)
{
    const dom_cand_t *x = a, *y = b;
    if (x->free != y->free)
        return x->free < y->free ? -1 : 1;
    if (x->d.node != y->d.node)
        return x->d.node < y->d.node ? -1 : 1;
    return x->d.nvlink < y->d.nvlink ? -1 : x->d.nvlink > y->d.nvlink;
}

static int push(dom_cand_t **v, int *n, int *cap, const dom_cand_t *c)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        dom_cand_t *p = realloc(*v, (size_t)nc * sizeof *p);
        if (!p)
            return -ENOMEM;
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = *c;
    return 0;
}

/* Racks and blocks: the buckets with at least need free GPUs. */
static int list_labeled(sched_index_t *x, arb_topo_level_t l, const arb_tgroup_t *g, int cnt,
                        bool prune, dom_cand_t **out)
{
    sched_dlevel_t *L = &x->dl[l == ARB_TOPO_RACK ? 0 : 1];
    uint32_t need = (uint32_t)(g->gpus * cnt);
    dom_cand_t *v = NULL;
    int n = 0, cap = 0;

    for (uint32_t f = need; f < L->nbk; f++)
        for (uint32_t k = 0; k < L->bk[f].n; k++) {
            const sched_dent_t *e = &L->d[L->bk[f].v[k]];
            if (prune) { /* each task needs g->gpus free GPUs on one node */
                int room = 0;
                for (int h = g->gpus; h <= ARB_MAX_GPUS && room < cnt; h++)
                    room += (int)e->hist[h] * (h / g->gpus);
                if (room < cnt)
                    continue;
            }
            dom_cand_t c = {.d = {.level = l,
                                  .node = e->mem[0],
                                  .nvlink = -1,
                                  .rack = l == ARB_TOPO_RACK ? e->key : 0,
                                  .block = l == ARB_TOPO_BLOCK ? e->key : 0,
                                  .members = e->mem,
                                  .nmembers = e->n},
                            .free = (int)f};
            if (push(&v, &n, &cap, &c) < 0) {
                free(v);
                return -ENOMEM;
            }
        }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, sched_dom_cmp);
    *out = v;
    return n;
}

/* Nodes and NVLink domains: each class's representative stands for its
 * members; its lowest member is the one listed. */
static int list_by_class(arb_sched_t *s, arb_topo_level_t l, const arb_tgroup_t *g, int cnt,
                         dom_cand_t **out)
{
    const sched_index_t *x = &s->idx;
    int need = g->gpus * cnt, n = 0, cap = 0;
    dom_cand_t *v = NULL;

    for (uint32_t u = 0; u < x->ncls; u++) {
        const sched_class_t *k = &x->cls[u];
        const arb_node_t *nd;
        if (!k->key)
            continue;
        nd = &s->c->nodes[k->rep];
        if (nd->state == ARB_NODE_LEFT)
            continue;
        dom_cand_t c = {.d = {.level = l, .node = k->mem[0], .nvlink = -1}};
        if (l != ARB_TOPO_NVLINK) {
            c.free = arb_node_free_gpus(nd);
            if (c.free >= need && push(&v, &n, &cap, &c) < 0)
                goto nomem;
            continue;
        }
        /* As list_domains counts them: a GPU without NVLink is a domain. */
        for (int gi = 0; gi < nd->ngpus; gi++) {
            bool seen = false;
            int f = 0;
            for (int q = 0; q < gi && !seen; q++)
                seen = nd->gpu[q].nvlink == nd->gpu[gi].nvlink && nd->gpu[gi].nvlink >= 0;
            if (seen)
                continue;
            for (int q = gi; q < nd->ngpus; q++)
                f += (q == gi ||
                      (nd->gpu[gi].nvlink >= 0 && nd->gpu[q].nvlink == nd->gpu[gi].nvlink)) &&
                     nd->gpu[q].used_milli == 0 && nd->gpu[q].healthy;
            c.d.nvlink = nd->gpu[gi].nvlink;
            c.free = f;
            if (f >= need && push(&v, &n, &cap, &c) < 0)
                goto nomem;
        }
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, sched_dom_cmp);
    /* The listing must not point into the classes: attempts re-key nodes. */
    for (int i = 0; i < n; i++) {
        v[i].d.members = NULL;
        v[i].d.nmembers = 1;
    }
    *out = v;
    return n;
nomem:
    free(v);
    return -ENOMEM;
}

int sched_domidx_list(arb_sched_t *s, const arb_job_t *j, const arb_tgroup_t *g, int cnt,
                      bool prune, dom_cand_t **out)
{
    arb_topo_level_t l = g->topo.level;

    if (s->conf.full_scan || g->gpus <= 0 || g->gpu_share > 0 || cnt <= 0)
        return -ENOENT;
    if (l == ARB_TOPO_RACK || l == ARB_TOPO_BLOCK) {
        if (sched_index_sync(s) < 0)
            return -ENOENT;
        return list_labeled(&s->idx, l, g, cnt, prune, out);
    }
    if (l != ARB_TOPO_NODE && l != ARB_TOPO_NVLINK)
        return -ENOENT;
    /* Members of a class try alike only where nothing tells them apart. */
    if (!s->use_classes || s->fence_on || sched_names_topo_labels(s, j) || sched_index_sync(s) < 0)
        return -ENOENT;
    return list_by_class(s, l, g, cnt, out);
}
