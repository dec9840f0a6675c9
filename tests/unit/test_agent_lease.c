/*
 * test_agent_lease.c: the agent's lease and fencing state machine, the
 * restart reconciliation and the Lamport clock (src/agent/lease.c). Every
 * arrow of the diagram at the top of lease.c, every refusal, and the
 * invariants: an expired lease is never renewed, the lease ends no later
 * than the last acknowledged send + lease, the newest epoch seen only grows
 * and nothing from an older one counts, leaving ACTIVE always fences.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "agent/lease.h"

#define S 1000000000LL /* one second in ns */
#define LEASE (10 * S)

static agent_lease_t active(uint64_t epoch, int64_t at)
{
    agent_lease_t l;
    arb_err_t err;

    agent_lease_init(&l, LEASE);
    assert_int_equal(agent_lease_registered(&l, epoch, at, at, &err), 0);
    return l;
}

static void test_register(void **st)
{
    agent_lease_t l;
    arb_err_t err = {{0}};

    agent_lease_init(&l, LEASE);
    assert_int_equal(l.state, AGENT_LEASE_UNREGISTERED);
    assert_string_equal(agent_lease_state_name(l.state), "unregistered");
    assert_int_equal(agent_lease_remaining(&l, 0), 0);
    /* Nothing to fence before the first registration. */
    assert_int_equal(agent_lease_tick(&l, 100 * S), AGENT_LEASE_NONE);
    assert_int_equal(agent_lease_lost(&l, 100 * S, NULL), AGENT_LEASE_NONE);
    assert_int_equal(l.state, AGENT_LEASE_UNREGISTERED);

    /* UNREGISTERED -> ACTIVE: the lease counts from the send. */
    assert_int_equal(agent_lease_registered(&l, 1, 100 * S, 101 * S, &err), 0);
    assert_int_equal(l.state, AGENT_LEASE_ACTIVE);
    assert_int_equal(l.epoch, 1);
    assert_int_equal(l.expires_ns, 110 * S);
    assert_int_equal(agent_lease_remaining(&l, 101 * S), 9 * S);
    assert_string_equal(agent_lease_state_name(l.state), "active");

    /* ACTIVE: registering again is refused and changes nothing. */
    assert_int_equal(agent_lease_registered(&l, 2, 102 * S, 102 * S, &err), -EPERM);
    assert_non_null(strstr(err.msg, "already registered (epoch 1)"));
    assert_int_equal(l.epoch, 1);
    assert_int_equal(l.expires_ns, 110 * S);

    /* A reply that comes after the lease it grants: refused. */
    agent_lease_init(&l, LEASE);
    assert_int_equal(agent_lease_registered(&l, 1, 0, LEASE, &err), -ETIMEDOUT);
    assert_int_equal(l.state, AGENT_LEASE_UNREGISTERED);
    /* Epoch 0 is "none": not a registration. */
    assert_int_equal(agent_lease_registered(&l, 0, 0, 0, &err), -ESTALE);
}

static void test_renew(void **st)
{
    agent_lease_t l = active(3, 0);
    int rc;

    /* ACTIVE -> ACTIVE: renewed from the send time, not the reply's. */
    assert_int_equal(agent_lease_heartbeat_ok(&l, 3, 1 * S, 4 * S, &rc), AGENT_LEASE_NONE);
    assert_int_equal(rc, 0);
    assert_int_equal(l.expires_ns, 11 * S);
    assert_int_equal(l.last_ok_ns, 1 * S);
    /* A late reply to an older heartbeat never shortens the lease. */
    assert_int_equal(agent_lease_heartbeat_ok(&l, 3, S / 2, 5 * S, &rc), AGENT_LEASE_NONE);
    assert_int_equal(rc, 0);
    assert_int_equal(l.expires_ns, 11 * S);
    /* An older epoch's reply (a deposed controller): renews nothing. */
    assert_int_equal(agent_lease_heartbeat_ok(&l, 2, 6 * S, 6 * S, &rc), AGENT_LEASE_NONE);
    assert_int_equal(rc, -ESTALE);
    assert_int_equal(l.expires_ns, 11 * S);
    assert_int_equal(l.epoch, 3);
    /* Heartbeats keep it alive for as long as they come. */
    for (int64_t t = 2; t < 100; t++) {
        assert_int_equal(agent_lease_heartbeat_ok(&l, 3, t * S, t * S + S / 10, &rc),
                         AGENT_LEASE_NONE);
        assert_int_equal(rc, 0);
        assert_int_equal(agent_lease_tick(&l, t * S + S / 2), AGENT_LEASE_NONE);
    }
    assert_int_equal(l.state, AGENT_LEASE_ACTIVE);
    assert_int_equal(l.fences, 0);
}

static void test_expire_fences(void **st)
{
    agent_lease_t l = active(1, 0);
    int rc;

    /* Failed heartbeats: only time passes; just before the end, still active. */
    assert_int_equal(agent_lease_tick(&l, LEASE - 1), AGENT_LEASE_NONE);
    assert_int_equal(l.state, AGENT_LEASE_ACTIVE);
    /* ACTIVE -> FENCED at the instant the lease ends. */
    assert_int_equal(agent_lease_tick(&l, LEASE), AGENT_LEASE_FENCE);
    assert_int_equal(l.state, AGENT_LEASE_FENCED);
    assert_int_equal(l.fences, 1);
    assert_int_equal(l.fenced_ns, LEASE);
    assert_non_null(strstr(l.why, "longer than the lease"));
    assert_string_equal(agent_lease_state_name(l.state), "fenced");
    assert_int_equal(agent_lease_remaining(&l, LEASE), 0);
    /* Fenced once: later ticks ask for nothing more. */
    assert_int_equal(agent_lease_tick(&l, 2 * LEASE), AGENT_LEASE_NONE);
    assert_int_equal(l.fences, 1);
    /* Invariant 5: a heartbeat reply never revives a lost lease. */
    assert_int_equal(agent_lease_heartbeat_ok(&l, 1, LEASE - 1, LEASE + 1, &rc), AGENT_LEASE_NONE);
    assert_int_equal(rc, -EPERM);
    assert_int_equal(l.state, AGENT_LEASE_FENCED);

    /* A late acknowledgement arriving after the end fences first (invariant 1). */
    l = active(1, 0);
    assert_int_equal(agent_lease_heartbeat_ok(&l, 1, LEASE - 1, LEASE, &rc), AGENT_LEASE_FENCE);
    assert_int_equal(rc, -EPERM);
    assert_int_equal(l.state, AGENT_LEASE_FENCED);
}

static void test_lost_and_newer_epoch(void **st)
{
    agent_lease_t l = active(4, 0);
    int rc;

    /* The controller restarted: a newer epoch renews and becomes the newest. */
    assert_int_equal(agent_lease_heartbeat_ok(&l, 5, S, S, &rc), AGENT_LEASE_NONE);
    assert_int_equal(rc, 0);
    assert_int_equal(l.state, AGENT_LEASE_ACTIVE);
    assert_int_equal(l.epoch, 5);
    assert_int_equal(l.expires_ns, S + LEASE);
    /* From now on epoch 4 counts for nothing. */
    assert_int_equal(agent_lease_heartbeat_ok(&l, 4, 2 * S, 2 * S, &rc), AGENT_LEASE_NONE);
    assert_int_equal(rc, -ESTALE);
    assert_int_equal(l.expires_ns, S + LEASE);
    assert_int_equal(agent_lease_check_assignment(&l, 4, 2 * S, NULL, NULL), -ESTALE);

    /* ACTIVE -> FENCED: the controller says the node is lost. */
    assert_int_equal(agent_lease_lost(&l, S, "node unknown to the controller"), AGENT_LEASE_FENCE);
    assert_int_equal(l.state, AGENT_LEASE_FENCED);
    assert_string_equal(l.why, "node unknown to the controller");
    assert_int_equal(agent_lease_lost(&l, 2 * S, NULL), AGENT_LEASE_NONE); /* once */
    assert_int_equal(l.fences, 1);
}

static void test_reregister(void **st)
{
    agent_lease_t l = active(7, 0);
    arb_err_t err = {{0}};

    assert_int_equal(agent_lease_tick(&l, LEASE), AGENT_LEASE_FENCE);
    /* FENCED -> ACTIVE: not from an older epoch (invariant 3). */
    assert_int_equal(agent_lease_registered(&l, 6, 20 * S, 20 * S, &err), -ESTALE);
    assert_non_null(strstr(err.msg, "epoch 6, older than 7"));
    assert_int_equal(l.state, AGENT_LEASE_FENCED);
    /* The same controller (same epoch) takes the node back. */
    assert_int_equal(agent_lease_registered(&l, 7, 20 * S, 21 * S, &err), 0);
    assert_int_equal(l.state, AGENT_LEASE_ACTIVE);
    assert_int_equal(l.epoch, 7);
    assert_int_equal(l.expires_ns, 30 * S);
    assert_int_equal(l.fences, 1);
}

static void test_assignments(void **st)
{
    agent_lease_t l;
    agent_lease_action_t act;
    arb_err_t err = {{0}};

    agent_lease_init(&l, LEASE);
    assert_int_equal(agent_lease_check_assignment(&l, 1, 0, &act, &err), -EPERM);
    assert_non_null(strstr(err.msg, "the agent is unregistered"));

    l = active(5, 0);
    assert_int_equal(agent_lease_check_assignment(&l, 5, S, &act, &err), 0);
    assert_int_equal(act, AGENT_LEASE_NONE);
    assert_int_equal(agent_lease_check_assignment(&l, 4, S, &act, &err), -ESTALE);
    assert_non_null(strstr(err.msg, "made under epoch 4, older than the controller's epoch 5"));
    /* A newer epoch: accepted, and older ones are refused from then on. */
    assert_int_equal(agent_lease_check_assignment(&l, 6, S, &act, &err), 0);
    assert_int_equal(l.epoch, 6);
    assert_int_equal(agent_lease_check_assignment(&l, 5, S, &act, &err), -ESTALE);
    /* Past the lease: the check fences first and refuses. */
    assert_int_equal(agent_lease_check_assignment(&l, 5, LEASE, &act, &err), -EPERM);
    assert_int_equal(act, AGENT_LEASE_FENCE);
    assert_non_null(strstr(err.msg, "the agent is fenced"));
    assert_int_equal(agent_lease_check_assignment(&l, 5, LEASE + 1, &act, &err), -EPERM);
    assert_int_equal(act, AGENT_LEASE_NONE);
}

static void test_restore(void **st)
{
    agent_lease_t l;
    arb_err_t err = {{0}};

    /* A restarted agent: old tasks are covered until the old expiry... */
    agent_lease_init(&l, LEASE);
    agent_lease_restore(&l, 9, 50 * S);
    assert_int_equal(l.state, AGENT_LEASE_UNREGISTERED);
    assert_int_equal(agent_lease_tick(&l, 49 * S), AGENT_LEASE_NONE);
    assert_int_equal(agent_lease_check_assignment(&l, 9, 49 * S, NULL, &err), -EPERM);
    /* ...then UNREGISTERED -> FENCED kills them. */
    assert_int_equal(agent_lease_tick(&l, 50 * S), AGENT_LEASE_FENCE);
    assert_int_equal(l.state, AGENT_LEASE_FENCED);
    assert_non_null(strstr(l.why, "restarted"));

    /* Registering in time, not under an epoch older than the persisted one. */
    agent_lease_init(&l, LEASE);
    agent_lease_restore(&l, 9, 50 * S);
    assert_int_equal(agent_lease_registered(&l, 8, 45 * S, 45 * S, &err), -ESTALE);
    assert_int_equal(agent_lease_registered(&l, 10, 45 * S, 46 * S, &err), 0);
    assert_int_equal(l.expires_ns, 55 * S);
    assert_int_equal(agent_lease_tick(&l, 54 * S), AGENT_LEASE_NONE);
}

static void test_reconcile(void **st)
{
    /* job, task, attempt, epoch, stop */
    agent_task_ref_t local[] = {{"7", 0, 1, 3, false},
                                {"7", 1, 1, 3, false},
                                {"4", 0, 2, 2, false},
                                {"9", 0, 1, 3, false},
                                {"12", 0, 1, 3, false}};
    agent_task_ref_t assigned[] = {{"7", 0, 1, 3, false},   /* same attempt: adopt */
                                   {"7", 1, 2, 4, false},   /* requeued since: kill, missing */
                                   {"9", 0, 1, 3, true},    /* stop: kill, not missing */
                                   {"12", 0, 1, 3, false},  /* adopt (epoch is the placement's) */
                                   {"20", 2, 1, 4, false}}; /* new here: missing */
    agent_recon_verdict_t v[5];
    int missing[5], nmissing;

    agent_reconcile(local, 5, assigned, 5, v, missing, &nmissing);
    assert_int_equal(v[0], AGENT_RECON_ADOPT);
    assert_int_equal(v[1], AGENT_RECON_KILL);
    assert_int_equal(v[2], AGENT_RECON_KILL); /* not assigned any more */
    assert_int_equal(v[3], AGENT_RECON_KILL);
    assert_int_equal(v[4], AGENT_RECON_ADOPT);
    assert_int_equal(nmissing, 2);
    assert_int_equal(missing[0], 1);
    assert_int_equal(missing[1], 4);

    agent_reconcile(local, 5, NULL, 0, v, missing, &nmissing);
    for (int i = 0; i < 5; i++)
        assert_int_equal(v[i], AGENT_RECON_KILL);
    assert_int_equal(nmissing, 0);
    agent_reconcile(NULL, 0, assigned, 5, v, missing, &nmissing);
    assert_int_equal(nmissing, 4); /* every one without stop */
}

/* The controller's lease caps ours; a running lease is cut to
 * last_ok + the new length and never lengthened by it. */
static void test_set_length(void **st)
{
    agent_lease_t l = active(1, 100 * S);

    agent_lease_set_length(&l, LEASE, 0); /* not said: unchanged */
    assert_int_equal(l.lease_ns, LEASE);
    agent_lease_set_length(&l, LEASE, 4 * S);
    assert_int_equal(l.lease_ns, 4 * S);
    assert_int_equal(l.expires_ns, 104 * S);
    assert_int_equal(agent_lease_tick(&l, 104 * S), AGENT_LEASE_FENCE);
    l = active(1, 200 * S);
    agent_lease_set_length(&l, LEASE, 30 * S); /* longer than ours: ours holds */
    assert_int_equal(l.lease_ns, LEASE);
    assert_int_equal(l.expires_ns, 210 * S);
    agent_lease_set_length(&l, 4 * S, 30 * S);
    assert_int_equal(l.expires_ns, 204 * S);
    int rc;
    assert_int_equal(agent_lease_heartbeat_ok(&l, 1, 203 * S, 203 * S, &rc), AGENT_LEASE_NONE);
    assert_int_equal(rc, 0);
    assert_int_equal(l.expires_ns, 207 * S);
}

static void test_lamport(void **st)
{
    agent_lamport_t c = {0};

    assert_int_equal(agent_lamport_tick(&c), 1);
    assert_int_equal(agent_lamport_tick(&c), 2);
    assert_int_equal(agent_lamport_recv(&c, 10), 11); /* behind: jump past the sender */
    assert_int_equal(agent_lamport_recv(&c, 3), 12);  /* ahead: still move on */
    assert_int_equal(agent_lamport_tick(&c), 13);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register),      cmocka_unit_test(test_renew),
        cmocka_unit_test(test_expire_fences), cmocka_unit_test(test_lost_and_newer_epoch),
        cmocka_unit_test(test_reregister),    cmocka_unit_test(test_assignments),
        cmocka_unit_test(test_restore),       cmocka_unit_test(test_reconcile),
        cmocka_unit_test(test_lamport),       cmocka_unit_test(test_set_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
