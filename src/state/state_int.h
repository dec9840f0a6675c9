/*
 * state_int.h: the resource manager's private parts, shared by the files of
 * src/state (ledger.c clock, events, batches and the job table; jobs.c
 * submit, get, list, cancel, explain; cycle.c the scheduler thread and the
 * cycle; state.c open and close; node.c reports and drains; liveness.c node
 * leases, lost tasks and stragglers; recover.c; codec.c JSON; metrics.c).
 * Not a public API.
 *
 * Layers: a file uses the functions of its own layer and of those below it,
 * never of one above (scripts/layers.txt lists them; `make lint` checks):
 *
 *   top     cycle.c (the scheduler thread, st_cycle)   state.c (open, close,
 *      |    checks; it fills the ledger's st_ledger_ops_t)
 *      v
 *   ops     jobs.c node.c nodeview.c nodeops.c liveness.c resize.c service.c probe.c
 *      |    depend.c codec.c recover.c history.c idem.c telhist.c
 *      |    logticket.c metrics.c (they call each other freely)
 *      v
 *   ground  ledger.c (ledger.h: clocks, Lamport clock, events, the store
 *           batch and tickets, hooks, the job table, names)   jv.c   config.c
 *
 * The ground asks what it needs of the operations (a job's store record,
 * what follows a save or an end) through s->lops, never by name.
 *
 * Locking: one mutex, st.mu, guards everything here. Functions named do_*
 * and every helper in this header expect the caller to hold it.
 *
 * Task lifecycle (st_task_t.state), inside a job's lifecycle (job.h):
 *
 *   TK_PENDING --placed--> TK_ASSIGNED --agent: running--> TK_RUNNING
 *       ^                      |                              |
 *       +----preempted---------+------------------------------+
 *       |                      agent: exited --> TK_SUCCEEDED | TK_FAILED
 *       |                      agent: lost (fenced), or its node lost --> TK_LOST
 *       +---- requeued (st_job_requeue: a lost task of a restartable job) ----+
 *
 * A job whose tasks must all end before it can (a cancel, a lost gang
 * member) has stop set and stop_then saying what follows once every task
 * has ended: cancelled, failed or requeued whole (liveness.c, st_job_settle).
 * Its GPUs stay held until then: never two users of one GPU.
 *
 * Invariants: (1) a job's tasks 0..nalloc-1 are ASSIGNED/RUNNING/ended
 * exactly while the job is PLACED or RUNNING; (2) every persisted job
 * record carries the allocations the scheduler holds for it, so recovery
 * re-charges exactly what was acknowledged; (3) clock <= clock_hwm, and the
 * store's meta/clock is >= clock_hwm's last persisted value, so the clock
 * never runs backwards across a restart.
 */
#ifndef ARB_STATE_INT_H
#define ARB_STATE_INT_H

#include <jansson.h>
#include <pthread.h>

#include "state/ledger.h"
#include "state/state.h"
#include "util/buf.h"

enum { TK_PENDING, TK_ASSIGNED, TK_RUNNING, TK_SUCCEEDED, TK_FAILED, TK_LOST, TK_CANCELLED };
extern const char *const st_task_state_names[];

/* st_job_t.stop_then: what follows once a stopping job's tasks have ended */
enum { ST_THEN_CANCEL, ST_THEN_FAIL, ST_THEN_REQUEUE, ST_THEN_TIMEOUT };
enum { ST_STRAG_NONE, ST_STRAG_STALE, ST_STRAG_SLOW }; /* st_task_t.straggler */

typedef struct st_task {
    uint8_t state;
    uint8_t straggler; /* ST_STRAG_*: flagged by the last straggler check */
    bool has_exit;
    bool stop_sent; /* an assignment with stop went to its agent (volatile) */
    int32_t exit_code;
    uint32_t node1; /* node id + 1 of its latest placement (kept after it ends); 0 never */
} st_task_t;

typedef struct st_job st_job_t;

/* Fields by size (eight-byte ones, then four, then one), so that the
 * record has no padding to speak of: every pending job costs one. */
struct st_job {
    uint64_t id;
    arb_job_t *j;             /* the scheduler's job (owned by it unless own_j) */
    const char *team, *owner; /* interned in st.names (st_name): shared, never NULL */
    char *spec;            /* the spec as submitted (owned) for a service and its replicas (re-read
                            * for them) and a job recovered from a record without a compact form;
                            * NULL otherwise: under specs/ID in the store (st_job_spec_text) */
    json_t *command, *env; /* owned references, may be NULL */
    uint64_t version, lamport_submit, lamport_update;
    uint64_t attempt, epoch;             /* of the current assignment */
    int64_t submit_ms, start_ms, end_ms; /* wall clock, for people */
    int64_t running_mono; /* controller's ns when every task was known running (volatile) */
    st_task_t *tasks;
    char *message;        /* why it is in its state, for people (owned); NULL none: st_job_msg */
    uint64_t shrink_for;  /* recovery only: the id of the job a restored shrink mark is for */
    struct st_svc *svc;   /* a service (service.h): its replicas (owned); NULL otherwise */
    uint64_t svc_of;      /* a service's replica: the service's job id; 0 otherwise */
    struct st_dep *dep;   /* its dependency and array (depend.c; owned); NULL none */
    uint32_t speclen;     /* of spec (a body is at most API_MAX_BODY) */
    uint32_t pclass;      /* the priorityClassName its spec named (interned in st.names); 0 none */
    arb_job_state_t last; /* the state last persisted */
    int ntasks;
    int active_ix;    /* index in st.active, -1 when terminal */
    int nalloc_seen;  /* tasks the controller has assigned (resize.c: growth shows as more) */
    int shrink_noted; /* the j->shrink_to already announced; 0 none */
    int replica;      /* a service's replica: its index */
    bool own_j;       /* an ended job: recovered so (never handed to the scheduler), or taken
                       * back from it when it ended (arb_sched_forget) */
    bool yaml;
    bool delivered;    /* an agent has fetched the current assignment */
    bool stop;         /* its tasks are being stopped (cancel, lost gang member) */
    uint8_t stop_then; /* ST_THEN_*: what follows once every task ended */
    bool restartable;  /* a lost task requeues the job (spec "restartable", default true) */
};

/* Must task t of sj stop: its job stops, or it is above an elastic job's
 * shrink mark (resize.c)? */
static inline bool st_task_stop(const st_job_t *sj, int t)
{
    return sj->stop || (sj->j->shrink_to > 0 && t >= sj->j->shrink_to);
}

typedef struct st_telhist st_telhist_t; /* telhist.c */

typedef struct st_node {
    json_t *inventory;   /* as last reported (owned) */
    json_t *telemetry;   /* last telemetry (owned, volatile) */
    uint64_t version;    /* bumped on every persisted change */
    int64_t report_mono; /* monotonic ns of the last report; 0 never */
    int64_t tel_mono;    /* of the last report that carried telemetry; 0 never */
    int64_t report_ms;   /* wall clock of the last report, for people */
    uint64_t lamport;    /* Lamport time of the last report */
    uint64_t reports;
    int64_t agent_lamport;  /* the agent's Lamport time in the last report applied (volatile):
                               one older is a replay and is ignored (node.c) */
    uint64_t stale_reports; /* replays ignored */
    int64_t incarnation;    /* the life of its agent whose registration was applied last
                               (volatile; 0 unknown: node.c, "Lives") */
    bool lost;              /* declared lost (its tasks requeued); cleared by a registration */
    uint64_t told_version;  /* the assignments_version last sent to its agent: the reply to
                               its last report applied, or its channel's last answer
                               (volatile): the agent's poll waits past it (node.c) */
    struct st_job **held;   /* jobs placed here (owned array, borrowed jobs): a report costs
                               what runs on its node, not what the cluster runs. Entries go
                               stale when a job stops holding; readers drop them. */
    int nheld, capheld;
    char addr[64];      /* where its tasks are reached: inventory "address", else the
                           address its last report came from; "" unknown */
    json_t *op;         /* what operators set: labels, taints (nodeops.c; owned, persisted) */
    char reason[160];   /* why it is cordoned or drained, and by whom; "" none (persisted) */
    st_telhist_t *hist; /* telemetry of the last minutes (owned; volatile; telhist.c) */
} st_node_t;

/* One event of the log, as kept in memory (its store record is
 * st_event_record's text). type and node are interned (st_name); type
 * NULL: a stored record that could not be read (kept for its place, shown
 * to nobody). The wall time is kept as milliseconds, its text (jv_time)
 * made when it is read; a stored time that text would not give back
 * (another form, a damaged record) is kept as text after the message's NUL
 * (time_ms ST_EVENT_TIME_TEXT). All of it is ledger.c's to read. */
#define ST_EVENT_TIME_TEXT INT64_MIN
typedef struct st_event {
    uint64_t lamport;
    uint64_t job;     /* 0: none */
    const char *type; /* "job-placed", ... */
    const char *node; /* NULL: none */
    char *msg;        /* owned */
    int64_t time_ms;  /* wall clock, for people (jv_time); or ST_EVENT_TIME_TEXT */
} st_event_t;

#define ST_HIST 12
extern const double st_cycle_buckets_ms[ST_HIST - 1];

struct st {
    st_conf_t conf;
    const st_ledger_ops_t *lops; /* what the ledger asks of the layers above (state.c) */
    pthread_mutex_t mu;
    pthread_cond_t ev_cond; /* an event was appended (st_changed) */
    void (*chg_fn)(void *); /* st_set_change_hook: told with every ev_cond broadcast */
    void *chg_arg;
    void (*node_fn)(void *, uint32_t); /* st_set_node_hook: a node's assignments may have moved */
    void *node_arg;
    pthread_cond_t kick; /* something changed: run a cycle (st_kick) */
    store_t *store;
    store_gc_t *gc;
    store_batch_t batch; /* ops of the mutation in progress */

    arb_cluster_t cluster;
    arb_sched_t *sched;
    arb_rng_t rng;

    st_job_t **jobs; /* by id; jobs[0] unused */
    uint64_t capjobs, next_id;
    uint64_t njobs;       /* jobs held (next_id - 1 less damaged records' ids) */
    uint64_t nstored;     /* of them, ended jobs past jobs.history: in the store only (history.c) */
    struct st_hist *hist; /* ended jobs in memory, oldest first (history.c); NULL none yet */
    int ndamaged;         /* store records recovery could not load (recover.c) */
    char damaged[8][64];  /* the first ones' keys */
    st_job_t **active;    /* non-terminal jobs */
    int nactive, capactive;
    st_node_t *nodes; /* parallel to cluster.nodes */
    uint32_t capnodes;
    uint32_t *queues; /* interned names of every queue seen */
    int nqueues;

    bool held_oom; /* a node's job index could not grow: walk every job */
    uint64_t clock, clock_hwm, epoch;
    bool clock_spent; /* the clock reached ST_LAMPORT_MAX: stop serving (st_store_status) */
    st_event_t *ring; /* the last conf.event_retention events */
    int ring_cap, ring_n, ring_head; /* head: index of the oldest */

    bool dirty, stop, running;
    bool sched_idle; /* the scheduler thread waits for work on kick (sched_main): st_kick
                      * signals only then; running a cycle or gathering, it reads dirty
                      * before it waits again */
    pthread_t thr;
    pthread_t probe_thr; /* service health probes (probe.c) */
    bool probe_running, probe_stop;

    struct st_tickets *tickets; /* log tickets (logticket.c); NULL until the first */

    /* metrics */
    uint64_t m_cycles, m_placed, m_preempted, m_submitted, m_cancelled, m_finished;
    uint64_t m_cycle_hist[ST_HIST];
    double m_cycle_sum_s;
    int64_t m_start_mono;
    uint64_t m_nodes_lost, m_tasks_lost, m_requeued, m_reports;
    uint64_t m_report_hist[ST_HIST];
    double m_report_sum_s;
    /* replies held for their commit, by route (st_note_held; atomics, not s->mu) */
    uint64_t m_held[ST_HELD_ROUTES];
    const char *m_held_method[ST_HELD_ROUTES], *m_held_path[ST_HELD_ROUTES];
    uint64_t m_placed_window; /* placements since m_window_mono */
    int64_t m_window_mono;
    int64_t checks_ns;       /* st_now_ns of the last time-driven checks (st_cycle); 0 never */
    uint64_t m_check_visits; /* jobs the time-driven checks looked at (liveness.c): what
                                runs, never the pending backlog (test_backlog.c counts it) */
    uint64_t nsvc_ever;      /* services ever attached (st_service_attach) */
    double m_decisions_per_s;
    struct st_idem *idem; /* Idempotency-Keys of submissions (idem.c) */
    arb_strtab_t names;   /* jobs' team and owner names, each kept once (st_name) */
};

/* Something changed that a cycle must see: mark the state dirty, and wake
 * the scheduler thread only if it waits for work. Busy (in a cycle, or
 * gathering after one, cycle.c) it finds dirty set before it waits again:
 * no wakeup is lost, and a thousand submissions a second do not each make
 * a futex wake and a context switch. */
static inline void st_kick(st_t *s)
{
    s->dirty = true;
    if (s->sched_idle)
        pthread_cond_signal(&s->kick);
}

/* sj's message ("" none); st_job_say (ledger.h) sets it. */
static inline const char *st_job_msg(const st_job_t *sj)
{
    return sj->message ? sj->message : "";
}

/* Jobs (jobs.c; the job table is the ledger's, ledger.h). */
void st_job_free(st_job_t *sj);
/* Parse a spec body into a new finalized job (interned in s->cluster) and
 * its command/env; -EBADMSG for syntax, -EINVAL for content. */
int st_spec_parse(st_t *s, const char *body, size_t n, bool yaml, arb_job_t **job, json_t **command,
                  json_t **env, bool *restartable, struct st_dep **dep, arb_err_t *err);
/* the longest priorityClassName kept with a job (pclass below: that many bytes) */
#define ST_PCLASS_MAX 64
/*
 * A submission's spec in two steps, so that most of its parse is done
 * before the state's lock is taken (jobs.c):
 *   st_spec_read   needs no state (call it without s->mu): the JSON check,
 *                  the YAML document, and the controller's own keys taken
 *                  out and read (command, env, restartable, dependency,
 *                  array, kind: service and its keys, priorityClassName's
 *                  text). Errors: -EBADMSG for syntax, -EINVAL for content,
 *                  -ENOMEM; *out is NULL then. body must outlive *out.
 *   st_spec_job    the caller holds s->mu: the spec reader over the
 *                  document (it interns names into s->cluster and reads the
 *                  config's priority classes and extended resources) into
 *                  a new finalized job; on success the command, env,
 *                  dependency and service settings pass from r to the
 *                  caller (any out pointer but job and command/env may be
 *                  NULL), and kept works as in st_spec_parse_kept.
 *   st_spec_read_free  frees r (NULL is fine), with whatever it still holds.
 * The messages are those of st_spec_parse, in the same order.
 */
typedef struct st_spec_read st_spec_read_t;
struct spec_service;
struct st_prio_kept;
int st_spec_read(const char *body, size_t n, bool yaml, bool stored, st_spec_read_t **out,
                 arb_err_t *err);
int st_spec_job(st_t *s, st_spec_read_t *r, struct st_prio_kept *kept, arb_job_t **job,
                json_t **command, json_t **env, bool *restartable, struct st_dep **dep,
                struct spec_service *svc, char *pclass, arb_err_t *err);
void st_spec_read_free(st_spec_read_t *r);
/* Does the config (or, without one, the built-in table) define class name? */
bool st_prio_class_known(const st_t *s, const char *name);
/* A stored job's priority as resolved at submission (its record's
 * "priority" and "preemptible"); gone: set to its priorityClassName when the
 * config no longer defines that class. */
typedef struct st_prio_kept {
    int32_t priority;
    bool preemptible;
    char gone[64];
} st_prio_kept_t;
/* st_spec_parse for a stored job (recovery): with kept, the job gets kept's
 * priority and preemptible whatever the class table says now, and a class
 * gone from the config resolves to it instead of failing the spec. */
int st_spec_parse_kept(st_t *s, const char *body, size_t n, bool yaml, st_prio_kept_t *kept,
                       arb_job_t **job, json_t **command, json_t **env, bool *restartable,
                       struct st_dep **dep, char *pclass, arb_err_t *err);

/* Dependencies and array throttles (depend.c). A spec's "dependency"
 * (Slurm's text) and "array" ({job, task, count, throttle}) as the
 * controller keeps them; the scheduler asks st_dep_hold at each pending
 * job's turn (arb_sched_set_hold). */
typedef struct st_dep st_dep_t;
struct fy_node;
struct sx;
int st_dep_take(struct sx *x, struct fy_node *root, st_dep_t **out);
void st_dep_free(st_dep_t *d);
/* A dependency's parts as the job's compact form keeps them (jobcore.c):
 * st_dep_parts fills out (false: d is NULL, none); st_dep_make rebuilds one
 * (its text read again: -EINVAL naming what is wrong). */
typedef struct st_dep_parts {
    char text[256];
    bool array;
    uint64_t array_of;
    int32_t task, count, throttle;
} st_dep_parts_t;
bool st_dep_parts(const st_dep_t *d, st_dep_parts_t *out);
int st_dep_make(const st_dep_parts_t *p, st_dep_t **out, arb_err_t *err);
/* The compact form of a job (jobcore.c): j's asks, the priority class its
 * spec named (pclass, "" none) and its dependency, as one line of text
 * (malloc'd; NULL out of memory); st_core_read builds a finalized job from
 * it (names interned in c), pclass (pn bytes) and *dep; -EINVAL naming the
 * token when it is not such a form. */
char *st_core_text(const arb_cluster_t *c, const arb_job_t *j, const char *pclass,
                   const st_dep_t *dep);
/* The same text appended to b (a job record writes it in place: it needs
 * no JSON escaping): 0, or -ENOMEM with b->oom set. */
int st_core_put(arb_buf_t *b, const arb_cluster_t *c, const arb_job_t *j, const char *pclass,
                const st_dep_t *dep);
int st_core_read(arb_cluster_t *c, const char *text, size_t n, arb_job_t **out, char *pclass,
                 size_t pn, st_dep_t **dep, arb_err_t *err);
/* At submission: every job it names exists (-EINVAL naming it). */
int st_dep_check(st_t *s, const st_dep_t *d, arb_err_t *err);
arb_wait_t st_dep_hold(void *arg, const arb_job_t *j);
/* The job's dependency and array for its read-back (v's dependency and
 * array fields; -ENOMEM), and what it waits for (explain's summary) when
 * held. */
int st_dep_view(const st_job_t *sj, st_job_view_t *v);
void st_dep_explain(st_t *s, const st_job_t *sj, arb_wait_t why, char *buf, size_t n);
/* Give j its queue's default time limit when it has none, or refuse one
 * above the queue's maximum (-EINVAL naming both); config queues, then
 * scheduler.defaultTimeLimit/maxTimeLimit. */
int st_time_limit(st_t *s, arb_job_t *j, arb_err_t *err);

/* Liveness (liveness.c). */
/* Node leases, once per cycle: READY nodes silent past the lease go
 * NotReady; nodes silent past lease + grace are lost, their tasks with
 * them (st_task_lost). */
void st_check_leases(st_t *s, int64_t now);
/* Time limits, once per cycle: a placed or running job past its
 * timeLimit is stopped (SIGTERM, its grace, SIGKILL: its agents do it) and
 * ends TIMEOUT once its tasks have exited; one no agent has yet ends at
 * once. Whether sj's limit has passed at now. */
void st_check_time_limits(st_t *s, int64_t now);
bool st_timed_out(const st_job_t *sj, int64_t now);
/* Task t of sj is lost (its node lost, or its agent fenced it): mark it
 * and settle the job. */
void st_task_lost(st_t *s, st_job_t *sj, int t, const char *why);
/* After any task of sj changed: end, requeue or start stopping the job
 * as its tasks say. why names the task change for messages. */
void st_job_settle(st_t *s, st_job_t *sj, const char *why);
/* Release sj's allocations and queue it again (a new attempt follows). */
void st_job_requeue(st_t *s, st_job_t *sj, const char *why);
/* GPU gpu of node n was reported unhealthy (lost from the bus): every job
 * with a live task on it is stopped whole, then requeued (restartable) or
 * failed, as if the task were lost. The GPU itself is already out of the
 * scheduler's capacity (arb_gpu_t.healthy). */
void st_gpu_lost(st_t *s, arb_node_t *n, int gpu);
/* For `explain` of a pending job that wants GPUs: list the unhealthy GPUs
 * of nodes in service in v->unhealthy and say so at the end of v->summary
 * ("GPU 3 on node 'n1' unhealthy"); -ENOMEM. */
int st_explain_unhealthy(st_t *s, const st_job_t *sj, st_explain_view_t *v);
/* Flag stragglers of running multi-node gangs (stale report, GPUs far
 * below their peers'): events on changes. */
void st_check_stragglers(st_t *s, int64_t now);

/* Preemption with a grace period and elastic resizes (resize.c). */
/* After a cycle, for each active job: stop a victim the scheduler marked
 * (j->evicting: SIGTERM, the grace, SIGKILL, then requeue; its GPUs stay
 * held until then), announce a shrink mark, assign tasks a growth added;
 * events for each. */
void st_resize_after_cycle(st_t *s, st_job_t *sj);
/* Once every task above the shrink mark has ended, release them (the job
 * runs on smaller) and say so; true when it shrank. Called by settle. */
bool st_resize_settle(st_t *s, st_job_t *sj);
/* A waiting preemptor's explanation: v->waiting_for (its victims, still
 * stopping) and a hint that says so; -ENOMEM. */
int st_resize_explain(st_t *s, st_job_t *sj, st_explain_view_t *v);
/* The shrink mark in a job record (codec.c): "shrink": {"to": K, "for": ID}
 * while j->shrink_to is set; and back at recovery (recover.c): the mark
 * restored (no second announcement), then, once every job is back, the
 * scheduler id of the job it is for and that job waiting for the room. */
void st_resize_record(st_t *s, const st_job_t *sj, json_t *o);
void st_resize_recover(st_job_t *sj, const json_t *o);
void st_resize_recover_all(st_t *s);
/* Ended jobs kept in memory (history.c): at most conf.job_history of them,
 * the newest to end; older ones are freed once their final record is
 * durable, and read back from the store when asked for (st_job_stored).
 * Push sj as it ends (or as it is recovered ended), after its final
 * st_job_save. */
void st_history_push(st_t *s, st_job_t *sj);
/* Free what is past the history and durable: only where nobody holds a
 * job or walks a node index (the scheduler thread, between cycles). */
void st_history_trim(st_t *s);
void st_history_free(st_t *s);
/* Job id, ended and past the history: its record from the store, decoded
 * into a job of its own (st_job_free it; never indexed). -ENOENT when the
 * store has none (damaged or never written), with err saying so. */
int st_job_stored(st_t *s, uint64_t id, st_job_t **out, arb_err_t *err);
/* Decode one job record (recover.c) into a new job of its own, not indexed
 * nor handed to the scheduler; 1 when the record is damaged (skipped, said). */
struct st_jobrec; /* jobrec.h */
int st_job_decode(st_t *s, const struct st_jobrec *r, st_job_t **out, int *state, arb_err_t *err);
/* Log tickets (logticket.c): free the table (st_close). */
void st_tickets_free(st_t *s);

/* Nodes. */
st_node_t *st_node_ext(st_t *s, const arb_node_t *n);
int st_nodes_grow(st_t *s);
void st_node_save(st_t *s, arb_node_t *n);
/* The jobs that may hold allocations on n (borrowed, valid until the next
 * index change; callers still check each task's node). */
int st_node_held(st_t *s, arb_node_t *n, st_job_t ***out);
/* n's typed view (nodeview.c; full: the one-node form): 0, or -ENOMEM with
 * *v empty. */
int st_node_view_of(st_t *s, arb_node_t *n, bool full, st_node_view_t *v);
/* sj was just placed (or restored): index it under each of its nodes. */
void st_node_index_job(st_t *s, st_job_t *sj);
/* Tell the node hook about every node sj has a task on (st_job_save). */
void st_node_assign_hint(st_t *s, const st_job_t *sj);
/* Operators' calls and what they overlay (nodeops.c). The labels, taints
 * and datasets n applies: its inventory's under what operators set. */
void st_node_apply_meta(st_t *s, arb_node_t *n);
/* Stop (then requeue, or fail) every job with a live task on n: all, or
 * those that do not tolerate n's NoExecute taints. How many. */
int st_node_evict(st_t *s, arb_node_t *n, bool all, const char *why);
/* n carries NoExecute taints: evict what does not tolerate them. */
void st_node_noexecute(st_t *s, arb_node_t *n, const char *source);
/* A taint effect by name (0: none of them), and its name. */
const char *st_taint_effect_name(int e);
/* Nodes not deleted (LEFT). */
int st_nodes_live(st_t *s);
/* Build or rebuild n's resources from an inventory object (validated). */
int st_node_apply_inventory(st_t *s, arb_node_t *n, const json_t *inv, arb_err_t *err);
/* Validate an inventory object without changing anything. */
int st_inventory_check(const json_t *inv, arb_err_t *err);

/* Telemetry history (telhist.c): keep a sample of tel (a report's
 * telemetry, validated) when its interval passed; free the ring. */
void st_telhist_note(st_node_t *x, int ngpus, const json_t *tel, int64_t now);
void st_telhist_free(st_node_t *x);
/* The history as a view (its node unset), oldest first, ages from now;
 * -ENOMEM (v empty). */
int st_telhist_view(const st_node_t *x, int64_t now, st_telemetry_view_t *v);

/* *v: sj as the API shows it (jobview.c): full, the one-job form (what it
 * asks for, command, env, events), its secrets shown when who may see
 * them (who NULL: never); -ENOMEM, *v empty. */
int st_job_view_of(st_t *s, st_job_t *sj, bool full, const st_who_t *who, st_job_view_t *v);

/* JSON (codec.c). */
char *st_job_record(st_t *s, st_job_t *sj);
char *st_node_record(st_t *s, arb_node_t *n);
/* Task t of sj as its agent is told it (*o the caller's: st_assignment_free);
 * -ENOMEM, *o empty. */
int st_task_assignment(st_t *s, st_job_t *sj, int t, st_assignment_t *o);
void st_assignment_free(st_assignment_t *a);

/* Idempotency-Keys (idem.c): key syntax (-EBADMSG); the job a principal's
 * key created (0: none, or expired: then deleted in the current batch);
 * record one in the map and the current batch; reload them all (recovery,
 * expired ones deleted); free the map. st_idem_sweep deletes every key past
 * conf.idem_retention_ns at now_ms (wall clock) in the current batch: how
 * many. */
int st_idem_check(const char *key, arb_err_t *err);
uint64_t st_idem_find(st_t *s, const st_who_t *who, const char *key);
int st_idem_put(st_t *s, const st_who_t *who, const char *key, uint64_t id);
int st_idem_recover(st_t *s, arb_err_t *err);
int st_idem_sweep(st_t *s, int64_t now_ms);
void st_idem_free(st_t *s);
/* Recovery (recover.c). */
int st_recover(st_t *s, arb_err_t *err);

/* Services (service.c, probe.c; service.h has the model). */
struct spec_service;
/* A submission's service settings (c, read by st_spec_parse_svc; c->is
 * false for a batch job): -EINVAL when a service's template is more than
 * one task, -EBUSY when its name or ports clash with a running service. */
int st_service_check(st_t *s, const arb_job_t *tmpl, const struct spec_service *c, arb_err_t *err);
/* Make sj (just added, never given to the scheduler) a service parent. */
int st_service_attach(st_t *s, st_job_t *sj, const struct spec_service *c, int desired);
void st_service_free(st_job_t *sj);
/* Once per cycle, before placement: autoscale, start, restart, drain, stop;
 * and after it: addresses of what was placed, endpoints version. */
void st_service_reconcile(st_t *s, int64_t now);
void st_service_refresh(st_t *s);
/* A cancel of a service: stop its replicas, end once they all ended.
 * false when sj is no service. */
bool st_service_cancel(st_t *s, st_job_t *sj, const char *by);
/* "job 7 (service 'web', priority 1000) placing replica 2 (job 9)" into
 * buf when p is a service's replica; false otherwise. */
bool st_service_who(st_t *s, const st_job_t *p, char *buf, size_t n);
/* The event text for a preempted job: who preempted it, and why. */
void st_service_preempted(st_t *s, st_job_t *victim, char *msg, size_t n);
/* Service sj's view (GET /v1/services/{name}): 0 or -ENOMEM (v empty). */
int st_service_view_of(st_t *s, st_job_t *sj, st_service_view_t *v);
/* Service fields of a job's store record. */
void st_service_record(st_job_t *sj, json_t *o);
/* Recovery of a service parent (*parent true: never give it to the
 * scheduler) or replica (re-dressed: env, name, preemptible). */
int st_service_recover(st_t *s, st_job_t *sj, arb_job_t *j, const json_t *o, int state,
                       bool *parent);
/* A health probe's verdict for replica i (child job child) of service
 * parent; ignored when the replica has moved on. */
void st_service_probed(st_t *s, uint64_t parent, int i, uint64_t child, bool ok);
/* The health prober thread. */
int st_probe_start(st_t *s);
void st_probe_stop(st_t *s);

/* Secret env values. A job's env maps names to strings, or to
 * {"value": TEXT, "secret": true}. A task gets them as plain strings
 * (codec.c's st_task_assignment; the node's own agent only). The API shows a
 * secret's value to admins and the job's submitter only
 * (st_may_see_secrets, jobview.c). */
bool st_may_see_secrets(const st_who_t *who, const st_job_t *sj);

#endif
