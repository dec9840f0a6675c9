/*
 * test_agent_exec.c: the task executor with real child processes
 * (src/agent/exec.c, cgroup.c).
 *
 * Environment (CUDA_VISIBLE_DEVICES, ARBITER_*, gang variables; nothing of
 * the agent's own environment leaks), log files, exit codes and signals,
 * cancel (SIGTERM to the group, SIGKILL after the grace period: time is
 * passed in), grandchildren killed with the group, a leader's leftovers
 * killed when it exits, escapees (setsid) killed through the cgroup, fencing
 * kills everything, refusals leave nothing behind, run-as (for real when
 * the test runs as root: tasks run as nobody, or as root with allow_root),
 * cgroup limits written (v1 on this machine where writable, v2 on a fake
 * tree), memory limit enforced, adoption after a restart and the state file;
 * starts that do not wait for their execs (many at once, a fence of a slow
 * one, a failed exec reported when seen).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "util/mtime.h"

#define MS 1000000LL
#define SEC 1000000000LL

static char tmpdir[64];

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static int setup(void **state)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/arb-exec-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    chmod(tmpdir, 0755); /* the run-as user walks through it to its job dir */
    return 0;
}

static int teardown(void **state)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static agent_exec_conf_t conf(void)
{
    static char logs[128];
    agent_exec_conf_t c;

    snprintf(logs, sizeof logs, "%s/logs", tmpdir);
    memset(&c, 0, sizeof c);
    c.log_dir = logs;
    c.supervisor = ARB_BIN;
    c.node_name = "n7";
    c.subreaper = true;
    c.grace_ns = 200 * MS;
    return c;
}

/* A signalled process dies asynchronously: wait up to 5 s for pid to be
 * gone (or a zombie) before calling it alive. */
static bool still_alive(pid_t pid)
{
    for (int i = 0; i < 500; i++) {
        if (!fx_alive(pid))
            return false;
        usleep(10000);
    }
    return true;
}

/* Task (job, task) of epoch 1 running argv; a test sets what else it needs. */
static agent_task_spec_t spec(const char *job, int task, char *const *argv)
{
    agent_task_spec_t s;

    memset(&s, 0, sizeof s);
    s.job = job;
    s.task = task;
    s.epoch = 1;
    s.argv = argv;
    return s;
}

/* Start s: with the start that waits for the exec (agent_exec_start), or
 * the one that does not (agent_exec_begin); fails the test if refused. */
static agent_task_t *start_spec(agent_exec_t *x, const agent_task_spec_t *s, bool wait_exec)
{
    agent_task_t *t = NULL;
    arb_err_t err = {{0}};
    int rc = wait_exec ? agent_exec_start(x, s, arb_mono_ns(), &t, &err)
                       : agent_exec_begin(x, s, arb_mono_ns(), &t, &err);

    if (rc != 0)
        fail_msg("%s %s/%d: %s", wait_exec ? "start" : "begin", s->job, s->task, err.msg);
    return t;
}

static agent_task_t *run(agent_exec_t *x, const char *job, int task, char *const *argv)
{
    agent_task_spec_t s = spec(job, task, argv);
    return start_spec(x, &s, true);
}

/* Poll (real time) until t exits; at most 10 s. */
static void wait_exit(agent_exec_t *x, agent_task_t *t)
{
    int64_t end = arb_mono_ns() + 10 * SEC;
    while (t->state != AGENT_TASK_EXITED && arb_mono_ns() < end) {
        agent_exec_poll(x, arb_mono_ns());
        usleep(2000);
    }
    assert_int_equal(t->state, AGENT_TASK_EXITED);
}

/* Pids printed one per line by the task into its .out log. */
static int read_pids(const agent_task_t *t, pid_t *pids, int max, int want)
{
    int n = 0;
    int64_t end = arb_mono_ns() + 5 * SEC;

    while (arb_mono_ns() < end) {
        const char *s = fx_slurp(t->out_path);
        n = 0;
        while (*s && n < max) {
            long v = strtol(s, (char **)&s, 10);
            if (v > 1)
                pids[n++] = (pid_t)v;
            while (*s == '\n')
                s++;
            if (*s && (*s < '0' || *s > '9'))
                break;
        }
        if (n >= want)
            break;
        usleep(2000);
    }
    return n;
}

static void test_env_and_logs(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *argv[] = {"env", NULL};
    char *env[] = {"FOO=bar baz", "ARBITER_JOB_ID=forged", "PATH=/usr/bin:/bin", NULL};
    agent_task_spec_t s;
    agent_task_t *t;
    const char *out;

    setenv("ARB_AGENT_SECRET", "do-not-leak", 1);
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    s = spec("job-1", 3, argv);
    s.epoch = 42;
    s.env = env;
    s.ngpus = 2;
    s.gpus[0] = 0;
    s.gpus[1] = 3;
    s.world_size = 4;
    s.rank = 2;
    s.master_addr = "10.0.0.5";
    s.master_port = 29500;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    assert_true(t->pid > 1);
    assert_int_equal(t->state, AGENT_TASK_RUNNING);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 0);
    assert_int_equal(t->signal, 0);
    assert_string_equal(t->reason, "exited");
    assert_int_equal(t->ngpus, 2);

    char want[256];
    struct stat sb;
    /* one file in the log directory, no directory for the job */
    snprintf(want, sizeof want, "%s/logs/job-1.3.out", tmpdir);
    assert_string_equal(t->out_path, want);
    assert_string_equal(t->err_path, "");
    snprintf(want, sizeof want, "%s/logs/job-1", tmpdir);
    assert_int_equal(stat(want, &sb), -1);
    out = fx_slurp(t->out_path);
    const char *lines[] = {"CUDA_VISIBLE_DEVICES=0,3\n",
                           "CUDA_DEVICE_ORDER=PCI_BUS_ID\n",
                           "ARBITER_JOB_ID=job-1\n",
                           "ARBITER_TASK_INDEX=3\n",
                           "ARBITER_EPOCH=42\n",
                           "ARBITER_NODE=n7\n",
                           "MASTER_ADDR=10.0.0.5\n",
                           "MASTER_PORT=29500\n",
                           "WORLD_SIZE=4\n",
                           "RANK=2\n",
                           "FOO=bar baz\n",
                           "PATH=/usr/bin:/bin\n",
                           "LANG=C.UTF-8\n",
                           NULL};
    for (int i = 0; lines[i]; i++)
        if (!strstr(out, lines[i]))
            fail_msg("missing %s in the task's environment:\n%s", lines[i], out);
    assert_null(strstr(out, "forged"));
    assert_null(strstr(out, "ARB_AGENT_SECRET"));
    assert_non_null(strstr(out, "HOME="));
    assert_non_null(strstr(out, "USER="));

    /* No GPUs: CUDA_VISIBLE_DEVICES is set and empty (sees none); no gang
     * vars. Its stderr is in its one log, after what it wrote before. */
    char *argv2[] = {"sh", "-c", "env; echo to-stderr >&2; echo after; exit 7", NULL};
    t = run(&x, "job-2", 0, argv2);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 7);
    assert_string_equal(t->reason, "exited");
    out = fx_slurp(t->out_path);
    assert_non_null(strstr(out, "CUDA_VISIBLE_DEVICES=\n"));
    assert_null(strstr(out, "WORLD_SIZE="));
    const char *e = strstr(out, "to-stderr\n");
    assert_non_null(e);
    assert_true(e > strstr(out, "CUDA_VISIBLE_DEVICES="));
    assert_string_equal(e, "to-stderr\nafter\n");
    snprintf(want, sizeof want, "%s/logs/job-2.0.err", tmpdir);
    assert_int_equal(stat(want, &sb), -1);

    /* forget: only exited tasks; then it is gone from the table. */
    assert_int_equal(agent_exec_forget(&x, "job-2", 0), 0);
    assert_null(agent_exec_find(&x, "job-2", 0));
    assert_int_equal(agent_exec_forget(&x, "job-2", 0), -ENOENT);
    agent_exec_free(&x);
    unsetenv("ARB_AGENT_SECRET");
}

static void test_refusals(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *sleep_argv[] = {"sleep", "30", NULL};
    char *missing[] = {"no-such-command-xyz", NULL};
    char noexec_path[128];
    char *noexec[] = {noexec_path, NULL};
    agent_task_spec_t s;

    snprintf(noexec_path, sizeof noexec_path, "%s/not-a-program", tmpdir);
    fclose(fopen(noexec_path, "w"));
    chmod(noexec_path, 0644);
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    s = spec("j", 0, missing);
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "command 'no-such-command-xyz' not found in PATH="));
    s.argv = noexec;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -EACCES);
    assert_non_null(strstr(err.msg, "not-a-program' (exec): Permission denied"));
    s.argv = sleep_argv;
    s.cwd = "/nonexistent-dir";
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "changing directory to /nonexistent-dir"));
    s.cwd = NULL;
    assert_int_equal(agent_exec_live(&x), 0);
    assert_int_equal(x.ntasks, 0); /* nothing left behind */

    const char *badjobs[] = {"", "../x", ".hidden", "a/b", "sp ace", NULL};
    for (int i = 0; badjobs[i]; i++) {
        s.job = badjobs[i];
        assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "cannot name files"));
    }
    s.job = "j";
    s.world_size = 2;
    s.rank = 2;
    s.master_addr = "h";
    s.master_port = 1;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "gang member"));
    s.world_size = 0;
    s.ngpus = 2;
    s.gpus[0] = s.gpus[1] = 1;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "GPU 1 given twice"));
    s.ngpus = 0;
    char *badenv[] = {"NOEQUALS", NULL};
    s.env = badenv;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -EINVAL);
    s.env = NULL;

    /* One live task per (job, task). */
    agent_task_t *t;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "already running here"));
    assert_int_equal(agent_exec_forget(&x, "j", 0), -EBUSY);
    assert_int_equal(agent_exec_fence(&x, arb_mono_ns()), 1);
    assert_int_equal(agent_exec_wait(&x, 5 * SEC), 0);
    /* Exited: the same task may start again (a retry). */
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    assert_int_equal(x.ntasks, 1);
    agent_exec_fence(&x, arb_mono_ns());
    assert_int_equal(agent_exec_wait(&x, 5 * SEC), 0);
    agent_exec_free(&x);
}

static void test_cancel_group(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *argv[] = {"sh", "-c", "sleep 1000 & echo $!; sleep 1000 & echo $!; wait", NULL};
    agent_task_t *t;
    pid_t kids[2];

    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t = run(&x, "train", 0, argv);
    assert_int_equal(read_pids(t, kids, 2, 2), 2);
    assert_true(fx_alive(kids[0]) && fx_alive(kids[1]));
    assert_int_equal(getpgid(kids[0]), t->pid); /* one group, led by the task */
    assert_int_equal(agent_exec_cancel(&x, "train", 0, arb_mono_ns()), 0);
    assert_int_equal(t->state, AGENT_TASK_STOPPING);
    assert_int_equal(agent_exec_cancel(&x, "train", 0, arb_mono_ns()), 0); /* again: nothing */
    assert_int_equal(agent_exec_cancel(&x, "nope", 0, arb_mono_ns()), -ENOENT);
    wait_exit(&x, t);
    assert_string_equal(t->reason, "cancelled");
    assert_int_equal(t->signal, SIGTERM);
    assert_int_equal(t->exit_code, -1);
    agent_exec_poll(&x, arb_mono_ns()); /* reap the orphans */
    assert_false(still_alive(kids[0]));
    assert_false(still_alive(kids[1]));
    agent_exec_free(&x);
}

static void test_grace_then_kill(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    /* Ignores SIGTERM (and so does its child, which inherits that). */
    char *argv[] = {"sh", "-c", "trap '' TERM; sleep 1000 & echo $!; wait", NULL};
    agent_task_t *t;
    pid_t kid;
    int64_t t0;

    c.grace_ns = 5 * SEC;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t = run(&x, "stubborn", 0, argv);
    assert_int_equal(read_pids(t, &kid, 1, 1), 1);
    t0 = arb_mono_ns();
    assert_int_equal(agent_exec_cancel(&x, "stubborn", 0, t0), 0);
    assert_int_equal(t->kill_at_ns, t0 + 5 * SEC);
    usleep(100000);
    /* Before the deadline (time passed in, not slept): still there. */
    agent_exec_poll(&x, t0 + 5 * SEC - 1);
    assert_int_equal(t->state, AGENT_TASK_STOPPING);
    assert_true(fx_alive(kid));
    /* At the deadline: SIGKILL to the group. */
    agent_exec_poll(&x, t0 + 5 * SEC);
    int64_t end = arb_mono_ns() + 5 * SEC;
    while (t->state != AGENT_TASK_EXITED && arb_mono_ns() < end) {
        agent_exec_poll(&x, t0 + 5 * SEC + 1);
        usleep(2000);
    }
    assert_int_equal(t->state, AGENT_TASK_EXITED);
    assert_int_equal(t->signal, SIGKILL);
    assert_string_equal(t->reason, "cancelled");
    agent_exec_poll(&x, arb_mono_ns());
    assert_false(still_alive(kid));
    agent_exec_free(&x);
}

static void test_leader_exit_kills_leftovers(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *argv[] = {"sh", "-c", "sleep 1000 & echo $!; exit 0", NULL};
    agent_task_t *t;
    pid_t kid;

    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t = run(&x, "leaky", 0, argv);
    assert_int_equal(read_pids(t, &kid, 1, 1), 1);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 0);
    agent_exec_poll(&x, arb_mono_ns());
    usleep(20000);
    agent_exec_poll(&x, arb_mono_ns());
    assert_false(still_alive(kid));
    agent_exec_free(&x);
}

static void test_fence_kills_everything(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    /* The third one leaves the process group (setsid): only the cgroup
     * reaches it. */
    char *a0[] = {"sh", "-c", "sleep 1000 & echo $!; wait", NULL};
    char *a1[] = {"sh", "-c", "trap '' TERM; sleep 1000 & echo $!; wait", NULL};
    char *a2[] = {"sh", "-c", "setsid sleep 1000 & echo $!; wait", NULL};
    agent_task_t *t[3];
    pid_t kid[3];

    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t[0] = run(&x, "a", 0, a0);
    t[1] = run(&x, "a", 1, a1);
    t[2] = run(&x, "b", 0, a2);
    for (int i = 0; i < 3; i++)
        assert_int_equal(read_pids(t[i], &kid[i], 1, 1), 1);
    assert_int_equal(agent_exec_live(&x), 3);
    assert_int_equal(agent_exec_fence(&x, arb_mono_ns()), 3);
    assert_int_equal(agent_exec_wait(&x, 5 * SEC), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(t[i]->state, AGENT_TASK_EXITED);
        assert_string_equal(t[i]->reason, "fenced");
        assert_int_equal(t[i]->signal, SIGKILL);
    }
    usleep(20000);
    agent_exec_poll(&x, arb_mono_ns());
    assert_false(still_alive(kid[0]));
    assert_false(still_alive(kid[1]));
    if (x.cg.mode != AGENT_CG_NONE)
        assert_false(still_alive(kid[2])); /* the escapee, through the cgroup */
    else if (fx_alive(kid[2]))
        kill(kid[2], SIGKILL); /* without cgroups it escapes: tidy up */
    assert_int_equal(agent_exec_fence(&x, arb_mono_ns()), 0);
    agent_exec_free(&x);
}

static void test_run_as(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *argv[] = {"sh", "-c",
                    "id -u; id -g; pwd; f=ok-to-write.$$; touch $f && rm $f && echo wrote", NULL};
    agent_task_t *t;
    char want[320];

    if (geteuid() != 0) {
        /* Not root: tasks run as the agent's user; --run-as is a warning. */
        c.run_as = "nobody";
        assert_int_equal(agent_exec_init(&x, &c, &err), 0);
        assert_non_null(strstr(x.warning, "--run-as nobody ignored"));
        agent_exec_free(&x);
        skip();
    }
    /* Root: tasks run as nobody by default, in its home, or /tmp where it
     * has none (nobody's /nonexistent), which it can write. */
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    assert_true(x.drop);
    struct stat hs;
    const char *home = stat(x.home, &hs) == 0 && S_ISDIR(hs.st_mode) ? x.home : "/tmp";
    t = run(&x, "asuser", 0, argv);
    wait_exit(&x, t);
    snprintf(want, sizeof want, "65534\n65534\n%s\nwrote\n", home);
    assert_string_equal(fx_slurp(t->out_path), want);
    agent_exec_free(&x);

    /* --allow-root: as root. */
    c.allow_root = true;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    assert_false(x.drop);
    assert_non_null(strstr(x.warning, "tasks run as root"));
    t = run(&x, "asroot", 0, argv);
    wait_exit(&x, t);
    assert_true(strncmp(fx_slurp(t->out_path), "0\n0\n", 4) == 0);
    agent_exec_free(&x);

    c.allow_root = false;
    c.run_as = "no-such-user-xyz";
    assert_int_equal(agent_exec_init(&x, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "no user 'no-such-user-xyz'"));
    c.run_as = "root";
    assert_int_equal(agent_exec_init(&x, &c, &err), -EPERM);
}

static void test_cgroup_limits(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *argv[] = {"sleep", "1000", NULL};
    agent_task_spec_t s;
    agent_task_t *t;
    char buf[64];

    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    if (x.cg.mode == AGENT_CG_NONE) {
        /* Where neither works: a clear warning. */
        assert_non_null(strstr(x.warning, "WITHOUT memory and CPU limits"));
        agent_exec_free(&x);
        skip();
    }
    s = spec("lim", 0, argv);
    s.mem_bytes = 64 << 20;
    s.cpu_milli = 500;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    assert_true(t->cg.n >= 1);
    if (x.cg.mode == AGENT_CG_V1) {
        snprintf(buf, sizeof buf, "%.63s",
                 fx_slurp(strcat(strcpy((char[4200]){0}, t->cg.dir[0]), "/memory.limit_in_bytes")));
        assert_string_equal(buf, "67108864\n");
        snprintf(buf, sizeof buf, "%.63s",
                 fx_slurp(strcat(strcpy((char[4200]){0}, t->cg.dir[1]), "/cpu.cfs_quota_us")));
        assert_string_equal(buf, "50000\n");
    } else {
        snprintf(buf, sizeof buf, "%.63s",
                 fx_slurp(strcat(strcpy((char[4200]){0}, t->cg.dir[0]), "/memory.max")));
        assert_string_equal(buf, "67108864\n");
    }
    assert_int_equal(agent_cg_task_procs(&t->cg), 1);
    char dir0[4200];
    snprintf(dir0, sizeof dir0, "%s", t->cg.dir[0]);
    agent_exec_fence(&x, arb_mono_ns());
    assert_int_equal(agent_exec_wait(&x, 5 * SEC), 0);
    assert_int_equal(access(dir0, F_OK), -1); /* the cgroup is removed */

    /* The memory limit holds: 300 MB through a 32 MiB task is killed. */
    char *hog[] = {"sh", "-c", "head -c 300000000 /dev/zero | tail -n 1 >/dev/null", NULL};
    s.job = "hog";
    s.argv = hog;
    s.mem_bytes = 32 << 20;
    s.cpu_milli = 0;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    wait_exit(&x, t);
    if (t->exit_code == 0 || t->exit_code == -1)
        fail_msg("the memory hog ended with exit %d signal %d", t->exit_code, t->signal);
    agent_exec_free(&x);
}

/* cgroup v2 on a fake tree: what is written where. */
static void test_cgroup_v2_fake(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char root[128], p[256];
    char *argv[] = {"sleep", "1000", NULL};
    agent_task_spec_t s;
    agent_task_t *t;
    const char *files[] = {"cgroup.controllers",
                           "cgroup.subtree_control",
                           "arbiter/",
                           "arbiter/cgroup.subtree_control",
                           "arbiter/v2j.1/",
                           "arbiter/v2j.1/memory.max",
                           "arbiter/v2j.1/cpu.max",
                           "arbiter/v2j.1/cgroup.procs",
                           "arbiter/v2j.1/cgroup.kill",
                           NULL};

    snprintf(root, sizeof root, "%s/cg2", tmpdir);
    mkdir(root, 0755);
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, files[i]);
        if (p[strlen(p) - 1] == '/') {
            mkdir(p, 0755);
        } else {
            FILE *f = fopen(p, "w");
            assert_non_null(f);
            if (i == 0)
                fputs("cpuset cpu io memory pids\n", f);
            fclose(f);
        }
    }
    c.cgroup_root = root;
    c.cgroup_mode = "v2";
    c.cgroup_self = "0::/\n";
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    assert_int_equal(x.cg.mode, AGENT_CG_V2);
    snprintf(p, sizeof p, "%s/cgroup.subtree_control", root);
    assert_string_equal(fx_slurp(p), "+memory +cpu");
    s = spec("v2j", 1, argv);
    s.mem_bytes = 1LL << 30;
    s.cpu_milli = 1500;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    snprintf(p, sizeof p, "%s/arbiter/v2j.1/memory.max", root);
    assert_string_equal(fx_slurp(p), "1073741824");
    snprintf(p, sizeof p, "%s/arbiter/v2j.1/cpu.max", root);
    assert_string_equal(fx_slurp(p), "150000 100000");
    snprintf(p, sizeof p, "%s/arbiter/v2j.1/cgroup.procs", root);
    assert_string_equal(fx_slurp(p), "0"); /* the child joined itself */
    agent_exec_cancel(&x, "v2j", 1, arb_mono_ns());
    wait_exit(&x, t);
    snprintf(p, sizeof p, "%s/arbiter/v2j.1/cgroup.kill", root);
    assert_string_equal(fx_slurp(p), "1");
    agent_exec_free(&x);

    /* No limits: "max". */
    c.cgroup_mode = "v2";
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    s.mem_bytes = s.cpu_milli = 0;
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), &t, &err), 0);
    snprintf(p, sizeof p, "%s/arbiter/v2j.1/memory.max", root);
    assert_string_equal(fx_slurp(p), "max");
    snprintf(p, sizeof p, "%s/arbiter/v2j.1/cpu.max", root);
    assert_string_equal(fx_slurp(p), "max 100000");
    agent_exec_fence(&x, arb_mono_ns());
    assert_int_equal(agent_exec_wait(&x, 5 * SEC), 0);
    agent_exec_free(&x);

    /* Named modes fail loudly; auto falls back with a warning. */
    snprintf(p, sizeof p, "%s/cgroup.controllers", root);
    FILE *f = fopen(p, "w");
    fputs("cpuset io pids\n", f);
    fclose(f);
    assert_int_equal(agent_exec_init(&x, &c, &err), -ENOTSUP);
    assert_non_null(strstr(err.msg, "lacks the memory or cpu controller (has: cpuset io pids)"));
    c.cgroup_mode = "v1";
    assert_int_equal(agent_exec_init(&x, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "no cgroup v1 memory hierarchy"));
    c.cgroup_mode = NULL;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    assert_int_equal(x.cg.mode, AGENT_CG_NONE);
    assert_non_null(strstr(x.warning, "no usable cgroups"));
    agent_exec_free(&x);
    c.cgroup_mode = "sometimes";
    assert_int_equal(agent_exec_init(&x, &c, &err), -EINVAL);
}

static void test_adopt_and_state_file(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x, y;
    arb_err_t err = {{0}};
    char *argv[] = {"sleep", "1000", NULL};
    agent_task_record_t rec[4];
    agent_task_t *t;
    char path[128];

    c.subreaper = false;
    snprintf(path, sizeof path, "%s/tasks", tmpdir);
    assert_int_equal(agent_exec_load(path, rec, 4, &err), 0); /* none yet */
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t = run(&x, "keep", 2, argv);
    t->epoch = 9;
    t->attempt = 3;
    assert_true(t->start_ticks > 0);
    assert_int_equal(agent_exec_save(&x, path, &err), 0);
    assert_int_equal(agent_exec_load(path, rec, 4, &err), 1);
    assert_string_equal(rec[0].job, "keep");
    assert_int_equal(rec[0].task, 2);
    assert_int_equal(rec[0].epoch, 9);
    assert_int_equal(rec[0].attempt, 3);
    assert_int_equal(rec[0].pid, t->pid);

    /* A "restarted" executor takes it over. */
    assert_int_equal(agent_exec_init(&y, &c, &err), 0);
    agent_task_record_t wrong = rec[0];
    wrong.start_ticks++; /* the pid now names another process */
    assert_int_equal(agent_exec_adopt(&y, &wrong, arb_mono_ns(), &err), -ESRCH);
    assert_int_equal(agent_exec_adopt(&y, &rec[0], arb_mono_ns(), &err), 0);
    assert_int_equal(agent_exec_adopt(&y, &rec[0], arb_mono_ns(), &err), -EEXIST);
    agent_task_t *a = agent_exec_find(&y, "keep", 2);
    assert_true(a && a->adopted);
    assert_int_equal(a->attempt, 3);
    assert_int_equal(agent_exec_poll(&y, arb_mono_ns()), 0);
    assert_int_equal(a->state, AGENT_TASK_RUNNING);
    assert_int_equal(agent_exec_cancel(&y, "keep", 2, arb_mono_ns()), 0);
    int64_t end = arb_mono_ns() + 5 * SEC;
    while (a->state != AGENT_TASK_EXITED && arb_mono_ns() < end) {
        agent_exec_poll(&y, arb_mono_ns());
        usleep(2000);
    }
    assert_int_equal(a->state, AGENT_TASK_EXITED);
    assert_int_equal(a->exit_code, -1); /* not its child: no status */
    assert_string_equal(a->reason, "cancelled");
    wait_exit(&x, t); /* the first executor reaps its child */
    assert_int_equal(t->signal, SIGTERM);
    assert_int_equal(agent_exec_save(&y, path, &err), 0);
    assert_int_equal(agent_exec_load(path, rec, 4, &err), 0); /* nothing live */
    agent_exec_free(&y);
    agent_exec_free(&x);

    FILE *f = fopen(path, "w");
    fputs("keep two 1 9 123 456\n", f);
    fclose(f);
    assert_int_equal(agent_exec_load(path, rec, 4, &err), -EINVAL);
    assert_non_null(strstr(err.msg, ":1: not a task record"));
}

static ino_t inode_of(const char *name)
{
    char path[256];
    struct stat sb;

    snprintf(path, sizeof path, "%s/logs/.arbiter/%s", tmpdir, name);
    return stat(path, &sb) == 0 ? sb.st_ino : 0;
}

/* A task's one file (lock and records, supervise.h) is not created or
 * removed per task: a finished task's file, forgotten, becomes a spare, and
 * the next task's supervisor gets it by rename (the same inode), in this
 * executor and in one started after it; its records are the new task's.
 * A file that was created and removed per task again would fail the inode
 * checks. A file with no record left unheld becomes a spare at adoption. */
/* What a task makes in the log directory (beside .arbiter): one file, its
 * log, with both streams; with split_stderr a second one for stderr. No
 * directory per job: each entry made is a file system create, and on ext4
 * without a journal each create scans the inodes freed lately. */
static int log_entries(char names[][NAME_MAX + 2], int max)
{
    char dir[128];
    DIR *d;
    struct dirent *e;
    int n = 0;

    snprintf(dir, sizeof dir, "%s/logs", tmpdir);
    assert_non_null(d = opendir(dir));
    /* cppcheck-suppress readdirCalled ; one thread reads this directory stream */
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && n < max) {
            snprintf(names[n], NAME_MAX + 2, "%s%s", e->d_name, e->d_type == DT_DIR ? "/" : "");
            n++;
        }
    closedir(d);
    return n;
}

static bool has_entry(char names[][NAME_MAX + 2], int n, const char *want)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], want))
            return true;
    return false;
}

static void test_one_log_file_per_task(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *argv[] = {"sh", "-c", "echo o1; echo e1 >&2; echo o2", NULL};
    char names[16][NAME_MAX + 2];
    agent_task_t *t;
    int n;

    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t = run(&x, "j1", 0, argv);
    wait_exit(&x, t);
    t = run(&x, "j2", 3, argv);
    wait_exit(&x, t);
    assert_string_equal(fx_slurp(t->out_path), "o1\ne1\no2\n"); /* in the order written */
    n = log_entries(names, 16);
    assert_int_equal(n, 2);
    assert_true(has_entry(names, n, "j1.0.out"));
    assert_true(has_entry(names, n, "j2.3.out"));
    agent_exec_free(&x);

    /* --stderr separate: stderr in a file of its own, stdout alone in .out */
    c.split_stderr = true;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t = run(&x, "j3", 0, argv);
    wait_exit(&x, t);
    assert_string_equal(fx_slurp(t->out_path), "o1\no2\n");
    assert_string_equal(fx_slurp(t->err_path), "e1\n");
    n = log_entries(names, 16);
    assert_int_equal(n, 4);
    assert_true(has_entry(names, n, "j3.0.out"));
    assert_true(has_entry(names, n, "j3.0.err"));
    agent_exec_free(&x);
}

static void test_task_file_reused(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *ok[] = {"true", NULL}, *three[] = {"sh", "-c", "exit 3", NULL};
    char path[256];
    agent_task_t *t;
    ino_t ino;

    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t = run(&x, "r1", 0, ok);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 0);
    assert_true((ino = inode_of("r1.0.task")) != 0);
    assert_int_equal(inode_of("spare.0"), 0);
    assert_int_equal(agent_exec_forget(&x, "r1", 0), 0);
    assert_int_equal(inode_of("r1.0.task"), 0); /* forgotten: its name is gone */
    assert_int_equal(inode_of("spare.0"), ino);
    t = run(&x, "r2", 0, three);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 3); /* its own exit record, not r1's */
    assert_int_equal(inode_of("r2.0.task"), ino);
    assert_int_equal(inode_of("spare.0"), 0);
    assert_int_equal(agent_exec_forget(&x, "r2", 0), 0);
    agent_exec_free(&x);

    /* A restarted executor finds the spare; an unheld file with no record
     * (emptied, or a write cut short) becomes one at adoption. */
    snprintf(path, sizeof path, "%s/logs/.arbiter/r9.4.task", tmpdir);
    FILE *f = fopen(path, "w");
    fputs("r9 4 1 1 12", f); /* a task record cut short */
    fclose(f);
    ino_t torn = inode_of("r9.4.task");
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    assert_int_equal(agent_exec_adopt_all(&x, arb_mono_ns(), NULL), 0);
    assert_null(agent_exec_find(&x, "r9", 4));
    assert_int_equal(inode_of("r9.4.task"), 0);
    t = run(&x, "r3", 1, three);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 3);
    ino_t got = inode_of("r3.1.task");
    assert_true(got == ino || got == torn);
    agent_exec_free(&x);
}

/* A start that does not wait for the execs (agent_exec_begin): STARTING
 * at once, however slow the exec (the test hook start_delay_ns sleeps in
 * the task before its exec, in its supervisor's fork); settled by agent_exec_poll; a
 * failed exec reported as 127 when seen; a fence does not wait for a slow
 * start; the synchronous start still returns a failed exec as an error. */
static agent_task_t *begin(agent_exec_t *x, const char *job, int task, char *const *argv)
{
    agent_task_spec_t s = spec(job, task, argv);
    return start_spec(x, &s, false);
}

static void test_begin_async(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *sl[] = {"sleep", "1000", NULL};
    char *bad[] = {"./no-such-command-here", NULL};
    agent_task_t *t[8], *f;
    struct pollfd pf[8];

    /* Eight slow starts (5 s each): every one STARTING as soon as it is begun. */
    c.start_delay_ns = 5 * SEC;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    for (int i = 0; i < 8; i++)
        t[i] = begin(&x, "slow", i, sl);
    for (int i = 0; i < 8; i++)
        assert_int_equal(t[i]->state, AGENT_TASK_STARTING);
    assert_int_equal(agent_exec_live(&x), 8);
    assert_int_equal(agent_exec_start_fds(&x, pf, 8), 8);
    assert_int_equal(agent_exec_start_fds(&x, pf, 2), 8); /* more than max: all counted */
    /* settled by polls (bounded: 60 s, far past 8 starts one after another) */
    int64_t end = arb_mono_ns() + 60 * SEC;
    int running = 0;
    while (running < 8 && arb_mono_ns() < end) {
        agent_exec_poll(&x, arb_mono_ns());
        running = 0;
        for (int i = 0; i < 8; i++)
            running += t[i]->state == AGENT_TASK_RUNNING;
        usleep(20000);
    }
    for (int i = 0; running < 8 && i < 8; i++) /* say why, should it ever fail */
        print_message("slow.%d: state %d pid %d sup %d exit %d signal %d reason '%s' start step %d "
                      "errno %d '%s'\n",
                      i, (int)t[i]->state, (int)t[i]->pid, (int)t[i]->sup_pid, t[i]->exit_code,
                      t[i]->signal, t[i]->reason, t[i]->start_step, t[i]->start_errno,
                      t[i]->start_err);
    assert_int_equal(running, 8);
    for (int i = 0; i < 8; i++)
        assert_true(t[i]->pid > 1 && fx_alive(t[i]->pid));
    assert_int_equal(agent_exec_start_fds(&x, pf, 8), 0);
    assert_int_equal(agent_exec_fence(&x, arb_mono_ns()), 8);
    assert_int_equal(agent_exec_wait(&x, 10 * SEC), 0);
    agent_exec_free(&x);

    /* A fence does not wait for a start that is still sleeping (60 s here):
     * its supervisor is killed, its task with it; reported fenced. */
    c.start_delay_ns = 60 * SEC;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    f = begin(&x, "stuck", 0, sl);
    assert_int_equal(f->state, AGENT_TASK_STARTING);
    pid_t sup = f->sup_pid;
    int64_t t0 = arb_mono_ns();
    assert_int_equal(agent_exec_fence(&x, arb_mono_ns()), 1);
    assert_int_equal(agent_exec_wait(&x, 10 * SEC), 0);
    assert_true(arb_mono_ns() - t0 < 30 * SEC); /* not the 60 s of the start */
    assert_int_equal(f->state, AGENT_TASK_EXITED);
    assert_string_equal(f->reason, "fenced");
    assert_false(fx_alive(sup));
    if (f->pid > 1)
        assert_false(still_alive(f->pid));
    agent_exec_free(&x);

    /* A failed exec: begun fine, EXITED 127 once the poll sees it, the
     * reason kept for the log; nothing of it left. */
    c.start_delay_ns = 0;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    f = begin(&x, "bad", 0, bad);
    end = arb_mono_ns() + 10 * SEC;
    while (f->state != AGENT_TASK_EXITED && arb_mono_ns() < end) {
        agent_exec_poll(&x, arb_mono_ns());
        usleep(5000);
    }
    assert_int_equal(f->state, AGENT_TASK_EXITED);
    assert_true(f->start_failed);
    assert_int_equal(f->exit_code, 127);
    assert_non_null(strstr(f->start_err, "job bad task 0: cannot start './no-such-command-here' "
                                         "(exec): No such file or directory"));
    assert_int_equal(agent_exec_forget(&x, "bad", 0), 0);
    /* the waiting start says the same as an error, and keeps nothing */
    agent_task_spec_t s;
    s = spec("bad", 1, bad);
    assert_int_equal(agent_exec_start(&x, &s, arb_mono_ns(), NULL, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "(exec): No such file or directory"));
    assert_null(agent_exec_find(&x, "bad", 1));
    assert_int_equal(x.ntasks, 0);
    agent_exec_free(&x);
}

/* /proc/PID/stat's field n (4: ppid, 6: session). */
static long stat_field(pid_t pid, int n)
{
    char path[64];
    const char *text, *p;
    long v = -1;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!(text = fx_slurp(path)) || !(p = strrchr(text, ')')))
        return -1;
    p += 2; /* field 3, the state */
    for (int f = 3; f < n && p; f++)
        p = strchr(p + 1, ' ');
    if (p)
        sscanf(p, " %ld", &v);
    return v;
}

/* A NUL-separated /proc file (environ, cmdline) with its NULs as newlines
 * (a static buffer). */
static const char *proc_list(pid_t pid, const char *what)
{
    static char buf[16384];
    char path[64];
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    if ((f = fopen(path, "re"))) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = buf[i] ? buf[i] : '\n';
    buf[n] = '\0';
    return buf;
}

/* The fds of pid above 2, as "N->target\n" lines. */
static void fds_above_2(pid_t pid, char *buf, size_t n)
{
    char dir[64], link[PATH_MAX + 64], target[PATH_MAX];
    struct dirent *e;
    DIR *d;
    size_t used = 0;

    buf[0] = '\0';
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    if (!(d = opendir(dir)))
        return;
    /* cppcheck-suppress readdirCalled ; one thread reads this directory stream */
    while ((e = readdir(d))) {
        if (atoi(e->d_name) <= 2)
            continue;
        snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
        ssize_t got = readlink(link, target, sizeof target - 1);
        target[got > 0 ? got : 0] = '\0';
        used += (size_t)snprintf(buf + used, n - used, "%s->%s\n", e->d_name, target);
        if (used >= n)
            break;
    }
    closedir(d);
}

/* The spawn (posix_spawn of the supervisor, which forks the task): the
 * task is the supervisor's child and the supervisor the executor's, in a
 * session of its own; the task's environment reached the task but is in
 * neither the supervisor's environment nor its argv (world-readable); the
 * supervisor holds no fd of the executor's, and the task none past its
 * stdio. */
static void test_spawn_private(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *argv[] = {"sleep", "1000", NULL};
    char *env[] = {"ARB_TASK_SECRET=s3cret-value", NULL};
    char fds[2048];
    const char *text;
    agent_task_spec_t s;
    agent_task_t *t;
    int leak = open("/dev/null", O_RDONLY); /* not close-on-exec: the agent's own */

    (void)st;
    c.leased = true;
    assert_true(leak > 2);
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    agent_exec_set_deadline(&x, arb_mono_ns() + 600 * SEC); /* 0 would fence it at once */
    s = spec("private", 0, argv);
    s.env = env;
    t = start_spec(&x, &s, true);
    assert_int_equal(t->state, AGENT_TASK_RUNNING);
    assert_int_equal(stat_field(t->pid, 4), (long)t->sup_pid);
    assert_int_equal(stat_field(t->sup_pid, 4), (long)getpid());
    assert_int_equal(stat_field(t->sup_pid, 6), (long)t->sup_pid); /* its own session */
    assert_int_equal(stat_field(t->pid, 6), (long)t->pid);
    /* the environment: the task's, and only there */
    assert_non_null(strstr(proc_list(t->pid, "environ"), "\nARB_TASK_SECRET=s3cret-value\n"));
    text = proc_list(t->sup_pid, "environ");
    assert_null(strstr(text, "s3cret"));
    assert_non_null(strstr(text, "PATH="));
    text = proc_list(t->sup_pid, "cmdline");
    assert_null(strstr(text, "s3cret"));
    assert_non_null(strstr(text, "\n--start\n"));
    /* fds: the supervisor's lease file and the task's lock only; the task's stdio only */
    fds_above_2(t->sup_pid, fds, sizeof fds);
    for (char *l = fds, *nl; *l; l = nl + 1) {
        nl = strchr(l, '\n');
        *nl = '\0';
        if (!strstr(l, "/.arbiter/lease") && !strstr(l, "/.arbiter/private.0.task"))
            fail_msg("the supervisor holds fd %s", l);
    }
    /* The task's own start may hold a file a moment (sleep's setlocale reads
     * /etc/locale.alias); an inherited fd never closes. So: none left within
     * a generous deadline. */
    for (int64_t end = arb_mono_ns() + 20 * SEC;;) {
        fds_above_2(t->pid, fds, sizeof fds);
        if (!fds[0] || arb_mono_ns() > end)
            break;
        usleep(20000);
    }
    if (fds[0])
        fail_msg("the task holds fds past its stdio: %s", fds);
    assert_int_equal(agent_exec_fence(&x, arb_mono_ns()), 1);
    assert_int_equal(agent_exec_wait(&x, 10 * SEC), 0);
    agent_exec_free(&x);
    close(leak);
}

#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif

/* The supervisors' zygote (src/agent/zygote.h): each supervisor is forked
 * by it yet is the agent's child, with its own command line; a zygote that
 * dies is replaced (the start in between spawns its supervisor itself);
 * none with no_zygote; it ends with the executor. */
static void test_zygote(void **st)
{
    agent_exec_conf_t c = conf();
    agent_exec_t x;
    arb_err_t err = {{0}};
    char *seven[] = {"sh", "-c", "exit 7", NULL}, *three[] = {"sh", "-c", "exit 3", NULL};
    char *nap[] = {"sleep", "1000", NULL};
    agent_task_t *t;
    pid_t z;

    (void)st;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    assert_int_equal(x.zyg.pid, 0); /* started at the first task */
    t = run(&x, "z", 0, nap);
#ifdef TEST_TSAN
    /* no zygote under ThreadSanitizer (zygote.c): every supervisor spawned */
    assert_true(x.zyg.off);
    assert_int_equal(x.zyg.pid, 0);
    assert_int_equal(stat_field(t->sup_pid, 4), (long)getpid());
    assert_int_equal(agent_exec_fence(&x, arb_mono_ns()), 1);
    assert_int_equal(agent_exec_wait(&x, 10 * SEC), 0);
    agent_exec_free(&x);
    (void)seven, (void)three, (void)z;
    return;
#endif
    assert_true(x.zyg.pid > 0);
    z = x.zyg.pid;
    assert_int_equal(stat_field(z, 4), (long)getpid());
    assert_non_null(strstr(proc_list(z, "cmdline"), "\n--zygote\n"));
    assert_int_equal(stat_field(t->sup_pid, 4), (long)getpid()); /* ours, not the zygote's */
    assert_int_equal(stat_field(t->sup_pid, 6), (long)t->sup_pid);
    assert_int_equal(stat_field(t->pid, 4), (long)t->sup_pid);
    assert_non_null(strstr(proc_list(t->sup_pid, "cmdline"), "\n--start\n"));
    assert_int_equal(agent_exec_cancel(&x, "z", 0, arb_mono_ns()), 0);
    wait_exit(&x, t);
    assert_int_equal(t->signal, SIGTERM);
    t = run(&x, "z", 1, seven);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 7);
    assert_int_equal(x.zyg.pid, z); /* the same zygote for every task */
    /* killed: the next start spawns its own supervisor, the one after a new zygote */
    kill(z, SIGKILL);
    while (still_alive(z) && waitpid(z, NULL, WNOHANG) == 0)
        usleep(1000);
    t = run(&x, "z", 2, three);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 3);
    t = run(&x, "z", 3, seven);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 7);
    assert_true(x.zyg.pid > 0 && x.zyg.pid != z);
    z = x.zyg.pid;
    agent_exec_free(&x);
    assert_true(kill(z, 0) != 0 && errno == ESRCH); /* it ended, reaped */

    c.no_zygote = true;
    assert_int_equal(agent_exec_init(&x, &c, &err), 0);
    t = run(&x, "z", 4, three);
    wait_exit(&x, t);
    assert_int_equal(t->exit_code, 3);
    assert_int_equal(x.zyg.pid, 0);
    agent_exec_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_env_and_logs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grace_then_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leader_exit_kills_leftovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fence_kills_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_as, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_v2_fake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adopt_and_state_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_log_file_per_task, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_file_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_begin_async, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_private, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zygote, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
