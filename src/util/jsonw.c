/*
 * jsonw.c: compact JSON text of a jansson tree, as json_dumps writes it
 * (why, and what falls back to jansson: see jsonw.h).
 */
#include "util/jsonw.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/textw.h"
#include "util/utf8.h"

/* A string as jansson's dump_string writes it without flags (textw.h):
 * -EINVAL for bytes that are not UTF-8, with what jansson had written by
 * then written. */
static int put_string(arb_buf_t *b, const char *s, size_t n)
{
    return arb_buf_jstr(b, s, n, false);
}

static void put_int(arb_buf_t *b, json_int_t v)
{
    arb_buf_i64(b, (int64_t)v);
}

/* 0, -EINVAL (json_dumps would fail), -E2BIG (too deep: jansson's turn). */
static int put_value(arb_buf_t *b, const json_t *v, int depth)
{
    int rc = 0;

    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (depth >= ARB_JSONW_MAX_DEPTH)
            return -E2BIG;
        arb_buf_putc(b, '{');
        bool first = true;
        for (void *it = json_object_iter((json_t *)v); it && rc == 0;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!first)
                arb_buf_putc(b, ',');
            first = false;
            /* jansson writes on past a key that is not UTF-8 (only a
             * _nocheck call makes one), its text cut where its string
             * writer stopped; so does this, for the same bytes */
            (void)put_string(b, json_object_iter_key(it), json_object_iter_key_len(it));
            arb_buf_putc(b, ':');
            rc = put_value(b, json_object_iter_value(it), depth + 1);
        }
        arb_buf_putc(b, '}');
        return rc;
    }
    case JSON_ARRAY: {
        if (depth >= ARB_JSONW_MAX_DEPTH)
            return -E2BIG;
        arb_buf_putc(b, '[');
        size_t n = json_array_size(v);
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (i)
                arb_buf_putc(b, ',');
            rc = put_value(b, json_array_get(v, i), depth + 1);
        }
        arb_buf_putc(b, ']');
        return rc;
    }
    case JSON_STRING:
        return put_string(b, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        put_int(b, json_integer_value(v));
        return 0;
    case JSON_REAL: { /* jansson's own text for it: its precision, its ".0" */
        char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!t)
            return -EINVAL;
        arb_buf_puts(b, t);
        free(t);
        return 0;
    }
    case JSON_TRUE:
        arb_buf_put(b, "true", 4);
        return 0;
    case JSON_FALSE:
        arb_buf_put(b, "false", 5);
        return 0;
    case JSON_NULL:
        arb_buf_put(b, "null", 4);
        return 0;
    }
    return -EINVAL;
}

int arb_jsonw_compact(arb_buf_t *b, const json_t *v)
{
    size_t at = b->len;
    int rc;

    if (!v || !(json_is_object(v) || json_is_array(v)))
        return -EINVAL;
    rc = put_value(b, v, 0);
    if (rc == -E2BIG) { /* deeper than anything the code builds: jansson writes it */
        b->len = at;
        if (b->p)
            b->p[at] = '\0';
        char *t = json_dumps(v, JSON_COMPACT);
        rc = t ? 0 : -EINVAL;
        if (t)
            arb_buf_puts(b, t);
        free(t);
    }
    if (rc == 0 && b->oom)
        rc = -ENOMEM;
    if (rc == -EINVAL && b->p) { /* nothing of it stays */
        b->len = at;
        b->p[at] = '\0';
    }
    return rc;
}

char *arb_jsonw_dumps(const json_t *v)
{
    arb_buf_t b = {0};

    if (arb_jsonw_compact(&b, v) < 0) {
        arb_buf_free(&b);
        return NULL;
    }
    return arb_buf_take(&b);
}

/* ---- written as it goes ------------------------------------------------------ */

void arb_jw_begin(arb_jw_t *w, arb_buf_t *b)
{
    *w = (arb_jw_t){.b = b};
}

/* Before a value or a key: the comma after the previous member. */
static void jw_sep(arb_jw_t *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0) {
        uint64_t bit = 1ull << (w->depth - 1);
        if (w->more & bit)
            arb_buf_putc(w->b, ',');
        w->more |= bit;
    }
}

static void jw_open(arb_jw_t *w, char c)
{
    jw_sep(w);
    if (w->depth >= ARB_JW_MAX_DEPTH) {
        w->err = w->err ? w->err : -EINVAL;
        return;
    }
    arb_buf_putc(w->b, c);
    w->depth++;
    w->more &= ~(1ull << (w->depth - 1));
}

static void jw_close(arb_jw_t *w, char c)
{
    if (w->depth <= 0 || w->after_key) {
        w->err = w->err ? w->err : -EINVAL;
        return;
    }
    w->depth--;
    arb_buf_putc(w->b, c);
}

void arb_jw_obj(arb_jw_t *w)
{
    jw_open(w, '{');
}

void arb_jw_obj_end(arb_jw_t *w)
{
    jw_close(w, '}');
}

void arb_jw_arr(arb_jw_t *w)
{
    jw_open(w, '[');
}

void arb_jw_arr_end(arb_jw_t *w)
{
    jw_close(w, ']');
}

static void jw_text(arb_jw_t *w, const char *s)
{
    if (!s || put_string(w->b, s, strlen(s)) < 0)
        w->err = w->err ? w->err : -EINVAL;
}

void arb_jw_key(arb_jw_t *w, const char *k)
{
    jw_sep(w);
    jw_text(w, k);
    arb_buf_putc(w->b, ':');
    w->after_key = true;
}

void arb_jw_str(arb_jw_t *w, const char *s)
{
    jw_sep(w);
    jw_text(w, s);
}

void arb_jw_kstr_opt(arb_jw_t *w, const char *k, const char *s)
{
    if (!s)
        return;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t len = u[i] < 0x80 ? 1 : arb_utf8_len(u + i, n - i);
        if (!len)
            return;
        i += len;
    }
    arb_jw_key(w, k);
    arb_jw_str(w, s);
}

void arb_jw_int(arb_jw_t *w, int64_t v)
{
    jw_sep(w);
    put_int(w->b, (json_int_t)v);
}

void arb_jw_bool(arb_jw_t *w, bool v)
{
    jw_sep(w);
    if (v)
        arb_buf_put(w->b, "true", 4);
    else
        arb_buf_put(w->b, "false", 5);
}

void arb_jw_null(arb_jw_t *w)
{
    jw_sep(w);
    arb_buf_put(w->b, "null", 4);
}

void arb_jw_json(arb_jw_t *w, const json_t *v)
{
    jw_sep(w);
    if (!v || put_value(w->b, v, w->depth) < 0)
        w->err = w->err ? w->err : -EINVAL;
}

int arb_jw_end(arb_jw_t *w)
{
    if (!w->err && (w->depth != 0 || w->after_key))
        w->err = -EINVAL;
    if (!w->err && w->b->oom)
        w->err = -ENOMEM;
    return w->err;
}
