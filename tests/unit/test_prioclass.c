/* test_prioclass.c: priorityClassName resolved through a caller's table
 * (spec_job_from_node_classes): the class's value, its preemptible default
 * and the spec's own preemptible winning over it, the built-ins without a
 * table, and an unknown name refused with the table listed. The config side
 * (priorityClasses: in the controller's YAML) is tested end to end in
 * tests/cli/prioclass.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <libfyaml.h>
#include <string.h>

#include "arbiter/cluster.h"
#include "arbiter/job.h"
#include "spec/scenario.h"

static const spec_prio_class_t classes[] = {
    {"best-effort", 0, -1, "built-in"},
    {"production", 5000, 0, "serving"},
    {"scavenger", -10, 1, "idle GPUs"},
};
static const spec_prio_table_t table = {classes, 3};

/* Parse yaml as one job with table t: rc; the priority and preemptible on success. */
static int load(const char *yaml, const spec_prio_table_t *t, int32_t *prio, bool *preempt,
                arb_err_t *err)
{
    arb_cluster_t c;
    arb_job_t *j = NULL;
    struct fy_document *d = fy_document_build_from_string(NULL, yaml, FY_NT);
    int rc;

    assert_non_null(d);
    arb_cluster_init(&c);
    rc = spec_job_from_node_classes("job.yaml", fy_document_root(d), "", &c, t, &j, err);
    if (rc == 0) {
        *prio = j->priority;
        *preempt = j->preemptible;
        arb_job_free(j);
    }
    arb_cluster_free(&c);
    fy_document_destroy(d);
    return rc;
}

static void test_table(void **state)
{
    arb_err_t err = {{0}};
    int32_t p = 0;
    bool pre = false;

    (void)state;
    assert_int_equal(load("{name: a, priorityClassName: production}", &table, &p, &pre, &err), 0);
    assert_int_equal(p, 5000);
    assert_false(pre);
    assert_int_equal(load("{name: a, priorityClassName: scavenger}", &table, &p, &pre, &err), 0);
    assert_int_equal(p, -10);
    assert_true(pre);
    assert_int_equal(
        load("{name: a, priorityClassName: scavenger, preemptible: false}", &table, &p, &pre, &err),
        0);
    assert_false(pre); /* the spec's own word wins */
    assert_int_equal(load("{name: a, priority: 7}", &table, &p, &pre, &err), 0);
    assert_int_equal(p, 7);
}

static void test_unknown(void **state)
{
    arb_err_t err = {{0}};
    int32_t p = 0;
    bool pre = false;

    (void)state;
    /* "high" is a built-in, but this table does not define it. */
    assert_int_equal(load("{name: a, priorityClassName: high}", &table, &p, &pre, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "priorityClassName: unknown priority class 'high'; the "
                                    "defined classes are best-effort (0), production (5000), "
                                    "scavenger (-10)"));
    assert_non_null(strstr(err.msg, "job.yaml:1:"));
}

static void test_builtins(void **state)
{
    arb_err_t err = {{0}};
    int32_t p = 0;
    bool pre = false;
    spec_prio_class_t bi[16];

    (void)state;
    assert_int_equal(load("{name: a, priorityClassName: high}", NULL, &p, &pre, &err), 0);
    assert_int_equal(p, 1000);
    assert_int_equal(load("{name: a, priorityClassName: production}", NULL, &p, &pre, &err),
                     -EINVAL);
    assert_int_equal(spec_priority_builtins(bi, 16), 5);
    assert_string_equal(bi[4].name, "critical");
    assert_int_equal(bi[4].value, 10000);
    assert_int_equal(bi[4].preemptible, -1);
    assert_int_equal(spec_priority_builtins(bi, 2), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_builtins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
