/*
 * lb_prefix.c: approximate prefix-cache affinity, and the prefix index it
 * shares with the inference policy.
 *
 * A model server keeps the KV cache of the prompts it has seen, in blocks
 * (vLLM: 16 tokens), and reuses the longest cached prefix of a new prompt:
 * only the rest has to be prefilled. A balancer that sends a prompt where its
 * prefix already is saves that prefill. It cannot see the caches, so it
 * remembers where it sent what: the proxy cuts each prompt into fixed-size
 * blocks and hashes them as a chain (oai.h: blocks[i] names the whole prefix
 * up to block i), and this index maps a chain hash to the replicas it went
 * to. A pick takes the replica that was sent the longest leading run of the
 * prompt's blocks (ties: fewest in flight per unit of weight, round robin
 * among equals), then records the prompt's chain for it.
 *
 * The index is bounded: `cap` blocks in one LRU (a hash table with chaining
 * and an intrusive list), each block remembering up to PX_WAYS replicas (a
 * prefix served by several, once affinity was released), the way least
 * recently sent to is replaced. A prompt's chain is recorded from its last
 * block to its first, so the first blocks are the most recent and eviction
 * eats chains from their tails, as the KV cache itself does; set the bound
 * near the replicas' total KV capacity in blocks. What the index believes
 * can be wrong (the replica may have evicted it): it is a hint, and the
 * inference policy weighs it against load. One mutex: the proxy's event
 * loops share one index.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lb/lb.h"

#define PX_WAYS 4
#define NIL UINT32_MAX

typedef struct pent {
    uint64_t key;
    uint64_t id[PX_WAYS]; /* replicas, 0 = empty way */
    int64_t at[PX_WAYS];  /* when each was last sent this chain */
    uint32_t next;        /* bucket chain */
    uint32_t newer, older;
} pent_t;

struct lb_pindex {
    pthread_mutex_t mu;
    uint32_t cap, n, mask;
    uint32_t *bucket;
    pent_t *e;
    uint32_t newest, oldest;
};

lb_pindex_t *lb_pindex_new(uint32_t cap)
{
    lb_pindex_t *x = calloc(1, sizeof *x);
    uint32_t nb = 16;

    if (!x)
        return NULL;
    if (cap < 16)
        cap = 16;
    while (nb < cap && nb < (1u << 30))
        nb <<= 1;
    x->cap = cap;
    x->mask = nb - 1;
    x->bucket = malloc((size_t)nb * sizeof *x->bucket);
    x->e = malloc((size_t)cap * sizeof *x->e);
    if (!x->bucket || !x->e) {
        free(x->bucket);
        free(x->e);
        free(x);
        return NULL;
    }
    memset(x->bucket, 0xff, (size_t)nb * sizeof *x->bucket);
    x->newest = x->oldest = NIL;
    pthread_mutex_init(&x->mu, NULL);
    return x;
}

void lb_pindex_free(lb_pindex_t *x)
{
    if (!x)
        return;
    pthread_mutex_destroy(&x->mu);
    free(x->bucket);
    free(x->e);
    free(x);
}

uint32_t lb_pindex_size(lb_pindex_t *x)
{
    uint32_t n;
    pthread_mutex_lock(&x->mu);
    n = x->n;
    pthread_mutex_unlock(&x->mu);
    return n;
}

static uint32_t find(const lb_pindex_t *x, uint64_t key)
{
    for (uint32_t k = x->bucket[key & x->mask]; k != NIL; k = x->e[k].next)
        if (x->e[k].key == key)
            return k;
    return NIL;
}

static void lru_unlink(lb_pindex_t *x, uint32_t k)
{
    pent_t *e = &x->e[k];
    if (e->newer != NIL)
        x->e[e->newer].older = e->older;
    else
        x->newest = e->older;
    if (e->older != NIL)
        x->e[e->older].newer = e->newer;
    else
        x->oldest = e->newer;
}

static void lru_push(lb_pindex_t *x, uint32_t k)
{
    pent_t *e = &x->e[k];
    e->newer = NIL;
    e->older = x->newest;
    if (x->newest != NIL)
        x->e[x->newest].newer = k;
    x->newest = k;
    if (x->oldest == NIL)
        x->oldest = k;
}

/* Drop the least recently used block; its slot is returned for reuse. */
static uint32_t evict(lb_pindex_t *x)
{
    uint32_t k = x->oldest, *pp = &x->bucket[x->e[k].key & x->mask];

    lru_unlink(x, k);
    while (*pp != k)
        pp = &x->e[*pp].next;
    *pp = x->e[k].next;
    return k;
}

void lb_pindex_record(lb_pindex_t *x, const uint64_t *blocks, int nb, uint64_t id, int64_t now_ms)
{
    if (!x || nb <= 0 || id == 0)
        return;
    pthread_mutex_lock(&x->mu);
    for (int i = nb - 1; i >= 0; i--) {
        uint32_t k = find(x, blocks[i]);
        pent_t *e;
        if (k == NIL) {
            k = x->n < x->cap ? x->n++ : evict(x);
            e = &x->e[k];
            memset(e, 0, sizeof *e);
            e->key = blocks[i];
            e->next = x->bucket[blocks[i] & x->mask];
            x->bucket[blocks[i] & x->mask] = k;
        } else {
            e = &x->e[k];
            lru_unlink(x, k);
        }
        lru_push(x, k);
        int w = -1;
        for (int j = 0; j < PX_WAYS && w < 0; j++)
            if (e->id[j] == id)
                w = j;
        for (int j = 0; j < PX_WAYS && w < 0; j++)
            if (e->id[j] == 0)
                w = j;
        if (w < 0) { /* all ways taken: replace the one sent to longest ago */
            w = 0;
            for (int j = 1; j < PX_WAYS; j++)
                if (e->at[j] < e->at[w])
                    w = j;
        }
        e->id[w] = id;
        e->at[w] = now_ms;
    }
    pthread_mutex_unlock(&x->mu);
}

void lb_pindex_match(lb_pindex_t *x, const uint64_t *blocks, int nb, const uint64_t *ids, int n,
                     int *match)
{
    memset(match, 0, (size_t)n * sizeof *match);
    if (!x || nb <= 0)
        return;
    pthread_mutex_lock(&x->mu);
    for (int i = 0; i < nb; i++) {
        uint32_t k = find(x, blocks[i]);
        bool any = false;
        if (k == NIL)
            break;
        for (int j = 0; j < PX_WAYS; j++) {
            uint64_t id = x->e[k].id[j];
            if (!id)
                continue;
            for (int p = 0; p < n; p++)
                if (ids[p] == id && match[p] == i) {
                    match[p] = i + 1;
                    any = true;
                }
        }
        if (!any)
            break; /* nobody holds block i: nobody holds a longer run */
    }
    pthread_mutex_unlock(&x->mu);
}

/* ---- the policy -------------------------------------------------------------- */

/* Per-policy state, shared with lb_inference.c through lb_prefix_state(). */
typedef struct pf_st {
    lb_pindex_t *x;
    bool own; /* x was made here (no opts.pindex) */
    uint64_t *ids;
    int *match;
    int n;
} pf_st_t;

static void pf_fini(lb_policy_t *p)
{
    pf_st_t *st = p->st;
    if (!st)
        return;
    if (st->own)
        lb_pindex_free(st->x);
    free(st->ids);
    free(st->match);
    free(st);
    p->st = NULL;
}

/* Shared by prefix and inference: (re)size the peer arrays, keep the index. */
int lb_prefix_update(lb_policy_t *p)
{
    pf_st_t *st = p->st;
    uint64_t *ids;
    int *match;

    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st)
            return -ENOMEM;
        st->x = p->opt.pindex;
        if (!st->x) {
            st->x = lb_pindex_new(p->opt.prefix_entries);
            st->own = true;
        }
        p->st = st;
        if (!st->x) {
            pf_fini(p);
            return -ENOMEM;
        }
    }
    ids = calloc((size_t)(p->n > 0 ? p->n : 1), sizeof *ids);
    match = calloc((size_t)(p->n > 0 ? p->n : 1), sizeof *match);
    if (!ids || !match) {
        free(ids);
        free(match);
        return -ENOMEM;
    }
    for (int i = 0; i < p->n; i++) {
        const char *nm = p->peers[i].name ? p->peers[i].name : "";
        ids[i] = lb_hash64(nm, strlen(nm), 0x70726566ULL) | 1; /* never 0: 0 is an empty way */
    }
    free(st->ids);
    free(st->match);
    st->ids = ids;
    st->match = match;
    st->n = p->n;
    return 0;
}

void lb_prefix_fini(lb_policy_t *p)
{
    pf_fini(p);
}

/* How many leading blocks of r's prompt each peer was sent: a borrowed
 * array of p->n, valid until the next call; NULL without blocks. */
const int *lb_prefix_match(lb_policy_t *p, const lb_req_t *r)
{
    pf_st_t *st = p->st;
    if (!st || r->nblocks <= 0)
        return NULL;
    lb_pindex_match(st->x, r->blocks, r->nblocks, st->ids, st->n, st->match);
    return st->match;
}

void lb_prefix_chose(lb_policy_t *p, const lb_req_t *r, int i)
{
    pf_st_t *st = p->st;
    if (st && i >= 0 && i < st->n && r->nblocks > 0)
        lb_pindex_record(st->x, r->blocks, r->nblocks, st->ids[i], r->now_ms);
}

static int pf_pick(lb_policy_t *p, const lb_req_t *r)
{
    const int *m = lb_prefix_match(p, r);
    int best = -1, start = (int)(p->cursor++ % (uint64_t)p->n);

    for (int k = 0; k < p->n; k++) {
        int i = start + k < p->n ? start + k : start + k - p->n;
        if (!lb_ok(p, r, i))
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        int mi = m ? m[i] : 0, mb = m ? m[best] : 0;
        if (mi != mb) {
            if (mi > mb)
                best = i;
            continue;
        }
        uint64_t ci = ((uint64_t)p->peers[i].inflight + 1) * p->peers[best].eff;
        uint64_t cb = ((uint64_t)p->peers[best].inflight + 1) * p->peers[i].eff;
        if (ci < cb)
            best = i;
    }
    if (best < 0)
        return -ENOENT;
    lb_prefix_chose(p, r, best);
    return best;
}

const lb_ops_t lb_prefix_ops = {
    .name = "prefix",
    .summary = "longest prompt prefix sent before (approximate prefix-cache affinity)",
    .update = lb_prefix_update,
    .fini = lb_prefix_fini,
    .pick = pf_pick,
};
