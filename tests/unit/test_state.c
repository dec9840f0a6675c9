/* test_state.c: the resource manager over a real SQLite store: submit,
 * place, cancel, reports, auth scoping, validation that changes nothing,
 * recovery of jobs, allocations, queue order and the clock, and a failed
 * store. The scheduler thread is not started: tests drive st_cycle. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/mtime.h"
#include "api/api_int.h" /* the replies as clients read them */
#include "state/state_int.h"
#include "state_fixture.h"
#include "api_fixture.h"

static st_t *open_st(const char *queue_policy)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    if (queue_policy && strcmp(queue_policy, "fifo") == 0)
        c.queue_policy = ARB_QP_FIFO;
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    return s;
}

static void add_node(st_t *s, const char *name, int gpus)
{
    char body[2048];
    size_t used = 0;
    json_t *out = NULL, *b;
    int64_t t;
    arb_err_t err = {{0}};

    used += (size_t)snprintf(body + used, sizeof body - used,
                             "{\"lamport\": 3, \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", "
                             "\"gpus\": [");
    for (int i = 0; i < gpus; i++)
        used += (size_t)snprintf(body + used, sizeof body - used,
                                 "%s{\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}",
                                 i ? "," : "");
    snprintf(body + used, sizeof body - used, "]}}");
    b = json_loads(body, 0, NULL);
    assert_non_null(b);
    if (api_node_report(s, &agent, name, -1, b, &out, &t, &err) < 0)
        fail_msg("report: %s", err.msg);
    assert_int_equal(st_wait(s, t, NULL), 0);
    json_decref(out);
    json_decref(b);
}

/* The job calls with their reply as the API encodes it (src/api/enc_job.c;
 * *out NULL on failure), so the checks read what clients read. */
static int job_submit(st_t *s, const st_who_t *who, const char *spec, size_t n, bool yaml,
                      json_t **out, int64_t *t, arb_err_t *err)
{
    st_job_view_t v;
    int rc = st_job_submit(s, who, spec, n, yaml, &v, t, err);
    *out = rc == 0 ? api_job_json(&v) : NULL;
    st_job_view_free(&v);
    return rc;
}

static int job_get(st_t *s, const st_who_t *who, uint64_t id, json_t **out, int64_t *t,
                   arb_err_t *err)
{
    st_job_view_t v;
    int rc = st_job_get(s, who, id, &v, t, err);
    *out = rc == 0 ? api_job_json(&v) : NULL;
    st_job_view_free(&v);
    return rc;
}

static int job_cancel(st_t *s, const st_who_t *who, uint64_t id, int64_t if_match, json_t **out,
                      int64_t *t, arb_err_t *err)
{
    st_job_view_t v;
    int rc = st_job_cancel(s, who, id, if_match, &v, t, err);
    *out = rc == 0 ? api_job_json(&v) : NULL;
    st_job_view_free(&v);
    return rc;
}

static int jobs_list(st_t *s, const st_who_t *who, const char *state, const char *queue,
                     uint64_t after, int limit, json_t **out, int64_t *t, arb_err_t *err)
{
    st_job_list_t l;
    int rc = st_jobs_list(s, who, state, queue, after, limit, &l, t, err);
    *out = rc == 0 ? api_jobs_json(&l) : NULL;
    st_job_list_free(&l);
    return rc;
}

static uint64_t submit(st_t *s, const st_who_t *who, const char *spec, int want_rc)
{
    json_t *out = NULL;
    int64_t t = 0;
    arb_err_t err = {{0}};
    int rc = job_submit(s, who, spec, strlen(spec), spec[0] != '{', &out, &t, &err);

    assert_int_equal(st_wait(s, t, NULL), 0);
    if (rc != want_rc)
        fail_msg("submit rc %d, wanted %d: %s", rc, want_rc, err.msg);
    uint64_t id = rc == 0 ? (uint64_t)json_integer_value(json_object_get(out, "id")) : 0;
    json_decref(out);
    return id;
}

static const char *job_state(st_t *s, uint64_t id)
{
    static char buf[32];
    json_t *out = NULL;
    int64_t t;
    assert_int_equal(job_get(s, &admin, id, &out, &t, NULL), 0);
    snprintf(buf, sizeof buf, "%s", json_string_value(json_object_get(out, "state")));
    json_decref(out);
    return buf;
}

static void cycle(st_t *s)
{
    int64_t t;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
}

#define GPUS(n) "{\"name\": \"j\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": " #n "}}}"

static void test_submit_place_recover(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 8);
    uint64_t a = submit(s, &admin, GPUS(4), 0);
    uint64_t b = submit(s, &admin,
                        "name: y\nresources:\n  requests: {nvidia.com/gpu: 4}\n"
                        "command: [sleep, '10']\nenv: {A: b}\n",
                        0);
    uint64_t c = submit(s, &admin, GPUS(2), 0);
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    cycle(s);
    assert_string_equal(job_state(s, a), "placed");
    assert_string_equal(job_state(s, b), "placed");
    assert_string_equal(job_state(s, c), "pending");
    assert_int_equal(st_check(s, NULL), 0);
    st_status_t st0;
    st_status(s, &st0);
    uint64_t lam0 = st0.lamport;
    st_close(s);

    /* a restart: same jobs, same GPUs, a newer epoch, a later clock */
    s = open_st(NULL);
    assert_string_equal(job_state(s, a), "placed");
    assert_string_equal(job_state(s, b), "placed");
    assert_string_equal(job_state(s, c), "pending");
    assert_int_equal(st_check(s, NULL), 0);
    st_status_t st1;
    st_status(s, &st1);
    assert_int_equal(st1.epoch, 2);
    assert_true(st1.lamport > lam0);
    json_t *out;
    int64_t t;
    assert_int_equal(job_get(s, &admin, b, &out, &t, NULL), 0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(out, "command"), 0)),
                        "sleep");
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "env"), "A")), "b");
    json_decref(out);
    /* the full node stays full: job c still waits */
    cycle(s);
    assert_string_equal(job_state(s, c), "pending");
    /* ids go on after the recovered ones */
    assert_int_equal(submit(s, &admin, GPUS(1), 0), 4);
    st_close(s);
}

static void test_rejects_change_nothing(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 8);
    st_status_t before, after;
    st_status(s, &before);
    submit(s, &admin, "{\"name\": \"x\",", -EBADMSG);
    submit(s, &admin, "{\"name\": \"x\", \"bogus\": 1}", -EINVAL);
    submit(s, &admin, "{\"name\": \"x\", \"replicas\": \"many\"}", -EINVAL);
    submit(s, &admin, GPUS(16), -EINVAL); /* no node has 16 GPUs */
    submit(s, &admin, GPUS(-1), -EINVAL);
    submit(s, &admin, "{\"name\": \"x\", \"command\": \"not a list\"}", -EINVAL);
    submit(s, &admin, "[1, 2]", -EBADMSG);
    st_status(s, &after);
    assert_int_equal(after.jobs, 0);
    assert_int_equal(after.revision, before.revision);

    /* messages say where and what */
    json_t *out = NULL;
    int64_t t;
    arb_err_t err = {{0}};
    const char *bad =
        "{\n  \"name\": \"x\",\n  \"resources\": {\"requests\": {\"memory\": \"1Gx\"}}\n}";
    assert_int_equal(job_submit(s, &admin, bad, strlen(bad), false, &out, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "job.json:3:"));
    assert_non_null(strstr(err.msg, "resources.requests.memory"));
    const char *mal = "{\"name\": \"x\",\n \"a\": }";
    assert_int_equal(job_submit(s, &admin, mal, strlen(mal), false, &out, &t, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "job.json:2:"));
    st_close(s);
}

/* ---- the spec read before the state's lock ------------------------------------ */

/* Refused specs, each with the message a submission gives. The first five
 * are refused before the lock is taken (st_spec_read: syntax, the body's
 * shape, the controller's own keys), the rest by the spec reader under it. */
static const struct {
    const char *spec;
    int rc;
    const char *msg;
} refused[] = {
    {"{\"name\": \"x\",", -EBADMSG,
     "job.json:1:13: malformed JSON: string or '}' expected near end of file"},
    {"[1, 2]", -EINVAL, "body: a job spec is a JSON object ({\"name\": ...})"},
    {"{\"name\": \"x\", \"command\": \"not a list\"}", -EINVAL,
     "job.json:1:27: command: expected a list ([a, b] or '- ' items), got a single value"},
    {"{\"name\": \"x\", \"env\": {\"1A\": \"v\"}}", -EINVAL,
     "job.json:1:30: env.1A: '1A' is not a variable name; use letters, digits and _"},
    {"{\"name\": \"x\", \"dependency\": \"afterok:\"}", -EINVAL,
     "job.json:1:30: dependency: dependency 'afterok:': 'afterok' names no job"},
    {"{\"name\": \"x\", \"bogus\": 1}", -EINVAL,
     "job.json:1:16: unknown field 'bogus'; valid fields: name, queue, "},
    {"{\"name\": \"x\", \"resources\": {\"requests\": {\"rdma/hca\": 1}}}", -EINVAL,
     "job.json:1:43: resources.requests.rdma/hca: no node offers extended resource 'rdma/hca'; "
     "nodes offer none (declare it in a node's allocatable)"},
};
#define NREFUSED (sizeof refused / sizeof refused[0])

typedef struct lock_submit {
    st_t *s;
    const char *spec;
    int rc;
    int64_t ticket;
    arb_err_t err;
} lock_submit_t;

static void *submit_thread(void *arg)
{
    lock_submit_t *ls = arg;
    st_job_view_t v;
    bool created = false;

    ls->rc = st_job_submit_key(ls->s, &admin, NULL, ls->spec, strlen(ls->spec), false, &v, &created,
                               &ls->ticket, &ls->err);
    if (ls->rc == 0)
        st_job_view_free(&v);
    return NULL;
}

/*
 * A submission's spec is read before the state's lock (st_spec_read), and
 * what that read refuses never takes the lock: with s->mu held here, a
 * submission of such a spec from another thread still comes back (the join
 * below waits up to 60 s for it: a deadlock detector, not a timing), with
 * its message and no ticket to wait for. Every refused spec, of either
 * step, gives the same message by st_job_submit_key, st_job_submit_check and
 * a keyed submission, and changes nothing; a keyed retry with a different,
 * malformed body is still answered as a retry (the key is looked up before
 * the read's refusal is given).
 */
static void test_spec_read_before_lock(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 8);
    st_status_t before, after;
    st_status(s, &before);

    for (size_t i = 0; i < NREFUSED; i++) {
        arb_err_t e1 = {{0}}, e2 = {{0}}, e3 = {{0}};
        st_job_view_t v;
        bool created = false;
        int64_t t = -1;
        size_t n = strlen(refused[i].spec);
        char key[32];
        int rc =
            st_job_submit_key(s, &admin, NULL, refused[i].spec, n, false, &v, &created, &t, &e1);
        assert_int_equal(rc, refused[i].rc);
        assert_false(created);
        if (strncmp(e1.msg, refused[i].msg, strlen(refused[i].msg)) != 0)
            fail_msg("spec %zu: '%s', wanted '%s...'", i, e1.msg, refused[i].msg);
        if (i < 5)
            assert_int_equal(t, 0); /* refused before the lock: nothing to wait for */
        if (i == 5)
            assert_non_null(strstr(e1.msg, "(and the controller's: command, env, restartable"));
        assert_int_equal(st_job_submit_check(s, &admin, refused[i].spec, n, false, &e2), rc);
        assert_string_equal(e2.msg, e1.msg);
        snprintf(key, sizeof key, "refused-%zu", i);
        assert_int_equal(
            st_job_submit_key(s, &admin, key, refused[i].spec, n, false, &v, &created, &t, &e3),
            rc);
        assert_string_equal(e3.msg, e1.msg);
        assert_int_equal(st_wait(s, t, NULL), 0);
    }
    st_status(s, &after);
    assert_int_equal(after.jobs, 0);
    assert_int_equal(after.revision, before.revision);

    /* Refused with the lock held by someone else. */
    for (size_t i = 0; i < 5; i++) {
        lock_submit_t ls = {.s = s, .spec = refused[i].spec, .rc = 1};
        pthread_t th;
        struct timespec until;
        pthread_mutex_lock(&s->mu);
        assert_int_equal(pthread_create(&th, NULL, submit_thread, &ls), 0);
        clock_gettime(CLOCK_REALTIME, &until); /* pthread_timedjoin_np's clock */
        until.tv_sec += 60;
        int jr = pthread_timedjoin_np(th, NULL, &until);
        pthread_mutex_unlock(&s->mu);
        if (jr != 0)
            assert_int_equal(pthread_join(th, NULL), 0);
        if (jr != 0)
            fail_msg("spec %zu: the submission waited for the state's lock to refuse it", i);
        assert_int_equal(ls.rc, refused[i].rc);
        assert_int_equal(ls.ticket, 0);
    }

    /* A retry's answer comes before its body's refusal. */
    st_job_view_t v;
    bool created = false;
    int64_t t = 0;
    arb_err_t err = {{0}};
    const char *good = GPUS(1);
    assert_int_equal(
        st_job_submit_key(s, &admin, "k1", good, strlen(good), false, &v, &created, &t, &err), 0);
    assert_true(created);
    uint64_t id = v.id;
    st_job_view_free(&v);
    assert_int_equal(st_wait(s, t, NULL), 0);
    const char *mal = "{\"name\": ";
    assert_int_equal(
        st_job_submit_key(s, &admin, "k1", mal, strlen(mal), false, &v, &created, &t, &err),
        -EINVAL);
    char want[160];
    snprintf(want, sizeof want,
             "Idempotency-Key: 'k1' was used for job %llu with a different body; send a new key "
             "with a new job",
             (unsigned long long)id);
    assert_string_equal(err.msg, want);
    st_close(s);
}

static void test_teams_and_versions(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 8);
    uint64_t a = submit(s, &alice, GPUS(1), 0);
    submit(s, &alice, "{\"name\": \"x\", \"queue\": \"team-b\"}", -EACCES);
    json_t *out = NULL;
    int64_t t;
    arb_err_t err = {{0}};
    assert_int_equal(job_get(s, &bob, a, &out, &t, &err), -EACCES);
    assert_int_equal(job_cancel(s, &bob, a, -1, &out, &t, &err), -EACCES);
    assert_int_equal(job_get(s, &alice, a, &out, &t, &err), 0);
    assert_string_equal(json_string_value(json_object_get(out, "queue")), "team-a");
    json_decref(out);
    /* bob's list does not show alice's job */
    assert_int_equal(jobs_list(s, &bob, NULL, NULL, 0, 0, &out, &t, &err), 0);
    assert_int_equal(json_array_size(json_object_get(out, "jobs")), 0);
    json_decref(out);
    /* If-Match */
    assert_int_equal(job_cancel(s, &alice, a, 99, &out, &t, &err), -ESTALE);
    assert_int_equal(job_cancel(s, &alice, a, 1, &out, &t, &err), 0);
    assert_string_equal(json_string_value(json_object_get(out, "state")), "cancelled");
    json_decref(out);
    assert_int_equal(job_cancel(s, &alice, a, -1, &out, &t, &err), -EPERM);
    st_wait(s, t, NULL);
    st_close(s);
}

static json_t *report(st_t *s, const char *node, const char *body, int want)
{
    json_t *b = json_loads(body, 0, NULL), *out = NULL;
    int64_t t = 0;
    arb_err_t err = {{0}};
    assert_non_null(b);
    int rc = api_node_report(s, &agent, node, -1, b, &out, &t, &err);
    if (rc != want)
        fail_msg("report rc %d: %s", rc, err.msg);
    st_wait(s, t, NULL);
    json_decref(b);
    return out;
}

static void test_agent_reports(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 2);
    uint64_t a = submit(s, &admin, GPUS(2), 0);
    cycle(s);
    json_t *out = report(s, "n1", "{\"lamport\": 1000}", 0);
    json_t *as = json_object_get(out, "assignments");
    assert_int_equal(json_array_size(as), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(as, 0), "epoch")), 1);
    assert_true(json_integer_value(json_object_get(out, "lamport")) > 1000); /* max + 1 */
    json_decref(out);
    /* delivered: a cancel now waits for the agent */
    json_t *c;
    int64_t t;
    out = report(s, "n1",
                 "{\"tasks\": [{\"job\": 1, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}]}",
                 0);
    json_decref(out);
    assert_string_equal(job_state(s, a), "running");
    assert_int_equal(job_cancel(s, &admin, a, -1, &c, &t, NULL), 0);
    assert_true(json_is_true(json_object_get(c, "stop_requested")));
    json_decref(c);
    st_wait(s, t, NULL);
    uint64_t b = submit(s, &admin, GPUS(1), 0);
    cycle(s);
    assert_string_equal(job_state(s, b), "pending"); /* GPUs still held */
    out = report(s, "n1",
                 "{\"tasks\": [{\"job\": 1, \"task\": 0, \"attempt\": 1, \"state\": \"failed\", "
                 "\"exit_code\": 143}]}",
                 0);
    json_decref(out);
    assert_string_equal(job_state(s, a), "cancelled");
    cycle(s);
    assert_string_equal(job_state(s, b), "placed");
    /* bad reports */
    out = report(s, "n2", "{\"telemetry\": {}}", 0); /* unknown, no inventory: register */
    assert_true(json_is_true(json_object_get(out, "lost")));
    assert_null(json_object_get(out, "assignments"));
    json_decref(out);
    out = report(s, "n1", "{\"telemetry\": {\"gpus\": [{\"index\": 0, \"util\": 300}]}}", -EINVAL);
    out = report(s, "n1", "{\"inventory\": {\"gpus\": [{\"memory\": \"80Gx\"}]}}", -EINVAL);
    out = report(s, "n1", "{\"inventory\": {\"cpu\": 1}}", -EBUSY); /* tasks allocated */
    out = report(s, "n1", "{\"whatever\": 1}", -EINVAL);
    assert_int_equal(st_check(s, NULL), 0);
    st_close(s);
}

static st_t *open_short_lease(void)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    c.lease_ns = 150000000LL; /* 150 ms: the file loader allows no less than 100 ms */
    c.grace_ns = 150000000LL; /* below the loader's 1 s minimum, for a quick test */
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    return s;
}

static json_t *task_of(st_t *s, uint64_t id, int t)
{
    json_t *out = NULL, *tk;
    int64_t tt;
    assert_int_equal(job_get(s, &admin, id, &out, &tt, NULL), 0);
    tk = json_incref(json_array_get(json_object_get(out, "tasks"), (size_t)t));
    json_decref(out);
    return tk;
}

static const char *task_node(st_t *s, uint64_t id, int t)
{
    static char buf[32];
    json_t *tk = task_of(s, id, t);
    snprintf(buf, sizeof buf, "%s", json_string_value(json_object_get(tk, "node")) ?: "-");
    json_decref(tk);
    return buf;
}

/* Keep node `live` reporting (its task of job `id` running) and run cycles
 * until job id reaches `want` or 5 s pass. */
static void wait_state(st_t *s, uint64_t id, const char *want, const char *live, int live_task)
{
    char body[256];
    int64_t end = arb_mono_ms() + 5000;

    while (strcmp(job_state(s, id), want) != 0) {
        if (arb_mono_ms() > end)
            fail_msg("job %llu stays %s, not %s", (unsigned long long)id, job_state(s, id), want);
        if (live) {
            snprintf(body, sizeof body,
                     "{\"tasks\": [{\"job\": %llu, \"task\": %d, \"state\": \"running\"}]}",
                     (unsigned long long)id, live_task);
            json_decref(report(s, live, body, 0));
        }
        cycle(s);
        usleep(20000);
    }
}

static void test_lost_nodes(void **unused)
{
    (void)unused;
    st_t *s = open_short_lease();
    add_node(s, "n1", 2);
    add_node(s, "n2", 2);
    /* a gang over both nodes: rank, world size and the rendezvous */
    uint64_t g = submit(s, &admin,
                        "{\"name\": \"gang\", \"replicas\": 2, \"command\": [\"true\"], "
                        "\"resources\": {\"requests\": {\"nvidia.com/gpu\": 2}}}",
                        0);
    cycle(s);
    assert_string_equal(job_state(s, g), "placed");
    int t1 = strcmp(task_node(s, g, 0), "n1") == 0 ? 0 : 1; /* n1's task */
    json_t *out = report(s, "n1", "{}", 0), *as;
    as = json_array_get(json_object_get(out, "assignments"), 0);
    assert_int_equal(json_integer_value(json_object_get(as, "world_size")), 2);
    assert_int_equal(json_integer_value(json_object_get(as, "rank")), t1);
    assert_non_null(json_string_value(json_object_get(as, "master_addr")));
    assert_true(json_integer_value(json_object_get(as, "master_port")) >= 20000);
    assert_true(json_integer_value(json_object_get(out, "lease_ms")) == 150);
    json_decref(out);
    char b1[200], b2[200];
    snprintf(b1, sizeof b1, "{\"tasks\": [{\"job\": %llu, \"task\": %d, \"state\": \"running\"}]}",
             (unsigned long long)g, t1);
    snprintf(b2, sizeof b2, "{\"tasks\": [{\"job\": %llu, \"task\": %d, \"state\": \"running\"}]}",
             (unsigned long long)g, 1 - t1);
    json_decref(report(s, "n1", b1, 0));
    json_decref(report(s, "n2", b2, 0));
    assert_string_equal(job_state(s, g), "running");

    /* n1 falls silent: lost after lease + grace; n2's member is stopped,
     * its GPUs stay held until n2 says it ended. */
    int64_t end = arb_mono_ms() + 5000;
    for (;;) {
        json_t *tk = task_of(s, g, t1);
        bool lost = strcmp(json_string_value(json_object_get(tk, "state")), "lost") == 0;
        json_decref(tk);
        if (lost)
            break;
        assert_true(arb_mono_ms() < end);
        json_decref(report(s, "n2", b2, 0));
        cycle(s);
        usleep(20000);
    }
    assert_string_equal(job_state(s, g), "running"); /* held: n2's member still runs */
    out = report(s, "n2", b2, 0);
    as = json_array_get(json_object_get(out, "assignments"), 0);
    assert_true(json_is_true(json_object_get(as, "stop")));
    json_decref(out);
    assert_int_equal(st_check(s, NULL), 0);
    snprintf(b2, sizeof b2,
             "{\"tasks\": [{\"job\": %llu, \"task\": %d, \"state\": \"failed\", "
             "\"exit_code\": 143}]}",
             (unsigned long long)g, 1 - t1);
    json_decref(report(s, "n2", b2, 0));
    assert_string_equal(job_state(s, g), "preempted"); /* requeued whole */
    cycle(s);
    assert_string_equal(job_state(s, g), "pending"); /* n1 is gone: 2 GPUs left, 4 asked */
    json_t *tk = task_of(s, g, t1);
    assert_string_equal(json_string_value(json_object_get(tk, "last_node")), "n1");
    json_decref(tk);

    /* n1 comes back without its inventory: told it is lost; with it: ready. */
    out = report(s, "n1", "{}", 0);
    assert_true(json_is_true(json_object_get(out, "lost")));
    json_decref(out);
    add_node(s, "n1", 2);
    cycle(s);
    assert_string_equal(job_state(s, g), "placed");
    out = report(s, "n1", "{}", 0);
    as = json_array_get(json_object_get(out, "assignments"), 0);
    assert_int_equal(json_integer_value(json_object_get(as, "attempt")), 2);
    json_decref(out);
    json_decref(report(s, "n2", "{}", 0));
    /* cancel it: both agents were sent stop before starting it; reports
     * that do not list it end it. */
    json_t *c;
    int64_t t;
    assert_int_equal(job_cancel(s, &admin, g, -1, &c, &t, NULL), 0);
    json_decref(c);
    st_wait(s, t, NULL);
    for (int i = 0; i < 2; i++) {
        json_decref(report(s, "n1", "{\"tasks\": []}", 0));
        json_decref(report(s, "n2", "{\"tasks\": []}", 0));
    }
    assert_string_equal(job_state(s, g), "cancelled");

    /* restartable: false: a lost task fails the job. */
    uint64_t f = submit(s, &admin,
                        "{\"name\": \"once\", \"restartable\": false, "
                        "\"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}}",
                        0);
    cycle(s);
    const char *where = task_node(s, f, 0);
    const char *other = strcmp(where, "n1") == 0 ? "n2" : "n1";
    char live[8];
    snprintf(live, sizeof live, "%s", other);
    char body[200];
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"state\": \"running\"}]}",
             (unsigned long long)f);
    json_decref(report(s, where, body, 0));
    wait_state(s, f, "failed", live, 99);
    assert_int_equal(st_check(s, NULL), 0);
    st_close(s);
}

/* An agent that lost a running task (restarted without its state): the
 * task is lost, the job requeued; a report without a task list says nothing. */
static void test_task_gone(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 2);
    uint64_t a = submit(s, &admin, GPUS(1), 0);
    cycle(s);
    char body[200];
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}]}",
             (unsigned long long)a);
    json_decref(report(s, "n1", body, 0));
    assert_string_equal(job_state(s, a), "running");
    json_decref(report(s, "n1", "{\"lamport\": 5}", 0));
    assert_string_equal(job_state(s, a), "running");
    json_decref(report(s, "n1", "{\"tasks\": []}", 0));
    assert_string_equal(job_state(s, a), "preempted"); /* requeued */
    cycle(s);
    assert_string_equal(job_state(s, a), "placed");
    json_t *tk = task_of(s, a, 0);
    assert_string_equal(json_string_value(json_object_get(tk, "state")), "assigned");
    json_decref(tk);
    assert_int_equal(st_check(s, NULL), 0);
    st_close(s);
}

static void test_epoch_restamped(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 2);
    uint64_t a = submit(s, &admin, GPUS(1), 0);
    uint64_t b = submit(s, &admin, GPUS(1), 0);
    cycle(s);
    json_t *out = report(s, "n1", "{}", 0);
    assert_int_equal(json_integer_value(json_object_get(out, "epoch")), 1);
    json_decref(out);
    char body[200];
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}]}",
             (unsigned long long)a);
    json_decref(report(s, "n1", body, 0));
    st_close(s);
    /* restarted: both allocations are this epoch's now; a keeps its attempt */
    s = open_st(NULL);
    out = report(s, "n1", body, 0);
    json_t *as = json_object_get(out, "assignments");
    assert_int_equal(json_array_size(as), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(as, i);
        assert_int_equal(json_integer_value(json_object_get(e, "epoch")), 2);
        assert_int_equal(json_integer_value(json_object_get(e, "attempt")), 1);
    }
    json_decref(out);
    assert_string_equal(job_state(s, a), "running");
    assert_string_equal(job_state(s, b), "placed");
    st_close(s);
}

static void test_queue_order_survives(void **unused)
{
    (void)unused;
    st_t *s = open_st("fifo");
    add_node(s, "n1", 1);
    uint64_t first = submit(s, &admin, GPUS(1), 0);
    cycle(s);
    uint64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = submit(s, &admin, GPUS(1), 0);
    st_close(s);
    s = open_st("fifo");
    /* free the GPU: the oldest waiting job gets it, then the next */
    json_t *out;
    int64_t t;
    for (int i = 0; i < 5; i++) {
        uint64_t holder = i == 0 ? first : ids[i - 1];
        assert_int_equal(job_cancel(s, &admin, holder, -1, &out, &t, NULL), 0);
        json_decref(out);
        st_wait(s, t, NULL);
        cycle(s);
        assert_string_equal(job_state(s, ids[i]), "placed");
        for (int k = i + 1; k < 5; k++)
            assert_string_equal(job_state(s, ids[k]), "pending");
    }
    st_close(s);
}

static void test_events_and_store_failure(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 1);
    submit(s, &admin, GPUS(1), 0);
    json_t *out;
    st_event_list_t el;
    int64_t t;
    assert_int_equal(st_events(s, &admin, 0, 100, 0, &el, &t, NULL), 0);
    size_t n = (size_t)el.n;
    assert_true(n >= 3); /* controller-started, node-registered, job-submitted */
    uint64_t l1 = el.v[1].lamport;
    st_event_list_free(&el);
    assert_int_equal(st_events(s, &admin, l1, 100, 0, &el, &t, NULL), 0);
    assert_int_equal(el.n, n - 2);
    st_event_list_free(&el);

    /* a failed commit: the caller learns it, nothing later is acknowledged */
    st_inject_store_failure(s, 1);
    arb_err_t err = {{0}};
    const char *spec = GPUS(1);
    int rc = job_submit(s, &admin, spec, strlen(spec), false, &out, &t, &err);
    assert_int_equal(rc, 0);
    json_decref(out);
    assert_int_equal(st_wait(s, t, &err), -EIO);
    st_close(s);
    s = open_st(NULL);
    st_status_t stt;
    st_status(s, &stt);
    assert_int_equal(stt.jobs, 1);
    st_close(s);
}

static void test_config(void **unused)
{
    (void)unused;
    st_conf_t c;
    arb_err_t err = {{0}};
    const char *good = "scheduler: {policy: pack, queue: drf, interval: 250ms}\n"
                       "nodes: {lease: 5s}\n"
                       "queues:\n  - {name: a, nominal: {nvidia.com/gpu: 8, memory: 1Ti}}\n"
                       "  - {name: b, cohort: r}\n";
    st_conf_init(&c);
    assert_int_equal(st_conf_load_mem("c.yaml", good, strlen(good), &c, &err), 0);
    assert_string_equal(c.policy, "pack");
    assert_int_equal(c.queue_policy, ARB_QP_DRF);
    assert_int_equal(c.interval_ns, 250000000LL);
    assert_int_equal(c.lease_ns, 5000000000LL);
    assert_int_equal(c.nqueues, 2);
    assert_int_equal(c.queues[0].nominal.gpu_milli, 8000);
    assert_int_equal(c.stale_ns, 2500000000LL); /* half the lease when not given */
    /* issue 12: time limits per queue and for the scheduler, capRequests,
     * staleness below the lease, 'default' reserved */
    const char *lim = "scheduler: {defaultTimeLimit: 1h, maxTimeLimit: 24h}\n"
                      "resources: {capRequests: true}\n"
                      "queues:\n  - {name: q, defaultTimeLimit: 10m, maxTimeLimit: 2h}\n";
    assert_int_equal(st_conf_load_mem("c.yaml", lim, strlen(lim), &c, &err), 0);
    assert_int_equal(c.default_limit_s, 3600);
    assert_int_equal(c.max_limit_s, 86400);
    assert_int_equal(c.queues[0].default_limit_s, 600);
    assert_int_equal(c.queues[0].max_limit_s, 7200);
    assert_true(c.cap_requests);
    static const struct {
        const char *yaml, *want;
    } bad_cases[] = {
        {"nodes: {lease: 10s, staleness: 30s}\n", "is not below the lease"},
        {"queues:\n  - {name: q, defaultTimeLimit: 2h, maxTimeLimit: 1h}\n",
         "maxTimeLimit 3600s is below defaultTimeLimit 7200s"},
        {"queues:\n  - {name: default}\n", "'default' is the quota-less queue"},
        {"scheduler: {maxTimeLimit: 1500ms}\n", "a time limit is whole seconds"},
        {"resources: {capRequest: true}\n", "capRequest"},
    };
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        assert_int_equal(
            st_conf_load_mem("c.yaml", bad_cases[i].yaml, strlen(bad_cases[i].yaml), &c, &err),
            -EINVAL);
        if (!strstr(err.msg, bad_cases[i].want))
            fail_msg("%s: %s", bad_cases[i].yaml, err.msg);
    }
    const char *bad = "scheduler:\n  policy: pack\n  intervall: 1s\n";
    assert_int_equal(st_conf_load_mem("c.yaml", bad, strlen(bad), &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "c.yaml:3:"));
    assert_non_null(strstr(err.msg, "intervall"));
    const char *bad2 = "nodes: {lease: 10 parsecs}\n";
    assert_int_equal(st_conf_load_mem("c.yaml", bad2, strlen(bad2), &c, &err), -EINVAL);
    assert_string_equal(c.policy, "pack"); /* unchanged by failures */
    st_conf_free(&c);
}

/* A GPU reported unhealthy: out of capacity, its job stopped whole and
 * requeued, then placed on a healthy GPU; healthy again: back. */
static void test_gpu_lost(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n1", 2);
    uint64_t a = submit(s, &admin, GPUS(1), 0);
    cycle(s);
    json_t *tk = task_of(s, a, 0);
    int g = (int)json_integer_value(json_array_get(json_object_get(tk, "gpus"), 0));
    json_decref(tk);
    char body[400];
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}]}",
             (unsigned long long)a);
    json_decref(report(s, "n1", body, 0));
    assert_string_equal(job_state(s, a), "running");
    /* GPU g falls off the bus: the reply tells the agent to stop the task */
    snprintf(body, sizeof body,
             "{\"telemetry\": {\"gpus\": [{\"index\": %d, \"healthy\": false}]}, "
             "\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"running\"}]}",
             g, (unsigned long long)a);
    json_t *out = report(s, "n1", body, 0);
    json_t *as = json_array_get(json_object_get(out, "assignments"), 0);
    assert_true(json_is_true(json_object_get(as, "stop")));
    json_decref(out);
    assert_string_equal(job_state(s, a), "running"); /* its GPUs held until it ended */
    uint64_t b = submit(s, &admin, GPUS(1), 0);
    cycle(s);
    assert_string_equal(job_state(s, b), "placed"); /* on the other GPU */
    tk = task_of(s, b, 0);
    assert_int_not_equal(json_integer_value(json_array_get(json_object_get(tk, "gpus"), 0)), g);
    json_decref(tk);
    /* the task ends (SIGTERM): requeued whole, and nothing fits while g is lost */
    snprintf(body, sizeof body,
             "{\"tasks\": [{\"job\": %llu, \"task\": 0, \"attempt\": 1, \"state\": \"failed\", "
             "\"exit_code\": 143}]}",
             (unsigned long long)a);
    json_decref(report(s, "n1", body, 0));
    cycle(s);
    assert_true(strcmp(job_state(s, a), "pending") == 0 ||
                strcmp(job_state(s, a), "preempted") == 0);
    json_t *ex = NULL;
    int64_t t;
    assert_int_equal(job_explain(s, &admin, a, &ex, &t, NULL), 0);
    char want[64];
    snprintf(want, sizeof want, "GPU %d on node 'n1' unhealthy", g);
    assert_non_null(strstr(json_string_value(json_object_get(ex, "summary")), want));
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(ex, "unhealthy_gpus"), 0), "gpu")),
                     g);
    json_decref(ex);
    /* healthy again: back in capacity */
    snprintf(body, sizeof body, "{\"telemetry\": {\"gpus\": [{\"index\": %d, \"healthy\": true}]}}",
             g);
    json_decref(report(s, "n1", body, 0));
    cycle(s);
    assert_string_equal(job_state(s, a), "placed");
    assert_int_equal(st_check(s, NULL), 0);
    st_close(s);
}

/* Log tickets: issued to who may see the job, bound to job, task and node. */

/* A log ticket and its check as the API answers them (the state's view,
 * src/api's encoder). */
static int logs_ticket(st_t *s, const st_who_t *who, uint64_t job, int64_t task, json_t **out,
                       int64_t *t, arb_err_t *err)
{
    st_logs_ticket_t v;
    int rc = st_logs_ticket(s, who, job, task, &v, t, err);
    *out = rc == 0 ? api_logs_ticket_json(&v) : NULL;
    st_logs_ticket_free(&v);
    return rc;
}

static int logs_ticket_check(st_t *s, const char *id, uint64_t job, int64_t task, const char *node,
                             json_t **out, int64_t *t, arb_err_t *err)
{
    int64_t ttl_ms;
    int rc = st_logs_ticket_check(s, id, job, task, node, &ttl_ms, t, err);
    *out = rc == 0 ? api_ticket_ok_json(ttl_ms) : NULL;
    return rc;
}

static void test_log_tickets(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    json_t *out = NULL, *chk = NULL;
    int64_t t;
    arb_err_t err = {{0}};

    json_decref(report(s, "n1",
                       "{\"inventory\": {\"cpu\": 8, \"memory\": \"64Gi\", \"logs_url\": "
                       "\"http://127.0.0.1:7071\", \"gpus\": [{\"model\": \"H100\", \"memory\": "
                       "\"80Gi\"}, {\"model\": \"H100\", \"memory\": \"80Gi\"}]}}",
                       0));
    add_node(s, "n2", 0); /* serves no logs */
    json_decref(report(s, "n3",
                       "{\"inventory\": {\"cpu\": 8, \"memory\": \"64Gi\", \"logs_url\": "
                       "\"ftp://x\"}}",
                       -EINVAL));
    uint64_t a = submit(s, &alice, GPUS(1), 0);
    uint64_t cpu =
        submit(s, &alice, "{\"name\": \"c\", \"resources\": {\"requests\": {\"cpu\": \"60\"}}}", 0);
    uint64_t big = submit(s, &alice, GPUS(2), 0);
    cycle(s);
    assert_string_equal(job_state(s, big), "pending");

    assert_int_equal(logs_ticket(s, &alice, a, 0, &out, &t, &err), 0);
    const char *id = json_string_value(json_object_get(out, "ticket"));
    assert_non_null(id);
    assert_int_equal(strlen(id), 32);
    assert_string_equal(json_string_value(json_object_get(out, "node")), "n1");
    assert_string_equal(json_string_value(json_object_get(out, "logs_url")),
                        "http://127.0.0.1:7071");
    assert_int_equal(json_integer_value(json_object_get(out, "ttl_ms")), 60000);
    /* the agent of n1 checks it */
    assert_int_equal(logs_ticket_check(s, id, a, 0, "n1", &chk, &t, &err), 0);
    assert_true(json_is_true(json_object_get(chk, "ok")));
    json_decref(chk);
    memset(&err, 0, sizeof err);
    assert_int_equal(logs_ticket_check(s, id, a, 0, "n2", &chk, &t, &err), -EACCES);
    assert_non_null(strstr(err.msg, "not job"));
    assert_int_equal(logs_ticket_check(s, id, a, 1, "n1", &chk, &t, &err), -EACCES);
    assert_int_equal(logs_ticket_check(s, id, big, 0, "n1", &chk, &t, &err), -EACCES);
    memset(&err, 0, sizeof err);
    assert_int_equal(
        logs_ticket_check(s, "0123456789abcdef0123456789abcdef", a, 0, "n1", &chk, &t, &err),
        -EACCES);
    assert_non_null(strstr(err.msg, "unknown or expired"));
    json_decref(out);
    /* refused: another team, no such task or job, not run yet, a node without logs */
    memset(&err, 0, sizeof err);
    assert_int_equal(logs_ticket(s, &bob, a, 0, &out, &t, &err), -EACCES);
    assert_non_null(strstr(err.msg, "team-a"));
    assert_int_equal(logs_ticket(s, &alice, a, 1, &out, &t, &err), -ENOENT);
    assert_int_equal(logs_ticket(s, &alice, 999, 0, &out, &t, &err), -ENOENT);
    assert_int_equal(logs_ticket(s, &alice, big, 0, &out, &t, &err), -EBUSY);
    memset(&err, 0, sizeof err);
    assert_string_equal(job_state(s, cpu), "placed");
    int rc = logs_ticket(s, &alice, cpu, 0, &out, &t, &err);
    if (rc == 0) { /* placed on n1: fine too; n2 is what is tested */
        json_decref(out);
    } else {
        assert_int_equal(rc, -ENOENT);
        assert_non_null(strstr(err.msg, "does not serve logs"));
    }
    st_close(s);
}

/* A job's store record (st_job_record, jobrec.c) is written without jansson:
 * it must be the text jansson writes for the same values (a record parsed
 * and re-encoded compactly is the same bytes), its spec (under specs/ID,
 * written once at submission, st_job_spec_text) exactly the body as
 * submitted, its compact form a job like the one submitted, for specs with quotes, backslashes,
 * tabs (JSON's white space), CRs, a YAML line separator (U+2028), multi-byte UTF-8 and JSON
 * escapes, pending, placed (nodes and GPUs), gangs and cancelled (a message, stop) jobs; and
 * records survive a restart. */
static const char *record_body[8]; /* what each of test_record_text's jobs was submitted with */

static void check_record(st_t *s, uint64_t id)
{
    st_job_t *sj = st_job_find(s, id);
    assert_non_null(sj);
    char *rec = st_job_record(s, sj);
    assert_non_null(rec);
    json_error_t je;
    json_t *v = json_loads(rec, JSON_REJECT_DUPLICATES, &je);
    if (!v)
        fail_msg("job %llu: record is not JSON (%s): %s", (unsigned long long)id, je.text, rec);
    char *again = json_dumps(v, JSON_COMPACT);
    assert_string_equal(again, rec);
    char *spec = NULL;
    size_t speclen = 0;
    assert_null(json_object_get(v, "spec")); /* not in the record: written once, apart */
    assert_int_equal(st_job_spec_text(s, sj, &spec, &speclen, NULL), 0);
    assert_int_equal(speclen, strlen(record_body[id]));
    assert_memory_equal(spec, record_body[id], speclen);
    free(spec);
    const json_t *core = json_object_get(v, "core");
    arb_job_t *j = NULL;
    st_dep_t *dep = NULL;
    char pc[ST_PCLASS_MAX];
    arb_err_t cerr = {{0}};
    assert_true(json_is_string(core));
    if (st_core_read(&s->cluster, json_string_value(core), json_string_length(core), &j, pc,
                     sizeof pc, &dep, &cerr) < 0)
        fail_msg("job %llu: its compact form does not read back: %s", (unsigned long long)id,
                 cerr.msg);
    assert_string_equal(j->name, sj->j->name);
    assert_int_equal(j->ntasks, sj->j->ntasks);
    assert_int_equal(j->groups[0].req.gpu_milli, sj->j->groups[0].req.gpu_milli);
    char *again_core = st_core_text(&s->cluster, j, pc, dep);
    assert_string_equal(again_core, json_string_value(core));
    free(again_core);
    arb_job_free(j);
    st_dep_free(dep);
    assert_int_equal(json_integer_value(json_object_get(v, "id")), (json_int_t)id);
    assert_int_equal(json_array_size(json_object_get(v, "tasks")), sj->ntasks);
    free(again);
    json_decref(v);
    free(rec);
}

static void test_record_text(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    add_node(s, "n-1", 8);
    add_node(s, "n-2", 8);
    uint64_t ids[6];
    static const char *const bodies[6] = {
        GPUS(4),
        "name: \"q\\\"uo\\\\te\" # a tab, a quote \" and a \\ \xc3\xa9 \xe2\x80\xa8 "
        "\xf0\x9f\x98\x80\r\nresources:\n  requests: {nvidia.com/gpu: 2}\n"
        "command: [sh, -c, 'printf \"%s\\n\" \xc3\xa9']\nenv: {A: \"b\\tc\"}\n",
        "{\"name\": \"u\\u00e9\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": "
        "1}},\n\t\"command\": [\"echo\", \"\\\"\\\\\\/\\u00e9\"]}",
        "name: gang\ngroups:\n  - name: w\n    replicas: 2\n    resources:\n"
        "      requests: {nvidia.com/gpu: 4}\n",
        GPUS(8), /* waits: no room */
        GPUS(1),
    };
    for (int i = 0; i < 6; i++) {
        ids[i] = submit(s, &admin, bodies[i], 0);
        assert_true(ids[i] > 0 && ids[i] < 8);
        record_body[ids[i]] = bodies[i];
    }
    for (int i = 0; i < 6; i++)
        assert_true(ids[i] > 0);
    for (int i = 0; i < 6; i++)
        check_record(s, ids[i]); /* pending */
    cycle(s);
    json_t *out = NULL;
    int64_t t;
    assert_int_equal(job_cancel(s, &admin, ids[5], -1, &out, &t, NULL), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    json_decref(out);
    cycle(s);
    for (int i = 0; i < 6; i++)
        check_record(s, ids[i]); /* placed, waiting, cancelled */
    /* a message with every kind of escape (an agent's text may carry them) */
    assert_int_equal(st_job_say(st_job_find(s, ids[4]), "a\x01"
                                                        "b\bc\fd\x1f\x7f\"\\/\t\r\n\xc3\xa9"),
                     0);
    check_record(s, ids[4]);
    char *rec = st_job_record(s, st_job_find(s, ids[4]));
    assert_non_null(
        strstr(rec, "\"message\":\"a\\u0001b\\bc\\fd\\u001F\x7f\\\"\\\\/\\t\\r\\n\xc3\xa9\""));
    free(rec);
    /* not UTF-8: the record is still written (U+FFFD for the stray byte), or
     * the save it was for would never be stored */
    st_job_t *sj4 = st_job_find(s, ids[4]);
    free(sj4->message);
    sj4->message = strdup("bad \xc3(");
    rec = st_job_record(s, sj4);
    assert_non_null(rec);
    assert_non_null(strstr(rec, "\"message\":\"bad \xef\xbf\xbd(\""));
    free(rec);
    check_record(s, ids[4]);
    /* a message cut by its buffer inside a character (a long name in Chinese):
     * mended to whole characters, so the record and its event are written */
    char name[700] = "";
    for (int i = 0; i < 200; i++) /* past both the message's 256 bytes and the event's 512 */
        strcat(name, "\xe8\xae\xad");
    assert_int_equal(st_job_say(sj4, "x%s", name), 0);
    assert_true(strlen(sj4->message) < 256);
    assert_int_equal(strlen(sj4->message) % 3, 1);
    check_record(s, ids[4]);
    uint64_t lam = st_event(s, "test", ids[4], NULL, "xy%s", name);
    st_event_list_t el;
    assert_int_equal(st_events(s, &admin, lam - 1, 1, 0, &el, &t, NULL), 0);
    assert_int_equal(el.n, 1); /* before: an event JSON refused was never kept */
    assert_int_equal(el.v[0].lamport, lam);
    assert_int_equal(strlen(el.v[0].message) % 3, 2);
    st_event_list_free(&el);
    assert_int_equal(st_job_say(st_job_find(s, ids[4]), "%s", ""), 0);
    st_close(s);
    s = open_st(NULL); /* what was written reads back */
    for (int i = 0; i < 6; i++)
        check_record(s, ids[i]);
    st_close(s);
}

/* An event keeps its wall time as milliseconds and writes the same text as
 * when it kept the text: live, after a restart, and for a stored time in
 * another form (kept as that text, byte for byte). */
static void test_event_times(void **unused)
{
    (void)unused;
    st_t *s = open_st(NULL);
    static const char *const recs[] = {
        ("{\"lamport\":5,\"time\":\"2026-12-02T06:40:25.123Z\",\"type\":\"t\",\"message\":\"m\","
         "\"job\":3,\"node\":\"n-1\"}"),
        "{\"lamport\":5,\"time\":\"1970-01-01T00:00:00.000Z\",\"type\":\"t\",\"message\":\"\"}",
        "{\"lamport\":5,\"time\":\"2026-12-02 06:40:25\",\"type\":\"t\",\"message\":\"m\"}",
        "{\"lamport\":5,\"time\":\"2026-13-02T06:40:25.123Z\",\"type\":\"t\",\"message\":\"m\"}",
        "{\"lamport\":5,\"time\":\"\",\"type\":\"t\",\"message\":\"\"}",
        "{\"lamport\":5,\"type\":\"t\",\"message\":\"m\"}",
    };
    static const char *const times[] = {"2026-12-02T06:40:25.123Z",
                                        "1970-01-01T00:00:00.000Z",
                                        "2026-12-02 06:40:25",
                                        "2026-13-02T06:40:25.123Z",
                                        "",
                                        ""};
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++) {
        st_event_t e;
        st_event_view_t v;
        assert_int_equal(st_event_decode(s, 5, recs[i], strlen(recs[i]), &e), 0);
        assert_int_equal(st_event_view_of(&e, &v), 0);
        assert_string_equal(v.time, times[i]);
        char *txt = st_event_record(&e);
        if (i == sizeof recs / sizeof recs[0] - 1) /* no time: written as "" */
            assert_string_equal(txt,
                                "{\"lamport\":5,\"time\":\"\",\"type\":\"t\",\"message\":\"m\"}");
        else
            assert_string_equal(txt, recs[i]);
        free(txt);
        free(v.message);
        st_event_clear(&e);
    }
    /* the record is jansson's dump of the same object, byte for byte (escapes, UTF-8) */
    {
        st_event_t e = {.lamport = 77, .job = 9, .type = "job-\"x\"", .node = "n\\1\t"};
        e.msg = strdup("a\x01b\bc\fd\x1f\x7f\"\\/\t\r\n\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80");
        e.time_ms = 1764657625123LL;
        char *txt = st_event_record(&e);
        json_t *o = json_pack("{s:I,s:s,s:s,s:s,s:I,s:s}", "lamport", (json_int_t)77, "time",
                              "2025-12-02T06:40:25.123Z", "type", e.type, "message", e.msg, "job",
                              (json_int_t)9, "node", e.node);
        char *want = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(txt, want);
        free(want);
        free(txt);
        json_decref(o);
        e.type = NULL;
        e.node = NULL;
        st_event_clear(&e);
    }
    /* live: the time is now's text, the same after a restart */
    uint64_t lam = st_event(s, "test", 0, NULL, "hello");
    st_event_list_t el;
    int64_t t;
    assert_int_equal(st_events(s, &admin, lam - 1, 1, 0, &el, &t, NULL), 0);
    assert_int_equal(st_wait(s, st_flush(s), NULL), 0);
    assert_int_equal(el.n, 1);
    char was[32];
    snprintf(was, sizeof was, "%s", el.v[0].time);
    assert_int_equal(strlen(was), 24);
    assert_int_equal(was[23], 'Z');
    st_event_list_free(&el);
    st_close(s);
    s = open_st(NULL);
    assert_int_equal(st_events(s, &admin, lam - 1, 1, 0, &el, &t, NULL), 0);
    assert_true(el.n >= 1);
    assert_int_equal(el.v[0].lamport, lam);
    assert_string_equal(el.v[0].time, was);
    assert_string_equal(el.v[0].message, "hello");
    st_event_list_free(&el);
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_submit_place_recover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_change_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spec_read_before_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_teams_and_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_restamped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_order_survives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_and_store_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_times, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_tickets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_text, setup, teardown),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
