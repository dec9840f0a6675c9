/*
 * emulate.c: many nodes in one process (see emulate.h). Threads own
 * contiguous slices of the nodes; each walks its slice round robin, one
 * heartbeat per node per interval, and records every report's round trip
 * in a sample buffer the stats printer drains.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/emulate.h"
#include "util/log.h"
#include "util/mtime.h"

typedef struct samples {
    pthread_mutex_t mu;
    int64_t *v; /* round trips, ns */
    size_t n, cap;
    uint64_t reports, failures;
} samples_t;

typedef struct emu_thread {
    const agent_emu_conf_t *c;
    agent_t *nodes; /* slice */
    int n;
    agent_http_conn_t *conn;
    pthread_t thr;
    samples_t win, all; /* this stats window; the whole run */
    int64_t start, end;
    int registered;  /* its nodes with an active lease (under all.mu) */
    uint64_t fences; /* fences of its nodes (under all.mu) */
} emu_thread_t;

static void quiet(void *ctx, const char *msg)
{
    (void)ctx, (void)msg; /* a thousand nodes' logs would drown the figures */
}

static void push(samples_t *s, int64_t v, bool failed)
{
    pthread_mutex_lock(&s->mu);
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        int64_t *p = realloc(s->v, cap * sizeof *p);
        if (p) {
            s->v = p;
            s->cap = cap;
        }
    }
    if (s->n < s->cap)
        s->v[s->n++] = v;
    s->reports++;
    s->failures += failed;
    pthread_mutex_unlock(&s->mu);
}

static bool stopped(const agent_emu_conf_t *c, int64_t end)
{
    return (c->stop && *c->stop) || (end && arb_mono_ns() >= end);
}

static void *run(void *arg)
{
    emu_thread_t *t = arg;
    int64_t hb = t->nodes[0].conf.heartbeat_ns;
    int64_t gap = hb / (t->n ? t->n : 1), next = t->start;

    /* libcurl handles are one thread's each: a node handed another thread's
     * would crash both (this check would have caught it at once) */
    for (int i = 0; i < t->n; i++)
        if (t->nodes[i].conf.conn != t->conn) {
            arb_log(ARB_LOG_ERROR, "emulate",
                    "node %d runs on a thread that does not own its connection", i);
            abort();
        }
    for (int i = 0; !stopped(t->c, t->end); i = (i + 1) % t->n) {
        agent_t *a = &t->nodes[i];
        arb_err_t err;
        int64_t now = arb_mono_ns(), t0;
        uint64_t fails;

        while (now < next && !stopped(t->c, t->end)) {
            int64_t d = next - now;
            if (d > 50000000)
                d = 50000000;
            nanosleep(&(struct timespec){d / 1000000000LL, d % 1000000000LL}, NULL);
            now = arb_mono_ns();
        }
        if (stopped(t->c, t->end))
            break;
        for (int again = 0; again < 2; again++) { /* once more when a task started or ended */
            bool was = a->lease.state == AGENT_LEASE_ACTIVE;
            uint64_t fenced = a->lease.fences;
            fails = a->failures;
            t0 = arb_mono_ns();
            agent_step(a, &err);
            now = arb_mono_ns();
            push(&t->win, now - t0, a->failures != fails);
            push(&t->all, now - t0, a->failures != fails);
            /* the node counts the main thread prints, kept where it may read them */
            pthread_mutex_lock(&t->all.mu);
            t->registered += (a->lease.state == AGENT_LEASE_ACTIVE) - was;
            t->fences += a->lease.fences - fenced;
            pthread_mutex_unlock(&t->all.mu);
            if (!a->urgent && !a->started)
                break;
        }
        next += gap;
        if (next < now - hb) /* fell behind by a whole round: do not burst */
            next = now;
    }
    return NULL;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Merge and clear (when clear) the threads' samples into st. */
static void collect(emu_thread_t *th, int nth, bool whole, bool clear, double secs,
                    agent_emu_stats_t *st)
{
    size_t total = 0, k = 0;
    int64_t *v;

    memset(st, 0, sizeof *st);
    for (int i = 0; i < nth; i++) { /* the threads push while we count: under their locks */
        samples_t *s = whole ? &th[i].all : &th[i].win;
        pthread_mutex_lock(&s->mu);
        total += s->n;
        pthread_mutex_unlock(&s->mu);
    }
    v = malloc((total + 1) * sizeof *v);
    for (int i = 0; i < nth; i++) {
        samples_t *s = whole ? &th[i].all : &th[i].win;
        pthread_mutex_lock(&s->mu);
        if (v && k + s->n <= total) {
            memcpy(v + k, s->v, s->n * sizeof *v);
            k += s->n;
        }
        st->reports += s->reports;
        st->failures += s->failures;
        if (clear)
            s->n = s->reports = s->failures = 0;
        pthread_mutex_unlock(&s->mu);
    }
    st->seconds = secs;
    st->per_s = secs > 0 ? (double)st->reports / secs : 0;
    if (v && k) {
        qsort(v, k, sizeof *v, cmp64);
        st->p50_ms = (double)v[k / 2] / 1e6;
        st->p90_ms = (double)v[k * 9 / 10] / 1e6;
        st->p99_ms = (double)v[k * 99 / 100] / 1e6;
        st->max_ms = (double)v[k - 1] / 1e6;
    }
    free(v);
}

static void count_nodes(emu_thread_t *th, int nth, agent_emu_stats_t *st)
{
    st->registered = 0;
    st->fences = 0;
    for (int i = 0; i < nth; i++) { /* each thread's own counts, under its lock */
        pthread_mutex_lock(&th[i].all.mu);
        st->registered += th[i].registered;
        st->fences += th[i].fences;
        pthread_mutex_unlock(&th[i].all.mu);
    }
}

/* The thread (of nth) that runs node i (of k): the t whose range
 * [t*k/nth, (t+1)*k/nth) holds i, the ranges the threads are given below. */
static int thread_of(int i, int k, int nth)
{
    int t = (int)((int64_t)i * nth / k);
    while (t + 1 < nth && (int64_t)(t + 1) * k / nth <= i)
        t++;
    while (t > 0 && (int64_t)t * k / nth > i)
        t--;
    return t;
}

int agent_emulate(const agent_emu_conf_t *c, agent_emu_stats_t *out, arb_err_t *err)
{
    int k = c->nodes, nth = c->threads > 0 ? c->threads : (k < 4 ? k : 4);
    agent_t *nodes = NULL;
    emu_thread_t *th = NULL;
    char(*names)[AGENT_NAME_MAX] = NULL, (*logs)[PATH_MAX] = NULL;
    int opened = 0, started = 0, rc = 0;
    FILE *o = c->out ? c->out : stderr;
    int64_t t0, stats = c->stats_ns > 0 ? c->stats_ns : 10000000000LL;

    memset(out, 0, sizeof *out);
    if (k < 1 || nth > k)
        return arb_errf(err, -EINVAL, "--emulate: give 1 or more nodes (and no more threads)");
    nodes = calloc((size_t)k, sizeof *nodes);
    th = calloc((size_t)nth, sizeof *th);
    names = calloc((size_t)k, sizeof *names);
    logs = calloc((size_t)k, sizeof *logs);
    if (!nodes || !th || !names || !logs) {
        rc = arb_errf(err, -ENOMEM, "out of memory for %d nodes", k);
        goto out;
    }
    for (int i = 0; i < nth; i++) {
        pthread_mutex_init(&th[i].win.mu, NULL);
        pthread_mutex_init(&th[i].all.mu, NULL);
        if (!(th[i].conn = agent_http_conn_new())) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    for (int i = 0; i < k; i++) {
        agent_conf_t nc = c->base;
        snprintf(names[i], sizeof names[i], "%s-%d", c->base.disc.node_name, i + 1);
        snprintf(logs[i], sizeof logs[i], "%s/%s", c->base.exec.log_dir, names[i]);
        nc.disc.node_name = names[i];
        nc.disc.no_hwloc = true;
        nc.exec.log_dir = logs[i];
        nc.exec.subreaper = false; /* waitpid(-1) would reap the other nodes' tasks */
        nc.exec.no_zygote = true;  /* not a zygote process per emulated node */
        nc.exec.cgroup_mode = "none";
        nc.tel_proc_root = "/nonexistent/arbiter-emulated";
        nc.state_file = NULL;
        /* the libcurl handle of the thread that will run node i (threads
         * take nodes [t*k/nth, (t+1)*k/nth)): a handle is never used by two
         * threads (i*nth/k, rounded down, named the wrong thread for some
         * nodes at a range's start; the two threads then crashed in curl) */
        nc.conn = th[thread_of(i, k, nth)].conn;
        if (!nc.log)
            nc.log = quiet;
        if ((rc = agent_open(&nodes[i], &nc, err)) < 0)
            goto out;
        opened++;
    }
    t0 = arb_mono_ns();
    for (int i = 0; i < nth; i++) {
        int lo = (int)((int64_t)i * k / nth), hi = (int)((int64_t)(i + 1) * k / nth);
        th[i].c = c;
        th[i].nodes = nodes + lo;
        th[i].n = hi - lo;
        /* phases spread over one heartbeat across all threads */
        th[i].start = t0 + nodes[0].conf.heartbeat_ns * lo / k;
        th[i].end = c->duration_ns > 0 ? t0 + c->duration_ns : 0;
        if (pthread_create(&th[i].thr, NULL, run, &th[i]) != 0) {
            rc = arb_errf(err, -EAGAIN, "cannot start emulation thread %d", i);
            if (c->stop)
                *c->stop = 1;
            break;
        }
        started++;
    }
    fprintf(o, "emulate: %d nodes (%s-1 .. %s-%d) on %d threads, heartbeat %.0f ms, to %s\n", k,
            c->base.disc.node_name, c->base.disc.node_name, k, nth,
            (double)nodes[0].conf.heartbeat_ns / 1e6, c->base.target ? c->base.target : "stdout");
    fflush(o);
    int64_t since = t0; /* the totals' start */
    for (int64_t last = t0; rc == 0 && !stopped(c, th[0].end);) {
        nanosleep(&(struct timespec){0, 100000000}, NULL);
        int64_t now = arb_mono_ns();
        if (c->reset && *c->reset) {
            agent_emu_stats_t drop;
            *c->reset = 0;
            collect(th, nth, true, true, 0, &drop);
            since = now;
        }
        if (now - last >= stats) {
            agent_emu_stats_t w;
            collect(th, nth, false, true, (double)(now - last) / 1e9, &w);
            count_nodes(th, nth, &w);
            fprintf(o,
                    "emulate: %5.1f s: %llu reports (%.0f/s), %llu failed | round trip p50 %.2f "
                    "ms, p99 %.2f ms, max %.1f ms | %d/%d registered, %llu fences\n",
                    (double)(now - t0) / 1e9, (unsigned long long)w.reports, w.per_s,
                    (unsigned long long)w.failures, w.p50_ms, w.p99_ms, w.max_ms, w.registered, k,
                    (unsigned long long)w.fences);
            fflush(o);
            last = now;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i].thr, NULL);
    collect(th, nth, true, false, (double)(arb_mono_ns() - since) / 1e9, out);
    count_nodes(th, nth, out);
    out->nodes = k;
    out->threads = nth;
out:
    for (int i = 0; i < opened; i++)
        agent_close(&nodes[i], true);
    for (int i = 0; th && i < nth; i++) {
        agent_http_conn_free(th[i].conn);
        free(th[i].win.v);
        free(th[i].all.v);
        pthread_mutex_destroy(&th[i].win.mu);
        pthread_mutex_destroy(&th[i].all.mu);
    }
    free(nodes);
    free(th);
    free(names);
    free(logs);
    return rc;
}
