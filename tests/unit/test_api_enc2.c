/* test_api_enc2.c: more of the API's encoders (src/api/enc_service.c,
 * enc_telemetry.c), as test_api_enc.c does it: the JSON clients read, byte
 * for byte, from the state's typed views built by hand (services and their
 * replicas, a load report's answer, a node's telemetry history, log
 * tickets, a report's reply and the assignments list), a balancer's load
 * report and an agent's report decoded, or refused naming the field, and the route table's rows
 * each answered one way. The same views from a live state go through HTTP in the CLI tests
 * (tests/cli/service*.sh, telemetry*.sh, logs*.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"

static void expect_json(json_t *o, const char *want)
{
    char *got = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fail_msg("got  %s\nwant %s", got, want);
    free(got);
    json_decref(o);
}

/* The assignments list's and the report reply's text as written straight
 * (api_assignments_write, api_report_reply_write), with no tree. */
static void expect_text_of(const st_report_reply_t *r, const char *want_list)
{
    arb_buf_t b = {0};
    assert_int_equal(api_assignments_write(&b, "n1", 41, 1, &r->assigned), 0);
    if (strcmp(b.p, want_list) != 0)
        fail_msg("got  %s\nwant %s", b.p, want_list);
    arb_buf_reset(&b);
    assert_int_equal(api_report_reply_write(&b, r), 0);
    json_t *o = api_report_reply_json(r);
    char *tree = json_dumps(o, JSON_COMPACT);
    assert_string_equal(b.p, tree);
    free(tree);
    json_decref(o);
    arb_buf_free(&b);
}

/* A service with a placed replica (load reported, a balancer's count), one
 * starting and one draining without a report; then autoscaled, before and
 * after its first decision. */
static void test_service(void **unused)
{
    (void)unused;
    st_replica_view_t r[3] = {
        {.index = 0,
         .job = 8,
         .state = "running",
         .ready = true,
         .node = "n1",
         .address = "10.0.0.1:9000",
         .has_load = true,
         .gpu_util = 0.5,
         .queue = 3,
         .age_ms = 120,
         .port = 9000,
         .has_inflight = true,
         .inflight = 2},
        {.index = 1, .state = "starting", .port = 9001, .restarts = 2},
        {.index = 2,
         .job = 11,
         .state = "placed",
         .draining = true,
         .node = "n2",
         .address = "n2:9002",
         .port = 9002},
    };
    st_service_view_t v = {.name = "web",
                           .job = 7,
                           .version = 4,
                           .desired = 2,
                           .min = 1,
                           .port = 9000,
                           .health = "/healthz",
                           .replicas = r,
                           .nreplicas = 3};
    const char *head =
        "{\"service\":\"web\",\"job\":7,\"version\":4,\"desired\":2,\"min\":1,\"port\":9000,"
        "\"health\":\"/healthz\",\"replicas\":[{\"index\":0,\"job\":8,\"state\":\"running\","
        "\"ready\":true,\"draining\":false,\"restarts\":0,\"node\":\"n1\",\"address\":"
        "\"10.0.0.1:9000\",\"load\":{\"gpu_util\":0.5,\"queue\":3,\"age_ms\":120},\"port\":9000,"
        "\"inflight\":2.0},{\"index\":1,\"job\":0,\"state\":\"starting\",\"ready\":false,"
        "\"draining\":false,\"restarts\":2,\"node\":null,\"address\":null,\"load\":null,"
        "\"port\":9001,\"inflight\":null},{\"index\":2,\"job\":11,\"state\":\"placed\","
        "\"ready\":false,\"draining\":true,\"restarts\":0,\"node\":\"n2\",\"address\":"
        "\"n2:9002\",\"load\":null,\"port\":9002,\"inflight\":null}]";
    char want[4096];
    snprintf(want, sizeof want, "%s}", head);
    expect_json(api_service_json(&v), want);

    v.autoscale = true;
    v.as = (arb_as_conf_t){.min = 1,
                           .max = 4,
                           .target = 10,
                           .gpu_target = 0.75,
                           .window_ns = 30000000000LL,
                           .cooldown_ns = 10000000000LL};
    snprintf(want, sizeof want,
             "%s,\"autoscale\":{\"min\":1,\"max\":4,\"target_inflight\":10.0,"
             "\"target_gpu_util\":0.75,\"window_s\":30,\"cooldown_s\":10}}",
             head);
    expect_json(api_service_json(&v), want);
    v.has_last = true;
    v.recommended = 3;
    v.per_replica = 12.5;
    snprintf(v.last, sizeof v.last, "%s", "25 in flight over 2 ready: 12.5 a replica");
    snprintf(want, sizeof want,
             "%s,\"autoscale\":{\"min\":1,\"max\":4,\"target_inflight\":10.0,"
             "\"target_gpu_util\":0.75,\"window_s\":30,\"cooldown_s\":10,\"recommended\":3,"
             "\"per_replica\":12.5,\"last\":\"25 in flight over 2 ready: 12.5 a replica\"}}",
             head);
    expect_json(api_service_json(&v), want);

    st_service_view_t bare = {.name = "api", .job = 9, .version = 1, .port = 8000};
    st_service_list_t l = {&bare, 1};
    expect_json(api_services_json(&l),
                "{\"services\":[{\"service\":\"api\",\"job\":9,\"version\":1,\"desired\":0,"
                "\"min\":0,\"port\":8000,\"health\":\"\",\"replicas\":[]}]}");
    st_service_list_t none = {NULL, 0};
    expect_json(api_services_json(&none), "{\"services\":[]}");
    st_load_ack_t ack = {.matched = 2, .version = 5};
    expect_json(api_load_ack_json("web", &ack),
                "{\"service\":\"web\",\"matched\":2,\"version\":5}");
}

/* A balancer's load report: decoded (queue 0 when not sent), or refused
 * whole naming the entry and the field. */
static void test_load_decode(void **unused)
{
    (void)unused;
    static const struct {
        const char *body, *msg; /* msg NULL: accepted */
    } cases[] = {
        {"{\"replicas\": []}", NULL},
        {"{\"replicas\": [{\"address\": \"a:1\", \"inflight\": 2.5, \"queue\": 4}, "
         "{\"address\": \"b:2\", \"inflight\": 0}]}",
         NULL},
        {"[]", "body: give {\"replicas\": [{\"address\": \"HOST:PORT\", \"inflight\": N}]}"},
        {"{\"replicas\": {}}",
         "body: give {\"replicas\": [{\"address\": \"HOST:PORT\", \"inflight\": N}]}"},
        {"{\"replicas\": [{\"address\": \"a:1\", \"inflight\": -1}]}",
         "replicas[0]: give address (\"HOST:PORT\") and inflight (a number >= 0)"},
        {"{\"replicas\": [{\"address\": \"a:1\", \"inflight\": 1}, {\"inflight\": 1}]}",
         "replicas[1]: give address (\"HOST:PORT\") and inflight (a number >= 0)"},
        {"{\"replicas\": [{\"address\": \"a:1\", \"inflight\": 1e10}]}",
         "replicas[0]: give address (\"HOST:PORT\") and inflight (a number >= 0)"},
        {"{\"replicas\": [{\"address\": \"a:1\", \"inflight\": 1, \"queue\": \"x\"}]}",
         "replicas[0].queue: give a number >= 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *b = json_loads(cases[i].body, 0, NULL);
        st_replica_load_t *v = NULL;
        arb_err_t err = {{0}};
        int n = -1;
        assert_non_null(b);
        int rc = api_load_decode(b, &v, &n, &err);
        if (cases[i].msg) {
            assert_int_equal(rc, -EINVAL);
            assert_string_equal(err.msg, cases[i].msg);
            assert_null(v);
            assert_int_equal(n, 0);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(n, (int)json_array_size(json_object_get(b, "replicas")));
        }
        if (n == 2) {
            assert_string_equal(v[0].address, "a:1");
            assert_true(v[0].inflight == 2.5 && v[0].queue == 4);
            assert_string_equal(v[1].address, "b:2");
            assert_true(v[1].inflight == 0 && v[1].queue == 0);
        }
        free(v);
        json_decref(b);
    }
}

/* A node's telemetry: two samples of two GPUs, unknown values null; and a
 * node without history. */
static void test_telemetry(void **unused)
{
    (void)unused;
    st_tel_gpu_t g[4] = {
        {.has_util = true,
         .util = 87,
         .has_mem = true,
         .memory_used_mib = 1000,
         .has_temp = true,
         .temp_c = -3,
         .healthy = true},
        {.healthy = false},
        {.has_util = true, .util = 0, .healthy = true},
        {.has_temp = true, .temp_c = 61, .healthy = true},
    };
    st_tel_sample_t smp[2] = {
        {.age_s = 5.0,
         .cpu_util = 0.25,
         .memory_used_bytes = 2147483648.0,
         .net_rx_bps = 1e6,
         .net_tx_bps = -1,
         .disk_read_bps = -1,
         .disk_write_bps = 0,
         .gpus = &g[0]},
        {.age_s = 0.0,
         .cpu_util = -1,
         .memory_used_bytes = -1,
         .net_rx_bps = -1,
         .net_tx_bps = -1,
         .disk_read_bps = -1,
         .disk_write_bps = -1,
         .gpus = &g[2]},
    };
    st_telemetry_view_t v = {.node = "n1",
                             .interval_s = 5.0,
                             .capacity = 60,
                             .ngpus = 2,
                             .samples = smp,
                             .nsamples = 2,
                             .gpus = g};
    expect_json(api_telemetry_json(&v),
                "{\"interval_s\":5.0,\"capacity\":60,\"samples\":[{\"age_s\":5.0,\"cpu_util\":"
                "0.25,\"memory_used_bytes\":2147483648.0,\"net_rx_bps\":1000000.0,\"net_tx_bps\":"
                "null,\"disk_read_bps\":null,\"disk_write_bps\":0.0,\"gpus\":[{\"util\":87,"
                "\"memory_used_mib\":1000,\"temp_c\":-3,\"healthy\":true},{\"util\":null,"
                "\"memory_used_mib\":null,\"temp_c\":null,\"healthy\":false}]},{\"age_s\":0.0,"
                "\"cpu_util\":null,\"memory_used_bytes\":null,\"net_rx_bps\":null,\"net_tx_bps\":"
                "null,\"disk_read_bps\":null,\"disk_write_bps\":null,\"gpus\":[{\"util\":0,"
                "\"memory_used_mib\":null,\"temp_c\":null,\"healthy\":true},{\"util\":null,"
                "\"memory_used_mib\":null,\"temp_c\":61,\"healthy\":true}]}],\"node\":\"n1\"}");
    st_telemetry_view_t empty = {.node = "n2", .interval_s = 5.0, .capacity = 60, .ngpus = 8};
    expect_json(api_telemetry_json(&empty),
                "{\"interval_s\":5.0,\"capacity\":60,\"samples\":[],\"node\":\"n2\"}");
}

static void test_logs_ticket(void **unused)
{
    (void)unused;
    char url[] = "http://10.0.0.1:7071";
    st_logs_ticket_t v = {.job = 12,
                          .task = 1,
                          .node = "n1",
                          .logs_url = url,
                          .ticket = "0123456789abcdef0123456789abcdef",
                          .ttl_ms = 60000};
    expect_json(api_logs_ticket_json(&v),
                "{\"job\":12,\"task\":1,\"node\":\"n1\",\"logs_url\":\"http://10.0.0.1:7071\","
                "\"ticket\":\"0123456789abcdef0123456789abcdef\",\"ttl_ms\":60000}");
    expect_json(api_ticket_ok_json(59998), "{\"ok\":true,\"ttl_ms\":59998}");
}

/* The route table: every row is answered, by its handler or by a simple
 * read (routes.c's read ops), never by both; a simple read is a GET that
 * takes no body. */
/* A report's reply, applied: a task with caps, a grace, a time limit and
 * env; a gang's elastic member (its hosts, rank, master); then a replay's
 * and a lost node's; the assignments long poll's list. */
static void test_report_reply(void **unused)
{
    (void)unused;
    char *cmd[] = {"sh", "-c", "echo hi"};
    st_env_pair_t env[] = {{"A", "1"}, {"ARBITER_GPU_MEMORY_MIB", "81920"}};
    char *hosts[] = {"10.0.0.1", "n2"};
    st_assignment_t a[2] = {
        {.job = 7,
         .name = "train",
         .task = 0,
         .ntasks = 1,
         .attempt = 2,
         .epoch = 1,
         .gpus = 0x5,
         .gpu_milli = 1000,
         .command = cmd,
         .ncommand = 3,
         .env = env,
         .nenv = 2,
         .state = "running",
         .cpu = "4",
         .memory = "8Gi",
         .has_grace = true,
         .grace_s = 7,
         .has_time_limit = true,
         .time_limit_ms = 3599000},
        {.job = 9,
         .name = "el",
         .task = 1,
         .ntasks = 2,
         .attempt = 1,
         .epoch = 1,
         .gpus = 0x2,
         .gpu_milli = 500,
         .gpu_memory_mib = 20480,
         .state = "assigned",
         .stop = true,
         .elastic = true,
         .generation = 3,
         .hosts = hosts,
         .nhosts = 2,
         .gang = true,
         .rank = 1,
         .world_size = 2,
         .master_port = 23456,
         .master_addr = "10.0.0.1"},
    };
    st_report_reply_t r = {.node = "n1",
                           .lamport = 41,
                           .epoch = 1,
                           .lease_ms = 10000,
                           .kind = ST_REPORT_APPLIED,
                           .version = 3,
                           .assigned = {.v = a, .n = 2, .version = 12345}};
    const char *one =
        "{\"job\":7,\"name\":\"train\",\"task\":0,\"ntasks\":1,\"attempt\":2,\"epoch\":1,"
        "\"gpus\":[0,2],\"gpu_milli\":1000,\"gpu_memory_mib\":0,\"command\":[\"sh\",\"-c\","
        "\"echo hi\"],\"env\":{\"A\":\"1\",\"ARBITER_GPU_MEMORY_MIB\":\"81920\"},\"state\":"
        "\"running\",\"stop\":false,\"cpu\":\"4\",\"memory\":\"8Gi\",\"grace_s\":7,"
        "\"time_limit_ms\":3599000}";
    const char *two =
        "{\"job\":9,\"name\":\"el\",\"task\":1,\"ntasks\":2,\"attempt\":1,\"epoch\":1,\"gpus\":"
        "[1],\"gpu_milli\":500,\"gpu_memory_mib\":20480,\"command\":[],\"env\":{},\"state\":"
        "\"assigned\",\"stop\":true,\"elastic\":true,\"generation\":3,\"hosts\":[\"10.0.0.1\","
        "\"n2\"],\"rank\":1,\"world_size\":2,\"master_addr\":\"10.0.0.1\",\"master_port\":23456}";
    char want[2048];

    snprintf(want, sizeof want,
             "{\"node\":\"n1\",\"lamport\":41,\"epoch\":1,\"lease_ms\":10000,\"version\":3,"
             "\"assignments_version\":12345,\"assignments\":[%s,%s]}",
             one, two);
    expect_json(api_report_reply_json(&r), want);
    snprintf(want, sizeof want,
             "{\"node\":\"n1\",\"lamport\":41,\"epoch\":1,\"assignments_version\":12345,"
             "\"assignments\":[%s,%s]}",
             one, two);
    expect_json(api_assignments_json("n1", 41, 1, &r.assigned), want);
    expect_text_of(&r, want); /* the bytes the routes send, written straight */

    st_report_reply_t stale = {.node = "n1",
                               .lamport = 41,
                               .epoch = 1,
                               .lease_ms = 10000,
                               .kind = ST_REPORT_STALE,
                               .message = "a replay"};
    expect_json(api_report_reply_json(&stale),
                "{\"node\":\"n1\",\"lamport\":41,\"epoch\":1,\"lease_ms\":10000,\"stale\":true,"
                "\"message\":\"a replay\"}");
    stale.kind = ST_REPORT_LOST;
    snprintf(stale.message, sizeof stale.message, "register again");
    expect_json(api_report_reply_json(&stale),
                "{\"node\":\"n1\",\"lamport\":41,\"epoch\":1,\"lease_ms\":10000,\"lost\":true,"
                "\"message\":\"register again\"}");
    st_assign_list_t none = {.version = 1};
    expect_json(api_assignments_json("n2", 5, 2, &none),
                "{\"node\":\"n2\",\"lamport\":5,\"epoch\":2,\"assignments_version\":1,"
                "\"assignments\":[]}");
}

static int decode(const char *txt, st_report_t *r, arb_err_t *err)
{
    json_t *b = json_loads(txt, 0, NULL);
    assert_non_null(b);
    int rc = api_report_decode(b, r, err);
    json_decref(b);
    return rc;
}

/* A report decoded field for field (the inventory and telemetry kept as
 * text), nulls as absent, and refusals naming the field. */
static void test_report_decode(void **unused)
{
    (void)unused;
    st_report_t r;
    arb_err_t err = {{0}};

    assert_int_equal(
        decode("{\"lamport\": 41, \"inventory\": {\"cpu\": \"64\", \"gpus\": []},"
               " \"telemetry\": {\"cpu_util\": 0.5, \"queue_length\": 3, \"gpus\": [{\"index\": 1,"
               " \"util\": 87, \"healthy\": false}, {\"index\": 0, \"temp_c\": 61}]},"
               " \"tasks\": [{\"job\": 7, \"task\": 1, \"attempt\": 2, \"state\": \"failed\","
               " \"exit_code\": -9}, {\"job\": 8, \"task\": 0, \"state\": \"lost\","
               " \"fenced_by\": \"supervisor\", \"attempt\": null}]}",
               &r, &err),
        0);
    assert_true(r.has_lamport);
    assert_int_equal(r.lamport, 41);
    assert_string_equal(r.inventory, "{\"cpu\":\"64\",\"gpus\":[]}");
    assert_string_equal(r.telemetry,
                        "{\"cpu_util\":0.5,\"queue_length\":3,\"gpus\":[{\"index\":1,"
                        "\"util\":87,\"healthy\":false},{\"index\":0,\"temp_c\":61}]}");
    assert_true(r.has_queue_length);
    assert_int_equal(r.queue_length, 3);
    assert_int_equal(r.ngpus, 2);
    assert_int_equal(r.gpus[0].index, 1);
    assert_true(r.gpus[0].has_util && r.gpus[0].has_healthy && !r.gpus[0].has_temp);
    assert_int_equal(r.gpus[0].util, 87);
    assert_false(r.gpus[0].healthy);
    assert_true(r.gpus[1].has_temp && !r.gpus[1].has_util && !r.gpus[1].has_healthy);
    assert_int_equal(r.gpus[1].temp_c, 61);
    assert_true(r.has_tasks);
    assert_int_equal(r.ntasks, 2);
    assert_int_equal(r.tasks[0].job, 7);
    assert_int_equal(r.tasks[0].task, 1);
    assert_true(r.tasks[0].has_attempt);
    assert_int_equal(r.tasks[0].attempt, 2);
    assert_int_equal(r.tasks[0].state, ST_RT_FAILED);
    assert_true(r.tasks[0].has_exit);
    assert_int_equal(r.tasks[0].exit_code, -9);
    assert_int_equal(r.tasks[0].fenced_by, ST_FENCED_NONE);
    assert_int_equal(r.tasks[1].state, ST_RT_LOST);
    assert_int_equal(r.tasks[1].fenced_by, ST_FENCED_SUPERVISOR);
    assert_true(r.tasks[1].has_attempt); /* null: attempt 0, as the state always took it */
    assert_int_equal(r.tasks[1].attempt, 0);
    assert_false(r.tasks[1].has_exit);
    api_report_free(&r);

    /* nulls are as if absent; an empty body is a heartbeat */
    assert_int_equal(decode("{\"lamport\": null, \"inventory\": null, \"telemetry\": null,"
                            " \"tasks\": null}",
                            &r, &err),
                     0);
    assert_false(r.has_lamport || r.has_tasks || r.has_queue_length);
    assert_null(r.inventory);
    assert_null(r.telemetry);
    api_report_free(&r);
    assert_int_equal(decode("{}", &r, &err), 0);
    assert_false(r.has_tasks);
    api_report_free(&r);

    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"[1]", "expected an object"},
        {"{\"foo\": 1}", "foo"},
        {"{\"lamport\": \"x\"}", "lamport: expected an integer"},
        {"{\"inventory\": []}", "inventory: expected an object"},
        {"{\"telemetry\": {\"cpu_util\": 2}}", "telemetry.cpu_util"},
        {"{\"telemetry\": {\"gpus\": [{\"util\": 3}]}}", "telemetry.gpus[0].index: required"},
        {"{\"tasks\": [{\"job\": 1}]}", "tasks[0]: job, task and state are required"},
        {"{\"tasks\": [{\"job\": 1, \"task\": 0, \"state\": \"zzz\"}]}", "tasks[0].state: 'zzz'"},
        {"{\"tasks\": [{\"job\": 1, \"task\": 0, \"state\": \"lost\", \"fenced_by\": \"x\"}]}",
         "tasks[0].fenced_by: 'x'; use agent or supervisor"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(decode(bad[i].body, &r, &err), -EINVAL);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("%s: got '%s', want '%s'", bad[i].body, err.msg, bad[i].msg);
        assert_null(r.tasks);
        assert_null(r.gpus);
        assert_null(r.telemetry);
    }
}

static void test_route_rows(void **unused)
{
    (void)unused;
    int simple = 0;
    for (const api_route_t *rt = api_routes; rt->method; rt++) {
        if (!rt->fn && API_ROUTE_READ(rt) == API_READ_NONE)
            fail_msg("%s %s: neither a handler nor a read", rt->method, rt->path);
        if (rt->fn && API_ROUTE_READ(rt) != API_READ_NONE)
            fail_msg("%s %s: a handler and a read", rt->method, rt->path);
        if (!rt->fn) {
            simple++;
            assert_string_equal(rt->method, "GET");
            assert_int_equal(rt->body, API_BODY_NONE);
        }
    }
    assert_int_equal(simple, 6); /* nodes, node, telemetry, queues, classes, services */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_service),       cmocka_unit_test(test_load_decode),
        cmocka_unit_test(test_telemetry),     cmocka_unit_test(test_logs_ticket),
        cmocka_unit_test(test_route_rows),    cmocka_unit_test(test_report_reply),
        cmocka_unit_test(test_report_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
