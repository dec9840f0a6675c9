/*
 * agent.h: the node agent as one object: discovery, telemetry, executor,
 * lease and Lamport clock behind a transport (transport.h). agent_step is
 * one heartbeat; `arbiter agent` (src/cli/agent.c) calls it on a timer.
 *
 * One heartbeat: reap tasks; fence if the lease ran out; sample; send the
 * report (the inventory until the controller has acknowledged one); on an
 * acknowledgement renew the lease (or register), and, when the reply
 * carries the node's assignment list, apply it: start what is new (epoch
 * permitting), SIGTERM what is no longer listed or has stop, forget ended
 * tasks the list no longer names. Without an acknowledgement only time
 * passes. The clock comes in through conf.now, so tests drive it.
 *
 * Restarts: with conf.state_file, the live tasks and the lease (epoch,
 * expiry) are saved after every heartbeat; a restarted agent adopts the
 * tasks still running, keeps them only until the old lease's expiry unless
 * it registers again first, and then keeps those still assigned to it.
 */
#ifndef ARB_AGENT_AGENT_H
#define ARB_AGENT_AGENT_H

#include "agent/transport.h"

#define AGENT_DEFAULT_HEARTBEAT_NS 1000000000LL /* 1 s */
#define AGENT_DEFAULT_LEASE_NS 10000000000LL    /* 10 s */

typedef struct agent_conf {
    int64_t heartbeat_ns, lease_ns; /* 0: the defaults */
    agent_disc_opts_t disc;         /* disc.node_name is the node's name */
    agent_exec_conf_t exec;
    const agent_transport_ops_t *transport; /* NULL: stdout */
    const char *target;                     /* the transport's target */
    const char *state_file;                 /* NULL: no restart state */
    int64_t (*now)(void *ctx);              /* NULL: CLOCK_MONOTONIC */
    void *now_ctx;
    void (*log)(void *ctx, const char *msg); /* NULL: stderr */
    void *log_ctx;
} agent_conf_t;

typedef struct agent {
    agent_conf_t conf;
    agent_disc_t disc;
    agent_tel_t tel;
    agent_exec_t exec;
    agent_lease_t lease;
    agent_lamport_t clock;
    const agent_transport_ops_t *tr;
    void *tstate;
    bool inventory_acked; /* the controller has the inventory */
    bool failing;         /* the last report was not acknowledged */
    uint64_t reports, failures;
    agent_tel_sample_t last;
} agent_t;

/* Discover, start the executor and the transport, adopt survivors of a
 * previous run. Close with agent_close. */
int agent_open(agent_t *a, const agent_conf_t *c, arb_err_t *err);
/* One heartbeat. 0, or -errno when the report could not be made at all. */
int agent_step(agent_t *a, arb_err_t *err);
/* Stop: kill every task first when fence (a deliberate stop), or leave them
 * for the next run to adopt. */
void agent_close(agent_t *a, bool fence);

int64_t agent_mono_ns(void *ignored);

#endif
