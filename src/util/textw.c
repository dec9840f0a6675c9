/*
 * textw.c: decimal integers, JSON strings and times written without
 * snprintf, byte for byte as the calls they replace (textw.h says which).
 */
#include "util/textw.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/utf8.h"

size_t arb_tw_i64(char *d, int64_t v)
{
    char t[ARB_TW_I64_MAX];
    size_t k = sizeof t;
    /* the magnitude as unsigned: -INT64_MIN does not fit an int64_t */
    uint64_t m = v < 0 ? 0ULL - (uint64_t)v : (uint64_t)v;

    do {
        t[--k] = (char)('0' + m % 10);
        m /= 10;
    } while (m);
    if (v < 0)
        t[--k] = '-';
    memcpy(d, t + k, sizeof t - k);
    return sizeof t - k;
}

size_t arb_tw_u64_pad(char *d, uint64_t v, int width)
{
    char t[20];
    size_t k = sizeof t, pad = 0;

    do {
        t[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (width > 0 && (size_t)width > sizeof t - k)
        pad = (size_t)width - (sizeof t - k);
    memset(d, '0', pad);
    memcpy(d + pad, t + k, sizeof t - k);
    return pad + sizeof t - k;
}

void arb_buf_i64(arb_buf_t *b, int64_t v)
{
    if (arb_buf_reserve(b, ARB_TW_I64_MAX) < 0)
        return;
    b->len += arb_tw_i64(b->p + b->len, v);
    b->p[b->len] = '\0';
}

/* The two-byte escape of c ('\\' and this letter), 0 when c has none. */
static char short_escape(unsigned c)
{
    switch (c) {
    case '"':
        return '"';
    case '\\':
        return '\\';
    case '\b':
        return 'b';
    case '\f':
        return 'f';
    case '\n':
        return 'n';
    case '\r':
        return 'r';
    case '\t':
        return 't';
    }
    return 0;
}

/* A byte written as it is: printable ASCII but the quote and backslash. */
static inline bool jplain(unsigned c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* Up to this many bytes of text, room for the worst case (every byte a
 * six-byte escape) is reserved at once instead of counting first. */
#define JSTR_SHORT 1024

int arb_buf_jstr(arb_buf_t *b, const char *s, size_t n, bool fix)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t need = 2, i = 0, run = 0;
    bool bad = false;

    if (n <= JSTR_SHORT && !b->max) {
        need += 6 * n;
    } else { /* the exact length (up to the first bad byte, without fix) */
        while (i < n) {
            unsigned c = u[i];
            if (jplain(c)) {
                need++, i++;
            } else if (c < 0x80) {
                need += short_escape(c) ? 2 : 6, i++;
            } else {
                size_t len = arb_utf8_len(u + i, n - i);
                if (!len && !fix) {
                    bad = true;
                    break;
                }
                need += len ? len : 3;
                i += len ? len : 1;
            }
        }
        i = 0;
    }
    if (arb_buf_reserve(b, need) < 0) /* oom: nothing more is added */
        return bad ? -EINVAL : 0;
    char *d = b->p + b->len;
    *d++ = '"';
    while (i < n) {
        unsigned c = u[i];
        if (jplain(c)) {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t len = arb_utf8_len(u + i, n - i);
            if (len) {
                i += len;
                continue;
            }
            if (!fix) { /* where jansson stops: the text since the last escape is not written */
                b->len = (size_t)(d - b->p);
                b->p[b->len] = '\0';
                return -EINVAL;
            }
            memcpy(d, s + run, i - run);
            d += i - run;
            memcpy(d, "\xef\xbf\xbd", 3); /* U+FFFD, raw, as jansson writes text */
            d += 3;
            run = ++i;
            continue;
        }
        memcpy(d, s + run, i - run);
        d += i - run;
        char e = short_escape(c);
        *d++ = '\\';
        if (e) {
            *d++ = e;
        } else {
            memcpy(d, "u00", 3);
            d[3] = hex[c >> 4];
            d[4] = hex[c & 15];
            d += 5;
        }
        run = ++i;
    }
    memcpy(d, s + run, n - run);
    d += n - run;
    *d++ = '"';
    b->len = (size_t)(d - b->p);
    b->p[b->len] = '\0';
    return 0;
}

static char *two(char *d, int v)
{
    d[0] = (char)('0' + v / 10);
    d[1] = (char)('0' + v % 10);
    return d + 2;
}

void arb_tw_time(int64_t wall_ms, char *buf, size_t n)
{
    time_t t = (time_t)(wall_ms / 1000);
    int ms = (int)(wall_ms % 1000);
    struct tm tm;

    memset(&tm, 0, sizeof tm);
    gmtime_r(&t, &tm);
    int y = tm.tm_year + 1900;
    /* out of the plain form's range: snprintf's own way (a sign, more digits, a cut) */
    if (n < 25 || y < 0 || y > 9999 || ms < 0) {
        snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", y, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
        return;
    }
    char *d = two(two(buf, y / 100), y % 100);
    *d++ = '-';
    d = two(d, tm.tm_mon + 1);
    *d++ = '-';
    d = two(d, tm.tm_mday);
    *d++ = 'T';
    d = two(d, tm.tm_hour);
    *d++ = ':';
    d = two(d, tm.tm_min);
    *d++ = ':';
    d = two(d, tm.tm_sec);
    *d++ = '.';
    *d++ = (char)('0' + ms / 100);
    d = two(d, ms % 100);
    *d++ = 'Z';
    *d = '\0';
}
