/*
 * textw.h: the small text writers the hot encoders share, into an
 * arb_buf_t: a decimal integer, a JSON string as jansson escapes it, and a
 * time as jv_time's text. A job's store record (state/jobrec.c and its
 * compact form, state/jobcore.c), an event's record (state/ledger.c) and
 * the compact JSON writer (jsonw.c) wrote each of these their own way, the
 * numbers with an snprintf each (some 700 instructions apiece, half of a
 * job record's cost); here they are written digit by digit and byte run by
 * byte run, the room for a whole piece reserved once.
 *
 * The bytes are exactly those of the calls they replace (snprintf's "%lld",
 * jansson's dump_string without flags, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ"):
 * stores written by either are read by the other. tests/unit/test_textw.c
 * compares them with those calls over random and extreme values.
 * Failure is the buffer's (b->oom, sticky), but where a function says more.
 */
#ifndef ARB_UTIL_TEXTW_H
#define ARB_UTIL_TEXTW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* The most bytes arb_tw_i64 writes (INT64_MIN: a sign and 19 digits). */
#define ARB_TW_I64_MAX 20

/* v in decimal into d (ARB_TW_I64_MAX bytes of room, no NUL), as "%lld"
 * writes it; returns the length. */
size_t arb_tw_i64(char *d, int64_t v);

/* v in decimal, zero-padded to at least width digits ("%0*llu"), into d
 * (max(width, 20) bytes of room, no NUL); returns the length. */
size_t arb_tw_u64_pad(char *d, uint64_t v, int width);

/* Append v in decimal ("%lld"). */
void arb_buf_i64(arb_buf_t *b, int64_t v);

/* Append the n bytes of s as a JSON string, quoted, as jansson's
 * dump_string writes it without flags: '"' and '\\' escaped, control
 * characters as \b \f \n \r \t or \u00XX (upper-case hex), the rest, UTF-8
 * included, as it is. A byte that starts no UTF-8 sequence (arb_utf8_len):
 * with fix, written as U+FFFD (raw) and 0 returned; without, -EINVAL,
 * having appended what jansson would have written by then (the quote and
 * the text up to its last escape), nothing after it, no closing quote. */
int arb_buf_jstr(arb_buf_t *b, const char *s, size_t n, bool fix);

/* The text of wall_ms as jv_time writes it (state/jv.c: UTC,
 * "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" of gmtime_r's fields, snprintf
 * into buf of n bytes: cut to fit, NUL-terminated). */
void arb_tw_time(int64_t wall_ms, char *buf, size_t n);

#endif
