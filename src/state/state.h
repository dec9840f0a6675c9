/*
 * state.h: the resource manager: the controller's authoritative record of
 * nodes, jobs and allocations (who holds what), over core's arb_cluster_t
 * and arb_sched_t, made durable in the store (src/store).
 *
 * What it owns:
 *   - jobs with a public id (1, 2, ... never reused), the submitting team
 *     and user, a version bumped on every change, task states and exit
 *     codes, and the epoch of their current assignment;
 *   - nodes from agents' reports (inventory, telemetry, report age), drain;
 *   - a Lamport clock: every event takes max(local, remote) + 1, so the
 *     event log (GET /v1/events?since=N) is ordered causally, never by wall
 *     clocks; wall-clock times are kept for people only. No input moves it
 *     more than ST_LAMPORT_STEP beyond its own time (DESIGN.md invariant 9):
 *     a report further ahead is refused whole. It never passes
 *     ST_LAMPORT_MAX; a start that finds it past ST_LAMPORT_REBASE renumbers
 *     it (recover.c), keeping every order;
 *   - an epoch, bumped on every controller start and stamped on every
 *     assignment (DESIGN.md invariant 4: an agent refuses assignments older
 *     than the newest epoch it has seen);
 *   - the scheduler thread: a cycle after every change (and every interval),
 *     whose decisions are written in one transaction.
 *
 * Durability: every mutation is applied in memory under the state lock and
 * queued, in the same order, to the store's group committer. Each call that
 * changes or reads state returns a ticket; the caller must st_wait() for it
 * before answering its client, so nothing is acknowledged, nor shown, before
 * it is durable. A failed commit is fatal (st_wait returns -EIO): the
 * process must exit and recover from the store, which holds exactly the
 * acknowledged history.
 *
 * Recovery (st_open): nodes (in their original order), then jobs in id
 * order (so queue order is kept), their allocations re-charged through
 * arb_node_alloc (which refuses over-allocation: a conflict is reported as
 * an event and the job requeued, never double-booked), quotas, the clock
 * (from a persisted high-water mark) and the event log.
 *
 * Every function returns 0 or a negative errno with text in err:
 * -EINVAL invalid input (422), -EBADMSG malformed body (400), -ENOENT no
 * such object (404), -EACCES outside the caller's rights (403), -ESTALE an
 * If-Match version that does not match (409), -EPERM an illegal transition
 * (409), -EBUSY a conflict with current state (409), -EIO the store failed
 * (503). The interface is plain C (docs/architecture.md, "The state's
 * interface"): no JSON crosses it, the wire format is src/api's.
 */
#ifndef ARB_STATE_H
#define ARB_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arbiter/autoscale.h"
#include "arbiter/sched.h"
#include "spec/job_json.h"
#include "spec/scenario.h"
#include "store/store.h"

typedef struct st st_t;

/* ---- configuration --------------------------------------------------------- */

#define ST_NAME_MAX 64

/* Where the controller's time comes from. Both NULL: the system clocks
 * (CLOCK_MONOTONIC for leases, ages and the scheduler, CLOCK_REALTIME for
 * the times shown to people). The deterministic simulation test and
 * `arbiter place` pass a virtual clock, so the very same state machine runs
 * on simulated time (st_now_ns, st_now_ms). Waits of threads (long polls,
 * the scheduler thread's interval, health probes) stay on real time. */
typedef struct st_clock {
    int64_t (*mono_ns)(void *arg);
    int64_t (*wall_ms)(void *arg);
    void *arg;
} st_clock_t;

typedef struct st_queue_conf {
    char name[ST_NAME_MAX];
    char cohort[ST_NAME_MAX];
    bool has_quota;
    arb_res_t nominal, borrow_limit;
    double weight;
    int64_t default_limit_s; /* defaultTimeLimit: a job without timeLimit gets it (0: none) */
    int64_t max_limit_s;     /* maxTimeLimit: no longer timeLimit (0: none) */
} st_queue_conf_t;

typedef struct st_conf {
    char policy[32]; /* scoring profile ("default", "pack", ...) */
    arb_queue_policy_t queue_policy;
    bool backfill, preemption;
    int64_t starvation_ns;
    int64_t default_limit_s;   /* scheduler.defaultTimeLimit, for queues without their own */
    int64_t max_limit_s;       /* scheduler.maxTimeLimit, likewise */
    int64_t interval_ns;       /* scheduler cycle at least this often (default 1 s) */
    int64_t lease_ns;          /* node silent longer: NotReady (default 10 s) */
    int64_t grace_ns;          /* then this long more: its tasks are lost (default 5 s) */
    int64_t stale_ns;          /* filter nodes whose report is older (default lease / 2; 0 off) */
    int event_retention;       /* events kept (default 100000) */
    int job_history;           /* jobs.history: ended jobs kept in memory (default 10000); older
                                  ones are read from the store when asked for */
    store_sync_t sync;         /* store.synchronous: full (default) or normal */
    bool accept_rewind;        /* not a config key: `controller --accept-rewind` (store.h) */
    bool reject_unfittable;    /* 422 for jobs no registered node could ever hold (default on) */
    bool cap_requests;         /* resources.capRequests: a request without a limit is its cap */
    int64_t idem_retention_ns; /* api.idempotencyRetention: keys kept (default 24 h; 0: for ever) */
    int nqueues;
    st_queue_conf_t *queues;    /* owned; freed by st_conf_free */
    int nclasses;               /* priorityClasses: the built-ins, then the config's */
    spec_prio_class_t *classes; /* owned; NULL: the built-ins only */
    st_clock_t clock;           /* {0}: the system clocks */
    uint64_t seed;              /* the scheduler's random tie-breaking (0: 1) */
} st_conf_t;

/* Defaults for every key. */
void st_conf_init(st_conf_t *c);
/* Load a controller config (YAML, docs/api.md "Configuration") over the
 * defaults in c. Messages: "FILE:LINE:COL: PATH: what; fix". */
int st_conf_load_file(const char *path, st_conf_t *c, arb_err_t *err);
int st_conf_load_mem(const char *name, const char *buf, size_t len, st_conf_t *c, arb_err_t *err);
void st_conf_free(st_conf_t *c);

/* The configuration's reference, from the tables the parser reads: a
 * Markdown table, one row per key, then the rules between its fields. */
void st_conf_doc(FILE *f);

/* ---- lifecycle ---------------------------------------------------------------- */

/* Who is calling: the API's authenticated principal. */
typedef enum st_role {
    ST_ROLE_ADMIN = 1,
    ST_ROLE_USER = 2,
    ST_ROLE_AGENT = 4,
} st_role_t;

typedef struct st_who {
    st_role_t role;
    const char *team; /* users: the team whose jobs they see; may be "" */
    const char *name; /* for messages and job owners */
    const char *addr; /* the caller's IP address as the API saw it; NULL unknown */
} st_who_t;

/* Open the store at uri (a data directory, or "sqlite:DIR") and recover
 * everything in it; conf is copied. Close with st_close. */
int st_open(const char *uri, const st_conf_t *conf, st_t **out, arb_err_t *err);
/* Start / stop the scheduler thread (tests may drive st_cycle instead). */
int st_start(st_t *s, arb_err_t *err);
void st_close(st_t *s); /* stops the thread, writes what is queued, closes */
/* Shutting down: stop scheduling and end every long poll now, so the API
 * server can stop without waiting out their timeouts. Call before
 * stopping the API; st_close follows. */
void st_quiesce(st_t *s);
/* Is it stopping (st_quiesce, st_close)? Long polls answer at once then. */
bool st_stopping(st_t *s);
/* Long polls without a thread each (src/api): fn(arg) is called, with the
 * state's lock held, whenever a long poll (events, service endpoints) may
 * have a new answer, and when the state quiesces. fn must only take its own
 * lock and signal. fn NULL: none. */
void st_set_change_hook(st_t *s, void (*fn)(void *arg), void *arg);
/* The same for one node's assignment list (the agents' long poll,
 * st_node_assignments_wait): fn(arg, key) with key = the node's id + 1,
 * under the state's lock, whenever a job with a task on that node is saved
 * (placed, stopped, resized, ended). A hint, not a promise that the list
 * changed: the poll compares versions. fn NULL: none. */
void st_set_node_hook(st_t *s, void (*fn)(void *arg, uint32_t key), void *arg);
/* Replies parked until their ticket is durable (src/api/conn.c): fn(arg) is
 * called on the store's commit thread after each commit (or the failed
 * one), without the state's lock; st_done then says which tickets are
 * done. fn must not take the state's lock. fn NULL: none; setting waits for
 * a call of the old fn in progress to return. */
void st_set_durable_hook(st_t *s, void (*fn)(void *arg), void *arg);

/* Wait until everything up to ticket is durable: 0 or -EIO. */
int st_wait(st_t *s, int64_t ticket, arb_err_t *err);
/* Would st_wait return at once? (Durable already, or the store failed.) */
bool st_done(st_t *s, int64_t ticket);

/* One scheduling cycle now (also run by the thread): node leases, then
 * placement; decisions are queued in one batch. *ticket as above. */
int st_cycle(st_t *s, arb_cycle_stats_t *stats, int64_t *ticket);

/* ---- jobs ---------------------------------------------------------------------- */

/* One event of the log (GET /v1/events; a typed view): type and node are
 * names the state interns (borrowed, valid until st_close), the message
 * the view's own. */
typedef struct st_event_view {
    uint64_t lamport;
    char time[32];    /* wall clock, for people */
    const char *type; /* "job-placed", ... (borrowed) */
    char *message;    /* owned */
    uint64_t job;     /* 0: none */
    const char *node; /* borrowed; NULL none */
} st_event_view_t;

typedef struct st_event_list {
    st_event_view_t *v; /* owned, oldest first */
    int n;
    uint64_t last;   /* the Lamport time of the last event looked at (since: none) */
    uint64_t oldest; /* the oldest event kept (0: none) */
    bool truncated;  /* events after since were dropped from the log (since + 1 < oldest) */
} st_event_list_t;

/* A job as GET /v1/jobs/{id} and the list show it (a typed view, as the
 * nodes below): strings named "borrowed" are names the state interns
 * (queue, team, owner, node names), valid until st_close; the rest is the
 * view's own (st_job_view_free). What the job asks for (spec_asks_t) is
 * its spec as src/spec reads it (spec_asks_read); a service's block is the service's own
 * view (st_service_view_t, as GET /v1/services/{name} shows it). */
typedef struct st_task_view {
    int index;
    char group[64];        /* its task group's name */
    const char *state;     /* the task's state name (static) */
    const char *node;      /* borrowed; NULL: holds no node now */
    uint16_t gpu_mask;     /* held only */
    int gpu_milli;         /* held only, shown with GPUs */
    const char *last_node; /* where it last ran (borrowed; NULL never) */
    bool has_exit;
    int exit_code;
    const char *straggler; /* "stale-report", "low-gpu-utilization" (static); NULL none */
} st_task_view_t;

typedef struct st_env_view {
    char *name;  /* owned */
    char *value; /* owned; NULL: a secret not shown to this caller */
    bool secret;
} st_env_view_t;

typedef struct st_job_view {
    uint64_t id;
    char name[ARB_JOB_NAME_MAX];
    const char *queue, *team, *owner; /* borrowed */
    const char *state;                /* "pending", ... (static) */
    int priority, gpus;
    uint64_t version, submitted_lamport, updated_lamport, attempt, epoch;
    char submitted_at[40], started_at[40], ended_at[40]; /* wall clock; "" not yet */
    bool stop_requested;
    char *message;         /* why it is in its state (owned; NULL none) */
    st_task_view_t *tasks; /* owned */
    int ntasks;
    const char *wait; /* pending or preempted: why it waits (static); NULL none */
    char *dependency; /* its dependency as given (owned; NULL none) */
    bool array;       /* an array's element: the four below */
    uint64_t array_job;
    int array_task, array_count, array_throttle; /* count, throttle: 0 none */
    const char *kind;                       /* "service", "replica" (static); NULL a batch job */
    struct st_service_view *service;        /* a service: its view (owned) */
    uint64_t replica_of;                    /* a replica: its service's job */
    char replica_of_name[ARB_JOB_NAME_MAX]; /* and name ("" gone) */
    int replica;
    /* the one-job form (full): */
    bool full;
    spec_asks_t asks; /* what it asks for and where it may run */
    bool elastic;     /* the four below */
    int elastic_min, elastic_max, elastic_current, elastic_generation;
    char **command; /* owned */
    int ncommand;
    bool has_env;
    st_env_view_t *env; /* owned */
    int nenv;
    st_event_view_t *events; /* its recent events, oldest first (owned) */
    int nevents;
} st_job_view_t;

typedef struct st_job_list {
    st_job_view_t *v; /* owned: the short form of each (not full) */
    int n;
} st_job_list_t;

void st_job_view_free(st_job_view_t *v);
void st_job_list_free(st_job_list_t *l);

/* Submit a job spec (JSON when !yaml, else YAML; the Kubernetes-style
 * fields of docs/scenario.md plus "command" and "env"). 201 semantics:
 * *out is the new job (full; secrets shown to whom they belong). Every
 * call below that fills a st_job_view_t or st_job_list_t leaves it the
 * caller's on success, empty on failure. */
int st_job_submit(st_t *s, const st_who_t *who, const char *body, size_t n, bool yaml,
                  st_job_view_t *out, int64_t *ticket, arb_err_t *err);
/* The same with an Idempotency-Key (NULL: none): when this principal's key
 * already created a job, *out is that job and *created false (200), else
 * the key is recorded with the new job, durably (201). The same key with a
 * different body: -EINVAL. */
int st_job_submit_key(st_t *s, const st_who_t *who, const char *key, const char *body, size_t n,
                      bool yaml, st_job_view_t *out, bool *created, int64_t *ticket,
                      arb_err_t *err);
/* Every check st_job_submit makes, and nothing made: 0 when this spec would be
 * accepted now (a file of several jobs is checked whole before any is
 * submitted). */
int st_job_submit_check(st_t *s, const st_who_t *who, const char *body, size_t n, bool yaml,
                        arb_err_t *err);
int st_job_get(st_t *s, const st_who_t *who, uint64_t id, st_job_view_t *out, int64_t *ticket,
               arb_err_t *err);
/* Jobs the caller may see, filtered by state and queue (NULL: any), in id
 * order after `after`, at most limit (0: no limit). */
int st_jobs_list(st_t *s, const st_who_t *who, const char *state, const char *queue, uint64_t after,
                 int limit, st_job_list_t *out, int64_t *ticket, arb_err_t *err);
/* Cancel; if_match < 0: no version check. *out: the job after it. */
int st_job_cancel(st_t *s, const st_who_t *who, uint64_t id, int64_t if_match, st_job_view_t *out,
                  int64_t *ticket, arb_err_t *err);
/* Why is it pending (GET /v1/jobs/{id}/explain; a typed view): the
 * scheduler's explanation (core's own encoding of it, arb_explain_json,
 * as its text), the summary and hint people read, and what the state adds:
 * each node's first failing filter when asked, the victims being stopped
 * for it, unhealthy GPUs; for a job not pending, its stragglers. Names are
 * borrowed (st_close), the rest the view's own (st_explain_view_free). */
typedef struct st_node_reason {
    const char *node, *reason; /* borrowed; static ("ok" where a task fits now) */
} st_node_reason_t;

typedef struct st_victim_view {
    uint64_t job;
    char name[ARB_JOB_NAME_MAX];
    const char *action; /* "preempted", "shrinking" (static) */
} st_victim_view_t;

typedef struct st_gpu_ref {
    const char *node; /* borrowed */
    int gpu;
} st_gpu_ref_t;

typedef struct st_straggler_view {
    int task;
    const char *node;   /* borrowed */
    const char *reason; /* "stale-report", "low-gpu-utilization" (static) */
} st_straggler_view_t;

typedef struct st_explain_view {
    uint64_t job;
    char name[ARB_JOB_NAME_MAX];
    const char *state;              /* static */
    bool pending;                   /* pending or preempted: the fields down to unhealthy */
    char *explain_json;             /* core's explanation as JSON text (owned; NULL none) */
    char *summary, *hint;           /* owned, never NULL in a filled view */
    bool has_node_reasons;          /* asked for (nodes) and made: the two below */
    st_node_reason_t *node_reasons; /* owned, every node in id order */
    int nnode_reasons;
    char node_reasons_group[64];   /* the task group they are for */
    char *message;                 /* why it is in its state (owned; NULL none) */
    st_victim_view_t *waiting_for; /* owned; its victims being stopped */
    int nwaiting_for;
    st_gpu_ref_t *unhealthy; /* owned; unhealthy GPUs it could otherwise use */
    int nunhealthy;
    st_straggler_view_t *stragglers; /* owned; a running job's slow tasks */
    int nstragglers;
} st_explain_view_t;

void st_explain_view_free(st_explain_view_t *v);
/* Why job id waits (or what it is doing); with nodes, node_reasons too (for
 * the stuck group). *out is the caller's on success, empty on failure. */
int st_job_explain(st_t *s, const st_who_t *who, uint64_t id, st_explain_view_t *out,
                   int64_t *ticket, arb_err_t *err);
int st_job_explain_ex(st_t *s, const st_who_t *who, uint64_t id, bool nodes, st_explain_view_t *out,
                      int64_t *ticket, arb_err_t *err);

/* A ticket to read task `task` of job `job` from the agent that ran it
 * (logticket.c; a typed view): the caller must be allowed to see the job.
 * -ENOENT no such job or task, or the node serves no logs; -EBUSY the task
 * has not run. *out is the caller's on success (st_logs_ticket_free),
 * empty on failure. */
typedef struct st_logs_ticket {
    uint64_t job;
    int64_t task;
    const char *node; /* borrowed */
    char *logs_url;   /* owned: where its agent serves logs */
    char ticket[33];  /* 128 random bits, hex */
    int64_t ttl_ms;
} st_logs_ticket_t;

void st_logs_ticket_free(st_logs_ticket_t *t);
int st_logs_ticket(st_t *s, const st_who_t *who, uint64_t job, int64_t task, st_logs_ticket_t *out,
                   int64_t *ticket, arb_err_t *err);
/* An agent asks whether ticket id lets someone read job/task on node:
 * 0 and *ttl_ms what is left of its life, or -EACCES (unknown, expired,
 * or for another job, task or node; err says which). */
int st_logs_ticket_check(st_t *s, const char *id, uint64_t job, int64_t task, const char *node,
                         int64_t *ttl_ms, int64_t *ticket, arb_err_t *err);

/* ---- nodes ---------------------------------------------------------------------- */

/* An agent's report (docs/api.md), decoded and checked by the API
 * (src/api/enc_report.c, api_report_decode): its Lamport clock, the
 * inventory and telemetry as the agent sent them (JSON text, kept as they
 * came: the node's record and its view show them), what of the telemetry
 * the scheduler reads, and its task states. */
typedef enum st_rtask_state {
    ST_RT_RUNNING,
    ST_RT_SUCCEEDED,
    ST_RT_FAILED,
    ST_RT_LOST
} st_rtask_state_t;
typedef enum st_fenced_by { ST_FENCED_NONE, ST_FENCED_AGENT, ST_FENCED_SUPERVISOR } st_fenced_by_t;

typedef struct st_report_task {
    uint64_t job;
    int64_t task;
    bool has_attempt; /* "attempt" given (null counts as 0, as before) */
    uint64_t attempt;
    st_rtask_state_t state;
    bool has_exit; /* an integer exit_code */
    int32_t exit_code;
    st_fenced_by_t fenced_by;
} st_report_task_t;

typedef struct st_report_gpu {
    int index;
    bool has_util, has_temp, has_healthy; /* given (not null) */
    int util, temp_c;
    bool healthy;
} st_report_gpu_t;

typedef struct st_report {
    bool has_lamport; /* an integer "lamport" */
    int64_t lamport;
    bool has_incarnation; /* an integer "incarnation": which life of its agent sent it */
    int64_t incarnation;
    const char *inventory; /* JSON text (NULL: none or null); checked by the state */
    const char *telemetry; /* JSON text (NULL: none or null) */
    st_report_gpu_t *gpus; /* telemetry.gpus, in order */
    int ngpus;
    bool has_queue_length;
    int32_t queue_length;
    bool has_tasks; /* a "tasks" list (its absence says nothing of absent tasks) */
    st_report_task_t *tasks;
    int ntasks;
} st_report_t;

/* One task an agent runs (or stops), as a report's reply and the
 * assignments long poll list it (codec.c's st_task_assignment; docs/api.md):
 * the caller's (st_assign_list_free). */
typedef struct st_env_pair {
    char *key, *value; /* owned */
} st_env_pair_t;

typedef struct st_assignment {
    uint64_t job;
    char name[ARB_JOB_NAME_MAX];
    int task, ntasks;
    uint64_t attempt, epoch;
    uint16_t gpus; /* mask */
    int gpu_milli, gpu_memory_mib;
    char **command; /* owned */
    int ncommand;
    st_env_pair_t *env; /* owned, in order (secrets as plain values) */
    int nenv;
    const char *state; /* the task's state name (static) */
    bool stop;
    char cpu[32], memory[32]; /* the caps; "" none */
    bool has_grace;
    int grace_s;
    bool has_time_limit;
    int64_t time_limit_ms; /* what is left of it */
    bool elastic;
    uint64_t generation;
    char **hosts; /* owned (elastic) */
    int nhosts;
    bool gang; /* the four below */
    int rank, world_size, master_port;
    char *master_addr; /* owned */
} st_assignment_t;

typedef struct st_assign_list {
    st_assignment_t *v; /* owned */
    int n;
    uint64_t version; /* a digest of what the agent acts on (st_node_assignments_wait) */
} st_assign_list_t;

/* The reply to a report: applied (the assignments), a replay (stale) or a
 * node that must register (lost); err's -ERANGE refusal sets lamport too. */
typedef enum st_report_kind { ST_REPORT_APPLIED, ST_REPORT_STALE, ST_REPORT_LOST } st_report_kind_t;

typedef struct st_report_reply {
    const char *node; /* the name the caller gave (borrowed) */
    uint64_t lamport, epoch;
    int64_t lease_ms;
    st_report_kind_t kind;
    char message[240];         /* stale, lost: why */
    bool reregister;           /* stale: from another life of the agent; register again */
    int64_t incarnation;       /* with reregister: the life the controller knows (0 none) */
    uint64_t version;          /* applied: the node's */
    st_assign_list_t assigned; /* applied */
} st_report_reply_t;

void st_assign_list_free(st_assign_list_t *l);
void st_report_reply_free(st_report_reply_t *r);
/* Apply report r of node name: creates the node on first report (with
 * inventory). *out is the caller's (st_report_reply_free) on success, and
 * on -ERANGE (a Lamport time too far ahead: out->lamport the clock);
 * empty otherwise. */
int st_node_report(st_t *s, const st_who_t *who, const char *name, const st_report_t *r,
                   st_report_reply_t *out, int64_t *ticket, arb_err_t *err);
/* The same with If-Match (< 0: none): -ESTALE (409), nothing applied, when
 * the node is not at that version (or not registered). */
int st_node_report_if(st_t *s, const st_who_t *who, const char *name, int64_t if_match,
                      const st_report_t *r, st_report_reply_t *out, int64_t *ticket,
                      arb_err_t *err);

/* A node as GET /v1/nodes shows it (a typed view, as the queues below):
 * strings named "borrowed" are the state's interned names, valid until
 * st_close; the rest is the view's own (st_node_view_free). */
typedef struct st_gpu_view {
    const char *model; /* borrowed */
    int index, memory_mib, used_milli, nvlink, pcie, numa, util, temp_c;
    bool healthy;
    uint64_t *jobs; /* the jobs holding a share of it, each once (owned): filled by
                       st_node_get and st_nodes_list only */
    int njobs;
} st_gpu_view_t;

typedef struct st_label_view {
    const char *key, *value; /* borrowed */
} st_label_view_t;

typedef struct st_taint_view {
    const char *key, *value, *effect; /* borrowed; value "" none; effect its name */
} st_taint_view_t;

/* A task placed on the node (GET /v1/nodes/{name} "running"). */
typedef struct st_task_here {
    uint64_t job;
    char name[ARB_JOB_NAME_MAX]; /* the job's */
    int task;
    uint64_t attempt;
    const char *state; /* the task's state name (static) */
    uint16_t gpu_mask;
    bool stopping;
} st_task_here_t;

typedef struct st_node_view {
    const char *name;  /* borrowed */
    const char *state; /* "Ready", "NotReady", "Draining", ... or "Lost" (static) */
    uint64_t version;
    st_gpu_view_t *gpus; /* owned */
    int ngpus;
    arb_res_t cap, used;
    int tasks;
    st_label_view_t *labels; /* owned array; what the node applies (inventory under operators') */
    int nlabels;
    st_taint_view_t *taints; /* owned array */
    int ntaints;
    const char **datasets; /* owned array of borrowed names */
    int ndatasets;
    bool schedulable;
    char reason[200]; /* why it is cordoned, NotReady or lost; "" none */
    bool full;        /* the one-node form: topology, operator, telemetry, inventory */
    const char *rack, *block, *zone; /* borrowed; NULL unknown (full only) */
    char *op_json; /* what operators set, as JSON text (owned; NULL none; full only) */
    bool lost;
    bool reported;        /* a report came: the next three are set */
    double report_age_s;  /* on the controller's clock */
    char last_report[40]; /* wall clock, for people */
    uint64_t report_lamport;
    char *telemetry_json; /* the last telemetry as its agent sent it (owned; NULL none; full) */
    char *inventory_json; /* the inventory likewise (owned; NULL none; full only) */
    /* what the call that made the view adds */
    bool detail; /* st_node_get: the two below */
    uint64_t stale_reports;
    st_task_here_t *running; /* owned */
    int nrunning;
    bool has_evicted; /* st_node_cordon: the jobs it stopped */
    int evicted;
} st_node_view_t;

typedef struct st_node_list {
    st_node_view_t *v; /* owned: every node not deleted, in registration order */
    int n;
} st_node_list_t;

void st_node_view_free(st_node_view_t *v);
void st_node_list_free(st_node_list_t *l);
/* One node, full, with its GPUs' jobs, what runs there and its replays
 * ignored; -ENOENT. *out is the caller's on success, empty on failure. */
int st_node_get(st_t *s, const char *name, st_node_view_t *out, int64_t *ticket, arb_err_t *err);
int st_nodes_list(st_t *s, st_node_list_t *out, int64_t *ticket, arb_err_t *err);
/* Node names are DNS-1123 labels (as Kubernetes names nodes): -EINVAL
 * with the rule otherwise. */
int st_node_name_check(const char *name, arb_err_t *err);
/* Cordon (READY/NOT_READY -> DRAINING: no new tasks), drain (cordon, then
 * evict every job with a task there: stopped, requeued whole), uncordon
 * (DRAINING -> READY). reason: NULL or "" none, else why (the body's
 * "reason", decoded by the API: api_cordon_decode; up to ST_REASON_MAX - 1
 * bytes). *out: the node, with evicted: jobs stopped. Node operations'
 * *out is the caller's on success (st_node_view_free), empty on failure. */
#define ST_REASON_MAX 160
typedef enum st_cordon { ST_CORDON, ST_DRAIN, ST_UNCORDON } st_cordon_t;
int st_node_cordon(st_t *s, const st_who_t *who, const char *name, st_cordon_t what,
                   const char *reason, int64_t if_match, st_node_view_t *out, int64_t *ticket,
                   arb_err_t *err);
/* Labels and taints (docs/api.md PATCH /v1/nodes/{name}); kept in the
 * node's record over what its inventory says. A NoExecute taint evicts
 * what does not tolerate it. The body comes decoded and checked by the API
 * (api_patch_decode; strings borrowed from it): labels set (value) or
 * removed (value NULL), taints removed (effect "" any) and added; the
 * state checks that what is removed is there (-ENOENT). */
typedef struct st_label_edit {
    const char *key, *value; /* value NULL: remove */
} st_label_edit_t;

typedef struct st_taint_edit {
    const char *key, *value, *effect; /* value "" none; effect "" (a removal): any */
} st_taint_edit_t;

typedef struct st_patch {
    st_label_edit_t *labels;
    int nlabels;
    st_taint_edit_t *add, *remove;
    int nadd, nremove;
} st_patch_t;

int st_node_patch(st_t *s, const st_who_t *who, const char *name, const st_patch_t *p,
                  int64_t if_match, st_node_view_t *out, int64_t *ticket, arb_err_t *err);
/* A taint effect's number (arb_taint_effect_t) from its name, 0 unknown. */
int st_taint_effect(const char *s);
/* Remove a NotReady node with nothing left that may run (or a Lost one):
 * its record and its GPUs leave every total; -EBUSY saying why not. */
int st_node_delete(st_t *s, const char *name, int64_t if_match, st_node_view_t *out,
                   int64_t *ticket, arb_err_t *err);
/* A node's telemetry over the last minutes (telhist.c; a typed view):
 * one sample per interval_s of its agent's reports, oldest first, at
 * most capacity. A value the agent did not report is unknown. */
typedef struct st_tel_gpu {
    bool has_util, has_mem, has_temp; /* known */
    int util;                         /* percent */
    int64_t memory_used_mib;
    int temp_c;
    bool healthy;
} st_tel_gpu_t;

typedef struct st_tel_sample {
    double age_s; /* on the controller's clock */
    /* < 0: unknown */
    double cpu_util, memory_used_bytes, net_rx_bps, net_tx_bps, disk_read_bps, disk_write_bps;
    const st_tel_gpu_t *gpus; /* ngpus of them, in the view's gpus */
} st_tel_sample_t;

typedef struct st_telemetry_view {
    const char *node; /* borrowed */
    double interval_s;
    int capacity;
    int ngpus;
    st_tel_sample_t *samples; /* owned */
    int nsamples;
    st_tel_gpu_t *gpus; /* owned: nsamples x ngpus */
} st_telemetry_view_t;

void st_telemetry_view_free(st_telemetry_view_t *v);
/* -ENOENT no such node; *out is the caller's on success, empty on failure. */
int st_node_telemetry(st_t *s, const char *name, st_telemetry_view_t *out, int64_t *ticket,
                      arb_err_t *err);
/*
 * The tasks assigned to node name, with epochs (marks them delivered), for
 * the agents' long poll (GET /v1/nodes/NAME/assignments?wait=S&version=V&
 * epoch=E): *out the list (each entry as a report's reply has it), its
 * "version" (a digest of what the agent acts on: each task's job, task,
 * attempt, epoch, stop and generation; not its state or the time left),
 * *lamport and *epoch the controller's. *same is set when version == have
 * or is the version last sent to the agent (the reply to the node's last
 * report applied, or an answer to a poll that gave its epoch, which sets
 * it): the agent has this list already, or has it with that reply, and the
 * caller parks until a node hook for *key, the node's id + 1, and asks
 * again (at the poll's deadline it answers all the same). An agent that gives its epoch
 * (epoch >= 0) gets nothing through the channel unless it is the
 * controller's and the node is registered and not lost: -ESTALE (409), and
 * it reports (registers) first, as its lease rules say. *out is the
 * caller's on success (st_assign_list_free), empty on failure.
 */
int st_node_assignments_wait(st_t *s, const char *name, int64_t epoch, uint64_t have, bool *same,
                             uint32_t *key, st_assign_list_t *out, uint64_t *lamport,
                             uint64_t *epoch_out, int64_t *ticket, arb_err_t *err);

/* ---- queues, events, metrics, checks --------------------------------------------------- */

/* Typed views (docs/architecture.md "The state's interface"): what a read
 * returns as plain C, a snapshot taken under the lock that the caller owns
 * and frees; src/api encodes it (src/api/enc_*.c). */

/* A queue as GET /v1/queues shows it: its usage, the jobs it holds, its
 * share of the cluster's largest resource, its quota when it has one. */
typedef struct st_queue_view {
    char *name;     /* owned by the list */
    char *cohort;   /* owned; NULL: none */
    arb_res_t used; /* what its jobs hold now */
    int pending;    /* pending or preempted jobs (a service's replicas, not the service) */
    int running;    /* placed or running ones */
    double weight;
    double dominant_share; /* its largest share of the cluster's gpu, cpu or memory, 0..1 */
    bool has_quota;
    arb_res_t nominal, borrow_limit; /* has_quota only */
} st_queue_view_t;

typedef struct st_queue_list {
    st_queue_view_t *v; /* owned */
    int n;
} st_queue_list_t;

/* Every queue seen (configured, or named by a job), in the order first
 * seen. *out is the caller's (st_queue_list_free) on success, empty on
 * failure (-ENOMEM). */
int st_queues_list(st_t *s, st_queue_list_t *out, int64_t *ticket, arb_err_t *err);
void st_queue_list_free(st_queue_list_t *l);
/* Events with lamport > since, oldest first, at most limit (users do not
 * see events of other teams' jobs); when none, wait up to wait_ms for one.
 * *out is the caller's (st_event_list_free) on success, empty on failure
 * (-ENOMEM). */
int st_events(st_t *s, const st_who_t *who, uint64_t since, int limit, int64_t wait_ms,
              st_event_list_t *out, int64_t *ticket, arb_err_t *err);
void st_event_list_free(st_event_list_t *l);
/* Record how long the API took to handle one agent report (metrics). */
void st_note_report(st_t *s, int64_t ns);
/* A reply of route (a small index, < ST_HELD_ROUTES; method and path
 * static strings naming it) was held for its commit (suspended until its
 * ticket was durable): arbiter_replies_held_total{route="METHOD PATH"}.
 * Without the state's lock; a route past the table is counted as the last. */
#define ST_HELD_ROUTES 64
void st_note_held(st_t *s, unsigned route, const char *method, const char *path);
/* Append Prometheus text-format metrics to *buf (malloc'd, *len bytes). */
int st_metrics(st_t *s, char **buf, size_t *len);
/* Check every invariant: core's cluster check, and that the allocations of
 * the jobs add up to the nodes' usage (no GPU share given twice). */
int st_check(st_t *s, arb_err_t *err);
/* The priority classes jobs may name (GET /v1/priorityclasses; a typed
 * view): the config's priorityClasses, or the built-ins without them.
 * Copied into out->v (malloc'd: st_prio_list_free); -ENOMEM. */
typedef struct st_prio_list {
    spec_prio_class_t *v;
    int n;
} st_prio_list_t;
int st_priority_classes(st_t *s, st_prio_list_t *out);
void st_prio_list_free(st_prio_list_t *l);
/* The controller's counters (GET /v1/status; a typed view). */
typedef struct st_status {
    uint64_t lamport;  /* the Lamport clock now */
    uint64_t epoch;    /* bumped at every start */
    uint64_t revision; /* the store's */
    uint64_t jobs;     /* jobs held, ended ones included */
    int active_jobs;   /* not ended */
    int nodes;         /* not deleted */
} st_status_t;
void st_status(st_t *s, st_status_t *out);

/* 0 while the state may be served; -EIO with the failed commit's text
 * once a commit failed, -ERANGE once the Lamport clock reached
 * ST_LAMPORT_MAX: the process must stop serving and exit (src/cli/
 * controller.c exits 3; controller_ha.c steps down); a restart recovers
 * what was committed (and renumbers the clock). */
int st_store_status(st_t *s, arb_err_t *err);

/* The Lamport clock's bounds (docs/api.md). A report's "lamport" may be at
 * most the controller's clock + ST_LAMPORT_STEP (an honest agent is ahead
 * only by the reports the controller did not answer); never above
 * ST_LAMPORT_MAX (2^62 - 1: every value fits a JSON integer with room). */
#define ST_LAMPORT_MAX ((uint64_t)INT64_MAX / 2)
#define ST_LAMPORT_STEP ((uint64_t)1 << 20)
#define ST_LAMPORT_REBASE (ST_LAMPORT_MAX / 2)

/* ---- services (service.c) ------------------------------------------------------------ */

/* A running service as GET /v1/services/{name} shows it (a typed view, as
 * the nodes above): copied under the lock, the node names borrowed. */
typedef struct st_replica_view {
    int index;
    uint64_t job;      /* its child job; 0 none yet */
    const char *state; /* the child's state name, "starting" before one (static) */
    bool ready, draining;
    int restarts;
    const char *node; /* borrowed; NULL while the child holds nothing (then no
                         address and no load either) */
    char address[80]; /* "HOST:PORT" (node set) */
    bool has_load;    /* what the agent of its node last reported (node set, a report came): */
    double gpu_util;  /* mean utilisation of its GPUs (the node's without GPUs), 0..1 */
    int queue;        /* the node's queue length */
    int64_t age_ms;   /* the report's age */
    int port;
    bool has_inflight; /* a balancer's count younger than 5 s */
    double inflight;
} st_replica_view_t;

typedef struct st_service_view {
    char name[ARB_JOB_NAME_MAX];
    uint64_t job, version; /* the parent job; the endpoints' version */
    int desired, min, port;
    char health[128];
    st_replica_view_t *replicas; /* owned (st_service_view_free) */
    int nreplicas;
    bool autoscale;   /* the four below */
    arb_as_conf_t as; /* min, max, target (in flight), gpu_target, window_ns, cooldown_ns */
    bool has_last;    /* a decision was made: the three below */
    int recommended;
    double per_replica;
    char last[320]; /* why, in words */
} st_service_view_t;

typedef struct st_service_list {
    st_service_view_t *v; /* owned */
    int n;
} st_service_list_t;

void st_service_view_free(st_service_view_t *v);
void st_service_list_free(st_service_list_t *l);

/* The endpoints of running service `name`. With wait_ms > 0 and version
 * equal to the current one, waits up to wait_ms for a change (a long
 * poll). *out is the caller's on success, empty on failure. */
int st_service_endpoints(st_t *s, const st_who_t *who, const char *name, uint64_t version,
                         int64_t wait_ms, st_service_view_t *out, int64_t *ticket, arb_err_t *err);
/* The running services the caller may see, in job order. */
int st_services_list(st_t *s, const st_who_t *who, st_service_list_t *out, int64_t *ticket,
                     arb_err_t *err);

/* A balancer's in-flight counts per replica address (decoded by src/api
 * from POST /v1/services/{name}/load), input to autoscaling. */
typedef struct st_replica_load {
    const char *address; /* "HOST:PORT" (the caller's) */
    double inflight;     /* 0..1e9 */
    double queue;        /* 0..1e9; 0 when not sent */
} st_replica_load_t;

/* What a load report matched: *out->version the endpoints' now. */
typedef struct st_load_ack {
    int matched; /* replicas whose address was listed */
    uint64_t version;
} st_load_ack_t;

int st_service_load(st_t *s, const st_who_t *who, const char *name, const st_replica_load_t *v,
                    int n, st_load_ack_t *out, int64_t *ticket, arb_err_t *err);

/* Test hook: make the next n store commits fail. */
void st_inject_store_failure(st_t *s, int n);

#endif
