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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queues),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
