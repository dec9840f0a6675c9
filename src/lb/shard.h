/*
 * shard.h: data shards on nodes by consistent hashing with bounded loads
 * (the seed's third load-balancing layer: no node a hot spot). The map is
 * made with the "hash" policy of lb_chash.c, so the proxy, `arbiter shard`
 * and the scheduler's data-locality score agree on where a key lives.
 *
 * Shard s is the key "shard-<s>"; its R replicas go to R distinct nodes:
 * the first walk stop with room, then the next stop not yet holding s, and
 * so on. Loads are counted in replicas, capped at c times the mean.
 */
#ifndef ARB_LB_SHARD_H
#define ARB_LB_SHARD_H

#include "lb/lb.h"

typedef struct lb_shard_map {
    int nnodes, nshards, replicas;
    int *owner;   /* nshards * replicas node indexes; owner[s * replicas + r] */
    int *count;   /* per node: replicas held */
    int *primary; /* per node: shards whose first replica it holds */
} lb_shard_map_t;

/* Assign nshards shards with `replicas` copies each over nodes[0..nnodes)
 * (names, borrowed). opts: hash kind, balance c (NULL: defaults). Allocates
 * in *m; free with lb_shard_free. -EINVAL (with text) when replicas >
 * nnodes or a count is out of range. */
int lb_shard_assign(const char *const *nodes, int nnodes, int nshards, int replicas,
                    const lb_opts_t *opts, lb_shard_map_t *m, arb_err_t *err);
void lb_shard_free(lb_shard_map_t *m);

/* Replicas of b that sit on a node (by name) that did not hold that shard
 * in a: the data that must be copied to go from a to b. */
int lb_shard_moved(const lb_shard_map_t *a, const char *const *anodes, const lb_shard_map_t *b,
                   const char *const *bnodes);

#endif
