/*
 * logs.c: `arbiter logs JOB [--task I] [--follow] [--err] [--log-dir DIR]`:
 * a job's task output, from any host.
 *
 * Where logs live: each agent writes task I of job J to LOG_DIR/J.I.out on
 * its own node, stdout and stderr in the order written, or stderr to
 * LOG_DIR/J.I.err when it runs with --stderr separate (src/agent/exec.h,
 * agent_log_path); --err reads that stream, and says where stderr is when
 * the node wrote it into the out file. Each agent reports its log
 * directory, host name and, when it serves them, its logs URL with its
 * inventory. This verb asks the controller where each task ran (the job's
 * `node`, or `last_node` once it ended) and then reads the output:
 *
 *   1. from the file, when it is readable here: on the node itself (same
 *      host name), or under --log-dir DIR (default $ARBITER_LOG_DIR; a
 *      shared filesystem mounted elsewhere);
 *   2. else from the node's agent over HTTP (src/agent/logserve.h), the way
 *      `kubectl logs` goes to the kubelet: a ticket for this job and task
 *      from the controller (POST /v1/jobs/J/logs-ticket, given only to
 *      callers who may see the job; it lasts a minute and is renewed), then
 *      GET LOGS_URL/v1/logs/J/I?stream=out&offset=N with the ticket. The
 *      bytes go from the agent to here; the controller only vouches.
 *   3. else (an agent that serves no logs, on another host) it says which
 *      host and path hold the output rather than guessing.
 *
 * --follow prints what is appended (by offset, from the file or the agent),
 * following the task if it is requeued to another node, until the job has
 * ended and its output is drained.
 *
 * Exit codes as the other client verbs (client.h): 0, 1 refused or not
 * readable here, 2 usage, 3 the controller unreachable.
 */
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/flags.h"
#include "agent/exec.h"
#include "util/buf.h"
#include "util/mtime.h"

#define MAX_FOLLOW 256

typedef struct tail {
    int task;
    char path[PATH_MAX]; /* the file, or "agent:NODE" when read from the agent; "" until known */
    long off;
    bool headed;
    /* read from the agent (path starts "agent:") */
    bool remote;
    char url[512], ticket[80];
    int64_t ticket_until; /* CLOCK_MONOTONIC ns */
} tail_t;

static volatile sig_atomic_t interrupted;

static void on_int(int sig)
{
    (void)sig;
    interrupted = 1;
}

static bool terminal(const char *state)
{
    return state && (!strcmp(state, "succeeded") || !strcmp(state, "failed") ||
                     !strcmp(state, "cancelled") || !strcmp(state, "timeout"));
}

/*
 * Where task t's log is: 0 and path filled (a file, or "agent:NODE" with
 * *url the agent's logs URL); 1 not run yet; <0 an exit code (said).
 */
static int locate(const char *job, json_t *task, const char *dir_override, bool err_stream,
                  char *path, size_t n, char *url, size_t un)
{
    const char *node = json_string_value(json_object_get(task, "node"));
    json_t *reply = NULL;
    char here[256] = "", npath[512], file[PATH_MAX];
    int t = (int)json_integer_value(json_object_get(task, "index"));

    if (!node)
        node = json_string_value(json_object_get(task, "last_node"));
    if (!node)
        return 1;
    snprintf(npath, sizeof npath, "/v1/nodes/%s", node);
    long st = cli_http("GET", npath, NULL, 0, NULL, &reply, NULL);
    if (st < 0)
        return -EXIT_UNREACHABLE;
    if (st >= 300 && !dir_override) {
        int rc = cli_refused(st, reply);
        json_decref(reply);
        return -rc;
    }
    json_t *inv = json_object_get(reply, "inventory");
    const char *dir =
        dir_override ? dir_override : json_string_value(json_object_get(inv, "log_dir"));
    const char *host = json_string_value(json_object_get(inv, "hostname"));
    const char *lurl = json_string_value(json_object_get(inv, "logs_url"));
    gethostname(here, sizeof here - 1);
    bool same_host = !host || !host[0] || strcmp(host, here) == 0;
    if (dir)
        agent_log_find(file, sizeof file, dir, job, t, err_stream ? "err" : "out");
    /* 1. the file, where it can be read here */
    if (dir && (dir_override || same_host) && access(file, R_OK) == 0) {
        snprintf(path, n, "%s", file);
        json_decref(reply);
        return 0;
    }
    /* stderr that went into the out file (the agent made no .err: it opens
     * a .err before the .out when it makes one) */
    char out[PATH_MAX];
    if (dir && err_stream && (dir_override || same_host) &&
        (agent_log_path(out, sizeof out, dir, job, t, "out"), access(out, F_OK) == 0) &&
        access(file, F_OK) != 0 && errno == ENOENT) {
        fprintf(stderr,
                "arbiter logs: job %s task %d: its stderr is in its output, %s (node '%s' writes "
                "both streams to one file unless its agent runs with --stderr separate); run "
                "without --err\n",
                job, t, out, node);
        json_decref(reply);
        return -EXIT_REFUSED;
    }
    /* 2. the agent */
    if (lurl && lurl[0]) {
        snprintf(path, n, "agent:%s", node);
        snprintf(url, un, "%s", lurl);
        json_decref(reply);
        return 0;
    }
    /* 3. what is left */
    if (!dir) {
        fprintf(stderr,
                "arbiter logs: node '%s' reported neither its log directory nor a logs URL (an "
                "older agent?); give --log-dir DIR\n",
                node);
        json_decref(reply);
        return -EXIT_REFUSED;
    }
    if (!dir_override && !same_host) {
        fprintf(stderr,
                "arbiter logs: job %s task %d ran on node '%s', host %s: its output is "
                "%s:%s and its agent serves no logs (--logs-listen off); run "
                "'arbiter logs' there (or give --log-dir for a shared directory)\n",
                job, t, node, host, host, file);
        json_decref(reply);
        return -EXIT_REFUSED;
    }
    snprintf(path, n, "%s", file); /* not there yet, or unreadable: drain says */
    json_decref(reply);
    return 0;
}

/* Print what tl's file has past tl->off; bytes printed, or -1 unreadable. */
static long drain(tail_t *tl, bool header, const char *node)
{
    FILE *f = fopen(tl->path, "re");
    char buf[65536];
    long got = 0;
    size_t k;

    if (!f)
        return -1;
    if (fseek(f, tl->off, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        if (header && !tl->headed) {
            printf("==> task %d (node %s) <==\n", tl->task, node ? node : "?");
            tl->headed = true;
        }
        fwrite(buf, 1, k, stdout);
        got += (long)k;
    }
    tl->off += got;
    fclose(f);
    fflush(stdout);
    return got;
}

/* A ticket for tl from the controller: 0, or an exit code (said). */
static int get_ticket(tail_t *tl, const char *job)
{
    char path[128];
    json_t *reply = NULL;

    snprintf(path, sizeof path, "/v1/jobs/%s/logs-ticket?task=%d", job, tl->task);
    long st = cli_http("POST", path, "", 0, NULL, &reply, NULL);
    if (st < 0)
        return EXIT_UNREACHABLE;
    if (st >= 300) {
        int rc = cli_refused(st, reply);
        json_decref(reply);
        return rc;
    }
    const char *tk = json_string_value(json_object_get(reply, "ticket"));
    const char *u = json_string_value(json_object_get(reply, "logs_url"));
    int64_t ttl = json_integer_value(json_object_get(reply, "ttl_ms"));
    snprintf(tl->ticket, sizeof tl->ticket, "%s", tk ? tk : "");
    if (u)
        snprintf(tl->url, sizeof tl->url, "%s", u);
    /* renewed 5 s before the controller would refuse it */
    tl->ticket_until = arb_mono_ns() + (ttl > 5000 ? ttl - 5000 : ttl / 2) * 1000000LL;
    json_decref(reply);
    return 0;
}

/*
 * Print what the agent has of tl's log past tl->off. Bytes printed; -1 not
 * there (yet), or (following) the agent cannot be reached now: its node may
 * be down, and the task may come back elsewhere; -2 - exit code when
 * refused (said).
 */
static long drain_remote(CURL *h, tail_t *tl, const char *job, bool err_stream, bool header,
                         const char *node, bool follow)
{
    long got = 0;
    int retried = 0;

    for (;;) {
        char url[768], auth[128];
        struct curl_slist *hd = NULL;
        arb_buf_t b = {0};
        long st = 0;
        if (!tl->ticket[0] || arb_mono_ns() >= tl->ticket_until) {
            int rc = get_ticket(tl, job);
            if (rc)
                return -2 - rc;
        }
        snprintf(url, sizeof url, "%s/v1/logs/%s/%d?stream=%s&offset=%ld", tl->url, job, tl->task,
                 err_stream ? "err" : "out", tl->off);
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", tl->ticket);
        hd = curl_slist_append(hd, auth);
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, arb_buf_write_cb);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
        tls_client_apply(cli_tls(), h); /* an https:// log server: the node's, from the CA */
        CURLcode cc = curl_easy_perform(h);
        curl_slist_free_all(hd);
        if (cc == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        if (cc != CURLE_OK || st != 200) {
            json_t *e = b.p && st ? json_loads(b.p, 0, NULL) : NULL;
            const char *m =
                json_string_value(json_object_get(json_object_get(e, "error"), "message"));
            long ret = -1;
            if (st == 403 && !retried++) { /* expired meanwhile: once more, new ticket */
                tl->ticket[0] = '\0';
                json_decref(e);
                arb_buf_free(&b);
                continue;
            }
            /* following, an agent out of reach is tried again at the next look,
             * with a new ticket, which brings its logs URL anew (an agent
             * restarted on its node may listen on another port) */
            if (cc != CURLE_OK)
                tl->ticket[0] = '\0';
            if (st == 404 && m && !follow) { /* no such log: the agent says why */
                fprintf(stderr, "arbiter logs: the agent of node '%s': %s\n", node ? node : "?", m);
                ret = -2 - EXIT_REFUSED;
            } else if (st != 404 && !(follow && cc != CURLE_OK)) {
                fprintf(stderr, "arbiter logs: the agent of node '%s' at %s: %s\n",
                        node ? node : "?", tl->url,
                        cc != CURLE_OK ? curl_easy_strerror(cc)
                        : m            ? m
                                       : "refused");
                ret = -2 - EXIT_REFUSED;
            }
            json_decref(e);
            arb_buf_free(&b);
            return got ? got : ret;
        }
        size_t nread = b.len;
        if (nread > 0) {
            if (header && !tl->headed) {
                printf("==> task %d (node %s) <==\n", tl->task, node ? node : "?");
                tl->headed = true;
            }
            fwrite(b.p, 1, nread, stdout);
            fflush(stdout);
        }
        tl->off += (long)nread;
        got += (long)nread;
        arb_buf_free(&b);
        /* a reply is at most 1 MiB: read on while the file is longer */
        struct curl_header *sz = NULL;
        long size = -1;
        if (curl_easy_header(h, "X-Arbiter-Log-Size", 0, CURLH_HEADER, -1, &sz) == CURLHE_OK)
            size = strtol(sz->value, NULL, 10);
        if (size < 0 || tl->off >= size || nread == 0)
            return got;
    }
}

typedef struct logs_opts {
    long long task;
    bool follow, err;
    const char *dir;
} logs_opts_t;

static const fl_flag_t logs_flags[] = {
    FL_OPT(logs_opts_t, task, "--task", NULL, FL_INT, "I",
           "one task's output (default: every task's)"),
    FL_OPT(logs_opts_t, follow, "--follow", "-f", FL_BOOL, NULL,
           "keep printing until the job ends"),
    FL_OPT(logs_opts_t, err, "--err", NULL, FL_BOOL, NULL, "stderr instead of stdout"),
    FL_OPT(logs_opts_t, dir, "--log-dir", NULL, FL_STR, "DIR",
           "read the files there when they are readable here (default $ARBITER_LOG_DIR)"),
    FL_END,
};
static const fl_verb_t logs_verb = {
    .name = "logs",
    .args = "JOB",
    .summary = "a job's task output, from the file or over HTTP from its agent",
    .flags = logs_flags,
    .min_pos = 1,
    .max_pos = 1};

/* One follow of a job's tasks. */
typedef struct logs_run {
    const char *job, *dir;
    long want; /* one task, or -1: every task */
    bool follow, err_stream;
    tail_t *tl;
    int ntl;
    CURL *h; /* one keep-alive connection to the agents */
} logs_run_t;

/* Print what is new of task i; true to stop (*rc says why). */
static bool logs_task(logs_run_t *r, size_t i, json_t *t, long *printed, int *rc)
{
    char p[PATH_MAX], u[512] = "";
    const char *node;
    int lr;
    if ((int)i >= r->ntl || (r->want >= 0 && (long)i != r->want))
        return false;
    r->tl[i].task = (int)i;
    lr = locate(r->job, t, r->dir, r->err_stream, p, sizeof p, u, sizeof u);
    if (lr < 0) {
        *rc = -lr;
        return true;
    }
    if (lr == 1) {
        if (!r->follow)
            fprintf(stderr, "arbiter logs: job %s task %zu has not run yet\n", r->job, i);
        return false;
    }
    node = json_string_value(json_object_get(t, "node"));
    if (!node)
        node = json_string_value(json_object_get(t, "last_node"));
    /* Once read from a node's agent, stay with it while the task is
     * there: switching to a file that appeared meanwhile would print
     * the start again. */
    bool stay = r->tl[i].remote && node && !strcmp(r->tl[i].path + 6, node);
    if (!stay && strcmp(p, r->tl[i].path) != 0) { /* first look, or requeued elsewhere */
        snprintf(r->tl[i].path, sizeof r->tl[i].path, "%s", p);
        r->tl[i].off = 0;
        r->tl[i].headed = false;
        r->tl[i].remote = !strncmp(p, "agent:", 6);
        r->tl[i].ticket[0] = '\0';
        snprintf(r->tl[i].url, sizeof r->tl[i].url, "%s", u);
    }
    long got = r->tl[i].remote ? drain_remote(r->h, &r->tl[i], r->job, r->err_stream,
                                              r->want < 0 && r->ntl > 1, node, r->follow)
                               : drain(&r->tl[i], r->want < 0 && r->ntl > 1, node);
    if (got <= -2) { /* refused by the controller or the agent: said */
        *rc = (int)(-2 - got);
        return true;
    }
    if (got < 0 && !r->follow) {
        if (r->tl[i].remote)
            fprintf(stderr, "arbiter logs: job %s task %zu: node '%s' has no %s log\n", r->job, i,
                    node ? node : "?", r->err_stream ? "err" : "out");
        else
            fprintf(stderr, "arbiter logs: %s: %s\n", r->tl[i].path, strerror(errno));
        *rc = EXIT_REFUSED;
    }
    *printed += got > 0 ? got : 0;
    return false;
}

/* The tasks to follow, from the first reply; 0, or the exit code. */
static int logs_setup(logs_run_t *r, json_t *tasks)
{
    r->ntl = (int)json_array_size(tasks);
    if (r->ntl > MAX_FOLLOW)
        r->ntl = MAX_FOLLOW;
    if (r->want >= r->ntl) {
        fprintf(stderr, "arbiter logs: job %s has %d task%s (0..%d)\n", r->job, r->ntl,
                r->ntl == 1 ? "" : "s", r->ntl - 1);
        return EXIT_USAGE;
    }
    r->tl = calloc((size_t)(r->ntl ? r->ntl : 1), sizeof *r->tl);
    return r->tl ? 0 : EXIT_REFUSED;
}

/* Until the job ends with nothing more to print (with --follow), or once. */
static int logs_follow(logs_run_t *r)
{
    char path[128];
    int rc = 0;

    snprintf(path, sizeof path, "/v1/jobs/%s", r->job);
    for (int64_t round = 0;; round++) {
        json_t *reply = NULL, *tasks, *t;
        size_t i;
        long st = cli_http("GET", path, NULL, 0, NULL, &reply, NULL), printed = 0;

        if (st < 0)
            return EXIT_UNREACHABLE;
        if (st >= 300) {
            rc = cli_refused(st, reply);
            json_decref(reply);
            return rc;
        }
        tasks = json_object_get(reply, "tasks");
        bool ended = terminal(json_string_value(json_object_get(reply, "state")));
        if (!r->tl && (rc = logs_setup(r, tasks)) != 0) {
            json_decref(reply);
            return rc;
        }
        json_array_foreach(tasks, i, t)
        {
            if (logs_task(r, i, t, &printed, &rc))
                break;
        }
        json_decref(reply);
        if (rc || !r->follow || interrupted || (ended && printed == 0 && round > 0))
            return rc;
        /* A quarter second between looks: prompt enough for people. */
        nanosleep(&(struct timespec){0, 250000000}, NULL);
    }
}

int cli_logs(int argc, char **argv)
{
    logs_opts_t o = {.task = -1, .dir = getenv("ARBITER_LOG_DIR")};
    fl_args_t a = {0};
    int rc = 0;

    if (!fl_run(&logs_verb, argc, argv, &o, &a, &rc))
        return rc;
    const char *job = a.pos[0], *dir = o.dir;
    long want = (long)o.task;
    bool follow = o.follow, err_stream = o.err;
    if (!job[0] || strspn(job, "0123456789") != strlen(job)) {
        fprintf(stderr, "arbiter logs: '%s' is not a job id (a number, as `arbiter queue` shows)\n",
                job);
        return EXIT_USAGE;
    }
    if (dir && !dir[0])
        dir = NULL;
    logs_run_t r = {.job = job,
                    .dir = dir,
                    .want = want,
                    .follow = follow,
                    .err_stream = err_stream,
                    .h = curl_easy_init()};
    if (!r.h)
        return EXIT_REFUSED;
    signal(SIGINT, on_int);
    rc = logs_follow(&r);
    free(r.tl);
    curl_easy_cleanup(r.h);
    return rc;
}
