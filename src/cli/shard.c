/*
 * shard.c: `arbiter shard --nodes a,b,c --shards N [--replicas R]`: the data
 * layer of load balancing. Assigns shards to nodes by consistent hashing
 * with bounded loads (src/lb/shard.h), prints each node's share, and what
 * would move if each node left, or if one more node joined.
 *
 * Exit status: 0 on success, 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "lb/shard.h"

typedef struct shard_opts {
    const char *nodes, *balance, *join;
    long long shards, replicas;
    int kind, out;
} shard_opts_t;

static const fl_flag_t shard_flags[] = {
    FL_OPT(shard_opts_t, nodes, "--nodes", NULL, FL_STR, "a,b,c", "the nodes (required)"),
    FL_OPT(shard_opts_t, shards, "--shards", NULL, FL_INT, "N", "how many shards (required)",
           .min = 1, .max = 1000000000),
    FL_OPT(shard_opts_t, replicas, "--replicas", NULL, FL_INT, "R", "copies of each shard",
           .def = "1", .min = 1, .max = 1000000000),
    FL_OPT(shard_opts_t, kind, "--hash-kind", NULL, FL_CHOICE, NULL, "the consistent hash",
           .def = "ring", .choices = "ring|maglev"),
    FL_OPT(shard_opts_t, balance, "--balance", NULL, FL_STR, "C",
           "bounded loads: at most C x the mean per node; 0 off (default 1.25)"),
    FL_OPT(shard_opts_t, join, "--join", NULL, FL_STR, "NAME", "the node that would join",
           .def = "new-node"),
    FL_OPT(shard_opts_t, out, "--output", "-o", FL_CHOICE, NULL, "a table, or JSON", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t shard_verb = {
    .name = "shard",
    .summary = "assign data shards to nodes by consistent hashing with bounded loads",
    .flags = shard_flags};

static int split_nodes(char *s, const char ***out)
{
    int n = 1, k = 0;
    for (char *p = s; *p; p++)
        n += *p == ',';
    const char **v = calloc((size_t)n, sizeof *v);
    if (!v)
        return -1;
    char *save = NULL;
    for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (*tok)
            v[k++] = tok;
    *out = v;
    return k;
}

/* One assignment and what it says: each node's share and what would move if
 * it left, then if one more node joined. */
typedef struct shard_run {
    const char **nodes, **others;
    int nn, nshards, replicas;
    bool json;
    const lb_opts_t *o;
    lb_shard_map_t m;
} shard_run_t;

static void shard_leaves(shard_run_t *r)
{
    long total = (long)r->nshards * r->replicas;
    lb_shard_map_t m2 = {0};

    for (int i = 0; i < r->nn; i++) {
        int k = 0, moved = -1;
        for (int j = 0; j < r->nn; j++)
            if (j != i)
                r->others[k++] = r->nodes[j];
        if (r->nn > 1 && r->replicas <= r->nn - 1 &&
            lb_shard_assign(r->others, r->nn - 1, r->nshards, r->replicas, r->o, &m2, NULL) == 0) {
            moved = lb_shard_moved(&r->m, r->nodes, &m2, r->others);
            lb_shard_free(&m2);
        }
        double share = 100.0 * r->m.count[i] / total;
        if (r->json)
            printf("%s{\"name\":\"%s\",\"primary\":%d,\"replicas\":%d,\"share\":%.4f,"
                   "\"leave_moves\":%d}",
                   i ? "," : "", r->nodes[i], r->m.primary[i], r->m.count[i], share / 100, moved);
        else if (moved >= 0)
            printf("%-20s %8d %9d %6.2f%%   %d (%.2f%% of all; its own share %.2f%%)\n",
                   r->nodes[i], r->m.primary[i], r->m.count[i], share, moved, 100.0 * moved / total,
                   share);
        else
            printf("%-20s %8d %9d %6.2f%%   (cannot leave: too few nodes for %d replicas)\n",
                   r->nodes[i], r->m.primary[i], r->m.count[i], share, r->replicas);
    }
}

static void shard_join(shard_run_t *r, const char *join, double max_over_mean)
{
    long total = (long)r->nshards * r->replicas;
    lb_shard_map_t m2 = {0};
    int nn = r->nn, jmoved = -1, takes = 0;

    for (int j = 0; j < nn; j++)
        r->others[j] = r->nodes[j];
    r->others[nn] = join;
    if (lb_shard_assign(r->others, nn + 1, r->nshards, r->replicas, r->o, &m2, NULL) == 0) {
        jmoved = lb_shard_moved(&r->m, r->nodes, &m2, r->others);
        takes = m2.count[nn];
        lb_shard_free(&m2);
    }
    if (r->json) {
        printf("],\"join\":{\"name\":\"%s\",\"takes\":%d,\"moves\":%d,\"ideal\":%.4f}}\n", join,
               takes, jmoved, 1.0 / (nn + 1));
    } else {
        printf("\nmax/mean load %.3f (bound %g)\n", max_over_mean, r->o->balance);
        if (jmoved >= 0)
            printf("if %s joins: it takes %d replicas; %d move (%.2f%% of all; ideal 1/%d = "
                   "%.2f%%)\n",
                   join, takes, jmoved, 100.0 * jmoved / total, nn + 1, 100.0 / (nn + 1));
    }
}

/* 0; 2 when the assignment is refused (message printed); 1 out of memory */
static int shard_report(const shard_opts_t *so, const lb_opts_t *o)
{
    shard_run_t r = {
        .nshards = (int)so->shards, .replicas = (int)so->replicas, .json = so->out == 1, .o = o};
    char *nodes_arg = strdup(so->nodes);
    arb_err_t err = {{0}};
    int rc = 1;

    r.nn = nodes_arg ? split_nodes(nodes_arg, &r.nodes) : -1;
    if (r.nn < 0 || !(r.others = calloc((size_t)r.nn + 1, sizeof *r.others))) {
        fprintf(stderr, "arbiter shard: out of memory\n");
        goto out;
    }
    if (lb_shard_assign(r.nodes, r.nn, r.nshards, r.replicas, o, &r.m, &err) < 0) {
        fprintf(stderr, "arbiter shard: %s\n", err.msg);
        rc = 2;
        goto out;
    }
    int mx = 0;
    for (int i = 0; i < r.nn; i++)
        mx = r.m.count[i] > mx ? r.m.count[i] : mx;
    double mean = (double)r.nshards * r.replicas / r.nn;
    const char *kind = o->kind == LB_HASH_MAGLEV ? "maglev" : "ring";
    if (r.json)
        printf("{\"shards\":%d,\"replicas\":%d,\"hash\":\"%s\",\"balance\":%g,"
               "\"max_over_mean\":%.4f,\"nodes\":[",
               r.nshards, r.replicas, kind, o->balance, mx / mean);
    else
        printf("%d shards x %d replicas on %d nodes (%s hash, bounded loads c=%g)\n\n"
               "%-20s %8s %9s %7s   %s\n",
               r.nshards, r.replicas, r.nn, kind, o->balance, "node", "primary", "replicas",
               "share", "if it leaves: replicas moved");
    shard_leaves(&r);
    shard_join(&r, so->join, mx / mean);
    rc = 0;
out:
    lb_shard_free(&r.m);
    free(r.others);
    free(r.nodes);
    free(nodes_arg);
    return rc;
}

int cli_shard(int argc, char **argv)
{
    shard_opts_t so = {0};
    fl_args_t a = {0};
    char *end;
    lb_opts_t o;
    int rc;

    if (!fl_run(&shard_verb, argc, argv, &so, &a, &rc))
        return rc;
    lb_opts_default(&o);
    o.kind = so.kind == 1 ? LB_HASH_MAGLEV : LB_HASH_RING;
    if (so.balance) {
        o.balance = strtod(so.balance, &end);
        if (*end || end == so.balance || (o.balance != 0 && o.balance < 1)) {
            fprintf(stderr, "arbiter shard: --balance '%s': give 0 (off) or >= 1\n", so.balance);
            return 2;
        }
    }
    if (!so.nodes || so.shards == 0) {
        fprintf(stderr, "arbiter shard: --nodes and --shards are required; run 'arbiter shard "
                        "--help' for the usage\n");
        return 2;
    }
    return shard_report(&so, &o);
}
