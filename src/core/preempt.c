/*
 * preempt.c: make room for a job by evicting others, and only when that
 * really makes it fit.
 *
 * Who may be evicted for job J: a placed or running job V that is
 * preemptible and either has a lower priority than J, or belongs to a queue
 * of J's cohort that is borrowing (above its nominal quota) while J's queue
 * stays within its own nominal after J starts (quota reclaim). Quota is
 * counted by resource (queue.c: sched_quota_within_after, _borrows_in):
 * J stays within its nominal in every resource it asks for (what its
 * queue holds for its other waiting preemptors counted), and V holds
 * some of a resource its queue borrows and J asks for; a V that holds
 * none of what its queue borrows gives no quota back by going.
 *
 * The cohort rule (Kueue's: reclaimWithinCohort, and borrowWithinCohort
 * for a lower priority; only a ClusterQueue that borrows is a target): V
 * of another queue with a quota of J's cohort is a victim only while its
 * queue borrows, in a resource V holds and J asks for, at V's turn (with
 * the victims before it in cheapest-first order gone: drop_unborrowed,
 * pick_greedy); whatever the priorities, a queue within its nominal loses
 * nothing to its cohort. So priority preemption and reclaim cannot undo
 * each other on one pair: a V evicted by priority from a borrowing queue
 * comes back to a queue that still borrows, and may not reclaim; a J
 * placed within its nominal is no reclaim victim once its queue-mates
 * that borrow are gone (the simulation test's seed 700367: j65, evicted
 * with them, evicted its reclaimer again by priority, seven times a
 * minute). A J whose queue would borrow evicts a job by priority once
 * (V's preempted_by): the lender may take its borrowed quota back while V
 * stops, J then loses its claim and V goes back into the room; J does not
 * evict V again for that room while it would borrow. Gangs are evicted
 * whole: a victim loses all of its tasks.
 *
 * How the set is chosen, for a job of one task (most jobs): node by node,
 * like kube-scheduler. On each node that holds candidates, evict all of
 * them; if the task then fits there, give back ("reprieve") every victim it
 * can do without, the most valuable first (highest priority; then the
 * smaller ones in one pass, the larger ones in another, keeping the better
 * result). The node whose remaining set is best wins: lowest highest-victim
 * priority (reclaimable borrowers count as lowest, by their priority among
 * themselves), then fewest victims,
 * then fewest GPUs evicted. So one 8-GPU job is evicted rather than eight
 * 1-GPU jobs of the same priority, and a 1-GPU job displaces a 1-GPU job,
 * not an 8-GPU one. Each check is one node's filters, O(1) in the cluster.
 *
 * For a job of several tasks (gangs), whose fit is a whole placement:
 * evict candidates one at a time, cheapest first (reclaimable borrowers,
 * then lowest priority, then most recently started, then smallest), until
 * the job fits; then reprieve every victim, last evicted first, whose return
 * still lets it fit. What remains is minimal: no single victim can be spared.
 *
 * Elastic jobs (elastic.c): each task above an elastic job's min is a victim
 * of its own, removable one by one (highest rank first), and these are the
 * cheapest victims of all, before any job is evicted whole; the min is
 * then one more victim, a gang. Because removal must keep the job's tasks
 * a prefix, an extra task is evicted only when it is the job's last and
 * given back only right above the job's remaining ones. With extras among
 * the candidates a one-task job goes node by node counting those tails
 * (pick_per_node_tails); a job of several tasks takes the greedy path.
 *
 * Deferred mode (conf.preempt_defer, the controller): the set is chosen the
 * same way, then everything is put back and the victims are only marked
 * (j->evicting, j->shrink_to); the caller stops their processes and
 * releases them, and the preemptor, marked waiting, places in a later
 * cycle. Marked jobs are no candidates, and a waiting job picks no new
 * victims until every marked one is released; a job that would fit once
 * the marked jobs are gone waits for them instead of picking victims of
 * its own (room_being_freed).
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

typedef struct victim {
    arb_job_t *j;
    int task;    /* -1: the job (what it holds of its first `nalloc` tasks); else one
                    elastic task above the job's min */
    int reclaim; /* 1: evicted to reclaim quota */
    int nalloc;  /* its allocations, saved for a restore */
    arb_task_alloc_t *saved;
    int64_t gpu; /* GPU milli it holds */
    bool evicted;
    bool cohort;    /* of another queue with a quota of the preemptor's cohort */
    arb_queue_t *q; /* its queue */
} victim_t;

static int cmp_victim(const void *a, const void *b)
{
    const victim_t *x = a, *y = b;
    if (x->reclaim != y->reclaim)
        return y->reclaim - x->reclaim;
    if ((x->task >= 0) != (y->task >= 0)) /* elastic extras are the cheapest */
        return x->task >= 0 ? -1 : 1;
    if (x->j == y->j)
        return x->task > y->task ? -1 : x->task < y->task;
    if (x->j->priority != y->j->priority)
        return x->j->priority < y->j->priority ? -1 : 1;
    if (x->j->start_ns != y->j->start_ns)
        return x->j->start_ns > y->j->start_ns ? -1 : 1;
    if (x->j->ntasks != y->j->ntasks)
        return x->j->ntasks < y->j->ntasks ? -1 : 1;
    return x->j->seq < y->j->seq ? -1 : 1;
}

static void evict(arb_sched_t *s, victim_t *v)
{
    if (v->task >= 0) {
        if (v->j->nalloc != v->task + 1)
            return; /* not the job's last task: cannot happen in eviction order */
        sched_task_charge(s, v->j, v->task, -1);
        sched_release_task(s, v->j, v->task);
        v->j->nalloc--;
        v->evicted = true;
        return;
    }
    sched_queue_charge(s, v->j, -1);
    sched_unbind(s, v->j);
    v->evicted = true;
}

/* Put v's tasks back exactly where they were; -EBUSY when an elastic
 * extra would not sit right above the job's remaining tasks. */
static int restore(arb_sched_t *s, victim_t *v)
{
    arb_job_t *j = v->j;
    if (v->task >= 0) {
        if (j->nalloc != v->task)
            return -EBUSY;
        sched_restore_task(s, j, v->task, &v->saved[0]);
        j->nalloc++;
        sched_task_charge(s, j, v->task, +1);
        v->evicted = false;
        return 0;
    }
    if (j->nalloc != 0)
        return -EBUSY;
    for (int t = 0; t < v->nalloc; t++)
        sched_restore_task(s, j, t, &v->saved[t]);
    j->nalloc = v->nalloc;
    sched_queue_charge(s, j, +1);
    v->evicted = false;
    return 0;
}

/* Does j fit now? Trial placement, undone before returning. */
static bool fits(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    if (sched_place_job(s, j, ctx) < 0)
        return false;
    sched_unbind(s, j);
    return true;
}

/* Does the one task of j fit on node n now? Its filters and a GPU pick. */
static bool fits_on(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, const arb_node_t *n)
{
    arb_pctx_t pc = {.sched = s, .cluster = s->c, .ctx = ctx, .job = j, .group = &j->groups[0]};
    arb_pick_t pk;
    return sched_filter_node(&pc, n) == ARB_R_OK && sched_pick_bestfit(&pc, n, -1, &pk) == 0;
}

/* Deferred mode: would j fit once the jobs already marked to stop (for
 * other preemptors, of this cycle or an earlier one) are gone? Then j
 * waits for that room and takes no victims of its own: two preemptors in
 * one cycle never evict twice for what one eviction frees. Nothing changes. */
static bool room_being_freed(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx)
{
    victim_t *m;
    int nm = 0, n = 0;
    bool ok = false;

    for (uint32_t i = 0; i < s->njobs; i++)
        n += s->jobs[i]->evicting && s->jobs[i]->nalloc > 0 &&
             (s->jobs[i]->state == ARB_JOB_PLACED || s->jobs[i]->state == ARB_JOB_RUNNING);
    if (n == 0 || !(m = calloc((size_t)n, sizeof *m)))
        return false;
    for (uint32_t i = 0; i < s->njobs && nm < n; i++) {
        arb_job_t *o = s->jobs[i];
        if (!o->evicting || o->nalloc == 0 ||
            (o->state != ARB_JOB_PLACED && o->state != ARB_JOB_RUNNING))
            continue;
        m[nm].j = o;
        m[nm].task = -1;
        m[nm].nalloc = o->nalloc;
        m[nm].saved = malloc((size_t)o->nalloc * sizeof *m[nm].saved);
        if (!m[nm].saved)
            break;
        memcpy(m[nm].saved, o->alloc, (size_t)o->nalloc * sizeof *o->alloc);
        evict(s, &m[nm]);
        nm++;
    }
    ok = nm == n && fits(s, j, ctx);
    for (int i = nm - 1; i >= 0; i--) {
        restore(s, &m[i]);
        free(m[i].saved);
    }
    free(m);
    return ok;
}

/* What victim unit x holds of its queue's quota: one task's request (an
 * elastic extra), or its job's (arb_job_total: an elastic job's min). */
static void unit_held(const victim_t *x, arb_res_t *out)
{
    if (x->task >= 0)
        *out = arb_job_task_group(x->j, x->task, NULL)->req;
    else
        arb_job_total(x->j, out);
}

/* Does x's queue borrow at x's turn, in a resource the preemptor needs
 * and x holds? Its use now plus `plus` (what the evicted victims at x's
 * turn or after gave back) is its use with only the victims before x gone. */
static bool borrows_at_turn(const victim_t *x, const arb_res_t *plus, const arb_res_t *need)
{
    arb_res_t held;
    unit_held(x, &held);
    return sched_quota_borrows_in(x->q, plus, &held, need);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* The cohort rule on a set of evicted victims (units idx[0..k), any
 * order): taken in cheapest-first order (v's), a victim of another queue
 * of the cohort goes only while its queue still borrows (borrows_at_turn),
 * as in Kueue, which checks each candidate's ClusterQueue is still
 * borrowing with the candidates before it removed. Those that do not stay
 * (restored, last first). Giving a victim back only raises the use the
 * later ones see, so a set that passes keeps passing as victims are
 * reprieved. How many were put back; -1: one that must stay could not be
 * (an elastic extra not above its job's remaining tasks, or no memory):
 * the set is no good. */
static int drop_unborrowed(arb_sched_t *s, victim_t *v, const int *idx, int k,
                           const arb_res_t *need)
{
    int *o, nd = 0, nc = 0;
    bool *drop, ok = true;

    for (int a = 0; a < k; a++)
        nc += v[idx[a]].cohort;
    if (nc == 0)
        return 0; /* the common case: no quotas in play */
    o = malloc((size_t)k * sizeof *o);
    drop = calloc((size_t)k, sizeof *drop);
    if (!o || !drop) {
        free(o);
        free(drop);
        return -1;
    }
    memcpy(o, idx, (size_t)k * sizeof *o);
    qsort(o, (size_t)k, sizeof *o, cmp_int);
    for (int a = 0; a < k; a++) {
        const victim_t *x = &v[o[a]];
        arb_res_t plus = {0};
        if (!x->evicted || !x->cohort)
            continue;
        for (int b = 0; b < k; b++) { /* the later ones evicted; the earlier ones staying */
            const victim_t *y = &v[o[b]];
            arb_res_t held;
            if (y->q != x->q || !y->evicted || (b < a && !drop[b]))
                continue;
            unit_held(y, &held);
            arb_res_add(&plus, &held);
        }
        drop[a] = !borrows_at_turn(x, &plus, need);
        nd += drop[a];
    }
    for (int a = k - 1; nd > 0 && a >= 0; a--)
        if (drop[a] && restore(s, &v[o[a]]) < 0)
            ok = false;
    free(o);
    free(drop);
    return ok ? nd : -1;
}

/* ---- several tasks: greedy eviction, then reprieve --------------------- */

/* Leaves exactly the chosen victims evicted. 0 or -ENOSPC (none evicted).
 * A victim of another queue of the cohort is passed over when its queue
 * borrows no more at its turn (the cohort rule, drop_unborrowed). */
static int pick_greedy(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, victim_t *v, int nv,
                       const arb_res_t *need)
{
    int last = -1;

    for (int i = 0; i < nv; i++) {
        if (v[i].cohort && !borrows_at_turn(&v[i], NULL, need))
            continue;
        evict(s, &v[i]);
        if (fits(s, j, ctx)) {
            last = i;
            break;
        }
    }
    if (last < 0)
        return -ENOSPC; /* even evicting every candidate does not help */
    for (int i = last; i >= 0; i--) {
        if (!v[i].evicted || restore(s, &v[i]) < 0)
            continue;
        if (!fits(s, j, ctx))
            evict(s, &v[i]);
    }
    return 0;
}

/* ---- one task: node by node ----------------------------------------------- */

typedef struct set_key {
    int64_t rank; /* highest victim rank (rank_of) */
    int count;
    int64_t gpu;
} set_key_t;

/* A victim's cost: its priority; a reclaim's below every priority, and
 * among reclaims by priority (the lower-priority borrower goes first, as
 * in Kueue's candidate order). */
static int64_t rank_of(const victim_t *v)
{
    return v->reclaim ? INT64_MIN + ((int64_t)v->j->priority - INT32_MIN) : v->j->priority;
}

static bool key_less(const set_key_t *a, const set_key_t *b)
{
    if (a->rank != b->rank)
        return a->rank < b->rank;
    if (a->count != b->count)
        return a->count < b->count;
    return a->gpu < b->gpu;
}

/* Reprieve order: most valuable first; `big_first` breaks ties by size. */
typedef struct reprieve_ctx {
    const victim_t *v;
    bool big_first;
} reprieve_ctx_t;

static int cmp_reprieve(const void *a, const void *b, void *arg)
{
    const reprieve_ctx_t *rc = arg;
    const victim_t *x = &rc->v[*(const int *)a], *y = &rc->v[*(const int *)b];
    int64_t rx = rank_of(x), ry = rank_of(y);
    if (rx != ry)
        return rx > ry ? -1 : 1;
    if (x->gpu != y->gpu)
        return (x->gpu < y->gpu) != rc->big_first ? -1 : 1;
    /* then the reverse of eviction order: older, larger, earlier first */
    return cmp_victim(y, x);
}

typedef struct pair {
    uint32_t node;
    int victim;
} pair_t;

static int cmp_pair(const void *a, const void *b)
{
    const pair_t *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->victim < y->victim ? -1 : x->victim > y->victim;
}

/* Leaves exactly the chosen victims evicted. 0, -ENOSPC or -ENOMEM. */
static int pick_per_node(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, victim_t *v, int nv,
                         const arb_res_t *need)
{
    int np = 0, rc = -ENOSPC, nbest = 0, *best = NULL, *ord = NULL;
    set_key_t bestkey = {0};
    pair_t *p;
    size_t total = 0;

    for (int i = 0; i < nv; i++)
        total += (size_t)v[i].nalloc;
    p = malloc((total + 1) * sizeof *p);
    best = malloc((size_t)(nv + 1) * sizeof *best);
    ord = malloc((size_t)(nv + 1) * sizeof *ord);
    if (!p || !best || !ord) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < nv; i++)
        for (int t = 0; t < v[i].nalloc; t++)
            if (v[i].saved[t].node != ARB_NO_NODE) /* an ended task's slot holds nothing */
                p[np++] = (pair_t){v[i].saved[t].node, i};
    qsort(p, (size_t)np, sizeof *p, cmp_pair);

    for (int a = 0, b; a < np; a = b) {
        const arb_node_t *n = &s->c->nodes[p[a].node];
        int k = 0;
        for (b = a; b < np && p[b].node == p[a].node; b++)
            if (b == a || p[b].victim != p[b - 1].victim)
                ord[k++] = p[b].victim;
        if (n->state != ARB_NODE_READY)
            continue;
        for (int i = 0; i < k; i++)
            evict(s, &v[ord[i]]);
        int nd = drop_unborrowed(s, v, ord, k, need), kept = 0;
        for (int i = 0; nd != 0 && i < k; i++) /* the ones the cohort rule kept */
            if (v[ord[i]].evicted)
                ord[kept++] = ord[i];
        k = nd != 0 ? kept : k;
        if (nd < 0 || k == 0 || !fits_on(s, j, ctx, n)) {
            for (int i = k - 1; i >= 0; i--)
                restore(s, &v[ord[i]]);
            continue;
        }
        for (int pass = 0; pass < 2; pass++) {
            set_key_t key = {INT64_MIN, 0, 0};
            reprieve_ctx_t rctx = {v, pass == 1};
            qsort_r(ord, (size_t)k, sizeof *ord, cmp_reprieve, &rctx);
            for (int i = 0; i < k; i++) {
                if (restore(s, &v[ord[i]]) < 0)
                    continue;
                if (!fits_on(s, j, ctx, n))
                    evict(s, &v[ord[i]]);
            }
            for (int i = 0; i < k; i++)
                if (v[ord[i]].evicted) {
                    key.rank = rank_of(&v[ord[i]]) > key.rank ? rank_of(&v[ord[i]]) : key.rank;
                    key.count++;
                    key.gpu += v[ord[i]].gpu;
                }
            if (rc < 0 || key_less(&key, &bestkey)) {
                rc = 0;
                bestkey = key;
                nbest = 0;
                for (int i = 0; i < k; i++)
                    if (v[ord[i]].evicted)
                        best[nbest++] = ord[i];
            }
            for (int i = 0; i < k; i++) /* back to all evicted for the next pass */
                if (!v[ord[i]].evicted)
                    evict(s, &v[ord[i]]);
        }
        for (int i = k - 1; i >= 0; i--)
            restore(s, &v[ord[i]]);
    }
    for (int i = 0; rc == 0 && i < nbest; i++)
        evict(s, &v[best[i]]);
out:
    free(p);
    free(best);
    free(ord);
    return rc;
}

/* ---- one task, elastic extras among the victims: node by node, with tails ----
 * An extra can go only with every extra of its job above it (ranks stay
 * 0..n-1), and a job whole only with all its extras. For each node: evict
 * the units that hold something there, cheapest first, each with what must
 * go before it, until the task fits on the node; reprieve in reverse; cost
 * the set: jobs evicted whole, then the highest victim priority, then tasks
 * taken, then GPUs. The cheapest node's set wins; the scan stops early at a
 * set no node can beat on the first three (no whole job, the lowest
 * priority of any candidate, and no more tasks than the bound every node
 * needs: its GPUs short of the task over the largest task among the
 * candidates), so among such sets the first node's wins. Greedy over the whole
 * cluster (pick_greedy) instead takes the last ranks of the cheapest jobs
 * wherever they run, and often more tasks than the node needs. */
typedef struct tail_key {
    int wholes;
    int64_t rank;
    int tasks;
    int64_t gpu;
} tail_key_t;

static bool tail_less(const tail_key_t *a, const tail_key_t *b)
{
    if (a->wholes != b->wholes)
        return a->wholes < b->wholes;
    if (a->rank != b->rank)
        return a->rank < b->rank;
    if (a->tasks != b->tasks)
        return a->tasks < b->tasks;
    return a->gpu < b->gpu;
}

/* Evict unit u and what must go before it (first[u]..: its job's extras
 * above it, or all of them for a whole job), appending to ev. */
static void evict_closure(arb_sched_t *s, victim_t *v, const int *first, const int *last, int u,
                          int *ev, int *nev)
{
    int hi = v[u].task >= 0 ? u : last[u];
    for (int x = first[u]; x >= 0 && x <= hi; x++)
        if (!v[x].evicted && x != u) {
            evict(s, &v[x]);
            if (v[x].evicted)
                ev[(*nev)++] = x;
        }
    if (!v[u].evicted) {
        evict(s, &v[u]);
        if (v[u].evicted)
            ev[(*nev)++] = u;
    }
}

/* Extras blocks by job, to find a whole job's block in O(log n). */
typedef struct blk {
    const arb_job_t *j;
    int first, last;
} blk_t;

static int cmp_blk(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const blk_t *)a)->j, y = (uintptr_t)((const blk_t *)b)->j;
    return x < y ? -1 : x > y;
}

/* A node's run of pairs, and how promising it looks: fewer tasks of whole
 * jobs (their mins) first, then fewer units. */
typedef struct nrun {
    int a, b;
    int64_t score;
} nrun_t;

static int cmp_nrun(const void *x, const void *y)
{
    const nrun_t *p = x, *q = y;
    if (p->score != q->score)
        return p->score < q->score ? -1 : 1;
    return p->a < q->a ? -1 : p->a > q->a;
}

static int pick_per_node_tails(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, victim_t *v,
                               int nv, const arb_res_t *total_need)
{
    int np = 0, rc = -ENOSPC, nbest = 0;
    int *first = malloc((size_t)(nv + 1) * sizeof *first);
    int *last = malloc((size_t)(nv + 1) * sizeof *last);
    int *ev = malloc((size_t)(nv + 1) * sizeof *ev);
    int *best = malloc((size_t)(nv + 1) * sizeof *best);
    int *ord = malloc((size_t)(nv + 1) * sizeof *ord);
    blk_t *bl = malloc((size_t)(nv + 1) * sizeof *bl);
    int nbl = 0;
    tail_key_t bestkey = {0};
    size_t total = 0;
    pair_t *p;

    for (int i = 0; i < nv; i++)
        total += (size_t)v[i].nalloc;
    p = malloc((total + 1) * sizeof *p);
    if (!first || !last || !ev || !best || !ord || !p || !bl) {
        rc = -ENOMEM;
        goto out;
    }
    /* A job's extras are adjacent in v, highest rank first (cmp_victim). */
    for (int i = 0; i < nv; i++) {
        first[i] = last[i] = -1;
        if (v[i].task >= 0)
            first[i] = i > 0 && v[i - 1].j == v[i].j && v[i - 1].task >= 0 ? first[i - 1] : i;
    }
    for (int i = 0; i < nv; i++)
        if (v[i].task >= 0 && first[i] == i)
            bl[nbl++] = (blk_t){v[i].j, i, i};
        else if (v[i].task >= 0)
            bl[nbl - 1].last = i;
    qsort(bl, (size_t)nbl, sizeof *bl, cmp_blk);
    for (int i = 0; i < nv; i++)
        if (v[i].task < 0) {
            blk_t key = {v[i].j, 0, 0}, *f = bsearch(&key, bl, (size_t)nbl, sizeof *bl, cmp_blk);
            if (f) {
                first[i] = f->first;
                last[i] = f->last;
            }
        }
    int64_t minrank = INT64_MAX, maxtask = 1, need = j->groups[0].req.gpu_milli, lb = INT64_MAX;
    for (int i = 0; i < nv; i++) {
        minrank = rank_of(&v[i]) < minrank ? rank_of(&v[i]) : minrank;
        for (int t = 0; t < v[i].nalloc; t++) {
            int64_t g =
                (int64_t)__builtin_popcount(v[i].saved[t].gpu_mask) * v[i].saved[t].gpu_milli;
            maxtask = g > maxtask ? g : maxtask;
            if (v[i].saved[t].node != ARB_NO_NODE) /* an ended task's slot holds nothing */
                p[np++] = (pair_t){v[i].saved[t].node, i};
        }
    }
    qsort(p, (size_t)np, sizeof *p, cmp_pair);
    nrun_t *runs = malloc((size_t)(np + 1) * sizeof *runs);
    int nruns = 0;
    if (!runs) {
        rc = -ENOMEM;
        goto out;
    }
    for (int a = 0, b; a < np; a = b) {
        int64_t whole = 0, units = 0;
        for (b = a; b < np && p[b].node == p[a].node; b++) {
            whole += v[p[b].victim].task < 0;
            units += b == a || p[b].victim != p[b - 1].victim;
        }
        runs[nruns++] = (nrun_t){a, b, whole * 1000000 + units};
    }
    qsort(runs, (size_t)nruns, sizeof *runs, cmp_nrun); /* promising nodes first */
    for (uint32_t i = 0; i < s->c->nnodes; i++) {       /* tasks any node must give up, at least */
        int64_t short_by = need - (s->c->nodes[i].cap.gpu_milli - s->c->nodes[i].used.gpu_milli);
        int64_t k = short_by > 0 ? (short_by + maxtask - 1) / maxtask : 0;
        lb = k < lb ? k : lb;
    }

    for (int r = 0; r < nruns; r++) {
        int a = runs[r].a, b = runs[r].b;
        const arb_node_t *n = &s->c->nodes[p[a].node];
        int k = 0, nev = 0;
        bool fit = false;
        if (rc == 0 && bestkey.wholes == 0 && bestkey.rank == minrank && bestkey.tasks <= lb)
            break; /* nothing can beat it on wholes, priority or tasks */
        for (int x = a; x < b; x++)
            if (x == a || p[x].victim != p[x - 1].victim)
                ord[k++] = p[x].victim;
        if (n->state != ARB_NODE_READY)
            continue;
        for (int i = 0; i < k && !fit; i++) {
            evict_closure(s, v, first, last, ord[i], ev, &nev);
            fit = fits_on(s, j, ctx, n);
        }
        int nd = fit ? drop_unborrowed(s, v, ev, nev, total_need) : 0;
        if (nd != 0) /* without those the cohort rule kept */
            fit = nd > 0 && fits_on(s, j, ctx, n);
        if (fit) {
            tail_key_t key = {0, INT64_MIN, 0, 0};
            for (int i = nev - 1; i >= 0; i--) {
                if (!v[ev[i]].evicted || restore(s, &v[ev[i]]) < 0)
                    continue;
                if (!fits_on(s, j, ctx, n))
                    evict(s, &v[ev[i]]);
            }
            for (int i = 0; i < nev; i++)
                if (v[ev[i]].evicted) {
                    key.wholes += v[ev[i]].task < 0;
                    key.rank = rank_of(&v[ev[i]]) > key.rank ? rank_of(&v[ev[i]]) : key.rank;
                    key.tasks += v[ev[i]].nalloc;
                    key.gpu += v[ev[i]].gpu;
                }
            if (rc < 0 || tail_less(&key, &bestkey)) {
                rc = 0;
                bestkey = key;
                nbest = 0;
                for (int i = 0; i < nev; i++)
                    if (v[ev[i]].evicted)
                        best[nbest++] = ev[i];
            }
        }
        for (int i = nev - 1; i >= 0; i--) /* everything back for the next node */
            if (v[ev[i]].evicted)
                restore(s, &v[ev[i]]);
    }
    free(runs);
    for (int i = 0; rc == 0 && i < nbest; i++)
        evict(s, &v[best[i]]);
out:
    free(first);
    free(last);
    free(ev);
    free(best);
    free(ord);
    free(p);
    free(bl);
    return rc;
}

const arb_job_t *sched_preempt_once(arb_sched_t *s, const arb_job_t *j)
{
    arb_queue_t *jq = sched_queue_get(s, j->queue);
    arb_res_t need;

    if (!jq || !jq->has_quota)
        return NULL;
    arb_job_total(j, &need);
    if (sched_quota_within_after(s, j, jq, &need))
        return NULL;
    for (uint32_t i = 0; i < s->njobs; i++) {
        arb_job_t *o = s->jobs[i];
        if (o != j && o->preempted_by == j->id && o->preemptible && !o->evicting &&
            o->priority < j->priority &&
            (o->state == ARB_JOB_PLACED || o->state == ARB_JOB_RUNNING))
            return o;
    }
    return NULL;
}

const arb_queue_t *sched_preempt_spared(arb_sched_t *s, const arb_job_t *j)
{
    arb_queue_t *jq = sched_queue_get(s, j->queue);
    arb_res_t need;

    if (!jq || !jq->has_quota || !jq->cohort)
        return NULL;
    arb_job_total(j, &need);
    for (uint32_t i = 0; i < s->njobs; i++) {
        arb_job_t *o = s->jobs[i];
        arb_queue_t *oq;
        arb_res_t held;
        if (o == j || !o->preemptible || o->priority >= j->priority ||
            (o->state != ARB_JOB_PLACED && o->state != ARB_JOB_RUNNING))
            continue;
        oq = sched_queue_get(s, o->queue);
        if (!oq || oq == jq || !oq->has_quota || oq->cohort != jq->cohort)
            continue;
        arb_job_total(o, &held);
        if (!sched_quota_borrows_in(oq, NULL, &held, &need))
            return oq;
    }
    return NULL;
}

int sched_preempt_for(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, bool dry_run,
                      int *nvictims, int *nreclaim)
{
    victim_t *v;
    int nv = 0, rc = -ENOSPC, nunits = 0;
    bool extras = false, reclaim_ok;
    arb_queue_t *jq = sched_queue_get(s, j->queue);
    arb_res_t need;

    arb_job_total(j, &need);
    reclaim_ok = jq && jq->has_quota && sched_quota_within_after(s, j, jq, &need);

    if (nreclaim)
        *nreclaim = 0;
    if (s->conf.preempt_defer && !dry_run && room_being_freed(s, j, ctx)) {
        j->waiting = true; /* its room is on its way */
        if (nvictims)
            *nvictims = 0;
        return 0;
    }

    for (uint32_t i = 0; i < s->njobs; i++) /* a victim unit per job and elastic extra */
        nunits += 1 + (s->jobs[i]->elastic ? s->jobs[i]->nalloc : 0);
    v = calloc((size_t)nunits + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    for (uint32_t i = 0; i < s->njobs; i++) {
        arb_job_t *o = s->jobs[i];
        arb_queue_t *oq;
        arb_res_t held;
        int reclaim = 0, base;
        if (o == j || !o->preemptible || o->evicting || o->shrink_to > 0 ||
            (o->state != ARB_JOB_PLACED && o->state != ARB_JOB_RUNNING))
            continue;
        oq = sched_queue_get(s, o->queue);
        arb_job_total(o, &held);
        /* Reclaim returns borrowed quota: o must hold some of what its
         * queue borrows, in a resource j needs. Evicting a job that holds
         * none of it (no GPUs, of a queue that borrows GPUs) gives nothing
         * back, only room, and o would evict again by priority. */
        if (reclaim_ok && oq && jq && oq != jq && oq->cohort && oq->cohort == jq->cohort &&
            oq->has_quota && sched_quota_borrows_in(oq, NULL, &held, &need))
            reclaim = 1;
        if (!reclaim && o->priority >= j->priority)
            continue;
        /* The cohort rule: preemption never takes from another queue of
         * j's cohort what it holds within its nominal quota, whatever the
         * priorities (Kueue's reclaimWithinCohort and borrowWithinCohort:
         * only a ClusterQueue that borrows is a target). o must hold some
         * of what its queue borrows and j needs, and its queue must still
         * borrow at its turn (drop_unborrowed). Else a priority eviction
         * and a reclaim could undo each other on one pair: o would come
         * back within its nominal and reclaim the room, or j, evicted
         * within its own nominal, would evict o again by priority. */
        bool cohort = oq && jq && oq != jq && oq->has_quota && jq->has_quota && oq->cohort &&
                      oq->cohort == jq->cohort;
        if (cohort && !sched_quota_borrows_in(oq, NULL, &held, &need))
            continue;
        /* A preemptor that would borrow evicts a job once: its borrowed
         * quota is the lender's to take back while its victims stop (a job
         * within its queue's nominal is admitted whatever it holds), and
         * then it loses its claim, o goes back into the room, and it would
         * evict o again, for the same room, each time the quota is idle a
         * moment. It takes o's room when o ends or its queue is within its
         * nominal. */
        if (!reclaim && jq && jq->has_quota && !reclaim_ok && o->preempted_by == j->id)
            continue;
        base = o->elastic && o->nalloc > o->gang_min ? o->gang_min : o->nalloc;
        for (int t = base; t < o->nalloc; t++) { /* elastic extras, one unit each */
            v[nv].j = o;
            v[nv].task = t;
            v[nv].reclaim = reclaim;
            v[nv].cohort = cohort;
            v[nv].q = oq;
            v[nv].nalloc = 1;
            v[nv].saved = malloc(sizeof *v[nv].saved);
            if (!v[nv].saved) {
                rc = -ENOMEM;
                goto out;
            }
            v[nv].saved[0] = o->alloc[t];
            v[nv].gpu = (int64_t)__builtin_popcount(o->alloc[t].gpu_mask) * o->alloc[t].gpu_milli;
            nv++;
            extras = true;
        }
        v[nv].j = o;
        v[nv].task = -1;
        v[nv].reclaim = reclaim;
        v[nv].cohort = cohort;
        v[nv].q = oq;
        v[nv].nalloc = base;
        v[nv].saved = malloc((size_t)(base > 0 ? base : 1) * sizeof *v[nv].saved);
        if (!v[nv].saved) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(v[nv].saved, o->alloc, (size_t)base * sizeof *o->alloc);
        for (int t = 0; t < base; t++)
            v[nv].gpu += (int64_t)__builtin_popcount(o->alloc[t].gpu_mask) * o->alloc[t].gpu_milli;
        nv++;
    }
    if (nv == 0)
        goto out;
    qsort(v, (size_t)nv, sizeof *v, cmp_victim);

    rc = j->ntasks == 1 ? (extras ? pick_per_node_tails(s, j, ctx, v, nv, &need)
                                  : pick_per_node(s, j, ctx, v, nv, &need))
                        : pick_greedy(s, j, ctx, v, nv, &need);
    if (rc < 0)
        goto out;
    /* Jobs touched: evicted whole (nothing left bound), or shrunk (counted at
     * their first evicted extra: a job's extras are adjacent, highest first). */
    int count = 0;
    for (int i = 0; i < nv; i++)
        count += v[i].evicted &&
                 (v[i].task < 0 || (v[i].j->nalloc > 0 && (i == 0 || v[i - 1].j != v[i].j)));
    if (nvictims)
        *nvictims = count;
    for (int i = 0; nreclaim && i < nv; i++)
        *nreclaim += v[i].evicted && v[i].reclaim && v[i].task < 0;
    if (dry_run)
        goto out; /* rc 0: it would fit; everything goes back below */
    if (s->conf.preempt_defer) {
        /* Mark, then put everything back below: the caller stops them. */
        for (int i = 0; i < nv; i++) {
            if (!v[i].evicted)
                continue;
            v[i].j->preempted_by = j->id;
            v[i].j->reclaimed = v[i].reclaim;
            v[i].j->yield_to = j->id + 1;
            if (v[i].task < 0) {
                v[i].j->evicting = true;
                v[i].j->shrink_to = 0;
            } else if (!v[i].j->evicting &&
                       (v[i].j->shrink_to == 0 || v[i].task < v[i].j->shrink_to)) {
                v[i].j->shrink_to = v[i].task;
            }
        }
        for (int i = 0; i < nv; i++)
            if (v[i].j->evicting)
                v[i].j->shrink_to = 0;
        j->waiting = true;
        /* Its claim: every node a victim of it holds (cycle.c fences them),
         * added to what it claimed in earlier rounds (a gang may need
         * victims in several rounds; the room of the first must stay its). */
        for (int i = 0; i < nv; i++)
            for (int t = 0; v[i].evicted && t < v[i].nalloc; t++) {
                uint32_t n = v[i].saved[t].node;
                bool dup = n == ARB_NO_NODE;
                for (int k = 0; k < j->nclaim && !dup; k++)
                    dup = j->claim[k] == n;
                if (dup)
                    continue;
                uint32_t *nc = realloc(j->claim, (size_t)(j->nclaim + 1) * sizeof *nc);
                if (!nc)
                    break;
                j->claim = nc;
                j->claim[j->nclaim++] = n;
            }
        (void)sched_quota_hold_add(s, j); /* and its quota (queue.c); -ENOMEM: not that */
        goto out;
    }
    if (sched_place_job(s, j, ctx) < 0) {
        rc = -ENOSPC; /* cannot happen: it fitted a moment ago */
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) /* whole jobs first, then the shrunk ones */
        for (int i = 0; i < nv; i++) {
            if (!v[i].evicted || (pass == 0) != (v[i].task < 0))
                continue;
            if (v[i].task < 0) {
                arb_job_transition(v[i].j, ARB_JOB_PREEMPTED, NULL);
                v[i].j->preempted_by = j->id; /* who made it go, for events and explain */
                v[i].j->reclaimed = v[i].reclaim;
                v[i].j->yield_to = j->id + 1; /* and it goes first (queue.c) */
            } else if (v[i].j->state != ARB_JOB_PREEMPTED) {
                v[i].j->resize_gen++;
                s->shrunk++;
            }
            v[i].evicted = false; /* stays evicted: not restored below */
            v[i].nalloc = 0;
        }
out:
    /* Anything still marked evicted goes back where it was. */
    for (int i = nv - 1; i >= 0; i--)
        if (v[i].evicted)
            restore(s, &v[i]);
    for (int i = 0; i < nv; i++)
        free(v[i].saved);
    free(v);
    return rc;
}
