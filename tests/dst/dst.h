/*
 * dst.h: the deterministic simulation test of the controller (FoundationDB's
 * way), shared by its files: dst_gen.c makes a world and a list of steps
 * from a seed, dst.c runs them against the controller's own state machine
 * and scheduler (src/vc: a virtual clock, simulated agents, a real SQLite
 * store, one thread, no sockets), checks the invariants after every step
 * and shrinks a failing list to a minimal replay.
 *
 * A step is one of the ops below; a world is the controller's config and
 * the shapes of the nodes that join. Both print as text (one line per step)
 * and read back (--replay FILE), so a failure found by any seed can be
 * rerun and read.
 */
#ifndef ARB_DST_H
#define ARB_DST_H

#include "arbiter/sched.h"
#include "state/state.h"

typedef enum dst_opk {
    OP_TICK,    /* dt: time passes; agents report; a cycle; explain is checked */
    OP_SUBMIT,  /* who, text: a job spec (one line, JSON) */
    OP_CANCEL,  /* a: the a-th accepted submission */
    OP_JOIN,    /* a: a node of shape a joins */
    OP_DOWN,    /* a: node a's agent dies, with its tasks */
    OP_UP,      /* a: node a's agent starts again, without state */
    OP_CUT,     /* a: node a is cut off from the controller */
    OP_HEAL,    /* a: ... and reconnected */
    OP_DRAIN,   /* a: node a drained */
    OP_UNDRAIN, /* a: ... back in service */
    OP_REPLAY,  /* a: node a's report before last arrives again (late, duplicated) */
    OP_RESTART, /* the controller restarts: recovery from the store */
    OP_GPU,     /* a, who: GPU `who` of node a falls off the bus, or comes back */
    OP_NKINDS
} dst_opk_t;

typedef struct dst_op {
    dst_opk_t k;
    int a;      /* a node or a submission */
    int who;    /* OP_SUBMIT: 0 admin, 1 alice (team-a), 2 bob (team-b) */
    int64_t dt; /* OP_TICK */
    char *text; /* OP_SUBMIT: the spec (owned) */
} dst_op_t;

#define DST_MAX_SHAPES 8

typedef struct dst_world {
    uint64_t seed;
    char policy[16];
    arb_queue_policy_t queue;
    bool backfill, preemption, quotas;
    int64_t starvation_ns;
    int nshapes;
    char *shape[DST_MAX_SHAPES]; /* node inventories (JSON text, owned) */
} dst_world_t;

extern const char *const dst_op_names[OP_NKINDS];

/* Make the world and steps of seed (dst_gen.c); free with dst_free. */
void dst_generate(uint64_t seed, int nsteps, dst_world_t *w, dst_op_t **ops, int *nops);
void dst_free(dst_world_t *w, dst_op_t *ops, int nops);
/* The controller's config of world w (queues when w->quotas). */
void dst_conf(const dst_world_t *w, st_conf_t *c);

/* Text form: write, and read back (-EINVAL with the line in err). */
void dst_write(FILE *f, const dst_world_t *w, const dst_op_t *ops, int nops);
int dst_read(FILE *f, dst_world_t *w, dst_op_t **ops, int *nops, arb_err_t *err);

#endif
