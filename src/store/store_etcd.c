/*
 * store_etcd.c: the distributed store backend: the controller's records in
 * an etcd v3 cluster, through the JSON-gateway client in etcd.c.
 *
 * Location: "etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?fence=REV&max-ops=N]"
 *   PREFIX   where Arbiter's keys live (default /arbiter): records under
 *            PREFIX/data/KEY, the leader key at PREFIX/leader (src/ha);
 *   fence    the fencing token: the create_revision of the leader key when
 *            this process won it (its term). Every commit is ONE etcd txn
 *            whose compare is "create_revision(PREFIX/leader) == REV", so a
 *            deposed leader (its lease expired while it was paused, and
 *            another won) cannot write a byte: its commit fails with
 *            -ESTALE and the text says to step down. Without fence, commits
 *            are unguarded (single controller, tests);
 *   max-ops  the most operations in one txn (default 128, etcd's default
 *            --max-txn-ops). Start etcd with a larger --max-txn-ops and
 *            pass the same here to keep a scheduling cycle's decisions in
 *            one txn; a batch larger than max-ops (or than about 1 MiB, under
 *            etcd's default --max-request-bytes of 1.5 MiB) is split into
 *            several txns, each fenced, written in order.
 *
 * A transaction (begin .. commit) is buffered here and sent at commit. etcd
 * refuses a txn that names a key twice, and the group committer (store.c)
 * merges many writers' batches, so commit keeps only the last operation on
 * each key (a later put or delete of the same key supersedes the earlier
 * ones, which is what applying them in order would leave).
 *
 * The store's revision is etcd's revision after the last commit or read.
 *
 * Test hook (tests/cli/ha_fence.sh): with ARBITER_TEST_HOLD_COMMIT=FILE in
 * the environment, a fenced commit waits before sending its txn for as
 * long as FILE exists (polled every 10 ms), with a log line naming the keys
 * it holds. It freezes a leader between its lease check (the API's guard)
 * and the txn, so a test can change the term meanwhile and show that etcd's
 * compare refuses the write. Read once at open; never set it in production.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/etcd.h"
#include "store/store.h"
#include "util/log.h"

#define PREFIX_MAX 200
#define TXN_BYTES (700u * 1024u) /* raw bytes per txn: base64 makes ~1 MiB of JSON */

typedef struct pend {
    char *key; /* the full etcd key */
    char *val; /* NULL: delete */
    size_t n;
    int seq; /* order of arrival, to keep the last op per key */
} pend_t;

typedef struct se {
    store_t base;
    etcd_t *e;
    char prefix[PREFIX_MAX];     /* "/arbiter" */
    char data[PREFIX_MAX + 8];   /* "/arbiter/data/" */
    char leader[PREFIX_MAX + 8]; /* "/arbiter/leader" */
    int64_t fence;
    int max_ops;
    uint64_t rev;
    pend_t *ops;
    int nops, cap;
    char hold[256]; /* ARBITER_TEST_HOLD_COMMIT (a test hook: see the top); "" off */
} se_t;

static void pend_clear(se_t *q)
{
    for (int i = 0; i < q->nops; i++) {
        free(q->ops[i].key);
        free(q->ops[i].val);
    }
    q->nops = 0;
}

static void se_close(store_t *s)
{
    se_t *q = (se_t *)s;

    if (!q)
        return;
    pend_clear(q);
    free(q->ops);
    etcd_close(q->e);
    free(q);
}

/* Parse "[/]MEMBERS[/PREFIX][?k=v&...]" into q; members go to *members. */
static int parse_where(se_t *q, const char *where, char *members, size_t mn, arb_err_t *err)
{
    const char *p = where;
    const char *slash, *qm;
    size_t len;

    while (*p == '/')
        p++;
    qm = strchr(p, '?');
    slash = strchr(p, '/');
    if (slash && qm && slash > qm)
        slash = NULL;
    len = slash ? (size_t)(slash - p) : qm ? (size_t)(qm - p) : strlen(p);
    if (len == 0 || len >= mn)
        return arb_errf(err, -EINVAL,
                        "store 'etcd://%s': no members; use etcd://HOST:PORT[,HOST:PORT...]", p);
    memcpy(members, p, len);
    members[len] = '\0';
    snprintf(q->prefix, sizeof q->prefix, "/arbiter");
    if (slash) {
        size_t pl = qm ? (size_t)(qm - slash) : strlen(slash);
        while (pl > 1 && slash[pl - 1] == '/') /* no trailing slash */
            pl--;
        if (pl >= sizeof q->prefix)
            return arb_errf(err, -EINVAL, "store prefix '%.*s': longer than %d bytes", (int)pl,
                            slash, PREFIX_MAX - 1);
        if (pl > 1) {
            memcpy(q->prefix, slash, pl);
            q->prefix[pl] = '\0';
        }
    }
    q->max_ops = 128;
    for (const char *o = qm ? qm + 1 : NULL; o && *o;) {
        const char *amp = strchr(o, '&');
        size_t ol = amp ? (size_t)(amp - o) : strlen(o);
        char *end;
        if (strncmp(o, "fence=", 6) == 0) {
            q->fence = strtoll(o + 6, &end, 10);
            if (end != o + ol || q->fence <= 0)
                return arb_errf(err, -EINVAL, "store option '%.*s': fence is a positive revision",
                                (int)ol, o);
        } else if (strncmp(o, "max-ops=", 8) == 0) {
            long v = strtol(o + 8, &end, 10);
            if (end != o + ol || v < 2 || v > 1000000)
                return arb_errf(err, -EINVAL,
                                "store option '%.*s': max-ops is 2..1000000 (etcd's "
                                "--max-txn-ops)",
                                (int)ol, o);
            q->max_ops = (int)v;
        } else {
            return arb_errf(err, -EINVAL,
                            "store option '%.*s': unknown; etcd stores take fence=REV and "
                            "max-ops=N",
                            (int)ol, o);
        }
        o = amp ? amp + 1 : NULL;
    }
    snprintf(q->data, sizeof q->data, "%s/data/", q->prefix);
    snprintf(q->leader, sizeof q->leader, "%s/leader", q->prefix);
    return 0;
}

int store_etcd_check(const char *where, arb_err_t *err)
{
    se_t q;
    char members[1024];
    etcd_t *e = NULL;
    int rc;

    memset(&q, 0, sizeof q);
    if (strncmp(where, "etcd:", 5) == 0)
        where += 5;
    rc = parse_where(&q, where, members, sizeof members, err);
    if (rc == 0)
        rc = etcd_open(members, &e, err); /* parses the member list; connects lazily */
    etcd_close(e);
    return rc;
}

static int se_open(const char *where, const store_opts_t *o, store_t **out, arb_err_t *err)
{
    se_t *q = calloc(1, sizeof *q);
    char members[1024];
    etcd_kv_t kv = {0};
    int64_t rev = 0;
    int rc;

    (void)o; /* etcd fsyncs its raft log on every commit: there is no weaker mode */
    if (!q)
        return arb_errf(err, -ENOMEM, "out of memory");
    rc = parse_where(q, where, members, sizeof members, err);
    const char *hold = getenv("ARBITER_TEST_HOLD_COMMIT");
    if (hold)
        snprintf(q->hold, sizeof q->hold, "%s", hold);
    if (rc == 0)
        rc = etcd_open(members, &q->e, err);
    if (rc == 0) { /* reach the cluster now, and check the fence still holds */
        rc = etcd_get(q->e, q->leader, &kv, &rev, err);
        if (rc == -ENOENT)
            rc = 0;
        if (rc == 0 && q->fence && kv.create_rev != q->fence)
            rc = arb_errf(err, -ESTALE,
                          "etcd store %s: the leader key %s is no longer this controller's "
                          "(term %lld); step down",
                          members, q->leader, (long long)q->fence);
        etcd_kv_free(&kv);
        q->rev = (uint64_t)rev;
    }
    if (rc < 0) {
        se_close(&q->base);
        return rc;
    }
    *out = &q->base;
    return 0;
}

static int se_begin(store_t *s, arb_err_t *err)
{
    (void)err;
    pend_clear((se_t *)s);
    return 0;
}

static int se_add(se_t *q, const char *key, const void *val, size_t n, bool del, arb_err_t *err)
{
    pend_t p = {0};
    size_t kl = strlen(q->data) + strlen(key) + 1;

    if (q->nops == q->cap) {
        int cap = q->cap ? q->cap * 2 : 64;
        pend_t *v = realloc(q->ops, (size_t)cap * sizeof *v);
        if (!v)
            return arb_errf(err, -ENOMEM, "out of memory");
        q->ops = v;
        q->cap = cap;
    }
    p.key = malloc(kl);
    if (p.key)
        snprintf(p.key, kl, "%s%s", q->data, key);
    if (!del && (p.val = malloc(n + 1))) {
        memcpy(p.val, val, n);
        p.val[n] = '\0';
    }
    p.n = n;
    p.seq = q->nops;
    if (!p.key || (!del && !p.val)) {
        free(p.key);
        free(p.val);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    q->ops[q->nops++] = p;
    return 0;
}

static int se_put(store_t *s, const char *key, const void *val, size_t n, arb_err_t *err)
{
    return se_add((se_t *)s, key, val, n, false, err);
}

static int se_del(store_t *s, const char *key, arb_err_t *err)
{
    return se_add((se_t *)s, key, NULL, 0, true, err);
}

static int pend_cmp(const void *a, const void *b)
{
    const pend_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* The test hook (see the top): wait while q->hold exists, saying what waits. */
static void hold_commit(se_t *q, const pend_t *ops, int from, int to)
{
    struct timespec ts = {0, 10 * 1000000L};
    char keys[600];
    size_t used = 0;

    if (!q->hold[0] || access(q->hold, F_OK) != 0)
        return;
    keys[0] = '\0';
    for (int i = from; i < to && i < from + 4 && used < sizeof keys; i++)
        used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s", i > from ? " " : "",
                                 ops[i].key);
    arb_log(ARB_LOG_INFO, "store",
            "test hook ARBITER_TEST_HOLD_COMMIT: a txn of %d ops fenced by term %lld waits while "
            "%s exists (keys: %s%s)",
            to - from, (long long)q->fence, q->hold, keys, to - from > 4 ? " ..." : "");
    while (access(q->hold, F_OK) == 0)
        nanosleep(&ts, NULL);
    arb_log(ARB_LOG_INFO, "store",
            "test hook ARBITER_TEST_HOLD_COMMIT: released; sending the txn fenced by term %lld",
            (long long)q->fence);
}

/* Send ops[from..to) as one txn, fenced. */
static int send_txn(se_t *q, const pend_t *ops, int from, int to, arb_err_t *err)
{
    json_t *succ = json_array(), *cmp = NULL, *resp = NULL;
    bool ok = false;
    int rc;

    if (q->fence)
        hold_commit(q, ops, from, to);

    for (int i = from; i < to; i++)
        json_array_append_new(succ, ops[i].val ? etcd_op_put(ops[i].key, ops[i].val, ops[i].n, 0)
                                               : etcd_op_del(ops[i].key));
    if (q->fence) {
        cmp = json_array();
        json_array_append_new(cmp, etcd_cmp_create(q->leader, q->fence));
    }
    rc = etcd_txn(q->e, cmp, succ, NULL, &ok, &resp, err);
    if (rc == 0) {
        q->rev = (uint64_t)etcd_header_rev(resp);
        if (!ok)
            rc = arb_errf(err, -ESTALE,
                          "fenced: the leader key %s is no longer this controller's (term "
                          "%lld); nothing was written; this controller was deposed and must "
                          "step down",
                          q->leader, (long long)q->fence);
    }
    json_decref(resp);
    return rc;
}

static int se_commit(store_t *s, uint64_t *rev, arb_err_t *err)
{
    se_t *q = (se_t *)s;
    int rc = 0, k = 0, from = 0;
    size_t bytes = 0;

    /* Keep the last op of each key: sort by (key, arrival), keep each run's last. */
    qsort(q->ops, (size_t)q->nops, sizeof *q->ops, pend_cmp);
    for (int i = 0; i < q->nops; i++) {
        if (i + 1 < q->nops && strcmp(q->ops[i].key, q->ops[i + 1].key) == 0) {
            free(q->ops[i].key);
            free(q->ops[i].val);
            continue;
        }
        q->ops[k++] = q->ops[i];
    }
    q->nops = k;
    for (int i = 0; rc == 0 && i < q->nops; i++) {
        size_t b = strlen(q->ops[i].key) + q->ops[i].n;
        if (i > from && (i - from == q->max_ops || bytes + b > TXN_BYTES)) {
            rc = send_txn(q, q->ops, from, i, err);
            from = i;
            bytes = 0;
        }
        bytes += b;
    }
    if (rc == 0 && from < q->nops)
        rc = send_txn(q, q->ops, from, q->nops, err);
    pend_clear(q);
    if (rc == 0 && rev)
        *rev = q->rev;
    return rc;
}

static void se_rollback(store_t *s)
{
    pend_clear((se_t *)s);
}

static int se_get(store_t *s, const char *key, char **val, size_t *n, uint64_t *mod_rev,
                  arb_err_t *err)
{
    se_t *q = (se_t *)s;
    char full[PREFIX_MAX + 512];
    etcd_kv_t kv = {0};
    int64_t rev = 0;
    int rc;

    if (snprintf(full, sizeof full, "%s%s", q->data, key) >= (int)sizeof full)
        return arb_errf(err, -EINVAL, "store key '%.40s...': too long", key);
    rc = etcd_get(q->e, full, &kv, &rev, err);
    if (rev)
        q->rev = (uint64_t)rev;
    if (rc < 0)
        return rc;
    *val = kv.val;
    if (n)
        *n = kv.vlen;
    if (mod_rev)
        *mod_rev = (uint64_t)kv.mod_rev;
    kv.val = NULL;
    etcd_kv_free(&kv);
    return 0;
}

typedef struct scan_ctx {
    size_t skip;
    store_scan_fn fn;
    void *arg;
} scan_ctx_t;

static int scan_one(void *arg, const etcd_kv_t *kv)
{
    scan_ctx_t *c = arg;
    return c->fn(c->arg, kv->key + c->skip, kv->val, kv->vlen, (uint64_t)kv->mod_rev);
}

static int se_scan(store_t *s, const char *prefix, store_scan_fn fn, void *arg, arb_err_t *err)
{
    se_t *q = (se_t *)s;
    char full[PREFIX_MAX + 512];
    scan_ctx_t c = {strlen(q->data), fn, arg};
    int64_t rev = 0;
    int rc;

    if (snprintf(full, sizeof full, "%s%s", q->data, prefix) >= (int)sizeof full)
        return arb_errf(err, -EINVAL, "store prefix '%.40s...': too long", prefix);
    rc = etcd_scan(q->e, full, 1000, scan_one, &c, &rev, err);
    if (rev)
        q->rev = (uint64_t)rev;
    return rc;
}

static uint64_t se_revision(store_t *s)
{
    return ((se_t *)s)->rev;
}

const store_ops_t store_etcd_ops = {
    .name = "etcd",
    .open = se_open,
    .close = se_close,
    .begin = se_begin,
    .put = se_put,
    .del = se_del,
    .commit = se_commit,
    .rollback = se_rollback,
    .get = se_get,
    .scan = se_scan,
    .revision = se_revision,
};
