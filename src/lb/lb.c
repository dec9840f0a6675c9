/*
 * lb.c: the table of load-balancing policies and what they share: the
 * policy object's life cycle, a stable 64-bit hash, drawing two random
 * distinct peers (p2c, feedback), and how the inference policies read a
 * model server's load (kv, inference). See lb.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lb/lb.h"

const lb_ops_t *const lb_policies[] = {
    &lb_rr_ops,       &lb_wrr_ops,    &lb_leastconn_ops, &lb_chash_ops,     &lb_p2c_ops,
    &lb_feedback_ops, &lb_prefix_ops, &lb_kv_ops,        &lb_inference_ops, NULL,
};

const lb_ops_t *lb_find(const char *name)
{
    for (int i = 0; lb_policies[i]; i++)
        if (strcmp(lb_policies[i]->name, name) == 0)
            return lb_policies[i];
    return NULL;
}

const char *lb_names(void)
{
    return "round-robin, weighted, least-conn, hash, p2c, feedback, prefix, kv, inference";
}

void lb_opts_default(lb_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->balance = 1.25;
    o->kind = LB_HASH_RING;
    o->vnodes = 100;
    o->maglev_m = 65537;
    o->half_life_ms = 1000;
    o->max_age_ms = 10000;
    o->w_queue = 1.0;
    o->w_gpu = 4.0;
    o->sat_queue = 4;
    o->sat_kv = 0.9;
    o->w_wait = 1;
    o->w_kv = 4;
    o->w_prefix = 8;
    o->w_lora = 16;
    o->prefix_entries = 131072;
    o->svc_half_life_ms = 10000;
}

void lb_policy_init(lb_policy_t *p, const lb_ops_t *ops, const lb_opts_t *opts)
{
    memset(p, 0, sizeof *p);
    p->ops = ops;
    if (opts)
        p->opt = *opts;
    else
        lb_opts_default(&p->opt);
}

int lb_policy_set(lb_policy_t *p, lb_peer_t *peers, int n)
{
    int rc = 0;

    p->peers = peers;
    p->n = n;
    if (p->ops->update)
        rc = p->ops->update(p);
    if (rc < 0) {
        p->peers = NULL;
        p->n = 0;
    }
    return rc;
}

void lb_policy_fini(lb_policy_t *p)
{
    if (p->ops && p->ops->fini)
        p->ops->fini(p);
    p->st = NULL;
    p->peers = NULL;
    p->n = 0;
}

int lb_pick(lb_policy_t *p, const lb_req_t *r)
{
    if (p->n <= 0)
        return -ENOENT;
    return p->ops->pick(p, r);
}

uint64_t lb_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t lb_hash64(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *s = data;
    uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ULL), w;

    while (len >= 8) {
        memcpy(&w, s, 8);
        h ^= lb_mix64(w);
        h = ((h << 27) | (h >> 37)) * 0x9e3779b97f4a7c15ULL + 0x52dce729ULL;
        s += 8;
        len -= 8;
    }
    w = 0;
    for (size_t i = 0; i < len; i++)
        w |= (uint64_t)s[i] << (8 * i);
    h ^= lb_mix64(w ^ 0xff51afd7ed558ccdULL);
    return lb_mix64(h);
}

/* The k-th pickable peer (0-based), or -1. */
static int nth_ok(const lb_policy_t *p, const lb_req_t *r, uint64_t k)
{
    for (int i = 0; i < p->n; i++)
        if (lb_ok(p, r, i) && k-- == 0)
            return i;
    return -1;
}

int lb_two_choices(const lb_policy_t *p, const lb_req_t *r, int *a, int *b)
{
    uint64_t m = 0, x, y;

    for (int i = 0; i < p->n; i++)
        m += lb_ok(p, r, i);
    if (m == 0)
        return -ENOENT;
    /* Two independent 32-bit draws from one 64-bit value; the second is
     * drawn from the m-1 others so the pair is distinct. */
    x = ((r->rnd >> 32) * m) >> 32;
    if (m == 1) {
        *a = *b = nth_ok(p, r, 0);
        return 0;
    }
    y = ((r->rnd & 0xffffffffULL) * (m - 1)) >> 32;
    if (y >= x)
        y++;
    *a = nth_ok(p, r, x);
    *b = nth_ok(p, r, y);
    return 0;
}

void lb_peer_latency(lb_peer_t *p, double ms, int64_t now_ms)
{
    if (ms < 0)
        ms = 0;
    if (p->lat_ms <= 0 || ms > p->lat_ms)
        p->lat_ms = ms > 0 ? ms : 1e-3;
    else
        p->lat_ms += 0.2 * (ms - p->lat_ms);
    p->lat_at_ms = now_ms;
}

/* ---- what the inference policies share ------------------------------------ */

double lb_decay(const lb_opts_t *o, int64_t at, int64_t now)
{
    int64_t age = now - at;

    if (at == 0)
        return 0;
    if (age < 0)
        age = 0;
    if (age > o->max_age_ms)
        return 0;
    return o->half_life_ms > 0 ? exp2(-(double)age / (double)o->half_life_ms) : 1;
}

void lb_engine_load(const lb_policy_t *p, int i, int64_t now, double *total, double *waiting)
{
    const lb_peer_t *e = &p->peers[i];
    double d = lb_decay(&p->opt, e->eng.at_ms, now);
    double delta = (double)e->inflight - (double)e->eng.inflight_at;
    double t = e->eng.running + e->eng.waiting + delta;
    /* the engine's queue ages with its scrape; what this balancer sent
     * there since (delta) is known, not aged: a scrape that is late must
     * not make a replica we keep sending to look less busy */
    double w = d > 0 ? d * e->eng.waiting + delta : 0;

    if (t < (double)e->inflight)
        t = (double)e->inflight; /* ours are there, whatever the engine said */
    if (w < 0)
        w = 0;
    *total = d * t + (1 - d) * (double)e->inflight;
    *waiting = w;
}

double lb_kv_cost(const lb_policy_t *p, int i, int64_t now, double ref_eff)
{
    const lb_peer_t *e = &p->peers[i];
    double t, w, kv = 0;

    lb_engine_load(p, i, now, &t, &w);
    if (e->eng.kv > 0)
        kv = lb_decay(&p->opt, e->eng.at_ms, now) * e->eng.kv;
    return (t + 1 + p->opt.w_wait * w + p->opt.w_kv * kv) * ref_eff / (double)e->eff;
}

bool lb_saturated(const lb_policy_t *p, int i, int64_t now)
{
    const lb_peer_t *e = &p->peers[i];
    double t, w, d;

    if (p->opt.max_inflight && e->inflight >= p->opt.max_inflight)
        return true;
    d = lb_decay(&p->opt, e->eng.at_ms, now);
    if (d <= 0)
        return false;
    lb_engine_load(p, i, now, &t, &w);
    if (w > p->opt.sat_queue)
        return true;
    /* a full cache saturates when requests wait for it: vLLM fills its
     * blocks under load, and a new request that finds room is not held */
    return e->eng.kv >= 0 && d * e->eng.kv > p->opt.sat_kv && w >= 1;
}

double lb_predict(const lb_policy_t *p, int i, const lb_req_t *r, double *wait_ms)
{
    const lb_peer_t *e = &p->peers[i];
    double per = lb_svc_ms(&e->svc, &p->opt, e->inflight, r->now_ms);
    double total = (double)e->inflight, ahead = (double)e->inflight, w, ttfb;

    *wait_ms = 0;
    if (per <= 0)
        return 0;
    if (lb_decay(&p->opt, e->eng.at_ms, r->now_ms) > 0) {
        /* the engine says what waits: those, and the one that frees a
         * slot for the first of them; none waiting, it starts at once */
        lb_engine_load(p, i, r->now_ms, &total, &w);
        ahead = w + (w < 1 ? w : 1);
    }
    *wait_ms = ahead * per;
    ttfb = *wait_ms;
    if (r->whole) {
        /* its own time too: (everything there + it) / the rate they finish at */
        double own = (total + 1) * per;
        ttfb = own > ttfb + per ? own : ttfb + per;
    }
    return ttfb;
}

bool lb_late(const lb_policy_t *p, int i, const lb_req_t *r)
{
    double wait, ttfb;

    if (p->opt.late_ms <= 0 && p->opt.slo_ms <= 0)
        return false;
    ttfb = lb_predict(p, i, r, &wait);
    return (p->opt.late_ms > 0 && ttfb > p->opt.late_ms) ||
           (p->opt.slo_ms > 0 && wait > p->opt.slo_ms);
}
