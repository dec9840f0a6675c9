/*
 * store.c: the backend-neutral half of the store: the backend table, the
 * locked wrappers, batches, and the group committer.
 *
 * Group commit, as a state machine of one batch:
 *
 *   store_gc_enqueue          committer takes the queue        commit ok
 *   ----------------> QUEUED -------------------------> WRITING ---------> DURABLE
 *                                                          |               (waiters wake)
 *                                                          | commit fails
 *                                                          v
 *                                                        FAILED (every waiter, and every
 *                                                                later enqueue, gets -EIO)
 *
 * A transaction applies its ops in order, less those a later op on the
 * same key supersedes (the store it leaves is the same; superseded()).
 *
 * Invariants: (1) batches are written in ticket order, each transaction
 * holding a contiguous run of tickets; (2) durable <= last; (3) a ticket is
 * reported durable only after the transaction holding it committed.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "util/mtime.h"

const store_ops_t *const store_backends[] = {&store_sqlite_ops, &store_etcd_ops, NULL};

const double store_gc_buckets_ms[11] = {0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256};

/* ---- locked wrappers ------------------------------------------------------------ */

int store_open(const char *uri, const store_opts_t *o, store_t **out, arb_err_t *err)
{
    const char *colon = strstr(uri, ":");
    const char *where = uri;
    const store_ops_t *ops = &store_sqlite_ops;
    store_opts_t def = {0};
    int rc;

    size_t n = colon ? (size_t)(colon - uri) : 0;
    bool scheme = n > 0;

    for (size_t i = 0; i < n; i++) /* "name:" with name in [a-z0-9] */
        if (!((uri[i] >= 'a' && uri[i] <= 'z') || (uri[i] >= '0' && uri[i] <= '9')))
            scheme = false;
    if (scheme) {
        ops = NULL;
        for (int i = 0; store_backends[i]; i++)
            if (strlen(store_backends[i]->name) == n &&
                memcmp(store_backends[i]->name, uri, n) == 0)
                ops = store_backends[i];
        if (!ops)
            return arb_errf(err, -ENOENT,
                            "store '%s': unknown backend '%.*s'; use sqlite:DIR or "
                            "etcd://HOST:PORT[,HOST:PORT...]",
                            uri, (int)n, uri);
        where = colon + 1;
        while (where[0] == '/' && where[1] == '/') /* sqlite://dir */
            where++;
    }
    rc = ops->open(where, o ? o : &def, out, err);
    if (rc == 0) {
        (*out)->ops = ops;
        pthread_mutex_init(&(*out)->mu, NULL);
    }
    return rc;
}

void store_close(store_t *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->mu);
    s->ops->close(s);
}

int store_get(store_t *s, const char *key, char **val, size_t *n, uint64_t *mod_rev, arb_err_t *err)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->ops->get(s, key, val, n, mod_rev, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int store_scan(store_t *s, const char *prefix, store_scan_fn fn, void *arg, arb_err_t *err)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->ops->scan(s, prefix, fn, arg, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

uint64_t store_revision(store_t *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t r = s->ops->revision(s);
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* ---- batches -------------------------------------------------------------------- */

static int batch_add(store_batch_t *b, const char *key, const void *val, size_t n, bool del)
{
    store_op_t op = {0};

    if (b->nops == b->cap) {
        int cap = b->cap ? b->cap * 2 : 8;
        store_op_t *v = realloc(b->ops, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        b->ops = v;
        b->cap = cap;
    }
    op.key = strdup(key);
    if (!del) {
        op.val = malloc(n + 1);
        if (op.val) {
            memcpy(op.val, val, n);
            op.val[n] = '\0';
        }
        op.n = n;
    }
    if (!op.key || (!del && !op.val)) {
        free(op.key);
        free(op.val);
        return -ENOMEM;
    }
    b->ops[b->nops++] = op;
    return 0;
}

int store_batch_put(store_batch_t *b, const char *key, const void *val, size_t n)
{
    return batch_add(b, key, val, n, false);
}

int store_batch_putstr(store_batch_t *b, const char *key, const char *val)
{
    return batch_add(b, key, val, strlen(val), false);
}

int store_batch_del(store_batch_t *b, const char *key)
{
    return batch_add(b, key, NULL, 0, true);
}

void store_batch_free(store_batch_t *b)
{
    for (int i = 0; i < b->nops; i++) {
        free(b->ops[i].key);
        free(b->ops[i].val);
    }
    free(b->ops);
    memset(b, 0, sizeof *b);
}

/* Mark in skip[] each op that a later op of the same batch on the same key
 * supersedes (a job saved as submitted and then as placed, both queued
 * before one commit): the transaction leaves the same store without it.
 * One pass from the end over an open-addressed table of key hashes. Where
 * no table can be had, nothing is skipped. */
static void superseded(const store_op_t *ops, int nops, bool *skip)
{
    size_t cap = 16;
    while (cap < (size_t)nops * 2)
        cap *= 2;
    int *slot = malloc(cap * sizeof *slot);

    if (!slot)
        return;
    for (size_t i = 0; i < cap; i++)
        slot[i] = -1;
    for (int i = nops - 1; i >= 0; i--) {
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (const unsigned char *k = (const unsigned char *)ops[i].key; *k; k++)
            h = (h ^ *k) * 1099511628211ULL;
        size_t at = (size_t)h & (cap - 1);
        while (slot[at] >= 0 && strcmp(ops[slot[at]].key, ops[i].key) != 0)
            at = (at + 1) & (cap - 1);
        if (slot[at] >= 0)
            skip[i] = true;
        else
            slot[at] = i;
    }
    free(slot);
}

/* Caller holds s->mu. */
static int do_apply(store_t *s, const store_op_t *ops, int nops, uint64_t *rev, arb_err_t *err)
{
    bool few[64] = {false}, *skip = nops <= 64 ? few : calloc((size_t)nops, sizeof *skip);
    int rc = s->ops->begin(s, err);

    if (skip && nops > 1)
        superseded(ops, nops, skip);
    for (int i = 0; rc == 0 && i < nops; i++) {
        if (skip && skip[i])
            continue;
        if (ops[i].val)
            rc = s->ops->put(s, ops[i].key, ops[i].val, ops[i].n, err);
        else
            rc = s->ops->del(s, ops[i].key, err);
    }
    if (rc == 0)
        rc = s->ops->commit(s, rev, err);
    else
        s->ops->rollback(s);
    if (skip != few)
        free(skip);
    return rc;
}

int store_apply(store_t *s, const store_batch_t *b, uint64_t *rev, arb_err_t *err)
{
    pthread_mutex_lock(&s->mu);
    int rc = do_apply(s, b->ops, b->nops, rev, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- group commit ------------------------------------------------------------------ */

struct store_gc {
    store_t *s;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    store_batch_t queue; /* ops queued since the committer last took the queue */
    int64_t last;        /* ticket of the last batch queued */
    int64_t durable;     /* every ticket <= durable is committed */
    bool failed, stop;
    void (*on_fn)(void *); /* store_gc_on_durable: told after each commit, without gc->mu */
    void *on_arg;
    bool in_hook;        /* on_fn is running (store_gc_on_durable waits for it to return) */
    pthread_cond_t idle; /* in_hook went false */
    int inject;          /* fault injection: commits left to fail */
    arb_err_t fail_err;
    store_gc_stats_t st;
};

static void *gc_main(void *arg)
{
    store_gc_t *gc = arg;

    pthread_mutex_lock(&gc->mu);
    for (;;) {
        while (!gc->stop && gc->queue.nops == 0)
            pthread_cond_wait(&gc->work, &gc->mu);
        if (gc->queue.nops == 0 && gc->stop)
            break;
        store_batch_t b = gc->queue;
        int64_t upto = gc->last;
        bool inject = gc->inject > 0;
        memset(&gc->queue, 0, sizeof gc->queue);
        if (inject)
            gc->inject--;
        pthread_mutex_unlock(&gc->mu);

        arb_err_t err = {{0}};
        int64_t t0 = arb_mono_ns();
        int rc;
        pthread_mutex_lock(&gc->s->mu);
        rc = inject ? arb_errf(&err, -EIO, "injected commit failure")
                    : do_apply(gc->s, b.ops, b.nops, NULL, &err);
        pthread_mutex_unlock(&gc->s->mu);
        int64_t dt = arb_mono_ns() - t0;
        int nops = b.nops;
        store_batch_free(&b);

        pthread_mutex_lock(&gc->mu);
        if (rc < 0) {
            gc->failed = true;
            gc->fail_err = err;
        } else {
            double ms = (double)dt / 1e6;
            int k = 0;
            while (k < 11 && ms > store_gc_buckets_ms[k])
                k++;
            gc->st.hist[k]++;
            gc->st.commits++;
            gc->st.ops += (uint64_t)nops;
            gc->st.commit_ns_sum += (uint64_t)dt;
            gc->durable = upto;
        }
        pthread_cond_broadcast(&gc->done);
        if (gc->on_fn) { /* this thread resumes the replies that waited: no hop to another */
            void (*fn)(void *) = gc->on_fn;
            void *fa = gc->on_arg;
            gc->in_hook = true;
            pthread_mutex_unlock(&gc->mu);
            fn(fa);
            pthread_mutex_lock(&gc->mu);
            gc->in_hook = false;
            pthread_cond_broadcast(&gc->idle);
        }
        if (gc->failed)
            break;
    }
    pthread_mutex_unlock(&gc->mu);
    return NULL;
}

int store_gc_start(store_t *s, store_gc_t **out, arb_err_t *err)
{
    store_gc_t *gc = calloc(1, sizeof *gc);

    if (!gc)
        return arb_errf(err, -ENOMEM, "out of memory");
    gc->s = s;
    pthread_mutex_init(&gc->mu, NULL);
    pthread_cond_init(&gc->work, NULL);
    pthread_cond_init(&gc->done, NULL);
    pthread_cond_init(&gc->idle, NULL);
    if (pthread_create(&gc->thr, NULL, gc_main, gc) != 0) {
        pthread_mutex_destroy(&gc->mu);
        pthread_cond_destroy(&gc->work);
        pthread_cond_destroy(&gc->done);
        pthread_cond_destroy(&gc->idle);
        free(gc);
        return arb_errf(err, -EAGAIN, "cannot start the store's commit thread");
    }
    pthread_setname_np(gc->thr, "arb-commit"); /* top, perf: the committer apart */
    *out = gc;
    return 0;
}

void store_gc_stop(store_gc_t *gc)
{
    if (!gc)
        return;
    pthread_mutex_lock(&gc->mu);
    gc->stop = true;
    pthread_cond_broadcast(&gc->work);
    pthread_mutex_unlock(&gc->mu);
    pthread_join(gc->thr, NULL);
    store_batch_free(&gc->queue);
    pthread_mutex_destroy(&gc->mu);
    pthread_cond_destroy(&gc->work);
    pthread_cond_destroy(&gc->done);
    pthread_cond_destroy(&gc->idle);
    free(gc);
}

void store_gc_on_durable(store_gc_t *gc, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&gc->mu);
    while (gc->in_hook) /* the old fn may be running: its arg must outlive it */
        pthread_cond_wait(&gc->idle, &gc->mu);
    gc->on_fn = fn;
    gc->on_arg = arg;
    pthread_mutex_unlock(&gc->mu);
}

int64_t store_gc_enqueue(store_gc_t *gc, store_batch_t *b)
{
    int64_t t;

    if (b->nops == 0)
        return 0;
    pthread_mutex_lock(&gc->mu);
    if (gc->failed) {
        pthread_mutex_unlock(&gc->mu);
        store_batch_free(b);
        return -EIO;
    }
    if (gc->queue.nops == 0) {
        gc->queue = *b; /* the common case: take the array as it is */
    } else {
        if (gc->queue.nops + b->nops > gc->queue.cap) {
            int cap = (gc->queue.nops + b->nops) * 2;
            store_op_t *v = realloc(gc->queue.ops, (size_t)cap * sizeof *v);
            if (!v) {
                pthread_mutex_unlock(&gc->mu);
                store_batch_free(b);
                return -ENOMEM;
            }
            gc->queue.ops = v;
            gc->queue.cap = cap;
        }
        memcpy(gc->queue.ops + gc->queue.nops, b->ops, (size_t)b->nops * sizeof *b->ops);
        gc->queue.nops += b->nops;
        free(b->ops);
    }
    memset(b, 0, sizeof *b);
    t = ++gc->last;
    gc->st.batches++;
    pthread_cond_signal(&gc->work);
    pthread_mutex_unlock(&gc->mu);
    return t;
}

int64_t store_gc_last(store_gc_t *gc)
{
    pthread_mutex_lock(&gc->mu);
    int64_t t = gc->last;
    pthread_mutex_unlock(&gc->mu);
    return t;
}

bool store_gc_done(store_gc_t *gc, int64_t t)
{
    pthread_mutex_lock(&gc->mu);
    bool done = t <= gc->durable || gc->failed;
    pthread_mutex_unlock(&gc->mu);
    return done;
}

int store_gc_wait(store_gc_t *gc, int64_t t, arb_err_t *err)
{
    int rc = 0;

    if (t <= 0)
        return 0;
    pthread_mutex_lock(&gc->mu);
    while (gc->durable < t && !gc->failed)
        pthread_cond_wait(&gc->done, &gc->mu);
    if (gc->durable < t)
        rc = arb_errf(err, -EIO, "store commit failed: %s", gc->fail_err.msg);
    pthread_mutex_unlock(&gc->mu);
    return rc;
}

void store_gc_get_stats(store_gc_t *gc, store_gc_stats_t *st)
{
    pthread_mutex_lock(&gc->mu);
    *st = gc->st;
    pthread_mutex_unlock(&gc->mu);
}

void store_gc_inject_failure(store_gc_t *gc, int n)
{
    pthread_mutex_lock(&gc->mu);
    gc->inject = n;
    pthread_mutex_unlock(&gc->mu);
}

int store_gc_status(store_gc_t *gc, arb_err_t *err)
{
    int rc = 0;

    pthread_mutex_lock(&gc->mu);
    if (gc->failed)
        rc = arb_errf(err, -EIO, "store commit failed: %s", gc->fail_err.msg);
    pthread_mutex_unlock(&gc->mu);
    return rc;
}
