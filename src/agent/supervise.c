/*
 * supervise.c: the per-task supervisor (see supervise.h): the lease file
 * shared with the agent, exit records, and the supervisor's loop, which
 * `arbiter supervise` runs in a process of its own between the agent and
 * one task.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/supervise.h"
#include "util/mtime.h"

#define LEASE_MAGIC "ARBLEASE"
#define LEASE_SIZE 64 /* magic[8], deadline at 8, the rest reserved */

int64_t agent_sup_mono_ns(void)
{
    return arb_mono_ns();
}

/* From procfs; in this file for the supervisor, which records its task. */
int agent_proc_start_ticks(pid_t pid, uint64_t *out)
{
    char path[64], buf[1024], *p;
    unsigned long long ticks;
    FILE *f;
    size_t got;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "re")))
        return -errno;
    got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    /* comm may hold spaces and ')': the fields start after the last ')'. */
    if (!(p = strrchr(buf, ')')))
        return -EINVAL;
    p++;
    for (int field = 3; field < 22; field++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    if (sscanf(p, " %llu", &ticks) != 1)
        return -EINVAL;
    *out = ticks;
    return 0;
}

int agent_sup_write_atomic(const char *path, const char *text)
{
    char tmp[PATH_MAX + 8];
    size_t len = strlen(text);
    int fd, rc = 0;

    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return -errno;
    if (write(fd, text, len) != (ssize_t)len)
        rc = errno ? -errno : -EIO;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

/* ---- the lease file ----------------------------------------------------------------- */

int agent_leasefile_open(const char *path, bool create, agent_leasefile_t *lf, arb_err_t *err)
{
    struct stat st;
    int fd;

    memset(lf, 0, sizeof *lf);
    lf->fd = -1;
    fd = open(path, (create ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return arb_errf(err, -errno, "lease file %s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return arb_errf(err, -EINVAL, "lease file %s: not a regular file", path);
    }
    if (st.st_size == 0 && create) { /* new: the magic, deadline 0 (kill now) */
        char buf[LEASE_SIZE] = LEASE_MAGIC;
        if (pwrite(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf || fsync(fd) != 0) {
            int e = errno ? errno : EIO;
            close(fd);
            return arb_errf(err, -e, "lease file %s: cannot write it: %s", path, strerror(e));
        }
        st.st_size = LEASE_SIZE;
    }
    if (st.st_size < LEASE_SIZE) {
        close(fd);
        return arb_errf(err, -EINVAL, "lease file %s: %lld bytes, not a lease file", path,
                        (long long)st.st_size);
    }
    void *m =
        mmap(NULL, LEASE_SIZE, create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        close(fd);
        return arb_errf(err, -e, "lease file %s: mmap: %s", path, strerror(e));
    }
    if (memcmp(m, LEASE_MAGIC, 8) != 0) {
        munmap(m, LEASE_SIZE);
        close(fd);
        return arb_errf(err, -EINVAL, "lease file %s: not a lease file (bad magic)", path);
    }
    lf->fd = fd;
    lf->map = m;
    lf->deadline = (int64_t *)((char *)m + 8);
    return 0;
}

void agent_leasefile_close(agent_leasefile_t *lf)
{
    if (lf->map)
        munmap(lf->map, LEASE_SIZE);
    if (lf->fd >= 0)
        close(lf->fd);
    memset(lf, 0, sizeof *lf);
    lf->fd = -1;
}

int64_t agent_leasefile_get(const agent_leasefile_t *lf)
{
    return lf->deadline ? __atomic_load_n(lf->deadline, __ATOMIC_SEQ_CST) : 0;
}

void agent_leasefile_set(agent_leasefile_t *lf, int64_t deadline_ns)
{
    if (lf->deadline)
        __atomic_store_n(lf->deadline, deadline_ns, __ATOMIC_SEQ_CST);
}

/* ---- exit records --------------------------------------------------------------------- */

static const char *const why_names[] = {"exited", "lease", "time-limit", "stopped"};

const char *agent_sup_why_name(agent_sup_why_t w)
{
    return (unsigned)w < 4 ? why_names[w] : "?";
}

int agent_sup_exit_format(const agent_sup_exit_t *e, char *buf, size_t n)
{
    return snprintf(buf, n, "status=%d why=%s ended=%lld killed=%lld deadline=%lld\n", e->status,
                    agent_sup_why_name(e->why), (long long)e->ended_ns, (long long)e->killed_ns,
                    (long long)e->deadline_ns);
}

int agent_sup_exit_write(const char *path, const agent_sup_exit_t *e)
{
    char buf[256];

    agent_sup_exit_format(e, buf, sizeof buf);
    return agent_sup_write_atomic(path, buf);
}

int agent_sup_exit_read(const char *path, agent_sup_exit_t *out)
{
    char buf[256];
    int fd;
    ssize_t got;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -errno;
    got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return -EINVAL;
    buf[got] = '\0';
    return agent_sup_exit_parse(buf, out);
}

int agent_sup_exit_parse(const char *buf, agent_sup_exit_t *out)
{
    char why[32];
    long long ended, killed, deadline;
    int status;

    if (sscanf(buf, "status=%d why=%31s ended=%lld killed=%lld deadline=%lld", &status, why, &ended,
               &killed, &deadline) != 5)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    out->status = status;
    out->why = AGENT_SUP_EXITED;
    for (int i = 0; i < 4; i++)
        if (strcmp(why, why_names[i]) == 0)
            out->why = (agent_sup_why_t)i;
    out->ended_ns = ended;
    out->killed_ns = killed;
    out->deadline_ns = deadline;
    return 0;
}

/* ---- the task's file ------------------------------------------------------------------ */

int agent_sup_file_read(const char *path, char *task_line, size_t n, agent_sup_exit_t *ex,
                        bool *have_exit)
{
    char buf[AGENT_SUP_FILE_MAX + 1];
    ssize_t got;
    size_t len = 0;
    int fd;

    task_line[0] = '\0';
    *have_exit = false;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        return -errno;
    while (len < sizeof buf - 1 && (got = read(fd, buf + len, sizeof buf - 1 - len)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    agent_sup_file_parse(buf, task_line, n, ex, have_exit);
    return 0;
}

void agent_sup_file_parse(char *buf, char *task_line, size_t n, agent_sup_exit_t *ex,
                          bool *have_exit)
{
    task_line[0] = '\0';
    *have_exit = false;
    /* Complete lines only: a tail with no newline is a write cut short. */
    for (char *l = buf, *nl; (nl = strchr(l, '\n')); l = nl + 1) {
        size_t ll = (size_t)(nl - l);
        *nl = '\0';
        if (!strncmp(l, AGENT_SUP_EXIT_TAG, sizeof AGENT_SUP_EXIT_TAG - 1)) {
            agent_sup_exit_t e;
            if (agent_sup_exit_parse(l + sizeof AGENT_SUP_EXIT_TAG - 1, &e) == 0) {
                *ex = e;
                *have_exit = true;
            }
        } else if (ll > 0 && ll < n) {
            memcpy(task_line, l, ll + 1);
            *have_exit = false; /* an exit belongs to the task line before it */
        }
    }
}

/* ---- arguments -------------------------------------------------------------------------- */

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < 0)
        return -EINVAL;
    *out = v;
    return 0;
}

int agent_sup_parse(int argc, char **argv, agent_sup_args_t *a, arb_err_t *err)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        if (!v)
            return arb_errf(err, -EINVAL, "%s needs a value", o);
        if (!strcmp(o, "--start")) {
            if (parse_i64(v, &x) < 0 || x < 3 || x > 1023)
                return arb_errf(err, -EINVAL, "--start '%s': a file descriptor 3..1023", v);
            a->start_fd = (int)x;
        } else if (!strcmp(o, "--task-pid")) {
            if (parse_i64(v, &x) < 0 || x <= 1 || x > 0x7fffffff)
                return arb_errf(err, -EINVAL, "--task-pid '%s': not a process id", v);
            a->task = (pid_t)x;
        } else if (!strcmp(o, "--lease")) {
            a->lease = v;
        } else if (!strcmp(o, "--exit")) {
            a->exit_path = v;
        } else if (!strcmp(o, "--record")) {
            a->record = v;
        } else if (!strcmp(o, "--record-fields")) {
            char job[130];
            int task, n = 0;
            unsigned long long att, ep;
            long long grace;
            unsigned gen;
            if (sscanf(v, "%129s %d %llu %llu %lld %u%n", job, &task, &att, &ep, &grace, &gen,
                       &n) != 6 ||
                v[n] != '\0' || strlen(job) > 128 || task < 0 || grace < -1)
                return arb_errf(err, -EINVAL,
                                "--record-fields '%s': \"JOB TASK ATTEMPT EPOCH GRACE_MS "
                                "GENERATION\"",
                                v);
            a->record_fields = v;
        } else if (!strcmp(o, "--cgroup-v1") || !strcmp(o, "--cgroup-v2")) {
            if (a->ncg == 2)
                return arb_errf(err, -EINVAL, "at most two cgroup directories");
            a->cg_mode = !strcmp(o, "--cgroup-v2") ? AGENT_CG_V2 : AGENT_CG_V1;
            a->cg[a->ncg++] = v;
        } else if (!strcmp(o, "--time-limit-at") || !strcmp(o, "--grace")) {
            if (parse_i64(v, &x) < 0)
                return arb_errf(err, -EINVAL, "%s '%s': nanoseconds, a non-negative integer", o, v);
            *(!strcmp(o, "--grace") ? &a->limit_grace_ns : &a->limit_at_ns) = x;
        } else {
            return arb_errf(err, -EINVAL, "unknown option '%s'", o);
        }
    }
    if (!a->task && !a->start_fd)
        return arb_errf(err, -EINVAL, "one of --task-pid or --start is required");
    if (!a->exit_path == !a->record)
        return arb_errf(err, -EINVAL,
                        "give one of --exit FILE (the exit record alone) or --record FILE (the "
                        "task's lock and both its records)");
    if (a->task && a->start_fd)
        return arb_errf(err, -EINVAL, "--task-pid and --start: give one (--start forks the task)");
    if (!a->record != !a->record_fields)
        return arb_errf(err, -EINVAL, "--record and --record-fields go together");
    if (a->record && !a->start_fd)
        return arb_errf(err, -EINVAL, "--record needs --start (the task forked here)");
    return 0;
}

/* ---- the loop ------------------------------------------------------------------------------ */

/* Everything but stdio: the agent's sockets, its log server, its files.
 * One close_range (Linux 5.9); where there is none, each fd /proc lists. */
static void close_inherited(int keep_fd)
{
    DIR *d;
    struct dirent *e;
    int keep;

#ifdef SYS_close_range
    if (keep_fd < 3 && syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
        return;
    if (keep_fd >= 3 && (keep_fd == 3 || syscall(SYS_close_range, 3U, keep_fd - 1U, 0U) == 0) &&
        syscall(SYS_close_range, keep_fd + 1U, ~0U, 0U) == 0)
        return;
#endif
    if (!(d = opendir("/proc/self/fd"))) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != keep_fd)
                close(fd);
        return;
    }
    keep = dirfd(d);
    /* cppcheck-suppress readdirCalled ; one thread reads this directory stream */
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (fd > 2 && fd != keep && fd != keep_fd)
            close(fd);
    }
    closedir(d);
}

static void kill_task_cgroup(const agent_sup_args_t *a)
{
    agent_cg_t cg;
    agent_cg_task_t t;

    if (a->ncg == 0)
        return;
    memset(&cg, 0, sizeof cg);
    memset(&t, 0, sizeof t);
    cg.mode = a->cg_mode;
    t.n = a->ncg;
    t.procs_fd[0] = t.procs_fd[1] = -1;
    for (int i = 0; i < a->ncg; i++)
        snprintf(t.dir[i], sizeof t.dir[i], "%s", a->cg[i]);
    agent_cg_task_kill(&cg, &t);
}

/* SIGKILL the task's group and cgroups. Only while its leader is unreaped
 * (alive, or a zombie): its pid is then still its group's id. */
static void kill_task(const agent_sup_args_t *a)
{
    kill(-a->task, SIGKILL); /* its group (it leads one: setsid) */
    kill(a->task, SIGKILL);  /* in case it died before setsid */
    kill_task_cgroup(a);
}

/* The task's file (--record), locked before the task's fork and held
 * until this process exits: its fd (append-only, close-on-exec: the task
 * never holds it), emptied (a file the agent reuses, or an earlier run's),
 * -EBUSY when another supervisor holds it (the task runs already), else
 * -errno. */
static int take_lock(const char *path)
{
    for (int tries = 0; tries < 100; tries++) {
        struct stat a, b;
        int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return -errno;
        while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            close(fd);
            return e == EWOULDBLOCK ? -EBUSY : -e;
        }
        /* Still the file at path (the agent moves a file it holds away when
         * it forgets a task): else a newer one may be held by another. */
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            if (a.st_size == 0 || ftruncate(fd, 0) == 0)
                return fd;
            int e = errno;
            close(fd);
            return -e;
        }
        close(fd);
    }
    return -EAGAIN;
}

/* One record, one write, appended to the task's file: whole, or (a write
 * cut short) a tail without its newline, which readers pass over. */
static int append_line(int fd, const char *line)
{
    size_t len = strlen(line);
    ssize_t w;

    while ((w = write(fd, line, len)) < 0 && errno == EINTR)
        ;
    return w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
}

/* The task record (--record): agent_task_record_parse's line, with this
 * process and the task as they are now, appended to the task's file. */
static int write_record(const agent_sup_args_t *a, int fd, pid_t task)
{
    char job[130], line[512];
    int tnum;
    unsigned long long att, ep;
    long long grace;
    unsigned gen;
    uint64_t sticks = 0, tticks = 0;

    if (sscanf(a->record_fields, "%129s %d %llu %llu %lld %u", job, &tnum, &att, &ep, &grace,
               &gen) != 6)
        return -EINVAL; /* agent_sup_parse checked it */
    if (agent_proc_start_ticks(getpid(), &sticks) < 0 || agent_proc_start_ticks(task, &tticks) < 0)
        return -ESRCH;
    snprintf(line, sizeof line, "%s %d %llu %llu %d %llu %d %llu %lld %u\n", job, tnum, att, ep,
             (int)getpid(), (unsigned long long)sticks, (int)task, (unsigned long long)tticks,
             grace, gen);
    return append_line(fd, line);
}

/*
 * --start: read the record, lock the task's file, fork the task from this
 * process (the agent's memory is never copied for it), append its task
 * record, and only then let it exec. Its pid, or -1 (said on the start
 * pipe when the record named one). *lock_fd: the lock's fd, or -1.
 */
static pid_t start_task(const agent_sup_args_t *a, int *lock_fd)
{
    agent_sup_start_t st;
    arb_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    pid_t pid = -1;
    int go[2] = {-1, -1};

    *lock_fd = -1;
    int rc = agent_sup_start_read(a->start_fd, &buf, &len, &err);
    close(a->start_fd); /* read: the task has no use for it */
    if (rc < 0)
        return -1;
    if (agent_sup_start_parse(buf, len, &st, &err) != 0) {
        free(buf);
        return -1;
    }
    if (a->record && (*lock_fd = take_lock(a->record)) < 0) {
        agent_sup_report(st.report_fd, AGENT_SUP_MSG_FAIL, AGENT_SUP_STEP_LOCK, -*lock_fd);
        *lock_fd = -1;
        goto out;
    }
    if (a->record && pipe2(go, O_CLOEXEC) != 0) {
        agent_sup_report(st.report_fd, AGENT_SUP_MSG_FAIL, AGENT_SUP_STEP_FORK, errno);
        goto out;
    }
    pid = agent_sup_start_task(&st, go);
    if (pid > 0 && a->record) {
        close(go[0]);
        go[0] = -1;
        if ((rc = write_record(a, *lock_fd, pid)) < 0) {
            /* Not recorded: it may not run (it _exits at the pipe's end). */
            agent_sup_report(st.report_fd, AGENT_SUP_MSG_FAIL, AGENT_SUP_STEP_RECORD, -rc);
        } else if (write(go[1], "g", 1) != 1) {
            agent_sup_report(st.report_fd, AGENT_SUP_MSG_FAIL, AGENT_SUP_STEP_RECORD, errno);
        }
        /* Either way the task is this process's child now: the loop reaps it. */
    }
out:
    for (int i = 0; i < 2; i++)
        if (go[i] >= 0)
            close(go[i]);
    agent_sup_start_free(&st);
    free(buf);
    return pid;
}

int agent_sup_run(const agent_sup_args_t *args)
{
    agent_sup_args_t run = *args, *a = &run;
    agent_leasefile_t lf = {.fd = -1};
    agent_sup_exit_t ex;
    sigset_t set;
    bool have_lease = false, done = false, termed = false;
    int64_t hard_at = 0, last_kill = 0;
    int status = 0, rc = 0, lock_fd = -1;

    /* Orphans of the task come to this process, which reaps them, rather
     * than to the agent or init. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    /* Blocked first: a SIGTERM from the agent from here on kills the task
     * (STOPPED) rather than the supervisor alone. */
    if (a->start_fd > 0 && (a->task = start_task(a, &lock_fd)) <= 0)
        return 127; /* the lock, if taken, goes with this process */
    /* The start pipe's copy here too: its end says the task exec'd. The
     * lock stays until this process exits: after the task's record. */
    close_inherited(lock_fd);
    memset(&ex, 0, sizeof ex);
    /* No readable lease: nothing says the task may run, so it may not. */
    if (a->lease)
        have_lease = agent_leasefile_open(a->lease, false, &lf, NULL) == 0;
    for (;;) {
        /* Reap orphans; the task leader is looked at before it is reaped,
         * so that its process group id cannot be reused when it is killed. */
        for (;;) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
                if (errno == ECHILD && !done) { /* not ours: nothing to supervise */
                    rc = 1;
                    done = true;
                }
                break;
            }
            if (si.si_pid == 0)
                break; /* children, none ended */
            if (si.si_pid == a->task) {
                kill_task(a);
                while (waitpid(a->task, &status, 0) < 0 && errno == EINTR)
                    ;
                ex.status = status;
                done = true;
            } else {
                waitpid(si.si_pid, NULL, 0);
            }
        }
        int64_t now = agent_sup_mono_ns();
        if (done) {
            /* Invariant (2): nothing of the task outlives its record. Its
             * group was killed before its leader was reaped; the cgroup
             * again, then whatever is left of the group, reaped. */
            kill_task_cgroup(a);
            for (int i = 0; i < 100 && waitpid(-1, NULL, WNOHANG) >= 0; i++)
                nanosleep(&(struct timespec){0, 10000000}, NULL);
            ex.ended_ns = now;
            if (lock_fd >= 0) { /* after the task record, in the same file */
                char line[300] = AGENT_SUP_EXIT_TAG;
                size_t tag = strlen(line);
                agent_sup_exit_format(&ex, line + tag, sizeof line - tag);
                append_line(lock_fd, line);
            } else {
                agent_sup_exit_write(a->exit_path, &ex);
            }
            break;
        }
        int64_t dl = !a->lease ? INT64_MAX : have_lease ? agent_leasefile_get(&lf) : 0;
        ex.deadline_ns = dl;
        if (!ex.killed_ns && now >= dl) { /* the lease passed: invariant (1) */
            ex.why = AGENT_SUP_LEASE;
            ex.killed_ns = now;
        }
        if (a->limit_at_ns > 0 && !termed && !ex.killed_ns && now >= a->limit_at_ns) {
            termed = true;
            hard_at = now + a->limit_grace_ns;
            kill(-a->task, SIGTERM);
            kill(a->task, SIGTERM); /* in case it has no group of its own yet */
            ex.why = AGENT_SUP_TIMELIMIT;
        }
        if (termed && !ex.killed_ns && now >= hard_at)
            ex.killed_ns = now; /* why stays TIMELIMIT */
        if (ex.killed_ns && now - last_kill >= AGENT_SUP_REKILL_NS) {
            kill_task(a);
            last_kill = now;
        }
        /* Sleep until the next thing to check, at most a poll. */
        int64_t wake = now + (ex.killed_ns ? AGENT_SUP_REKILL_NS : AGENT_SUP_POLL_NS);
        if (!ex.killed_ns && dl < wake)
            wake = dl;
        if (a->limit_at_ns > 0 && !termed && a->limit_at_ns < wake)
            wake = a->limit_at_ns;
        if (termed && !ex.killed_ns && hard_at < wake)
            wake = hard_at;
        int64_t left = wake - now;
        if (left < 1000000)
            left = 1000000;
        struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
        siginfo_t si;
        if (sigtimedwait(&set, &si, &ts) == SIGTERM && !ex.killed_ns) {
            ex.why = AGENT_SUP_STOPPED;
            ex.killed_ns = agent_sup_mono_ns();
        }
    }
    agent_leasefile_close(&lf);
    return rc;
}
