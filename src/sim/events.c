/*
 * events.c: the simulator's events mode. Time is virtual: tasks arrive (at
 * their trace creation_time, or by a seeded Poisson process), wait in the
 * scheduler core's queue while they do not fit, run for their duration and
 * leave. Every placement is the core's: a cycle orders the waiting jobs by
 * the queue policy (fifo, priority, drf) and places what fits, with
 * ctx.now_ns the virtual clock. Cycles go through the core's pending-job
 * index (arbiter/pendq.h: arb_pendq_cycle places what arb_sched_cycle would,
 * but costs what can be placed, not the whole backlog). This file only keeps
 * the clock, the events and the statistics.
 *
 * A job's life here (its core state in brackets):
 *
 *   arrive --submit--> waiting [PENDING] --cycle places it--> running
 *     |                   |                [PLACED -> RUNNING]   |
 *     | fits no node      | its deadline passes                  | its duration
 *     v even when empty   v (never ran in the trace)             v ends
 *   unschedulable       abandoned [CANCELLED]               completed [SUCCEEDED]
 *   (never submitted)
 *
 * Invariants: (1) a job is in the index `pq` exactly while PENDING in the core;
 * (2) the completion heap holds exactly the running jobs; (3) used_milli is
 * the GPU milli held by running jobs.
 *
 * When a cycle runs. At each event time, after completions, withdrawals
 * and arrivals at that time, the simulator asks only what can change the
 * outcome, so that the result is the one a full arb_sched_cycle at every
 * event would give (placements only take resources, so a job that did not
 * fit still does not until something is freed):
 *
 *   fifo          strict FIFO stops at the first job that does not fit, so
 *                 only the head matters: when something was freed (or the
 *                 queue was empty) the head is tried (arb_sched_place); if
 *                 it goes, a cycle places those behind it.
 *   priority/drf  a cycle when something was freed or several jobs arrived
 *                 at once; a single new arrival alone is tried at once.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arbiter/pendq.h"
#include "arbiter/sched.h"
#include "sim/sim.h"

#define NS 1000000000LL

/* One job to arrive. */
typedef struct ev_arrival {
    int64_t t;        /* arrival, ns */
    int64_t dur;      /* run time, ns; -1: runs until deadline */
    int64_t deadline; /* withdrawn if still waiting then (ns); -1 none */
    int task;         /* index in the task list */
    int seq;          /* order among equal times */
    int replicas;
    arb_topo_level_t level;
    bool required;
} ev_arrival_t;

/* A min-heap of (time, job id). */
typedef struct ev_heap {
    struct ev_item {
        int64_t t;
        uint32_t id;
    } * v;
    int n, cap;
} ev_heap_t;

static int heap_push(ev_heap_t *h, int64_t t, uint32_t id)
{
    int i;
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 256;
        struct ev_item *v = realloc(h->v, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    for (i = h->n++; i > 0; i = (i - 1) / 2) {
        struct ev_item *p = &h->v[(i - 1) / 2];
        if (p->t < t || (p->t == t && p->id < id))
            break;
        h->v[i] = *p;
    }
    h->v[i].t = t;
    h->v[i].id = id;
    return 0;
}

static struct ev_item heap_pop(ev_heap_t *h)
{
    struct ev_item top = h->v[0], last = h->v[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && (h->v[c + 1].t < h->v[c].t ||
                             (h->v[c + 1].t == h->v[c].t && h->v[c + 1].id < h->v[c].id)))
            c++;
        if (last.t < h->v[c].t || (last.t == h->v[c].t && last.id <= h->v[c].id))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}

static int cmp_arrival(const void *a, const void *b)
{
    const ev_arrival_t *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static double unit(arb_rng_t *r)
{
    return (double)(arb_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* The trace's QoS classes as priorities, for --queue priority. */
static int32_t qos_priority(const char *qos)
{
    static const struct {
        const char *qos;
        int32_t prio;
    } map[] = {{"Guaranteed", 300}, {"LS", 200}, {"Burstable", 100}, {"BE", 0}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].qos, qos) == 0)
            return map[i].prio;
    return 100;
}

/* The jobs to arrive, sorted by time. *out is malloc'd. */
static int make_arrivals(const sim_tasks_t *tasks, const sim_opts_t *o, arb_rng_t *rng,
                         ev_arrival_t **out, int *nout, arb_err_t *err)
{
    int n = o->poisson_rate > 0 ? (o->ntasks > 0 ? o->ntasks : tasks->n) : tasks->n, na = 0;
    ev_arrival_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    double t = 0;

    if (!v)
        return arb_errf(err, -ENOMEM, "out of memory for %d arrivals", n);
    for (int i = 0; i < n; i++) {
        ev_arrival_t *a = &v[na];
        const sim_task_t *k;
        memset(a, 0, sizeof *a);
        a->deadline = -1;
        if (o->poisson_rate > 0) {
            /* Exponential gaps; shapes and run times drawn with replacement. */
            t += -log(1.0 - unit(rng)) / o->poisson_rate;
            a->task = (int)arb_rng_below(rng, (uint64_t)tasks->n);
            a->t = (int64_t)(t * NS);
            a->dur = o->durations->v[arb_rng_below(rng, (uint64_t)o->durations->n)] * NS;
        } else {
            k = &tasks->v[i];
            if (k->creation_s < 0) {
                free(v);
                return arb_errf(err, -EINVAL,
                                "%s line %d: task '%s' has no creation_time; events mode replays "
                                "creation_time, deletion_time and scheduled_time (or use "
                                "--arrivals poisson:RATE --durations FILE)",
                                tasks->workload, k->line, k->name);
            }
            a->task = i;
            a->t = o->compress > 0 ? (int64_t)((double)k->creation_s * NS / o->compress)
                                   : k->creation_s * NS;
            if (k->scheduled_s >= 0 && k->deletion_s >= k->scheduled_s) {
                a->dur = (k->deletion_s - k->scheduled_s) * NS;
            } else if (k->deletion_s >= k->creation_s) {
                /* Never scheduled in the trace: it waits as long as it waited
                 * there (until it was deleted) and, if placed before, runs
                 * until then. */
                a->dur = -1;
                a->deadline = a->t + (k->deletion_s - k->creation_s) * NS;
            } else {
                a->dur = 0;
            }
        }
        k = &tasks->v[a->task];
        a->seq = i;
        a->replicas = k->replicas > 0 ? k->replicas : 1;
        a->level = (arb_topo_level_t)k->topo_level;
        a->required = k->topo_required;
        if (o->gang_gpus > 0 && k->num_gpu >= o->gang_gpus && k->gpu_milli >= 1000) {
            a->replicas = o->gang_size;
            a->level = o->gang_level;
            a->required = o->gang_required;
        }
        na++;
    }
    qsort(v, (size_t)na, sizeof *v, cmp_arrival);
    *out = v;
    *nout = na;
    return 0;
}

/* ---- could a job ever fit? -------------------------------------------------- */

/* A scheduler over an empty copy of the cluster answers "does this job fit
 * when nothing runs?", once per distinct request. */
typedef struct fit_memo {
    arb_cluster_t c;
    arb_sched_t *s;
    struct fit_key {
        int64_t cpu, mem;
        int gpus, share, replicas, level, required, nmodels;
        uint32_t models[8];
        int8_t fits;
    } * v;
    int n, cap;
} fit_memo_t;

static bool fits_empty(fit_memo_t *m, const arb_strtab_t *strs, const arb_job_t *j,
                       const arb_ctx_t *ctx)
{
    const arb_tgroup_t *g = &j->groups[0];
    struct fit_key k;
    arb_job_t *copy;
    int rc;

    memset(&k, 0, sizeof k);
    k.cpu = g->req.cpu_milli;
    k.mem = g->req.mem_bytes;
    k.gpus = g->gpus;
    k.share = g->gpu_share;
    k.replicas = g->replicas;
    k.level = g->topo.level;
    k.required = g->topo.required;
    k.nmodels = j->nmodels < 8 ? j->nmodels : 8;
    if (k.nmodels > 0)
        memcpy(k.models, j->models, (size_t)k.nmodels * sizeof k.models[0]);
    for (int i = 0; i < m->n; i++) {
        struct fit_key *e = &m->v[i];
        if (e->cpu == k.cpu && e->mem == k.mem && e->gpus == k.gpus && e->share == k.share &&
            e->replicas == k.replicas && e->level == k.level && e->required == k.required &&
            e->nmodels == k.nmodels &&
            memcmp(e->models, k.models, (size_t)k.nmodels * sizeof k.models[0]) == 0)
            return e->fits;
    }
    copy = arb_job_new(j->name, 1);
    if (!copy)
        return true; /* out of memory: let the queue find out */
    copy->groups[0] = *g;
    copy->groups[0].name = NULL; /* j's: the copy's is its own (arb_tgroup_set_name) */
    if (arb_tgroup_set_name(&copy->groups[0], g->name) < 0) {
        arb_job_free(copy);
        return true;
    }
    /* Model ids are interned in the main cluster: intern the names here. */
    if (j->nmodels > 0 && (copy->models = malloc((size_t)j->nmodels * sizeof *copy->models))) {
        copy->nmodels = j->nmodels;
        for (int i = 0; i < j->nmodels; i++)
            copy->models[i] = arb_intern(&m->c.strs, arb_str(strs, j->models[i]));
    }
    rc = arb_job_finalize(copy, NULL) == 0 ? arb_sched_submit(m->s, copy, ctx, NULL) : -EINVAL;
    if (rc < 0) {
        arb_job_free(copy);
        return true;
    }
    k.fits = arb_sched_place(m->s, copy, ctx) == 0;
    arb_sched_finish(m->s, copy, ARB_JOB_CANCELLED, NULL);
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 64;
        struct fit_key *v = realloc(m->v, (size_t)cap * sizeof *v);
        if (!v)
            return k.fits;
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = k;
    return k.fits;
}

/* ---- statistics --------------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean and nearest-rank percentiles; sorts v. */
static void dist_of(double *v, int n, sim_dist_t *d)
{
    double s = 0;
    memset(d, 0, sizeof *d);
    d->n = n;
    if (n == 0)
        return;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    for (int i = 0; i < n; i++)
        s += v[i];
    d->mean = s / n;
    d->p50 = v[(int)ceil(0.50 * n) - 1];
    d->p99 = v[(int)ceil(0.99 * n) - 1];
    d->max = v[n - 1];
}

/* The state after each event time, resampled to SIM_NSERIES points. */
typedef struct ev_step {
    int64_t t;
    int64_t used;
    int pending;
} ev_step_t;

/* ---- one run -------------------------------------------------------------------- */

typedef struct ev_run {
    const sim_nodes_t *nodes;
    const sim_tasks_t *tasks;
    const sim_opts_t *o;
    sim_result_t *res;
    arb_cluster_t c;
    arb_sched_t *s;
    arb_ctx_t ctx;
    ev_arrival_t *arr;
    int narr;
    /* per job id */
    int *arr_of;        /* arrival index */
    int64_t *start;     /* -1 until started */
    int64_t *gpu_milli; /* held while running */
    arb_pendq_t *pq;    /* the PENDING jobs (the core's pending-job index) */
    int npending;       /* arb_pendq_len(pq) */
    ev_heap_t done;     /* running jobs by end time */
    ev_heap_t dead;     /* waiting jobs by deadline */
    int64_t used_milli, total_milli;
    double *waits, *jcts, *gwaits;
    int nwaits, njcts, ngwaits;
    ev_step_t *steps;
    int nsteps, capsteps;
    double racks_sum, nodes_sum;
    /* Since the last scheduling decision. */
    bool freed;          /* resources were freed */
    int nnew;            /* jobs arrived */
    uint32_t last_new;   /* the last of them */
    uint32_t head_tried; /* fifo: the head tried last (UINT32_MAX none) */
} ev_run_t;

/* Start the jobs v[0..n) the core has just placed: RUNNING, end time,
 * stats. */
static int start_placed(ev_run_t *r, int64_t now, arb_job_t *const *v, int count)
{
    for (int i = 0; i < count; i++) {
        arb_job_t *j = v[i];
        uint32_t id = j->id;
        const ev_arrival_t *a = &r->arr[r->arr_of[id]];
        int64_t end;
        if (j->state != ARB_JOB_PLACED)
            continue;
        arb_job_transition(j, ARB_JOB_RUNNING, NULL);
        r->start[id] = now;
        r->gpu_milli[id] = 0;
        for (int t = 0; t < j->nalloc; t++)
            r->gpu_milli[id] +=
                (int64_t)__builtin_popcount(j->alloc[t].gpu_mask) * j->alloc[t].gpu_milli;
        r->used_milli += r->gpu_milli[id];
        r->res->ev.started++;
        r->waits[r->nwaits++] = (double)(now - a->t) / NS;
        if (j->ntasks > 1) {
            uint32_t racks[64], nodes[64];
            int nr = 0, nn = 0;
            r->gwaits[r->ngwaits++] = (double)(now - a->t) / NS;
            r->res->ev.gangs_started++;
            for (int t = 0; t < j->nalloc; t++) {
                const arb_node_t *n = &r->c.nodes[j->alloc[t].node];
                bool seen = false;
                for (int q = 0; q < nn && !seen; q++)
                    seen = nodes[q] == n->id;
                if (!seen && nn < 64)
                    nodes[nn++] = n->id;
                seen = !n->rack;
                for (int q = 0; q < nr && !seen; q++)
                    seen = racks[q] == n->rack;
                if (!seen && nr < 64)
                    racks[nr++] = n->rack;
            }
            r->racks_sum += nr;
            r->nodes_sum += nn;
        }
        end = a->dur >= 0 ? now + a->dur : a->deadline;
        if (end < now)
            end = now;
        if (heap_push(&r->done, end, id) < 0)
            return -ENOMEM;
    }
    r->npending = arb_pendq_len(r->pq);
    return 0;
}

static int step(ev_run_t *r, int64_t now)
{
    if (r->nsteps > 0 && r->steps[r->nsteps - 1].t > now)
        now = r->steps[r->nsteps - 1].t;
    if (r->nsteps == r->capsteps) {
        int cap = r->capsteps ? r->capsteps * 2 : 1024;
        ev_step_t *v = realloc(r->steps, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        r->steps = v;
        r->capsteps = cap;
    }
    if (r->nsteps > 0 && r->steps[r->nsteps - 1].t == now)
        r->nsteps--;
    r->steps[r->nsteps++] = (ev_step_t){now, r->used_milli, r->npending};
    if (r->npending > r->res->ev.pending_max)
        r->res->ev.pending_max = r->npending;
    return 0;
}

static void finish_stats(ev_run_t *r)
{
    sim_events_t *e = &r->res->ev;
    int64_t t0 = r->nsteps ? r->steps[0].t : 0, t1 = r->nsteps ? r->steps[r->nsteps - 1].t : 0;
    double area = 0;

    e->waiting_end = r->npending;
    e->span_s = (double)(t1 - t0) / NS;
    /* Utilisation and the series cover the arrivals' window (the last
     * tasks' long tails would otherwise dominate both). */
    if (r->narr > 1 && r->arr[r->narr - 1].t > r->arr[0].t)
        t1 = r->arr[r->narr - 1].t;
    dist_of(r->waits, r->nwaits, &e->wait);
    dist_of(r->jcts, r->njcts, &e->jct);
    dist_of(r->gwaits, r->ngwaits, &e->gang_wait);
    if (e->gangs_started > 0) {
        e->gang_racks = r->racks_sum / e->gangs_started;
        e->gang_nodes = r->nodes_sum / e->gangs_started;
    }
    for (int i = 0; i + 1 < r->nsteps && r->steps[i].t < t1; i++) {
        int64_t end = r->steps[i + 1].t < t1 ? r->steps[i + 1].t : t1;
        area += (double)r->steps[i].used * (double)(end - r->steps[i].t);
    }
    e->gpu_util_pct = t1 > t0 && r->total_milli > 0
                          ? 100.0 * area / ((double)(t1 - t0) * (double)r->total_milli)
                          : 0;
    /* Resample: the state in force at each of SIM_NSERIES evenly spaced times. */
    for (int k = 0, i = 0; k < SIM_NSERIES && r->nsteps > 0; k++) {
        int64_t tk = t0 + (int64_t)((double)(t1 - t0) * k / (SIM_NSERIES - 1));
        while (i + 1 < r->nsteps && r->steps[i + 1].t <= tk)
            i++;
        e->t_s[k] = (double)(tk - t0) / NS;
        e->alloc_pct[k] =
            r->total_milli > 0 ? 100.0 * (double)r->steps[i].used / (double)r->total_milli : 0;
        e->pending[k] = r->steps[i].pending;
    }
}

/* A full cycle through the pending-job index: arb_sched_cycle's outcome
 * (events mode sets no preemption, backfill or elastic job), at the cost of
 * what can be placed rather than of the backlog. */
static int cycle(ev_run_t *r, arb_err_t *err)
{
    arb_cycle_stats_t st;
    arb_job_t *const *v;
    int rc = arb_pendq_cycle(r->pq, &r->ctx, &st), n;

    if (rc < 0)
        return arb_errf(err, rc, "scheduling cycle failed: %s", strerror(-rc));
    r->res->ev.cycles++;
    n = arb_pendq_placed(r->pq, &v);
    return start_placed(r, r->ctx.now_ns, v, n) < 0 ? arb_errf(err, -ENOMEM, "out of memory") : 0;
}

/* Try one job alone (arb_sched_place); started when it goes. 1 placed, 0
 * not, or -errno with text. */
static int try_one(ev_run_t *r, arb_job_t *j, arb_err_t *err)
{
    int rc = arb_sched_place(r->s, j, &r->ctx);

    if (rc == -ENOSPC)
        return 0;
    if (rc < 0)
        return arb_errf(err, rc, "placing a job failed: %s", strerror(-rc));
    arb_pendq_remove(r->pq, j);
    if (start_placed(r, r->ctx.now_ns, &j, 1) < 0)
        return arb_errf(err, -ENOMEM, "out of memory");
    return 1;
}

/* Apply everything due at time `now`: completions, withdrawals, arrivals.
 * What they change for scheduling accumulates in r->freed and r->nnew. */
static int apply(ev_run_t *r, int64_t now, int *next_arrival, fit_memo_t *fm, arb_err_t *err)
{
    int rc = 0;

    r->ctx.now_ns = now;
    /* Completions. */
    while (r->done.n > 0 && r->done.v[0].t <= now) {
        struct ev_item it = heap_pop(&r->done);
        arb_job_t *j = arb_sched_job(r->s, it.id);
        const ev_arrival_t *a = &r->arr[r->arr_of[it.id]];
        if ((rc = arb_sched_finish(r->s, j, ARB_JOB_SUCCEEDED, err)) < 0)
            return rc;
        r->used_milli -= r->gpu_milli[it.id];
        r->res->ev.completed++;
        r->jcts[r->njcts++] = (double)(it.t - a->t) / NS;
        r->freed = true;
    }
    /* Withdrawals of jobs still waiting at their deadline. */
    while (r->dead.n > 0 && r->dead.v[0].t <= now) {
        struct ev_item it = heap_pop(&r->dead);
        arb_job_t *j = arb_sched_job(r->s, it.id);
        if (j->state != ARB_JOB_PENDING)
            continue;
        arb_pendq_remove(r->pq, j);
        if ((rc = arb_sched_finish(r->s, j, ARB_JOB_CANCELLED, err)) < 0)
            return rc;
        r->res->ev.abandoned++;
        r->npending = arb_pendq_len(r->pq);
    }
    /* Arrivals. */
    for (; *next_arrival < r->narr && r->arr[*next_arrival].t <= now; (*next_arrival)++) {
        const ev_arrival_t *a = &r->arr[*next_arrival];
        arb_job_t *j =
            sim_make_job(&r->c, &r->tasks->v[a->task], a->replicas, a->level, a->required, err);
        const sim_task_t *k = &r->tasks->v[a->task];
        if (!j)
            return -EINVAL;
        j->priority = k->priority != SIM_PRIO_UNSET ? k->priority : qos_priority(k->qos);
        if (k->queue[0] || k->qos[0])
            j->queue = arb_intern(&r->c.strs, k->queue[0] ? k->queue : k->qos);
        r->res->tasks_arrived++;
        if (j->ntasks > 1)
            r->res->ev.gangs++;
        if (!fits_empty(fm, &r->c.strs, j, &r->ctx)) {
            r->res->ev.unschedulable++;
            arb_job_free(j);
            continue;
        }
        if ((rc = arb_sched_submit(r->s, j, &r->ctx, err)) < 0) {
            arb_job_free(j);
            return rc;
        }
        r->arr_of[j->id] = *next_arrival;
        r->start[j->id] = -1;
        if ((rc = arb_pendq_add(r->pq, j)) < 0)
            return arb_errf(err, rc, "out of memory");
        r->npending = arb_pendq_len(r->pq);
        r->res->ev.jobs++;
        if (a->deadline >= 0 && (rc = heap_push(&r->dead, a->deadline, j->id)) < 0)
            return rc;
        r->last_new = j->id;
        r->nnew++;
    }
    return 0;
}

/* Schedule at time `now` (see the comment at the top of the file). */
static int schedule(ev_run_t *r, int64_t now, arb_err_t *err)
{
    arb_job_t *head;
    int rc = 0;

    r->ctx.now_ns = now;
    if (r->o->queue == ARB_QP_FIFO) {
        /* Strict FIFO: only the head can go first; the cycle stops at it. */
        head = arb_pendq_first(r->pq);
        if (head && (r->freed || head->id != r->head_tried)) {
            r->head_tried = head->id;
            if ((rc = try_one(r, head, err)) < 0)
                return rc;
            if (rc == 1 && r->npending > 0 && (rc = cycle(r, err)) < 0)
                return rc;
        }
    } else if (r->npending > 0 && (r->freed || r->nnew > 1)) {
        if ((rc = cycle(r, err)) < 0)
            return rc;
    } else if (r->nnew == 1 && arb_sched_job(r->s, r->last_new)->state == ARB_JOB_PENDING) {
        if ((rc = try_one(r, arb_sched_job(r->s, r->last_new), err)) < 0)
            return rc;
    }
    r->freed = false;
    r->nnew = 0;
    return 0;
}

int sim_run_events(const sim_nodes_t *nodes, const sim_tasks_t *tasks, const sim_opts_t *o,
                   sim_result_t *res, arb_err_t *err)
{
    double t0 = sim_clock_s(CLOCK_MONOTONIC), tp = 0;
    ev_run_t r;
    arb_sched_conf_t conf;
    arb_rng_t rng;
    fit_memo_t fm;
    int *norder = NULL, next = 0, rc;
    int64_t period = o->cycle_s > 0 ? (int64_t)(o->cycle_s * NS) : 0;

    memset(&r, 0, sizeof r);
    memset(&fm, 0, sizeof fm);
    memset(res, 0, sizeof *res);
    snprintf(res->workload, sizeof res->workload, "%s", tasks->workload);
    snprintf(res->policy, sizeof res->policy, "%s", o->policy);
    snprintf(res->ev.queue, sizeof res->ev.queue, "%s",
             o->queue == ARB_QP_FIFO       ? "fifo"
             : o->queue == ARB_QP_PRIORITY ? "priority"
                                           : "drf");
    res->mode = SIM_MODE_EVENTS;
    res->seed = o->seed;
    for (int k = 0; k < SIM_NPCT; k++)
        res->alloc_pct[k] = res->frag_pct[k] = res->frag_ratio_pct[k] = NAN;
    r.nodes = nodes;
    r.tasks = tasks;
    r.o = o;
    r.res = &res[0];
    r.ctx.rng = &rng;
    r.head_tried = UINT32_MAX;
    arb_cluster_init(&r.c);
    arb_cluster_init(&fm.c);
    memset(&conf, 0, sizeof conf);
    arb_rng_seed(&rng, o->seed);

    if (o->poisson_rate > 0 && (!o->durations || o->durations->n == 0)) {
        rc = arb_errf(err, -EINVAL, "Poisson arrivals need durations (--durations FILE)");
        goto out;
    }
    if ((rc = arb_profile_lookup(o->policy, &conf.profile, err)) < 0)
        goto out;
    conf.queue_policy = o->queue;
    for (int i = 0; i < nodes->n; i++)
        res->total_gpus += nodes->v[i].gpus;
    r.total_milli = (int64_t)res->total_gpus * 1000;
    /* The order of draws: arrivals (Poisson), then the node order. */
    if ((rc = make_arrivals(tasks, o, &rng, &r.arr, &r.narr, err)) < 0)
        goto out;
    if (!(norder = sim_node_order(nodes, &rng))) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = sim_build_cluster(&r.c, nodes, norder, err)) < 0 ||
        (rc = sim_build_cluster(&fm.c, nodes, norder, err)) < 0)
        goto out;
    if (!(r.s = arb_sched_new(&r.c, &conf, err)) || !(fm.s = arb_sched_new(&fm.c, &conf, err))) {
        rc = -EINVAL;
        goto out;
    }
    r.arr_of = calloc((size_t)r.narr + 1, sizeof *r.arr_of);
    r.start = calloc((size_t)r.narr + 1, sizeof *r.start);
    r.gpu_milli = calloc((size_t)r.narr + 1, sizeof *r.gpu_milli);
    r.pq = arb_pendq_new(r.s);
    r.waits = calloc((size_t)r.narr + 1, sizeof *r.waits);
    r.jcts = calloc((size_t)r.narr + 1, sizeof *r.jcts);
    r.gwaits = calloc((size_t)r.narr + 1, sizeof *r.gwaits);
    if (!r.arr_of || !r.start || !r.gpu_milli || !r.pq || !r.waits || !r.jcts || !r.gwaits) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }

    tp = sim_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    /* Until nothing can happen any more: jobs still waiting then (no
     * deadline, nothing left to free room) wait forever. With a scheduling
     * period, decisions are taken at its multiples only. */
    while (next < r.narr || r.done.n > 0 || (r.dead.n > 0 && r.npending > 0) || r.freed ||
           r.nnew > 0) {
        int64_t now = INT64_MAX, tick;
        bool dirty = r.freed || r.nnew > 0;
        if (next < r.narr)
            now = r.arr[next].t;
        if (r.done.n > 0 && r.done.v[0].t < now)
            now = r.done.v[0].t;
        if (r.dead.n > 0 && r.dead.v[0].t < now)
            now = r.dead.v[0].t;
        if (period > 0 && dirty) {
            /* The next tick at or after the last event applied. */
            tick = (r.ctx.now_ns + period - 1) / period * period;
            if (tick <= now) {
                if ((rc = schedule(&r, tick, err)) < 0 || (rc = step(&r, tick)) < 0)
                    goto out;
                continue;
            }
        }
        if ((rc = apply(&r, now, &next, &fm, err)) < 0)
            goto out;
        if (period == 0 && (rc = schedule(&r, now, err)) < 0)
            goto out;
        if ((rc = step(&r, now)) < 0) {
            arb_errf(err, rc, "out of memory");
            goto out;
        }
    }
    tp = sim_clock_s(CLOCK_PROCESS_CPUTIME_ID) - tp;
    finish_stats(&r);
    rc = 0;
out:
    res->place_s = rc == 0 ? tp : 0;
    arb_sched_free(r.s);
    arb_sched_free(fm.s);
    arb_cluster_free(&r.c);
    arb_cluster_free(&fm.c);
    free(fm.v);
    free(norder);
    free(r.arr);
    free(r.arr_of);
    free(r.start);
    free(r.gpu_milli);
    arb_pendq_free(r.pq);
    free(r.done.v);
    free(r.dead.v);
    free(r.waits);
    free(r.jcts);
    free(r.gwaits);
    free(r.steps);
    res->run_s = sim_clock_s(CLOCK_MONOTONIC) - t0;
    res->rc = rc;
    if (rc < 0)
        snprintf(res->err, sizeof res->err, "%.*s", (int)sizeof res->err - 1,
                 err ? err->msg : strerror(-rc));
    return rc;
}
