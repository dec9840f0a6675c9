/*
 * bench_e2e.c: `arbiter bench e2e`: trivial jobs end to end (issue 20).
 * It starts, as child processes of this binary (fork/exec of
 * /proc/self/exe), a controller on a free loopback port with its own
 * temporary data directory (SQLite, every acknowledged write fsync'd) and
 * --agents real agents (`arbiter agent`, --gpus fake GPUs each, tasks as
 * real processes under their supervisors, no cgroups). Once every node has
 * registered, --clients threads submit --jobs one-GPU jobs whose command is
 * `true`, as fast as the controller acknowledges them, and the benchmark
 * waits until every job has ended:
 *
 *   completed_per_s            jobs / (last job ended - first submission)
 *   controller_cpu_ms_per_job  the controller's utime + stime over that
 *                              window (/proc/PID/stat), per job
 *   controller_cpu_cores       the same over the window's wall time
 *   agents_cpu_cores           the agents' (and their finished children's:
 *                              supervisors and tasks) CPU over the window
 *   agent_cpu_ms_per_job,      the same per job, split: the agents
 *   supervisor_and_task_cpu_ms_per_job   themselves, and the processes
 *                              each task costs (`arbiter supervise` and `true`),
 *                              with the agents' children still running (each
 *                              agent's zygote, src/agent/zygote.h: its CPU is
 *                              not among the reaped children's)
 *   zygote_cpu_ms_per_job      that last part alone
 *   submit_s                   how long the submissions took
 *   failed                     jobs that did not succeed (should be 0)
 *   http_requests_per_job      the controller's HTTP requests over the
 *                              window per job (arbiter_http_requests_total;
 *                              null from a controller without it), and by
 *                              route: submit, report, assignments_poll,
 *                              other (the benchmark's own reads among them),
 *                              and reruns (long polls resumed, replies sent
 *                              after their commit: not new requests)
 *   reports, report_round_trip_ms, pushed_lists, task_start_ms
 *                              what the agents said when they stopped: their
 *                              reports and mean round trip, the lists the
 *                              channel brought, the mean time to start a task
 *   commits_per_job, store_batches_per_job
 *                              the controller's store transactions (group
 *                              commits) and the mutations handed to them
 *                              over the window, per job (GET /metrics)
 *   held_replies_per_job, held_submit_per_job, held_report_per_job
 *                              replies the controller held until their
 *                              commit (each a suspension and a resume of its
 *                              connection), per job: all of them, the
 *                              submissions', the agents' reports' (the
 *                              rest: the benchmark's own status polls, ...);
 *                              -1 where the controller has no such counter
 *
 * The agents' log directories (each task's log, LOG_DIR/JOB.TASK.out, and
 * the supervisors' files in LOG_DIR/.arbiter) are in a new directory,
 * logs.XXXXXX, in the temp dir, which the benchmark marks as the top of a
 * directory hierarchy (FS_TOPDIR_FL; where the file system honours it,
 * ext4, a directory made in it is placed in a block group of its own, as
 * a node's /var/log/arbiter is, not among the inodes /tmp's other users
 * free): on ext4 without a journal each new inode is checked against every
 * inode of its group freed in the last minute or more (recently_deleted in
 * fs/ext4/ialloc.c), so creating a file in /tmp's group cost about 0.5 ms
 * of CPU here while other tests and benchmarks (this one's last run among
 * them: it removes its tree at the end) deleted theirs, and about 20 us in
 * a group of its own. Each task still makes its log file, at whatever that
 * costs. The JSON says where the logs were (agent_logs), whether their
 * directory was spread so (agent_logs_spread), how many entries the agents
 * made there per job outside .arbiter (agent_log_entries_per_job: 1, a
 * task's log) and whether they were removed (agent_logs_removed: yes unless
 * the run failed). --agent-logs DIR puts that directory under DIR instead
 * (e.g. a tmpfs, to tell the cost of creating those files on the temp
 * dir's file system from the rest); DIR's own flags place it then.
 *
 * --push-wait off runs the agents without the assignments channel
 * (src/agent/channel.h): each new task then reaches its agent with the
 * reply to a later report. --arbiter BINARY runs another build's
 * controller and agents (an older one, to measure before and after on the
 * same machine; give no --push-wait to an agent that has no such flag). The load average
 * before and after is part of the line: figures from a busy machine are
 * what they are. The targets (>= 1,000 jobs/s with 10 agents, < 0.2 ms of
 * controller CPU per job) are reported as `targets_met`; they do not change
 * the exit status: 0 when the figures were measured, 1 when the cluster
 * could not be started or the jobs did not end in time (--timeout). It
 * stops everything it started (SIGTERM, bounded waits, SIGKILL last) and
 * removes its directory (kept, and named, when something failed).
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_proc.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/flags.h"
#include "util/mtime.h"

#define E2E_MAX_AGENTS 64

typedef struct e2e_conf {
    long agents, gpus, jobs, clients, timeout_s;
    const char *heartbeat, *push_wait; /* push_wait NULL: the agents' default */
    const char *arbiter;               /* the binary to run (NULL: this one) */
    const char *agent_logs;            /* where the agents' log dirs go (NULL: the temp dir) */
    bool json;
} e2e_conf_t;

typedef struct e2e_run {
    char dir[64], exe[PATH_MAX], url[256], logs[PATH_MAX]; /* logs: the agents' log dirs */
    pid_t controller, agent[E2E_MAX_AGENTS];
    int nagents;
} e2e_run_t;

typedef struct e2e_client {
    const char *url;
    long jobs, ok, failed;
} e2e_client_t;

static long long status_field(const char *key)
{
    json_t *o = NULL;
    long long v = -1;

    if (cli_http("GET", "/v1/status", NULL, 0, NULL, &o, NULL) == 200)
        v = json_is_integer(json_object_get(o, key)) ? json_integer_value(json_object_get(o, key))
                                                     : -1;
    json_decref(o);
    return v;
}

/* The controller's write-path counters (GET /metrics): store commits and
 * batches, and the replies held for their commit (suspended until their
 * ticket was durable), by route. -1 each when /metrics cannot be read. */
typedef struct e2e_counts {
    double commits, batches, held, held_submit, held_report;
} e2e_counts_t;

static double metric_at(const char *txt, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = txt; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, name, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return 0; /* a counter not shown yet (nothing held) */
}

static void counts_get(e2e_counts_t *c)
{
    char *raw = NULL;
    const char *held = "arbiter_replies_held_total{";

    *c = (e2e_counts_t){-1, -1, -1, -1, -1};
    if (cli_http("GET", "/metrics", NULL, 0, NULL, NULL, &raw) == 200 && raw) {
        c->commits = metric_at(raw, "arbiter_store_commits_total");
        c->batches = metric_at(raw, "arbiter_store_batches_total");
        c->held_submit = metric_at(raw, "arbiter_replies_held_total{route=\"POST /v1/jobs\"}");
        c->held_report =
            metric_at(raw, "arbiter_replies_held_total{route=\"POST /v1/nodes/{name}/report\"}");
        c->held = 0;
        if (!strstr(raw, "# TYPE arbiter_replies_held_total ")) /* an older controller */
            c->held = c->held_submit = c->held_report = -1;
        for (const char *p = strstr(raw, held); p; p = strstr(p + 1, held)) {
            const char *v = strstr(p, "} ");
            if (c->held >= 0 && v && (p == raw || p[-1] == '\n'))
                c->held += strtod(v + 2, NULL);
        }
    }
    free(raw);
}

/* The controller's HTTP requests so far (arbiter_http_requests_total in
 * /metrics), in total and by the routes the agents and clients use: an
 * agent's report, its assignments poll, a submission; -1 when its /metrics
 * has no such counter (an older controller). */
typedef struct e2e_reqs {
    double total, report, poll, submit, reruns;
} e2e_reqs_t;

static void http_requests(e2e_reqs_t *o)
{
    char *raw = NULL;

    memset(o, 0, sizeof *o);
    o->total = -1;
    if (cli_http("GET", "/metrics", NULL, 0, NULL, NULL, &raw) == 200 && raw) {
        for (char *line = raw, *nl; line && *line; line = nl ? nl + 1 : NULL) {
            char route[128];
            double v;
            nl = strchr(line, '\n');
            if (sscanf(line, "arbiter_http_request_reruns_total %lf", &v) == 1)
                o->reruns = v;
            if (sscanf(line, "arbiter_http_requests_total{route=\"%127[^\"]\"} %lf", route, &v) !=
                2)
                continue;
            o->total = (o->total < 0 ? 0 : o->total) + v;
            if (!strcmp(route, "POST /v1/nodes/{name}/report"))
                o->report += v;
            else if (!strcmp(route, "GET /v1/nodes/{name}/assignments"))
                o->poll += v;
            else if (!strcmp(route, "POST /v1/jobs"))
                o->submit += v;
        }
    }
    free(raw);
}

/* (after - before) / jobs, or -1 when either was not read */
static double per_job(double before, double after, long jobs)
{
    return before < 0 || after < 0 || jobs <= 0 ? -1 : (after - before) / (double)jobs;
}

static size_t sink(char *p, size_t s, size_t n, void *arg)
{
    (void)p, (void)arg;
    return s * n;
}

static void *run_client(void *arg)
{
    e2e_client_t *c = arg;
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    char url[512];
    const char *body =
        "{\"name\": \"e2e\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}, "
        "\"command\": [\"true\"]}";

    if (!h) {
        c->failed = c->jobs;
        return NULL;
    }
    snprintf(url, sizeof url, "%s/v1/jobs", c->url);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    hd = curl_slist_append(hd, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    for (long i = 0; i < c->jobs; i++) {
        long st = 0;
        if (curl_easy_perform(h) == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        if (st == 201)
            c->ok++;
        else
            c->failed++;
    }
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return NULL;
}

/* The flags, parsed into e2e_opts_t and copied into the run's conf. */
typedef struct e2e_opts {
    long long agents, gpus, jobs, clients, timeout_s;
    const char *heartbeat, *push_wait, *arbiter, *agent_logs;
    int json;
} e2e_opts_t;

static const fl_flag_t e2e_flags[] = {
    FL_OPT(e2e_opts_t, agents, "--agents", NULL, FL_INT, "N", "real agents on loopback",
           .def = "10"),
    FL_OPT(e2e_opts_t, gpus, "--gpus", NULL, FL_INT, "G", "fake GPUs per agent (1..16)",
           .def = "8"),
    FL_OPT(e2e_opts_t, jobs, "--jobs", NULL, FL_INT, "M", "one-GPU jobs submitted", .def = "5000"),
    FL_OPT(e2e_opts_t, clients, "--clients", NULL, FL_INT, "C", "concurrent submitters",
           .def = "8"),
    FL_OPT(e2e_opts_t, heartbeat, "--heartbeat", NULL, FL_STR, "D", "the agents' heartbeat",
           .def = "1s"),
    FL_OPT(e2e_opts_t, push_wait, "--push-wait", NULL, FL_STR, "D|off",
           "the agents' assignments long poll (default: theirs)"),
    FL_OPT(e2e_opts_t, timeout_s, "--timeout", NULL, FL_INT, "S",
           "seconds to wait for every job to run (1..86400)", .def = "600"),
    FL_OPT(e2e_opts_t, arbiter, "--arbiter", NULL, FL_STR, "BINARY",
           "the binary to run (default: this one)"),
    FL_OPT(e2e_opts_t, agent_logs, "--agent-logs", NULL, FL_STR, "DIR",
           "put the agents' log directories under DIR (e.g. a tmpfs)"),
    FL_OPT(e2e_opts_t, json, NULL, "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t e2e_verb = {
    .name = "bench e2e",
    .summary = "a controller and real agents on loopback: submission to running, end to end",
    .flags = e2e_flags};

/* 0: go on; -1: the usage was asked for (exit 0); 2: a bad flag. */
/* utime + stime of parent's children that are still running (their own,
 * not their children's), in clock ticks: an agent's zygote, whose CPU is not
 * in the agent's reaped children's until it ends. */
static long long live_children_ticks(pid_t parent)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    long long sum = 0;

    if (!d)
        return 0;
    /* cppcheck-suppress readdirCalled ; one thread reads this directory stream */
    while ((e = readdir(d))) {
        char p[64], buf[2048], *s;
        unsigned long long ut, st;
        int ppid;
        size_t k;
        FILE *f;
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(p, sizeof p, "/proc/%.20s/stat", e->d_name);
        if (!(f = fopen(p, "re")))
            continue;
        k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[k] = '\0';
        if (!(s = strrchr(buf, ')')) ||
            sscanf(s + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ppid, &ut,
                   &st) != 3 ||
            ppid != (int)parent)
            continue;
        sum += (long long)(ut + st);
    }
    closedir(d);
    return sum;
}

static int parse(int argc, char **argv, e2e_conf_t *c)
{
    e2e_opts_t o = {0};
    fl_args_t a;
    int rc;

    if (!fl_run(&e2e_verb, argc, argv, &o, &a, &rc))
        return rc == 0 ? -1 : rc;
    *c = (e2e_conf_t){.agents = (long)o.agents,
                      .gpus = (long)o.gpus,
                      .jobs = (long)o.jobs,
                      .clients = (long)o.clients,
                      .timeout_s = (long)o.timeout_s,
                      .heartbeat = o.heartbeat,
                      .push_wait = o.push_wait,
                      .arbiter = o.arbiter,
                      .agent_logs = o.agent_logs,
                      .json = o.json == 1};
    if (c->agents < 1 || c->agents > E2E_MAX_AGENTS) {
        fprintf(stderr, "arbiter bench e2e: --agents %ld: use 1..%d\n", c->agents, E2E_MAX_AGENTS);
        return 2;
    }
    if (c->gpus < 1 || c->gpus > 16) {
        fprintf(stderr, "arbiter bench e2e: --gpus %ld: use 1..16 (fake GPUs per agent)\n",
                c->gpus);
        return 2;
    }
    if (c->jobs < 1 || c->jobs > 1000000 || c->clients < 1 || c->clients > 256) {
        fprintf(stderr, "arbiter bench e2e: --jobs 1..1000000 and --clients 1..256\n");
        return 2;
    }
    if (c->timeout_s < 1 || c->timeout_s > 86400) {
        fprintf(stderr, "arbiter bench e2e: --timeout %ld: use 1..86400 seconds\n", c->timeout_s);
        return 2;
    }
    return 0;
}

static int start(e2e_run_t *r, const e2e_conf_t *c)
{
    char datadir[128], path[PATH_MAX + 64], gpus[32];

    snprintf(datadir, sizeof datadir, "%s/d", r->dir);
    char *cargv[] = {"arbiter",    "controller", "--listen", "127.0.0.1:0",
                     "--data-dir", datadir,      NULL};
    if ((r->controller =
             bench_spawn(r->exe, cargv, r->dir, "controller.out", "controller.log", false)) < 0)
        return -1;
    snprintf(path, sizeof path, "%s/d/url", r->dir);
    if (bench_wait_url(r->controller, path, r->url, sizeof r->url, 20000) < 0) {
        fprintf(stderr, "arbiter bench e2e: the controller did not start; see %s/controller.log\n",
                r->dir);
        return -1;
    }
    setenv("ARBITER_URL", r->url, 1);
    unsetenv("ARBITER_TOKEN"); /* its own controller has no tokens: loopback, no auth */
    snprintf(gpus, sizeof gpus, "%ld:H100", c->gpus);
    fprintf(stderr, "bench e2e: %ld agents x %ld GPUs against %s (push-wait %s)\n", c->agents,
            c->gpus, r->url, c->push_wait ? c->push_wait : "default");
    for (long k = 0; k < c->agents; k++) {
        char name[32], logs[PATH_MAX + 48], out[48], err[48];
        snprintf(name, sizeof name, "e2e-%ld", k + 1);
        snprintf(logs, sizeof logs, "%s/%s", r->logs, name);
        snprintf(out, sizeof out, "%s.out", name);
        snprintf(err, sizeof err, "%s.log", name);
        char *aargv[24] = {"arbiter",       "agent",
                           "--name",        name,
                           "--controller",  r->url,
                           "--fake-gpus",   gpus,
                           "--log-dir",     logs,
                           "--cgroups",     "none",
                           "--heartbeat",   (char *)c->heartbeat,
                           "--logs-listen", "off"};
        int na = 16;
        if (geteuid() == 0)
            aargv[na++] = "--allow-root";
        if (c->push_wait) { /* else the agent's default (an older agent has no such flag) */
            aargv[na++] = "--push-wait";
            aargv[na++] = (char *)c->push_wait;
        }
        aargv[na] = NULL;
        if ((r->agent[k] = bench_spawn(r->exe, aargv, r->dir, out, err, false)) < 0)
            return -1;
        r->nagents++;
    }
    int64_t deadline = arb_mono_ns() + 60000000000LL;
    long long n = 0;
    while ((n = status_field("nodes")) < c->agents) {
        if (arb_mono_ns() > deadline || !bench_alive(r->controller)) {
            fprintf(stderr, "arbiter bench e2e: %lld of %ld agents registered; see %s\n", n,
                    c->agents, r->dir);
            return -1;
        }
        bench_sleep_ms(100);
    }
    return 0;
}

static long long count_jobs(const char *state)
{
    char path[128];
    json_t *o = NULL;
    long long n = -1;

    snprintf(path, sizeof path, "/v1/jobs?state=%s&limit=1000000", state);
    if (cli_http("GET", path, NULL, 0, NULL, &o, NULL) == 200) {
        json_t *arr = json_is_array(o) ? o : json_object_get(o, "jobs");
        n = (long long)json_array_size(arr);
    }
    json_decref(o);
    return n;
}

/* What each agent said at its stop (agent_close): reports and their mean
 * round trip, lists pushed, tasks started and the mean time a start took;
 * summed over the agents (means weighted by count). */
typedef struct e2e_said {
    double reports, report_ms, pushes, starts, start_ms;
    double pushes_same; /* lists pushed that were the one applied already (-1: not said) */
} e2e_said_t;

static void agents_said(const e2e_run_t *r, e2e_said_t *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < r->nagents; i++) {
        char path[PATH_MAX + 64], line[1024];
        snprintf(path, sizeof path, "%s/e2e-%d.log", r->dir, i + 1);
        FILE *f = fopen(path, "re");
        double rep = 0, rms = 0, pu = 0, st = 0, sms = 0, same = -1;
        bool got = false;
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, ": ");
            int k = p ? sscanf(p + 2,
                               "%lf reports (%lf ms each), %lf lists pushed through the "
                               "channel, %lf tasks started (%lf ms each); %lf of the lists",
                               &rep, &rms, &pu, &st, &sms, &same)
                      : 0;
            if (k >= 5)
                got = true;
            if (k == 5)
                same = -1; /* an older agent */
        }
        if (f)
            fclose(f);
        if (!got)
            continue;
        o->report_ms += rep * rms;
        o->start_ms += st * sms;
        o->reports += rep;
        o->pushes += pu;
        o->starts += st;
        o->pushes_same = same < 0 || o->pushes_same < 0 ? -1 : o->pushes_same + same;
    }
    if (o->reports)
        o->report_ms /= o->reports;
    if (o->starts)
        o->start_ms /= o->starts;
}

/* Mark dir the top of a directory hierarchy (FS_TOPDIR_FL: ext4 spreads
 * the directories made in it over block groups of their own); true when it
 * is marked, whether by this call or before. */
static bool topdir(const char *dir, bool set)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), flags = 0;
    bool on = false;

    if (fd < 0)
        return false;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
        if (set && !(flags & FS_TOPDIR_FL)) {
            flags |= FS_TOPDIR_FL;
            if (ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0)
                flags = 0;
        }
        on = (flags & FS_TOPDIR_FL) != 0;
    }
    close(fd);
    return on;
}

/* Entries under dir, its subdirectories' included, but for .arbiter (the
 * supervisors' files, which a task's start recycles: exec.c). */
static long count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    long n = 0;

    if (!d)
        return 0;
    /* cppcheck-suppress readdirCalled ; one thread reads this directory stream */
    while ((e = readdir(d))) {
        char sub[PATH_MAX];
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".arbiter"))
            continue;
        n++;
        if (e->d_type == DT_DIR &&
            snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) < (int)sizeof sub)
            n += count_entries(sub);
    }
    closedir(d);
    return n;
}

/* What the agents made in their log directories (r->logs/e2e-N), per job. */
static double log_entries_per_job(const e2e_run_t *r, long jobs)
{
    long n = 0;

    for (int i = 0; i < r->nagents; i++) {
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof dir, "%s/e2e-%d", r->logs, i + 1);
        n += count_entries(dir);
    }
    return jobs > 0 ? (double)n / (double)jobs : 0;
}

int cli_bench_e2e(int argc, char **argv)
{
    e2e_conf_t c;
    e2e_run_t r;
    int rc = 1;
    bool keep = true;
    char *logs_json = NULL;
    bool spread = false;

    if ((rc = parse(argc, argv, &c)) != 0)
        return rc < 0 ? 0 : rc;
    rc = 1;
    memset(&r, 0, sizeof r);
    if (bench_tmpdir("e2e", r.dir, sizeof r.dir) < 0)
        return 1;
    if (bench_self_exe("e2e", r.exe, sizeof r.exe) < 0)
        goto out;
    if (c.arbiter && snprintf(r.exe, sizeof r.exe, "%s", c.arbiter) >= (int)sizeof r.exe)
        goto out;
    /* The agents' log directories (each task's log, the supervisors'
     * files): a directory of its own in the temp dir, spread (topdir), or
     * under --agent-logs (another file system: tmpfs takes the files' cost
     * out) */
    errno = 0;
    spread = topdir(c.agent_logs ? c.agent_logs : r.dir, !c.agent_logs);
    if (snprintf(r.logs, sizeof r.logs, "%s/%s", c.agent_logs ? c.agent_logs : r.dir,
                 c.agent_logs ? "arb_bench_e2e_logs.XXXXXX" : "logs.XXXXXX") >=
            (int)sizeof r.logs ||
        !mkdtemp(r.logs)) {
        fprintf(stderr, "arbiter bench e2e: %s%s: cannot make a directory there: %s\n",
                c.agent_logs ? "--agent-logs " : "", c.agent_logs ? c.agent_logs : r.dir,
                strerror(errno ? errno : ENAMETOOLONG));
        r.logs[0] = '\0';
        keep = false; /* nothing ran */
        goto out;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (start(&r, &c) < 0)
        goto out;
    bench_sleep_ms(1500); /* the registrations' cycles and first heartbeats settle */
    double l0 = bench_load1();
    e2e_counts_t k0, k1;
    counts_get(&k0);
    e2e_reqs_t q0, q1;
    http_requests(&q0);
    long long c0 = bench_cpu_ticks(r.controller, false), a0 = 0, s0 = 0, z0 = 0;
    for (int i = 0; i < r.nagents; i++) {
        a0 += bench_cpu_ticks(r.agent[i], true);
        s0 += bench_cpu_ticks(r.agent[i], false);
        z0 += live_children_ticks(r.agent[i]);
    }
    fprintf(stderr, "bench e2e: %ld jobs (`true`, 1 GPU each) from %ld clients...\n", c.jobs,
            c.clients);
    e2e_client_t cl[256];
    pthread_t th[256];
    int64_t t0 = arb_mono_ns();
    for (long i = 0; i < c.clients; i++) {
        cl[i] = (e2e_client_t){.url = r.url, .jobs = c.jobs / c.clients + (i < c.jobs % c.clients)};
        pthread_create(&th[i], NULL, run_client, &cl[i]);
    }
    long ok = 0, bad = 0;
    for (long i = 0; i < c.clients; i++) {
        pthread_join(th[i], NULL);
        ok += cl[i].ok;
        bad += cl[i].failed;
    }
    int64_t ts = arb_mono_ns();
    /* until every job has ended: none active, all counted */
    int64_t deadline = t0 + c.timeout_s * 1000000000LL, t1;
    for (;;) {
        long long act = status_field("active_jobs"), all = status_field("jobs");
        t1 = arb_mono_ns();
        if (act == 0 && all >= ok)
            break;
        if (t1 > deadline || !bench_alive(r.controller)) {
            fprintf(stderr,
                    "arbiter bench e2e: %lld of %ld jobs still active after %ld s; see %s\n", act,
                    ok, c.timeout_s, r.dir);
            goto out;
        }
        bench_sleep_ms(20);
    }
    long long c1 = bench_cpu_ticks(r.controller, false), a1 = 0, s1 = 0, z1 = 0;
    counts_get(&k1);
    for (int i = 0; i < r.nagents; i++) {
        a1 += bench_cpu_ticks(r.agent[i], true);
        s1 += bench_cpu_ticks(r.agent[i], false);
        z1 += live_children_ticks(r.agent[i]);
    }
    http_requests(&q1);
    double l1 = bench_load1();
    double secs = (double)(t1 - t0) / 1e9, hz = (double)sysconf(_SC_CLK_TCK);
    double cpu_s = (double)(c1 - c0) / hz, acpu_s = (double)(a1 - a0) / hz;
    double self_s = (double)(s1 - s0) / hz; /* the agents themselves, not their children */
    /* the children still running (the zygotes); those running at the start
     * and reaped since are counted twice, a tick or so: none run then */
    double zyg_s = (double)(z1 - z0) / hz;
    acpu_s += zyg_s;
    long long failed = count_jobs("failed");
    double per_s = (double)ok / secs, ms_per_job = ok ? cpu_s * 1000.0 / (double)ok : 0;
    bool met = c.agents >= 10 && per_s >= 1000 && ms_per_job < 0.2;
    for (int i = 0; i < r.nagents; i++) /* their last words: where the time went */
        kill(r.agent[i], SIGTERM);
    for (int i = 0; i < r.nagents; i++) {
        bench_stop(r.agent[i], 10000);
        r.agent[i] = 0;
    }
    e2e_said_t said;
    agents_said(&r, &said);
    double entries = log_entries_per_job(&r, ok);
    keep = bad > 0 || failed != 0; /* the logs too, to look at */
    json_t *lj = json_string(r.logs);
    logs_json = lj ? json_dumps(lj, JSON_ENCODE_ANY) : NULL;
    json_decref(lj);
    /* the requests of the window, the benchmark's own reads of /v1/status
     * (one every 20 ms once submitted) and /metrics among them */
    char reqs[32] = "null", by_route[256] = "null";
    if (q0.total >= 0 && q1.total >= 0 && ok > 0) {
        double k = (double)ok;
        snprintf(reqs, sizeof reqs, "%.3f", (q1.total - q0.total) / k);
        snprintf(by_route, sizeof by_route,
                 "{\"submit\": %.3f, \"report\": %.3f, \"assignments_poll\": %.3f, "
                 "\"other\": %.3f, \"reruns\": %.3f}",
                 (q1.submit - q0.submit) / k, (q1.report - q0.report) / k, (q1.poll - q0.poll) / k,
                 (q1.total - q0.total - (q1.submit - q0.submit) - (q1.report - q0.report) -
                  (q1.poll - q0.poll)) /
                     k,
                 (q1.reruns - q0.reruns) / k);
    }
    if (c.json)
        printf("{\"bench\": \"e2e\", \"agents\": %ld, \"gpus_per_agent\": %ld, \"jobs\": %ld, "
               "\"clients\": %ld, \"push\": %s, \"binary\": \"%s\", \"heartbeat\": \"%s\", "
               "\"submitted\": %ld, "
               "\"submit_failed\": %ld, \"failed\": %lld, \"seconds\": %.3f, \"submit_s\": %.3f, "
               "\"completed_per_s\": %.1f, \"controller_cpu_ms_per_job\": %.4f, "
               "\"controller_cpu_cores\": %.3f, \"agents_cpu_cores\": %.3f, "
               "\"agent_cpu_ms_per_job\": %.3f, \"supervisor_and_task_cpu_ms_per_job\": %.3f, "
               "\"zygote_cpu_ms_per_job\": %.3f, "
               "\"reports\": %.0f, \"report_round_trip_ms\": %.2f, \"pushed_lists\": %.0f, "
               "\"pushed_lists_already_applied\": %.0f, "
               "\"task_start_ms\": %.2f, \"agent_logs\": %s, \"agent_logs_spread\": %s, "
               "\"agent_log_entries_per_job\": %.2f, \"agent_logs_removed\": %s, "
               "\"commits_per_job\": %.3f, \"store_batches_per_job\": %.3f, "
               "\"held_replies_per_job\": %.3f, \"held_submit_per_job\": %.3f, "
               "\"held_report_per_job\": %.3f, "
               "\"http_requests_per_job\": %s, \"http_requests_by_route_per_job\": %s, "
               "\"load_before\": %.2f, \"load_after\": %.2f, \"targets_met\": %s}\n",
               c.agents, c.gpus, c.jobs, c.clients,
               c.push_wait && !strcmp(c.push_wait, "off") ? "false" : "true",
               c.arbiter ? c.arbiter : "this", c.heartbeat, ok, bad, failed, secs,
               (double)(ts - t0) / 1e9, per_s, ms_per_job, cpu_s / secs, acpu_s / secs,
               ok ? self_s * 1000 / (double)ok : 0, ok ? (acpu_s - self_s) * 1000 / (double)ok : 0,
               ok ? zyg_s * 1000 / (double)ok : 0, said.reports, said.report_ms, said.pushes,
               said.pushes_same, said.start_ms, logs_json ? logs_json : "null",
               spread ? "true" : "false", entries, keep ? "false" : "true",
               per_job(k0.commits, k1.commits, ok), per_job(k0.batches, k1.batches, ok),
               per_job(k0.held, k1.held, ok), per_job(k0.held_submit, k1.held_submit, ok),
               per_job(k0.held_report, k1.held_report, ok), reqs, by_route, l0, l1,
               met ? "true" : "false");
    else
        printf("e2e: %ld agents x %ld GPUs, %ld jobs of `true` (%ld clients, push %s):\n"
               "  %.1f jobs/s end to end (%.2f s; submissions took %.2f s), %lld failed\n"
               "  controller CPU %.4f ms per job (%.2f cores), agents %.2f cores\n"
               "  per job: %.3f commits, %.3f replies held for a commit (%.3f submits, %.3f "
               "reports)\n"
               "  HTTP requests per job %s: %s\n"
               "  load average %.2f -> %.2f; targets (>= 1000/s, < 0.2 ms/job) %s\n",
               c.agents, c.gpus, ok, c.clients, c.push_wait ? c.push_wait : "default", per_s, secs,
               (double)(ts - t0) / 1e9, failed, ms_per_job, cpu_s / secs, acpu_s / secs,
               per_job(k0.commits, k1.commits, ok), per_job(k0.held, k1.held, ok),
               per_job(k0.held_submit, k1.held_submit, ok),
               per_job(k0.held_report, k1.held_report, ok), reqs, by_route, l0, l1,
               met ? "met" : "not met");
    rc = 0;
out:
    for (int i = 0; i < r.nagents; i++)
        if (r.agent[i] > 0)
            kill(r.agent[i], SIGTERM);
    for (int i = 0; i < r.nagents; i++)
        bench_stop(r.agent[i], 10000);
    bench_stop(r.controller, 10000);
    curl_global_cleanup();
    free(logs_json);
    if (keep) {
        bool other = c.agent_logs && r.logs[0]; /* the agents' logs outside r.dir */
        fprintf(stderr, "arbiter bench e2e: kept %s%s%s\n", r.dir, other ? " and " : "",
                other ? r.logs : "");
    } else {
        bench_rmtree(r.dir);
        if (c.agent_logs && r.logs[0])
            bench_rmtree(r.logs);
    }
    return rc;
}
