/* test_jobrec.c: reading a job's store record straight from its text
 * (st_jobrec_read, src/state/jobrec.c) against reading it through jansson
 * (st_jobrec_from_json), over the records a real controller (SQLite store)
 * wrote for every kind of job: pending, placed with its allocation,
 * cancelled with a message, elastic, exclusive, an array with a dependency,
 * a priority class, escapes and UTF-8 in names, a service and its replica,
 * a record in the form before the compact one (its spec inside) and one
 * with a shrink's extras. Each reads the same both ways, and builds the
 * same job (st_job_decode, the record written again is the same text);
 * what the text reader leaves to jansson (extras, odd types, escapes
 * jansson refuses, every cut of a record) it says so and holds nothing;
 * records of the same command share one value for it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/jobrec.h"
#include "state/state_int.h"
#include "state_fixture.h"
#include "store/store.h"

static void add_node(st_t *s, const char *name)
{
    const char *body =
        "{\"lamport\": 3, \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"address\": "
        "\"10.0.0.1\", \"labels\": {\"rack\": \"r1\", \"zone\": \"z1\"}, \"gpus\": [{\"model\": "
        "\"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}, {\"model\": \"H100\", \"memory\": "
        "\"80Gi\", \"nvlink\": 0}, {\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}, "
        "{\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}]}}";
    sf_report(s, name, body);
}

/* Both readers over v; want: what st_jobrec_read must say (0 or 1). Where
 * it read the text, the values are jansson's and so is the job built from
 * them. */
static void check(st_t *s, const char *v, size_t n, int want)
{
    st_jobrec_t a = {0}, b = {0};
    int rc = st_jobrec_read(&a, v, n);
    json_t *o = json_loadb(v, n, 0, NULL);

    if (rc != want)
        fail_msg("st_jobrec_read said %d, not %d, of %.*s", rc, want, (int)n, v);
    if (rc == 1) { /* nothing held */
        assert_null(a.command);
        assert_null(a.env);
        assert_int_equal(a.ntasks, 0);
        assert_int_equal(a.id, 0);
    }
    if (rc != 0 || !s) {
        st_jobrec_clear(&a);
        json_decref(o);
        return;
    }
    assert_true(json_is_object(o));
    assert_int_equal(st_jobrec_from_json(&b, o), 0);
    if (!st_jobrec_same(&a, &b))
        fail_msg("the readers differ on %.*s", (int)n, v);
    st_job_t *x = NULL, *y = NULL;
    int sx = -1, sy = -1;
    arb_err_t ex = {{0}}, ey = {{0}};
    pthread_mutex_lock(&s->mu);
    int rx = st_job_decode(s, &a, &x, &sx, &ex), ry = st_job_decode(s, &b, &y, &sy, &ey);
    assert_int_equal(rx, ry);
    assert_int_equal(sx, sy);
    if (rx == 0) {
        char *tx = st_job_record(s, x), *ty = st_job_record(s, y);
        assert_non_null(tx);
        assert_non_null(ty);
        assert_string_equal(tx, ty);
        free(tx);
        free(ty);
    } else {
        assert_string_equal(ex.msg, ey.msg);
    }
    st_job_free(x);
    st_job_free(y);
    pthread_mutex_unlock(&s->mu);
    st_jobrec_clear(&a);
    st_jobrec_clear(&b);
    json_decref(o);
}

typedef struct seen {
    st_t *s;
    int text, tree; /* records read from their text, left to jansson */
} seen_t;

static int each(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    seen_t *k = arg;
    /* the extras (a service's, a shrink's) are jansson's; every other record is the text's */
    bool extras = strstr(val, "\"svc_") || strstr(val, "\"shrink\"");
    (void)key, (void)rev;
    check(k->s, val, n, extras ? 1 : 0);
    extras ? k->tree++ : k->text++;
    return 0;
}

#define CLASSES "priorityClasses:\n  - {name: batch-low, value: 50, preemptible: true}\n"

static void test_every_kind_reads_the_same(void **unused)
{
    (void)unused;
    st_t *s = sf_open(CLASSES, -1);
    add_node(s, "n1");
    static const char *const specs[] = {
        "name: rich\npriorityClassName: batch-low\ntimeLimit: 1h30m\n"
        "nodeSelector: {rack: r1}\ngpuModels: [H100]\n"
        "groups:\n  - name: launcher\n    resources: {requests: {cpu: 500m, memory: 1Gi}}\n"
        "  - name: worker\n    replicas: 2\n"
        "    resources:\n      requests: {nvidia.com/gpu: 1}\n"
        "command: [sh, -c, 'echo \"hi\"']\nenv: {A: \"b\\tc\", B: \"\xc3\xa9\"}\n"
        "restartable: false\n",
        "name: el\nreplicas: {min: 1, max: 4}\nresources: {requests: {nvidia.com/gpu: 1}}\n",
        "name: ex\nexclusive: true\nresources: {requests: {nvidia.com/gpu: 8}}\n",
        "name: dep\ndependency: afterok:1\narray: {count: 3, throttle: 1}\n"
        "resources: {requests: {nvidia.com/gpu: 8}}\n",
        "name: \"q\\\"uo\\\\te \xc3\xa9 \xf0\x9f\x98\x80\"\npriority: 42\n"
        "resources: {requests: {nvidia.com/gpu: 8}}\n",
        "name: gone\nresources: {requests: {cpu: 1}}\ncommand: [sleep, \"1\"]\n",
        "name: web\nkind: service\nreplicas: 1\nport: 18000\n"
        "resources: {requests: {cpu: 1}}\ncommand: [serve]\n",
    };
    enum { N = sizeof specs / sizeof specs[0] };
    uint64_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = sf_submit_yaml(s, specs[i]);
    int64_t t;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    st_job_view_t out;
    arb_err_t err = {{0}};
    assert_int_equal(st_job_cancel(s, &admin, ids[5], -1, &out, &t, &err), 0);
    st_job_view_free(&out);
    assert_int_equal(st_wait(s, t, NULL), 0);
    st_close(s);

    /* records in the form before the compact one, and with a shrink's extras */
    store_t *st = NULL;
    store_opts_t so = {.sync = STORE_SYNC_NORMAL};
    store_batch_t batch = {0};
    assert_int_equal(store_open(dir, &so, &st, &err), 0);
    store_batch_putstr(
        &batch, "jobs/00000000000000000100",
        "{\"id\":100,\"team\":\"\",\"owner\":\"root\",\"yaml\":false,\"spec\":\"{\\\"name\\\": "
        "\\\"old\\\", \\\"resources\\\": {\\\"requests\\\": {\\\"nvidia.com/gpu\\\": 1}}, "
        "\\\"command\\\": [\\\"true\\\"]}\",\"state\":\"pending\",\"version\":1,"
        "\"lamport_submit\":110,\"lamport_update\":110,\"attempt\":0,\"epoch\":0,\"submit_ms\":"
        "1700000000000,\"start_ms\":0,\"end_ms\":0,\"delivered\":false,\"stop\":false,"
        "\"message\":\"\",\"tasks\":[[0,null]],\"alloc\":[],\"priority\":7,\"time_limit_s\":0,"
        "\"preemptible\":true}");
    store_batch_putstr(
        &batch, "jobs/00000000000000000101",
        "{\"id\":101,\"team\":\"\",\"owner\":\"root\",\"yaml\":false,\"spec\":\"{\\\"name\\\": "
        "\\\"old2\\\"}\",\"state\":\"succeeded\",\"version\":3,\"message\":\"done \\u00e9\","
        "\"tasks\":[[4,0,\"n1\"]],\"alloc\":[]}");
    store_batch_putstr(&batch, "jobs/00000000000000000102",
                       "{\"id\":102,\"team\":\"\",\"owner\":\"\",\"state\":\"running\",\"core\":"
                       "\"a1 =j ~ 0 1 0 0 0 0 -1 0 ~ ~ G 1 =g 1 1 0 0 0 0 0 0 0 0 0 0 S 0 R 0 P 0 "
                       "T 0 M 0 D 0\",\"tasks\":[[2,null,\"n1\"]],\"alloc\":[[\"n1\",1,1000,0]],"
                       "\"shrink\":{\"to\":1,\"for\":4}}");
    assert_int_equal(store_apply(st, &batch, NULL, &err), 0);
    store_batch_free(&batch);
    store_close(st);

    s = sf_open(CLASSES, -1);
    seen_t k = {.s = s};
    assert_int_equal(store_scan(s->store, "jobs/", each, &k, &err), 0);
    /* every job submitted but the service, the two hand-made ones without extras */
    assert_true(k.text >= N - 1 + 2);
    assert_true(k.tree >= 2); /* the service, the shrink */
    /* and they recovered: the old form's job and the placed ones */
    pthread_mutex_lock(&s->mu);
    assert_non_null(st_job_find(s, 100));
    assert_string_equal(st_job_find(s, 100)->j->name, "old");
    assert_string_equal(st_job_find(s, ids[0])->j->name, "rich");
    assert_int_equal(st_job_find(s, ids[0])->j->state, ARB_JOB_PLACED);
    assert_false(st_job_find(s, ids[0])->restartable);
    assert_string_equal(st_job_find(s, ids[4])->j->name, "q\"uo\\te \xc3\xa9 \xf0\x9f\x98\x80");
    assert_int_equal(st_job_find(s, ids[5])->j->state, ARB_JOB_CANCELLED);
    pthread_mutex_unlock(&s->mu);
    st_close(s);
}

#define REC(rest)                                                                                  \
    "{\"id\":5,\"team\":\"t\",\"owner\":\"o\",\"state\":\"pending\",\"core\":\"a1 =j ~ 0 1 0 0 "   \
    "0 0 -1 0 ~ ~ G 1 =g 1 1 0 0 0 0 0 0 0 0 0 0 S 0 R 0 P 0 T 0 M 0 D 0\"" rest "}"

static void test_edges(void **unused)
{
    (void)unused;
    st_t *s = sf_open(NULL, -1);
    /* taken: what jansson takes, the same values */
    static const char *const taken[] = {
        "{}",
        " { \"id\" : 5 ,\n\t\"state\" :\r\"pending\" } ",
        REC(""),
        REC(",\"message\":\"\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\\"\\\\ \xe2\x82\xac\""),
        REC(",\"priority\":-9223372036854775808,\"time_limit_s\":9223372036854775807"),
        REC(",\"version\":-0,\"submit_ms\":-1"),
        REC(",\"command\":{\"a\":[1,\"]}\",{\"b\":null}],\"c\":\"\\\"\"},\"env\":null"),
        REC(",\"command\":\"x\",\"env\":[]"),
        REC(",\"command\":3"),
        REC(",\"tasks\":[[0,null],[1,-3],[2,null,\"n\\u0031\"]],\"alloc\":[[null,0,0,0],"
            "[\"n1\",65535,-1,7]]"),
        "{\"state\":\"pending\",\"id\":5}", /* in another order */
        REC(",\"restartable\":true,\"yaml\":true,\"stop\":true,\"stop_then\":3"),
    };
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
        check(s, taken[i], strlen(taken[i]), 0);
    /* left to jansson (which takes some, refuses others) */
    static const char *const left[] = {
        "",
        "[]",
        "null",
        "{",
        REC(",\"other\":1"),
        REC(",\"id\":6"),
        REC(",\"version\":1.0"),
        REC(",\"version\":1e3"),
        REC(",\"version\":01"),
        REC(",\"version\":9223372036854775808"),
        REC(",\"version\":-9223372036854775809"),
        REC(",\"version\":\"1\""),
        REC(",\"version\":true"),
        REC(",\"yaml\":1"),
        REC(",\"yaml\":truex"),
        REC(",\"message\":\"\xff\""),
        REC(",\"message\":\"\xc0\xaf\""),
        REC(",\"message\":\"\xed\xa0\x80\""),
        REC(",\"message\":\"\\u0000\""),
        REC(",\"message\":\"\\ud800\""),
        REC(",\"message\":\"\\udc00x\""),
        REC(",\"message\":\"\\ud800\\u0041\""),
        REC(",\"message\":\"\\x\""),
        REC(",\"message\":\"\\u12\""),
        REC(",\"message\":\"a\nb\""),
        REC(",\"message\":null"),
        REC(",\"\\u0069d\":5"),
        REC(",\"tasks\":[[0]]"),
        REC(",\"tasks\":[0]"),
        REC(",\"tasks\":{}"),
        REC(",\"tasks\":[[0,null,\"n\",1]]"),
        REC(",\"alloc\":[[\"n\",1,2]]"),
        REC(",\"alloc\":[[1,1,2,3]]"),
        REC(",\"command\":[1,}"),
        REC(",\"command\":"),
        REC(",\"command\":[\"unterminated]"),
        REC(",\"shrink\":{\"to\":1}"),
        REC(",\"svc_of\":1"),
        REC("") " x",
        REC(","),
    };
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++)
        check(s, left[i], strlen(left[i]), 1);
    /* every cut of a whole record: never taken (and never read past its end) */
    static const char full[] =
        REC(",\"command\":[\"sh\",\"-c\",\"echo \\\"hi\\\"\"],\"env\":{\"A\":\"b\\tc\"},"
            "\"message\":\"\\u00e9\\ud83d\\ude00\",\"tasks\":[[2,null,\"n1\"],[3,0,\"n2\"]],"
            "\"alloc\":[[\"n1\",3,1000,0],[null,0,0,0]],\"priority\":-50,\"resize_gen\":3");
    check(s, full, strlen(full), 0);
    for (size_t n = 0; n < strlen(full); n++) {
        char *cut = malloc(n ? n : 1); /* exactly n bytes: ASan sees a read past them */
        memcpy(cut, full, n);
        check(NULL, cut, n, 1);
        free(cut);
    }
    st_close(s);
}

/* The same command's text, read twice with a share table: one value, held
 * by both (and by nothing once they and the table let go: ASan's leak
 * check); another command its own. */
static void test_shared_values(void **unused)
{
    (void)unused;
    static const char a[] = REC(",\"command\":[\"torchrun\",\"train.py\"],\"env\":{\"A\":\"1\"}");
    static const char b[] = REC(",\"command\":[\"torchrun\",\"eval.py\"],\"env\":{\"A\":\"1\"}");
    st_jobrec_t r = {.share = st_jobrec_share_new()};
    assert_non_null(r.share);
    assert_int_equal(st_jobrec_read(&r, a, strlen(a)), 0);
    json_t *c1 = json_incref(r.command), *e1 = json_incref(r.env);
    assert_int_equal(st_jobrec_read(&r, a, strlen(a)), 0);
    assert_ptr_equal(r.command, c1);
    assert_ptr_equal(r.env, e1);
    assert_int_equal(st_jobrec_read(&r, b, strlen(b)), 0);
    assert_ptr_not_equal(r.command, c1);
    assert_ptr_equal(r.env, e1);
    assert_string_equal(json_string_value(json_array_get(r.command, 1)), "eval.py");
    st_jobrec_share_free(r.share);
    r.share = NULL;
    assert_string_equal(json_string_value(json_array_get(c1, 1)), "train.py"); /* still held */
    st_jobrec_clear(&r);
    json_decref(c1);
    json_decref(e1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_kind_reads_the_same, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edges, setup, teardown),
        cmocka_unit_test(test_shared_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
