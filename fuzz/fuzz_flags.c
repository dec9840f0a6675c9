/*
 * fuzz_flags.c: libFuzzer target for the verbs' flag parser (src/cli/flags.c).
 *
 * The input is a command line, one argument per line (so arguments may hold
 * spaces and "=" freely), parsed by a table with every kind of value.
 * Checked: no crash or sanitizer report; every value within its range; the result is 0, 1 (help) or
 * -EINVAL with a message; on success the positionals are argv's own strings
 * and fit in argv, every list within its bound; the usage prints.
 */
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
    FL_OPT(opts_t, all, "--all", "-a", FL_BOOL, NULL, "every job"),
    FL_OPT(opts_t, queue, "--queue", "-q", FL_STR, "Q", "one queue"),
    FL_OPT(opts_t, count, "--count", NULL, FL_INT, "N", "how many", .def = "3", .min = 1,
           .max = 100),
    FL_OPT(opts_t, every, "--every", NULL, FL_DURATION, "D", "how often", .def = "2s"),
    FL_OPT(opts_t, mem, "--mem", NULL, FL_QTY, "M", "memory", .qty = ARB_QTY_MIB),
    FL_OPT(opts_t, out, NULL, "-o", FL_CHOICE, NULL, "output", .def = "text",
           .choices = "text|json|csv"),
    FL_OPT(opts_t, hosts, "--host", NULL, FL_LIST, "NAME", "a name (repeat)"),
    FL_OPT(opts_t, small, "--small", NULL, FL_I32, "N", "an int", .min = 0, .max = 7),
    FL_OPT(opts_t, ratio, "--ratio", NULL, FL_NUM, "F", "a fraction", .min = 0, .max = 1),
    FL_END,
};

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_flags: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), *copy[258], *argv[258];
    int argc = 1;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    argv[0] = (char *)"fuzz";
    for (char *p = buf; argc < 256;) {
        argv[argc++] = p;
        char *nl = memchr(p, '\n', (size_t)(buf + size - p));
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    argv[argc] = NULL;
    memcpy(copy, argv, sizeof argv);
    for (int stop = 0; stop < 2; stop++) {
        fl_verb_t v = {.name = "fuzz",
                       .args = "[NAME...]",
                       .flags = flags,
                       .min_pos = 0,
                       .max_pos = stop ? -1 : 4,
                       .stop_at_pos = stop};
        opts_t o = {0};
        fl_args_t a;
        arb_err_t err = {{0}};
        memcpy(argv, copy, sizeof argv);
        int rc = fl_parse(&v, argc, argv, &o, &a, &err);
        check(rc == 0 || rc == 1 || rc == -EINVAL, "unexpected return");
        if (rc == -EINVAL)
            check(err.msg[0] != '\0', "an error without a message");
        if (rc == 0) {
            check(a.npos >= 0 && a.npos < argc, "too many positionals");
            for (int i = 0; i < a.npos; i++) {
                bool own = false;
                for (int k = 1; k < argc; k++)
                    own |= a.pos[i] == copy[k];
                check(own, "a positional that is not one of argv's strings");
            }
            check(o.hosts.n >= 0 && o.hosts.n <= FL_LIST_MAX, "a list past its bound");
            check(o.count >= 1 && o.count <= 100, "--count outside its range");
            check(o.out >= 0 && o.out <= 2, "-o outside its choices");
            check(o.small >= 0 && o.small <= 7, "--small outside its range");
            check(o.ratio >= 0 && o.ratio <= 1, "--ratio outside its range");
            check(!a.rest || (a.rest >= argv && a.rest + a.nrest <= argv + argc),
                  "rest outside argv");
        }
    }
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        fl_verb_t v = {.name = "fuzz", .flags = flags, .max_pos = -1};
        fl_usage(&v, null);
        fclose(null);
    }
    free(buf);
    return 0;
}
