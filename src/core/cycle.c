/*
 * cycle.c: the scheduling cycle: which pending job is tried when, what a
 * job that cannot start holds back, and the trial run that explain uses.
 *
 *   order the pending jobs (queue.c); then each, in order:
 *     the caller holds it (arb_sched_set_hold: a dependency
 *     not met, an array throttle) ----------------------> waits (held)
 *     its queue's quota does not admit it ---------------> waits (quota)
 *     a barrier is up (below) --------------------------> may start only
 *                                     where it delays nobody ahead of it
 *     it fits now --------------------------------------> placed
 *     it would not fit even the idle eligible cluster --> waits (never)
 *     evicting lower-priority or borrowing jobs helps --> victims chosen;
 *                                     it waits for them to stop
 *     otherwise it waits (fit) and, by the policy, raises a barrier:
 *       backfill on   the first such job gets an EASY reservation
 *                     (backfill.c) on the nodes it could use
 *       fifo          nothing behind it starts (held behind it)
 *       starving      (waited past starvation_ns) it reserves the nodes
 *                     it could use; jobs behind it may start elsewhere
 *       priority, drf no barrier: smaller jobs behind it go on
 *   a started gang whose gangMin is below its size starts its remaining
 *   tasks, in its own place in that order, as room frees
 *   then elastic jobs grow (elastic.c)
 *
 * Invariants (tests/unit/test_cycle.c has a test named after each):
 *  1. Order. Pending jobs are tried in queue order. A job evicted for a
 *     preemptor P, by priority or by quota reclaim, is tried right after
 *     P while P is pending (queue.c), so it is never re-placed into the
 *     room P is waiting for: no preemption livelock. Nor is the quota P
 *     needs taken while it waits (queue.c, "Holds"). A victim that this
 *     very cycle placed is put back to pending at once (unplace_fresh: no
 *     requeue, no attempt, nothing sent), so the cycle ends as if P had
 *     gone first.
 *  2. No freeze. A job that would not fit even if every node it may use
 *     were idle (or that no node may take at all: a selector nothing
 *     matches, a taint nothing tolerates, more than any node has) holds no
 *     reservation and no barrier: it waits with that reason and the jobs
 *     behind it go on. (Checked on an idle copy of the cluster's shape,
 *     cached per job until a node's shape changes: sched_fits_idle.)
 *  3. A barrier holds only what its job could use. A starving job that
 *     cannot start, and the job a backfill reservation is for, reserve the
 *     nodes they could use, and only those; the jobs behind may start on
 *     other nodes. (fifo without backfill is strict: nothing passes a
 *     blocked head that could ever start.)
 *  4. Backfill never delays the reservation: a job behind it may start on
 *     the reserved nodes only if its time limit, plus its grace, ends
 *     before the reservation begins; a job without a time limit only on
 *     other nodes.
 *  5. Quota. A job starts only within its queue's quota (nominal, then
 *     borrowing its cohort's idle quota); a job waiting for quota holds
 *     nobody back.
 *  6. Preemption only when the eviction makes the job fit; a preemptor
 *     whose victims are still stopping takes no new victims; jobs behind a
 *     barrier do not preempt.
 *  7. Growth: elastic jobs grow only after every pending job that growth
 *     could affect had its turn (elastic.c).
 *  8. Explain is the cycle: arb_sched_explain runs this very loop as a
 *     trial up to its job (sched_cycle_try), on a copy of the randomness,
 *     and undoes everything; so "fits now" means the next cycle places it
 *     unless something changes first, and a job held back is told by which
 *     job and why.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

const char *arb_wait_name(arb_wait_t w)
{
    static const char *const n[] = {"none",
                                    "insufficient",
                                    "never-fits",
                                    "quota",
                                    "held-by-order",
                                    "held-by-starving-job",
                                    "backfill-reservation",
                                    "preempting",
                                    "held-by-preemptor",
                                    "taken-back",
                                    "dependency",
                                    "dependency-never-satisfied",
                                    "array-throttle"};
    return (unsigned)w < sizeof n / sizeof n[0] ? n[w] : "?";
}

/* ---- the shape of the cluster, and fitting it idle ------------------------------------ */

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

/* A digest of everything a job's fit on the idle cluster depends on: each
 * node's condition, report freshness, capacity, GPUs (model, memory,
 * health, topology, heat), labels and taints. Never 0. */
static uint64_t shape_key(const arb_sched_t *s, const arb_ctx_t *ctx)
{
    const arb_profile_t *p = &s->conf.profile;
    uint64_t h = mix(0x51, s->c->nnodes);

    for (uint32_t i = 0; i < s->c->nnodes; i++) {
        const arb_node_t *n = &s->c->nodes[i];
        bool stale = p->stale_ns > 0 && ctx && ctx->now_ns - n->report_ns > p->stale_ns;
        uint64_t acc = 0;
        h = mix(h, (uint64_t)n->state << 1 | stale);
        h = mix(h, (uint64_t)n->cap.gpu_milli);
        h = mix(h, (uint64_t)n->cap.cpu_milli);
        h = mix(h, (uint64_t)n->cap.mem_bytes);
        for (int e = 0; e < ARB_MAX_EXT; e++)
            h = mix(h, (uint64_t)n->cap.ext[e]);
        for (int g = 0; g < n->ngpus; g++) {
            const arb_gpu_t *d = &n->gpu[g];
            bool hot = p->thermal_limit_c > 0 && d->temp_c >= p->thermal_limit_c;
            h = mix(h, (uint64_t)d->model << 32 | (uint32_t)d->mem_mib);
            h = mix(h, (uint64_t)(uint16_t)d->nvlink << 16 | (uint64_t)d->healthy << 1 | hot);
        }
        for (int k = 0; k < n->nlabels; k++)
            acc += mix(mix(1, n->labels[k].key), n->labels[k].val);
        for (int k = 0; k < n->ntaints; k++)
            acc += mix(mix(mix(2, n->taints[k].key), n->taints[k].val), n->taints[k].effect);
        h = mix(h, acc);
    }
    return h | 1;
}

bool sched_fits_idle(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, uint64_t shape)
{
    typedef struct usage {
        arb_res_t used;
        int ntasks, nexcl;
        int32_t milli[ARB_MAX_GPUS], mem[ARB_MAX_GPUS];
    } usage_t;
    arb_rng_t rng;
    arb_ctx_t c = ctx ? *ctx : (arb_ctx_t){0};
    bool fits, fence = s->fence_on;
    uint8_t mask = s->fence_mask;
    usage_t *u;

    if (shape && j->idle_key == shape)
        return j->idle_fits;
    if (!(u = malloc((s->c->nnodes + 1) * sizeof *u)))
        return true; /* cannot tell: assume it could, as before */
    /* Its own randomness: whether this was cached must not change what the
     * cycle decides after it. */
    if (c.rng) {
        rng = *c.rng;
        c.rng = &rng;
    }
    /* Every node as if idle: its usage set aside (not released job by job:
     * a job may hold a GPU that has since left capacity), then put back. */
    for (uint32_t i = 0; i < s->c->nnodes; i++) {
        arb_node_t *n = &s->c->nodes[i];
        u[i].used = n->used;
        u[i].ntasks = n->ntasks;
        u[i].nexcl = n->nexcl;
        memset(&n->used, 0, sizeof n->used);
        n->ntasks = n->nexcl = 0;
        for (int g = 0; g < n->ngpus; g++) {
            u[i].milli[g] = n->gpu[g].used_milli;
            u[i].mem[g] = n->gpu[g].mem_used_mib;
            n->gpu[g].used_milli = n->gpu[g].mem_used_mib = 0;
        }
        arb_node_touch(s->c, n);
    }
    s->fence_on = true; /* every node, one by one (the classes are of the busy cluster) */
    s->fence_mask = 0;
    /* Feasibility only: no score plugin sees this trial (their state and
     * caches stay those of the real cluster), GPUs picked best-fit. */
    int nscores = s->conf.profile.nscores, picker = s->picker;
    s->conf.profile.nscores = 0;
    s->picker = -1;
    fits = sched_place_job(s, j, &c) == 0;
    if (fits)
        sched_unbind(s, j);
    s->conf.profile.nscores = nscores;
    s->picker = picker;
    for (uint32_t i = 0; i < s->c->nnodes; i++) {
        arb_node_t *n = &s->c->nodes[i];
        n->used = u[i].used;
        n->ntasks = u[i].ntasks;
        n->nexcl = u[i].nexcl;
        for (int g = 0; g < n->ngpus; g++) {
            n->gpu[g].used_milli = u[i].milli[g];
            n->gpu[g].mem_used_mib = u[i].mem[g];
        }
        arb_node_touch(s->c, n);
    }
    free(u);
    s->fence_on = fence;
    s->fence_mask = mask;
    if (shape) {
        j->idle_key = shape;
        j->idle_fits = fits;
    }
    return fits;
}

/* Could node n hold one task of pc's group if it were idle? Its filters
 * that are no matter of free capacity pass, and its capacity holds it. */
static bool could_hold(const arb_pctx_t *pc, const arb_node_t *n)
{
    const arb_tgroup_t *g = pc->group;
    arb_reason_t r = sched_filter_node(pc, n);
    int gpus = 0;

    if (r != ARB_R_OK && r < ARB_R_GPUS)
        return false;
    if (g->req.cpu_milli > n->cap.cpu_milli || g->req.mem_bytes > n->cap.mem_bytes)
        return false;
    for (int e = 0; e < ARB_MAX_EXT; e++)
        if (g->req.ext[e] > n->cap.ext[e])
            return false;
    for (int i = 0; i < n->ngpus; i++)
        gpus += n->gpu[i].healthy &&
                (n->gpu[i].mem_mib <= 0 || n->gpu[i].mem_mib >= g->req.gpu_mem_mib);
    return gpus >= (g->gpus ? g->gpus : g->gpu_share ? 1 : 0);
}

void sched_fence_add(arb_sched_t *s, const arb_job_t *j, const arb_ctx_t *ctx, uint8_t bit)
{
    arb_pctx_t pc = {.sched = s, .cluster = s->c, .ctx = ctx, .job = j};

    for (uint32_t i = 0; i < s->c->nnodes && i < s->nfence; i++) {
        if (s->fence[i] & bit)
            continue;
        for (int g = 0; g < j->ngroups; g++) {
            pc.group = &j->groups[g];
            if (could_hold(&pc, &s->c->nodes[i])) {
                s->fence[i] |= bit;
                if (s->fence_owner[i] == UINT32_MAX)
                    s->fence_owner[i] = j->id;
                break;
            }
        }
    }
}

/* Fence the room j's victims free (its claim: the nodes they held when it
 * chose them): that room is j's. Whether there was any. */
static bool fence_claim(arb_sched_t *s, const arb_job_t *j)
{
    for (int k = 0; k < j->nclaim; k++) {
        uint32_t n = j->claim[k];
        if (n >= s->nfence)
            continue;
        s->fence[n] |= SCHED_FENCE_HARD;
        if (s->fence_owner[n] == UINT32_MAX)
            s->fence_owner[n] = j->id;
    }
    return j->nclaim > 0;
}

void sched_claim_drop(arb_job_t *j)
{
    free(j->claim);
    j->claim = NULL;
    j->nclaim = 0;
}

static int fence_reset(arb_sched_t *s)
{
    if (s->nfence < s->c->nnodes) {
        uint8_t *f = realloc(s->fence, s->c->nnodes);
        if (f)
            s->fence = f;
        uint32_t *o = realloc(s->fence_owner, s->c->nnodes * sizeof *o);
        if (o)
            s->fence_owner = o;
        if (!f || !o)
            return -ENOMEM;
        s->nfence = s->c->nnodes;
    }
    if (s->nfence) { /* no nodes yet: nothing allocated (memset of NULL is undefined) */
        memset(s->fence, 0, s->nfence);
        memset(s->fence_owner, 0xff, s->nfence * sizeof *s->fence_owner);
    }
    s->fence_on = false;
    s->fence_mask = 0;
    return 0;
}

/* ---- the loop ---------------------------------------------------------------------------- */

/* A job's marks, saved by a trial and put back after it. */
typedef struct marks {
    bool waiting, evicting, reclaimed;
    int shrink_to;
    uint32_t preempted_by, yield_to;
    uint32_t *claim; /* a copy (owned by the trial) */
    int nclaim;
} marks_t;

typedef struct cyc {
    arb_sched_t *s;
    const arb_ctx_t *ctx;
    arb_cycle_stats_t *st;
    arb_job_t *target; /* a trial: stop after it, undo everything */
    sched_outcome_t *out;
    bool stopping;      /* deferred victims still hold their allocations */
    arb_job_t **placed; /* trial: what it placed, to undo */
    int nplaced;
    struct {
        arb_job_t *j;
        int n;
    } * cont; /* trial: tasks of started gangs it started, to undo */
    int ncont;
    marks_t *marks;      /* trial: every job's marks before it */
    int64_t shadow;      /* the backfill reservation's start; -1 none */
    uint32_t shadow_for; /* the job it is for */
    bool fenced;         /* some nodes are reserved (s->fence) */
    bool hard_fenced;    /* ... by a starving job or a preemptor: no time limit passes */
    uint32_t fence_for;  /* the first job that reserved nodes hard; UINT32_MAX none */
    bool fence_starving; /* ... because it starves (else: it preempts) */
    uint32_t owners_one; /* the one job every fence is for; UINT32_MAX several */
    bool held;           /* fifo: a blocked head holds every job behind it */
    uint32_t held_by;
    uint64_t shape; /* shape_key, once needed */
} cyc_t;

static bool is_starving(const cyc_t *c, const arb_job_t *j)
{
    return c->s->conf.starvation_ns > 0 && c->ctx->now_ns - j->submit_ns > c->s->conf.starvation_ns;
}

static int64_t grace_of(const arb_sched_t *s, const arb_job_t *j)
{
    return j->grace_s >= 0 ? (int64_t)j->grace_s * 1000000000LL : s->conf.grace_ns;
}

/* Place j, skipping the nodes fenced in mask; in a trial, remember it. */
static int place(cyc_t *c, arb_job_t *j, uint8_t mask)
{
    int rc;

    c->s->fence_on = mask != 0;
    c->s->fence_mask = mask;
    c->s->fence_self = j->id;
    rc = sched_bind_job(c->s, j, c->ctx);
    c->s->fence_on = false;
    c->s->fence_mask = 0;
    if (rc == 0 && c->target)
        c->placed[c->nplaced++] = j;
    return rc;
}

static bool never_fits(cyc_t *c, arb_job_t *j)
{
    if (!c->shape)
        c->shape = shape_key(c->s, c->ctx);
    return !sched_fits_idle(c->s, j, c->ctx, c->shape);
}

/* Try j behind a barrier: where it delays nobody ahead. */
static int place_behind(cyc_t *c, arb_job_t *j)
{
    int rc = -ENOSPC;

    if (c->held)
        return -ENOSPC;
    /* Ends before the reservation (time limit plus grace): on the
     * reservation's nodes too, but never on what a starving job or a
     * preemptor reserves (that has no end). */
    if (c->shadow >= 0 && j->time_limit_s > 0 &&
        c->ctx->now_ns + j->time_limit_s * 1000000000LL + grace_of(c->s, j) <= c->shadow)
        rc = place(c, j, SCHED_FENCE_HARD);
    if (rc < 0 && c->fenced) /* elsewhere than every reserved node */
        rc = place(c, j, SCHED_FENCE_HARD | SCHED_FENCE_BACKFILL);
    return rc;
}

/* What holds a job behind the barrier back, for its wait reason. */
static void behind_reason(cyc_t *c, arb_job_t *j)
{
    if (c->held) {
        j->wait = ARB_WAIT_ORDER;
        j->wait_for = c->held_by;
    } else if (c->hard_fenced) {
        j->wait = c->fence_starving ? ARB_WAIT_STARVING : ARB_WAIT_CLAIMED;
        j->wait_for = c->fence_for;
    } else {
        j->wait = ARB_WAIT_RESERVED;
        j->wait_for = c->shadow_for;
    }
}

static void note_owner(cyc_t *c, const arb_job_t *j)
{
    if (!c->fenced)
        c->owners_one = j->id;
    else if (c->owners_one != j->id)
        c->owners_one = UINT32_MAX; /* several */
}

static void fence_hard(cyc_t *c, const arb_job_t *j, bool starving)
{
    note_owner(c, j);
    if (!c->hard_fenced) {
        c->fence_for = j->id;
        c->fence_starving = starving;
    }
    c->fenced = c->hard_fenced = true;
}

/* Does held job j have tasks to start (a gang whose gangMin is below its
 * size, started with fewer than all)? */
static bool continues(const arb_job_t *j)
{
    return arb_job_partial_gang(j) && (j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING) &&
           j->nalloc < j->ntasks && !j->gang_closed && !j->evicting;
}

/* The domain task t of j must go into: that of a placed task of its group
 * when the group's topology is required (node, rack, block). */
static bool continue_domain(const arb_sched_t *s, const arb_job_t *j, int t, sched_dom_t *d)
{
    int gi, t0 = 0;
    const arb_tgroup_t *g = arb_job_task_group(j, t, &gi);

    for (int k = 0; k < gi; k++)
        t0 += j->groups[k].replicas;
    if (!g->topo.required || g->topo.level < ARB_TOPO_NODE)
        return false;
    for (int k = t0; k < t && k < j->nalloc; k++)
        if (j->alloc[k].node != ARB_NO_NODE) {
            const arb_node_t *n = &s->c->nodes[j->alloc[k].node];
            memset(d, 0, sizeof *d);
            d->level = g->topo.level;
            d->node = n->id;
            d->rack = n->rack;
            d->block = n->block;
            return true;
        }
    return false;
}

/* A started job's remaining tasks, in its place in the queue: as many as
 * fit now, one by one (they start as room frees: no gang, no preemption,
 * no barrier, and nowhere a job ahead holds). Returns how many started. */
static int continue_job(cyc_t *c, arb_job_t *j)
{
    arb_sched_t *s = c->s;
    int n = 0;

    if (c->held)
        return 0;
    s->fence_on = c->fenced;
    s->fence_mask = SCHED_FENCE_HARD | SCHED_FENCE_BACKFILL;
    s->fence_self = j->id;
    while (j->nalloc < j->ntasks) {
        sched_dom_t d;
        int t = j->nalloc;
        if (sched_place_task(s, j, t, continue_domain(s, j, t, &d) ? &d : NULL, c->ctx) < 0)
            break;
        sched_task_charge(s, j, t, +1);
        j->nalloc++;
        n++;
    }
    s->fence_on = false;
    s->fence_mask = 0;
    if (n && c->target) { /* a trial puts them back at the end */
        c->cont[c->ncont].j = j;
        c->cont[c->ncont++].n = n;
    }
    return n;
}

/* Preemptor j just chose victims; those this very cycle placed (nobody has
 * seen them: no assignment sent, nothing recorded) are put back into the
 * queue at once instead of being stopped, the way a trial un-places (state
 * PENDING directly: to the state layer they never left the queue, so no
 * requeue, no attempt, no event). They yield to j, as any victim does.
 * Instant mode: they were already released and marked PREEMPTED. Returns
 * how many went back; *left: whether j still has victims stopping. */
static int unplace_fresh(cyc_t *c, arb_job_t *j, bool *left)
{
    arb_sched_t *s = c->s;
    arb_job_t **v = c->target ? c->placed : s->placed;
    uint32_t n = c->target ? (uint32_t)c->nplaced : s->nplaced, k = 0;
    int back = 0;

    for (uint32_t i = 0; i < n; i++) {
        arb_job_t *o = v[i];
        bool fresh = o != j && o->preempted_by == j->id &&
                     ((o->evicting && o->state == ARB_JOB_PLACED) ||
                      (!s->conf.preempt_defer && o->state == ARB_JOB_PREEMPTED));
        if (!fresh) {
            v[k++] = o;
            continue;
        }
        if (o->state == ARB_JOB_PLACED) { /* deferred: it still holds its room */
            sched_queue_charge(s, o, -1);
            sched_unbind(s, o);
        }
        o->state = ARB_JOB_PENDING;
        o->evicting = false;
        o->shrink_to = 0;
        o->yield_to = j->id + 1;
        if (!c->target) { /* a trial records nothing of the others */
            o->wait = ARB_WAIT_CLAIMED;
            o->wait_for = j->id;
        }
        back++;
    }
    if (c->target)
        c->nplaced = (int)k;
    else
        s->nplaced = k;
    *left = false;
    for (uint32_t i = 0; i < s->njobs && !*left; i++) {
        const arb_job_t *o = s->jobs[i];
        *left = o != j && o->preempted_by == j->id && (o->evicting || o->shrink_to > 0);
    }
    return back;
}

/* One pending job's turn. Sets j->wait; returns true when it was placed. */
static bool turn(cyc_t *c, arb_job_t *j)
{
    arb_sched_t *s = c->s;
    /* fences raised only for j itself (the room its victims free) hold it
     * back from nothing */
    bool own = c->fenced && !c->held && c->shadow < 0 && c->owners_one == j->id;
    bool barrier = !own && (c->held || c->shadow >= 0 || c->fenced), waiting;
    int nv = 0;

    if (j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING) {
        int k = continue_job(c, j);
        c->st->continued += k > 0 ? k : 0;
        return false;
    }
    if (s->hold) { /* the caller's hold (dependencies): it waits, holding nobody back */
        arb_wait_t h = s->hold(s->hold_arg, j);
        if (h != ARB_WAIT_NONE) {
            j->wait = (uint8_t)h;
            j->wait_for = UINT32_MAX;
            return false;
        }
    }

    j->wait = ARB_WAIT_NONE;
    j->wait_for = UINT32_MAX;
    if (!sched_quota_admits(s, j, NULL, 0)) {
        j->wait = ARB_WAIT_QUOTA;
        return false;
    }
    if (barrier) {
        if (place_behind(c, j) == 0) {
            c->st->placed++;
            c->st->backfilled += c->shadow >= 0;
            return true;
        }
        if (never_fits(c, j)) {
            j->wait = ARB_WAIT_NEVER;
            return false;
        }
        behind_reason(c, j);
        if (is_starving(c, j) && !c->held) { /* it reserves what it could use, too */
            sched_fence_add(s, j, c->ctx, SCHED_FENCE_HARD);
            fence_hard(c, j, true);
        }
        if (fence_claim(s, j)) /* its room is its own */
            fence_hard(c, j, false);
        return false;
    }
    if (place(c, j, 0) == 0) {
        c->st->placed++;
        return true;
    }
    if (never_fits(c, j)) {
        j->wait = ARB_WAIT_NEVER;
        return false;
    }
    j->wait = ARB_WAIT_FIT;
    waiting = j->waiting && c->stopping;
    if (s->conf.preemption && !waiting) {
        if (s->conf.preempt_defer) { /* the controller: victims marked, then stopped */
            if (sched_preempt_for(s, j, c->ctx, false, &nv, NULL) == 0) {
                bool left;
                int back = unplace_fresh(c, j, &left);
                c->st->preempted += nv - back;
                c->st->placed -= back;
                waiting = true;
                if (back && !left && place(c, j, 0) == 0) { /* as if it had gone first */
                    c->st->placed++;
                    return true;
                }
            }
        } else if (c->target) { /* a trial of the simulator's instant preemption: ask only */
            if (sched_preempt_for(s, j, c->ctx, true, &nv, NULL) == 0)
                j->wait = ARB_WAIT_VICTIMS;
        } else if (sched_preempt_for(s, j, c->ctx, false, &nv, NULL) == 0) {
            bool left;
            int back = unplace_fresh(c, j, &left);
            j->state = ARB_JOB_PLACED;
            j->start_ns = c->ctx->now_ns;
            j->yield_to = 0;
            sched_queue_charge(s, j, +1);
            c->st->placed += 1 - back;
            c->st->preempted += nv - back;
            return true;
        }
    }
    if (waiting) {
        /* Its victims are stopping: the room they free is its own, and
         * nobody behind it is placed there (no livelock). */
        j->wait = ARB_WAIT_VICTIMS;
        if (fence_claim(s, j))
            fence_hard(c, j, false);
    }
    /* It waits. What it holds back, by the policy. */
    if (s->conf.backfill && c->shadow < 0) {
        c->shadow = sched_reservation(s, j, c->ctx);
        c->shadow_for = j->id;
        sched_fence_add(s, j, c->ctx, SCHED_FENCE_BACKFILL);
        note_owner(c, j);
        c->fenced = true;
    } else if (is_starving(c, j)) {
        sched_fence_add(s, j, c->ctx, SCHED_FENCE_HARD);
        fence_hard(c, j, true);
    } else if (s->conf.queue_policy == ARB_QP_FIFO && !s->conf.backfill) {
        c->held = true;
        c->held_by = j->id;
    }
    return false;
}

/* Put back what a trial placed, newest first, and every job's marks. */
static void undo(cyc_t *c)
{
    arb_sched_t *s = c->s;

    for (int i = c->nplaced - 1; i >= 0; i--) {
        arb_job_t *j = c->placed[i];
        sched_queue_charge(s, j, -1);
        sched_unbind(s, j);
        j->state = ARB_JOB_PENDING;
    }
    c->nplaced = 0;
    for (int i = c->ncont - 1; i >= 0; i--) {
        arb_job_t *j = c->cont[i].j;
        for (int k = 0; k < c->cont[i].n; k++) {
            sched_task_charge(s, j, j->nalloc - 1, -1);
            sched_release_task(s, j, --j->nalloc);
        }
    }
    c->ncont = 0;
    for (uint32_t i = 0; c->marks && i < s->njobs; i++) {
        arb_job_t *j = s->jobs[i];
        const marks_t *m = &c->marks[i];
        j->waiting = m->waiting;
        j->evicting = m->evicting;
        j->reclaimed = m->reclaimed;
        j->shrink_to = m->shrink_to;
        j->preempted_by = m->preempted_by;
        j->yield_to = m->yield_to;
        sched_claim_drop(j);
        j->claim = m->claim; /* the copy goes back */
        j->nclaim = m->nclaim;
    }
}

/* ---- settled jobs --------------------------------------------------------------------- */

/* Incremental cycles. A pending job whose turn ended without a placement
 * and without touching anything (it does not fit now, or never, or its
 * quota says no, or it is held by order) is settled: while nothing but
 * submissions changes (sched_changed, the cluster's version), its next
 * turn would end the same way and change nothing again, because
 * placements only take room and quota. So a cycle after one that left its
 * settled marks valid tries only the unsettled jobs and the new ones
 * (s->todo), in queue order; the outcome is the full cycle's (the skipped
 * turns would change nothing, and the order of the others is the same; with
 * a profile's random ties, a skipped gang's failed attempt no longer draws
 * from the randomness, so a later tie may fall on another, equal node).
 * Not for what depends on the clock (a backfill reservation, starvation),
 * nor with preemption on (a job that preempts raises a barrier in the
 * middle of the order, which changes the wait reasons of settled jobs
 * behind it, and each placement makes new victims), nor for a job that
 * raises a barrier (the fifo head) or has marks; and a cycle that
 * continues a started gang, shrinks or grows leaves no valid marks: the
 * next is full. */
static bool settle_conf(const arb_sched_t *s)
{
    return !s->conf.backfill && s->conf.starvation_ns <= 0 && !s->conf.preemption;
}

static bool settled(const cyc_t *c, const arb_job_t *j)
{
    return j->state == ARB_JOB_PENDING &&
           (j->wait == ARB_WAIT_FIT || j->wait == ARB_WAIT_NEVER || j->wait == ARB_WAIT_QUOTA ||
            j->wait == ARB_WAIT_ORDER) &&
           !j->nclaim && !j->waiting && !j->yield_to && !j->evicting && j->shrink_to == 0 &&
           !(c->held && c->held_by == j->id);
}

/* After a real cycle's turns: the next todo (the unsettled pending jobs)
 * and the settled count. -ENOMEM leaves no valid marks. */
static void settle(cyc_t *c, arb_job_t **pend, int np, bool inc, bool short_list)
{
    arb_sched_t *s = c->s;
    uint32_t n = inc ? s->nsettled : 0;

    s->ntodo = 0;
    s->settled_ok = settle_conf(s) && !c->stopping && !short_list;
    for (int i = 0; i < np && s->settled_ok; i++) {
        arb_job_t *j = pend[i];
        if (j->state != ARB_JOB_PENDING)
            continue; /* placed, or a started gang's turn */
        if (settled(c, j))
            n++;
        else if (sched_list_push(&s->todo, &s->ntodo, &s->captodo, j) < 0)
            s->settled_ok = false;
    }
    s->nsettled = n;
}

static int run(cyc_t *c)
{
    arb_sched_t *s = c->s;
    /* what this cycle walks: every live job, or (incremental) todo */
    bool inc = !c->target && settle_conf(s) && s->settled_ok && s->settled_gen == s->gen &&
               s->settled_ver == s->c->version;
    arb_job_t **src = inc ? s->todo : s->jobs;
    uint32_t nsrc = inc ? s->ntodo : s->njobs;
    arb_job_t **pend = malloc((nsrc + 1) * sizeof *pend);
    int np = 0, rc = 0;
    bool short_list = false; /* s->placed could not hold a placement */

    if (!pend || (c->target && (!(c->placed = malloc((s->njobs + 1) * sizeof *c->placed)) ||
                                !(c->marks = malloc((s->njobs + 1) * sizeof *c->marks)) ||
                                !(c->cont = malloc((s->njobs + 1) * sizeof *c->cont))))) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = fence_reset(s)) < 0)
        goto out;
    c->shadow = -1;
    c->fence_for = UINT32_MAX;
    if (!c->target)
        s->nplaced = 0;
    for (uint32_t i = 0; i < nsrc; i++) {
        arb_job_t *j = src[i];
        c->stopping |= j->evicting || j->shrink_to > 0;
        if (c->marks) {
            c->marks[i] = (marks_t){j->waiting,      j->evicting, j->reclaimed, j->shrink_to,
                                    j->preempted_by, j->yield_to, NULL,         0};
            if (j->nclaim && (c->marks[i].claim = malloc((size_t)j->nclaim * sizeof(uint32_t)))) {
                memcpy(c->marks[i].claim, j->claim, (size_t)j->nclaim * sizeof(uint32_t));
                c->marks[i].nclaim = j->nclaim;
            }
        }
    }
    for (uint32_t i = 0; i < nsrc; i++) {
        arb_job_t *j = src[i];
        if (!c->stopping) /* every victim released: a preemptor may choose again */
            j->waiting = false;
        if (!c->target && j->state == ARB_JOB_PREEMPTED)
            arb_job_transition(j, ARB_JOB_PENDING, NULL);
        if (j->state == ARB_JOB_PENDING || j->state == ARB_JOB_PREEMPTED || continues(j))
            pend[np++] = j;
    }
    sched_order(s, pend, np, c->ctx);
    /* A preemptor owns the room its victims free from the start of the
     * cycle, until it is placed or has had its turn with that room free: no
     * job, ahead of it or behind, goes there (invariant 1: else the room is
     * taken and it preempts again). It holds the quota it needs as long
     * (queue.c, "Holds"). */
    sched_quota_hold_reset(s);
    for (int i = 0; i < np; i++)
        if (pend[i]->nclaim && pend[i]->state != ARB_JOB_PLACED &&
            pend[i]->state != ARB_JOB_RUNNING) {
            (void)sched_quota_hold_add(s, pend[i]); /* -ENOMEM: it holds no quota */
            if (fence_claim(s, pend[i]))
                fence_hard(c, pend[i], false);
        }
    for (int i = 0; i < np; i++) {
        arb_job_t *j = pend[i];
        uint8_t w = j->wait;
        uint32_t wf = j->wait_for;
        bool placed = turn(c, j);
        if (placed && !c->target && sched_list_push(&s->placed, &s->nplaced, &s->capplaced, j) < 0)
            short_list = true;
        if (placed && c->hard_fenced) /* what it reserved is no longer held for it */
            for (uint32_t n = 0; n < s->nfence; n++)
                if (s->fence_owner[n] == j->id) {
                    s->fence[n] &= (uint8_t)~SCHED_FENCE_HARD;
                    s->fence_owner[n] = UINT32_MAX;
                }
        if (!placed && !c->target && j->nclaim && !j->waiting && j->state != ARB_JOB_PLACED &&
            j->state != ARB_JOB_RUNNING)
            sched_claim_drop(j); /* it had its turn with the room free */
        if (j != c->target) {
            if (c->target) { /* a trial records nothing of the others */
                j->wait = w;
                j->wait_for = wf;
            }
            continue;
        }
        c->out->placed = placed;
        c->out->wait = (arb_wait_t)j->wait;
        c->out->wait_for = j->wait_for;
        c->out->shadow_ns = c->shadow;
        c->out->grace_ns = grace_of(s, j);
        c->out->reserved = !placed && c->shadow >= 0 && c->shadow_for == j->id;
        j->wait = w;
        j->wait_for = wf;
        if (!placed)
            break;
        /* Placed: the rest of the cycle may still take it back (a reclaim
         * or a preemption by a job behind it), so the trial goes on. */
    }
    if (c->target && c->out->placed &&
        (c->target->evicting || c->target->state == ARB_JOB_PENDING)) { /* taken back */
        c->out->placed = false;
        c->out->wait = ARB_WAIT_TAKEN;
        c->out->wait_for = c->target->preempted_by;
        c->out->reclaim = c->target->reclaimed;
    }
    if (c->target)
        undo(c);
    else
        settle(c, pend, np, inc, short_list);
out:
    s->fence_on = false;
    free(pend);
    free(c->placed);
    free(c->marks);
    free(c->cont);
    return rc;
}

void arb_sched_set_hold(arb_sched_t *s, arb_hold_fn fn, void *arg)
{
    s->hold = fn;
    s->hold_arg = arg;
}

int arb_sched_cycle(arb_sched_t *s, const arb_ctx_t *ctx, arb_cycle_stats_t *st)
{
    arb_cycle_stats_t z = {0};
    cyc_t c = {.s = s, .ctx = ctx, .st = st ? st : &z};
    int rc;

    memset(c.st, 0, sizeof *c.st);
    s->shrunk = 0;
    if ((rc = run(&c)) < 0)
        return rc;
    c.st->shrunk = s->shrunk;
    c.st->grown = sched_elastic_grow(s, ctx); /* after every pending job had its turn */
    if (c.st->preempted || c.st->shrunk || c.st->grown || c.st->continued ||
        (c.st->placed && s->conf.preemption)) /* new victims, room, marks */
        s->settled_ok = false;
    s->settled_gen = s->gen;
    s->settled_ver = s->c->version;
    if (s->settled_ok) /* every pending job is settled or in todo */
        c.st->pending = (int)(s->nsettled + s->ntodo);
    else
        for (uint32_t i = 0; i < s->njobs; i++)
            c.st->pending += s->jobs[i]->state == ARB_JOB_PENDING;
    return 0;
}

uint32_t arb_sched_placed(const arb_sched_t *s, arb_job_t *const **v)
{
    *v = s->placed;
    return s->nplaced;
}

int sched_cycle_try(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, sched_outcome_t *out)
{
    arb_cycle_stats_t z;
    arb_rng_t rng;
    arb_ctx_t c2 = ctx ? *ctx : (arb_ctx_t){0};
    cyc_t c = {.s = s, .ctx = &c2, .st = &z, .target = j, .out = out};

    memset(out, 0, sizeof *out);
    out->wait = ARB_WAIT_NONE;
    out->wait_for = UINT32_MAX;
    out->shadow_ns = -1;
    if (c2.rng) {
        rng = *c2.rng;
        c2.rng = &rng;
    }
    return run(&c);
}
