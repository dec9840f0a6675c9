/*
 * buf.h: the base layer's one growable byte buffer.
 *
 * Replies read from libcurl, the text of /metrics, a shell command being
 * assembled, a JSON body: each was a small struct of its own with its own
 * realloc loop. This is the one they share. The text is always
 * NUL-terminated (p[len] == '\0' once anything was added), so it can be
 * handed to a parser or printed as is.
 *
 * Failure is sticky: once an allocation fails, or the buffer would grow
 * past its max (0: no limit), `oom` is set, later calls add nothing, and
 * the caller checks it once at the end (one check, not one per append).
 *
 *   arb_buf_t b = {0};                     (or {.max = 8 << 20})
 *   arb_buf_printf(&b, "x %d\n", 1);
 *   if (b.oom) ... else use b.p, b.len
 *   arb_buf_free(&b);
 */
#ifndef ARB_UTIL_BUF_H
#define ARB_UTIL_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct arb_buf {
    char *p;    /* NULL until the first append; then NUL-terminated */
    size_t len; /* bytes held, not counting the NUL */
    size_t cap; /* bytes allocated */
    size_t max; /* largest len allowed (0: none); beyond it oom is set */
    bool oom;   /* an allocation failed or max was passed: nothing more is added */
} arb_buf_t;

/* Make room for n more bytes (and the NUL). 0, or -1 with oom set. */
int arb_buf_reserve(arb_buf_t *b, size_t n);
/* Append n bytes of d. 0, or -1 (oom set, nothing added). */
int arb_buf_put(arb_buf_t *b, const void *d, size_t n);
/* Append a C string. */
int arb_buf_puts(arb_buf_t *b, const char *s);
/* Append one byte. */
int arb_buf_putc(arb_buf_t *b, char c);
/* Append formatted text. */
int arb_buf_printf(arb_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append all that stream f holds, to its end (a file, stdin): 0; -EFBIG
 * when that would pass max, -ENOMEM (both set oom), -EIO on a read error. */
int arb_buf_read(arb_buf_t *b, FILE *f);
/* Forget the contents, keep the memory (and max); oom cleared. */
void arb_buf_reset(arb_buf_t *b);
/* The text, now the caller's (free() it); the buffer is empty again. NULL
 * when oom, or "" when nothing was added. */
char *arb_buf_take(arb_buf_t *b);
/* Free the memory; the buffer is {0} with its max kept. */
void arb_buf_free(arb_buf_t *b);
/* A libcurl CURLOPT_WRITEFUNCTION that appends to the arb_buf_t given as
 * CURLOPT_WRITEDATA (returns less than asked when full: the transfer then
 * fails with CURLE_WRITE_ERROR). The signature is curl's; no curl header. */
size_t arb_buf_write_cb(char *d, size_t size, size_t nmemb, void *buf);

#endif
