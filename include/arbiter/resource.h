/*
 * resource.h: Arbiter's resource model and Kubernetes quantity parsing.
 *
 * Every amount is an int64 in a fixed integer unit; there is no floating
 * point in accounting, so a GPU can never be over-allocated by rounding:
 *
 *   gpu_milli    1000 = one whole GPU; 1..999 = a share of one device
 *   gpu_mem_mib  GPU memory, MiB
 *   cpu_milli    1000 = one CPU core
 *   mem_bytes    host memory, bytes
 *   ext[i]       named extended resources (e.g. "rdma/hca"), plain counts;
 *                names live in an arb_extnames_t table owned by the cluster
 *
 * Part of the model layer (src/model/, library arbmodel) that the scheduler,
 * the loaders and the agent share; it carries no scheduler type.
 */
#ifndef ARBITER_RESOURCE_H
#define ARBITER_RESOURCE_H

#include "arbiter/arbiter.h"

#define ARB_MAX_EXT 8
#define ARB_EXT_NAME_MAX 64

typedef struct arb_res {
    int64_t gpu_milli;
    int64_t gpu_mem_mib;
    int64_t cpu_milli;
    int64_t mem_bytes;
    int64_t ext[ARB_MAX_EXT];
} arb_res_t;

/* Names of extended resources; index i names arb_res_t.ext[i]. */
typedef struct arb_extnames {
    int n;
    char name[ARB_MAX_EXT][ARB_EXT_NAME_MAX];
} arb_extnames_t;

/*
 * How a quantity string is converted, by the unit its field is kept in.
 *   ARB_QTY_COUNT  whole items ("8", "2e3"); fractions rejected ("0.5")
 *   ARB_QTY_MILLI  thousandths ("500m" -> 500, "1.5" -> 1500, "2" -> 2000);
 *                  anything finer than 1m rejected
 *   ARB_QTY_BYTES  bytes ("256Gi", "100M", "1.5Ki"); fractional bytes rejected
 *   ARB_QTY_MIB    bytes converted to MiB, rounded up ("16Gi" -> 16384,
 *                  "80G" -> 76294); a bare number is bytes, as in Kubernetes
 */
typedef enum arb_qty_kind {
    ARB_QTY_COUNT,
    ARB_QTY_MILLI,
    ARB_QTY_BYTES,
    ARB_QTY_MIB,
} arb_qty_kind_t;

/*
 * Parse a Kubernetes quantity exactly: [+]digits[.digits][suffix], where the
 * suffix is a binary SI one (Ki Mi Gi Ti Pi Ei), a decimal SI one (n u m ""
 * k M G T P E) or a decimal exponent (e3, E-2). Empty strings, negative
 * values, unknown suffixes, int64 overflow and precision finer than the
 * kind's unit are rejected. `field` names the field for the message (e.g.
 * "nvidia.com/gpu"). Returns 0 and sets *out, or -EINVAL/-ERANGE with text
 * in err naming the value and the fix; *out is untouched on failure.
 */
int arb_qty_parse(const char *s, arb_qty_kind_t kind, const char *field, int64_t *out,
                  arb_err_t *err);

/* Format v (in kind's unit) back as a short human quantity ("8", "1500m",
 * "256Gi", "16Gi"). Writes at most n bytes including the NUL. */
void arb_qty_format(int64_t v, arb_qty_kind_t kind, char *buf, size_t n);

/* Vector arithmetic. fits(): every component of need <= avail. */
void arb_res_add(arb_res_t *a, const arb_res_t *b);
void arb_res_sub(arb_res_t *a, const arb_res_t *b);
bool arb_res_fits(const arb_res_t *need, const arb_res_t *avail);
bool arb_res_is_zero(const arb_res_t *r);
bool arb_res_nonneg(const arb_res_t *r);

/* Look a name up in t, adding it when add is true. Returns the index, or
 * -ENOENT (not found), -ENOSPC (table full, ARB_MAX_EXT names). */
int arb_extnames_index(arb_extnames_t *t, const char *name, bool add);

#endif
