/*
 * sbatch.c: Slurm batch scripts read as sbatch reads them (wl.h):
 *
 *   - #SBATCH directives count until the first line that is neither blank
 *     nor a comment; later ones are ignored (a warning says so), and so
 *     are ##SBATCH and indented #SBATCH lines (comments to sbatch).
 *   - A directive's words split like a shell's, with '...' and "..."
 *     quotes; a word starting with # ends it (a comment).
 *   - Options are sbatch's, long (--name=value, --name value, a unique
 *     prefix) or short (-N 2, -N2); unknown ones are errors with a "did
 *     you mean". `#SBATCH hetjob` (or packjob) starts the next component
 *     of a heterogeneous job.
 *   - The command line (`arbiter sbatch OPTIONS script`) is read after the
 *     script, so it overrides it.
 *
 * One table lists every option: what it sets, or why it is not honoured
 * (a warning). Values are checked here (times in every Slurm form, memory
 * units, GRES, host lists, arrays); sbatch_job.c turns the result into an
 * Arbiter job.
 */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/sbatch_int.h"
#include "spec/sval.h"

/* ---- values --------------------------------------------------------------------- */

static bool all_digits(const char *s)
{
    return *s && strspn(s, "0123456789") == strlen(s);
}

int sb_time(const char *s, int64_t *secs)
{
    int64_t d = 0, f[3] = {0, 0, 0};
    int nf = 0;
    const char *p = s;
    char *end;

    if (!strcasecmp(s, "UNLIMITED") || !strcasecmp(s, "INFINITE")) {
        *secs = 0;
        return 0;
    }
    const char *dash = strchr(s, '-');
    if (dash) {
        if (dash == s || !isdigit((unsigned char)s[0]))
            return -EINVAL;
        d = strtoll(s, &end, 10);
        if (end != dash || d > 36500)
            return -EINVAL;
        p = dash + 1;
    }
    while (*p) {
        if (nf == 3 || !isdigit((unsigned char)*p))
            return -EINVAL;
        f[nf++] = strtoll(p, &end, 10);
        if (f[nf - 1] > 100000000)
            return -EINVAL;
        p = end;
        if (*p == ':')
            p++;
        else if (*p)
            return -EINVAL;
    }
    if (dash) { /* days-hours[:minutes[:seconds]] */
        if (nf == 0)
            return -EINVAL;
        *secs = d * 86400 + f[0] * 3600 + f[1] * 60 + f[2];
    } else if (nf == 1) { /* minutes */
        *secs = f[0] * 60;
    } else if (nf == 2) { /* minutes:seconds */
        *secs = f[0] * 60 + f[1];
    } else if (nf == 3) { /* hours:minutes:seconds */
        *secs = f[0] * 3600 + f[1] * 60 + f[2];
    } else {
        return -EINVAL;
    }
    if (d > 36500)
        return -EINVAL;
    return 0;
}

int sb_mem_mb(const char *s, int64_t *mb)
{
    char *end;
    double v;

    if (!*s || !(isdigit((unsigned char)*s) || *s == '.'))
        return -EINVAL;
    v = strtod(s, &end);
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case '\0':
        break;
    case 'K':
        mul = 1.0 / 1024, end++;
        break;
    case 'M':
        end++;
        break;
    case 'G':
        mul = 1024, end++;
        break;
    case 'T':
        mul = 1024 * 1024, end++;
        break;
    default:
        return -EINVAL;
    }
    if (*end == 'i')
        end++;
    if (toupper((unsigned char)*end) == 'B')
        end++;
    if (*end || v < 0 || v * mul > 1e12)
        return -EINVAL;
    *mb = (int64_t)(v * mul + 0.999999);
    return 0;
}

/* One hostlist item: prefix[ranges]suffix (one bracket). */
static int host_item(const char *s, size_t n, char (*out)[96], int max, int at)
{
    const char *lb = memchr(s, '[', n);
    if (!lb) {
        if (n == 0 || n >= 96)
            return -EINVAL;
        if (at >= max)
            return -ENOSPC;
        memcpy(out[at], s, n);
        out[at][n] = '\0';
        return 1;
    }
    const char *rb = memchr(lb, ']', n - (size_t)(lb - s));
    if (!rb)
        return -EINVAL;
    size_t pre = (size_t)(lb - s), suf = n - (size_t)(rb - s) - 1;
    if (pre + suf + 24 >= 96)
        return -EINVAL;
    int count = 0;
    const char *p = lb + 1;
    while (p < rb) {
        const char *comma = memchr(p, ',', (size_t)(rb - p));
        const char *e = comma ? comma : rb;
        const char *dash = memchr(p, '-', (size_t)(e - p));
        char a[24], b[24];
        size_t la = (size_t)((dash ? dash : e) - p), lb2 = dash ? (size_t)(e - dash - 1) : la;
        if (la == 0 || la >= sizeof a || lb2 == 0 || lb2 >= sizeof b)
            return -EINVAL;
        memcpy(a, p, la);
        a[la] = '\0';
        memcpy(b, dash ? dash + 1 : p, lb2);
        b[lb2] = '\0';
        if (!all_digits(a) || !all_digits(b))
            return -EINVAL;
        long lo = strtol(a, NULL, 10), hi = strtol(b, NULL, 10);
        if (hi < lo || hi - lo > SB_MAX_HOSTS)
            return -EINVAL;
        int width = (int)la; /* zero padding as written: node[01-10] */
        for (long v = lo; v <= hi; v++) {
            if (at + count >= max)
                return -ENOSPC;
            snprintf(out[at + count], 96, "%.*s%0*ld%.*s", (int)pre, s, width, v, (int)suf, rb + 1);
            count++;
        }
        p = comma ? comma + 1 : rb;
    }
    return count;
}

int sb_hostlist(const char *s, char (*out)[96], int max)
{
    int total = 0, depth = 0;
    const char *start = s;

    for (const char *p = s;; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']')
            depth--;
        if ((*p == ',' && depth == 0) || *p == '\0') {
            if (p > start) {
                int rc = host_item(start, (size_t)(p - start), out, max, total);
                if (rc < 0)
                    return rc;
                total += rc;
            }
            if (!*p)
                break;
            start = p + 1;
        }
    }
    return total ? total : -EINVAL;
}

int sb_array(const char *s, int *ids, int max, int *throttle)
{
    char buf[SB_STR];
    int n = 0;
    char *pct, *save = NULL;

    *throttle = 0;
    snprintf(buf, sizeof buf, "%s", s);
    if ((pct = strchr(buf, '%'))) {
        *pct = '\0';
        if (!all_digits(pct + 1))
            return -EINVAL;
        *throttle = atoi(pct + 1);
    }
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long lo, hi, step = 1;
        char *colon = strchr(tok, ':'), *dash;
        if (colon) {
            *colon = '\0';
            if (!all_digits(colon + 1) || (step = atol(colon + 1)) < 1)
                return -EINVAL;
        }
        dash = strchr(tok, '-');
        if (dash)
            *dash = '\0';
        if (!all_digits(tok) || (dash && !all_digits(dash + 1)))
            return -EINVAL;
        lo = atol(tok);
        hi = dash ? atol(dash + 1) : lo;
        if (hi < lo || hi > 4000000)
            return -EINVAL;
        for (long v = lo; v <= hi; v += step) {
            if (n >= max)
                return -ENOSPC;
            ids[n++] = (int)v;
        }
    }
    return n ? n : -EINVAL;
}

/* ---- the option table ------------------------------------------------------------- */

enum {
    O_IGNORE, /* accepted, not honoured: a warning */
    O_QUIET,  /* accepted, nothing to do (output formatting, verbosity) */
    O_NODES,
    O_NTASKS,
    O_TPN,
    O_CPT,
    O_CPG,
    O_MEM,
    O_MEMCPU,
    O_MEMGPU,
    O_GPUS,
    O_GPN,
    O_GPT,
    O_GRES,
    O_NODELIST,
    O_EXCLUDE,
    O_CONSTRAINT,
    O_EXCLUSIVE,
    O_SWITCHES,
    O_NAME,
    O_PARTITION,
    O_ACCOUNT,
    O_QOS,
    O_TIME,
    O_ARRAY,
    O_DEP,
    O_OUTPUT,
    O_ERROR,
    O_INPUT,
    O_CHDIR,
    O_EXPORT,
    O_REQUEUE,
    O_NOREQUEUE,
    O_PRIORITY,
    O_PARSABLE,
    O_TESTONLY,
    O_WAIT,
    O_WRAP,
    O_TRES_TASK,
    O_NODEFILE,
    O_HOLD,
    O_BEGIN,
};

enum { A_NONE, A_REQ, A_OPT };

typedef struct sb_opt {
    const char *name;
    char short_;
    int arg;
    int what;
    const char *why; /* for O_IGNORE: why it is not honoured */
} sb_opt_t;

static const sb_opt_t opts[] = {
    {"account", 'A', A_REQ, O_ACCOUNT, NULL},
    {"acctg-freq", 0, A_REQ, O_QUIET, NULL},
    {"array", 'a', A_REQ, O_ARRAY, NULL},
    {"batch", 0, A_REQ, O_IGNORE, "node features for the batch step"},
    {"bb", 0, A_REQ, O_IGNORE, "burst buffers"},
    {"bbf", 0, A_REQ, O_IGNORE, "burst buffers"},
    {"begin", 'b', A_REQ, O_BEGIN, NULL},
    {"chdir", 'D', A_REQ, O_CHDIR, NULL},
    {"cluster", 0, A_REQ, O_IGNORE, "one cluster"}, /* sbatch's alias of --clusters */
    {"cluster-constraint", 0, A_REQ, O_IGNORE, "federation"},
    {"clusters", 'M', A_REQ, O_IGNORE, "one cluster"},
    {"comment", 0, A_REQ, O_QUIET, NULL},
    {"constraint", 'C', A_REQ, O_CONSTRAINT, NULL},
    {"container", 0, A_REQ, O_IGNORE, "OCI containers"},
    {"container-id", 0, A_REQ, O_IGNORE, "OCI containers"},
    {"contiguous", 0, A_NONE, O_IGNORE, "contiguous nodes"},
    {"core-spec", 'S', A_REQ, O_IGNORE, "specialized cores"},
    {"cores-per-socket", 0, A_REQ, O_IGNORE, "socket layout"},
    {"cpu-freq", 0, A_REQ, O_IGNORE, "CPU frequency"},
    {"cpus-per-gpu", 0, A_REQ, O_CPG, NULL},
    {"cpus-per-task", 'c', A_REQ, O_CPT, NULL},
    {"deadline", 0, A_REQ, O_IGNORE, "deadlines"},
    {"delay-boot", 0, A_REQ, O_IGNORE, "node reboots"},
    {"dependency", 'd', A_REQ, O_DEP, NULL},
    {"distribution", 'm', A_REQ, O_QUIET, NULL},
    {"error", 'e', A_REQ, O_ERROR, NULL},
    {"exclude", 'x', A_REQ, O_EXCLUDE, NULL},
    {"exclusive", 0, A_OPT, O_EXCLUSIVE, NULL},
    {"export", 0, A_REQ, O_EXPORT, NULL},
    {"export-file", 0, A_REQ, O_IGNORE, "environment files"},
    {"extra", 0, A_REQ, O_QUIET, NULL},
    {"extra-node-info", 'B', A_REQ, O_IGNORE, "socket layout"},
    {"get-user-env", 0, A_OPT, O_IGNORE, "login environments"},
    {"gid", 0, A_REQ, O_IGNORE, "user switching"},
    {"gpu-bind", 0, A_REQ, O_IGNORE, "GPU binding"},
    {"gpu-freq", 0, A_REQ, O_IGNORE, "GPU frequency"},
    {"gpus", 'G', A_REQ, O_GPUS, NULL},
    {"gpus-per-node", 0, A_REQ, O_GPN, NULL},
    {"gpus-per-socket", 0, A_REQ, O_IGNORE, "socket layout"},
    {"gpus-per-task", 0, A_REQ, O_GPT, NULL},
    {"gres", 0, A_REQ, O_GRES, NULL},
    {"gres-flags", 0, A_REQ, O_IGNORE, "GRES binding"},
    {"help", 'h', A_NONE, O_QUIET, NULL},
    {"hint", 0, A_REQ, O_IGNORE, "task binding hints"},
    {"hold", 'H', A_NONE, O_HOLD, NULL},
    {"ignore-pbs", 0, A_NONE, O_QUIET, NULL},
    {"immediate", 'I', A_OPT, O_IGNORE, "immediate allocation"},
    {"input", 'i', A_REQ, O_INPUT, NULL},
    {"job-name", 'J', A_REQ, O_NAME, NULL},
    {"kill-on-invalid-dep", 0, A_REQ, O_QUIET, NULL},
    {"licenses", 'L', A_REQ, O_IGNORE, "licenses"},
    {"mail-type", 0, A_REQ, O_IGNORE, "mail"},
    {"mail-user", 0, A_REQ, O_IGNORE, "mail"},
    {"mcs-label", 0, A_REQ, O_IGNORE, "MCS labels"},
    {"mem", 0, A_REQ, O_MEM, NULL},
    {"mem-bind", 0, A_REQ, O_IGNORE, "memory binding"},
    {"mem-per-cpu", 0, A_REQ, O_MEMCPU, NULL},
    {"mem-per-gpu", 0, A_REQ, O_MEMGPU, NULL},
    {"mincpus", 0, A_REQ, O_IGNORE, "a minimum of CPUs per node"},
    {"network", 0, A_REQ, O_IGNORE, "network options"},
    {"nice", 0, A_OPT, O_IGNORE, "nice values"},
    {"no-kill", 'k', A_OPT, O_IGNORE, "node-failure handling"},
    {"no-requeue", 0, A_NONE, O_NOREQUEUE, NULL},
    {"nodefile", 'F', A_REQ, O_NODEFILE, NULL},
    {"nodelist", 'w', A_REQ, O_NODELIST, NULL},
    {"nodes", 'N', A_REQ, O_NODES, NULL},
    {"ntasks", 'n', A_REQ, O_NTASKS, NULL},
    {"ntasks-per-core", 0, A_REQ, O_IGNORE, "task binding"},
    {"ntasks-per-gpu", 0, A_REQ, O_IGNORE, "task per GPU layout"},
    {"ntasks-per-node", 0, A_REQ, O_TPN, NULL},
    {"tasks", 0, A_REQ, O_NTASKS, NULL},       /* sbatch's alias of --ntasks */
    {"tasks-per-node", 0, A_REQ, O_TPN, NULL}, /* and of --ntasks-per-node */
    {"ntasks-per-socket", 0, A_REQ, O_IGNORE, "socket layout"},
    {"oom-kill-step", 0, A_OPT, O_QUIET, NULL},
    {"open-mode", 0, A_REQ, O_QUIET, NULL},
    {"output", 'o', A_REQ, O_OUTPUT, NULL},
    {"overcommit", 'O', A_NONE, O_IGNORE, "overcommit"},
    {"oversubscribe", 's', A_NONE, O_IGNORE, "node sharing settings"},
    {"parsable", 0, A_NONE, O_PARSABLE, NULL},
    {"partition", 'p', A_REQ, O_PARTITION, NULL},
    {"power", 0, A_REQ, O_IGNORE, "power management"},
    {"prefer", 0, A_REQ, O_IGNORE, "soft features"},
    {"priority", 0, A_REQ, O_PRIORITY, NULL},
    {"profile", 0, A_REQ, O_QUIET, NULL},
    {"propagate", 0, A_OPT, O_IGNORE, "resource limits propagation"},
    {"qos", 'q', A_REQ, O_QOS, NULL},
    {"quiet", 'Q', A_NONE, O_QUIET, NULL},
    {"reboot", 0, A_NONE, O_IGNORE, "node reboots"},
    {"requeue", 0, A_NONE, O_REQUEUE, NULL},
    {"reservation", 0, A_REQ, O_IGNORE, "reservations"},
    {"signal", 0, A_REQ, O_IGNORE, "early signals (the grace period is the job's)"},
    {"sockets-per-node", 0, A_REQ, O_IGNORE, "socket layout"},
    {"spread-job", 0, A_NONE, O_IGNORE, "spreading"},
    {"switches", 0, A_REQ, O_SWITCHES, NULL},
    {"test-only", 0, A_NONE, O_TESTONLY, NULL},
    {"thread-spec", 0, A_REQ, O_IGNORE, "specialized threads"},
    {"threads-per-core", 0, A_REQ, O_IGNORE, "hyper-threading layout"},
    {"time", 't', A_REQ, O_TIME, NULL},
    {"time-min", 0, A_REQ, O_IGNORE, "a flexible time limit"},
    {"tmp", 0, A_REQ, O_IGNORE, "local disk"},
    {"tres-bind", 0, A_REQ, O_IGNORE, "TRES binding"},
    {"tres-per-task", 0, A_REQ, O_TRES_TASK, NULL},
    {"uid", 0, A_REQ, O_IGNORE, "user switching"},
    {"usage", 0, A_NONE, O_QUIET, NULL},
    {"use-min-nodes", 0, A_NONE, O_QUIET, NULL},
    {"verbose", 'v', A_NONE, O_QUIET, NULL},
    {"version", 'V', A_NONE, O_QUIET, NULL},
    {"wait", 'W', A_NONE, O_WAIT, NULL},
    {"wait-all-nodes", 0, A_REQ, O_QUIET, NULL},
    {"wckey", 0, A_REQ, O_IGNORE, "workload keys"},
    {"workdir", 0, A_REQ, O_CHDIR, NULL}, /* --chdir's name before Slurm 17.11 */
    {"wrap", 0, A_REQ, O_WRAP, NULL},
};

#define NOPTS (sizeof opts / sizeof opts[0])

static const sb_opt_t *find_long(const char *name, size_t n, bool *ambiguous)
{
    const sb_opt_t *hit = NULL;
    int hits = 0;

    *ambiguous = false;
    for (size_t i = 0; i < NOPTS; i++) {
        if (strlen(opts[i].name) == n && !memcmp(opts[i].name, name, n))
            return &opts[i];
        if (n >= 3 && !strncmp(opts[i].name, name, n))
            hit = &opts[i], hits++;
    }
    if (hits > 1)
        *ambiguous = true;
    return hits == 1 ? hit : NULL;
}

static const sb_opt_t *find_short(char c)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (opts[i].short_ == c)
            return &opts[i];
    return NULL;
}

static int bad(sbx_t *s, const sb_where_t *w, const char *fmt, const char *a, const char *b)
{
    char msg[400];
    snprintf(msg, sizeof msg, fmt, a, b);
    return arb_errf(s->w->err, -EINVAL, "%s: %s", w->at, msg);
}

static int count_arg(sbx_t *s, const sb_where_t *w, const char *opt, const char *v, int lo, int hi,
                     int *out)
{
    char *end;
    long n;

    if (!v || !*v)
        return bad(s, w, "%s needs a value%s", opt, "");
    errno = 0;
    n = strtol(v, &end, 10);
    if (*end || errno || n < lo || n > hi) {
        char lim[64];
        snprintf(lim, sizeof lim, "; give a count %d..%d", lo, hi);
        char m[160];
        snprintf(m, sizeof m, "%s '%s' is not a count", opt, v);
        return bad(s, w, "%s%s", m, lim);
    }
    *out = (int)n;
    return 0;
}

/* [type:]count, as --gpus, --gpus-per-node, --gpus-per-task take it. */
static int gpu_arg(sbx_t *s, const sb_where_t *w, const char *opt, const char *v, int *count,
                   sb_opts_t *o)
{
    const char *colon = v ? strrchr(v, ':') : NULL;
    char type[64] = "";

    if (colon) {
        size_t n = (size_t)(colon - v);
        if (n >= sizeof type)
            return bad(s, w, "%s '%s': the GPU type is too long", opt, v);
        memcpy(type, v, n);
        type[n] = '\0';
        if (!strncmp(type, "gpu:", 4))
            memmove(type, type + 4, strlen(type + 4) + 1);
        v = colon + 1;
    }
    int rc = count_arg(s, w, opt, v, 0, 4096, count);
    if (rc == 0 && type[0])
        snprintf(o->gpu_type, sizeof o->gpu_type, "%s", type);
    return rc;
}

/* --gres=gpu[:type][:count][,name[:type][:count]...] (count per node). */
static int gres_arg(sbx_t *s, const sb_where_t *w, const char *v, sb_opts_t *o)
{
    char buf[SB_STR], *save = NULL;

    if (!v || !*v)
        return bad(s, w, "--gres needs a value (gpu:2, gpu:a100:2)%s", "", "");
    snprintf(buf, sizeof buf, "%s", v);
    o->ngres = 0;
    o->gpus_per_node = 0;
    o->at_gres = *w;
    if (!strcasecmp(v, "none"))
        return 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *parts[4];
        int np = 0;
        char *psave = NULL;
        char *paren = strchr(tok, '(');
        if (paren) /* gpu:2(S:0-1): socket binding, not honoured */
            *paren = '\0';
        if (!strncmp(tok, "gres/", 5))
            tok += 5;
        for (char *q = strtok_r(tok, ":", &psave); q && np < 4; q = strtok_r(NULL, ":", &psave))
            parts[np++] = q;
        if (np == 0 || np > 3)
            return bad(s, w, "--gres '%s': use NAME[:TYPE][:COUNT] (gpu:a100:2)%s", v, "");
        int64_t count = 1;
        const char *type = NULL;
        if (np >= 2 && all_digits(parts[np - 1])) {
            count = strtoll(parts[np - 1], NULL, 10);
            if (np == 3)
                type = parts[1];
        } else if (np >= 2) {
            type = parts[1];
            if (np == 3)
                return bad(s, w, "--gres '%s': the count must be a number%s", v, "");
        }
        if (!strcmp(parts[0], "gpu")) {
            if (count > 4096)
                return bad(s, w, "--gres '%s': too many GPUs per node%s", v, "");
            o->gpus_per_node = (int)count;
            if (type)
                snprintf(o->gpu_type, sizeof o->gpu_type, "%s", type);
            continue;
        }
        if (o->ngres == 8)
            return bad(s, w, "--gres '%s': more than 8 kinds%s", v, "");
        if (strlen(parts[0]) >= sizeof o->gres_name[0] - 6)
            return bad(s, w, "--gres '%s': the name is too long%s", v, "");
        snprintf(o->gres_name[o->ngres], sizeof o->gres_name[0], "gres/%s", parts[0]);
        o->gres_count[o->ngres++] = count;
    }
    return 0;
}

static void copy(char *dst, size_t n, const char *v)
{
    snprintf(dst, n, "%s", v ? v : "");
}

int sb_option(sbx_t *s, const char *opt, const char *val, const sb_where_t *w)
{
    const sb_opt_t *o = NULL;
    bool amb = false;
    sb_job_t *j = s->job;
    sb_opts_t *c = &j->comp[s->comp];
    int rc = 0;
    int64_t v64;

    if (opt[0] == '-' && opt[1] == '-')
        o = find_long(opt + 2, strlen(opt + 2), &amb);
    else if (opt[0] == '-' && opt[1] && !opt[2])
        o = find_short(opt[1]);
    if (!o) {
        const char *names[NOPTS + 1];
        for (size_t i = 0; i < NOPTS; i++)
            names[i] = opts[i].name;
        names[NOPTS] = NULL;
        const char *near = opt[1] == '-' ? sv_suggest(opt + 2, strlen(opt + 2), names) : NULL;
        if (amb)
            return bad(s, w, "%s is ambiguous (a prefix of several sbatch options)%s", opt, "");
        if (near)
            return bad(s, w, "unknown sbatch option '%s'; did you mean '--%s'?", opt, near);
        return bad(s, w, "unknown sbatch option '%s'%s (see `man sbatch`)", opt, "");
    }
    if (o->arg == A_REQ && !val)
        return bad(s, w, "--%s needs a value%s", o->name, "");
    if (o->arg == A_NONE && val)
        return bad(s, w, "--%s takes no value (got '%s')", o->name, val);
    switch (o->what) {
    case O_IGNORE:
        wl_warn(s->w, "%s: --%s is not honoured (Arbiter has no %s); ignored", w->at, o->name,
                o->why);
        break;
    case O_QUIET:
        break;
    case O_NODES: {
        const char *dash = strchr(val, '-');
        char lo[32];
        copy(lo, sizeof lo, val);
        if (dash && dash - val < (ptrdiff_t)sizeof lo)
            lo[dash - val] = '\0';
        if ((rc = count_arg(s, w, "--nodes", lo, 1, 100000, &c->nodes)) < 0)
            return rc;
        c->nodes_max = c->nodes;
        if (dash &&
            (rc = count_arg(s, w, "--nodes", dash + 1, c->nodes, 100000, &c->nodes_max)) < 0)
            return rc;
        if (c->nodes_max > c->nodes)
            wl_warn(s->w, "%s: --nodes %s: Arbiter allocates the minimum, %d", w->at, val,
                    c->nodes);
        c->at_nodes = *w;
        break;
    }
    case O_NTASKS:
        return count_arg(s, w, "--ntasks", val, 1, 1000000, &c->ntasks);
    case O_TPN:
        return count_arg(s, w, "--ntasks-per-node", val, 1, 100000, &c->ntasks_per_node);
    case O_CPT:
        return count_arg(s, w, "--cpus-per-task", val, 1, 100000, &c->cpus_per_task);
    case O_CPG:
        return count_arg(s, w, "--cpus-per-gpu", val, 1, 100000, &c->cpus_per_gpu);
    case O_MEM:
        if (sb_mem_mb(val, &v64) < 0)
            return bad(s, w, "--mem '%s': give MiB, or a size with K, M, G, T (e.g. 64G)%s", val,
                       "");
        c->mem_mb = v64;
        c->mem_all = v64 == 0;
        c->mem_per_cpu_mb = c->mem_per_gpu_mb = 0;
        break;
    case O_MEMCPU:
    case O_MEMGPU:
        if (sb_mem_mb(val, &v64) < 0)
            return bad(s, w, "%s '%s': give MiB, or a size with K, M, G, T (e.g. 4G)",
                       o->what == O_MEMCPU ? "--mem-per-cpu" : "--mem-per-gpu", val);
        c->mem_mb = 0;
        c->mem_all = false;
        if (o->what == O_MEMCPU)
            c->mem_per_cpu_mb = v64, c->mem_per_gpu_mb = 0;
        else
            c->mem_per_gpu_mb = v64, c->mem_per_cpu_mb = 0;
        break;
    case O_GPUS:
        return gpu_arg(s, w, "--gpus", val, &c->gpus, c);
    case O_GPN:
        return gpu_arg(s, w, "--gpus-per-node", val, &c->gpus_per_node, c);
    case O_GPT:
        return gpu_arg(s, w, "--gpus-per-task", val, &c->gpus_per_task, c);
    case O_TRES_TASK: {
        const char *g = strstr(val, "gres/gpu");
        if (!g)
            return bad(s, w, "--tres-per-task '%s': only gres/gpu[:type]:N is honoured%s", val, "");
        g += 8;
        return gpu_arg(s, w, "--tres-per-task", *g == ':' ? g + 1 : "1", &c->gpus_per_task, c);
    }
    case O_GRES:
        return gres_arg(s, w, val, c);
    case O_NODELIST:
    case O_EXCLUDE: {
        char(*h)[96] = calloc(SB_MAX_HOSTS, 96);
        if (!h)
            return arb_errf(s->w->err, -ENOMEM, "out of memory");
        int n = sb_hostlist(val, h, SB_MAX_HOSTS);
        if (n < 0) {
            free(h);
            return bad(s, w, "'%s' is not a host list (node[01-04,07],gpu5)%s", val, "");
        }
        if (o->what == O_NODELIST) {
            free(c->hosts);
            c->hosts = h, c->nhosts = n;
        } else {
            free(c->exclude);
            c->exclude = h, c->nexclude = n;
        }
        break;
    }
    case O_NODEFILE:
        return bad(s, w, "--nodefile '%s': give the hosts with --nodelist instead%s", val, "");
    case O_CONSTRAINT:
        copy(c->constraint, sizeof c->constraint, val);
        c->at_constraint = *w;
        break;
    case O_EXCLUSIVE:
        c->exclusive = true;
        if (val && *val)
            copy(c->exclusive_how, sizeof c->exclusive_how, val);
        break;
    case O_SWITCHES: {
        char b[32];
        copy(b, sizeof b, val);
        char *at = strchr(b, '@');
        if (at)
            *at = '\0';
        return count_arg(s, w, "--switches", b, 1, 1000, &c->switches);
    }
    case O_NAME:
        copy(j->name, sizeof j->name, val);
        break;
    case O_PARTITION:
        copy(j->partition, sizeof j->partition, val);
        break;
    case O_ACCOUNT:
        copy(j->account, sizeof j->account, val);
        break;
    case O_QOS:
        copy(j->qos, sizeof j->qos, val);
        break;
    case O_TIME:
        if (sb_time(val, &j->time_s) < 0)
            return bad(s, w,
                       "--time '%s': use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or "
                       "UNLIMITED%s",
                       val, "");
        j->at_time = *w;
        break;
    case O_ARRAY:
        copy(j->array, sizeof j->array, val);
        j->at_array = *w;
        break;
    case O_DEP:
        copy(j->dependency, sizeof j->dependency, val);
        j->at_dep = *w;
        break;
    case O_OUTPUT:
        copy(j->output, sizeof j->output, val);
        break;
    case O_ERROR:
        copy(j->error, sizeof j->error, val);
        break;
    case O_INPUT:
        copy(j->input, sizeof j->input, val);
        break;
    case O_CHDIR:
        copy(j->chdir, sizeof j->chdir, val);
        break;
    case O_EXPORT:
        copy(j->export_, sizeof j->export_, val);
        break;
    case O_REQUEUE:
        j->requeue = true, j->no_requeue = false;
        break;
    case O_NOREQUEUE:
        j->no_requeue = true, j->requeue = false;
        break;
    case O_PRIORITY: {
        int p;
        if ((rc = count_arg(s, w, "--priority", val, 0, INT_MAX, &p)) < 0)
            return rc;
        j->priority = p;
        break;
    }
    case O_PARSABLE:
        j->parsable = true;
        break;
    case O_TESTONLY:
        j->test_only = true;
        break;
    case O_WAIT:
        j->wait = true;
        break;
    case O_WRAP:
        copy(j->wrap, sizeof j->wrap, val);
        break;
    case O_HOLD:
        wl_warn(s->w, "%s: --hold is not honoured: the job is queued at once", w->at);
        break;
    case O_BEGIN:
        wl_warn(s->w, "%s: --begin %s is not honoured: the job is queued at once", w->at, val);
        break;
    }
    return rc;
}

int sb_argv(sbx_t *s, int argc, char **argv, const sb_where_t *w, int *consumed)
{
    int i, rc;

    for (i = 0; i < argc; i++) {
        char *a = argv[i];
        if (a[0] != '-' || !a[1])
            break;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[1] == '-') {
            char name[96];
            const char *eq = strchr(a, '=');
            size_t n = eq ? (size_t)(eq - a) : strlen(a);
            if (n >= sizeof name)
                return bad(s, w, "option '%.60s...' is too long%s", a, "");
            memcpy(name, a, n);
            name[n] = '\0';
            bool amb;
            const sb_opt_t *o = find_long(name + 2, n - 2, &amb);
            const char *val = eq ? eq + 1 : NULL;
            if (o && !eq && o->arg == A_REQ) {
                if (i + 1 >= argc)
                    return bad(s, w, "--%s needs a value%s", o->name, "");
                val = argv[++i];
            }
            if ((rc = sb_option(s, name, val, w)) < 0)
                return rc;
            continue;
        }
        /* short options: -N2, -N 2, -vv, -HW */
        for (char *p = a + 1; *p; p++) {
            const sb_opt_t *o = find_short(*p);
            char opt[3] = {'-', *p, 0};
            if (o && o->arg == A_REQ) {
                const char *val = p[1] ? p + 1 : NULL;
                if (val && *val == '=')
                    val++;
                if (!val) {
                    if (i + 1 >= argc)
                        return bad(s, w, "-%s needs a value%s", opt + 1, "");
                    val = argv[++i];
                }
                if ((rc = sb_option(s, opt, val, w)) < 0)
                    return rc;
                break;
            }
            if ((rc = sb_option(s, opt, NULL, w)) < 0)
                return rc;
        }
    }
    *consumed = i;
    return 0;
}

void sb_job_init(sb_job_t *j)
{
    memset(j, 0, sizeof *j);
    j->ncomp = 1;
    j->time_s = -1;
    j->priority = INT_MIN;
}

void sb_job_free(sb_job_t *j)
{
    for (int i = 0; i < SB_MAX_HET; i++) {
        free(j->comp[i].hosts);
        free(j->comp[i].exclude);
        j->comp[i].hosts = j->comp[i].exclude = NULL;
    }
}

/* ---- the script ------------------------------------------------------------------- */

/* Split a directive's text into words (shell-like quotes; # starts a
 * comment at a word's start). Words point into buf. */
static int split_words(char *buf, char **words, int max)
{
    int n = 0;
    char *r = buf, *wp = buf;

    for (;;) {
        while (*r == ' ' || *r == '\t' || *r == '\r')
            r++;
        if (!*r || *r == '#')
            break;
        if (n == max)
            return -ENOSPC;
        words[n++] = wp;
        char q = 0;
        while (*r && (q || (*r != ' ' && *r != '\t' && *r != '\r'))) {
            if (!q && (*r == '"' || *r == '\'')) {
                q = *r++;
                continue;
            }
            if (q && *r == q) {
                q = 0;
                r++;
                continue;
            }
            if (*r == '\\' && r[1] && q != '\'') {
                r++;
            }
            *wp++ = *r++;
        }
        if (q)
            return -EINVAL;
        bool end = !*r;
        *wp++ = '\0';
        if (end)
            break;
        r++;
    }
    return n;
}

int wl_sbatch(wl_t *w, const char *buf, size_t len, const wl_sbatch_cli_t *cli)
{
    sb_job_t *job = calloc(1, sizeof *job);
    sbx_t s = {.w = w, .job = job};
    const char *p = buf, *end = buf + len;
    int line = 0, rc = 0;
    bool body = false, late = false;

    if (!job)
        return arb_errf(w->err, -ENOMEM, "out of memory");
    sb_job_init(job);
    if (len > WL_MAX_SCRIPT) {
        rc = arb_errf(w->err, -EFBIG, "%s: a batch script of %zu bytes; the most is %d", w->file,
                      len, WL_MAX_SCRIPT);
        goto out;
    }
    if (memchr(buf, '\0', len)) {
        rc = arb_errf(w->err, -EINVAL, "%s: a NUL byte; a batch script is text", w->file);
        goto out;
    }
    if (len < 2 || buf[0] != '#' || buf[1] != '!') {
        rc = arb_errf(w->err, -EINVAL,
                      "%s:1: this does not look like a batch script: the first line must start "
                      "with #! and the interpreter (#!/bin/bash), as sbatch requires",
                      w->file);
        goto out;
    }
    while (p < end && rc == 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        const char *l = p;
        p = nl ? nl + 1 : end;
        line++;
        size_t i = 0;
        while (i < n && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r'))
            i++;
        if (i == n)
            continue;
        if (n - i >= 7 && !memcmp(l + i, "#SBATCH", 7) && i == 0) {
            if (body) {
                if (!late)
                    wl_warn(w,
                            "%s:%d: #SBATCH after the first command is ignored (sbatch reads "
                            "directives only before it)",
                            w->file, line);
                late = true;
                continue;
            }
            char text[4096], *words[128];
            sb_where_t at;
            snprintf(at.at, sizeof at.at, "%s:%d", w->file, line);
            if (n - 7 >= sizeof text) {
                rc = arb_errf(w->err, -EINVAL, "%s: the directive is too long", at.at);
                break;
            }
            memcpy(text, l + 7, n - 7);
            text[n - 7] = '\0';
            if (text[0] && text[0] != ' ' && text[0] != '\t' && text[0] != '\r') {
                /* #SBATCHfoo: not a directive to sbatch */
                continue;
            }
            int nw = split_words(text, words, 128);
            if (nw < 0) {
                rc = arb_errf(w->err, -EINVAL, "%s: %s", at.at,
                              nw == -ENOSPC ? "more than 128 words in one directive"
                                            : "an unterminated quote");
                break;
            }
            if (nw >= 1 && (!strcmp(words[0], "hetjob") || !strcmp(words[0], "packjob"))) {
                if (job->ncomp == SB_MAX_HET) {
                    rc = arb_errf(w->err, -EINVAL, "%s: more than %d hetjob components", at.at,
                                  SB_MAX_HET);
                    break;
                }
                s.comp = job->ncomp++;
                continue;
            }
            int used = 0;
            if ((rc = sb_argv(&s, nw, words, &at, &used)) < 0)
                break;
            if (used < nw)
                rc = arb_errf(w->err, -EINVAL,
                              "%s: '%s' is not an option; a directive holds sbatch options "
                              "(#SBATCH --nodes=2)",
                              at.at, words[used]);
            continue;
        }
        if (l[i] == '#')
            continue; /* a comment, ##SBATCH, an indented #SBATCH */
        body = true;
    }
    if (rc == 0 && cli && cli->argc) {
        sb_where_t at = {.at = "command line"};
        int used = 0;
        s.comp = 0;
        rc = sb_argv(&s, cli->argc, cli->argv, &at, &used);
        if (rc == 0 && used < cli->argc)
            rc = arb_errf(w->err, -EINVAL, "command line: '%s' is not an sbatch option",
                          cli->argv[used]);
    }
    if (rc == 0)
        rc = sb_build(&s, w->file, buf, len, cli);
out:
    sb_job_free(job);
    free(job);
    return rc;
}

int wl_sbatch_nopts(int argc, char **argv)
{
    int i;

    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1])
            break;
        if (!strcmp(a, "--"))
            return i;
        if (a[1] == '-') {
            bool amb;
            const char *eq = strchr(a, '=');
            const sb_opt_t *o = find_long(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2), &amb);
            if (o && !eq && o->arg == A_REQ)
                i++;
            continue;
        }
        for (const char *p = a + 1; *p; p++) {
            const sb_opt_t *o = find_short(*p);
            if (o && o->arg == A_REQ) {
                if (!p[1])
                    i++;
                break;
            }
        }
    }
    return i > argc ? argc : i;
}
