/*
 * bench_elastic.c: `arbiter bench elastic`: what elastic jobs cost the
 * scheduler. On N 8-GPU nodes, J elastic jobs (1-GPU tasks, min 2, max 16)
 * start at their min beside blockers that hold the rest of the cluster;
 * the blockers end and one cycle grows every elastic job as far as the
 * free GPUs go (timed: "grow_ms"). Then P high-priority 8-GPU jobs arrive
 * and one cycle preempts for them, taking elastic tasks above min one by
 * one ("preempt_ms", immediate eviction as in the simulator), and the same
 * again with deferred preemption, which only marks the victims, as the
 * controller runs it ("mark_ms"). One JSON object with -o json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arbiter/sched.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "util/mtime.h"

static arb_job_t *job(const char *kind, int i, int replicas, int gpus, int prio, int min)
{
    char name[48];
    arb_job_t *j;

    snprintf(name, sizeof name, "%s-%d", kind, i);
    if (!(j = arb_job_new(name, 1)))
        return NULL;
    j->groups[0].replicas = replicas;
    j->groups[0].gpus = gpus;
    j->groups[0].req.cpu_milli = 1000LL * gpus;
    j->groups[0].req.mem_bytes = (8LL << 30) * gpus;
    j->priority = prio;
    if (min > 0) {
        j->elastic = true;
        j->gang_min = min;
    }
    if (arb_job_finalize(j, NULL) < 0) {
        arb_job_free(j);
        return NULL;
    }
    return j;
}

/* One run: build, fill, grow, preempt. defer: mark victims only. */
static int run(long nodes, long nel, long npre, bool defer, double *grow_ms, int *grown,
               double *pre_ms, int *victims, int *shrunk, int *placed)
{
    arb_cluster_t c;
    arb_sched_conf_t conf = {0};
    arb_err_t err;
    arb_rng_t rng;
    arb_sched_t *s = NULL;
    arb_job_t **blk = NULL;
    arb_cycle_stats_t cs;
    int rc = -1;
    int64_t t0;

    arb_cluster_init(&c);
    arb_rng_seed(&rng, 7);
    for (long i = 0; i < nodes; i++) {
        char name[32];
        arb_node_t *n;
        snprintf(name, sizeof name, "node-%05ld", i);
        if (arb_cluster_add_node(&c, name, &n, &err) < 0)
            goto out;
        n->cap.cpu_milli = 128000;
        n->cap.mem_bytes = 2LL << 40;
        for (int g = 0; g < 8; g++)
            arb_node_add_gpu(&c, n, "H100", 81920, g / 4, g / 2, g / 4, NULL);
    }
    conf.preemption = true;
    conf.preempt_defer = defer;
    conf.queue_policy = ARB_QP_PRIORITY;
    if (arb_profile_lookup("pack", &conf.profile, &err) < 0 ||
        !(s = arb_sched_new(&c, &conf, &err)) || !(blk = calloc((size_t)nodes, sizeof *blk)))
        goto out;
    arb_ctx_t ctx = {.now_ns = 0, .rng = &rng};
    /* Elastic jobs at their min first, then blockers on what is left. */
    for (long i = 0; i < nel; i++) {
        arb_job_t *j = job("elastic", (int)i, 16, 1, 0, 2);
        if (!j || arb_sched_submit(s, j, &ctx, &err) < 0 || arb_sched_place(s, j, &ctx) < 0) {
            arb_job_free(j);
            goto out;
        }
        while (j->nalloc > j->gang_min) /* start exactly at min */
            if (arb_sched_shrink(s, j, j->gang_min, &err) < 0)
                goto out;
    }
    for (long i = 0; i < nodes; i++) {
        int free_gpus = arb_node_free_gpus(&c.nodes[i]);
        if (free_gpus <= 0)
            continue;
        arb_job_t *j = job("blocker", (int)i, 1, free_gpus, 1, 0);
        if (!j || arb_sched_submit(s, j, &ctx, &err) < 0) {
            arb_job_free(j);
            goto out;
        }
        if (arb_sched_place(s, j, &ctx) == 0)
            blk[i] = j;
    }
    for (long i = 0; i < nodes; i++)
        if (blk[i] && (arb_job_transition(blk[i], ARB_JOB_RUNNING, NULL) < 0 ||
                       arb_sched_finish(s, blk[i], ARB_JOB_SUCCEEDED, &err) < 0))
            goto out;
    t0 = arb_mono_ns();
    if (arb_sched_cycle(s, &ctx, &cs) < 0)
        goto out;
    *grow_ms = (double)(arb_mono_ns() - t0) / 1e6;
    *grown = cs.grown;
    for (long i = 0; i < npre; i++) {
        arb_job_t *j = job("urgent", (int)i, 1, 8, 1000, 0);
        if (!j || arb_sched_submit(s, j, &ctx, &err) < 0) {
            arb_job_free(j);
            goto out;
        }
    }
    t0 = arb_mono_ns();
    if (arb_sched_cycle(s, &ctx, &cs) < 0)
        goto out;
    *pre_ms = (double)(arb_mono_ns() - t0) / 1e6;
    *victims = cs.preempted;
    *shrunk = cs.shrunk;
    *placed = cs.placed;
    rc = arb_cluster_check(&c, &err);
out:
    free(blk);
    arb_sched_free(s);
    arb_cluster_free(&c);
    return rc;
}

typedef struct elastic_opts {
    long long nodes, jobs, preemptors;
    int json;
} elastic_opts_t;

static const fl_flag_t elastic_flags[] = {
    FL_OPT(elastic_opts_t, nodes, "--nodes", NULL, FL_INT, "N", "8-GPU nodes", .def = "1000",
           .min = 1, .max = 100000),
    FL_OPT(elastic_opts_t, jobs, "--jobs", NULL, FL_INT, "M",
           "elastic jobs (min 2, max 16 GPUs; each starts with 2), at most 4 x nodes",
           .def = "2000", .min = 1),
    FL_OPT(elastic_opts_t, preemptors, "--preemptors", NULL, FL_INT, "P",
           "8-GPU jobs at priority 1000 that take GPUs back, at most nodes", .def = "100"),
    FL_OPT(elastic_opts_t, json, NULL, "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t elastic_verb = {
    .name = "bench elastic",
    .summary = "one cycle of elastic growth, then one of preemption shrinking them",
    .flags = elastic_flags};

int cli_bench_elastic(int argc, char **argv)
{
    long nodes = 1000, nel = 2000, npre = 100;
    bool json = false;
    double grow_ms = 0, pre_ms = 0, gdummy, mark_ms = 0;
    int grown = 0, victims = 0, shrunk = 0, placed = 0, gd, mvictims = 0, md, mplaced = 0;

    elastic_opts_t o = {0};
    fl_args_t a;
    int frc;
    if (!fl_run(&elastic_verb, argc, argv, &o, &a, &frc))
        return frc;
    nodes = (long)o.nodes;
    nel = (long)o.jobs;
    npre = (long)o.preemptors;
    json = o.json == 1;
    if (nodes < 1 || nodes > 100000 || nel < 1 || nel * 2 > nodes * 8 || npre < 0 || npre > nodes) {
        fprintf(stderr, "arbiter bench elastic: --nodes 1..100000, --jobs 1..4 x nodes (each "
                        "starts with 2 GPUs), --preemptors 0..nodes\n");
        return 2;
    }
    if (run(nodes, nel, npre, false, &grow_ms, &grown, &pre_ms, &victims, &shrunk, &placed) < 0 ||
        run(nodes, nel, npre, true, &gdummy, &gd, &mark_ms, &mvictims, &md, &mplaced) < 0) {
        fprintf(stderr, "arbiter bench elastic: the run failed\n");
        return 1;
    }
    if (json)
        printf("{\"bench\":\"elastic\",\"nodes\":%ld,\"elastic_jobs\":%ld,\"preemptors\":%ld,"
               "\"grow_ms\":%.2f,\"grown_tasks\":%d,\"preempt_ms\":%.2f,\"victims\":%d,"
               "\"shrunk_tasks\":%d,\"placed\":%d,\"mark_ms\":%.2f,\"marked_victims\":%d}\n",
               nodes, nel, npre, grow_ms, grown, pre_ms, victims, shrunk, placed, mark_ms,
               mvictims);
    else
        printf("bench elastic: %ld nodes x 8 GPUs, %ld elastic jobs (min 2, max 16)\n"
               "  one cycle grows them: %.2f ms, %d tasks added\n"
               "  %ld 8-GPU jobs at priority 1000, one cycle: %.2f ms, %d jobs shrunk or "
               "evicted (%d tasks taken back), %d placed\n"
               "  the same, deferred (victims marked, as in the controller): %.2f ms, %d "
               "victims marked\n",
               nodes, nel, grow_ms, grown, npre, pre_ms, victims, shrunk, placed, mark_ms,
               mvictims);
    return 0;
}
