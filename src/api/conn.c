/*
 * conn.c: the API server's housekeeping thread (see the phase diagram in
 * api_int.h). It owns two lists under one lock:
 *
 *   connections  every open one, with its phase and when the phase began;
 *                one past its phase's deadline is shut down (shutdown(2):
 *                libmicrohttpd then sees the end of the stream on its own
 *                thread and closes it as any closed connection). The
 *                closing notification takes this lock before libmicrohttpd
 *                closes the descriptor, so a descriptor shut here is never
 *                one already reused by a new connection.
 *   parked       suspended long polls (events, service endpoints): each is
 *                resumed when the state's change count moves past the one
 *                it saw, or at its deadline, and its handler runs again on
 *                its event-loop thread. An agent's assignments poll is
 *                keyed by its node: only a change to that node's jobs
 *                (api_hk_changed_key) wakes it, so ten agents waiting do
 *                not each run again for every event of the cluster, and
 *                the thread that made the change resumes it itself (no hop
 *                through this thread: one wakeup, the poll's event loop's).
 *                No thread waits for a long poll, so a thousand of them
 *                cost a thousand small records.
 *
 *   commits      suspended replies waiting for their store ticket (a write,
 *                or a read that saw what is not durable yet). No thread of
 *                ours waits for them: the store's commit thread, once a
 *                transaction is durable, calls api_hk_durable
 *                (st_set_durable_hook), which resumes every reply it made
 *                durable (group commit makes them durable together). An
 *                event-loop thread never waits for the disk, so a commit
 *                holds up only the replies that need it.
 *
 * This thread is woken (its condition signalled) only when it must look
 * sooner than it would anyway: an unkeyed poll's change, a deadline nearer
 * than its next look (wake_ms; it looks at least every HK_TICK_MS), the
 * server stopping. A parked poll whose deadline is seconds away costs it
 * nothing (api_hk_signals counts the signals, for the tests).
 *
 * Lock order: the state's lock, then this one (api_hk_changed is called
 * with the state's lock held), then the committer's (st_done, asked under
 * this one); nothing here takes the state's lock or calls libmicrohttpd
 * with this lock held. api_hk_changed_key resumes connections with the
 * state's lock held (not this one): libmicrohttpd's resume takes only its
 * own daemon's lock, under which it calls none of ours.
 */
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "api/api_int.h"
#include "util/mtime.h"

#define HK_TICK_MS 250 /* how often deadlines are looked at */

struct api_hk {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    api_conn_t *conns;
    api_park_t *parked;
    int nplain; /* of them, the unkeyed ones (api_hk_park): what api_hk_changed may answer */
    api_park_t *commits; /* replies waiting for their ticket (api_hk_durable resumes them) */
    uint64_t gen;        /* state changes seen */
    uint64_t kgen;       /* keyed changes (one node's assignments) seen */
    bool stopping, quit;
    int64_t wake_ms;  /* while hk_main waits: when it looks next at the latest */
    uint64_t signals; /* hk->cv signalled for the long polls (api_hk_signals) */
    pthread_t th;
    int64_t limit_ms[3]; /* idle, head, body */
    uint64_t closed[3];
};

/* Take p out of the parked list. Caller holds hk->mu. */
static void hk_unpark(api_hk_t *hk, api_park_t *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        hk->parked = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->parked = false;
    if (!p->key)
        hk->nplain--;
}

/* A poll parked with deadline until_ms: wake hk_main only when it would
 * look later than that (it looks every HK_TICK_MS at the latest, so a
 * long poll's deadline seconds away needs no wakeup). Caller holds hk->mu. */
static void hk_deadline(api_hk_t *hk, int64_t until_ms)
{
    if (until_ms < hk->wake_ms) {
        hk->signals++;
        pthread_cond_signal(&hk->cv);
    }
}

static void *hk_main(void *arg)
{
    api_hk_t *hk = arg;
    void **wake = NULL;
    size_t cap = 0;

    pthread_mutex_lock(&hk->mu);
    while (!hk->quit) {
        int64_t now = arb_mono_ms(), next = now + HK_TICK_MS;
        size_t n = 0;
        for (api_conn_t *c = hk->conns; c; c = c->next) {
            if (c->shut || c->phase == API_PH_BUSY)
                continue;
            if (now - c->since_ms > hk->limit_ms[c->phase]) {
                shutdown(c->fd, SHUT_RDWR);
                c->shut = true;
                hk->closed[c->phase]++;
            }
        }
        for (api_park_t *p = hk->parked, *nx; p; p = nx) {
            nx = p->next;
            bool moved = !p->key && p->gen != hk->gen; /* keyed: api_hk_changed_key */
            if (!moved && p->until_ms > now && !hk->stopping) {
                if (p->until_ms < next)
                    next = p->until_ms;
                continue;
            }
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 64;
                void **w = realloc(wake, nc * sizeof *w);
                if (!w)
                    break; /* the rest at the next turn */
                wake = w;
                cap = nc;
            }
            wake[n++] = p->conn;
            hk_unpark(hk, p);
        }
        if (n) {
            pthread_mutex_unlock(&hk->mu);
            for (size_t i = 0; i < n; i++)
                MHD_resume_connection(wake[i]);
            pthread_mutex_lock(&hk->mu);
            continue;
        }
        struct timespec dl = arb_deadline_ms(next - now);
        hk->wake_ms = next;
        arb_cond_wait_until(&hk->cv, &hk->mu, &dl);
    }
    pthread_mutex_unlock(&hk->mu);
    free(wake);
    return NULL;
}

/* The store committed (st_set_durable_hook: on its commit thread, no lock
 * held): resume each reply whose ticket is now durable, here, so that the
 * thread that learned it is the one that wakes them (no hop to a waiter
 * thread). Group commit is the store's: every reply queued while one
 * transaction was written waits for the next one, and all of them are
 * resumed after it. p is gone once its connection runs again: only the
 * collected pointers are used after the lock is let go. */
void api_hk_durable(void *arg)
{
    api_hk_t *hk = arg;
    void *wake[64];
    size_t n;

    do {
        n = 0;
        pthread_mutex_lock(&hk->mu);
        for (api_park_t **pp = &hk->commits; *pp && n < sizeof wake / sizeof *wake;) {
            api_park_t *p = *pp;
            if (!st_done(p->st, p->ticket)) {
                pp = &p->next;
                continue;
            }
            *pp = p->next;
            p->next = NULL;
            p->parked = false;
            wake[n++] = p->conn;
        }
        pthread_mutex_unlock(&hk->mu);
        for (size_t i = 0; i < n; i++)
            MHD_resume_connection(wake[i]);
    } while (n == sizeof wake / sizeof *wake); /* more may be done: look again */
}

bool api_hk_after_commit(api_hk_t *hk, api_park_t *p, void *conn, st_t *s, int64_t ticket)
{
    bool ok = false;

    pthread_mutex_lock(&hk->mu);
    /* Asked under hk->mu: a commit that makes ticket durable after this
     * answer runs api_hk_durable after it, which waits for this lock and
     * then finds p in the list. No wakeup is lost. */
    if (!hk->quit && !st_done(s, ticket)) {
        p->conn = conn;
        p->st = s;
        p->ticket = ticket;
        p->prev = NULL;
        p->next = hk->commits;
        hk->commits = p;
        p->parked = true;
        ok = true;
    }
    pthread_mutex_unlock(&hk->mu);
    return ok;
}

int api_hk_start(api_hk_t **out, int idle_ms, int head_ms, int body_ms, arb_err_t *err)
{
    api_hk_t *hk = calloc(1, sizeof *hk);

    if (!hk)
        return arb_errf(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&hk->mu, NULL);
    arb_cond_init(&hk->cv);
    hk->limit_ms[API_PH_IDLE] = idle_ms;
    hk->limit_ms[API_PH_HEAD] = head_ms;
    hk->limit_ms[API_PH_BODY] = body_ms;
    if (pthread_create(&hk->th, NULL, hk_main, hk) != 0) {
        pthread_cond_destroy(&hk->cv);
        pthread_mutex_destroy(&hk->mu);
        free(hk);
        return arb_errf(err, -EAGAIN, "cannot start the API's housekeeping thread");
    }
    pthread_setname_np(hk->th, "arb-api-hk"); /* top, perf: deadlines and long polls */
    *out = hk;
    return 0;
}

void api_hk_wake_all(api_hk_t *hk)
{
    pthread_mutex_lock(&hk->mu);
    hk->stopping = true;
    pthread_cond_signal(&hk->cv);
    pthread_mutex_unlock(&hk->mu);
    /* the thread resumes them; wait until none is parked */
    for (int64_t until = arb_mono_ms() + 2000; arb_mono_ms() < until;) {
        pthread_mutex_lock(&hk->mu);
        bool left = hk->parked != NULL || hk->commits != NULL;
        pthread_mutex_unlock(&hk->mu);
        if (!left)
            break;
        nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
    }
}

void api_hk_stop(api_hk_t *hk)
{
    if (!hk)
        return;
    pthread_mutex_lock(&hk->mu);
    hk->quit = true;
    pthread_cond_signal(&hk->cv);
    pthread_mutex_unlock(&hk->mu);
    pthread_join(hk->th, NULL);
    while (hk->conns) { /* the daemon is stopped: none is open any more */
        api_conn_t *c = hk->conns;
        hk->conns = c->next;
        free(c);
    }
    pthread_cond_destroy(&hk->cv);
    pthread_mutex_destroy(&hk->mu);
    free(hk);
}

void api_hk_changed(void *arg)
{
    api_hk_t *hk = arg;
    pthread_mutex_lock(&hk->mu);
    hk->gen++;
    /* Only an unkeyed poll waits for any change: the agents' assignment
     * polls (keyed) are woken by api_hk_changed_key, so waking the thread
     * for them at every event would only make it look and wait again. */
    if (hk->nplain) {
        hk->signals++;
        pthread_cond_signal(&hk->cv);
    }
    pthread_mutex_unlock(&hk->mu);
}

bool api_hk_park(api_hk_t *hk, api_park_t *p, void *conn, uint64_t gen, int64_t until_ms)
{
    bool ok = false;

    pthread_mutex_lock(&hk->mu);
    if (!hk->stopping && hk->gen == gen) {
        p->conn = conn;
        p->gen = gen;
        p->key = 0;
        p->until_ms = until_ms;
        p->prev = NULL;
        p->next = hk->parked;
        if (hk->parked)
            hk->parked->prev = p;
        hk->parked = p;
        p->parked = true;
        hk->nplain++;
        hk_deadline(hk, until_ms);
        ok = true;
    }
    pthread_mutex_unlock(&hk->mu);
    return ok;
}

bool api_hk_park_key(api_hk_t *hk, api_park_t *p, void *conn, uint32_t key, uint64_t kgen,
                     int64_t until_ms)
{
    bool ok = false;

    pthread_mutex_lock(&hk->mu);
    if (!hk->stopping && hk->kgen == kgen) {
        p->conn = conn;
        p->gen = kgen;
        p->key = key;
        p->until_ms = until_ms;
        p->prev = NULL;
        p->next = hk->parked;
        if (hk->parked)
            hk->parked->prev = p;
        hk->parked = p;
        p->parked = true;
        hk_deadline(hk, until_ms);
        ok = true;
    }
    pthread_mutex_unlock(&hk->mu);
    return ok;
}

void api_hk_changed_key(void *arg, uint32_t key)
{
    api_hk_t *hk = arg;
    void *wake[64];
    size_t n;
    uint64_t kgen;

    pthread_mutex_lock(&hk->mu);
    kgen = ++hk->kgen;
    do {
        /* The polls parked before this change (gen < kgen): one resumed
         * and parked again meanwhile saw it already. Resumed here, on the
         * changing thread, with the state's lock held and this one let go. */
        n = 0;
        for (api_park_t *p = hk->parked, *nx; p && n < sizeof wake / sizeof *wake; p = nx) {
            nx = p->next;
            if (!p->key || (key && p->key != key) || p->gen >= kgen)
                continue;
            hk_unpark(hk, p);
            wake[n++] = p->conn;
        }
        pthread_mutex_unlock(&hk->mu);
        for (size_t i = 0; i < n; i++)
            MHD_resume_connection(wake[i]);
        if (n == sizeof wake / sizeof *wake) /* more may be parked: look again */
            pthread_mutex_lock(&hk->mu);
    } while (n == sizeof wake / sizeof *wake);
}

void api_hk_snap(api_hk_t *hk, uint64_t *gen, uint64_t *kgen, bool *stopping)
{
    pthread_mutex_lock(&hk->mu);
    *gen = hk->gen;
    *kgen = hk->kgen;
    *stopping = hk->stopping;
    pthread_mutex_unlock(&hk->mu);
}

api_conn_t *api_conn_open(api_hk_t *hk, int fd)
{
    api_conn_t *c = calloc(1, sizeof *c);

    if (!c)
        return NULL;
    c->fd = fd;
    c->phase = API_PH_IDLE;
    c->since_ms = arb_mono_ms();
    pthread_mutex_lock(&hk->mu);
    c->next = hk->conns;
    if (hk->conns)
        hk->conns->prev = c;
    hk->conns = c;
    pthread_mutex_unlock(&hk->mu);
    return c;
}

void api_conn_close(api_hk_t *hk, api_conn_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&hk->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        hk->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&hk->mu);
    free(c);
}

void api_conn_phase(api_hk_t *hk, api_conn_t *c, api_phase_t ph)
{
    if (!c)
        return;
    pthread_mutex_lock(&hk->mu);
    c->phase = ph;
    c->since_ms = arb_mono_ms();
    pthread_mutex_unlock(&hk->mu);
}

uint64_t api_hk_signals(api_hk_t *hk)
{
    pthread_mutex_lock(&hk->mu);
    uint64_t n = hk->signals;
    pthread_mutex_unlock(&hk->mu);
    return n;
}

void api_hk_counts(api_hk_t *hk, uint64_t out[3])
{
    pthread_mutex_lock(&hk->mu);
    memcpy(out, hk->closed, sizeof hk->closed);
    pthread_mutex_unlock(&hk->mu);
}

bool api_poll(api_req_t *r, int64_t wait_ms)
{
    /* the state's stop read here, not for every request: it takes the state's lock */
    if (wait_ms <= 0 || r->poll_over || (r->st && st_stopping(r->st)))
        return false;
    if (!r->poll_until_ms)
        r->poll_until_ms = arb_mono_ms() + wait_ms;
    r->suspend = true;
    return true;
}
