/*
 * pendq.c: the pending-job index (pendq.h): buckets of pending jobs by
 * (queue, fit key), each a sorted array in the queue policy's order with a
 * moving head; a pass merges the bucket heads with a binary heap. Keys that
 * failed carry that fact across passes until a node they could use
 * changes.
 *
 * Invariants: (1) a job is in at most one bucket, the one of its queue and
 * key, at the position of its (priority, seq); (2) bucket_of[id] names it,
 * -1 for a job not indexed; (3) a key marked failed has no feasible
 * placement on the nodes as they were at ver[] (see the header's argument):
 * it is cleared as soon as a node whose version moved could hold one of its
 * tasks.
 */
#include <stdlib.h>
#include <string.h>

#include "arbiter/pendq.h"
#include "sched_int.h"

#define PQ_MAX_GROUPS 8
#define PQ_MAX_MODELS 8

/* What placement reads of a job, for grouping. */
typedef struct pq_key {
    uint64_t hash;
    uint32_t unique; /* a job's own key (selectors, affinity, ...): its id + 1 */
    int ngroups, gang_min, nmodels;
    arb_tgroup_t g[PQ_MAX_GROUPS];
    uint32_t models[PQ_MAX_MODELS];
    bool failed; /* placed nowhere, and no node changed since in a way it could use */
    uint64_t failed_pass;
    int nref; /* jobs indexed with this key */
} pq_key_t;

typedef struct pq_entry {
    int32_t prio;
    uint64_t seq;
    arb_job_t *j;
} pq_entry_t;

typedef struct pq_bucket {
    uint32_t queue;
    int key;
    pq_entry_t *v;
    int head, n, cap;   /* live entries v[head..n) */
    double share;       /* the queue's dominant share, set at each pass (DRF) */
    uint64_t skip_pass; /* quota said no in this pass */
} pq_bucket_t;

struct arb_pendq {
    arb_sched_t *s;
    arb_queue_policy_t policy;
    pq_key_t *keys;
    int nkeys, capkeys;
    int32_t *kslot; /* open addressing over keys: index + 1 */
    uint32_t nkslot;
    pq_bucket_t *b;
    int nb, capb;
    int32_t *bslot; /* (queue, key) -> bucket index + 1 */
    uint32_t nbslot;
    int32_t *bucket_of; /* by job id */
    uint32_t nbucket_of;
    uint64_t *ver; /* node versions at the end of the last pass */
    uint32_t nver;
    uint64_t pass;
    int len, nelastic;
    int *heap;
    arb_job_t **placed;
    int nplaced, capplaced;
};

/* ---- keys ---------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static void key_of(const arb_job_t *j, pq_key_t *k)
{
    uint64_t h = 0;

    memset(k, 0, sizeof *k);
    if (j->nselector || j->nrequired || j->ntolerations || j->dataset ||
        j->ngroups > PQ_MAX_GROUPS || j->nmodels > PQ_MAX_MODELS || j->ngroups < 1)
        k->unique = j->id + 1;
    k->ngroups = j->ngroups < PQ_MAX_GROUPS ? j->ngroups : PQ_MAX_GROUPS;
    k->gang_min = j->gang_min;
    k->nmodels = j->nmodels < PQ_MAX_MODELS ? j->nmodels : PQ_MAX_MODELS;
    for (int i = 0; i < k->ngroups; i++) {
        const arb_tgroup_t *g = &j->groups[i];
        k->g[i].replicas = g->replicas;
        k->g[i].gpus = g->gpus;
        k->g[i].gpu_share = g->gpu_share;
        k->g[i].req = g->req;
        k->g[i].topo = g->topo;
        h = mix(h, (uint64_t)g->replicas);
        h = mix(h, (uint64_t)g->gpus);
        h = mix(h, (uint64_t)g->gpu_share);
        h = mix(h, (uint64_t)g->req.cpu_milli);
        h = mix(h, (uint64_t)g->req.mem_bytes);
        h = mix(h, (uint64_t)g->req.gpu_mem_mib);
        h = mix(h, (uint64_t)g->topo.level * 2 + g->topo.required);
    }
    for (int i = 0; i < k->nmodels; i++)
        h = mix(h, k->models[i] = j->models[i]);
    h = mix(h, (uint64_t)k->gang_min);
    k->hash = mix(h, k->unique);
}

static bool key_eq(const pq_key_t *a, const pq_key_t *b)
{
    if (a->hash != b->hash || a->unique != b->unique || a->ngroups != b->ngroups ||
        a->gang_min != b->gang_min || a->nmodels != b->nmodels ||
        memcmp(a->models, b->models, (size_t)a->nmodels * sizeof a->models[0]) != 0)
        return false;
    for (int i = 0; i < a->ngroups; i++) {
        const arb_tgroup_t *x = &a->g[i], *y = &b->g[i];
        if (x->replicas != y->replicas || x->gpus != y->gpus || x->gpu_share != y->gpu_share ||
            memcmp(&x->req, &y->req, sizeof x->req) != 0 || x->topo.level != y->topo.level ||
            x->topo.required != y->topo.required)
            return false;
    }
    return true;
}

static int grow(void **v, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return 0;
    int c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *p = realloc(*v, (size_t)c * size);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

/* An open-addressing table of int32 (index + 1) with room for n entries at
 * half load; rebuilt (empty, 0 returned: the caller reinserts) when not. 1
 * when it has room, -ENOMEM. */
static int slots_fit(int32_t **slots, uint32_t *nslots, int n)
{
    uint32_t ns = *nslots ? *nslots : 64;

    if ((uint32_t)n * 2 < *nslots)
        return 1;
    while ((uint32_t)n * 2 >= ns)
        ns *= 2;
    free(*slots);
    if (!(*slots = calloc(ns, sizeof **slots))) {
        *nslots = 0;
        return -ENOMEM;
    }
    *nslots = ns;
    return 0;
}

static void key_slot_put(arb_pendq_t *q, int x)
{
    uint32_t m = q->nkslot - 1, i = (uint32_t)q->keys[x].hash & m;
    while (q->kslot[i])
        i = (i + 1) & m;
    q->kslot[i] = x + 1;
}

/* Index of key k, added when new. -ENOMEM. */
static int key_find(arb_pendq_t *q, const pq_key_t *k)
{
    int rc = slots_fit(&q->kslot, &q->nkslot, q->nkeys + 1);
    uint32_t m, i;

    if (rc < 0)
        return rc;
    if (rc == 0)
        for (int x = 0; x < q->nkeys; x++)
            key_slot_put(q, x);
    m = q->nkslot - 1;
    for (i = (uint32_t)k->hash & m; q->kslot[i]; i = (i + 1) & m)
        if (key_eq(&q->keys[q->kslot[i] - 1], k))
            return q->kslot[i] - 1;
    if (grow((void **)&q->keys, &q->capkeys, q->nkeys + 1, sizeof *q->keys) < 0)
        return -ENOMEM;
    q->keys[q->nkeys] = *k;
    q->kslot[i] = q->nkeys + 1;
    return q->nkeys++;
}

/* ---- buckets -------------------------------------------------------------------- */

static uint64_t bucket_hash(uint32_t queue, int key)
{
    return mix(mix(0, queue), (uint64_t)key);
}

static void bucket_slot_put(arb_pendq_t *q, int x)
{
    uint32_t m = q->nbslot - 1, i = (uint32_t)bucket_hash(q->b[x].queue, q->b[x].key) & m;
    while (q->bslot[i])
        i = (i + 1) & m;
    q->bslot[i] = x + 1;
}

static int bucket_find(arb_pendq_t *q, uint32_t queue, int key)
{
    int rc = slots_fit(&q->bslot, &q->nbslot, q->nb + 1);
    uint32_t m, i;

    if (rc < 0)
        return rc;
    if (rc == 0)
        for (int x = 0; x < q->nb; x++)
            bucket_slot_put(q, x);
    m = q->nbslot - 1;
    for (i = (uint32_t)bucket_hash(queue, key) & m; q->bslot[i]; i = (i + 1) & m) {
        const pq_bucket_t *b = &q->b[q->bslot[i] - 1];
        if (b->queue == queue && b->key == key)
            return q->bslot[i] - 1;
    }
    if (grow((void **)&q->b, &q->capb, q->nb + 1, sizeof *q->b) < 0)
        return -ENOMEM;
    memset(&q->b[q->nb], 0, sizeof q->b[q->nb]);
    q->b[q->nb].queue = queue;
    q->b[q->nb].key = key;
    q->bslot[i] = q->nb + 1;
    return q->nb++;
}

/* Order of two entries in the policy's order, queue share aside: FIFO by
 * seq, else priority (higher first) then seq. */
static int entry_cmp(arb_queue_policy_t p, const pq_entry_t *x, const pq_entry_t *y)
{
    if (p != ARB_QP_FIFO && x->prio != y->prio)
        return x->prio > y->prio ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* First position in b whose entry is not before e. */
static int entry_pos(arb_queue_policy_t p, const pq_bucket_t *b, const pq_entry_t *e)
{
    int lo = b->head, hi = b->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (entry_cmp(p, &b->v[mid], e) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- the index ------------------------------------------------------------------ */

arb_pendq_t *arb_pendq_new(arb_sched_t *s)
{
    arb_pendq_t *q = calloc(1, sizeof *q);

    if (!q)
        return NULL;
    q->s = s;
    q->policy = s->conf.queue_policy;
    return q;
}

void arb_pendq_free(arb_pendq_t *q)
{
    if (!q)
        return;
    for (int i = 0; i < q->nb; i++)
        free(q->b[i].v);
    free(q->b);
    free(q->bslot);
    free(q->keys);
    free(q->kslot);
    free(q->bucket_of);
    free(q->ver);
    free(q->heap);
    free(q->placed);
    free(q);
}

int arb_pendq_len(const arb_pendq_t *q)
{
    return q->len;
}

int arb_pendq_add(arb_pendq_t *q, arb_job_t *j)
{
    pq_key_t k;
    pq_entry_t e = {.prio = j->priority, .seq = j->seq, .j = j};
    pq_bucket_t *b;
    int ki, bi, at;

    if (j->state != ARB_JOB_PENDING || (j->id < q->nbucket_of && q->bucket_of[j->id] >= 0))
        return -EINVAL;
    if (j->id >= q->nbucket_of) {
        uint32_t n = q->nbucket_of ? q->nbucket_of : 1024;
        while (n <= j->id)
            n *= 2;
        int32_t *v = realloc(q->bucket_of, n * sizeof *v);
        if (!v)
            return -ENOMEM;
        for (uint32_t i = q->nbucket_of; i < n; i++)
            v[i] = -1;
        q->bucket_of = v;
        q->nbucket_of = n;
    }
    key_of(j, &k);
    if ((ki = key_find(q, &k)) < 0 || (bi = bucket_find(q, j->queue, ki)) < 0)
        return -ENOMEM;
    b = &q->b[bi];
    if (b->head > 0 && b->head == b->n)
        b->head = b->n = 0;
    if (grow((void **)&b->v, &b->cap, b->n + 1, sizeof *b->v) < 0)
        return -ENOMEM;
    at = entry_pos(q->policy, b, &e);
    memmove(&b->v[at + 1], &b->v[at], (size_t)(b->n - at) * sizeof *b->v);
    b->v[at] = e;
    b->n++;
    q->keys[ki].nref++;
    q->bucket_of[j->id] = bi;
    q->nelastic += j->elastic;
    q->len++;
    return 0;
}

void arb_pendq_remove(arb_pendq_t *q, const arb_job_t *j)
{
    pq_entry_t e = {.prio = j->priority, .seq = j->seq};
    pq_bucket_t *b;
    int at;

    if (j->id >= q->nbucket_of || q->bucket_of[j->id] < 0)
        return;
    b = &q->b[q->bucket_of[j->id]];
    at = entry_pos(q->policy, b, &e);
    while (at < b->n && b->v[at].j != j) /* equal keys: find the job itself */
        at++;
    if (at == b->n) {
        for (at = b->head; at < b->n && b->v[at].j != j; at++)
            ;
        if (at == b->n)
            return;
    }
    if (at == b->head)
        b->head++;
    else {
        memmove(&b->v[at], &b->v[at + 1], (size_t)(b->n - at - 1) * sizeof *b->v);
        b->n--;
    }
    q->keys[b->key].nref--;
    q->bucket_of[j->id] = -1;
    q->nelastic -= j->elastic;
    q->len--;
}

arb_job_t *arb_pendq_first(const arb_pendq_t *q)
{
    const pq_entry_t *best = NULL;

    for (int i = 0; i < q->nb; i++) {
        const pq_bucket_t *b = &q->b[i];
        if (b->head < b->n && (!best || b->v[b->head].seq < best->seq))
            best = &b->v[b->head];
    }
    return best ? best->j : NULL;
}

int arb_pendq_placed(const arb_pendq_t *q, arb_job_t *const **v)
{
    *v = q->placed;
    return q->nplaced;
}

/* ---- a pass ------------------------------------------------------------------------ */

/* Could node n, as it is, hold one task of some group of key k? (A
 * necessary condition of any placement that uses n.) */
static bool could_use(const pq_key_t *k, const arb_node_t *n)
{
    if (n->state == ARB_NODE_LEFT)
        return false;
    for (int i = 0; i < k->ngroups; i++) {
        const arb_tgroup_t *g = &k->g[i];
        int whole = 0;
        bool share = false;
        if (n->cap.cpu_milli - n->used.cpu_milli < g->req.cpu_milli ||
            n->cap.mem_bytes - n->used.mem_bytes < g->req.mem_bytes)
            continue;
        if (g->gpus == 0 && g->gpu_share == 0)
            return true;
        for (int x = 0; x < n->ngpus; x++) {
            const arb_gpu_t *u = &n->gpu[x];
            bool model = k->nmodels == 0;
            for (int m = 0; m < k->nmodels && !model; m++)
                model = k->models[m] == u->model;
            if (!u->healthy || !model)
                continue;
            whole += u->used_milli == 0;
            share |= 1000 - u->used_milli >= g->gpu_share;
        }
        if (g->gpus > 0 ? whole >= g->gpus : share)
            return true;
    }
    return false;
}

/* Nodes changed since the last pass: clear the failed keys that one of
 * them could now serve. -ENOMEM. */
static int sync_nodes(arb_pendq_t *q)
{
    const arb_cluster_t *c = q->s->c;
    uint32_t *changed, nc = 0;

    if (c->nnodes > q->nver) {
        uint64_t *v = realloc(q->ver, c->nnodes * sizeof *v);
        if (!v)
            return -ENOMEM;
        for (uint32_t i = q->nver; i < c->nnodes; i++)
            v[i] = ~0ULL; /* new: changed */
        q->ver = v;
        q->nver = c->nnodes;
    }
    if (!(changed = malloc((c->nnodes + 1) * sizeof *changed)))
        return -ENOMEM;
    for (uint32_t i = 0; i < c->nnodes; i++)
        if (q->ver[i] != c->nodes[i].version)
            changed[nc++] = i;
    for (int k = 0; k < q->nkeys && nc > 0; k++) {
        pq_key_t *key = &q->keys[k];
        for (uint32_t i = 0; key->failed && key->nref > 0 && i < nc; i++)
            if (could_use(key, &c->nodes[changed[i]]))
                key->failed = false;
    }
    free(changed);
    return 0;
}

static void save_versions(arb_pendq_t *q)
{
    const arb_cluster_t *c = q->s->c;
    for (uint32_t i = 0; i < c->nnodes && i < q->nver; i++)
        q->ver[i] = c->nodes[i].version;
}

/* The queue's dominant share as queue.c computes it for DRF. */
static double drf_share(arb_sched_t *s, uint32_t queue, const arb_res_t *cap)
{
    const arb_queue_t *q = sched_queue_get(s, queue);
    double d = 0, x;
    if (!q)
        return 0;
    if (cap->gpu_milli > 0 && (x = (double)q->used.gpu_milli / (double)cap->gpu_milli) > d)
        d = x;
    if (cap->cpu_milli > 0 && (x = (double)q->used.cpu_milli / (double)cap->cpu_milli) > d)
        d = x;
    if (cap->mem_bytes > 0 && (x = (double)q->used.mem_bytes / (double)cap->mem_bytes) > d)
        d = x;
    return d / (q->weight > 0 ? q->weight : 1);
}

/* Heap order of two buckets by their heads (and, DRF, their queue's share). */
static bool before(const arb_pendq_t *q, int a, int b)
{
    const pq_bucket_t *x = &q->b[a], *y = &q->b[b];
    int c;
    if (q->policy == ARB_QP_DRF && x->share != y->share)
        return x->share < y->share;
    c = entry_cmp(q->policy, &x->v[x->head], &y->v[y->head]);
    return c < 0 || (c == 0 && a < b);
}

static void sift_down(arb_pendq_t *q, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i, t;
        if (l < n && before(q, q->heap[l], q->heap[m]))
            m = l;
        if (r < n && before(q, q->heap[r], q->heap[m]))
            m = r;
        if (m == i)
            return;
        t = q->heap[i];
        q->heap[i] = q->heap[m];
        q->heap[m] = t;
        i = m;
    }
}

int arb_pendq_cycle(arb_pendq_t *q, const arb_ctx_t *ctx, arb_cycle_stats_t *st)
{
    arb_sched_t *s = q->s;
    arb_cycle_stats_t z;
    arb_res_t cap = {0};
    int nh = 0, rc;
    bool fifo = q->policy == ARB_QP_FIFO;

    if (!st)
        st = &z;
    memset(st, 0, sizeof *st);
    if (s->conf.preemption || s->conf.backfill || s->conf.starvation_ns > 0 || q->nelastic > 0 ||
        s->conf.queue_policy != q->policy)
        return -ENOTSUP;
    q->pass++;
    q->nplaced = 0;
    if ((rc = sync_nodes(q)) < 0)
        return rc;
    if (!fifo || q->nb > 0) {
        int *h = realloc(q->heap, (size_t)(q->nb + 1) * sizeof *h);
        if (!h)
            return -ENOMEM;
        q->heap = h;
    }
    if (q->policy == ARB_QP_DRF)
        for (uint32_t i = 0; i < s->c->nnodes; i++)
            if (s->c->nodes[i].state != ARB_NODE_LEFT)
                arb_res_add(&cap, &s->c->nodes[i].cap);
    for (int i = 0; i < q->nb; i++) {
        pq_bucket_t *b = &q->b[i];
        if (b->head == b->n || (!fifo && q->keys[b->key].failed))
            continue; /* priority/DRF: a failed key's jobs would all fail */
        if (q->policy == ARB_QP_DRF)
            b->share = drf_share(s, b->queue, &cap);
        q->heap[nh++] = i;
    }
    for (int i = nh / 2 - 1; i >= 0; i--)
        sift_down(q, nh, i);
    while (nh > 0) {
        pq_bucket_t *b = &q->b[q->heap[0]];
        pq_key_t *k = &q->keys[b->key];
        arb_job_t *j = b->v[b->head].j;
        bool drop = false;

        if (k->failed && k->failed_pass == q->pass && !fifo) {
            drop = true; /* failed earlier in this pass */
        } else if (!sched_quota_admits(s, j, NULL, 0)) {
            drop = true; /* so does the rest of this bucket in this pass */
        } else if (fifo && k->failed) {
            break; /* strict FIFO stops at a job that does not fit */
        } else if ((rc = arb_sched_place(s, j, ctx)) == 0) {
            if (grow((void **)&q->placed, &q->capplaced, q->nplaced + 1, sizeof *q->placed) < 0)
                return -ENOMEM;
            q->placed[q->nplaced++] = j;
            st->placed++;
            arb_pendq_remove(q, j);
            drop = b->head == b->n;
        } else if (rc == -ENOSPC) {
            k->failed = true;
            k->failed_pass = q->pass;
            if (fifo)
                break;
            drop = true;
        } else {
            return rc;
        }
        if (drop)
            q->heap[0] = q->heap[--nh];
        sift_down(q, nh, 0);
    }
    save_versions(q);
    st->pending = q->len;
    return 0;
}
