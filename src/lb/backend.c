/*
 * backend.c: the proxy's backends: the set (loaded from the backend source,
 * reloaded gracefully), what the policy sees of each (lb_peer_t), pooled
 * connections, passive ejection, active health checks and slow start.
 *
 * A backend's life, as the policy sees it through peer.eff:
 *
 *            checks fail `fall` times              checks pass `rise` times
 *   UP ----------------------------------> DOWN -----------------------------> UP (slow start)
 *    |  eject_after consecutive failures          eject_until passes
 *    +------------------------------------> EJECTED ---------------------------> UP (slow start)
 *    |  gone from the source on reload
 *    +------------------------------------> REMOVED: no new requests; freed when the last
 *                                           connection or check referring to it closes
 * Invariants:
 *  1. eff == 0 exactly when DOWN, EJECTED or REMOVED; otherwise
 *     eff = weight * 16 scaled by the slow-start ramp (at least 1).
 *  2. refs counts the backend's open connections (busy or pooled) and its
 *     check in flight; a REMOVED backend with refs == 0 is freed by the next
 *     sweep (end of the loop iteration), never inside a walk of px->bes.
 *  3. Ejection backoff doubles per consecutive ejection, from eject_base_ms
 *     up to eject_max_ms; one success resets it.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "lb/proxy_int.h"

#define WSCALE 16 /* eff units per unit of weight: room for the slow-start ramp */

/* ---- the set ---------------------------------------------------------------- */

static void backend_free(px_t *px, px_backend_t *b)
{
    for (int i = 0; i < px->nbes; i++) {
        if (px->bes[i] == b) {
            px->bes[i] = px->bes[--px->nbes];
            break;
        }
    }
    if (px->hub)
        px_hub_be_put(px->hub, b->sh);
    free(b);
}

/* Removed backends are freed here, at a point where no loop walks px->bes
 * (closing a connection drops a ref, and that happens inside such loops). */
void px_backends_sweep(px_t *px)
{
    for (int i = 0; i < px->nbes;) {
        px_backend_t *b = px->bes[i];
        if (b->removed && b->refs == 0)
            backend_free(px, b);
        else
            i++;
    }
}

void px_backend_unref(px_t *px, px_backend_t *b)
{
    b->refs--;
}

/* Rebuild the policy's view (peers, pmap) from the backends not removed. */
static int rebuild_peers(px_t *px)
{
    int n = 0, k = 0, rc;
    lb_peer_t *peers;
    px_backend_t **pmap;
    uint8_t *skip;

    for (int i = 0; i < px->nbes; i++)
        n += !px->bes[i]->removed;
    peers = calloc((size_t)(n ? n : 1), sizeof *peers);
    pmap = calloc((size_t)(n ? n : 1), sizeof *pmap);
    skip = calloc((size_t)(n ? n : 1), 1);
    if (!peers || !pmap || !skip) {
        free(peers);
        free(pmap);
        free(skip);
        return -ENOMEM;
    }
    for (int i = 0; i < px->nbes; i++) {
        px_backend_t *b = px->bes[i];
        if (b->removed) {
            b->peer = -1;
            continue;
        }
        b->peer = k;
        pmap[k] = b;
        peers[k].name = b->name;
        peers[k].weight = b->weight;
        peers[k].eff = b->eff;
        peers[k].inflight = b->inflight;
        peers[k].load = b->load;
        peers[k].lat_ms = b->lat_ms;
        peers[k].lat_at_ms = b->lat_at_ms;
        peers[k].eng = b->eng;
        peers[k].prefill = b->prefill;
        peers[k].svc = b->svc;
        k++;
    }
    rc = lb_policy_set(&px->pol, peers, n);
    free(px->peers);
    free(px->pmap);
    free(px->skip);
    px->peers = peers;
    px->pmap = pmap;
    px->skip = skip;
    px->npeers = n;
    return rc;
}

static uint32_t eff_of(const px_t *px, px_backend_t *b)
{
    const lb_proxy_conf_t *c = px->c;
    uint64_t w = (uint64_t)b->weight * WSCALE;

    if (b->removed)
        return 0;
    if (b->sh && px->id != 0) {
        /* a worker loop: loop 0's checks say up or down, any loop ejects */
        bool up = atomic_load(&b->sh->hc_up);
        int64_t ej = atomic_load(&b->sh->eject_until);
        if (!up) {
            b->hc_seen = false;
            return 0;
        }
        if (!b->hc_seen) {
            b->hc_seen = true; /* back up: ramp up again */
            b->up_since = px->now_ms;
        }
        if (ej && px->now_ms < ej)
            return 0;
        if (ej && ej != b->eject_seen) {
            b->eject_seen = ej; /* back from ejection: ramp up again */
            b->up_since = px->now_ms;
        }
    } else {
        if (!b->hc_up)
            return 0;
        int64_t ej = b->eject_until;
        int64_t shared = b->sh ? atomic_load(&b->sh->eject_until) : 0;
        if (shared > ej && shared != b->eject_seen)
            ej = b->eject_until = shared; /* a worker loop ejected it */
        if (ej) {
            if (px->now_ms < ej)
                return 0;
            b->eject_seen = ej;
            b->eject_until = 0; /* back from ejection: ramp up again */
            b->up_since = px->now_ms;
        }
    }
    if (c->slow_start_ms > 0 && b->up_since > 0) {
        int64_t el = px->now_ms - b->up_since;
        if (el < c->slow_start_ms) {
            w = w * (uint64_t)(el > 0 ? el : 0) / (uint64_t)c->slow_start_ms;
            if (w < 1)
                w = 1;
        } else {
            b->up_since = 0;
        }
    }
    return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

void px_backends_refresh(px_t *px)
{
    for (int i = 0; i < px->npeers; i++) {
        px_backend_t *b = px->pmap[i];
        b->eff = eff_of(px, b);
        px->peers[i].eff = b->eff;
    }
}

int px_backends_load(px_t *px, arb_err_t *err)
{
    lb_target_t *t = NULL;
    px_backend_t **fresh = NULL, **bes;
    int n = 0, nfresh = 0, rc;
    bool first = px->nbes == 0 && px->peers == NULL;

    const lb_source_t *src = px->id == 0 ? &px->c->source : &px->hsrc;
    rc = src->ops->load(src->st, &t, &n, err);
    if (rc < 0)
        return rc;
    if (n == 0 && !src->ops->empty_ok) {
        free(t);
        return arb_errf(err, -EINVAL, "no backends; give --backend HOST:PORT or a backends file");
    }
    fresh = calloc((size_t)(n ? n : 1), sizeof *fresh);
    if (!fresh) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    /* resolve everything first: a bad entry leaves the old set untouched */
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (strcmp(t[i].addr, t[j].addr) == 0) {
                rc = arb_errf(err, -EINVAL, "backend %s is listed twice", t[i].addr);
                goto out;
            }
        px_backend_t *b = calloc(1, sizeof *b);
        if (!b) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
            goto out;
        }
        fresh[nfresh++] = b;
        snprintf(b->name, sizeof b->name, "%s", t[i].addr);
        b->weight = t[i].weight ? t[i].weight : 1;
        b->tls = t[i].tls || px->c->backend_tls;
        if (b->tls && !px->btls_cred) {
            rc = arb_errf(err, -EINVAL,
                          "backend %s: https:// needs the balancer started with backend TLS "
                          "(--backend-tls, --backend-cacert or --backend-insecure-skip-verify)",
                          t[i].addr);
            goto out;
        }
        rc = px_resolve(t[i].addr, false, &b->sa, &b->salen, err);
        if (rc < 0) {
            arb_err_prefix(err, "backend %s: ", t[i].addr);
            goto out;
        }
    }
    bes = realloc(px->bes, (size_t)(px->nbes + n ? px->nbes + n : 1) * sizeof *bes);
    if (!bes) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    px->bes = bes;
    /* match by address: kept backends keep their state, pools and counters */
    for (int i = 0; i < px->nbes; i++) {
        px_backend_t *b = px->bes[i];
        bool keep = false;
        if (b->removed)
            continue;
        for (int j = 0; j < nfresh && !keep; j++) {
            if (fresh[j] && strcmp(fresh[j]->name, b->name) == 0) {
                keep = true;
                b->weight = fresh[j]->weight;
                if (b->tls != fresh[j]->tls) { /* spoken to another way now: pool emptied */
                    b->tls = fresh[j]->tls;
                    while (b->idle)
                        px_bconn_close(px, b->idle);
                }
                b->sa = fresh[j]->sa;
                b->salen = fresh[j]->salen;
                free(fresh[j]);
                fresh[j] = NULL;
            }
        }
        if (!keep) {
            b->removed = true;
            b->eff = 0;
            while (b->idle)
                px_bconn_close(px, b->idle);
        }
    }
    for (int j = 0; j < nfresh; j++) {
        px_backend_t *b = fresh[j];
        if (!b)
            continue;
        b->hc_up = true;
        b->hc_seen = true;
        if (px->hub)
            b->sh = px_hub_be(px->hub, b->name);
        b->up_since = first ? 0 : px->now_ms; /* added on reload: slow start */
        b->hc_next = px->now_ms;
        b->sc_next = px->now_ms;
        b->eng.kv = -1;
        px->bes[px->nbes++] = b;
        fresh[j] = NULL;
    }
    px_backends_sweep(px); /* removed backends nobody refers to */
    for (int i = 0; i < px->nbes; i++)
        px->bes[i]->eff = eff_of(px, px->bes[i]);
    rc = rebuild_peers(px);
    if (rc < 0)
        arb_errf(err, rc, "out of memory rebuilding the policy");
    else if (px->hub && px->id == 0)
        px_hub_publish(px->hub, t, n); /* the workers follow */
out:
    if (fresh)
        for (int j = 0; j < nfresh; j++)
            free(fresh[j]);
    free(fresh);
    free(t);
    return rc;
}

void px_backends_free(px_t *px)
{
    for (int i = 0; i < px->nbes; i++) {
        px_backend_t *b = px->bes[i];
        b->removed = true;
        while (b->idle)
            px_bconn_close(px, b->idle);
    }
    for (int i = 0; i < px->nbes; i++) {
        if (px->hub)
            px_hub_be_put(px->hub, px->bes[i]->sh);
        free(px->bes[i]);
    }
    free(px->bes);
    free(px->peers);
    free(px->pmap);
    free(px->skip);
    px->bes = NULL;
    px->nbes = 0;
    px->peers = NULL;
    px->pmap = NULL;
    px->skip = NULL;
    px->npeers = 0;
}

/* ---- picking ---------------------------------------------------------------- */

int px_pick(px_t *px, px_sess_t *s, px_backend_t **out)
{
    lb_req_t r = {.now_ms = px->now_ms, .skip = px->skip};
    int i;

    if (px->npeers == 0)
        return -ENOENT;
    if (px->hub) /* the other loops' requests count as ours */
        for (i = 0; i < px->npeers; i++)
            if (px->pmap[i]->sh) {
                px->peers[i].inflight = atomic_load(&px->pmap[i]->sh->inflight);
                px->peers[i].prefill = atomic_load(&px->pmap[i]->sh->prefill);
                px_svc_view(px, i);
            }
    memset(px->skip, 0, (size_t)px->npeers);
    for (int k = 0; k < s->ntried; k++)
        for (i = 0; i < px->npeers; i++)
            if (px->pmap[i] == s->tried[k])
                px->skip[i] = 1;
    /* --maxconn: a backend with that many of ours in flight takes no more;
     * when every one is full the request waits (-EBUSY: admit.c queues it) */
    int full = 0;
    if (px->c->maxconn > 0)
        for (i = 0; i < px->npeers; i++)
            if (!px->skip[i] && px->peers[i].inflight >= (uint32_t)px->c->maxconn) {
                px->skip[i] = 1;
                full++;
            }
    if (s->req.key) {
        r.key = lb_hash64(s->req.key, s->req.klen, 0);
        r.has_key = true;
    }
    int matched = 0;
    if (s->inf.kind != OAI_NONE) {
        r.blocks = s->inf.blocks;
        r.nblocks = s->inf.nblocks;
        r.model = s->inf.model;
        r.admit = px->c->max_queue > 0;
        r.whole = !s->inf.stream;
        r.matched = &matched;
    }
    px->rng += 0x9e3779b97f4a7c15ULL;
    r.rnd = lb_mix64(px->rng);
    i = lb_pick(&px->pol, &r);
    if (i < 0)
        return full > 0 && px->c->max_queue > 0 ? -EBUSY : i;
    *out = px->pmap[i];
    s->inf.charge = (uint32_t)(s->inf.nblocks > matched ? s->inf.nblocks - matched : 0);
    return 0;
}

void px_prefill_add(px_t *px, px_backend_t *b, int64_t d)
{
    int64_t v = (int64_t)b->prefill + d;
    b->prefill = (uint32_t)(v > 0 ? v : 0);
    if (b->sh) /* the peers show every loop's total */
        v = (int64_t)atomic_fetch_add(&b->sh->prefill, (unsigned)d) + d;
    if (b->peer >= 0)
        px->peers[b->peer].prefill = (uint32_t)(v > 0 ? v : 0);
}

void px_prefill_done(px_t *px, px_sess_t *s, px_backend_t *b)
{
    if (!s->inf.charged)
        return;
    px_prefill_add(px, b, -(int64_t)s->inf.charged);
    s->inf.charged = 0;
}

void px_inflight(px_t *px, px_backend_t *b, int d)
{
    int64_t v = (int64_t)b->inflight + d;
    b->inflight = (uint32_t)v;
    if (b->sh)
        v = (int64_t)atomic_fetch_add(&b->sh->inflight, (unsigned)d) + d;
    if (b->peer >= 0)
        px->peers[b->peer].inflight = (uint32_t)v;
}

/* ---- connections and the pool ---------------------------------------------- */

px_bconn_t *px_bconn_open(px_t *px, px_backend_t *b, int *err)
{
    px_bconn_t *bc = calloc(1, sizeof *bc);
    int one = 1, fd;

    if (!bc) {
        *err = -ENOMEM;
        return NULL;
    }
    fd = socket(b->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = -errno;
        free(bc);
        return NULL;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if ((*err = px_btls_new(px, b, fd, &bc->tls)) < 0) { /* ours: out of memory */
        close(fd);
        free(bc);
        return NULL;
    }
    if (connect(fd, (struct sockaddr *)&b->sa, b->salen) == 0) {
        bc->connected = true;
    } else if (errno != EINPROGRESS) {
        *err = -errno;
        px_btls_end(&bc->tls);
        close(fd);
        free(bc);
        return NULL;
    }
    bc->kind = PX_BACKEND;
    bc->fd = fd;
    bc->be = b;
    bc->t.owner = bc;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = bc};
    if (epoll_ctl(px->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        *err = -errno;
        px_btls_end(&bc->tls);
        close(fd);
        free(bc);
        return NULL;
    }
    b->refs++;
    return bc;
}

static void pool_unlink(px_bconn_t *bc)
{
    px_backend_t *b = bc->be;
    if (!bc->pooled)
        return;
    if (bc->prev)
        bc->prev->next = bc->next;
    else
        b->idle = bc->next;
    if (bc->next)
        bc->next->prev = bc->prev;
    bc->next = bc->prev = NULL;
    bc->pooled = false;
    b->nidle--;
}

void px_bconn_close(px_t *px, px_bconn_t *bc)
{
    px_backend_t *b = bc->be;

    if (bc->s) {
        px_inflight(px, b, -1);
        px_prefill_done(px, bc->s, b);
        bc->s = NULL;
    }
    pool_unlink(bc);
    px_timer_del(&bc->t);
    px_btls_end(&bc->tls);
    close(bc->fd);
    bc->kind = PX_DEAD;
    bc->next = px->dead_b;
    px->dead_b = bc;
    px_backend_unref(px, b);
}

void px_bconn_release(px_t *px, px_bconn_t *bc)
{
    px_backend_t *b = bc->be;

    px_inflight(px, b, -1);
    if (bc->s)
        px_prefill_done(px, bc->s, b);
    bc->s = NULL;
    if (bc->hup) {
        px_bconn_close(px, bc);
        return;
    }
    bc->reused = false;
    bc->pooled = true;
    bc->prev = NULL;
    bc->next = b->idle;
    if (b->idle)
        b->idle->prev = bc;
    b->idle = bc;
    b->nidle++;
    px_timer_set(px, &px->t_pool, &bc->t);
}

px_bconn_t *px_pool_take(px_t *px, px_backend_t *b)
{
    while (b->idle) {
        px_bconn_t *bc = b->idle;
        pool_unlink(bc);
        px_timer_del(&bc->t);
        if (bc->hup) {
            px_bconn_close(px, bc);
            continue;
        }
        bc->reused = true;
        return bc;
    }
    return NULL;
}

/* ---- passive health ---------------------------------------------------------- */

void px_backend_ok(px_t *px, px_backend_t *b)
{
    b->fails = 0;
    b->ejections = 0;
}

void px_backend_failed(px_t *px, px_backend_t *b)
{
    const lb_proxy_conf_t *c = px->c;

    if (c->eject_after <= 0 || b->removed)
        return;
    if (++b->fails < c->eject_after)
        return;
    int64_t backoff = c->eject_base_ms;
    for (int i = 1; i < b->ejections && backoff < c->eject_max_ms; i++)
        backoff *= 2;
    if (backoff > c->eject_max_ms)
        backoff = c->eject_max_ms;
    b->ejections++;
    b->fails = 0;
    b->eject_until = px->now_ms + (backoff > 0 ? backoff : 1);
    if (b->sh) {
        long long cur = atomic_load(&b->sh->eject_until);
        while (cur < b->eject_until &&
               !atomic_compare_exchange_weak(&b->sh->eject_until, &cur, b->eject_until))
            ;
    }
    b->st.ejections++;
    b->eff = 0;
    if (b->peer >= 0)
        px->peers[b->peer].eff = 0;
    while (b->idle)
        px_bconn_close(px, b->idle);
}

/* Two sources feed a backend's load: the X-Arbiter-Load header on its
 * responses (queue, gpu, inflight, whichever it carries) and its agent's
 * report through the controller (gpu_util, queue; px_backend_agent_load).
 * Each field keeps the newest value either source gave; load.at_ms, which
 * the feedback policy ages, is the newest of them. */
void px_backend_load_report(px_t *px, px_backend_t *b, const http_head_t *h)
{
    lb_load_t l = b->load;

    if (!h->load)
        return;
    l.queue = -1;
    l.gpu_util = -1;
    if (http_parse_load(h->load, h->llen, &l.queue, &l.gpu_util, &l.inflight) < 0)
        return;
    if (l.queue < 0) {
        l.queue = b->load.queue;
    } else {
        b->queue_at_ms = px->now_ms;
        b->hdr_queue = l.queue;
        b->hdr_queue_at_ms = px->now_ms;
    }
    if (l.gpu_util < 0)
        l.gpu_util = b->load.gpu_util;
    else
        b->gpu_at_ms = px->now_ms;
    l.at_ms = px->now_ms;
    b->load = l;
    if (b->peer >= 0)
        px->peers[b->peer].load = l;
}

void px_backend_agent_load(px_t *px, px_backend_t *b, const lb_agent_load_t *a)
{
    lb_load_t l = b->load;
    bool newer = false;

    if (a->at_ms > b->gpu_at_ms) {
        l.gpu_util = a->gpu_util;
        b->gpu_at_ms = a->at_ms;
        newer = true;
    }
    if (a->at_ms > b->queue_at_ms) {
        l.queue = a->queue;
        b->queue_at_ms = a->at_ms;
        newer = true;
    }
    if (!newer)
        return;
    if (a->at_ms > l.at_ms)
        l.at_ms = a->at_ms;
    b->load = l;
    if (b->peer >= 0)
        px->peers[b->peer].load = l;
}

void px_backend_latency(px_t *px, px_backend_t *b, double ms)
{
    lb_peer_t t = {.lat_ms = b->lat_ms, .lat_at_ms = b->lat_at_ms};

    lb_peer_latency(&t, ms, px->now_ms);
    b->lat_ms = t.lat_ms;
    b->lat_at_ms = t.lat_at_ms;
    if (b->peer >= 0) {
        px->peers[b->peer].lat_ms = t.lat_ms;
        px->peers[b->peer].lat_at_ms = t.lat_at_ms;
    }
}

/* ---- active health checks ---------------------------------------------------- */

static void check_done(px_t *px, px_check_t *hc, bool ok, const http_head_t *h)
{
    px_backend_t *b = hc->be;
    const lb_proxy_conf_t *c = px->c;

    px_timer_del(&hc->t);
    px_btls_end(&hc->tls);
    close(hc->fd);
    hc->kind = PX_DEAD;
    hc->next = px->dead_c;
    px->dead_c = hc;
    b->hc = NULL;
    if (ok) {
        b->st.checks_ok++;
        b->hc_bad = 0;
        if (h)
            px_backend_load_report(px, b, h);
        if (!b->hc_up && ++b->hc_ok >= c->rise) {
            b->hc_up = true;
            if (b->sh)
                atomic_store(&b->sh->hc_up, true);
            b->up_since = px->now_ms;
            b->fails = 0;
            b->eject_until = 0;
        }
    } else {
        b->st.checks_bad++;
        b->hc_ok = 0;
        if (b->hc_up && ++b->hc_bad >= c->fall) {
            b->hc_up = false;
            if (b->sh)
                atomic_store(&b->sh->hc_up, false);
            b->eff = 0;
            if (b->peer >= 0)
                px->peers[b->peer].eff = 0;
            while (b->idle)
                px_bconn_close(px, b->idle);
        }
    }
    px_backend_unref(px, b);
}

/* A check that ends without a verdict (our own shortage, not the backend's). */
static void check_abandon(px_t *px, px_check_t *hc)
{
    px_backend_t *b = hc->be;

    px_timer_del(&hc->t);
    px_btls_end(&hc->tls);
    close(hc->fd);
    hc->kind = PX_DEAD;
    hc->next = px->dead_c;
    px->dead_c = hc;
    b->hc = NULL;
    px_backend_unref(px, b);
}

static void check_start(px_t *px, px_backend_t *b)
{
    px_check_t *hc = calloc(1, sizeof *hc);
    int fd, n;

    b->hc_next = px->now_ms + px->c->health_interval_ms;
    if (!hc)
        return;
    n = snprintf(hc->buf, sizeof hc->buf,
                 "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: arbiter-lb-check\r\n"
                 "Connection: close\r\n\r\n",
                 px->c->health_path, b->name);
    if (n <= 0 || (size_t)n >= sizeof hc->buf) {
        free(hc);
        return;
    }
    hc->len = (uint32_t)n;
    hc->kind = PX_CHECK;
    hc->be = b;
    hc->t.owner = hc;
    fd = socket(b->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) { /* ours (open files): the backend is not judged this time */
        px_own_failure(px, -errno, "starting a health check");
        free(hc);
        return;
    }
    int cerr = px_btls_new(px, b, fd, &hc->tls) < 0 ? ENOMEM : 0;
    if (!cerr)
        cerr = connect(fd, (struct sockaddr *)&b->sa, b->salen) < 0 ? errno : 0;
    if (cerr && cerr != EINPROGRESS && px_own_errno(cerr)) {
        px_own_failure(px, -cerr, "starting a health check");
        px_btls_end(&hc->tls);
        close(fd);
        free(hc);
        return;
    }
    hc->fd = fd;
    b->hc = hc;
    b->refs++;
    px_timer_set(px, &px->t_check, &hc->t);
    if (cerr && cerr != EINPROGRESS) {
        check_done(px, hc, false, NULL);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = hc};
    if (epoll_ctl(px->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        check_done(px, hc, false, NULL);
}

void px_checks_run(px_t *px)
{
    if (!px->c->health_path || px->stopping)
        return;
    for (int i = 0; i < px->nbes; i++) {
        px_backend_t *b = px->bes[i];
        if (!b->removed && !b->hc && px->now_ms >= b->hc_next)
            check_start(px, b);
    }
}

int64_t px_checks_next(const px_t *px)
{
    int64_t t = 0;
    if (!px->c->health_path)
        return 0;
    for (int i = 0; i < px->nbes; i++) {
        const px_backend_t *b = px->bes[i];
        if (!b->removed && !b->hc && (t == 0 || b->hc_next < t))
            t = b->hc_next;
    }
    return t;
}

void px_check_timeout(px_t *px, px_check_t *hc)
{
    check_done(px, hc, false, NULL);
}

void px_check_event(px_t *px, px_check_t *hc, uint32_t ev)
{
    if (!hc->connected) {
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        if (getsockopt(hc->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr) {
            check_done(px, hc, false, NULL);
            return;
        }
        hc->connected = true;
    }
    if (hc->tls && !hc->tls_up) { /* TLS first (btls.c) */
        bool rd = true, wr = true;
        int hs = px_btls_handshake(px, hc->be, hc->tls, &rd, &wr, "health check");
        if (hs == -ENOMEM) { /* ours: not judged this time */
            px_own_failure(px, hs, "in a health check's TLS handshake");
            check_abandon(px, hc);
            return;
        }
        if (hs < 0) {
            check_done(px, hc, false, NULL);
            return;
        }
        if (hs == 0)
            return;
        hc->tls_up = true;
    }
    int last = 0; /* a TLS error's code (btls.c) */
    while (!hc->reading) {
        ssize_t n = px_bsend(hc->tls, hc->fd, hc->buf + hc->sent, hc->len - hc->sent, &last);
        if (n > 0) {
            hc->sent += (uint32_t)n;
            if (hc->sent == hc->len) {
                hc->reading = true; /* the buffer now holds the reply */
                hc->len = 0;
            }
            continue;
        }
        if (n < 0 && errno == EAGAIN)
            return;
        if (hc->tls)
            px_btls_io_failed(px, hc->be, hc->tls, last, "health check failed");
        check_done(px, hc, false, NULL);
        return;
    }
    for (;;) {
        ssize_t n =
            px_brecv(hc->tls, hc->fd, hc->buf + hc->len, sizeof hc->buf - 1 - hc->len, &last);
        if (n > 0) {
            http_head_t h;
            hc->len += (uint32_t)n;
            int rc = http_parse_response(hc->buf, hc->len, &h);
            if (rc > 0) {
                check_done(px, hc, h.status >= 200 && h.status < 400, &h);
                return;
            }
            if (rc < 0 || hc->len >= sizeof hc->buf - 1) {
                check_done(px, hc, false, NULL);
                return;
            }
            continue;
        }
        if (n < 0 && errno == EAGAIN)
            return;
        if (hc->tls)
            px_btls_io_failed(px, hc->be, hc->tls, last, "health check failed");
        check_done(px, hc, false, NULL); /* closed before a full head */
        return;
    }
}
