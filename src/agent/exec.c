/*
 * exec.c: the task executor (see exec.h): each task's supervisor spawned
 * with what it needs to start the task (its command, environment, user,
 * directory, cgroups, logs: a start record, supervise.h); reaping, cancel
 * with a grace period, fencing (exec_adopt.c: adoption after a restart
 * and the task table's state file).
 *
 * The agent never forks: posix_spawn starts the supervisor (no copy of the
 * agent's address space, nothing run in the child but glibc's internal
 * system calls, so the agent may have threads and a sanitizer's state),
 * and the supervisor forks the task from its own small process. The task
 * and the supervisor report through a close-on-exec pipe: the task's pid,
 * or the step that failed; the pipe's end in the agent means the task
 * exec'd. The agent never waits for it at a start (agent_exec_begin): the
 * pipe is read as it becomes readable (settle, from agent_exec_poll), so
 * that many tasks start at once, each exec overlapping the others.
 *
 * The task's file (JOB.TASK.task) is its lock and its records: the
 * supervisor locks it, and appends the task record before the task execs
 * and the exit record at its end (supervise.h): a start that finds the
 * lock held takes the running copy over (exec_adopt_running) rather than
 * start a second one, so no moment of the agent's death leaves two. The
 * agent creates and removes none of them per task: a forgotten task's file,
 * emptied under its lock, becomes a spare (spare.N) that the next task's
 * file is renamed from (exec_record_free, take_spare).
 */
#include <ctype.h>
#include <stdarg.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/exec_int.h"
#include "util/mtime.h"

#define DEFAULT_GRACE_NS (10LL * 1000000000LL)
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

void exec_fmt(char *dst, size_t n, const char *f, ...)
{
    va_list ap;

    va_start(ap, f);
    vsnprintf(dst, n, f, ap);
    va_end(ap);
}

const char *agent_task_state_name(agent_task_state_t s)
{
    switch (s) {
    case AGENT_TASK_STARTING:
        return "starting";
    case AGENT_TASK_RUNNING:
        return "running";
    case AGENT_TASK_STOPPING:
        return "stopping";
    case AGENT_TASK_EXITED:
        return "exited";
    }
    return "?";
}

bool agent_job_id_ok(const char *job)
{
    size_t n = job ? strlen(job) : 0;

    if (n == 0 || n >= AGENT_JOB_MAX || job[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)job[i]) && job[i] != '.' && job[i] != '_' && job[i] != '-')
            return false;
    return true;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof buf)
        return -ENAMETOOLONG;
    /* the parent is there (a job's directory under the log dir): one call */
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return -errno;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* ---- logs --------------------------------------------------------------------------- */

void agent_log_path(char *buf, size_t n, const char *log_dir, const char *job, int task,
                    const char *stream)
{
    exec_fmt(buf, n, "%s/%s.%d.%s", log_dir, job, task, stream);
}

void agent_log_find(char *buf, size_t n, const char *log_dir, const char *job, int task,
                    const char *stream)
{
    char old[PATH_MAX];

    agent_log_path(buf, n, log_dir, job, task, stream);
    if (access(buf, F_OK) == 0 || errno != ENOENT)
        return;
    exec_fmt(old, sizeof old, "%s/%s/%d.%s", log_dir, job, task, stream);
    if (access(old, F_OK) == 0)
        exec_fmt(buf, n, "%s", old);
}

void exec_log_paths(const agent_exec_t *x, agent_task_t *t)
{
    agent_log_path(t->out_path, sizeof t->out_path, x->conf.log_dir, t->job, t->task, "out");
    if (x->conf.split_stderr)
        agent_log_path(t->err_path, sizeof t->err_path, x->conf.log_dir, t->job, t->task, "err");
    else
        t->err_path[0] = '\0';
}

/* ---- supervisor records ------------------------------------------------------------ */

static void kill_all(agent_exec_t *x, agent_task_t *t);
static int settle(agent_exec_t *x, agent_task_t *t, bool block, bool reaped);

static void record_path(const agent_exec_t *x, const char *job, int task, char *buf, size_t n)
{
    exec_fmt(buf, n, "%s/%s.%d.task", x->sup_dir, job, task);
}

static void spare_path(const agent_exec_t *x, int n, char *buf, size_t len)
{
    exec_fmt(buf, len, "%s/spare.%d", x->sup_dir, n);
}

bool exec_record_free(agent_exec_t *x, const char *job, int task, exec_free_t what)
{
    char path[PATH_MAX], spare[PATH_MAX];
    int fd;
    bool held = false;

    record_path(x, job, task, path, sizeof path);
    if ((fd = open(path, (what == EXEC_PEEK ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW)) < 0)
        return false;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        held = errno == EWOULDBLOCK;
        break;
    }
    /* Held here meanwhile: no supervisor takes it in between (take_lock
     * checks that its path still names the file it locked). */
    if (!held && what != EXEC_PEEK && ftruncate(fd, 0) != 0)
        what = EXEC_RECYCLE; /* it cannot be emptied: it goes */
    if (!held && what == EXEC_RECYCLE) {
        int n = (int)(x->spare_seq++ & 0x7fffffff);
        spare_path(x, n, spare, sizeof spare);
        if (x->nspare < AGENT_EXEC_SPARES && rename(path, spare) == 0)
            x->spare[x->nspare++] = n;
        else
            unlink(path);
    }
    close(fd);
    return held;
}

/* A spare renamed to the task's file before its supervisor starts (none
 * there yet: renameat2 RENAME_NOREPLACE), so that it creates no file. */
static void take_spare(agent_exec_t *x, const char *path)
{
    char spare[PATH_MAX];

    while (x->nspare > 0) {
        spare_path(x, x->spare[x->nspare - 1], spare, sizeof spare);
        int rc = renameat2(AT_FDCWD, spare, AT_FDCWD, path, RENAME_NOREPLACE);
        if (rc != 0 && errno != ENOENT)
            return; /* EEXIST: a supervisor's, or one left before; the spare waits */
        x->nspare--;
        if (rc == 0)
            return;
        /* ENOENT: that spare is gone (removed by hand): the next one */
    }
}

/* The spares a previous run left: sup_dir/spare.N. */
static void find_spares(agent_exec_t *x)
{
    DIR *d = opendir(x->sup_dir);
    struct dirent *e;

    if (!d)
        return;
    /* cppcheck-suppress readdirCalled ; one thread reads this directory stream */
    while ((e = readdir(d))) {
        char *end;
        long n;
        if (strncmp(e->d_name, "spare.", 6) != 0)
            continue;
        n = strtol(e->d_name + 6, &end, 10);
        if (*end || n < 0 || n > 0x7fffffff)
            continue;
        if (x->nspare < AGENT_EXEC_SPARES) {
            x->spare[x->nspare++] = (int)n;
            if ((unsigned)n >= x->spare_seq)
                x->spare_seq = (unsigned)n + 1;
        } else {
            char path[PATH_MAX];
            spare_path(x, (int)n, path, sizeof path);
            unlink(path);
        }
    }
    closedir(d);
}

/* ---- setup ---------------------------------------------------------------------- */

int agent_exec_init(agent_exec_t *x, const agent_exec_conf_t *conf, arb_err_t *err)
{
    int rc;

    memset(x, 0, sizeof *x);
    x->conf = *conf;
    x->zyg.fd = -1;
    if (!x->conf.grace_ns)
        x->conf.grace_ns = DEFAULT_GRACE_NS;
    if (!conf->log_dir || !conf->log_dir[0])
        return arb_errf(err, -EINVAL, "executor: no log directory given");
    if ((rc = mkdir_p(conf->log_dir, 0755)) < 0)
        return arb_errf(err, rc, "executor: cannot create the log directory %s: %s", conf->log_dir,
                        strerror(-rc));

    if (geteuid() == 0 && !conf->allow_root) {
        const char *name = conf->run_as ? conf->run_as : "nobody";
        /* start-up, before the executor's threads: getpwnam's static buffer is safe */
        struct passwd *pw = getpwnam(name); // cppcheck-suppress getpwnamCalled
        int n = (int)(sizeof x->groups / sizeof x->groups[0]);

        if (!pw)
            return arb_errf(err, -ENOENT,
                            "--run-as: no user '%s' on this machine; name an "
                            "existing user, or give --allow-root to run tasks as root",
                            name);
        if (pw->pw_uid == 0)
            return arb_errf(err, -EPERM,
                            "--run-as '%s' is root; tasks run as root only with "
                            "--allow-root",
                            name);
        x->drop = true;
        x->uid = pw->pw_uid;
        x->gid = pw->pw_gid;
        snprintf(x->user, sizeof x->user, "%s", pw->pw_name);
        snprintf(x->home, sizeof x->home, "%s", pw->pw_dir && pw->pw_dir[0] ? pw->pw_dir : "/");
        if (getgrouplist(pw->pw_name, pw->pw_gid, x->groups, &n) < 0)
            n = (int)(sizeof x->groups / sizeof x->groups[0]); /* cut to what fits */
        x->ngroups = n;
    } else {
        struct passwd *pw = getpwuid(geteuid()); // cppcheck-suppress getpwuidCalled
        x->uid = geteuid();
        x->gid = getegid();
        snprintf(x->user, sizeof x->user, "%s", pw ? pw->pw_name : "?");
        snprintf(x->home, sizeof x->home, "%s", pw && pw->pw_dir ? pw->pw_dir : "/");
        if (conf->run_as && geteuid() != 0)
            snprintf(x->warning, sizeof x->warning,
                     "--run-as %s ignored: the agent is not root, tasks run as %s; ", conf->run_as,
                     x->user);
        else if (geteuid() == 0)
            snprintf(x->warning, sizeof x->warning, "tasks run as root (--allow-root); ");
    }
    {
        /* A task's directory when its spec names none: its user's home, as a
         * login gives; /tmp where that is no directory (nobody's
         * /nonexistent), as slurmd falls back to. Not a directory made per
         * job: that was a file system create (and, later, free) per task. */
        struct stat st;
        snprintf(x->workdir, sizeof x->workdir, "%s",
                 stat(x->home, &st) == 0 && S_ISDIR(st.st_mode) ? x->home : "/tmp");
    }
    if ((rc = agent_cg_init(&x->cg, conf->cgroup_root, conf->cgroup_mode, conf->cgroup_self, err)) <
        0)
        return rc;
    if (conf->cgroup_scoped && x->cg.mode != AGENT_CG_NONE) {
        char scope[96];
        agent_cg_scope_name(conf->node_name, conf->log_dir, scope, sizeof scope);
        if ((rc = agent_cg_scope(&x->cg, scope, err)) < 0)
            return rc;
    }
    if (x->cg.warning[0]) {
        size_t used = strlen(x->warning);
        snprintf(x->warning + used, sizeof x->warning - used, "%s", x->cg.warning);
    }
    if (conf->subreaper)
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    x->lease.fd = -1;
    if (conf->timed)
        return 0; /* no processes, no supervisors */
    if (!conf->supervisor || !conf->supervisor[0])
        return arb_errf(err, -EINVAL,
                        "executor: no supervisor program (the arbiter binary, run as `arbiter "
                        "supervise` for each task)");
    {
        char abs[PATH_MAX]; /* the supervisors' paths do not depend on anyone's cwd */
        exec_fmt(x->sup_dir, sizeof x->sup_dir, "%s/%s",
                 realpath(conf->log_dir, abs) ? abs : conf->log_dir, AGENT_SUP_DIR);
    }
    if (mkdir(x->sup_dir, 0700) != 0 && errno != EEXIST)
        return arb_errf(err, -errno, "executor: cannot create %s: %s", x->sup_dir, strerror(errno));
    find_spares(x);
    if (conf->leased) {
        char lp[PATH_MAX];
        exec_fmt(lp, sizeof lp, "%s/lease", x->sup_dir);
        if ((rc = agent_leasefile_open(lp, true, &x->lease, err)) < 0)
            return rc;
    }
    return 0;
}

void agent_exec_set_deadline(agent_exec_t *x, int64_t deadline_ns)
{
    if (agent_leasefile_get(&x->lease) != deadline_ns)
        agent_leasefile_set(&x->lease, deadline_ns);
}

int64_t agent_exec_deadline(const agent_exec_t *x)
{
    return agent_leasefile_get(&x->lease);
}

void agent_exec_free(agent_exec_t *x)
{
    for (int i = 0; i < x->ntasks; i++) {
        agent_cg_task_close_fds(&x->tasks[i]->cg);
        if (x->tasks[i]->state == AGENT_TASK_STARTING)
            close(x->tasks[i]->start_fd);
        free(x->tasks[i]->start_cwd);
        free(x->tasks[i]);
    }
    free(x->tasks);
    x->tasks = NULL;
    x->ntasks = x->cap = 0;
    agent_cg_scope_remove(&x->cg);
    agent_leasefile_close(&x->lease);
    agent_zygote_stop(&x->zyg);
}

/* ---- the table -------------------------------------------------------------------- */

agent_task_t *agent_exec_find(agent_exec_t *x, const char *job, int task)
{
    for (int i = 0; i < x->ntasks; i++)
        if (x->tasks[i]->task == task && strcmp(x->tasks[i]->job, job) == 0)
            return x->tasks[i];
    return NULL;
}

/* The task whose supervisor (our child) is pid. */
static agent_task_t *find_sup(agent_exec_t *x, pid_t pid)
{
    for (int i = 0; i < x->ntasks; i++)
        if (x->tasks[i]->sup_pid == pid && !x->tasks[i]->adopted &&
            x->tasks[i]->state != AGENT_TASK_EXITED)
            return x->tasks[i];
    return NULL;
}

int agent_exec_live(const agent_exec_t *x)
{
    int n = 0;
    for (int i = 0; i < x->ntasks; i++)
        n += x->tasks[i]->state != AGENT_TASK_EXITED;
    return n;
}

int agent_exec_forget(agent_exec_t *x, const char *job, int task)
{
    for (int i = 0; i < x->ntasks; i++) {
        agent_task_t *t = x->tasks[i];
        if (t->task != task || strcmp(t->job, job) != 0)
            continue;
        if (t->state != AGENT_TASK_EXITED)
            return -EBUSY;
        agent_cg_task_remove(&t->cg);
        if (t->sup_pid > 0) /* (held: another supervisor's file, left alone) */
            exec_record_free(x, t->job, t->task, EXEC_RECYCLE);
        free(t);
        memmove(&x->tasks[i], &x->tasks[i + 1], sizeof x->tasks[0] * (size_t)(x->ntasks - i - 1));
        x->ntasks--;
        return 0;
    }
    return -ENOENT;
}

int exec_table_add(agent_exec_t *x, agent_task_t *t)
{
    if (x->ntasks == x->cap) {
        int cap = x->cap ? x->cap * 2 : 16;
        agent_task_t **p = realloc(x->tasks, sizeof *p * (size_t)cap);
        if (!p)
            return -ENOMEM;
        x->tasks = p;
        x->cap = cap;
    }
    x->tasks[x->ntasks++] = t;
    return 0;
}

/* ---- environment -------------------------------------------------------------------- */

typedef struct envv {
    char **v;
    int n, cap;
} envv_t;

/* Set key=val (replacing key); kv alone when val is NULL. */
static int env_set(envv_t *e, const char *key, const char *val)
{
    size_t klen = val ? strlen(key) : (size_t)(strchr(key, '=') - key);
    char *s;

    if (val) {
        s = malloc(klen + strlen(val) + 2);
        if (s)
            sprintf(s, "%s=%s", key, val);
    } else {
        s = strdup(key);
    }
    if (!s)
        return -ENOMEM;
    for (int i = 0; i < e->n; i++) {
        if (strncmp(e->v[i], s, klen + 1) == 0) {
            free(e->v[i]);
            e->v[i] = s;
            return 0;
        }
    }
    if (e->n + 2 > e->cap) {
        int cap = e->cap ? e->cap * 2 : 32;
        char **p = realloc(e->v, sizeof *p * (size_t)cap);
        if (!p) {
            free(s);
            return -ENOMEM;
        }
        e->v = p;
        e->cap = cap;
    }
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
    return 0;
}

static void env_free(envv_t *e)
{
    for (int i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    memset(e, 0, sizeof *e);
}

static const char *env_get(const envv_t *e, const char *key)
{
    size_t k = strlen(key);
    for (int i = 0; i < e->n; i++)
        if (strncmp(e->v[i], key, k) == 0 && e->v[i][k] == '=')
            return e->v[i] + k + 1;
    return NULL;
}

static int build_env(const agent_exec_t *x, const agent_task_spec_t *s, envv_t *e)
{
    char buf[256];
    int rc = 0;

    rc |= env_set(e, "PATH", DEFAULT_PATH);
    rc |= env_set(e, "HOME", x->home);
    rc |= env_set(e, "USER", x->user);
    rc |= env_set(e, "LOGNAME", x->user);
    rc |= env_set(e, "LANG", "C.UTF-8");
    for (int i = 0; s->env && s->env[i]; i++)
        rc |= env_set(e, s->env[i], NULL);
    /* Ours last: a spec cannot override them. */
    rc |= env_set(e, "ARBITER_JOB_ID", s->job);
    snprintf(buf, sizeof buf, "%d", s->task);
    rc |= env_set(e, "ARBITER_TASK_INDEX", buf);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)s->epoch);
    rc |= env_set(e, "ARBITER_EPOCH", buf);
    if (x->conf.node_name)
        rc |= env_set(e, "ARBITER_NODE", x->conf.node_name);
    buf[0] = '\0';
    for (int i = 0, used = 0; i < s->ngpus; i++)
        used += snprintf(buf + used, sizeof buf - (size_t)used, "%s%d", i ? "," : "", s->gpus[i]);
    /* Empty for a task without GPUs: it sees none. Indices are NVML's, which
     * follow PCI bus order; CUDA's default order is fastest-first. */
    rc |= env_set(e, "CUDA_VISIBLE_DEVICES", buf);
    rc |= env_set(e, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    if (s->elastic) {
        agent_log_path(buf, sizeof buf, x->conf.log_dir, s->job, s->task, "resize");
        rc |= env_set(e, "ARBITER_RESIZE_FILE", buf);
    }
    if (s->world_size > 0) {
        rc |= env_set(e, "MASTER_ADDR", s->master_addr ? s->master_addr : "");
        snprintf(buf, sizeof buf, "%d", s->master_port);
        rc |= env_set(e, "MASTER_PORT", buf);
        snprintf(buf, sizeof buf, "%d", s->world_size);
        rc |= env_set(e, "WORLD_SIZE", buf);
        snprintf(buf, sizeof buf, "%d", s->rank);
        rc |= env_set(e, "RANK", buf);
    }
    return rc ? -ENOMEM : 0;
}

/* Finish a file written through tmp: flush (and fsync when durable, else
 * make it world-readable), close, rename over path. On failure tmp is
 * removed and path is as it was; 0 or -errno. */
int exec_atomic_finish(FILE *f, const char *tmp, const char *path, bool durable)
{
    int rc = 0;

    if (fflush(f) != 0 || (durable ? fsync(fileno(f)) : fchmod(fileno(f), 0644)) != 0)
        rc = -errno;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

/* Write LOG_DIR/JOB.TASK.resize (see exec.h) through a temporary file and
 * a rename, so a task never reads half of it. */
static int write_resize(const agent_exec_t *x, const char *job, int task, uint32_t gen, int world,
                        int rank, const char *hosts, arb_err_t *err)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    FILE *f;
    int rc = 0;

    agent_log_path(path, sizeof path, x->conf.log_dir, job, task, "resize");
    exec_fmt(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "we")))
        return arb_errf(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "generation=%u\nworld_size=%d\nrank=%d\nhosts=%s\n", gen, world, rank,
            hosts ? hosts : "");
    if ((rc = exec_atomic_finish(f, tmp, path, false)) < 0)
        return arb_errf(err, rc, "cannot write %s: %s", path, strerror(-rc));
    return 0;
}

int agent_exec_resize(agent_exec_t *x, const char *job, int task, uint32_t generation,
                      int world_size, int rank, const char *hosts, arb_err_t *err)
{
    agent_task_t *t = agent_exec_find(x, job, task);
    int rc;

    if (!t)
        return arb_errf(err, -ENOENT, "job %s task %d: not here", job, task);
    settle(x, t, true, false); /* its process group exists before it is signalled */
    if (t->state != AGENT_TASK_RUNNING || t->generation == generation)
        return 0;
    if ((rc = write_resize(x, job, task, generation, world_size, rank, hosts, err)) < 0)
        return rc;
    t->generation = generation;
    if (t->pid > 1)
        kill(-t->pid, SIGUSR1);
    return 1;
}

/* argv0 as a path to exec: as given when it has a '/', else found in PATH. */
static int resolve(const char *argv0, const char *path, char *out, size_t n)
{
    const char *p = path;

    if (strchr(argv0, '/')) {
        struct stat st;
        snprintf(out, n, "%s", argv0);
        /* an absolute path that is not there is known now, not only at the
         * exec (a relative one depends on the task's directory) */
        return argv0[0] == '/' && stat(out, &st) != 0 && errno == ENOENT ? -ENOENT : 0;
    }
    while (p && *p) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        struct stat st;
        snprintf(out, n, "%.*s/%s", (int)(len ? len : 1), len ? p : ".", argv0);
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 0;
        p = colon ? colon + 1 : NULL;
    }
    return -ENOENT;
}

/* ---- start ------------------------------------------------------------------------------ */

static int check_spec(const agent_task_spec_t *s, arb_err_t *err)
{
    if (!agent_job_id_ok(s->job))
        return arb_errf(err, -EINVAL,
                        "job id '%.64s' cannot name files: use 1..127 letters, "
                        "digits, '.', '_' or '-', not starting with '.'",
                        s->job ? s->job : "");
    if (s->task < 0)
        return arb_errf(err, -EINVAL, "job %s: task index %d is negative", s->job, s->task);
    if (!s->argv || !s->argv[0] || !s->argv[0][0])
        return arb_errf(err, -EINVAL, "job %s task %d: no command", s->job, s->task);
    if (s->ngpus < 0 || s->ngpus > ARB_MAX_GPUS)
        return arb_errf(err, -EINVAL, "job %s task %d: %d GPUs; at most %d", s->job, s->task,
                        s->ngpus, ARB_MAX_GPUS);
    for (int i = 0; i < s->ngpus; i++) {
        if (s->gpus[i] < 0 || s->gpus[i] >= ARB_MAX_GPUS)
            return arb_errf(err, -EINVAL, "job %s task %d: GPU index %d out of range", s->job,
                            s->task, s->gpus[i]);
        for (int j = 0; j < i; j++)
            if (s->gpus[j] == s->gpus[i])
                return arb_errf(err, -EINVAL, "job %s task %d: GPU %d given twice", s->job, s->task,
                                s->gpus[i]);
    }
    if (s->world_size < 0 ||
        (s->world_size > 0 && (s->rank < 0 || s->rank >= s->world_size || !s->master_addr ||
                               !s->master_addr[0] || s->master_port < 1 || s->master_port > 65535)))
        return arb_errf(err, -EINVAL,
                        "job %s task %d: a gang member needs 0 <= rank < "
                        "world_size, a master address and a port 1..65535",
                        s->job, s->task);
    for (int i = 0; s->env && s->env[i]; i++) {
        const char *eq = strchr(s->env[i], '=');
        if (!eq || eq == s->env[i])
            return arb_errf(err, -EINVAL,
                            "job %s task %d: environment entry '%.64s' is not "
                            "KEY=VALUE",
                            s->job, s->task, s->env[i]);
    }
    if (s->mem_bytes < 0 || s->cpu_milli < 0)
        return arb_errf(err, -EINVAL, "job %s task %d: negative limit", s->job, s->task);
    return 0;
}

/* The start pipe's messages and steps: supervise.h (the supervisor and
 * the task write them). */
static const char *const step_name[AGENT_SUP_STEP_N] = {"setsid",
                                                        "joining its cgroups",
                                                        "redirecting output",
                                                        "switching user",
                                                        "changing directory",
                                                        "exec",
                                                        "forking the task",
                                                        "starting its supervisor",
                                                        "taking its lock",
                                                        "writing its task record"};

/* `sleep N` (N seconds, a decimal, an optional s): N in ns; else 0. */
static int64_t sleep_ns(char *const *argv)
{
    const char *a0 = argv[0], *slash = strrchr(a0, '/');
    char *end;

    if (strcmp(slash ? slash + 1 : a0, "sleep") != 0 || !argv[1] || argv[2])
        return 0;
    double v = strtod(argv[1], &end);
    if (end == argv[1] || (*end && strcmp(end, "s") != 0) || !(v > 0) || v > 1e6)
        return 0;
    return (int64_t)(v * 1e9);
}

/* A timed task (conf.timed): no process, one line in its log to say so. */
static int start_timed(agent_exec_t *x, const agent_task_spec_t *s, int64_t now_ns,
                       agent_task_t **out, arb_err_t *err)
{
    agent_task_t *t = calloc(1, sizeof *t);
    int rc;
    FILE *f;

    if (!t)
        return arb_errf(err, -ENOMEM, "out of memory");
    snprintf(t->job, sizeof t->job, "%s", s->job);
    t->task = s->task;
    t->attempt = s->attempt;
    t->epoch = s->epoch;
    t->state = AGENT_TASK_RUNNING;
    t->timed = true;
    t->start_ns = now_ns;
    t->end_at_ns = now_ns + sleep_ns(s->argv);
    t->deadline_ns = s->deadline_ns;
    t->cg.procs_fd[0] = t->cg.procs_fd[1] = -1;
    t->ngpus = s->ngpus;
    memcpy(t->gpus, s->gpus, sizeof t->gpus);
    exec_log_paths(x, t);
    if ((f = fopen(t->out_path, "ae"))) {
        fprintf(f, "[arbiter: emulated task, no process: %s%s for %.3f s]\n", s->argv[0],
                s->argv[1] ? " ..." : "", (double)(t->end_at_ns - now_ns) / 1e9);
        fclose(f);
    }
    if ((rc = exec_table_add(x, t)) < 0) {
        free(t);
        return arb_errf(err, rc, "out of memory");
    }
    if (out)
        *out = t;
    return 0;
}

/* A zygote that died this often is not started again (posix_spawn then). */
#define AGENT_EXEC_ZYGOTE_DEATHS 8

/* The fds the supervisor inherits (spawn_supervisor), at fixed numbers;
 * the start record names them. */
enum {
    SUP_FD_START = 3, /* the start record (a memfd) */
    SUP_FD_REPORT,    /* the start pipe's write end */
    SUP_FD_OUT,       /* the task's stdout and stderr */
    SUP_FD_ERR,
    SUP_FD_CG, /* its cgroup.procs files: SUP_FD_CG, SUP_FD_CG + 1 */
    SUP_FD_END = SUP_FD_CG + 2
};

/*
 * Spawn the supervisor: posix_spawn (glibc's runs the child on a stack of
 * its own, with its internal system calls only: the agent's memory is
 * neither copied nor touched by any interceptor of a sanitizer), in a
 * session of its own (nothing sent to the agent's process group reaches
 * it), with the default action for every signal and SIGTERM and SIGCHLD
 * blocked until its loop waits for them; stdio /dev/null and the fds of
 * the start record at SUP_FD_*. The start record travels in a memfd: its
 * environment is the task's, never the supervisor's (a root supervisor
 * would honour GLIBC_TUNABLES), nor its argv (world-readable). The fds
 * given are the caller's still; 0 or -errno with text.
 */
static int spawn_supervisor(agent_exec_t *x, agent_sup_start_t *st, const agent_cg_task_t *cg,
                            char **sargv, int pipew, int outfd, int errfd, pid_t *pid,
                            arb_err_t *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    char *rec = NULL;
    size_t len = 0;
    int rc, memfd = -1, nullfd = -1, src[SUP_FD_END], moved[SUP_FD_END], ncg = 0;
    char *senv[] = {"PATH=" DEFAULT_PATH, NULL};

    for (int i = 0; i < SUP_FD_END; i++)
        src[i] = -1;
    src[SUP_FD_REPORT] = pipew;
    src[SUP_FD_OUT] = outfd;
    src[SUP_FD_ERR] = errfd;
    for (int i = 0; i < cg->n && i < 2; i++)
        if (cg->procs_fd[i] >= 0)
            src[SUP_FD_CG + ncg++] = cg->procs_fd[i];
    st->report_fd = SUP_FD_REPORT;
    st->out_fd = SUP_FD_OUT;
    st->err_fd = SUP_FD_ERR;
    st->ncg = ncg;
    st->cg_fd[0] = SUP_FD_CG;
    st->cg_fd[1] = SUP_FD_CG + 1;
    if (agent_sup_start_encode(st, &rec, &len) < 0)
        return arb_errf(err, -ENOMEM, "out of memory");
    memfd = memfd_create("arbiter-start", MFD_CLOEXEC);
    if (memfd < 0) {
        rc = arb_errf(err, -errno, "memfd_create: %s", strerror(errno));
        free(rec);
        return rc;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(memfd, rec + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = arb_errf(err, w < 0 ? -errno : -EIO, "the start record: %s", strerror(errno));
            free(rec);
            close(memfd);
            return rc;
        }
        off += (size_t)w;
    }
    free(rec);
    src[SUP_FD_START] = memfd;
    /* The zygote forks it when there is one (zygote.h): no exec, no start of
     * a program. Gone before the request: spawned here instead. */
    if (!x->conf.no_zygote && !x->zyg.off && x->zyg.fd < 0)
        agent_zygote_start(&x->zyg, x->conf.supervisor, NULL);
    if (x->zyg.fd >= 0) {
        rc = agent_zygote_spawn(&x->zyg, sargv, &src[SUP_FD_START], SUP_FD_CG + ncg - SUP_FD_START,
                                pid, err);
        if (rc != -EPIPE) {
            close(memfd);
            return rc;
        }
        if (++x->zyg_deaths >= AGENT_EXEC_ZYGOTE_DEATHS)
            x->zyg.off = true;
    }
    /* its stdio /dev/null (the zygote's is, and so are its supervisors') */
    if ((nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        rc = arb_errf(err, -errno, "/dev/null: %s", strerror(errno));
        close(memfd);
        return rc;
    }
    src[0] = src[1] = src[2] = nullfd;
    /* Every source above the targets, so that no dup2 of the file actions
     * overwrites another's source: a copy (close-on-exec) where it is not. */
    for (int i = 0; i < SUP_FD_END; i++)
        moved[i] = src[i] < SUP_FD_END ? -1 : src[i];
    for (int i = 0; i < SUP_FD_END; i++) {
        if (src[i] < 0 || src[i] >= SUP_FD_END)
            continue;
        if ((moved[i] = fcntl(src[i], F_DUPFD_CLOEXEC, SUP_FD_END)) < 0) {
            rc = arb_errf(err, -errno, "fcntl: %s", strerror(errno));
            goto out;
        }
    }
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < SUP_FD_END; i++)
        if (moved[i] >= 0)
            posix_spawn_file_actions_adddup2(&fa, moved[i], i);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, SUP_FD_END); /* the agent's other fds */
#endif
    agent_sup_spawnattr(&at);
    rc = posix_spawn(pid, x->conf.supervisor, &fa, &at, sargv, senv);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        rc = arb_errf(err, -rc, "%s: %s", x->conf.supervisor, strerror(rc));
out:
    for (int i = 0; i < SUP_FD_END; i++) /* the copies made above */
        if (moved[i] >= 0 && moved[i] != src[i])
            close(moved[i]);
    close(memfd);
    close(nullfd);
    return rc;
}

int agent_exec_begin(agent_exec_t *x, const agent_task_spec_t *s, int64_t now_ns,
                     agent_task_t **out, arb_err_t *err)
{
    char cg_name[AGENT_JOB_MAX + 16], path[PATH_MAX];
    char lease_path[PATH_MAX], startbuf[8], limbuf[24], gracebuf[24];
    char *sargv[28], rec_path[PATH_MAX], fields[AGENT_JOB_MAX + 96];
    const char *cwd;
    envv_t env = {0};
    agent_task_t *t = NULL, *old;
    int rc, pipefd[2] = {-1, -1}, outfd = -1, errfd = -1;
    bool cg_made = false;
    pid_t pid;

    if ((rc = check_spec(s, err)) < 0)
        return rc;
    old = agent_exec_find(x, s->job, s->task);
    if (old && old->state != AGENT_TASK_EXITED)
        return arb_errf(err, -EEXIST, "job %s task %d is already running here (pid %d)", s->job,
                        s->task, (int)old->pid);
    if (x->conf.timed) {
        if (old)
            agent_exec_forget(x, s->job, s->task);
        return start_timed(x, s, now_ns, out, err);
    }
    /* A supervisor holds the task's lock: it runs already (a previous run
     * of this agent started it and died before it knew): taken over, never
     * started twice. */
    if (exec_record_free(x, s->job, s->task, EXEC_PEEK)) {
        if (old)
            agent_exec_forget(x, s->job, s->task);
        return exec_adopt_running(x, s->job, s->task, now_ns, out, err);
    }
    if (!(t = calloc(1, sizeof *t)))
        return arb_errf(err, -ENOMEM, "out of memory");
    t->cg.procs_fd[0] = t->cg.procs_fd[1] = -1;
    t->start_fd = -1;
    if ((rc = build_env(x, s, &env)) < 0) {
        arb_errf(err, rc, "out of memory");
        goto fail;
    }
    if ((rc = resolve(s->argv[0], env_get(&env, "PATH"), path, sizeof path)) < 0) {
        if (s->argv[0][0] == '/')
            arb_errf(err, rc, "job %s task %d: command '%.200s' not found", s->job, s->task,
                     s->argv[0]);
        else
            arb_errf(err, rc, "job %s task %d: command '%.64s' not found in PATH=%.200s", s->job,
                     s->task, s->argv[0], env_get(&env, "PATH"));
        goto fail;
    }
    cwd = s->cwd ? s->cwd : x->workdir;
    if (!(t->start_cwd = strdup(cwd))) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto fail;
    }
    exec_fmt(t->start_err, sizeof t->start_err, "job %s task %d: cannot start '%.64s'", s->job,
             s->task, s->argv[0]);
    t->grace_ns = s->has_grace ? s->grace_ns : -1;
    t->generation = s->generation;
    t->deadline_ns = s->deadline_ns;
    if (s->elastic && (rc = write_resize(x, s->job, s->task, s->generation, s->world_size, s->rank,
                                         s->hosts, err)) < 0)
        goto fail;
    /* Its log: one file, both streams on one open file description (each
     * write lands at the end, in the order written), unless stderr is
     * split. O_NOFOLLOW: nothing planted in the log directory redirects it. */
    snprintf(t->job, sizeof t->job, "%s", s->job);
    t->task = s->task;
    exec_log_paths(x, t);
    if (t->err_path[0]) /* before out: where out is, a reader knows err would be too */
        errfd = open(t->err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (!t->err_path[0] || errfd >= 0)
        outfd = open(t->out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (!t->err_path[0])
        errfd = outfd;
    if (outfd < 0 || errfd < 0) {
        rc = -errno;
        arb_errf(err, rc, "cannot open the task's log %s: %s",
                 errfd < 0 && t->err_path[0] ? t->err_path : t->out_path, strerror(errno));
        goto fail;
    }
    exec_fmt(cg_name, sizeof cg_name, "%s.%d", s->job, s->task);
    if ((rc = agent_cg_task_create(&x->cg, cg_name, s->mem_bytes, s->cpu_milli, &t->cg, err)) < 0)
        goto fail;
    cg_made = true;
    if (old) /* the EXITED run before this one: its records go before the new ones */
        agent_exec_forget(x, s->job, s->task);
    old = NULL;
    /* The task's one file: a spare renamed into place when there is one
     * (the supervisor empties it, or creates it when there is none). */
    record_path(x, s->job, s->task, rec_path, sizeof rec_path);
    take_spare(x, rec_path);
    /* The supervisor's command line: it forks the task from the start
     * record on its fd SUP_FD_START (spawn_supervisor). */
    exec_fmt(lease_path, sizeof lease_path, "%s/lease", x->sup_dir);
    snprintf(startbuf, sizeof startbuf, "%d", SUP_FD_START);
    {
        int k = 0;
        sargv[k++] = "arbiter"; /* as ps shows it; the program is conf.supervisor */
        sargv[k++] = "supervise";
        sargv[k++] = "--start";
        sargv[k++] = startbuf;
        /* It locks the task's file, and appends the task record to it
         * before the exec, the exit record at the end. */
        snprintf(fields, sizeof fields, "%s %d %llu %llu %lld %u", s->job, s->task,
                 (unsigned long long)s->attempt, (unsigned long long)s->epoch,
                 (long long)(t->grace_ns >= 0 ? t->grace_ns / 1000000 : -1), s->generation);
        sargv[k++] = "--record";
        sargv[k++] = rec_path;
        sargv[k++] = "--record-fields";
        sargv[k++] = fields;
        if (x->conf.leased) {
            sargv[k++] = "--lease";
            sargv[k++] = lease_path;
        }
        for (int i = 0; i < t->cg.n; i++) {
            sargv[k++] = x->cg.mode == AGENT_CG_V2 ? "--cgroup-v2" : "--cgroup-v1";
            sargv[k++] = t->cg.dir[i];
        }
        if (s->deadline_ns > 0) { /* on the supervisors' clock: what is left of it */
            int64_t g = t->grace_ns >= 0 ? t->grace_ns : x->conf.grace_ns;
            snprintf(limbuf, sizeof limbuf, "%lld",
                     (long long)(agent_sup_mono_ns() +
                                 (s->deadline_ns > now_ns ? s->deadline_ns - now_ns : 1)));
            snprintf(gracebuf, sizeof gracebuf, "%lld", (long long)g);
            sargv[k++] = "--time-limit-at";
            sargv[k++] = limbuf;
            sargv[k++] = "--grace";
            sargv[k++] = gracebuf;
        }
        sargv[k] = NULL;
    }
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        rc = -errno;
        arb_errf(err, rc, "pipe: %s", strerror(errno));
        goto fail;
    }
    {
        agent_sup_start_t st = {
            .path = path,
            .cwd = cwd,
            .argv = (char **)s->argv,
            .envv = env.v,
            .drop = x->drop,
            .uid = x->uid,
            .gid = x->gid,
            .ngroups = x->ngroups < AGENT_SUP_MAX_GROUPS ? x->ngroups : AGENT_SUP_MAX_GROUPS,
            .delay_ns = x->conf.start_delay_ns,
        };
        memcpy(st.groups, x->groups, sizeof st.groups[0] * (size_t)st.ngroups);
        arb_err_t why = {{0}};
        if ((rc = spawn_supervisor(x, &st, &t->cg, sargv, pipefd[1], outfd, errfd, &pid, &why)) <
            0) {
            arb_errf(err, rc, "%s (%s): %s", t->start_err, step_name[AGENT_SUP_STEP_SUPERVISOR],
                     why.msg);
            goto fail;
        }
    }

    /* The task is STARTING; its start pipe (its end: the supervisor's copy
     * closed, the task exec'd) is read by agent_exec_poll, never waited on
     * here. */
    close(pipefd[1]);
    pipefd[1] = -1;
    agent_cg_task_close_fds(&t->cg);
    fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
    t->attempt = s->attempt;
    t->epoch = s->epoch;
    t->sup_pid = pid;
    t->state = AGENT_TASK_STARTING;
    t->start_fd = pipefd[0];
    t->start_ns = now_ns;
    t->exit_code = -1;
    t->ngpus = s->ngpus;
    memcpy(t->gpus, s->gpus, sizeof t->gpus);
    if ((rc = exec_table_add(x, t)) < 0) {
        kill(pid, SIGKILL); /* the task dies with it (PR_SET_PDEATHSIG, or its getppid check) */
        agent_cg_task_kill(&x->cg, &t->cg);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        exec_record_free(x, s->job, s->task, EXEC_RESET);
        t->start_fd = -1;
        arb_errf(err, rc, "out of memory");
        goto fail;
    }
    pipefd[0] = -1;
    if (out)
        *out = t;
    t = NULL;
    rc = 0;
fail:
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (outfd >= 0)
        close(outfd);
    if (errfd >= 0 && errfd != outfd)
        close(errfd);
    if (t) {
        agent_cg_task_close_fds(&t->cg);
        if (cg_made)
            agent_cg_task_remove(&t->cg);
        free(t->start_cwd);
        free(t);
    }
    env_free(&env);
    return rc;
}

/* A start that failed after the fork: the task never ran. Its supervisor
 * (reaped unless reaped says so) killed or never had a task; what is left
 * of its cgroups goes, and so do its records. */
static void start_failed(agent_exec_t *x, agent_task_t *t, bool reaped)
{
    int step = t->start_errno > 0 && t->start_step >= 0 && t->start_step < AGENT_SUP_STEP_N
                   ? t->start_step
                   : AGENT_SUP_STEP_SUPERVISOR;
    size_t used = strlen(t->start_err);

    if (!reaped)
        while (waitpid(t->sup_pid, NULL, 0) < 0 && errno == EINTR)
            ;
    if (step != AGENT_SUP_STEP_LOCK) { /* else they are the running copy's */
        agent_cg_task_kill(&x->cg, &t->cg);
        agent_cg_task_remove(&t->cg);
        exec_record_free(x, t->job, t->task, EXEC_RESET);
    }
    snprintf(t->start_err + used, sizeof t->start_err - used, " (%s%s%s): %s", step_name[step],
             step == AGENT_SUP_STEP_USER || step == AGENT_SUP_STEP_CHDIR ? " to " : "",
             step == AGENT_SUP_STEP_USER    ? x->user
             : step == AGENT_SUP_STEP_CHDIR ? (t->start_cwd ? t->start_cwd : "?")
                                            : "",
             t->start_errno > 0 ? strerror(t->start_errno) : "the supervisor died at its start");
    t->start_rc = t->start_errno > 0 ? -t->start_errno : -ECHILD;
    t->start_failed = true;
    t->exit_code = t->start_rc == -ENOENT ? 127 : 126; /* as a shell says */
    t->signal = 0;
    t->pid = 0; /* it is gone: nothing may signal that pid now */
    snprintf(t->reason, sizeof t->reason, "exited");
    t->state = AGENT_TASK_EXITED;
    t->end_ns = t->start_ns;
}

/*
 * Read what t's start pipe holds: the task's pid (its record is written at
 * once, for a restarted agent), or a failed step. At the pipe's end (both
 * exec'd, or every writer gone) the start settles: RUNNING, or EXITED
 * (start_failed). block: wait for that end (an exec: milliseconds; the
 * task child cannot outlive its supervisor); reaped: the supervisor was
 * reaped already. 1 when settled, 0 while it is still starting.
 */
static int settle(agent_exec_t *x, agent_task_t *t, bool block, bool reaped)
{
    agent_sup_msg_t m;

    if (t->state != AGENT_TASK_STARTING)
        return 1;
    for (;;) {
        ssize_t got = read(t->start_fd, &m, sizeof m);
        if (got == (ssize_t)sizeof m) {
            if (m.kind == AGENT_SUP_MSG_PID && t->pid == 0 && m.a > 1) {
                t->pid = m.a;
                /* for the state file (agent_exec_save); the supervisor's
                 * start time matters only to an adopted task's liveness
                 * (its task record has it): not read for our own child */
                if (agent_proc_start_ticks(t->pid, &t->start_ticks) < 0)
                    t->start_ticks = 0;
                /* Its task record: the supervisor's, written before the exec. */
            } else if (m.kind == AGENT_SUP_MSG_FAIL && t->start_errno <= 0) {
                t->start_step = m.a;
                t->start_errno = m.b > 0 ? m.b : ECHILD;
            }
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!block)
                return 0;
            struct pollfd pf = {.fd = t->start_fd, .events = POLLIN};
            poll(&pf, 1, 1000);
            continue;
        }
        break; /* its end (or a short read: the writers are gone) */
    }
    close(t->start_fd);
    t->start_fd = -1;
    if (t->start_errno > 0 || t->pid <= 1)
        start_failed(x, t, reaped);
    else
        t->state = AGENT_TASK_RUNNING;
    free(t->start_cwd);
    t->start_cwd = NULL;
    return 1;
}

/* Take t out of the table and free it (a start that failed). */
static void table_drop(agent_exec_t *x, agent_task_t *t)
{
    for (int i = 0; i < x->ntasks; i++)
        if (x->tasks[i] == t) {
            memmove(&x->tasks[i], &x->tasks[i + 1],
                    sizeof x->tasks[0] * (size_t)(x->ntasks - i - 1));
            x->ntasks--;
            break;
        }
    agent_cg_task_close_fds(&t->cg);
    free(t->start_cwd);
    free(t);
}

int agent_exec_start(agent_exec_t *x, const agent_task_spec_t *s, int64_t now_ns,
                     agent_task_t **out, arb_err_t *err)
{
    agent_task_t *t = NULL;
    int rc = agent_exec_begin(x, s, now_ns, &t, err);

    if (rc < 0)
        return rc;
    settle(x, t, true, false);
    if (t->start_failed) {
        rc = arb_errf(err, t->start_rc, "%s", t->start_err);
        table_drop(x, t);
        return rc;
    }
    if (out)
        *out = t;
    return 0;
}

int agent_exec_start_fds(const agent_exec_t *x, struct pollfd *pf, int max)
{
    int n = 0;

    for (int i = 0; i < x->ntasks; i++)
        if (x->tasks[i]->state == AGENT_TASK_STARTING) {
            if (n < max)
                pf[n] = (struct pollfd){.fd = x->tasks[i]->start_fd, .events = POLLIN};
            n++;
        }
    return n;
}

int agent_exec_record_failed(agent_exec_t *x, const agent_task_spec_t *s, int exit_code,
                             int64_t now_ns)
{
    agent_task_t *t, *old;
    int rc;

    if (!agent_job_id_ok(s->job) || s->task < 0)
        return -EINVAL;
    old = agent_exec_find(x, s->job, s->task);
    if (old && old->state != AGENT_TASK_EXITED)
        return -EEXIST;
    if (!(t = calloc(1, sizeof *t)))
        return -ENOMEM;
    snprintf(t->job, sizeof t->job, "%s", s->job);
    t->task = s->task;
    t->attempt = s->attempt;
    t->epoch = s->epoch;
    t->state = AGENT_TASK_EXITED;
    t->start_ns = t->end_ns = now_ns;
    t->exit_code = exit_code;
    t->cg.procs_fd[0] = t->cg.procs_fd[1] = -1;
    snprintf(t->reason, sizeof t->reason, "exited");
    if (old)
        agent_exec_forget(x, s->job, s->task);
    if ((rc = exec_table_add(x, t)) < 0)
        free(t);
    return rc;
}

/* ---- ending ------------------------------------------------------------------------------- */

/* Kill whatever is left of t's group and cgroups. */
static void kill_all(agent_exec_t *x, agent_task_t *t)
{
    if (t->pid > 1)
        kill(-t->pid, SIGKILL);
    agent_cg_task_kill(&x->cg, &t->cg);
}

/* t ended. have_status: status is its leader's wait status. A supervisor
 * that wrote an exit record killed the task's group before it reaped the
 * leader (sup_killed): its pid may name another process by now, so only
 * the cgroups are killed again. */
static void finish_task(agent_exec_t *x, agent_task_t *t, int status, bool have_status,
                        bool sup_killed, int64_t now)
{
    if (sup_killed)
        agent_cg_task_kill(&x->cg, &t->cg);
    else
        kill_all(x, t); /* invariant (1): nothing of the task outlives its report */
    if (have_status && WIFEXITED(status)) {
        t->exit_code = WEXITSTATUS(status);
        t->signal = 0;
    } else if (have_status && WIFSIGNALED(status)) {
        t->exit_code = -1;
        t->signal = WTERMSIG(status);
    } else {
        t->exit_code = -1;
    }
    if (!t->reason[0])
        snprintf(t->reason, sizeof t->reason, "%s",
                 !have_status ? "lost"
                 : t->signal  ? "killed"
                              : "exited");
    t->state = AGENT_TASK_EXITED;
    t->end_ns = now;
    agent_cg_task_remove(&t->cg);
}

static void finish(agent_exec_t *x, agent_task_t *t, int status, bool have_status, int64_t now)
{
    finish_task(x, t, status, have_status, false, now);
}

/* Is pid still the process that started at ticks, and not a zombie? */
bool exec_proc_alive(pid_t pid, uint64_t start_ticks)
{
    uint64_t ticks;
    char path[64], state[8] = "";
    FILE *f;

    if (pid <= 1 || (kill(pid, 0) != 0 && errno == ESRCH))
        return false;
    if (agent_proc_start_ticks(pid, &ticks) < 0 || ticks != start_ticks)
        return false;
    /* A zombie (its parent has not reaped it yet) is gone for us. */
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "re"))) {
        char buf[512], *p;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = '\0';
        if ((p = strrchr(buf, ')')))
            sscanf(p + 1, " %7s", state);
        fclose(f);
    }
    return state[0] != 'Z' && state[0] != 'X';
}

bool exec_adopted_alive(const agent_task_t *t)
{
    return t->sup_pid > 0 ? exec_proc_alive(t->sup_pid, t->sup_ticks)
                          : exec_proc_alive(t->pid, t->start_ticks);
}

/* t's supervisor is gone (reaped here, or, adopted, no longer there): what
 * its exit record says is how the task ended. No record: the supervisor
 * died without writing one (killed itself), and the task with it. */
void exec_sup_done(agent_exec_t *x, agent_task_t *t, int64_t now)
{
    char path[PATH_MAX], line[512];
    agent_sup_exit_t e;
    bool have = false;

    record_path(x, t->job, t->task, path, sizeof path);
    if (agent_sup_file_read(path, line, sizeof line, &e, &have) < 0 || !have) {
        finish(x, t, 0, false, now);
        return;
    }
    if (e.why == AGENT_SUP_LEASE) {
        t->fenced_by_sup = true;
        t->late_ns =
            e.killed_ns > e.deadline_ns && e.deadline_ns > 0 ? e.killed_ns - e.deadline_ns : 0;
        t->seen_late_ns = e.deadline_ns > 0 ? agent_sup_mono_ns() - e.deadline_ns : 0;
        if (!t->reason[0])
            snprintf(t->reason, sizeof t->reason, "fenced");
    } else if (e.why == AGENT_SUP_TIMELIMIT && !t->reason[0]) {
        snprintf(t->reason, sizeof t->reason, "timeout");
    }
    finish_task(x, t, e.status, true, true, now);
}

/* Its time limit passed: stop it as a cancel does (SIGTERM, its grace,
 * SIGKILL), reason "timeout". The controller does the same from its side.
 * A task with a process has its limit held by its supervisor (given at
 * start: --time-limit-at), which holds whatever state the agent is in; an
 * emulated task (no process, no supervisor) is stopped here. */
static void time_limit(agent_exec_t *x, agent_task_t *t, int64_t now_ns)
{
    if (!t->timed || t->state != AGENT_TASK_RUNNING || t->deadline_ns <= 0 ||
        now_ns < t->deadline_ns)
        return;
    agent_exec_cancel(x, t->job, t->task, now_ns);
    snprintf(t->reason, sizeof t->reason, "timeout");
}

int64_t agent_exec_next_deadline(const agent_exec_t *x)
{
    int64_t next = 0;

    for (int i = 0; i < x->ntasks; i++) {
        const agent_task_t *t = x->tasks[i];
        int64_t d = t->state == AGENT_TASK_RUNNING || t->state == AGENT_TASK_STARTING
                        ? t->deadline_ns
                    : t->state == AGENT_TASK_STOPPING ? t->kill_at_ns
                                                      : 0;
        if (d > 0 && (next == 0 || d < next))
            next = d;
    }
    return next;
}

int agent_exec_poll(agent_exec_t *x, int64_t now_ns)
{
    int changed = 0, status;
    pid_t r;

    for (int i = 0; i < x->ntasks; i++) {
        agent_task_t *t = x->tasks[i];
        time_limit(x, t, now_ns);
        if (t->state == AGENT_TASK_EXITED) {
            if (t->cg.n)
                agent_cg_task_remove(&t->cg); /* processes were still leaving */
            continue;
        }
        if (t->timed) { /* no process: its time is up, or it was stopped */
            if (t->state == AGENT_TASK_STOPPING || now_ns >= t->end_at_ns) {
                bool stopped = t->state == AGENT_TASK_STOPPING;
                t->exit_code = stopped ? -1 : 0;
                t->signal = stopped ? SIGTERM : 0;
                if (!t->reason[0])
                    snprintf(t->reason, sizeof t->reason, "exited");
                t->state = AGENT_TASK_EXITED;
                t->end_ns = now_ns;
                changed++;
            }
            continue;
        }
        if (t->state == AGENT_TASK_STARTING && !settle(x, t, false, false)) {
            r = waitpid(t->sup_pid, &status, WNOHANG);
            if (r == t->sup_pid || (r < 0 && errno == ECHILD)) {
                settle(x, t, true, true); /* the supervisor ended before the pipe did */
                if (t->state == AGENT_TASK_RUNNING)
                    exec_sup_done(x, t, now_ns);
                changed++;
            }
            continue;
        }
        if (t->state == AGENT_TASK_EXITED) { /* its start failed */
            changed++;
            continue;
        }
        if (t->adopted) {
            if (!exec_adopted_alive(t)) {
                if (t->sup_pid > 0) {
                    exec_sup_done(x, t, now_ns);
                } else {
                    finish(x, t, 0, false, now_ns);
                    if (strcmp(t->reason, "lost") == 0) /* it ended by itself, how we cannot know */
                        snprintf(t->reason, sizeof t->reason, "exited");
                }
                changed++;
                continue;
            }
        } else {
            r = waitpid(t->sup_pid, &status, WNOHANG);
            if (r == t->sup_pid || (r < 0 && errno == ECHILD)) {
                exec_sup_done(x, t, now_ns); /* reaped elsewhere: the record still says */
                changed++;
                continue;
            }
        }
        if (t->state == AGENT_TASK_STOPPING && now_ns >= t->kill_at_ns)
            kill_all(x, t);
    }
    /* As subreaper, orphaned grandchildren are ours to reap; a supervisor
     * that exited since the loop above is recorded here. */
    while (x->conf.subreaper && (r = waitpid(-1, &status, WNOHANG)) > 0) {
        agent_task_t *t = find_sup(x, r);
        if (r == x->zyg.pid) { /* the zygote died: reaped, its pid no longer ours */
            x->zyg.pid = 0;
            agent_zygote_stop(&x->zyg);
        }
        if (t) {
            settle(x, t, true, true); /* a STARTING one: how its start ended first */
            if (t->state != AGENT_TASK_EXITED)
                exec_sup_done(x, t, now_ns);
            changed++;
        }
    }
    return changed;
}

int agent_exec_cancel(agent_exec_t *x, const char *job, int task, int64_t now_ns)
{
    agent_task_t *t = agent_exec_find(x, job, task);

    if (!t)
        return -ENOENT;
    settle(x, t, true, false); /* its process group exists before it is signalled */
    if (t->state != AGENT_TASK_RUNNING)
        return 0;
    t->state = AGENT_TASK_STOPPING;
    t->kill_at_ns = now_ns + (t->grace_ns >= 0 ? t->grace_ns : x->conf.grace_ns);
    snprintf(t->reason, sizeof t->reason, "cancelled");
    if (t->pid > 1) /* a timed task has none */
        kill(-t->pid, SIGTERM);
    return 0;
}

int agent_exec_fence(agent_exec_t *x, int64_t now_ns)
{
    int n = 0;

    if (x->conf.leased) /* every supervisor kills too, whatever happens to us now */
        agent_exec_set_deadline(x, 0);
    for (int i = 0; i < x->ntasks; i++) {
        agent_task_t *t = x->tasks[i];
        if (t->state == AGENT_TASK_STARTING) {
            /* no waiting for a slow exec: its supervisor dies now, and its task with it
             * (PR_SET_PDEATHSIG, or its check of its parent before that) */
            kill(t->sup_pid, SIGKILL);
            settle(x, t, true, false);
            if (t->start_failed) { /* it never ran: lost to the fence, not a failure */
                snprintf(t->reason, sizeof t->reason, "fenced");
                t->exit_code = -1;
                n++;
                continue;
            }
        }
        if (t->state == AGENT_TASK_EXITED)
            continue;
        t->state = AGENT_TASK_STOPPING;
        t->kill_at_ns = now_ns;
        snprintf(t->reason, sizeof t->reason, "fenced");
        kill_all(x, t);
        n++;
    }
    return n;
}

int agent_exec_wait(agent_exec_t *x, int64_t timeout_ns)
{
    int64_t end = arb_mono_ns() + timeout_ns;

    for (;;) {
        agent_exec_poll(x, arb_mono_ns());
        if (agent_exec_live(x) == 0)
            return 0;
        if (arb_mono_ns() >= end)
            return -ETIMEDOUT;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
}
