/*
 * slurm.c: the Slurm commands people type, over Arbiter's API: `arbiter
 * sbatch` (a batch script read as sbatch reads it, src/spec/sbatch.c), and
 * the binary installed as sbatch, squeue, scancel or sinfo (main.c picks
 * the verb from argv[0], as busybox does). Their common options and their
 * default output formats, so scripts that parse them keep working:
 *
 *   sbatch [OPTIONS] [script [ARGS]]   "Submitted batch job N" (--parsable: N)
 *   squeue [-u USER] [-j IDS] [-p PART] [-t STATES] [-o FORMAT] [--start] [-h]
 *   scancel [ID...] [-u USER] [-t STATE] [-n NAME] [-p PART]
 *   sinfo [-N] [-p PART] [-h]
 *
 * A partition is a queue; a job's user is its owner; node states are
 * idle (no GPU used), mix, alloc (every GPU used), drain and down.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/wlsubmit.h"
#include "util/buf.h"

/* ---- sbatch ----------------------------------------------------------------------- */

static char *slurp(FILE *f, size_t *n)
{
    arb_buf_t b = {.max = WL_MAX_SCRIPT * 2}; /* room to say "too long" with the limit */

    if (arb_buf_read(&b, f) < 0)
        b.oom = true;
    *n = b.len;
    return arb_buf_take(&b);
}

int cli_sbatch(int argc, char **argv)
{
    int nopt = wl_sbatch_nopts(argc - 1, argv + 1), first = 1 + nopt, rc;
    const char *file = NULL, *wrap = NULL;
    int out = 2;
    bool test_only = false;
    char *buf = NULL, rnd[40];
    size_t n = 0;
    unsigned char r[16];

    for (int i = 1; i < first; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: sbatch [OPTIONS] [script [ARGS...]]  (also: arbiter sbatch)\n"
                   "  reads #SBATCH directives as sbatch does; the command line overrides them.\n"
                   "  --parsable prints the id alone; --test-only (or --dry-run) prints the job\n"
                   "  it would make; --wrap CMD runs CMD. docs/compat.md lists every option.\n");
            return 0;
        }
        if (!strcmp(a, "--parsable"))
            out = 1;
        else if (!strcmp(a, "--test-only") || !strcmp(a, "--dry-run"))
            test_only = true;
        else if (!strncmp(a, "--wrap=", 7))
            wrap = a + 7;
        else if (!strcmp(a, "--wrap") && i + 1 < first)
            wrap = argv[i + 1];
    }
    /* --dry-run is ours: keep it from the option reader */
    char **opts = calloc((size_t)argc + 1, sizeof *opts);
    int nopts = 0;
    if (!opts)
        return 1;
    for (int i = 1; i < first; i++) {
        if (!strcmp(argv[i], "--dry-run"))
            continue;
        if (!strcmp(argv[i], "--wrap")) { /* the script is made from it */
            i++;
            continue;
        }
        if (!strncmp(argv[i], "--wrap=", 7))
            continue;
        opts[nopts++] = argv[i];
    }
    if (wrap) {
        size_t wl = strlen(wrap);
        buf = malloc(wl + 32);
        if (buf)
            n = (size_t)sprintf(buf, "#!/bin/sh\n%s\n", wrap);
        file = "wrap";
    } else if (first < argc && strcmp(argv[first], "-") != 0) {
        FILE *f = fopen(argv[first], "rb");
        file = argv[first];
        if (!f) {
            fprintf(stderr, "sbatch: error: Unable to open file %s\n", file);
            free(opts);
            return EXIT_USAGE;
        }
        buf = slurp(f, &n);
        fclose(f);
        first++;
    } else {
        buf = slurp(stdin, &n);
        file = "sbatch";
        if (first < argc)
            first++;
    }
    if (!buf) {
        fprintf(stderr, "sbatch: error: cannot read the batch script (at most %d bytes)\n",
                WL_MAX_SCRIPT);
        free(opts);
        return EXIT_USAGE;
    }
    wl_sbatch_cli_t cli = {
        .argc = nopts, .argv = opts, .nargs = wrap ? 0 : argc - first, .args = argv + first};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        memset(r, (int)getpid(), sizeof r);
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(rnd + 2 * i, 3, "%02x", r[i]);
    cli_wl_opts_t o = {.dry_run = test_only,
                       .want_json = false,
                       .force_sbatch = true,
                       .key = rnd,
                       .sbatch = &cli,
                       .sbatch_out = out};
    rc = cli_wl_submit(file, buf, n, &o);
    free(buf);
    free(opts);
    return rc;
}

/* ---- shared: jobs, times, formats -------------------------------------------------- */

static json_t *get_json(const char *path, int *rc)
{
    json_t *reply = NULL;
    long st = cli_http("GET", path, NULL, 0, NULL, &reply, NULL);

    *rc = 0;
    if (st < 0) {
        *rc = EXIT_UNREACHABLE;
        return NULL;
    }
    if (st >= 300) {
        *rc = cli_refused(st, reply);
        json_decref(reply);
        return NULL;
    }
    return reply;
}

static int64_t parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return (int64_t)timegm(&tm);
}

/* Slurm's elapsed time: M:SS, H:MM:SS, D-HH:MM:SS. */
static void fmt_elapsed(int64_t s, char *buf, size_t n)
{
    if (s < 0)
        s = 0;
    int64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
    if (d)
        snprintf(buf, n, "%lld-%02lld:%02lld:%02lld", (long long)d, (long long)h, (long long)m,
                 (long long)sec);
    else if (h)
        snprintf(buf, n, "%lld:%02lld:%02lld", (long long)h, (long long)m, (long long)sec);
    else
        snprintf(buf, n, "%lld:%02lld", (long long)m, (long long)sec);
}

static const char *state_code(const char *st, bool longform)
{
    static const struct {
        const char *a, *code, *name;
    } map[] = {
        {"pending", "PD", "PENDING"},     {"placed", "CF", "CONFIGURING"},
        {"running", "R", "RUNNING"},      {"preempted", "PR", "PREEMPTED"},
        {"succeeded", "CD", "COMPLETED"}, {"failed", "F", "FAILED"},
        {"cancelled", "CA", "CANCELLED"},
    };
    for (size_t i = 0; st && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(st, map[i].a))
            return longform ? map[i].name : map[i].code;
    return longform ? "UNKNOWN" : "??";
}

/* Does state st (Arbiter's) match a Slurm state list ("PD,R", "pending", "all")? */
static bool state_in(const char *st, const char *list)
{
    char buf[256], *save = NULL;

    if (!list || !strcasecmp(list, "all"))
        return true;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (!strcasecmp(t, state_code(st, false)) || !strcasecmp(t, state_code(st, true)) ||
            !strcasecmp(t, st))
            return true;
    return false;
}

static bool in_list(const char *v, const char *list)
{
    char buf[512], *save = NULL;

    if (!list)
        return true;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (v && !strcmp(t, v))
            return true;
    return false;
}

/* Node names compressed as Slurm prints them: n-1,n-2,n-3 -> n-[1-3]. */
static void hostlist(json_t *names, char *out, size_t n)
{
    size_t used = 0, i = 0, cnt = json_array_size(names);

    out[0] = '\0';
    while (i < cnt && used < n) {
        const char *a = json_string_value(json_array_get(names, i));
        size_t pl = strlen(a);
        while (pl && isdigit((unsigned char)a[pl - 1]))
            pl--;
        if (pl == strlen(a)) {
            used += (size_t)snprintf(out + used, n - used, "%s%s", used ? "," : "", a);
            i++;
            continue;
        }
        /* a run of the same prefix with consecutive numbers */
        long lo = atol(a + pl), hi = lo;
        size_t k = i + 1;
        while (k < cnt) {
            const char *b = json_string_value(json_array_get(names, k));
            if (strncmp(a, b, pl) || strlen(b) <= pl ||
                strspn(b + pl, "0123456789") != strlen(b + pl) || atol(b + pl) != hi + 1)
                break;
            hi++;
            k++;
        }
        if (hi > lo)
            used += (size_t)snprintf(out + used, n - used, "%s%.*s[%ld-%ld]", used ? "," : "",
                                     (int)pl, a, lo, hi);
        else
            used += (size_t)snprintf(out + used, n - used, "%s%s", used ? "," : "", a);
        i = k;
    }
}

static json_t *job_nodes(json_t *job)
{
    json_t *names = json_array(), *t;
    size_t i, k;
    json_array_foreach(json_object_get(job, "tasks"), i, t)
    {
        const char *nd = json_string_value(json_object_get(t, "node"));
        bool seen = false;
        if (!nd) /* ended: where it ran */
            nd = json_string_value(json_object_get(t, "last_node"));
        json_t *x;
        if (!nd)
            continue;
        json_array_foreach(names, k, x) seen |= !strcmp(json_string_value(x), nd);
        if (!seen)
            json_array_append_new(names, json_string(nd));
    }
    return names;
}

/* One squeue field (%X) of job j into buf. */

/* A pending job's reason as Slurm names it (the controller's "wait"). */
static const char *sq_reason(json_t *j)
{
    static const struct {
        const char *wait, *slurm;
    } map[] = {{"dependency", "Dependency"},
               {"dependency-never-satisfied", "DependencyNeverSatisfied"},
               {"array-throttle", "JobArrayTaskLimit"},
               {"quota", "QOSGrpGRES"},
               {"held-by-order", "Priority"},
               {"held-by-starving-job", "Priority"},
               {"backfill-reservation", "Priority"},
               {"held-by-preemptor", "Priority"}};
    const char *w = json_string_value(json_object_get(j, "wait"));
    for (size_t i = 0; w && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(w, map[i].wait))
            return map[i].slurm;
    return "Resources";
}

static void sq_field(char c, json_t *j, bool start, char *buf, size_t n)
{
    const char *st = json_string_value(json_object_get(j, "state"));
    json_t *nodes = job_nodes(j);
    int64_t now = (int64_t)time(NULL);
    int64_t started = parse_time(json_string_value(json_object_get(j, "started_at")));
    int64_t ended = parse_time(json_string_value(json_object_get(j, "ended_at")));

    buf[0] = '\0';
    switch (c) {
    case 'i':
    case 'A':
        snprintf(buf, n, "%lld", (long long)json_integer_value(json_object_get(j, "id")));
        break;
    case 'j':
        snprintf(buf, n, "%s", json_string_value(json_object_get(j, "name")));
        break;
    case 'u':
        snprintf(buf, n, "%s",
                 *json_string_value(json_object_get(j, "owner"))
                     ? json_string_value(json_object_get(j, "owner"))
                     : "-");
        break;
    case 'P':
    case 'q':
        snprintf(buf, n, "%s", json_string_value(json_object_get(j, "queue")));
        break;
    case 'a':
        snprintf(buf, n, "%s", json_string_value(json_object_get(j, "team")));
        break;
    case 't':
        snprintf(buf, n, "%s", state_code(st, false));
        break;
    case 'T':
        snprintf(buf, n, "%s", state_code(st, true));
        break;
    case 'M':
        if (started)
            fmt_elapsed((ended ? ended : now) - started, buf, n);
        else
            snprintf(buf, n, "0:00");
        break;
    case 'D':
        snprintf(buf, n, "%zu",
                 json_array_size(nodes) ? json_array_size(nodes)
                                        : json_array_size(json_object_get(j, "tasks")));
        break;
    case 'C':
        snprintf(buf, n, "%zu", json_array_size(json_object_get(j, "tasks")));
        break;
    case 'b':
        snprintf(buf, n, "gpu:%lld", (long long)json_integer_value(json_object_get(j, "gpus")));
        break;
    case 'Q':
        snprintf(buf, n, "%lld", (long long)json_integer_value(json_object_get(j, "priority")));
        break;
    case 'V':
        snprintf(buf, n, "%s", json_string_value(json_object_get(j, "submitted_at")));
        break;
    case 'S':
        if (started)
            snprintf(buf, n, "%.19s", json_string_value(json_object_get(j, "started_at")));
        else
            snprintf(buf, n, "N/A");
        break;
    case 'N':
        hostlist(nodes, buf, n);
        break;
    case 'r':
    case 'R':
        if (json_array_size(nodes) && c == 'R')
            hostlist(nodes, buf, n);
        else if (!strcmp(st, "pending") || !strcmp(st, "preempted"))
            snprintf(buf, n, c == 'R' ? "(%s)" : "%s", sq_reason(j));
        else
            snprintf(buf, n, c == 'R' ? "(%s)" : "%s", "None");
        break;
    case 'l':
        snprintf(buf, n, "UNLIMITED");
        break;
    case '%':
        snprintf(buf, n, "%%");
        break;
    default:
        snprintf(buf, n, "?");
    }
    json_decref(nodes);
}

/* Print one row by a Slurm format ("%.18i %.9P %8j"): %[-][.]width X. */
static void sq_row(const char *fmt, json_t *j, bool header, bool start)
{
    static const struct {
        char c;
        const char *h;
    } heads[] = {{'i', "JOBID"},         {'A', "JOBID"},     {'j', "NAME"},
                 {'u', "USER"},          {'P', "PARTITION"}, {'q', "QOS"},
                 {'a', "ACCOUNT"},       {'t', "ST"},        {'T', "STATE"},
                 {'M', "TIME"},          {'D', "NODES"},     {'C', "CPUS"},
                 {'b', "TRES_PER_NODE"}, {'Q', "PRIORITY"},  {'V', "SUBMIT_TIME"},
                 {'S', "START_TIME"},    {'N', "NODELIST"},  {'R', "NODELIST(REASON)"},
                 {'r', "REASON"},        {'l', "TIME_LIMIT"}};
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            putchar(*p);
            continue;
        }
        bool left = false, trunc = false;
        int width = 0;
        p++;
        if (*p == '-')
            left = true, p++;
        if (*p == '.')
            trunc = true, p++;
        while (isdigit((unsigned char)*p))
            width = width < 1000 ? width * 10 + (*p++ - '0') : (p++, width);
        if (!*p)
            break;
        char buf[512];
        if (header) {
            const char *h = "?";
            for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
                if (heads[i].c == *p)
                    h = heads[i].h;
            snprintf(buf, sizeof buf, "%s", h);
        } else {
            sq_field(*p, j, start, buf, sizeof buf);
        }
        if (width && (int)strlen(buf) > width && (trunc || header))
            buf[width] = '\0';
        if (!width)
            printf("%s", buf);
        else if (left || !trunc)
            printf("%-*s", width, buf);
        else
            printf("%*s", width, buf);
    }
    putchar('\n');
}

static const char *opt_val(int argc, char **argv, int *i, const char *s, const char *l)
{
    const char *a = argv[*i];
    size_t ll = l ? strlen(l) : 0;
    if (s && !strcmp(a, s) && *i + 1 < argc)
        return argv[++*i];
    if (s && !strncmp(a, s, 2) && a[2] && s[1] == a[1] && a[1] != '-')
        return a + 2;
    if (l && !strcmp(a, l) && *i + 1 < argc)
        return argv[++*i];
    if (l && !strncmp(a, l, ll) && a[ll] == '=')
        return a + ll + 1;
    return NULL;
}

int cli_squeue(int argc, char **argv)
{
    const char *user = NULL, *jobs = NULL, *part = NULL, *states = NULL, *fmt = NULL, *v;
    const char *name = NULL;
    bool header = true, start = false, all_states = false;
    int rc;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((v = opt_val(argc, argv, &i, "-u", "--user")))
            user = v;
        else if ((v = opt_val(argc, argv, &i, "-j", "--jobs")))
            jobs = v;
        else if ((v = opt_val(argc, argv, &i, "-p", "--partition")))
            part = v;
        else if ((v = opt_val(argc, argv, &i, "-t", "--states")))
            states = v;
        else if ((v = opt_val(argc, argv, &i, "-o", "--format")))
            fmt = v;
        else if ((v = opt_val(argc, argv, &i, "-n", "--name")))
            name = v;
        else if ((v = opt_val(argc, argv, &i, "-A", "--account")) ||
                 (v = opt_val(argc, argv, &i, "-q", "--qos")) ||
                 (v = opt_val(argc, argv, &i, "-S", "--sort")) ||
                 (v = opt_val(argc, argv, &i, "-M", "--clusters")))
            (void)v; /* accepted; one cluster, id order */
        else if (!strcmp(a, "-h") || !strcmp(a, "--noheader"))
            header = false;
        else if (!strcmp(a, "--start"))
            start = true;
        else if (!strcmp(a, "--me"))
            user = getenv("USER");
        else if (!strcmp(a, "-a") || !strcmp(a, "--all") || !strcmp(a, "-l") ||
                 !strcmp(a, "--long") || !strcmp(a, "-r") || !strcmp(a, "--array") ||
                 !strcmp(a, "-v"))
            ;
        else if (!strcmp(a, "--help") || !strcmp(a, "--usage")) {
            printf("usage: squeue [-u USER] [-j ID,...] [-p PARTITION] [-t STATES] [-n NAME] "
                   "[-o FORMAT] [--start] [-h] [--me]\n");
            return 0;
        } else {
            fprintf(stderr, "squeue: error: unrecognized option '%s'\n", a);
            return EXIT_USAGE;
        }
    }
    if (states && !strcasecmp(states, "all"))
        all_states = true;
    if (jobs && !states)
        all_states = true; /* squeue -j shows a finished job too, while it is known */
    json_t *reply = get_json(all_states || states ? "/v1/jobs" : "/v1/jobs?state=active", &rc);
    if (!reply)
        return rc;
    if (!fmt)
        fmt = start ? "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R"
                    : "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
    if (header)
        sq_row(fmt, NULL, true, start);
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(reply, "jobs"), i, j)
    {
        char id[32];
        const char *st = json_string_value(json_object_get(j, "state"));
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(j, "id")));
        if (!in_list(id, jobs) || !in_list(json_string_value(json_object_get(j, "owner")), user) ||
            !in_list(json_string_value(json_object_get(j, "queue")), part) ||
            !in_list(json_string_value(json_object_get(j, "name")), name) || !state_in(st, states))
            continue;
        if (start && strcmp(st, "pending"))
            continue;
        sq_row(fmt, j, false, start);
    }
    json_decref(reply);
    return 0;
}

int cli_scancel(int argc, char **argv)
{
    const char *user = NULL, *state = NULL, *name = NULL, *part = NULL, *v;
    json_t *ids = json_array();
    bool quiet = false, filters = false;
    int rc = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((v = opt_val(argc, argv, &i, "-u", "--user")))
            user = v, filters = true;
        else if ((v = opt_val(argc, argv, &i, "-t", "--state")))
            state = v, filters = true;
        else if ((v = opt_val(argc, argv, &i, "-n", "--name")) ||
                 (v = opt_val(argc, argv, &i, "-n", "--jobname")))
            name = v, filters = true;
        else if ((v = opt_val(argc, argv, &i, "-p", "--partition")))
            part = v, filters = true;
        else if ((v = opt_val(argc, argv, &i, "-s", "--signal")) ||
                 (v = opt_val(argc, argv, &i, "-A", "--account")))
            (void)v;
        else if (!strcmp(a, "-Q") || !strcmp(a, "--quiet"))
            quiet = true;
        else if (!strcmp(a, "--me"))
            user = getenv("USER"), filters = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "--usage")) {
            printf("usage: scancel [ID...] [-u USER] [-t STATE] [-n NAME] [-p PARTITION] "
                   "[-Q]\n");
            json_decref(ids);
            return 0;
        } else if (isdigit((unsigned char)a[0])) {
            /* 123, 123_4 (an array element: its own job here), 123+0 */
            json_array_append_new(ids, json_integer(atoll(a)));
        } else {
            fprintf(stderr, "scancel: error: Invalid job id %s\n", a);
            json_decref(ids);
            return EXIT_USAGE;
        }
    }
    if (!json_array_size(ids) && !filters) {
        fprintf(stderr, "scancel: error: No job identification provided\n");
        json_decref(ids);
        return EXIT_USAGE;
    }
    if (filters) { /* every active job the filters match (and the ids, when given) */
        json_t *reply = get_json("/v1/jobs?state=active", &rc), *j;
        size_t i;
        json_t *given = ids;
        ids = json_array();
        json_array_foreach(json_object_get(reply, "jobs"), i, j)
        {
            json_int_t id = json_integer_value(json_object_get(j, "id"));
            bool want = !json_array_size(given);
            size_t k;
            json_t *x;
            json_array_foreach(given, k, x) want |= json_integer_value(x) == id;
            if (want && in_list(json_string_value(json_object_get(j, "owner")), user) &&
                in_list(json_string_value(json_object_get(j, "name")), name) &&
                in_list(json_string_value(json_object_get(j, "queue")), part) &&
                state_in(json_string_value(json_object_get(j, "state")), state))
                json_array_append_new(ids, json_integer(id));
        }
        json_decref(given);
        json_decref(reply);
        if (rc)
            return rc;
    }
    size_t i;
    json_t *x;
    json_array_foreach(ids, i, x)
    {
        char path[64];
        json_t *reply = NULL;
        snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)json_integer_value(x));
        long st = cli_http("DELETE", path, NULL, 0, NULL, &reply, NULL);
        if (st < 0) {
            rc = EXIT_UNREACHABLE;
            break;
        }
        if (st >= 300) {
            const char *m =
                json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
            if (!quiet)
                fprintf(stderr, "scancel: error: Kill job error on job id %lld: %s\n",
                        (long long)json_integer_value(x), m ? m : "refused");
            rc = EXIT_REFUSED;
        }
        json_decref(reply);
    }
    json_decref(ids);
    return rc;
}

/* A node's Slurm state from Arbiter's node object. */
static const char *node_state(json_t *nd)
{
    const char *st = json_string_value(json_object_get(nd, "state"));
    json_t *cap = json_object_get(nd, "capacity"), *al = json_object_get(nd, "allocated");
    double used = json_number_value(json_object_get(al, "gpus"));
    long long gpus = json_integer_value(json_object_get(cap, "gpus"));
    long long tasks = json_integer_value(json_object_get(nd, "tasks"));

    if (st && !strcasecmp(st, "draining"))
        return tasks ? "drng" : "drain";
    if (st && strcasecmp(st, "ready"))
        return "down";
    if (tasks == 0 && used <= 0)
        return "idle";
    if (gpus && used >= (double)gpus)
        return "alloc";
    return "mix";
}

int cli_sinfo(int argc, char **argv)
{
    const char *part = NULL, *v;
    bool nodes_view = false, header = true;
    int rc;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((v = opt_val(argc, argv, &i, "-p", "--partition")))
            part = v;
        else if ((v = opt_val(argc, argv, &i, "-o", "--format")) ||
                 (v = opt_val(argc, argv, &i, "-t", "--states")))
            (void)v; /* the default layout only */
        else if (!strcmp(a, "-N") || !strcmp(a, "--Node"))
            nodes_view = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--noheader"))
            header = false;
        else if (!strcmp(a, "-l") || !strcmp(a, "--long") || !strcmp(a, "-a") ||
                 !strcmp(a, "--all") || !strcmp(a, "-s") || !strcmp(a, "--summarize"))
            ;
        else if (!strcmp(a, "--help") || !strcmp(a, "--usage")) {
            printf("usage: sinfo [-N] [-p PARTITION] [-h]\n");
            return 0;
        } else {
            fprintf(stderr, "sinfo: error: unrecognized option '%s'\n", a);
            return EXIT_USAGE;
        }
    }
    json_t *nodes = get_json("/v1/nodes", &rc);
    if (!nodes)
        return rc;
    json_t *queues = get_json("/v1/queues", &rc);
    json_t *parts = json_array();
    size_t i;
    json_t *q;
    json_array_foreach(json_object_get(queues, "queues"), i, q)
    {
        const char *qn = json_string_value(json_object_get(q, "name"));
        if (qn && strcmp(qn, "default"))
            json_array_append_new(parts, json_string(qn));
    }
    json_array_insert_new(parts, 0, json_string("default"));
    json_decref(queues);
    static const char *const states[] = {"idle", "mix", "alloc", "drng", "drain", "down"};
    if (nodes_view && header)
        printf("NODELIST   NODES PARTITION STATE \n");
    else if (header)
        printf("PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n");
    json_t *p;
    json_array_foreach(parts, i, p)
    {
        const char *pn = json_string_value(p);
        char shown[80];
        if (part && !in_list(pn, part))
            continue;
        snprintf(shown, sizeof shown, "%s%s", pn, i == 0 ? "*" : "");
        json_t *nd;
        size_t k;
        if (nodes_view) {
            json_array_foreach(json_object_get(nodes, "nodes"), k, nd)
                printf("%-10s %5d %9s %-6s\n", json_string_value(json_object_get(nd, "name")), 1,
                       shown, node_state(nd));
            continue;
        }
        for (size_t s = 0; s < sizeof states / sizeof states[0]; s++) {
            json_t *names = json_array();
            json_array_foreach(json_object_get(nodes, "nodes"), k,
                               nd) if (!strcmp(node_state(nd), states[s]))
                json_array_append_new(names,
                                      json_string(json_string_value(json_object_get(nd, "name"))));
            if (json_array_size(names)) {
                char hl[1024];
                json_t *sorted = json_array();
                while (json_array_size(names)) { /* by name, digits as numbers */
                    size_t best = 0;
                    for (size_t x = 1; x < json_array_size(names); x++)
                        if (strverscmp(json_string_value(json_array_get(names, x)),
                                       json_string_value(json_array_get(names, best))) < 0)
                            best = x;
                    json_array_append(sorted, json_array_get(names, best));
                    json_array_remove(names, best);
                }
                json_decref(names);
                names = sorted;
                hostlist(names, hl, sizeof hl);
                printf("%-9.9s %5s %10s %6zu %6s %s\n", shown, "up", "infinite",
                       json_array_size(names), states[s], hl);
            }
            json_decref(names);
        }
    }
    json_decref(parts);
    json_decref(nodes);
    return 0;
}
