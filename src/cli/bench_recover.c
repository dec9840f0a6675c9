/*
 * bench_recover.c: `arbiter bench recover`: how long a controller restart
 * takes, and what it holds after, with --jobs jobs in its store.
 *
 * It fills a temporary data directory through the store layer (src/store,
 * transactions of 10,000 records: fast, no API), with records of the shape
 * the controller writes (st_job_record): a one-GPU job submitted as
 * `arbiter submit --gpus 1 -- true` would be (the same indented spec text),
 * --pending of them PENDING and the rest SUCCEEDED (the older ids). With
 * --records controller (the default) each record is the one this build's
 * controller wrote for that job, submitted once through its API (its
 * compact form, "core", and its spec under specs/ID where it writes them),
 * its id, state and times set per job; with --records spec, the form
 * controllers wrote before the compact form (the spec inside the record,
 * no "core": the path an old store recovers by). Then it
 * starts a real controller process over it (fork/exec of this binary) and
 * times from the exec until it serves (GET /v1/status answers 200). Reported:
 *
 *   recover_s       exec to serving
 *   recover_cpu_s   the controller's CPU time (user + system) by then: the
 *                   figure a busy machine disturbs least
 *   rss_mb_before   the controller's RSS (VmRSS) serving an empty store
 *   rss_mb_after    its RSS serving the filled store, once recovered
 *   bytes_per_job   (after - before) / jobs
 *   bytes_per_pending_job  the same over the pending jobs alone when every
 *                   job is pending (--pending = --jobs), else omitted
 *   fill_s          how long filling the store took (not part of recover_s)
 *
 * The controller is stopped (SIGTERM) and the directory removed; it is kept,
 * and named, when something failed. A line for people, one JSON object with
 * -o json.
 *
 * --rounds R starts the controller R times over the one filled store (a
 * 1,000,000-job store takes minutes to fill on a busy machine), and --vs
 * EXE alternates each round with another build's controller (EXE, e.g.
 * main's build) over the same store: a line per start ("exe": "this" or
 * "vs", "round"), then one line per side with the medians (recover_s_med,
 * recover_cpu_s_med, rss_mb_after_med) and, with --vs, the ratios this/vs.
 * Each start recovers what the one before left (its epoch, its few events):
 * the same jobs.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/bench_proc.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "store/store.h"
#include "util/mtime.h"

#define FILL_TXN 10000

typedef struct br_run {
    char dir[64], exe[PATH_MAX], path[PATH_MAX + 64];
    char *tmpl;      /* --records controller: the record the controller wrote for job 1 */
    char *tmpl_spec; /* and its specs/ID value; NULL none */
    size_t tmpl_speclen;
} br_run_t;

typedef struct br_opts {
    long long jobs, pending; /* pending -1: a tenth of jobs */
    int json;
    int records; /* 0 controller, 1 spec */
    long long rounds;
    const char *vs; /* another build's arbiter, alternated with this one's */
} br_opts_t;

static const fl_flag_t br_flags[] = {
    FL_OPT(br_opts_t, jobs, "--jobs", NULL, FL_INT, "N", "job records in the store",
           .def = "100000", .min = 1, .max = 10000000),
    FL_OPT(br_opts_t, pending, "--pending", NULL, FL_INT, "P",
           "of them pending, the rest succeeded (default a tenth, at most --jobs)"),
    FL_OPT(br_opts_t, json, "--output", "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_OPT(br_opts_t, records, "--records", NULL, FL_CHOICE, NULL,
           "the records' form: as this controller writes them, or the older one with the spec "
           "inside (no compact form)",
           .def = "controller", .choices = "controller|spec"),
    FL_OPT(br_opts_t, rounds, "--rounds", NULL, FL_INT, "R",
           "start the controller R times over the one filled store", .def = "1", .min = 1,
           .max = 99),
    FL_OPT(br_opts_t, vs, "--vs", NULL, FL_STR, "EXE",
           "alternate each round with the controller of another build's arbiter"),
    FL_END,
};
static const fl_verb_t br_verb = {
    .name = "bench recover",
    .summary = "fill a store with job records, then time a controller's start over it and read "
               "its RSS",
    .flags = br_flags};

static const char *at(br_run_t *r, const char *name)
{
    snprintf(r->path, sizeof r->path, "%s/%s", r->dir, name);
    return r->path;
}

/* what `arbiter submit --gpus 1 --name bench -- true` posts (malloc'd) */
static char *bench_spec(void)
{
    json_t *o = json_pack("{s:s,s:i,s:{s:{s:s}},s:[s]}", "name", "bench", "replicas", 1,
                          "resources", "requests", "nvidia.com/gpu", "1", "command", "true");
    char *spec = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

    json_decref(o);
    return spec;
}

/* The record of job id, as st_job_record wrote it before the compact form. */
static char *record(uint64_t id, bool pending, const char *spec)
{
    json_t *tasks = json_pack("[[i,o]]", pending ? 0 : 3, pending ? json_null() : json_integer(0));
    int64_t ms = 1700000000000LL + (int64_t)id;
    json_t *o = json_pack(
        "{s:I,s:s,s:s,s:b,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:b,s:s,s:o,s:[],s:i,s:i,"
        "s:b}",
        "id", (json_int_t)id, "team", "", "owner", "", "yaml", 0, "spec", spec, "state",
        pending ? "pending" : "succeeded", "version", (json_int_t)(pending ? 1 : 4),
        "lamport_submit", (json_int_t)(2 * id), "lamport_update", (json_int_t)(2 * id + 1),
        "attempt", (json_int_t)(pending ? 0 : 1), "epoch", (json_int_t)(pending ? 0 : 1),
        "submit_ms", (json_int_t)ms, "start_ms", (json_int_t)(pending ? 0 : ms + 10), "end_ms",
        (json_int_t)(pending ? 0 : ms + 20), "delivered", !pending, "stop", 0, "message",
        pending ? "" : "task 0 exited 0", "tasks", tasks, "alloc", "priority", 0, "time_limit_s", 0,
        "preemptible", 0);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return txt;
}

/* The record of job id from the controller's own (r->tmpl): its fields per job set. */
static char *record_like(const br_run_t *r, uint64_t id, bool pending)
{
    json_t *o = json_loads(r->tmpl, 0, NULL);
    int64_t ms = 1700000000000LL + (int64_t)id;
    char *txt = NULL;

    if (!json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    json_object_set_new(o, "id", json_integer((json_int_t)id));
    json_object_set_new(o, "state", json_string(pending ? "pending" : "succeeded"));
    json_object_set_new(o, "version", json_integer(pending ? 1 : 4));
    json_object_set_new(o, "lamport_submit", json_integer((json_int_t)(2 * id)));
    json_object_set_new(o, "lamport_update", json_integer((json_int_t)(2 * id + 1)));
    json_object_set_new(o, "attempt", json_integer(pending ? 0 : 1));
    json_object_set_new(o, "epoch", json_integer(pending ? 0 : 1));
    json_object_set_new(o, "submit_ms", json_integer((json_int_t)ms));
    json_object_set_new(o, "start_ms", json_integer((json_int_t)(pending ? 0 : ms + 10)));
    json_object_set_new(o, "end_ms", json_integer((json_int_t)(pending ? 0 : ms + 20)));
    json_object_set_new(o, "delivered", json_boolean(!pending));
    json_object_set_new(o, "message", json_string(pending ? "" : "task 0 exited 0"));
    json_object_set_new(
        o, "tasks", json_pack("[[i,o]]", pending ? 0 : 3, pending ? json_null() : json_integer(0)));
    txt = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return txt;
}

static size_t br_sink(char *p, size_t sz, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return sz * n;
}

/* Submit spec to the controller at DIR/d/url once (it serves an empty
 * store), stop it, and keep the record and spec it wrote as r->tmpl. */
static int take_template(br_run_t *r, pid_t pid, const char *spec)
{
    char url[256] = "", post[300], *v = NULL;
    store_t *st = NULL;
    store_opts_t so = {.sync = STORE_SYNC_NORMAL};
    arb_err_t err = {{0}};
    long code = 0;
    int rc = -1;
    CURL *h;

    if (bench_read_url(at(r, "d/url"), url, sizeof url) < 0 || !(h = curl_easy_init()))
        return -1;
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    snprintf(post, sizeof post, "%s/v1/jobs", url);
    curl_easy_setopt(h, CURLOPT_URL, post);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, spec);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, br_sink);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    if (bench_stop(pid, 30000) != 0 || code != 201) {
        fprintf(stderr, "arbiter bench recover: the controller took no job (HTTP %ld)\n", code);
        return -1;
    }
    if (store_open(at(r, "d"), &so, &st, &err) < 0) {
        fprintf(stderr, "arbiter bench recover: %s\n", err.msg);
        return -1;
    }
    if (store_get(st, "jobs/00000000000000000001", &v, NULL, NULL, &err) == 0) {
        r->tmpl = v;
        rc = 0;
        v = NULL;
        if (store_get(st, "specs/00000000000000000001", &v, &r->tmpl_speclen, NULL, &err) == 0)
            r->tmpl_spec = v;
    } else {
        fprintf(stderr, "arbiter bench recover: the job's record: %s\n", err.msg);
    }
    store_close(st);
    return rc;
}

/* Fill DIR/d with n job records, the last `pending` of them pending. */
static int fill(br_run_t *r, long n, long pending)
{
    store_t *st = NULL;
    store_opts_t so = {.sync = STORE_SYNC_NORMAL};
    store_batch_t b = {0};
    arb_err_t err = {{0}};
    char key[40], clock[32];
    int rc;
    char *spec = bench_spec();

    if (!spec)
        return -ENOMEM;
    if ((rc = store_open(at(r, "d"), &so, &st, &err)) < 0) {
        fprintf(stderr, "arbiter bench recover: %s\n", err.msg);
        free(spec);
        return rc;
    }
    for (long id = 1; id <= n && rc == 0; id++) {
        char *rec = r->tmpl ? record_like(r, (uint64_t)id, id > n - pending)
                            : record((uint64_t)id, id > n - pending, spec);
        snprintf(key, sizeof key, "jobs/%020llu", (unsigned long long)id);
        rc = rec ? store_batch_putstr(&b, key, rec) : -ENOMEM;
        free(rec);
        if (rc == 0 && r->tmpl_spec) {
            snprintf(key, sizeof key, "specs/%020llu", (unsigned long long)id);
            rc = store_batch_put(&b, key, r->tmpl_spec, r->tmpl_speclen);
        }
        if (rc == 0 && (b.nops == FILL_TXN || id == n)) {
            if (id == n) {
                snprintf(clock, sizeof clock, "%llu", (unsigned long long)(2 * n + 2));
                store_batch_putstr(&b, "meta/clock", clock);
            }
            rc = store_apply(st, &b, NULL, &err);
            store_batch_free(&b);
        }
    }
    store_batch_free(&b);
    if (rc < 0)
        fprintf(stderr, "arbiter bench recover: filling the store: %s\n", err.msg);
    store_close(st);
    free(spec);
    return rc;
}

/* The controller's VmRSS in MiB; -1 unreadable. */
static double rss_mb(pid_t pid)
{
    char p[64], line[256];
    double kb = -1;
    FILE *f;

    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    if (!(f = fopen(p, "re")))
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtod(line + 6, NULL);
    fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

/* GET /v1/status from http://HOST:PORT with a plain socket (no retries,
 * no leader cache: each controller of the run listens on a new port):
 * whether it answered 200. */
static bool serves(const char *url)
{
    char host[64], buf[64];
    int port = 0, fd;
    bool ok = false;
    struct sockaddr_in a = {.sin_family = AF_INET};

    if (sscanf(url, "http://%63[^:]:%d", host, &port) != 2 ||
        inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return false;
    a.sin_port = htons((uint16_t)port);
    if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return false;
    const char req[] = "GET /v1/status HTTP/1.0\r\nHost: bench\r\n\r\n";
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
        ssize_t k = read(fd, buf, sizeof buf - 1);
        if (k > 0) {
            buf[k] = '\0';
            ok = strncmp(buf, "HTTP/1.", 7) == 0 && strncmp(buf + 8, " 200", 4) == 0;
        }
    }
    close(fd);
    return ok;
}

/* Start a controller over DIR/d and wait until it serves: its pid, the
 * seconds it took in *secs, the CPU seconds it spent by then in *cpu; -1
 * when it did not within limit_s. */
static pid_t start_exe(br_run_t *r, const char *exe, double *secs, double *cpu, int limit_s)
{
    char datadir[128], url[256] = "";
    char *argv[] = {"arbiter",    "controller", "--listen", "127.0.0.1:0",
                    "--data-dir", datadir,      NULL};
    int64_t t0 = arb_mono_ns();
    pid_t pid;

    snprintf(datadir, sizeof datadir, "%s/d", r->dir);
    remove(at(r, "d/url"));
    if ((pid = bench_spawn(exe, argv, r->dir, NULL, "controller.log", true)) < 0)
        return -1;
    while (arb_mono_ns() - t0 < (int64_t)limit_s * 1000000000LL) {
        if (!bench_alive(pid))
            return -1;
        if (!url[0])
            bench_read_url(at(r, "d/url"), url, sizeof url);
        if (url[0] && serves(url)) {
            long long ticks = bench_cpu_ticks(pid, false);
            *secs = (double)(arb_mono_ns() - t0) / 1e9;
            *cpu = ticks < 0 ? -1 : (double)ticks / (double)sysconf(_SC_CLK_TCK);
            return pid;
        }
        bench_sleep_ms(url[0] ? 5 : 2);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static pid_t start(br_run_t *r, double *secs, double *cpu, int limit_s)
{
    return start_exe(r, r->exe, secs, cpu, limit_s);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double t[100];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_dbl);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* --rounds / --vs: the filled store recovered R times by each side in turn */
static int rounds(br_run_t *r, const br_opts_t *o, long jobs, long pending, double before)
{
    int sides = o->vs ? 2 : 1, n = (int)o->rounds;
    double secs[2][100], cpu[2][100], rss[2][100];

    for (int i = 0; i < n; i++)
        for (int k = 0; k < sides; k++) {
            const char *exe = k ? o->vs : r->exe;
            pid_t pid = start_exe(r, exe, &secs[k][i], &cpu[k][i], 600);
            if (pid < 0) {
                fprintf(stderr, "arbiter bench recover: the controller of %s did not serve\n", exe);
                return -1;
            }
            bench_sleep_ms(500);
            rss[k][i] = rss_mb(pid);
            if (bench_stop(pid, 30000) != 0)
                return -1;
            printf("{\"bench\":\"recover\",\"exe\":\"%s\",\"round\":%d,\"jobs\":%ld,"
                   "\"pending\":%ld,\"recover_s\":%.3f,\"recover_cpu_s\":%.3f,"
                   "\"rss_mb_before\":%.1f,\"rss_mb_after\":%.1f,\"bytes_per_job\":%.0f}\n",
                   k ? "vs" : "this", i + 1, jobs, pending, secs[k][i], cpu[k][i], before,
                   rss[k][i], (rss[k][i] - before) * 1048576.0 / (double)jobs);
            fflush(stdout);
        }
    for (int k = 0; k < sides; k++)
        printf("{\"bench\":\"recover\",\"exe\":\"%s\",\"rounds\":%d,\"jobs\":%ld,"
               "\"pending\":%ld,\"recover_s_med\":%.3f,\"recover_cpu_s_med\":%.3f,"
               "\"rss_mb_after_med\":%.1f}\n",
               k ? "vs" : "this", n, jobs, pending, median(secs[k], n), median(cpu[k], n),
               median(rss[k], n));
    if (sides == 2)
        printf("{\"bench\":\"recover\",\"ratio\":\"this/vs\",\"recover_s\":%.3f,"
               "\"recover_cpu_s\":%.3f,\"rss_mb_after\":%.3f}\n",
               median(secs[0], n) / median(secs[1], n), median(cpu[0], n) / median(cpu[1], n),
               median(rss[0], n) / median(rss[1], n));
    return 0;
}

int cli_bench_recover(int argc, char **argv)
{
    long jobs = 100000, pending = -1;
    bool json = false;
    br_run_t r = {0};
    double recover_s = 0, empty_s = 0, before = -1, after = -1, fill_s, cpu = -1, cpu0 = -1;
    int rc = 1;
    pid_t pid;

    br_opts_t o = {.pending = -1};
    fl_args_t a;
    if (!fl_run(&br_verb, argc, argv, &o, &a, &rc))
        return rc;
    rc = 1;
    jobs = (long)o.jobs;
    pending = (long)o.pending;
    json = o.json == 1;
    if (pending < 0)
        pending = jobs / 10;
    if (jobs < 1 || jobs > 10000000 || pending > jobs) {
        fprintf(stderr, "arbiter bench recover: --jobs must be 1..10000000 and --pending "
                        "0..--jobs\n");
        return 2;
    }
    if (bench_self_exe("recover", r.exe, sizeof r.exe) < 0 ||
        bench_tmpdir("recover", r.dir, sizeof r.dir) < 0)
        return 1;
    /* the baseline: a controller over an empty store */
    if ((pid = start(&r, &empty_s, &cpu0, 60)) < 0)
        goto fail;
    bench_sleep_ms(500);
    before = rss_mb(pid);
    if (o.records == 0) { /* one job through the API: the record this controller writes */
        char *spec = bench_spec();
        int trc = spec ? take_template(&r, pid, spec) : -1;
        free(spec);
        if (trc < 0)
            goto fail;
    } else if (bench_stop(pid, 30000) != 0) {
        goto fail;
    }
    remove(at(&r, "d/arbiter.db"));
    remove(at(&r, "d/arbiter.db-wal"));
    remove(at(&r, "d/arbiter.db-shm"));
    remove(at(&r, "d/arbiter.db.marker"));
    fprintf(stderr, "arbiter bench recover: filling the store with %ld jobs (%ld pending) ...\n",
            jobs, pending);
    int64_t t0 = arb_mono_ns();
    if (fill(&r, jobs, pending) < 0)
        goto fail;
    fill_s = (double)(arb_mono_ns() - t0) / 1e9;
    fprintf(stderr, "arbiter bench recover: filled in %.1f s; starting the controller\n", fill_s);
    if (o.rounds > 1 || o.vs) {
        if (rounds(&r, &o, jobs, pending, before) < 0)
            goto fail;
        rc = 0;
        bench_rmtree(r.dir);
        free(r.tmpl);
        free(r.tmpl_spec);
        return rc;
    }
    if ((pid = start(&r, &recover_s, &cpu, 600)) < 0)
        goto fail;
    bench_sleep_ms(500);
    after = rss_mb(pid);
    FILE *lf = fopen(at(&r, "controller.log"), "re"); /* where its time went, as it says */
    char line[512];
    while (lf && fgets(line, sizeof line, lf))
        if (strstr(line, "recovery:") || strncmp(line, "TIMES", 5) == 0)
            fprintf(stderr, "  controller: %s", line);
    if (lf)
        fclose(lf);
    if (bench_stop(pid, 30000) != 0)
        goto fail;
    double per = (after - before) * 1048576.0 / (double)jobs;
    if (json) {
        printf("{\"bench\":\"recover\",\"jobs\":%ld,\"pending\":%ld,\"fill_s\":%.2f,"
               "\"recover_s\":%.3f,\"recover_cpu_s\":%.3f,\"rss_mb_before\":%.1f,"
               "\"rss_mb_after\":%.1f,\"bytes_per_job\":%.0f",
               jobs, pending, fill_s, recover_s, cpu, before, after, per);
        if (pending == jobs)
            printf(",\"bytes_per_pending_job\":%.0f", per);
        printf("}\n");
    } else {
        printf("recover: %ld jobs (%ld pending): ready to serve in %.2f s (%.2f s of CPU); RSS "
               "%.1f MiB empty, %.1f MiB after (%.0f bytes per job); store filled in %.1f s\n",
               jobs, pending, recover_s, cpu, before, after, per, fill_s);
    }
    rc = 0;
    bench_rmtree(r.dir);
    free(r.tmpl);
    free(r.tmpl_spec);
    return rc;
fail:
    free(r.tmpl);
    free(r.tmpl_spec);
    fprintf(stderr, "arbiter bench recover: failed; the directory is kept: %s (controller.log)\n",
            r.dir);
    return rc;
}
