/*
 * slo.c: the admission arithmetic, pure (time passed in): the rate at which
 * inference requests finish (the queue's drain rate), the wait a request
 * queued now can expect, and the verdict on a request that finds every
 * replica saturated (queue it, or 429 for the SLO, for a queue that would
 * not drain before --queue-timeout, a full queue, or a greedier tenant's
 * newest shed in its place); and the time per request at each replica
 * (lb_svc_t, from its completions), from which lb_predict (lb.c) tells
 * the wait a new request would have there. admit.c holds the queue itself
 * and acts on the verdict, and feeds the estimates; test_lb_admit.c and
 * test_lb_late.c check these on a clock of their own.
 *
 * The time per request: each completion gives duration / n, n the
 * requests at the replica when it was sent (itself included; the engine's
 * count when scraped, else ours). A replica that serves one at a time,
 * FIFO, gives its service time exactly (the request waited for the n - 1
 * before it, then took its own); one that batches gives service time / the
 * requests running together, the time per request at the rate it finishes
 * them (Little's law), which times the requests ahead is again the wait.
 * An EWMA (weight 0.3) of the samples; while ours are there and nothing
 * finishes, the time since the last completion (or since the first was
 * sent) over our count there is a floor (a replica that stalls is seen
 * stalling before anything times out); while none are, it halves every
 * svc_half_life_ms, so a replica left out for being slow is sent one again
 * and, if it has recovered, its answers pull the estimate down.
 */
#include <math.h>

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
    if (in->limit_ms > 0 && in->wait_s * 1000.0 > (double)in->limit_ms)
        return LB_ADMIT_LATE;
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

/* ---- the time per request at a replica ------------------------------------ */

/* A sample's weight in the estimate. */
#define SVC_ALPHA 0.3

static double svc_decayed(const lb_svc_t *v, const lb_opts_t *o, int64_t now_ms)
{
    int64_t age = now_ms - v->at_ms;
    if (v->ms <= 0 || o->svc_half_life_ms <= 0 || age <= 0)
        return v->ms;
    return v->ms * exp2(-(double)age / (double)o->svc_half_life_ms);
}

void lb_svc_sent(lb_svc_t *v, const lb_opts_t *o, bool was_idle, int64_t now_ms)
{
    if (!was_idle)
        return;
    /* what the idle time took off stays off: the next sample pulls from there */
    v->ms = svc_decayed(v, o, now_ms);
    if (v->at_ms > 0)
        v->at_ms = now_ms;
    v->busy_ms = now_ms;
}

void lb_svc_done(lb_svc_t *v, double dur_ms, double n, int64_t now_ms)
{
    double x = dur_ms / (n > 1 ? n : 1);

    if (x < 1e-3)
        x = 1e-3; /* 0 is "unknown" */
    v->ms = v->ms > 0 ? v->ms + SVC_ALPHA * (x - v->ms) : x;
    v->at_ms = now_ms;
}

double lb_svc_ms(const lb_svc_t *v, const lb_opts_t *o, uint32_t inflight, int64_t now_ms)
{
    if (inflight > 0) {
        /* nothing finished since the later of the last completion and the
         * start of this busy spell: at least that long over the requests
         * there (all of them may have started together, in one batch) */
        int64_t from = v->at_ms > v->busy_ms ? v->at_ms : v->busy_ms;
        double gap = from > 0 && now_ms > from ? (double)(now_ms - from) / inflight : 0;
        return gap > v->ms ? gap : v->ms;
    }
    return svc_decayed(v, o, now_ms);
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
    case LB_ADMIT_LATE:
        return "no replica would answer within the time budget (--server-timeout, --ttft-slo) "
               "and the queue would not drain before --queue-timeout";
    case LB_ADMIT_QUEUE:
        break;
    }
    return "queued";
}
