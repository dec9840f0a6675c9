/*
 * trace.c: CSV readers for the simulator's node lists, task lists and the
 * published results. A small line splitter (no quoting: the traces have
 * none, and a quote is reported rather than misread) feeds one table-driven
 * reader per file kind; every message names file:line:column and the
 * column's name.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/job.h"
#include "sim/trace.h"
#include "util/buf.h"

#define CSV_MAX_FIELDS 160

typedef struct csv_reader {
    const char *p, *end;
    const char *fname;
    int lineno;
} csv_reader_t;

typedef struct csv_line {
    int lineno;
    int nf;
    const char *f[CSV_MAX_FIELDS];
    int len[CSV_MAX_FIELDS];
    int col[CSV_MAX_FIELDS]; /* 1-based character position */
} csv_line_t;

/* Next non-empty line: 1, 0 at the end, or -EINVAL with text. */
static int csv_next(csv_reader_t *r, csv_line_t *l, arb_err_t *err)
{
    for (;;) {
        const char *s, *e;

        if (r->p >= r->end)
            return 0;
        r->lineno++;
        s = r->p;
        e = memchr(s, '\n', (size_t)(r->end - s));
        if (!e)
            e = r->end;
        r->p = e < r->end ? e + 1 : e;
        if (e > s && e[-1] == '\r')
            e--;
        if (r->lineno == 1 && e - s >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)
            s += 3; /* a UTF-8 byte-order mark */
        if (e == s)
            continue;
        l->lineno = r->lineno;
        l->nf = 0;
        for (const char *f = s;;) {
            const char *c = f;
            while (c < e && *c != ',') {
                if (*c == '"' || *c == '\0' || *c == '\r')
                    return arb_errf(
                        err, -EINVAL, "%s:%d:%d: %s; write plain comma-separated values", r->fname,
                        r->lineno, (int)(c - s) + 1,
                        *c == '"' ? "quoted fields are not supported" : "unexpected control byte");
                c++;
            }
            if (l->nf == CSV_MAX_FIELDS)
                return arb_errf(err, -EINVAL, "%s:%d:%d: more than %d columns", r->fname, r->lineno,
                                (int)(f - s) + 1, CSV_MAX_FIELDS);
            l->f[l->nf] = f;
            l->len[l->nf] = (int)(c - f);
            l->col[l->nf] = (int)(f - s) + 1;
            l->nf++;
            if (c >= e)
                break;
            f = c + 1;
        }
        return 1;
    }
}

static bool field_is(const csv_line_t *l, int i, const char *name)
{
    size_t n = strlen(name);
    return (size_t)l->len[i] == n && memcmp(l->f[i], name, n) == 0;
}

/* A column the reader knows: its name, whether it must be there, and where
 * the header put it (-1 absent). */
typedef struct csv_col {
    const char *name;
    bool required;
    int at;
} csv_col_t;

static int csv_header(csv_reader_t *r, csv_col_t *cols, int ncols, arb_err_t *err)
{
    csv_line_t h;
    int rc = csv_next(r, &h, err);

    if (rc < 0)
        return rc;
    if (rc == 0)
        return arb_errf(err, -EINVAL, "%s:1:1: the file is empty; it needs a header line",
                        r->fname);
    for (int k = 0; k < ncols; k++) {
        cols[k].at = -1;
        for (int i = 0; i < h.nf && cols[k].at < 0; i++)
            if (field_is(&h, i, cols[k].name))
                cols[k].at = i;
        if (cols[k].at < 0 && cols[k].required)
            return arb_errf(err, -EINVAL, "%s:%d:1: the header has no column '%s'", r->fname,
                            h.lineno, cols[k].name);
    }
    return 0;
}

/* The field of column k on line l, or NULL (absent column or short line,
 * which is an error for a required column). */
static int csv_field(const csv_reader_t *r, const csv_line_t *l, const csv_col_t *c, const char **f,
                     int *len, arb_err_t *err)
{
    *f = NULL;
    *len = 0;
    if (c->at < 0)
        return 0;
    if (c->at >= l->nf)
        return arb_errf(err, -EINVAL,
                        "%s:%d:%d: %s: the line ends after %d columns; the header "
                        "has this one at column %d",
                        r->fname, l->lineno, l->col[l->nf - 1] + l->len[l->nf - 1] + 1, c->name,
                        l->nf, c->at + 1);
    *f = l->f[c->at];
    *len = l->len[c->at];
    return 0;
}

static int bad(const csv_reader_t *r, const csv_line_t *l, const csv_col_t *c, const char *f,
               int len, const char *why, arb_err_t *err)
{
    return arb_errf(err, -EINVAL, "%s:%d:%d: %s '%.*s' %s", r->fname, l->lineno, l->col[c->at],
                    c->name, len > 40 ? 40 : len, f, why);
}

/* A whole number in lo..hi; an empty optional field gives dflt. */
static int get_int(const csv_reader_t *r, const csv_line_t *l, const csv_col_t *c, int64_t lo,
                   int64_t hi, int64_t dflt, int64_t *out, arb_err_t *err)
{
    const char *f;
    int len, rc = csv_field(r, l, c, &f, &len, err);
    int64_t v = 0;

    if (rc < 0)
        return rc;
    if (!f || len == 0) {
        if (c->required && f)
            return bad(r, l, c, "", 0, "is empty; give a whole number", err);
        *out = dflt;
        return 0;
    }
    for (int i = 0; i < len; i++) {
        if (f[i] < '0' || f[i] > '9')
            return bad(r, l, c, f, len, "is not a whole number (digits only)", err);
        if (v > (INT64_MAX - (f[i] - '0')) / 10)
            return bad(r, l, c, f, len, "is too large", err);
        v = v * 10 + (f[i] - '0');
    }
    if (v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "is outside %lld..%lld", (long long)lo, (long long)hi);
        return bad(r, l, c, f, len, why, err);
    }
    *out = v;
    return 0;
}

/* A whole number with an optional '-' in lo..hi; empty or absent gives dflt. */
static int get_signed(const csv_reader_t *r, const csv_line_t *l, const csv_col_t *c, int64_t lo,
                      int64_t hi, int64_t dflt, int64_t *out, arb_err_t *err)
{
    const char *f;
    int len, rc = csv_field(r, l, c, &f, &len, err);
    bool neg;
    int64_t v = 0;

    if (rc < 0)
        return rc;
    if (!f || len == 0) {
        *out = dflt;
        return 0;
    }
    neg = f[0] == '-';
    if (len == (int)neg)
        return bad(r, l, c, f, len, "is not a whole number", err);
    for (int i = neg; i < len; i++) {
        if (f[i] < '0' || f[i] > '9')
            return bad(r, l, c, f, len, "is not a whole number", err);
        if (v > (INT64_MAX - (f[i] - '0')) / 10)
            return bad(r, l, c, f, len, "is too large", err);
        v = v * 10 + (f[i] - '0');
    }
    v = neg ? -v : v;
    if (v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "is outside %lld..%lld", (long long)lo, (long long)hi);
        return bad(r, l, c, f, len, why, err);
    }
    *out = v;
    return 0;
}

static int get_str(const csv_reader_t *r, const csv_line_t *l, const csv_col_t *c, char *buf,
                   size_t n, bool nonempty, arb_err_t *err)
{
    const char *f;
    int len, rc = csv_field(r, l, c, &f, &len, err);

    if (rc < 0)
        return rc;
    buf[0] = 0;
    if (!f)
        return 0;
    if (len == 0 && nonempty)
        return bad(r, l, c, "", 0, "is empty", err);
    if ((size_t)len >= n) {
        char why[64];
        snprintf(why, sizeof why, "is longer than %zu characters", n - 1);
        return bad(r, l, c, f, len, why, err);
    }
    memcpy(buf, f, (size_t)len);
    buf[len] = 0;
    return 0;
}

static int grow(void **v, int n, int *cap, size_t size)
{
    if (n < *cap)
        return 0;
    int c = *cap ? *cap * 2 : 1024;
    void *p = realloc(*v, (size_t)c * size);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

/* ---- nodes ------------------------------------------------------------------ */

enum { N_SN, N_CPU, N_MEM, N_GPU, N_MODEL, N_NCOLS };

int sim_nodes_parse(const char *buf, size_t len, const char *fname, sim_nodes_t *out,
                    arb_err_t *err)
{
    csv_reader_t r = {buf, buf + len, fname, 0};
    csv_col_t cols[N_NCOLS] = {
        {"sn", true, -1},  {"cpu_milli", true, -1}, {"memory_mib", true, -1},
        {"gpu", true, -1}, {"model", false, -1},
    };
    sim_nodes_t res = {0};
    csv_line_t l;
    int cap = 0, rc;

    memset(out, 0, sizeof *out);
    if ((rc = csv_header(&r, cols, N_NCOLS, err)) < 0)
        return rc;
    while ((rc = csv_next(&r, &l, err)) > 0) {
        sim_node_t *n;
        int64_t gpus;
        if (grow((void **)&res.v, res.n, &cap, sizeof *res.v) < 0) {
            rc = arb_errf(err, -ENOMEM, "%s: out of memory", fname);
            break;
        }
        n = &res.v[res.n];
        memset(n, 0, sizeof *n);
        memset(n->nvlink, -1, sizeof n->nvlink);
        n->line = l.lineno;
        if ((rc = get_str(&r, &l, &cols[N_SN], n->name, sizeof n->name, true, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[N_CPU], 0, INT64_MAX / 2, 0, &n->cpu_milli, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[N_MEM], 0, INT64_MAX / (1 << 21), 0, &n->memory_mib, err)) <
                0 ||
            (rc = get_int(&r, &l, &cols[N_GPU], 0, 16, 0, &gpus, err)) < 0 ||
            (rc = get_str(&r, &l, &cols[N_MODEL], n->model, sizeof n->model, false, err)) < 0)
            break;
        n->gpus = (int)gpus;
        if (n->gpus > 0 && !n->model[0]) {
            rc = arb_errf(err, -EINVAL,
                          "%s:%d:%d: model is empty but the node has %d GPUs; name "
                          "the GPU model",
                          fname, l.lineno,
                          cols[N_MODEL].at >= 0 && cols[N_MODEL].at < l.nf ? l.col[cols[N_MODEL].at]
                                                                           : 1,
                          n->gpus);
            break;
        }
        res.n++;
    }
    if (rc < 0) {
        free(res.v);
        return rc;
    }
    if (res.n == 0) {
        free(res.v);
        return arb_errf(err, -EINVAL, "%s:%d:1: no nodes after the header", fname, r.lineno);
    }
    *out = res;
    return 0;
}

void sim_nodes_free(sim_nodes_t *n)
{
    free(n->v);
    memset(n, 0, sizeof *n);
}

/* ---- tasks -------------------------------------------------------------------- */

enum {
    T_NAME,
    T_CPU,
    T_MEM,
    T_NGPU,
    T_MILLI,
    T_SPEC,
    T_CREATE,
    T_DELETE,
    T_SCHED,
    T_QOS,
    T_QUEUE,
    T_PRIO,
    T_REPL,
    T_TOPO,
    T_NCOLS
};

/* The topology column: a level (required), or prefer-LEVEL. */
static int get_topo(const csv_reader_t *r, const csv_line_t *l, const csv_col_t *c, sim_task_t *t,
                    arb_err_t *err)
{
    char v[32];
    const char *lv = v;
    arb_topo_level_t level;
    int rc = get_str(r, l, c, v, sizeof v, false, err);

    if (rc < 0 || !v[0])
        return rc;
    t->topo_required = strncmp(v, "prefer-", 7) != 0;
    if (!t->topo_required)
        lv = v + 7;
    if (arb_topo_level_parse(lv, &level) < 0 || level == ARB_TOPO_ANY)
        return bad(r, l, c, v, (int)strlen(v),
                   "is not a topology level; use nvlink, node, rack or block, or prefer-LEVEL",
                   err);
    t->topo_level = (int8_t)level;
    return 0;
}

int sim_tasks_parse(const char *buf, size_t len, const char *fname, sim_tasks_t *out,
                    arb_err_t *err)
{
    csv_reader_t r = {buf, buf + len, fname, 0};
    csv_col_t cols[T_NCOLS] = {
        {"name", true, -1},           {"cpu_milli", true, -1},      {"memory_mib", true, -1},
        {"num_gpu", true, -1},        {"gpu_milli", true, -1},      {"gpu_spec", false, -1},
        {"creation_time", false, -1}, {"deletion_time", false, -1}, {"scheduled_time", false, -1},
        {"qos", false, -1},           {"queue", false, -1},         {"priority", false, -1},
        {"replicas", false, -1},      {"topology", false, -1},
    };
    sim_tasks_t res = {0};
    csv_line_t l;
    int cap = 0, rc;
    const char *base = strrchr(fname, '/');

    memset(out, 0, sizeof *out);
    base = base ? base + 1 : fname;
    snprintf(res.workload, sizeof res.workload, "%s", base);
    {
        size_t bl = strlen(res.workload);
        if (bl > 4 && strcmp(res.workload + bl - 4, ".csv") == 0)
            res.workload[bl - 4] = 0;
    }
    if ((rc = csv_header(&r, cols, T_NCOLS, err)) < 0)
        return rc;
    while ((rc = csv_next(&r, &l, err)) > 0) {
        sim_task_t *t;
        int64_t ng, milli, prio = SIM_PRIO_UNSET, repl = 1;
        if (grow((void **)&res.v, res.n, &cap, sizeof *res.v) < 0) {
            rc = arb_errf(err, -ENOMEM, "%s: out of memory", fname);
            break;
        }
        t = &res.v[res.n];
        memset(t, 0, sizeof *t);
        t->line = l.lineno;
        if ((rc = get_str(&r, &l, &cols[T_NAME], t->name, sizeof t->name, true, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[T_CPU], 0, INT64_MAX / 2, 0, &t->cpu_milli, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[T_MEM], 0, INT64_MAX / (1 << 21), 0, &t->memory_mib, err)) <
                0 ||
            (rc = get_int(&r, &l, &cols[T_NGPU], 0, 16, 0, &ng, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[T_MILLI], 0, 1000, 0, &milli, err)) < 0 ||
            (rc = get_str(&r, &l, &cols[T_SPEC], t->gpu_spec, sizeof t->gpu_spec, false, err)) <
                0 ||
            (rc = get_int(&r, &l, &cols[T_CREATE], 0, INT64_MAX, -1, &t->creation_s, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[T_DELETE], 0, INT64_MAX, -1, &t->deletion_s, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[T_SCHED], 0, INT64_MAX, -1, &t->scheduled_s, err)) < 0 ||
            (rc = get_str(&r, &l, &cols[T_QOS], t->qos, sizeof t->qos, false, err)) < 0 ||
            (rc = get_str(&r, &l, &cols[T_QUEUE], t->queue, sizeof t->queue, false, err)) < 0 ||
            (rc = get_signed(&r, &l, &cols[T_PRIO], -1000000000, 1000000000, SIM_PRIO_UNSET, &prio,
                             err)) < 0 ||
            (rc = get_int(&r, &l, &cols[T_REPL], 1, 4096, 1, &repl, err)) < 0 ||
            (rc = get_topo(&r, &l, &cols[T_TOPO], t, err)) < 0)
            break;
        t->priority = (int32_t)prio;
        t->replicas = (int)repl;
        t->num_gpu = (int)ng;
        t->gpu_milli = (int)milli;
        if (ng > 1 && milli > 0 && milli < 1000) {
            rc = arb_errf(err, -EINVAL,
                          "%s:%d:%d: gpu_milli '%d' with num_gpu %d: a share below 1000 is "
                          "only possible with num_gpu 1",
                          fname, l.lineno, l.col[cols[T_MILLI].at], (int)milli, (int)ng);
            break;
        }
        res.n++;
    }
    if (rc < 0) {
        free(res.v);
        return rc;
    }
    if (res.n == 0) {
        free(res.v);
        return arb_errf(err, -EINVAL, "%s:%d:1: no tasks after the header", fname, r.lineno);
    }
    *out = res;
    return 0;
}

void sim_tasks_free(sim_tasks_t *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* ---- durations ------------------------------------------------------------------- */

enum { D_DUR, D_DELETE, D_SCHED, D_NCOLS };

int sim_durations_parse(const char *buf, size_t len, const char *fname, sim_durations_t *out,
                        arb_err_t *err)
{
    csv_reader_t r = {buf, buf + len, fname, 0};
    csv_col_t cols[D_NCOLS] = {
        {"duration", false, -1}, {"deletion_time", false, -1}, {"scheduled_time", false, -1}};
    sim_durations_t res = {0};
    csv_line_t l;
    int cap = 0, rc;

    memset(out, 0, sizeof *out);
    if ((rc = csv_header(&r, cols, D_NCOLS, err)) < 0)
        return rc;
    if (cols[D_DUR].at < 0 && (cols[D_DELETE].at < 0 || cols[D_SCHED].at < 0))
        return arb_errf(err, -EINVAL,
                        "%s:1:1: the header needs a 'duration' column (seconds), or "
                        "'deletion_time' and 'scheduled_time'",
                        fname);
    while ((rc = csv_next(&r, &l, err)) > 0) {
        int64_t d = -1, del, sch;
        if (cols[D_DUR].at >= 0) {
            if ((rc = get_int(&r, &l, &cols[D_DUR], 0, INT64_MAX / 4000000000LL, -1, &d, err)) < 0)
                break;
        } else {
            if ((rc = get_int(&r, &l, &cols[D_DELETE], 0, INT64_MAX / 4000000000LL, -1, &del,
                              err)) < 0 ||
                (rc = get_int(&r, &l, &cols[D_SCHED], 0, INT64_MAX / 4000000000LL, -1, &sch, err)) <
                    0)
                break;
            if (del >= 0 && sch >= 0 && del >= sch)
                d = del - sch;
        }
        if (d < 0)
            continue; /* a task that never ran: no duration */
        if (grow((void **)&res.v, res.n, &cap, sizeof *res.v) < 0) {
            rc = arb_errf(err, -ENOMEM, "%s: out of memory", fname);
            break;
        }
        res.v[res.n++] = d;
    }
    if (rc == 0 && res.n == 0)
        rc = arb_errf(err, -EINVAL, "%s:%d:1: no durations in the file", fname, r.lineno);
    if (rc < 0) {
        free(res.v);
        return rc;
    }
    *out = res;
    return 0;
}

void sim_durations_free(sim_durations_t *d)
{
    free(d->v);
    memset(d, 0, sizeof *d);
}

/* ---- topology -------------------------------------------------------------------- */

enum { P_NODE, P_RACK, P_BLOCK, P_NVLINK, P_NCOLS };

/*
 * An NVLink spec for a node with ng GPUs: "" leave, "none" no NVLink,
 * "all" one domain, a number G (domains of G consecutive GPUs), or one
 * domain id per GPU separated by '|' ("0|0|1|1", "-" for none).
 */
static int nvlink_spec(const csv_reader_t *r, const csv_line_t *l, const csv_col_t *c,
                       const char *v, const sim_node_t *n, int8_t out[16], arb_err_t *err)
{
    int ng = n->gpus;
    char why[160];

    memset(out, -1, 16);
    if (strcmp(v, "none") == 0)
        return 0;
    if (strcmp(v, "all") == 0) {
        memset(out, 0, (size_t)ng);
        return 0;
    }
    if (!strchr(v, '|') && strcmp(v, "-") != 0) {
        char *end;
        long g = strtol(v, &end, 10);
        if (*end || end == v || g < 1 || g > 16)
            return bad(r, l, c, v, (int)strlen(v),
                       "is not an NVLink spec; use none, all, a domain size (4: GPUs 0-3, 4-7), "
                       "or one domain per GPU (0|0|1|1)",
                       err);
        for (int i = 0; i < ng; i++)
            out[i] = (int8_t)(i / g);
        return 0;
    }
    int ntok = 1;
    for (const char *p = v; *p; p++)
        ntok += *p == '|';
    if (ntok != ng) {
        snprintf(why, sizeof why,
                 "lists %d GPU domains, but node '%s' (line %d of the node list) "
                 "has %d GPUs",
                 ntok, n->name, n->line, ng);
        return bad(r, l, c, v, (int)strlen(v), why, err);
    }
    for (const char *p = v; ntok-- > 0; out++) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char tok[8], *end;
        long d;
        if (len == 0 || len >= sizeof tok)
            return bad(r, l, c, v, (int)strlen(v), "has an empty or overlong entry", err);
        memcpy(tok, p, len);
        tok[len] = 0;
        p += len + (e ? 1 : 0);
        if (strcmp(tok, "-") == 0)
            continue;
        d = strtol(tok, &end, 10);
        if (*end || d < 0 || d > 15)
            return bad(r, l, c, v, (int)strlen(v), "has a domain that is not 0..15 or '-'", err);
        *out = (int8_t)d;
    }
    return 0;
}

int sim_topo_parse(const char *buf, size_t len, const char *fname, sim_nodes_t *nodes,
                   arb_err_t *err)
{
    csv_reader_t r = {buf, buf + len, fname, 0};
    csv_col_t cols[P_NCOLS] = {
        {"node", true, -1}, {"rack", false, -1}, {"block", false, -1}, {"nvlink", false, -1}};
    csv_line_t l;
    int rc, rows = 0;
    sim_node_t *keep; /* the nodes as they were, restored on failure */

    if ((rc = csv_header(&r, cols, P_NCOLS, err)) < 0)
        return rc;
    if (!(keep = malloc((size_t)nodes->n * sizeof *keep)))
        return arb_errf(err, -ENOMEM, "%s: out of memory", fname);
    memcpy(keep, nodes->v, (size_t)nodes->n * sizeof *keep);
    while ((rc = csv_next(&r, &l, err)) > 0) {
        char pat[SIM_NAME_MAX], rack[SIM_LABEL_MAX], block[SIM_LABEL_MAX], nv[128];
        int matched = 0;
        if ((rc = get_str(&r, &l, &cols[P_NODE], pat, sizeof pat, true, err)) < 0 ||
            (rc = get_str(&r, &l, &cols[P_RACK], rack, sizeof rack, false, err)) < 0 ||
            (rc = get_str(&r, &l, &cols[P_BLOCK], block, sizeof block, false, err)) < 0 ||
            (rc = get_str(&r, &l, &cols[P_NVLINK], nv, sizeof nv, false, err)) < 0)
            break;
        for (int i = 0; i < nodes->n && rc == 0; i++) {
            sim_node_t *n = &nodes->v[i];
            if (fnmatch(pat, n->name, 0) != 0)
                continue;
            matched++;
            if (rack[0])
                snprintf(n->rack, sizeof n->rack, "%s", rack);
            if (block[0])
                snprintf(n->block, sizeof n->block, "%s", block);
            if (nv[0])
                rc = nvlink_spec(&r, &l, &cols[P_NVLINK], nv, n, n->nvlink, err);
        }
        if (rc < 0)
            break;
        if (!matched) {
            rc = bad(&r, &l, &cols[P_NODE], pat, (int)strlen(pat),
                     "matches no node of the node list (names, or globs such as 'node-1*')", err);
            break;
        }
        rows++;
    }
    if (rc == 0 && rows == 0)
        rc = arb_errf(err, -EINVAL, "%s:%d:1: no rows after the header", fname, r.lineno);
    if (rc < 0)
        memcpy(nodes->v, keep, (size_t)nodes->n * sizeof *keep);
    free(keep);
    return rc;
}

int sim_topo_load(const char *path, sim_nodes_t *nodes, arb_err_t *err)
{
    char *buf;
    size_t len;
    int rc = sim_read_file(path, &buf, &len, err);
    if (rc < 0)
        return rc;
    rc = sim_topo_parse(buf, len, path, nodes, err);
    free(buf);
    return rc;
}

/* ---- published results ----------------------------------------------------------- */

enum { E_WORKLOAD, E_POLICY, E_TUNE, E_SEED, E_TOTAL, E_NCOLS };

int sim_expect_parse(const char *buf, size_t len, const char *fname, sim_expect_t *out,
                     arb_err_t *err)
{
    csv_reader_t r = {buf, buf + len, fname, 0};
    csv_col_t cols[E_NCOLS + SIM_NPCT] = {
        {"workload", true, -1}, {"sc_policy", true, -1},  {"tune", false, -1},
        {"seed", true, -1},     {"total_gpus", true, -1},
    };
    char names[SIM_NPCT]
              [12]; /* "0".."130"; room for any int, so -Wformat-truncation is quiet at every -O */
    sim_expect_t res = {0};
    csv_line_t l;
    int cap = 0, rc;

    memset(out, 0, sizeof *out);
    for (int k = 0; k < SIM_NPCT; k++) {
        snprintf(names[k], sizeof names[k], "%d", k);
        cols[E_NCOLS + k] = (csv_col_t){names[k], false, -1};
    }
    if ((rc = csv_header(&r, cols, E_NCOLS + SIM_NPCT, err)) < 0)
        return rc;
    while ((rc = csv_next(&r, &l, err)) > 0) {
        sim_expect_row_t *e;
        int64_t seed, total;
        char num[64];
        if (grow((void **)&res.v, res.n, &cap, sizeof *res.v) < 0) {
            rc = arb_errf(err, -ENOMEM, "%s: out of memory", fname);
            break;
        }
        e = &res.v[res.n];
        memset(e, 0, sizeof *e);
        if ((rc = get_str(&r, &l, &cols[E_WORKLOAD], e->workload, sizeof e->workload, true, err)) <
                0 ||
            (rc = get_str(&r, &l, &cols[E_POLICY], e->policy, sizeof e->policy, true, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[E_SEED], 0, INT32_MAX, 0, &seed, err)) < 0 ||
            (rc = get_int(&r, &l, &cols[E_TOTAL], 0, INT32_MAX, 0, &total, err)) < 0)
            break;
        e->seed = (int)seed;
        e->total_gpus = (int)total;
        for (int k = -1; k < SIM_NPCT && rc == 0; k++) {
            const csv_col_t *c = k < 0 ? &cols[E_TUNE] : &cols[E_NCOLS + k];
            double *dst = k < 0 ? &e->tune : &e->v[k];
            char *end;
            *dst = NAN;
            if ((rc = get_str(&r, &l, c, num, sizeof num, false, err)) < 0 || !num[0])
                continue;
            *dst = strtod(num, &end);
            if (*end || end == num || !isfinite(*dst))
                rc = bad(&r, &l, c, num, (int)strlen(num), "is not a number", err);
        }
        if (rc < 0)
            break;
        res.n++;
    }
    if (rc < 0) {
        free(res.v);
        return rc;
    }
    *out = res;
    return 0;
}

void sim_expect_free(sim_expect_t *e)
{
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* ---- files ----------------------------------------------------------------------- */

int sim_read_file(const char *path, char **buf, size_t *len, arb_err_t *err)
{
    FILE *f = fopen(path, "rb");
    arb_buf_t b = {0};
    int rc;

    if (!f)
        return arb_errf(err, -errno, "%s: cannot open: %s", path, strerror(errno));
    rc = arb_buf_read(&b, f);
    fclose(f);
    if (rc < 0) {
        arb_buf_free(&b);
        return rc == -EIO ? arb_errf(err, rc, "%s: read error", path)
                          : arb_errf(err, -ENOMEM, "%s: out of memory", path);
    }
    *len = b.len;
    *buf = arb_buf_take(&b);
    return *buf ? 0 : arb_errf(err, -ENOMEM, "%s: out of memory", path);
}

#define LOADER(fn, type, parse)                                                                    \
    int fn(const char *path, type *out, arb_err_t *err)                                            \
    {                                                                                              \
        char *buf;                                                                                 \
        size_t len;                                                                                \
        int rc = sim_read_file(path, &buf, &len, err);                                             \
        if (rc < 0)                                                                                \
            return rc;                                                                             \
        rc = parse(buf, len, path, out, err);                                                      \
        free(buf);                                                                                 \
        return rc;                                                                                 \
    }

LOADER(sim_nodes_load, sim_nodes_t, sim_nodes_parse)
LOADER(sim_tasks_load, sim_tasks_t, sim_tasks_parse)
LOADER(sim_expect_load, sim_expect_t, sim_expect_parse)
LOADER(sim_durations_load, sim_durations_t, sim_durations_parse)
