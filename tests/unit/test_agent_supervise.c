/*
 * test_agent_supervise.c: per-task supervisors (src/agent/supervise.c)
 * with real processes: the lease file and exit records; a task killed by
 * its supervisor when the published lease passes after its "agent" (a
 * child process running the executor) died without fencing, never before
 * the deadline; a restarted executor adopting a live supervisor and
 * moving its deadline, and finding how a gone one's task ended; the time
 * limit (SIGTERM, grace, SIGKILL) held by the supervisor alone; a task
 * dying with its supervisor. Every check names the invariant it guards;
 * no check depends on how fast the machine is, only on orders (a death
 * seen before the deadline is a failure whatever the timing) and on
 * generous bounds for what must eventually happen.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/exec.h"
#include "proc_fixture.h"

#define MS 1000000LL
#define SEC 1000000000LL

static char tmpdir[64];

static int64_t now(void)
{
    return agent_sup_mono_ns();
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static int setup(void **state)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/arb-sup-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static agent_exec_conf_t conf(bool leased)
{
    static char logs[128];
    agent_exec_conf_t c;

    snprintf(logs, sizeof logs, "%s/logs", tmpdir);
    memset(&c, 0, sizeof c);
    c.log_dir = logs;
    c.node_name = "s1";
    c.allow_root = true;
    c.cgroup_mode = "none";
    c.grace_ns = 300 * MS;
    c.supervisor = ARB_BIN;
    c.leased = leased;
    return c;
}

/*
 * Wait (at most 20 s) for pid to die; fail if it is seen dead before
 * not_before. The time is read after each look, so a death seen with the
 * clock still before not_before happened before it, however slow this
 * process is. Returns when it was first seen dead.
 */
static int64_t wait_death(pid_t pid, int64_t not_before)
{
    int64_t end = now() + 20 * SEC;
    for (;;) {
        bool a = fx_alive(pid);
        int64_t t = now();
        if (!a) {
            if (t < not_before)
                fail_msg("pid %d died %.3f s before its deadline", (int)pid,
                         (double)(not_before - t) / 1e9);
            return t;
        }
        if (t > end)
            fail_msg("pid %d still alive 20 s on", (int)pid);
        usleep(5000);
    }
}

typedef struct started {
    pid_t task, sup;
} started_t;

/*
 * The agent that dies: a child process runs an executor, publishes the
 * deadline (leased), starts argv (optionally with a time limit), hands the
 * task's and supervisor's pids through a pipe, and _exits without fencing
 * (as kill -9 would leave it).
 */
static started_t agent_dies(bool leased, int64_t deadline, char *const *argv, int64_t limit_ns)
{
    int p[2];
    started_t st = {0, 0};
    pid_t kid;

    assert_int_equal(pipe(p), 0);
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        agent_exec_conf_t c = conf(leased);
        agent_exec_t x;
        agent_task_spec_t s;
        agent_task_t *t = NULL;
        arb_err_t err;
        if (agent_exec_init(&x, &c, &err) < 0)
            _exit(3);
        if (leased)
            agent_exec_set_deadline(&x, deadline);
        memset(&s, 0, sizeof s);
        s.job = "77";
        s.task = 0;
        s.attempt = 1;
        s.epoch = 1;
        s.argv = argv;
        s.deadline_ns = limit_ns > 0 ? now() + limit_ns : 0;
        if (agent_exec_start(&x, &s, now(), &t, &err) < 0)
            _exit(4);
        started_t out = {t->pid, t->sup_pid};
        if (write(p[1], &out, sizeof out) != (ssize_t)sizeof out)
            _exit(5);
        _exit(0);
    }
    close(p[1]);
    assert_int_equal(read(p[0], &st, sizeof st), (ssize_t)sizeof st);
    close(p[0]);
    int status;
    assert_int_equal(waitpid(kid, &status, 0), kid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return st;
}

/* The exit record in the task's file (after its task record). */
static void exit_record(agent_sup_exit_t *e)
{
    char path[256], line[512];
    bool have = false;
    int rc = -1;

    snprintf(path, sizeof path, "%s/logs/.arbiter/77.0.task", tmpdir);
    for (int i = 0; i < 2000; i++) {
        rc = agent_sup_file_read(path, line, sizeof line, e, &have);
        if (rc == 0 && have)
            break;
        usleep(5000);
    }
    assert_int_equal(rc, 0);
    assert_true(have);
    assert_non_null(strstr(line, "77 0 "));
}

static void test_lease_file_and_records(void **st)
{
    char path[256];
    agent_leasefile_t w, r;
    arb_err_t err;
    agent_sup_exit_t e = {.status = 9,
                          .why = AGENT_SUP_LEASE,
                          .ended_ns = 5,
                          .killed_ns = 4,
                          .deadline_ns = 3},
                     back;

    snprintf(path, sizeof path, "%s/lease", tmpdir);
    assert_int_equal(agent_leasefile_open(path, false, &r, &err), -ENOENT); /* not made yet */
    assert_int_equal(agent_leasefile_open(path, true, &w, &err), 0);
    assert_int_equal(agent_leasefile_get(&w), 0); /* new: kill now, until a lease is published */
    assert_int_equal(agent_leasefile_open(path, false, &r, &err), 0);
    agent_leasefile_set(&w, 123456789);
    assert_int_equal(agent_leasefile_get(&r), 123456789); /* a reader sees the store at once */
    agent_leasefile_close(&w);
    agent_leasefile_close(&r);
    assert_int_equal(agent_leasefile_open(path, true, &w, &err), 0); /* reopened: kept */
    assert_int_equal(agent_leasefile_get(&w), 123456789);
    agent_leasefile_close(&w);
    FILE *f = fopen(path, "w");
    fputs("not a lease file at all, but long enough to be mapped as one........", f);
    fclose(f);
    assert_int_equal(agent_leasefile_open(path, false, &r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "bad magic"));

    snprintf(path, sizeof path, "%s/x.exit", tmpdir);
    assert_int_equal(agent_sup_exit_read(path, &back), -ENOENT);
    assert_int_equal(agent_sup_exit_write(path, &e), 0);
    assert_int_equal(agent_sup_exit_read(path, &back), 0);
    assert_int_equal(back.status, 9);
    assert_int_equal(back.why, AGENT_SUP_LEASE);
    assert_int_equal(back.deadline_ns, 3);
    f = fopen(path, "w");
    fputs("status=garbage\n", f);
    fclose(f);
    assert_int_equal(agent_sup_exit_read(path, &back), -EINVAL);

    /* The task's file: complete lines only; the exit record is the one after
     * the last task record; a tail cut short (no newline) is passed over,
     * so what was there before it is what a reader gets. */
    static const struct {
        const char *text, *line;
        int have_exit, status;
    } cases[] = {
        {"", "", 0, 0},
        {"77 0 1 1 12", "", 0, 0},
        {"77 0 1 1 12 34 56 78 -1 0\n", "77 0 1 1 12 34 56 78 -1 0", 0, 0},
        {"77 0 1 1 12 34 56 78 -1 0\nexit status=768 why=exited ended=1 killed=0 deadline=2\n",
         "77 0 1 1 12 34 56 78 -1 0", 1, 768},
        {"77 0 1 1 12 34 56 78 -1 0\nexit status=768 why=exi", "77 0 1 1 12 34 56 78 -1 0", 0, 0},
        {"77 0 1 1 12 34 56 78 -1 0\nexit garbage\n", "77 0 1 1 12 34 56 78 -1 0", 0, 0},
        {"77 0 1 1 12 34 56 78 -1 0\nexit status=9 why=lease ended=1 killed=0 deadline=2\n"
         "77 0 2 1 12 34 56 78 -1 0\n",
         "77 0 2 1 12 34 56 78 -1 0", 0, 0},
    };
    snprintf(path, sizeof path, "%s/t.task", tmpdir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char line[512];
        bool have = true;
        f = fopen(path, "w");
        fputs(cases[i].text, f);
        fclose(f);
        memset(&back, 0, sizeof back);
        assert_int_equal(agent_sup_file_read(path, line, sizeof line, &back, &have), 0);
        assert_string_equal(line, cases[i].line);
        assert_int_equal(have, cases[i].have_exit);
        if (have)
            assert_int_equal(back.status, cases[i].status);
    }
    unlink(path);
    char line[512];
    bool have;
    assert_int_equal(agent_sup_file_read(path, line, sizeof line, &back, &have), -ENOENT);

    agent_sup_args_t a;
    char *rec_exit[] = {"supervise",       "--start",      "3", "--exit", "x", "--record", "r",
                        "--record-fields", "7 0 1 1 -1 0", NULL};
    assert_int_equal(agent_sup_parse(9, rec_exit, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--record FILE"));
    char *rec_pid[] = {"supervise", "--task-pid",      "99",           "--record",
                       "r",         "--record-fields", "7 0 1 1 -1 0", NULL};
    assert_int_equal(agent_sup_parse(7, rec_pid, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--record needs --start"));
    char *lock[] = {"supervise", "--start", "3", "--exit", "x", "--lock", "l", NULL};
    assert_int_equal(agent_sup_parse(7, lock, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "unknown option '--lock'"));
    char *bad[] = {"supervise", "--task-pid", "1", "--exit", "x", NULL};
    assert_int_equal(agent_sup_parse(5, bad, &a, &err), -EINVAL); /* pid 1 is no task */
    char *none[] = {"supervise", "--lease", "l", NULL};
    assert_int_equal(agent_sup_parse(3, none, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "required"));
}

/* Invariant 4 without an agent: the task dies when the lease passes, not
 * before, though its agent died without fencing. */
static void test_fenced_after_agent_death(void **st)
{
    char *argv[] = {"sleep", "1000", NULL};
    int64_t deadline = now() + 700 * MS;
    started_t s = agent_dies(true, deadline, argv, 0);
    agent_sup_exit_t e;

    wait_death(s.task, deadline); /* outlives its agent until the deadline, and no longer */
    exit_record(&e);
    assert_int_equal(e.why, AGENT_SUP_LEASE);
    assert_true(e.killed_ns >= deadline);
    assert_true(WIFSIGNALED(e.status) && WTERMSIG(e.status) == SIGKILL);
    assert_int_equal(e.deadline_ns, deadline);

    /* A restarted executor learns how it ended: fenced by its supervisor. */
    agent_exec_conf_t c = conf(true);
    agent_exec_t y;
    arb_err_t err;
    int ended = -1;
    assert_int_equal(agent_exec_init(&y, &c, &err), 0);
    wait_death(s.sup, 0);
    assert_int_equal(agent_exec_adopt_all(&y, now(), &ended), 0);
    assert_int_equal(ended, 1);
    agent_task_t *t = agent_exec_find(&y, "77", 0);
    assert_non_null(t);
    assert_int_equal(t->state, AGENT_TASK_EXITED);
    assert_true(t->fenced_by_sup);
    assert_string_equal(t->reason, "fenced");
    assert_int_equal(t->signal, SIGKILL);
    assert_int_equal(agent_exec_forget(&y, "77", 0), 0); /* its records go with it */
    char path[256];
    snprintf(path, sizeof path, "%s/logs/.arbiter/77.0.task", tmpdir);
    assert_int_equal(access(path, F_OK), -1);
    agent_exec_free(&y);
}

/* A restarted executor takes over a live supervisor: the deadline it
 * publishes is the one the supervisor obeys (here shortened, so that the
 * test waits for nothing): renewal reaches supervisors it did not start. */
static void test_adopt_and_move_deadline(void **st)
{
    char *argv[] = {"sleep", "1000", NULL};
    started_t s = agent_dies(true, now() + 3600 * SEC, argv, 0);
    agent_exec_conf_t c = conf(true);
    agent_exec_t y;
    arb_err_t err;
    agent_sup_exit_t e;
    int ended = -1;

    assert_int_equal(agent_exec_init(&y, &c, &err), 0);
    assert_true(agent_exec_deadline(&y) > now() + 3000 * SEC); /* the previous run's */
    assert_int_equal(agent_exec_adopt_all(&y, now(), &ended), 1);
    assert_int_equal(ended, 0);
    agent_task_t *t = agent_exec_find(&y, "77", 0);
    assert_non_null(t);
    assert_true(t->adopted && t->state == AGENT_TASK_RUNNING);
    assert_int_equal(t->pid, s.task);
    assert_int_equal(t->sup_pid, s.sup);
    int64_t dl = now() + 300 * MS;
    agent_exec_set_deadline(&y, dl);
    wait_death(s.task, dl);
    int64_t end = now() + 20 * SEC;
    while (t->state != AGENT_TASK_EXITED && now() < end) {
        agent_exec_poll(&y, now());
        usleep(5000);
    }
    assert_int_equal(t->state, AGENT_TASK_EXITED);
    assert_true(t->fenced_by_sup);
    exit_record(&e);
    assert_int_equal(e.deadline_ns, dl);
    agent_exec_free(&y);
}

/* The time limit, held by the supervisor with no agent left: SIGTERM at
 * the limit; a task that ignores it gets SIGKILL a grace later. */
static void test_time_limit_without_agent(void **st)
{
    char ready[128], script[256];
    snprintf(ready, sizeof ready, "%s/ready", tmpdir);
    /* The SIGTERM must find the trap set: the task says when it is (a
     * slow start, ASan's, once let it in first and the shell died of it). */
    snprintf(script, sizeof script, "trap '' TERM; : > %s; exec sleep 1000", ready);
    char *stubborn[] = {"sh", "-c", script, NULL};
    int64_t t0 = now(), limit = 1500 * MS;
    started_t s = agent_dies(false, 0, stubborn, limit);
    agent_sup_exit_t e;

    while (access(ready, F_OK) != 0 && now() < t0 + limit)
        usleep(2000);
    if (access(ready, F_OK) != 0)
        fail_msg("the task was not ready %.1f s after its start: nothing to check",
                 (double)limit / 1e9);
    wait_death(s.task, t0 + limit + 300 * MS); /* limit + grace (conf: 300 ms) */
    exit_record(&e);
    assert_int_equal(e.why, AGENT_SUP_TIMELIMIT);
    assert_true(WIFSIGNALED(e.status) && WTERMSIG(e.status) == SIGKILL);
    wait_death(s.sup, 0);

    char *polite[] = {"sleep", "1000", NULL};
    char path[256];
    snprintf(path, sizeof path, "%s/logs/.arbiter/77.0.task", tmpdir);
    unlink(path); /* no agent forgot it: the next exit record is waited for alone */
    t0 = now();
    s = agent_dies(false, 0, polite, 300 * MS);
    wait_death(s.task, t0 + 300 * MS);
    exit_record(&e);
    assert_int_equal(e.why, AGENT_SUP_TIMELIMIT);
    assert_true(WIFSIGNALED(e.status) && WTERMSIG(e.status) == SIGTERM);
    wait_death(s.sup, 0);
}

/* Invariant: a task never outlives its supervisor (PR_SET_PDEATHSIG);
 * with no exit record the executor reports it lost. */
static void test_task_dies_with_supervisor(void **st)
{
    agent_exec_conf_t c = conf(true);
    agent_exec_t x;
    arb_err_t err;
    char *argv[] = {"sleep", "1000", NULL};
    agent_task_spec_t s;
    agent_task_t *t = NULL;

    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    agent_exec_set_deadline(&x, now() + 3600 * SEC);
    memset(&s, 0, sizeof s);
    s.job = "78";
    s.argv = argv;
    assert_int_equal(agent_exec_start(&x, &s, now(), &t, &err), 0);
    pid_t task = t->pid;
    kill(t->sup_pid, SIGKILL);
    wait_death(task, 0);
    int64_t end = now() + 20 * SEC;
    while (t->state != AGENT_TASK_EXITED && now() < end) {
        agent_exec_poll(&x, now());
        usleep(5000);
    }
    assert_int_equal(t->state, AGENT_TASK_EXITED);
    assert_string_equal(t->reason, "lost");
    agent_exec_free(&x);
}

/* Lines (task pids) in the marker file each copy of the task appends to. */
static int marker_lines(const char *path, pid_t *first)
{
    FILE *f = fopen(path, "r");
    int n = 0, pid;

    if (!f)
        return 0;
    while (fscanf(f, "%d", &pid) == 1)
        if (n++ == 0 && first)
            *first = pid;
    fclose(f);
    return n;
}

/*
 * The agent that dies between the task's fork and its task record: the
 * child begins the start (agent_exec_begin spawns the supervisor) and
 * _exits at once, before it reads the task's pid from the start pipe, the
 * point at which the agent used to write the record (settle). Whatever
 * the supervisor does after that, it does with no agent. Its pid back.
 */
static pid_t agent_dies_before_record(char *const *argv)
{
    int p[2];
    pid_t kid, sup = 0;

    assert_int_equal(pipe(p), 0);
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        agent_exec_conf_t c = conf(false);
        agent_exec_t x;
        agent_task_spec_t s;
        agent_task_t *t = NULL;
        arb_err_t err;
        if (agent_exec_init(&x, &c, &err) < 0)
            _exit(3);
        memset(&s, 0, sizeof s);
        s.job = "79";
        s.attempt = 1;
        s.epoch = 1;
        s.argv = argv;
        if (agent_exec_begin(&x, &s, now(), &t, &err) < 0)
            _exit(4);
        if (write(p[1], &t->sup_pid, sizeof t->sup_pid) != (ssize_t)sizeof t->sup_pid)
            _exit(5);
        _exit(0); /* no settle: the agent never saw the task's pid */
    }
    close(p[1]);
    assert_int_equal(read(p[0], &sup, sizeof sup), (ssize_t)sizeof sup);
    close(p[0]);
    int status;
    assert_int_equal(waitpid(kid, &status, 0), kid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return sup;
}

/*
 * Never two copies of one task on a node (docs/agent.md): the agent died
 * after the supervisor forked the task and before the agent recorded it;
 * a restarted executor given the same assignment, by its adoption of what
 * the previous run left (adopt_all) or by a plain start, takes the running
 * copy over instead of starting another. Each copy appends its pid to a
 * marker: exactly one line, whichever way the restart goes.
 */
static void test_agent_dies_before_record(void **st)
{
    char marker[128], script[256];
    (void)st;
    snprintf(marker, sizeof marker, "%s/copies", tmpdir);
    snprintf(script, sizeof script, "echo $$ >> %s; exec sleep 1000", marker);
    char *argv[] = {"sh", "-c", script, NULL};

    for (int way = 0; way < 2; way++) { /* 0: adopt_all, then the start; 1: the start alone */
        pid_t sup = agent_dies_before_record(argv), first = 0;
        int64_t end = now() + 20 * SEC;
        while (marker_lines(marker, &first) < 1 && now() < end)
            usleep(5000); /* the orphaned supervisor's task runs */
        assert_int_equal(marker_lines(marker, &first), 1);

        agent_exec_conf_t c = conf(false);
        agent_exec_t y;
        arb_err_t err;
        agent_task_spec_t s;
        agent_task_t *t = NULL;
        int ended = -1;
        assert_int_equal(agent_exec_init(&y, &c, &err), 0);
        if (way == 0)
            assert_int_equal(agent_exec_adopt_all(&y, now(), &ended), 1);
        memset(&s, 0, sizeof s);
        s.job = "79";
        s.attempt = 1;
        s.epoch = 1;
        s.argv = argv;
        int rc = agent_exec_start(&y, &s, now(), &t, &err);
        if (way == 0) {
            assert_int_equal(rc, -EEXIST); /* adopted: already running here */
            t = agent_exec_find(&y, "79", 0);
        } else {
            assert_int_equal(rc, 0);
        }
        assert_non_null(t);
        assert_true(t->adopted); /* not a second start */
        assert_int_equal(t->state, AGENT_TASK_RUNNING);
        assert_int_equal(t->pid, first);
        assert_int_equal(t->sup_pid, sup);
        usleep(200000); /* a second copy, had one started, has appended by now */
        assert_int_equal(marker_lines(marker, NULL), 1);

        /* Cancelled by the new executor: the copy it adopted ends, and only it. */
        assert_int_equal(agent_exec_cancel(&y, "79", 0, now()), 0);
        wait_death(first, 0);
        end = now() + 20 * SEC;
        while (t->state != AGENT_TASK_EXITED && now() < end) {
            agent_exec_poll(&y, now());
            usleep(5000);
        }
        assert_int_equal(t->state, AGENT_TASK_EXITED);
        wait_death(sup, 0);
        assert_int_equal(agent_exec_forget(&y, "79", 0), 0);
        agent_exec_free(&y);
        unlink(marker);
    }
}

/* The executor refuses to run tasks without a supervisor program. */
static void test_needs_supervisor(void **st)
{
    agent_exec_conf_t c = conf(false);
    agent_exec_t x;
    arb_err_t err;

    c.supervisor = NULL;
    assert_int_equal(agent_exec_init(&x, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "no supervisor program"));
    c.timed = true; /* no processes: no supervisors */
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    agent_exec_free(&x);
}

/* The start record (sup_start.c): what the agent encodes the supervisor
 * parses back the same; a damaged one is refused with the field named;
 * --start and --task-pid are one or the other. */
static void test_start_record(void **st)
{
    char *argv[] = {"sh", "-c", "echo a\nb", NULL}, *env[] = {"A=1", "B=two words", NULL};
    agent_sup_start_t in = {.path = "/bin/sh",
                            .cwd = "/tmp",
                            .argv = argv,
                            .envv = env,
                            .drop = true,
                            .uid = 65534,
                            .gid = 65534,
                            .ngroups = 2,
                            .groups = {65534, 100},
                            .delay_ns = 5,
                            .report_fd = 4,
                            .out_fd = 5,
                            .err_fd = 6,
                            .ncg = 1,
                            .cg_fd = {7, -1}};
    agent_sup_start_t out;
    arb_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;

    (void)st;
    assert_int_equal(agent_sup_start_encode(&in, &buf, &len), 0);
    assert_int_equal(agent_sup_start_parse(buf, len, &out, &err), 0);
    assert_string_equal(out.path, "/bin/sh");
    assert_string_equal(out.cwd, "/tmp");
    assert_string_equal(out.argv[2], "echo a\nb");
    assert_null(out.argv[3]);
    assert_string_equal(out.envv[1], "B=two words");
    assert_null(out.envv[2]);
    assert_true(out.drop);
    assert_int_equal(out.uid, 65534);
    assert_int_equal(out.ngroups, 2);
    assert_int_equal(out.groups[1], 100);
    assert_int_equal(out.delay_ns, 5);
    assert_int_equal(out.report_fd, 4);
    assert_int_equal(out.err_fd, 6);
    assert_int_equal(out.ncg, 1);
    assert_int_equal(out.cg_fd[0], 7);
    agent_sup_start_free(&out);
    /* cut short (no final NUL), a bad magic, a key with no value */
    assert_int_equal(agent_sup_start_parse(buf, len - 1, &out, &err), -EINVAL);
    buf[0] = 'X';
    assert_int_equal(agent_sup_start_parse(buf, len, &out, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "magic"));
    free(buf);
    char nofd[] = "ARBSTART1\0exec\0/bin/true\0cwd\0/\0arg\0true\0report\0"
                  "2\0";
    assert_int_equal(agent_sup_start_parse(nofd, sizeof nofd - 1, &out, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "report '2'"));
    char unknown[] = "ARBSTART1\0exec\0/bin/true\0shell\0yes\0";
    assert_int_equal(agent_sup_start_parse(unknown, sizeof unknown - 1, &out, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "unknown key 'shell'"));
    char noargs[] = "ARBSTART1\0exec\0/bin/true\0cwd\0/\0report\0"
                    "4\0out\0"
                    "5\0err\0"
                    "6\0";
    assert_int_equal(agent_sup_start_parse(noargs, sizeof noargs - 1, &out, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "required"));
    char dangling[] = "ARBSTART1\0exec\0";
    assert_int_equal(agent_sup_start_parse(dangling, sizeof dangling - 1, &out, &err), -EINVAL);

    agent_sup_args_t a;
    char *both[] = {"supervise", "--task-pid", "99", "--start", "3", "--exit", "x", NULL};
    assert_int_equal(agent_sup_parse(7, both, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "give one"));
    char *start[] = {"supervise", "--start", "3", "--exit", "x", NULL};
    assert_int_equal(agent_sup_parse(5, start, &a, &err), 0);
    assert_int_equal(a.start_fd, 3);
    assert_int_equal(a.task, 0);
    char *lowfd[] = {"supervise", "--start", "1", "--exit", "x", NULL};
    assert_int_equal(agent_sup_parse(5, lowfd, &a, &err), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lease_file_and_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fenced_after_agent_death, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adopt_and_move_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_limit_without_agent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_dies_with_supervisor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_dies_before_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_needs_supervisor, setup, teardown),
        cmocka_unit_test(test_start_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
