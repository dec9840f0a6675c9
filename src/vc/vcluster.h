/*
 * vcluster.h: a virtual cluster: the controller's own state machine
 * (src/state over a real SQLite store) on a virtual clock, with simulated
 * agents, all in one thread and no sockets.
 *
 * What runs is the controller's code: submissions, agents' reports and
 * their replies, the scheduling cycle (st_cycle: leases, services,
 * preemption with grace periods, backfill, elastic resizes), cancels,
 * drains and recovery from the store (vc_restart). What is simulated is
 * everything outside the controller's process: time (vc_advance; nothing
 * happens between two calls) and the agents. A simulated agent keeps the
 * real agent's rules: the lease and self-fencing of src/agent/lease.c, the
 * reply parser of src/agent/report.c, and the executor's rules for an
 * assignment (start what is new, SIGTERM what is no longer ours, a GPU is
 * handed over only once the task that held it has exited, nothing from an
 * older epoch starts).
 *
 * A simulated task does what its command says:
 *   ["vc", "run=SECONDS", "exit=CODE", "term=SECONDS"]
 * runs SECONDS (0: until stopped), then exits CODE; on SIGTERM it exits
 * after term SECONDS (SIGKILL at the grace period if that is sooner). Any
 * other command (or none) runs until stopped and exits at once on SIGTERM
 * (the `arbiter place` case: nothing finishes by itself).
 *
 * Users: `arbiter place` (src/cli/place.c) replays a scenario through it,
 * so its answer is the live controller's; the deterministic simulation
 * test (tests/dst/) drives it with a seeded generator and checks the
 * invariants after every step.
 *
 * Return convention: arbiter.h. Not thread-safe (one caller).
 */
#ifndef ARB_VC_VCLUSTER_H
#define ARB_VC_VCLUSTER_H

#include <jansson.h>

#include "state/state.h"

typedef struct vc vc_t;

typedef struct vc_conf {
    const char *dir;      /* the store's data directory (exists; the caller removes it) */
    const st_conf_t *st;  /* the controller's configuration (copied at each open) */
    int64_t start_ns;     /* the virtual clock at start; > 0 (default 1000 s) */
    int64_t heartbeat_ns; /* an agent reports this often (default 1 s) */
    int64_t grace_ns;     /* an agent's SIGTERM -> SIGKILL default (default 10 s) */
} vc_conf_t;

/* A simulated task, as its agent knows it. */
typedef enum vc_task_state {
    VC_RUNNING,
    VC_STOPPING, /* SIGTERM sent; it exits at stop_at */
    VC_EXITED,
} vc_task_state_t;

typedef struct vc_task {
    uint64_t job;
    int task;
    uint64_t attempt, epoch;
    vc_task_state_t state;
    int64_t start_ns, end_at, stop_at; /* end_at: natural end, INT64_MAX never */
    int64_t term_ns;                   /* how long it takes to exit on SIGTERM */
    int64_t grace_ns;                  /* SIGTERM -> SIGKILL */
    int64_t deadline;                  /* its time limit, on the agent's clock; 0 none */
    int exit_code;
    bool lost; /* killed by the agent's fence */
    int ngpus;
    int gpus[16];
    int gpu_milli; /* per GPU */
} vc_task_t;

typedef struct vc_node {
    char name[64];
    json_t *inv; /* its inventory (owned) */
    bool up;     /* the agent runs */
    bool cut;    /* partitioned: runs, but its reports do not arrive */
    bool registered;
    int64_t lamport;
    int64_t incarnation; /* its agent's life: one more at every vc_agent_up */
    int64_t next_report;
    uint64_t fences;
    uint16_t sick; /* GPUs its telemetry reports unhealthy (fallen off the bus) */
    vc_task_t *t;  /* owned */
    int nt, cap;
    char *prev_body, *last_body; /* the last two report bodies sent (replays) */
    void *lease;                 /* agent_lease_t, owned */
} vc_node_t;

/* Open the controller over c->dir (recovering what is there). */
int vc_open(const vc_conf_t *c, vc_t **out, arb_err_t *err);
/* Close the controller (what is queued is written) and free everything. */
void vc_close(vc_t *v);
/* Close and reopen the controller on the same store (a restart: recovery,
 * a new epoch). The agents go on as they were. */
int vc_restart(vc_t *v, arb_err_t *err);

st_t *vc_state(vc_t *v);
int64_t vc_now(const vc_t *v);
/* Time passes; nothing else happens. */
void vc_advance(vc_t *v, int64_t dt_ns);

/* A new node whose agent registers with inventory inv (a reference is
 * taken) at its first report. Returns its index. */
int vc_node_add(vc_t *v, const char *name, json_t *inv);
int vc_nnodes(const vc_t *v);
vc_node_t *vc_node(vc_t *v, int i);
/* The agent of node i stops (up false: no reports, its tasks die with it
 * when kill is set) or starts again (it registers anew, without state). */
void vc_agent_down(vc_t *v, int i, bool kill);
void vc_agent_up(vc_t *v, int i);
/* Cut node i off from the controller, or heal it. */
void vc_cut(vc_t *v, int i, bool cut);

/* One report of node i's agent now (its tasks advanced to now first).
 * 0, or the controller's error for the report (err says what). */
int vc_report(vc_t *v, int i, arb_err_t *err);
/* Send node i's report before last again (a late or duplicated copy). */
int vc_replay(vc_t *v, int i, arb_err_t *err);
/* Every agent whose heartbeat is due (or that has news) reports. */
int vc_heartbeats(vc_t *v, arb_err_t *err);
/* One scheduling cycle, written through. */
int vc_cycle(vc_t *v, arb_cycle_stats_t *st, arb_err_t *err);
/* Heartbeats and cycles, one heartbeat interval apart, until nothing
 * changes (no event) for `quiet` rounds or max rounds passed. Returns the
 * rounds run. */
int vc_settle(vc_t *v, int quiet, int max, arb_err_t *err);

/* Submit a job spec (YAML) as who; *id its id. */
int vc_submit(vc_t *v, const st_who_t *who, const char *yaml, uint64_t *id, arb_err_t *err);

/* Safety, as the agents see it: no two live copies of one task (any
 * attempt) on any nodes, and no GPU of a node shared beyond its capacity
 * by live tasks. 0 or -EFAULT with what broke. */
int vc_check_agents(vc_t *v, arb_err_t *err);

#endif
