/*
 * sval.c: the value layer of the YAML loaders (see sval.h): positions and
 * messages, walking a libfyaml tree with field paths, typed scalars and
 * whole documents. Nothing here knows the scenario format.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/sval.h"
#include "util/utf8.h"
#include "util/duration.h"

/* ---- positions and messages ----------------------------------------------- */

const struct fy_mark *sv_node_mark(struct fy_node *n, int depth)
{
    const struct fy_mark *m = NULL;

    if (!n || depth > 8)
        return NULL;
    if (fy_node_is_scalar(n)) {
        struct fy_token *t = fy_node_get_scalar_token(n);
        return t ? fy_token_start_mark(t) : NULL;
    }
    if (fy_node_is_mapping(n)) {
        void *it = NULL;
        struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
        if (p) {
            m = sv_node_mark(fy_node_pair_key(p), depth + 1);
            if (!m)
                m = sv_node_mark(fy_node_pair_value(p), depth + 1);
        }
        return m;
    }
    if (fy_node_is_sequence(n)) {
        void *it = NULL;
        return sv_node_mark(fy_node_sequence_iterate(n, &it), depth + 1);
    }
    return NULL;
}

static const struct fy_mark *sv_mark(const sval_t *v)
{
    const struct fy_mark *m = sv_node_mark(v->n, 0);
    return m ? m : sv_node_mark(v->hint, 0);
}

/* ---- scalar text ------------------------------------------------------------- */

/*
 * libfyaml 0.7.12 leaks the buffer it unescapes a single-quoted scalar into
 * when the scalar holds a few '' escapes (512 bytes at 5, 8 KiB at 100, on
 * every read of its text): any user could grow the controller with such
 * specs. So no single-quoted scalar with '' reaches the library's text
 * path: when a document is opened, sq_prepare computes the text of each
 * one from the source itself (YAML 1.2, 7.3.2: '' is ', line breaks fold)
 * and hangs it on the node as its meta, freed with the node; sv_scalar
 * returns it. The length is checked against the library's own count
 * (fy_node_get_scalar_length, which does not leak); a mismatch leaves the
 * node to the library.
 */
typedef struct sq_text {
    size_t len;
    char s[]; /* NUL-terminated */
} sq_text_t;

static bool sq_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* The value of the single-quoted scalar whose source is raw[0..n) (between
 * the quotes), into out (room for n + 1); its length. */
static size_t sq_unfold(const char *raw, size_t n, char *out)
{
    size_t o = 0, i = 0;
    bool first = true;

    while (i <= n) {
        size_t e = i; /* the end of this line */
        while (e < n && raw[e] != '\n' && raw[e] != '\r')
            e++;
        size_t b = i, t = e;
        if (!first)
            while (b < t && sq_ws(raw[b])) /* a continuation line's indent */
                b++;
        bool last = e >= n;
        if (!last)
            while (t > b && sq_ws(raw[t - 1])) /* white space before a break */
                t--;
        for (size_t k = b; k < t; k++) {
            out[o++] = raw[k];
            if (raw[k] == '\'' && k + 1 < t && raw[k + 1] == '\'')
                k++; /* '' is one quote */
        }
        if (last)
            break;
        /* the break: count the empty lines after it */
        size_t j = e + (raw[e] == '\r' && e + 1 < n && raw[e + 1] == '\n' ? 2 : 1), empty = 0;
        for (;;) {
            size_t k = j;
            while (k < n && sq_ws(raw[k]))
                k++;
            if (k < n && (raw[k] == '\n' || raw[k] == '\r')) {
                empty++;
                j = k + (raw[k] == '\r' && k + 1 < n && raw[k + 1] == '\n' ? 2 : 1);
                continue;
            }
            break;
        }
        if (empty == 0)
            out[o++] = ' ';
        for (size_t k = 0; k < empty; k++)
            out[o++] = '\n';
        i = j;
        first = false;
    }
    out[o] = '\0';
    return o;
}

static void sq_clear(struct fy_node *n, void *meta, void *user)
{
    (void)n;
    (void)user;
    free(meta);
}

/* Hang the computed text on every single-quoted scalar with '' under n. */
static void sq_walk(struct fy_node *n, const char *buf, size_t len, int depth)
{
    void *it = NULL;

    if (!n || depth > 512 || fy_node_is_alias(n))
        return;
    if (fy_node_is_mapping(n)) {
        struct fy_node_pair *p;
        while ((p = fy_node_mapping_iterate(n, &it))) {
            sq_walk(fy_node_pair_key(p), buf, len, depth + 1);
            sq_walk(fy_node_pair_value(p), buf, len, depth + 1);
        }
        return;
    }
    if (fy_node_is_sequence(n)) {
        struct fy_node *c;
        while ((c = fy_node_sequence_iterate(n, &it)))
            sq_walk(c, buf, len, depth + 1);
        return;
    }
    if (fy_node_get_style(n) != FYNS_SINGLE_QUOTED)
        return;
    struct fy_token *t = fy_node_get_scalar_token(n);
    const struct fy_mark *a = t ? fy_token_start_mark(t) : NULL,
                         *z = t ? fy_token_end_mark(t) : NULL;
    /* the token's marks span the text inside the quotes */
    if (!a || !z || a->input_pos < 1 || a->input_pos > z->input_pos || z->input_pos >= len ||
        buf[a->input_pos - 1] != '\'' || buf[z->input_pos] != '\'')
        return;
    const char *raw = buf + a->input_pos;
    size_t rn = z->input_pos - a->input_pos;
    if (!memmem(raw, rn, "''", 2))
        return; /* no escape: the library's path does not leak */
    sq_text_t *q = malloc(sizeof *q + rn + 1);
    if (!q)
        return;
    q->len = sq_unfold(raw, rn, q->s);
    if (q->len != fy_node_get_scalar_length(n) || fy_node_set_meta(n, q) != 0)
        free(q);
}

/* Prepare doc (parsed from buf[0..len)) for sv_scalar. */
static void sq_prepare(struct fy_document *doc, const char *buf, size_t len)
{
    if (doc && fy_document_register_meta(doc, sq_clear, NULL) == 0)
        sq_walk(fy_document_root(doc), buf, len, 0);
}

const char *sv_scalar(struct fy_node *n, size_t *len)
{
    const sq_text_t *q = n ? fy_node_get_meta(n) : NULL;

    if (q) {
        *len = q->len;
        return q->s;
    }
    return fy_node_get_scalar(n, len);
}

/* ---- duplicate keys ------------------------------------------------------------ */

/*
 * libfyaml 0.7.12 checks a mapping's keys for duplicates as it builds the
 * mapping, each new key against every one before it: n^2/2 node
 * comparisons, seconds at 4,000 keys and hours at the ~100,000 a 1 MiB
 * request body holds, on a controller thread. So documents are parsed with
 * FYPCF_ALLOW_DUPLICATE_KEYS and their keys checked here, each mapping's
 * sorted by text: n log n. Scalar keys are the same when their texts are,
 * however quoted (as the library compares them); an alias key is the same
 * as another of that alias; null keys are the same. Keys that are mappings
 * or lists (no format here has them) are compared with each other as the
 * library does, at most DUP_MAX_COMPLEX of them in one mapping.
 */
#define DUP_MAX_COMPLEX 64

typedef struct dup_key {
    const char *s;
    size_t len;
    int kind; /* 0 null, 1 scalar, 2 alias, 3 a mapping or list */
    int index;
    struct fy_node *key, *value;
} dup_key_t;

static int dup_cmp(const void *a, const void *b)
{
    const dup_key_t *x = a, *y = b;
    int c;

    if (x->kind != y->kind)
        return x->kind - y->kind;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    if (x->len && (c = memcmp(x->s, y->s, x->len)) != 0)
        return c;
    return x->index - y->index;
}

/* The key k of the pair the duplicate found is at (its position: the key's,
 * else its value's), if before the one in *best. */
static void dup_found(const dup_key_t *k, struct fy_node *map, const struct fy_mark **best)
{
    const struct fy_mark *m = sv_node_mark(k->key, 0);

    if (!m)
        m = sv_node_mark(k->value, 0);
    if (!m)
        m = sv_node_mark(map, 0);
    if (m && (!*best || m->input_pos < (*best)->input_pos))
        *best = m;
}

/* Check mapping n's keys, and every mapping below n; -ENOMEM, -E2BIG (too
 * many complex keys), or 0 with the first duplicate's position in *best
 * (which stays NULL when there is none; *found counts them). */
static int dup_walk(struct fy_node *n, int depth, const struct fy_mark **best, int *found)
{
    void *it = NULL;
    int rc = 0;

    if (!n || depth > 512 || fy_node_is_alias(n))
        return 0;
    if (fy_node_is_sequence(n)) {
        struct fy_node *c;
        while (rc == 0 && (c = fy_node_sequence_iterate(n, &it)))
            rc = dup_walk(c, depth + 1, best, found);
        return rc;
    }
    if (!fy_node_is_mapping(n))
        return 0;
    int count = fy_node_mapping_item_count(n), nk = 0, ncomplex = 0;
    dup_key_t *keys = count > 1 ? calloc((size_t)count, sizeof *keys) : NULL;
    struct fy_node_pair *p;

    if (count > 1 && !keys)
        return -ENOMEM;
    while (rc == 0 && (p = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *k = fy_node_pair_key(p), *v = fy_node_pair_value(p);
        if (keys && nk < count) {
            dup_key_t *d = &keys[nk];
            d->key = k;
            d->value = v;
            d->index = nk++;
            if (!k) {
                d->kind = 0;
            } else if (fy_node_is_alias(k)) {
                d->kind = 2;
                d->s = fy_node_get_scalar(k, &d->len);
            } else if (fy_node_is_scalar(k)) {
                d->kind = 1;
                d->s = sv_scalar(k, &d->len);
            } else {
                d->kind = 3;
                ncomplex++;
            }
            if (!d->s)
                d->len = 0;
        }
        if ((rc = dup_walk(k, depth + 1, best, found)) == 0)
            rc = dup_walk(v, depth + 1, best, found);
    }
    if (rc == 0 && ncomplex > DUP_MAX_COMPLEX)
        rc = -E2BIG;
    if (rc == 0 && nk > 1) {
        qsort(keys, (size_t)nk, sizeof *keys, dup_cmp);
        for (int i = 1; i < nk; i++) { /* a run of equal keys: all but its first */
            const dup_key_t *a = &keys[i - 1], *b = &keys[i];
            if (b->kind != 3 && a->kind == b->kind && a->len == b->len &&
                (!b->len || memcmp(a->s, b->s, b->len) == 0)) {
                dup_found(b, n, best);
                (*found)++;
            }
        }
        for (int i = nk - ncomplex; i < nk; i++)
            for (int j = nk - ncomplex; j < i; j++)
                if (fy_node_compare(keys[i].key, keys[j].key)) {
                    dup_found(keys[i].index > keys[j].index ? &keys[i] : &keys[j], n, best);
                    (*found)++;
                }
    }
    free(keys);
    return rc;
}

/* The document's first duplicate key as libfyaml words it, or 0. */
static int dup_check(const char *name, struct fy_document *doc, arb_err_t *err)
{
    const struct fy_mark *m = NULL;
    int found = 0, rc = dup_walk(doc ? fy_document_root(doc) : NULL, 0, &m, &found);

    if (rc == -ENOMEM)
        return arb_errf(err, -ENOMEM, "%s: out of memory", name);
    if (rc == -E2BIG)
        return arb_errf(err, -EINVAL,
                        "%s: YAML syntax: more than %d keys in one mapping are mappings or "
                        "lists; a key is a name",
                        name, DUP_MAX_COMPLEX);
    if (!found)
        return 0;
    if (m)
        return arb_errf(err, -EINVAL, "%s:%d:%d: YAML syntax: duplicate key", name, m->line + 1,
                        m->column + 1);
    return arb_errf(err, -EINVAL, "%s: YAML syntax: duplicate key", name);
}

/* Put "FILE:LINE:COL: PATH: " in front of the text already in x->err. */
int sv_prefix(sx_t *x, const sval_t *v, int code, bool with_path)
{
    const struct fy_mark *m = sv_mark(v);
    const char *sep = with_path && v->path[0] ? ": " : "";
    const char *path = with_path ? v->path : "";

    if (m)
        arb_err_prefix(x->err, "%s:%d:%d: %s%s", x->file, m->line + 1, m->column + 1, path, sep);
    else
        arb_err_prefix(x->err, "%s: %s%s", x->file, path, sep);
    return code;
}

int sv_fail(sx_t *x, const sval_t *v, int code, const char *fmt, ...)
{
    va_list ap;

    if (!x->err)
        return code;
    va_start(ap, fmt);
    vsnprintf(x->err->msg, sizeof x->err->msg, fmt, ap);
    va_end(ap);
    return sv_prefix(x, v, code, true);
}

int sv_oom(sx_t *x, const sval_t *v)
{
    return sv_fail(x, v, -ENOMEM, "out of memory");
}

void sv_strf(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(dst, n, fmt, ap);
    va_end(ap);
}

void sv_root(sval_t *v, struct fy_node *n, const char *path)
{
    v->n = n;
    v->hint = NULL;
    snprintf(v->path, sizeof v->path, "%s", path ? path : "");
}

void sv_item(sval_t *out, const sval_t *seq, struct fy_node *item, int i)
{
    out->n = item;
    out->hint = item ? item : seq->hint;
    if (!sv_node_mark(item, 0))
        out->hint = seq->n ? seq->n : seq->hint;
    sv_strf(out->path, sizeof out->path, "%s[%d]", seq->path, i);
}

/* The text of a scalar key; NULL for a key that is no plain string. */
const char *sv_key_text(struct fy_node *k, size_t *len)
{
    const char *s;

    if (!k || !fy_node_is_scalar(k) || fy_node_is_alias(k))
        return NULL;
    s = sv_scalar(k, len);
    return s && *len && !memchr(s, '\0', *len) ? s : NULL;
}

/* dst (room for n) = a, then b[0..blen), cut as snprintf would cut it. Made
 * for every field the readers visit, so without snprintf's format walk. */
static void path_join(char *dst, size_t n, const char *a, const char *b, size_t blen)
{
    size_t alen = strlen(a);

    if (alen > n - 1)
        alen = n - 1;
    memmove(dst, a, alen);
    if (blen > n - 1 - alen)
        blen = n - 1 - alen;
    memcpy(dst + alen, b, blen);
    dst[alen + blen] = '\0';
}

void sv_pair(sval_t *out, const sval_t *map, struct fy_node_pair *p)
{
    size_t len = 0;
    const char *k = sv_key_text(fy_node_pair_key(p), &len);
    char tail[1 + 96];
    size_t tn = 0;

    out->n = fy_node_pair_value(p);
    out->hint = fy_node_pair_key(p);
    if (map->path[0])
        tail[tn++] = '.';
    if (k) {
        size_t kn = len > 96 ? 96 : len;
        memcpy(tail + tn, k, kn);
        tn += kn;
    } else {
        tail[tn++] = '?';
    }
    path_join(out->path, sizeof out->path, map->path, tail, tn);
}

/* Find key in mapping map->n; false when absent. */
bool sv_get(const sval_t *map, const char *key, sval_t *out)
{
    void *it = NULL;
    struct fy_node_pair *p;
    size_t klen = strlen(key);

    if (!map->n || !fy_node_is_mapping(map->n))
        return false;
    while ((p = fy_node_mapping_iterate(map->n, &it))) {
        size_t len = 0;
        const char *k = sv_key_text(fy_node_pair_key(p), &len);
        if (k && len == klen && memcmp(k, key, len) == 0) {
            sv_pair(out, map, p);
            return true;
        }
    }
    return false;
}

/* An empty value: nothing after the colon, ~ or null (not quoted). */
bool sv_null(const sval_t *v)
{
    size_t len = 0;
    const char *s;

    if (!v->n)
        return true;
    if (!fy_node_is_scalar(v->n) || fy_node_is_alias(v->n) || fy_node_get_style(v->n) != FYNS_PLAIN)
        return false;
    s = sv_scalar(v->n, &len);
    if (!s || len == 0)
        return true;
    return (len == 1 && s[0] == '~') ||
           (len == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

/* What a node is, for "expected X, got Y". */
const char *sv_kind(struct fy_node *n)
{
    if (!n)
        return "nothing";
    if (fy_node_is_alias(n))
        return "an alias";
    if (fy_node_is_mapping(n))
        return "a mapping";
    if (fy_node_is_sequence(n))
        return "a list";
    return "a single value";
}

int sv_no_alias(sx_t *x, const sval_t *v)
{
    if (v->n && fy_node_is_alias(v->n))
        return sv_fail(x, v, -EINVAL,
                       "anchors and aliases (*name) are not supported; write the value out "
                       "(use count: to repeat a node or a job)");
    return 0;
}

/* The mapping in v; an empty value reads as an empty mapping (*is = false). */
int sv_map(sx_t *x, const sval_t *v, bool *is)
{
    int rc = sv_no_alias(x, v);

    *is = false;
    if (rc < 0 || sv_null(v))
        return rc;
    if (!fy_node_is_mapping(v->n))
        return sv_fail(x, v, -EINVAL, "expected a mapping (key: value, ...), got %s",
                       sv_kind(v->n));
    *is = true;
    return 0;
}

/* The number of items of the list in v (an empty value: 0). */
int sv_seq(sx_t *x, const sval_t *v, int max, int *count)
{
    int rc = sv_no_alias(x, v), n;

    *count = 0;
    if (rc < 0 || sv_null(v))
        return rc;
    if (!fy_node_is_sequence(v->n))
        return sv_fail(x, v, -EINVAL, "expected a list ([a, b] or '- ' items), got %s",
                       sv_kind(v->n));
    n = fy_node_sequence_item_count(v->n);
    if (n < 0)
        n = 0;
    if (n > max)
        return sv_fail(x, v, -EINVAL, "%d items; the most is %d", n, max);
    *count = n;
    return 0;
}

/* Edit distance of two short strings, for "did you mean". */
static int edit_distance(const char *a, size_t na, const char *b)
{
    size_t nb = strlen(b);
    int row[65];

    if (na > 64 || nb > 64)
        return 99;
    for (size_t j = 0; j <= nb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            int best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* The valid name closest to s, or NULL when none is close. */
const char *sv_suggest(const char *s, size_t len, const char *const *valid)
{
    const char *best = NULL;
    int bestd = 3;

    for (; *valid; valid++) {
        int d = edit_distance(s, len, *valid);
        if (d < bestd) {
            bestd = d;
            best = *valid;
        }
    }
    return best;
}

static void join_names(char *buf, size_t n, const char *const *names)
{
    size_t used = 0;

    buf[0] = '\0';
    for (; *names && used < n; names++) {
        int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", *names);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Show at most 48 bytes of s, control characters as '?'. */
void sv_show(char *out, size_t outn, const char *s, size_t len)
{
    size_t n = len < 48 ? len : 48, i;

    if (outn == 0)
        return;
    if (n > outn - 4)
        n = outn - 4;
    for (i = 0; i < n; i++)
        out[i] = iscntrl((unsigned char)s[i]) ? '?' : s[i];
    if (n < len)
        out[i++] = '.', out[i++] = '.', out[i++] = '.';
    out[i] = '\0';
}

/* Every key of the mapping in map must be a string in valid. */
int sv_check_keys(sx_t *x, const sval_t *map, const char *const *valid)
{
    void *it = NULL;
    struct fy_node_pair *p;

    while ((p = fy_node_mapping_iterate(map->n, &it))) {
        size_t len = 0;
        const char *k = sv_key_text(fy_node_pair_key(p), &len), *const * v, *near;
        char names[320], shown[64];
        sval_t kv;

        if (k) { /* a valid name needs no path: the usual case, made cheap */
            for (v = valid; *v; v++)
                if (strncmp(*v, k, len) == 0 && (*v)[len] == '\0')
                    break;
            if (*v)
                continue;
        }
        sv_pair(&kv, map, p);
        if (!k) {
            struct fy_node *kn = fy_node_pair_key(p);
            if (sv_node_mark(kn, 0))
                kv.n = kn;
            kv.hint = map->n;
            snprintf(kv.path, sizeof kv.path, "%s", map->path);
            if (!kn || (fy_node_is_scalar(kn) && !fy_node_is_alias(kn)))
                return sv_fail(x, &kv, -EINVAL, "a key is empty; give every value a field name");
            return sv_fail(x, &kv, -EINVAL, "keys must be plain names, not %s", sv_kind(kn));
        }
        kv.n = fy_node_pair_key(p);
        snprintf(kv.path, sizeof kv.path, "%s", map->path);
        join_names(names, sizeof names, valid);
        sv_show(shown, sizeof shown, k, len);
        near = sv_suggest(k, len, valid);
        if (near)
            return sv_fail(x, &kv, -EINVAL, "unknown field '%s'; did you mean '%s'? (valid: %s)",
                           shown, near, names);
        return sv_fail(x, &kv, -EINVAL, "unknown field '%s'; valid fields: %s", shown, names);
    }
    return 0;
}

/* ---- scalars -------------------------------------------------------------- */

/*
 * The text of the scalar in v into buf. An empty value is an error unless
 * allow_empty (then it reads as ""). Control characters are rejected.
 */
int sv_text(sx_t *x, const sval_t *v, char *buf, size_t n, bool allow_empty)
{
    size_t len = 0;
    const char *s;
    int rc = sv_no_alias(x, v);

    buf[0] = '\0';
    if (rc < 0)
        return rc;
    if (sv_null(v)) {
        if (allow_empty)
            return 0;
        return sv_fail(x, v, -EINVAL, "has no value; give one");
    }
    if (!fy_node_is_scalar(v->n))
        return sv_fail(x, v, -EINVAL, "expected a single value, got %s", sv_kind(v->n));
    s = sv_scalar(v->n, &len);
    if (!s)
        return sv_oom(x, v);
    if (len == 0 && !allow_empty)
        return sv_fail(x, v, -EINVAL, "is empty; give a value");
    if (len >= n)
        return sv_fail(x, v, -EINVAL, "is too long (%zu characters; the most is %zu)", len, n - 1);
    for (size_t i = 0; i < len; i++)
        if (iscntrl((unsigned char)s[i]))
            return sv_fail(x, v, -EINVAL, "contains a control character at offset %zu", i);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

/* An unquoted scalar's text (numbers and booleans are not quoted in YAML). */
int sv_plain(sx_t *x, const sval_t *v, char *buf, size_t n, const char *what)
{
    int rc = sv_text(x, v, buf, n, false);

    if (rc == 0 && fy_node_get_style(v->n) != FYNS_PLAIN)
        return sv_fail(x, v, -EINVAL, "expected %s, got the quoted string \"%s\"; drop the quotes",
                       what, buf);
    return rc;
}

int sv_int(sx_t *x, const sval_t *v, int64_t lo, int64_t hi, int64_t *out)
{
    char buf[64], *end;
    const char *p;
    long long val;
    int rc = sv_plain(x, v, buf, sizeof buf, "an integer");

    if (rc < 0)
        return rc;
    p = buf + (buf[0] == '+' || buf[0] == '-');
    if (!isdigit((unsigned char)*p))
        return sv_fail(x, v, -EINVAL, "'%s' is not an integer", buf);
    for (; *p; p++)
        if (!isdigit((unsigned char)*p))
            return sv_fail(x, v, -EINVAL, "'%s' is not an integer", buf);
    errno = 0;
    val = strtoll(buf, &end, 10);
    if (errno == ERANGE || val < lo || val > hi)
        return sv_fail(x, v, -ERANGE, "%s is out of range; use %" PRId64 "..%" PRId64, buf, lo, hi);
    *out = val;
    return 0;
}

/* sv_int into an int. */
int sv_int32(sx_t *x, const sval_t *v, int lo, int hi, int *out)
{
    int64_t val;
    int rc = sv_int(x, v, lo, hi, &val);

    if (rc == 0)
        *out = (int)val;
    return rc;
}

int sv_bool(sx_t *x, const sval_t *v, bool *out)
{
    char buf[64];
    int rc = sv_plain(x, v, buf, sizeof buf, "true or false");

    if (rc < 0)
        return rc;
    if (!strcmp(buf, "true") || !strcmp(buf, "True") || !strcmp(buf, "TRUE")) {
        *out = true;
        return 0;
    }
    if (!strcmp(buf, "false") || !strcmp(buf, "False") || !strcmp(buf, "FALSE")) {
        *out = false;
        return 0;
    }
    return sv_fail(x, v, -EINVAL, "expected true or false, got '%s'", buf);
}

int sv_double(sx_t *x, const sval_t *v, double lo, double hi, double *out)
{
    char buf[64], *end;
    double d;
    int rc = sv_plain(x, v, buf, sizeof buf, "a number");

    if (rc < 0)
        return rc;
    errno = 0;
    d = strtod(buf, &end);
    if (*end || end == buf || errno == ERANGE || !isfinite(d) ||
        isdigit((unsigned char)buf[0]) == 0)
        return sv_fail(x, v, -EINVAL, "'%s' is not a number (write it like 1 or 2.5)", buf);
    if (d < lo || d > hi)
        return sv_fail(x, v, -ERANGE, "%s is out of range; use %g..%g", buf, lo, hi);
    *out = d;
    return 0;
}

/* A Kubernetes quantity, quoted or not; the message names v's path. */
int sv_qty(sx_t *x, const sval_t *v, arb_qty_kind_t kind, int64_t *out)
{
    char buf[128];
    int rc = sv_text(x, v, buf, sizeof buf, false);

    if (rc < 0)
        return rc;
    rc = arb_qty_parse(buf, kind, v->path, out, x->err);
    return rc < 0 ? sv_prefix(x, v, rc, false) : 0;
}

/* A duration in the one grammar (src/util/duration.h), into ns. */
int sv_duration_ns(sx_t *x, const sval_t *v, int64_t *ns)
{
    char buf[64];
    int rc = sv_text(x, v, buf, sizeof buf, false);

    if (rc < 0)
        return rc;
    rc = arb_duration_parse(buf, ns, x->err);
    return rc < 0 ? sv_prefix(x, v, rc, true) : 0;
}

/* A duration in whole seconds (a field stored in seconds, as timeLimit). */
int sv_duration(sx_t *x, const sval_t *v, int64_t *secs)
{
    int64_t ns;
    int rc = sv_duration_ns(x, v, &ns);

    if (rc < 0)
        return rc;
    if (ns % 1000000000LL)
        return sv_fail(x, v, -EINVAL, "is counted in whole seconds; give 1s or more (as 90s, 2m)");
    *secs = ns / 1000000000LL;
    return 0;
}

/* One of names[0..n) (NULL entries skipped); *out is its index. */
int sv_enum(sx_t *x, const sval_t *v, const char *const *names, int n, int *out)
{
    char buf[64], list[256];
    size_t used = 0;
    int rc = sv_text(x, v, buf, sizeof buf, false);

    if (rc < 0)
        return rc;
    list[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (!names[i])
            continue;
        if (strcmp(buf, names[i]) == 0) {
            *out = i;
            return 0;
        }
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                     names[i]);
    }
    return sv_fail(x, v, -EINVAL, "unknown value '%s'; use one of: %s", buf, list);
}

int64_t sv_tree_size(struct fy_node *n, int depth, int64_t cap)
{
    int64_t total = 1;
    void *it = NULL;

    if (!n || depth > 64)
        return 1;
    if (fy_node_is_mapping(n)) {
        struct fy_node_pair *p;
        while (total <= cap && (p = fy_node_mapping_iterate(n, &it)))
            total += sv_tree_size(fy_node_pair_key(p), depth + 1, cap) +
                     sv_tree_size(fy_node_pair_value(p), depth + 1, cap);
    } else if (fy_node_is_sequence(n)) {
        struct fy_node *c;
        while (total <= cap && (c = fy_node_sequence_iterate(n, &it)))
            total += sv_tree_size(c, depth + 1, cap);
    }
    return total;
}

/* ---- documents ------------------------------------------------------------ */

static void diag_discard(struct fy_diag *d, void *user, const char *buf, size_t len)
{
    (void)d, (void)user, (void)buf, (void)len;
}

/*
 * The diagnostic settings of every document's parser: messages collected
 * (diag_error words them), nothing printed, no colour. Written out here
 * rather than taken from fy_diag_cfg_default, which asks isatty(stderr)
 * (an ioctl) to choose colour on every call: one system call per job
 * submitted, for output that is discarded. The other values are that
 * default's, so the collected messages are the same.
 */
static const struct fy_diag_cfg diag_cfg = {
    .fp = NULL,
    .output_fn = diag_discard,
    .level = FYET_INFO,
    .module_mask = (1U << FYEM_MAX) - 1,
    .colorize = false,
    .show_type = true,
    .source_width = 50,
    .position_width = 10,
    .type_width = 5,
    .module_width = 6,
};

/* The first syntax error libfyaml collected, as our message. */
static int diag_error(const char *name, sv_doc_t *d, arb_err_t *err)
{
    void *it = NULL;
    struct fy_diag_error *e = fy_diag_errors_iterate(d->diag, &it);

    if (!e)
        return arb_errf(err, -EINVAL, "%s: not valid YAML", name);
    if (e->line > 0)
        return arb_errf(err, -EINVAL, "%s:%d:%d: YAML syntax: %s", name, e->line, e->column,
                        e->msg ? e->msg : "error");
    return arb_errf(err, -EINVAL, "%s: YAML syntax: %s", name, e->msg ? e->msg : "error");
}

/*
 * Each thread keeps one spare parser and its diagnostics between documents:
 * making them anew (fy_parser_create and fy_diag_create, a few dozen
 * allocations) cost about a quarter of reading a small job spec, paid on
 * every submission. A document read to the end of its text without a
 * message gives them back after fy_parser_reset; any other destroys them
 * (sv_doc_open sets d->reuse), so no collected
 * message and no state libfyaml left behind an error reaches the next
 * document (libfyaml 0.7.12 has crashed on some of those, see utf8_bad).
 * Two documents open at once on one thread (codec.c reads one while it
 * holds another) simply make a second parser, destroyed on close. The
 * spare is freed when its thread ends (spare_key's destructor).
 */
typedef struct sv_spare {
    struct fy_diag *diag;
    struct fy_parser *fyp;
} sv_spare_t;

static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_ok; /* the key was made (set once, under spare_once) */

static void spare_free(void *arg)
{
    sv_spare_t *sp = arg;

    if (sp->fyp)
        fy_parser_destroy(sp->fyp);
    if (sp->diag)
        fy_diag_destroy(sp->diag);
    free(sp);
}

static void spare_init(void)
{
    spare_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* This thread's spare record, made on first use; NULL without memory. */
static sv_spare_t *spare_get(void)
{
    sv_spare_t *sp;

    pthread_once(&spare_once, spare_init);
    if (!spare_ok)
        return NULL;
    sp = pthread_getspecific(spare_key);
    if (!sp && (sp = calloc(1, sizeof *sp)) != NULL && pthread_setspecific(spare_key, sp) != 0) {
        free(sp);
        sp = NULL;
    }
    return sp;
}

void sv_doc_close(sv_doc_t *d)
{
    sv_spare_t *sp = d->reuse ? spare_get() : NULL;

    if (d->doc)
        fy_parse_document_destroy(d->fyp, d->doc);
    if (sp && !sp->fyp && d->fyp && d->diag && !fy_diag_got_error(d->diag) &&
        !fy_diag_errors_iterate(d->diag, &(void *){NULL}) && fy_parser_reset(d->fyp) == 0) {
        sp->fyp = d->fyp;
        sp->diag = d->diag;
        d->fyp = NULL;
        d->diag = NULL;
    }
    if (d->fyp)
        fy_parser_destroy(d->fyp);
    if (d->diag)
        fy_diag_destroy(d->diag);
    memset(d, 0, sizeof *d);
}

/*
 * The offset of the first byte of buf that is not strict UTF-8 (overlong
 * forms, surrogates and code points past U+10FFFF included), a NUL or a
 * tab, or len when all is well. *line and *col (from 1, in characters)
 * locate it. Checked before libfyaml sees the text: YAML is UTF-8 here,
 * libfyaml 0.7.12 loops forever on some invalid bytes inside a directive
 * line, and crashes freeing its parser after some errors that involve a tab
 * (found by fuzz_scenario). YAML indents with spaces only, and a tab inside
 * a value can be written "\t" in double quotes.
 */
static size_t utf8_bad(const char *buf, size_t len, int *line, int *col)
{
    const unsigned char *s = (const unsigned char *)buf;
    size_t i = 0;

    *line = *col = 1;
    while (i < len) {
        unsigned c = s[i];
        size_t n = c == 0 || c == '\t' ? 0 : arb_utf8_len(s + i, len - i);

        if (!n)
            return i;
        if (c == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
        i += n;
    }
    return len;
}

/* libfyaml 0.7 exports this but leaves it out of its header: the document
 * state (YAML version, default tag directives) each document of this
 * parser starts from, copied at every reset instead of made anew. */
int fy_parser_set_default_document_state(struct fy_parser *fyp, struct fy_document_state *fyds);

/* A new parser and diagnostics for d (messages collected, see diag_cfg);
 * on failure d holds nothing.
 *
 * Every document starts from a fresh document state, which libfyaml
 * makes by formatting each default tag directive into a new input of its
 * own (snprintf, malloc, a token: two states per document, a sixth of a
 * job spec's parse). Given a default state, it copies that instead (the
 * tokens shared by reference): the state the new parser starts with, so
 * every document still starts from the same one. */
static int doc_parser(const char *name, sv_doc_t *d, arb_err_t *err)
{
    struct fy_parse_cfg pc;
    struct fy_document_state *fyds;

    d->diag = fy_diag_create(&diag_cfg);
    if (!d->diag)
        return arb_errf(err, -ENOMEM, "%s: out of memory", name);
    fy_diag_set_collect_errors(d->diag, true);
    memset(&pc, 0, sizeof pc);
    pc.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2 | FYPCF_ALLOW_DUPLICATE_KEYS; /* dup_check */
    pc.diag = d->diag;
    d->fyp = fy_parser_create(&pc);
    if (!d->fyp || !(fyds = fy_parser_get_document_state(d->fyp)) ||
        fy_parser_set_default_document_state(d->fyp, fyds) != 0) {
        sv_doc_close(d);
        return arb_errf(err, -ENOMEM, "%s: out of memory", name);
    }
    return 0;
}

/* Parse buf as exactly one YAML document with a root mapping. */
int sv_doc_open(const char *name, const char *buf, size_t len, sv_doc_t *d, arb_err_t *err)
{
    sv_spare_t *sp;
    struct fy_document *more;
    struct fy_node *root;
    size_t bad;
    int rc = 0, line, col;

    memset(d, 0, sizeof *d);
    if (len == 0)
        return arb_errf(err, -EINVAL, "%s: the file is empty", name);
    bad = utf8_bad(buf, len, &line, &col);
    if (bad < len) {
        if (buf[bad] == '\t')
            return arb_errf(err, -EINVAL,
                            "%s:%d:%d: a tab character; YAML indents with spaces: replace tabs "
                            "with spaces (inside a quoted value write \\t)",
                            name, line, col);
        return arb_errf(err, -EINVAL, "%s:%d:%d: byte 0x%02x is not %s; save the file as UTF-8",
                        name, line, col, (unsigned char)buf[bad],
                        buf[bad] ? "valid UTF-8" : "allowed (NUL)");
    }
    if ((sp = spare_get()) != NULL && sp->fyp) { /* this thread's, reset on its close */
        d->fyp = sp->fyp;
        d->diag = sp->diag;
        sp->fyp = NULL;
        sp->diag = NULL;
    } else if ((rc = doc_parser(name, d, err)) < 0) {
        goto out;
    }
    if (fy_parser_set_string(d->fyp, buf, len) != 0) {
        rc = arb_errf(err, -ENOMEM, "%s: out of memory", name);
        goto out;
    }
    d->doc = fy_parse_load_document(d->fyp);
    sq_prepare(d->doc, buf, len);
    if (fy_diag_got_error(d->diag) || fy_diag_errors_iterate(d->diag, &(void *){NULL})) {
        rc = diag_error(name, d, err);
        goto out;
    }
    root = d->doc ? fy_document_root(d->doc) : NULL;
    if (!root) {
        rc = arb_errf(err, -EINVAL, "%s: the file holds no YAML document", name);
        goto out;
    }
    if ((rc = dup_check(name, d->doc, err)) < 0)
        goto out;
    more = fy_parse_load_document(d->fyp);
    if (more) {
        const struct fy_mark *m = sv_node_mark(fy_document_root(more), 0);
        if (m)
            rc = arb_errf(err, -EINVAL,
                          "%s:%d:%d: a second YAML document ('---'); put everything in one", name,
                          m->line + 1, m->column + 1);
        else
            rc = arb_errf(err, -EINVAL,
                          "%s: more than one YAML document ('---'); put "
                          "everything in one",
                          name);
        fy_parse_document_destroy(d->fyp, more);
        goto out;
    }
    if (fy_diag_got_error(d->diag) || fy_diag_errors_iterate(d->diag, &(void *){NULL})) {
        rc = diag_error(name, d, err);
        goto out;
    }
    /* Read to the end of its stream without a message: a parser that
     * fy_parser_reset makes as new (reset in the middle of a stream, at a
     * duplicate key or a second document, it read the next text wrong). */
    d->reuse = true;
    if (!fy_node_is_mapping(root) || fy_node_is_alias(root)) {
        const struct fy_mark *m = sv_node_mark(root, 0);
        rc = arb_errf(err, -EINVAL,
                      "%s:%d:%d: expected a mapping (key: value lines) at the top, "
                      "got %s",
                      name, m ? m->line + 1 : 1, m ? m->column + 1 : 1, sv_kind(root));
        goto out;
    }
out:
    if (rc < 0)
        sv_doc_close(d);
    return rc;
}

/* ---- several documents (Kubernetes manifests) ----------------------------------- */

int sv_docs_open(const char *name, const char *buf, size_t len, sv_doc_t *d, arb_err_t *err)
{
    size_t bad;
    int rc, line, col;

    memset(d, 0, sizeof *d);
    if (len == 0)
        return arb_errf(err, -EINVAL, "%s: the file is empty", name);
    bad = utf8_bad(buf, len, &line, &col);
    if (bad < len) {
        if (buf[bad] == '\t')
            return arb_errf(err, -EINVAL,
                            "%s:%d:%d: a tab character; YAML indents with spaces: replace tabs "
                            "with spaces (inside a quoted value write \\t)",
                            name, line, col);
        return arb_errf(err, -EINVAL, "%s:%d:%d: byte 0x%02x is not %s; save the file as UTF-8",
                        name, line, col, (unsigned char)buf[bad],
                        buf[bad] ? "valid UTF-8" : "allowed (NUL)");
    }
    if ((rc = doc_parser(name, d, err)) < 0)
        return rc;
    if (fy_parser_set_string(d->fyp, buf, len) != 0) {
        sv_doc_close(d);
        return arb_errf(err, -ENOMEM, "%s: out of memory", name);
    }
    d->buf = buf;
    d->len = len;
    return 0;
}

int sv_docs_next(sv_doc_t *d, const char *name, arb_err_t *err)
{
    if (d->doc) {
        fy_parse_document_destroy(d->fyp, d->doc);
        d->doc = NULL;
    }
    d->doc = fy_parse_load_document(d->fyp);
    if (fy_diag_got_error(d->diag) || fy_diag_errors_iterate(d->diag, &(void *){NULL})) {
        int rc = diag_error(name, d, err);
        if (d->doc)
            fy_parse_document_destroy(d->fyp, d->doc);
        d->doc = NULL;
        return rc;
    }
    if (!d->doc)
        return 0;
    sq_prepare(d->doc, d->buf, d->len);
    int rc = dup_check(name, d->doc, err);
    if (rc < 0) {
        fy_parse_document_destroy(d->fyp, d->doc);
        d->doc = NULL;
        return rc;
    }
    return 1;
}
