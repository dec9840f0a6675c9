/*
 * agent.h: the node agent as one object: discovery, telemetry, executor,
 * lease and Lamport clock behind a transport (transport.h). agent_step is
 * one heartbeat; `arbiter agent` (src/cli/agent.c) calls it on a timer.
 *
 * One heartbeat: reap tasks; fence if the lease ran out; sample; send the
 * report (the inventory until the controller has acknowledged one), taking
 * at most what is left of the lease; on an acknowledgement renew the lease
 * (or register), and, when the reply carries the node's assignment list,
 * apply it: start what is new (epoch permitting; gang members get their
 * rendezvous variables), SIGTERM what is no longer listed or has stop,
 * forget ended tasks the list no longer names. Without an acknowledgement
 * only time passes. The clock comes in through conf.now, so tests drive it.
 * Between heartbeats agent_tick reaps and fences on time.
 *
 * Fencing timing: the lease is min(--lease, the controller's lease_ms) and
 * runs from the send time of the last acknowledged report; the controller
 * counts its own, longer, lease from when that report arrived and adds a
 * grace before it places the node's tasks elsewhere (src/state/liveness.c).
 * A fence (lease run out, or the controller's {"lost": true}) kills every
 * task and sends the inventory again, to register anew.
 *
 * Pushed assignments (channel.h): with conf.push_wait_ns and the http
 * transport, a thread long-polls the node's assignment list, and the loop
 * applies what it brings (agent_push) as it applies a report's reply: lease
 * active, the list of the lease's epoch and newer (epoch, Lamport time)
 * than the last one applied, each assignment's epoch checked. A task that
 * ends is reported at once (a->urgent), which lets the controller place
 * the next task on its GPUs in the cycle that report triggers, and that
 * task comes back through the channel.
 *
 * Starts never block the loop (exec.h, agent_exec_begin): every new task
 * of a list is forked at once and reported running; the loop also polls
 * their start pipes (agent_poll_fds), and agent_tick settles each start
 * as its pipe says: running, or failed (reported as exit 126/127 at once).
 *
 * Restarts: with conf.state_file, the live tasks and the lease (epoch,
 * expiry) are saved after every heartbeat; a restarted agent adopts the
 * tasks still running, keeps them only until the old lease's expiry unless
 * it registers again first, and then keeps those still assigned to it.
 */
#ifndef ARB_AGENT_AGENT_H
#define ARB_AGENT_AGENT_H

#include "agent/channel.h"
#include "agent/transport.h"

#define AGENT_DEFAULT_HEARTBEAT_NS 1000000000LL /* 1 s */
#define AGENT_DEFAULT_LEASE_NS 10000000000LL    /* 10 s */

typedef struct agent_conf {
    int64_t heartbeat_ns, lease_ns; /* 0: the defaults */
    agent_disc_opts_t disc;         /* disc.node_name is the node's name */
    agent_exec_conf_t exec;
    const agent_transport_ops_t *transport; /* NULL: stdout */
    const char *target;                     /* the transport's target */
    const char *token;                      /* a bearer token; NULL none */
    agent_http_conn_t *conn;                /* http: a shared connection (emulation) */
    const tls_client_t *tls;                /* https: CA and this node's certificate */
    const char *address;       /* reported for gang rendezvous; NULL: the controller uses
                                  the address the reports come from */
    int64_t report_timeout_ns; /* at most this per report (0: only the lease bounds it) */
    int64_t incarnation;       /* this life's number in every report (0: the wall clock in ms at
                                  agent_open, so a restart's is larger; src/state/node.c "Lives") */
    const char *tel_proc_root; /* telemetry's /proc; NULL: disc.proc_root */
    int fake_busy_pct;         /* fake GPUs held by a task show this utilisation (0: 90;
                                  < 0: leave the fake telemetry alone) */
    const char *state_file;    /* NULL: no restart state */
    const char *queue_file;    /* a file holding one integer, the node's queue length (an
                                  inference server or sidecar writes it), read at every
                                  report as telemetry queue_length; NULL: not reported */
    const char *logs_url;      /* reported: where its log server is (logserve.h) */
    int64_t push_wait_ns;      /* the assignments channel's long poll (1..60 s); 0: no channel
                                  (the lists come with the reports' replies only) */
    int64_t (*now)(void *ctx); /* NULL: CLOCK_MONOTONIC */
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
    int64_t incarnation; /* this life's (conf.incarnation, or the time it opened) */
    const agent_transport_ops_t *tr;
    void *tstate;
    bool inventory_acked; /* the controller has the inventory */
    bool failing;         /* the last report was not acknowledged */
    bool warned_lease;    /* said once that the controller's lease is too short */
    bool urgent;          /* a task ended (or failed to start) since the last report: the
                             caller sends the next one now, not a heartbeat later */
    bool started;         /* a task started since the last report: the caller sends the
                             next one soon (src/cli/agent.c: 100 ms at most), so that the
                             exits of short tasks go in the same report */
    uint64_t reports, failures;
    agent_chan_t *chan;                /* NULL: none (channel.h) */
    uint64_t list_epoch, list_lamport; /* of the last list applied (report or channel) */
    uint64_t list_version;             /* its assignments_version; 0 not said */
    uint64_t pushes;                   /* lists applied from the channel */
    uint64_t pushes_same;              /* of them, the list already applied (its version) */
    uint64_t pushes_older;             /* lists from the channel not applied: older than the
                                          one applied, or of another lease */
    uint64_t starts;                   /* tasks started */
    int64_t start_ns, report_ns;       /* time spent starting them, in reports (said at close) */
    agent_tel_sample_t last;
    int64_t tel_at; /* when last sampled (0 never): once a heartbeat */
    char hostname[256];
    char log_dir[PATH_MAX]; /* absolute */
} agent_t;

/* Discover, start the executor and the transport, adopt survivors of a
 * previous run. Close with agent_close. */
int agent_open(agent_t *a, const agent_conf_t *c, arb_err_t *err);
/* One heartbeat. 0, or -errno when the report could not be made at all. */
int agent_step(agent_t *a, arb_err_t *err);
/* Between heartbeats: reap exits and fence the moment the lease runs out
 * (a reaped exit sets a->urgent). Returns the number of live tasks. */
int agent_tick(agent_t *a);
/* Take what the assignments channel brought (its descriptor, agent_push_fd,
 * was readable) and apply it under the lease's rules. 1 applied, 0 nothing
 * (or not applicable now: the reports will carry it). */
int agent_push(agent_t *a);
/* The channel's descriptor to poll, or -1 without one. */
int agent_push_fd(const agent_t *a);
/* The start pipes of the tasks still starting (agent_exec_start_fds): a
 * readable one means agent_tick has a start to settle. */
int agent_poll_fds(const agent_t *a, struct pollfd *pf, int max);
/* Stop: kill every task first when fence (a deliberate stop), or leave them
 * for the next run to adopt. */
void agent_close(agent_t *a, bool fence);

int64_t agent_mono_ns(void *ignored);

#endif
