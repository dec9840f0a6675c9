/*
 * bench_backlog.c: `arbiter bench backlog`: does a submission cost the same
 * at 100,000 pending jobs as at 0? It starts, as a child of this binary
 * (fork/exec of /proc/self/exe), a controller on a free loopback port with
 * its own temporary data directory (SQLite, synchronous=FULL, group
 * commit), and no agents, so every job stays pending and the backlog only
 * grows. --clients threads on keep-alive HTTP connections then submit
 * --jobs one-GPU jobs as fast as the controller acknowledges them (each
 * after its commit), and the run is cut into chunks of --chunk
 * acknowledgements:
 *
 *   chunk_rates   submits/s of each chunk, in order (backlog 0..chunk,
 *                 chunk..2 chunk, ...)
 *   first_rate, last_rate, last_over_first
 *   chunk_cpu_s   the controller's utime + stime (/proc/PID/stat) per chunk
 *   chunk_sched_cpu_s   of which its scheduler thread's (the thread named
 *                 arb-sched: cycles and the clock-driven checks; the rest is
 *                 the HTTP workers, the committer and SQLite); [] when the
 *                 thread was not found
 *   p50_ms, p99_ms of all submissions
 *   rss_mb_before, rss_mb_after   the controller's resident memory before the
 *                 first submission and after the last (VmRSS)
 *   bytes_per_pending_job   (after - before) / jobs: what a pending job costs
 *                 the live controller (target: under 1 KiB)
 *
 * then stops the controller (SIGTERM, bounded wait, SIGKILL last) and
 * removes its directory (kept, and named, when something failed). The issue's
 * target (the last chunk at least 80% as fast as the first) is reported as
 * `target_met`; it does not change the exit status, which is 1 only when the
 * figures could not be measured (the controller did not start, a submission
 * failed). A line for people, one JSON object with -o json; progress on
 * stderr.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_proc.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "util/mtime.h"

typedef struct bl_run {
    long jobs, chunk, clients;
    bool json;
    char dir[64], exe[PATH_MAX], url[256];
    pid_t controller;
    long next; /* submissions handed out (atomic) */
    long done; /* acknowledged (atomic) */
    int failed;
    int64_t *lat;     /* ns, by submission index */
    int64_t *t_chunk; /* mono ns when chunk k ended; [0] the start */
    long long *cpu_chunk;
    long long *sched_chunk; /* the scheduler thread's ticks when chunk k ended */
    pid_t sched_tid;        /* 0: not found */
    long long rss0_kb, rss1_kb;
} bl_run_t;

static size_t sink(char *p, size_t s, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return s * n;
}

static void *client(void *arg)
{
    bl_run_t *r = arg;
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    char url[300];
    const char *body = "{\"name\": \"backlog\", \"resources\": {\"requests\": "
                       "{\"nvidia.com/gpu\": 1, \"cpu\": \"1\", \"memory\": \"1Gi\"}}}";

    if (!h)
        return NULL;
    snprintf(url, sizeof url, "%s/v1/jobs", r->url);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    hd = curl_slist_append(hd, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    for (;;) {
        long i = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED), st = 0, n;
        if (i >= r->jobs)
            break;
        int64_t t0 = arb_mono_ns();
        if (curl_easy_perform(h) == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        r->lat[i] = arb_mono_ns() - t0;
        if (st != 201) {
            __atomic_fetch_add(&r->failed, 1, __ATOMIC_RELAXED);
            continue;
        }
        n = __atomic_add_fetch(&r->done, 1, __ATOMIC_RELAXED);
        if (n % r->chunk == 0) { /* this acknowledgement ends chunk n / chunk */
            r->t_chunk[n / r->chunk] = arb_mono_ns();
            r->cpu_chunk[n / r->chunk] = bench_cpu_ticks(r->controller, false);
            if (r->sched_tid)
                r->sched_chunk[n / r->chunk] = bench_thread_cpu_ticks(r->controller, r->sched_tid);
        }
    }
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return NULL;
}

static int start(bl_run_t *r)
{
    char datadir[128], upath[128];
    char *argv[] = {"arbiter",    "controller", "--listen", "127.0.0.1:0",
                    "--data-dir", datadir,      NULL};

    snprintf(datadir, sizeof datadir, "%s/d", r->dir);
    snprintf(upath, sizeof upath, "%s/d/url", r->dir);
    if ((r->controller =
             bench_spawn(r->exe, argv, r->dir, "controller.log", "controller.log", false)) < 0)
        return -1;
    if (bench_wait_url(r->controller, upath, r->url, sizeof r->url, 30000) < 0) {
        fprintf(stderr,
                "arbiter bench backlog: the controller did not start; see %s/controller.log\n",
                r->dir);
        return -1;
    }
    return 0;
}

/* The controller's scheduler thread (src/state/cycle.c names it
 * "arb-sched"): its TID, 0 when none is found. */
static pid_t sched_thread(pid_t pid)
{
    char p[96], comm[32];
    pid_t tid = 0;
    struct dirent *e;
    DIR *d;

    snprintf(p, sizeof p, "/proc/%d/task", (int)pid);
    if (!(d = opendir(p)))
        return 0;
    /* cppcheck-suppress readdirCalled ; one thread reads this directory stream */
    while (!tid && (e = readdir(d))) {
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "/proc/%d/task/%.20s/comm", (int)pid, e->d_name);
        if (!(f = fopen(p, "re")))
            continue;
        if (fgets(comm, sizeof comm, f) && strcmp(comm, "arb-sched\n") == 0)
            tid = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    closedir(d);
    return tid;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct bl_opts {
    long long jobs, chunk, clients;
    int json;
} bl_opts_t;

static const fl_flag_t bl_flags[] = {
    FL_OPT(bl_opts_t, jobs, "--jobs", NULL, FL_INT, "N",
           "submissions in all, whole chunks (at most 100,000,000)", .def = "100000"),
    FL_OPT(bl_opts_t, chunk, "--chunk", NULL, FL_INT, "C", "submissions per measured chunk",
           .def = "10000", .min = 1),
    FL_OPT(bl_opts_t, clients, "--clients", NULL, FL_INT, "K", "concurrent submitters (1..256)",
           .def = "8"),
    FL_OPT(bl_opts_t, json, NULL, "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t bl_verb = {
    .name = "bench backlog",
    .summary = "submissions/s and the controller's RSS as its backlog of queued jobs grows",
    .flags = bl_flags};

static void report(bl_run_t *r, double load0, double load1)
{
    long nch = r->jobs / r->chunk;
    double first = 0, last = 0, hz = (double)sysconf(_SC_CLK_TCK);
    double p50, p99;
    double per_job = (double)(r->rss1_kb - r->rss0_kb) * 1024.0 / (double)r->jobs;

    qsort(r->lat, (size_t)r->jobs, sizeof *r->lat, cmp_i64);
    p50 = (double)r->lat[r->jobs / 2] / 1e6;
    p99 = (double)r->lat[(r->jobs * 99) / 100] / 1e6;
    if (r->json)
        printf(
            "{\"bench\":\"backlog\",\"jobs\":%ld,\"chunk\":%ld,\"clients\":%ld,\"chunk_rates\":[",
            r->jobs, r->chunk, r->clients);
    else
        printf("bench backlog: %ld submissions from %ld clients, chunks of %ld\n", r->jobs,
               r->clients, r->chunk);
    for (long k = 1; k <= nch; k++) {
        double rate = (double)r->chunk * 1e9 / (double)(r->t_chunk[k] - r->t_chunk[k - 1]);
        double cpu = (double)(r->cpu_chunk[k] - r->cpu_chunk[k - 1]) / hz;
        if (k == 1)
            first = rate;
        last = rate;
        if (r->json)
            printf("%s%.1f", k > 1 ? "," : "", rate);
        else
            printf("  backlog %7ld..%-7ld %8.0f submits/s, controller CPU %.2f s (scheduler thread "
                   "%.2f s)\n",
                   (k - 1) * r->chunk, k * r->chunk, rate, cpu,
                   r->sched_tid ? (double)(r->sched_chunk[k] - r->sched_chunk[k - 1]) / hz : 0);
    }
    if (r->json) {
        printf("],\"chunk_cpu_s\":[");
        for (long k = 1; k <= nch; k++)
            printf("%s%.2f", k > 1 ? "," : "",
                   (double)(r->cpu_chunk[k] - r->cpu_chunk[k - 1]) / hz);
        printf("],\"chunk_sched_cpu_s\":[");
        for (long k = 1; r->sched_tid && k <= nch; k++)
            printf("%s%.2f", k > 1 ? "," : "",
                   (double)(r->sched_chunk[k] - r->sched_chunk[k - 1]) / hz);
        printf("],\"first_rate\":%.1f,\"last_rate\":%.1f,\"last_over_first\":%.3f,"
               "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"target_met\":%s,\"load_before\":%.2f,"
               "\"load_after\":%.2f,\"rss_mb_before\":%.1f,\"rss_mb_after\":%.1f,"
               "\"bytes_per_pending_job\":%.0f}\n",
               first, last, first > 0 ? last / first : 0, p50, p99,
               last >= 0.8 * first ? "true" : "false", load0, load1, (double)r->rss0_kb / 1024,
               (double)r->rss1_kb / 1024, per_job);
    } else
        printf("  first %.0f/s, last %.0f/s (%.0f%%; target 80%%: %s), p50 %.2f ms, p99 %.2f ms, "
               "load %.2f -> %.2f\n",
               first, last, first > 0 ? 100 * last / first : 0,
               last >= 0.8 * first ? "met" : "NOT met", p50, p99, load0, load1);
    if (!r->json)
        printf("  controller RSS %.1f -> %.1f MB: %.0f bytes per pending job (target < 1024)\n",
               (double)r->rss0_kb / 1024, (double)r->rss1_kb / 1024, per_job);
}

int cli_bench_backlog(int argc, char **argv)
{
    bl_run_t r = {.jobs = 100000, .chunk = 10000, .clients = 8};
    pthread_t *t = NULL;
    int rc = 1, cst;
    double l0, l1;

    bl_opts_t o = {0};
    fl_args_t a;
    if (!fl_run(&bl_verb, argc, argv, &o, &a, &rc))
        return rc;
    rc = 1;
    r.jobs = (long)o.jobs;
    r.chunk = (long)o.chunk;
    r.clients = (long)o.clients;
    r.json = o.json == 1;
    if (r.clients < 1 || r.clients > 256 || r.chunk < 1 || r.jobs < r.chunk || r.jobs > 100000000) {
        fprintf(stderr, "arbiter bench backlog: use --clients 1..256, --chunk of at least 1 and "
                        "--jobs at least one chunk (at most 100,000,000)\n");
        return 2;
    }
    r.jobs -= r.jobs % r.chunk; /* whole chunks */
    if (bench_self_exe("backlog", r.exe, sizeof r.exe) < 0 ||
        bench_tmpdir("backlog", r.dir, sizeof r.dir) < 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    r.lat = calloc((size_t)r.jobs, sizeof *r.lat);
    r.t_chunk = calloc((size_t)(r.jobs / r.chunk + 1), sizeof *r.t_chunk);
    r.cpu_chunk = calloc((size_t)(r.jobs / r.chunk + 1), sizeof *r.cpu_chunk);
    r.sched_chunk = calloc((size_t)(r.jobs / r.chunk + 1), sizeof *r.sched_chunk);
    t = calloc((size_t)r.clients, sizeof *t);
    if (!r.lat || !r.t_chunk || !r.cpu_chunk || !r.sched_chunk || !t || start(&r) < 0)
        goto out;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fprintf(stderr, "bench backlog: %ld submissions to %s\n", r.jobs, r.url);
    l0 = bench_load1();
    r.cpu_chunk[0] = bench_cpu_ticks(r.controller, false);
    if ((r.sched_tid = sched_thread(r.controller)))
        r.sched_chunk[0] = bench_thread_cpu_ticks(r.controller, r.sched_tid);
    r.rss0_kb = bench_rss_kb(r.controller);
    r.t_chunk[0] = arb_mono_ns();
    long started = 0;
    for (; started < r.clients; started++)
        if (pthread_create(&t[started], NULL, client, &r) != 0)
            break;
    for (long i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    l1 = bench_load1();
    r.rss1_kb = bench_rss_kb(r.controller);
    curl_global_cleanup();
    if (started == 0 || r.failed || r.done != r.jobs)
        fprintf(stderr, "arbiter bench backlog: %d of %ld submissions failed\n", r.failed, r.jobs);
    else {
        report(&r, l0, l1);
        rc = 0;
    }
out:
    cst = bench_stop(r.controller, 30000);
    if (r.controller > 0 && (!WIFEXITED(cst) || WEXITSTATUS(cst) != 0)) {
        fprintf(stderr, "arbiter bench backlog: the controller ended badly (status %d)\n", cst);
        rc = 1;
    }
    free(r.lat);
    free(r.t_chunk);
    free(r.cpu_chunk);
    free(r.sched_chunk);
    free(t);
    if (rc == 0)
        bench_rmtree(r.dir);
    else
        fprintf(stderr, "arbiter bench backlog: logs kept in %s\n", r.dir);
    return rc;
}
