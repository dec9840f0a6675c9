/*
 * test_daemon.c: the controller's assembly (src/daemon/controller.c): the
 * plan made from its settings, with no network and no store opened. Which
 * store starts (SQLite or etcd with its members and prefix), which address
 * the API takes (loopback when nobody can be authenticated), how callers
 * are named, the scheduler's config read from --config; and the settings
 * refused before anything starts, each with a message naming the flag.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/controller.h"

static char dir[64];

static const char *file(const char *name, const char *text)
{
    static char path[4][128];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 128, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(p, 0600); /* a tokens file readable by others draws a warning */
    return p;
}

static int setup(void **st)
{
    snprintf(dir, sizeof dir, "/tmp/arb_test_daemon.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **st)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_sqlite_plan(void **st)
{
    dmn_ctl_settings_t s;
    dmn_ctl_plan_t p;
    arb_err_t err = {{0}};

    dmn_ctl_settings_init(&s);
    s.data_dir = "/var/lib/arbiter";
    s.listen = "127.0.0.1:7171";
    s.config = file("config.yaml", "scheduler: {interval: 200ms, starvation: 90s}\n");
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), 0);
    assert_int_equal(p.store, DMN_STORE_SQLITE);
    assert_string_equal(p.data_dir, "/var/lib/arbiter");
    assert_string_equal(p.host, "127.0.0.1");
    assert_int_equal(p.port, 7171);
    assert_false(p.moved_to_loopback);
    assert_string_equal(p.scheme, "http");
    assert_string_equal(p.auth, "NO authentication: loopback only");
    assert_int_equal(p.conf.interval_ns, 200000000LL);
    assert_int_equal(p.conf.starvation_ns, 90000000000LL);
    assert_false(p.conf.accept_rewind);
    dmn_ctl_plan_free(&p);
}

static void test_auth_and_loopback(void **st)
{
    dmn_ctl_settings_t s;
    dmn_ctl_plan_t p;
    arb_err_t err = {{0}};

    /* nobody can be named: the API moves to loopback, and says so */
    dmn_ctl_settings_init(&s);
    s.data_dir = "d";
    s.listen = "0.0.0.0:7070";
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), 0);
    assert_true(p.moved_to_loopback);
    assert_string_equal(p.host, "127.0.0.1");
    assert_non_null(strstr(p.note, "not on 0.0.0.0"));
    dmn_ctl_plan_free(&p);

    /* tokens beyond loopback without TLS: refused, unless said */
    s.tokens = file("tokens", "secret-admin-token-0123456789 admin ops\n");
    s.accept_rewind = true;
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--insecure-plain-http"));
    s.plain_ok = true;
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), 0);
    assert_string_equal(p.host, "0.0.0.0");
    assert_true(p.has_tokens);
    assert_int_equal(p.tokens.n, 1);
    assert_string_equal(p.auth, "bearer tokens required");
    assert_true(p.conf.accept_rewind);
    assert_int_equal(p.note[0], '\0');
    dmn_ctl_plan_free(&p);
}

static void test_etcd_plan(void **st)
{
    dmn_ctl_settings_t s;
    dmn_ctl_plan_t p;
    arb_err_t err = {{0}};

    dmn_ctl_settings_init(&s);
    s.store = "etcd://10.0.0.1:2379,10.0.0.2:2379/prod";
    s.name = "c1";
    s.ttl_s = 7;
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), 0);
    assert_int_equal(p.store, DMN_STORE_ETCD);
    assert_string_equal(p.members, "10.0.0.1:2379,10.0.0.2:2379");
    assert_string_equal(p.prefix, "/prod");
    assert_string_equal(p.name, "c1");
    assert_int_equal(p.ttl_s, 7);
    assert_int_equal(p.max_ops, 128);
    assert_int_equal(p.port, 7070);
    dmn_ctl_plan_free(&p);

    s.store = "etcd://10.0.0.1:2379";
    s.prefix = "/other";
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), 0);
    assert_string_equal(p.prefix, "/other");
    dmn_ctl_plan_free(&p);
    s.prefix = NULL;
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), 0);
    assert_string_equal(p.prefix, "/arbiter");
    dmn_ctl_plan_free(&p);
}

static void test_refused(void **st)
{
    static const struct {
        const char *listen, *dir, *store, *name, *prefix, *config, *want;
    } bad[] = {
        {"127.0.0.1:0", NULL, NULL, NULL, NULL, NULL, "--data-dir DIR"},
        {"127.0.0.1:0", "d", "etcd://h:1", "x", NULL, NULL, "give one store"},
        {"nocolon", "d", NULL, NULL, NULL, NULL, "--listen 'nocolon': use HOST:PORT"},
        {"h:99999", "d", NULL, NULL, NULL, NULL, "--listen 'h:99999'"},
        {"127.0.0.1:0", NULL, "etcd://h:1", NULL, NULL, NULL, "needs --name"},
        {"127.0.0.1:0", NULL, "etcd://", "x", NULL, NULL, "use etcd://HOST:PORT"},
        {"127.0.0.1:0", NULL, "etcd://h:1", "x", "arbiter", NULL, "--store-prefix 'arbiter'"},
        {"127.0.0.1:0", "d", NULL, NULL, NULL, "scheduler: {interval: soon}\n", "interval"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dmn_ctl_settings_t s;
        dmn_ctl_plan_t p;
        arb_err_t err = {{0}};
        dmn_ctl_settings_init(&s);
        s.listen = bad[i].listen;
        s.data_dir = bad[i].dir;
        s.store = bad[i].store;
        s.name = bad[i].name;
        s.prefix = bad[i].prefix;
        s.config = bad[i].config ? file("bad.yaml", bad[i].config) : NULL;
        if (dmn_ctl_plan(&s, &p, &err) != -EINVAL)
            fail_msg("case %zu accepted", i);
        if (!strstr(err.msg, bad[i].want))
            fail_msg("case %zu: '%s' not in '%s'", i, bad[i].want, err.msg);
    }
    /* a bad tokens file and a missing certificate, by name */
    dmn_ctl_settings_t s;
    dmn_ctl_plan_t p;
    arb_err_t err = {{0}};
    dmn_ctl_settings_init(&s);
    s.data_dir = "d";
    s.tokens = file("badtokens", "tok nosuchrole team\n");
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "badtokens"));
    s.tokens = NULL;
    s.tls.cert_file = "/nonexistent/server.crt";
    s.tls.key_file = "/nonexistent/server.key";
    assert_int_equal(dmn_ctl_plan(&s, &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "server.crt"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite_plan),
        cmocka_unit_test(test_auth_and_loopback),
        cmocka_unit_test(test_etcd_plan),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
