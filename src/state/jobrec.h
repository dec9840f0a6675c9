/*
 * jobrec.h: a job's store record as recovery reads it (st_jobrec_t): its
 * fixed top-level members, taken either straight from the text
 * st_job_record writes (st_jobrec_read, no jansson tree: what a restart
 * over many kept jobs spent most of its time building and freeing) or from
 * a jansson object (st_jobrec_from_json: any record the text reader does
 * not take, a service's or a shrinking job's with their extras, an odd
 * one). Both give the same values for the same record (tests/unit/
 * test_jobrec.c); st_job_decode (recover.c) builds the job from either.
 */
#ifndef ARB_STATE_JOBREC_H
#define ARB_STATE_JOBREC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Values shared between the records one reader reads (jobrec.c). */
typedef struct st_jobrec_share st_jobrec_share_t;
st_jobrec_share_t *st_jobrec_share_new(void); /* NULL: out of memory */
void st_jobrec_share_free(st_jobrec_share_t *t);

/* a task's [state, exit code or null, node it last had] */
typedef struct st_rec_task {
    int64_t state, exit_code;
    bool has_exit;
    const char *node; /* NULL: none named */
} st_rec_task_t;

/* a held task's [node or null, GPU mask, milli, MiB] */
typedef struct st_rec_alloc {
    int64_t mask, milli, mib;
    const char *node; /* NULL: not a name */
    bool null_node;   /* an ended task's slot, holding nothing */
} st_rec_alloc_t;

/*
 * The members as jansson's accessors gave them: a number absent (or not an
 * integer) is 0, a flag absent is false (restartable: true), a text absent
 * is NULL. command and env are references the record holds (NULL: absent
 * or null). o is the jansson object where the record came from one (its
 * extras: shrink, svc_*), else NULL. Texts point into the record's own
 * buffer, valid until the next read or st_jobrec_clear.
 */
typedef struct st_jobrec {
    const json_t *o;
    uint64_t id, version, lamport_submit, lamport_update, attempt, epoch, stop_then, resize_gen;
    int64_t submit_ms, start_ms, end_ms, priority, time_limit_s;
    const char *team, *owner, *message, *state, *spec, *core;
    size_t speclen, corelen;
    bool yaml, delivered, stop, restartable, preemptible, has_priority, has_time_limit;
    json_t *command, *env;
    st_rec_task_t *tasks;
    st_rec_alloc_t *alloc;
    size_t ntasks, nalloc, taskcap, alloccap;
    char *buf; /* the texts, decoded */
    size_t bufcap;
    st_jobrec_share_t *share; /* set by the caller, NULL none: command and env values
                                 of the same text are one value (never changed once held) */
} st_jobrec_t;

/* Read the record text v[0..n) as st_job_record writes it: 0 read; 1 not
 * in that form (another member, another type, an escape jansson refuses,
 * not JSON at all), r left for st_jobrec_from_json; -ENOMEM. */
int st_jobrec_read(st_jobrec_t *r, const char *v, size_t n);

/* Take the members of the jansson object o (kept as r->o): 0 or -ENOMEM. */
int st_jobrec_from_json(st_jobrec_t *r, const json_t *o);

/* Whether a and b hold the same values (the tests and fuzz_jobrec compare
 * the two readers with it). */
bool st_jobrec_same(const st_jobrec_t *a, const st_jobrec_t *b);

/* Release what the last read holds, keeping the buffers for the next. */
void st_jobrec_reset(st_jobrec_t *r);

/* Release everything. */
void st_jobrec_clear(st_jobrec_t *r);

#endif
