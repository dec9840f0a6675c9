/*
 * strtab.h: string interning. Labels, taint keys, GPU models, queue names
 * and datasets are stored as small integer ids, so filters compare integers
 * and a node's labels cost 8 bytes each. Id 0 is reserved for "none" and
 * is never returned for a real string.
 */
#ifndef ARBITER_STRTAB_H
#define ARBITER_STRTAB_H

#include "arbiter/arbiter.h"

typedef struct arb_strtab {
    char **strs;     /* id -> string; strs[0] == "" */
    uint32_t n, cap; /* ids in use, capacity of strs */
    uint32_t *slots; /* open-addressing hash: slot -> id (0 = empty) */
    uint32_t nslots; /* power of two */
} arb_strtab_t;

void arb_strtab_init(arb_strtab_t *t);
/* Free everything the table owns. */
void arb_strtab_free(arb_strtab_t *t);
/* Return s's id, adding a copy of s when absent. Returns 0 only on -ENOMEM. */
uint32_t arb_intern(arb_strtab_t *t, const char *s);
/* Return s's id, or 0 when s was never interned. */
uint32_t arb_strtab_find(const arb_strtab_t *t, const char *s);
/* The string of id (borrowed; "" for 0 or an unknown id). */
const char *arb_str(const arb_strtab_t *t, uint32_t id);

#endif
