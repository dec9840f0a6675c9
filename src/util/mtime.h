/*
 * mtime.h: the base layer's clocks and timed waits (DESIGN invariant 5:
 * liveness uses local monotonic time).
 *
 * Every wait in a daemon (lease renewal, the scheduler's interval, long
 * polls, probes, followers) is measured on CLOCK_MONOTONIC, so a step of
 * the wall clock (an NTP correction, an operator's `date -s`) neither
 * stalls nor hurries it. Wall time is for people only: timestamps shown or
 * logged, never compared across machines and never waited on.
 *
 * A condition variable that is waited on with a deadline must be made with
 * arb_cond_init (it carries CLOCK_MONOTONIC); the deadline comes from
 * arb_deadline_ms. Nothing here allocates.
 */
#ifndef ARB_UTIL_MTIME_H
#define ARB_UTIL_MTIME_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC (arbitrary origin: differences only). */
int64_t arb_mono_ns(void);
/* Milliseconds on CLOCK_MONOTONIC. */
int64_t arb_mono_ms(void);
/* Milliseconds since the Unix epoch (CLOCK_REALTIME), for people. */
int64_t arb_wall_ms(void);

/* Initialise cv to time its waits on CLOCK_MONOTONIC. 0 or a positive
 * pthread error code, as pthread_cond_init. */
int arb_cond_init(pthread_cond_t *cv);
/* The CLOCK_MONOTONIC instant ms milliseconds from now (ms < 0 counts as
 * 0), for arb_cond_wait_until on a cv made by arb_cond_init. */
struct timespec arb_deadline_ms(int64_t ms);
/* The same, ns nanoseconds from now. */
struct timespec arb_deadline_ns(int64_t ns);
/* Wait on cv (made by arb_cond_init; caller holds mu) until signalled or
 * until the monotonic deadline dl: 0, or ETIMEDOUT once dl has passed.
 * Every timed wait in the tree goes through here (a lint in .ci/run
 * checks), so none can be measured on the wall clock by mistake. */
int arb_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *dl);

#endif
