/*
 * test_log.c: the one logger (src/util/log.c): the text line names the
 * daemon, its name and the subsystem; the JSON line is one object with the
 * message escaped; the level drops lines below it; a bad setting is an
 * error naming the variable and changes nothing; lines of several threads
 * never interleave.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static FILE *f;

static int setup(void **st)
{
    (void)st;
    f = tmpfile();
    arb_log_set_stream(f);
    return f ? 0 : -1;
}

static int teardown(void **st)
{
    (void)st;
    arb_log_set_stream(NULL);
    fclose(f);
    return 0;
}

/* Everything written since the last call. */
static char *drain(void)
{
    static char buf[1 << 20];
    static long at;
    fflush(f);
    fseek(f, at, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    at += (long)n;
    fseek(f, 0, SEEK_END);
    return buf;
}

static void test_text(void **st)
{
    (void)st;
    arb_err_t e = {0};
    assert_int_equal(arb_log_init("agent", "n2", &e), 0);
    assert_int_equal(arb_log_configure("info", "text", &e), 0);
    arb_log(ARB_LOG_INFO, "exec", "job %d started", 3);
    arb_log(ARB_LOG_WARN, NULL, "disk %s", "low");
    arb_log(ARB_LOG_DEBUG, "exec", "not shown");
    assert_string_equal(drain(), "arbiter agent n2 exec: job 3 started\n"
                                 "arbiter agent n2: warning: disk low\n");
    assert_int_equal(arb_log_init("controller", NULL, &e), 0);
    arb_log(ARB_LOG_ERROR, "store", "commit failed");
    assert_string_equal(drain(), "arbiter controller store: error: commit failed\n");
}

static void test_json(void **st)
{
    (void)st;
    arb_err_t e = {0};
    assert_int_equal(arb_log_init("lb", "front", &e), 0);
    assert_int_equal(arb_log_configure("debug", "json", &e), 0);
    arb_log(ARB_LOG_DEBUG, "proxy", "a \"quoted\"\\ line\nand\ta tab");
    json_error_t je;
    json_t *o = json_loads(drain(), 0, &je);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "level")), "debug");
    assert_string_equal(json_string_value(json_object_get(o, "daemon")), "lb");
    assert_string_equal(json_string_value(json_object_get(o, "name")), "front");
    assert_string_equal(json_string_value(json_object_get(o, "subsys")), "proxy");
    assert_string_equal(json_string_value(json_object_get(o, "msg")),
                        "a \"quoted\"\\ line\nand\ta tab");
    const char *ts = json_string_value(json_object_get(o, "ts"));
    assert_non_null(ts);
    assert_int_equal(strlen(ts), strlen("2026-12-01T13:40:37.123Z"));
    assert_int_equal(ts[strlen(ts) - 1], 'Z');
    json_decref(o);
    assert_int_equal(arb_log_configure("info", "text", &e), 0);
}

static void test_bad_settings(void **st)
{
    (void)st;
    arb_err_t e = {0};
    assert_int_equal(arb_log_configure("warn", "text", &e), 0);
    assert_true(arb_log_configure("loud", NULL, &e) < 0);
    assert_non_null(strstr(e.msg, "ARBITER_LOG_LEVEL"));
    assert_true(arb_log_configure(NULL, "xml", &e) < 0);
    assert_non_null(strstr(e.msg, "ARBITER_LOG_FORMAT"));
    /* nothing changed: still warn, still text */
    assert_false(arb_log_enabled(ARB_LOG_INFO));
    assert_true(arb_log_enabled(ARB_LOG_WARN));
    setenv("ARBITER_LOG_LEVEL", "nonsense", 1);
    assert_true(arb_log_init("agent", "x", &e) < 0);
    assert_non_null(strstr(e.msg, "nonsense"));
    unsetenv("ARBITER_LOG_LEVEL");
    assert_int_equal(arb_log_configure("info", "text", &e), 0);
    drain();
}

static void *writer(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < 2000; i++)
        arb_log(ARB_LOG_INFO, "t", "thread %ld line %d %s", id, i,
                "padding-padding-padding-padding-padding-padding-padding-padding");
    return NULL;
}

static void test_threads(void **st)
{
    (void)st;
    arb_err_t e = {0};
    pthread_t t[4];
    assert_int_equal(arb_log_init("agent", "n1", &e), 0);
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, writer, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    char *s = drain(), *save = NULL;
    int lines = 0;
    for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save), lines++) {
        long id;
        int i;
        char pad[80];
        assert_int_equal(sscanf(l, "arbiter agent n1 t: thread %ld line %d %79s", &id, &i, pad), 3);
        assert_string_equal(pad, "padding-padding-padding-padding-padding-padding-padding-padding");
    }
    assert_int_equal(lines, 8000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_bad_settings),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
