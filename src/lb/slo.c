/*
 * slo.c: the admission arithmetic, pure (time passed in): the rate at which
 * inference requests finish (the queue's drain rate), the wait a request
 * queued now can expect, and the verdict on a request that finds every
 * replica saturated (queue it, or 429 for the SLO, a full queue, or a
 * greedier tenant's newest shed in its place). admit.c holds the queue
 * itself and acts on the verdict; tests/unit/test_lb_admit.c checks these
 * on a clock of its own.
 */
#include "lb/lb.h"

/* A window closes when a completion or a question comes at least 1 s after
 * it opened; its rate joins the estimate with weight 1/2. */
#define DRAIN_WINDOW_MS 1000

static void drain_roll(lb_drain_t *d, int64_t now_ms)
{
    if (d->at_ms == 0) {
        d->at_ms = now_ms;
        return;
    }
    int64_t dt = now_ms - d->at_ms;
    if (dt < DRAIN_WINDOW_MS)
        return;
    double r = (double)d->count * 1000.0 / (double)dt;
    d->rate = d->rate > 0 ? 0.5 * d->rate + 0.5 * r : r;
    d->count = 0;
    d->at_ms = now_ms;
}

void lb_drain_done(lb_drain_t *d, int64_t now_ms)
{
    if (d->at_ms == 0) { /* the first completion opens the first window */
        d->at_ms = now_ms;
        return;
    }
    d->count++;
    drain_roll(d, now_ms);
}

double lb_drain_rate(lb_drain_t *d, int64_t now_ms)
{
    drain_roll(d, now_ms);
    return d->rate;
}

double lb_drain_wait_s(lb_drain_t *d, int queued, int64_t now_ms)
{
    double r = lb_drain_rate(d, now_ms);
    return r > 0 ? (double)(queued + 1) / r : 0;
}

lb_admit_verdict_t lb_admit_decide(const lb_admit_in_t *in)
{
    if (in->max_queue <= 0)
        return LB_ADMIT_FULL;
    if (in->slo_ms > 0 && in->wait_s * 1000.0 > (double)in->slo_ms)
        return LB_ADMIT_SLO;
    if (in->queued < in->max_queue)
        return LB_ADMIT_QUEUE;
    /* full: a tenant under its fair share takes the place of the newest
     * request of the tenant with most queued, if that is another tenant */
    int tenants = in->tenants + (in->own > 0 ? 0 : 1);
    int share = in->max_queue / tenants;
    if (in->own >= share || in->biggest_is_own || in->biggest <= 0)
        return LB_ADMIT_FULL;
    return LB_ADMIT_SHED;
}

const char *lb_admit_reason(lb_admit_verdict_t v)
{
    switch (v) {
    case LB_ADMIT_SLO:
        return "the expected wait for a replica exceeds the TTFT SLO (--ttft-slo)";
    case LB_ADMIT_FULL:
        return "the admission queue is full (--max-queue)";
    case LB_ADMIT_SHED:
        return "the tenant is over its fair share of the queue";
    case LB_ADMIT_QUEUE:
        break;
    }
    return "queued";
}
