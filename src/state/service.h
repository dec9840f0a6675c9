/*
 * service.h: service jobs in the resource manager (`kind: service`): a
 * long-running job of N replicas that the controller keeps alive, scales
 * on live load, and publishes as endpoints for balancers. Private to
 * src/state (service.c, probe.c, and hooks in jobs.c, cycle.c, codec.c, recover.c).
 *
 * Model. The service is a parent job (job 7, kind service) that the
 * scheduler never sees: it holds nothing and stays RUNNING until it is
 * cancelled. Each replica i is a child job of one task ("web-2"), submitted
 * to the scheduler like any job, with the parent's priority, queue, command
 * and env, plus PORT = ARBITER_PORT = port + i, ARBITER_REPLICA = i,
 * ARBITER_SERVICE = name. Replicas below the service's minimum are not
 * preemptible; those above it are (the cluster may take them back).
 *
 * Replica lifecycle (st_service_reconcile, once per scheduling cycle):
 *
 *                 child ends (exit, failure)        backoff passed
 *   [none] --start--> ALIVE --------------------> BACKOFF ----------+
 *     ^                 |  \                                         |
 *     |                 |   +-- index >= desired --> DRAINING        |
 *     |                 |        (endpoint marked draining;          |
 *     |                 |         in-flight 0 or drain timeout:      |
 *     |                 |         the child is cancelled)            |
 *     +-----------------+<-------------------------------------------+
 *
 * A lost replica (its node died) is requeued by the ordinary lost-task
 * path (liveness.c) and placed wherever it fits. Backoff doubles from 1 s
 * to 30 s per consecutive failure and resets once the replica is ready.
 *
 * Ready: a replica is ready when its health path answers 2xx (probe.c
 * probes from the controller; the balancer's own active checks are the
 * second line). Endpoints carry a version, bumped on every change of the
 * set (address, ready, draining), so a balancer long-polls for changes.
 *
 * Invariants: (1) a service holds at most one live child per index;
 * (2) a replica index below min is never preemptible; (3) only indexes
 * >= desired are drained, and only drained replicas are stopped by scaling.
 */
#ifndef ARB_STATE_SERVICE_H
#define ARB_STATE_SERVICE_H

#include "arbiter/autoscale.h"
#include "spec/service_spec.h"

struct st_job;
struct st;

typedef spec_service_t st_svc_conf_t; /* the spec's settings (spec/service_spec.h) */

typedef struct st_replica {
    uint64_t job; /* its child job; 0 none yet */
    bool counted; /* its ending was counted (restart scheduled) */
    bool ready, draining;
    int probe_fails;  /* consecutive failed health probes */
    int64_t drain_ns; /* when draining started (mono) */
    int restarts;     /* consecutive failures */
    int64_t retry_ns; /* mono: no restart before */
    double inflight;  /* balancers' in-flight count */
    double queue;     /* requests waiting at the replica (its own report) */
    int64_t load_ns;  /* mono of the last load report; 0 none */
    char addr[80];    /* "host:port" while placed, "" otherwise */
} st_replica_t;

typedef struct st_svc {
    st_svc_conf_t conf;
    int desired;
    int nrep; /* entries in rep (>= desired while draining) */
    st_replica_t *rep;
    uint64_t version; /* endpoints version */
    uint64_t sig;     /* hash of the endpoints last published */
    arb_as_state_t as;
    int64_t as_next_ns;     /* next autoscale sample */
    arb_as_decision_t last; /* the last autoscale decision */
} st_svc_t;

#endif
