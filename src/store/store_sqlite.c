/*
 * store_sqlite.c: the embedded store backend: one SQLite database file,
 * DIR/arbiter.db, in WAL mode with synchronous=FULL by default, so a
 * committed transaction survives kill -9 and power loss.
 *
 * Schema: kv(key TEXT PRIMARY KEY, val BLOB, rev INTEGER) WITHOUT ROWID,
 * and meta(k, v) holding the revision (k 'store_revision'). Every commit
 * bumps the revision and stamps the records it wrote with it (etcd's
 * mod_revision).
 *
 * Numbered records: a key of a numbered prefix (sq_nums: events/, jobs/,
 * specs/) followed by exactly 20 decimal digits no greater than INT64_MAX
 * (the state's "jobs/%020llu") is kept in a rowid table of that prefix,
 * keyed by the number; every other key in kv. The two orders agree (20
 * digits, zero-padded, sort as their numbers), so a scan merges the tables
 * into kv's key order and callers see one key space as before. Why: these
 * keys only grow (a job, an event, a spec a key each, the newest last),
 * and a WITHOUT ROWID table is an index b-tree, which SQLite balances at
 * every full leaf over three siblings and their parent; in kv, each
 * prefix's newest leaf sat in the middle of the tree too. A rowid table
 * appends a new last leaf alone (SQLite's balance_quick) and its interior
 * pages hold only numbers. Replaying the commits of a 2,000-job bench e2e,
 * the pages a commit writes fell from 13.1 to 7.0.
 *
 * Layouts: a store written before the numbered tables holds those keys in
 * kv and its revision under k 'revision'; open moves both (one transaction,
 * after the rewind check). A controller from before then finds no revision
 * it knows below the marker and refuses the directory as rewound, rather
 * than starting on an empty kv.
 *
 * One controller per database: open takes an exclusive lock on the
 * database file itself (an open-file-description lock on a byte far past
 * anything SQLite locks), which the kernel drops when the process dies, so
 * a restarted controller never waits for a stale lock but a second live
 * one is refused, whatever else in the directory is deleted (a lock file
 * beside the database, as before, let a second controller in once it was
 * removed).
 *
 * Locking: locking_mode=EXCLUSIVE (see open): SQLite locks the file once
 * for the connection's life and keeps the WAL index in heap memory, so a
 * transaction costs no shm fcntl locks. Outside readers (the sqlite3 CLI in
 * tests/cli) open the file only while the controller is stopped.
 *
 * Rewinds: beside the database, DIR/arbiter.db.marker holds the revision of
 * the last commit, rewritten (in place, no fsync: a few bytes in the page
 * cache) after every commit and fsync'd at close. A database below its
 * marker lost committed transactions: its WAL was deleted or damaged
 * (SQLite then silently opens the last checkpoint), or an old copy was put
 * back. Open refuses it, saying what is missing, unless accept_rewind (the
 * controller's --accept-rewind), which goes on from what is there and
 * records where it had been (store.rewound_from).
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "store/walbuf.h"
#include "util/log.h"

#define MARKER_LEN 64
/* WAL pages between checkpoints (SQLite's default: 1000). A checkpoint
 * copies each page the WAL holds once, however often it was written since
 * the last, and syncs both files: at some 14 pages a commit, all of them
 * the same few leaves of jobs, specs, events and keys, eight times the
 * default writes a page out once where it wrote it several times. The WAL
 * grows to 32 MiB (4 KiB pages) before it is reused; what a restart reads
 * back of it is the same records. */
#define SQ_CHECKPOINT_PRAGMA "PRAGMA wal_autocheckpoint=8192"
#define LOCK_OFFSET ((off_t)1 << 40) /* SQLite's own locks live near 1 GiB */

/* The numbered prefixes, in key order (see the top). */
#define SQ_NNUM 3
#define SQ_DIGITS 20
static const struct {
    const char *prefix, *table;
} sq_nums[SQ_NNUM] = {{"events/", "events"}, {"jobs/", "jobs"}, {"specs/", "specs"}};
static const char sq_num_max[] = "09223372036854775807"; /* INT64_MAX in 20 digits */

typedef struct sq {
    store_t base;
    sqlite3 *db;
    int lockfd;   /* the database file, locked (see the top) */
    int markerfd; /* DIR/arbiter.db.marker */
    uint64_t rev; /* committed revision */
    bool in_txn;
    sqlite3_stmt *put, *del, *get, *scan, *setrev;
    sqlite3_stmt *begin, *commit; /* prepared once: no SQL parsed per commit */
    sqlite3_stmt *nput[SQ_NNUM], *ndel[SQ_NNUM], *nget[SQ_NNUM], *nscan[SQ_NNUM];
} sq_t;

/* The numbered table key belongs in (its number in *id), or -1: kv. */
static int sq_num_of(const char *key, int64_t *id)
{
    for (int t = 0; t < SQ_NNUM; t++) {
        size_t n = strlen(sq_nums[t].prefix);
        const char *d = key + n;
        if (strncmp(key, sq_nums[t].prefix, n) != 0)
            continue;
        for (int i = 0; i < SQ_DIGITS; i++)
            if (d[i] < '0' || d[i] > '9')
                return -1;
        if (d[SQ_DIGITS] != '\0' || memcmp(d, sq_num_max, SQ_DIGITS) > 0)
            return -1;
        *id = 0;
        for (int i = 0; i < SQ_DIGITS; i++)
            *id = *id * 10 + (d[i] - '0');
        return t;
    }
    return -1;
}

/* key = table t's prefix and id in 20 digits; buf holds at least 64 bytes */
static void sq_num_key(int t, int64_t id, char *buf)
{
    size_t n = strlen(sq_nums[t].prefix);
    uint64_t u = (uint64_t)id;

    memcpy(buf, sq_nums[t].prefix, n);
    for (int i = SQ_DIGITS - 1; i >= 0; i--, u /= 10)
        buf[n + (size_t)i] = (char)('0' + u % 10);
    buf[n + SQ_DIGITS] = '\0';
}

/* Rewrite the marker in place: one short pwrite. */
static void marker_write(sq_t *q)
{
    char buf[MARKER_LEN];

    if (q->markerfd < 0)
        return;
    memset(buf, ' ', sizeof buf);
    int n = snprintf(buf, sizeof buf, "arbiter-marker revision %llu", (unsigned long long)q->rev);
    buf[n] = ' ';
    buf[sizeof buf - 1] = '\n';
    if (pwrite(q->markerfd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) {
        /* not fatal: the next commit writes it again; a lagging marker only
         * weakens the check */
    }
}

/* The marker's revision: 1 found, 0 none (a new directory, or one from
 * before markers), -1 unreadable. */
static int marker_read(int fd, uint64_t *rev)
{
    char buf[MARKER_LEN + 1];
    unsigned long long r;
    ssize_t got = pread(fd, buf, MARKER_LEN, 0);

    if (got == 0)
        return 0;
    if (got < 0)
        return -1;
    buf[got] = '\0';
    if (sscanf(buf, "arbiter-marker revision %llu", &r) != 1)
        return -1;
    *rev = r;
    return 1;
}

static int sq_fail(sq_t *q, arb_err_t *err, const char *what)
{
    int ec = sqlite3_errcode(q->db);
    int code = (ec == SQLITE_FULL) ? -ENOSPC : (ec == SQLITE_NOMEM) ? -ENOMEM : -EIO;
    return arb_errf(err, code, "sqlite %s: %s", what, sqlite3_errmsg(q->db));
}

static int sq_exec(sq_t *q, const char *sql, arb_err_t *err)
{
    if (sqlite3_exec(q->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return sq_fail(q, err, sql);
    return 0;
}

static void sq_close(store_t *s)
{
    sq_t *q = (sq_t *)s;

    if (!q)
        return;
    if (q->in_txn)
        sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_finalize(q->put);
    sqlite3_finalize(q->del);
    sqlite3_finalize(q->get);
    sqlite3_finalize(q->scan);
    sqlite3_finalize(q->setrev);
    sqlite3_finalize(q->begin);
    sqlite3_finalize(q->commit);
    for (int t = 0; t < SQ_NNUM; t++) {
        sqlite3_finalize(q->nput[t]);
        sqlite3_finalize(q->ndel[t]);
        sqlite3_finalize(q->nget[t]);
        sqlite3_finalize(q->nscan[t]);
    }
    sqlite3_close(q->db);
    if (q->markerfd >= 0) {
        fsync(q->markerfd);
        close(q->markerfd);
    }
    /* After sqlite3_close: closing a descriptor of the database file drops
     * the process's POSIX locks on it, SQLite's own among them. */
    if (q->lockfd >= 0)
        close(q->lockfd);
    free(q);
}

/* The numbered tables made, and a store of the layout before them moved
 * into them (see the top): its numbered keys out of kv, its revision from
 * k 'revision' to k 'store_revision'. One transaction: a failure leaves the
 * old layout whole. A store of this layout moves nothing. */
static int sq_layout(sq_t *q, arb_err_t *err)
{
    char sql[1200];
    int rc = sq_exec(q, "BEGIN IMMEDIATE", err);

    for (int t = 0; rc == 0 && t < SQ_NNUM; t++) {
        const char *p = sq_nums[t].prefix, *n = sq_nums[t].table;
        size_t pl = strlen(p);
        /* exactly sq_num_of's keys: the prefix, 20 digits, at most INT64_MAX */
        char where[300];
        snprintf(where, sizeof where,
                 "key>='%s00000000000000000000' AND key<='%s%s' AND length(key)=%zu AND "
                 "substr(key,%zu) NOT GLOB '*[^0-9]*'",
                 p, p, sq_num_max, pl + SQ_DIGITS, pl + 1);
        snprintf(sql, sizeof sql,
                 "CREATE TABLE IF NOT EXISTS %s(id INTEGER PRIMARY KEY, val BLOB NOT NULL, "
                 "rev INTEGER NOT NULL);"
                 "INSERT OR REPLACE INTO %s(id,val,rev) SELECT CAST(substr(key,%zu) AS "
                 "INTEGER),val,rev FROM kv WHERE %s;"
                 "DELETE FROM kv WHERE %s;",
                 n, n, pl + 1, where, where);
        rc = sq_exec(q, sql, err);
    }
    if (rc == 0) {
        snprintf(sql, sizeof sql,
                 "INSERT OR REPLACE INTO meta VALUES('store_revision', %llu);"
                 "DELETE FROM meta WHERE k='revision';",
                 (unsigned long long)q->rev);
        rc = sq_exec(q, sql, err);
    }
    if (rc == 0)
        rc = sq_exec(q, "COMMIT", err);
    if (rc < 0)
        sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static int sq_open(const char *dir, const store_opts_t *o, store_t **out, arb_err_t *err)
{
    char path[4096], wal[4200], mpath[4200];
    sq_t *q = calloc(1, sizeof *q);
    uint64_t mrev = 0;
    int rc = 0, mk = 0;
    bool had_wal;

    if (!q)
        return arb_errf(err, -ENOMEM, "out of memory");
    q->lockfd = q->markerfd = -1;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        rc = arb_errf(err, -errno, "data dir '%s': cannot create it: %s", dir, strerror(errno));
        goto out;
    }
    snprintf(path, sizeof path, "%s/arbiter.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(mpath, sizeof mpath, "%s.marker", path);
    q->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (q->lockfd < 0) {
        rc = arb_errf(err, -errno, "data dir '%s': cannot open %s: %s", dir, path, strerror(errno));
        goto out;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LOCK_OFFSET, .l_len = 1};
    if (fcntl(q->lockfd, F_OFD_SETLK, &fl) < 0) {
        rc = errno == EAGAIN || errno == EACCES
                 ? arb_errf(err, -EBUSY,
                            "data dir '%s' is in use by another controller (it holds the lock "
                            "on %s); stop it or choose another --data-dir",
                            dir, path)
                 : arb_errf(err, -errno, "data dir '%s': cannot lock %s: %s", dir, path,
                            strerror(errno));
        goto out;
    }
    /* Job specs hold env values (secrets among them): the data is the
     * controller's alone. SQLite makes its -wal and -shm files with the
     * database file's mode (0600: made so above); the files of an older data
     * dir are narrowed to 0600, the dir to 0700. */
    chmod(dir, 0700);
    fchmod(q->lockfd, 0600);
    chmod(wal, 0600);
    {
        char shm[4200];
        snprintf(shm, sizeof shm, "%s-shm", path);
        chmod(shm, 0600);
    }
    had_wal = access(wal, F_OK) == 0;
    q->markerfd = open(mpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (q->markerfd < 0) {
        rc =
            arb_errf(err, -errno, "data dir '%s': cannot open %s: %s", dir, mpath, strerror(errno));
        goto out;
    }
    mk = marker_read(q->markerfd, &mrev);
    /* synchronous=FULL: a commit's WAL frames go out in one write before
     * its sync (walbuf.c); NORMAL syncs no commit, so it writes them as
     * SQLite does, each at once. */
    if (sqlite3_open_v2(path, &q->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        o->sync == STORE_SYNC_FULL ? store_walbuf_vfs() : NULL) != SQLITE_OK) {
        rc = arb_errf(err, -EIO, "cannot open %s: %s", path,
                      q->db ? sqlite3_errmsg(q->db) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(q->db, 5000);
    /* Exclusive locking, set before the first read touches the WAL: the
     * controller is the database's only user (the lock above), so SQLite
     * takes its file lock once and keeps it, and keeps the WAL index in its
     * own memory instead of the shared -shm file: no fcntl shm lock per
     * read and write transaction. Other processes (the sqlite3 CLI) open
     * the database only while no controller runs; a killed controller's
     * WAL is read back by whoever opens the file next. */
    if ((rc = sq_exec(q, "PRAGMA locking_mode=EXCLUSIVE", err)) < 0)
        goto out;
    /* The revision and the marker's word before anything is written: a
     * refused rewound store is left exactly as it was found. (A new or
     * emptied database has no meta table yet: revision 0.) */
    sqlite3_stmt *st = NULL;
    int pr = sqlite3_prepare_v2(q->db,
                                "SELECT max(v) FROM meta WHERE k IN ('revision','store_revision')",
                                -1, &st, NULL),
        sr = pr == SQLITE_OK ? sqlite3_step(st) : pr;
    if (sr == SQLITE_ROW)
        q->rev = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    /* No meta table is a new database (revision 0); any other failure (a
     * full disk, an I/O error) is not a revision, and says so. */
    if (sr != SQLITE_ROW && sr != SQLITE_DONE &&
        !(pr == SQLITE_ERROR && strstr(sqlite3_errmsg(q->db), "no such table"))) {
        rc = sq_fail(q, err, "reading the revision");
        goto out;
    }
    if (mk < 0)
        arb_log(ARB_LOG_WARN, "store",
                "%s is unreadable; whether the database lost commits cannot be told this time (it "
                "is written again now)",
                mpath);
    if (mk > 0 && mrev > q->rev) {
        if (!o->accept_rewind) {
            rc = arb_errf(err, -ESTALE,
                          "data dir '%s' looks rewound: %s is at revision %llu, but the marker "
                          "beside it says revision %llu was committed: %llu committed "
                          "transaction%s (jobs acknowledged to clients, placements, events) "
                          "are missing, %s. Starting would lose them for good and hand out "
                          "their job ids again. Put the missing files back (arbiter.db-wal with "
                          "arbiter.db), or start with --accept-rewind to go on from revision "
                          "%llu",
                          dir, path, (unsigned long long)q->rev, (unsigned long long)mrev,
                          (unsigned long long)(mrev - q->rev), mrev - q->rev == 1 ? "" : "s",
                          had_wal ? "though the WAL is there (damaged, or an old copy was put "
                                    "back)"
                                  : "and the WAL file (arbiter.db-wal) is missing",
                          (unsigned long long)q->rev);
            goto out;
        }
        q->base.rewound_from = mrev;
        arb_log(ARB_LOG_WARN, "store",
                "%s is at revision %llu, below its marker's %llu: %llu committed transactions are "
                "lost; going on from what is there (--accept-rewind)",
                path, (unsigned long long)q->rev, (unsigned long long)mrev,
                (unsigned long long)(mrev - q->rev));
    }
    if ((rc = sq_exec(q, "PRAGMA journal_mode=WAL", err)) < 0 ||
        (rc = sq_exec(q,
                      o->sync == STORE_SYNC_NORMAL ? "PRAGMA synchronous=NORMAL"
                                                   : "PRAGMA synchronous=FULL",
                      err)) < 0 ||
        (rc = sq_exec(q, SQ_CHECKPOINT_PRAGMA, err)) < 0 ||
        (rc = sq_exec(q,
                      "CREATE TABLE IF NOT EXISTS kv(key TEXT PRIMARY KEY, val BLOB NOT NULL, "
                      "rev INTEGER NOT NULL) WITHOUT ROWID;"
                      "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);",
                      err)) < 0 ||
        (rc = sq_layout(q, err)) < 0)
        goto out;
    if (sqlite3_prepare_v2(q->db, "INSERT OR REPLACE INTO kv(key,val,rev) VALUES(?1,?2,?3)", -1,
                           &q->put, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(q->db, "DELETE FROM kv WHERE key=?1", -1, &q->del, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(q->db, "SELECT val,rev FROM kv WHERE key=?1", -1, &q->get, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(q->db,
                           "SELECT key,val,rev FROM kv WHERE key>=?1 AND key<?2 ORDER BY key", -1,
                           &q->scan, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(q->db, "UPDATE meta SET v=?1 WHERE k='store_revision'", -1, &q->setrev,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(q->db, "BEGIN IMMEDIATE", -1, &q->begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(q->db, "COMMIT", -1, &q->commit, NULL) != SQLITE_OK) {
        rc = sq_fail(q, err, "prepare");
        goto out;
    }
    for (int t = 0; t < SQ_NNUM; t++) {
        char sql[4][160];
        const char *n = sq_nums[t].table;
        snprintf(sql[0], sizeof sql[0], "INSERT OR REPLACE INTO %s(id,val,rev) VALUES(?1,?2,?3)",
                 n);
        snprintf(sql[1], sizeof sql[1], "DELETE FROM %s WHERE id=?1", n);
        snprintf(sql[2], sizeof sql[2], "SELECT val,rev FROM %s WHERE id=?1", n);
        snprintf(sql[3], sizeof sql[3],
                 "SELECT id,val,rev FROM %s WHERE id>=?1 AND id<=?2 ORDER BY id", n);
        if (sqlite3_prepare_v2(q->db, sql[0], -1, &q->nput[t], NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, sql[1], -1, &q->ndel[t], NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, sql[2], -1, &q->nget[t], NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, sql[3], -1, &q->nscan[t], NULL) != SQLITE_OK) {
            rc = sq_fail(q, err, "prepare");
            goto out;
        }
    }
    marker_write(q);
    fsync(q->markerfd);
out:
    if (rc < 0) {
        sq_close(&q->base);
        return rc;
    }
    *out = &q->base;
    return 0;
}

static int sq_step_done(sq_t *q, sqlite3_stmt *st, arb_err_t *err, const char *what)
{
    int r = sqlite3_step(st);
    int rc = (r == SQLITE_DONE) ? 0 : sq_fail(q, err, what);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

static int sq_begin(store_t *s, arb_err_t *err)
{
    sq_t *q = (sq_t *)s;
    int rc = sq_step_done(q, q->begin, err, "BEGIN IMMEDIATE");
    q->in_txn = rc == 0;
    return rc;
}

/* Bind key to st's first parameter: table t's number, or kv's text. */
static void sq_bind_key(sqlite3_stmt *st, int t, int64_t id, const char *key)
{
    if (t >= 0)
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    else
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
}

static int sq_put(store_t *s, const char *key, const void *val, size_t n, arb_err_t *err)
{
    sq_t *q = (sq_t *)s;
    int64_t id = 0;
    int t = sq_num_of(key, &id);
    sqlite3_stmt *st = t >= 0 ? q->nput[t] : q->put;

    sq_bind_key(st, t, id, key);
    sqlite3_bind_blob64(st, 2, val, n, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)(q->rev + 1));
    return sq_step_done(q, st, err, "put");
}

static int sq_del(store_t *s, const char *key, arb_err_t *err)
{
    sq_t *q = (sq_t *)s;
    int64_t id = 0;
    int t = sq_num_of(key, &id);
    sqlite3_stmt *st = t >= 0 ? q->ndel[t] : q->del;

    sq_bind_key(st, t, id, key);
    return sq_step_done(q, st, err, "delete");
}

static int sq_commit(store_t *s, uint64_t *rev, arb_err_t *err)
{
    sq_t *q = (sq_t *)s;
    int rc;

    sqlite3_bind_int64(q->setrev, 1, (sqlite3_int64)(q->rev + 1));
    rc = sq_step_done(q, q->setrev, err, "revision");
    if (rc == 0)
        rc = sq_step_done(q, q->commit, err, "COMMIT");
    if (rc < 0) {
        sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
        q->in_txn = false;
        return rc;
    }
    q->in_txn = false;
    q->rev++;
    marker_write(q); /* after the commit: it never claims more than is durable */
    if (rev)
        *rev = q->rev;
    return 0;
}

static void sq_rollback(store_t *s)
{
    sq_t *q = (sq_t *)s;

    if (q->in_txn)
        sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
    q->in_txn = false;
}

static int sq_get(store_t *s, const char *key, char **val, size_t *n, uint64_t *mod_rev,
                  arb_err_t *err)
{
    sq_t *q = (sq_t *)s;
    int rc = -ENOENT, r;
    int64_t id = 0;
    int t = sq_num_of(key, &id);
    sqlite3_stmt *get = t >= 0 ? q->nget[t] : q->get;

    sq_bind_key(get, t, id, key);
    r = sqlite3_step(get);
    if (r == SQLITE_ROW) {
        size_t len = (size_t)sqlite3_column_bytes(get, 0);
        char *v = malloc(len + 1);
        if (!v) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
        } else {
            if (len)
                memcpy(v, sqlite3_column_blob(get, 0), len);
            v[len] = '\0';
            *val = v;
            if (n)
                *n = len;
            if (mod_rev)
                *mod_rev = (uint64_t)sqlite3_column_int64(get, 1);
            rc = 0;
        }
    } else if (r != SQLITE_DONE) {
        rc = sq_fail(q, err, "get");
    } else {
        arb_errf(err, -ENOENT, "no record '%s'", key);
    }
    sqlite3_reset(get);
    sqlite3_clear_bindings(get);
    return rc;
}

/* The ids of table t whose keys start with prefix: 1 with [*lo, *hi], or 0
 * none. A prefix shorter than t's takes all of t or none of it; a longer
 * one names the leading digits. */
static int sq_num_range(int t, const char *prefix, int64_t *lo, int64_t *hi)
{
    const char *p = sq_nums[t].prefix;
    size_t pl = strlen(p), n = strlen(prefix), k;
    char a[SQ_DIGITS + 1], b[SQ_DIGITS + 1];

    if (n <= pl) {
        if (strncmp(p, prefix, n) != 0)
            return 0;
        *lo = 0;
        *hi = INT64_MAX;
        return 1;
    }
    if (strncmp(prefix, p, pl) != 0 || (k = n - pl) > SQ_DIGITS)
        return 0;
    for (size_t i = 0; i < k; i++)
        if (prefix[pl + i] < '0' || prefix[pl + i] > '9')
            return 0;
    /* the lowest and highest 20 digits that start so, at most INT64_MAX's */
    memcpy(a, prefix + pl, k);
    memcpy(b, prefix + pl, k);
    memset(a + k, '0', SQ_DIGITS - k);
    memset(b + k, '9', SQ_DIGITS - k);
    a[SQ_DIGITS] = b[SQ_DIGITS] = '\0';
    if (memcmp(a, sq_num_max, SQ_DIGITS) > 0)
        return 0;
    if (memcmp(b, sq_num_max, SQ_DIGITS) > 0)
        memcpy(b, sq_num_max, SQ_DIGITS);
    *lo = strtoll(a, NULL, 10);
    *hi = strtoll(b, NULL, 10);
    return 1;
}

/* One record to fn, its value copied NUL-terminated into *buf (one buffer
 * for the whole scan, as long as the longest value). */
static int sq_emit(store_scan_fn fn, void *arg, const char *key, const void *blob, size_t len,
                   uint64_t rev, char **buf, size_t *cap, arb_err_t *err)
{
    if (len + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < len + 1)
            c *= 2;
        char *nv = realloc(*buf, c);
        if (!nv)
            return arb_errf(err, -ENOMEM, "out of memory");
        *buf = nv;
        *cap = c;
    }
    if (len)
        memcpy(*buf, blob, len);
    (*buf)[len] = '\0';
    return fn(arg, key, *buf, len, rev);
}

/* kv's records under prefix merged, in key order, with those of the
 * numbered tables (whose keys never lie in kv: sq_layout, sq_put). */
static int sq_scan(store_t *s, const char *prefix, store_scan_fn fn, void *arg, arb_err_t *err)
{
    sq_t *q = (sq_t *)s;
    size_t n = strlen(prefix);
    char *hi = malloc(n + 2), *v = NULL;
    size_t cap = 0;
    int rc = 0, r, kr;

    if (!hi)
        return arb_errf(err, -ENOMEM, "out of memory");
    /* Keys are text: the end of the range is the prefix followed by the
     * highest byte, which no UTF-8 key holds. */
    memcpy(hi, prefix, n);
    hi[n] = (char)0xff;
    hi[n + 1] = '\0';
    sqlite3_bind_text(q->scan, 1, prefix, -1, SQLITE_STATIC);
    sqlite3_bind_text(q->scan, 2, hi, -1, SQLITE_STATIC);
    kr = sqlite3_step(q->scan);
    for (int t = 0; rc == 0 && t < SQ_NNUM; t++) {
        sqlite3_stmt *ns = q->nscan[t];
        int64_t lo, top;
        if (!sq_num_range(t, prefix, &lo, &top))
            continue;
        sqlite3_bind_int64(ns, 1, (sqlite3_int64)lo);
        sqlite3_bind_int64(ns, 2, (sqlite3_int64)top);
        while (rc == 0 && (r = sqlite3_step(ns)) == SQLITE_ROW) {
            char key[64];
            sq_num_key(t, (int64_t)sqlite3_column_int64(ns, 0), key);
            while (rc == 0 && kr == SQLITE_ROW &&
                   strcmp((const char *)sqlite3_column_text(q->scan, 0), key) < 0) {
                rc = sq_emit(fn, arg, (const char *)sqlite3_column_text(q->scan, 0),
                             sqlite3_column_blob(q->scan, 1),
                             (size_t)sqlite3_column_bytes(q->scan, 1),
                             (uint64_t)sqlite3_column_int64(q->scan, 2), &v, &cap, err);
                kr = sqlite3_step(q->scan);
            }
            if (rc == 0)
                rc = sq_emit(fn, arg, key, sqlite3_column_blob(ns, 1),
                             (size_t)sqlite3_column_bytes(ns, 1),
                             (uint64_t)sqlite3_column_int64(ns, 2), &v, &cap, err);
        }
        if (rc == 0 && r != SQLITE_DONE)
            rc = sq_fail(q, err, "scan");
        sqlite3_reset(ns);
        sqlite3_clear_bindings(ns);
    }
    while (rc == 0 && kr == SQLITE_ROW) {
        rc = sq_emit(fn, arg, (const char *)sqlite3_column_text(q->scan, 0),
                     sqlite3_column_blob(q->scan, 1), (size_t)sqlite3_column_bytes(q->scan, 1),
                     (uint64_t)sqlite3_column_int64(q->scan, 2), &v, &cap, err);
        kr = sqlite3_step(q->scan);
    }
    if (rc == 0 && kr != SQLITE_DONE)
        rc = sq_fail(q, err, "scan");
    free(v);
    sqlite3_reset(q->scan);
    sqlite3_clear_bindings(q->scan);
    free(hi);
    return rc;
}

static uint64_t sq_revision(store_t *s)
{
    return ((sq_t *)s)->rev;
}

const store_ops_t store_sqlite_ops = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .begin = sq_begin,
    .put = sq_put,
    .del = sq_del,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .get = sq_get,
    .scan = sq_scan,
    .revision = sq_revision,
};
