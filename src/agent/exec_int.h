/*
 * exec_int.h: what the executor's two files share (exec.c: starting,
 * reaping, stopping; exec_adopt.c: a restarted agent's take-over of what a
 * previous run left, and the task table's state file). Not an API: only
 * those two include it.
 */
#ifndef ARB_AGENT_EXEC_INT_H
#define ARB_AGENT_EXEC_INT_H

#include <stdio.h>

#include "agent/exec.h"

/* snprintf for paths that may be cut short (never overflowed). */
void exec_fmt(char *dst, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
/* t's log paths (its job and task set): out_path, and err_path when
 * conf.split_stderr (else ""); agent_log_path. */
void exec_log_paths(const agent_exec_t *x, agent_task_t *t);
/* Add t (owned from now) to the table; -ENOMEM. */
int exec_table_add(agent_exec_t *x, agent_task_t *t);
/* Close f, written as tmp, and rename it to path (fsync'd first when durable). */
int exec_atomic_finish(FILE *f, const char *tmp, const char *path, bool durable);
/* Is pid still the process that started at start_ticks, and not a zombie? */
bool exec_proc_alive(pid_t pid, uint64_t start_ticks);
/* An adopted task's supervisor (or, without one, the task) still runs. */
bool exec_adopted_alive(const agent_task_t *t);
/* t's supervisor is gone: how the task ended is what its exit record says. */
void exec_sup_done(agent_exec_t *x, agent_task_t *t, int64_t now);

/* A task's file (LOG_DIR/.arbiter/JOB.TASK.task) when no supervisor holds
 * its lock: PEEK leaves it; RESET empties it; RECYCLE empties it and
 * renames it to a spare (or removes it when there are enough). true when
 * a supervisor holds it (then it is left alone). */
typedef enum { EXEC_PEEK, EXEC_RESET, EXEC_RECYCLE } exec_free_t;
bool exec_record_free(agent_exec_t *x, const char *job, int task, exec_free_t what);

/* The task's lock is held: its supervisor runs it already. Take it over
 * from the task record that supervisor wrote (waited for a little: it is
 * written between the fork and the exec): *out RUNNING and adopted, or
 * -EBUSY with text when there is no record to go by. */
int exec_adopt_running(agent_exec_t *x, const char *job, int task, int64_t now_ns,
                       agent_task_t **out, arb_err_t *err);

#endif
