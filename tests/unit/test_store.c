/* test_store.c: the store (real SQLite files in a temp dir) and group commit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"

static char dir[256];

static int setup(void **st)
{
    snprintf(dir, sizeof dir, "/tmp/arb_test_store.XXXXXX");
    assert_non_null(mkdtemp(dir));
    (void)st;
    return 0;
}

static int teardown(void **st)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    (void)st;
    return 0;
}

typedef struct seen {
    int n;
    char keys[64][64];
} seen_t;

static int collect(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    seen_t *s = arg;
    (void)val;
    (void)n;
    (void)rev;
    if (s->n < 64)
        snprintf(s->keys[s->n++], 64, "%s", key);
    return 0;
}

/* The write system calls this process has made (/proc/self/io's syscw). */
static long long writes_so_far(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    long long v = -1;

    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "syscw: %lld", &v) == 1)
            break;
    fclose(f);
    return v;
}

/* n records of len bytes each, "big/NNNN" -> that many copies of 'a' + i % 26 */
static void put_big(store_batch_t *b, int from, int n, size_t len)
{
    char *v = malloc(len + 1), key[32];

    assert_non_null(v);
    for (int i = from; i < from + n; i++) {
        memset(v, 'a' + i % 26, len);
        v[len] = '\0';
        snprintf(key, sizeof key, "big/%04d", i);
        assert_int_equal(store_batch_putstr(b, key, v), 0);
    }
    free(v);
}

static void check_big(store_t *s, int n, size_t len)
{
    arb_err_t err;

    for (int i = 0; i < n; i++) {
        char key[32], *v = NULL;
        size_t got = 0;
        snprintf(key, sizeof key, "big/%04d", i);
        assert_int_equal(store_get(s, key, &v, &got, NULL, &err), 0);
        assert_int_equal(got, len);
        assert_true(v[0] == 'a' + i % 26 && v[len - 1] == 'a' + i % 26);
        free(v);
    }
}

static void test_put_get_scan_reopen(void **unused)
{
    store_t *s;
    arb_err_t err;
    store_batch_t b = {0};
    uint64_t rev = 0, mod = 0;
    char *v;
    size_t n;

    (void)unused;
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_revision(s), 0);
    store_batch_putstr(&b, "jobs/01", "one");
    store_batch_putstr(&b, "jobs/02", "two");
    store_batch_putstr(&b, "nodes/a", "node");
    assert_int_equal(store_apply(s, &b, &rev, &err), 0);
    assert_int_equal(rev, 1);
    store_batch_free(&b);
    store_batch_del(&b, "jobs/01");
    store_batch_putstr(&b, "jobs/03", "three");
    assert_int_equal(store_apply(s, &b, &rev, &err), 0);
    assert_int_equal(rev, 2);
    store_batch_free(&b);
    store_close(s);

    /* everything is there after a reopen, with revisions */
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_revision(s), 2);
    assert_int_equal(store_get(s, "jobs/02", &v, &n, &mod, &err), 0);
    assert_string_equal(v, "two");
    assert_int_equal(n, 3);
    assert_int_equal(mod, 1);
    free(v);
    assert_int_equal(store_get(s, "jobs/01", &v, &n, &mod, &err), -ENOENT);
    seen_t seen = {0};
    assert_int_equal(store_scan(s, "jobs/", collect, &seen, &err), 0);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.keys[0], "jobs/02");
    assert_string_equal(seen.keys[1], "jobs/03");
    store_close(s);
}

/* A batch that names a key more than once (the group committer merges
 * many writers' batches: a job saved as submitted, then as placed) leaves
 * what applying every op in order leaves: the last op on each key wins,
 * a delete after a put included, and a put after a delete. Batches of a few
 * ops and of more than 64 (the table on the heap) alike. */
static void test_same_key_twice(void **unused)
{
    store_t *s;
    arb_err_t err;
    store_batch_t b = {0};
    uint64_t rev = 0;
    char *v, key[32], want[32];
    size_t n;

    (void)unused;
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    store_batch_putstr(&b, "jobs/1", "submitted");
    store_batch_putstr(&b, "jobs/2", "two");
    store_batch_putstr(&b, "jobs/1", "placed");
    store_batch_del(&b, "jobs/2");
    store_batch_del(&b, "jobs/3");
    store_batch_putstr(&b, "jobs/3", "back");
    store_batch_putstr(&b, "jobs/1", "running");
    assert_int_equal(store_apply(s, &b, &rev, &err), 0);
    assert_int_equal(rev, 1);
    store_batch_free(&b);
    for (int round = 0; round < 3; round++) /* 300 ops on 100 keys */
        for (int i = 0; i < 100; i++) {
            snprintf(key, sizeof key, "specs/%03d", i);
            snprintf(want, sizeof want, "v%d", round);
            if (round == 2 && i % 3 == 0)
                store_batch_del(&b, key);
            else
                store_batch_putstr(&b, key, want);
        }
    assert_int_equal(store_apply(s, &b, &rev, &err), 0);
    store_batch_free(&b);
    store_close(s);

    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_get(s, "jobs/1", &v, &n, NULL, &err), 0);
    assert_string_equal(v, "running");
    free(v);
    assert_int_equal(store_get(s, "jobs/2", &v, &n, NULL, &err), -ENOENT);
    assert_int_equal(store_get(s, "jobs/3", &v, &n, NULL, &err), 0);
    assert_string_equal(v, "back");
    free(v);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "specs/%03d", i);
        if (i % 3 == 0) {
            assert_int_equal(store_get(s, key, &v, &n, NULL, &err), -ENOENT);
            continue;
        }
        assert_int_equal(store_get(s, key, &v, &n, NULL, &err), 0);
        assert_string_equal(v, "v2");
        free(v);
    }
    store_close(s);
}

static void test_one_controller_per_dir(void **unused)
{
    store_t *s, *s2;
    arb_err_t err;

    (void)unused;
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_open(dir, NULL, &s2, &err), -EBUSY);
    assert_non_null(strstr(err.msg, "in use by another controller"));
    /* The lock is on the database itself: no file beside it to delete. */
    char lock[300];
    snprintf(lock, sizeof lock, "%s/LOCK", dir);
    unlink(lock);
    assert_int_equal(store_open(dir, NULL, &s2, &err), -EBUSY);
    store_close(s);
    assert_int_equal(store_open(dir, NULL, &s2, &err), 0);
    store_close(s2);
    assert_int_equal(store_open("nosuch://x", NULL, &s2, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "unknown backend"));
}

/* A store its WAL lost after a crash (a child commits and _exits, as kill -9
 * leaves it; then the WAL goes): refused, saying so, unchanged; accepted
 * with accept_rewind, which says where it had been. */
static void test_rewound_refused(void **unused)
{
    store_t *s;
    arb_err_t err;
    char path[300];
    pid_t kid;
    int status;
    store_opts_t o = {0};

    (void)unused;
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        store_batch_t b = {0};
        if (store_open(dir, NULL, &s, &err) < 0)
            _exit(1);
        for (int i = 0; i < 5; i++) {
            char k[32];
            snprintf(k, sizeof k, "jobs/%d", i);
            store_batch_putstr(&b, k, "{}");
            if (store_apply(s, &b, NULL, &err) < 0)
                _exit(2);
            store_batch_free(&b);
        }
        _exit(0); /* no close: the WAL holds the commits */
    }
    assert_int_equal(waitpid(kid, &status, 0), kid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(path, sizeof path, "%s/arbiter.db-wal", dir);
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);
    snprintf(path, sizeof path, "%s/arbiter.db-shm", dir);
    unlink(path);
    assert_int_equal(store_open(dir, NULL, &s, &err), -ESTALE);
    assert_non_null(strstr(err.msg, "looks rewound"));
    assert_non_null(strstr(err.msg, "marker beside it says revision 5 was committed"));
    assert_non_null(strstr(err.msg, "arbiter.db-wal) is missing"));
    assert_int_equal(store_open(dir, NULL, &s, &err), -ESTALE); /* still: nothing changed */
    o.accept_rewind = true;
    assert_int_equal(store_open(dir, &o, &s, &err), 0);
    assert_int_equal(s->rewound_from, 5);
    store_close(s);
    assert_int_equal(store_open(dir, NULL, &s, &err), 0); /* the marker agrees now */
    assert_int_equal(s->rewound_from, 0);
    store_close(s);
}

/* Exclusive locking: the WAL index lives in the controller's memory, not
 * in a shared -shm file (so no shm lock per transaction), and a controller
 * that dies without closing leaves a WAL that the next open reads back in
 * full: every commit store_apply returned from, the large ones whose frames
 * were gathered into one write (walbuf.c) among them. */
static void test_exclusive_wal_survives_exit(void **unused)
{
    store_t *s;
    arb_err_t err;
    char path[300];
    pid_t kid;
    int status;
    char *v;

    (void)unused;
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        store_batch_t b = {0};
        char shm[300];
        if (store_open(dir, NULL, &s, &err) < 0)
            _exit(1);
        for (int i = 0; i < 5; i++) {
            char k[32];
            snprintf(k, sizeof k, "jobs/%d", i);
            store_batch_putstr(&b, k, "{}");
            if (store_apply(s, &b, NULL, &err) < 0)
                _exit(2);
            store_batch_free(&b);
        }
        for (int i = 0; i < 300; i += 60) { /* larger: their frames gathered (walbuf.c) */
            put_big(&b, i, 60, 1500);
            if (store_apply(s, &b, NULL, &err) < 0)
                _exit(2);
            store_batch_free(&b);
        }
        snprintf(shm, sizeof shm, "%s/arbiter.db-shm", dir);
        _exit(access(shm, F_OK) == 0 ? 3 : 0); /* no close, as if killed */
    }
    assert_int_equal(waitpid(kid, &status, 0), kid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0); /* 3: a -shm file was made */
    snprintf(path, sizeof path, "%s/arbiter.db-wal", dir);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_revision(s), 10); /* every commit acknowledged is there */
    assert_int_equal(store_get(s, "jobs/4", &v, NULL, NULL, &err), 0);
    assert_string_equal(v, "{}");
    free(v);
    check_big(s, 300, 1500);
    store_close(s);
}

/* The rows the raw database holds for sql (one integer column): -1 when the
 * statement fails (no such table). */
static long long raw_count(const char *sql)
{
    char path[300];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -1;

    snprintf(path, sizeof path, "%s/arbiter.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void raw_exec(const char *sql)
{
    char path[300];
    sqlite3 *db = NULL;

    snprintf(path, sizeof path, "%s/arbiter.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* Numbered keys ("jobs/" and 20 digits, store_sqlite.c) live in their
 * table, every other key in kv, and the store answers as one key space:
 * get, delete, and scans by any prefix (shorter than a table's, the
 * table's, part of its digits) in key order, the two merged. */
static void test_numbered_keys(void **unused)
{
    static const char *const keys[] = {"events/00000000000000000007",
                                       "idem/x",
                                       "jobs/",
                                       "jobs/00000000000000000001",
                                       "jobs/00000000000000000002",
                                       "jobs/00000000000000000002x",
                                       "jobs/00000000000000000010",
                                       "jobs/0000000000000000001",
                                       "jobs/09223372036854775807",
                                       "jobs/09223372036854775808",
                                       "jobs/1",
                                       "jobsz",
                                       "specs/00000000000000000002",
                                       "zz"};
    int nk = (int)(sizeof keys / sizeof keys[0]);
    store_t *s;
    arb_err_t err;
    store_batch_t b = {0};
    seen_t seen = {0};
    char *v;
    uint64_t mod = 0;

    (void)unused;
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    for (int i = nk - 1; i >= 0; i--) /* order of writing: none */
        store_batch_putstr(&b, keys[i], keys[i]);
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    store_batch_free(&b);
    store_batch_putstr(&b, "jobs/00000000000000000002", "two, again");
    store_batch_del(&b, "jobs/00000000000000000010");
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    store_batch_free(&b);
    store_close(s);

    /* the layout: what is numbered in its table, by number, not in kv */
    assert_int_equal(raw_count("SELECT count(*) FROM jobs"), 3); /* 1, 2, INT64_MAX */
    assert_int_equal(raw_count("SELECT id FROM jobs ORDER BY id DESC LIMIT 1"), INT64_MAX);
    assert_int_equal(raw_count("SELECT count(*) FROM events WHERE id=7"), 1);
    assert_int_equal(raw_count("SELECT count(*) FROM specs WHERE id=2"), 1);
    assert_int_equal(raw_count("SELECT count(*) FROM kv WHERE key GLOB 'jobs/0*'"), 3);

    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_get(s, "jobs/00000000000000000002", &v, NULL, &mod, &err), 0);
    assert_string_equal(v, "two, again");
    assert_int_equal(mod, 2);
    free(v);
    assert_int_equal(store_get(s, "jobs/00000000000000000010", &v, NULL, NULL, &err), -ENOENT);
    assert_int_equal(store_get(s, "jobs/1", &v, NULL, &mod, &err), 0);
    assert_string_equal(v, "jobs/1");
    assert_int_equal(mod, 1);
    free(v);
    /* every key, in key order, whatever held it */
    assert_int_equal(store_scan(s, "", collect, &seen, &err), 0);
    assert_int_equal(seen.n, nk - 1); /* less the deleted jobs/...10 */
    for (int i = 1; i < seen.n; i++)
        assert_true(strcmp(seen.keys[i - 1], seen.keys[i]) < 0);
    memset(&seen, 0, sizeof seen);
    assert_int_equal(store_scan(s, "jobs/", collect, &seen, &err), 0);
    assert_int_equal(seen.n, 8);
    assert_string_equal(seen.keys[0], "jobs/");
    assert_string_equal(seen.keys[1], "jobs/00000000000000000001");
    assert_string_equal(seen.keys[2], "jobs/00000000000000000002");
    assert_string_equal(seen.keys[3], "jobs/00000000000000000002x");
    assert_string_equal(seen.keys[4], "jobs/0000000000000000001"); /* 19 digits: after */
    assert_string_equal(seen.keys[5], "jobs/09223372036854775807");
    assert_string_equal(seen.keys[6], "jobs/09223372036854775808");
    assert_string_equal(seen.keys[7], "jobs/1");
    memset(&seen, 0, sizeof seen);
    assert_int_equal(store_scan(s, "jobs/0000000000000000000", collect, &seen, &err), 0);
    assert_int_equal(seen.n, 3); /* ...01, ...02 (the table) and ...02x (kv) */
    memset(&seen, 0, sizeof seen);
    assert_int_equal(store_scan(s, "jobs/00000000000000000002", collect, &seen, &err), 0);
    assert_int_equal(seen.n, 2);
    memset(&seen, 0, sizeof seen);
    assert_int_equal(store_scan(s, "jobs/x", collect, &seen, &err), 0);
    assert_int_equal(seen.n, 0);
    memset(&seen, 0, sizeof seen);
    assert_int_equal(store_scan(s, "j", collect, &seen, &err), 0);
    assert_int_equal(seen.n, 9);
    store_close(s);
}

/* A store of the layout before the numbered tables (every key in kv, the
 * revision under 'revision') is moved at open: the same records, the same
 * revisions, in their tables; a controller from before that would find kv
 * without its jobs finds no revision either, and refuses it as rewound. */
static void test_old_layout_moved(void **unused)
{
    store_t *s;
    arb_err_t err;
    char *v;
    uint64_t mod = 0;
    seen_t seen = {0};

    (void)unused;
    raw_exec("CREATE TABLE kv(key TEXT PRIMARY KEY, val BLOB NOT NULL, rev INTEGER NOT NULL) "
             "WITHOUT ROWID;"
             "CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
             "INSERT INTO meta VALUES('revision', 41);"
             "INSERT INTO kv VALUES('jobs/00000000000000000003', 'three', 40),"
             "('jobs/00000000000000000004', 'four', 41), ('jobs/4', 'odd', 12),"
             "('events/00000000000000000009', 'ev', 39), ('nodes/n1', 'n', 2),"
             "('specs/00000000000000000003', 'spec', 40);");
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_revision(s), 41);
    assert_int_equal(store_get(s, "jobs/00000000000000000004", &v, NULL, &mod, &err), 0);
    assert_string_equal(v, "four");
    assert_int_equal(mod, 41);
    free(v);
    assert_int_equal(store_scan(s, "", collect, &seen, &err), 0);
    assert_int_equal(seen.n, 6);
    assert_string_equal(seen.keys[0], "events/00000000000000000009");
    assert_string_equal(seen.keys[3], "jobs/4");
    store_batch_t b = {0};
    store_batch_putstr(&b, "jobs/00000000000000000005", "five");
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    store_batch_free(&b);
    assert_int_equal(store_revision(s), 42);
    store_close(s);
    assert_int_equal(raw_count("SELECT count(*) FROM jobs"), 3);
    assert_int_equal(raw_count("SELECT rev FROM jobs WHERE id=3"), 40);
    assert_int_equal(raw_count("SELECT count(*) FROM kv"), 2); /* jobs/4, nodes/n1 */
    assert_int_equal(raw_count("SELECT count(*) FROM meta WHERE k='revision'"), 0);
    assert_int_equal(raw_count("SELECT v FROM meta WHERE k='store_revision'"), 42);
    /* and again: nothing more to move */
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_revision(s), 42);
    store_close(s);
    assert_int_equal(raw_count("SELECT count(*) FROM jobs"), 3);
}

/* A job's transitions, each its own commit as the controller writes them
 * (submitted, placed, running, ended), survive a process that ends without
 * closing the store (kill -9): the last one of each job, with the revision
 * of its commit, whatever table holds it. */
static void test_transitions_survive_exit(void **unused)
{
    static const char *const states[] = {"submitted", "placed", "running", "succeeded"};
    store_t *s;
    arb_err_t err;
    pid_t kid;
    int status;
    char key[64], *v;
    uint64_t mod = 0;

    (void)unused;
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        store_batch_t b = {0};
        if (store_open(dir, NULL, &s, &err) < 0)
            _exit(1);
        for (int job = 1; job <= 30; job++) /* job j reaches state j % 4 */
            for (int k = 0; k <= job % 4; k++) {
                snprintf(key, sizeof key, "jobs/%020d", job);
                store_batch_putstr(&b, key, states[k]);
                snprintf(key, sizeof key, "events/%020d", job * 4 + k);
                store_batch_putstr(&b, key, states[k]);
                if (store_apply(s, &b, NULL, &err) < 0)
                    _exit(2);
                store_batch_free(&b);
            }
        _exit(0); /* no close, as if killed */
    }
    assert_int_equal(waitpid(kid, &status, 0), kid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    uint64_t rev = 0;
    for (int job = 1; job <= 30; job++) {
        rev += (uint64_t)(job % 4) + 1;
        snprintf(key, sizeof key, "jobs/%020d", job);
        assert_int_equal(store_get(s, key, &v, NULL, &mod, &err), 0);
        assert_string_equal(v, states[job % 4]);
        assert_int_equal(mod, rev);
        free(v);
    }
    assert_int_equal(store_revision(s), rev);
    seen_t seen = {0};
    assert_int_equal(store_scan(s, "jobs/", collect, &seen, &err), 0);
    assert_int_equal(seen.n, 30);
    store_close(s);
}

/* A growing WAL is grown ahead in zeros (walbuf.c), not by each commit's
 * frames: after commits of a few pages each, the file is a whole number of
 * the growth step long, past the frames, and its size moved once. */
static void test_wal_grown_ahead(void **unused)
{
    store_t *s;
    arb_err_t err;
    store_batch_t b = {0};
    char path[300];
    struct stat st;
    off_t first = -1;
    int sizes = 0;

    (void)unused;
    snprintf(path, sizeof path, "%s/arbiter.db-wal", dir);
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    for (int i = 0; i < 40; i++) {
        put_big(&b, i * 4, 4, 1500);
        assert_int_equal(store_apply(s, &b, NULL, &err), 0);
        store_batch_free(&b);
        assert_int_equal(stat(path, &st), 0);
        if (st.st_size != first)
            sizes++, first = st.st_size;
    }
    assert_int_equal(sizes, 1);
    assert_int_equal(st.st_size % ((off_t)4 << 20), 0);
    check_big(s, 160, 1500);
    store_close(s);
    /* read back after a process that did not close it, too */
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    check_big(s, 160, 1500);
    store_close(s);
}

typedef struct writer {
    store_gc_t *gc;
    int id;
} writer_t;

static void *write_some(void *arg)
{
    writer_t *w = arg;
    for (int i = 0; i < 100; i++) {
        store_batch_t b = {0};
        char key[64];
        snprintf(key, sizeof key, "k/%02d/%03d", w->id, i);
        store_batch_putstr(&b, key, "v");
        int64_t t = store_gc_enqueue(w->gc, &b);
        assert_true(t > 0);
        assert_int_equal(store_gc_wait(w->gc, t, NULL), 0);
    }
    return NULL;
}

static int count(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    (void)key;
    (void)val;
    (void)n;
    (void)rev;
    (*(int *)arg)++;
    return 0;
}

static void test_group_commit(void **unused)
{
    store_t *s;
    store_gc_t *gc;
    arb_err_t err;
    pthread_t thr[8];
    writer_t w[8];
    store_gc_stats_t st;
    int n = 0;

    (void)unused;
    store_opts_t o = {.sync = STORE_SYNC_NORMAL};
    assert_int_equal(store_open(dir, &o, &s, &err), 0);
    assert_int_equal(store_gc_start(s, &gc, &err), 0);
    for (int i = 0; i < 8; i++) {
        w[i].gc = gc;
        w[i].id = i;
        pthread_create(&thr[i], NULL, write_some, &w[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(thr[i], NULL);
    store_gc_get_stats(gc, &st);
    assert_int_equal(st.batches, 800);
    assert_int_equal(st.ops, 800);
    assert_true(st.commits <= st.batches);
    store_gc_stop(gc);
    assert_int_equal(store_scan(s, "k/", count, &n, &err), 0);
    assert_int_equal(n, 800);
    print_message("group commit: %llu batches in %llu commits\n", (unsigned long long)st.batches,
                  (unsigned long long)st.commits);
    store_close(s);
}

static void test_failed_commit_is_fatal(void **unused)
{
    store_t *s;
    store_gc_t *gc;
    arb_err_t err;
    store_batch_t b = {0};
    char *v;

    (void)unused;
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_gc_start(s, &gc, &err), 0);
    store_gc_inject_failure(gc, 1);
    store_batch_putstr(&b, "lost", "x");
    int64_t t = store_gc_enqueue(gc, &b);
    assert_true(t > 0);
    assert_int_equal(store_gc_wait(gc, t, &err), -EIO);
    assert_non_null(strstr(err.msg, "injected"));
    store_batch_putstr(&b, "later", "x");
    assert_int_equal(store_gc_enqueue(gc, &b), -EIO);
    store_gc_stop(gc);
    assert_int_equal(store_get(s, "lost", &v, NULL, NULL, &err), -ENOENT);
    assert_int_equal(store_get(s, "later", &v, NULL, NULL, &err), -ENOENT);
    store_close(s);
}

/* What the durable hook saw: each call asks whether the ticket it waits for is done. */
typedef struct heard {
    pthread_mutex_t mu;
    store_gc_t *gc;
    int64_t want;
    int calls, done_calls;
} heard_t;

static void on_durable(void *arg)
{
    heard_t *h = arg;
    pthread_mutex_lock(&h->mu);
    h->calls++;
    if (store_gc_done(h->gc, h->want)) /* the hook may take gc's lock: it holds none */
        h->done_calls++;
    pthread_mutex_unlock(&h->mu);
}

/* Wait (at most 10 s) until the hook has said n times that want is done. */
static bool heard_done(heard_t *h, int n)
{
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&h->mu);
        bool ok = h->done_calls >= n;
        pthread_mutex_unlock(&h->mu);
        if (ok)
            return true;
        usleep(10000);
    }
    return false;
}

/* The committer's thread calls the durable hook after each commit (the API
 * resumes its parked replies there), after the failed one too, and never
 * again once it is unset. */
static void test_durable_hook(void **unused)
{
    store_t *s;
    arb_err_t err;
    store_batch_t b = {0};
    heard_t h = {.mu = PTHREAD_MUTEX_INITIALIZER};

    (void)unused;
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_gc_start(s, &h.gc, &err), 0);
    store_gc_on_durable(h.gc, on_durable, &h);
    store_batch_putstr(&b, "a", "1");
    pthread_mutex_lock(&h.mu);
    h.want = store_gc_enqueue(h.gc, &b);
    pthread_mutex_unlock(&h.mu);
    assert_true(h.want > 0);
    assert_true(heard_done(&h, 1)); /* no one waits with store_gc_wait: the hook alone tells */
    store_gc_inject_failure(h.gc, 1);
    store_batch_putstr(&b, "b", "2");
    pthread_mutex_lock(&h.mu);
    h.want = store_gc_enqueue(h.gc, &b);
    pthread_mutex_unlock(&h.mu);
    assert_true(heard_done(&h, 2)); /* failed: done too, so its waiters learn it */
    store_gc_on_durable(h.gc, NULL, NULL);
    pthread_mutex_lock(&h.mu);
    int calls = h.calls;
    pthread_mutex_unlock(&h.mu);
    store_gc_stop(h.gc);
    assert_int_equal(h.calls, calls); /* unset: not called again */
    store_close(s);
}

/* synchronous=FULL gathers a commit's WAL frames into one write
 * (walbuf.c): a commit of some 20 pages costs a few write calls, not two
 * per page, and a transaction past the unix VFS's 128 KiB per write (and
 * past walbuf's buffer) is whole after a reopen. */
static void test_commit_writes_once(void **unused)
{
    store_t *s;
    arb_err_t err;
    store_batch_t b = {0};

    (void)unused;
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    put_big(&b, 0, 4, 2000); /* the WAL's header and first frames */
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    store_batch_free(&b);
    put_big(&b, 4, 36, 2000); /* some 20 pages */
    long long w0 = writes_so_far();
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    long long w = writes_so_far() - w0;
    store_batch_free(&b);
    assert_true(w >= 1);
    assert_true(w <= 4);       /* the WAL once, the marker once; SQLite alone: 40 and more */
    put_big(&b, 40, 360, 900); /* some 700 KiB of frames in one commit */
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    store_batch_free(&b);
    store_close(s);
    assert_int_equal(store_open(dir, NULL, &s, &err), 0);
    assert_int_equal(store_revision(s), 3);
    check_big(s, 40, 2000);
    store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_get_scan_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_key_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_controller_per_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rewound_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exclusive_wal_survives_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_numbered_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_layout_moved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transitions_survive_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_grown_ahead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_commit_is_fatal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_durable_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_writes_once, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
