/*
 * sched_int.h: the scheduler's private parts, shared by the files of
 * src/core that implement it (sched.c engine, nodeclass.c and domidx.c
 * indexes, filters.c, scores.c, profiles.c, queue.c, preempt.c, backfill.c,
 * explain.c). Not a public API.
 */
#ifndef ARB_SCHED_INT_H
#define ARB_SCHED_INT_H

#include "arbiter/sched.h"

/* A topology domain a gang group is confined to while it is placed. */
typedef struct sched_dom {
    arb_topo_level_t level;  /* ARB_TOPO_ANY: no confinement */
    uint32_t node;           /* NVLINK, NODE */
    int16_t nvlink;          /* NVLINK */
    uint32_t rack, block;    /* RACK, BLOCK (interned label values) */
    const uint32_t *members; /* optional: the domain's node ids, to scan only them */
    uint32_t nmembers;
} sched_dom_t;

/* Node equivalence classes (nodeclass.c). */
typedef struct sched_class {
    uint64_t key;       /* 0: free slot */
    uint32_t rep;       /* the member that is filtered and scored */
    uint32_t n, cap;    /* members */
    uint32_t *mem;      /* member node ids, sorted */
    uint32_t next_free; /* free-list link while empty */
    /* Best-fit picks of 1..8 plain whole GPUs on it (sched.c, class_pick):
     * bit b of picked: known for b + 1 GPUs; of pick_ok: it fits, in pick[b]. */
    uint16_t pick[8];
    uint8_t picked, pick_ok;
    int16_t pick_lim; /* the thermal limit they were picked under */
} sched_class_t;

/* What a class has room for (nodeclass.c, summarize), in an array beside
 * the classes so that a decision skips the classes that cannot hold its task
 * without reading their nodes: a necessary condition of the filters. */
typedef struct sched_csum {
    int64_t cpu, mem, gpu_milli; /* free */
    int16_t share;               /* the largest free milli of a healthy GPU; -1 none */
    uint8_t whole;               /* healthy GPUs with nothing on them */
    bool ready;                  /* a live class of READY nodes */
} sched_csum_t;

/* Topology domain indexes (domidx.c), kept in step with the node classes:
 * per level (rack, block) the domains with their members, free whole GPUs
 * and members counted by free GPUs; domains bucketed by free GPUs. */
typedef struct sched_dent {
    uint32_t key;                    /* the label's value; 0: one node without the label */
    uint32_t n, cap;                 /* members */
    uint32_t *mem;                   /* member node ids, sorted */
    int32_t free;                    /* free whole GPUs of the members */
    uint32_t bpos;                   /* position in bucket[free] while n > 0 */
    uint32_t hist[ARB_MAX_GPUS + 1]; /* members by free GPUs */
} sched_dent_t;

typedef struct sched_bucket {
    uint32_t *v; /* domain ids */
    uint32_t n, cap;
} sched_bucket_t;

typedef struct sched_dlevel {
    sched_dent_t *d;
    uint32_t nd, capd;
    uint32_t *ht; /* labeled domain id + 1 by key, linear probing */
    uint32_t htsize, nlabeled;
    uint32_t *node_dom; /* per node: its domain; UINT32_MAX none */
    uint32_t *solo;     /* per node: its own domain when unlabeled; UINT32_MAX none yet */
    sched_bucket_t *bk; /* by free GPUs */
    uint32_t nbk;
} sched_dlevel_t;

/* A candidate domain for a group (free whole GPUs when listed). */
typedef struct dom_cand {
    sched_dom_t d;
    int free;
} dom_cand_t;

typedef struct sched_index {
    bool valid;
    uint64_t seen_version; /* cluster.version the classes reflect */
    uint32_t nnodes;
    uint32_t *node_cls; /* per node: its class */
    uint64_t *node_ver; /* per node: node.version when keyed */
    sched_class_t *cls;
    sched_csum_t *sum; /* per class slot, beside cls */
    uint32_t ncls, capcls, nlive, free_head;
    uint32_t *ht; /* class slot + 1 by key, linear probing */
    uint32_t htsize;
    uint32_t k_rack, k_block, k_zone; /* interned label keys kept out of the key */
    const struct arb_sched *s;        /* for the plugins' node_key */
    bool count_tasks;                 /* key the task count, not only > 0 (random ties) */
    sched_dlevel_t dl[2];             /* rack, block (domidx.c) */
    uint8_t *node_free;               /* per node: free GPUs as the domains count them */
} sched_index_t;

struct arb_sched {
    arb_cluster_t *c; /* borrowed */
    arb_sched_conf_t conf;
    void *pstate[ARB_MAX_SCORES]; /* per score plugin, from ops->init */
    int picker;                   /* index of the profile's GPU picker; -1 best-fit */

    arb_job_t **byid; /* by id; NULL once forgotten (arb_sched_forget) */
    uint32_t nids, capids;
    arb_job_t **jobs; /* the live jobs (not forgotten), by increasing id; owned */
    uint32_t njobs, capjobs;
    uint32_t nelastic; /* live elastic jobs */
    uint64_t seq;      /* logical submission clock */

    /* Incremental cycles (cycle.c, "Settled jobs"). gen moves with every
     * change other than a submission that may let a waiting job start or
     * change what a turn does (an end, a release, a queue, a restore, a
     * placement outside the cycle); settled_* say that the last cycle left
     * every pending job outside todo settled, valid while gen and the
     * cluster's version stay where they were. */
    uint64_t gen, settled_gen, settled_ver;
    bool settled_ok;
    uint32_t nsettled; /* pending jobs settled */
    arb_job_t **todo;  /* what an incremental cycle tries: unsettled, then new */
    uint32_t ntodo, captodo;
    arb_job_t **placed; /* the jobs the last cycle placed, in order */
    uint32_t nplaced, capplaced;

    arb_queue_t *queues;
    int nqueues;
    uint32_t *holders; /* ids of preemptors that may hold quota (queue.c, "Holds") */
    uint32_t nholders, capholders;

    /* Per-placement scratch, sized to the cluster. */
    uint32_t scratch_nodes;
    int scratch_scores; /* raw holds scratch_nodes x this many */
    uint32_t *cand;
    arb_pick_t *picks;
    double *raw;   /* nscores x nodes */
    double *total; /* nodes */

    sched_index_t idx;
    /* Near/far placement (sched.c, near_units): the units a task of a gang
     * is evaluated on when a score reads its placed tasks: nodes near them
     * one by one, the rest by class through a far member. */
    uint32_t *u_node, *u_w, *u_cls; /* per unit: node scored, nodes it weighs, class or NONE */
    uint32_t capu;
    uint32_t *near_stamp;           /* per node: == stamp while near */
    uint32_t *cls_stamp, *cls_near; /* per class: near members counted this stamp */
    uint32_t capnear, capcs, stamp;
    /* near_units' groups of near nodes by class, rack and block (== stamp: in use) */
    uint32_t *gk_stamp, *gk_cls, *gk_rack, *gk_block, *gk_unit;
    uint32_t gk_size;
    uint8_t *fence; /* cycle.c: per node, SCHED_FENCE_* bits: reserved by a job ahead */
    uint32_t nfence;
    uint32_t *fence_owner; /* per node, the job whose fence it is (the first); UINT32_MAX none */
    bool fence_on;         /* while set, placement skips nodes with a bit of fence_mask, */
    uint8_t fence_mask;
    uint32_t fence_self; /* ... but not those fenced for this job itself */
    bool use_classes;    /* profile allows node classes (no ARB_SCORE_PERNODE) */
    bool placed_dep;     /* some score reads the job's placed tasks (ARB_SCORE_PLACED) */
    int shrunk;          /* elastic tasks preemption took back (for the cycle's stats) */
    arb_hold_fn hold;    /* the caller's holds (arb_sched_set_hold); NULL none */
    void *hold_arg;
    uint64_t nevaluated; /* classes filtered on the class path (arb_sched_nclasses) */
};

/* Node classes (nodeclass.c). sync: bring the classes up to date with the
 * cluster (O(1) when nothing changed behind the engine's back). touch:
 * re-key one node the engine just changed; version_before is
 * cluster.version before the change. check: invariants, 0 or -EFAULT. */
int sched_index_sync(arb_sched_t *s);
void sched_index_touch(arb_sched_t *s, uint32_t node, uint64_t version_before);
void sched_index_free(sched_index_t *x);
int sched_index_check(const arb_sched_t *s);

/* Domain indexes (domidx.c). grow: per-node arrays for nnodes nodes.
 * node: account node's current level labels and free GPUs (any change).
 * check: invariants against the cluster, 0 or a negative errno. */
int sched_domidx_grow(sched_index_t *x, uint32_t old_nnodes, uint32_t nnodes);
int sched_domidx_node(sched_index_t *x, const arb_cluster_t *c, uint32_t node);
void sched_domidx_free(sched_index_t *x);
int sched_domidx_check(const arb_sched_t *s);
/* The domains worth trying for cnt tasks of group g (level l), in the
 * order the full listing tries them (fewest free GPUs first, then lowest
 * node id, then NVLink id), leaving out only domains that cannot hold
 * them: fewer free GPUs than cnt x g->gpus, or (prune) fewer nodes with
 * room than tasks; at the node and NVLink levels one node per class (all
 * members of a class try alike). *out is allocated (the caller frees it);
 * members point into the index, valid until a node's labels change.
 * Returns the count, -ENOENT where the index does not apply (the caller
 * lists every domain), or -ENOMEM. */
int sched_domidx_list(arb_sched_t *s, const arb_job_t *j, const arb_tgroup_t *g, int cnt,
                      bool prune, dom_cand_t **out);
int sched_dom_cmp(const void *a, const void *b);

/* Is GPU i of n usable for a task of pc's group (health, model, heat,
 * device memory)? Shared by the fit filter, the pickers and explain. */
bool sched_gpu_eligible(const arb_pctx_t *pc, const arb_node_t *n, int i);
/* Best-fit GPU choice for one task of pc->group on n, optionally confined to
 * one NVLink domain (nvlink >= 0). 0 or -ENOSPC. */
int sched_pick_bestfit(const arb_pctx_t *pc, const arb_node_t *n, int nvlink, arb_pick_t *pick);

/* Filter helpers shared with scores and explain (filters.c): untolerated
 * taints of n with effect e; whether n matches an affinity term; the largest
 * number of free, eligible GPUs in one NVLink domain of n (its id in *dom). */
int sched_untolerated(const arb_job_t *j, const arb_node_t *n, arb_taint_effect_t e);
bool sched_term_matches(const arb_cluster_t *c, const arb_node_t *n, const arb_aff_term_t *t);
int sched_nvlink_free(const arb_pctx_t *pc, const arb_node_t *n, int16_t *dom);

/* Do j's selectors or affinity terms name the rack, block or zone labels
 * (which the node classes leave out of their key)? */
bool sched_names_topo_labels(const arb_sched_t *s, const arb_job_t *j);
/* Run every filter; the first failing reason, or ARB_R_OK. */
arb_reason_t sched_filter_node(const arb_pctx_t *pc, const arb_node_t *n);
/* Node n lies inside domain d? */
bool sched_in_domain(const arb_node_t *n, const sched_dom_t *d);

/* Place one task (index t of j) inside domain d (may be NULL): filter,
 * pick, score, bind. 0 when bound (j->alloc[t] filled), -ENOSPC if no node. */
int sched_place_task(arb_sched_t *s, arb_job_t *j, int t, const sched_dom_t *d,
                     const arb_ctx_t *ctx);
/* Place all of j's tasks, all or nothing (at least gang_min); rolls back on
 * failure. Does not change j->state. 0 or -ENOSPC. */
int sched_place_job(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx);
/* How many tasks of group gi of pending job j would be placed now, alone
 * (confined to one domain when its topology is required: the domain that
 * holds the most); the nodes they would go to and how many each takes in
 * nodes/counts (at most max, *nout of them). Nothing changes. */
int sched_group_fit(arb_sched_t *s, arb_job_t *j, int gi, const arb_ctx_t *ctx, uint32_t *nodes,
                    int *counts, int max, int *nout);
/* Release the first j->nalloc allocations of j (reverse order). */
void sched_unbind(arb_sched_t *s, arb_job_t *j);
/* The one way to charge or release a single task (index t of j, at a):
 * the node accounting (arb_node_alloc/release), the plugins' bound
 * callbacks and the node classes, kept in step. bind fills j->alloc[t] but
 * does not change j->nalloc; the caller does. */
int sched_bind_task(arb_sched_t *s, arb_job_t *j, int t, const arb_task_alloc_t *a);
void sched_release_task(arb_sched_t *s, arb_job_t *j, int t);
/* Put back a task a trial released a moment ago (backfill's reservation,
 * preemption's candidates), exactly, without the capacity checks of a new
 * allocation: a GPU that left capacity since is still held by it. */
void sched_restore_task(arb_sched_t *s, arb_job_t *j, int t, const arb_task_alloc_t *a);
/* Charge / uncharge j's allocated tasks to its queue's usage. */
void sched_queue_charge(arb_sched_t *s, const arb_job_t *j, int sign);
arb_queue_t *sched_queue_get(arb_sched_t *s, uint32_t name);

/* Something other than a submission changed what a cycle may do (cycle.c):
 * the settled jobs are tried again at the next cycle. */
static inline void sched_changed(arb_sched_t *s)
{
    s->gen++;
}
/* Append j to a growable job list. 0 or -ENOMEM. */
int sched_list_push(arb_job_t ***v, uint32_t *n, uint32_t *cap, arb_job_t *j);

/* Queue order (queue.c): sort the pending jobs in place, most urgent first. */
void sched_order(arb_sched_t *s, arb_job_t **v, int n, const arb_ctx_t *ctx);
/* Quota admission (queue.c): may j start now given its queue's quota and
 * cohort? false with a reason in why (may be NULL). */
bool sched_quota_admits(arb_sched_t *s, const arb_job_t *j, char *why, size_t n);
/* May j's queue take more beyond what it holds now, by the same rule
 * (an elastic job's tasks above its min: elastic.c)? */
bool sched_quota_admits_more(arb_sched_t *s, const arb_job_t *j, const arb_res_t *more);
/* Quota held for preemptors (queue.c, "Holds"). hold_reset forgets the
 * list (each cycle names its pending preemptors again); hold_add: j holds
 * from now on, while it has a claim. 0 or -ENOMEM (then it holds nothing). */
void sched_quota_hold_reset(arb_sched_t *s);
int sched_quota_hold_add(arb_sched_t *s, const arb_job_t *j);
/* Quota by dimension (queue.c), for who may evict whom (preempt.c); a
 * dimension counts where q's quota limits it (a nominal or a borrowing
 * limit) and the vector given names it (nonzero). within_after: q's usage,
 * what its preemptors other than j hold ("Holds") and need stay within its
 * nominal in every dimension need names (true when it names none).
 * borrows_in: q uses (with plus added, if not NULL) more than its nominal
 * in some dimension that held names and, if need is not NULL, need names
 * too. */
bool sched_quota_within_after(arb_sched_t *s, const arb_job_t *j, const arb_queue_t *q,
                              const arb_res_t *need);
bool sched_quota_borrows_in(const arb_queue_t *q, const arb_res_t *plus, const arb_res_t *held,
                            const arb_res_t *need);
/* Could j's queue never admit it (more than nominal plus borrowing, or
 * than its cohort could lend)? true with a reason in why (may be NULL). */
bool sched_quota_never(arb_sched_t *s, const arb_job_t *j, char *why, size_t n);

/* Preemption (preempt.c): evict the smallest set of lower-priority,
 * preemptible jobs (or jobs of queues borrowing in j's cohort: quota
 * reclaim) that lets j fit, then bind j. 0 and *nvictims (of which
 * *nreclaim, optional, are reclaims), or -ENOSPC with nothing changed.
 * dry_run: only report whether it would. */
int sched_preempt_for(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, bool dry_run,
                      int *nvictims, int *nreclaim);
/* For explain: a queue of j's cohort, not j's, with a lower-priority
 * preemptible job placed that the cohort rule spares (preempt.c: its
 * queue borrows none of what the job holds and j needs), or NULL. */
const arb_queue_t *sched_preempt_spared(arb_sched_t *s, const arb_job_t *j);
/* For explain: a job j evicted before and, while j's queue would borrow,
 * does not evict again (preempt.c), placed now; or NULL. */
const arb_job_t *sched_preempt_once(arb_sched_t *s, const arb_job_t *j);

/* Elastic jobs (elastic.c): charge or release one task's request to its
 * job's queue; grow the held elastic jobs after the pending jobs had their
 * turn (returns the tasks added; the growth rule is in elastic.c). */
void sched_task_charge(arb_sched_t *s, const arb_job_t *j, int t, int sign);
int sched_elastic_grow(arb_sched_t *s, const arb_ctx_t *ctx);
/* Give back j's tasks above its min that its queue's quota (nominal plus
 * borrowing limit) cannot hold; before j is charged to the queue. */
void sched_elastic_trim(arb_sched_t *s, arb_job_t *j);

/* The cycle (cycle.c). */
typedef struct sched_outcome {
    bool placed;       /* the cycle would place the job */
    arb_wait_t wait;   /* else why not */
    uint32_t wait_for; /* the job that holds it back (scheduler id); UINT32_MAX none */
    int64_t shadow_ns; /* the backfill reservation's start when one was made; -1 none */
    int64_t grace_ns;  /* the job's grace past its time limit */
    bool reclaim;      /* ARB_WAIT_TAKEN: by a quota reclaim (else for priority) */
    bool reserved;     /* it holds the backfill reservation (from shadow_ns) */
} sched_outcome_t;
/* Place pending job j as the cycle does (all or nothing, at least its gang
 * minimum; quota usage charged, state PLACED). 0 or -ENOSPC. */
int sched_bind_job(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx);
/* Run the cycle as a trial up to job j and undo everything: what the next
 * cycle would do with j if nothing changed first. */
int sched_cycle_try(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, sched_outcome_t *out);
/* Would j fit if every job's allocations were released (the cluster's
 * eligible nodes idle)? Cached in j for shape (0: no cache). */
bool sched_fits_idle(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx, uint64_t shape);
/* Node fences (cycle.c): a backfill reservation's nodes (a job that ends
 * before it may use them), and hard ones: a starving job's, a preemptor's
 * room. sched_fence_add sets bit on every node j could use when idle. */
#define SCHED_FENCE_BACKFILL 1u
#define SCHED_FENCE_HARD 2u
void sched_fence_add(arb_sched_t *s, const arb_job_t *j, const arb_ctx_t *ctx, uint8_t bit);
/* Forget preemptor j's claim on its victims' room (placed, or it had its turn). */
void sched_claim_drop(arb_job_t *j);

/* Backfill (backfill.c): the earliest time at which blocked job j could
 * start, from running jobs' time limits (EASY reservation). Returns
 * ctx->now_ns when no reservation can be made (nothing may backfill). */
int64_t sched_reservation(arb_sched_t *s, arb_job_t *j, const arb_ctx_t *ctx);

#endif
