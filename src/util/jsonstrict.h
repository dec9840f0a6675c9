/*
 * jsonstrict.h: a check, without a tree, that a text is one JSON object
 * that jansson's strict reading (json_loadb with JSON_REJECT_DUPLICATES)
 * surely accepts. The controller checks every JSON job spec strictly before
 * its YAML reader reads it (src/state/codec.c); building jansson's tree only
 * to throw it away was a tenth of a submission's CPU.
 *
 * The answer is one-sided: true means jansson accepts the text (an object
 * at the top, nothing after it); false means "not sure", and the caller
 * asks jansson, whose verdict and message stand. So the check may leave out
 * whatever is rare in a job spec and costly to get exactly right: a \u
 * escape, a key with any escape (decoded keys are what duplicates compare),
 * an object of more than ARB_JSON_SURE_KEYS keys, nesting deeper than
 * ARB_JSON_SURE_DEPTH, an integer past 18 digits, an exponent past 2
 * digits. No allocation, no globals; linear in the text (quadratic only in
 * the keys of one object, at most ARB_JSON_SURE_KEYS).
 */
#ifndef ARB_UTIL_JSONSTRICT_H
#define ARB_UTIL_JSONSTRICT_H

#include <stdbool.h>
#include <stddef.h>

#define ARB_JSON_SURE_KEYS 32
#define ARB_JSON_SURE_DEPTH 32

/* true: buf[0..len) is one JSON object that jansson reads strictly
 * (duplicate keys refused); false: not sure (ask jansson). */
bool arb_json_sure_object(const char *buf, size_t len);

#endif
