/*
 * test_lifecycle.c: the node and job state machines of cluster.h and job.h.
 * Every arrow of each diagram works; every other pair is rejected with
 * -EPERM and text naming both states; LEFT and the terminal job states have
 * no way out; arb_sched_finish releases allocations exactly when the job
 * held them and never leaves a job holding nothing in PLACED/RUNNING.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

/* ---- nodes ---------------------------------------------------------------- */

static const bool node_arrow[4][4] = {
    /*               READY  NOT_READY DRAINING LEFT */
    /* READY     */ {false, true, true, true},
    /* NOT_READY */ {true, false, true, true},
    /* DRAINING  */ {true, false, false, true},
    /* LEFT      */ {false, false, false, false},
};

static void test_node_every_pair(void **st)
{
    for (int from = 0; from <= ARB_NODE_LEFT; from++)
        for (int to = 0; to <= ARB_NODE_LEFT; to++) {
            arb_node_t n;
            arb_cluster_t c;
            arb_err_t e = {{0}};
            arb_cluster_init(&c);
            memset(&n, 0, sizeof n);
            n.state = (arb_node_state_t)from;
            int rc = arb_node_transition(&c, &n, (arb_node_state_t)to, &e);
            if (node_arrow[from][to]) {
                assert_int_equal(rc, 0);
                assert_int_equal(n.state, to);
                assert_int_equal(n.version, 1);
            } else {
                assert_int_equal(rc, -EPERM);
                assert_int_equal(n.state, from); /* unchanged */
                assert_int_equal(n.version, 0);
                assert_non_null(strstr(e.msg, arb_node_state_name((arb_node_state_t)from)));
                assert_non_null(strstr(e.msg, arb_node_state_name((arb_node_state_t)to)));
            }
            arb_cluster_free(&c);
        }
}

static void test_node_bad_target(void **st)
{
    arb_node_t n;
    arb_cluster_t c;
    arb_err_t e = {{0}};
    arb_cluster_init(&c);
    memset(&n, 0, sizeof n);
    assert_int_equal(arb_node_transition(&c, &n, (arb_node_state_t)7, &e), -EPERM);
    assert_true(e.msg[0] != '\0');
    assert_int_equal(n.state, ARB_NODE_READY);
    assert_int_equal(arb_node_transition(&c, &n, (arb_node_state_t)-1, NULL), -EPERM);
    arb_cluster_free(&c);
}

static void test_node_state_names(void **st)
{
    for (int i = 0; i <= ARB_NODE_LEFT; i++) {
        arb_node_state_t s;
        assert_int_equal(arb_node_state_parse(arb_node_state_name((arb_node_state_t)i), &s), 0);
        assert_int_equal(s, i);
    }
    arb_node_state_t s = ARB_NODE_READY;
    assert_int_equal(arb_node_state_parse("Gone", &s), -EINVAL);
    assert_string_equal(arb_node_state_name((arb_node_state_t)9), "?");
}

/* A full walk of the diagram, then LEFT is terminal, the name is free again
 * but the id is never reused. */
static void test_node_walk_and_left(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    arb_node_t *n = N(&f, a);
    assert_int_equal(n->state, ARB_NODE_READY);
    assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_NOT_READY, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_READY, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_DRAINING, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_READY, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_NOT_READY, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_DRAINING, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, n, ARB_NODE_LEFT, &f.err), 0);
    for (int to = 0; to <= ARB_NODE_LEFT; to++)
        assert_int_equal(arb_node_transition(&f.c, n, (arb_node_state_t)to, &f.err), -EPERM);
    assert_null(arb_cluster_find_node(&f.c, "a"));
    uint32_t b = fx_node(&f, "a", 8, 1, NULL, 0); /* same name, new node */
    assert_int_not_equal(a, b);
    assert_ptr_equal(arb_cluster_find_node(&f.c, "a"), N(&f, b));
    assert_int_equal(arb_cluster_add_node(&f.c, "a", NULL, &f.err), -EEXIST);
    assert_non_null(strstr(f.err.msg, "'a'"));
    assert_int_equal(arb_cluster_add_node(&f.c, "", NULL, &f.err), -EINVAL);
    arb_cluster_free(&f.c);
}

/* Only READY nodes take new work; a draining node keeps what it runs. */
static void test_node_states_gate_placement(void **st)
{
    fx_t f;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    arb_job_t *r = fx_run(&f, "runner", 1, 2, 0);
    assert_int_equal(arb_node_transition(&f.c, N(&f, a), ARB_NODE_DRAINING, &f.err), 0);
    assert_int_equal(fx_busy(&f, a), 2); /* kept */
    arb_job_t *j = fx_add(&f, "j", 1, 1, 0);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), -ENOSPC);
    assert_int_equal(arb_node_transition(&f.c, N(&f, a), ARB_NODE_READY, &f.err), 0);
    assert_int_equal(arb_node_transition(&f.c, N(&f, a), ARB_NODE_NOT_READY, &f.err), 0);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), -ENOSPC);
    assert_int_equal(arb_node_transition(&f.c, N(&f, a), ARB_NODE_LEFT, &f.err), 0);
    assert_int_equal(arb_sched_place(f.s, j, &f.ctx), -ENOSPC);
    assert_int_equal(j->state, ARB_JOB_PENDING);
    assert_int_equal(j->nalloc, 0);
    assert_int_equal(arb_sched_finish(f.s, r, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(fx_busy(&f, a), 0);
    fx_free(&f);
}

/* ---- jobs ----------------------------------------------------------------- */

static const bool job_arrow[7][7] = {
    /*              PEND   PLACED RUN    PREEMP SUCC   FAIL   CANC */
    /* PENDING   */ {false, true, false, false, false, false, true},
    /* PLACED    */ {false, false, true, true, false, true, true},
    /* RUNNING   */ {false, false, false, true, true, true, true},
    /* PREEMPTED */ {true, false, false, false, false, false, true},
    /* SUCCEEDED */ {false, false, false, false, false, false, false},
    /* FAILED    */ {false, false, false, false, false, false, false},
    /* CANCELLED */ {false, false, false, false, false, false, false},
};

static void test_job_every_pair(void **st)
{
    for (int from = 0; from <= ARB_JOB_CANCELLED; from++)
        for (int to = 0; to <= ARB_JOB_CANCELLED; to++) {
            arb_job_t *j = arb_job_new("lc", 1);
            arb_err_t e = {{0}};
            j->state = (arb_job_state_t)from;
            int rc = arb_job_transition(j, (arb_job_state_t)to, &e);
            if (job_arrow[from][to]) {
                assert_int_equal(rc, 0);
                assert_int_equal(j->state, to);
            } else {
                assert_int_equal(rc, -EPERM);
                assert_int_equal(j->state, from);
                assert_non_null(strstr(e.msg, "'lc'"));
                assert_non_null(strstr(e.msg, arb_job_state_name((arb_job_state_t)from)));
                assert_non_null(strstr(e.msg, arb_job_state_name((arb_job_state_t)to)));
            }
            arb_job_free(j);
        }
}

static void test_job_terminal_and_bad_target(void **st)
{
    arb_job_t *j = arb_job_new("t", 1);
    arb_err_t e;
    assert_int_equal(arb_job_transition(j, (arb_job_state_t)42, &e), -EPERM);
    assert_int_equal(arb_job_transition(j, (arb_job_state_t)-3, &e), -EPERM);
    assert_int_equal(j->state, ARB_JOB_PENDING);
    /* One full life: submit, place, start, preempt, requeue, place, run, end. */
    static const arb_job_state_t life[] = {ARB_JOB_PLACED,   ARB_JOB_RUNNING, ARB_JOB_PREEMPTED,
                                           ARB_JOB_PENDING,  ARB_JOB_PLACED,  ARB_JOB_RUNNING,
                                           ARB_JOB_SUCCEEDED};
    for (size_t i = 0; i < sizeof life / sizeof life[0]; i++)
        assert_int_equal(arb_job_transition(j, life[i], &e), 0);
    for (int to = 0; to <= ARB_JOB_CANCELLED; to++)
        assert_int_equal(arb_job_transition(j, (arb_job_state_t)to, &e), -EPERM);
    assert_string_equal(arb_job_state_name((arb_job_state_t)77), "?");
    arb_job_free(j);
}

static void test_job_finalize_rejects(void **st)
{
    arb_err_t e;
    arb_job_t *j = arb_job_new("", 1);
    assert_int_equal(arb_job_finalize(j, &e), -EINVAL);
    arb_job_free(j);

    j = fx_job_new("both", 1, 1, 500);
    assert_int_equal(arb_job_finalize(j, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "both"));
    arb_job_free(j);

    j = fx_job_new("share", 1, 0, 1000);
    assert_int_equal(arb_job_finalize(j, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "1000m"));
    arb_job_free(j);

    j = fx_job_new("gang", 3, 1, 0);
    j->gang_min = 4;
    assert_int_equal(arb_job_finalize(j, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "gangMin"));
    arb_job_free(j);

    j = fx_job_new("neg", 1, 1, 0);
    j->groups[0].req.cpu_milli = -1;
    assert_int_equal(arb_job_finalize(j, &e), -EINVAL);
    arb_job_free(j);

    j = fx_job_new("tl", 1, 1, 0);
    j->time_limit_s = -5;
    assert_int_equal(arb_job_finalize(j, &e), -EINVAL);
    arb_job_free(j);

    j = fx_job_new("ok", 3, 2, 0);
    assert_int_equal(arb_job_finalize(j, &e), 0);
    assert_int_equal(j->ntasks, 3);
    assert_int_equal(j->gang_min, 3);
    assert_int_equal(j->groups[0].req.gpu_milli, 2000);
    arb_job_free(j);
}

/* arb_sched_finish: releases exactly when the job held allocations, rejects
 * illegal arrows without touching anything, and is not a way to put a job in
 * PLACED or RUNNING (that would hold nothing, breaking job.h invariant 1). */
static void test_finish_releases(void **st)
{
    fx_t f;
    fx_snap_t empty, busy, now;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    fx_snap(&f, &empty);

    arb_job_t *j = fx_run(&f, "j", 2, 2, 0);
    fx_snap(&f, &busy);
    assert_int_equal(j->state, ARB_JOB_PLACED);
    assert_int_equal(j->nalloc, 2);

    /* PLACED -> SUCCEEDED is not an arrow: nothing changes. */
    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_SUCCEEDED, &f.err), -EPERM);
    assert_non_null(strstr(f.err.msg, "placed"));
    fx_snap(&f, &now);
    fx_snap_equal(&busy, &now);
    assert_int_equal(j->nalloc, 2);

    /* Finishing into PLACED/RUNNING is refused and keeps the allocation. */
    assert_true(arb_sched_finish(f.s, j, ARB_JOB_RUNNING, &f.err) < 0);
    assert_int_equal(j->state, ARB_JOB_PLACED);
    fx_snap(&f, &now);
    fx_snap_equal(&busy, &now);

    assert_int_equal(arb_job_transition(j, ARB_JOB_RUNNING, &f.err), 0);
    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_SUCCEEDED, &f.err), 0);
    assert_int_equal(j->nalloc, 0);
    fx_snap(&f, &now);
    fx_snap_equal(&empty, &now);
    const arb_queue_t *q = arb_sched_queue(f.s, j->queue);
    assert_non_null(q);
    assert_int_equal(q->used.gpu_milli, 0);

    /* Terminal: no second finish. */
    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_FAILED, &f.err), -EPERM);
    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_CANCELLED, &f.err), -EPERM);

    /* A pending job cancelled: nothing to release; cannot be "finished" into
     * PLACED (it would hold nothing). */
    arb_job_t *p = fx_add(&f, "p", 1, 1, 0);
    assert_true(arb_sched_finish(f.s, p, ARB_JOB_PLACED, &f.err) < 0);
    assert_int_equal(p->state, ARB_JOB_PENDING);
    assert_int_equal(arb_sched_finish(f.s, p, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(arb_sched_place(f.s, p, &f.ctx), -EPERM);
    fx_snap(&f, &now);
    fx_snap_equal(&empty, &now);
    fx_free(&f);
}

/* PREEMPTED releases; the next cycle requeues the job and places it again. */
static void test_preempted_requeues(void **st)
{
    fx_t f;
    arb_cycle_stats_t cs;
    fx_init(&f);
    uint32_t a = fx_node(&f, "a", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    arb_job_t *j = fx_run(&f, "j", 1, 8, 0);
    assert_int_equal(arb_job_transition(j, ARB_JOB_RUNNING, &f.err), 0);
    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_PREEMPTED, &f.err), 0);
    assert_int_equal(fx_busy(&f, a), 0);
    assert_int_equal(j->state, ARB_JOB_PREEMPTED);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(cs.placed, 1);
    assert_int_equal(j->state, ARB_JOB_PLACED);
    assert_int_equal(fx_busy(&f, a), 8);
    /* A preempted job may be cancelled instead of requeued. */
    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_PREEMPTED, &f.err), 0);
    assert_int_equal(arb_sched_finish(f.s, j, ARB_JOB_CANCELLED, &f.err), 0);
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &cs), 0);
    assert_int_equal(cs.placed, 0);
    assert_int_equal(j->state, ARB_JOB_CANCELLED);
    assert_int_equal(fx_busy(&f, a), 0);
    fx_free(&f);
}

/* Submission: a job must be finalized, and is taken only once. */
static void test_submit_rejects(void **st)
{
    fx_t f;
    fx_init(&f);
    fx_node(&f, "a", 8, 1, NULL, 0);
    fx_sched(&f, "pack");
    arb_job_t *raw = fx_job_new("raw", 1, 1, 0);
    assert_int_equal(arb_sched_submit(f.s, raw, &f.ctx, &f.err), -EINVAL);
    assert_non_null(strstr(f.err.msg, "finalized"));
    assert_int_equal(arb_sched_njobs(f.s), 0);
    arb_job_t *j = fx_submit(&f, raw);
    assert_int_equal(j->id, 0);
    assert_int_equal(arb_sched_submit(f.s, j, &f.ctx, &f.err), -EEXIST);
    assert_non_null(strstr(f.err.msg, "'raw'"));
    assert_int_equal(arb_sched_njobs(f.s), 1);
    arb_job_t *k = fx_add(&f, "k", 1, 1, 0);
    assert_int_equal(k->id, 1);
    assert_true(k->seq > j->seq);
    assert_ptr_equal(arb_sched_job(f.s, 1), k);
    assert_null(arb_sched_job(f.s, 2));
    fx_free(&f); /* frees each job once (ASan would tell) */
}

/* Names live apart from the job, each sized to it, set only through the
 * setters: cut where the inline arrays cut them (95 and 63 bytes), "" for
 * none, a new one replacing the old (ASan sees the frees). */
static void test_job_names(void **st)
{
    char longer[200];
    arb_job_t *j;

    (void)st;
    memset(longer, 'n', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_non_null(j = arb_job_new(longer, 2));
    assert_int_equal(strlen(j->name), ARB_JOB_NAME_MAX - 1);
    assert_string_equal(j->groups[0].name, "");
    assert_string_equal(j->groups[1].name, "");
    assert_int_equal(arb_tgroup_set_name(&j->groups[0], longer), 0);
    assert_int_equal(strlen(j->groups[0].name), ARB_GROUP_NAME_MAX - 1);
    assert_int_equal(arb_tgroup_set_name(&j->groups[0], "launcher"), 0);
    assert_string_equal(j->groups[0].name, "launcher");
    assert_int_equal(arb_tgroup_set_name(&j->groups[1], NULL), 0);
    assert_string_equal(j->groups[1].name, "");
    assert_int_equal(arb_job_set_name(j, "train"), 0);
    assert_string_equal(j->name, "train");
    assert_int_equal(arb_job_set_name(j, ""), 0);
    assert_string_equal(j->name, "");
    arb_job_free(j);
    assert_non_null(j = arb_job_new(NULL, 0));
    assert_string_equal(j->name, "");
    arb_job_free(j);
}

static void test_topo_names(void **st)
{
    for (int i = 0; i <= ARB_TOPO_BLOCK; i++) {
        arb_topo_level_t l;
        assert_int_equal(arb_topo_level_parse(arb_topo_level_name((arb_topo_level_t)i), &l), 0);
        assert_int_equal(l, i);
    }
    arb_topo_level_t l;
    assert_int_equal(arb_topo_level_parse("galaxy", &l), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_every_pair),
        cmocka_unit_test(test_node_bad_target),
        cmocka_unit_test(test_node_state_names),
        cmocka_unit_test(test_node_walk_and_left),
        cmocka_unit_test(test_node_states_gate_placement),
        cmocka_unit_test(test_job_every_pair),
        cmocka_unit_test(test_job_terminal_and_bad_target),
        cmocka_unit_test(test_job_finalize_rejects),
        cmocka_unit_test(test_finish_releases),
        cmocka_unit_test(test_preempted_requeues),
        cmocka_unit_test(test_submit_rejects),
        cmocka_unit_test(test_job_names),
        cmocka_unit_test(test_topo_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
