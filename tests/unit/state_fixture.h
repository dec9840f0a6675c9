/*
 * state_fixture.h: what the controller's unit tests (src/state over a real
 * SQLite store) share: a fresh temporary data directory per test, made by
 * setup() and removed by teardown() (cmocka's per-test hooks), and the
 * principals the API would pass in: an admin, two users of two teams and
 * an agent; has_event() looks through the event log. Header-only; each test executable includes it
 * once, after <cmocka.h> and "state/state_int.h".
 */
#ifndef ARB_TEST_STATE_FIXTURE_H
#define ARB_TEST_STATE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Whether the event log holds an event of this type whose message contains text. */
static SF_UNUSED bool has_event(st_t *s, const char *type, const char *text)
{
    json_t *out = NULL, *e;
    int64_t t;
    size_t i;
    bool found = false;
    assert_int_equal(st_events(s, &admin, 0, 10000, 0, &out, &t, NULL), 0);
    json_array_foreach(json_object_get(out, "events"), i, e) found |=
        strcmp(json_string_value(json_object_get(e, "type")), type) == 0 &&
        strstr(json_string_value(json_object_get(e, "message")), text) != NULL;
    json_decref(out);
    return found;
}

#endif
