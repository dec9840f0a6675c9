/*
 * schema.c: the walker, the defaults and the reference behind schema.h.
 * A table is data; this file is the only code that reads a field by its
 * type, so a type means the same (the same grammar, the same messages) in
 * every format that uses it.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/schema.h"
#include "util/duration.h"

#define SC_MAX_KEYS 64 /* fields of one object */

static bool in_ctx(const sc_field_t *f, unsigned ctx)
{
    return !f->ctx || (f->ctx & ctx);
}

/* A field of the object in ctx (not a rule row). */
static bool is_field(const sc_field_t *f, unsigned ctx)
{
    return f->type != SC_RULE && in_ctx(f, ctx);
}

const sc_field_t *sc_find(const sc_table_t *t, const char *key, unsigned ctx)
{
    for (const sc_field_t *f = t->fields; f->key; f++)
        if (is_field(f, ctx) && strcmp(f->key, key) == 0)
            return f;
    return NULL;
}

int sc_keys(const sc_table_t *t, unsigned ctx, const char **names, int max)
{
    int n = 0;

    for (const sc_field_t *f = t->fields; f->key && n < max - 1; f++) {
        bool seen = false;
        if (!is_field(f, ctx))
            continue;
        for (int i = 0; i < n && !seen; i++)
            seen = strcmp(names[i], f->key) == 0;
        if (!seen)
            names[n++] = f->key;
    }
    names[n] = NULL;
    return n;
}

/* A duration in ns as the docs and messages say it: 1s, 100ms, 1500us. */
static void dur_text(int64_t ns, char *buf, size_t n)
{
    static const struct {
        int64_t ns;
        const char *unit;
    } units[] = {{86400000000000LL, "d"}, {3600000000000LL, "h"}, {60000000000LL, "m"},
                 {1000000000LL, "s"},     {1000000LL, "ms"},      {1000LL, "us"}};

    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (ns != 0 && ns % units[i].ns == 0) {
            snprintf(buf, n, "%" PRId64 "%s", ns / units[i].ns, units[i].unit);
            return;
        }
    snprintf(buf, n, "%" PRId64 "%s", ns, ns ? "ns" : "s");
}

static bool has_range(const sc_field_t *f)
{
    return f->lo != 0 || f->hi != 0;
}

static int range_fail(sx_t *x, const sval_t *v, const sc_field_t *f, const char *lo, const char *hi)
{
    if (f->range_msg)
        return sv_fail(x, v, -EINVAL, "%s", f->range_msg);
    if (f->hi == INT64_MAX)
        return sv_fail(x, v, -EINVAL, "%s must be at least %s", f->key, lo);
    return sv_fail(x, v, -EINVAL, "%s must be %s..%s", f->key, lo, hi);
}

static int read_duration(sx_t *x, const sval_t *v, const sc_field_t *f, int64_t *out)
{
    int64_t ns;
    int rc = sv_duration_ns(x, v, &ns);
    char lo[32], hi[32];

    if (rc < 0)
        return rc;
    if ((f->flags & SC_SECONDS) && ns % 1000000000LL)
        return f->range_msg ? sv_fail(x, v, -EINVAL, "%s", f->range_msg)
                            : sv_fail(x, v, -EINVAL, "%s is whole seconds", f->key);
    if (has_range(f) && (ns < f->lo || ns > f->hi)) {
        dur_text(f->lo, lo, sizeof lo);
        dur_text(f->hi, hi, sizeof hi);
        return range_fail(x, v, f, lo, hi);
    }
    *out = (f->flags & SC_SECONDS) ? ns / 1000000000LL : ns;
    return 0;
}

static int read_field(sx_t *x, const sval_t *v, const sc_field_t *f, unsigned ctx, char *obj)
{
    void *at = obj + f->off;
    int64_t i64 = 0;
    int rc = 0, k;

    switch (f->type) {
    case SC_STR:
        return sv_text(x, v, at, f->size, (f->flags & SC_EMPTY_OK) != 0);
    case SC_INT:
        rc = sv_int(x, v, has_range(f) ? f->lo : INT64_MIN, has_range(f) ? f->hi : INT64_MAX, &i64);
        if (rc == -ERANGE && f->range_msg)
            return sv_fail(x, v, -EINVAL, "%s", f->range_msg);
        if (rc < 0)
            return rc;
        if (f->size == sizeof(int))
            *(int *)at = (int)i64;
        else
            *(int64_t *)at = i64;
        return 0;
    case SC_DOUBLE:
        return sv_double(x, v, f->dlo, f->dhi, at);
    case SC_BOOL:
        return sv_bool(x, v, at);
    case SC_DURATION:
        return read_duration(x, v, f, at);
    case SC_ENUM:
        if ((f->flags & SC_EMPTY_OK) && sv_null(v))
            return 0;
        if ((rc = sv_enum(x, v, f->names, f->nnames, &k)) == 0)
            *(int *)at = k;
        return rc;
    case SC_QTY:
        if ((rc = sv_qty(x, v, f->qty, &i64)) < 0)
            return rc;
        if (has_range(f) && (i64 < f->lo || i64 > f->hi)) {
            char lo[32], hi[32];
            snprintf(lo, sizeof lo, "%" PRId64, f->lo);
            snprintf(hi, sizeof hi, "%" PRId64, f->hi);
            return range_fail(x, v, f, lo, hi);
        }
        *(int64_t *)at = i64;
        return 0;
    case SC_OBJECT:
        if (f->set)
            return f->set(x, v, (f->flags & SC_WHOLE) ? obj : at);
        return sc_walk(x, v, f->sub, ctx, at);
    case SC_CUSTOM:
        return f->set(x, v, (f->flags & SC_WHOLE) ? obj : at);
    case SC_RULE:
        break;
    }
    return sv_fail(x, v, -EINVAL, "field %s has no type", f->key);
}

/* Is every key of the mapping in map a field of t in ctx? The usual case,
 * answered from the rows themselves: the names list sc_keys makes (each
 * name once, quadratic in the rows: a fifth of a job spec's reader) is
 * made only when a key is not, for sv_check_keys's message. False also
 * where that list would not hold every field (SC_MAX_KEYS). */
static bool keys_known(const sval_t *map, const sc_table_t *t, unsigned ctx)
{
    void *it = NULL;
    struct fy_node_pair *p;
    int rows = 0;

    for (const sc_field_t *f = t->fields; f->key; f++)
        rows += is_field(f, ctx);
    if (rows >= SC_MAX_KEYS - 1 || !map->n || !fy_node_is_mapping(map->n))
        return false;
    while ((p = fy_node_mapping_iterate(map->n, &it))) {
        size_t len = 0;
        const char *k = sv_key_text(fy_node_pair_key(p), &len);
        const sc_field_t *f = t->fields;
        if (!k)
            return false;
        while (f->key && !(is_field(f, ctx) && strncmp(f->key, k, len) == 0 && f->key[len] == '\0'))
            f++;
        if (!f->key)
            return false;
    }
    return true;
}

int sc_check_keys(sx_t *x, const sval_t *map, const sc_table_t *t, unsigned ctx)
{
    const char *keys[SC_MAX_KEYS];

    if (keys_known(map, t, ctx))
        return 0;
    sc_keys(t, ctx, keys, SC_MAX_KEYS);
    return sv_check_keys(x, map, keys);
}

int sc_walk(sx_t *x, const sval_t *map, const sc_table_t *t, unsigned ctx, void *obj)
{
    bool is;
    int rc = sv_map(x, map, &is);

    if (rc < 0)
        return rc;
    if (is && (rc = sc_check_keys(x, map, t, ctx)) < 0)
        return rc;
    return sc_walk_fields(x, map, t, ctx, obj);
}

/* The keys of one mapping, their texts read once for a walk's lookups
 * (sv_get reads every key's text again for each row it is asked for: a
 * job's table has 38). n -1: more than SC_WALK_KEYS, ask sv_get. The
 * walk's rows and rules only read the mapping, so the pairs stay. */
#define SC_WALK_KEYS 16
typedef struct sc_keyed {
    int n;
    struct {
        const char *k; /* NULL: not a plain name (never a field's) */
        size_t len;
        struct fy_node_pair *p;
    } at[SC_WALK_KEYS];
} sc_keyed_t;

static void keyed_read(sc_keyed_t *kd, const sval_t *map)
{
    void *it = NULL;
    struct fy_node_pair *p;

    kd->n = 0;
    if (!map->n || !fy_node_is_mapping(map->n))
        return;
    while ((p = fy_node_mapping_iterate(map->n, &it))) {
        if (kd->n == SC_WALK_KEYS) {
            kd->n = -1;
            return;
        }
        kd->at[kd->n].k = sv_key_text(fy_node_pair_key(p), &kd->at[kd->n].len);
        kd->at[kd->n++].p = p;
    }
}

/* sv_get from kd: the first pair whose key is key. */
static bool keyed_get(const sc_keyed_t *kd, const sval_t *map, const char *key, sval_t *out)
{
    size_t klen;

    if (kd->n < 0)
        return sv_get(map, key, out);
    klen = strlen(key);
    for (int i = 0; i < kd->n; i++)
        if (kd->at[i].k && kd->at[i].len == klen && memcmp(kd->at[i].k, key, klen) == 0) {
            sv_pair(out, map, kd->at[i].p);
            return true;
        }
    return false;
}

int sc_walk_fields(sx_t *x, const sval_t *map, const sc_table_t *t, unsigned ctx, void *obj)
{
    sc_keyed_t kd;
    int rc;

    keyed_read(&kd, map);
    for (const sc_field_t *f = t->fields; f->key; f++) {
        sval_t v;
        if (!in_ctx(f, ctx) || (f->flags & SC_HAND))
            continue;
        if (f->type == SC_RULE) {
            if ((rc = f->check(x, map, obj)) < 0)
                return rc;
            continue;
        }
        if (!keyed_get(&kd, map, f->key, &v)) {
            if ((f->flags & SC_REQUIRED) && f->missing)
                return sv_fail(x, map, -EINVAL, "%s", f->missing);
            if (f->flags & SC_REQUIRED)
                return sv_fail(x, map, -EINVAL, "missing %s:%s%s%s", f->key, f->help ? " (" : "",
                               f->help ? f->help : "", f->help ? ")" : "");
            continue;
        }
        if ((rc = read_field(x, &v, f, ctx, obj)) < 0)
            return rc;
        if (f->check && (rc = f->check(x, &v, obj)) < 0)
            return rc;
    }
    return t->check ? t->check(x, map, obj, ctx) : 0;
}

/* ---- defaults --------------------------------------------------------------- */

static int init_field(const sc_field_t *f, unsigned ctx, char *obj, arb_err_t *err)
{
    void *at = obj + f->off;
    char *end;
    int64_t v;

    if ((f->flags & SC_HAND) || f->type == SC_RULE)
        return 0;
    if (f->type == SC_OBJECT && !f->set)
        return sc_init(f->sub, ctx, at, err);
    if (!f->def || f->type == SC_CUSTOM || f->type == SC_OBJECT)
        return 0;
    switch (f->type) {
    case SC_STR:
        snprintf(at, f->size, "%s", f->def);
        return 0;
    case SC_INT:
        v = strtoll(f->def, &end, 10);
        if (*end)
            break;
        if (f->size == sizeof(int))
            *(int *)at = (int)v;
        else
            *(int64_t *)at = v;
        return 0;
    case SC_DOUBLE:
        *(double *)at = strtod(f->def, &end);
        if (*end)
            break;
        return 0;
    case SC_BOOL:
        if (strcmp(f->def, "true") && strcmp(f->def, "false"))
            break;
        *(bool *)at = strcmp(f->def, "true") == 0;
        return 0;
    case SC_DURATION:
        if (arb_duration_parse(f->def, &v, err) < 0)
            break;
        *(int64_t *)at = (f->flags & SC_SECONDS) ? v / 1000000000LL : v;
        return 0;
    case SC_ENUM:
        for (int i = 0; i < f->nnames; i++)
            if (f->names[i] && strcmp(f->names[i], f->def) == 0) {
                *(int *)at = i;
                return 0;
            }
        break;
    case SC_QTY:
        if (arb_qty_parse(f->def, f->qty, f->key, &v, err) < 0)
            break;
        *(int64_t *)at = v;
        return 0;
    default:
        break;
    }
    return arb_errf(err, -EINVAL, "schema: the default '%s' of %s is not a valid value", f->def,
                    f->key);
}

int sc_init(const sc_table_t *t, unsigned ctx, void *obj, arb_err_t *err)
{
    int rc;

    for (const sc_field_t *f = t->fields; f->key; f++)
        if (in_ctx(f, ctx) && (rc = init_field(f, ctx, obj, err)) < 0)
            return rc;
    return 0;
}

/* ---- reference ------------------------------------------------------------------ */

static void type_text(const sc_field_t *f, char *buf, size_t n)
{
    static const char *const names[] = {
        [SC_STR] = "string",   [SC_INT] = "int",           [SC_DOUBLE] = "number",
        [SC_BOOL] = "bool",    [SC_DURATION] = "duration", [SC_ENUM] = "enum",
        [SC_QTY] = "quantity", [SC_OBJECT] = "object",     [SC_CUSTOM] = "value",
        [SC_RULE] = "rule",
    };
    size_t used = 0;

    if (f->type_doc) {
        snprintf(buf, n, "%s", f->type_doc);
        return;
    }
    if (f->type != SC_ENUM) {
        snprintf(buf, n, "%s", names[f->type]);
        return;
    }
    buf[0] = '\0';
    for (int i = 0; i < f->nnames && used < n; i++)
        if (f->names[i])
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "\\|" : "", f->names[i]);
}

void sc_doc_rows(FILE *out, const sc_table_t *t, unsigned ctx, const char *prefix)
{
    char key[160], type[160];

    for (const sc_field_t *f = t->fields; f->key; f++) {
        if (!is_field(f, ctx))
            continue;
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", f->key);
        if (f->type == SC_OBJECT) {
            sc_doc_rows(out, f->sub, ctx, key);
            continue;
        }
        type_text(f, type, sizeof type);
        if (f->flags & SC_LIST)
            snprintf(key + strlen(key), sizeof key - strlen(key), "[]");
        fprintf(out, "| `%s` | %s | %s | %s |\n", key, type,
                f->def_doc                 ? f->def_doc
                : f->def                   ? f->def
                : (f->flags & SC_REQUIRED) ? "required"
                                           : "none",
                f->help ? f->help : "");
        if (f->sub && f->type == SC_CUSTOM)
            sc_doc_rows(out, f->sub, ctx, key);
    }
}

int sc_doc_rules(FILE *out, const sc_table_t *t, unsigned ctx, const char *prefix)
{
    char key[160];
    int n = 0;

    for (const sc_field_t *f = t->fields; f->key; f++)
        if (in_ctx(f, ctx) && f->type == SC_RULE) {
            fprintf(out, "- `%s` (%s): %s\n", *prefix ? prefix : t->name, f->key,
                    f->help ? f->help : "");
            n++;
        }
    for (const sc_field_t *f = t->fields; f->key; f++) {
        if (!is_field(f, ctx) || !f->sub)
            continue;
        snprintf(key, sizeof key, "%s%s%s%s", prefix, *prefix ? "." : "", f->key,
                 (f->flags & SC_LIST) ? "[]" : "");
        n += sc_doc_rules(out, f->sub, ctx, key);
    }
    return n;
}

void sc_doc_markdown(FILE *out, const sc_table_t *t, unsigned ctx, const char *prefix)
{
    char *rules = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&rules, &len);
    int n = mem ? sc_doc_rules(mem, t, ctx, prefix) : 0;

    if (mem)
        fclose(mem);
    fprintf(out, "| key | type | default | what |\n|---|---|---|---|\n");
    sc_doc_rows(out, t, ctx, prefix);
    if (n > 0)
        fprintf(out, "\nRules between fields:\n\n%s", rules);
    free(rules);
}
