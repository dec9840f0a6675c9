/*
 * exec.h: the task executor. Starts each task under a supervisor of its own
 * (supervise.h: a small process that kills the task when the agent's lease
 * passes, whatever state the agent is in), as the leader of its own
 * session and process group, in its own cgroups (cgroup.h), as the --run-as
 * user when the agent is root (never as root unless allowed), with a clean
 * environment plus CUDA_VISIBLE_DEVICES, ARBITER_* and, for gangs, the
 * rendezvous variables of distributed launchers, in the directory the spec
 * gives or else the user's home (/tmp when it has none, as slurmd does);
 * stdout and stderr go to one file, LOG_DIR/JOB.TASK.out, in the order they
 * were written (Slurm's slurm-JOB.out, a Kubernetes container's log), or
 * stderr to LOG_DIR/JOB.TASK.err with conf.split_stderr: one file made per
 * task, no directory (agent_log_path). It reaps exit codes, cancels (SIGTERM to
 * the group, a grace period, then SIGKILL to the group and the cgroups) and
 * fences (SIGKILL to every task at once). The grace is the task's own (its
 * job's terminationGracePeriodSeconds) when the controller gave one, else
 * conf.grace_ns.
 *
 * Elastic tasks get ARBITER_RESIZE_FILE, LOG_DIR/JOB.TASK.resize, written
 * before the task starts and rewritten (atomically: a temporary file, then
 * rename) on every resize, as key=value lines:
 *   generation=3
 *   world_size=6
 *   rank=2
 *   hosts=10.0.0.1,10.0.0.1,10.0.0.2,...   (every rank's host, in rank order)
 * after which the task's process group gets SIGUSR1 (SIGTERM stays "stop").
 * An elastic task must catch or ignore SIGUSR1: its default action ends
 * the process.
 *
 * A task with a time limit (spec deadline_ns, from the assignment's
 * time_limit_ms counted from when it arrived) is stopped here at that
 * instant like a cancel, reason "timeout", whether or not the controller
 * can be reached.
 *
 * Time is passed in (monotonic ns read at the edge); nothing here sleeps
 * except agent_exec_wait, which tests and shutdown use.
 *
 * Supervisors: the executor starts a supervisor per task, forked with no
 * exec by its zygote (zygote.h: one long-lived `conf.supervisor supervise
 * --zygote` per executor, started at the first task; the supervisor is
 * still the agent's child), or posix_spawn'd where there is no zygote (no
 * copy of the agent's memory either way), handing it a start
 * record (supervise.h); the supervisor forks the task and prepares it
 * between its fork and exec; the task gets SIGKILL when its supervisor
 * dies. With conf.leased, the executor keeps the lease file
 * LOG_DIR/.arbiter/lease, where agent_exec_set_deadline publishes the
 * agent's lease expiry to every supervisor; each kills its task when it
 * has passed. The executor records each task in LOG_DIR/.arbiter/JOB.TASK.task
 * (agent_exec_adopt_all finds them after a restart, with or without a
 * state file) and reads how it ended from the supervisor's exit record.
 *
 * Starting a task never waits for the task's exec (agent_exec_begin): the
 * supervisor is forked (the zygote answers with its pid; posix_spawn
 * returns once it has exec'd) and the
 * task is STARTING until its start pipe, polled with the other tasks
 * (agent_exec_start_fds, agent_exec_poll), says that the task exec'd (the
 * supervisor closes its copy, the task's closes on exec), or
 * which step failed: the task is then EXITED with exit code 127 (not
 * found) or 126 and start_err saying why, as a shell would. A STARTING
 * task is live, holds its GPUs and is reported running; a cancel or a
 * resize of one first waits for its start to settle (an exec,
 * milliseconds), so that its process group exists when it is signalled;
 * a fence kills its supervisor first (its task dies with it), then
 * settles it (reason "fenced" whether or not it had exec'd).
 * agent_exec_start is the same start, waiting until it has settled.
 *
 * A task's life (reason says why it ended):
 *
 *   begin --> STARTING --both exec'd--> RUNNING
 *                 \--a step failed (start_failed, 126/127)----------------------> EXITED
 *
 *   start --> RUNNING --cancel--> STOPPING --exit, or SIGKILL at the deadline--> EXITED
 *                |  \--fence (SIGKILL now)----------------------------------------^
 *                +--- the leader exits (the rest of its group and cgroup are killed) ---^
 *                +--- its supervisor kills it: the lease passed (fenced_by_sup), or
 *                     its time limit (reason "timeout") ---- -------------------------^
 *
 * Invariants: (1) a task's processes are gone (group and cgroup killed)
 * before it is reported EXITED, except processes that left both the group
 * and the cgroup where there are no cgroups; (2) a task never runs as root
 * unless allow_root; (3) at most one live task per (job, task index);
 * (4) with conf.leased, no task outlives the deadline last published with
 * agent_exec_set_deadline, whether this process runs, is stopped or dead
 * (its supervisor kills it); and none outlives its supervisor.
 */
#ifndef ARB_AGENT_EXEC_H
#define ARB_AGENT_EXEC_H

#include <limits.h>
#include <poll.h>
#include <sys/types.h>

#include "agent/cgroup.h"
#include "agent/supervise.h"
#include "agent/zygote.h"
#include "arbiter/cluster.h"

#define AGENT_JOB_MAX 128

typedef struct agent_task_spec {
    const char *job;   /* job id: letters, digits, '.', '_', '-' (it names files) */
    int task;          /* task index in the job, >= 0 */
    uint64_t attempt;  /* the controller's attempt (bumped at each requeue) */
    uint64_t epoch;    /* the assignment's epoch (agent_lease_check_assignment) */
    char *const *argv; /* argv[0] without '/' is looked up in the task's PATH */
    char *const *env;  /* extra "KEY=VALUE", NULL-terminated; may be NULL */
    int ngpus;
    int gpus[ARB_MAX_GPUS]; /* node GPU indices -> CUDA_VISIBLE_DEVICES */
    int world_size, rank;   /* world_size > 0: a gang member (MASTER_*, WORLD_SIZE, RANK) */
    const char *master_addr;
    int master_port;
    int64_t mem_bytes; /* memory limit; 0 none */
    int64_t cpu_milli; /* CPU limit; 0 none */
    const char *cwd;   /* NULL: the tasks' user's home, else /tmp (agent_exec_t.workdir) */
    bool has_grace;    /* grace_ns is this task's SIGTERM -> SIGKILL grace */
    int64_t grace_ns;
    bool elastic; /* write ARBITER_RESIZE_FILE (world_size, rank, hosts, generation) */
    uint32_t generation;
    const char *hosts;   /* elastic: every rank's host, comma-separated; may be NULL */
    int64_t deadline_ns; /* its time limit on the caller's clock (now_ns's), 0: none: its
                            supervisor then sends SIGTERM, SIGKILL a grace later, whatever
                            the agent does (reason "timeout") */
} agent_task_spec_t;

typedef enum agent_task_state {
    AGENT_TASK_STARTING, /* forked; its start pipe has not said yet that both exec'd */
    AGENT_TASK_RUNNING,
    AGENT_TASK_STOPPING,
    AGENT_TASK_EXITED,
} agent_task_state_t;

typedef struct agent_task {
    char job[AGENT_JOB_MAX];
    int task;
    uint64_t attempt, epoch;
    pid_t pid;            /* the leader = process group id = session id */
    uint64_t start_ticks; /* /proc/PID/stat starttime: recognises the pid after a restart */
    pid_t sup_pid;        /* its supervisor (0: none, a task adopted from an old state file) */
    uint64_t sup_ticks;   /* adopted: the supervisor's start ticks (its task record's) */
    agent_task_state_t state;
    bool adopted;       /* found running after a restart: not our child (a supervisor still
                           reports its exit code; a task without one has none) */
    bool fenced_by_sup; /* its supervisor killed it: the lease had passed */
    bool noted;         /* its end was logged (agent.c) */
    int64_t start_ns, kill_at_ns, end_ns;
    int exit_code;   /* 0..255 when it exited; -1 killed by a signal or unknown */
    int signal;      /* the signal that ended it, else 0 */
    char reason[16]; /* "exited", "cancelled", "fenced", "killed", "lost", "timeout" */
    int ngpus;
    int gpus[ARB_MAX_GPUS];
    char out_path[PATH_MAX]; /* its log: stdout, and stderr unless err_path */
    char err_path[PATH_MAX]; /* conf.split_stderr: its stderr; else "" */
    agent_cg_task_t cg;
    int64_t grace_ns;    /* its own grace; < 0: conf.grace_ns */
    uint32_t generation; /* elastic: the resize generation it was last told */
    bool timed;          /* no process (conf.timed): it ends at end_at_ns */
    int64_t end_at_ns;
    int64_t late_ns;      /* fenced_by_sup: how long after the lease deadline it was killed */
    int64_t seen_late_ns; /* ... and how long after it this executor learnt so */
    int64_t deadline_ns;  /* its time limit (0: none): SIGTERM, the grace, SIGKILL; reason
                             "timeout" (agent_exec_poll, time_limit) */
    int start_fd;         /* STARTING: the read end of its start pipe */
    int start_step, start_errno; /* STARTING: the first step that failed (start_errno > 0) */
    char *start_cwd;             /* STARTING: its working directory, for start_err; owned */
    bool start_failed;           /* it never ran: start_err says why (exit code 126/127) */
    int start_rc;                /* start_failed: -errno of the failed step */
    char start_err[320];         /* start_failed: what went wrong, for the agent's log */
} agent_task_t;

typedef struct agent_exec_conf {
    const char *log_dir;     /* required; made when missing */
    const char *run_as;      /* the tasks' user when the agent is root; NULL: "nobody" */
    bool allow_root;         /* an agent running as root runs tasks as root */
    int64_t grace_ns;        /* SIGTERM -> SIGKILL; 0: 10 s */
    const char *cgroup_root; /* NULL: /sys/fs/cgroup */
    const char *cgroup_mode; /* "auto" (NULL), "v2", "v1", "none" */
    const char *cgroup_self; /* the agent's /proc/self/cgroup text (tests); NULL: read it */
    const char *node_name;   /* ARBITER_NODE */
    bool cgroup_scoped;      /* task cgroups under arbiter/NAME-HASH (agent_cg_scope_name):
                                never shared with another agent on the machine */
    bool subreaper;          /* adopt orphaned grandchildren so they are reaped here */
    const char *supervisor;  /* the arbiter binary, run as `SUPERVISOR supervise ...` for
                                each task (the agent: /proc/self/exe); required unless timed */
    bool leased;             /* supervisors hold the lease deadline (agent_exec_set_deadline);
                                false: no lease (the executor on its own, in tests) */
    bool timed;              /* --emulate-tasks timed: no process at all; a task whose
                                command is `sleep N` runs N seconds, any other ends at
                                once, both with exit 0; a stop ends it at once (143) */
    int64_t start_delay_ns;  /* tests: each task sleeps this long before its exec, forked
                                by its supervisor (a slow start; ARBITER_AGENT_START_DELAY_MS) */
    bool no_zygote;          /* posix_spawn every supervisor, no zygote (zygote.h) */
    bool split_stderr;       /* stderr to LOG_DIR/JOB.TASK.err, not into the .out file */
} agent_exec_conf_t;

#define AGENT_EXEC_SPARES 256 /* spare task files kept; more are removed */

typedef struct agent_exec {
    agent_exec_conf_t conf; /* strings borrowed: they outlive the executor */
    bool drop;              /* switch user in the child */
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[64];
    char user[64], home[256];
    char workdir[256]; /* a task's directory when its spec gives none: home, else /tmp */
    agent_cg_t cg;
    int ntasks, cap;
    agent_task_t **tasks;   /* owned */
    char warning[640];      /* cgroup and user notes to log at start; "" none */
    char sup_dir[PATH_MAX]; /* LOG_DIR/.arbiter: the lease file, each task's file, spares */
    /* Spare task files (sup_dir/spare.N, empty): a finished task's file
     * renamed, for the next task to take by rename (supervise.h). */
    int spare[AGENT_EXEC_SPARES], nspare;
    unsigned spare_seq; /* the next spare's N */
    agent_leasefile_t lease;
    agent_zygote_t zyg; /* forks the supervisors (zygote.h); started at the first task */
    int zyg_deaths;     /* how often it died: at AGENT_EXEC_ZYGOTE_DEATHS, no more of it */
} agent_exec_t;

/*
 * Task task of job job's log file under log_dir: stream "out" is
 * LOG_DIR/JOB.TASK.out (stdout, and stderr when the agent does not split
 * it), "err" LOG_DIR/JOB.TASK.err (stderr, conf.split_stderr). Flat: a
 * task's log costs one file and no directory. Cut short, never overflowed,
 * when buf is too small.
 */
void agent_log_path(char *buf, size_t n, const char *log_dir, const char *job, int task,
                    const char *stream);
/*
 * The log file to read for task task of job job: agent_log_path's, or, where
 * that does not exist and the layout before it does, LOG_DIR/JOB/TASK.STREAM
 * (a task an older agent started keeps writing there after an upgrade, and
 * its logs must still be found).
 */
void agent_log_find(char *buf, size_t n, const char *log_dir, const char *job, int task,
                    const char *stream);

/* Set up: the tasks' user, the log dir, cgroups. Free with agent_exec_free. */
int agent_exec_init(agent_exec_t *x, const agent_exec_conf_t *conf, arb_err_t *err);
/* Free the table. Running tasks are left running (fence first to stop them). */
void agent_exec_free(agent_exec_t *x);

/*
 * Start a task. -EINVAL bad spec, -EEXIST (job, task) is live, -ENOENT the
 * command is not found, else -errno from the system; err says what. On
 * failure nothing is left behind (no process, no cgroup). *out (optional)
 * points into the table until the next start or forget.
 */
int agent_exec_start(agent_exec_t *x, const agent_task_spec_t *spec, int64_t now_ns,
                     agent_task_t **out, arb_err_t *err);

/*
 * Start a task without waiting for it to exec: as agent_exec_start, but
 * the task is STARTING when this returns (RUNNING at once when conf.timed).
 * A failure found before the supervisor runs (its spawn included: a
 * supervisor program that cannot be exec'd) returns as agent_exec_start's;
 * one after it (a step of the task's child, its exec) makes the task EXITED, start_failed,
 * in the agent_exec_poll that sees it (which counts it as a task that
 * became EXITED).
 */
int agent_exec_begin(agent_exec_t *x, const agent_task_spec_t *spec, int64_t now_ns,
                     agent_task_t **out, arb_err_t *err);

/* The start pipes of the STARTING tasks, as POLLIN entries for poll(2):
 * readable when agent_exec_poll has a start to settle. Up to max; returns
 * how many STARTING tasks there are (more than max: poll soon). */
int agent_exec_start_fds(const agent_exec_t *x, struct pollfd *pf, int max);

/*
 * A task that could not be started (agent_exec_start failed): record it as
 * EXITED with exit_code (127 command not found, 126 otherwise, as shells
 * say), so that its failure is reported like any exit. -EEXIST when
 * (job, task) is live.
 */
int agent_exec_record_failed(agent_exec_t *x, const agent_task_spec_t *spec, int exit_code,
                             int64_t now_ns);

/* SIGTERM the task's group; SIGKILL at now + grace (agent_exec_poll).
 * -ENOENT no such task; 0 (nothing done) when it is already stopping or gone. */
int agent_exec_cancel(agent_exec_t *x, const char *job, int task, int64_t now_ns);

/* A resize notice for elastic task (job, task): when generation differs
 * from the one it has, rewrite its ARBITER_RESIZE_FILE and SIGUSR1 its
 * group. 1 when notified, 0 when nothing changed or it is not running,
 * -ENOENT no such task, -errno when the file cannot be written. */
int agent_exec_resize(agent_exec_t *x, const char *job, int task, uint32_t generation,
                      int world_size, int rank, const char *hosts, arb_err_t *err);

/* Reap exits, kill what is past its deadline, tidy cgroups. Returns how many
 * tasks became EXITED. */
int agent_exec_poll(agent_exec_t *x, int64_t now_ns);

/* Self-fencing: SIGKILL every live task's group and cgroups now, and
 * publish deadline 0 to their supervisors; reason "fenced". Returns how
 * many tasks were live. Reap with agent_exec_poll. */
int agent_exec_fence(agent_exec_t *x, int64_t now_ns);

/* conf.leased: publish the lease deadline (CLOCK_MONOTONIC ns; 0: kill
 * now) to every supervisor, and read the one last published (a restarted
 * agent: its predecessor's, which covers the tasks it left running). */
void agent_exec_set_deadline(agent_exec_t *x, int64_t deadline_ns);
int64_t agent_exec_deadline(const agent_exec_t *x);

/* Poll until no task is live or timeout_ns passes (sleeping 5 ms between
 * polls; now() read with CLOCK_MONOTONIC). 0 or -ETIMEDOUT. */
int agent_exec_wait(agent_exec_t *x, int64_t timeout_ns);

agent_task_t *agent_exec_find(agent_exec_t *x, const char *job, int task);
/* Drop an EXITED task from the table (its report reached the controller). */
int agent_exec_forget(agent_exec_t *x, const char *job, int task);
/* The next instant a task is due to be stopped or killed by the executor
 * itself (a time limit, the end of a grace period); 0 none. A caller that
 * blocks (a report to a controller) must not block past it. */
int64_t agent_exec_next_deadline(const agent_exec_t *x);
/* Live tasks (STARTING, RUNNING or STOPPING). */
int agent_exec_live(const agent_exec_t *x);

/*
 * After a restart: take over a task a previous run started, if pid is still
 * the same process (start_ticks matches /proc/PID/stat). It has no exit code
 * when it ends (not our child). -ESRCH when it is gone or the pid was reused.
 */
typedef struct agent_task_record {
    char job[AGENT_JOB_MAX];
    int task;
    uint64_t attempt, epoch;
    pid_t pid;
    uint64_t start_ticks;
    int64_t grace_ns;    /* its own grace; -1: the executor's (records without it) */
    uint32_t generation; /* elastic: its resize generation; 0 unknown */
} agent_task_record_t;
int agent_exec_adopt(agent_exec_t *x, const agent_task_record_t *r, int64_t now_ns, arb_err_t *err);

/*
 * After a restart: take over every task a previous run of this executor
 * (same log directory) left, through the task records of its supervisors:
 * a live supervisor's task is adopted RUNNING; a task whose supervisor has
 * gone is added EXITED with what its exit record says (exit code, signal,
 * or fenced by its supervisor when the lease passed), so that it is
 * reported. *ended (optional) gets how many ended; returns how many were
 * adopted live.
 */
int agent_exec_adopt_all(agent_exec_t *x, int64_t now_ns, int *ended);
/* One line of a supervised task's record (LOG_DIR/.arbiter/JOB.TASK.task):
 * "job task attempt epoch sup_pid sup_ticks pid ticks grace_ms generation".
 * 0, or -EINVAL when it is not one. */
int agent_task_record_parse(const char *line, agent_task_record_t *r, pid_t *sup,
                            uint64_t *sup_ticks);

/* Persist the live tasks (job, task, attempt, epoch, pid, start ticks) to
 * path, atomically (write, fsync, rename), for agent_exec_load after a
 * restart. */
int agent_exec_save(const agent_exec_t *x, const char *path, arb_err_t *err);
/* Read up to max records; the count, 0 when the file is missing, or -errno. */
int agent_exec_load(const char *path, agent_task_record_t *out, int max, arb_err_t *err);

const char *agent_task_state_name(agent_task_state_t s);
/* A job id that can name files and cgroups: 1..127 of [A-Za-z0-9._-], no
 * leading '.'. */
bool agent_job_id_ok(const char *job);

#endif
