/*
 * utf8.c: the UTF-8 decoder and mender of utf8.h (why: see there).
 */
#include "util/utf8.h"

#include <string.h>

size_t arb_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0], cp;
    size_t len;

    if (c < 0x80)
        return 1;
    if (c < 0xC2 || c > 0xF4)
        return 0;
    len = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (len > n)
        return 0;
    cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Whether the n bytes at s, all that is left, are the start of a sequence
 * that more bytes would have completed: completed with the smallest bytes
 * its lead allows, is it one? */
static int cut_short(const unsigned char *s, size_t n)
{
    unsigned char full[4];
    size_t want = s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;

    if (s[0] < 0xC2 || s[0] > 0xF4 || n >= want)
        return 0;
    memcpy(full, s, n);
    for (size_t i = n; i < want; i++)
        full[i] = 0x80;
    if (n == 1 && s[0] == 0xE0)
        full[1] = 0xA0; /* E0 needs A0..BF second, F0 90..BF (no overlong form) */
    if (n == 1 && s[0] == 0xF0)
        full[1] = 0x90;
    return arb_utf8_len(full, want) == want;
}

size_t arb_utf8_fix(char *s)
{
    unsigned char *u = (unsigned char *)s;
    size_t n = strlen(s), changed = 0;

    for (size_t i = 0; i < n;) {
        size_t len = arb_utf8_len(u + i, n - i);
        if (len) {
            i += len;
            continue;
        }
        if (cut_short(u + i, n - i)) { /* the text ends inside a sequence: drop its start */
            changed += n - i;
            u[i] = '\0';
            break;
        }
        u[i++] = '?';
        changed++;
    }
    return changed;
}
