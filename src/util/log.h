/*
 * log.h: the base layer's one logger, for the daemons (controller, agent,
 * balancer) and what runs inside them.
 *
 * Each line says which daemon and which part of it: a text line is
 *
 *   arbiter agent n2 exec: job 3 task 0 started on GPUs [0,1]
 *   arbiter controller store: warning: record 'job/7' is damaged; skipped
 *
 * (the daemon, its name when it has one, the subsystem, the level when it
 * is not info, the message), and a JSON line, with ARBITER_LOG_FORMAT=json,
 * is one object: {"ts":"2026-12-01T13:40:37.123Z","level":"info",
 * "daemon":"agent","name":"n2","subsys":"exec","msg":"..."}. Text lines
 * carry no time (journald and docker add their own); JSON lines do, in UTC.
 * ARBITER_LOG_LEVEL=debug|info|warn|error drops the lines below it
 * (default info). Each line is written with one call, so lines of several
 * threads never interleave. The process-wide settings are the only state;
 * nothing here allocates.
 */
#ifndef ARB_UTIL_LOG_H
#define ARB_UTIL_LOG_H

#include <stdarg.h>
#include <stdio.h>

#include "arbiter/arbiter.h"

typedef enum { ARB_LOG_DEBUG, ARB_LOG_INFO, ARB_LOG_WARN, ARB_LOG_ERROR } arb_log_level_t;

/* Who is logging: daemon ("controller", "agent", "lb") and its name (a
 * node's, an HA member's; NULL or "" for none). Reads ARBITER_LOG_LEVEL and
 * ARBITER_LOG_FORMAT; a bad value is an error naming the variable and
 * changes nothing. Copies both strings. */
int arb_log_init(const char *daemon, const char *name, arb_err_t *err);
/* Set the level and format by name ("info", "text"/"json"); NULL keeps one. */
int arb_log_configure(const char *level, const char *format, arb_err_t *err);
/* Where lines go (stderr by default); for tests. */
void arb_log_set_stream(FILE *f);
/* Whether a line of this level would be written. */
int arb_log_enabled(arb_log_level_t lv);

void arb_log(arb_log_level_t lv, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void arb_vlog(arb_log_level_t lv, const char *subsys, const char *fmt, va_list ap);

#endif
