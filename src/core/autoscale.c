/*
 * autoscale.c: the autoscaler's decision (include/arbiter/autoscale.h).
 * Pure: time and load come in as arguments; the history is the caller's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "arbiter/autoscale.h"

void arb_as_conf_default(arb_as_conf_t *c)
{
    memset(c, 0, sizeof *c);
    c->min = 1;
    c->max = 1;
    c->target = 1;
    c->tolerance = 0.1;
    c->window_ns = 30000000000LL;
    c->cooldown_ns = 10000000000LL;
}

int arb_as_conf_check(const arb_as_conf_t *c, char *msg, size_t n)
{
    if (c->min < 1 || c->max < c->min) {
        snprintf(msg, n, "autoscale: minReplicas %d, maxReplicas %d: need 1 <= min <= max", c->min,
                 c->max);
        return -EINVAL;
    }
    if (!(c->target > 0) && !(c->gpu_target > 0)) {
        snprintf(msg, n, "autoscale: give targetInflight (> 0) or targetGpuUtil (0..1)");
        return -EINVAL;
    }
    if (c->gpu_target < 0 || c->gpu_target > 1) {
        snprintf(msg, n, "autoscale.targetGpuUtil: %g is outside 0..1", c->gpu_target);
        return -EINVAL;
    }
    if (c->tolerance < 0 || c->tolerance >= 1 || c->window_ns < 0 || c->cooldown_ns < 0) {
        snprintf(msg, n, "autoscale: tolerance must be 0..1, window and cooldown >= 0");
        return -EINVAL;
    }
    return 0;
}

void arb_as_reset(arb_as_state_t *st)
{
    memset(st, 0, sizeof *st);
}

void arb_as_note_change(arb_as_state_t *st, int64_t now_ns)
{
    st->last_change_ns = now_ns;
    st->changed = true;
}

static void record(arb_as_state_t *st, int64_t now, int rec, int64_t window)
{
    /* drop what fell out of the window (keep one older sample: it says
     * the history reaches back that far) */
    while (st->n > 1) {
        int nxt = (st->head + 1) % ARB_AS_HIST;
        if (now - st->at[nxt] < window)
            break;
        st->head = nxt;
        st->n--;
    }
    if (st->n == ARB_AS_HIST) {
        st->head = (st->head + 1) % ARB_AS_HIST;
        st->n--;
    }
    int k = (st->head + st->n) % ARB_AS_HIST;
    st->at[k] = now;
    st->rec[k] = rec;
    st->n++;
    if (!st->first_ns)
        st->first_ns = now ? now : 1;
}

int arb_as_decide(const arb_as_conf_t *c, arb_as_state_t *st, int64_t now_ns, int current,
                  const arb_as_load_t *l, arb_as_decision_t *d)
{
    int over = l->ready > 0 ? l->ready : (current > 0 ? current : 1);
    double per = (l->inflight + l->queue) / over, ratio = 0;
    int rec;

    memset(d, 0, sizeof *d);
    if (c->target > 0)
        ratio = per / c->target;
    if (c->gpu_target > 0 && l->gpu_util >= 0 && l->gpu_util / c->gpu_target > ratio)
        ratio = l->gpu_util / c->gpu_target;
    if (current < 1)
        current = 1;
    if (fabs(ratio - 1.0) <= c->tolerance)
        rec = current;
    else
        rec = (int)ceil((double)current * ratio - 1e-9);
    if (rec < c->min)
        rec = c->min;
    if (rec > c->max)
        rec = c->max;
    record(st, now_ns, rec, c->window_ns);
    d->recommended = rec;
    d->per_replica = per;
    d->ratio = ratio;
    d->desired = current;

    bool cool = !st->changed || now_ns - st->last_change_ns >= c->cooldown_ns;
    char gpu[64] = "";
    if (c->gpu_target > 0 && l->gpu_util >= 0)
        snprintf(gpu, sizeof gpu, ", GPU util %.0f%% (target %.0f%%)", l->gpu_util * 100,
                 c->gpu_target * 100);
    int len = snprintf(d->why, sizeof d->why,
                       "load %.1f in flight + %.1f queued over %d replicas = %.2f per replica "
                       "(target %.2f)%s: recommend %d",
                       l->inflight, l->queue, over, per, c->target, gpu, rec);
    size_t used = len > 0 && (size_t)len < sizeof d->why ? (size_t)len : sizeof d->why - 1;
    if (current < c->min || current > c->max) {
        /* outside the bounds (the bounds changed): move in at once */
        d->desired = current < c->min ? c->min : c->max;
        snprintf(d->why + used, sizeof d->why - used, "; %d is outside %d..%d", current, c->min,
                 c->max);
    } else if (rec > current) {
        if (cool)
            d->desired = rec;
        else
            snprintf(d->why + used, sizeof d->why - used, "; cooling down");
    } else if (rec < current) {
        int hi = rec;
        for (int i = 0; i < st->n; i++) {
            int k = (st->head + i) % ARB_AS_HIST;
            if (now_ns - st->at[k] <= c->window_ns && st->rec[k] > hi)
                hi = st->rec[k];
        }
        bool covered = now_ns - st->first_ns >= c->window_ns;
        if (hi < current && covered && cool)
            d->desired = hi;
        else
            snprintf(d->why + used, sizeof d->why - used, "; holding %d (%s)", current,
                     !covered ? "window not yet full"
                     : !cool  ? "cooling down"
                              : "a recommendation in the window wants more");
    }
    return d->desired;
}
