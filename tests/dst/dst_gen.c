/*
 * dst_gen.c: the deterministic simulation test's generator: from one seed,
 * a world (the controller's config: queue order, backfill, preemption,
 * starvation, quotas with a cohort; node shapes) and a list of steps:
 * submissions of every shape (single tasks, gangs, gangs with gangMin below
 * their size, GPU shares, GPU memory, elastic jobs, services, time limits,
 * NVLink and node topology, selectors that match nothing, taints,
 * priorities, queues), cancels, time passing, nodes joining, dying, cut
 * off, drained, late and duplicated reports, and controller restarts. The
 * text form of both (dst_write, dst_read) is what a failing run prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dst.h"

const char *const dst_op_names[OP_NKINDS] = {
    "tick", "submit", "cancel",  "join",   "down",    "up",  "cut",
    "heal", "drain",  "undrain", "replay", "restart", "gpu",
};

static uint64_t below(arb_rng_t *r, uint64_t n)
{
    return n ? arb_rng_below(r, n) : 0;
}

static bool chance(arb_rng_t *r, int pct)
{
    return (int)below(r, 100) < pct;
}

/* A node inventory: GPUs in NVLink domains, CPU, memory, zone and rack
 * labels, sometimes a taint. */
static char *make_shape(arb_rng_t *r, int i)
{
    static const int gpus[] = {0, 2, 4, 4, 8, 8, 8, 16};
    int ng = gpus[below(r, sizeof gpus / sizeof gpus[0])], ndom = ng >= 8 && chance(r, 40) ? 2 : 1;
    const char *mem = chance(r, 50) ? "80Gi" : "40Gi";
    char buf[4096];
    size_t off = 0;

    off += (size_t)snprintf(buf + off, sizeof buf - off,
                            "{\"cpu\": \"%d\", \"memory\": \"%dGi\", \"labels\": {\"zone\": "
                            "\"z%d\", \"rack\": \"r%d\"}",
                            (int)(16 << below(r, 4)), (int)(64 << below(r, 4)), 1 + (int)(i % 2),
                            1 + (int)below(r, 2));
    if (chance(r, 15))
        off += (size_t)snprintf(buf + off, sizeof buf - off,
                                ", \"taints\": [{\"key\": \"dedicated\", \"value\": \"infer\", "
                                "\"effect\": \"NoSchedule\"}]");
    off += (size_t)snprintf(buf + off, sizeof buf - off, ", \"gpus\": [");
    for (int g = 0; g < ng; g++)
        off += (size_t)snprintf(buf + off, sizeof buf - off,
                                "%s{\"model\": \"H100\", \"memory\": \"%s\", \"nvlink\": %d, "
                                "\"pcie\": %d, \"numa\": %d}",
                                g ? ", " : "", mem, g / (ng / ndom), g / 2, g < ng / 2 ? 0 : 1);
    snprintf(buf + off, sizeof buf - off, "]}");
    return strdup(buf);
}

/* One job spec as a line of flow YAML. k numbers the job. */
static char *make_job(arb_rng_t *r, const dst_world_t *w, int k, int *who)
{
    char buf[4096], res[512], extra[1024] = "";
    size_t off = 0, xo = 0;
    int gpus = 0, share = 0, tasks = 1, prio = chance(r, 30) ? (chance(r, 50) ? 1000 : 100) : 0;
    bool service = chance(r, 5), elastic = !service && chance(r, 8);
    double run = 1 + (double)below(r, 90000) / 1000.0;

    *who = (int)below(r, 3);
    switch (below(r, 6)) {
    case 0:
        share = 250 * (1 + (int)below(r, 3));
        break;
    case 1:
        gpus = 0;
        break;
    default:
        gpus = 1 << below(r, 4); /* 1, 2, 4, 8 */
        if (chance(r, 3))
            gpus = 16;
        break;
    }
    if (!service && chance(r, 30))
        tasks = 2 + (int)below(r, 3);
    if (share)
        snprintf(res, sizeof res, "{arbiter.io/gpu-share: %dm, cpu: %d%s}", share,
                 1 + (int)below(r, 4), chance(r, 30) ? ", nvidia.com/gpu-memory: 20Gi" : "");
    else
        snprintf(res, sizeof res, "{nvidia.com/gpu: %d, cpu: %d, memory: %dGi%s}", gpus,
                 1 + (int)below(r, 16), 1 + (int)below(r, 128),
                 gpus && chance(r, 5) ? ", nvidia.com/gpu-memory: 60Gi" : "");
    off += (size_t)snprintf(buf + off, sizeof buf - off, "{name: j%d", k);
    if (service)
        off +=
            (size_t)snprintf(buf + off, sizeof buf - off, ", kind: service, port: %d, replicas: %d",
                             20000 + 8 * k, 1 + (int)below(r, 3));
    else if (elastic)
        off += (size_t)snprintf(buf + off, sizeof buf - off, ", replicas: {min: %d, max: %d}",
                                1 + (int)below(r, 2), 2 + (int)below(r, 4));
    if (prio)
        off += (size_t)snprintf(buf + off, sizeof buf - off, ", priority: %d", prio);
    if (chance(r, 15))
        off += (size_t)snprintf(buf + off, sizeof buf - off, ", preemptible: false");
    if (!service && chance(r, 40)) {
        /* most limits hold the run; some cut it short (the job times out) */
        int lim = chance(r, 70) ? (int)run + 5 : (int)(run / 2);
        off += (size_t)snprintf(buf + off, sizeof buf - off, ", timeLimit: %ds", lim > 0 ? lim : 1);
    }
    if (chance(r, 40))
        off += (size_t)snprintf(buf + off, sizeof buf - off, ", terminationGracePeriodSeconds: %d",
                                (int)below(r, 6));
    if (chance(r, 10))
        xo += (size_t)snprintf(extra + xo, sizeof extra - xo, ", nodeSelector: {zone: %s}",
                               chance(r, 30)   ? "z9"
                               : chance(r, 50) ? "z1"
                                               : "z2");
    if (chance(r, 15))
        xo += (size_t)snprintf(extra + xo, sizeof extra - xo,
                               ", tolerations: [{key: dedicated, operator: "
                               "Exists}]");
    if (w->quotas && *who == 0 && chance(r, 70))
        xo += (size_t)snprintf(extra + xo, sizeof extra - xo, ", queue: team-%c",
                               chance(r, 50) ? 'a' : 'b');
    (void)xo;
    off += (size_t)snprintf(buf + off, sizeof buf - off, "%s", extra);
    if (!service && !elastic && tasks > 1 && chance(r, 35))
        off += (size_t)snprintf(buf + off, sizeof buf - off, ", gangMin: %d",
                                1 + (int)below(r, (uint64_t)tasks - 1));
    off += (size_t)snprintf(buf + off, sizeof buf - off,
                            ", command: [vc, run=%.3f, exit=%d, term=%.1f]", service ? 0.0 : run,
                            chance(r, 10) ? 1 : 0, (double)below(r, 40) / 10.0);
    if (!service && !elastic && tasks > 1 && chance(r, 30)) {
        /* two groups: a launcher and workers */
        off += (size_t)snprintf(buf + off, sizeof buf - off,
                                ", groups: [{name: launcher, resources: "
                                "{requests: {cpu: 1}}}, {name: worker, "
                                "replicas: %d, resources: {requests: %s}%s}]}",
                                tasks, res, gpus >= 2 && chance(r, 40) ? ", topology: node" : "");
        return strdup(buf);
    }
    if (!service && !elastic)
        off += (size_t)snprintf(buf + off, sizeof buf - off, ", replicas: %d", tasks);
    if (gpus >= 2 && chance(r, 25))
        off += (size_t)snprintf(buf + off, sizeof buf - off, ", topology: {level: %s, mode: %s}",
                                chance(r, 50) ? "nvlink" : "node",
                                chance(r, 70) ? "required" : "preferred");
    snprintf(buf + off, sizeof buf - off, ", resources: {requests: %s}}", res);
    return strdup(buf);
}

void dst_generate(uint64_t seed, int nsteps, dst_world_t *w, dst_op_t **out, int *nout)
{
    arb_rng_t r;
    dst_op_t *ops = calloc((size_t)nsteps + 16, sizeof *ops);
    int n = 0, nnodes = 0, njobs = 0;

    arb_rng_seed(&r, seed);
    memset(w, 0, sizeof *w);
    w->seed = seed;
    snprintf(w->policy, sizeof w->policy, "%s", chance(&r, 70) ? "default" : "pack");
    w->queue = (arb_queue_policy_t)below(&r, 3);
    w->backfill = chance(&r, 50);
    w->preemption = chance(&r, 60);
    w->quotas = chance(&r, 50);
    w->starvation_ns = chance(&r, 30) ? (int64_t)(20 + below(&r, 60)) * 1000000000LL : 0;
    w->nshapes = 2 + (int)below(&r, DST_MAX_SHAPES - 2);
    for (int i = 0; i < w->nshapes; i++)
        w->shape[i] = make_shape(&r, i);
    for (int i = 0, k = 2 + (int)below(&r, 4); i < k; i++)
        ops[n++] = (dst_op_t){.k = OP_JOIN, .a = (int)below(&r, (uint64_t)w->nshapes)};
    nnodes = n;
    while (n < nsteps) {
        dst_op_t *o = &ops[n];
        int x = (int)below(&r, 100);
        memset(o, 0, sizeof *o);
        if (x < 42) {
            o->k = OP_TICK;
            o->dt = chance(&r, 8) ? (int64_t)(10 + below(&r, 20)) * 1000000000LL
                                  : (int64_t)(50 + below(&r, 2500)) * 1000000LL;
        } else if (x < 67) {
            o->k = OP_SUBMIT;
            o->text = make_job(&r, w, ++njobs, &o->who);
        } else if (x < 71) {
            o->k = OP_CANCEL;
            o->a = (int)below(&r, (uint64_t)(njobs ? njobs : 1));
        } else if (x < 73 && nnodes < 12) {
            o->k = OP_JOIN;
            o->a = (int)below(&r, (uint64_t)w->nshapes);
            nnodes++;
        } else if (x < 75) {
            o->k = OP_DOWN;
        } else if (x < 78) {
            o->k = OP_UP;
        } else if (x < 80) {
            o->k = OP_CUT;
        } else if (x < 84) {
            o->k = OP_HEAL;
        } else if (x < 86) {
            o->k = OP_DRAIN;
        } else if (x < 89) {
            o->k = OP_UNDRAIN;
        } else if (x < 95) {
            o->k = OP_REPLAY;
        } else if (x < 96) {
            o->k = OP_RESTART;
        } else if (x < 97) {
            o->k = OP_GPU;
            o->who = (int)below(&r, 16);
        } else {
            o->k = OP_TICK;
            o->dt = 200000000LL;
        }
        if ((o->k >= OP_DOWN && o->k <= OP_REPLAY) || o->k == OP_GPU)
            o->a = (int)below(&r, (uint64_t)nnodes);
        n++;
    }
    *out = ops;
    *nout = n;
}

void dst_free(dst_world_t *w, dst_op_t *ops, int nops)
{
    for (int i = 0; i < nops; i++)
        free(ops[i].text);
    free(ops);
    for (int i = 0; i < w->nshapes; i++)
        free(w->shape[i]);
    w->nshapes = 0;
}

void dst_conf(const dst_world_t *w, st_conf_t *c)
{
    st_conf_init(c);
    snprintf(c->policy, sizeof c->policy, "%s", w->policy);
    c->queue_policy = w->queue;
    c->backfill = w->backfill;
    c->preemption = w->preemption;
    c->starvation_ns = w->starvation_ns;
    c->sync = STORE_SYNC_NORMAL;
    c->interval_ns = 1000000000LL;
    if (!w->quotas)
        return;
    c->queues = calloc(2, sizeof *c->queues);
    c->nqueues = 2;
    for (int i = 0; i < 2; i++) {
        st_queue_conf_t *q = &c->queues[i];
        snprintf(q->name, sizeof q->name, "team-%c", 'a' + i);
        snprintf(q->cohort, sizeof q->cohort, "research");
        q->has_quota = true;
        q->nominal.gpu_milli = 8000;
        q->borrow_limit.gpu_milli = 8000;
        q->weight = 1;
    }
}

/* ---- text form ---------------------------------------------------------------------------- */

static const char *const qnames[] = {"fifo", "priority", "drf"};

void dst_write(FILE *f, const dst_world_t *w, const dst_op_t *ops, int nops)
{
    fprintf(f,
            "world seed=%llu policy=%s queue=%s backfill=%d preemption=%d quotas=%d "
            "starvation=%lld\n",
            (unsigned long long)w->seed, w->policy, qnames[w->queue], w->backfill, w->preemption,
            w->quotas, (long long)(w->starvation_ns / 1000000000LL));
    for (int i = 0; i < w->nshapes; i++)
        fprintf(f, "shape %s\n", w->shape[i]);
    for (int i = 0; i < nops; i++) {
        const dst_op_t *o = &ops[i];
        fprintf(f, "%s", dst_op_names[o->k]);
        if (o->k == OP_TICK)
            fprintf(f, " %lldms", (long long)(o->dt / 1000000));
        else if (o->k == OP_SUBMIT)
            fprintf(f, " %d %s", o->who, o->text);
        else if (o->k == OP_GPU)
            fprintf(f, " %d %d", o->a, o->who);
        else if (o->k != OP_RESTART)
            fprintf(f, " %d", o->a);
        fprintf(f, "\n");
    }
}

int dst_read(FILE *f, dst_world_t *w, dst_op_t **out, int *nout, arb_err_t *err)
{
    char line[8192];
    int n = 0, cap = 64, ln = 0;
    dst_op_t *ops = calloc((size_t)cap, sizeof *ops);

    memset(w, 0, sizeof *w);
    while (fgets(line, sizeof line, f)) {
        char *nl = strchr(line, '\n'), word[16] = "";
        int used = 0;
        ln++;
        if (nl)
            *nl = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        sscanf(line, "%15s %n", word, &used);
        if (!strcmp(word, "world")) {
            char q[16] = "", pol[16] = "";
            unsigned long long seed = 0;
            int bf = 0, pe = 0, qu = 0;
            long long sv = 0;
            if (sscanf(line,
                       "world seed=%llu policy=%15s queue=%15s backfill=%d preemption=%d "
                       "quotas=%d starvation=%lld",
                       &seed, pol, q, &bf, &pe, &qu, &sv) != 7)
                return arb_errf(err, -EINVAL, "line %d: a bad world line", ln);
            w->seed = seed;
            snprintf(w->policy, sizeof w->policy, "%s", pol);
            for (int k = 0; k < 3; k++)
                if (!strcmp(q, qnames[k]))
                    w->queue = (arb_queue_policy_t)k;
            w->backfill = bf;
            w->preemption = pe;
            w->quotas = qu;
            w->starvation_ns = sv * 1000000000LL;
            continue;
        }
        if (!strcmp(word, "shape")) {
            if (w->nshapes < DST_MAX_SHAPES)
                w->shape[w->nshapes++] = strdup(line + used);
            continue;
        }
        int k = 0;
        while (k < OP_NKINDS && strcmp(word, dst_op_names[k]))
            k++;
        if (k == OP_NKINDS)
            return arb_errf(err, -EINVAL, "line %d: unknown step '%s'", ln, word);
        if (n == cap) {
            cap *= 2;
            ops = realloc(ops, (size_t)cap * sizeof *ops);
        }
        dst_op_t *o = &ops[n++];
        memset(o, 0, sizeof *o);
        o->k = (dst_opk_t)k;
        if (o->k == OP_TICK) {
            o->dt = strtoll(line + used, NULL, 10) * 1000000LL;
        } else if (o->k == OP_SUBMIT) {
            int u2 = 0;
            sscanf(line + used, "%d %n", &o->who, &u2);
            o->text = strdup(line + used + u2);
        } else if (o->k == OP_GPU) {
            sscanf(line + used, "%d %d", &o->a, &o->who);
        } else {
            o->a = atoi(line + used);
        }
    }
    *out = ops;
    *nout = n;
    return 0;
}
