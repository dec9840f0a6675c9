/*
 * depend.c: the controller's job dependencies and array throttles (Slurm's
 * --dependency and --array=...%N; a job spec's "dependency" and "array").
 * The scheduler asks st_dep_hold at each pending job's turn in the cycle
 * (arb_sched_set_hold); it reads the named jobs' states as the cycle has
 * left them so far, so an element placed a moment ago counts against its
 * array's throttle in the same cycle.
 *
 * A job named by a dependency, and what it must do (spec/depend.c reads
 * the text):
 *
 *   after       it started (PLACED or later), or ended without starting;
 *               with +MIN, MIN minutes after it started
 *   afterany    it ended (SUCCEEDED, FAILED, CANCELLED, TIMEOUT)
 *   afterok     it SUCCEEDED; ended otherwise: never met
 *   afternotok  it FAILED, was CANCELLED or TIMED OUT; SUCCEEDED: never met
 *   aftercorr   read as afterok; afterburstbuffer as afterany
 *   singleton   no job of the same name and owner submitted before it is
 *               still there (pending or running)
 *
 * An array's first element's id (SLURM_ARRAY_JOB_ID) names the whole array
 * (every element must do it; afternotok: all ended, one not ok), ID_TASK
 * one element. ',' joins terms that must all be met, '?' terms of which
 * one is enough. A job named that the controller no longer has (a damaged
 * record) counts as met, as Slurm does with a purged job.
 *
 * Never met: the job stays pending with reason dependency-never-satisfied
 * (squeue: DependencyNeverSatisfied), as Slurm does without
 * kill_invalid_depend; cancelling it is the user's call.
 */
#include <errno.h>
#include <libfyaml.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/depend.h"
#include "spec/sval.h"
#include "state/state_int.h"

struct st_dep {
    spec_dep_t d; /* d.n == 0: no dependency */
    char text[256];
    bool array;        /* an element of an array */
    uint64_t array_of; /* the array's first element's id; 0: this job is the first */
    int32_t task, count, throttle;
};

enum { MET, WAIT, NEVER };

void fy_node_pair_free(struct fy_node_pair *fynp);

static void fy_pair_drop(struct fy_node *map, const char *key)
{
    struct fy_node_pair *p = fy_node_mapping_lookup_pair_by_string(map, key, FY_NT);
    if (p && fy_node_mapping_remove(map, p) == 0)
        fy_node_pair_free(p);
}

int st_dep_take(sx_t *x, struct fy_node *root, st_dep_t **out)
{
    static const char *const akeys[] = {"job", "task", "count", "throttle", NULL};
    sval_t rv, v, f;
    st_dep_t *d = NULL;
    int64_t n;
    int rc = 0;

    *out = NULL;
    sv_root(&rv, root, "");
    bool has_dep = sv_get(&rv, "dependency", &v), has_arr = sv_get(&rv, "array", &f);
    if (!has_dep && !has_arr)
        return 0;
    if (!(d = calloc(1, sizeof *d)))
        return sv_oom(x, &rv);
    d->task = -1;
    if (has_dep) {
        arb_err_t e = {{0}};
        if ((rc = sv_text(x, &v, d->text, sizeof d->text, false)) < 0)
            goto out;
        if (spec_dep_parse(d->text, &d->d, &e) < 0) {
            rc = sv_fail(x, &v, -EINVAL, "%s", e.msg);
            goto out;
        }
    }
    if (has_arr) {
        bool is = false;
        sval_t k;
        if ((rc = sv_map(x, &f, &is)) < 0 || (rc = sv_check_keys(x, &f, akeys)) < 0)
            goto out;
        d->array = true;
        if (sv_get(&f, "job", &k)) {
            if ((rc = sv_int(x, &k, 0, INT64_MAX / 2, &n)) < 0)
                goto out;
            d->array_of = (uint64_t)n;
        }
        if (sv_get(&f, "task", &k) && (rc = sv_int32(x, &k, 0, INT32_MAX, &d->task)) < 0)
            goto out;
        if (sv_get(&f, "count", &k) && (rc = sv_int32(x, &k, 1, 1000000, &d->count)) < 0)
            goto out;
        if (sv_get(&f, "throttle", &k) && (rc = sv_int32(x, &k, 0, 1000000, &d->throttle)) < 0)
            goto out;
    }
    fy_pair_drop(root, "dependency");
    fy_pair_drop(root, "array");
    *out = d;
    d = NULL;
out:
    free(d);
    return rc;
}

void st_dep_free(st_dep_t *d)
{
    free(d);
}

bool st_dep_parts(const st_dep_t *d, st_dep_parts_t *out)
{
    if (!d)
        return false;
    snprintf(out->text, sizeof out->text, "%s", d->text);
    out->array = d->array;
    out->array_of = d->array_of;
    out->task = d->task;
    out->count = d->count;
    out->throttle = d->throttle;
    return true;
}

int st_dep_make(const st_dep_parts_t *p, st_dep_t **out, arb_err_t *err)
{
    st_dep_t *d = calloc(1, sizeof *d);

    *out = NULL;
    if (!d)
        return arb_errf(err, -ENOMEM, "out of memory");
    snprintf(d->text, sizeof d->text, "%s", p->text);
    if (d->text[0] && spec_dep_parse(d->text, &d->d, err) < 0) {
        free(d);
        return -EINVAL;
    }
    d->array = p->array;
    d->array_of = p->array_of;
    d->task = p->task;
    d->count = p->count;
    d->throttle = p->throttle;
    *out = d;
    return 0;
}

int st_dep_check(st_t *s, const st_dep_t *d, arb_err_t *err)
{
    if (!d)
        return 0;
    for (int i = 0; i < d->d.n; i++) {
        uint64_t id = d->d.t[i].job;
        if (d->d.t[i].type != SPEC_DEP_SINGLETON && !st_job_find(s, id))
            return arb_errf(err, -EINVAL,
                            "dependency '%s': job %llu: no such job (name jobs already "
                            "submitted: sbatch --parsable prints the id)",
                            d->text, (unsigned long long)id);
    }
    if (d->array_of && !st_job_find(s, d->array_of))
        return arb_errf(err, -EINVAL, "array: job %llu: no such job (the array's first element)",
                        (unsigned long long)d->array_of);
    return 0;
}

static bool ended(arb_job_state_t st)
{
    return st >= ARB_JOB_SUCCEEDED;
}

/* What one job does for a term of type t. */
static int one(st_t *s, const st_job_t *p, const spec_dep_term_t *t)
{
    arb_job_state_t st = p->j->state;

    switch (t->type) {
    case SPEC_DEP_AFTER:
        if (st == ARB_JOB_PENDING && !p->start_ms)
            return WAIT;
        if (t->delay_min && !ended(st))
            return p->start_ms && st_now_ms(s) >= p->start_ms + (int64_t)t->delay_min * 60000
                       ? MET
                       : WAIT;
        return MET;
    case SPEC_DEP_ANY:
    case SPEC_DEP_BURST:
        return ended(st) ? MET : WAIT;
    case SPEC_DEP_OK:
    case SPEC_DEP_CORR:
        return st == ARB_JOB_SUCCEEDED ? MET : ended(st) ? NEVER : WAIT;
    case SPEC_DEP_NOTOK:
        return st == ARB_JOB_SUCCEEDED ? NEVER : ended(st) ? MET : WAIT;
    }
    return MET;
}

/* The array whose first element is head: visit each element (head
 * included) until fn says stop. Elements follow their first in ids. */
static bool in_array(const st_job_t *e, uint64_t head)
{
    return e->dep && e->dep->array &&
           (e->id == head ? !e->dep->array_of : e->dep->array_of == head);
}

/* A term over the job it names: all elements of an array, or one. */
static int term(st_t *s, const spec_dep_term_t *t)
{
    st_job_t *p = st_job_find(s, t->job);
    if (!p)
        return MET;
    bool arr = in_array(p, p->id);
    if (!arr && t->task < 0)
        return one(s, p, t);
    int seen = 0, count = arr && p->dep->count > 0 ? p->dep->count : 1 << 30;
    int wait = 0, never = 0, failed = 0;
    for (uint64_t id = p->id; id < s->next_id && seen < count; id++) {
        st_job_t *e = st_job_find(s, id);
        if (!e || !in_array(e, p->id))
            continue;
        seen++;
        if (t->task >= 0 && e->dep->task != t->task)
            continue;
        int r = one(s, e, t);
        wait += r == WAIT, never += r == NEVER;
        failed += ended(e->j->state) && e->j->state != ARB_JOB_SUCCEEDED;
        if (t->task >= 0)
            return r;
    }
    if (t->task >= 0)
        return MET;                /* no such element: as a purged job */
    if (t->type == SPEC_DEP_NOTOK) /* the array: all ended, one not ok */
        return wait ? WAIT : failed ? MET : NEVER;
    return never ? NEVER : wait ? WAIT : MET;
}

static int singleton(st_t *s, const st_job_t *sj)
{
    for (int i = 0; i < s->nactive; i++) {
        const st_job_t *o = s->active[i];
        if (o->id < sj->id && !o->svc && !o->svc_of && !ended(o->j->state) &&
            !strcmp(o->j->name, sj->j->name) && !strcmp(o->owner, sj->owner))
            return WAIT;
    }
    return MET;
}

static int deps(st_t *s, const st_job_t *sj)
{
    const st_dep_t *d = sj->dep;
    int met = 0, wait = 0, never = 0;

    for (int i = 0; i < d->d.n; i++) {
        const spec_dep_term_t *t = &d->d.t[i];
        int r = t->type == SPEC_DEP_SINGLETON ? singleton(s, sj) : term(s, t);
        wait += r == WAIT, never += r == NEVER;
    }
    if (d->d.any)
        return met ? MET : wait ? WAIT : never ? NEVER : MET;
    return never ? NEVER : wait ? WAIT : MET;
}

/* Elements of sj's array that hold room now, up to max. */
static int running(st_t *s, const st_job_t *sj, int max)
{
    uint64_t head = sj->dep->array_of ? sj->dep->array_of : sj->id;
    int n = 0, seen = 0, count = sj->dep->count > 0 ? sj->dep->count : 1 << 30;

    for (uint64_t id = head; id < s->next_id && seen < count && n < max; id++) {
        st_job_t *e = st_job_find(s, id);
        if (!e || !in_array(e, head))
            continue;
        seen++;
        n += e->j->state == ARB_JOB_PLACED || e->j->state == ARB_JOB_RUNNING;
    }
    return n;
}

arb_wait_t st_dep_hold(void *arg, const arb_job_t *j)
{
    st_t *s = arg;
    st_job_t *sj = st_job_find(s, j->ext_id);

    if (!sj || sj->j != j || !sj->dep)
        return ARB_WAIT_NONE;
    if (sj->dep->d.n) {
        int r = deps(s, sj);
        if (r != MET)
            return r == NEVER ? ARB_WAIT_DEP_NEVER : ARB_WAIT_DEPENDENCY;
    }
    if (sj->dep->throttle > 0 && running(s, sj, sj->dep->throttle) >= sj->dep->throttle)
        return ARB_WAIT_THROTTLE;
    return ARB_WAIT_NONE;
}

int st_dep_view(const st_job_t *sj, st_job_view_t *v)
{
    const st_dep_t *d = sj->dep;
    if (!d)
        return 0;
    if (d->d.n && !(v->dependency = strdup(d->text)))
        return -ENOMEM;
    if (d->array) {
        v->array = true;
        v->array_job = d->array_of ? d->array_of : sj->id;
        v->array_task = (int)d->task;
        v->array_count = d->count;
        v->array_throttle = d->throttle;
    }
    return 0;
}

void st_dep_explain(st_t *s, const st_job_t *sj, arb_wait_t why, char *buf, size_t n)
{
    const st_dep_t *d = sj->dep;
    size_t off = 0;

    if (!d || !n)
        return;
    buf[0] = '\0';
    if (why == ARB_WAIT_THROTTLE) {
        snprintf(buf, n,
                 "job '%s' is held: array %llu runs %d elements at once, its throttle (%%%d); "
                 "it starts when one of them ends",
                 sj->j->name, (unsigned long long)(d->array_of ? d->array_of : sj->id),
                 (int)d->throttle, (int)d->throttle);
        return;
    }
    off += (size_t)snprintf(buf, n, "job '%s' is held by its dependency %s:", sj->j->name, d->text);
    for (int i = 0; i < d->d.n && off < n; i++) {
        const spec_dep_term_t *t = &d->d.t[i];
        int r = t->type == SPEC_DEP_SINGLETON ? singleton(s, sj) : term(s, t);
        const st_job_t *p = t->type == SPEC_DEP_SINGLETON ? NULL : st_job_find(s, t->job);
        char who[48];
        if (t->type == SPEC_DEP_SINGLETON)
            snprintf(who, sizeof who, "singleton");
        else if (t->task >= 0)
            snprintf(who, sizeof who, "%s:%llu_%d", spec_dep_type_name(t->type),
                     (unsigned long long)t->job, (int)t->task);
        else
            snprintf(who, sizeof who, "%s:%llu", spec_dep_type_name(t->type),
                     (unsigned long long)t->job);
        off += (size_t)snprintf(buf + off, n - off, "%s %s %s%s%s",
                                i ? (d->d.any ? " or" : ",") : "", who,
                                r == MET     ? "met"
                                : r == NEVER ? "can never be met"
                                             : "waiting",
                                p ? (r == MET ? "" : " (it is ") : "",
                                p ? (r == MET ? "" : arb_job_state_name(p->j->state)) : "");
        if (p && r != MET && off < n)
            off += (size_t)snprintf(buf + off, n - off, ")");
    }
}
