/*
 * test_agent_resize.c: the agent's side of elastic jobs and per-job grace
 * periods, with real processes. The controller's reply carries grace_s,
 * elastic, generation and hosts (a hosts list too long for the notice
 * leaves it empty rather than failing the reply); an elastic task starts
 * with ARBITER_RESIZE_FILE written, and a new generation rewrites the file
 * and sends SIGUSR1 to its group (the task copies the file in its handler);
 * the same generation again does nothing; a task that ignores SIGTERM is
 * killed when its own grace runs out, not the executor's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/report.h"
#include "proc_fixture.h"
#include "util/mtime.h"

#define MS 1000000LL
#define SEC 1000000000LL

static char tmpdir[64];

/* Poll (bounded, 10 s) until path holds text. */
static bool wait_for(const char *path, const char *text)
{
    for (int i = 0; i < 1000; i++) {
        if (strstr(fx_slurp(path), text))
            return true;
        usleep(10000);
    }
    return false;
}

static void test_reply_fields(void **st)
{
    (void)st;
    char big[8192];
    size_t used = 0;
    agent_reply_t r;
    arb_err_t err = {{0}};
    static const char ok[] =
        "{\"epoch\":1,\"assignments\":[{\"job\":3,\"task\":1,\"epoch\":1,\"grace_s\":45,"
        "\"elastic\":true,\"generation\":7,\"hosts\":[\"10.0.0.1\",\"10.0.0.2\"],\"rank\":1,"
        "\"world_size\":2,\"master_addr\":\"10.0.0.1\",\"master_port\":30000},"
        "{\"job\":4,\"task\":0,\"epoch\":1,\"elastic\":true,\"rank\":0,\"world_size\":1,"
        "\"master_addr\":\"10.0.0.1\",\"master_port\":30001},"
        "{\"job\":5,\"task\":0,\"epoch\":1}]}";

    assert_int_equal(agent_reply_parse(ok, strlen(ok), &r, &err), 0);
    assert_int_equal(r.assign[0].grace_ns, 45 * SEC);
    assert_true(r.assign[0].elastic);
    assert_int_equal(r.assign[0].generation, 7);
    assert_string_equal(r.assign[0].hosts, "10.0.0.1,10.0.0.2");
    assert_int_equal(r.assign[0].world_size, 2);
    assert_int_equal(r.assign[1].world_size, 1); /* an elastic world of one */
    assert_string_equal(r.assign[1].master_addr, "10.0.0.1");
    assert_int_equal(r.assign[2].grace_ns, -1); /* none given: the agent's */
    assert_false(r.assign[2].elastic);
    agent_reply_free(&r);

    /* 200 hosts do not fit the notice: empty, the reply still parses */
    used += (size_t)snprintf(big + used, sizeof big - used,
                             "{\"epoch\":1,\"assignments\":[{\"job\":3,\"task\":0,\"epoch\":1,"
                             "\"elastic\":true,\"rank\":0,\"world_size\":200,\"master_addr\":"
                             "\"h\",\"master_port\":1,\"hosts\":[");
    for (int i = 0; i < 200; i++)
        used += (size_t)snprintf(big + used, sizeof big - used, "%s\"10.0.0.%d\"", i ? "," : "", i);
    snprintf(big + used, sizeof big - used, "]}]}");
    assert_int_equal(agent_reply_parse(big, strlen(big), &r, &err), 0);
    assert_string_equal(r.assign[0].hosts, "");
    agent_reply_free(&r);

    static const struct {
        const char *json, *want;
    } bad[] = {
        {"{\"epoch\":1,\"assignments\":[{\"job\":3,\"task\":0,\"epoch\":1,\"grace_s\":-1}]}",
         "grace_s"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":3,\"task\":0,\"epoch\":1,\"grace_s\":4000}]}",
         "grace_s"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":3,\"task\":0,\"epoch\":1,\"elastic\":1}]}",
         "elastic: expected true or false"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":3,\"task\":0,\"epoch\":1,\"elastic\":true,"
         "\"rank\":2,\"world_size\":2}]}",
         "rank < world_size"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":3,\"task\":0,\"epoch\":1,\"hosts\":[\"a,b\"]}]}",
         "hosts[0]: expected a host name"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":3,\"task\":0,\"epoch\":1,\"hosts\":\"a\"}]}",
         "hosts: expected a list"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&r, 0, sizeof r);
        if (agent_reply_parse(bad[i].json, strlen(bad[i].json), &r, &err) != -EINVAL ||
            !strstr(err.msg, bad[i].want))
            fail_msg("case %zu: '%s', wanted '%s'", i, err.msg, bad[i].want);
        assert_null(r.assign);
    }
}

static void exec_init(agent_exec_t *x)
{
    static char logs[128];
    agent_exec_conf_t c;
    arb_err_t err = {{0}};

    snprintf(logs, sizeof logs, "%s/logs", tmpdir);
    memset(&c, 0, sizeof c);
    c.log_dir = logs;
    c.supervisor = ARB_BIN;
    c.allow_root = true;
    c.cgroup_mode = "none";
    c.grace_ns = 60 * SEC; /* the executor's: far longer than any task's own below */
    if (agent_exec_init(x, &c, &err) < 0)
        fail_msg("executor: %s", err.msg);
}

static void test_resize_notice(void **st)
{
    (void)st;
    agent_exec_t x;
    arb_err_t err = {{0}};
    char out[128], file[256], script[1024];
    agent_task_spec_t s;
    agent_task_t *t;

    exec_init(&x);
    snprintf(out, sizeof out, "%s/notice", tmpdir);
    snprintf(script, sizeof script,
             "echo \"$RANK/$WORLD_SIZE $ARBITER_RESIZE_FILE\" > %s.env; "
             "trap 'cp \"$ARBITER_RESIZE_FILE\" %s.tmp; mv %s.tmp %s' USR1; "
             "while :; do sleep 0.05; done",
             out, out, out, out);
    char *argv[] = {"sh", "-c", script, NULL};
    memset(&s, 0, sizeof s);
    s.job = "7";
    s.task = 1;
    s.attempt = 1;
    s.argv = argv;
    s.elastic = true;
    s.generation = 3;
    s.world_size = 2;
    s.rank = 1;
    s.master_addr = "127.0.0.1";
    s.master_port = 29500;
    s.hosts = "a,b";
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    snprintf(file, sizeof file, "%s/logs/7.1.resize", tmpdir);
    assert_string_equal(fx_slurp(file), "generation=3\nworld_size=2\nrank=1\nhosts=a,b\n");
    char envf[300];
    snprintf(envf, sizeof envf, "%s.env", out);
    assert_true(wait_for(envf, "1/2 "));
    assert_non_null(strstr(fx_slurp(envf), "/logs/7.1.resize"));

    /* same generation: nothing */
    assert_int_equal(agent_exec_resize(&x, "7", 1, 3, 2, 1, "a,b", &err), 0);
    /* a new one: rewritten, SIGUSR1, the handler copies it */
    assert_int_equal(agent_exec_resize(&x, "7", 1, 4, 3, 1, "a,b,c", &err), 1);
    assert_true(wait_for(out, "generation=4\nworld_size=3\nrank=1\nhosts=a,b,c\n"));
    assert_int_equal(agent_exec_find(&x, "7", 1)->state, AGENT_TASK_RUNNING); /* USR1 caught */
    assert_int_equal(agent_exec_resize(&x, "7", 9, 5, 3, 1, "", &err), -ENOENT);
    agent_exec_fence(&x, arb_mono_ns());
    assert_int_equal(agent_exec_wait(&x, 10 * SEC), 0);
    agent_exec_free(&x);
}

/* A task that ignores SIGTERM lives through its own grace and is killed at
 * its end: long before the executor's 60 s. */
static void test_own_grace(void **st)
{
    (void)st;
    agent_exec_t x;
    arb_err_t err = {{0}};
    char mark[128], script[1024];
    agent_task_spec_t s;
    agent_task_t *t;

    exec_init(&x);
    snprintf(mark, sizeof mark, "%s/termed", tmpdir);
    snprintf(script, sizeof script,
             "trap 'echo term > %s' TERM; echo up > %s.up; while :; do sleep 0.05; done", mark,
             mark);
    char *argv[] = {"sh", "-c", script, NULL};
    memset(&s, 0, sizeof s);
    s.job = "8";
    s.argv = argv;
    s.has_grace = true;
    s.grace_ns = 300 * MS;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    char up[300];
    snprintf(up, sizeof up, "%s.up", mark);
    assert_true(wait_for(up, "up"));
    int64_t t0 = arb_mono_ns();
    assert_int_equal(agent_exec_cancel(&x, "8", 0, t0), 0);
    t = agent_exec_find(&x, "8", 0);
    assert_int_equal(t->kill_at_ns, t0 + 300 * MS); /* its own grace, not the executor's */
    assert_true(wait_for(mark, "term"));            /* it got SIGTERM and lived on */
    assert_int_equal(agent_exec_wait(&x, 20 * SEC), 0);
    t = agent_exec_find(&x, "8", 0);
    assert_int_equal(t->state, AGENT_TASK_EXITED);
    assert_int_equal(t->signal, 9); /* SIGKILL at the end of the grace */
    agent_exec_free(&x);
}

/* The restart state keeps a task's grace and generation; a file written
 * before they existed still loads. */
static void test_state_file(void **st)
{
    (void)st;
    agent_exec_t x;
    arb_err_t err = {{0}};
    agent_task_spec_t s;
    agent_task_record_t rec[4];
    char path[256];
    char *argv[] = {"sleep", "30", NULL};

    exec_init(&x);
    memset(&s, 0, sizeof s);
    s.job = "9";
    s.argv = argv;
    s.has_grace = true;
    s.grace_ns = 1500 * MS;
    s.elastic = true;
    s.generation = 12;
    s.world_size = 1;
    s.master_addr = "h";
    s.master_port = 29500;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), 0);
    snprintf(path, sizeof path, "%s/state", tmpdir);
    assert_int_equal(agent_exec_save(&x, path, &err), 0);
    assert_int_equal(agent_exec_load(path, rec, 4, &err), 1);
    assert_int_equal(rec[0].grace_ns, 1500 * MS);
    assert_int_equal(rec[0].generation, 12);
    agent_exec_fence(&x, arb_mono_ns());
    assert_int_equal(agent_exec_wait(&x, 10 * SEC), 0);
    agent_exec_free(&x);

    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fprintf(f, "# old\n9 0 1 1 4242 77\n");
    fclose(f);
    assert_int_equal(agent_exec_load(path, rec, 4, &err), 1);
    assert_int_equal(rec[0].grace_ns, -1);
    assert_int_equal(rec[0].generation, 0);
    f = fopen(path, "we");
    assert_non_null(f);
    fprintf(f, "9 0 1 1 4242 77 -5 1\n");
    fclose(f);
    assert_int_equal(agent_exec_load(path, rec, 4, &err), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reply_fields),
        cmocka_unit_test(test_resize_notice),
        cmocka_unit_test(test_own_grace),
        cmocka_unit_test(test_state_file),
    };
    char cmd[128];
    int rc;

    snprintf(tmpdir, sizeof tmpdir, "/tmp/arb_agent_resize.XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        return 1;
    return rc;
}
