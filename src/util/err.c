/*
 * err.c: the error-text helpers behind arb_err_t (see arbiter.h for the
 * return convention). Messages are truncated, never overflowed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arbiter/arbiter.h"

int arb_errf(arb_err_t *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void arb_err_prefix(arb_err_t *e, const char *fmt, ...)
{
    char pre[256], old[sizeof e->msg];
    va_list ap;

    if (!e)
        return;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(pre);
    if (n >= sizeof e->msg)
        n = sizeof e->msg - 1;
    memcpy(e->msg, pre, n);
    size_t m = strnlen(old, sizeof old);
    if (m > sizeof e->msg - 1 - n)
        m = sizeof e->msg - 1 - n;
    memcpy(e->msg + n, old, m);
    e->msg[n + m] = '\0';
}
