/*
 * state_fixture.h: what the controller's unit tests (src/state over a real
 * SQLite store) share: a fresh temporary data directory per test, made by
 * setup() and removed by teardown() (cmocka's per-test hooks), and the
 * principals the API would pass in: an admin, two users of two teams and
 * an agent; sf_open() opens a controller's state there with no nodes and
 * sf_submit() submits a job to it as the API would; has_event() looks
 * through the event log. Header-only; each test executable includes it
 * once, after <cmocka.h> and "state/state_int.h".
 */
#ifndef ARB_TEST_STATE_FIXTURE_H
#define ARB_TEST_STATE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

#define SF_UNUSED __attribute__((unused))

static char dir[256]; /* this test's data directory */
static const st_who_t admin SF_UNUSED = {ST_ROLE_ADMIN, "", "root", NULL};
static const st_who_t alice SF_UNUSED = {ST_ROLE_USER, "team-a", "alice", NULL};
static const st_who_t bob SF_UNUSED = {ST_ROLE_USER, "team-b", "bob", NULL};
static const st_who_t agent SF_UNUSED = {ST_ROLE_AGENT, "nodes", "agent", NULL};

static SF_UNUSED int setup(void **unused)
{
    (void)unused;
    snprintf(dir, sizeof dir, "/tmp/arb_test_state.XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static SF_UNUSED int teardown(void **unused)
{
    char cmd[300];
    (void)unused;
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* The controller's state over dir, durable (sync normal) and with no nodes:
 * an unfittable job is kept pending, not refused. yaml, when not NULL, is a
 * config file's text; history >= 0 sets jobs.history (-1: the config's). */
static SF_UNUSED st_t *sf_open(const char *yaml, int history)
{
    st_conf_t c;
    st_t *s = NULL;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    c.reject_unfittable = false;
    if (yaml && st_conf_load_mem("config.yaml", yaml, strlen(yaml), &c, &err) < 0)
        fail_msg("config: %s", err.msg);
    if (history >= 0)
        c.job_history = history;
    if (st_open(dir, &c, &s, &err) < 0)
        fail_msg("st_open: %s", err.msg);
    st_conf_free(&c);
    return s;
}

/* alice submits spec (JSON or YAML) with Idempotency-Key key (NULL: none)
 * and waits for it to be durable: the job's id; *created (when not NULL)
 * whether it is a new job, as the API would say. */
static SF_UNUSED uint64_t sf_submit(st_t *s, const char *key, const char *spec, bool *created)
{
    st_job_view_t out;
    int64_t t = 0;
    arb_err_t err = {{0}};
    bool c = false;

    if (st_job_submit_key(s, &alice, key, spec, strlen(spec), false, &out, &c, &t, &err) < 0)
        fail_msg("submit: %s", err.msg);
    assert_int_equal(st_wait(s, t, NULL), 0);
    uint64_t id = out.id;
    st_job_view_free(&out);
    if (created)
        *created = c;
    return id;
}

/* An agent reports body (JSON) for node name, as the API takes it
 * (api_node_report); waits for it to be durable. */
static SF_UNUSED void sf_report(st_t *s, const char *name, const char *body)
{
    json_t *out = NULL, *b = json_loads(body, 0, NULL);
    int64_t t;
    arb_err_t err = {{0}};

    assert_non_null(b);
    if (api_node_report(s, &agent, name, -1, b, &out, &t, &err) < 0)
        fail_msg("report: %s", err.msg);
    assert_int_equal(st_wait(s, t, NULL), 0);
    json_decref(out);
    json_decref(b);
}

/* The admin submits a YAML spec and waits for it to be durable: the job's id. */
static SF_UNUSED uint64_t sf_submit_yaml(st_t *s, const char *yaml)
{
    st_job_view_t out;
    int64_t t = 0;
    arb_err_t err = {{0}};

    if (st_job_submit(s, &admin, yaml, strlen(yaml), true, &out, &t, &err) < 0)
        fail_msg("submit: %s", err.msg);
    assert_int_equal(st_wait(s, t, NULL), 0);
    uint64_t id = out.id;
    st_job_view_free(&out);
    return id;
}

/* Whether the event log holds an event of this type whose message contains text. */
static SF_UNUSED bool has_event(st_t *s, const char *type, const char *text)
{
    st_event_list_t out;
    int64_t t;
    bool found = false;
    assert_int_equal(st_events(s, &admin, 0, 10000, 0, &out, &t, NULL), 0);
    for (int i = 0; i < out.n; i++)
        found |= strcmp(out.v[i].type, type) == 0 && strstr(out.v[i].message, text) != NULL;
    st_event_list_free(&out);
    return found;
}

#endif
