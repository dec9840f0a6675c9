/*
 * schema_sched.h: the objects a scenario and the controller config share,
 * as one table each (spec/schema.h): the scheduler settings and a queue.
 * Both formats read them with the same table (scenario.c with
 * SC_CTX_SCENARIO, state/config.c with SC_CTX_CONFIG), so a key, its type,
 * its resource names and its messages are the same in both; the keys only
 * the controller acts on (the cycle's interval, time limits) exist only in
 * its context, and the defaults that differ (the queue order) are two
 * entries of one key.
 */
#ifndef ARB_SPEC_SCHEMA_SCHED_H
#define ARB_SPEC_SCHEMA_SCHED_H

#include "spec/schema.h"

/* scheduler: (the scenario's, or the controller's with its own keys). */
typedef struct spec_sched {
    char policy[32];  /* scoring profile; a scenario's default "" (the file names none) */
    int queue_policy; /* arb_queue_policy_t */
    bool backfill, preemption;
    int64_t starvation_ns;
    int64_t interval_ns;     /* config: a cycle at least this often */
    int64_t default_limit_s; /* config: defaultTimeLimit (0: none) */
    int64_t max_limit_s;     /* config: maxTimeLimit (0: none) */
} spec_sched_t;

/* One item of queues:. */
typedef struct spec_queue {
    char name[SPEC_STR]; /* the controller's at most 63 bytes */
    char cohort[SPEC_STR];
    double weight;
    bool has_quota; /* nominal: given */
    arb_res_t nominal, borrow_limit;
    int64_t default_limit_s, max_limit_s; /* config */
} spec_queue_t;

#define SPEC_MAX_QUEUES 1024

extern const sc_table_t spec_sched_table;
extern const sc_table_t spec_queue_table;

/* The list in v (queues:) through spec_queue_table in ctx: *out a new
 * array of *n (free it), names checked unique and not 'default'. x->c,
 * when set, is the cluster whose extended resources quotas may name. */
int spec_queues_read(sx_t *x, const sval_t *v, unsigned ctx, spec_queue_t **out, int *n);

#endif
