/*
 * admit.c: admission control for inference requests. A replica is
 * saturated when its engine queue or KV-cache use is above the policy's
 * thresholds (lb_saturated; kv and inference policies), and late when a
 * new request's first byte there is predicted past the time budget
 * (lb_late: the requests ahead x the replica's time per request, which
 * px_svc_* here learn from the answers; 3/4 of --server-timeout, or a wait
 * past --ttft-slo). When every replica is one or the other, a request sent
 * on would only wait at a replica chosen now (or time out there), for a
 * prefix that may be elsewhere by the time it runs. So the balancer holds
 * it (bounded, fair across tenants) and routes it when a replica has room,
 * with the policy's choice made then; what cannot wait is answered at once
 * with 429 and a Retry-After the client can act on.
 *
 *   px_admit(s) --no one waiting, policy picks a replica----------> routed (px_sess_assign)
 *       | the policy says -EBUSY (all saturated or late), or others wait already
 *       v
 *   expected wait (queued + 1) / drain rate > --ttft-slo ---------> 429 "slo"
 *   ... > --queue-timeout (it would only expire) -----------------> 429 "saturated"
 *   queue at --max-queue: s's tenant under its fair share
 *       (max_queue / tenants queued): the newest request of the
 *       tenant with most queued is shed ("share"), s queued; else --> 429 "full"
 *       v
 *   S_QUEUED, per tenant FIFO --px_admit_pump: tenants in turn,
 *       each its oldest first, while the policy finds room---------> routed
 *       | queued past --queue-timeout (or the SLO, if shorter)
 *       +----------------------------------------------------------> 429 "expired"
 *
 * Invariants:
 *  1. A session is in exactly one tenant's FIFO while S_QUEUED, and in none
 *     otherwise; px->nqueued is the sum of the FIFOs' lengths.
 *  2. A queued session's timer is on t_queue; nothing is read from its
 *     client until it is routed (a client that hangs up is dropped).
 *  3. The pump stops at the first -EBUSY: saturation is the replicas'
 *     state, not the request's, so no later request would fare better.
 *
 * The tenant is the --tenant-header's value, else the API key (the
 * Authorization header), else one anonymous tenant. The drain rate is the
 * rate at which inference requests finish (an EWMA, per second), and the
 * verdict on a request is lb_admit_decide's (slo.c, pure); the
 * controller's autoscaler learns of the queue through the backend source's
 * note() (proxy.c: note_load spreads it over the replicas).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb/proxy_int.h"

void px_admit_done(px_t *px)
{
    lb_drain_done(&px->drain, px->now_ms);
}

/* ---- the time per request at each replica (lb_svc_t) ------------------------
 * With several loops it is one estimate for all (the shared record's
 * atomics: written under the hub's mutex, read by any loop's picks). */

static void svc_get(const px_backend_t *b, lb_svc_t *v)
{
    if (!b->sh) {
        *v = b->svc;
        return;
    }
    v->ms = (double)atomic_load(&b->sh->svc_us) / 1000.0;
    v->at_ms = atomic_load(&b->sh->svc_at_ms);
    v->busy_ms = atomic_load(&b->sh->svc_busy_ms);
}

static void svc_put(px_t *px, px_backend_t *b, const lb_svc_t *v)
{
    b->svc = *v;
    if (b->sh) {
        atomic_store(&b->sh->svc_us, (long long)llround(v->ms * 1000.0));
        atomic_store(&b->sh->svc_at_ms, (long long)v->at_ms);
        atomic_store(&b->sh->svc_busy_ms, (long long)v->busy_ms);
    }
    if (b->peer >= 0)
        px->peers[b->peer].svc = *v;
}

void px_svc_view(px_t *px, int i)
{
    svc_get(px->pmap[i], &px->peers[i].svc);
}

double px_svc_ms(px_t *px, const px_backend_t *b)
{
    lb_svc_t v;
    uint32_t n = b->sh ? atomic_load(&b->sh->inflight) : b->inflight;

    svc_get(b, &v);
    return lb_svc_ms(&v, &px->pol.opt, n, px->now_ms);
}

/* Requests at b now: the engine's count (with what was sent since its
 * scrape), or ours, whichever is more. */
static double svc_count(px_t *px, px_backend_t *b)
{
    double n = b->sh ? atomic_load(&b->sh->inflight) : b->inflight, t, w;

    if (b->peer >= 0) {
        px->peers[b->peer].inflight = (uint32_t)n;
        lb_engine_load(&px->pol, b->peer, px->now_ms, &t, &w);
        if (t > n)
            n = t;
    }
    return n;
}

void px_svc_sent(px_t *px, px_sess_t *s, px_backend_t *b)
{
    lb_svc_t v;
    bool idle = (b->sh ? atomic_load(&b->sh->inflight) : b->inflight) == 0;

    s->svc_n = svc_count(px, b) + 1;
    if (!idle)
        return;
    if (px->hub)
        pthread_mutex_lock(&px->hub->mu);
    svc_get(b, &v);
    lb_svc_sent(&v, &px->pol.opt, true, px->now_ms);
    svc_put(px, b, &v);
    if (px->hub)
        pthread_mutex_unlock(&px->hub->mu);
}

void px_svc_done(px_t *px, px_sess_t *s, px_backend_t *b)
{
    lb_svc_t v;
    double dur = (double)(px->now_ns - s->t_att_ns) / 1e6;

    if (px->hub)
        pthread_mutex_lock(&px->hub->mu);
    svc_get(b, &v);
    lb_svc_done(&v, dur, s->svc_n, px->now_ms);
    svc_put(px, b, &v);
    if (px->hub)
        pthread_mutex_unlock(&px->hub->mu);
}

/* Seconds until a request queued now may start, as far as we can tell; 0 unknown. */
static double expected_wait(px_t *px)
{
    return lb_drain_wait_s(&px->drain, px->nqueued, px->now_ms);
}

/* code: the reason as arbiter_lb_rejected_total labels it */
static void reject(px_t *px, px_sess_t *s, const char *code, const char *why)
{
    char extra[64], body[512];
    double w = expected_wait(px);
    int after = w > 0 ? (int)ceil(w) : 1;

    if (after < 1)
        after = 1;
    if (after > 60)
        after = 60;
    snprintf(extra, sizeof extra, "Retry-After: %d\r\n", after);
    snprintf(body, sizeof body,
             "{\"error\":{\"message\":\"every replica is busy: %s; retry after %d s\","
             "\"type\":\"rate_limit_exceeded\",\"code\":429,\"reason\":\"%s\"}}",
             why, after, code);
    px_sess_reply(px, s, 429, "Too Many Requests", "application/json", extra, body);
}

static px_tenant_t *tenant_find(px_t *px, uint64_t id, int *idx)
{
    for (int i = 0; i < px->ntenants; i++)
        if (px->tenants[i]->id == id) {
            if (idx)
                *idx = i;
            return px->tenants[i];
        }
    return NULL;
}

static void tenant_drop(px_t *px, int i)
{
    free(px->tenants[i]);
    px->tenants[i] = px->tenants[--px->ntenants];
    if (px->tcursor > i)
        px->tcursor--; /* keep the turn order of the others */
}

void px_admit_remove(px_t *px, px_sess_t *s)
{
    int i;
    px_tenant_t *t = tenant_find(px, s->inf.tenant, &i);
    px_sess_t **pp;

    if (s->state != S_QUEUED)
        return;
    s->state = S_HEAD; /* the caller sets what comes next */
    px_timer_del(&s->t);
    if (!t)
        return;
    for (pp = &t->head; *pp && *pp != s; pp = &(*pp)->qnext)
        ;
    if (!*pp)
        return;
    *pp = s->qnext;
    if (t->tail == s) {
        t->tail = NULL;
        for (px_sess_t *x = t->head; x; x = x->qnext)
            t->tail = x;
    }
    s->qnext = NULL;
    t->n--;
    px->nqueued--;
    if (t->n == 0)
        tenant_drop(px, i);
}

static int queue_len_limit(const px_t *px)
{
    int ms = px->c->queue_timeout_ms;
    if (px->c->ttft_slo_ms > 0 && px->c->ttft_slo_ms < ms)
        ms = px->c->ttft_slo_ms;
    return ms;
}

/* Into s's tenant FIFO, or a 429. */
static void enqueue(px_t *px, px_sess_t *s)
{
    const lb_proxy_conf_t *c = px->c;
    px_tenant_t *t = tenant_find(px, s->inf.tenant, NULL);
    /* several loops: each holds its share of the bound */
    int maxq = px->hub ? (c->max_queue + px->hub->nloops - 1) / px->hub->nloops : c->max_queue;

    px_tenant_t *big = NULL;
    for (int i = 0; i < px->ntenants; i++)
        if (!big || px->tenants[i]->n > big->n)
            big = px->tenants[i];
    lb_admit_in_t in = {
        .slo_ms = c->ttft_slo_ms,
        .wait_s = expected_wait(px),
        .limit_ms = queue_len_limit(px),
        .queued = px->nqueued,
        .max_queue = maxq,
        .tenants = px->ntenants,
        .own = t ? t->n : 0,
        .biggest = big ? big->n : 0,
        .biggest_is_own = big && big == t,
    };
    lb_admit_verdict_t verdict = lb_admit_decide(&in);
    switch (verdict) {
    case LB_ADMIT_SLO:
        px->ad.rejected_slo++;
        reject(px, s, "slo", lb_admit_reason(verdict));
        return;
    case LB_ADMIT_FULL:
        px->ad.rejected_full++;
        reject(px, s, "queue_full",
               maxq <= 0 ? "no admission queue (--max-queue 0)" : lb_admit_reason(verdict));
        return;
    case LB_ADMIT_LATE:
        px->ad.rejected_late++;
        reject(px, s, "saturated", lb_admit_reason(verdict));
        return;
    case LB_ADMIT_SHED: {
        px_sess_t *victim = big->tail; /* the newest of the greediest tenant */
        px->ad.rejected_share++;
        reject(px, victim, "fair_share", lb_admit_reason(verdict));
        px_sess_kick(px, victim);
        t = tenant_find(px, s->inf.tenant, NULL);
        break;
    }
    case LB_ADMIT_QUEUE:
        break;
    }
    if (!t) {
        if (px->ntenants == px->captenants) {
            int cap = px->captenants ? px->captenants * 2 : 16;
            px_tenant_t **v = realloc(px->tenants, (size_t)cap * sizeof *v);
            if (!v) {
                reject(px, s, "queue_full", "out of memory");
                return;
            }
            px->tenants = v;
            px->captenants = cap;
        }
        t = calloc(1, sizeof *t);
        if (!t) {
            reject(px, s, "queue_full", "out of memory");
            return;
        }
        t->id = s->inf.tenant;
        px->tenants[px->ntenants++] = t;
    }
    s->qnext = NULL;
    if (t->tail)
        t->tail->qnext = s;
    else
        t->head = s;
    t->tail = s;
    t->n++;
    px->nqueued++;
    px->ad.queued++;
    s->state = S_QUEUED;
    s->inf.queued_ns = px->now_ns;
    px->t_queue.len_ms = queue_len_limit(px);
    px_timer_set(px, &px->t_queue, &s->t);
}

void px_admit(px_t *px, px_sess_t *s)
{
    if (px->nqueued == 0 && px_sess_assign(px, s) != -EBUSY)
        return;
    enqueue(px, s);
    if (px->nqueued > 0)
        px_admit_pump_but(px, s); /* s's own state machine is running: not kicked */
}

void px_admit_pump(px_t *px)
{
    px_admit_pump_but(px, NULL);
}

void px_admit_pump_but(px_t *px, px_sess_t *self)
{
    /* a kicked session may finish at once and pump again: the loop below
     * goes on anyway, so the inner call has nothing to do */
    if (px->pumping)
        return;
    px->pumping = true;
    while (px->nqueued > 0 && !px->stopping) {
        if (px->tcursor >= px->ntenants)
            px->tcursor = 0;
        int i = px->tcursor;
        px_tenant_t *t = px->tenants[i];
        px_sess_t *s = t->head;

        /* out of the line, so that routing owns it; its timer stays on
         * t_queue until routing moves it */
        t->head = s->qnext;
        if (!t->head)
            t->tail = NULL;
        s->qnext = NULL;
        t->n--;
        px->nqueued--;
        s->state = S_HEAD;
        if (px_sess_assign(px, s) == -EBUSY) {
            /* back at the head of its tenant's line; its turn and its age kept */
            s->qnext = t->head;
            t->head = s;
            if (!t->tail)
                t->tail = s;
            t->n++;
            px->nqueued++;
            s->state = S_QUEUED;
            px->pumping = false;
            return;
        }
        px->ad.dispatched++;
        if (t->n == 0)
            tenant_drop(px, i); /* the last one moved into its place takes the turn */
        else
            px->tcursor = i + 1;
        if (s != self)
            px_sess_kick(px, s); /* a pooled connection's edge came long ago */
    }
    px->pumping = false;
}

void px_admit_expired(px_t *px, px_sess_t *s)
{
    px->ad.expired++;
    reject(px, s, "expired", "queued past the queue timeout (--queue-timeout) or the TTFT SLO");
    px_sess_kick(px, s);
}
