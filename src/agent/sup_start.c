/*
 * sup_start.c: the start record (supervise.h): what the agent hands the
 * supervisor it spawns so that the supervisor, not the agent, forks the
 * task and prepares it between its fork and exec. The agent encodes it
 * (agent_sup_start_encode) into a memfd the supervisor inherits; the
 * supervisor reads it (agent_sup_start_read, agent_sup_start_parse) and
 * starts the task from its own small address space (agent_sup_start_task):
 * the agent's memory is never copied for a task.
 *
 * The record is binary-safe: a magic, then key and value pairs, each a
 * NUL-terminated string:
 *
 *   "ARBSTART1" NUL  exec NUL PATH NUL  cwd NUL DIR NUL  arg NUL A0 NUL ...
 *   env NUL K=V NUL ...  [drop NUL 1 NUL uid NUL U NUL gid NUL G NUL group NUL G1 ...]
 *   [delay NUL NS NUL]  report NUL FD NUL  out NUL FD NUL  err NUL FD NUL  [cgfd NUL FD ...]
 *
 * The task's environment travels here, never in the supervisor's argv
 * (world-readable in /proc) nor its environment (a root supervisor would
 * honour the task's GLIBC_TUNABLES or LD_PRELOAD).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/supervise.h"

#define START_MAGIC "ARBSTART1"
#define START_MAX_BYTES (8u << 20) /* argv and environment: far past the kernel's limit */

/* ---- encoding (the agent) ---------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf_t;

static void put(sbuf_t *b, const char *s)
{
    size_t len = strlen(s) + 1;

    if (b->oom)
        return;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + len)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
}

static void put_kv(sbuf_t *b, const char *k, const char *v)
{
    put(b, k);
    put(b, v);
}

static void put_num(sbuf_t *b, const char *k, long long v)
{
    char num[24];

    snprintf(num, sizeof num, "%lld", v);
    put_kv(b, k, num);
}

int agent_sup_start_encode(const agent_sup_start_t *s, char **out, size_t *len)
{
    sbuf_t b = {0};

    put(&b, START_MAGIC);
    put_kv(&b, "exec", s->path);
    put_kv(&b, "cwd", s->cwd);
    for (int i = 0; s->argv[i]; i++)
        put_kv(&b, "arg", s->argv[i]);
    for (int i = 0; s->envv && s->envv[i]; i++)
        put_kv(&b, "env", s->envv[i]);
    if (s->drop) {
        put_kv(&b, "drop", "1");
        put_num(&b, "uid", (long long)s->uid);
        put_num(&b, "gid", (long long)s->gid);
        for (int i = 0; i < s->ngroups; i++)
            put_num(&b, "group", (long long)s->groups[i]);
    }
    if (s->delay_ns > 0)
        put_num(&b, "delay", (long long)s->delay_ns);
    put_num(&b, "report", s->report_fd);
    put_num(&b, "out", s->out_fd);
    put_num(&b, "err", s->err_fd);
    for (int i = 0; i < s->ncg; i++)
        put_num(&b, "cgfd", s->cg_fd[i]);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.n;
    return 0;
}

/* ---- parsing (the supervisor) ------------------------------------------------------------ */

static int num(const char *k, const char *v, long long lo, long long hi, long long *out,
               arb_err_t *err)
{
    char *end;

    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return arb_errf(err, -EINVAL, "start record: %s '%.32s' is not a number in %lld..%lld", k,
                        v, lo, hi);
    *out = x;
    return 0;
}

/* Append p to the NULL-ended vector *v of *n entries. */
static int vec_add(char ***v, int *n, char *p)
{
    char **q = realloc(*v, sizeof *q * (size_t)(*n + 2));

    if (!q)
        return -ENOMEM;
    q[(*n)++] = p;
    q[*n] = NULL;
    *v = q;
    return 0;
}

void agent_sup_start_free(agent_sup_start_t *s)
{
    free(s->argv);
    free(s->envv);
    s->argv = s->envv = NULL;
}

int agent_sup_start_parse(char *buf, size_t len, agent_sup_start_t *s, arb_err_t *err)
{
    size_t off;
    int nargs = 0, nenv = 0, rc = 0;
    bool have_report = false, have_out = false, have_err = false;

    memset(s, 0, sizeof *s);
    s->report_fd = s->out_fd = s->err_fd = -1;
    if (len < sizeof START_MAGIC || len > START_MAX_BYTES || buf[len - 1] != '\0' ||
        memcmp(buf, START_MAGIC, sizeof START_MAGIC) != 0)
        return arb_errf(err, -EINVAL, "start record: not one (bad magic, size or end)");
    off = sizeof START_MAGIC;
    if (vec_add(&s->envv, &nenv, NULL) < 0) /* an empty environment is one too */
        return arb_errf(err, -ENOMEM, "start record: out of memory");
    nenv = 0;
    while (off < len) {
        char *k = buf + off, *v;
        long long x = 0;
        off += strlen(k) + 1;
        if (off >= len) {
            rc = arb_errf(err, -EINVAL, "start record: key '%.32s' has no value", k);
            goto fail;
        }
        v = buf + off;
        off += strlen(v) + 1;
        if (!strcmp(k, "exec") || !strcmp(k, "cwd")) {
            if (!v[0]) {
                rc = arb_errf(err, -EINVAL, "start record: %s is empty", k);
                goto fail;
            }
            *(!strcmp(k, "exec") ? &s->path : &s->cwd) = v;
        } else if (!strcmp(k, "arg") || !strcmp(k, "env")) {
            if (vec_add(!strcmp(k, "arg") ? &s->argv : &s->envv, !strcmp(k, "arg") ? &nargs : &nenv,
                        v) < 0) {
                rc = arb_errf(err, -ENOMEM, "start record: out of memory");
                goto fail;
            }
        } else if (!strcmp(k, "drop")) {
            s->drop = !strcmp(v, "1");
        } else if (!strcmp(k, "uid") || !strcmp(k, "gid")) {
            if ((rc = num(k, v, 0, 0x7fffffff, &x, err)) < 0)
                goto fail;
            if (!strcmp(k, "uid"))
                s->uid = (uid_t)x;
            else
                s->gid = (gid_t)x;
        } else if (!strcmp(k, "group")) {
            if ((rc = num(k, v, 0, 0x7fffffff, &x, err)) < 0)
                goto fail;
            if (s->ngroups == AGENT_SUP_MAX_GROUPS) {
                rc = arb_errf(err, -EINVAL, "start record: more than %d groups",
                              AGENT_SUP_MAX_GROUPS);
                goto fail;
            }
            s->groups[s->ngroups++] = (gid_t)x;
        } else if (!strcmp(k, "delay")) {
            if ((rc = num(k, v, 0, 3600LL * 1000000000LL, &x, err)) < 0)
                goto fail;
            s->delay_ns = x;
        } else if (!strcmp(k, "report") || !strcmp(k, "out") || !strcmp(k, "err") ||
                   !strcmp(k, "cgfd")) {
            if ((rc = num(k, v, 3, 1023, &x, err)) < 0)
                goto fail;
            if (!strcmp(k, "cgfd")) {
                if (s->ncg == 2) {
                    rc = arb_errf(err, -EINVAL, "start record: more than two cgroup files");
                    goto fail;
                }
                s->cg_fd[s->ncg++] = (int)x;
            } else if (!strcmp(k, "report")) {
                s->report_fd = (int)x;
                have_report = true;
            } else if (!strcmp(k, "out")) {
                s->out_fd = (int)x;
                have_out = true;
            } else {
                s->err_fd = (int)x;
                have_err = true;
            }
        } else {
            rc = arb_errf(err, -EINVAL, "start record: unknown key '%.32s'", k);
            goto fail;
        }
    }
    if (!s->path || !s->cwd || nargs == 0 || !have_report || !have_out || !have_err) {
        rc = arb_errf(err, -EINVAL,
                      "start record: exec, cwd, an arg, report, out and err are required");
        goto fail;
    }
    return 0;
fail:
    agent_sup_start_free(s);
    return rc;
}

int agent_sup_start_read(int fd, char **buf, size_t *len, arb_err_t *err)
{
    struct stat st;
    size_t got = 0;
    char *p;

    if (fstat(fd, &st) != 0)
        return arb_errf(err, -errno, "start record: fd %d: %s", fd, strerror(errno));
    if (st.st_size <= 0 || (unsigned long long)st.st_size > START_MAX_BYTES)
        return arb_errf(err, -EINVAL, "start record: %lld bytes", (long long)st.st_size);
    if (!(p = malloc((size_t)st.st_size)))
        return arb_errf(err, -ENOMEM, "start record: out of memory");
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, p + got, (size_t)st.st_size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(p);
            return arb_errf(err, -e, "start record: read: %s", strerror(e));
        }
        got += (size_t)r;
    }
    *buf = p;
    *len = got;
    return 0;
}

/* ---- the task's start (the supervisor) ---------------------------------------------------- */

void agent_sup_report(int fd, int kind, int a, int b)
{
    agent_sup_msg_t m = {kind, a, b};
    ssize_t w = write(fd, &m, sizeof m);
    (void)w;
}

static void child_fail(const agent_sup_start_t *s, int step, int e) __attribute__((noreturn));
static void child_fail(const agent_sup_start_t *s, int step, int e)
{
    agent_sup_report(s->report_fd, AGENT_SUP_MSG_FAIL, step, e);
    _exit(127);
}

/* The task between fork and exec, in the supervisor's process (one thread:
 * any call is safe here). Never returns. */
static void task_child(const agent_sup_start_t *s, pid_t sup, const int go[2])
    __attribute__((noreturn));
static void task_child(const agent_sup_start_t *s, pid_t sup, const int go[2])
{
    agent_cg_task_t cg;
    struct sigaction dfl;
    sigset_t none;

    if (setsid() < 0)
        child_fail(s, AGENT_SUP_STEP_SETSID, errno);
    memset(&cg, 0, sizeof cg);
    cg.n = s->ncg;
    cg.procs_fd[0] = s->ncg > 0 ? s->cg_fd[0] : -1;
    cg.procs_fd[1] = s->ncg > 1 ? s->cg_fd[1] : -1;
    if (agent_cg_enter(&cg) < 0)
        child_fail(s, AGENT_SUP_STEP_CGROUP, errno);
    /* stdin stays the supervisor's /dev/null */
    if (dup2(s->out_fd, 1) < 0 || dup2(s->err_fd, 2) < 0)
        child_fail(s, AGENT_SUP_STEP_OUTPUT, errno);
    if (s->drop && (setgroups((size_t)s->ngroups, s->groups) != 0 || setgid(s->gid) != 0 ||
                    setuid(s->uid) != 0 || getuid() == 0 || geteuid() == 0))
        child_fail(s, AGENT_SUP_STEP_USER, errno ? errno : EPERM);
    if (chdir(s->cwd) != 0)
        child_fail(s, AGENT_SUP_STEP_CHDIR, errno);
    /* It dies with its supervisor (nothing would fence it then). After the
     * user switch, which clears it; the check closes the window in which
     * the supervisor died before it was set. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != sup)
        _exit(137);
    if (s->delay_ns > 0) { /* tests: a slow start (its start pipe stays open) */
        struct timespec d = {(time_t)(s->delay_ns / 1000000000LL),
                             (long)(s->delay_ns % 1000000000LL)};
        while (nanosleep(&d, &d) != 0 && errno == EINTR)
            ;
    }
    /* Not before the supervisor's word: the task record is in place then, so
     * that no restarted agent can miss this copy and start another. */
    if (go[0] >= 0) {
        char b;
        ssize_t got;
        close(go[1]);
        while ((got = read(go[0], &b, 1)) < 0 && errno == EINTR)
            ;
        if (got != 1)
            _exit(127); /* the supervisor gave up (said on the start pipe) or died */
        close(go[0]);
    }
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < 32; sig++) /* ignored signals survive exec: reset them */
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(s->path, s->argv, s->envv);
    child_fail(s, AGENT_SUP_STEP_EXEC, errno);
}

pid_t agent_sup_start_task(const agent_sup_start_t *s, const int go[2])
{
    pid_t me = getpid(), pid;
    int fds[5] = {s->report_fd, s->out_fd, s->err_fd, s->ncg > 0 ? s->cg_fd[0] : -1,
                  s->ncg > 1 ? s->cg_fd[1] : -1};

    /* The task keeps none of them past its exec: its stdout and stderr are
     * dup2'd copies, and the start pipe's end tells the agent it exec'd. */
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0)
            fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    pid = fork();
    if (pid == 0)
        task_child(s, me, go);
    if (pid < 0) {
        agent_sup_report(s->report_fd, AGENT_SUP_MSG_FAIL, AGENT_SUP_STEP_FORK, errno);
        return -1;
    }
    agent_sup_report(s->report_fd, AGENT_SUP_MSG_PID, (int)pid, 0);
    return pid;
}

void agent_sup_spawnattr(posix_spawnattr_t *at)
{
    sigset_t def, mask;

    posix_spawnattr_init(at);
    sigfillset(&def);
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGCHLD);
    posix_spawnattr_setsigdefault(at, &def);
    posix_spawnattr_setsigmask(at, &mask);
    posix_spawnattr_setflags(at,
                             POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
}
