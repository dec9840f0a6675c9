/*
 * autoscale.h: the autoscaler's decision, as pure code: given a service's
 * settings, its recent history, the time and the live load, how many
 * replicas it should run. No clock, no I/O: the caller passes now and the
 * load, so tests drive it with injected series (tests/unit/test_autoscale.c)
 * and the controller (src/state/service.c) with what balancers and agents
 * report.
 *
 * The rule (the Kubernetes HPA's, on in-flight requests):
 *   ratio       = max(load per replica / target, gpu util / gpu target)
 *   recommended = ceil(current * ratio), clamped to [min, max];
 *                 current when |ratio - 1| <= tolerance (no flapping on noise)
 *   up:   recommended > current and the cooldown since the last change passed
 *         -> recommended, at once;
 *   down: the highest recommendation over the whole stabilisation window is
 *         below current (every sample in the window agrees), the history
 *         covers the window, and the cooldown passed -> that highest one.
 * Every call records its recommendation; arb_as_decision_t.why says in
 * words which numbers led where.
 */
#ifndef ARBITER_AUTOSCALE_H
#define ARBITER_AUTOSCALE_H

#include <stdbool.h>
#include <stdint.h>

#define ARB_AS_HIST 256 /* recommendations kept (one per sample) */

typedef struct arb_as_conf {
    int min, max;        /* replicas, 1 <= min <= max */
    double target;       /* in-flight (+ queued) requests per replica */
    double gpu_target;   /* GPU utilisation per replica, 0..1; 0 = not used */
    double tolerance;    /* default 0.1 */
    int64_t window_ns;   /* scale-down stabilisation window */
    int64_t cooldown_ns; /* no change sooner than this after the last one */
} arb_as_conf_t;

/* The live load of one service, summed over the replicas counted. */
typedef struct arb_as_load {
    double inflight; /* requests in progress (balancers' counts) */
    double queue;    /* requests waiting at the replicas */
    double gpu_util; /* mean utilisation of the replicas' GPUs, 0..1; < 0 unknown */
    int ready;       /* replicas the load is spread over */
} arb_as_load_t;

typedef struct arb_as_state {
    int64_t at[ARB_AS_HIST];
    int rec[ARB_AS_HIST];
    int n, head;            /* ring: head is the oldest */
    int64_t first_ns;       /* first sample; 0 none yet */
    int64_t last_change_ns; /* last scale; 0 never */
    bool changed;           /* last_change_ns is valid */
} arb_as_state_t;

typedef struct arb_as_decision {
    int desired;     /* replicas now (== current: no change) */
    int recommended; /* this sample's recommendation */
    double per_replica;
    double ratio;
    char why[320];
} arb_as_decision_t;

/* Fill defaults: tolerance 0.1, window 30 s, cooldown 10 s. */
void arb_as_conf_default(arb_as_conf_t *c);
/* -EINVAL with text naming the field when c is not usable. */
int arb_as_conf_check(const arb_as_conf_t *c, char *msg, size_t n);
void arb_as_reset(arb_as_state_t *st);
/* One sample at now_ns with `current` replicas: records the
 * recommendation and fills d. Returns d->desired. */
int arb_as_decide(const arb_as_conf_t *c, arb_as_state_t *st, int64_t now_ns, int current,
                  const arb_as_load_t *l, arb_as_decision_t *d);
/* The caller applied a change at now_ns (starts the cooldown). */
void arb_as_note_change(arb_as_state_t *st, int64_t now_ns);

#endif
