/*
 * test_flags.c: the verbs' flag tables (src/cli/flags.c): every kind of
 * value parsed into its field, defaults applied, positionals gathered in
 * order, "--" and a verb's command left to it, and bad input refused with
 * a message naming the flag and the fix; the usage made from the same
 * table lists every flag with its default.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/resource.h"
#include "cli/flags.h"

typedef struct opts {
    bool all;
    const char *queue;
    long long count;
    int64_t every, mem;
    int out, small;
    double ratio;
    fl_list_t hosts;
} opts_t;

static const fl_flag_t flags[] = {
    FL_OPT(opts_t, all, "--all", NULL, FL_BOOL, NULL, "every job"),
    FL_OPT(opts_t, queue, "--queue", "-q", FL_STR, "Q", "one queue"),
    FL_OPT(opts_t, count, "--count", NULL, FL_INT, "N", "how many", .def = "3", .min = 1,
           .max = 100),
    FL_OPT(opts_t, every, "--every", NULL, FL_DURATION, "D", "how often, 1s..1h", .def = "2s",
           .min = 1000000000LL, .max = 3600LL * 1000000000LL),
    FL_OPT(opts_t, mem, "--mem", NULL, FL_QTY, "M", "memory", .qty = ARB_QTY_BYTES),
    FL_OPT(opts_t, out, NULL, "-o", FL_CHOICE, NULL, "output", .def = "text",
           .choices = "text|json"),
    FL_OPT(opts_t, hosts, "--host", NULL, FL_LIST, "NAME", "a name (repeat)"),
    FL_OPT(opts_t, small, "--small", NULL, FL_I32, "N", "an int", .min = 0, .max = 7),
    FL_OPT(opts_t, ratio, "--ratio", NULL, FL_NUM, "F", "a fraction", .min = 0, .max = 1),
    FL_END,
};
static const fl_verb_t verb = {.name = "demo",
                               .args = "NAME...",
                               .summary = "a test verb",
                               .flags = flags,
                               .min_pos = 1,
                               .max_pos = 3};

/* parse a space-separated command line; argv lives in *store */
static int parse(const char *line, opts_t *o, fl_args_t *a, arb_err_t *err, char ***store)
{
    static char buf[1024];
    static char *argv[64];
    int argc = 0;

    snprintf(buf, sizeof buf, "demo %s", line);
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t && argc < 63; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    memset(o, 0, sizeof *o);
    *store = argv;
    return fl_parse(&verb, argc, argv, o, a, err);
}

static void test_kinds(void **st)
{
    opts_t o;
    fl_args_t a;
    arb_err_t err = {{0}};
    char **argv;

    assert_int_equal(parse("x --all -q gold --count=7 --every 45m --mem 2Gi -o json --host a "
                           "y --host b z --small 7 --ratio 0.25",
                           &o, &a, &err, &argv),
                     0);
    assert_true(o.all);
    assert_string_equal(o.queue, "gold");
    assert_int_equal(o.count, 7);
    assert_int_equal(o.every, 2700LL * 1000000000LL);
    assert_int_equal(o.mem, 2LL << 30);
    assert_int_equal(o.out, 1);
    assert_int_equal(o.hosts.n, 2);
    assert_int_equal(o.small, 7);
    assert_true(o.ratio == 0.25);
    assert_string_equal(o.hosts.v[1], "b");
    assert_int_equal(a.npos, 3);
    assert_string_equal(a.pos[0], "x");
    assert_string_equal(a.pos[1], "y");
    assert_string_equal(a.pos[2], "z");
    assert_null(a.rest);
}

static void test_defaults_and_rest(void **st)
{
    opts_t o;
    fl_args_t a;
    arb_err_t err = {{0}};
    char **argv;

    assert_int_equal(parse("n -- --all x", &o, &a, &err, &argv), 0);
    assert_false(o.all); /* after "--": the caller's */
    assert_int_equal(o.count, 3);
    assert_int_equal(o.every, 2000000000LL);
    assert_int_equal(o.out, 0);
    assert_int_equal(a.npos, 1);
    assert_int_equal(a.nrest, 2);
    assert_string_equal(a.rest[0], "--all");
    assert_int_equal(parse("n --help", &o, &a, &err, &argv), 1);
    assert_int_equal(parse("-h", &o, &a, &err, &argv), 1);
}

static void test_errors(void **st)
{
    static const struct {
        const char *line, *want[3];
    } bad[] = {
        {"n --count x", {"--count", "'x'", "e.g. --count 3"}},
        {"n --count 0", {"--count", "1..100", NULL}},
        {"n --count 101", {"--count", "1..100", NULL}},
        {"n --count 99999999999999999999", {"--count", NULL, NULL}},
        {"n --every soon", {"--every", "'soon'", "500ms"}},
        {"n --every 500ms", {"--every", "out of range: how often, 1s..1h", "e.g. --every 2s"}},
        {"n --small 8", {"--small", "0..7", NULL}},
        {"n --small 1.5", {"--small", "'1.5'", NULL}},
        {"n --ratio 1.5", {"--ratio", "0..1", NULL}},
        {"n --ratio x", {"--ratio", "'x'", NULL}},
        {"n --mem lots", {"--mem", "lots", "e.g. --mem M"}},
        {"n -o yaml", {"-o", "'yaml'", "text|json"}},
        {"n --queue", {"needs a value after '--queue'", "e.g. --queue Q", NULL}},
        {"n --all=1", {"--all", "no value", NULL}},
        {"n --bogus", {"unknown option '--bogus'", NULL, NULL}},
        {"", {"give NAME...", NULL, NULL}},
        {"a b c d", {"unexpected argument 'd'", NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        opts_t o;
        fl_args_t a;
        arb_err_t err = {{0}};
        char **argv;
        int rc = parse(bad[i].line, &o, &a, &err, &argv);
        if (rc != -EINVAL)
            fail_msg("'%s': rc %d, want -EINVAL", bad[i].line, rc);
        for (int k = 0; k < 3 && bad[i].want[k]; k++)
            if (!strstr(err.msg, bad[i].want[k]))
                fail_msg("'%s': '%s' not in '%s'", bad[i].line, bad[i].want[k], err.msg);
    }
}

static void test_usage(void **st)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);

    fl_usage(&verb, f);
    fclose(f);
    assert_non_null(strstr(text, "usage: arbiter demo"));
    assert_non_null(strstr(text, "NAME..."));
    for (const fl_flag_t *x = flags; x->name || x->shortn; x++)
        assert_non_null(strstr(text, x->name ? x->name : x->shortn));
    assert_non_null(strstr(text, "-q, --queue Q"));
    assert_non_null(strstr(text, "(default 2s)"));
    assert_non_null(strstr(text, "-o text|json"));
    assert_non_null(strstr(text, "--host NAME ..."));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_defaults_and_rest),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
