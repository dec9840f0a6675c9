/*
 * test_duration.c: the one duration grammar (src/util/duration.c) and that
 * every loader reads it the same: a value accepted in the controller config
 * is accepted in a scenario and a service spec, and means the same there
 * (issue 18: "starvation: 500ms" was accepted by the config and refused by
 * scenarios, "1d" only by scenarios).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "spec/scenario.h"
#include "state/state.h"
#include "util/duration.h"

#define S 1000000000LL

static void test_grammar(void **st)
{
    static const struct {
        const char *in;
        int64_t ns;
    } good[] = {
        {"0", 0},
        {"3600", 3600 * S},
        {"500ms", 500000000LL},
        {"90s", 90 * S},
        {"1h30m", 5400 * S},
        {"1d", 86400 * S},
        {"2.5h", 9000 * S},
        {"0.1s", 100000000LL},
        {"1m30s500ms", 90500000000LL},
        {"30m1h", 5400 * S},
        {"250us", 250000},
        {"7ns", 7},
        {"1.000000000000000000001s", S},
        {"36600d", 36600LL * 86400 * S},
    };
    static const struct {
        const char *in;
        int rc;
        const char *says;
    } bad[] = {
        {"", -EINVAL, "empty duration"},
        {"s", -EINVAL, "not a duration"},
        {"1x", -EINVAL, "not a duration"},
        {"-5s", -EINVAL, "not a duration"},
        {"1.5", -EINVAL, "not a duration"}, /* bare seconds are whole */
        {"10 s", -EINVAL, "not a duration"},
        {"1h30", -EINVAL, "not a duration"}, /* a bare number only alone */
        {".5s", -EINVAL, "not a duration"},
        {"1.s", -EINVAL, "not a duration"},
        {"36601d", -ERANGE, "100 years"},
        {"99999999999999999999s", -ERANGE, "100 years"},
        {"36000d36000d", -ERANGE, "100 years"},
    };
    (void)st;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        int64_t ns = -1;
        arb_err_t err = {{0}};
        if (arb_duration_parse(good[i].in, &ns, &err) != 0 || ns != good[i].ns)
            fail_msg("'%s': got %lld (%s), want %lld", good[i].in, (long long)ns, err.msg,
                     (long long)good[i].ns);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int64_t ns = 12345;
        arb_err_t err = {{0}};
        int rc = arb_duration_parse(bad[i].in, &ns, &err);
        if (rc != bad[i].rc || !strstr(err.msg, bad[i].says) || ns != 12345)
            fail_msg("'%s': rc %d, '%s'", bad[i].in, rc, err.msg);
        if (bad[i].in[0] && !strstr(err.msg, bad[i].in))
            fail_msg("'%s': the message does not quote the value: %s", bad[i].in, err.msg);
    }
}

/* The same text in the config's scheduler section and a scenario's. */
static void test_loaders_agree(void **st)
{
    static const char *const values[] = {"500ms", "1d", "90", "1h30m", "2.5h"};
    (void)st;
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        char buf[256];
        arb_err_t err = {{0}};
        st_conf_t c;
        spec_scenario_t s;
        int64_t want;

        assert_int_equal(arb_duration_parse(values[i], &want, NULL), 0);
        st_conf_init(&c);
        int n = snprintf(buf, sizeof buf, "scheduler: {starvation: %s}\n", values[i]);
        if (st_conf_load_mem("config.yaml", buf, (size_t)n, &c, &err) != 0)
            fail_msg("config: %s: %s", values[i], err.msg);
        assert_int_equal(c.starvation_ns, want);
        st_conf_free(&c);

        n = snprintf(buf, sizeof buf,
                     "scheduler: {starvation: %s}\nnodes: [{name: a, gpus: {count: 1, memory: "
                     "80Gi}}]\njobs: []\n",
                     values[i]);
        if (spec_scenario_load_mem("s.yaml", buf, (size_t)n, &s, &err) != 0)
            fail_msg("scenario: %s: %s", values[i], err.msg);
        assert_int_equal(s.starvation_ns, want);
        spec_scenario_free(&s);
    }
    /* a field counted in whole seconds says so, naming the field */
    spec_scenario_t s;
    arb_err_t err = {{0}};
    const char *y =
        "nodes: [{name: a, gpus: {count: 1, memory: 80Gi}}]\njobs: [{name: j, timeLimit: 1500ms,\n"
        "  resources: {requests: {cpu: 1}}}]\n";
    assert_int_not_equal(spec_scenario_load_mem("s.yaml", y, strlen(y), &s, &err), 0);
    assert_non_null(strstr(err.msg, "timeLimit"));
    assert_non_null(strstr(err.msg, "whole seconds"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grammar),
        cmocka_unit_test(test_loaders_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
