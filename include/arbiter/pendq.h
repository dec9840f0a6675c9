/*
 * pendq.h: the pending-job index, an incremental replacement for the
 * scan-and-sort of pending jobs that a scheduling cycle does.
 *
 * It keeps every pending job of one scheduler in buckets, one per (queue,
 * fit key), each in the queue policy's order (FIFO: submission; priority
 * and DRF: priority, then submission). The fit key is what placement reads
 * of a job (task groups, GPU models, gang size; a job with selectors,
 * affinity, tolerations or a dataset is its own key). A pass walks the
 * buckets merged in the policy's order, so nothing is sorted per pass, and
 * remembers what cannot fit:
 *
 *   - in a pass, once a job fails to place, every later job of its key
 *     fails too (placements only take room), and is not tried;
 *   - across passes, a key that failed stays failed until some node
 *     changes (node.version) in a way one of its tasks could use (its
 *     CPU, memory and GPUs, on a GPU model it may use); only then are its
 *     jobs tried again.
 *
 * So a pass costs the jobs it places plus the keys that may have become
 * placeable, not the whole backlog. The outcome is arb_sched_cycle's for
 * the configurations a pass covers: no preemption, no backfill, no
 * starvation guard, no elastic job. arb_pendq_cycle returns -ENOTSUP for
 * the others; call arb_sched_cycle then.
 *
 * Contract: while an index is used, every job submitted to its scheduler
 * goes through arb_pendq_add once PENDING, and leaves through
 * arb_pendq_remove when it stops being pending other than by a pass (placed
 * with arb_sched_place, cancelled). Remove a job before changing what it
 * asks or its priority, add it again after. Feasibility is assumed to change
 * only with nodes (a node's version moves on every change that matters).
 *
 * Returns: 0 or a negative errno, as everywhere (arbiter.h).
 */
#ifndef ARBITER_PENDQ_H
#define ARBITER_PENDQ_H

#include "arbiter/sched.h"

typedef struct arb_pendq arb_pendq_t;

/* A new, empty index for s (borrowed; the index must not outlive it),
 * ordered by s's queue policy. NULL on ENOMEM. */
arb_pendq_t *arb_pendq_new(arb_sched_t *s);
void arb_pendq_free(arb_pendq_t *q);

/* Index PENDING job j (submitted to the index's scheduler). 0, -EINVAL
 * (not pending, already indexed) or -ENOMEM. */
int arb_pendq_add(arb_pendq_t *q, arb_job_t *j);
/* Take j out of the index (no-op when it is not in it). */
void arb_pendq_remove(arb_pendq_t *q, const arb_job_t *j);
/* Jobs in the index. */
int arb_pendq_len(const arb_pendq_t *q);
/* The job a strict FIFO pass would try first (the oldest), NULL when
 * empty. */
arb_job_t *arb_pendq_first(const arb_pendq_t *q);

/* One pass: place what fits, in the policy's order, as arb_sched_cycle
 * would; placed jobs leave the index. st (may be NULL) as arb_sched_cycle
 * fills it. -ENOTSUP (nothing done) outside the covered configurations,
 * -ENOMEM. */
int arb_pendq_cycle(arb_pendq_t *q, const arb_ctx_t *ctx, arb_cycle_stats_t *st);
/* The jobs the last pass placed, in the order it placed them (*v points
 * into the index; valid until its next call). */
int arb_pendq_placed(const arb_pendq_t *q, arb_job_t *const **v);

#endif
