/*
 * queue.c: who goes next, and who may go at all.
 *
 * Order (arb_queue_policy_t): FIFO by submission sequence; PRIORITY by
 * priority then sequence; DRF by the queue's weighted dominant share (the
 * largest of its GPU, CPU and memory shares of the cluster, divided by its
 * weight), lowest first, then priority, then sequence. With starvation
 * protection on, a job that has waited longer than starvation_ns goes
 * before all others (oldest first), and the cycle reserves room for it.
 * A job evicted for a preemptor that is still pending takes the place
 * right after it (arb_job_t.yield_to): the room its eviction made is the
 * preemptor's, whatever their priorities, queues or ages (cycle.c,
 * invariant 1).
 *
 * Quotas (Kueue-style): a queue with a quota may use up to `nominal` of
 * each resource; above that it may borrow up to `borrow_limit` more, but
 * only from quota that other queues of its cohort leave idle. A resource
 * whose nominal and borrow limit are both 0 is not limited. A queue under
 * its nominal may reclaim borrowed quota by preemption (preempt.c).
 *
 * Holds. A preemptor whose victims are stopping (deferred preemption: it
 * has a claim, cycle.c) was admitted when it chose them; it holds what it
 * needs of its queue's quota until it is placed or its claim goes, as if
 * it were charged: a job of its queue counts the hold as used, a job of
 * another queue of its cohort finds that much less idle. Else a job behind
 * it takes the quota while the room frees, the preemptor waits for quota,
 * its victim is placed back into the room, and the preemptor evicts it
 * again when quota frees (a livelock: seed 610255 of the simulation test).
 * A job within its queue's nominal (its own holds counted) is admitted
 * whatever other queues hold; and only such a job may reclaim (preempt.c:
 * sched_quota_within_after counts the holds too): else a queue whose
 * nominal a waiting preemptor holds would evict a borrower for quota that
 * is not its to take back, and explain would promise that reclaim.
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "sched_int.h"

int arb_queue_policy_parse(const char *s, arb_queue_policy_t *out, arb_err_t *err)
{
    if (strcmp(s, "fifo") == 0)
        *out = ARB_QP_FIFO;
    else if (strcmp(s, "priority") == 0)
        *out = ARB_QP_PRIORITY;
    else if (strcmp(s, "drf") == 0)
        *out = ARB_QP_DRF;
    else
        return arb_errf(err, -EINVAL, "unknown queue policy '%s'; use fifo, priority or drf", s);
    return 0;
}

/* Dominant share of q's usage, over the cluster's capacity, per weight. */
static double dominant_share(const arb_sched_t *s, const arb_queue_t *q, const arb_res_t *cap)
{
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

typedef struct order_key {
    arb_job_t *j;
    const arb_job_t *at; /* the job whose place it takes: itself, or the preemptor it yields to */
    int depth;           /* 0: its own place; k: k yields away */
    int starving;        /* of `at`: 1 when it waited past the threshold */
    double share;        /* of `at`'s queue */
} order_key_t;

static int cmp_key(const void *a, const void *b, void *arg)
{
    const order_key_t *x = a, *y = b;
    const arb_job_t *p = x->at, *q = y->at;
    arb_queue_policy_t cmp_policy = *(const arb_queue_policy_t *)arg;

    if (p != q) {
        if (x->starving != y->starving)
            return y->starving - x->starving;
        if (x->starving) /* both starving: the oldest first */
            return p->seq < q->seq ? -1 : p->seq > q->seq;
        if (cmp_policy == ARB_QP_DRF && x->share != y->share)
            return x->share < y->share ? -1 : 1;
        if (cmp_policy != ARB_QP_FIFO && p->priority != q->priority)
            return p->priority > q->priority ? -1 : 1;
        return p->seq < q->seq ? -1 : p->seq > q->seq;
    }
    /* In one place: the preemptor, then those that yield to it. */
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return x->j->seq < y->j->seq ? -1 : x->j->seq > y->j->seq;
}

/* The pending preemptor j yields to, followed while each is pending (a
 * victim of a victim goes after both), or j itself. */
static const arb_job_t *yield_target(arb_sched_t *s, const arb_job_t *j, int *depth)
{
    const arb_job_t *a = j;

    *depth = 0;
    while (a->yield_to && *depth < 8) {
        const arb_job_t *p = arb_sched_job(s, a->yield_to - 1);
        if (!p || p == j || (p->state != ARB_JOB_PENDING && p->state != ARB_JOB_PREEMPTED))
            break;
        a = p;
        (*depth)++;
    }
    return a;
}

void sched_order(arb_sched_t *s, arb_job_t **v, int n, const arb_ctx_t *ctx)
{
    order_key_t *k = malloc((size_t)(n > 0 ? n : 1) * sizeof *k);
    arb_res_t cap = {0};

    if (!k)
        return; /* keep the caller's order */
    for (uint32_t i = 0; i < s->c->nnodes; i++)
        if (s->c->nodes[i].state != ARB_NODE_LEFT)
            arb_res_add(&cap, &s->c->nodes[i].cap);
    for (int i = 0; i < n; i++) {
        k[i].j = v[i];
        k[i].at = yield_target(s, v[i], &k[i].depth);
        k[i].starving = s->conf.starvation_ns > 0 && ctx &&
                        ctx->now_ns - k[i].at->submit_ns > s->conf.starvation_ns;
        k[i].share = dominant_share(s, sched_queue_get(s, k[i].at->queue), &cap);
    }
    qsort_r(k, (size_t)n, sizeof *k, cmp_key, &s->conf.queue_policy);
    for (int i = 0; i < n; i++)
        v[i] = k[i].j;
    free(k);
}

/* The amount of dimension d of a resource vector (the quota loop's view:
 * GPU, CPU, memory, then the extended resources), read only. */
static int64_t at(const arb_res_t *r, int d)
{
    switch (d) {
    case 0:
        return r->gpu_milli;
    case 1:
        return r->cpu_milli;
    case 2:
        return r->mem_bytes;
    default:
        return r->ext[d - 3];
    }
}

static const char *dim_name(int d)
{
    static const char *const n[] = {"GPU", "CPU", "memory"};
    return d < 3 ? n[d] : "extended resource";
}

/* An amount of dimension d as people write it: "12 GPUs", "0.5 GPU",
 * "32 CPUs", "256Gi". */
static void dim_text(int d, int64_t v, char *buf, size_t n)
{
    char q[32];
    if (d == 0 && v % 1000 == 0)
        snprintf(buf, n, "%lld GPU%s", (long long)(v / 1000), v == 1000 ? "" : "s");
    else if (d == 0)
        snprintf(buf, n, "%.3g GPU", (double)v / 1000.0);
    else if (d == 1) {
        arb_qty_format(v, ARB_QTY_MILLI, q, sizeof q);
        snprintf(buf, n, "%.31s CPU%s", q, v == 1000 ? "" : "s");
    } else if (d == 2)
        arb_qty_format(v, ARB_QTY_BYTES, buf, n);
    else
        snprintf(buf, n, "%lld", (long long)v);
}

#define NDIMS (3 + ARB_MAX_EXT)

/* The most quota j's queue could ever hold in dimension d: its nominal
 * plus what it may borrow, and no more than its cohort's others have. */
static int64_t quota_ceiling(arb_sched_t *s, const arb_queue_t *q, int d)
{
    int64_t nom = at(&q->nominal, d), lim = at(&q->borrow_limit, d);
    int64_t lend = 0;

    for (int i = 0; q->cohort && i < s->nqueues; i++) {
        arb_queue_t *o = &s->queues[i];
        if (o != q && o->cohort == q->cohort && o->has_quota)
            lend += at(&o->nominal, d);
    }
    return nom + (lim < lend ? lim : lend);
}

/* Does q's quota limit dimension d (a nominal or a borrowing limit; with
 * both 0 it is not limited)? */
static bool limited(const arb_queue_t *q, int d)
{
    return at(&q->nominal, d) != 0 || at(&q->borrow_limit, d) != 0;
}

bool sched_quota_borrows_in(const arb_queue_t *q, const arb_res_t *plus, const arb_res_t *held,
                            const arb_res_t *need)
{
    for (int d = 0; d < NDIMS; d++)
        if (at(held, d) > 0 && (!need || at(need, d) > 0) && limited(q, d) &&
            at(&q->used, d) + (plus ? at(plus, d) : 0) > at(&q->nominal, d))
            return true;
    return false;
}

bool sched_quota_never(arb_sched_t *s, const arb_job_t *j, char *why, size_t n)
{
    arb_queue_t *q = sched_queue_get(s, j->queue);
    arb_res_t need;

    if (!q || !q->has_quota)
        return false;
    arb_job_total(j, &need);
    for (int d = 0; d < NDIMS; d++) {
        int64_t top;
        char a[48], b[48];
        if (!limited(q, d) || at(&need, d) == 0)
            continue;
        if (at(&need, d) <= (top = quota_ceiling(s, q, d)))
            continue;
        if (why) {
            dim_text(d, at(&need, d), a, sizeof a);
            dim_text(d, top, b, sizeof b);
            snprintf(why, n,
                     "it needs %s, more than queue '%s' can ever hold (%s: its nominal quota "
                     "plus what it may borrow from its cohort)",
                     a, arb_str(&s->c->strs, q->name), b);
        }
        return true;
    }
    return false;
}

void sched_quota_hold_reset(arb_sched_t *s)
{
    s->nholders = 0;
}

/* Does h hold quota now? A pending preemptor with a claim. */
static bool holding(const arb_job_t *h)
{
    return h && h->nclaim > 0 && (h->state == ARB_JOB_PENDING || h->state == ARB_JOB_PREEMPTED);
}

int sched_quota_hold_add(arb_sched_t *s, const arb_job_t *j)
{
    for (uint32_t i = 0; i < s->nholders; i++)
        if (s->holders[i] == j->id)
            return 0;
    if (s->nholders == s->capholders) {
        uint32_t cap = s->capholders ? 2 * s->capholders : 8;
        uint32_t *v = realloc(s->holders, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        s->holders = v;
        s->capholders = cap;
    }
    s->holders[s->nholders++] = j->id;
    return 0;
}

/* What the preemptors other than j hold: of q itself (*own), and of the
 * other queues with quota of q's cohort (*others). */
static void held_by_others(arb_sched_t *s, const arb_job_t *j, const arb_queue_t *q, arb_res_t *own,
                           arb_res_t *others)
{
    memset(own, 0, sizeof *own);
    memset(others, 0, sizeof *others);
    for (uint32_t i = 0; i < s->nholders; i++) {
        const arb_job_t *h = arb_sched_job(s, s->holders[i]);
        const arb_queue_t *hq;
        arb_res_t need;
        if (h == j || !holding(h) || !(hq = sched_queue_get(s, h->queue)))
            continue;
        if (hq != q && (!q->cohort || hq->cohort != q->cohort || !hq->has_quota))
            continue;
        arb_job_total(h, &need);
        arb_res_add(hq == q ? own : others, &need);
    }
}

bool sched_quota_within_after(arb_sched_t *s, const arb_job_t *j, const arb_queue_t *q,
                              const arb_res_t *need)
{
    arb_res_t own, others;

    held_by_others(s, j, q, &own, &others);
    for (int d = 0; d < NDIMS; d++)
        if (at(need, d) > 0 && limited(q, d) &&
            at(&q->used, d) + at(&own, d) + at(need, d) > at(&q->nominal, d))
            return false;
    return true;
}

/* May j's queue take need more now (its use, what its own preemptors other
 * than j hold, and need, within its nominal; or above it by no more than its
 * borrowing limit and what its cohort leaves idle)? why: the first reason it
 * may not. */
static bool quota_fits(arb_sched_t *s, const arb_job_t *j, arb_queue_t *q, const arb_res_t *need,
                       char *why, size_t n)
{
    arb_res_t own, others;

    held_by_others(s, j, q, &own, &others);
    for (int d = 0; d < NDIMS; d++) {
        int64_t nom = at(&q->nominal, d), lim = at(&q->borrow_limit, d);
        int64_t after = at(&q->used, d) + at(&own, d) + at(need, d), idle = -at(&others, d);
        char a[48], b[48], c[48], e[48], h[128] = "";
        if (!limited(q, d) || at(need, d) == 0 || after <= nom)
            continue;
        if (why && at(&own, d) + at(&others, d) > 0) {
            dim_text(d, at(&own, d) + at(&others, d), a, sizeof a);
            snprintf(h, sizeof h, " (%s of it held for preemptors whose victims are stopping)", a);
        }
        if (after > nom + lim) {
            if (why) {
                dim_text(d, after, a, sizeof a);
                dim_text(d, nom, b, sizeof b);
                dim_text(d, lim, c, sizeof c);
                dim_text(d, at(&q->used, d), e, sizeof e);
                snprintf(why, n,
                         "queue '%s' %s quota: it would use %s (%s in use now), above its nominal "
                         "%s + borrowing limit %s%s",
                         arb_str(&s->c->strs, q->name), dim_name(d), a, e, b, c, h);
            }
            return false;
        }
        /* Borrow only what the cohort leaves idle: the others' unused
         * nominal minus what they borrow themselves, so two borrowers never
         * take the same idle quota. */
        for (int i = 0; q->cohort && i < s->nqueues; i++) {
            arb_queue_t *o = &s->queues[i];
            if (o == q || o->cohort != q->cohort || !o->has_quota)
                continue;
            idle += at(&o->nominal, d) - at(&o->used, d);
        }
        if (after - nom > idle) {
            if (why) {
                dim_text(d, after - nom, a, sizeof a);
                dim_text(d, idle > 0 ? idle : 0, b, sizeof b);
                snprintf(why, n,
                         "queue '%s' %s quota: it needs to borrow %s above its nominal, but its "
                         "cohort has %s idle%s",
                         arb_str(&s->c->strs, q->name), dim_name(d), a, b, h);
            }
            return false;
        }
    }
    return true;
}

bool sched_quota_admits(arb_sched_t *s, const arb_job_t *j, char *why, size_t n)
{
    arb_queue_t *q = sched_queue_get(s, j->queue);
    arb_res_t need;

    if (!q || !q->has_quota)
        return true;
    arb_job_total(j, &need);
    return quota_fits(s, j, q, &need, why, n);
}

bool sched_quota_admits_more(arb_sched_t *s, const arb_job_t *j, const arb_res_t *more)
{
    arb_queue_t *q = sched_queue_get(s, j->queue);

    return !q || !q->has_quota || quota_fits(s, j, q, more, NULL, 0);
}
