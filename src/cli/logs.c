/*
 * logs.c: `arbiter logs JOB [--task I] [--follow] [--err] [--log-dir DIR]`:
 * a job's task output.
 *
 * Where logs live: each agent writes task I of job J to LOG_DIR/J/I.out
 * and .err on its own node (src/agent/exec.c), and reports its log
 * directory and host name with its inventory. This verb asks the
 * controller where each task ran (the job's `node`, or `last_node` once it
 * ended) and that node's `log_dir` and `hostname`, and reads the file
 * directly. That is all a cluster on one machine needs (the demo, the
 * tests, --emulate), and on a real cluster it works on the node itself; run
 * elsewhere it says which host holds the file instead of guessing. Nothing
 * goes through the controller, which stays off the data path. --log-dir
 * overrides the reported directory (a shared filesystem mounted elsewhere).
 *
 * --follow prints what is appended, following the task if it is requeued
 * to another node, until the job has ended and its output is drained.
 *
 * Exit codes as the other client verbs (client.h): 0, 1 refused or not
 * readable here, 2 usage, 3 the controller unreachable.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"

#define MAX_FOLLOW 256

typedef struct tail {
    int task;
    char path[PATH_MAX]; /* "" until known */
    long off;
    bool headed;
} tail_t;

static volatile sig_atomic_t interrupted;

static void on_int(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: arbiter logs JOB [--task I] [--follow] [--err] [--log-dir DIR]\n");
    return EXIT_USAGE;
}

static bool terminal(const char *state)
{
    return state &&
           (!strcmp(state, "succeeded") || !strcmp(state, "failed") || !strcmp(state, "cancelled"));
}

/* Where task t's log is: path filled, 0; 1 not run yet; <0 an exit code. */
static int locate(const char *job, json_t *task, const char *dir_override, bool err_stream,
                  char *path, size_t n)
{
    const char *node = json_string_value(json_object_get(task, "node"));
    json_t *reply = NULL;
    char here[256] = "", npath[512];
    int t = (int)json_integer_value(json_object_get(task, "index"));

    if (!node)
        node = json_string_value(json_object_get(task, "last_node"));
    if (!node)
        return 1;
    if (!dir_override) {
        snprintf(npath, sizeof npath, "/v1/nodes/%s", node);
        long st = cli_http("GET", npath, NULL, 0, NULL, &reply, NULL);
        if (st < 0)
            return -EXIT_UNREACHABLE;
        if (st >= 300) {
            int rc = cli_refused(st, reply);
            json_decref(reply);
            return -rc;
        }
    }
    json_t *inv = json_object_get(reply, "inventory");
    const char *dir =
        dir_override ? dir_override : json_string_value(json_object_get(inv, "log_dir"));
    const char *host = json_string_value(json_object_get(inv, "hostname"));
    if (!dir) {
        fprintf(stderr,
                "arbiter logs: node '%s' did not report its log directory (an older agent?); "
                "give --log-dir DIR\n",
                node);
        json_decref(reply);
        return -EXIT_REFUSED;
    }
    gethostname(here, sizeof here - 1);
    if (!dir_override && host && host[0] && strcmp(host, here) != 0) {
        fprintf(stderr,
                "arbiter logs: job %s task %d ran on node '%s', host %s: its output is "
                "%s:%s/%s/%d.%s; run 'arbiter logs' there (or give --log-dir for a shared "
                "directory)\n",
                job, t, node, host, host, dir, job, t, err_stream ? "err" : "out");
        json_decref(reply);
        return -EXIT_REFUSED;
    }
    snprintf(path, n, "%s/%s/%d.%s", dir, job, t, err_stream ? "err" : "out");
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

int cli_logs(int argc, char **argv)
{
    const char *job = NULL, *dir = NULL;
    long want = -1;
    bool follow = false, err_stream = false;
    tail_t *tl = NULL;
    int ntl = 0, rc = 0;
    char path[128];

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--task") && i + 1 < argc) {
            char *end;
            want = strtol(argv[++i], &end, 10);
            if (*end || want < 0)
                return usage();
        } else if (!strcmp(argv[i], "--follow") || !strcmp(argv[i], "-f")) {
            follow = true;
        } else if (!strcmp(argv[i], "--err")) {
            err_stream = true;
        } else if (!strcmp(argv[i], "--log-dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!job && argv[i][0] && strspn(argv[i], "0123456789") == strlen(argv[i])) {
            job = argv[i];
        } else {
            return usage();
        }
    }
    if (!job)
        return usage();
    snprintf(path, sizeof path, "/v1/jobs/%s", job);
    signal(SIGINT, on_int);
    for (int64_t round = 0;; round++) {
        json_t *reply = NULL, *tasks, *t;
        size_t i;
        long st = cli_http("GET", path, NULL, 0, NULL, &reply, NULL);
        bool ended;
        long printed = 0;

        if (st < 0) {
            rc = EXIT_UNREACHABLE;
            break;
        }
        if (st >= 300) {
            rc = cli_refused(st, reply);
            json_decref(reply);
            break;
        }
        tasks = json_object_get(reply, "tasks");
        ended = terminal(json_string_value(json_object_get(reply, "state")));
        if (!tl) {
            ntl = (int)json_array_size(tasks);
            if (ntl > MAX_FOLLOW)
                ntl = MAX_FOLLOW;
            if (want >= ntl) {
                fprintf(stderr, "arbiter logs: job %s has %d task%s (0..%d)\n", job, ntl,
                        ntl == 1 ? "" : "s", ntl - 1);
                json_decref(reply);
                rc = EXIT_USAGE;
                break;
            }
            tl = calloc((size_t)(ntl ? ntl : 1), sizeof *tl);
            if (!tl) {
                json_decref(reply);
                rc = EXIT_REFUSED;
                break;
            }
        }
        json_array_foreach(tasks, i, t)
        {
            char p[PATH_MAX];
            const char *node;
            int lr;
            if ((int)i >= ntl || (want >= 0 && (long)i != want))
                continue;
            tl[i].task = (int)i;
            lr = locate(job, t, dir, err_stream, p, sizeof p);
            if (lr < 0) {
                rc = -lr;
                break;
            }
            if (lr == 1) {
                if (!follow)
                    fprintf(stderr, "arbiter logs: job %s task %zu has not run yet\n", job, i);
                continue;
            }
            if (strcmp(p, tl[i].path) != 0) { /* first look, or requeued to another node */
                snprintf(tl[i].path, sizeof tl[i].path, "%s", p);
                tl[i].off = 0;
                tl[i].headed = false;
            }
            node = json_string_value(json_object_get(t, "node"));
            if (!node)
                node = json_string_value(json_object_get(t, "last_node"));
            long got = drain(&tl[i], want < 0 && ntl > 1, node);
            if (got < 0 && !follow) {
                fprintf(stderr, "arbiter logs: %s: %s\n", tl[i].path, strerror(errno));
                rc = EXIT_REFUSED;
            }
            printed += got > 0 ? got : 0;
        }
        json_decref(reply);
        if (rc || !follow || interrupted || (ended && printed == 0 && round > 0))
            break;
        /* A quarter second between looks: prompt enough for people. */
        nanosleep(&(struct timespec){0, 250000000}, NULL);
    }
    free(tl);
    return rc;
}
