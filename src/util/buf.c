/*
 * buf.c: the one growable byte buffer (buf.h): doubling growth, a sticky
 * failure flag, an optional ceiling, always NUL-terminated.
 */
#include "util/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int arb_buf_reserve(arb_buf_t *b, size_t n)
{
    if (b->oom)
        return -1;
    if (n > SIZE_MAX - b->len - 1 || (b->max && b->len + n > b->max)) {
        b->oom = true;
        return -1;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return -1;
    }
    p[b->len] = '\0'; /* text even before the first append (reserve, then take) */
    b->p = p;
    b->cap = cap;
    return 0;
}

int arb_buf_put(arb_buf_t *b, const void *d, size_t n)
{
    if (arb_buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int arb_buf_puts(arb_buf_t *b, const char *s)
{
    return arb_buf_put(b, s, strlen(s));
}

int arb_buf_putc(arb_buf_t *b, char c)
{
    return arb_buf_put(b, &c, 1);
}

int arb_buf_printf(arb_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    char small[256];

    if (b->oom)
        return -1;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->oom = true;
        return -1;
    }
    if ((size_t)k < sizeof small)
        return arb_buf_put(b, small, (size_t)k);
    if (arb_buf_reserve(b, (size_t)k) < 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)k;
    return 0;
}

int arb_buf_read(arb_buf_t *b, FILE *f)
{
    char tmp[65536];
    size_t k;

    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0)
        if (arb_buf_put(b, tmp, k) < 0)
            return b->max && b->len + k > b->max ? -EFBIG : -ENOMEM;
    return ferror(f) ? -EIO : 0;
}

void arb_buf_reset(arb_buf_t *b)
{
    b->len = 0;
    b->oom = false;
    if (b->p)
        b->p[0] = '\0';
}

char *arb_buf_take(arb_buf_t *b)
{
    char *p = b->oom ? NULL : b->p ? b->p : strdup("");
    if (b->oom)
        free(b->p);
    size_t max = b->max;
    *b = (arb_buf_t){.max = max};
    return p;
}

void arb_buf_free(arb_buf_t *b)
{
    size_t max = b->max;
    free(b->p);
    *b = (arb_buf_t){.max = max};
}

size_t arb_buf_write_cb(char *d, size_t size, size_t nmemb, void *buf)
{
    size_t n = size * nmemb;
    return arb_buf_put(buf, d, n) == 0 ? n : 0;
}
