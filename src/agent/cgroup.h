/*
 * cgroup.h: resource limits and whole-task kills for the executor, with
 * cgroup v2 where it is usable (memory.max, cpu.max, cgroup.kill), v1 where
 * only v1 is (memory.limit_in_bytes, cpu.cfs_quota_us; kills by walking
 * cgroup.procs), and a clear warning where neither works (tasks then run
 * without limits, and kills reach the process group only).
 *
 * Layout: each task gets a cgroup "JOB.TASK" under "arbiter" under the
 * agent's own cgroup (from /proc/self/cgroup), in every hierarchy used:
 *   v2  ROOT/OWN/arbiter/JOB.TASK
 *   v1  ROOT/memory/OWN_MEM/arbiter/JOB.TASK and ROOT/cpu/OWN_CPU/arbiter/JOB.TASK
 * and, with a scope (agent_cg_scope; `arbiter agent` always gives one),
 * under ROOT/OWN/arbiter/SCOPE/JOB.TASK. Agents sharing a machine share
 * OWN (often the root): without a scope, two of them running a task of the
 * same name (job 5 task 0 of two clusters, or of one cluster's two
 * attempts on two nodes of one host) share its cgroup, and the first to
 * stop its task kills the other's (agent_cg_task_kill kills the cgroup).
 * The child joins its cgroups itself, before it drops privileges and execs
 * (agent_cg_enter writes "0" to cgroup.procs through descriptors the parent
 * opened), so nothing it forks can escape before it is inside.
 *
 * Everything is rooted at a path the caller gives, so tests run the v2 code
 * on a fake tree and the v1 code on the real one where it is writable.
 */
#ifndef ARB_AGENT_CGROUP_H
#define ARB_AGENT_CGROUP_H

#include <limits.h>
#include <sys/types.h>

#include "arbiter/arbiter.h"

typedef enum agent_cg_mode {
    AGENT_CG_NONE,
    AGENT_CG_V1,
    AGENT_CG_V2,
} agent_cg_mode_t;

typedef struct agent_cg {
    agent_cg_mode_t mode;
    char base[2][PATH_MAX]; /* v2: [0] = .../arbiter; v1: [0] memory, [1] cpu */
    bool scoped;            /* base ends in /SCOPE (agent_cg_scope) */
    char warning[512];      /* why there are no limits (mode NONE), else "" */
} agent_cg_t;

/* One task's cgroups. */
typedef struct agent_cg_task {
    int n; /* directories made: 0, 1 (v2) or 2 (v1) */
    char dir[2][PATH_MAX];
    int procs_fd[2]; /* cgroup.procs, open until the child has joined */
} agent_cg_task_t;

/*
 * Find a usable hierarchy under root (NULL: /sys/fs/cgroup). mode: "auto"
 * or NULL (v2, else v1, else none), "v2", "v1" (that one or an error) or
 * "none". self: the agent's /proc/self/cgroup text (NULL: read it). Never
 * fails in auto mode: no usable hierarchy is mode NONE with cg->warning set.
 */
int agent_cg_init(agent_cg_t *cg, const char *root, const char *mode, const char *self,
                  arb_err_t *err);
const char *agent_cg_mode_name(agent_cg_mode_t m);
/* This agent's own subtree: NAME-HASH into out (n bytes), NAME the node
 * name cut to [A-Za-z0-9._-] (at most 64), HASH of the log directory's
 * absolute path: distinct for every agent that can run at once on one
 * machine (no two share a log directory), the same for an agent that
 * restarts (so it finds the cgroups of the tasks it adopts). */
void agent_cg_scope_name(const char *node, const char *log_dir, char *out, size_t n);
/* Move cg's bases into base/scope (made, with the memory and cpu
 * controllers enabled below it on v2). Mode NONE: nothing. */
int agent_cg_scope(agent_cg_t *cg, const char *scope, arb_err_t *err);
/* rmdir the scope's directories (agent exit); those still holding task
 * cgroups (tasks kept running) stay. */
void agent_cg_scope_remove(agent_cg_t *cg);

/* Make the task's cgroups and write its limits (0: none). In mode NONE,
 * t->n = 0 and nothing happens. -errno with text on failure, nothing left
 * behind. */
int agent_cg_task_create(agent_cg_t *cg, const char *name, int64_t mem_bytes, int64_t cpu_milli,
                         agent_cg_task_t *t, arb_err_t *err);
/* In the child, between fork and exec: join. Async-signal-safe. -1 on error. */
int agent_cg_enter(const agent_cg_task_t *t);
/* In the parent, once the child has joined (or failed): close the fds. */
void agent_cg_task_close_fds(agent_cg_task_t *t);
/* SIGKILL every process in the task's cgroups (cgroup.kill on v2). Returns
 * how many processes were signalled (0 for cgroup.kill, which does not say). */
int agent_cg_task_kill(agent_cg_t *cg, agent_cg_task_t *t);
/* Processes in the task's first cgroup, or -errno. */
int agent_cg_task_procs(const agent_cg_task_t *t);
/* rmdir the task's cgroups: 0 when gone, -EBUSY while processes remain. */
int agent_cg_task_remove(agent_cg_task_t *t);

#endif
