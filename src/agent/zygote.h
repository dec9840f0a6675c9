/*
 * zygote.h: the supervisors' zygote. One long-lived supervisor process per
 * executor (`SUPERVISOR supervise --zygote FD`) that forks each task's
 * supervisor from its own small address space, with no exec and no start
 * of a program: the supervisor's exec and its libc's start were the
 * largest part of what a short task cost its node (docs/complexity.md "End
 * to end").
 *
 *   agent --posix_spawn (once)--> zygote (own session, stdio /dev/null,
 *     |                            SIGTERM and SIGCHLD blocked)
 *     |  request: the supervisor's argv, its fds 3.. (SCM_RIGHTS) ------>|
 *     |                                                                  | clone(CLONE_PARENT)
 *     |<----------------------------------------------- reply: its pid --+
 *     |
 *     +-- parent of --> supervisor (the agent's child, as a spawned one is:
 *                       the agent reaps it and reads its exit record; it
 *                       makes a session of its own, takes its fds at 3..,
 *                       closes every other, then runs agent_sup_run)
 *
 * The supervisor is the agent's child (CLONE_PARENT), not the zygote's: what
 * holds for a supervisor posix_spawn'd by the agent holds for it (it
 * outlives the agent, its exit is reaped and recorded, it holds the lease).
 * The zygote keeps nothing of a task: it ends when the agent's end of its
 * socket closes (the agent stopped or died), and the supervisors it forked
 * run on. A zygote that cannot start (a sanitizer build, an old supervisor
 * program) or dies is replaced by posix_spawn of each supervisor, as
 * before (agent_exec_begin).
 */
#ifndef ARB_AGENT_ZYGOTE_H
#define ARB_AGENT_ZYGOTE_H

#include <stdbool.h>
#include <sys/types.h>

#include "arbiter/arbiter.h"

#define AGENT_ZYGOTE_MAX_FDS 6   /* the supervisor's fds 3..8 */
#define AGENT_ZYGOTE_MAX_ARGS 32 /* the supervisor's argv */
#define AGENT_ZYGOTE_MSG 32768   /* a request's bytes at most (its argv) */
#define AGENT_ZYGOTE_TITLE 4096  /* room for a supervisor's command line (ps) */

typedef struct agent_zygote {
    pid_t pid; /* 0: none running */
    int fd;    /* the agent's end of the socket; -1 none */
    bool off;  /* it could not start: posix_spawn from here on */
} agent_zygote_t;

/* Start the zygote: posix_spawn of `program supervise --zygote 3`, and its
 * first word ("ready"). -errno with text; z->off is then set. */
int agent_zygote_start(agent_zygote_t *z, const char *program, arb_err_t *err);
/* Have it fork a supervisor with argv (NULL-ended, argv[0] the program's
 * name) and fds[0..nfds) at 3..3+nfds: *pid, the agent's child. -EPIPE
 * when the zygote was gone before the request (nothing was started: the
 * caller may spawn the supervisor itself); any other -errno: the zygote
 * died or failed after it (stopped: a supervisor may have started). */
int agent_zygote_spawn(agent_zygote_t *z, char *const *argv, const int *fds, int nfds, pid_t *pid,
                       arb_err_t *err);
/* Close its socket (it exits) and reap it. */
void agent_zygote_stop(agent_zygote_t *z);

/* A request's argv: len bytes of NUL-ended strings into argv (max slots,
 * NULL-ended; the strings stay in buf). argc (>= 2), or -EINVAL: a string
 * without its NUL, more than max - 1 of them, or fewer than two. */
int agent_zygote_args(char *buf, size_t len, char **argv, int max);

/* The zygote's loop, in the supervisor program (`supervise --zygote FD
 * ROOM`; ROOM, spaces, is where each supervisor writes its command line):
 * returns its exit code when the agent's end closes (0). */
int agent_zygote_main(int fd);

#endif
