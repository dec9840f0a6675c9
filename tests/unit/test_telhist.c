/*
 * test_telhist.c: a node's telemetry history (src/state/telhist.c), the
 * console's charts: one sample kept per 5 s of reports, at most 60 (the
 * oldest dropped first), written oldest first with their ages; values as
 * reported, what a report left out as null; a new GPU count starts anew.
 * Read through the state's view and src/api's encoder, as the API does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "api/api_int.h"
#include "state/state_int.h"

#define S (1000000000LL)

/* The history as GET /v1/nodes/{name}/telemetry writes it (the state's
 * view, src/api's encoder), without the node's name. */
static json_t *st_telhist_json(const st_node_t *x, int64_t now)
{
    st_telemetry_view_t v;
    assert_int_equal(st_telhist_view(x, now, &v), 0);
    json_t *o = api_telemetry_json(&v);
    st_telemetry_view_free(&v);
    return o;
}

static json_t *tel(int cpu_pct, int util, int temp)
{
    return json_pack("{s:f,s:s,s:f,s:[{s:i,s:i,s:i,s:i,s:b},{s:i,s:b}]}", "cpu_util",
                     cpu_pct / 100.0, "memory_used", "2Gi", "net_rx_bps", 1e6, "gpus", "index", 0,
                     "util", util, "temp_c", temp, "memory_used_mib", 1000, "healthy", 1, "index",
                     1, "healthy", 0);
}

static void test_sampling_and_ring(void **unused)
{
    st_node_t x;
    (void)unused;
    memset(&x, 0, sizeof x);
    /* every 1 s for 400 s: one sample per 5 s kept, the last 60 */
    for (int t = 0; t <= 400; t++) {
        json_t *v = tel(t % 100, t % 101, 40);
        st_telhist_note(&x, 2, v, (int64_t)t * S);
        json_decref(v);
    }
    json_t *o = st_telhist_json(&x, 400 * S);
    json_t *smp = json_object_get(o, "samples");
    assert_int_equal(json_array_size(smp), 60);
    assert_int_equal(json_integer_value(json_object_get(o, "capacity")), 60);
    assert_true(json_real_value(json_object_get(o, "interval_s")) == 5.0);
    /* oldest first: t = 105, 110, ..., 400 */
    for (size_t i = 0; i < 60; i++) {
        json_t *e = json_array_get(smp, i);
        double age = json_real_value(json_object_get(e, "age_s"));
        assert_true(age == (double)(400 - (105 + 5 * (int)i)));
        int t = 105 + 5 * (int)i;
        json_t *g0 = json_array_get(json_object_get(e, "gpus"), 0);
        assert_int_equal(json_integer_value(json_object_get(g0, "util")), t % 101);
    }
    json_t *last = json_array_get(smp, 59);
    assert_true(fabs(json_real_value(json_object_get(last, "cpu_util")) - 0.0) <
                1e-6); /* 400 % 100 */
    assert_true(json_real_value(json_object_get(last, "memory_used_bytes")) == 2147483648.0);
    assert_true(json_real_value(json_object_get(last, "net_rx_bps")) == 1e6);
    /* not reported: null */
    assert_true(json_is_null(json_object_get(last, "net_tx_bps")));
    assert_true(json_is_null(json_object_get(last, "disk_read_bps")));
    json_t *g0 = json_array_get(json_object_get(last, "gpus"), 0);
    json_t *g1 = json_array_get(json_object_get(last, "gpus"), 1);
    assert_int_equal(json_integer_value(json_object_get(g0, "temp_c")), 40);
    assert_int_equal(json_integer_value(json_object_get(g0, "memory_used_mib")), 1000);
    assert_true(json_is_true(json_object_get(g0, "healthy")));
    assert_true(json_is_null(json_object_get(g1, "util")));
    assert_true(json_is_null(json_object_get(g1, "temp_c")));
    assert_true(json_is_false(json_object_get(g1, "healthy")));
    json_decref(o);

    /* a new inventory with another GPU count: the history starts again */
    json_t *v = tel(10, 10, 30);
    st_telhist_note(&x, 4, v, 401 * S);
    json_decref(v);
    o = st_telhist_json(&x, 401 * S);
    assert_int_equal(json_array_size(json_object_get(o, "samples")), 1);
    assert_int_equal(
        json_array_size(json_object_get(json_array_get(json_object_get(o, "samples"), 0), "gpus")),
        4);
    json_decref(o);
    st_telhist_free(&x);
    assert_null(x.hist);
}

static void test_empty(void **unused)
{
    st_node_t x;
    (void)unused;
    memset(&x, 0, sizeof x);
    json_t *o = st_telhist_json(&x, 0);
    assert_int_equal(json_array_size(json_object_get(o, "samples")), 0);
    json_decref(o);
    st_telhist_note(&x, 2, NULL, 0); /* no telemetry in a report: nothing kept */
    assert_null(x.hist);
    st_telhist_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampling_and_ring),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
