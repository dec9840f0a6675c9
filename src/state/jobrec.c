/*
 * jobrec.c: a job's store record (st_job_record), the JSON text written at
 * every persisted change of a job (st_job_save): straight into a buffer,
 * without a jansson tree. Building the tree (some 25 values, the tasks and
 * the allocation) and dumping it cost more than the rest of a save; a busy
 * controller writes a record three or four times per job (submitted,
 * placed, running, ended).
 *
 * The text is what jansson's json_dumps(JSON_COMPACT) gave for the same
 * values in the same order, byte for byte (tests/unit/test_state.c,
 * test_record_text: a record re-encoded by jansson is the same text), so
 * recovery (recover.c) reads it as before. Strings are escaped as jansson
 * escapes them (quote, backslash, control characters; UTF-8 as it is); a
 * byte that is not UTF-8 is written as U+FFFD (jansson refused the whole
 * record, and the save it was for was never stored: a message cut inside
 * a multi-byte character did that), so a record fails only for memory.
 * The rare extras (a pending shrink: resize.c; a service's fields:
 * service.c) still come as a jansson object, appended after the rest.
 *
 * Read back (st_jobrec_read, below): a small reader over the same text,
 * member by member, into st_jobrec_t (jobrec.h), the texts decoded into one
 * buffer per record and only command and env (JSON values of any shape)
 * through jansson. It takes only what this file writes (the members above,
 * each of its type, strings jansson would take); anything else, the extras
 * included, goes to jansson as before (st_jobrec_from_json), so a record
 * reads the same whichever way it went.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/jobrec.h"
#include "state/state_int.h"
#include "util/jsonw.h"
#include "util/textw.h"
#include "util/utf8.h"

/* The record is written into one buffer; numbers and strings by the
 * shared writers (util/textw.h), which give snprintf's and jansson's bytes. */
typedef arb_buf_t rec_t;

static void put(rec_t *r, const char *s, size_t n)
{
    arb_buf_put(r, s, n);
}

static void putc1(rec_t *r, char c)
{
    arb_buf_putc(r, c);
}

/* a comma before a value or key, unless it opens its object or array or
 * is the value of the key just written */
static void sep(rec_t *r)
{
    char last = r->len ? r->p[r->len - 1] : '{';
    if (last != '{' && last != '[' && last != ':')
        putc1(r, ',');
}

static void num(rec_t *r, long long v)
{
    sep(r);
    arb_buf_i64(r, (int64_t)v);
}

/* A byte that is not UTF-8 (a text from outside) is written as U+FFFD:
 * the record stays whole (see the top of the file). */
static void str(rec_t *r, const char *s, size_t n)
{
    sep(r);
    (void)arb_buf_jstr(r, s, n, true);
}

/* k is one of this file's literals, plain ASCII: nothing to escape */
static void key(rec_t *r, const char *k)
{
    size_t n = strlen(k);

    sep(r);
    if (arb_buf_reserve(r, n + 3) < 0)
        return;
    char *d = r->p + r->len;
    d[0] = '"';
    memcpy(d + 1, k, n);
    d[n + 1] = '"';
    d[n + 2] = ':';
    r->len += n + 3;
    r->p[r->len] = '\0';
}

static void lit(rec_t *r, const char *text)
{
    sep(r);
    put(r, text, strlen(text));
}

static void boolean(rec_t *r, bool v)
{
    lit(r, v ? "true" : "false");
}

static void cstr(rec_t *r, const char *v)
{
    str(r, v, strlen(v));
}

/* a jansson value, as jansson writes it (command and env: an array and an
 * object, written by jsonw.c; anything else a stored record held, by
 * jansson itself) */
static void raw(rec_t *r, const json_t *v)
{
    sep(r);
    if (json_is_array(v) || json_is_object(v)) {
        if (arb_jsonw_compact(r, v) == -EINVAL)
            r->oom = true; /* what json_dumps refuses fails the record, as it did */
        return;
    }
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) {
        r->oom = true;
        return;
    }
    put(r, t, strlen(t));
    free(t);
}

char *st_job_record(st_t *s, st_job_t *sj)
{
    const arb_job_t *j = sj->j;
    rec_t r = {0};
    json_t *extra;

    /* room for the whole record at once, as a rule (its spec's quotes escaped) */
    arb_buf_reserve(&r, 512 + 2 * sj->speclen);
    putc1(&r, '{');
    key(&r, "id"), num(&r, (long long)sj->id);
    key(&r, "team"), cstr(&r, sj->team);
    key(&r, "owner"), cstr(&r, sj->owner);
    key(&r, "yaml"), boolean(&r, sj->yaml);
    if (sj->spec)
        key(&r, "spec"), str(&r, sj->spec, sj->speclen);
    if (!sj->svc && !sj->svc_of) { /* the compact form: recovery reads it, not the spec */
        /* written in place: the form has nothing JSON escapes (jobcore.c) */
        key(&r, "core"), putc1(&r, '"');
        st_core_put(&r, &s->cluster, j, arb_str(&s->names, sj->pclass), sj->dep);
        putc1(&r, '"');
        if (sj->command)
            key(&r, "command"), raw(&r, sj->command);
        if (sj->env)
            key(&r, "env"), raw(&r, sj->env);
        if (!sj->restartable)
            key(&r, "restartable"), boolean(&r, false);
    }
    key(&r, "state"), cstr(&r, arb_job_state_name(j->state));
    key(&r, "version"), num(&r, (long long)sj->version);
    key(&r, "lamport_submit"), num(&r, (long long)sj->lamport_submit);
    key(&r, "lamport_update"), num(&r, (long long)sj->lamport_update);
    key(&r, "attempt"), num(&r, (long long)sj->attempt);
    key(&r, "epoch"), num(&r, (long long)sj->epoch);
    key(&r, "submit_ms"), num(&r, (long long)sj->submit_ms);
    key(&r, "start_ms"), num(&r, (long long)sj->start_ms);
    key(&r, "end_ms"), num(&r, (long long)sj->end_ms);
    key(&r, "delivered"), boolean(&r, sj->delivered);
    key(&r, "stop"), boolean(&r, sj->stop);
    key(&r, "message"), cstr(&r, st_job_msg(sj));
    key(&r, "tasks"), lit(&r, "[");
    for (int t = 0; t < sj->ntasks; t++) { /* [state, exit code or null, node it last had] */
        const st_task_t *tk = &sj->tasks[t];
        lit(&r, "[");
        num(&r, (int)tk->state);
        if (tk->has_exit)
            num(&r, (int)tk->exit_code);
        else
            lit(&r, "null");
        if (tk->node1 && tk->node1 <= s->cluster.nnodes)
            cstr(&r, arb_node_name(&s->cluster, &s->cluster.nodes[tk->node1 - 1]));
        putc1(&r, ']');
    }
    putc1(&r, ']');
    key(&r, "alloc"), lit(&r, "[");
    if (j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING)
        for (int t = 0; t < j->nalloc; t++) { /* [node, GPU mask, milli, MiB] */
            const arb_task_alloc_t *a = &j->alloc[t];
            lit(&r, "[");
            if (a->node == ARB_NO_NODE) { /* ended, its room already freed */
                lit(&r, "null"), num(&r, 0), num(&r, 0), num(&r, 0);
            } else {
                cstr(&r, arb_node_name(&s->cluster, &s->cluster.nodes[a->node]));
                num(&r, (int)a->gpu_mask), num(&r, (int)a->gpu_milli), num(&r, (int)a->gpu_mem_mib);
            }
            putc1(&r, ']');
        }
    putc1(&r, ']');
    /* The priority resolved at submission: recovery keeps it even when its
     * priorityClassName has left the config since (recover.c). */
    key(&r, "priority"), num(&r, (long long)j->priority);
    /* and its time limit as resolved then (a queue's default may have given it) */
    key(&r, "time_limit_s"), num(&r, (long long)j->time_limit_s);
    key(&r, "preemptible"), boolean(&r, j->preemptible);
    if (sj->stop && sj->stop_then != ST_THEN_CANCEL)
        key(&r, "stop_then"), num(&r, (long long)sj->stop_then);
    if (j->resize_gen)
        key(&r, "resize_gen"), num(&r, (long long)j->resize_gen);
    /* the extras of a shrinking job or a service, rare: through jansson */
    if ((extra = json_object()) != NULL) {
        st_resize_record(s, sj, extra);
        st_service_record(sj, extra);
        if (json_object_size(extra)) {
            char *t = json_dumps(extra, JSON_COMPACT);
            if (t && t[0] == '{' && t[1] != '}') {
                putc1(&r, ',');
                put(&r, t + 1, strlen(t) - 2);
            } else {
                r.oom = true;
            }
            free(t);
        }
        json_decref(extra);
    } else {
        r.oom = true;
    }
    putc1(&r, '}');
    if (r.oom) {
        arb_buf_free(&r);
        return NULL;
    }
    return arb_buf_take(&r);
}

/* ---- reading it back ---------------------------------------------------------------- */

/* the members st_job_record writes, in its order (the reader tries the next one first) */
enum {
    K_ID,
    K_TEAM,
    K_OWNER,
    K_YAML,
    K_SPEC,
    K_CORE,
    K_COMMAND,
    K_ENV,
    K_RESTARTABLE,
    K_STATE,
    K_VERSION,
    K_LSUBMIT,
    K_LUPDATE,
    K_ATTEMPT,
    K_EPOCH,
    K_SUBMIT_MS,
    K_START_MS,
    K_END_MS,
    K_DELIVERED,
    K_STOP,
    K_MESSAGE,
    K_TASKS,
    K_ALLOC,
    K_PRIORITY,
    K_TIME_LIMIT,
    K_PREEMPTIBLE,
    K_STOP_THEN,
    K_RESIZE_GEN,
    K_N
};

static const char *const key_names[K_N] = {
    "id",
    "team",
    "owner",
    "yaml",
    "spec",
    "core",
    "command",
    "env",
    "restartable",
    "state",
    "version",
    "lamport_submit",
    "lamport_update",
    "attempt",
    "epoch",
    "submit_ms",
    "start_ms",
    "end_ms",
    "delivered",
    "stop",
    "message",
    "tasks",
    "alloc",
    "priority",
    "time_limit_s",
    "preemptible",
    "stop_then",
    "resize_gen",
};

typedef struct rd {
    const char *v;
    size_t n, i;
    st_jobrec_t *r;
    size_t used; /* of r->buf */
    bool oom;
} rd_t;

static void ws(rd_t *d)
{
    while (d->i < d->n &&
           (d->v[d->i] == ' ' || d->v[d->i] == '\t' || d->v[d->i] == '\n' || d->v[d->i] == '\r'))
        d->i++;
}

static bool eat(rd_t *d, char c)
{
    ws(d);
    if (d->i < d->n && d->v[d->i] == c) {
        d->i++;
        return true;
    }
    return false;
}

static bool word(rd_t *d, const char *w)
{
    size_t k = strlen(w);

    ws(d);
    if (d->n - d->i < k || memcmp(d->v + d->i, w, k) != 0)
        return false;
    d->i += k;
    return true;
}

static bool rd_bool(rd_t *d, bool *out)
{
    if (word(d, "true"))
        *out = true;
    else if (word(d, "false"))
        *out = false;
    else
        return false;
    return true;
}

/* an integer as jansson takes one (a fraction or an exponent is a real: not ours) */
static bool rd_int(rd_t *d, int64_t *out)
{
    size_t i;
    bool neg;
    uint64_t u = 0, lim;

    ws(d);
    i = d->i;
    neg = i < d->n && d->v[i] == '-';
    i += neg;
    lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (i >= d->n || d->v[i] < '0' || d->v[i] > '9')
        return false;
    if (d->v[i] == '0' && i + 1 < d->n && d->v[i + 1] >= '0' && d->v[i + 1] <= '9')
        return false;
    for (; i < d->n && d->v[i] >= '0' && d->v[i] <= '9'; i++) {
        unsigned dg = (unsigned)(d->v[i] - '0');
        if (u > (lim - dg) / 10)
            return false; /* out of range: jansson refuses it */
        u = u * 10 + dg;
    }
    if (i < d->n && (d->v[i] == '.' || d->v[i] == 'e' || d->v[i] == 'E'))
        return false;
    d->i = i;
    *out = neg ? (int64_t)(0 - u) : (int64_t)u;
    return true;
}

static int hex4(const char *p)
{
    int x = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        int h = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (h < 0)
            return -1;
        x = x * 16 + h;
    }
    return x;
}

/* a \uXXXX escape (d->i past the u) as UTF-8 at o; its length, 0 when jansson refuses it */
static size_t rd_unicode(rd_t *d, char *o)
{
    long cp;

    if (d->n - d->i < 4 || (cp = hex4(d->v + d->i)) < 0)
        return 0;
    d->i += 4;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return 0; /* a low surrogate alone */
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        int lo;
        if (d->n - d->i < 6 || d->v[d->i] != '\\' || d->v[d->i + 1] != 'u' ||
            (lo = hex4(d->v + d->i + 2)) < 0xDC00 || lo > 0xDFFF)
            return 0;
        d->i += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0)
        return 0; /* jansson takes no NUL without JSON_ALLOW_NUL */
    if (cp < 0x80)
        return o[0] = (char)cp, 1;
    if (cp < 0x800)
        return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
               o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string, decoded into the record's buffer and NUL-terminated (never
 * longer than its text, which the buffer is sized for). */
static bool rd_str(rd_t *d, const char **out, size_t *len)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    char *start = d->r->buf + d->used, *o = start;

    if (!eat(d, '"'))
        return false;
    while (d->i < d->n) {
        const unsigned char *u = (const unsigned char *)d->v;
        size_t i = d->i;
        while (i < d->n && u[i] >= 0x20 && u[i] < 0x80 && u[i] != '"' && u[i] != '\\')
            i++;
        memcpy(o, d->v + d->i, i - d->i); /* a run of plain ASCII */
        o += i - d->i;
        d->i = i;
        if (i >= d->n)
            break;
        unsigned char c = u[i];
        if (c == '"') {
            d->i++;
            *o = '\0';
            *out = start;
            if (len)
                *len = (size_t)(o - start);
            d->used += (size_t)(o - start) + 1;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c == '\\') {
            const char *f = i + 1 < d->n ? memchr(from, d->v[i + 1], sizeof from - 1) : NULL;
            d->i += 2;
            if (i + 1 < d->n && d->v[i + 1] == 'u') {
                size_t k = rd_unicode(d, o);
                if (!k)
                    return false;
                o += k;
            } else if (f && d->v[i + 1]) {
                *o++ = to[f - from];
            } else {
                return false;
            }
            continue;
        }
        size_t k = arb_utf8_len(u + i, d->n - i);
        if (!k)
            return false; /* not UTF-8: jansson refuses the record */
        memcpy(o, d->v + i, k);
        o += k;
        d->i += k;
    }
    return false;
}

/*
 * Values shared between records (st_jobrec_share_t): the jobs of an array
 * or a sweep, or a whole workload of one command, hold one jansson value
 * for the same text instead of a copy each (a one-word command and its
 * array were about 200 bytes a job). The values are never changed once a
 * job holds them (codec.c and jobview.c read them, copying), so sharing
 * one is as holding one's own. Open addressing over the texts; a full
 * table (half its slots) takes no more: the rest are read as before.
 */
typedef struct share_slot {
    uint64_t h;
    char *text;
    size_t n;
    json_t *v;
} share_slot_t;

struct st_jobrec_share {
    share_slot_t *slot;
    size_t cap, used;
};

static uint64_t share_hash(const char *t, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)t[i]) * 1099511628211ULL;
    return h;
}

st_jobrec_share_t *st_jobrec_share_new(void)
{
    st_jobrec_share_t *t = calloc(1, sizeof *t);

    if (t && !(t->slot = calloc((t->cap = 4096), sizeof *t->slot))) {
        free(t);
        return NULL;
    }
    return t;
}

void st_jobrec_share_free(st_jobrec_share_t *t)
{
    for (size_t i = 0; t && i < t->cap; i++) {
        free(t->slot[i].text);
        json_decref(t->slot[i].v);
    }
    if (t)
        free(t->slot);
    free(t);
}

/* the slot for text, empty or holding it */
static share_slot_t *share_find(st_jobrec_share_t *t, const char *text, size_t n, uint64_t h)
{
    for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        share_slot_t *e = &t->slot[i];
        if (!e->text || (e->h == h && e->n == n && memcmp(e->text, text, n) == 0))
            return e;
    }
}

static json_t *share_get(st_jobrec_share_t *t, const char *text, size_t n)
{
    share_slot_t *e;

    if (!t)
        return NULL;
    e = share_find(t, text, n, share_hash(text, n));
    return e->text ? json_incref(e->v) : NULL;
}

static void share_put(st_jobrec_share_t *t, const char *text, size_t n, json_t *v)
{
    uint64_t h;
    share_slot_t *e;

    if (!t || t->used >= t->cap / 2)
        return;
    h = share_hash(text, n);
    e = share_find(t, text, n, h);
    if (e->text || !(e->text = malloc(n)))
        return; /* out of memory: this one is not shared, nothing else changes */
    memcpy(e->text, text, n);
    e->n = n;
    e->h = h;
    e->v = json_incref(v);
    t->used++;
}

/* A JSON value of any shape (command, env): its extent found here, the
 * value read by jansson, which checks it whole. */
static bool rd_json(rd_t *d, json_t **out)
{
    size_t i, s;
    int depth = 0;

    ws(d);
    i = s = d->i;
    while (i < d->n) {
        char c = d->v[i];
        if (c == '"') {
            for (i++; i < d->n && d->v[i] != '"'; i++)
                if (d->v[i] == '\\')
                    i++;
            i++;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0)
                break;
            depth--;
        } else if (c == ',' && depth == 0) {
            break;
        }
        i++;
    }
    if (depth || i == s || i > d->n)
        return false;
    if ((*out = share_get(d->r->share, d->v + s, i - s)) != NULL) {
        d->i = i;
        return true;
    }
    if (!(*out = json_loadb(d->v + s, i - s, JSON_DECODE_ANY, NULL)))
        return false;
    share_put(d->r->share, d->v + s, i - s, *out);
    d->i = i;
    return true;
}

static bool rd_u64(rd_t *d, uint64_t *out)
{
    int64_t x;
    if (!rd_int(d, &x))
        return false;
    *out = (uint64_t)x;
    return true;
}

/* One more zeroed item at the end of a growing array of the record's (its
 * tasks, its allocation); NULL with d->oom set when memory runs out. */
static void *rd_slot(rd_t *d, void **items, size_t *n, size_t *cap, size_t size)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        void *p = realloc(*items, c * size);
        if (!p) {
            d->oom = true;
            return NULL;
        }
        *items = p;
        *cap = c;
    }
    void *it = (char *)*items + (*n)++ * size;
    memset(it, 0, size);
    return it;
}

static bool rd_tasks(rd_t *d)
{
    st_jobrec_t *r = d->r;

    if (!eat(d, '['))
        return false;
    if (eat(d, ']'))
        return true;
    do {
        st_rec_task_t *t = rd_slot(d, (void **)&r->tasks, &r->ntasks, &r->taskcap, sizeof *t);
        if (!t)
            return false;
        if (!eat(d, '[') || !rd_int(d, &t->state) || !eat(d, ','))
            return false;
        if (!word(d, "null")) {
            if (!rd_int(d, &t->exit_code))
                return false;
            t->has_exit = true;
        }
        if (eat(d, ',') && !rd_str(d, &t->node, NULL))
            return false;
        if (!eat(d, ']'))
            return false;
    } while (eat(d, ','));
    return eat(d, ']');
}

static bool rd_alloc(rd_t *d)
{
    st_jobrec_t *r = d->r;

    if (!eat(d, '['))
        return false;
    if (eat(d, ']'))
        return true;
    do {
        st_rec_alloc_t *a = rd_slot(d, (void **)&r->alloc, &r->nalloc, &r->alloccap, sizeof *a);
        if (!a)
            return false;
        if (!eat(d, '['))
            return false;
        if (word(d, "null"))
            a->null_node = true;
        else if (!rd_str(d, &a->node, NULL))
            return false;
        if (!eat(d, ',') || !rd_int(d, &a->mask) || !eat(d, ',') || !rd_int(d, &a->milli) ||
            !eat(d, ',') || !rd_int(d, &a->mib) || !eat(d, ']'))
            return false;
    } while (eat(d, ','));
    return eat(d, ']');
}

/* one member's value, by its key */
static bool rd_member(rd_t *d, int k)
{
    st_jobrec_t *r = d->r;

    switch (k) {
    case K_ID:
        return rd_u64(d, &r->id);
    case K_TEAM:
        return rd_str(d, &r->team, NULL);
    case K_OWNER:
        return rd_str(d, &r->owner, NULL);
    case K_YAML:
        return rd_bool(d, &r->yaml);
    case K_SPEC:
        return rd_str(d, &r->spec, &r->speclen);
    case K_CORE:
        return rd_str(d, &r->core, &r->corelen);
    case K_COMMAND:
        return word(d, "null") || rd_json(d, &r->command);
    case K_ENV:
        return word(d, "null") || rd_json(d, &r->env);
    case K_RESTARTABLE:
        return rd_bool(d, &r->restartable);
    case K_STATE:
        return rd_str(d, &r->state, NULL);
    case K_VERSION:
        return rd_u64(d, &r->version);
    case K_LSUBMIT:
        return rd_u64(d, &r->lamport_submit);
    case K_LUPDATE:
        return rd_u64(d, &r->lamport_update);
    case K_ATTEMPT:
        return rd_u64(d, &r->attempt);
    case K_EPOCH:
        return rd_u64(d, &r->epoch);
    case K_SUBMIT_MS:
        return rd_int(d, &r->submit_ms);
    case K_START_MS:
        return rd_int(d, &r->start_ms);
    case K_END_MS:
        return rd_int(d, &r->end_ms);
    case K_DELIVERED:
        return rd_bool(d, &r->delivered);
    case K_STOP:
        return rd_bool(d, &r->stop);
    case K_MESSAGE:
        return rd_str(d, &r->message, NULL);
    case K_TASKS:
        return rd_tasks(d);
    case K_ALLOC:
        return rd_alloc(d);
    case K_PRIORITY:
        return (r->has_priority = rd_int(d, &r->priority));
    case K_TIME_LIMIT:
        return (r->has_time_limit = rd_int(d, &r->time_limit_s));
    case K_PREEMPTIBLE:
        return rd_bool(d, &r->preemptible);
    case K_STOP_THEN:
        return rd_u64(d, &r->stop_then);
    case K_RESIZE_GEN:
        return rd_u64(d, &r->resize_gen);
    default:
        return false;
    }
}

/* a member's key: plain text only (an escaped key goes to jansson) */
static int rd_key(rd_t *d, int next)
{
    size_t s, e;

    if (!eat(d, '"'))
        return -1;
    s = d->i;
    for (e = s; e < d->n && d->v[e] != '"' && d->v[e] != '\\'; e++)
        ;
    if (e >= d->n || d->v[e] != '"')
        return -1;
    d->i = e + 1;
    for (int t = 0; t < K_N; t++) {
        int k = (next + t) % K_N;
        if (strlen(key_names[k]) == e - s && memcmp(key_names[k], d->v + s, e - s) == 0)
            return k;
    }
    return -1;
}

void st_jobrec_reset(st_jobrec_t *r)
{
    json_decref(r->command);
    json_decref(r->env);
    char *buf = r->buf;
    size_t bufcap = r->bufcap, taskcap = r->taskcap, alloccap = r->alloccap;
    st_rec_task_t *tasks = r->tasks;
    st_rec_alloc_t *alloc = r->alloc;
    st_jobrec_share_t *share = r->share;
    *r = (st_jobrec_t){.restartable = true,
                       .share = share,
                       .buf = buf,
                       .bufcap = bufcap,
                       .tasks = tasks,
                       .taskcap = taskcap,
                       .alloc = alloc,
                       .alloccap = alloccap};
}

void st_jobrec_clear(st_jobrec_t *r)
{
    st_jobrec_reset(r);
    free(r->buf);
    free(r->tasks);
    free(r->alloc);
    *r = (st_jobrec_t){0}; /* the share table is its owner's */
}

int st_jobrec_read(st_jobrec_t *r, const char *v, size_t n)
{
    rd_t d = {.v = v, .n = n, .r = r};
    uint32_t seen = 0;
    int next = 0;

    st_jobrec_reset(r);
    if (r->bufcap < n + 1) {
        char *b = realloc(r->buf, n + 1);
        if (!b)
            return -ENOMEM;
        r->buf = b;
        r->bufcap = n + 1;
    }
    if (!eat(&d, '{'))
        goto other;
    if (!eat(&d, '}')) {
        do {
            int k = rd_key(&d, next);
            if (k < 0 || (seen & (1u << k)) || !eat(&d, ':'))
                goto other; /* another member (an extra), or a second of one */
            seen |= 1u << k;
            if (!rd_member(&d, k))
                goto other;
            next = k + 1;
        } while (eat(&d, ','));
        if (!eat(&d, '}'))
            goto other;
    }
    ws(&d);
    if (d.i != n)
        goto other;
    return 0;
other:
    st_jobrec_reset(r);
    return d.oom ? -ENOMEM : 1;
}

int st_jobrec_from_json(st_jobrec_t *r, const json_t *o)
{
    const json_t *v, *tasks = json_object_get(o, "tasks"), *alloc = json_object_get(o, "alloc");
    size_t nt = json_array_size(tasks), na = json_array_size(alloc);

    st_jobrec_reset(r);
    r->o = o;
#define U64(k) ((uint64_t)json_integer_value(json_object_get(o, k)))
    r->id = U64("id");
    r->version = U64("version");
    r->lamport_submit = U64("lamport_submit");
    r->lamport_update = U64("lamport_update");
    r->attempt = U64("attempt");
    r->epoch = U64("epoch");
    r->stop_then = U64("stop_then");
    r->resize_gen = U64("resize_gen");
    r->submit_ms = (int64_t)U64("submit_ms");
    r->start_ms = (int64_t)U64("start_ms");
    r->end_ms = (int64_t)U64("end_ms");
#undef U64
    r->team = json_string_value(json_object_get(o, "team"));
    r->owner = json_string_value(json_object_get(o, "owner"));
    r->message = json_string_value(json_object_get(o, "message"));
    r->state = json_string_value(json_object_get(o, "state"));
    v = json_object_get(o, "spec");
    r->spec = json_string_value(v);
    r->speclen = json_string_length(v);
    v = json_object_get(o, "core");
    r->core = json_string_value(v);
    r->corelen = json_string_length(v);
    r->yaml = json_is_true(json_object_get(o, "yaml"));
    r->delivered = json_is_true(json_object_get(o, "delivered"));
    r->stop = json_is_true(json_object_get(o, "stop"));
    r->preemptible = json_is_true(json_object_get(o, "preemptible"));
    r->restartable = !json_is_false(json_object_get(o, "restartable"));
    v = json_object_get(o, "priority");
    r->has_priority = json_is_integer(v);
    r->priority = json_integer_value(v);
    v = json_object_get(o, "time_limit_s");
    r->has_time_limit = json_is_integer(v);
    r->time_limit_s = json_integer_value(v);
    v = json_object_get(o, "command");
    r->command = v && !json_is_null(v) ? json_incref((json_t *)v) : NULL;
    v = json_object_get(o, "env");
    r->env = v && !json_is_null(v) ? json_incref((json_t *)v) : NULL;
    if (nt > r->taskcap) {
        st_rec_task_t *t = realloc(r->tasks, nt * sizeof *t);
        if (!t)
            return -ENOMEM;
        r->tasks = t;
        r->taskcap = nt;
    }
    if (na > r->alloccap) {
        st_rec_alloc_t *a = realloc(r->alloc, na * sizeof *a);
        if (!a)
            return -ENOMEM;
        r->alloc = a;
        r->alloccap = na;
    }
    for (size_t t = 0; t < nt; t++) {
        const json_t *tk = json_array_get(tasks, t);
        st_rec_task_t *x = &r->tasks[t];
        x->state = json_integer_value(json_array_get(tk, 0));
        x->has_exit = json_is_integer(json_array_get(tk, 1));
        x->exit_code = json_integer_value(json_array_get(tk, 1));
        x->node = json_string_value(json_array_get(tk, 2));
    }
    for (size_t t = 0; t < na; t++) {
        const json_t *a = json_array_get(alloc, t);
        st_rec_alloc_t *x = &r->alloc[t];
        x->node = json_string_value(json_array_get(a, 0));
        x->null_node = json_is_null(json_array_get(a, 0));
        x->mask = json_integer_value(json_array_get(a, 1));
        x->milli = json_integer_value(json_array_get(a, 2));
        x->mib = json_integer_value(json_array_get(a, 3));
    }
    r->ntasks = nt;
    r->nalloc = na;
    return 0;
}

static bool same_text(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

bool st_jobrec_same(const st_jobrec_t *a, const st_jobrec_t *b)
{
    if (a->id != b->id || a->version != b->version || a->lamport_submit != b->lamport_submit ||
        a->lamport_update != b->lamport_update || a->attempt != b->attempt ||
        a->epoch != b->epoch || a->stop_then != b->stop_then || a->resize_gen != b->resize_gen ||
        a->submit_ms != b->submit_ms || a->start_ms != b->start_ms || a->end_ms != b->end_ms ||
        a->priority != b->priority || a->time_limit_s != b->time_limit_s || a->yaml != b->yaml ||
        a->delivered != b->delivered || a->stop != b->stop || a->restartable != b->restartable ||
        a->preemptible != b->preemptible || a->has_priority != b->has_priority ||
        a->has_time_limit != b->has_time_limit || a->speclen != b->speclen ||
        a->corelen != b->corelen || a->ntasks != b->ntasks || a->nalloc != b->nalloc)
        return false;
    if (!same_text(a->team, b->team) || !same_text(a->owner, b->owner) ||
        !same_text(a->message, b->message) || !same_text(a->state, b->state) ||
        (a->spec != b->spec && (!a->spec || !b->spec || memcmp(a->spec, b->spec, a->speclen))) ||
        (a->core != b->core && (!a->core || !b->core || memcmp(a->core, b->core, a->corelen))))
        return false;
    if ((!a->command != !b->command) || (a->command && !json_equal(a->command, b->command)) ||
        (!a->env != !b->env) || (a->env && !json_equal(a->env, b->env)))
        return false;
    for (size_t t = 0; t < a->ntasks; t++) {
        const st_rec_task_t *x = &a->tasks[t], *y = &b->tasks[t];
        if (x->state != y->state || x->has_exit != y->has_exit ||
            (x->has_exit && x->exit_code != y->exit_code) || !same_text(x->node, y->node))
            return false;
    }
    for (size_t t = 0; t < a->nalloc; t++) {
        const st_rec_alloc_t *x = &a->alloc[t], *y = &b->alloc[t];
        if (x->mask != y->mask || x->milli != y->milli || x->mib != y->mib ||
            x->null_node != y->null_node || !same_text(x->node, y->node))
            return false;
    }
    return true;
}
