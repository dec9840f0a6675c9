/*
 * exec_adopt.c: the executor after a restart (see exec.h): adopting the
 * tasks a previous run left running, through their supervisors' task
 * records or an old state file, and that state file itself (written
 * atomically, read back line by line).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/exec_int.h"

/* A table entry (added; RUNNING, adopted) for a task record's task, its
 * supervisor sup (0: none, a record from an old state file). NULL when it
 * is known already or there is no memory. */
static agent_task_t *adopt_record(agent_exec_t *x, const agent_task_record_t *r, pid_t sup,
                                  uint64_t sup_ticks, int64_t now_ns)
{
    agent_task_t *t;

    if (agent_exec_find(x, r->job, r->task) || !(t = calloc(1, sizeof *t)))
        return NULL;
    snprintf(t->job, sizeof t->job, "%s", r->job);
    t->task = r->task;
    t->attempt = r->attempt;
    t->epoch = r->epoch;
    t->pid = r->pid;
    t->start_ticks = r->start_ticks;
    t->sup_pid = sup;
    t->sup_ticks = sup_ticks;
    t->grace_ns = r->grace_ns;
    t->generation = r->generation;
    t->state = AGENT_TASK_RUNNING;
    t->adopted = true;
    t->start_ns = now_ns;
    t->exit_code = -1;
    t->start_fd = -1;
    t->cg.procs_fd[0] = t->cg.procs_fd[1] = -1;
    exec_log_paths(x, t);
    for (int i = 0; i < 2 && x->cg.base[i][0]; i++) {
        struct stat st;
        exec_fmt(t->cg.dir[i], sizeof t->cg.dir[i], "%s/%s.%d", x->cg.base[i], r->job, r->task);
        if (stat(t->cg.dir[i], &st) != 0 || !S_ISDIR(st.st_mode))
            break;
        t->cg.n = i + 1;
    }
    if (exec_table_add(x, t) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

int agent_exec_adopt(agent_exec_t *x, const agent_task_record_t *r, int64_t now_ns, arb_err_t *err)
{
    uint64_t ticks;

    if (!agent_job_id_ok(r->job) || r->task < 0 || r->pid <= 1)
        return arb_errf(err, -EINVAL, "adopt: bad task record");
    if (agent_exec_find(x, r->job, r->task))
        return arb_errf(err, -EEXIST, "adopt: job %s task %d is already known", r->job, r->task);
    if (agent_proc_start_ticks(r->pid, &ticks) < 0 || ticks != r->start_ticks)
        return arb_errf(err, -ESRCH,
                        "adopt: job %s task %d: pid %d is gone or is another "
                        "process now",
                        r->job, r->task, (int)r->pid);
    if (!adopt_record(x, r, 0, 0, now_ns))
        return arb_errf(err, -ENOMEM, "out of memory");
    return 0;
}

int agent_task_record_parse(const char *line, agent_task_record_t *r, pid_t *sup,
                            uint64_t *sup_ticks)
{
    char job[AGENT_JOB_MAX + 1];
    unsigned long long attempt, epoch, sticks, ticks;
    long long grace_ms;
    unsigned gen;
    int task, spid, pid;

    if (sscanf(line, "%128s %d %llu %llu %d %llu %d %llu %lld %u", job, &task, &attempt, &epoch,
               &spid, &sticks, &pid, &ticks, &grace_ms, &gen) != 10 ||
        !agent_job_id_ok(job) || task < 0 || spid <= 1 || pid <= 1 || grace_ms < -1 ||
        grace_ms > 3600000LL)
        return -EINVAL;
    memset(r, 0, sizeof *r);
    exec_fmt(r->job, sizeof r->job, "%s", job);
    r->task = task;
    r->attempt = attempt;
    r->epoch = epoch;
    r->pid = pid;
    r->start_ticks = ticks;
    r->grace_ns = grace_ms >= 0 ? grace_ms * 1000000 : -1;
    r->generation = gen;
    *sup = spid;
    *sup_ticks = sticks;
    return 0;
}

/* A task's file (supervise.h) read: its last complete task record; false
 * when it has none (yet). */
static bool parse_task_record(const char *path, agent_task_record_t *r, pid_t *sup,
                              uint64_t *sup_ticks)
{
    char line[512];
    agent_sup_exit_t ex;
    bool have_exit;

    return agent_sup_file_read(path, line, sizeof line, &ex, &have_exit) == 0 &&
           agent_task_record_parse(line, r, sup, sup_ticks) == 0;
}

int exec_adopt_running(agent_exec_t *x, const char *job, int task, int64_t now_ns,
                       agent_task_t **out, arb_err_t *err)
{
    char path[PATH_MAX];
    agent_task_record_t r;
    pid_t sup;
    uint64_t sup_ticks;
    agent_task_t *t;

    exec_fmt(path, sizeof path, "%s/%s.%d.task", x->sup_dir, job, task);
    /* Written between the task's fork and its exec: milliseconds, at most
     * 5 s here (a supervisor that takes longer is stuck: said, not waited). */
    for (int i = 0; !parse_task_record(path, &r, &sup, &sup_ticks); i++) {
        if (i == 500)
            return arb_errf(err, -EBUSY,
                            "job %s task %d: a supervisor holds its lock (%s/%s.%d.task) but "
                            "wrote no task record in 5 s; it is starting or stuck: retry, or "
                            "kill that supervisor",
                            job, task, x->sup_dir, job, task);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (strcmp(r.job, job) != 0 || r.task != task ||
        !(t = adopt_record(x, &r, sup, sup_ticks, now_ns)))
        return arb_errf(err, -EBUSY, "job %s task %d: its running copy cannot be taken over (%s)",
                        job, task, path);
    if (out)
        *out = t;
    return 0;
}

int agent_exec_adopt_all(agent_exec_t *x, int64_t now_ns, int *ended)
{
    DIR *d = x->sup_dir[0] ? opendir(x->sup_dir) : NULL;
    struct dirent *e;
    int live = 0, gone = 0;

    if (ended)
        *ended = 0;
    if (!d)
        return 0;
    /* cppcheck-suppress readdirCalled ; one thread reads this directory stream */
    while ((e = readdir(d))) {
        char path[PATH_MAX];
        size_t n = strlen(e->d_name);
        agent_task_record_t r;
        pid_t sup;
        uint64_t sup_ticks;
        agent_task_t *t;

        if (n < 6 || strcmp(e->d_name + n - 5, ".task") != 0)
            continue;
        exec_fmt(path, sizeof path, "%s/%s", x->sup_dir, e->d_name);
        if (!parse_task_record(path, &r, &sup, &sup_ticks)) {
            /* No record: a supervisor still starting (it holds the lock: a
             * start of that task adopts it, exec_adopt_running), or an
             * emptied file, which becomes a spare. */
            char job[AGENT_JOB_MAX + 8], *dot, *end;
            exec_fmt(job, sizeof job, "%.*s", (int)(n - 5), e->d_name); /* JOB.TASK */
            if ((dot = strrchr(job, '.'))) {
                long tnum = strtol(dot + 1, &end, 10);
                *dot = '\0';
                if (!*end && end > dot + 1 && tnum >= 0 && agent_job_id_ok(job))
                    exec_record_free(x, job, (int)tnum, EXEC_RECYCLE);
            }
            continue;
        }
        if (!(t = adopt_record(x, &r, sup, sup_ticks, now_ns)))
            continue;
        if (exec_adopted_alive(t)) {
            live++;
        } else {
            /* Ended while no agent watched: how, its exit record says
             * (sup_done kills whatever might be left first). */
            if (exec_proc_alive(t->pid, t->start_ticks))
                kill(-t->pid, SIGKILL);
            exec_sup_done(x, t, now_ns);
            gone++;
        }
    }
    closedir(d);
    if (ended)
        *ended = gone;
    return live;
}

int agent_exec_save(const agent_exec_t *x, const char *path, arb_err_t *err)
{
    char tmp[PATH_MAX];
    FILE *f;
    int rc = 0;

    exec_fmt(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "we")))
        return arb_errf(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "# arbiter agent tasks: job task attempt epoch pid start_ticks [grace_ms "
               "generation]\n");
    for (int i = 0; i < x->ntasks; i++) {
        const agent_task_t *t = x->tasks[i];
        if (t->state != AGENT_TASK_EXITED && t->pid > 1)
            fprintf(f, "%s %d %llu %llu %d %llu %lld %u\n", t->job, t->task,
                    (unsigned long long)t->attempt, (unsigned long long)t->epoch, (int)t->pid,
                    (unsigned long long)t->start_ticks,
                    (long long)(t->grace_ns >= 0 ? t->grace_ns / 1000000 : -1), t->generation);
    }
    if ((rc = exec_atomic_finish(f, tmp, path, true)) < 0)
        return arb_errf(err, rc, "cannot save the task table to %s: %s", path, strerror(-rc));
    return 0;
}

int agent_exec_load(const char *path, agent_task_record_t *out, int max, arb_err_t *err)
{
    char line[512];
    FILE *f = fopen(path, "re");
    int n = 0, lineno = 0;

    if (!f)
        return errno == ENOENT ? 0 : arb_errf(err, -errno, "%s: %s", path, strerror(errno));
    while (fgets(line, sizeof line, f)) {
        agent_task_record_t r;
        char job[AGENT_JOB_MAX + 1];
        unsigned long long attempt, epoch, ticks;
        long long grace_ms = -1;
        unsigned gen = 0;
        int pid, got;

        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        /* The last two fields came later: a file without them still loads. */
        got = sscanf(line, "%128s %d %llu %llu %d %llu %lld %u", job, &r.task, &attempt, &epoch,
                     &pid, &ticks, &grace_ms, &gen);
        if ((got != 6 && got != 8) || !agent_job_id_ok(job) || r.task < 0 || pid <= 1 ||
            grace_ms < -1 || grace_ms > 3600000LL) {
            fclose(f);
            return arb_errf(err, -EINVAL,
                            "%s:%d: not a task record (job task attempt epoch "
                            "pid start_ticks)",
                            path, lineno);
        }
        if (n == max)
            break;
        exec_fmt(r.job, sizeof r.job, "%s", job);
        r.attempt = attempt;
        r.epoch = epoch;
        r.pid = pid;
        r.start_ticks = ticks;
        r.grace_ns = grace_ms >= 0 ? grace_ms * 1000000 : -1;
        r.generation = gen;
        out[n++] = r;
    }
    fclose(f);
    return n;
}
