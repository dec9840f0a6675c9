/*
 * utf8.h: UTF-8 as JSON needs it. Every text the controller writes into a
 * store record or an event is JSON, and a JSON string must be UTF-8; a
 * message cut at a fixed byte count (a name in Chinese near the end) or a
 * byte that is not UTF-8 must not make the record fail to encode, because
 * a save that cannot encode is a state change that is never stored.
 * arb_utf8_len is the one decoder (jansson's rules: no overlong forms, no
 * surrogates, nothing past U+10FFFF); arb_utf8_fix mends a text in place
 * before it is written.
 */
#ifndef ARB_UTIL_UTF8_H
#define ARB_UTIL_UTF8_H

#include <stddef.h>

/* The length (1-4) of the UTF-8 sequence at s, which has n bytes left; 0
 * when it is not one (a stray continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, or cut short by n). */
size_t arb_utf8_len(const unsigned char *s, size_t n);

/* Mend the NUL-terminated s in place so that it is UTF-8: a sequence cut
 * short at the very end (a fixed-size buffer's cut) is dropped, and each
 * other byte that starts no sequence becomes '?'. Returns how many bytes
 * it changed or dropped (0: s was UTF-8 already). */
size_t arb_utf8_fix(char *s);

#endif
