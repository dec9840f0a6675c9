/*
 * jobcore.c: a job's compact form, the parsed job as the scheduler holds it
 * (what it asks for: groups and their resources, gang, topology, selectors,
 * affinity, tolerations, models, dataset, priority, queue, limits), plus the
 * controller's dependency and array and the priority class it named. The
 * store record carries it ("core", jobrec.c), so recovery rebuilds the job
 * from it in a few microseconds instead of reading the spec again (the
 * YAML reader was three quarters of a recovered job's cost); the spec text
 * itself is written once at submission under specs/ID and read only when
 * asked for (st_job_spec_text).
 *
 * The form is one line of space-separated tokens, versioned by its first
 * ("a1"), each section opened by a letter so that a drift shows as an
 * error, not as a wrong job:
 *
 *   a1 NAME QUEUE PRIO PREEMPTIBLE GANG_MIN ELASTIC EXCLUSIVE SHARING GRACE LIMIT DATASET CLASS
 *   G n   { NAME REPLICAS GPUS SHARE TOPO REQUIRED GPU_MEM CPU MEM LIM_CPU LIM_MEM EPHEMERAL
 *           e {EXTNAME VALUE} }
 *   S n   { KEY VAL }                         node selector
 *   R n   { WEIGHT e {KEY OP NUM v {VAL}} }   required affinity terms (P: preferred)
 *   T n   { KEY VAL EXISTS EFFECT }           tolerations
 *   M n   { MODEL }                           allowed GPU models
 *   D 0 | D 1 TEXT ARRAY ARRAY_OF TASK COUNT THROTTLE
 *
 * A text is "~" for none (interned id 0) or "=" and its bytes, every byte
 * outside [A-Za-z0-9._/:-] as %XX: the form has no quote, backslash or
 * space in a text, so it needs no escaping inside the JSON record. Names
 * are written as text, never as interned ids (those are this run's).
 * Reading it checks every count and range and finalizes the job as the
 * spec reader does (arb_job_finalize); anything else is an error that names
 * the token, and the caller falls back on the spec or keeps the job as
 * unloadable (recover.c). fuzz/fuzz_jobcore.c feeds it arbitrary text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"
#include "util/textw.h"

/* ---- writing ------------------------------------------------------------------------ */

/* The form is written into the caller's buffer from at on: a space before
 * every token but the first, numbers and texts straight into reserved
 * room (util/textw.h; an snprintf per number was most of a record's cost). */
typedef struct cw {
    arb_buf_t *b;
    size_t at; /* where the form starts in b */
} cw_t;

static void cw_tok(cw_t *w, const char *t)
{
    if (w->b->len > w->at)
        arb_buf_putc(w->b, ' ');
    arb_buf_puts(w->b, t);
}

static void cw_num(cw_t *w, long long v)
{
    arb_buf_t *b = w->b;

    if (arb_buf_reserve(b, 1 + ARB_TW_I64_MAX) < 0)
        return;
    if (b->len > w->at)
        b->p[b->len++] = ' ';
    b->len += arb_tw_i64(b->p + b->len, (int64_t)v);
    b->p[b->len] = '\0';
}

static bool plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '/' || c == ':' || c == '-';
}

static void cw_text(cw_t *w, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    arb_buf_t *b = w->b;
    size_t n = strlen(s);

    if (n > (SIZE_MAX - 2) / 3 || arb_buf_reserve(b, 2 + 3 * n) < 0) {
        b->oom = true;
        return;
    }
    char *d = b->p + b->len;
    if (b->len > w->at)
        *d++ = ' ';
    *d++ = '=';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (plain(c)) {
            *d++ = (char)c;
        } else {
            *d++ = '%';
            *d++ = hex[c >> 4];
            *d++ = hex[c & 15];
        }
    }
    b->len = (size_t)(d - b->p);
    b->p[b->len] = '\0';
}

static void cw_id(cw_t *w, const arb_cluster_t *c, uint32_t id)
{
    if (id == 0)
        cw_tok(w, "~");
    else
        cw_text(w, arb_str(&c->strs, id));
}

static void cw_terms(cw_t *w, const arb_cluster_t *c, const char *tag, const arb_aff_term_t *t,
                     int n)
{
    cw_tok(w, tag);
    cw_num(w, n);
    for (int i = 0; i < n; i++) {
        cw_num(w, t[i].weight);
        cw_num(w, t[i].nexpr);
        for (int e = 0; e < t[i].nexpr; e++) {
            const arb_match_expr_t *x = &t[i].expr[e];
            cw_id(w, c, x->key);
            cw_num(w, (int)x->op);
            cw_num(w, (long long)x->num);
            cw_num(w, x->nvals);
            for (int v = 0; v < x->nvals; v++)
                cw_id(w, c, x->vals[v]);
        }
    }
}

int st_core_put(arb_buf_t *b, const arb_cluster_t *c, const arb_job_t *j, const char *pclass,
                const st_dep_t *dep)
{
    cw_t w = {b, b->len};
    st_dep_parts_t dp;

    cw_tok(&w, "a1");
    cw_text(&w, j->name);
    cw_id(&w, c, j->queue);
    cw_num(&w, j->priority);
    cw_num(&w, j->preemptible);
    cw_num(&w, j->gang_min);
    cw_num(&w, j->elastic);
    cw_num(&w, j->exclusive);
    cw_num(&w, j->gpu_sharing);
    cw_num(&w, j->grace_s);
    cw_num(&w, (long long)j->time_limit_s);
    cw_id(&w, c, j->dataset);
    if (pclass && pclass[0])
        cw_text(&w, pclass);
    else
        cw_tok(&w, "~");
    cw_tok(&w, "G");
    cw_num(&w, j->ngroups);
    for (int i = 0; i < j->ngroups; i++) {
        const arb_tgroup_t *g = &j->groups[i];
        int next = 0;
        cw_text(&w, g->name);
        cw_num(&w, g->replicas);
        cw_num(&w, g->gpus);
        cw_num(&w, g->gpu_share);
        cw_num(&w, (int)g->topo.level);
        cw_num(&w, g->topo.required);
        cw_num(&w, (long long)g->req.gpu_mem_mib);
        cw_num(&w, (long long)g->req.cpu_milli);
        cw_num(&w, (long long)g->req.mem_bytes);
        cw_num(&w, (long long)g->lim.cpu_milli);
        cw_num(&w, (long long)g->lim.mem_bytes);
        cw_num(&w, (long long)g->ephemeral_bytes);
        for (int e = 0; e < ARB_MAX_EXT; e++)
            next += g->req.ext[e] != 0;
        cw_num(&w, next);
        for (int e = 0; e < ARB_MAX_EXT; e++)
            if (g->req.ext[e]) {
                cw_text(&w, e < c->ext.n ? c->ext.name[e] : "");
                cw_num(&w, (long long)g->req.ext[e]);
            }
    }
    cw_tok(&w, "S");
    cw_num(&w, j->nselector);
    for (int i = 0; i < j->nselector; i++) {
        cw_id(&w, c, j->selector[i].key);
        cw_id(&w, c, j->selector[i].val);
    }
    cw_terms(&w, c, "R", j->required, j->nrequired);
    cw_terms(&w, c, "P", j->preferred, j->npreferred);
    cw_tok(&w, "T");
    cw_num(&w, j->ntolerations);
    for (int i = 0; i < j->ntolerations; i++) {
        const arb_toleration_t *t = &j->tolerations[i];
        cw_id(&w, c, t->key);
        cw_id(&w, c, t->val);
        cw_num(&w, t->exists);
        cw_num(&w, t->effect);
    }
    cw_tok(&w, "M");
    cw_num(&w, j->nmodels);
    for (int i = 0; i < j->nmodels; i++)
        cw_id(&w, c, j->models[i]);
    cw_tok(&w, "D");
    if (st_dep_parts(dep, &dp)) {
        cw_num(&w, 1);
        cw_text(&w, dp.text);
        cw_num(&w, dp.array);
        cw_num(&w, (long long)dp.array_of);
        cw_num(&w, dp.task);
        cw_num(&w, dp.count);
        cw_num(&w, dp.throttle);
    } else {
        cw_num(&w, 0);
    }
    return b->oom ? -ENOMEM : 0;
}

char *st_core_text(const arb_cluster_t *c, const arb_job_t *j, const char *pclass,
                   const st_dep_t *dep)
{
    arb_buf_t b = {0};

    if (st_core_put(&b, c, j, pclass, dep) < 0) {
        arb_buf_free(&b);
        return NULL;
    }
    return arb_buf_take(&b);
}

/* ---- reading ------------------------------------------------------------------------ */

/* The most tasks a form may give a job: above anything a spec gives (sbatch's
 * --ntasks is at most 1,000,000), below what an allocation of its task slots
 * could not take; a record over it is read from its spec instead (recover.c). */
#define CORE_MAX_TASKS 10000000

typedef struct cr {
    const char *p, *end;
    const char *tok; /* the current token */
    size_t len;
    int ntok;
    int ntasks; /* the groups' replicas so far (at most CORE_MAX_TASKS) */
    arb_err_t *err;
    int rc;
} cr_t;

static int cr_fail(cr_t *r, const char *what)
{
    if (r->rc == 0)
        r->rc = arb_errf(r->err, -EINVAL, "job core form, token %d ('%.*s'): %s", r->ntok,
                         (int)(r->len < 40 ? r->len : 40), r->tok ? r->tok : "", what);
    return r->rc;
}

static bool cr_next(cr_t *r)
{
    if (r->rc)
        return false;
    while (r->p < r->end && *r->p == ' ')
        r->p++;
    r->tok = r->p;
    while (r->p < r->end && *r->p != ' ')
        r->p++;
    r->len = (size_t)(r->p - r->tok);
    r->ntok++;
    if (r->len == 0) {
        cr_fail(r, "the form ends early");
        return false;
    }
    return true;
}

static long long cr_num(cr_t *r, long long lo, long long hi)
{
    char b[24], *e;

    if (!cr_next(r))
        return 0;
    if (r->len >= sizeof b) {
        cr_fail(r, "not a number");
        return 0;
    }
    memcpy(b, r->tok, r->len);
    b[r->len] = '\0';
    errno = 0;
    long long v = strtoll(b, &e, 10);
    if (*e || e == b || errno) {
        cr_fail(r, "not a number");
        return 0;
    }
    if (v < lo || v > hi) {
        cr_fail(r, "out of range");
        return 0;
    }
    return v;
}

/* a count of items of at least min_tok tokens each: bounded by what is left */
static int cr_count(cr_t *r, int min_tok, int hi)
{
    long long left = (long long)(r->end - r->p) / (2 * min_tok);
    return (int)cr_num(r, 0, left < hi ? left : hi);
}

static void cr_tag(cr_t *r, const char *tag)
{
    if (cr_next(r) && (r->len != strlen(tag) || memcmp(r->tok, tag, r->len) != 0))
        cr_fail(r, tag[0] == 'a' ? "not a job core form this controller reads (a1)"
                                 : "a section is out of place");
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

/* the next text into buf (NUL-terminated, at most max - 1 bytes); *none
 * when it is "~" (buf then "") */
static void cr_text(cr_t *r, char *buf, size_t max, bool *none)
{
    size_t k = 0;

    buf[0] = '\0';
    if (none)
        *none = false;
    if (!cr_next(r))
        return;
    if (r->len == 1 && r->tok[0] == '~') {
        if (none)
            *none = true;
        else
            cr_fail(r, "a text is needed here");
        return;
    }
    if (r->tok[0] != '=') {
        cr_fail(r, "not a text");
        return;
    }
    for (size_t i = 1; i < r->len; i++) {
        int c = (unsigned char)r->tok[i];
        if (c == '%') {
            int hi = i + 2 < r->len ? hexval(r->tok[i + 1]) : -1;
            int lo = hi >= 0 ? hexval(r->tok[i + 2]) : -1;
            if (lo < 0) {
                cr_fail(r, "a bad %XX escape");
                return;
            }
            c = hi * 16 + lo;
            i += 2;
        } else if (!plain((unsigned char)c)) {
            cr_fail(r, "a byte that should be escaped");
            return;
        }
        if (c == 0 || k + 1 >= max) {
            cr_fail(r, c == 0 ? "a NUL in a text" : "a text too long");
            return;
        }
        buf[k++] = (char)c;
    }
    buf[k] = '\0';
}

static uint32_t cr_id(cr_t *r, arb_cluster_t *c)
{
    char b[1024];
    bool none;

    cr_text(r, b, sizeof b, &none);
    if (r->rc || none)
        return 0;
    uint32_t id = arb_intern(&c->strs, b);
    if (!id && r->rc == 0)
        r->rc = arb_errf(r->err, -ENOMEM, "out of memory");
    return id;
}

static int cr_terms(cr_t *r, arb_cluster_t *c, const char *tag, arb_aff_term_t **out, int *nout)
{
    cr_tag(r, tag);
    int n = cr_count(r, 2, 1024);
    if (r->rc || n == 0)
        return r->rc;
    arb_aff_term_t *t = calloc((size_t)n, sizeof *t);
    if (!t)
        return r->rc = arb_errf(r->err, -ENOMEM, "out of memory");
    *out = t;
    *nout = n;
    for (int i = 0; i < n && !r->rc; i++) {
        t[i].weight = (int)cr_num(r, 0, 100);
        int ne = cr_count(r, 4, 1024);
        if (r->rc || ne == 0)
            continue;
        if (!(t[i].expr = calloc((size_t)ne, sizeof *t[i].expr)))
            return r->rc = arb_errf(r->err, -ENOMEM, "out of memory");
        t[i].nexpr = ne;
        for (int e = 0; e < ne && !r->rc; e++) {
            arb_match_expr_t *x = &t[i].expr[e];
            x->key = cr_id(r, c);
            x->op = (arb_sel_op_t)cr_num(r, ARB_OP_IN, ARB_OP_LT);
            x->num = cr_num(r, INT64_MIN, INT64_MAX);
            int nv = cr_count(r, 1, 4096);
            if (r->rc || nv == 0)
                continue;
            if (!(x->vals = calloc((size_t)nv, sizeof *x->vals)))
                return r->rc = arb_errf(r->err, -ENOMEM, "out of memory");
            x->nvals = nv;
            for (int v = 0; v < nv && !r->rc; v++)
                x->vals[v] = cr_id(r, c);
        }
    }
    return r->rc;
}

static void cr_groups(cr_t *r, arb_cluster_t *c, arb_job_t *j)
{
    for (int i = 0; i < j->ngroups && !r->rc; i++) {
        arb_tgroup_t *g = &j->groups[i];
        char gname[ARB_GROUP_NAME_MAX];
        cr_text(r, gname, sizeof gname, NULL);
        if (!r->rc && arb_tgroup_set_name(g, gname) < 0)
            r->rc = arb_errf(r->err, -ENOMEM, "out of memory");
        g->replicas = (int)cr_num(r, 1, CORE_MAX_TASKS - r->ntasks);
        r->ntasks += g->replicas;
        g->gpus = (int)cr_num(r, 0, 16);
        g->gpu_share = (int)cr_num(r, 0, 999);
        g->topo.level = (arb_topo_level_t)cr_num(r, ARB_TOPO_ANY, ARB_TOPO_BLOCK);
        g->topo.required = cr_num(r, 0, 1);
        g->req.gpu_mem_mib = cr_num(r, 0, INT64_MAX);
        g->req.cpu_milli = cr_num(r, 0, INT64_MAX);
        g->req.mem_bytes = cr_num(r, 0, INT64_MAX);
        g->lim.cpu_milli = cr_num(r, 0, INT64_MAX);
        g->lim.mem_bytes = cr_num(r, 0, INT64_MAX);
        g->ephemeral_bytes = cr_num(r, 0, INT64_MAX);
        int next = (int)cr_num(r, 0, ARB_MAX_EXT);
        for (int e = 0; e < next && !r->rc; e++) {
            char name[ARB_EXT_NAME_MAX];
            cr_text(r, name, sizeof name, NULL);
            int64_t v = cr_num(r, 1, INT64_MAX);
            int x = r->rc ? 0 : arb_extnames_index(&c->ext, name, false);
            if (r->rc == 0 && x < 0)
                r->rc =
                    arb_errf(r->err, -EINVAL,
                             "no node offers extended resource '%s' (the job asks for it)", name);
            else if (r->rc == 0)
                g->req.ext[x] = v;
        }
    }
}

int st_core_read(arb_cluster_t *c, const char *text, size_t n, arb_job_t **out, char *pclass,
                 size_t pn, st_dep_t **depp, arb_err_t *err)
{
    cr_t r = {.p = text, .end = text + n, .err = err};
    char name[ARB_JOB_NAME_MAX];
    arb_job_t *j = NULL;
    bool none;

    *out = NULL;
    *depp = NULL;
    cr_tag(&r, "a1");
    cr_text(&r, name, sizeof name, NULL);
    uint32_t queue = cr_id(&r, c);
    int32_t prio = (int32_t)cr_num(&r, INT32_MIN, INT32_MAX);
    bool preemptible = cr_num(&r, 0, 1);
    int gang_min = (int)cr_num(&r, 0, INT32_MAX);
    bool elastic = cr_num(&r, 0, 1), exclusive = cr_num(&r, 0, 1);
    int8_t sharing = (int8_t)cr_num(&r, -1, 1);
    int32_t grace = (int32_t)cr_num(&r, -1, ARB_GRACE_MAX_S);
    int64_t limit = cr_num(&r, 0, INT64_MAX);
    uint32_t dataset = cr_id(&r, c);
    cr_text(&r, pclass, pn, &none);
    cr_tag(&r, "G");
    int ng = cr_count(&r, 13, 4096);
    if (r.rc)
        goto out;
    if (!(j = arb_job_new(name, ng))) {
        r.rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    j->queue = queue;
    j->priority = prio;
    j->preemptible = preemptible;
    j->gang_min = gang_min;
    j->elastic = elastic;
    j->exclusive = exclusive;
    j->gpu_sharing = sharing;
    j->grace_s = grace;
    j->time_limit_s = limit;
    j->dataset = dataset;
    cr_groups(&r, c, j);
    cr_tag(&r, "S");
    int ns = cr_count(&r, 2, 4096);
    if (!r.rc && ns && !(j->selector = calloc((size_t)ns, sizeof *j->selector)))
        r.rc = arb_errf(err, -ENOMEM, "out of memory");
    if (!r.rc)
        j->nselector = ns;
    for (int i = 0; i < ns && !r.rc; i++) {
        j->selector[i].key = cr_id(&r, c);
        j->selector[i].val = cr_id(&r, c);
    }
    if (cr_terms(&r, c, "R", &j->required, &j->nrequired) ||
        cr_terms(&r, c, "P", &j->preferred, &j->npreferred))
        goto out;
    cr_tag(&r, "T");
    int nt = cr_count(&r, 4, 4096);
    if (!r.rc && nt && !(j->tolerations = calloc((size_t)nt, sizeof *j->tolerations)))
        r.rc = arb_errf(err, -ENOMEM, "out of memory");
    if (!r.rc)
        j->ntolerations = nt;
    for (int i = 0; i < nt && !r.rc; i++) {
        arb_toleration_t *t = &j->tolerations[i];
        t->key = cr_id(&r, c);
        t->val = cr_id(&r, c);
        t->exists = cr_num(&r, 0, 1);
        t->effect = (int)cr_num(&r, 0, ARB_TAINT_NO_EXECUTE);
    }
    cr_tag(&r, "M");
    int nm = cr_count(&r, 1, 4096);
    if (!r.rc && nm && !(j->models = calloc((size_t)nm, sizeof *j->models)))
        r.rc = arb_errf(err, -ENOMEM, "out of memory");
    if (!r.rc)
        j->nmodels = nm;
    for (int i = 0; i < nm && !r.rc; i++)
        j->models[i] = cr_id(&r, c);
    cr_tag(&r, "D");
    if (cr_num(&r, 0, 1) == 1 && !r.rc) {
        st_dep_parts_t dp = {0};
        cr_text(&r, dp.text, sizeof dp.text, NULL);
        dp.array = cr_num(&r, 0, 1);
        dp.array_of = (uint64_t)cr_num(&r, 0, INT64_MAX / 2);
        dp.task = (int32_t)cr_num(&r, -1, INT32_MAX);
        dp.count = (int32_t)cr_num(&r, 0, 1000000);
        dp.throttle = (int32_t)cr_num(&r, 0, 1000000);
        if (!r.rc && (r.rc = st_dep_make(&dp, depp, err)) < 0)
            goto out;
    }
    if (r.rc)
        goto out;
    while (r.p < r.end && *r.p == ' ')
        r.p++;
    if (r.p != r.end) {
        r.tok = r.p;
        r.len = (size_t)(r.end - r.p);
        r.ntok++;
        cr_fail(&r, "text after the form's end");
        goto out;
    }
    r.rc = arb_job_finalize(j, err);
out:
    if (r.rc) {
        arb_job_free(j);
        st_dep_free(*depp);
        *depp = NULL;
        return r.rc;
    }
    *out = j;
    return 0;
}
