/*
 * bench.c: `arbiter bench sched`: the scheduler-speed benchmark. It builds a
 * synthetic cluster (N 8-GPU nodes, two NVLink domains of 4 GPUs each,
 * racks of 32 nodes, blocks of 512) and a queue of M jobs, the mix of a
 * training cluster (see KINDS: 58% 1-GPU, 20% GPU shares, 10% 2-4 GPUs, 7%
 * 8 GPUs, 2% tensor-parallel pairs of 2-GPU tasks required in one NVLink
 * domain, 2% gangs of 2-16 8-GPU tasks preferring one rack, 1% gangs of 2-8
 * 8-GPU tasks required in one rack), then places them one at a time with the
 * default profile. To measure steady state rather than a full cluster
 * rejecting everything, the oldest running jobs finish whenever GPU
 * allocation goes above 90%. It prints decisions/s, placements/s, p50/p99
 * decision latency (overall and per kind of job, so a tail can be traced to
 * the decisions that make it; wall time, and the p99 of this thread's CPU
 * time, which a busy machine's preemptions do not inflate), the cost per
 * decision (CPU time) in each tenth of the run (flat if nothing grows with
 * the queue or the run), the node classes at the end of each tenth and the
 * classes a decision filters and scores (mean per tenth; arb_sched_nclasses:
 * what a decision costs follows them), a digest of every decision (node and
 * GPUs of each task: two builds that decide alike print the same), peak RSS
 * and the final GPU allocation ratio. With --decisions K only the first K
 * jobs are placed and the rest stay queued: the same K decisions under a
 * queue of 100,000 and of 1,000,000 tell the queue's share of a decision's
 * cost apart from the run's (a longer run fragments the cluster into more
 * distinct node states).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include "arbiter/sched.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "util/mtime.h"

/* This thread's CPU time: a decision's cost without the time the machine
 * gave to other processes meanwhile (the wall figures include it). */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The kinds of job in the mix, by share of the queue (percent). */
enum { K_GPU1, K_SHARE, K_MULTI, K_FULL, K_NVLINK, K_GANG_PREF, K_GANG_REQ, NKINDS };
static const struct {
    const char *name;
    int pct;
} KINDS[NKINDS] = {
    {"gpu1", 58},  {"share", 20},    {"multi", 10},   {"full", 7},
    {"nvlink", 2}, {"gang_pref", 2}, {"gang_req", 1},
};

static arb_job_t *make_job(arb_cluster_t *c, arb_rng_t *r, int i, int *kind)
{
    char name[32];
    int k = (int)arb_rng_below(r, 100), kd = 0;
    arb_job_t *j;

    while (kd < NKINDS - 1 && k >= KINDS[kd].pct) {
        k -= KINDS[kd].pct;
        kd++;
    }
    *kind = kd;

    snprintf(name, sizeof name, "job-%d", i);
    j = arb_job_new(name, 1);
    if (!j)
        return NULL;
    arb_tgroup_t *g = &j->groups[0];
    switch (kd) {
    case K_GPU1:
        g->gpus = 1;
        break;
    case K_SHARE:
        g->gpu_share = 100 * (int)(1 + arb_rng_below(r, 9));
        break;
    case K_MULTI:
        g->gpus = 2 + (int)arb_rng_below(r, 3);
        break;
    case K_FULL:
        g->gpus = 8;
        break;
    case K_NVLINK: /* two 2-GPU tasks in one NVLink domain */
        g->gpus = 2;
        g->replicas = 2;
        g->topo.level = ARB_TOPO_NVLINK;
        g->topo.required = true;
        break;
    case K_GANG_PREF:
        g->gpus = 8;
        g->replicas = 2 + (int)arb_rng_below(r, 15);
        g->topo.level = ARB_TOPO_RACK;
        g->topo.required = false;
        break;
    default:
        g->gpus = 8;
        g->replicas = 2 + (int)arb_rng_below(r, 7);
        g->topo.level = ARB_TOPO_RACK;
        g->topo.required = true;
        break;
    }
    int gpus = g->gpus ? g->gpus : 1;
    g->req.cpu_milli = 4000LL * gpus;
    g->req.mem_bytes = (32LL << 30) * gpus;
    j->priority = (int32_t)arb_rng_below(r, 3) * 100;
    if (arb_job_finalize(j, NULL) < 0) {
        arb_job_free(j);
        return NULL;
    }
    (void)c;
    return j;
}

/* Each mode of `arbiter bench`: its name, its one line, its run. A mode
 * parses its flags with a table of its own (cli/flags.h), so `arbiter
 * bench MODE --help` prints them. */
static int bench_sched(int argc, char **argv);
static const struct bench_mode {
    const char *name, *summary;
    int (*run)(int argc, char **argv);
} bench_modes[] = {
    {"sched", "one decision at a time on a synthetic cluster (decisions/s, p99)", bench_sched},
    {"cycle", "one whole scheduling cycle over a queue on a synthetic cluster", bench_sched},
    {"api", "durable submissions/s against a running controller (ARBITER_URL)", cli_bench_api},
    {"sim", "a trace replay's arrival loop (tasks/s), by policy", cli_bench_sim},
    {"elastic", "elastic growth and preemption's shrink, one cycle each", cli_bench_elastic},
    {"agents", "a controller with emulated agents: CPU, heartbeat round trip", cli_bench_agents},
    {"e2e", "real agents on loopback: submission to running, end to end", cli_bench_e2e},
    {"backlog", "a controller with a backlog of queued jobs", cli_bench_backlog},
    {"infer", "LLM routing: the balancer's policies against HAProxy", cli_bench_infer},
    {"recover", "a restart over a filled store", cli_bench_recover},
    {"spec", "the CPU time of reading one job spec (JSON check, document, reader)", cli_bench_spec},
    {NULL, NULL, NULL},
};

static void bench_list(FILE *f)
{
    fprintf(f, "usage: arbiter bench MODE [FLAGS]   (arbiter bench MODE --help: its flags)\n\n");
    for (const struct bench_mode *m = bench_modes; m->name; m++)
        fprintf(f, "  %-8s %s\n", m->name, m->summary);
}

typedef struct sched_opts {
    long long nodes, jobs, decisions, seed;
    const char *policy, *queue;
    bool full_scan;
    int json;
} sched_opts_t;

static const fl_flag_t sched_flags[] = {
    FL_OPT(sched_opts_t, nodes, "--nodes", NULL, FL_INT, "N", "8-GPU nodes in the cluster",
           .def = "1000", .min = 1, .max = 1000000),
    FL_OPT(sched_opts_t, jobs, "--jobs", NULL, FL_INT, "M", "jobs in the queue", .def = "10000",
           .min = 1, .max = 10000000),
    FL_OPT(sched_opts_t, decisions, "--decisions", NULL, FL_INT, "K",
           "sched: place only the first K queued jobs, the rest staying queued (0: every "
           "job), to compare the same decisions under backlogs of different sizes",
           .def = "0", .min = 0, .max = 10000000),
    FL_OPT(sched_opts_t, seed, "--seed", NULL, FL_INT, "S", "the workload's and ties' seed",
           .def = "1"),
    FL_OPT(sched_opts_t, policy, "--policy", NULL, FL_STR, "NAME", "the scoring profile",
           .def = "default"),
    FL_OPT(sched_opts_t, queue, "--queue", NULL, FL_STR, "fifo|priority|drf", "the queue order",
           .def = "fifo"),
    FL_OPT(sched_opts_t, full_scan, "--full-scan", NULL, FL_BOOL, NULL,
           "score every node (no node-class index), for comparison"),
    FL_OPT(sched_opts_t, json, NULL, "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t sched_verbs[] = {
    {.name = "bench sched",
     .summary = "place a synthetic queue one job at a time: decisions/s, p50/p99 latency per "
                "kind of job, peak RSS",
     .flags = sched_flags},
    {.name = "bench cycle",
     .summary = "one scheduling cycle over every queued job, as the controller runs it",
     .flags = sched_flags},
};

int cli_bench(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        bench_list(stdout);
        return 0;
    }
    for (const struct bench_mode *m = argc >= 2 ? bench_modes : NULL; m && m->name; m++)
        if (!strcmp(argv[1], m->name))
            return m->run(argc - 1, argv + 1);
    if (argc >= 2)
        fprintf(stderr, "arbiter bench: unknown mode '%s'\n", argv[1]);
    bench_list(stderr);
    return 2;
}

/* `arbiter bench sched|cycle` (argv[0] the mode). */
static int bench_sched(int argc, char **argv)
{
    sched_opts_t so = {0};
    fl_args_t a;
    arb_cluster_t c;
    arb_sched_conf_t conf = {0};
    arb_err_t err = {{0}};
    arb_rng_t rng, wl;
    int rc = 1;
    bool cycle = !strcmp(argv[0], "cycle");

    if (!fl_run(&sched_verbs[cycle], argc, argv, &so, &a, &rc))
        return rc;
    rc = 1;
    long nodes = (long)so.nodes, njobs = (long)so.jobs;
    /* ndec decisions: the first ndec jobs of the queue; the rest stay queued */
    long ndec = so.decisions > 0 && so.decisions < so.jobs ? (long)so.decisions : njobs;
    unsigned long long seed = (unsigned long long)so.seed;
    const char *out = so.json ? "json" : "text", *policy = so.policy;
    conf.full_scan = so.full_scan;
    if (arb_queue_policy_parse(so.queue, &conf.queue_policy, &err) < 0) {
        fprintf(stderr, "arbiter bench: --queue: %s\n", err.msg);
        return 2;
    }
    if (arb_profile_lookup(policy, &conf.profile, &err) < 0) {
        fprintf(stderr, "arbiter bench: %s\n", err.msg);
        return 2;
    }
    arb_rng_seed(&rng, seed);
    arb_rng_seed(&wl, seed ^ 0x5bd1e995);
    arb_cluster_init(&c);
    for (long i = 0; i < nodes; i++) {
        char name[32], rack[24], block[24];
        arb_node_t *n;
        snprintf(name, sizeof name, "node-%05ld", i);
        snprintf(rack, sizeof rack, "r%ld", i / 32);
        snprintf(block, sizeof block, "b%ld", i / 512);
        if (arb_cluster_add_node(&c, name, &n, &err) < 0)
            goto out;
        n->cap.cpu_milli = 128000;
        n->cap.mem_bytes = 2LL << 40;
        for (int g = 0; g < 8; g++)
            arb_node_add_gpu(&c, n, "H100", 81920, g / 4, g / 2, g / 4, NULL);
        arb_node_set_label(&c, n, "rack", rack);
        arb_node_set_label(&c, n, "block", block);
    }
    arb_sched_t *s = arb_sched_new(&c, &conf, &err);
    if (!s)
        goto out;
    arb_ctx_t ctx = {.now_ns = 0, .rng = &rng};
    int64_t *lat = malloc((size_t)njobs * sizeof *lat), *klat = NULL;
    int64_t *cpu = malloc((size_t)njobs * sizeof *cpu), tenth[10] = {0};
    uint32_t classes[10] = {0}; /* node classes at the end of each tenth */
    uint64_t evals[10] = {0}, evals_before = 0;
    uint64_t digest = 1469598103934665603ULL; /* FNV-1a over every decision */
    uint8_t *kind = malloc((size_t)njobs), *kplaced = malloc((size_t)njobs);
    arb_job_t **running = malloc((size_t)njobs * sizeof *running);
    long nrun = 0, head = 0, placed = 0;
    int64_t used_milli = 0, cap_milli = (int64_t)nodes * 8000, t_all = 0;
    if (!lat || !cpu || !running || !kind || !kplaced)
        goto out2;
    for (long i = 0; i < njobs; i++) {
        int kd;
        arb_job_t *j = make_job(&c, &wl, (int)i, &kd);
        kind[i] = (uint8_t)kd;
        if (!j || arb_sched_submit(s, j, &ctx, &err) < 0) {
            arb_job_free(j);
            goto out2;
        }
    }
    if (cycle) {
        /* One scheduling cycle over every queued job, as the controller runs
         * it (queue order, quotas, gangs), timed whole. */
        arb_cycle_stats_t cs;
        int64_t t0 = arb_mono_ns();
        int crc = arb_sched_cycle(s, &ctx, &cs);
        double ms = (double)(arb_mono_ns() - t0) / 1e6;
        int64_t alloc = 0;
        for (uint32_t i = 0; i < c.nnodes; i++)
            alloc += c.nodes[i].used.gpu_milli;
        if (strcmp(out, "json") == 0)
            printf("{\"bench\":\"cycle\",\"policy\":\"%s\",\"nodes\":%ld,\"jobs\":%ld,"
                   "\"seed\":%llu,\"cycle_ms\":%.2f,\"placed\":%d,\"pending\":%d,"
                   "\"alloc_pct\":%.2f}\n",
                   conf.profile.name, nodes, njobs, seed, ms, cs.placed, cs.pending,
                   100.0 * (double)alloc / (double)cap_milli);
        else
            printf("bench cycle: %ld nodes, %ld queued jobs, policy %s\n"
                   "  one cycle %.2f ms: placed %d, still pending %d, GPU allocation %.2f%%\n",
                   nodes, njobs, conf.profile.name, ms, cs.placed, cs.pending,
                   100.0 * (double)alloc / (double)cap_milli);
        rc = crc == 0 && arb_cluster_check(&c, &err) == 0 ? 0 : 1;
        goto out2;
    }
    for (long i = 0; i < ndec; i++) {
        arb_job_t *j = arb_sched_job(s, (uint32_t)i);
        arb_res_t tot;
        int64_t c0 = cpu_ns(), t0 = arb_mono_ns();
        int prc = arb_sched_place(s, j, &ctx);
        int64_t dt = arb_mono_ns() - t0;
        cpu[i] = cpu_ns() - c0;
        lat[i] = dt;
        tenth[i * 10 / ndec] += cpu[i];
        if ((i + 1) * 10 / ndec != i * 10 / ndec) {
            uint64_t ev;
            classes[i * 10 / ndec] = arb_sched_nclasses(s, &ev);
            evals[i * 10 / ndec] = ev - evals_before;
            evals_before = ev;
        }
        kplaced[i] = prc == 0;
        t_all += dt;
        ctx.now_ns += 1000000; /* 1 ms of virtual time per decision */
        for (int t = 0; prc == 0 && t < j->nalloc; t++) {
            uint64_t v = (uint64_t)j->alloc[t].node << 32 | j->alloc[t].gpu_mask;
            for (int b = 0; b < 8; b++)
                digest = (digest ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ULL;
        }
        digest = (digest ^ (uint64_t)(prc == 0)) * 1099511628211ULL;
        if (prc == 0) {
            placed++;
            arb_job_transition(j, ARB_JOB_RUNNING, NULL);
            running[nrun++] = j;
            arb_job_total(j, &tot);
            used_milli += tot.gpu_milli;
        }
        /* Steady state: the oldest jobs finish while allocation is above 90%. */
        while (used_milli * 10 > cap_milli * 9 && head < nrun) {
            arb_job_t *o = running[head++];
            arb_job_total(o, &tot);
            used_milli -= tot.gpu_milli;
            arb_sched_finish(s, o, ARB_JOB_SUCCEEDED, NULL);
        }
    }
    {
        /* Per kind: decisions, placements, p50/p99 (before lat is sorted). */
        struct {
            long n, placed;
            double p50, p99, cpu99;
        } ks[NKINDS] = {{0}};
        int64_t alloc = 0;
        if (!(klat = malloc((size_t)njobs * sizeof *klat)))
            goto out2;
        for (int kd = 0; kd < NKINDS; kd++) {
            long m = 0;
            for (long i = 0; i < ndec; i++)
                if (kind[i] == kd) {
                    klat[m++] = lat[i];
                    ks[kd].placed += kplaced[i];
                }
            ks[kd].n = m;
            if (m == 0)
                continue;
            qsort(klat, (size_t)m, sizeof *klat, cmp_i64);
            ks[kd].p50 = (double)klat[m / 2] / 1e3;
            ks[kd].p99 = (double)klat[(m * 99) / 100] / 1e3;
            m = 0;
            for (long i = 0; i < ndec; i++)
                if (kind[i] == kd)
                    klat[m++] = cpu[i];
            qsort(klat, (size_t)m, sizeof *klat, cmp_i64);
            ks[kd].cpu99 = (double)klat[(m * 99) / 100] / 1e3;
        }
        qsort(cpu, (size_t)ndec, sizeof *cpu, cmp_i64);
        for (uint32_t i = 0; i < c.nnodes; i++)
            alloc += c.nodes[i].used.gpu_milli;
        qsort(lat, (size_t)ndec, sizeof *lat, cmp_i64);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double secs = (double)t_all / 1e9;
        double p50 = (double)lat[ndec / 2] / 1e3, p99 = (double)lat[(ndec * 99) / 100] / 1e3;
        double rss = (double)ru.ru_maxrss / 1024.0;
        double apct = 100.0 * (double)alloc / (double)cap_milli;
        double c50 = (double)cpu[ndec / 2] / 1e3, c99 = (double)cpu[(ndec * 99) / 100] / 1e3;
        if (strcmp(out, "json") == 0) {
            printf("{\"bench\":\"sched\",\"index\":\"%s\",\"policy\":\"%s\",\"nodes\":%ld,"
                   "\"jobs\":%ld,\"decisions\":%ld,\"seed\":%llu,\"placed\":%ld,\"decisions_per_"
                   "s\":%.0f,"
                   "\"placements_per_s\":%.0f,\"ns_per_decision\":%.0f,\"p50_us\":%.2f,"
                   "\"p99_us\":%.2f,\"cpu_p50_us\":%.2f,\"cpu_p99_us\":%.2f,\"rss_mb\":%.1f,"
                   "\"bytes_per_job\":%.0f,\"alloc_pct\":%.2f,\"decisions_digest\":\"%016llx\","
                   "\"cpu_ns_per_decision_tenths\":[",
                   conf.full_scan ? "full-scan" : "indexed", conf.profile.name, nodes, njobs, ndec,
                   seed, placed, (double)ndec / secs, (double)placed / secs,
                   (double)t_all / (double)ndec, p50, p99, c50, c99, rss,
                   rss * 1048576.0 / (double)njobs, apct, (unsigned long long)digest);
            for (int k = 0; k < 10; k++) { /* the run in tenths: does the cost grow? */
                long cnt = (ndec * (k + 1)) / 10 - (ndec * k) / 10;
                printf("%s%.0f", k ? "," : "", (double)tenth[k] / (double)(cnt > 0 ? cnt : 1));
            }
            printf("],\"classes_tenths\":[");
            for (int k = 0; k < 10; k++)
                printf("%s%u", k ? "," : "", classes[k]);
            printf("],\"classes_evaluated_tenths\":[");
            for (int k = 0; k < 10; k++) { /* per decision */
                long cnt = (ndec * (k + 1)) / 10 - (ndec * k) / 10;
                printf("%s%.1f", k ? "," : "", (double)evals[k] / (double)(cnt > 0 ? cnt : 1));
            }
            printf("],\"kinds\":{");
            for (int kd = 0; kd < NKINDS; kd++)
                printf("%s\"%s\":{\"n\":%ld,\"placed\":%ld,\"p50_us\":%.2f,\"p99_us\":%.2f,"
                       "\"cpu_p99_us\":%.2f}",
                       kd ? "," : "", KINDS[kd].name, ks[kd].n, ks[kd].placed, ks[kd].p50,
                       ks[kd].p99, ks[kd].cpu99);
            printf("}}\n");
        } else {
            printf("bench sched: %ld nodes, %ld jobs, policy %s\n"
                   "  placed %ld, %.0f decisions/s, %.0f placements/s\n"
                   "  decision latency p50 %.2f us, p99 %.2f us (CPU time p99 %.2f us)\n"
                   "  peak RSS %.1f MiB, GPU allocation at the end %.2f%%\n",
                   nodes, njobs, conf.profile.name, placed, (double)ndec / secs,
                   (double)placed / secs, p50, p99, c99, rss, apct);
            for (int kd = 0; kd < NKINDS; kd++)
                printf(
                    "  %-9s %7ld decisions, %7ld placed, p50 %.2f us, p99 %.2f us (CPU %.2f us)\n",
                    KINDS[kd].name, ks[kd].n, ks[kd].placed, ks[kd].p50, ks[kd].p99, ks[kd].cpu99);
        }
        rc = arb_cluster_check(&c, &err) == 0 ? 0 : 1;
        if (rc)
            fprintf(stderr, "arbiter bench: invariant broken: %s\n", err.msg);
    }
out2:
    free(lat);
    free(cpu);
    free(klat);
    free(kind);
    free(kplaced);
    free(running);
    arb_sched_free(s);
out:
    if (rc && err.msg[0])
        fprintf(stderr, "arbiter bench: %s\n", err.msg);
    arb_cluster_free(&c);
    return rc;
}
