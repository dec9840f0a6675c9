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

#include <stdbool.h>
#include <stdint.h>

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

/*
 * The same text written as it goes, without a tree: for a reply the code
 * builds field by field (an agent's assignment list, a job), so no jansson
 * object is allocated, filled, dumped and freed for it. The calls follow the
 * shape (obj, key, value, ..., obj_end); commas and colons are the writer's.
 * A key or string value that is NULL or not UTF-8 fails the whole text
 * (arb_jw_end says -EINVAL), as json_pack fails for it; so does nesting past
 * ARB_JW_MAX_DEPTH. The bytes are json_dumps(JSON_COMPACT)'s for the tree
 * the same calls would build (test_jsonw).
 */
#define ARB_JW_MAX_DEPTH 64

typedef struct arb_jw {
    arb_buf_t *b;
    int depth;
    uint64_t more;  /* bit d: the container at depth d has a member already */
    bool after_key; /* the next value is a member's: no comma before it */
    int err;        /* the first failure, 0 none */
} arb_jw_t;

/* Start writing into b (appended to what it holds). */
void arb_jw_begin(arb_jw_t *w, arb_buf_t *b);
void arb_jw_obj(arb_jw_t *w);
void arb_jw_obj_end(arb_jw_t *w);
void arb_jw_arr(arb_jw_t *w);
void arb_jw_arr_end(arb_jw_t *w);
void arb_jw_key(arb_jw_t *w, const char *k);
void arb_jw_str(arb_jw_t *w, const char *s);
void arb_jw_int(arb_jw_t *w, int64_t v);
void arb_jw_bool(arb_jw_t *w, bool v);
void arb_jw_null(arb_jw_t *w);
/* The member k: s, only when s is a UTF-8 string (NULL or not UTF-8: left
 * out, as json_object_set_new(o, k, json_string(s)) leaves it). */
void arb_jw_kstr_opt(arb_jw_t *w, const char *k, const char *s);
/* A tree as a value, as arb_jsonw_compact writes it (any type). */
void arb_jw_json(arb_jw_t *w, const json_t *v);
/* 0 (every container closed), -EINVAL (see above, or unbalanced), -ENOMEM. */
int arb_jw_end(arb_jw_t *w);

#endif
