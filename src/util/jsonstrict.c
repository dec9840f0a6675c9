/*
 * jsonstrict.c: is a text one JSON object that jansson surely reads
 * strictly? (jsonstrict.h). A recursive descent over RFC 8259's grammar,
 * narrowed where jansson refuses what the RFC allows (a NUL escaped as
 * \u0000, an integer past long long, a real that overflows a double,
 * duplicate keys) and where the exact rule costs more than asking jansson
 * (any \u escape, a key with an escape): there it answers false, "not
 * sure". fuzz/fuzz_job_body.c holds it to jansson on any input.
 */
#include "util/jsonstrict.h"

#include <string.h>

#include "util/utf8.h"

typedef struct js {
    const unsigned char *p, *end;
} js_t;

static void js_ws(js_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool js_digit(unsigned c)
{
    return c >= '0' && c <= '9';
}

/* A string at j->p (its '"'); *plain: no escape inside. */
static bool js_string(js_t *j, bool *plain)
{
    *plain = true;
    j->p++;
    while (j->p < j->end) {
        unsigned c = *j->p;
        if (c == '"') {
            j->p++;
            return true;
        }
        if (c < 0x20) /* a control character: jansson refuses it, unescaped */
            return false;
        if (c == '\\') {
            *plain = false;
            if (j->end - j->p < 2)
                return false;
            switch (j->p[1]) {
            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
                j->p += 2;
                continue;
            default: /* \u (a NUL, a lone surrogate: jansson's rules) or not an escape */
                return false;
            }
        }
        if (c < 0x80) {
            j->p++;
            continue;
        }
        size_t n = arb_utf8_len(j->p, (size_t)(j->end - j->p)); /* jansson's UTF-8 rules */
        if (n == 0)
            return false;
        j->p += n;
    }
    return false; /* no closing quote */
}

/* A number: an integer that fits long long (18 digits), or a real whose
 * exponent has at most 2 digits (at most 1e117: no overflow). */
static bool js_number(js_t *j)
{
    const unsigned char *p = j->p, *e = j->end;
    int idig = 0, fdig = 0, edig = 0;

    if (p < e && *p == '-')
        p++;
    if (p < e && *p == '0') {
        p++;
        idig = 1;
    } else {
        while (p < e && js_digit(*p)) {
            p++;
            idig++;
        }
    }
    if (idig == 0 || idig > 18)
        return false;
    if (p < e && *p == '.') {
        p++;
        while (p < e && js_digit(*p)) {
            p++;
            fdig++;
        }
        if (fdig == 0)
            return false;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        while (p < e && js_digit(*p)) {
            p++;
            edig++;
        }
        if (edig == 0 || edig > 2)
            return false;
    }
    j->p = p;
    return true;
}

static bool js_word(js_t *j, const char *w)
{
    size_t n = strlen(w);

    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return false;
    j->p += n;
    return true;
}

static bool js_value(js_t *j, int depth);

/* One member of a container, at j->p (white space skipped); arg: the
 * step's own state. */
typedef bool js_step_fn(js_t *j, int depth, void *arg);

/* An object's or an array's members at j->p (its opening byte), each read
 * by step, separated by commas, up to close: the white space, the commas
 * and the end are this loop's, once for both. */
static bool js_seq(js_t *j, int depth, unsigned char close, js_step_fn *step, void *arg)
{
    j->p++;
    js_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return true;
    }
    for (;;) {
        if (!step(j, depth, arg))
            return false;
        js_ws(j);
        if (j->p >= j->end)
            return false;
        if (*j->p == close) {
            j->p++;
            return true;
        }
        if (*j->p != ',')
            return false;
        j->p++;
        js_ws(j);
    }
}

/* The keys of the object being read, as written. */
typedef struct js_keys {
    struct {
        const unsigned char *s;
        size_t n;
    } k[ARB_JSON_SURE_KEYS];
    int n;
} js_keys_t;

/* An object's member: its key (compared as written, so a key with an
 * escape is "not sure": jansson compares them decoded), ':', its value. */
static bool js_member(js_t *j, int depth, void *arg)
{
    js_keys_t *keys = arg;
    bool plain;

    if (j->p >= j->end || *j->p != '"' || keys->n == ARB_JSON_SURE_KEYS)
        return false;
    const unsigned char *ks = j->p + 1;
    if (!js_string(j, &plain) || !plain)
        return false;
    size_t kn = (size_t)(j->p - 1 - ks);
    for (int i = 0; i < keys->n; i++)
        if (keys->k[i].n == kn && memcmp(keys->k[i].s, ks, kn) == 0)
            return false; /* a duplicate: jansson's message */
    keys->k[keys->n].s = ks;
    keys->k[keys->n].n = kn;
    keys->n++;
    js_ws(j);
    if (j->p >= j->end || *j->p != ':')
        return false;
    j->p++;
    js_ws(j);
    return js_value(j, depth);
}

/* An array's element: a value. */
static bool js_element(js_t *j, int depth, void *arg)
{
    (void)arg;
    return js_value(j, depth);
}

/* An object at j->p (its '{'). */
static bool js_object(js_t *j, int depth)
{
    js_keys_t keys;

    keys.n = 0;
    return js_seq(j, depth, '}', js_member, &keys);
}

/* A value at j->p (no white space before it); depth: the containers open. */
static bool js_value(js_t *j, int depth)
{
    bool plain;

    if (j->p >= j->end)
        return false;
    switch (*j->p) {
    case '{':
        return depth < ARB_JSON_SURE_DEPTH && js_object(j, depth + 1);
    case '[':
        return depth < ARB_JSON_SURE_DEPTH && js_seq(j, depth + 1, ']', js_element, NULL);
    case '"':
        return js_string(j, &plain);
    case 't':
        return js_word(j, "true");
    case 'f':
        return js_word(j, "false");
    case 'n':
        return js_word(j, "null");
    default:
        return js_number(j);
    }
}

bool arb_json_sure_object(const char *buf, size_t len)
{
    if (!buf)
        return false;
    js_t j = {(const unsigned char *)buf, (const unsigned char *)buf + len};
    js_ws(&j);
    if (j.p >= j.end || *j.p != '{' || !js_object(&j, 1))
        return false;
    js_ws(&j);
    return j.p == j.end;
}
