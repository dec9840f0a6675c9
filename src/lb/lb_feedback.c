/*
 * lb_feedback.c: power of two choices on live load. Two distinct peers are
 * drawn at random and the one expected to answer sooner gets the request.
 * What "sooner" counts, beyond p2c's in-flight count:
 *
 *   - what the replica itself last reported (its agent, or the
 *     X-Arbiter-Load response header): requests queued, GPU utilisation,
 *     requests in flight from every balancer; each weighed by how fresh the
 *     report is: its weight halves every half_life_ms and is zero past
 *     max_age_ms, so a replica that stops reporting is judged on what this
 *     balancer sees itself; stale data never outvotes it;
 *   - how long the replica has been taking to answer (lat_ms, a peak EWMA
 *     the caller keeps with lb_peer_latency). Work queued at a replica
 *     that answers in 20 ms costs a hundred times work queued at one that
 *     answers in 0.2 ms: the expected wait is (queued + 1) x service time,
 *     which is what evens out waits rather than counts. A peer without a
 *     fresh sample gets the benefit of the doubt: its estimate slides toward
 *     the better of the two with the same half-life, so a replica that was
 *     slow is tried again now and then and can earn its share back.
 *
 *   cost = (max(inflight, d * reported_inflight) + 1
 *           + d * (w_queue * queue + w_gpu * gpu_util)) * latency / eff,
 *   d = 2^(-report_age / half_life)   (0 past max_age or with no report)
 *
 * The clock is the caller's (r->now_ms). Why p2c and not the global minimum:
 * every balancer reads the same reports; all of them sending to the one
 * least-loaded replica until its next report is the herd that two random
 * choices avoid.
 */
#include <math.h>

#include "lb/lb.h"

static double decay(const lb_policy_t *p, int64_t at, int64_t now)
{
    int64_t age = now - at;
    if (age < 0)
        age = 0;
    if (age > p->opt.max_age_ms)
        return 0;
    return p->opt.half_life_ms > 0 ? exp2(-(double)age / (double)p->opt.half_life_ms) : 1;
}

static double cost(const lb_policy_t *p, const lb_peer_t *e, double lat, int64_t now)
{
    const lb_load_t *l = &e->load;
    double d = l->at_ms > 0 ? decay(p, l->at_ms, now) : 0, busy = e->inflight;

    if (d * l->inflight > busy)
        busy = d * l->inflight;
    return (busy + 1 + d * (p->opt.w_queue * l->queue + p->opt.w_gpu * l->gpu_util)) * lat / e->eff;
}

/* The latency estimates of a and b. An estimate whose last sample has aged
 * slides toward the better of the two (with the report half-life): a peer
 * not heard from lately is given the benefit of the doubt and tried again.
 * 1 for both when neither has a sample; a peer without one borrows the
 * other's. */
static double slide(const lb_policy_t *p, const lb_peer_t *e, double best, int64_t now)
{
    int64_t age = now - e->lat_at_ms > 0 ? now - e->lat_at_ms : 0;
    double hl = (double)(p->opt.half_life_ms > 0 ? p->opt.half_life_ms : 1);
    return best + (e->lat_ms - best) * exp2(-(double)age / hl);
}

static void latencies(const lb_policy_t *p, const lb_peer_t *a, const lb_peer_t *b, int64_t now,
                      double *la, double *lb)
{
    if (a->lat_ms <= 0 && b->lat_ms <= 0) {
        *la = *lb = 1;
        return;
    }
    if (a->lat_ms <= 0 || b->lat_ms <= 0) {
        *la = *lb = a->lat_ms > 0 ? a->lat_ms : b->lat_ms;
        return;
    }
    double best = a->lat_ms < b->lat_ms ? a->lat_ms : b->lat_ms;
    *la = slide(p, a, best, now);
    *lb = slide(p, b, best, now);
}

static int fb_pick(lb_policy_t *p, const lb_req_t *r)
{
    int a, b;
    double la, lb;

    if (lb_two_choices(p, r, &a, &b) < 0)
        return -ENOENT;
    if (a == b)
        return a;
    latencies(p, &p->peers[a], &p->peers[b], r->now_ms, &la, &lb);
    return cost(p, &p->peers[b], lb, r->now_ms) < cost(p, &p->peers[a], la, r->now_ms) ? b : a;
}

const lb_ops_t lb_feedback_ops = {
    .name = "feedback",
    .summary = "p2c on live load: replica reports decayed by age, and response time",
    .pick = fb_pick,
};
