/*
 * jsonw.h: a jansson tree written as compact JSON text, byte for byte what
 * json_dumps(v, JSON_COMPACT) gives (jansson 2.14 keeps an object's keys in
 * their insertion order, so JSON_PRESERVE_ORDER changes nothing), at a
 * fraction of its cost: jansson checks every object and array it writes
 * against a hash table of its parents (a "%p" key printed and a table entry
 * allocated for each), and prints every integer with snprintf. The API's
 * replies and the event log's records are trees the code built itself, with
 * no cycles, so they are written straight into one buffer here.
 *
 * Reals, the rare value, are written by jansson itself (its precision and
 * its ".0"), and a tree deeper than ARB_JSONW_MAX_DEPTH goes to json_dumps
 * whole; a string that is not UTF-8 fails the dump as it fails jansson's.
 */
#ifndef ARB_UTIL_JSONW_H
#define ARB_UTIL_JSONW_H

#include <jansson.h>

#include "util/buf.h"

#define ARB_JSONW_MAX_DEPTH 512

/* Append v (an object or an array) to b as json_dumps(v, JSON_COMPACT)
 * would write it: 0; -EINVAL where json_dumps gives NULL (not an object or
 * array, a string that is not UTF-8, a real jansson cannot write) with
 * nothing appended; -ENOMEM with b->oom set. */
int arb_jsonw_compact(arb_buf_t *b, const json_t *v);

/* json_dumps(v, JSON_COMPACT)'s text, the caller's to free(), or NULL
 * where json_dumps gives NULL (or out of memory). */
char *arb_jsonw_dumps(const json_t *v);

#endif
