/*
 * emulate.h: one process playing many nodes (`arbiter agent --emulate K`),
 * so that the controller can be tested and measured with thousands of
 * nodes on one machine.
 *
 * Each emulated node is a whole agent_t (agent.h): fake GPUs, its own
 * lease, Lamport clock, executor and log directory (LOG_DIR/NODE), so what
 * the controller sees is what real agents send. What differs: discovery
 * skips hwloc, telemetry skips the host's /proc (each node would report the
 * same machine), tasks run as real processes without cgroups, and a node
 * checks its lease at its heartbeats only (up to one heartbeat late, well
 * inside the controller's grace). Nodes are named PREFIX-1 .. PREFIX-K and
 * spread over a few threads, each with one keep-alive connection, their
 * heartbeats spaced evenly over the interval.
 *
 * It measures what it sends: reports per second, failures, and the round
 * trip of each report (p50, p90, p99, max), printed every stats interval
 * and in total (since the start, or since the last *reset).
 */
#ifndef ARB_AGENT_EMULATE_H
#define ARB_AGENT_EMULATE_H

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "agent/agent.h"

typedef struct agent_emu_conf {
    agent_conf_t base;   /* every node's template; disc.node_name is the prefix,
                            exec.log_dir the parent of the nodes' log dirs */
    int nodes;           /* K >= 1 */
    int threads;         /* 0: min(K, 4) */
    int64_t duration_ns; /* 0: until *stop */
    int64_t stats_ns;    /* a line this often; 0: 10 s */
    atomic_int *stop;    /* set by a signal handler, read by every thread */
    atomic_int *reset;   /* set by a signal handler: the totals start
                            again from now (`bench agents` measures a
                            window after every node has registered) */
    FILE *out;           /* stats lines; NULL: stderr */
} agent_emu_conf_t;

typedef struct agent_emu_stats {
    int nodes, threads, registered;
    double seconds;
    uint64_t reports, failures, fences;
    double per_s;
    double p50_ms, p90_ms, p99_ms, max_ms; /* report round trips */
} agent_emu_stats_t;

/* Run until duration or *stop; the totals into *st. 0, or -errno when
 * the nodes could not be set up (err says which and why). */
int agent_emulate(const agent_emu_conf_t *c, agent_emu_stats_t *st, arb_err_t *err);

#endif
