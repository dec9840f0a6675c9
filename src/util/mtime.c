/*
 * mtime.c: monotonic clocks and deadlines for timed waits (mtime.h).
 */
#include <errno.h>

#include "util/mtime.h"

int64_t arb_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t arb_mono_ms(void)
{
    return arb_mono_ns() / 1000000;
}

int64_t arb_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int arb_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);

    if (rc == 0)
        rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

struct timespec arb_deadline_ns(int64_t ns)
{
    struct timespec dl;

    if (ns < 0)
        ns = 0;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    ns += dl.tv_nsec;
    dl.tv_sec += ns / 1000000000LL;
    dl.tv_nsec = ns % 1000000000LL;
    return dl;
}

struct timespec arb_deadline_ms(int64_t ms)
{
    if (ms > 1000000000000LL) /* 31 years: "for ever" without overflow */
        ms = 1000000000000LL;
    return arb_deadline_ns(ms * 1000000);
}

int arb_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *dl)
{
    int rc;

    do
        rc = pthread_cond_timedwait(cv, mu, dl);
    while (rc == EINTR);
    return rc;
}
