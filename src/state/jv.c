/*
 * jv.c: typed reads of JSON request fields with field paths in messages
 * (see jv.h).
 */
#include <stdio.h>
#include <string.h>

#include "state/jv.h"
#include "util/textw.h"

void jv_path_key(char *out, const char *base, const char *key)
{
    snprintf(out, JV_PATH, "%s%s%s", base, base[0] ? "." : "", key);
}

void jv_path_idx(char *out, const char *base, size_t i)
{
    snprintf(out, JV_PATH, "%s[%zu]", base, i);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

static const char *where(const char *path)
{
    return path[0] ? path : "body";
}

int jv_object(const json_t *v, const char *path, const char *const *valid, arb_err_t *err)
{
    const char *k;
    json_t *m;

    if (!json_is_object(v))
        return arb_errf(err, -EINVAL, "%s: expected an object, got %s", where(path), type_name(v));
    json_object_foreach((json_t *)v, k, m)
    {
        bool ok = false;
        for (int i = 0; valid[i] && !ok; i++)
            ok = strcmp(valid[i], k) == 0;
        if (!ok) {
            char list[256];
            size_t used = 0;
            list[0] = '\0';
            for (int i = 0; valid[i] && used < sizeof list; i++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                         valid[i]);
            char p[JV_PATH];
            jv_path_key(p, path, k);
            return arb_errf(err, -EINVAL, "%s: unknown field '%s' (valid: %s)", p, k, list);
        }
    }
    return 0;
}

/* The field's path into p, for a message: built only when there is one
 * (a report reads some twenty fields, each path an snprintf). */
static const char *at(char *p, const char *path, const char *key)
{
    jv_path_key(p, path, key);
    return p;
}

static json_t *get(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

int jv_int(const json_t *o, const char *key, const char *path, int64_t lo, int64_t hi, int64_t *out,
           arb_err_t *err)
{
    json_t *v = get(o, key);
    char p[JV_PATH];

    if (!v)
        return 0;
    if (!json_is_integer(v))
        return arb_errf(err, -EINVAL, "%s: expected an integer, got %s", at(p, path, key),
                        type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return arb_errf(err, -EINVAL, "%s: %lld is outside %lld..%lld", at(p, path, key),
                        (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

int jv_bool(const json_t *o, const char *key, const char *path, bool *out, arb_err_t *err)
{
    json_t *v = get(o, key);
    char p[JV_PATH];

    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return arb_errf(err, -EINVAL, "%s: expected true or false, got %s", at(p, path, key),
                        type_name(v));
    *out = json_is_true(v);
    return 0;
}

int jv_num(const json_t *o, const char *key, const char *path, double lo, double hi, double *out,
           arb_err_t *err)
{
    json_t *v = get(o, key);
    char p[JV_PATH];

    if (!v)
        return 0;
    if (!json_is_number(v))
        return arb_errf(err, -EINVAL, "%s: expected a number, got %s", at(p, path, key),
                        type_name(v));
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return arb_errf(err, -EINVAL, "%s: %g is outside %g..%g", at(p, path, key), x, lo, hi);
    *out = x;
    return 0;
}

int jv_str(const json_t *o, const char *key, const char *path, char *buf, size_t n, arb_err_t *err)
{
    json_t *v = get(o, key);
    char p[JV_PATH];

    if (!v)
        return 0;
    if (!json_is_string(v))
        return arb_errf(err, -EINVAL, "%s: expected a string, got %s", at(p, path, key),
                        type_name(v));
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len >= n)
        return arb_errf(err, -EINVAL, "%s: %zu bytes long; at most %zu allowed", at(p, path, key),
                        len, n - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return arb_errf(err, -EINVAL, "%s: control character at byte %zu", at(p, path, key), i);
    memcpy(buf, s, len + 1);
    return 0;
}

int jv_qty(const json_t *o, const char *key, const char *path, arb_qty_kind_t kind, int64_t *out,
           arb_err_t *err)
{
    json_t *v = get(o, key);
    char p[JV_PATH], txt[64];
    int rc;

    if (!v)
        return 0;
    jv_path_key(p, path, key);
    if (json_is_integer(v)) {
        snprintf(txt, sizeof txt, "%lld", (long long)json_integer_value(v));
    } else if (json_is_string(v) && json_string_length(v) < sizeof txt) {
        snprintf(txt, sizeof txt, "%s", json_string_value(v));
    } else {
        return arb_errf(err, -EINVAL, "%s: expected a quantity (\"256Gi\", \"8\" or 8), got %s", p,
                        json_is_string(v) ? "a long string" : type_name(v));
    }
    rc = arb_qty_parse(txt, kind, p, out, err); /* the message starts with p */
    return rc < 0 ? -EINVAL : 0;
}

int jv_member(const json_t *o, const char *key, const char *path, json_type t, json_t **out,
              arb_err_t *err)
{
    json_t *v = get(o, key);
    char p[JV_PATH];

    *out = NULL;
    if (!v)
        return 0;
    if (json_typeof(v) != t) {
        jv_path_key(p, path, key);
        return arb_errf(err, -EINVAL, "%s: expected %s, got %s", p,
                        t == JSON_OBJECT  ? "an object"
                        : t == JSON_ARRAY ? "a list"
                                          : "a value",
                        type_name(v));
    }
    *out = v;
    return 0;
}

void jv_time(int64_t wall_ms, char *buf, size_t n)
{
    arb_tw_time(wall_ms, buf, n); /* without snprintf: util/textw.h */
}
