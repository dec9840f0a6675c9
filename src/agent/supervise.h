/*
 * supervise.h: the per-task supervisor (as slurmstepd or containerd-shim
 * are): a small process between the agent and each task, so that the
 * fence holds whatever state the agent is in (running, SIGSTOPped, hung
 * in a system call, killed).
 *
 *   agent --(its zygote forks it, zygote.h; or posix_spawn)--> supervisor
 *                       |   (own session; the agent's child; `arbiter-supervise`)
 *                       |   reads its start record (agent_sup_start_t)
 *                       +--fork--> task (own session and process group,
 *                                  its cgroups, user, directory, output,
 *                                  PR_SET_PDEATHSIG: it dies with its
 *                                  supervisor), then exec
 *
 * The agent's address space is never copied for a task: the zygote, a
 * small static program started once, forks each supervisor from its own
 * (where there is none, posix_spawn runs the supervisor's exec on a stack
 * of its own in glibc: internal system calls only, no sanitizer
 * interceptor runs in the agent's memory), and the supervisor forks the
 * task from its own.
 *
 * The supervisor holds two deadlines, both on CLOCK_MONOTONIC (one clock
 * for every process of the machine):
 *
 *  - the lease: the agent's lease expiry, which the agent publishes in a
 *    lease file shared by all its supervisors (LOG_DIR/.arbiter/lease,
 *    agent_leasefile_*) every time its lease changes. The supervisor
 *    re-reads it at least every 100 ms and SIGKILLs the task's process
 *    group and cgroups the moment it has passed (or the file says 0, or
 *    cannot be read): a task never outlives the lease of the agent that
 *    started it, renewed or not. The agent's lease ends before the
 *    controller may declare the node lost (docs/agent.md), so the task is
 *    dead before any copy of it may start elsewhere (DESIGN.md invariant 4).
 *  - the task's own time limit (optional): SIGTERM to the group at the
 *    limit, SIGKILL to the group and cgroups a grace later.
 *
 * One copy of a task per node, whatever moment the agent dies at: each
 * task has ONE file, LOG_DIR/.arbiter/JOB.TASK.task, that is both its lock
 * and its records. The supervisor opens it (O_APPEND), takes flock
 * LOCK_EX on it for its life (held by another supervisor: it starts
 * nothing), empties it, forks the task, and appends the task record (one
 * line, one write) between the fork and the exec; the task execs only on
 * the supervisor's word (one byte on a pipe), sent once the record is
 * written. A task that runs has a record; a start that finds the lock held
 * adopts the running copy (exec.c) instead of starting another.
 *
 *   task: FORKED --record in place: byte--> EXEC'D (runs)
 *            \--no byte (record failed, supervisor died)--> _exit 127 (never ran)
 *
 * When the task ends (by itself, killed by the agent, or by a deadline),
 * the supervisor kills what is left of its group and cgroups, reaps it,
 * appends its exit record (a line "exit status=... why=..." after the
 * task record: the wait status and why it ended) and exits. Every record
 * is a complete line written by one write(2); a reader
 * (agent_sup_file_read) takes the last complete task line and the exit
 * line after it, and passes over a tail without its newline (a write cut
 * short), so a crash in a write leaves the state before it readable and no
 * record is ever read half-written. The agent reads the exit record when
 * it reaps the supervisor, or, after a restart, when the supervisor it
 * adopted from the task record is gone; so a restarted agent knows how
 * every task of its previous run ended, exit code included, and which its
 * supervisors fenced.
 *
 * No file is created or removed per task in the steady state: the agent
 * holds the lock of a finished task's file while it empties it and renames
 * it to a spare (LOG_DIR/.arbiter/spare.N) once it forgets the task, and
 * renames a spare to the next task's name before its supervisor starts
 * (exec.c). Creating and freeing inodes is what a task's files cost most on
 * ext4 (without a journal a new inode scans the recently freed ones); a
 * rename allocates and frees none.
 *
 * Supervisor lifecycle (agent_sup_run):
 *
 *   RUNNING --task exits------------------------------------------> REAPED
 *      |  \--lease passed: SIGKILL group + cgroups ---> KILLING --^  (record
 *      |                                                  ^            written,
 *      +--time limit: SIGTERM --> TERMINATING --grace-----+            exit 0)
 *      +--SIGTERM to the supervisor: SIGKILL the task ----+
 *
 * Invariants: (1) from the moment the published lease deadline has passed,
 * the supervisor sends SIGKILL to the task's group and cgroups at least
 * every 200 ms until the task leader is reaped; (2) the exit record is
 * written (a complete line, or one no reader takes) before the supervisor exits, and
 * after the task's group and cgroups were killed; (3) nothing in the
 * supervisor waits on the agent: it never reads from or writes to it.
 */
#ifndef ARB_AGENT_SUPERVISE_H
#define ARB_AGENT_SUPERVISE_H

#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/cgroup.h"
#include "arbiter/arbiter.h"

#define AGENT_SUP_DIR ".arbiter"        /* under the agent's log directory */
#define AGENT_SUP_POLL_NS 100000000LL   /* the lease is re-read at least this often */
#define AGENT_SUP_REKILL_NS 200000000LL /* once killing: SIGKILL again this often */

/* ---- the lease file ------------------------------------------------------------ */

/*
 * A small file (a magic, then the deadline as an int64 of CLOCK_MONOTONIC
 * nanoseconds) mapped shared by the agent (read-write) and by every
 * supervisor (read-only): a store of the deadline is seen by all of them at
 * once, with no message to send and nothing that waits on the agent. 0 (or
 * a deadline in the past) means: kill now.
 */
typedef struct agent_leasefile {
    int fd;
    void *map;
    int64_t *deadline; /* in map; NULL when not open */
} agent_leasefile_t;

/* Open (create: make it, with deadline 0, when missing; read-write) or map
 * read-only. -errno with text. A file that is not a lease file: -EINVAL. */
int agent_leasefile_open(const char *path, bool create, agent_leasefile_t *lf, arb_err_t *err);
void agent_leasefile_close(agent_leasefile_t *lf);
/* The deadline (0 when not open). */
int64_t agent_leasefile_get(const agent_leasefile_t *lf);
void agent_leasefile_set(agent_leasefile_t *lf, int64_t deadline_ns);

/* ---- exit records ----------------------------------------------------------------- */

typedef enum agent_sup_why {
    AGENT_SUP_EXITED,    /* the task ended (by itself, or killed by the agent) */
    AGENT_SUP_LEASE,     /* the supervisor killed it: the lease had passed */
    AGENT_SUP_TIMELIMIT, /* the supervisor ended it at its time limit */
    AGENT_SUP_STOPPED,   /* the supervisor was told to stop (SIGTERM) and killed it */
} agent_sup_why_t;

typedef struct agent_sup_exit {
    int status; /* the task leader's wait status */
    agent_sup_why_t why;
    int64_t ended_ns;    /* CLOCK_MONOTONIC: when it was reaped */
    int64_t killed_ns;   /* when the supervisor killed it (LEASE, TIMELIMIT, STOPPED); 0 */
    int64_t deadline_ns; /* the lease deadline it last read */
} agent_sup_exit_t;

const char *agent_sup_why_name(agent_sup_why_t w);
/* The record's text, a line ending in a newline, in buf: snprintf's count. */
int agent_sup_exit_format(const agent_sup_exit_t *e, char *buf, size_t n);
/* 0, -ENOENT (none yet), -EINVAL (damaged). */
int agent_sup_exit_read(const char *path, agent_sup_exit_t *out);
/* The record's text (NUL-terminated): 0 or -EINVAL. */
int agent_sup_exit_parse(const char *text, agent_sup_exit_t *out);
int agent_sup_exit_write(const char *path, const agent_sup_exit_t *e);

/* ---- the task's file (--record) ------------------------------------------------------ */

#define AGENT_SUP_EXIT_TAG "exit " /* an exit record's line starts so */
#define AGENT_SUP_FILE_MAX 4096    /* what a reader reads of a task's file */

/* Read a task's file: the last complete task line (its newline cut; "" when
 * none) into task_line (n bytes), and the exit record that follows it
 * (*have_exit). A tail without a newline is passed over. 0 or -errno
 * (-ENOENT: no file). */
int agent_sup_file_read(const char *path, char *task_line, size_t n, agent_sup_exit_t *ex,
                        bool *have_exit);
/* The same of the file's text (buf, NUL-terminated; its newlines cut). */
void agent_sup_file_parse(char *buf, char *task_line, size_t n, agent_sup_exit_t *ex,
                          bool *have_exit);

/* ---- the supervisor process ------------------------------------------------------- */

/* ---- the start record ------------------------------------------------------------- */

/*
 * What the agent hands the supervisor it spawns (`--start FD`: a memfd
 * holding agent_sup_start_encode's bytes), so that the supervisor forks
 * and prepares the task: the program and its arguments, the environment,
 * the directory, the user, and the file descriptors the supervisor
 * inherited for it (the start pipe, the task's stdout and stderr, its
 * cgroup.procs files). On the start pipe the supervisor writes the task's
 * pid (AGENT_SUP_MSG_PID) and the task a failed step (AGENT_SUP_MSG_FAIL,
 * step, errno) before it _exits 127; the pipe's end (the supervisor's copy
 * closed, the task's closed by its exec) says the task exec'd.
 */
#define AGENT_SUP_MAX_GROUPS 64
enum { AGENT_SUP_MSG_FAIL = 1, AGENT_SUP_MSG_PID = 2 };
typedef struct agent_sup_msg {
    int kind, a, b;
} agent_sup_msg_t;
enum {
    AGENT_SUP_STEP_SETSID,
    AGENT_SUP_STEP_CGROUP,
    AGENT_SUP_STEP_OUTPUT,
    AGENT_SUP_STEP_USER,
    AGENT_SUP_STEP_CHDIR,
    AGENT_SUP_STEP_EXEC,
    AGENT_SUP_STEP_FORK,
    AGENT_SUP_STEP_SUPERVISOR,
    AGENT_SUP_STEP_LOCK,   /* another supervisor holds the task's lock: it runs already */
    AGENT_SUP_STEP_RECORD, /* the task record could not be written */
    AGENT_SUP_STEP_N
};

typedef struct agent_sup_start {
    const char *path, *cwd;
    char **argv, **envv; /* NULL-ended; parsed: arrays owned, strings in the buffer */
    bool drop;           /* switch to uid, gid and groups */
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[AGENT_SUP_MAX_GROUPS];
    int64_t delay_ns; /* tests: the task sleeps this long before its exec */
    int report_fd, out_fd, err_fd;
    int ncg;
    int cg_fd[2]; /* cgroup.procs of the task's cgroups */
} agent_sup_start_t;

/* The record's bytes (malloc'd, *len of them): 0 or -ENOMEM. */
int agent_sup_start_encode(const agent_sup_start_t *s, char **out, size_t *len);
/* Parse buf (len bytes, kept: the strings point into it): 0 or -EINVAL with
 * text; free with agent_sup_start_free. */
int agent_sup_start_parse(char *buf, size_t len, agent_sup_start_t *s, arb_err_t *err);
void agent_sup_start_free(agent_sup_start_t *s);
/* The record from fd (from its start, whatever its offset): malloc'd. */
int agent_sup_start_read(int fd, char **buf, size_t *len, arb_err_t *err);
/* Fork the task and say its pid on the start pipe: its pid, or -1 (the
 * failure said on the pipe). go[0] >= 0: the task waits, before its exec,
 * for one byte on that pipe (go[1]: its write end, closed in the task);
 * the pipe's end without it (the supervisor gone, or it gave up) and the
 * task _exits 127 without running. */
pid_t agent_sup_start_task(const agent_sup_start_t *s, const int go[2]);
/* One message on the start pipe. */
void agent_sup_report(int fd, int kind, int a, int b);
/* The attributes a supervisor (or the zygote that forks them) is spawned
 * with: its own session, every signal's default action, SIGTERM and SIGCHLD
 * blocked until it has set its handlers. Destroy with posix_spawnattr_destroy. */
void agent_sup_spawnattr(posix_spawnattr_t *at);

/* ---- the supervisor process ------------------------------------------------------- */

typedef struct agent_sup_args {
    pid_t task;            /* its child, the task leader (process group id); 0 with start_fd */
    int start_fd;          /* --start FD: the start record; the supervisor forks the task; 0 none */
    const char *lease;     /* the lease file; NULL: no lease (the executor used alone) */
    const char *exit_path; /* --exit FILE: the exit record alone (without --record) */
    agent_cg_mode_t cg_mode;
    int ncg;
    const char *cg[2];      /* the task's cgroup directories */
    int64_t limit_at_ns;    /* the time limit (CLOCK_MONOTONIC); 0 none */
    int64_t limit_grace_ns; /* SIGTERM -> SIGKILL at the time limit */
    /* --record FILE --record-fields "JOB TASK ATTEMPT EPOCH GRACE_MS GEN":
     * the task's file: held (flock LOCK_EX) for the supervisor's life, taken
     * before the task is forked (held by another: the task runs already,
     * and this supervisor starts nothing: STEP_LOCK, EBUSY); the task
     * record (agent_task_record_parse's line) appended to it after the fork
     * and before the task may exec, the exit record at the end. */
    const char *record, *record_fields;
} agent_sup_args_t;

/* `arbiter supervise` arguments (the executor writes them): 0 or -EINVAL.
 * --task-pid PID (a task already forked) or --start FD (fork it). */
int agent_sup_parse(int argc, char **argv, agent_sup_args_t *a, arb_err_t *err);
/* Supervise until the task is reaped (with start_fd: start it first);
 * returns the process's exit code (0, 1 when the task was not this
 * process's child, 127 when the start record could not be read or the
 * task not forked: said on the start pipe). */
int agent_sup_run(const agent_sup_args_t *a);

int64_t agent_sup_mono_ns(void);
/* The start time of pid in clock ticks since boot (/proc/PID/stat field 22). */
int agent_proc_start_ticks(pid_t pid, uint64_t *out);
/* Write text to path atomically (a temporary file renamed: whole or not at
 * all, seen by every process at once). Not fsync'd: the record is for an
 * agent restarted on the same running kernel; a crash of the machine ends
 * its tasks too, and a stale record is refused at adoption (pid and start
 * ticks). 0 or -errno. */
int agent_sup_write_atomic(const char *path, const char *text);

#endif
