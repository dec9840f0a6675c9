/*
 * strtab.c: string interning with an open-addressing hash (FNV-1a, linear
 * probing, load factor kept under 1/2). Strings are copied and owned by the
 * table until arb_strtab_free().
 */
#include <stdlib.h>
#include <string.h>

#include "arbiter/strtab.h"
#include "util/hash.h"

static uint32_t hash(const char *s)
{
    uint64_t h = arb_hash_str(ARB_HASH_SEED, s);
    return (uint32_t)(h ^ (h >> 32));
}

void arb_strtab_init(arb_strtab_t *t)
{
    memset(t, 0, sizeof *t);
}

void arb_strtab_free(arb_strtab_t *t)
{
    for (uint32_t i = 1; i < t->n; i++)
        free(t->strs[i]);
    free(t->strs);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static int rehash(arb_strtab_t *t, uint32_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (uint32_t id = 1; id < t->n; id++) {
        uint32_t i = hash(t->strs[id]) & (nslots - 1);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = id;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

uint32_t arb_strtab_find(const arb_strtab_t *t, const char *s)
{
    if (!t->nslots || !s)
        return 0;
    for (uint32_t i = hash(s) & (t->nslots - 1); t->slots[i]; i = (i + 1) & (t->nslots - 1))
        if (strcmp(t->strs[t->slots[i]], s) == 0)
            return t->slots[i];
    return 0;
}

uint32_t arb_intern(arb_strtab_t *t, const char *s)
{
    uint32_t id = arb_strtab_find(t, s);
    char *copy;

    if (id)
        return id;
    if (t->n == 0) { /* reserve id 0 for "none" */
        t->strs = calloc(16, sizeof *t->strs);
        if (!t->strs)
            return 0;
        t->cap = 16;
        t->n = 1;
    }
    if ((t->n + 1) * 2 > t->nslots && rehash(t, t->nslots ? t->nslots * 2 : 64) < 0)
        return 0;
    if (t->n == t->cap) {
        char **strs = realloc(t->strs, t->cap * 2 * sizeof *strs);
        if (!strs)
            return 0;
        t->strs = strs;
        t->cap *= 2;
    }
    copy = strdup(s);
    if (!copy)
        return 0;
    id = t->n++;
    t->strs[id] = copy;
    uint32_t i = hash(s) & (t->nslots - 1);
    while (t->slots[i])
        i = (i + 1) & (t->nslots - 1);
    t->slots[i] = id;
    return id;
}

const char *arb_str(const arb_strtab_t *t, uint32_t id)
{
    return id && id < t->n ? t->strs[id] : "";
}
