/*
 * top.c: `arbiter top`, a live view of a running controller in the manner
 * of top(1) and squeue in a loop, made only of the public API:
 *
 *   cluster   GET /v1/status (Lamport clock, epoch), GET /v1/nodes (ready
 *             or not, GPUs allocated of total), GET /metrics
 *             (fragmentation, decisions per second)
 *   queues    GET /v1/queues: quota, usage, dominant share, fair share
 *             (the queue's weight over the weights of all queues), pending
 *   jobs      GET /v1/jobs?state=running|placed|pending&limit=N; each shown
 *             pending job with its one-line reason (GET .../explain)
 *   nodes     from GET /v1/nodes, with each report's age
 *
 * --once prints one frame, without escape codes, and exits (what scripts
 * and tests read). Otherwise the screen is redrawn every --interval (2 s)
 * until q, Ctrl-C or SIGTERM; the terminal (echo, line mode, cursor, the
 * main screen) is restored on every way out. On a terminal each frame fits
 * the window (rows and columns, read again on every frame and redrawn at
 * once on SIGWINCH): the sections share its rows (see "fitting the
 * window"), a cut list ends in "... N more", a cut line in '>'.
 *
 * ARBITER_URL (one or several controllers), ARBITER_TOKEN and
 * ARBITER_RETRY_S as for the other client verbs (client.c). Exit codes:
 * 0 done; 1 the controller refused (its message); 2 usage; 3 unreachable
 * (--once; the live view keeps trying and says so on screen).
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/flags.h"
#include "util/duration.h"
#include "util/mtime.h"

typedef struct top_opts {
    bool once;
    int64_t interval_ms;
    int jobs;      /* rows per job list */
    bool jobs_set; /* --jobs given; else a terminal's height is the limit */
} top_opts_t;

typedef struct top_fetch {
    long status; /* the first failure's HTTP status; -1 unreachable; 0 all fine */
    json_t *err; /* its reply */
} top_fetch_t;

static volatile sig_atomic_t top_stop, top_resized;

static void on_signal(int sig)
{
    (void)sig;
    top_stop = 1;
}

/* SIGWINCH: the terminal changed size; draw again at once, to fit it. */
static void on_winch(int sig)
{
    (void)sig;
    top_resized = 1;
}

/* GET path as JSON; NULL on failure (the first failure kept in f). */
static json_t *fetch(top_fetch_t *f, const char *path, char **raw)
{
    json_t *o = NULL;
    long st;

    if (f->status)
        return NULL; /* one failure is enough for a frame */
    st = cli_http("GET", path, NULL, 0, NULL, raw ? NULL : &o, raw);
    if (st >= 200 && st < 300)
        return raw ? json_true() : o;
    f->status = st < 0 ? -1 : st;
    if (raw && *raw && st >= 300)
        f->err = json_loads(*raw, 0, NULL);
    else
        f->err = o;
    return NULL;
}

/* The value of an unlabelled Prometheus sample, or -1. */
static double metric(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

static long long num(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

static double real(json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

static void job_nodes(json_t *j, char *buf, size_t n)
{
    json_t *t;
    size_t i, used = 0;

    buf[0] = '\0';
    json_array_foreach(json_object_get(j, "tasks"), i, t)
    {
        const char *node = json_string_value(json_object_get(t, "node"));
        if (!node || used >= n || (used && strstr(buf, node)))
            continue;
        used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "," : "", node);
    }
    if (!buf[0])
        snprintf(buf, n, "-");
}

/* ---- fitting the window ---------------------------------------------------------------
 *
 * A frame is a head (title, cluster line) and four sections (queues,
 * running, pending, nodes), each a title, a column header and rows. On a
 * terminal of R rows the sections share what the head, the titles and the
 * footer leave: a section that wants fewer rows than an equal share gets
 * them all, the rest is shared again among the others (water-filling), so
 * one long list cannot push the others off the screen. A cut section's last
 * row says how many rows were left out; a line wider than the terminal is
 * cut at its edge and ends in '>'. rows == 0: no limit (--once, a pipe).
 */

enum { SEC_QUEUES, SEC_RUNNING, SEC_PENDING, SEC_NODES, SEC_COUNT };

#define TOP_HEAD_ROWS 3 /* title, cluster line, blank */
#define TOP_SEC_FIXED 2 /* a section's title and column header */

/* got[i] rows for section i out of avail, wants[i] asked. */
static void top_share(const int wants[SEC_COUNT], int avail, int got[SEC_COUNT])
{
    bool done[SEC_COUNT] = {false};
    int left = SEC_COUNT, sum = 0;

    for (int i = 0; i < SEC_COUNT; i++)
        sum += wants[i];
    if (avail < 0)
        avail = 0;
    for (int i = 0; i < SEC_COUNT; i++)
        got[i] = sum <= avail ? wants[i] : 0;
    if (sum <= avail)
        return;
    for (bool moved = true; moved && left > 0;) {
        moved = false;
        int share = avail / left;
        for (int i = 0; i < SEC_COUNT; i++)
            if (!done[i] && wants[i] <= share) {
                got[i] = wants[i];
                avail -= wants[i];
                done[i] = true;
                left--;
                moved = true;
            }
    }
    for (int i = 0, extra = left ? avail % left : 0; i < SEC_COUNT; i++)
        if (!done[i]) {
            got[i] = avail / left + (extra > 0);
            extra--;
        }
}

/* The rows of one section: up to `rows` of `have` fetched lines (out of
 * `total` in all), the last one saying what was left out when cut. */
typedef struct top_sec {
    int have, total, rows;
} top_sec_t;

static int shown(const top_sec_t *s)
{
    return s->have <= s->rows ? s->have : s->rows > 0 ? s->rows - 1 : 0;
}

static void cut_line(FILE *o, const top_sec_t *s, const char *what)
{
    int n = shown(s);
    if (n < s->have || s->total > s->have)
        fprintf(o, "  ... %d more %s (%d in all)\n", s->total - n, what, s->total);
}

static void jobs_rows(FILE *o, json_t *list, int *left)
{
    json_t *j;
    size_t i;
    char where[128];

    json_array_foreach(json_object_get(list, "jobs"), i, j)
    {
        if (*left <= 0)
            break;
        (*left)--;
        job_nodes(j, where, sizeof where);
        fprintf(o, "  %-7lld %-20.20s %-12.12s %-8s %6lld %5lld  %s\n", num(j, "id"),
                str(j, "name"), str(j, "queue"), str(j, "state"), num(j, "priority"),
                num(j, "gpus"), where);
    }
}

/* One frame into o, fitted to rows x cols (0: no limit; cols is applied by
 * the caller, top_fit). false when the controller could not be read (f
 * says why; the frame then holds that message). */
static bool frame(FILE *o, const top_opts_t *op, top_fetch_t *f, int rows)
{
    char path[128], *mtext = NULL, when[64];
    json_t *status = fetch(f, "/v1/status", NULL);
    json_t *nodes = fetch(f, "/v1/nodes", NULL);
    json_t *queues = fetch(f, "/v1/queues", NULL);
    json_t *mok = fetch(f, "/metrics", &mtext);
    json_t *running, *placed, *pending, *n, *q, *g;
    size_t i, k;
    time_t now = time(NULL);
    struct tm tm;

    snprintf(path, sizeof path, "/v1/jobs?state=running&limit=%d", op->jobs + 1);
    running = fetch(f, path, NULL);
    snprintf(path, sizeof path, "/v1/jobs?state=placed&limit=%d", op->jobs + 1);
    placed = fetch(f, path, NULL);
    snprintf(path, sizeof path, "/v1/jobs?state=pending&limit=%d", op->jobs + 1);
    pending = fetch(f, path, NULL);
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    if (f->status) {
        const char *m =
            json_string_value(json_object_get(json_object_get(f->err, "error"), "message"));
        fprintf(o, "arbiter top  %s\n\n", when);
        if (f->status < 0)
            fprintf(o, "  the controller cannot be reached (ARBITER_URL); retrying\n");
        else
            fprintf(o, "  the controller refused: %ld: %s\n", f->status, m ? m : "(no message)");
        goto out;
    }

    /* cluster */
    int ready = 0, notready = 0, other = 0;
    double gtotal = 0, galloc = 0;
    json_array_foreach(json_object_get(nodes, "nodes"), i, n)
    {
        const char *s = str(n, "state");
        ready += strcmp(s, "Ready") == 0;
        notready += strcmp(s, "NotReady") == 0;
        other += strcmp(s, "Ready") != 0 && strcmp(s, "NotReady") != 0;
        json_array_foreach(json_object_get(n, "gpus"), k, g)
        {
            gtotal += 1;
            galloc += (double)json_integer_value(json_object_get(g, "used_milli")) / 1000.0;
        }
    }
    long long qpending = 0, qrunning = 0;
    double wsum = 0;
    json_array_foreach(json_object_get(queues, "queues"), i, q)
    {
        qpending += num(q, "pending");
        qrunning += num(q, "running");
        wsum += real(q, "weight");
    }
    double frag = metric(mtext, "arbiter_gpu_fragmentation_ratio");
    double dps = metric(mtext, "arbiter_decisions_per_second");
    fprintf(o, "arbiter top  %s  lamport %lld  epoch %lld\n", when, num(status, "lamport"),
            num(status, "epoch"));
    fprintf(o, "cluster  nodes %d ready, %d not ready", ready, notready);
    if (other)
        fprintf(o, ", %d other", other);
    fprintf(o,
            "  |  GPUs %.4g/%.4g allocated (%.0f%%)  |  fragmentation %.2f  |  queue %lld "
            "pending, %lld running  |  %.1f decisions/s\n\n",
            galloc, gtotal, gtotal > 0 ? 100.0 * galloc / gtotal : 0.0, frag < 0 ? 0 : frag,
            qpending, qrunning, dps < 0 ? 0 : dps);

    /* the layout: what each section has, and the rows it gets */
    int nq = (int)json_array_size(json_object_get(queues, "queues"));
    int nr = (int)(json_array_size(json_object_get(running, "jobs")) +
                   json_array_size(json_object_get(placed, "jobs")));
    int np = (int)json_array_size(json_object_get(pending, "jobs"));
    int nn = (int)json_array_size(json_object_get(nodes, "nodes"));
    top_sec_t sec[SEC_COUNT] = {
        [SEC_QUEUES] = {nq, nq, 0},
        [SEC_RUNNING] = {nr < op->jobs ? nr : op->jobs, (int)qrunning > nr ? (int)qrunning : nr, 0},
        [SEC_PENDING] = {np < op->jobs ? np : op->jobs, (int)qpending > np ? (int)qpending : np, 0},
        [SEC_NODES] = {nn, nn, 0},
    };
    int wants[SEC_COUNT], got[SEC_COUNT];
    for (int s = 0; s < SEC_COUNT; s++) /* a cut list, or an empty one, needs one more line */
        wants[s] = sec[s].have + (sec[s].total > sec[s].have || sec[s].have == 0);
    top_share(wants,
              rows > 0 ? rows - TOP_HEAD_ROWS - 1 - SEC_COUNT * TOP_SEC_FIXED - (SEC_COUNT - 1)
                       : 1 << 30,
              got);
    for (int s = 0; s < SEC_COUNT; s++)
        sec[s].rows = got[s];

    /* queues */
    fprintf(o, "QUEUES\n  %-16s %-12s %10s %10s %7s %7s %8s %8s\n", "NAME", "COHORT", "QUOTA GPU",
            "USED GPU", "SHARE", "FAIR", "PENDING", "RUNNING");
    json_array_foreach(json_object_get(queues, "queues"), i, q)
    {
        char quota[32] = "-";
        json_t *nom = json_object_get(q, "nominal");
        if ((int)i >= shown(&sec[SEC_QUEUES]))
            break;
        if (nom)
            snprintf(quota, sizeof quota, "%.4g", real(nom, "nvidia.com/gpu"));
        fprintf(o, "  %-16.16s %-12.12s %10s %10.4g %7.2f %7.2f %8lld %8lld\n", str(q, "name"),
                str(q, "cohort"), quota, real(json_object_get(q, "used"), "nvidia.com/gpu"),
                real(q, "dominant_share"), wsum > 0 ? real(q, "weight") / wsum : 0.0,
                num(q, "pending"), num(q, "running"));
    }
    if (nq == 0 && sec[SEC_QUEUES].rows > 0)
        fprintf(o, "  (no queues yet)\n");
    cut_line(o, &sec[SEC_QUEUES], "queues");

    /* jobs */
    fprintf(o, "\nRUNNING\n  %-7s %-20s %-12s %-8s %6s %5s  %s\n", "ID", "NAME", "QUEUE", "STATE",
            "PRIO", "GPUS", "NODES");
    int left = shown(&sec[SEC_RUNNING]);
    jobs_rows(o, running, &left);
    jobs_rows(o, placed, &left);
    if (nr == 0 && sec[SEC_RUNNING].rows > 0)
        fprintf(o, "  (none)\n");
    cut_line(o, &sec[SEC_RUNNING], "running");
    fprintf(o, "\nPENDING\n  %-7s %-20s %-12s %6s %5s  %s\n", "ID", "NAME", "QUEUE", "PRIO", "GPUS",
            "WHY");
    json_t *j;
    json_array_foreach(json_object_get(pending, "jobs"), i, j)
    {
        if ((int)i >= shown(&sec[SEC_PENDING]))
            break;
        json_t *x;
        snprintf(path, sizeof path, "/v1/jobs/%lld/explain", num(j, "id"));
        x = fetch(f, path, NULL);
        fprintf(o, "  %-7lld %-20.20s %-12.12s %6lld %5lld  %s\n", num(j, "id"), str(j, "name"),
                str(j, "queue"), num(j, "priority"), num(j, "gpus"),
                x ? str(x, "summary") : "(explain failed)");
        json_decref(x);
        if (f->status) { /* a job ended between the list and its explain: fine */
            json_decref(f->err);
            f->err = NULL;
            f->status = 0;
        }
    }
    if (np == 0 && sec[SEC_PENDING].rows > 0)
        fprintf(o, "  (none)\n");
    cut_line(o, &sec[SEC_PENDING], "pending");

    /* nodes */
    fprintf(o, "\nNODES\n  %-20s %-9s %9s %10s\n", "NAME", "STATE", "GPUS", "REPORT AGE");
    json_array_foreach(json_object_get(nodes, "nodes"), i, n)
    {
        int busy = 0;
        char cnt[32], age[32] = "-";
        if ((int)i >= shown(&sec[SEC_NODES]))
            break;
        json_array_foreach(json_object_get(n, "gpus"), k, g) busy +=
            json_array_size(json_object_get(g, "jobs")) > 0;
        snprintf(cnt, sizeof cnt, "%d/%zu", busy, json_array_size(json_object_get(n, "gpus")));
        if (json_is_number(json_object_get(n, "report_age_s")))
            snprintf(age, sizeof age, "%.1fs", real(n, "report_age_s"));
        fprintf(o, "  %-20.20s %-9s %9s %10s\n", str(n, "name"), str(n, "state"), cnt, age);
    }
    if (nn == 0 && sec[SEC_NODES].rows > 0)
        fprintf(o, "  (no nodes; agents register them)\n");
    cut_line(o, &sec[SEC_NODES], "nodes");
out:
    json_decref(status);
    json_decref(nodes);
    json_decref(queues);
    json_decref(running);
    json_decref(placed);
    json_decref(pending);
    if (mok)
        json_decref(mok);
    free(mtext);
    return f->status == 0;
}

/* Write text to out fitted to rows x cols (0: no limit): a line wider than
 * cols is cut and ends in '>'; past rows lines, the last one that fits says
 * how many were left out (a terminal too small for even the sections'
 * titles). No newline after the last line. */
static void top_fit(FILE *out, const char *text, int rows, int cols)
{
    int nlines = 0, line = 0;

    for (const char *p = text; *p; p++)
        nlines += *p == '\n';
    if (text[0] && text[strlen(text) - 1] != '\n')
        nlines++;
    for (const char *p = text; *p && (rows <= 0 || line < rows); line++) {
        const char *e = strchr(p, '\n');
        int len = e ? (int)(e - p) : (int)strlen(p);
        if (line)
            fputc('\n', out);
        if (rows > 0 && line == rows - 1 && nlines > rows) {
            char m[64];
            int k =
                snprintf(m, sizeof m, "... %d more lines: enlarge the terminal", nlines - rows + 1);
            fprintf(out, "%.*s", cols > 0 && k > cols ? cols : k, m);
            break;
        }
        if (cols > 0 && len > cols)
            fprintf(out, "%.*s>", cols - 1, p);
        else
            fwrite(p, 1, (size_t)len, out);
        if (!e)
            break;
        p = e + 1;
    }
}

/* The live loop on a terminal (or plain redraws when stdout is not one). */
static int live(const top_opts_t *op)
{
    struct termios saved, raw;
    bool tty_in = isatty(STDIN_FILENO), tty_out = isatty(STDOUT_FILENO), rawmode = false;
    struct sigaction sa = {.sa_handler = on_signal}, sw = {.sa_handler = on_winch}, old_int,
                     old_term, old_winch;

    sigaction(SIGINT, &sa, &old_int); /* no SA_RESTART: poll() wakes up */
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGWINCH, &sw, &old_winch);
    if (tty_in && tcgetattr(STDIN_FILENO, &saved) == 0) {
        raw = saved;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        rawmode = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    if (tty_out)
        fputs("\033[?1049h\033[?25l", stdout); /* the other screen, no cursor */
    while (!top_stop) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        top_fetch_t f = {0};
        struct winsize ws = {0};
        int rows = 0, cols = 0;
        if (!m)
            break;
        top_resized = 0;
        if (tty_out && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
            rows = ws.ws_row;
            cols = ws.ws_col;
        }
        top_opts_t fo = *op; /* a tall window may show more than 10 rows a list */
        if (!op->jobs_set && rows > fo.jobs)
            fo.jobs = rows;
        frame(m, &fo, &f, rows);
        json_decref(f.err);
        fclose(m);
        if (tty_out) {
            /* the frame, then the footer on the last row: rows - 1 for the frame */
            fputs("\033[H\033[2J", stdout);
            if (text)
                top_fit(stdout, text, rows > 1 ? rows - 1 : rows, cols);
            fputs("\n(q quits)", stdout);
        } else {
            fwrite(text, 1, len, stdout);
            fputs("\n", stdout);
        }
        fflush(stdout);
        free(text);
        /* Wait for the interval, a key, or a signal. */
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int64_t left = op->interval_ms;
        while (left > 0 && !top_stop && !top_resized) {
            int64_t a = arb_mono_ns();
            int r = poll(&p, tty_in ? 1 : 0, (int)(left > 1000 ? 1000 : left));
            if (r > 0) {
                char c;
                ssize_t k = read(STDIN_FILENO, &c, 1);
                if (k == 1 && (c == 'q' || c == 'Q' || c == 3))
                    top_stop = 1;
                else if (k == 0)
                    tty_in = false; /* stdin closed: poll only the clock */
            } else if (r < 0 && errno != EINTR) {
                break;
            }
            left -= (arb_mono_ns() - a) / 1000000;
        }
    }
    if (tty_out)
        fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
    if (rawmode)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGWINCH, &old_winch, NULL);
    return 0;
}

typedef struct top_flags {
    bool once;
    int64_t interval_ns;
    long long jobs;
} top_flags_t;

static const fl_flag_t top_flag_table[] = {
    FL_OPT(top_flags_t, once, "--once", NULL, FL_BOOL, NULL,
           "print one frame and exit (no escape codes)"),
    FL_OPT(top_flags_t, interval_ns, "--interval", NULL, FL_DURATION, "D",
           "how often to redraw, 100ms..1h", .def = "2s", .min = 100000000LL,
           .max = 3600LL * 1000000000LL),
    FL_OPT(top_flags_t, jobs, "--jobs", NULL, FL_INT, "N",
           "rows per list of jobs (default: what fits the terminal, 10 when not one)", .min = 1,
           .max = 1000),
    FL_END,
};
static const fl_verb_t top_verb = {
    .name = "top",
    .summary = "a live view of the cluster, its queues, jobs and nodes (q quits)",
    .flags = top_flag_table};

int cli_top(int argc, char **argv)
{
    top_flags_t fl = {0};
    fl_args_t a = {0};
    int rc;

    if (!fl_run(&top_verb, argc, argv, &fl, &a, &rc))
        return rc;
    top_opts_t op = {.once = fl.once,
                     .interval_ms = fl.interval_ns / 1000000,
                     .jobs = fl.jobs ? (int)fl.jobs : 10,
                     .jobs_set = fl.jobs != 0};
    if (op.once) {
        top_fetch_t f = {0};
        bool ok = frame(stdout, &op, &f, 0);
        rc = ok ? 0 : f.status < 0 ? EXIT_UNREACHABLE : cli_refused(f.status, f.err);
        json_decref(f.err);
        return rc;
    }
    /* The live view redraws: keep each refresh short when a controller is
     * away (ARBITER_RETRY_S still wins when set). */
    setenv("ARBITER_RETRY_S", getenv("ARBITER_RETRY_S") ? getenv("ARBITER_RETRY_S") : "1", 1);
    return live(&op);
}
