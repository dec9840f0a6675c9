/*
 * lb_chash.c: consistent hashing with bounded loads. A request's key (a
 * header or cookie, hashed by the caller) maps to a peer through one of two
 * tables, rebuilt only when the peer set changes:
 *
 *   ring    every peer owns vnodes * weight points on a 64-bit circle; a key
 *           goes to the owner of the first point at or after it. When a peer
 *           leaves, only its keys move (about 1/N of them).
 *   maglev  Google's Maglev table: M (a prime, 65537) slots filled by every
 *           peer in turn from its own permutation of the slots, so each peer
 *           owns M/N slots to within one; lookup is one array read. When a
 *           peer leaves a few more keys move than its own (within 2x of 1/N).
 *
 * Bounded loads (Mirrokni et al., "Consistent Hashing with Bounded Loads"):
 * no peer may hold more than cap = ceil(c * (L + 1) * eff / W) of the load,
 * L the load on all pickable peers (their inflight counts), W their total
 * weight. A key whose peer is full walks on (next ring point, next Maglev
 * slot) to the first peer with room. So a hot key spills to its neighbours
 * instead of melting one replica, and max/mean load stays at or under c,
 * while a key still stays on its peer as long as that peer is not full.
 * c == 0 turns the bound off.
 *
 * Peers that may not be picked keep their points and slots; lookups step
 * over them, so a peer that goes down and comes back gets its keys back.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lb/lb.h"

typedef struct ring_pt {
    uint64_t h;
    int peer;
} ring_pt_t;

typedef struct chash_st {
    ring_pt_t *pts; /* ring: sorted by h */
    size_t npts;
    int32_t *slot; /* maglev: slot -> peer */
    uint32_t m;
} chash_st_t;

static int pt_cmp(const void *a, const void *b)
{
    const ring_pt_t *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return x->peer - y->peer;
}

static int build_ring(lb_policy_t *p, chash_st_t *st)
{
    size_t n = 0, k = 0;
    uint32_t vn = p->opt.vnodes ? p->opt.vnodes : 100;

    for (int i = 0; i < p->n; i++)
        n += (size_t)vn * (p->peers[i].weight ? p->peers[i].weight : 1);
    st->pts = malloc((n ? n : 1) * sizeof *st->pts);
    if (!st->pts)
        return -ENOMEM;
    for (int i = 0; i < p->n; i++) {
        const char *name = p->peers[i].name ? p->peers[i].name : "";
        size_t len = strlen(name);
        size_t pts = (size_t)vn * (p->peers[i].weight ? p->peers[i].weight : 1);
        for (size_t j = 0; j < pts; j++) {
            st->pts[k].h = lb_hash64(name, len, j);
            st->pts[k].peer = i;
            k++;
        }
    }
    qsort(st->pts, n, sizeof *st->pts, pt_cmp);
    st->npts = n;
    return 0;
}

static int build_maglev(lb_policy_t *p, chash_st_t *st)
{
    uint32_t m = p->opt.maglev_m ? p->opt.maglev_m : 65537, filled = 0, wmax = 1;
    uint64_t *off = NULL, *skip = NULL, *next = NULL, *credit = NULL;
    int rc = -ENOMEM;

    st->slot = malloc((size_t)m * sizeof *st->slot);
    off = calloc((size_t)p->n, sizeof *off);
    skip = calloc((size_t)p->n, sizeof *skip);
    next = calloc((size_t)p->n, sizeof *next);
    credit = calloc((size_t)p->n, sizeof *credit);
    if (!st->slot || !off || !skip || !next || !credit)
        goto out;
    for (uint32_t s = 0; s < m; s++)
        st->slot[s] = -1;
    for (int i = 0; i < p->n; i++) {
        const char *name = p->peers[i].name ? p->peers[i].name : "";
        off[i] = lb_hash64(name, strlen(name), 0x6d61676c6576ULL) % m;
        skip[i] = lb_hash64(name, strlen(name), 0x736b6970ULL) % (m - 1) + 1;
        if (p->peers[i].weight > wmax)
            wmax = p->peers[i].weight;
    }
    /* Each round every peer earns its weight in credit and takes one slot
     * per wmax of credit: the heaviest peer takes one slot a round, a peer
     * of half its weight one every other round. */
    while (filled < m) {
        for (int i = 0; i < p->n && filled < m; i++) {
            credit[i] += p->peers[i].weight ? p->peers[i].weight : 1;
            while (credit[i] >= wmax && filled < m) {
                uint64_t c;
                credit[i] -= wmax;
                do {
                    c = (off[i] + next[i] * skip[i]) % m;
                    next[i]++;
                } while (st->slot[c] >= 0);
                st->slot[c] = i;
                filled++;
            }
        }
    }
    st->m = m;
    rc = 0;
out:
    free(off);
    free(skip);
    free(next);
    free(credit);
    return rc;
}

static void chash_fini(lb_policy_t *p)
{
    chash_st_t *st = p->st;
    if (!st)
        return;
    free(st->pts);
    free(st->slot);
    free(st);
    p->st = NULL;
}

static int chash_update(lb_policy_t *p)
{
    chash_st_t *st;
    int rc;

    chash_fini(p);
    if (p->n == 0)
        return 0;
    st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    rc = p->opt.kind == LB_HASH_MAGLEV ? build_maglev(p, st) : build_ring(p, st);
    p->st = st;
    if (rc < 0)
        chash_fini(p);
    return rc;
}

/* The walk's i-th peer from the key's home position. */
static inline int walk_peer(const chash_st_t *st, size_t home, size_t i)
{
    if (st->pts) {
        size_t k = home + i;
        return st->pts[k < st->npts ? k : k % st->npts].peer;
    }
    size_t k = home + i;
    return st->slot[k < st->m ? k : k % st->m];
}

static int chash_pick(lb_policy_t *p, const lb_req_t *r)
{
    const chash_st_t *st = p->st;
    uint64_t key = r->has_key ? r->key : r->rnd, load = 0, w = 0;
    size_t home, len;
    int first = -1;

    if (!st)
        return -ENOENT;
    if (st->pts) {
        size_t lo = 0, hi = st->npts;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (st->pts[mid].h < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        home = lo == st->npts ? 0 : lo;
        len = st->npts;
    } else {
        home = (size_t)(key % st->m);
        len = st->m;
    }
    if (p->opt.balance > 0) {
        for (int i = 0; i < p->n; i++) {
            if (p->peers[i].eff == 0)
                continue;
            load += p->peers[i].inflight;
            w += p->peers[i].eff;
        }
    }
    for (size_t i = 0; i < len; i++) {
        int e = walk_peer(st, home, i);
        if (!lb_ok(p, r, e))
            continue;
        if (p->opt.balance <= 0)
            return e;
        if (first < 0)
            first = e;
        double cap = ceil(p->opt.balance * (double)(load + 1) * p->peers[e].eff / (double)w);
        if ((double)p->peers[e].inflight < cap)
            return e;
    }
    /* Every pickable peer is full (only when some are skipped): the key's
     * own peer takes it. */
    return first >= 0 ? first : -ENOENT;
}

const lb_ops_t lb_chash_ops = {
    .name = "hash",
    .summary = "consistent hashing on a header or cookie (ring or Maglev), bounded loads",
    .update = chash_update,
    .fini = chash_fini,
    .pick = chash_pick,
};
