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
 */
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"
#include "util/utf8.h"

typedef struct rec {
    char *p;
    size_t n, cap;
    bool bad; /* out of memory */
} rec_t;

static void put(rec_t *r, const char *s, size_t n)
{
    if (r->bad)
        return;
    if (r->n + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->n + n + 1)
            cap *= 2;
        char *p = realloc(r->p, cap);
        if (!p) {
            r->bad = true;
            return;
        }
        r->p = p;
        r->cap = cap;
    }
    memcpy(r->p + r->n, s, n);
    r->n += n;
    r->p[r->n] = '\0';
}

static void putc1(rec_t *r, char c)
{
    put(r, &c, 1);
}

/* a comma before a value or key, unless it opens its object or array or
 * is the value of the key just written */
static void sep(rec_t *r)
{
    char last = r->n ? r->p[r->n - 1] : '{';
    if (last != '{' && last != '[' && last != ':')
        putc1(r, ',');
}

static void num(rec_t *r, long long v)
{
    char buf[24], *e = buf + sizeof buf, *q = e;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

    do
        *--q = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--q = '-';
    sep(r);
    put(r, q, (size_t)(e - q));
}

static void str(rec_t *r, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0; /* bytes copied as they are, pending */

    sep(r);
    putc1(r, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t len = arb_utf8_len(u + i, n - i);
        if (!len) { /* not UTF-8 (a text from outside): U+FFFD, the record still whole */
            put(r, s + i - run, run);
            run = 0;
            put(r, "\xef\xbf\xbd", 3); /* U+FFFD, as jansson writes text: raw */
            i++;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            i += len;
            run += len;
            continue;
        }
        put(r, s + i - run, run);
        run = 0;
        static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
        const char *f = memchr(from, c, sizeof from - 1);
        char esc[6] = {'\\', f ? to[f - from] : 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        size_t k = f ? 2 : 6;
        put(r, esc, k);
        i++;
    }
    put(r, s + n - run, run);
    putc1(r, '"');
}

static void key(rec_t *r, const char *k)
{
    str(r, k, strlen(k));
    putc1(r, ':');
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

/* a jansson value, as jansson writes it (command and env: rare beside the rest) */
static void raw(rec_t *r, const json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    if (!t) {
        r->bad = true;
        return;
    }
    lit(r, t);
    free(t);
}

char *st_job_record(st_t *s, st_job_t *sj)
{
    const arb_job_t *j = sj->j;
    rec_t r = {0};
    json_t *extra;

    putc1(&r, '{');
    key(&r, "id"), num(&r, (long long)sj->id);
    key(&r, "team"), cstr(&r, sj->team);
    key(&r, "owner"), cstr(&r, sj->owner);
    key(&r, "yaml"), boolean(&r, sj->yaml);
    if (sj->spec)
        key(&r, "spec"), str(&r, sj->spec, sj->speclen);
    if (!sj->svc && !sj->svc_of) { /* the compact form: recovery reads it, not the spec */
        char *core = st_core_text(&s->cluster, j, arb_str(&s->names, sj->pclass), sj->dep);
        if (core)
            key(&r, "core"), cstr(&r, core);
        else
            r.bad = true;
        free(core);
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
                r.bad = true;
            }
            free(t);
        }
        json_decref(extra);
    } else {
        r.bad = true;
    }
    putc1(&r, '}');
    if (r.bad) {
        free(r.p);
        return NULL;
    }
    return r.p;
}
