/*
 * ledger.h: the ground layer of src/state (ledger.c), the part every other
 * file of the state stands on: the controller's clocks and the Lamport
 * clock, the event log, the store batch of the mutation in progress and
 * its tickets, the change hooks, the job table and name interning.
 *
 * The ledger calls no operation above it by name. What it needs of them
 * (a job's store record, what follows a save or an end) it asks through
 * st_ledger_ops_t, the one table state.c's st_open gives it. Included by
 * state_int.h; the callers hold s->mu, as everywhere in state_int.h.
 */
#ifndef ARB_STATE_LEDGER_H
#define ARB_STATE_LEDGER_H

#include <time.h>

#include "state/state.h"

typedef struct st_job st_job_t;
typedef struct st_event st_event_t;

/* What the ground asks of the layers above it: each entry is set (state.c). */
typedef struct st_ledger_ops {
    /* sj's store record as text (malloc'd; NULL out of memory): codec.c */
    char *(*record)(st_t *s, st_job_t *sj);
    /* sj was just saved: its nodes' agents' long polls look again (node.c) */
    void (*saved)(st_t *s, const st_job_t *sj);
    /* sj left the active list (it ended): the history keeps it (history.c) */
    void (*retired)(st_t *s, st_job_t *sj);
} st_ledger_ops_t;

/* name (cut to ST_NAME_MAX - 1 bytes) as a string kept once in s->names,
 * valid until st_close; "" for NULL; NULL only when out of memory. */
const char *st_name(st_t *s, const char *name);
/* Setting sj's message (printf, cut at 255 bytes; an empty one frees it):
 * a heap string only while a job has one (st_job_msg reads it). 0, or
 * -ENOMEM (the message is then gone). */
int st_job_say(st_job_t *sj, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clocks. st_mono_ns/st_wall_ms read the system clocks (for real waits
 * and durations); st_now_ns/st_now_ms read the controller's clock
 * (conf.clock: the system's, or a virtual one), which is what every
 * decision, lease, age and timestamp of the state uses. */
int64_t st_mono_ns(void);
int64_t st_wall_ms(void);
int64_t st_now_ns(const st_t *s);
int64_t st_now_ms(const st_t *s);
/* The CLOCK_MONOTONIC instant ms from now, for arb_cond_wait_until on
 * s->ev_cond or s->kick (both made by arb_cond_init). */
struct timespec st_deadline(int64_t ms);
/* Lamport: clock = max(clock, remote) + 1; returns it (persists the
 * high-water mark when needed). */
uint64_t st_tick(st_t *s, uint64_t remote);
/* Append an event (type like "job-placed"; job 0 / node NULL when none). */
uint64_t st_event(st_t *s, const char *type, uint64_t job, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* An event's store record (the state's own format, "events/LAMPORT"):
 * {"lamport", "time", "type", "message", "job" (when one), "node" (when
 * one)}, malloc'd text; NULL out of memory. */
char *st_event_record(const st_event_t *e);
/* A stored record back into *e (its names interned, its message
 * copied): -ENOMEM; a text that is no event gives an entry of type NULL. */
int st_event_decode(st_t *s, uint64_t lamport, const char *val, size_t n, st_event_t *e);
void st_event_clear(st_event_t *e); /* frees what *e owns */
/* *v for e (of type not NULL): its message copied; -ENOMEM. */
int st_event_view_of(const st_event_t *e, st_event_view_t *v);
/* Queue the current batch: the ticket for st_wait. */
int64_t st_flush(st_t *s);
/* A read: the ticket of everything seen. */
int64_t st_seen(st_t *s);
/* A long poll may have a new answer: wake the waiters on s->ev_cond and
 * tell the change hook (the API's suspended long polls). Caller holds s->mu. */
void st_changed(st_t *s);

/* Jobs. */
st_job_t *st_job_find(st_t *s, uint64_t id);
/* The spec sj was submitted with (malloc'd into *txt, *n bytes): its copy in
 * memory where it keeps one, else specs/ID from the store (written once at
 * submission). st_job_spec_same: 1 when it is body, 0 when not, < 0 when it
 * cannot be read (err says why). Caller holds s->mu. */
int st_job_spec_text(st_t *s, const st_job_t *sj, char **txt, size_t *n, arb_err_t *err);
int st_job_spec_same(st_t *s, const st_job_t *sj, const char *body, size_t n, arb_err_t *err);
/* Queue the job's record for writing, bumping its version. */
void st_job_save(st_t *s, st_job_t *sj, uint64_t lamport);
void st_job_retire(st_t *s, st_job_t *sj); /* drop from the active list */
int st_job_add(st_t *s, st_job_t *sj);     /* index by id, add to active */
void st_queue_seen(st_t *s, uint32_t name);
/* End sj (SUCCEEDED, FAILED, CANCELLED, TIMEOUT): release what it holds,
 * event, record. */
void st_finish_job(st_t *s, st_job_t *sj, arb_job_state_t to, const char *why);

#endif
