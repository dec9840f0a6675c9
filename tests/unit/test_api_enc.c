/* test_api_enc.c: the API's encoders (src/api/enc_*.c) give the JSON that
 * clients read, byte for byte, from the state's typed views built by hand:
 * field order, number forms, optional fields present only when set. The
 * same views from a live state are checked through HTTP in test_api_http
 * and the CLI tests. */
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

static void test_queues(void **unused)
{
    (void)unused;
    st_queue_view_t v[2] = {
        {.name = "team-a",
         .cohort = "research",
         .used = {.gpu_milli = 1500, .cpu_milli = 1500, .mem_bytes = 3LL << 30},
         .pending = 2,
         .running = 1,
         .weight = 1.0,
         .dominant_share = 0.25,
         .has_quota = true,
         .nominal = {.gpu_milli = 4000, .cpu_milli = 8000, .mem_bytes = 64LL << 30}},
        {.name = "solo", .weight = 2.5},
    };
    st_queue_list_t l = {v, 2};
    expect_json(api_queues_json(&l),
                "{\"queues\":[{\"name\":\"team-a\",\"used\":{\"nvidia.com/gpu\":1.5,\"cpu\":"
                "\"1500m\",\"memory\":\"3Gi\"},\"pending\":2,\"running\":1,\"weight\":1.0,"
                "\"dominant_share\":0.25,\"cohort\":\"research\",\"nominal\":{\"nvidia.com/"
                "gpu\":4.0,\"cpu\":\"8\",\"memory\":\"64Gi\"},\"borrowing_limit\":{\"nvidia.com/"
                "gpu\":0.0,\"cpu\":\"0\",\"memory\":\"0\"}},{\"name\":\"solo\",\"used\":{"
                "\"nvidia.com/gpu\":0.0,\"cpu\":\"0\",\"memory\":\"0\"},\"pending\":0,\"running\":"
                "0,\"weight\":2.5,\"dominant_share\":0.0}]}");
    st_queue_list_t none = {NULL, 0};
    expect_json(api_queues_json(&none), "{\"queues\":[]}");
}

static void test_status(void **unused)
{
    (void)unused;
    st_status_t v = {
        .lamport = 1ULL << 61, .epoch = 3, .revision = 40, .jobs = 7, .active_jobs = 2, .nodes = 1};
    expect_json(api_status_json(&v),
                "{\"lamport\":2305843009213693952,\"epoch\":3,\"revision\":40,\"jobs\":7,"
                "\"active_jobs\":2,\"nodes\":1}");
}

/* The priority classes: preemptible only where the class sets it. */
static void test_prio_classes(void **unused)
{
    (void)unused;
    spec_prio_class_t v[2] = {{.value = 1000, .preemptible = -1}, {.value = -5, .preemptible = 1}};
    snprintf(v[0].name, sizeof v[0].name, "%s", "high");
    snprintf(v[0].description, sizeof v[0].description, "%s", "trains \"first\"");
    snprintf(v[1].name, sizeof v[1].name, "%s", "scavenger");
    st_prio_list_t l = {.v = v, .n = 2};
    expect_json(api_prio_classes_json(&l),
                "{\"priorityClasses\":[{\"name\":\"high\",\"value\":1000,\"description\":"
                "\"trains \\\"first\\\"\"},{\"name\":\"scavenger\",\"value\":-5,"
                "\"description\":\"\",\"preemptible\":true}]}");
    st_prio_list_t none = {0};
    expect_json(api_prio_classes_json(&none), "{\"priorityClasses\":[]}");
}

/* A node's three forms: in the list (no topology, telemetry, inventory),
 * alone (full, with what runs there), and a node operation's reply. */
static void test_node(void **unused)
{
    (void)unused;
    uint64_t jobs[] = {7, 9};
    st_gpu_view_t g[2] = {
        {.model = "H100",
         .index = 0,
         .memory_mib = 81920,
         .used_milli = 1000,
         .nvlink = 0,
         .pcie = 1,
         .numa = -1,
         .util = 87,
         .temp_c = 61,
         .healthy = true,
         .jobs = jobs,
         .njobs = 2},
        {.model = "H100", .index = 1, .memory_mib = 81920, .nvlink = -1, .pcie = -1, .numa = -1},
    };
    st_label_view_t lb[1] = {{"zone", "a"}};
    st_taint_view_t tn[1] = {{"k", "", "NoSchedule"}};
    const char *ds[1] = {"imagenet"};
    st_node_view_t v = {.name = "n1",
                        .state = "Draining",
                        .version = 3,
                        .gpus = g,
                        .ngpus = 2,
                        .cap = {.gpu_milli = 2000, .cpu_milli = 64000, .mem_bytes = 512LL << 30},
                        .used = {.gpu_milli = 1500, .cpu_milli = 1500, .mem_bytes = 3LL << 30},
                        .tasks = 2,
                        .labels = lb,
                        .nlabels = 1,
                        .taints = tn,
                        .ntaints = 1,
                        .datasets = ds,
                        .ndatasets = 1,
                        .reason = "cordoned by root: disk",
                        .reported = true,
                        .report_age_s = 0.5,
                        .last_report = "2026-12-01T20:52:13.840Z",
                        .report_lamport = 41};
    const char *list =
        "{\"name\":\"n1\",\"state\":\"Draining\",\"version\":3,\"gpus\":[{\"index\":0,"
        "\"model\":\"H100\",\"memory_mib\":81920,\"used_milli\":1000,\"nvlink\":0,"
        "\"pcie\":1,\"numa\":-1,\"util\":87,\"temp_c\":61,\"healthy\":true,\"jobs\":[7,"
        "9]},{\"index\":1,\"model\":\"H100\",\"memory_mib\":81920,\"used_milli\":0,"
        "\"nvlink\":-1,\"pcie\":-1,\"numa\":-1,\"util\":0,\"temp_c\":0,\"healthy\":"
        "false,\"jobs\":[]}],\"capacity\":{\"gpus\":2,\"cpu\":\"64\",\"memory\":"
        "\"512Gi\"},\"allocated\":{\"gpus\":1.5,\"cpu\":\"1500m\",\"memory\":\"3Gi\"},"
        "\"tasks\":2,\"labels\":{\"zone\":\"a\"},\"taints\":[{\"key\":\"k\",\"value\":"
        "\"\",\"effect\":\"NoSchedule\"}],\"datasets\":[\"imagenet\"],\"schedulable\":"
        "false,\"reason\":\"cordoned by root: disk\",\"report_age_s\":0.5,"
        "\"last_report\":\"2026-12-01T20:52:13.840Z\",\"report_lamport\":41";
    char want[4096];
    snprintf(want, sizeof want, "%s}", list);
    expect_json(api_node_json(&v), want);
    st_node_list_t l = {&v, 1};
    snprintf(want, sizeof want, "{\"nodes\":[%s}]}", list);
    expect_json(api_nodes_json(&l), want);
    v.has_evicted = true;
    v.evicted = 2;
    snprintf(want, sizeof want, "%s,\"evicted\":2}", list);
    expect_json(api_node_json(&v), want);

    /* alone: topology (null where unknown), operator, telemetry and
     * inventory as kept, what runs there; never reported, lost */
    char op[] = "{\"labels\":{\"rack\":\"r1\"}}", tel[] = "{\"cpu_util\":0.25}",
         inv[] = "{\"cpu\":\"64\",\"memory\":\"512Gi\"}";
    st_task_here_t here[1] = {
        {.job = 7, .name = "train", .task = 0, .attempt = 2, .state = "running", .gpu_mask = 5}};
    st_node_view_t w = {.name = "n2",
                        .state = "Lost",
                        .version = 1,
                        .lost = true,
                        .reason = "no report for longer than the lease",
                        .full = true,
                        .rack = "r1",
                        .op_json = op,
                        .telemetry_json = tel,
                        .inventory_json = inv,
                        .detail = true,
                        .stale_reports = 4,
                        .running = here,
                        .nrunning = 1};
    expect_json(api_node_json(&w),
                "{\"name\":\"n2\",\"state\":\"Lost\",\"version\":1,\"gpus\":[],\"capacity\":{"
                "\"gpus\":0,\"cpu\":\"0\",\"memory\":\"0\"},\"allocated\":{\"gpus\":0.0,\"cpu\":"
                "\"0\",\"memory\":\"0\"},\"tasks\":0,\"labels\":{},\"taints\":[],\"datasets\":[],"
                "\"schedulable\":false,\"reason\":\"no report for longer than the lease\","
                "\"topology\":{\"rack\":\"r1\",\"block\":null,\"zone\":null},\"operator\":{"
                "\"labels\":{\"rack\":\"r1\"}},\"lost\":true,\"report_age_s\":null,"
                "\"telemetry\":{\"cpu_util\":0.25},\"inventory\":{\"cpu\":\"64\",\"memory\":"
                "\"512Gi\"},\"stale_reports\":4,\"running\":[{\"job\":7,\"name\":\"train\","
                "\"task\":0,\"attempt\":2,\"state\":\"running\",\"gpus\":[0,2],\"stopping\":"
                "false}]}");
}

/* The event log: job and node only where the event has them; an empty
 * page keeps its cursor. */
static void test_events(void **unused)
{
    (void)unused;
    char m0[] = "job 7 'train' placed on n1 \"now\"", m1[] = "node 'n1' registered";
    st_event_view_t v[2] = {
        {.lamport = 41,
         .time = "2026-12-01T20:52:13.840Z",
         .type = "job-placed",
         .message = m0,
         .job = 7},
        {.lamport = 42,
         .time = "2026-12-01T20:52:14.001Z",
         .type = "node-registered",
         .message = m1,
         .node = "n1"},
    };
    st_event_list_t l = {.v = v, .n = 2, .last = 42, .oldest = 3};
    expect_json(api_events_json(&l),
                "{\"events\":[{\"lamport\":41,\"time\":\"2026-12-01T20:52:13.840Z\",\"type\":"
                "\"job-placed\",\"message\":\"job 7 'train' placed on n1 \\\"now\\\"\",\"job\":7},"
                "{\"lamport\":42,\"time\":\"2026-12-01T20:52:14.001Z\",\"type\":"
                "\"node-registered\",\"message\":\"node 'n1' registered\",\"node\":\"n1\"}],"
                "\"last\":42,\"oldest\":3,\"truncated\":false}");
    st_event_list_t none = {.last = 9, .oldest = 12, .truncated = true};
    expect_json(api_events_json(&none),
                "{\"events\":[],\"last\":9,\"oldest\":12,\"truncated\":true}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queues),       cmocka_unit_test(test_status),
        cmocka_unit_test(test_prio_classes), cmocka_unit_test(test_node),
        cmocka_unit_test(test_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
