/*
 * lease.h: the agent's side of its lease with the controller, as a pure
 * state machine (no clock, no I/O: time comes in as monotonic nanoseconds
 * read at the edge), the reconciliation of a restarted agent's tasks with
 * the controller's assignments, and the agent's Lamport clock.
 *
 * lease.c draws the machine and states its invariants. In short: a
 * heartbeat the controller acknowledged renews the lease from the moment it
 * was *sent*; when the lease runs out the agent fences (kills every task)
 * and refuses assignments until it registers again. The controller's epoch
 * (docs/api.md: bumped at each controller start, carried by every reply
 * and assignment) is a fencing token: the agent keeps the newest it has
 * seen, and neither an acknowledgement nor an assignment from an older
 * epoch (a controller that has since been restarted or deposed) counts.
 */
#ifndef ARB_AGENT_LEASE_H
#define ARB_AGENT_LEASE_H

#include "arbiter/arbiter.h"

typedef enum agent_lease_state {
    AGENT_LEASE_UNREGISTERED, /* no lease: register first */
    AGENT_LEASE_ACTIVE,       /* registered under epoch, lease running */
    AGENT_LEASE_FENCED,       /* lease lost: tasks killed, register again */
} agent_lease_state_t;

/* What the caller must do after a call. */
typedef enum agent_lease_action {
    AGENT_LEASE_NONE,
    AGENT_LEASE_FENCE, /* kill every task now (agent_exec_fence) */
} agent_lease_action_t;

typedef struct agent_lease {
    agent_lease_state_t state;
    int64_t lease_ns;   /* the lease's length */
    uint64_t epoch;     /* the newest controller epoch seen; 0 none */
    int64_t expires_ns; /* ACTIVE: fence at this instant; 0 none */
    int64_t last_ok_ns; /* send time of the last acknowledged heartbeat */
    uint64_t fences;    /* how often this agent fenced */
    int64_t fenced_ns;  /* when it last did */
    char why[128];      /* why it last fenced, for the report and the log */
} agent_lease_t;

void agent_lease_init(agent_lease_t *l, int64_t lease_ns);

/*
 * After a restart: the epoch and expiry a previous run of this agent
 * persisted (CLOCK_MONOTONIC is the machine's, so it survives the
 * restart). The machine starts UNREGISTERED; tasks left running by the
 * previous run are covered until expires_ns and fenced by the first tick
 * past it unless the agent has registered again by then.
 */
void agent_lease_restore(agent_lease_t *l, uint64_t epoch, int64_t expires_ns);

/*
 * The controller accepted a registration (the first report, with the
 * inventory) sent at sent_ns, under its epoch. UNREGISTERED or FENCED ->
 * ACTIVE. -EPERM when already ACTIVE (a running lease is renewed by
 * heartbeats, and a controller that lost the node says so through
 * agent_lease_lost); -ESTALE when epoch is older than the newest seen;
 * -ETIMEDOUT when the reply came after the lease it grants had run out.
 * Nothing changes on failure.
 */
int agent_lease_registered(agent_lease_t *l, uint64_t epoch, int64_t sent_ns, int64_t now_ns,
                           arb_err_t *err);

/*
 * The controller acknowledged a heartbeat sent at sent_ns under epoch. Runs
 * tick(now) first, so a lease that ran out stays lost however late the
 * acknowledgement comes. ACTIVE: renewed to sent_ns + lease (never
 * shortened), and a newer epoch (the controller restarted) becomes the
 * newest seen. An older epoch (a deposed controller) renews nothing:
 * -ESTALE. Not ACTIVE: -EPERM, no renewal.
 */
agent_lease_action_t agent_lease_heartbeat_ok(agent_lease_t *l, uint64_t epoch, int64_t sent_ns,
                                              int64_t now_ns, int *rc);

/* A heartbeat failed (no answer, an error): only time passes. */
agent_lease_action_t agent_lease_tick(agent_lease_t *l, int64_t now_ns);

/* The controller says this node is lost or unknown: ACTIVE -> FENCED. */
agent_lease_action_t agent_lease_lost(agent_lease_t *l, int64_t now_ns, const char *why);

/*
 * May an assignment made under epoch start now? Runs tick(now) first (and
 * *act says whether that fenced). 0 yes (a newer epoch becomes the newest
 * seen); -EPERM not registered or fenced; -ESTALE an epoch older than the
 * newest seen. err says which, in words.
 */
int agent_lease_check_assignment(agent_lease_t *l, uint64_t epoch, int64_t now_ns,
                                 agent_lease_action_t *act, arb_err_t *err);

/*
 * The controller said how long its lease for this node is: the agent's
 * lease becomes min(its configured length, that), so the agent fences no
 * later than the controller may declare the node lost. A running lease is
 * shortened to last_ok + the new length (never lengthened: only a
 * heartbeat renews it). ns <= 0 changes nothing.
 */
void agent_lease_set_length(agent_lease_t *l, int64_t configured_ns, int64_t controller_ns);

/* Nanoseconds of lease left (0 when not ACTIVE or run out). */
int64_t agent_lease_remaining(const agent_lease_t *l, int64_t now_ns);
const char *agent_lease_state_name(agent_lease_state_t s);

/* ---- reconciliation after a restart ------------------------------------------ */

/* A task as the agent knows it, or as an assignment names it. */
typedef struct agent_task_ref {
    char job[128];
    int task;
    uint64_t attempt; /* bumped by the controller at each requeue */
    uint64_t epoch;   /* the controller epoch it was assigned in */
    bool stop;        /* assignments: the controller asks for it to end */
} agent_task_ref_t;

typedef enum agent_recon_verdict {
    AGENT_RECON_ADOPT, /* still assigned, same attempt, not stopping: keep it */
    AGENT_RECON_KILL,  /* not ours any more (unlisted, another attempt, stop) */
} agent_recon_verdict_t;

/*
 * After a restart (and after the first report of a re-registration):
 * compare the tasks found running (local[0..nlocal)) with the controller's
 * authoritative list for this node (assigned[0..nassigned)). verdict[i]
 * says what to do with local[i]; missing[] (room for nassigned) gets the
 * index of every assignment without stop that has no local task of the same
 * attempt, *nmissing their count: the caller starts it if it is new (its
 * epoch not older than the newest seen) or reports it lost.
 */
void agent_reconcile(const agent_task_ref_t *local, int nlocal, const agent_task_ref_t *assigned,
                     int nassigned, agent_recon_verdict_t *verdict, int *missing, int *nmissing);

/* ---- Lamport clock ----------------------------------------------------------------- */

/* Event order between machines comes from here, never from wall clocks. */
typedef struct agent_lamport {
    uint64_t t;
} agent_lamport_t;

/* A local event (a report, a task starting or ending): the new time. */
static inline uint64_t agent_lamport_tick(agent_lamport_t *c)
{
    return ++c->t;
}

/* A message stamped remote arrived: the new time, above both. */
static inline uint64_t agent_lamport_recv(agent_lamport_t *c, uint64_t remote)
{
    c->t = (remote > c->t ? remote : c->t) + 1;
    return c->t;
}

#endif
