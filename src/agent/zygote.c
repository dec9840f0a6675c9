/*
 * zygote.c: the supervisors' zygote (see zygote.h): the agent's side (start
 * it once, ask it for a supervisor, stop it) and the zygote's loop, which
 * the supervisor program runs (`supervise --zygote FD`). A request is one
 * SOCK_SEQPACKET message: the supervisor's argv as NUL-ended strings, its
 * fds as SCM_RIGHTS; the reply is one int32, the supervisor's pid or
 * -errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/supervise.h"
#include "agent/zygote.h"

#if defined(__SANITIZE_THREAD__)
#define ZYG_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZYG_TSAN 1
#endif
#endif

#define ZYG_READY 'Z' /* its first word: it runs */
#define ZYG_OFF 'N'   /* it cannot fork supervisors here: posix_spawn them */
#define ZYG_HIGH_FD 64

/* ---- the agent's side ---------------------------------------------------------------- */

int agent_zygote_start(agent_zygote_t *z, const char *program, arb_err_t *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    static char room[AGENT_ZYGOTE_TITLE + 1]; /* its supervisors' command lines' room */
    char *argv[] = {"arbiter", "supervise", "--zygote", "3", room, NULL};
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
    int sv[2] = {-1, -1}, child = -1, nullfd = -1, rc;
    char word = 0;

    z->pid = 0;
    z->fd = -1;
    if (!room[0])
        memset(room, ' ', AGENT_ZYGOTE_TITLE);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        rc = arb_errf(err, -errno, "zygote: socketpair: %s", strerror(errno));
        goto out;
    }
    /* its end above 3 (a dup2 onto itself would keep close-on-exec) */
    child = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (child < 0 || nullfd < 0) {
        rc = arb_errf(err, -errno, "zygote: %s", strerror(errno));
        goto out;
    }
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < 3; i++)
        posix_spawn_file_actions_adddup2(&fa, nullfd, i);
    posix_spawn_file_actions_adddup2(&fa, child, 3);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
#endif
    agent_sup_spawnattr(&at);
    rc = posix_spawn(&z->pid, program, &fa, &at, argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        z->pid = 0;
        rc = arb_errf(err, -rc, "zygote: %s: %s", program, strerror(rc));
        goto out;
    }
    z->fd = sv[0];
    sv[0] = -1;
    /* its first word: ready, or not here (an EOF: a program without --zygote) */
    ssize_t got;
    while ((got = recv(z->fd, &word, 1, 0)) < 0 && errno == EINTR)
        ;
    if (got != 1 || word != ZYG_READY) {
        agent_zygote_stop(z);
        rc = arb_errf(err, -ENOTSUP, "zygote: %s does not run one (%s)", program,
                      got == 1 ? "not in this build" : "no answer");
        goto out;
    }
    rc = 0;
out:
    if (rc < 0)
        z->off = true;
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    if (child >= 0)
        close(child);
    if (nullfd >= 0)
        close(nullfd);
    return rc;
}

int agent_zygote_spawn(agent_zygote_t *z, char *const *argv, const int *fds, int nfds, pid_t *pid,
                       arb_err_t *err)
{
    char buf[AGENT_ZYGOTE_MSG];
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * AGENT_ZYGOTE_MAX_FDS)];
    } cm;
    size_t len = 0;
    int32_t reply = 0;
    ssize_t got;

    if (z->fd < 0)
        return arb_errf(err, -EPIPE, "zygote: not running");
    if (nfds < 1 || nfds > AGENT_ZYGOTE_MAX_FDS)
        return arb_errf(err, -EINVAL, "zygote: %d fds (1..%d)", nfds, AGENT_ZYGOTE_MAX_FDS);
    for (int i = 0; argv[i]; i++) {
        size_t n = strlen(argv[i]) + 1;
        if (i >= AGENT_ZYGOTE_MAX_ARGS - 1 || len + n > sizeof buf)
            return arb_errf(err, -EPIPE, "zygote: the supervisor's arguments are too long");
        memcpy(buf + len, argv[i], n);
        len += n;
    }
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = cm.b,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    while ((got = sendmsg(z->fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (got != (ssize_t)len) { /* it is gone: nothing was started */
        agent_zygote_stop(z);
        return arb_errf(err, -EPIPE, "zygote: gone");
    }
    while ((got = recv(z->fd, &reply, sizeof reply, 0)) < 0 && errno == EINTR)
        ;
    if (got != (ssize_t)sizeof reply) {
        int e = got < 0 ? errno : ECONNRESET;
        agent_zygote_stop(z);
        return arb_errf(err, -e, "zygote: it died during a start");
    }
    if (reply <= 0)
        return arb_errf(err, reply < 0 ? reply : -EIO, "zygote: clone: %s",
                        strerror(reply < 0 ? -reply : EIO));
    *pid = (pid_t)reply;
    return 0;
}

void agent_zygote_stop(agent_zygote_t *z)
{
    if (z->fd >= 0)
        close(z->fd); /* its loop ends at the EOF */
    z->fd = -1;
    if (z->pid > 0) /* reaped already by a subreaper's waitpid(-1): ECHILD */
        while (waitpid(z->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    z->pid = 0;
}

/* ---- the zygote ------------------------------------------------------------------------ */

/* Its command line's bytes ([arg_start, arg_end) of /proc/self/stat): each
 * supervisor writes its own argv there, so that /proc/PID/cmdline (ps) shows
 * `arbiter supervise --start 3 --exit ...` as for a spawned one. The agent
 * gives the zygote a last argument of spaces for the room. */
static char *title_at;
static size_t title_room;

static void title_init(void)
{
    char buf[4096], *s, *tok, *save = NULL;
    unsigned long long lo = 0, hi = 0;
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), field = 3;
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    if (!(s = strrchr(buf, ')')))
        return;
    for (tok = strtok_r(s + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
        if (field == 48)
            lo = strtoull(tok, NULL, 10);
        else if (field == 49)
            hi = strtoull(tok, NULL, 10);
    }
    if (lo && hi > lo && hi - lo < (1u << 20)) {
        title_at = (char *)(uintptr_t)lo;
        title_room = (size_t)(hi - lo);
    }
}

/* argv, NUL-separated, then NULs to the end; nothing when it does not fit. */
static void title_set(char *const *argv)
{
    size_t len = 0;

    for (int i = 0; argv[i]; i++)
        len += strlen(argv[i]) + 1;
    if (!title_at || len > title_room)
        return;
    memset(title_at, 0, title_room);
    for (size_t off = 0, i = 0; argv[i]; i++) {
        size_t k = strlen(argv[i]) + 1;
        memcpy(title_at + off, argv[i], k);
        off += k;
    }
}

static void close_from(int lo)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lo, ~0U, 0) == 0)
        return;
#endif
    for (int fd = lo; fd < 1024; fd++)
        close(fd);
}

/* The new supervisor, in the clone: a session of its own, fds[i] at 3 + i
 * and nothing else above stdio, then its loop. Never returns. */
static void sup_child(int *fds, int nfds, char **argv, int argc)
{
    agent_sup_args_t a;
    int high[AGENT_ZYGOTE_MAX_FDS];

    if (setsid() < 0)
        _exit(127);
    for (int i = 0; i < nfds; i++) /* above every target: no dup2 overwrites a source */
        if ((high[i] = fcntl(fds[i], F_DUPFD, ZYG_HIGH_FD)) < 0)
            _exit(127);
    for (int i = 0; i < nfds; i++)
        if (dup2(high[i], 3 + i) < 0)
            _exit(127);
    close_from(3 + nfds); /* the zygote's socket, the copies, the received fds */
    title_set(argv);
    if (argc > 1 && !strcmp(argv[1], "supervise")) /* as `arbiter-supervise supervise ...` */
        argc--, argv++;
    if (agent_sup_parse(argc, argv, &a, NULL) < 0)
        _exit(2);
    _exit(agent_sup_run(&a));
}

int agent_zygote_args(char *buf, size_t len, char **argv, int max)
{
    int argc = 0;

    if (max < 3)
        return -EINVAL;
    for (size_t off = 0; off < len;) {
        char *end = memchr(buf + off, '\0', len - off);
        if (!end || argc == max - 1)
            return -EINVAL; /* a string without its NUL, or too many */
        argv[argc++] = buf + off;
        off = (size_t)(end - buf) + 1;
    }
    argv[argc] = NULL;
    return argc < 2 ? -EINVAL : argc;
}

/* One request: fork its supervisor; the reply (its pid or -errno). */
static int32_t serve(int sock, char *buf, size_t len, int *fds, int nfds)
{
    char *argv[AGENT_ZYGOTE_MAX_ARGS];
    int argc = agent_zygote_args(buf, len, argv, AGENT_ZYGOTE_MAX_ARGS);

    if (argc < 0 || nfds < 1)
        return -EINVAL;
    /* Its parent is the agent (CLONE_PARENT), whose SIGCHLD it sends at
     * its end, as a supervisor the agent spawned itself. A raw clone, as
     * fork: this process has one thread and no atfork handlers. */
    long pid = syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), NULL, NULL, NULL, 0UL);
    if (pid == 0) {
        close(sock);
        sup_child(fds, nfds, argv, argc);
    }
    return pid < 0 ? -errno : (int32_t)pid;
}

int agent_zygote_main(int fd)
{
    static char buf[AGENT_ZYGOTE_MSG];
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * AGENT_ZYGOTE_MAX_FDS)];
    } cm;
    int sock = fcntl(fd, F_DUPFD_CLOEXEC, ZYG_HIGH_FD + AGENT_ZYGOTE_MAX_FDS);
    char word = ZYG_READY;

    if (sock < 0)
        return 1;
    close(fd);
    title_init();
    title_set((char *[]){"arbiter", "supervise", "--zygote", "3", NULL});
#ifdef ZYG_TSAN
    word = ZYG_OFF; /* a raw clone of a ThreadSanitizer process: its runtime's locks */
#endif
    if (send(sock, &word, 1, MSG_NOSIGNAL) != 1 || word != ZYG_READY)
        return 1;
    for (;;) {
        int fds[AGENT_ZYGOTE_MAX_FDS], nfds = 0;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
        struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
        ssize_t got = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got == 0 ? 0 : 1; /* the agent's end closed */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < n; i++) {
                int f;
                memcpy(&f, CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof f);
                if (nfds < AGENT_ZYGOTE_MAX_FDS)
                    fds[nfds++] = f;
                else
                    close(f);
            }
        }
        int32_t reply = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
                            ? -E2BIG
                            : serve(sock, buf, (size_t)got, fds, nfds);
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        if (send(sock, &reply, sizeof reply, MSG_NOSIGNAL) != (ssize_t)sizeof reply)
            return 1;
    }
}
