/*
 * client.c: the CLI verbs that talk to a running controller over HTTP
 * (libcurl): submit, queue, job, explain, cancel, nodes, events. Tables for
 * people, `-o json` for scripts (the controller's JSON as it came).
 *
 * Environment: ARBITER_URL (default http://127.0.0.1:7070; several
 * controllers comma-separated: each request goes to the one that last
 * answered, moves on after a connect error, timeout or 503 and follows a
 * follower's 307 to the leader, src/client/failover.c), ARBITER_RETRY_S
 * (how long to keep trying them, default 15 s), ARBITER_TRY_S (with several
 * controllers, one try's limit, default 10 s) and ARBITER_TOKEN (a bearer
 * token; none by default), ARBITER_CACERT (the CA an https:// controller
 * is checked with: the cluster's ca.crt), ARBITER_CERT_FILE and
 * ARBITER_KEY_FILE (a client certificate to present).
 * Exit codes: 0 done; 1 the controller refused the request (its message is
 * printed); 2 usage error; 3 the controller could not be reached.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/flags.h"
#include "cli/wlsubmit.h"
#include "client/failover.h"
#include "util/buf.h"

/* The controllers of ARBITER_URL (comma-separated), parsed once per
 * process; the list remembers the one that last answered, so a long-lived
 * verb (events --watch, top) keeps talking to the leader it found. */
static fo_urls_t cli_urls;
static int cli_urls_rc = 1; /* 1: not parsed yet */

static int cli_targets(void)
{
    arb_err_t err = {{0}};

    if (cli_urls_rc == 1) {
        const char *u = getenv("ARBITER_URL");
        cli_urls_rc =
            fo_urls_parse(u && *u ? u : "http://127.0.0.1:7070", "ARBITER_URL", &cli_urls, &err);
        if (cli_urls_rc < 0) { /* a usage error, not an unreachable controller */
            fprintf(stderr, "arbiter: %s\n", err.msg);
            exit(EXIT_USAGE);
        }
    }
    return cli_urls_rc;
}

const tls_client_t *cli_tls(void)
{
    static tls_client_t t;
    static bool done;
    arb_err_t err = {{0}};

    if (!done) {
        tls_client_from_env(&t);
        if (tls_client_check(&t, &err) < 0) {
            fprintf(stderr,
                    "arbiter: %s (from ARBITER_CACERT, ARBITER_CERT_FILE, "
                    "ARBITER_KEY_FILE)\n",
                    err.msg);
            exit(EXIT_USAGE);
        }
        done = true;
    }
    return &t;
}

/* ARBITER_RETRY_S: how long to keep trying the controllers (default 15). */
static int64_t retry_budget_ms(void)
{
    const char *v = getenv("ARBITER_RETRY_S");
    char *end;
    double s;

    if (!v || !*v)
        return 15000;
    s = strtod(v, &end);
    if (*end || s < 0 || s > 86400) {
        fprintf(stderr, "arbiter: ARBITER_RETRY_S '%s': give seconds, 0..86400; using 15\n", v);
        return 15000;
    }
    return (int64_t)(s * 1000);
}

/* One try's limit. With one controller, 120 s (as long as any request
 * may take). With several, ARBITER_TRY_S (default 10 s; 45 s for a
 * long-poll), so that one that accepts but never answers (a stopped
 * process: the kernel still accepts) does not hold the others back. */
static int64_t try_ms(const char *path)
{
    const char *v = getenv("ARBITER_TRY_S");
    bool poll = strstr(path, "wait=") != NULL;
    char *end;
    double s;

    if (cli_urls.n <= 1)
        return 120000;
    if (!v || !*v)
        return poll ? 45000 : 10000;
    s = strtod(v, &end);
    if (*end || s < 0.1 || s > 3600) {
        fprintf(stderr, "arbiter: ARBITER_TRY_S '%s': give seconds, 0.1..3600; using 10\n", v);
        return 10000;
    }
    return (int64_t)(s * 1000) + (poll ? 35000 : 0);
}

long cli_http_hdr(const char *method, const char *path, const char *body, size_t n,
                  const char *ctype, const char *extra, json_t **out, char **raw)
{
    CURL *c;
    struct curl_slist *h = NULL;
    char hdr[600];
    long status = -1;
    const char *tok = getenv("ARBITER_TOKEN");
    arb_err_t err = {{0}};
    fo_resp_t r = {0};

    if (out)
        *out = NULL;
    if (raw)
        *raw = NULL;
    if (cli_targets() < 0)
        return -1;
    if (!(c = curl_easy_init()))
        return -1;
    if (tok && *tok) {
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", tok);
        h = curl_slist_append(h, hdr);
    }
    if (extra)
        h = curl_slist_append(h, extra);
    if (body) {
        snprintf(hdr, sizeof hdr, "Content-Type: %s", ctype ? ctype : "application/json");
        h = curl_slist_append(h, hdr);
        h = curl_slist_append(h, "Expect:");
    }
    fo_req_t rq = {.method = method,
                   .path = path,
                   .body = body,
                   .n = body ? n : 0,
                   .hdr = h,
                   .connect_ms = 2000,
                   .attempt_ms = try_ms(path),
                   .budget_ms = retry_budget_ms(),
                   .tls = cli_tls()};
    if (fo_do(&cli_urls, c, &rq, &r, &err) < 0) {
        fprintf(stderr, "arbiter: cannot reach the controller (ARBITER_URL=%s): %s\n",
                getenv("ARBITER_URL") ? getenv("ARBITER_URL") : "http://127.0.0.1:7070", err.msg);
    } else if (r.status == 503) {
        /* Every controller said 503 until the budget ran out: no leader
         * (an election), or a controller that failed and restarts. */
        json_t *o = r.body ? json_loads(r.body, 0, NULL) : NULL;
        const char *m = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
        fprintf(stderr,
                "arbiter: no controller can serve this yet: %s: 503: %s (tried %d "
                "times; set ARBITER_RETRY_S to wait longer)\n",
                r.url, m ? m : "service unavailable", r.tries);
        json_decref(o);
    } else {
        status = r.status;
        if (out && r.body)
            *out = json_loads(r.body, 0, NULL);
    }
    if (raw)
        *raw = r.body;
    else
        free(r.body);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

/* One request. *out gets the parsed JSON reply (or NULL); returns the HTTP
 * status, or -1 when the controller cannot be reached (message printed). */
long cli_http(const char *method, const char *path, const char *body, size_t n, const char *ctype,
              json_t **out, char **raw)
{
    return cli_http_hdr(method, path, body, n, ctype, NULL, out, raw);
}

/* Print the controller's error message; the exit code. */
int cli_refused(long status, json_t *reply)
{
    const char *msg =
        json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
    fprintf(stderr, "arbiter: %ld: %s\n", status, msg ? msg : "(no message)");
    return EXIT_REFUSED;
}

/* GET path, print JSON when want_json, else hand the reply to show(). */
static int get_and_show(const char *path, bool want_json, void (*show)(json_t *))
{
    json_t *reply;
    long st = cli_http("GET", path, NULL, 0, NULL, &reply, NULL);
    int rc = 0;

    if (st < 0)
        return EXIT_UNREACHABLE;
    if (st >= 300)
        rc = cli_refused(st, reply);
    else if (want_json)
        json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER), putchar('\n');
    else
        show(reply);
    json_decref(reply);
    return rc;
}

/* The whole of path ("-": stdin), NUL-terminated; NULL when it cannot be
 * opened or read into memory. */
static char *read_all(const char *path, size_t *n)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    arb_buf_t b = {0};

    if (!f)
        return NULL;
    if (arb_buf_read(&b, f) < 0)
        b.oom = true; /* a read error too: nothing half-read is submitted */
    if (f != stdin)
        fclose(f);
    *n = b.len;
    return arb_buf_take(&b);
}

/* ---- submit ------------------------------------------------------------------------ */

#define IDEM_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:"

/* 128 random bits as 32 hex digits (getrandom; the clock and pid if it
 * fails, which only weakens uniqueness, never correctness of one retry). */
static void random_key(char *out, size_t n)
{
    unsigned char b[16];
    struct timespec ts;

    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x =
            (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 44);
        for (size_t i = 0; i < sizeof b;
             i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
            b[i] = (unsigned char)(x >> 56);
    }
    for (size_t i = 0; i < sizeof b && 2 * i + 2 < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* The controller names a submitted body job.yaml or job.json in its messages
 * ("job.yaml:4:7: kind: ..."); the user knows it as FILE: say that name instead. */
static int refused_in_file(long status, json_t *reply, const char *file)
{
    const char *msg =
        json_string_value(json_object_get(json_object_get(reply, "error"), "message"));

    if (msg && (!strncmp(msg, "job.yaml:", 9) || !strncmp(msg, "job.json:", 9))) {
        fprintf(stderr, "arbiter: %ld: %s:%s\n", status, file, msg + 9);
        return EXIT_REFUSED;
    }
    return cli_refused(status, reply);
}

typedef struct submit_opts {
    const char *file, *gpus, *cpus, *mem, *queue, *prio, *name, *key;
    long long nodes;
    int out;
    bool dry;
} submit_opts_t;

static const fl_flag_t submit_flags[] = {
    FL_OPT(submit_opts_t, file, NULL, "-f", FL_STR, "FILE",
           "a job spec, a Kubernetes manifest or an #SBATCH script (- for stdin)"),
    FL_OPT(submit_opts_t, dry, "--dry-run", NULL, FL_BOOL, NULL,
           "with -f: print the jobs it would make (-o json), no controller"),
    FL_OPT(submit_opts_t, gpus, "--gpus", NULL, FL_STR, "N", "GPUs per task"),
    FL_OPT(submit_opts_t, cpus, "--cpus", NULL, FL_STR, "C", "CPUs per task (a quantity: 4, 500m)"),
    FL_OPT(submit_opts_t, mem, "--mem", NULL, FL_STR, "M", "memory per task (a quantity: 16Gi)"),
    FL_OPT(submit_opts_t, nodes, "--nodes", NULL, FL_INT, "K", "tasks (one per node)", .def = "1",
           .min = 1, .max = 100000),
    FL_OPT(submit_opts_t, queue, "--queue", NULL, FL_STR, "Q", "the queue"),
    FL_OPT(submit_opts_t, prio, "--priority", NULL, FL_STR, "P",
           "a number, or a priority class's name"),
    FL_OPT(submit_opts_t, name, "--name", NULL, FL_STR, "N",
           "the job's name (default: the command's)"),
    FL_OPT(submit_opts_t, key, "--idempotency-key", NULL, FL_STR, "K",
           "one key for this submission and its retries (1..128 of A-Za-z0-9-_.:)"),
    FL_OPT(submit_opts_t, out, NULL, "-o", FL_CHOICE, NULL,
           "the job's id, or the controller's JSON", .def = "text", .choices = "text|json"),
    FL_END,
};
static const fl_verb_t submit_verb = {
    .name = "submit",
    .args = "[-- COMMAND ARGS]",
    .summary = "submit a job (an Arbiter spec, a Kubernetes manifest, a Slurm script); prints ids",
    .flags = submit_flags,
    .max_pos = 0,
    .more = "FILE: job.yaml (docs/scenario.md), a Kubernetes manifest (Pod, Job, Deployment,\n"
            "PyTorchJob, MPIJob, JobSet, LeaderWorkerSet, ...) or an #SBATCH script\n"
            "(docs/compat.md). Without -f, --gpus, --cpus, --mem and --nodes make the job,\n"
            "and what follows -- is its command.",
};

/* The body of a job made from the flags (JSON): one group of --nodes tasks. */
static char *submit_body(const submit_opts_t *o, const fl_args_t *a)
{
    json_t *j = json_object(), *req = json_object(), *cmd = json_array();
    const char *name = o->name;
    char nm[64];

    if (!name) {
        snprintf(nm, sizeof nm, "%s", a->nrest ? a->rest[0] : "job");
        char *slash = strrchr(nm, '/');
        name = slash ? slash + 1 : nm;
    }
    json_object_set_new(j, "name", json_string(name));
    if (o->queue)
        json_object_set_new(j, "queue", json_string(o->queue));
    if (o->prio) {
        char *end;
        long p = strtol(o->prio, &end, 10);
        bool cls = *end || end == o->prio;
        json_object_set_new(j, cls ? "priorityClassName" : "priority",
                            cls ? json_string(o->prio) : json_integer(p));
    }
    json_object_set_new(j, "replicas", json_integer(o->nodes));
    if (o->gpus)
        json_object_set_new(req, "nvidia.com/gpu", json_string(o->gpus));
    if (o->cpus)
        json_object_set_new(req, "cpu", json_string(o->cpus));
    if (o->mem)
        json_object_set_new(req, "memory", json_string(o->mem));
    json_object_set_new(j, "resources", json_pack("{s:o}", "requests", req));
    for (int i = 0; i < a->nrest; i++)
        json_array_append_new(cmd, json_string(a->rest[i]));
    json_object_set_new(j, "command", cmd);
    char *body = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    return body;
}

/* POST the body once under one Idempotency-Key (kept across retries after
 * a lost reply or a failover: the controller creates the job once). */
static int submit_post(const submit_opts_t *o, char *body, size_t n, bool yaml)
{
    char idem[160], rnd[40];
    const char *key = o->key;
    json_t *reply;
    int rc = 0;

    if (!key) {
        random_key(rnd, sizeof rnd);
        key = rnd;
    }
    snprintf(idem, sizeof idem, "Idempotency-Key: %s", key);
    long st = cli_http_hdr("POST", "/v1/jobs", body, n,
                           yaml ? "application/yaml" : "application/json", idem, &reply, NULL);
    if (st < 0)
        return EXIT_UNREACHABLE;
    if (st >= 300 && o->file && strcmp(o->file, "-") != 0)
        rc = refused_in_file(st, reply, o->file);
    else if (st >= 300)
        rc = cli_refused(st, reply);
    else if (o->out == 1)
        json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER), putchar('\n');
    else
        printf("%lld\n", (long long)json_integer_value(json_object_get(reply, "id")));
    json_decref(reply);
    return rc;
}

int cli_submit(int argc, char **argv)
{
    submit_opts_t o = {0};
    fl_args_t a = {0};
    char *body = NULL;
    size_t n = 0;
    bool yaml = false;
    int rc;

    if (!fl_run(&submit_verb, argc, argv, &o, &a, &rc))
        return rc;
    if (o.key && (!*o.key || strlen(o.key) > 128 || strspn(o.key, IDEM_CHARS) != strlen(o.key))) {
        fprintf(stderr,
                "arbiter submit: --idempotency-key '%s': give 1..128 letters, digits "
                "or -_.:\n",
                o.key);
        return EXIT_USAGE;
    }
    if (o.file) {
        if (!(body = read_all(o.file, &n))) {
            fprintf(stderr, "arbiter submit: cannot read '%s'\n", o.file);
            return EXIT_USAGE;
        }
        size_t fl = strlen(o.file);
        yaml = !(fl > 5 && strcmp(o.file + fl - 5, ".json") == 0);
        /* Kubernetes manifests and Slurm scripts are translated here; a dry
         * run reads any file here, without the controller. */
        if (o.dry || wl_detect(body, n) != WL_NATIVE) {
            char rnd[40];
            random_key(rnd, sizeof rnd);
            cli_wl_opts_t w = {
                .dry_run = o.dry, .want_json = o.out == 1, .key = o.key ? o.key : rnd};
            rc = cli_wl_submit(strcmp(o.file, "-") ? o.file : "stdin", body, n, &w);
            free(body);
            return rc;
        }
    } else if (o.dry) {
        fprintf(stderr, "arbiter submit: --dry-run reads a file: give -f FILE\n");
        return EXIT_USAGE;
    } else {
        body = submit_body(&o, &a);
        n = strlen(body);
    }
    rc = submit_post(&o, body, n, yaml);
    free(body);
    return rc;
}

/* ---- queue, job, explain, cancel ---------------------------------------------------------- */

static void task_nodes(json_t *job, char *buf, size_t n)
{
    json_t *tasks = json_object_get(job, "tasks"), *t;
    size_t i, used = 0;

    buf[0] = '\0';
    json_array_foreach(tasks, i, t)
    {
        const char *node = json_string_value(json_object_get(t, "node"));
        if (!node || used >= n)
            continue;
        if (used && strstr(buf, node)) /* each node once */
            continue;
        used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "," : "", node);
    }
    if (!buf[0])
        snprintf(buf, n, "-");
}

static void show_queue(json_t *reply)
{
    json_t *jobs = json_object_get(reply, "jobs"), *j;
    size_t i;
    char where[256];

    printf("%-7s %-24s %-12s %-10s %8s %5s  %s\n", "ID", "NAME", "QUEUE", "STATE", "PRIORITY",
           "GPUS", "NODES");
    json_array_foreach(jobs, i, j)
    {
        const char *kind = json_string_value(json_object_get(j, "kind"));
        char gpus[24];
        snprintf(gpus, sizeof gpus, "%lld",
                 (long long)json_integer_value(json_object_get(j, "gpus")));
        task_nodes(j, where, sizeof where);
        if (kind && strcmp(kind, "service") == 0) {
            /* the service holds nothing itself: its replicas (jobs of their own) do */
            json_t *reps = json_object_get(json_object_get(j, "service"), "replicas");
            snprintf(gpus, sizeof gpus, "-");
            snprintf(where, sizeof where, "(service of %zu replicas)",
                     json_is_array(reps) ? json_array_size(reps) : (size_t)0);
        }
        printf("%-7lld %-24.24s %-12.12s %-10s %8lld %5s  %s\n",
               (long long)json_integer_value(json_object_get(j, "id")),
               json_string_value(json_object_get(j, "name")),
               json_string_value(json_object_get(j, "queue")),
               json_string_value(json_object_get(j, "state")),
               (long long)json_integer_value(json_object_get(j, "priority")), gpus, where);
    }
    if (json_array_size(jobs) == 0)
        printf("(no jobs)\n");
}

/* -o: a table for people, the controller's JSON as it came for scripts */
#define CLI_OUTPUT(TYPE, FIELD)                                                                    \
    FL_OPT(TYPE, FIELD, NULL, "-o", FL_CHOICE, NULL, "a table, or the controller's JSON",          \
           .def = "text", .choices = "text|json")

typedef struct list_opts {
    bool all;
    const char *queue;
    int out;
} list_opts_t;

static const fl_flag_t queue_flags[] = {
    FL_OPT(list_opts_t, all, "--all", NULL, FL_BOOL, NULL, "finished jobs too"),
    FL_OPT(list_opts_t, queue, "--queue", NULL, FL_STR, "Q", "one queue's jobs"),
    CLI_OUTPUT(list_opts_t, out),
    FL_END,
};
static const fl_verb_t queue_verb = {
    .name = "queue", .summary = "list pending and running jobs", .flags = queue_flags};

int cli_queue(int argc, char **argv)
{
    list_opts_t o = {0};
    fl_args_t a = {0};
    char path[512], *eq = NULL;
    int rc;

    if (!fl_run(&queue_verb, argc, argv, &o, &a, &rc))
        return rc;
    if (o.queue) {
        CURL *c = curl_easy_init();
        eq = c ? curl_easy_escape(c, o.queue, 0) : NULL;
        curl_easy_cleanup(c);
    }
    snprintf(path, sizeof path, "/v1/jobs?%s%s%s", o.all ? "" : "state=active", eq ? "&queue=" : "",
             eq ? eq : "");
    curl_free(eq);
    return get_and_show(path, o.out == 1, show_queue);
}

typedef struct id_opts {
    int out;
} id_opts_t;

static const fl_flag_t id_flags[] = {
    CLI_OUTPUT(id_opts_t, out),
    FL_END,
};
static const fl_verb_t job_verb = {.name = "job",
                                   .args = "ID",
                                   .summary = "show one job: state, tasks, GPUs, events",
                                   .flags = id_flags,
                                   .min_pos = 1,
                                   .max_pos = 1};
static const fl_verb_t explain_verb = {.name = "explain",
                                       .args = "ID",
                                       .summary = "say why a job is pending",
                                       .flags = id_flags,
                                       .min_pos = 1,
                                       .max_pos = 1};

static bool is_job_id(const char *s)
{
    return s[0] && strspn(s, "0123456789") == strlen(s);
}

/* job ID, explain ID: GET the job's path and show it */
static int one_job(const fl_verb_t *v, int argc, char **argv, const char *fmt,
                   void (*show)(json_t *))
{
    id_opts_t o = {0};
    fl_args_t a = {0};
    char path[128];
    int rc;

    if (!fl_run(v, argc, argv, &o, &a, &rc))
        return rc;
    if (!is_job_id(a.pos[0])) {
        fprintf(stderr, "arbiter %s: '%s' is not a job id (a number, as `arbiter queue` shows)\n",
                v->name, a.pos[0]);
        return EXIT_USAGE;
    }
    snprintf(path, sizeof path, fmt, a.pos[0]);
    return get_and_show(path, o.out == 1, show);
}

static void show_job(json_t *j)
{
    json_t *tasks = json_object_get(j, "tasks"), *t, *evs = json_object_get(j, "events"), *e;
    size_t i;

    printf("job %lld '%s'\n  state     %s%s\n  queue     %s (team %s, owner %s)\n"
           "  priority  %lld\n  version   %lld (Lamport %lld)\n  submitted %s\n",
           (long long)json_integer_value(json_object_get(j, "id")),
           json_string_value(json_object_get(j, "name")),
           json_string_value(json_object_get(j, "state")),
           json_is_true(json_object_get(j, "stop_requested")) ? " (stop requested)" : "",
           json_string_value(json_object_get(j, "queue")),
           json_string_value(json_object_get(j, "team")),
           json_string_value(json_object_get(j, "owner")),
           (long long)json_integer_value(json_object_get(j, "priority")),
           (long long)json_integer_value(json_object_get(j, "version")),
           (long long)json_integer_value(json_object_get(j, "updated_lamport")),
           json_string_value(json_object_get(j, "submitted_at")));
    if (json_string_value(json_object_get(j, "message")))
        printf("  message   %s\n", json_string_value(json_object_get(j, "message")));
    json_t *el = json_object_get(j, "elastic");
    if (json_is_object(el))
        printf("  elastic   %lld tasks now, min %lld, max %lld (resize generation %lld)\n",
               (long long)json_integer_value(json_object_get(el, "current")),
               (long long)json_integer_value(json_object_get(el, "min")),
               (long long)json_integer_value(json_object_get(el, "max")),
               (long long)json_integer_value(json_object_get(el, "generation")));
    if (json_is_integer(json_object_get(j, "termination_grace_s")))
        printf("  grace     %llds (SIGTERM, then SIGKILL)\n",
               (long long)json_integer_value(json_object_get(j, "termination_grace_s")));
    json_t *svc = json_object_get(j, "service"); /* a service, or one of its replicas */
    if (svc && json_object_get(svc, "replicas"))
        printf("  service   %lld replicas (min %lld), port %lld: arbiter service %s\n",
               (long long)json_integer_value(json_object_get(svc, "desired")),
               (long long)json_integer_value(json_object_get(svc, "min")),
               (long long)json_integer_value(json_object_get(svc, "port")),
               json_string_value(json_object_get(svc, "service")));
    else if (svc)
        printf("  service   replica %lld of service '%s' (job %lld)\n",
               (long long)json_integer_value(json_object_get(svc, "replica")),
               json_string_value(json_object_get(svc, "name")),
               (long long)json_integer_value(json_object_get(svc, "job")));
    printf("  tasks\n");
    json_array_foreach(tasks, i, t)
    {
        char gl[128] = "";
        size_t k, used = 0;
        json_t *g;
        json_array_foreach(json_object_get(t, "gpus"), k, g) used += (size_t)snprintf(
            gl + used, sizeof gl - used, "%s%lld", k ? "," : "", (long long)json_integer_value(g));
        json_t *ec = json_object_get(t, "exit_code");
        const char *node = json_string_value(json_object_get(t, "node"));
        const char *last = json_string_value(json_object_get(t, "last_node"));
        const char *strag = json_string_value(json_object_get(t, "straggler"));
        char where[80];
        snprintf(where, sizeof where, "%s%s",
                 node   ? node
                 : last ? last
                        : "-",
                 !node && last ? " (ran)" : "");
        printf("    %-4zu %-12s %-10s node %-16s gpus [%s]%s%s%s", i,
               json_string_value(json_object_get(t, "group")),
               json_string_value(json_object_get(t, "state")), where, gl,
               strag ? " STRAGGLER: " : "", strag ? strag : "", json_is_integer(ec) ? "" : "\n");
        if (json_is_integer(ec))
            printf(" exit %lld\n", (long long)json_integer_value(ec));
    }
    if (json_array_size(evs))
        printf("  events\n");
    json_array_foreach(evs, i, e)
        printf("    %8lld  %s\n", (long long)json_integer_value(json_object_get(e, "lamport")),
               json_string_value(json_object_get(e, "message")));
}

int cli_job(int argc, char **argv)
{
    return one_job(&job_verb, argc, argv, "/v1/jobs/%s", show_job);
}

static void show_explain(json_t *x)
{
    const char *hint = json_string_value(json_object_get(x, "hint"));
    json_t *strag = json_object_get(x, "stragglers"), *e;
    size_t i;
    printf("job %lld '%s' is %s\n  %s\n", (long long)json_integer_value(json_object_get(x, "job")),
           json_string_value(json_object_get(x, "name")),
           json_string_value(json_object_get(x, "state")),
           json_string_value(json_object_get(x, "summary")));
    json_array_foreach(strag, i, e)
        printf("  straggler: task %lld on node %s (%s)\n",
               (long long)json_integer_value(json_object_get(e, "task")),
               json_string_value(json_object_get(e, "node")),
               json_string_value(json_object_get(e, "reason")));
    if (hint && *hint)
        printf("  hint: %s\n", hint);
    if (json_string_value(json_object_get(x, "message"))) /* e.g. who preempted it */
        printf("  last: %s\n", json_string_value(json_object_get(x, "message")));
}

int cli_explain(int argc, char **argv)
{
    return one_job(&explain_verb, argc, argv, "/v1/jobs/%s/explain", show_explain);
}

static const fl_flag_t no_flags[] = {FL_END};
static const fl_verb_t cancel_verb = {.name = "cancel",
                                      .args = "ID...",
                                      .summary = "cancel jobs (running ones stop with their grace)",
                                      .flags = no_flags,
                                      .min_pos = 1,
                                      .max_pos = -1};

int cli_cancel(int argc, char **argv)
{
    fl_args_t a = {0};
    int rc = 0;

    if (!fl_run(&cancel_verb, argc, argv, &(int){0}, &a, &rc))
        return rc;
    for (int i = 0; i < a.npos; i++) {
        const char *id = a.pos[i];
        char path[128];
        json_t *reply;
        if (!is_job_id(id)) {
            fprintf(stderr, "arbiter cancel: '%s' is not a job id\n", id);
            rc = EXIT_USAGE;
            continue;
        }
        snprintf(path, sizeof path, "/v1/jobs/%s", id);
        long st = cli_http("DELETE", path, NULL, 0, NULL, &reply, NULL);
        if (st < 0)
            return EXIT_UNREACHABLE;
        if (st >= 300)
            rc = cli_refused(st, reply);
        else if (json_is_true(json_object_get(reply, "stop_requested")))
            printf("job %s: cancel requested; its agents are stopping it\n", id);
        else
            printf("job %s cancelled\n", id);
        json_decref(reply);
    }
    return rc;
}

/* ---- nodes, events -------------------------------------------------------------------------- */

/* Nodes by name, digits compared as numbers: node-2 before node-10. */
static int by_name(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));
    return strverscmp(x ? x : "", y ? y : "");
}

static void show_nodes(json_t *reply)
{
    json_t *nodes = json_object_get(reply, "nodes"), *n, *g;
    size_t i, k, nn = json_array_size(nodes);
    json_t **order = calloc(nn + 1, sizeof *order);

    for (i = 0; order && i < nn; i++)
        order[i] = json_array_get(nodes, i);
    if (order) {
        qsort(order, nn, sizeof *order, by_name);
        nodes = json_array();
        for (i = 0; i < nn; i++)
            json_array_append(nodes, order[i]);
        free(order);
    } else {
        json_incref(nodes);
    }

    printf("%-16s %-9s %-9s %-8s %s\n", "NODE", "STATE", "GPUS", "AGE",
           "GPU MAP (job id per GPU; . free, X unhealthy)");
    json_array_foreach(nodes, i, n)
    {
        json_t *gpus = json_object_get(n, "gpus");
        char map[512] = "", age[32];
        size_t used = 0;
        int busy = 0;
        json_array_foreach(gpus, k, g)
        {
            json_t *jobs = json_object_get(g, "jobs");
            bool sick = json_is_false(json_object_get(g, "healthy")); /* out of capacity */
            if (json_array_size(jobs) == 0) {
                used += (size_t)snprintf(map + used, sizeof map - used, " %5s", sick ? "X" : ".");
            } else {
                busy++;
                char cell[32];
                snprintf(cell, sizeof cell, "%lld%s%s",
                         (long long)json_integer_value(json_array_get(jobs, 0)),
                         json_array_size(jobs) > 1 ? "+" : "", sick ? "X" : "");
                used += (size_t)snprintf(map + used, sizeof map - used, " %5s", cell);
            }
            if (used >= sizeof map)
                break;
        }
        json_t *ra = json_object_get(n, "report_age_s");
        if (json_is_number(ra))
            snprintf(age, sizeof age, "%.1fs", json_number_value(ra));
        else
            snprintf(age, sizeof age, "-");
        char cnt[32];
        snprintf(cnt, sizeof cnt, "%d/%zu", busy, json_array_size(gpus));
        printf("%-16.16s %-9s %-9s %-8s%s\n", json_string_value(json_object_get(n, "name")),
               json_string_value(json_object_get(n, "state")), cnt, age, map);
    }
    if (json_array_size(nodes) == 0)
        printf("(no nodes; agents register them)\n");
    json_decref(nodes);
}

static const fl_verb_t nodes_verb = {.name = "nodes",
                                     .summary = "the GPU map: each node's GPUs and the job on each",
                                     .flags = id_flags};

int cli_nodes(int argc, char **argv)
{
    id_opts_t o = {0};
    fl_args_t a = {0};
    int rc;

    if (!fl_run(&nodes_verb, argc, argv, &o, &a, &rc))
        return rc;
    return get_and_show("/v1/nodes", o.out == 1, show_nodes);
}

typedef struct events_opts {
    long long since;
    bool watch;
    int out;
} events_opts_t;

static const fl_flag_t events_flags[] = {
    FL_OPT(events_opts_t, since, "--since", NULL, FL_INT, "N",
           "events after Lamport time N (the last one a reply showed)", .def = "0"),
    FL_OPT(events_opts_t, watch, "--watch", "-w", FL_BOOL, NULL, "keep printing new events"),
    FL_OPT(events_opts_t, out, NULL, "-o", FL_CHOICE, NULL, "lines, or one JSON event per line",
           .def = "text", .choices = "text|json"),
    FL_END,
};
static const fl_verb_t events_verb = {
    .name = "events", .summary = "the event log in Lamport order", .flags = events_flags};

int cli_events(int argc, char **argv)
{
    events_opts_t o = {0};
    fl_args_t a = {0};
    int rc;

    if (!fl_run(&events_verb, argc, argv, &o, &a, &rc))
        return rc;
    bool want_json = o.out == 1, watch = o.watch;
    unsigned long long since = (unsigned long long)o.since;
    do {
        char path[128];
        json_t *reply, *e;
        size_t i;
        snprintf(path, sizeof path, "/v1/events?since=%llu%s", since, watch ? "&wait=30" : "");
        long st = cli_http("GET", path, NULL, 0, NULL, &reply, NULL);
        if (st < 0)
            return EXIT_UNREACHABLE;
        if (st >= 300) {
            rc = cli_refused(st, reply);
            json_decref(reply);
            return rc;
        }
        json_array_foreach(json_object_get(reply, "events"), i, e)
        {
            if (want_json) {
                json_dumpf(e, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
                putchar('\n');
            } else {
                printf("%8lld  %s  %-22s %s\n",
                       (long long)json_integer_value(json_object_get(e, "lamport")),
                       json_string_value(json_object_get(e, "time")),
                       json_string_value(json_object_get(e, "type")),
                       json_string_value(json_object_get(e, "message")));
            }
        }
        fflush(stdout);
        since = (unsigned long long)json_integer_value(json_object_get(reply, "last"));
        json_decref(reply);
    } while (watch);
    return 0;
}
