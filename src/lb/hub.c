/*
 * hub.c: what the event loops of one `arbiter lb --threads N` share. Each
 * loop is a whole proxy (px_t: its own epoll, listener on the same port by
 * SO_REUSEPORT, client sessions, backend connection pools, policy object);
 * the hub keeps them consistent where a pick depends on the others:
 *
 *   in flight, prefill   one atomic counter per backend for all loops: a
 *                        loop's peers show the totals before each pick, so
 *                        least-conn, p2c, kv and inference balance the
 *                        balancer's whole load, not a loop's share of it
 *   health, ejection     loop 0 runs the active checks and publishes the
 *                        verdict; any loop's passive ejection is seen by all
 *   engine metrics       loop 0 scrapes; the others copy each new scrape
 *   prefix index         one lb_pindex_t (it has its own mutex)
 *   the backend set      loop 0 loads it from the source (file, controller,
 *                        SIGHUP); the workers' source is the hub's copy,
 *                        and an eventfd tells them to reload it
 *   counters             each loop publishes its own every 100 ms; the
 *                        admin listener (loop 0) answers with the sums
 *
 * Admission queues are per loop (each holds max_queue / N). Lock order: only
 * hub->mu, never held while calling out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lb/proxy_int.h"

int px_hub_new(px_hub_t **out, int nloops, arb_err_t *err)
{
    px_hub_t *h = calloc(1, sizeof *h);

    if (!h)
        return arb_errf(err, -ENOMEM, "lb: out of memory");
    pthread_mutex_init(&h->mu, NULL);
    h->nloops = nloops;
    for (int i = 0; i < PX_MAX_LOOPS; i++)
        h->wake[i] = -1;
    for (int i = 1; i < nloops; i++) {
        h->wake[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (h->wake[i] < 0) {
            px_hub_free(h);
            return arb_errf(err, -errno, "lb: eventfd: %s", strerror(errno));
        }
    }
    *out = h;
    return 0;
}

void px_hub_free(px_hub_t *h)
{
    if (!h)
        return;
    for (int i = 0; i < PX_MAX_LOOPS; i++)
        if (h->wake[i] >= 0)
            close(h->wake[i]);
    for (int i = 0; i < h->nbes; i++)
        free(h->bes[i]);
    free(h->bes);
    free(h->targets);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

px_shared_be_t *px_hub_be(px_hub_t *h, const char *name)
{
    px_shared_be_t *sb = NULL;

    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->nbes && !sb; i++)
        if (strcmp(h->bes[i]->name, name) == 0)
            sb = h->bes[i];
    if (!sb && h->nbes == h->capbes) {
        int cap = h->capbes ? h->capbes * 2 : 16;
        px_shared_be_t **v = realloc(h->bes, (size_t)cap * sizeof *v);
        if (v) {
            h->bes = v;
            h->capbes = cap;
        }
    }
    if (!sb && h->nbes < h->capbes && (sb = calloc(1, sizeof *sb))) {
        snprintf(sb->name, sizeof sb->name, "%s", name);
        atomic_store(&sb->hc_up, true);
        sb->eng.kv = -1;
        h->bes[h->nbes++] = sb;
    }
    if (sb)
        sb->refs++;
    pthread_mutex_unlock(&h->mu);
    return sb;
}

void px_hub_be_put(px_hub_t *h, px_shared_be_t *sb)
{
    if (!sb)
        return;
    pthread_mutex_lock(&h->mu);
    if (--sb->refs == 0) {
        for (int i = 0; i < h->nbes; i++)
            if (h->bes[i] == sb) {
                h->bes[i] = h->bes[--h->nbes];
                break;
            }
        free(sb);
    }
    pthread_mutex_unlock(&h->mu);
}

static void wake_all(px_hub_t *h)
{
    uint64_t one = 1;
    for (int i = 1; i < h->nloops; i++)
        if (h->wake[i] >= 0)
            (void)!write(h->wake[i], &one, sizeof one);
}

void px_hub_publish(px_hub_t *h, const lb_target_t *t, int n)
{
    lb_target_t *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);

    if (!copy)
        return; /* the workers keep the old set */
    if (n)
        memcpy(copy, t, (size_t)n * sizeof *copy);
    pthread_mutex_lock(&h->mu);
    free(h->targets);
    h->targets = copy;
    h->ntargets = n;
    pthread_mutex_unlock(&h->mu);
    wake_all(h);
}

void px_hub_stop(px_hub_t *h)
{
    atomic_store(&h->stop, true);
    wake_all(h);
}

/* ---- a worker's backend source ----------------------------------------------- */

typedef struct hsrc {
    px_hub_t *h;
    int id;
} hsrc_t;

static int hsrc_load(void *st, lb_target_t **out, int *n, arb_err_t *err)
{
    hsrc_t *x = st;
    int rc = 0;

    pthread_mutex_lock(&x->h->mu);
    *n = x->h->ntargets;
    *out = malloc((size_t)(*n ? *n : 1) * sizeof **out);
    if (!*out)
        rc = arb_errf(err, -ENOMEM, "out of memory");
    else if (*n)
        memcpy(*out, x->h->targets, (size_t)*n * sizeof **out);
    pthread_mutex_unlock(&x->h->mu);
    return rc;
}

static int hsrc_watch(void *st)
{
    hsrc_t *x = st;
    return x->h->wake[x->id];
}

static void hsrc_fini(void *st)
{
    free(st);
}

/* empty_ok: the main loop has already judged the set (a service with no
 * ready replica is a state) */
static const lb_source_ops_t hsrc_ops = {"hub", hsrc_load, hsrc_watch, hsrc_fini, NULL, NULL, true};

void px_hub_source(px_hub_t *h, int id, lb_source_t *s)
{
    hsrc_t *x = calloc(1, sizeof *x);
    s->ops = &hsrc_ops;
    s->st = x;
    if (x) {
        x->h = h;
        x->id = id;
    }
}

/* ---- counters and scrapes ------------------------------------------------------- */

void px_hub_sync(px_t *px)
{
    px_hub_t *h = px->hub;
    px_snap_t *sn;

    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    sn = &h->snap[px->id];
    sn->total = px->total;
    sn->ad = px->ad;
    sn->accepted = px->accepted;
    sn->retries = px->retries;
    sn->no_backend = px->no_backend;
    sn->bad_requests = px->bad_requests;
    sn->nclients = px->nclients;
    sn->nqueued = px->nqueued;
    for (int i = 0; i < px->nbes; i++) {
        px_backend_t *b = px->bes[i];
        if (!b->sh)
            continue;
        b->sh->st[px->id] = b->st;
        if (px->id != 0 && atomic_load(&b->sh->eng_ver) != b->eng_ver) {
            b->eng_ver = atomic_load(&b->sh->eng_ver);
            b->eng = b->sh->eng;
            memcpy(b->engine, b->sh->engine, sizeof b->engine);
            b->scrapes_ok = b->sh->scrapes_ok;
            b->scrapes_bad = b->sh->scrapes_bad;
            if (b->peer >= 0)
                px->peers[b->peer].eng = b->eng;
        }
    }
    pthread_mutex_unlock(&h->mu);
}

static void stats_add(px_stats_t *a, const px_stats_t *b)
{
    a->requests += b->requests;
    for (int i = 0; i < 6; i++)
        a->resp[i] += b->resp[i];
    a->connect_fail += b->connect_fail;
    a->io_fail += b->io_fail;
    a->tls_fail += b->tls_fail;
    a->timeouts += b->timeouts;
    a->ejections += b->ejections;
    a->retries += b->retries;
    a->checks_ok += b->checks_ok;
    a->checks_bad += b->checks_bad;
    a->bytes_out += b->bytes_out;
    for (int i = 0; i < 15; i++)
        a->lat_bucket[i] += b->lat_bucket[i];
    a->lat_sum += b->lat_sum;
}

static void ad_add(px_admit_stats_t *a, const px_admit_stats_t *b)
{
    a->queued += b->queued;
    a->dispatched += b->dispatched;
    a->rejected_full += b->rejected_full;
    a->rejected_share += b->rejected_share;
    a->rejected_slo += b->rejected_slo;
    a->rejected_late += b->rejected_late;
    a->expired += b->expired;
    for (int i = 0; i < 15; i++)
        a->ttft_bucket[i] += b->ttft_bucket[i];
    a->ttft_sum += b->ttft_sum;
    for (int i = 0; i < 3; i++)
        a->infer_requests[i] += b->infer_requests[i];
    a->parse_errors += b->parse_errors;
    a->unparsed += b->unparsed;
}

void px_hub_totals(px_t *px, px_snap_t *out)
{
    px_hub_t *h = px->hub;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&h->mu);
    for (int k = 0; k < h->nloops; k++) {
        const px_snap_t *s = &h->snap[k];
        stats_add(&out->total, &s->total);
        ad_add(&out->ad, &s->ad);
        out->accepted += s->accepted;
        out->retries += s->retries;
        out->no_backend += s->no_backend;
        out->bad_requests += s->bad_requests;
        out->nclients += s->nclients;
        out->nqueued += s->nqueued;
    }
    pthread_mutex_unlock(&h->mu);
}

void px_hub_backend_stats(px_t *px, const px_backend_t *b, px_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!px->hub || !b->sh) {
        *out = b->st;
        return;
    }
    pthread_mutex_lock(&px->hub->mu);
    for (int k = 0; k < px->hub->nloops; k++)
        stats_add(out, &b->sh->st[k]);
    pthread_mutex_unlock(&px->hub->mu);
}
