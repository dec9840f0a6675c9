/*
 * test_buf.c: the one growable buffer (src/util/buf.c): text stays
 * NUL-terminated through growth, formatted text longer than the stack
 * scratch, the ceiling and the sticky failure, take and reset, a whole
 * stream read in (past the stack chunk, and refused past the ceiling).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

static void test_grow(void **st)
{
    (void)st;
    arb_buf_t b = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(arb_buf_printf(&b, "%d,", i), 0);
    assert_false(b.oom);
    assert_int_equal(b.len, strlen(b.p));
    assert_true(strncmp(b.p, "0,1,2,", 6) == 0);
    assert_non_null(strstr(b.p, ",999,"));
    assert_true(b.cap > b.len);
    arb_buf_free(&b);
    assert_null(b.p);
}

static void test_long_printf(void **st)
{
    (void)st;
    arb_buf_t b = {0};
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(arb_buf_puts(&b, "<"), 0);
    assert_int_equal(arb_buf_printf(&b, "%s>", big), 0);
    assert_int_equal(b.len, 1 + 999 + 1);
    assert_int_equal(b.p[0], '<');
    assert_int_equal(b.p[1000], '>');
    assert_int_equal(b.p[1001], '\0');
    arb_buf_free(&b);
}

static void test_max_sticky(void **st)
{
    (void)st;
    arb_buf_t b = {.max = 10};
    assert_int_equal(arb_buf_puts(&b, "0123456789"), 0); /* exactly max */
    assert_int_equal(arb_buf_putc(&b, 'x'), -1);         /* one past */
    assert_true(b.oom);
    assert_int_equal(b.len, 10);
    assert_int_equal(arb_buf_puts(&b, ""), -1); /* sticky, even for nothing */
    assert_null(arb_buf_take(&b));
    assert_int_equal(b.max, 10); /* the ceiling survives */
    assert_false(b.oom);
    arb_buf_reset(&b);
    assert_int_equal(arb_buf_puts(&b, "ok"), 0);
    assert_string_equal(b.p, "ok");
    arb_buf_free(&b);
}

static void test_take_reset_cb(void **st)
{
    (void)st;
    arb_buf_t b = {0};
    char *s = arb_buf_take(&b); /* nothing added: "" */
    assert_string_equal(s, "");
    free(s);
    assert_int_equal(arb_buf_write_cb("abc", 1, 3, &b), 3);
    assert_int_equal(arb_buf_write_cb("de", 2, 1, &b), 2);
    assert_string_equal(b.p, "abcde");
    arb_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.p, "");
    b.max = 4;
    assert_int_equal(arb_buf_write_cb("abcde", 1, 5, &b), 0); /* curl: a write error */
    s = arb_buf_take(&b);
    assert_null(s);
    arb_buf_free(&b);
}

static void test_read(void **st)
{
    (void)st;
    FILE *f = tmpfile();
    assert_non_null(f);
    for (int i = 0; i < 30000; i++) /* 200,000 bytes: several of the reader's chunks */
        fprintf(f, "%06d\n", i);
    rewind(f);
    arb_buf_t b = {0};
    assert_int_equal(arb_buf_puts(&b, ">"), 0);
    assert_int_equal(arb_buf_read(&b, f), 0);
    assert_int_equal(b.len, 1 + 30000 * 7);
    assert_int_equal(b.p[b.len], '\0');
    assert_true(strncmp(b.p, ">000000\n000001\n", 15) == 0);
    assert_non_null(strstr(b.p, "029999\n"));
    arb_buf_free(&b);

    arb_buf_t r = {0}; /* room made, nothing added: still text */
    assert_int_equal(arb_buf_reserve(&r, 100), 0);
    char *t = arb_buf_take(&r);
    assert_string_equal(t, "");
    free(t);

    rewind(f);
    arb_buf_t small = {.max = 100000};
    assert_int_equal(arb_buf_read(&small, f), -EFBIG);
    assert_true(small.oom);
    assert_null(arb_buf_take(&small));
    fclose(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read),          cmocka_unit_test(test_grow),
        cmocka_unit_test(test_long_printf),   cmocka_unit_test(test_max_sticky),
        cmocka_unit_test(test_take_reset_cb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
