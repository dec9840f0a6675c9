/*
 * queue.c: who goes next, and who may go at all.
 *
 * Order (arb_queue_policy_t): FIFO by submission sequence; PRIORITY by
 * priority then sequence; DRF by the queue's weighted dominant share (the
 * largest of its GPU, CPU and memory shares of the cluster, divided by its
 * weight), lowest first, then priority, then sequence. With starvation
 * protection on, a job that has waited longer than starvation_ns goes
 * before all others (oldest first), and the cycle reserves room for it.
 *
 * Quotas (Kueue-style): a queue with a quota may use up to `nominal` of
 * each resource; above that it may borrow up to `borrow_limit` more, but
 * only from quota that other queues of its cohort leave idle. A resource
 * whose nominal and borrow limit are both 0 is not limited. A queue under
 * its nominal may reclaim borrowed quota by preemption (preempt.c).
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
    int starving; /* 1 when waited past the threshold */
    double share;
} order_key_t;

static int cmp_key(const void *a, const void *b, void *arg)
{
    const order_key_t *x = a, *y = b;
    arb_queue_policy_t cmp_policy = *(const arb_queue_policy_t *)arg;

    if (x->starving != y->starving)
        return y->starving - x->starving;
    if (x->starving) /* both starving: the oldest first */
        return x->j->seq < y->j->seq ? -1 : x->j->seq > y->j->seq;
    if (cmp_policy == ARB_QP_DRF && x->share != y->share)
        return x->share < y->share ? -1 : 1;
    if (cmp_policy != ARB_QP_FIFO && x->j->priority != y->j->priority)
        return x->j->priority > y->j->priority ? -1 : 1;
    return x->j->seq < y->j->seq ? -1 : x->j->seq > y->j->seq;
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
        k[i].starving = s->conf.starvation_ns > 0 && ctx &&
                        ctx->now_ns - v[i]->submit_ns > s->conf.starvation_ns;
        k[i].share = dominant_share(s, sched_queue_get(s, v[i]->queue), &cap);
    }
    qsort_r(k, (size_t)n, sizeof *k, cmp_key, &s->conf.queue_policy);
    for (int i = 0; i < n; i++)
        v[i] = k[i].j;
    free(k);
}

/* Per-dimension view of a resource vector for the quota loop. */
static int64_t *dim(arb_res_t *r, int d)
{
    switch (d) {
    case 0:
        return &r->gpu_milli;
    case 1:
        return &r->cpu_milli;
    case 2:
        return &r->mem_bytes;
    default:
        return &r->ext[d - 3];
    }
}

static const char *dim_name(int d)
{
    static const char *const n[] = {"GPU", "CPU", "memory"};
    return d < 3 ? n[d] : "extended resource";
}

#define NDIMS (3 + ARB_MAX_EXT)

bool sched_quota_admits(arb_sched_t *s, const arb_job_t *j, char *why, size_t n)
{
    arb_queue_t *q = sched_queue_get(s, j->queue);
    arb_res_t need;

    if (!q || !q->has_quota)
        return true;
    arb_job_total(j, &need);
    for (int d = 0; d < NDIMS; d++) {
        int64_t nom = *dim(&q->nominal, d), lim = *dim(&q->borrow_limit, d);
        int64_t after = *dim(&q->used, d) + *dim(&need, d), idle = 0;
        if ((nom == 0 && lim == 0) || *dim(&need, d) == 0 || after <= nom)
            continue;
        if (after > nom + lim) {
            if (why)
                snprintf(why, n,
                         "queue '%s' %s quota: would use %lld, nominal %lld + borrowing limit "
                         "%lld",
                         arb_str(&s->c->strs, q->name), dim_name(d), (long long)after,
                         (long long)nom, (long long)lim);
            return false;
        }
        /* Borrow only what the cohort leaves idle: the others' unused
         * nominal minus what they borrow themselves, so two borrowers never
         * take the same idle quota. */
        for (int i = 0; q->cohort && i < s->nqueues; i++) {
            arb_queue_t *o = &s->queues[i];
            if (o == q || o->cohort != q->cohort || !o->has_quota)
                continue;
            idle += *dim(&o->nominal, d) - *dim(&o->used, d);
        }
        if (after - nom > idle) {
            if (why)
                snprintf(why, n,
                         "queue '%s' %s quota: needs to borrow %lld but its cohort has %lld idle",
                         arb_str(&s->c->strs, q->name), dim_name(d), (long long)(after - nom),
                         (long long)(idle > 0 ? idle : 0));
            return false;
        }
    }
    return true;
}
