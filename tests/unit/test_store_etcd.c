/*
 * test_store_etcd.c: the etcd client (src/store/etcd.c), the etcd store
 * backend (store_etcd.c), the resource manager over it, and the leader
 * election (src/ha), against a real single-member etcd started here on free
 * loopback ports with its own data directory. Without /usr/bin/etcd the
 * test is skipped (exit 77; scripts/deps.sh installs etcd-server).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ha/election.h"
#include "state/state.h"
#include "store/etcd.h"
#include "store/store.h"

#define ETCD_BIN "/usr/bin/etcd"

static char dir[256];
static char members[64]; /* "127.0.0.1:PORT" */
static int dead_port;    /* a port nobody listens on */
static pid_t etcd_pid;
static const st_who_t admin = {ST_ROLE_ADMIN, "", "root", NULL};

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        abort();
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Start etcd; wait (bounded) until it answers. */
static int setup_etcd(void **unused)
{
    char client[64], peer[64], cluster[96], data[300], log[300];
    int cport = free_port(), pport = free_port();
    etcd_t *e = NULL;
    etcd_kv_t kv = {0};

    (void)unused;
    dead_port = free_port();
    snprintf(dir, sizeof dir, "/tmp/arb_test_etcd.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(members, sizeof members, "127.0.0.1:%d", cport);
    snprintf(client, sizeof client, "http://127.0.0.1:%d", cport);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", pport);
    snprintf(cluster, sizeof cluster, "t=%s", peer);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log, sizeof log, "%s/etcd.log", dir);
    etcd_pid = fork();
    assert_true(etcd_pid >= 0);
    if (etcd_pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(ETCD_BIN, ETCD_BIN, "--name", "t", "--data-dir", data, "--listen-client-urls", client,
              "--advertise-client-urls", client, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, (char *)NULL);
        _exit(127);
    }
    assert_int_equal(etcd_open(members, &e, NULL), 0);
    etcd_set_timeouts(e, 500, 500);
    for (int i = 0; i < 150; i++) { /* up to ~15 s */
        int rc = etcd_get(e, "/ping", &kv, NULL, NULL);
        if (rc == 0 || rc == -ENOENT)
            break;
        sleep_ms(100);
    }
    assert_int_equal(etcd_get(e, "/ping", &kv, NULL, NULL), -ENOENT);
    etcd_close(e);
    return 0;
}

static int teardown_etcd(void **unused)
{
    char cmd[300];

    (void)unused;
    kill(etcd_pid, SIGTERM);
    waitpid(etcd_pid, NULL, 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* ---- the client ------------------------------------------------------------------------ */

static void test_client_put_get_txn(void **unused)
{
    etcd_t *e;
    etcd_kv_t kv = {0};
    arb_err_t err = {{0}};
    const char bin[] = {'a', '\0', (char)0xff, 'z'};
    int64_t rev = 0, rev2 = 0;
    bool ok = true;

    (void)unused;
    assert_int_equal(etcd_open(members, &e, &err), 0);
    assert_int_equal(etcd_put(e, "/c/k", bin, sizeof bin, 0, &rev, &err), 0);
    assert_true(rev > 0);
    assert_int_equal(etcd_get(e, "/c/k", &kv, &rev2, &err), 0);
    assert_int_equal(kv.vlen, sizeof bin); /* bytes survive base64 both ways */
    assert_memory_equal(kv.val, bin, sizeof bin);
    assert_int_equal(kv.create_rev, rev);
    assert_int_equal(rev2, rev);
    etcd_kv_free(&kv);

    /* A failed compare: the gateway leaves "succeeded" out. */
    json_t *cmp = json_array(), *succ = json_array();
    json_array_append_new(cmp, etcd_cmp_create("/c/k", rev + 1000));
    json_array_append_new(succ, etcd_op_put("/c/k", "x", 1, 0));
    assert_int_equal(etcd_txn(e, cmp, succ, NULL, &ok, NULL, &err), 0);
    assert_false(ok);
    assert_int_equal(etcd_get(e, "/c/k", &kv, NULL, &err), 0);
    assert_int_equal(kv.vlen, sizeof bin); /* untouched */
    etcd_kv_free(&kv);
    cmp = json_array();
    succ = json_array();
    json_array_append_new(cmp, etcd_cmp_create("/c/k", rev));
    json_array_append_new(succ, etcd_op_del("/c/k"));
    assert_int_equal(etcd_txn(e, cmp, succ, NULL, &ok, NULL, &err), 0);
    assert_true(ok);
    assert_int_equal(etcd_get(e, "/c/k", &kv, NULL, &err), -ENOENT);

    /* etcd refuses a txn naming a key twice: a 4xx, not retried, message kept. */
    succ = json_array();
    json_array_append_new(succ, etcd_op_put("/c/d", "1", 1, 0));
    json_array_append_new(succ, etcd_op_put("/c/d", "2", 1, 0));
    assert_int_equal(etcd_txn(e, NULL, succ, NULL, &ok, NULL, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "duplicate key"));

    /* Leases: grant, keepalive, revoke; a revoked lease's key is gone. */
    int64_t id = 0, ttl = 0;
    assert_int_equal(etcd_lease_grant(e, 5, &id, &err), 0);
    assert_int_equal(etcd_put(e, "/c/leased", "v", 1, id, NULL, &err), 0);
    assert_int_equal(etcd_lease_keepalive(e, id, &ttl, &err), 0);
    assert_true(ttl > 0 && ttl <= 5);
    assert_int_equal(etcd_get(e, "/c/leased", &kv, NULL, &err), 0);
    assert_int_equal(kv.lease, id);
    etcd_kv_free(&kv);
    assert_int_equal(etcd_lease_revoke(e, id, &err), 0);
    assert_int_equal(etcd_get(e, "/c/leased", &kv, NULL, &err), -ENOENT);
    assert_int_equal(etcd_lease_keepalive(e, id, &ttl, &err), 0);
    assert_int_equal(ttl, 0); /* "TTL" left out: the lease is gone */
    etcd_close(e);
}

typedef struct scan_seen {
    int n;
    bool ordered;
    char last[64];
} scan_seen_t;

static int scan_count(void *arg, const etcd_kv_t *kv)
{
    scan_seen_t *s = arg;
    if (s->n > 0 && strcmp(s->last, kv->key) >= 0)
        s->ordered = false;
    snprintf(s->last, sizeof s->last, "%s", kv->key);
    s->n++;
    return 0;
}

static void test_client_scan_pages(void **unused)
{
    etcd_t *e;
    arb_err_t err = {{0}};
    char key[64];
    scan_seen_t seen = {0, true, ""};

    (void)unused;
    assert_int_equal(etcd_open(members, &e, &err), 0);
    for (int t = 0; t < 26; t++) { /* 26 txns of 10 */
        json_t *succ = json_array();
        bool ok;
        for (int j = 0; j < 10; j++) {
            snprintf(key, sizeof key, "/s/p/%05d", t * 10 + j);
            json_array_append_new(succ, etcd_op_put(key, "v", 1, 0));
        }
        assert_int_equal(etcd_txn(e, NULL, succ, NULL, &ok, NULL, &err), 0);
        assert_true(ok);
    }
    assert_int_equal(etcd_put(e, "/s/p0", "x", 1, 0, NULL, &err), 0); /* not under "/s/p/" */
    assert_int_equal(etcd_put(e, "/s/o", "x", 1, 0, NULL, &err), 0);
    assert_int_equal(etcd_scan(e, "/s/p/", 7, scan_count, &seen, NULL, &err), 0); /* 38 pages */
    assert_int_equal(seen.n, 260);
    assert_true(seen.ordered);
    assert_string_equal(seen.last, "/s/p/00259");
    etcd_close(e);
}

static void test_client_member_rotation(void **unused)
{
    etcd_t *e;
    arb_err_t err = {{0}};
    etcd_kv_t kv = {0};
    char list[200];

    (void)unused;
    /* The first member is down: the client moves on to the next one. */
    snprintf(list, sizeof list, "127.0.0.1:%d,http://%s", dead_port, members);
    assert_int_equal(etcd_open(list, &e, &err), 0);
    assert_int_equal(etcd_nmembers(e), 2);
    assert_int_equal(etcd_put(e, "/r/k", "v", 1, 0, NULL, &err), 0);
    assert_int_equal(etcd_get(e, "/r/k", &kv, NULL, &err), 0);
    etcd_kv_free(&kv);
    assert_non_null(strstr(etcd_member(e), members));
    etcd_close(e);

    /* No member up: -EIO within the retry budget, and a message that says so. */
    snprintf(list, sizeof list, "127.0.0.1:%d", dead_port);
    assert_int_equal(etcd_open(list, &e, &err), 0);
    etcd_set_timeouts(e, 200, 300);
    assert_int_equal(etcd_get(e, "/r/k", &kv, NULL, &err), -EIO);
    assert_non_null(strstr(err.msg, "no member answered"));
    etcd_close(e);

    /* Bad member lists are refused with the fix. */
    assert_int_equal(etcd_open("127.0.0.1", &e, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "HOST:PORT"));
    assert_int_equal(etcd_open("", &e, &err), -EINVAL);
}

static void test_client_watch(void **unused)
{
    etcd_t *e, *dead;
    arb_err_t err = {{0}};
    int64_t rev = 0, rev2 = 0;
    char list[64];

    (void)unused;
    assert_int_equal(etcd_open(members, &e, &err), 0);
    assert_int_equal(etcd_put(e, "/w/k", "1", 1, 0, &rev, &err), 0);
    /* Nothing happens: 0 when the time is up; a put is not a delete. */
    assert_int_equal(etcd_watch_delete(e, "/w/k", rev + 1, 300, &err), 0);
    assert_int_equal(etcd_put(e, "/w/k", "2", 1, 0, &rev2, &err), 0);
    assert_int_equal(etcd_watch_delete(e, "/w/k", rev + 1, 300, &err), 0);
    /* A delete after the revision watched from is seen, even one made before
     * the watch started (the watch replays history from that revision). */
    assert_int_equal(etcd_del(e, "/w/k", &err), 0);
    assert_int_equal(etcd_watch_delete(e, "/w/k", rev2 + 1, 5000, &err), 1);
    /* The client works as before after a watch. */
    assert_int_equal(etcd_put(e, "/w/k", "3", 1, 0, NULL, &err), 0);
    etcd_close(e);
    /* A member that is down: -EIO. */
    snprintf(list, sizeof list, "127.0.0.1:%d", dead_port);
    assert_int_equal(etcd_open(list, &dead, &err), 0);
    assert_int_equal(etcd_watch_delete(dead, "/w/k", 1, 300, &err), -EIO);
    etcd_close(dead);
}

/* ---- the store backend ---------------------------------------------------------------------- */

typedef struct kseen {
    int n;
    char keys[400][32];
    char vals[400][8];
} kseen_t;

static int store_collect(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    kseen_t *s = arg;
    (void)rev;
    if (s->n < 400) {
        snprintf(s->keys[s->n], 32, "%s", key);
        snprintf(s->vals[s->n++], 8, "%.*s", (int)n, val);
    }
    return 0;
}

static void test_store_backend(void **unused)
{
    store_t *s;
    arb_err_t err = {{0}};
    store_batch_t b = {0};
    uint64_t rev = 0;
    char uri[200], key[32], *v;
    size_t n;
    static kseen_t seen;

    (void)unused;
    snprintf(uri, sizeof uri, "etcd://%s/t1", members);
    assert_int_equal(store_open(uri, NULL, &s, &err), 0);
    /* One batch naming keys twice (as group commit makes): the last op wins. */
    store_batch_putstr(&b, "jobs/1", "a");
    store_batch_putstr(&b, "jobs/2", "b");
    store_batch_putstr(&b, "jobs/1", "c");
    store_batch_del(&b, "jobs/2");
    store_batch_putstr(&b, "meta/x", "m");
    assert_int_equal(store_apply(s, &b, &rev, &err), 0);
    store_batch_free(&b);
    assert_true(rev > 0);
    assert_int_equal(store_revision(s), rev);
    assert_int_equal(store_get(s, "jobs/1", &v, &n, NULL, &err), 0);
    assert_string_equal(v, "c");
    free(v);
    assert_int_equal(store_get(s, "jobs/2", &v, &n, NULL, &err), -ENOENT);
    store_batch_del(&b, "jobs/1");
    store_batch_putstr(&b, "jobs/1", "d"); /* delete then put: the put stays */
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    store_batch_free(&b);
    assert_int_equal(store_get(s, "jobs/1", &v, &n, NULL, &err), 0);
    assert_string_equal(v, "d");
    free(v);

    /* 300 ops: more than etcd's default 128 per txn, so split, all written. */
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "nodes/%04d", i);
        store_batch_putstr(&b, key, "n");
    }
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    store_batch_free(&b);
    memset(&seen, 0, sizeof seen);
    assert_int_equal(store_scan(s, "nodes/", store_collect, &seen, &err), 0);
    assert_int_equal(seen.n, 300);
    assert_string_equal(seen.keys[0], "nodes/0000"); /* keys come back without the prefix */
    assert_string_equal(seen.keys[299], "nodes/0299");
    memset(&seen, 0, sizeof seen);
    assert_int_equal(store_scan(s, "jobs/", store_collect, &seen, &err), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.vals[0], "d");
    store_close(s);

    /* Another prefix sees none of it. */
    snprintf(uri, sizeof uri, "etcd://%s/other", members);
    assert_int_equal(store_open(uri, NULL, &s, &err), 0);
    memset(&seen, 0, sizeof seen);
    assert_int_equal(store_scan(s, "", store_collect, &seen, &err), 0);
    assert_int_equal(seen.n, 0);
    store_close(s);

    /* Bad locations name the option and the fix. */
    snprintf(uri, sizeof uri, "etcd://%s/t1?fence=x", members);
    assert_int_equal(store_open(uri, NULL, &s, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "fence"));
    snprintf(uri, sizeof uri, "etcd://%s/t1?colour=red", members);
    assert_int_equal(store_open(uri, NULL, &s, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "unknown"));
    snprintf(uri, sizeof uri, "etcd://127.0.0.1:%d", dead_port);
    assert_int_equal(store_open(uri, NULL, &s, &err), -EIO);
}

static void test_store_fence(void **unused)
{
    etcd_t *e;
    store_t *s, *s2;
    arb_err_t err = {{0}};
    store_batch_t b = {0};
    int64_t term = 0, term2 = 0;
    char uri[200], *v;
    size_t n;

    (void)unused;
    assert_int_equal(etcd_open(members, &e, &err), 0);
    assert_int_equal(etcd_put(e, "/t2/leader", "{}", 2, 0, &term, &err), 0);
    snprintf(uri, sizeof uri, "etcd://%s/t2?fence=%lld", members, (long long)term);
    assert_int_equal(store_open(uri, NULL, &s, &err), 0);
    store_batch_putstr(&b, "jobs/1", "ours");
    assert_int_equal(store_apply(s, &b, NULL, &err), 0);
    store_batch_free(&b);

    /* Another controller wins: the key is deleted and created again. */
    assert_int_equal(etcd_del(e, "/t2/leader", &err), 0);
    assert_int_equal(etcd_put(e, "/t2/leader", "{}", 2, 0, &term2, &err), 0);
    assert_true(term2 > term);
    store_batch_putstr(&b, "jobs/1", "deposed");
    store_batch_putstr(&b, "jobs/2", "deposed");
    assert_int_equal(store_apply(s, &b, NULL, &err), -ESTALE);
    store_batch_free(&b);
    assert_non_null(strstr(err.msg, "step down"));
    store_close(s);
    snprintf(uri, sizeof uri, "etcd://%s/t2", members);
    assert_int_equal(store_open(uri, NULL, &s2, &err), 0);
    assert_int_equal(store_get(s2, "jobs/1", &v, &n, NULL, &err), 0);
    assert_string_equal(v, "ours"); /* nothing of the deposed batch landed */
    free(v);
    assert_int_equal(store_get(s2, "jobs/2", &v, &n, NULL, &err), -ENOENT);
    store_close(s2);
    /* A stale term cannot even open the store. */
    snprintf(uri, sizeof uri, "etcd://%s/t2?fence=%lld", members, (long long)term);
    assert_int_equal(store_open(uri, NULL, &s, &err), -ESTALE);
    etcd_close(e);
}

/* ---- the resource manager over etcd ------------------------------------------------------------
 */

static void test_state_recovers_from_etcd(void **unused)
{
    st_conf_t conf;
    st_t *s;
    arb_err_t err = {{0}};
    char uri[200];
    const char *spec = "{\"name\":\"j\",\"command\":[\"true\"],\"resources\":{\"requests\":"
                       "{\"cpu\":\"1\"}}}";

    (void)unused;
    st_conf_init(&conf);
    conf.reject_unfittable = false;
    snprintf(uri, sizeof uri, "etcd://%s/t3", members);
    assert_int_equal(st_open(uri, &conf, &s, &err), 0);
    for (int i = 0; i < 5; i++) {
        st_job_view_t out;
        int64_t t = 0;
        assert_int_equal(st_job_submit(s, &admin, spec, strlen(spec), false, &out, &t, &err), 0);
        assert_int_equal(st_wait(s, t, &err), 0);
        st_job_view_free(&out);
    }
    st_status_t st1;
    st_status(s, &st1);
    assert_int_equal(st1.epoch, 1);
    st_close(s);

    assert_int_equal(st_open(uri, &conf, &s, &err), 0);
    st_status_t st2;
    st_status(s, &st2);
    assert_int_equal(st2.jobs, 5);
    assert_int_equal(st2.epoch, 2);
    assert_int_equal(st_check(s, &err), 0);
    st_job_view_t out;
    int64_t t = 0;
    assert_int_equal(st_job_submit(s, &admin, spec, strlen(spec), false, &out, &t, &err), 0);
    assert_int_equal(st_wait(s, t, &err), 0);
    assert_int_equal(out.id, 6); /* ids never reused */
    st_job_view_free(&out);
    /* A failed commit is reported by st_store_status (the controller then steps down). */
    assert_int_equal(st_store_status(s, &err), 0);
    st_inject_store_failure(s, 1);
    assert_int_equal(st_job_submit(s, &admin, spec, strlen(spec), false, &out, &t, &err), 0);
    st_job_view_free(&out);
    assert_int_equal(st_wait(s, t, &err), -EIO);
    assert_int_equal(st_store_status(s, &err), -EIO);
    assert_non_null(strstr(err.msg, "injected"));
    st_close(s);
    st_conf_free(&conf);
}

/* ---- the election
 * ---------------------------------------------------------------------------------- */

static bool wait_role(ha_elect_t *h, ha_role_t want, int ms)
{
    for (int i = 0; i < ms / 20; i++) {
        if (ha_role(h) == want)
            return true;
        sleep_ms(20);
    }
    return ha_role(h) == want;
}

static void test_election(void **unused)
{
    ha_elect_t *a, *b, *lead, *other;
    arb_err_t err = {{0}};
    char name[128], url[256];
    int64_t term = 0, t1;
    ha_conf_t ca = {members, "/t4", "A", "http://127.0.0.1:1", 5, 50};
    ha_conf_t cb = {members, "/t4", "B", "http://127.0.0.1:2", 5, 50};

    (void)unused;
    assert_int_equal(ha_start(&ca, &a, &err), 0);
    assert_int_equal(ha_start(&cb, &b, &err), 0);
    /* Exactly one leads; the other follows it. */
    for (int i = 0; i < 250 && ha_role(a) != HA_LEADER && ha_role(b) != HA_LEADER; i++)
        sleep_ms(20);
    lead = ha_role(a) == HA_LEADER ? a : b;
    other = lead == a ? b : a;
    assert_int_equal(ha_role(lead), HA_LEADER);
    t1 = ha_term(lead);
    assert_true(t1 > 0);
    for (int i = 0; i < 100 && ha_leader(other, name, sizeof name, url, sizeof url, &term) != 0;
         i++)
        sleep_ms(20);
    assert_int_equal(ha_leader(other, name, sizeof name, url, sizeof url, &term), 0);
    assert_string_equal(name, lead == a ? "A" : "B");
    assert_int_equal(term, t1);
    assert_int_equal(ha_role(other), HA_FOLLOWER);
    assert_int_equal(ha_leader(lead, name, sizeof name, url, sizeof url, &term), 1);

    /* The leader resigns (revokes its lease): the other takes over, newer term. */
    ha_stop(lead);
    assert_true(wait_role(other, HA_LEADER, 3000));
    assert_true(ha_term(other) > t1);
    ha_stop(other);

    /* Bad settings name the flag and the fix. */
    ca.ttl_s = 2;
    assert_int_equal(ha_start(&ca, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--lease-ttl"));
    ca.ttl_s = 5;
    ca.url = "127.0.0.1:1";
    assert_int_equal(ha_start(&ca, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--advertise-url"));
}

int main(void)
{
    if (access(ETCD_BIN, X_OK) != 0) {
        printf("SKIP: %s not installed (scripts/deps.sh installs Debian's etcd-server)\n",
               ETCD_BIN);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_put_get_txn),
        cmocka_unit_test(test_client_scan_pages),
        cmocka_unit_test(test_client_member_rotation),
        cmocka_unit_test(test_client_watch),
        cmocka_unit_test(test_store_backend),
        cmocka_unit_test(test_store_fence),
        cmocka_unit_test(test_state_recovers_from_etcd),
        cmocka_unit_test(test_election),
    };
    return cmocka_run_group_tests(tests, setup_etcd, teardown_etcd);
}
