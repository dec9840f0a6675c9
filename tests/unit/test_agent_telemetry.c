/*
 * test_agent_telemetry.c: the heartbeat sample, the report and the
 * heartbeat loop (src/agent/telemetry.c, report.c, agent.c).
 *
 * Deltas from two fixture /proc trees (CPU share, per-device network and
 * disk rates, new devices and partitions ignored, the clock passed in);
 * the report body in docs/api.md's format; the controller's reply parsed
 * and refused field by field; and agent_step over a scripted transport with
 * a fake clock: registration, assignments started with their GPUs, a stop
 * cancels, a newer epoch is followed, missed acknowledgements fence the
 * node after the lease and refuse work until it registers again.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"

#define FIX ARB_SOURCE_DIR "/tests/agent"
#define SEC 1000000000LL

static void test_deltas(void **st)
{
    agent_tel_t t;
    agent_tel_sample_t s;
    arb_err_t err = {{0}};

    agent_tel_init(&t, FIX "/proc1");
    assert_int_equal(agent_tel_sample(&t, NULL, 10 * SEC, &s, &err), 0);
    assert_true(s.cpu_util_pct < 0 && s.net_rx_bps < 0 && s.disk_read_bps < 0); /* no rates yet */
    assert_int_equal(s.mem_total_bytes, 16384000LL * 1024);
    assert_int_equal(s.mem_available_bytes, 8192000LL * 1024);
    assert_true(fabs(s.load1 - 0.5) < 1e-9);

    t.proc_root = FIX "/proc2";
    assert_int_equal(agent_tel_sample(&t, NULL, 12 * SEC, &s, &err), 0);
    assert_true(fabs(s.interval_s - 2.0) < 1e-9);
    /* cpu: busy 1500 -> 2500 of total 10000 -> 12000 */
    assert_true(fabs(s.cpu_util_pct - 50.0) < 1e-9);
    /* eth0 +2,000,000 / +500,000 over 2 s; lo ignored; eth1 is new: nothing */
    assert_true(fabs(s.net_rx_bps - 1000000.0) < 1e-6);
    assert_true(fabs(s.net_tx_bps - 250000.0) < 1e-6);
    /* vda +4000 / +8000 sectors; partitions and loop ignored; busy 1000 ms of 2 s */
    assert_true(fabs(s.disk_read_bps - 4000.0 * 512 / 2) < 1e-6);
    assert_true(fabs(s.disk_write_bps - 8000.0 * 512 / 2) < 1e-6);
    assert_true(fabs(s.disk_busy_pct - 50.0) < 1e-9);
    assert_int_equal(s.mem_available_bytes, 6144000LL * 1024);

    /* Counters that go back (a reset) count nothing, not a huge wrap. */
    t.proc_root = FIX "/proc1";
    assert_int_equal(agent_tel_sample(&t, NULL, 13 * SEC, &s, &err), 0);
    assert_true(s.net_rx_bps == 0 && s.disk_read_bps == 0 && s.cpu_util_pct == -1);

    /* The clock must not go back. */
    assert_int_equal(agent_tel_sample(&t, NULL, 12 * SEC, &s, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "monotonic"));

    /* A missing tree: unknowns, not an error. */
    agent_tel_init(&t, "/nonexistent");
    assert_int_equal(agent_tel_sample(&t, NULL, 0, &s, &err), 0);
    assert_int_equal(s.mem_total_bytes, -1);
}

static void test_report_json(void **st)
{
    agent_disc_opts_t o;
    agent_disc_t d;
    agent_tel_t t;
    agent_tel_sample_t s;
    arb_err_t err = {{0}};
    char *body;

    memset(&o, 0, sizeof o);
    o.node_name = "n1";
    o.fake = "2:H100";
    o.proc_root = FIX "/proc1";
    o.sys_root = FIX "/sys";
    o.no_hwloc = true;
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    d.inv.nlabels = 1;
    snprintf(d.inv.labels[0].key, sizeof d.inv.labels[0].key, "rack");
    snprintf(d.inv.labels[0].val, sizeof d.inv.labels[0].val, "r1");
    agent_tel_init(&t, FIX "/proc1");
    agent_tel_sample(&t, &d, 0, &s, NULL);
    t.proc_root = FIX "/proc2";
    agent_tel_sample(&t, &d, 2 * SEC, &s, NULL);

    agent_report_in_t in = {.lamport = 7, .inv = &d.inv, .tel = &s};
    body = agent_report_json(&in);
    assert_non_null(body);
    const char *want[] = {
        "{\"lamport\":7,\"inventory\":{\"cpu\":\"4\",\"memory\":\"16000Mi\",\"labels\":{\"rack\":"
        "\"r1\"},\"gpus\":[{\"model\":\"H100\",\"memory\":\"81559Mi\",\"nvlink\":0,\"pcie\":0,"
        "\"numa\":0,\"uuid\":\"GPU-",
        "\"telemetry\":{\"cpu_util\":0.5,\"memory_used\":\"10000Mi\",\"net_rx_bps\":1000000.0,"
        "\"net_tx_bps\":250000.0,\"disk_read_bps\":1024000.0,\"disk_write_bps\":2048000.0,"
        "\"gpus\":[{\"index\":0,\"healthy\":true,\"util\":0,\"memory_used_mib\":0,\"temp_c\":30},",
        NULL};
    for (int i = 0; want[i]; i++)
        if (!strstr(body, want[i]))
            fail_msg("report lacks\n%s\nin\n%s", want[i], body);
    assert_null(strstr(body, "\"tasks\"")); /* no executor given */
    free(body);

    /* Later reports: no inventory; unknown values are left out. */
    s.cpu_util_pct = -1;
    s.gpu[1] = (agent_gpu_sample_t){-1, -1, -1, false};
    in.inv = NULL;
    body = agent_report_json(&in);
    assert_null(strstr(body, "inventory"));
    assert_null(strstr(body, "cpu_util"));
    assert_non_null(strstr(body, "{\"index\":1,\"healthy\":true}"));
    free(body);

    /* A GPU the source calls unusable; the agent's whereabouts with the inventory. */
    agent_gpu_sample_t bad = {0, 30, 0, true};
    assert_int_equal(agent_fake_set(&d, 1, &bad), 0);
    agent_tel_sample(&t, &d, 4 * SEC, &s, NULL);
    in.inv = &d.inv;
    in.address = "10.0.0.9";
    in.hostname = "host9";
    in.log_dir = "/var/log/arbiter";
    body = agent_report_json(&in);
    assert_non_null(strstr(body, "{\"index\":1,\"healthy\":false,"));
    assert_non_null(strstr(body, "\"address\":\"10.0.0.9\",\"hostname\":\"host9\","
                                 "\"log_dir\":\"/var/log/arbiter\""));
    free(body);
    /* Busy GPUs under emulated load keep their health. */
    assert_int_equal(agent_fake_load(&d, 1u << 1, 90), 0);
    agent_tel_sample(&t, &d, 6 * SEC, &s, NULL);
    assert_int_equal(s.gpu[1].util_pct, 90);
    assert_true(s.gpu[1].unhealthy);
    assert_int_equal(s.gpu[0].util_pct, 0);
    agent_disc_close(&d);
}

static void test_reply_parse(void **st)
{
    static const char ok[] =
        "{\"node\":\"n1\",\"lamport\":90,\"epoch\":3,\"assignments\":[{\"job\":12,\"name\":"
        "\"train\","
        "\"task\":1,\"ntasks\":2,\"attempt\":2,\"epoch\":3,\"gpus\":[4,5],\"gpu_milli\":1000,"
        "\"gpu_memory_mib\":0,\"cpu\":\"8\",\"memory\":\"16Gi\",\"command\":[\"sh\",\"-c\","
        "\"true\"],\"env\":{\"A\":\"1\"},\"state\":\"placed\",\"stop\":false}]}";
    agent_reply_t r;
    arb_err_t err = {{0}};

    assert_int_equal(agent_reply_parse(ok, strlen(ok), &r, &err), 0);
    assert_int_equal(r.lamport, 90);
    assert_int_equal(r.epoch, 3);
    assert_true(r.have_assignments);
    assert_int_equal(r.nassign, 1);
    assert_string_equal(r.assign[0].ref.job, "12");
    assert_int_equal(r.assign[0].ref.task, 1);
    assert_int_equal(r.assign[0].ref.attempt, 2);
    assert_false(r.assign[0].ref.stop);
    assert_int_equal(r.assign[0].ngpus, 2);
    assert_int_equal(r.assign[0].gpus[1], 5);
    assert_int_equal(r.assign[0].cpu_milli, 8000);
    assert_int_equal(r.assign[0].mem_bytes, 16LL << 30);
    assert_string_equal(r.assign[0].argv[2], "true");
    assert_null(r.assign[0].argv[3]);
    assert_string_equal(r.assign[0].env[0], "A=1");
    assert_string_equal(r.assign[0].name, "train");
    assert_int_equal(r.assign[0].world_size, 0); /* not a gang: no rendezvous */
    assert_false(r.lost);
    assert_int_equal(r.lease_ns, 0);
    agent_reply_free(&r);

    /* a gang member, the controller's lease, and a lost node */
    static const char gang[] =
        "{\"lamport\":9,\"epoch\":3,\"lease_ms\":2000,\"assignments\":[{\"job\":4,\"task\":1,"
        "\"epoch\":3,\"rank\":1,\"world_size\":2,\"master_addr\":\"10.0.0.7\","
        "\"master_port\":29500,\"command\":[\"true\"]}]}";
    assert_int_equal(agent_reply_parse(gang, strlen(gang), &r, &err), 0);
    assert_int_equal(r.lease_ns, 2000000000LL);
    assert_int_equal(r.assign[0].rank, 1);
    assert_int_equal(r.assign[0].world_size, 2);
    assert_string_equal(r.assign[0].master_addr, "10.0.0.7");
    assert_int_equal(r.assign[0].master_port, 29500);
    agent_reply_free(&r);
    static const char lost[] = "{\"node\":\"n1\",\"lamport\":9,\"epoch\":3,\"lease_ms\":10000,"
                               "\"lost\":true,\"message\":\"register again\"}";
    assert_int_equal(agent_reply_parse(lost, strlen(lost), &r, &err), 0);
    assert_true(r.lost);
    assert_false(r.have_assignments);
    assert_string_equal(r.message, "register again");
    agent_reply_free(&r);
    static const char stale[] = "{\"node\":\"n1\",\"lamport\":12,\"epoch\":3,\"lease_ms\":10000,"
                                "\"stale\":true,\"message\":\"a replay\"}";
    assert_int_equal(agent_reply_parse(stale, strlen(stale), &r, &err), 0);
    assert_true(r.stale); /* not an acknowledgement: agent.c forgets nothing on it */
    assert_false(r.lost);
    assert_false(r.have_assignments);
    assert_string_equal(r.message, "a replay");
    agent_reply_free(&r);

    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"epoch\":1,\"assignments\":[{\"job\":0,\"task\":0,\"epoch\":1}]}",
         "assignments[0].job: expected an integer 1.."},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0}]}", "assignments[0].epoch: missing"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0,\"epoch\":1,\"gpus\":[16]}]}",
         "assignments[0].gpus[0]: expected a GPU index 0..15"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0,\"epoch\":1,\"command\":[1]}]}",
         "assignments[0].command[0]: expected a string"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0,\"epoch\":1,\"env\":{\"A\":1}}]}",
         "assignments[0].env.A"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0,\"epoch\":1,\"memory\":\"1Gx\"}]}",
         "assignments[0].memory"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0,\"epoch\":1,\"stop\":1}]}",
         "assignments[0].stop: expected true or false"},
        {"{\"epoch\":1,\"assignments\":{}}", "assignments: expected a list"},
        {"{\"epoch\":1,\"lost\":1}", "reply: lost: expected true or false"},
        {"{\"epoch\":1,\"lease_ms\":-5}", "reply: lease_ms: expected an integer"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0,\"epoch\":1,\"world_size\":2,"
         "\"rank\":2,\"master_addr\":\"h\",\"master_port\":9}]}",
         "assignments[0]: a gang member needs rank < world_size"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0,\"epoch\":1,\"world_size\":2,"
         "\"rank\":1,\"master_addr\":\"h\",\"master_port\":70000}]}",
         "assignments[0].master_port: expected an integer 1..65535"},
        {"{\"epoch\":1,\"assignments\":[{\"job\":1,\"task\":0,\"epoch\":1,\"world_size\":2,"
         "\"rank\":1,\"master_addr\":\"\",\"master_port\":7}]}",
         "assignments[0].master_addr: expected a host"},
        {"{\"lamport\":1}", "reply: epoch: missing"},
        {"[1]", "reply: expected an object"},
        {"{\"epoch\":", "reply:1:"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        memset(&r, 0x5a, sizeof r);
        if (agent_reply_parse(bad[i].json, strlen(bad[i].json), &r, &err) != -EINVAL ||
            !strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: '%s', want '%s'", i, err.msg, bad[i].msg);
    }
}

/* ---- the heartbeat loop over a scripted transport ----------------------------------- */

typedef struct script {
    int64_t now;
    int fail; /* reports to refuse from now on (< 0: all) */
    bool lost;
    const char *reply; /* the controller's JSON; NULL: {"epoch":1} */
    char last[8192];   /* the last body sent */
    int sent;
    uint64_t refuse_lamport; /* non-zero: refuse the next report as too far ahead (once) */
} script_t;

static script_t S;

static int64_t fake_now(void *ctx)
{
    return ((script_t *)ctx)->now;
}

static void quiet(void *ctx, const char *msg)
{
    (void)ctx, (void)msg;
}

static int sc_open(const agent_transport_conf_t *c, void **state, arb_err_t *err)
{
    *state = &S;
    return 0;
}

static int sc_report(void *state, const char *body, size_t len, int64_t timeout_ns,
                     agent_reply_t *reply, arb_err_t *err)
{
    script_t *s = state;
    const char *txt = s->reply ? s->reply : "{\"epoch\":1}";
    int rc;

    snprintf(s->last, sizeof s->last, "%.*s", (int)len, body);
    s->sent++;
    if (s->refuse_lamport) { /* the http transport's -ERANGE: the controller's clock in reply */
        reply->lamport = s->refuse_lamport;
        s->refuse_lamport = 0;
        return arb_errf(err, -ERANGE, "422: lamport is too far ahead of the controller's clock");
    }
    if (s->fail) {
        if (s->fail > 0)
            s->fail--;
        return arb_errf(err, -ECONNREFUSED, "connection refused");
    }
    rc = agent_reply_parse(txt, strlen(txt), reply, err);
    reply->lost = s->lost;
    return rc;
}

static void sc_close(void *state)
{
}

static const agent_transport_ops_t scripted = {"scripted", "tests", sc_open, sc_report, sc_close};

/* A started task is STARTING until its start pipe says both exec'd (the
 * agent never waits for it): wait, bounded, for the start to settle. */
static bool runs(agent_t *a, agent_task_t *t)
{
    for (int i = 0; i < 5000 && t && t->state == AGENT_TASK_STARTING; i++) {
        agent_exec_poll(&a->exec, S.now);
        usleep(1000);
    }
    return t && t->state == AGENT_TASK_RUNNING;
}

static void test_loop(void **st)
{
    char logs[] = "/tmp/arb-loop-XXXXXX";
    agent_conf_t c;
    agent_t a;
    arb_err_t err = {{0}};
    agent_task_t *t;

    assert_non_null(mkdtemp(logs));
    memset(&S, 0, sizeof S);
    S.now = 1000 * SEC;
    memset(&c, 0, sizeof c);
    c.disc.node_name = "n9";
    c.disc.fake = "8:H100";
    c.disc.no_hwloc = true;
    c.exec.log_dir = logs;
    c.exec.supervisor = ARB_BIN;
    c.exec.leased = true;
    c.exec.allow_root = true;
    c.exec.cgroup_mode = "none";
    c.exec.grace_ns = SEC;
    c.transport = &scripted;
    c.now = fake_now;
    c.now_ctx = &S;
    c.log = quiet;
    c.lease_ns = 10 * SEC;

    assert_int_equal(agent_open(&a, &c, &err), 0);
    /* First heartbeat: the inventory goes, the controller registers the node. */
    S.reply = "{\"lamport\":50,\"epoch\":2,\"assignments\":[]}";
    assert_int_equal(agent_step(&a, &err), 0);
    assert_non_null(strstr(S.last, "\"inventory\""));
    assert_int_equal(a.lease.state, AGENT_LEASE_ACTIVE);
    assert_int_equal(a.lease.epoch, 2);
    assert_int_equal(a.clock.t, 51); /* max(1, 50) + 1 */
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_null(strstr(S.last, "\"inventory\"")); /* acknowledged: not again */
    assert_non_null(strstr(S.last, "\"lamport\":52"));

    /* The controller's lease is shorter than ours: ours follows it. */
    S.reply = "{\"epoch\":2,\"lease_ms\":4000,\"assignments\":[]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(a.lease.lease_ns, 4 * SEC);
    assert_int_equal(a.lease.expires_ns, S.now + 4 * SEC);
    S.reply = "{\"epoch\":2,\"lease_ms\":10000,\"assignments\":[]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(a.lease.lease_ns, 10 * SEC);

    /* A command that does not exist: reported as exit 127 at once. */
    S.reply = "{\"epoch\":2,\"assignments\":[{\"job\":4,\"task\":0,\"attempt\":1,\"epoch\":2,"
              "\"command\":[\"/nonexistent/x\"]}]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_true(a.urgent);
    t = agent_exec_find(&a.exec, "4", 0);
    assert_true(t && t->state == AGENT_TASK_EXITED && t->exit_code == 127);
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_non_null(strstr(S.last, "\"job\":4,\"task\":0,\"attempt\":1,\"state\":\"failed\","
                                   "\"exit_code\":127"));
    S.reply = "{\"epoch\":2,\"assignments\":[]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_null(agent_exec_find(&a.exec, "4", 0));

    /* A gang member: the rendezvous variables reach its environment. */
    S.reply = "{\"epoch\":2,\"assignments\":[{\"job\":8,\"task\":1,\"attempt\":1,\"epoch\":2,"
              "\"rank\":1,\"world_size\":2,\"master_addr\":\"10.1.2.3\",\"master_port\":23456,"
              "\"command\":[\"sh\",\"-c\",\"echo $RANK/$WORLD_SIZE@$MASTER_ADDR:$MASTER_PORT\"]}]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    t = agent_exec_find(&a.exec, "8", 1);
    assert_non_null(t);
    assert_int_equal(agent_exec_wait(&a.exec, 5 * SEC), 0);
    {
        char buf[128] = "";
        FILE *f = fopen(t->out_path, "r");
        assert_non_null(f);
        assert_non_null(fgets(buf, sizeof buf, f));
        fclose(f);
        assert_string_equal(buf, "1/2@10.1.2.3:23456\n");
    }
    S.reply = "{\"epoch\":2,\"assignments\":[]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_null(agent_exec_find(&a.exec, "8", 1));

    /* An assignment: started with its GPUs, reported running. */
    S.reply = "{\"epoch\":2,\"assignments\":[{\"job\":5,\"task\":0,\"attempt\":1,\"epoch\":2,"
              "\"gpus\":[2,3],\"command\":[\"sleep\",\"100\"]},"
              "{\"job\":6,\"task\":0,\"attempt\":1,\"epoch\":1,\"command\":[\"true\"]}]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    t = agent_exec_find(&a.exec, "5", 0);
    assert_non_null(t);
    assert_true(t->state == AGENT_TASK_STARTING || t->state == AGENT_TASK_RUNNING);
    assert_true(runs(&a, t));
    assert_int_equal(t->ngpus, 2);
    assert_null(agent_exec_find(&a.exec, "6", 0)); /* epoch 1 < 2: refused */
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_non_null(strstr(S.last, "\"tasks\":[{\"job\":5,\"task\":0,\"attempt\":1,"
                                   "\"state\":\"running\"}]"));

    /* stop: SIGTERM, then it is reported ended and forgotten once unlisted. */
    S.reply = "{\"epoch\":2,\"assignments\":[{\"job\":5,\"task\":0,\"attempt\":1,\"epoch\":2,"
              "\"stop\":true,\"command\":[\"sleep\",\"100\"]}]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(t->state, AGENT_TASK_STOPPING);
    for (int i = 0; i < 500 && t->state != AGENT_TASK_EXITED; i++) {
        usleep(2000);
        agent_exec_poll(&a.exec, S.now);
    }
    assert_int_equal(t->state, AGENT_TASK_EXITED);
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_non_null(strstr(S.last, "\"state\":\"failed\",\"exit_code\":143"));
    S.reply = "{\"epoch\":3,\"assignments\":[]}"; /* the controller restarted: epoch 3 */
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_null(agent_exec_find(&a.exec, "5", 0));
    assert_int_equal(a.lease.epoch, 3);

    /* A GPU handed from a task being stopped to a new one: the new one
     * starts only once the old one has exited (it ignores SIGTERM, so
     * that is at its SIGKILL, a grace after the stop). */
    S.reply = "{\"epoch\":3,\"assignments\":[{\"job\":10,\"task\":0,\"attempt\":1,\"epoch\":3,"
              "\"gpus\":[1],\"command\":[\"sh\",\"-c\",\"trap '' TERM; exec sleep 100\"]}]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    t = agent_exec_find(&a.exec, "10", 0);
    assert_true(runs(&a, t));
    usleep(100000); /* let sh set its trap before the SIGTERM */
    S.reply = "{\"epoch\":3,\"assignments\":[{\"job\":11,\"task\":0,\"attempt\":1,\"epoch\":3,"
              "\"gpus\":[1,2],\"command\":[\"sleep\",\"100\"]}]}";
    S.now += SEC / 4;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(t->state, AGENT_TASK_STOPPING);
    assert_null(agent_exec_find(&a.exec, "11", 0)); /* GPU 1 is still job 10's */
    S.now += SEC / 4;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(t->state, AGENT_TASK_STOPPING); /* SIGTERM ignored, grace not over */
    assert_null(agent_exec_find(&a.exec, "11", 0));
    S.now += SEC; /* past the grace: SIGKILL */
    for (int i = 0; i < 500 && t->state != AGENT_TASK_EXITED; i++) {
        agent_exec_poll(&a.exec, S.now);
        usleep(2000);
    }
    assert_int_equal(t->state, AGENT_TASK_EXITED);
    assert_int_equal(agent_step(&a, &err), 0);
    t = agent_exec_find(&a.exec, "11", 0);
    assert_true(runs(&a, t));
    S.reply = "{\"epoch\":3,\"assignments\":[]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    for (int i = 0; i < 500 && t->state != AGENT_TASK_EXITED; i++) {
        agent_exec_poll(&a.exec, S.now + 2 * SEC);
        usleep(2000);
    }
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_null(agent_exec_find(&a.exec, "11", 0));

    /* A task, then the controller goes silent: fence at the lease's end. */
    S.reply = "{\"epoch\":3,\"assignments\":[{\"job\":7,\"task\":0,\"attempt\":1,\"epoch\":3,"
              "\"command\":[\"sleep\",\"100\"]}]}";
    S.now += SEC;
    int64_t last_ok = S.now;
    assert_int_equal(agent_step(&a, &err), 0);
    t = agent_exec_find(&a.exec, "7", 0);
    assert_true(runs(&a, t));
    S.fail = -1;
    while (S.now + SEC < last_ok + 10 * SEC) {
        S.now += SEC;
        assert_int_equal(agent_step(&a, &err), 0);
        assert_int_equal(a.lease.state, AGENT_LEASE_ACTIVE);
        assert_int_equal(t->state, AGENT_TASK_RUNNING);
    }
    S.now = last_ok + 10 * SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(a.lease.state, AGENT_LEASE_FENCED);
    assert_string_equal(t->reason, "fenced");
    assert_int_equal(agent_exec_wait(&a.exec, 5 * SEC), 0);

    /* Back: registers again (inventory resent? no: the controller kept it),
     * reports the task lost, and takes work again. */
    S.fail = 0;
    S.reply = "{\"epoch\":3,\"assignments\":[]}";
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_non_null(strstr(S.last, "\"job\":7,\"task\":0,\"attempt\":1,\"state\":\"lost\""));
    assert_int_equal(a.lease.state, AGENT_LEASE_ACTIVE);
    assert_int_equal(a.lease.fences, 1);

    /* The controller says the node is lost: fence, and the inventory goes again. */
    S.lost = true;
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(a.lease.state, AGENT_LEASE_FENCED);
    S.lost = false;
    S.now += SEC;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_non_null(strstr(S.last, "\"inventory\""));
    assert_int_equal(a.lease.state, AGENT_LEASE_ACTIVE);

    agent_close(&a, true);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", logs);
    assert_int_equal(system(cmd), 0);
}

/* DESIGN.md invariant 9, the agent's half: refused for a clock too far
 * ahead, it takes the controller's time and registers again (inventory),
 * its lease untouched; its reports then go on from that time. */
static void test_clock_refused(void **st)
{
    char logs[] = "/tmp/arb-clock-XXXXXX";
    agent_conf_t c;
    agent_t a;
    arb_err_t err = {{0}};

    assert_non_null(mkdtemp(logs));
    memset(&S, 0, sizeof S);
    S.now = 1000 * SEC;
    memset(&c, 0, sizeof c);
    c.disc.node_name = "n8";
    c.disc.fake = "2:H100";
    c.disc.no_hwloc = true;
    c.exec.log_dir = logs;
    c.exec.supervisor = ARB_BIN;
    c.exec.leased = true;
    c.exec.allow_root = true;
    c.exec.cgroup_mode = "none";
    c.transport = &scripted;
    c.now = fake_now;
    c.now_ctx = &S;
    c.log = quiet;
    c.lease_ns = 10 * SEC;
    assert_int_equal(agent_open(&a, &c, &err), 0);
    S.reply = "{\"lamport\":4000000000,\"epoch\":1,\"assignments\":[]}";
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(a.lease.state, AGENT_LEASE_ACTIVE);
    assert_int_equal(a.clock.t, 4000000001ULL);
    S.now += SEC;
    S.refuse_lamport = 77;
    assert_int_equal(agent_step(&a, &err), 0);
    assert_int_equal(a.clock.t, 77);                     /* the controller's time taken */
    assert_int_equal(a.lease.state, AGENT_LEASE_ACTIVE); /* nothing else moved */
    assert_true(a.urgent);
    S.reply = "{\"lamport\":80,\"epoch\":1,\"assignments\":[]}";
    assert_int_equal(agent_step(&a, &err), 0);
    assert_non_null(strstr(S.last, "\"lamport\":78"));
    assert_non_null(strstr(S.last, "\"inventory\"")); /* registered again */
    assert_int_equal(a.lease.state, AGENT_LEASE_ACTIVE);
    agent_close(&a, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deltas),        cmocka_unit_test(test_report_json),
        cmocka_unit_test(test_reply_parse),   cmocka_unit_test(test_loop),
        cmocka_unit_test(test_clock_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
