/*
 * shard.c: shard maps by consistent hashing with bounded loads; see shard.h.
 * The hash policy's inflight count doubles as "replicas held so far", so the
 * bound is the same code the proxy runs on live requests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb/shard.h"

void lb_shard_free(lb_shard_map_t *m)
{
    free(m->owner);
    free(m->count);
    free(m->primary);
    memset(m, 0, sizeof *m);
}

int lb_shard_assign(const char *const *nodes, int nnodes, int nshards, int replicas,
                    const lb_opts_t *opts, lb_shard_map_t *m, arb_err_t *err)
{
    lb_policy_t pol;
    lb_peer_t *peers = NULL;
    uint8_t *skip = NULL;
    int rc = 0;

    memset(m, 0, sizeof *m);
    if (nnodes < 1)
        return arb_errf(err, -EINVAL, "shard: no nodes; give --nodes a,b,c");
    if (nshards < 1 || nshards > 10000000)
        return arb_errf(err, -EINVAL, "shard: --shards %d: give 1 to 10000000", nshards);
    if (replicas < 1 || replicas > nnodes)
        return arb_errf(err, -EINVAL,
                        "shard: --replicas %d with %d nodes: each replica needs its own node; "
                        "give 1 to %d",
                        replicas, nnodes, nnodes);
    for (int i = 0; i < nnodes; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(nodes[i], nodes[j]) == 0)
                return arb_errf(err, -EINVAL, "shard: node '%s' is listed twice", nodes[i]);

    lb_policy_init(&pol, &lb_chash_ops, opts);
    peers = calloc((size_t)nnodes, sizeof *peers);
    skip = calloc((size_t)nnodes, 1);
    m->owner = malloc((size_t)nshards * (size_t)replicas * sizeof *m->owner);
    m->count = calloc((size_t)nnodes, sizeof *m->count);
    m->primary = calloc((size_t)nnodes, sizeof *m->primary);
    if (!peers || !skip || !m->owner || !m->count || !m->primary) {
        rc = arb_errf(err, -ENOMEM, "shard: out of memory");
        goto out;
    }
    for (int i = 0; i < nnodes; i++) {
        peers[i].name = nodes[i];
        peers[i].weight = peers[i].eff = 1;
    }
    rc = lb_policy_set(&pol, peers, nnodes);
    if (rc < 0) {
        arb_errf(err, rc, "shard: out of memory building the hash table");
        goto out;
    }
    m->nnodes = nnodes;
    m->nshards = nshards;
    m->replicas = replicas;
    for (int s = 0; s < nshards; s++) {
        char key[32];
        int klen = snprintf(key, sizeof key, "shard-%d", s);
        lb_req_t r = {.key = lb_hash64(key, (size_t)klen, 0), .has_key = true, .skip = skip};
        for (int k = 0; k < replicas; k++) {
            int e = lb_pick(&pol, &r);
            if (e < 0) {
                rc = arb_errf(err, -ENOSPC, "shard: no node left for shard %d replica %d", s, k);
                goto out;
            }
            m->owner[s * replicas + k] = e;
            skip[e] = 1;
            peers[e].inflight++;
            m->count[e]++;
            if (k == 0)
                m->primary[e]++;
        }
        for (int k = 0; k < replicas; k++)
            skip[m->owner[s * replicas + k]] = 0;
    }
out:
    lb_policy_fini(&pol);
    free(peers);
    free(skip);
    if (rc < 0)
        lb_shard_free(m);
    return rc;
}

int lb_shard_moved(const lb_shard_map_t *a, const char *const *anodes, const lb_shard_map_t *b,
                   const char *const *bnodes)
{
    int moved = 0;
    int n = a->nshards < b->nshards ? a->nshards : b->nshards;

    for (int s = 0; s < n; s++) {
        for (int k = 0; k < b->replicas; k++) {
            const char *nb = bnodes[b->owner[s * b->replicas + k]];
            bool had = false;
            for (int j = 0; j < a->replicas && !had; j++)
                had = strcmp(anodes[a->owner[s * a->replicas + j]], nb) == 0;
            moved += !had;
        }
    }
    return moved;
}
