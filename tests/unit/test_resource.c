/* test_resource.c: resource-vector arithmetic and the extended-name table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "arbiter/resource.h"

static void test_add_sub_fits(void **st)
{
    arb_res_t a = {.gpu_milli = 8000, .cpu_milli = 64000, .mem_bytes = 1LL << 38};
    arb_res_t b = {.gpu_milli = 500, .cpu_milli = 4000, .mem_bytes = 1LL << 30, .ext = {2}};
    arb_res_t c = a;

    assert_false(arb_res_fits(&b, &a)); /* ext[0] missing on a */
    a.ext[0] = 2;
    assert_true(arb_res_fits(&b, &a));
    arb_res_sub(&a, &b);
    assert_int_equal(a.gpu_milli, 7500);
    assert_int_equal(a.ext[0], 0);
    arb_res_add(&a, &b);
    c.ext[0] = 2;
    assert_memory_equal(&a, &c, sizeof a);
    memset(&c, 0, sizeof c);
    assert_true(arb_res_is_zero(&c));
    assert_false(arb_res_is_zero(&a));
}

static void test_extnames(void **st)
{
    arb_extnames_t t = {0};
    assert_int_equal(arb_extnames_index(&t, "rdma/hca", false), -ENOENT);
    assert_int_equal(arb_extnames_index(&t, "rdma/hca", true), 0);
    assert_int_equal(arb_extnames_index(&t, "fpga", true), 1);
    assert_int_equal(arb_extnames_index(&t, "rdma/hca", true), 0);
    for (int i = 2; i < ARB_MAX_EXT; i++) {
        char n[16];
        snprintf(n, sizeof n, "x%d", i);
        assert_int_equal(arb_extnames_index(&t, n, true), i);
    }
    assert_int_equal(arb_extnames_index(&t, "one-too-many", true), -ENOSPC);
}

static void test_errf(void **st)
{
    arb_err_t e;
    assert_int_equal(arb_errf(&e, -EINVAL, "memory '%s': unknown unit", "256Gx"), -EINVAL);
    arb_err_prefix(&e, "job.yaml:%d:%d: ", 7, 3);
    assert_string_equal(e.msg, "job.yaml:7:3: memory '256Gx': unknown unit");
    assert_int_equal(arb_errf(NULL, -ENOMEM, "x"), -ENOMEM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_sub_fits),
        cmocka_unit_test(test_extnames),
        cmocka_unit_test(test_errf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
