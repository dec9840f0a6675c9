/*
 * store.h: persistence behind one small interface: a key-value space with
 * ordered keys, prefix scans and a revision that grows by one with every
 * committed transaction. The controller's state (src/state) writes jobs,
 * nodes, events and counters as records under key prefixes ("jobs/...",
 * "nodes/...", "events/...", "meta/..."); it never sees SQL.
 *
 * A backend is one ops struct (store_sqlite.c today; an etcd backend can
 * follow as another file and table row: keys, values, a revision, prefix
 * range reads and multi-op transactions map one to one onto etcd v3).
 *
 * Two layers:
 *   store_ops_t  the backend: open/close, begin/put/del/commit/rollback,
 *                get, scan, revision. One caller at a time (store.c holds a
 *                mutex around every call).
 *   store_gc_t   group commit: writers hand batches of puts and deletes to
 *                one committer thread, which writes everything queued since
 *                its last commit in ONE transaction, then wakes the writers.
 *                Concurrent submissions thus share one fsync; a writer
 *                answers its client only after store_gc_wait() says its
 *                batch is durable.
 *
 * Return convention: arbiter.h (0 or a negative errno, text in arb_err_t).
 * A failed commit (disk full, I/O error) leaves the store as it was before
 * that transaction; the group committer then refuses every later batch
 * (-EIO): the caller is expected to stop and recover from the store.
 */
#ifndef ARB_STORE_H
#define ARB_STORE_H

#include <pthread.h>

#include "arbiter/arbiter.h"

typedef struct store store_t;

/* Called for each record of a scan, in key order; a non-zero return stops
 * the scan and is returned by it. val is borrowed for the call. */
typedef int (*store_scan_fn)(void *arg, const char *key, const char *val, size_t n,
                             uint64_t mod_rev);

typedef enum store_sync {
    STORE_SYNC_FULL = 0, /* fsync on every commit (default; kill -9 and power safe) */
    STORE_SYNC_NORMAL,   /* WAL without fsync per commit: survives kill -9, not power loss */
} store_sync_t;

typedef struct store_opts {
    store_sync_t sync;
    bool accept_rewind; /* open a store that looks rewound (sqlite: its revision below the
                           marker kept beside it) instead of refusing it; rewound_from says */
} store_opts_t;

typedef struct store_ops {
    const char *name; /* "sqlite" */
    /* Open the store at `where` (a backend-specific location: a directory
     * for sqlite). *out is freed by close. */
    int (*open)(const char *where, const store_opts_t *o, store_t **out, arb_err_t *err);
    void (*close)(store_t *s);
    int (*begin)(store_t *s, arb_err_t *err);
    int (*put)(store_t *s, const char *key, const void *val, size_t n, arb_err_t *err);
    int (*del)(store_t *s, const char *key, arb_err_t *err); /* absent key: 0 */
    /* Commit; *rev (optional) gets the new revision. */
    int (*commit)(store_t *s, uint64_t *rev, arb_err_t *err);
    void (*rollback)(store_t *s);
    /* *val is malloc'd and NUL-terminated (free it); -ENOENT when absent. */
    int (*get)(store_t *s, const char *key, char **val, size_t *n, uint64_t *mod_rev,
               arb_err_t *err);
    /* Every record whose key starts with prefix, in key order. */
    int (*scan)(store_t *s, const char *prefix, store_scan_fn fn, void *arg, arb_err_t *err);
    uint64_t (*revision)(store_t *s);
} store_ops_t;

/* Every backend begins with this header. */
struct store {
    const store_ops_t *ops;
    pthread_mutex_t mu;    /* one caller at a time; held by the store_* wrappers */
    uint64_t rewound_from; /* opened with accept_rewind although it looked rewound: the
                              revision it had reached (else 0) */
};

/* The backends, NULL-terminated. */
extern const store_ops_t *const store_backends[];
extern const store_ops_t store_sqlite_ops;
extern const store_ops_t store_etcd_ops; /* store_etcd.c: etcd://HOST:PORT[,...][/PREFIX] */

/* Open by URI: "sqlite:DIR" or a bare DIR (sqlite), or "etcd://..." (store_etcd.c). -ENOENT for an
 * unknown scheme, with the list of backends. Close with store_close. */
int store_open(const char *uri, const store_opts_t *o, store_t **out, arb_err_t *err);
void store_close(store_t *s);
int store_get(store_t *s, const char *key, char **val, size_t *n, uint64_t *mod_rev,
              arb_err_t *err);
int store_scan(store_t *s, const char *prefix, store_scan_fn fn, void *arg, arb_err_t *err);
uint64_t store_revision(store_t *s);

/* ---- batches: the unit of atomic writing ------------------------------------ */

typedef struct store_op {
    char *key;
    char *val; /* NULL: delete */
    size_t n;
} store_op_t;

typedef struct store_batch {
    store_op_t *ops;
    int nops, cap;
} store_batch_t;

/* Add a put (val copied) or a delete. -ENOMEM leaves b as it was. */
int store_batch_put(store_batch_t *b, const char *key, const void *val, size_t n);
int store_batch_putstr(store_batch_t *b, const char *key, const char *val);
int store_batch_del(store_batch_t *b, const char *key);
void store_batch_free(store_batch_t *b); /* empties b; b itself is the caller's */
/* Write b in one transaction (begin, ops, commit; rollback on failure). */
int store_apply(store_t *s, const store_batch_t *b, uint64_t *rev, arb_err_t *err);

/* ---- group commit ------------------------------------------------------------ */

typedef struct store_gc store_gc_t;

typedef struct store_gc_stats {
    uint64_t commits;       /* transactions written */
    uint64_t batches;       /* batches handed in */
    uint64_t ops;           /* puts and deletes written */
    uint64_t commit_ns_sum; /* time spent committing */
    uint64_t hist[12];      /* commit latency: <=0.25,0.5,1,2,4,8,16,32,64,128,256 ms, +Inf */
} store_gc_stats_t;

extern const double store_gc_buckets_ms[11];

/* Start the committer thread over s (borrowed; outlives gc). */
int store_gc_start(store_t *s, store_gc_t **out, arb_err_t *err);
/* Stop after writing what is queued; frees gc. */
void store_gc_stop(store_gc_t *gc);
/* Queue b's ops (moved out of b, which is left empty) behind everything
 * queued before. Returns a ticket >= 1, or 0 when b was empty (nothing to
 * wait for), or -EIO after a failed commit. Cheap: never waits for I/O. */
int64_t store_gc_enqueue(store_gc_t *gc, store_batch_t *b);
/* The ticket of the last batch queued (0: none yet). */
int64_t store_gc_last(store_gc_t *gc);
/* Wait until the batch with ticket t (and so every batch before it) is
 * durable: 0, or -EIO with the commit's error text. t <= 0 returns at once. */
int store_gc_wait(store_gc_t *gc, int64_t t, arb_err_t *err);
/* Would store_gc_wait(gc, t) return at once (t durable, or the store
 * failed)? Never blocks: the API asks before it parks a reply. */
bool store_gc_done(store_gc_t *gc, int64_t t);
void store_gc_get_stats(store_gc_t *gc, store_gc_stats_t *st);
/* 0 while every commit succeeded; -EIO, with the failed commit's text in
 * err, once one failed (the committer then refuses every batch). */
int store_gc_status(store_gc_t *gc, arb_err_t *err);
/* fn(arg) is called on the committer's thread after each commit (and after
 * the one that failed), once store_gc_done says so for its tickets, with no
 * lock of gc held: whoever parked work behind a ticket resumes it there,
 * without a thread of its own waiting. fn must not call store_gc_on_durable.
 * fn NULL: none. Setting waits for a call of the old fn in progress to
 * return, so the old arg may be freed after. */
void store_gc_on_durable(store_gc_t *gc, void (*fn)(void *arg), void *arg);
/* Test hook: the next n commits fail with -EIO (fault injection). */
void store_gc_inject_failure(store_gc_t *gc, int n);

#endif
