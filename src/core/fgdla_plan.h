/*
 * fgdla_plan.h: fgd-la's plan (fgdla_plan.c): prices of the cluster's
 * resources from the linear program of filling the cluster with the learned
 * task mix, and the loss, in GPU milli, of a placement against them.
 * Private to src/core (score_fgdla.c).
 */
#ifndef ARB_FGDLA_PLAN_H
#define ARB_FGDLA_PLAN_H

#include "core/paper.h"

typedef struct la_plan la_plan_t;

/* What a plan solve found (for tests and the curious). */
typedef struct la_plan_info {
    int types, shapes; /* node types and task shapes in the LP */
    int rows, cols;    /* of the final LP */
    int rounds;        /* column-generation rounds, both stages */
    double theta;      /* the fraction of the scaled mix that fits in proportion */
} la_plan_info_t;

/* A plan with no prices (la_plan_ok false). NULL on ENOMEM. */
la_plan_t *la_plan_new(void);
void la_plan_free(la_plan_t *p);
/* Price c's READY nodes for the mix counted in tab. 0; -ENOMEM, -E2BIG (more
 * than 128 node types) or -EDOM (the solver failed) leave the plan off, so
 * that every loss is 0. info may be NULL. */
int la_plan_solve(la_plan_t *p, const arb_cluster_t *c, const fgd_table_t *tab,
                  la_plan_info_t *info);
bool la_plan_ok(const la_plan_t *p);
/* Nodes the last solve priced (ids from 0). */
uint32_t la_plan_nodes(const la_plan_t *p);

/* A task as the plan sees it: CPU milli, memory bytes, milli per GPU
 * (1..999 a share, 1000 whole GPUs, 0 none), GPUs, allowed models. */
typedef struct la_plan_task {
    int64_t cpu;
    double mem;
    int milli, num;
    int nmodels;
    const uint32_t *models;
} la_plan_task_t;

/* The least price the task pays anywhere in the cluster. */
double la_plan_base(const la_plan_t *p, const la_plan_task_t *t);
/* The price of what the task takes on n: its CPU and memory at n's type's
 * prices and, for a share put on a GPU with free_before milli free, the value
 * of that GPU's room before minus after; for whole GPUs, their value. 0 when
 * the plan is off or knows no node of n's type (model, GPUs, CPU, memory). */
double la_plan_cost(const la_plan_t *p, const arb_node_t *n, const la_plan_task_t *t,
                    int free_before);

#endif
