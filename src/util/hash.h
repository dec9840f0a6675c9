/*
 * hash.h: the one non-cryptographic hash of the tree, FNV-1a (64 bits),
 * for hash tables (string interning, Idempotency-Keys), change detection
 * (a service's endpoint set) and stable names derived from text (cgroup
 * folders, fake GPU UUIDs). Not for anything an attacker may choose to
 * collide on purpose where that costs more than a slower probe, and never
 * for secrets. Inline: each use is a few instructions in a hot loop.
 */
#ifndef ARB_UTIL_HASH_H
#define ARB_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define ARB_HASH_SEED 14695981039346656037ULL /* FNV-1a's offset basis */

/* Fold n bytes at p into h (start from ARB_HASH_SEED; chain calls to hash
 * several fields as one). */
static inline uint64_t arb_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* Fold the NUL-terminated string s into h. */
static inline uint64_t arb_hash_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

#endif
