/*
 * bench_agents.c: `arbiter bench agents`: what thousands of nodes cost the
 * controller. It starts, as child processes of this binary (fork/exec of
 * /proc/self/exe), a controller on a free loopback port with its own
 * temporary data directory, and one `arbiter agent --emulate N` process
 * playing N nodes (8 fake GPUs each, one report per heartbeat each). Once
 * every node has registered (register_s: how long that took from the
 * emulator's start) and a few seconds have settled, it measures a window
 * of --seconds:
 *
 *   controller_cpu_cores   the controller's utime + stime (/proc/PID/stat)
 *                          over the window's wall time; 1.0 = one core
 *   report_server_ms       what the API saw: mean time per report (the
 *                          arbiter_node_report_seconds metric, body parsing
 *                          to durable reply) and the histogram bucket that
 *                          holds the 99th percentile
 *   report_round_trip_ms   what the agents saw: p50, p90, p99, max of their
 *                          reports' round trips in the window (the
 *                          emulator's totals, restarted by SIGUSR1 at the
 *                          window's start)
 *   submit_to_running_ms   --jobs one-GPU jobs (`sleep 2`) submitted evenly
 *                          over the window: p50, p99, max from submission to
 *                          all tasks running, by the controller's own
 *                          job-submitted and job-running event times (one
 *                          clock, so the difference means something)
 *
 * then stops everything it started (SIGTERM, bounded waits, SIGKILL last)
 * and removes its directory (kept, and named, when something failed or a
 * child did not exit 0 on SIGTERM). A table for people, one JSON object with
 * -o json. Progress goes to stderr. The targets of issue 5 (controller under
 * one core at 5,000 nodes, heartbeat round trip and submission to running
 * under 2 s at p99) are reported as `targets_met`; they do not change the
 * exit status, which is 0 when the figures were measured and 1 when the
 * cluster could not be started or did not register in time.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define NBUCKETS 32

typedef struct ba_conf {
    long nodes, seconds, jobs;
    const char *heartbeat; /* passed to the emulator */
    bool json;
} ba_conf_t;

/* What /metrics says about reports at one moment. */
typedef struct ba_metrics {
    double sum, count;
    int nb;
    double le[NBUCKETS]; /* upper bounds, s; +Inf as -1 */
    double n[NBUCKETS];  /* cumulative counts */
} ba_metrics_t;

typedef struct ba_run {
    char dir[64], exe[PATH_MAX], url[256], path[PATH_MAX + 64];
    pid_t controller, emulator;
    double register_s; /* from the emulator's start until every node had registered */
} ba_run_t;

static const char *at(ba_run_t *r, const char *name)
{
    snprintf(r->path, sizeof r->path, "%s/%s", r->dir, name);
    return r->path;
}

static int get_metrics(ba_metrics_t *m)
{
    char *raw = NULL, *line, *save = NULL;
    long st = cli_http("GET", "/metrics", NULL, 0, NULL, NULL, &raw);

    memset(m, 0, sizeof *m);
    if (st != 200 || !raw) {
        free(raw);
        return -1;
    }
    for (line = strtok_r(raw, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *b = "arbiter_node_report_seconds_bucket{le=\"";
        if (!strncmp(line, "arbiter_node_report_seconds_sum ", 32))
            m->sum = strtod(line + 32, NULL);
        else if (!strncmp(line, "arbiter_node_report_seconds_count ", 34))
            m->count = strtod(line + 34, NULL);
        else if (!strncmp(line, b, strlen(b)) && m->nb < NBUCKETS) {
            char *v = line + strlen(b), *sp = strchr(v, ' ');
            m->le[m->nb] = !strncmp(v, "+Inf", 4) ? -1 : strtod(v, NULL);
            m->n[m->nb] = sp ? strtod(sp + 1, NULL) : 0;
            m->nb++;
        }
    }
    free(raw);
    return 0;
}

/* The status object's integer field, or -1. */
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

/* "2026-11-30T08:07:59.123Z" -> ms since the epoch (UTC); -1 if malformed. */
static long long event_ms(const char *s)
{
    struct tm tm;
    int ms = 0;

    memset(&tm, 0, sizeof tm);
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                     &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (long long)timegm(&tm) * 1000 + ms;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * Submission to running, ms, for the jobs in ids[0..n): from the event log
 * after Lamport time since. Fills lat (sorted), returns how many ran.
 */
static int submit_to_running(long long since, const long long *ids, int n, double *lat)
{
    long long *sub = calloc((size_t)n, sizeof *sub);
    int got = 0;

    if (!sub)
        return 0;
    for (int page = 0; page < 100; page++) {
        char path[128];
        json_t *o = NULL, *evs, *e;
        size_t i;
        snprintf(path, sizeof path, "/v1/events?since=%lld&limit=10000", since);
        if (cli_http("GET", path, NULL, 0, NULL, &o, NULL) != 200) {
            json_decref(o);
            break;
        }
        evs = json_object_get(o, "events");
        json_array_foreach(evs, i, e)
        {
            const char *type = json_string_value(json_object_get(e, "type"));
            long long job = json_integer_value(json_object_get(e, "job"));
            long long t = event_ms(json_string_value(json_object_get(e, "time")));
            int k;
            for (k = 0; k < n && ids[k] != job; k++)
                ;
            if (k == n || t < 0 || !type)
                continue;
            if (!strcmp(type, "job-submitted"))
                sub[k] = t;
            else if (!strcmp(type, "job-running") && sub[k] > 0 && lat[k] < 0)
                lat[k] = (double)(t - sub[k]);
        }
        long long last = json_integer_value(json_object_get(o, "last"));
        size_t cnt = json_array_size(evs);
        json_decref(o);
        if (cnt == 0 || last <= since)
            break;
        since = last;
    }
    for (int k = 0; k < n; k++)
        if (lat[k] >= 0)
            lat[got++] = lat[k];
    qsort(lat, (size_t)got, sizeof *lat, cmp_d);
    free(sub);
    return got;
}

/* The flags, parsed into ba_opts_t and copied into the run's conf. */
typedef struct ba_opts {
    long long nodes, seconds, jobs;
    const char *heartbeat;
    int json;
} ba_opts_t;

static const fl_flag_t ba_flags[] = {
    FL_OPT(ba_opts_t, nodes, "--nodes", NULL, FL_INT, "N", "emulated agents (1..100000)",
           .def = "1000"),
    FL_OPT(ba_opts_t, seconds, "--seconds", NULL, FL_INT, "S", "the measured window (1..3600)",
           .def = "30"),
    FL_OPT(ba_opts_t, jobs, "--jobs", NULL, FL_INT, "J",
           "one-GPU jobs submitted over the window (0..10000)", .def = "100"),
    FL_OPT(ba_opts_t, heartbeat, "--heartbeat", NULL, FL_STR, "D", "the emulated agents' heartbeat",
           .def = "1s"),
    FL_OPT(ba_opts_t, json, NULL, "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t ba_verb = {
    .name = "bench agents",
    .summary = "a controller with emulated agents: its CPU, the heartbeat round trip, "
               "submission to running",
    .flags = ba_flags};

/* 0: go on; -1: the usage was asked for (exit 0); 2: a bad flag. */
static int parse(int argc, char **argv, ba_conf_t *c)
{
    ba_opts_t o = {0};
    fl_args_t a;
    int rc;

    if (!fl_run(&ba_verb, argc, argv, &o, &a, &rc))
        return rc == 0 ? -1 : rc;
    *c = (ba_conf_t){.nodes = (long)o.nodes,
                     .seconds = (long)o.seconds,
                     .jobs = (long)o.jobs,
                     .heartbeat = o.heartbeat,
                     .json = o.json == 1};
    if (c->nodes < 1 || c->nodes > 100000) {
        fprintf(stderr, "arbiter bench agents: --nodes %ld: use 1..100000\n", c->nodes);
        return 2;
    }
    if (c->seconds < 1 || c->seconds > 3600) {
        fprintf(stderr, "arbiter bench agents: --seconds %ld: use 1..3600\n", c->seconds);
        return 2;
    }
    if (c->jobs < 0 || c->jobs > 10000) {
        fprintf(stderr, "arbiter bench agents: --jobs %ld: use 0..10000\n", c->jobs);
        return 2;
    }
    return 0;
}

/* Start the controller and the emulator; wait until every node registered. */
static int start(ba_run_t *r, const ba_conf_t *c)
{
    char nodes[32], dur[32], datadir[128], logs[128];

    snprintf(datadir, sizeof datadir, "%s/d", r->dir);
    snprintf(logs, sizeof logs, "%s/logs", r->dir);
    char *cargv[] = {"arbiter",    "controller", "--listen", "127.0.0.1:0",
                     "--data-dir", datadir,      NULL};
    r->controller = bench_spawn(r->exe, cargv, r->dir, "controller.out", "controller.log", false);
    if (r->controller < 0) {
        fprintf(stderr, "arbiter bench agents: fork: %s\n", strerror(errno));
        return -1;
    }
    if (bench_wait_url(r->controller, at(r, "d/url"), r->url, sizeof r->url, 20000) < 0) {
        fprintf(stderr, "arbiter bench agents: the controller did not start; see %s\n",
                at(r, "controller.log"));
        return -1;
    }
    setenv("ARBITER_URL", r->url, 1);
    unsetenv("ARBITER_TOKEN"); /* its own controller has no tokens: loopback, no auth */
    snprintf(nodes, sizeof nodes, "%ld", c->nodes);
    /* the emulator outlives the window by far; it is stopped by SIGTERM */
    snprintf(dur, sizeof dur, "%lds", c->seconds + 600);
    char *eargv[] = {"arbiter",      "agent",  "--name",      "emu",
                     "--controller", r->url,   "--emulate",   nodes,
                     "--fake-gpus",  "8:H100", "--heartbeat", (char *)c->heartbeat,
                     "--duration",   dur,      "--log-dir",   logs,
                     "--allow-root", "-o",     "json",        NULL};
    fprintf(stderr, "bench agents: %ld emulated nodes against %s\n", c->nodes, r->url);
    int64_t t0 = arb_mono_ns();
    r->emulator = bench_spawn(r->exe, eargv, r->dir, "emu.json", "emu.log", false);
    if (r->emulator < 0)
        return -1;
    /* registration: a few seconds per thousand nodes on a busy machine */
    int64_t deadline = arb_mono_ns() + (60 + c->nodes / 50) * 1000000000LL;
    long long n = 0;
    while ((n = status_field("nodes")) < c->nodes) {
        if (arb_mono_ns() > deadline || !bench_alive(r->emulator) || !bench_alive(r->controller)) {
            fprintf(stderr,
                    "arbiter bench agents: %lld of %ld nodes registered; see %s and "
                    "controller.log there\n",
                    n, c->nodes, at(r, "emu.log"));
            return -1;
        }
        bench_sleep_ms(200);
    }
    r->register_s = (double)(arb_mono_ns() - t0) / 1e9;
    return 0;
}

/* The bucket bound (ms) holding the 99th percentile of reports between a and b; -1: +Inf. */
static double p99_bucket(const ba_metrics_t *a, const ba_metrics_t *b)
{
    double n = b->count - a->count;
    for (int i = 0; i < b->nb && i < a->nb; i++)
        if (b->n[i] - a->n[i] >= 0.99 * n)
            return b->le[i] < 0 ? -1 : b->le[i] * 1000;
    return -1;
}

static double pct(const double *v, int n, double p)
{
    return n ? v[(int)((n - 1) * p)] : -1;
}

int cli_bench_agents(int argc, char **argv)
{
    ba_conf_t c;
    ba_run_t r;
    ba_metrics_t m0, m1;
    int rc = parse(argc, argv, &c), ran = 0;
    long long *ids = NULL, c0, c1, l0;
    double *lat = NULL;
    json_t *emu = NULL, *rt;

    if (rc)
        return rc < 0 ? 0 : rc;
    memset(&r, 0, sizeof r);
    if (bench_self_exe("agents", r.exe, sizeof r.exe) < 0 ||
        bench_tmpdir("agents", r.dir, sizeof r.dir) < 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    ids = calloc((size_t)c.jobs + 1, sizeof *ids);
    lat = calloc((size_t)c.jobs + 1, sizeof *lat);
    if (!ids || !lat || start(&r, &c) < 0) {
        rc = 1;
        goto out;
    }
    fprintf(stderr, "bench agents: all %ld nodes registered; measuring %ld s\n", c.nodes,
            c.seconds);
    bench_sleep_ms(3000); /* the first reports' registrations settle out of the window */

    l0 = status_field("lamport");
    kill(r.emulator, SIGUSR1); /* its round-trip totals start now */
    if (get_metrics(&m0) < 0 || (c0 = bench_cpu_ticks(r.controller, false)) < 0 || l0 < 0) {
        fprintf(stderr, "arbiter bench agents: cannot read the controller's metrics\n");
        rc = 1;
        goto out;
    }
    int64_t w0 = arb_mono_ns(), wend = w0 + c.seconds * 1000000000LL;
    const char *body = "{\"name\": \"probe\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": "
                       "1, \"cpu\": \"1\", \"memory\": \"1Gi\"}}, \"command\": [\"sleep\", \"2\"]}";
    for (long i = 0; i < c.jobs; i++) {
        json_t *o = NULL;
        /* evenly over the first 80% of the window, so the last ones run inside it */
        int64_t due = w0 + (int64_t)((double)c.seconds * 0.8e9 * (double)i / (double)c.jobs);
        bench_sleep_ms((long)((due - arb_mono_ns()) / 1000000));
        if (cli_http("POST", "/v1/jobs", body, strlen(body), "application/json", &o, NULL) == 201)
            ids[i] = json_integer_value(json_object_get(o, "id"));
        json_decref(o);
    }
    bench_sleep_ms((long)((wend - arb_mono_ns()) / 1000000));
    c1 = bench_cpu_ticks(r.controller, false);
    int64_t w1 = arb_mono_ns();
    if (get_metrics(&m1) < 0 || c1 < 0) {
        fprintf(stderr, "arbiter bench agents: cannot read the controller's metrics\n");
        rc = 1;
        goto out;
    }
    /* The window is measured; give the last jobs (bounded) time to start. */
    long submitted = 0;
    for (long i = 0; i < c.jobs; i++)
        submitted += ids[i] > 0;
    for (int64_t end = arb_mono_ns() + 15000000000LL;; bench_sleep_ms(250)) {
        for (long i = 0; i < c.jobs; i++)
            lat[i] = -1;
        ran = submit_to_running(l0, ids, (int)c.jobs, lat);
        if (ran >= submitted || arb_mono_ns() > end)
            break;
    }
    int est = bench_stop(r.emulator, 30000);
    r.emulator = 0;
    if (!WIFEXITED(est) || WEXITSTATUS(est) != 0) {
        fprintf(stderr, "arbiter bench agents: the emulator ended badly (status %d); see %s\n", est,
                at(&r, "emu.log"));
        rc = 1;
    }
    emu = json_load_file(at(&r, "emu.json"), 0, NULL);
    rt = json_object_get(emu, "round_trip_ms");

    double wall = (double)(w1 - w0) / 1e9;
    double reports = m1.count - m0.count;
    double cores = (double)(c1 - c0) / (double)sysconf(_SC_CLK_TCK) / wall;
    double mean_ms = reports > 0 ? (m1.sum - m0.sum) / reports * 1000 : -1;
    double p99b = p99_bucket(&m0, &m1);
    double rt50 = json_number_value(json_object_get(rt, "p50"));
    double rt90 = json_number_value(json_object_get(rt, "p90"));
    double rt99 = json_number_value(json_object_get(rt, "p99"));
    double rtmax = json_number_value(json_object_get(rt, "max"));
    double s50 = pct(lat, ran, 0.5), s99 = pct(lat, ran, 0.99), smax = pct(lat, ran, 1.0);
    bool met = cores < 1.0 && rt && rt99 < 2000 && (c.jobs == 0 || (ran == c.jobs && s99 < 2000));

    if (c.json) {
        printf("{\"bench\": \"agents\", \"nodes\": %ld, \"heartbeat\": \"%s\", \"window_s\": %.1f, "
               "\"register_s\": %.1f, \"reports_per_s\": %.0f, \"controller_cpu_cores\": %.3f, "
               "\"report_server_ms\": {\"mean\": %.3f, \"p99_bucket\": ",
               c.nodes, c.heartbeat, wall, r.register_s, reports / wall, cores, mean_ms);
        if (p99b < 0)
            printf("null");
        else
            printf("%g", p99b);
        printf("}, \"report_round_trip_ms\": ");
        if (rt)
            printf("{\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"max\": %.3f}", rt50, rt90, rt99,
                   rtmax);
        else
            printf("null");
        printf(", \"submit_to_running_ms\": {\"jobs\": %ld, \"ran\": %d", c.jobs, ran);
        if (ran)
            printf(", \"p50\": %.0f, \"p99\": %.0f, \"max\": %.0f", s50, s99, smax);
        printf("}, \"targets_met\": %s}\n", met ? "true" : "false");
    } else {
        printf("bench agents: %ld emulated nodes, 8 fake GPUs each, heartbeat %s, window %.1f s\n",
               c.nodes, c.heartbeat, wall);
        printf("  %-34s %.1f s (200 ms polls)\n", "all nodes registered after", r.register_s);
        printf("  %-34s %.0f\n", "reports/s", reports / wall);
        printf("  %-34s %.3f core%s\n", "controller CPU", cores,
               cores < 1.0 ? "" : " (target: < 1)");
        printf("  %-34s mean %.3f ms, p99 ", "API time per report", mean_ms);
        if (p99b < 0)
            printf("above the last bucket\n");
        else
            printf("<= %g ms\n", p99b);
        if (rt)
            printf("  %-34s p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.1f ms\n",
                   "report round trip (agents)", rt50, rt90, rt99, rtmax);
        else
            printf("  %-34s not reported (see %s)\n", "report round trip (agents)", "emu.log");
        if (ran)
            printf("  %-34s p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d of %ld jobs ran)\n",
                   "submission to running", s50, s99, smax, ran, c.jobs);
        else
            printf("  %-34s none of %ld jobs ran in the window\n", "submission to running", c.jobs);
        printf("  targets (CPU < 1 core, p99s < 2 s): %s\n", met ? "met" : "NOT met");
    }
out:
    bench_stop(r.emulator, 30000);
    if (r.controller > 0) {
        /* A controller that does not exit 0 on SIGTERM (a sanitizer's leak
         * report, a crash) is a failure worth its logs. */
        int cst = bench_stop(r.controller, 30000);
        if (!WIFEXITED(cst) || WEXITSTATUS(cst) != 0) {
            fprintf(stderr, "arbiter bench agents: the controller ended badly (status %d)\n", cst);
            rc = 1;
        }
    }
    json_decref(emu);
    free(ids);
    free(lat);
    if (rc == 0)
        bench_rmtree(r.dir);
    else
        fprintf(stderr, "arbiter bench agents: logs kept in %s\n", r.dir);
    return rc;
}
