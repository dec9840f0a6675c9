/*
 * resource.c: arithmetic on resource vectors and the extended-resource name
 * table. Quantity parsing lives in quantity.c.
 */
#include <string.h>

#include "arbiter/resource.h"

void arb_res_add(arb_res_t *a, const arb_res_t *b)
{
    a->gpu_milli += b->gpu_milli;
    a->gpu_mem_mib += b->gpu_mem_mib;
    a->cpu_milli += b->cpu_milli;
    a->mem_bytes += b->mem_bytes;
    for (int i = 0; i < ARB_MAX_EXT; i++)
        a->ext[i] += b->ext[i];
}

void arb_res_sub(arb_res_t *a, const arb_res_t *b)
{
    a->gpu_milli -= b->gpu_milli;
    a->gpu_mem_mib -= b->gpu_mem_mib;
    a->cpu_milli -= b->cpu_milli;
    a->mem_bytes -= b->mem_bytes;
    for (int i = 0; i < ARB_MAX_EXT; i++)
        a->ext[i] -= b->ext[i];
}

bool arb_res_fits(const arb_res_t *need, const arb_res_t *avail)
{
    if (need->gpu_milli > avail->gpu_milli || need->gpu_mem_mib > avail->gpu_mem_mib ||
        need->cpu_milli > avail->cpu_milli || need->mem_bytes > avail->mem_bytes)
        return false;
    for (int i = 0; i < ARB_MAX_EXT; i++)
        if (need->ext[i] > avail->ext[i])
            return false;
    return true;
}

bool arb_res_is_zero(const arb_res_t *r)
{
    static const arb_res_t zero;
    return memcmp(r, &zero, sizeof zero) == 0;
}

bool arb_res_nonneg(const arb_res_t *r)
{
    if (r->gpu_milli < 0 || r->gpu_mem_mib < 0 || r->cpu_milli < 0 || r->mem_bytes < 0)
        return false;
    for (int i = 0; i < ARB_MAX_EXT; i++)
        if (r->ext[i] < 0)
            return false;
    return true;
}

int arb_extnames_index(arb_extnames_t *t, const char *name, bool add)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0)
            return i;
    if (!add)
        return -ENOENT;
    if (t->n >= ARB_MAX_EXT || strlen(name) >= ARB_EXT_NAME_MAX)
        return -ENOSPC;
    strcpy(t->name[t->n], name);
    return t->n++;
}
