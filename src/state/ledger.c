/*
 * ledger.c: the ground every file of src/state stands on: the Lamport clock
 * and the controller's clocks, the event log, the store batch of the
 * mutation in progress and its tickets, the change hooks, the job table
 * (find, add, retire, save, finish) and name interning. It calls nothing of
 * the operations above it (jobs.c, node.c, service.c, ...) but through the
 * hooks state_int.h names; scripts/lint.sh checks the layers.
 *
 * Every public function of the state takes s->mu, does its work in memory,
 * queues the store operations of that work as one batch (st_flush) and
 * returns the batch's ticket; the API waits for the ticket before it answers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state/jv.h"
#include "state/state_int.h"
#include "util/jsonw.h"
#include "util/textw.h"
#include "util/mtime.h"
#include "util/utf8.h"

const char *const st_task_state_names[] = {"pending", "assigned", "running",  "succeeded",
                                           "failed",  "lost",     "cancelled"};

const double st_cycle_buckets_ms[ST_HIST - 1] = {0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000};

#define CLOCK_BLOCK 1024 /* Lamport values reserved per persisted high-water mark */

/* ---- clocks, events, batches ------------------------------------------------------ */

int64_t st_mono_ns(void)
{
    return arb_mono_ns();
}

int64_t st_wall_ms(void)
{
    return arb_wall_ms();
}

int64_t st_now_ns(const st_t *s)
{
    return s->conf.clock.mono_ns ? s->conf.clock.mono_ns(s->conf.clock.arg) : st_mono_ns();
}

int64_t st_now_ms(const st_t *s)
{
    return s->conf.clock.wall_ms ? s->conf.clock.wall_ms(s->conf.clock.arg) : st_wall_ms();
}

struct timespec st_deadline(int64_t ms)
{
    return arb_deadline_ms(ms);
}

uint64_t st_tick(st_t *s, uint64_t remote)
{
    char v[32];

    s->clock = (remote > s->clock ? remote : s->clock) + 1;
    if (s->clock >= ST_LAMPORT_MAX)
        s->clock_spent = true; /* st_store_status says so: the process exits, a start renumbers */
    if (s->clock >= s->clock_hwm) {
        s->clock_hwm = s->clock + CLOCK_BLOCK;
        snprintf(v, sizeof v, "%llu", (unsigned long long)s->clock_hwm);
        store_batch_putstr(&s->batch, "meta/clock", v);
    }
    return s->clock;
}

/* e's wall time as jv_time's text (or the stored text it kept). */
static void event_time(const st_event_t *e, char *buf, size_t n)
{
    if (e->time_ms != ST_EVENT_TIME_TEXT)
        jv_time(e->time_ms, buf, n);
    else
        snprintf(buf, n, "%s", e->msg ? e->msg + strlen(e->msg) + 1 : "");
}

/* The milliseconds of a time text that jv_time gives back byte for byte;
 * ST_EVENT_TIME_TEXT for any other text. */
static int64_t time_ms_of(const char *t)
{
    struct tm tm;
    int ms = -1, end = 0;
    char back[32];
    int64_t v;

    memset(&tm, 0, sizeof tm);
    if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &end) != 7 ||
        t[end] || ms < 0)
        return ST_EVENT_TIME_TEXT;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    v = (int64_t)timegm(&tm) * 1000 + ms;
    jv_time(v, back, sizeof back);
    return strcmp(back, t) == 0 ? v : ST_EVENT_TIME_TEXT;
}

char *st_event_record(const st_event_t *e)
{
    char time[32];
    arb_buf_t b = {0};
    arb_jw_t w;

    /* written as it goes (jsonw.h): the bytes json_pack and json_dumps gave
     * for the same members, without the tree (a third of an event's cost) */
    event_time(e, time, sizeof time);
    arb_jw_begin(&w, &b);
    arb_jw_obj(&w);
    arb_jw_key(&w, "lamport"), arb_jw_int(&w, (int64_t)e->lamport);
    arb_jw_key(&w, "time"), arb_jw_str(&w, time);
    arb_jw_key(&w, "type"), arb_jw_str(&w, e->type ? e->type : "");
    arb_jw_key(&w, "message"), arb_jw_str(&w, e->msg ? e->msg : "");
    if (e->job)
        arb_jw_key(&w, "job"), arb_jw_int(&w, (int64_t)e->job);
    if (e->node) /* not UTF-8: left out, as json_string's NULL left it out */
        arb_jw_kstr_opt(&w, "node", e->node);
    arb_jw_obj_end(&w);
    if (arb_jw_end(&w) < 0) {
        arb_buf_free(&b);
        return NULL;
    }
    return arb_buf_take(&b);
}

int st_event_decode(st_t *s, uint64_t lamport, const char *val, size_t n, st_event_t *e)
{
    json_t *o = json_loadb(val, n, 0, NULL);
    const char *type = json_string_value(json_object_get(o, "type"));
    const char *msg = json_string_value(json_object_get(o, "message"));
    const char *time = json_string_value(json_object_get(o, "time"));
    const char *node = json_string_value(json_object_get(o, "node"));
    int rc = 0;

    memset(e, 0, sizeof *e);
    e->lamport = lamport;
    if (!o) /* unreadable: kept for its place in the log, shown to nobody */
        return 0;
    e->job = (uint64_t)json_integer_value(json_object_get(o, "job"));
    if (!msg)
        msg = "";
    e->time_ms = time_ms_of(time ? time : "");
    if (e->time_ms != ST_EVENT_TIME_TEXT)
        e->msg = strdup(msg);
    else { /* the time's text after the message's NUL */
        size_t a = strlen(msg) + 1, b = strlen(time ? time : "") + 1;
        if ((e->msg = malloc(a + b))) {
            memcpy(e->msg, msg, a);
            memcpy(e->msg + a, time ? time : "", b);
        }
    }
    if ((type && !(e->type = st_name(s, type))) || (node && !(e->node = st_name(s, node))) ||
        !e->msg)
        rc = -ENOMEM;
    json_decref(o);
    return rc;
}

int st_event_view_of(const st_event_t *e, st_event_view_t *v)
{
    memset(v, 0, sizeof *v);
    v->lamport = e->lamport;
    event_time(e, v->time, sizeof v->time);
    v->type = e->type;
    v->job = e->job;
    v->node = e->node;
    return (v->message = strdup(e->msg ? e->msg : "")) ? 0 : -ENOMEM;
}

void st_event_clear(st_event_t *e)
{
    free(e->msg);
    memset(e, 0, sizeof *e);
}

/* A store key, PREFIX and "%020llu" of v, into key (strlen(prefix) + 21
 * bytes), without snprintf: written for every event and every job save. */
static void store_key(char *key, const char *prefix, uint64_t v)
{
    size_t n = strlen(prefix);

    memcpy(key, prefix, n);
    key[n + arb_tw_u64_pad(key + n, v, 20)] = '\0';
}

uint64_t st_event(st_t *s, const char *type, uint64_t job, const char *node, const char *fmt, ...)
{
    char msg[512], key[40];
    va_list ap;
    uint64_t lam = st_tick(s, 0);
    st_event_t ev = {.lamport = lam, .job = job};
    char *txt;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    arb_utf8_fix(msg); /* cut inside a character, or not text: JSON would refuse it */
    ev.time_ms = st_now_ms(s);
    ev.type = st_name(s, type);
    ev.node = node ? st_name(s, node) : NULL;
    if (!ev.type || (node && !ev.node) || !(ev.msg = strdup(msg)))
        goto oom;
    if (!(txt = st_event_record(&ev)))
        goto oom;
    store_key(key, "events/", lam);
    store_batch_putstr(&s->batch, key, txt);
    free(txt);
    if (s->ring_n == s->ring_cap) { /* evict the oldest, in memory and in the store */
        st_event_t *old = &s->ring[s->ring_head];
        store_key(key, "events/", old->lamport);
        store_batch_del(&s->batch, key);
        st_event_clear(old);
        s->ring_head = (s->ring_head + 1) % s->ring_cap;
        s->ring_n--;
    }
    s->ring[(s->ring_head + s->ring_n) % s->ring_cap] = ev;
    s->ring_n++;
    st_changed(s);
    return lam;
oom:
    free(ev.msg);
    return lam;
}

int64_t st_flush(st_t *s)
{
    if (s->batch.nops == 0)
        return store_gc_last(s->gc);
    return store_gc_enqueue(s->gc, &s->batch);
}

int64_t st_seen(st_t *s)
{
    return store_gc_last(s->gc);
}

void st_changed(st_t *s)
{
    pthread_cond_broadcast(&s->ev_cond);
    if (s->chg_fn)
        s->chg_fn(s->chg_arg);
}

void st_set_change_hook(st_t *s, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&s->mu);
    s->chg_fn = fn;
    s->chg_arg = arg;
    pthread_mutex_unlock(&s->mu);
}

void st_set_node_hook(st_t *s, void (*fn)(void *arg, uint32_t key), void *arg)
{
    pthread_mutex_lock(&s->mu);
    s->node_fn = fn;
    s->node_arg = arg;
    pthread_mutex_unlock(&s->mu);
}

void st_set_durable_hook(st_t *s, void (*fn)(void *arg), void *arg)
{
    store_gc_on_durable(s->gc, fn, arg); /* not under s->mu: fn never takes it */
}

bool st_stopping(st_t *s)
{
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

bool st_done(st_t *s, int64_t ticket)
{
    return ticket <= 0 || store_gc_done(s->gc, ticket);
}

int st_wait(st_t *s, int64_t ticket, arb_err_t *err)
{
    if (ticket < 0)
        return arb_errf(err, -EIO, "the store failed earlier; the controller must restart");
    return store_gc_wait(s->gc, ticket, err);
}

int st_store_status(st_t *s, arb_err_t *err)
{
    if (__atomic_load_n(&s->clock_spent, __ATOMIC_RELAXED))
        return arb_errf(err, -ERANGE,
                        "the Lamport clock reached its limit (%llu); a restart renumbers it",
                        (unsigned long long)ST_LAMPORT_MAX);
    return store_gc_status(s->gc, err);
}

void st_inject_store_failure(st_t *s, int n)
{
    store_gc_inject_failure(s->gc, n);
}

/* ---- job bookkeeping ------------------------------------------------------------------ */

int st_job_spec_text(st_t *s, const st_job_t *sj, char **txt, size_t *n, arb_err_t *err)
{
    char key[40];
    int rc;

    *txt = NULL;
    *n = 0;
    if (sj->spec) {
        if (!(*txt = malloc(sj->speclen + 1)))
            return arb_errf(err, -ENOMEM, "out of memory");
        memcpy(*txt, sj->spec, sj->speclen + 1);
        *n = sj->speclen;
        return 0;
    }
    snprintf(key, sizeof key, "specs/%020llu", (unsigned long long)sj->id);
    rc = store_get(s->store, key, txt, n, NULL, err);
    if (rc == -ENOENT) {
        /* written at its submission, perhaps not yet committed (group
         * commit): wait for what is queued, then read again */
        if ((rc = store_gc_wait(s->gc, store_gc_last(s->gc), err)) == 0)
            rc = store_get(s->store, key, txt, n, NULL, err);
    }
    if (rc == -ENOENT)
        return arb_errf(err, -ENOENT, "job %llu: its spec is not in the store (%s)",
                        (unsigned long long)sj->id, key);
    return rc < 0 ? rc : 0;
}

int st_job_spec_same(st_t *s, const st_job_t *sj, const char *body, size_t n, arb_err_t *err)
{
    char *txt = NULL;
    size_t len = 0;
    int rc = st_job_spec_text(s, sj, &txt, &len, err);

    if (rc == 0)
        rc = len == n && memcmp(txt, body, n) == 0;
    free(txt);
    return rc;
}

st_job_t *st_job_find(st_t *s, uint64_t id)
{
    return id > 0 && id < s->next_id && id < s->capjobs ? s->jobs[id] : NULL;
}

const char *st_name(st_t *s, const char *name)
{
    char cut[ST_NAME_MAX];
    size_t n = name ? strnlen(name, sizeof cut - 1) : 0;
    uint32_t id;

    memcpy(cut, name ? name : "", n); /* snprintf's cut, without its cost (every event) */
    cut[n] = '\0';
    if (!cut[0])
        return "";
    if (!(id = arb_intern(&s->names, cut)))
        return NULL;
    return arb_str(&s->names, id); /* each string its own allocation: it never moves */
}

int st_job_say(st_job_t *sj, const char *fmt, ...)
{
    char buf[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    arb_utf8_fix(buf); /* a name cut inside a character by the buffer's size */
    if (sj->message && strcmp(sj->message, buf) == 0)
        return 0; /* the same words: kept (a caller may hold the old pointer) */
    free(sj->message);
    sj->message = NULL;
    if (!buf[0])
        return 0;
    return (sj->message = strdup(buf)) ? 0 : -ENOMEM;
}

int st_job_add(st_t *s, st_job_t *sj)
{
    if (sj->id >= s->capjobs) {
        uint64_t cap = s->capjobs ? s->capjobs : 1024;
        while (cap <= sj->id)
            cap *= 2;
        st_job_t **v = realloc(s->jobs, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        memset(v + s->capjobs, 0, (cap - s->capjobs) * sizeof *v);
        s->jobs = v;
        s->capjobs = cap;
    }
    sj->active_ix = -1;
    if (sj->j->state < ARB_JOB_SUCCEEDED) { /* not ended */
        if (s->nactive == s->capactive) {
            int cap = s->capactive ? s->capactive * 2 : 1024;
            st_job_t **v = realloc(s->active, (size_t)cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            s->active = v;
            s->capactive = cap;
        }
        sj->active_ix = s->nactive;
        s->active[s->nactive++] = sj;
    }
    if (!s->jobs[sj->id])
        s->njobs++;
    s->jobs[sj->id] = sj;
    if (sj->id >= s->next_id)
        s->next_id = sj->id + 1;
    st_queue_seen(s, sj->j->queue);
    return 0;
}

void st_job_retire(st_t *s, st_job_t *sj)
{
    int i = sj->active_ix;

    if (i < 0)
        return;
    s->active[i] = s->active[--s->nactive];
    s->active[i]->active_ix = i;
    sj->active_ix = -1;
    s->lops->retired(s, sj); /* into the history (history.c) */
}

void st_queue_seen(st_t *s, uint32_t name)
{
    for (int i = 0; i < s->nqueues; i++)
        if (s->queues[i] == name)
            return;
    uint32_t *v = realloc(s->queues, (size_t)(s->nqueues + 1) * sizeof *v);
    if (!v)
        return;
    s->queues = v;
    s->queues[s->nqueues++] = name;
}

void st_job_save(st_t *s, st_job_t *sj, uint64_t lamport)
{
    char key[40];
    char *rec;

    sj->version++;
    if (lamport)
        sj->lamport_update = lamport;
    sj->last = sj->j->state;
    s->lops->saved(s, sj);        /* its nodes' agents' long polls look again (node.c) */
    rec = s->lops->record(s, sj); /* codec.c: the store record's encoder */
    if (!rec)
        return;
    store_key(key, "jobs/", sj->id);
    store_batch_putstr(&s->batch, key, rec);
    free(rec);
}

/* End sj (SUCCEEDED, FAILED, CANCELLED, TIMEOUT): release what it holds,
 * event, record. */
void st_finish_job(st_t *s, st_job_t *sj, arb_job_state_t to, const char *why)
{
    arb_err_t err;
    int nalloc = sj->j->nalloc;

    if (arb_sched_finish(s->sched, sj->j, to, &err) < 0)
        return;
    for (int t = 0; t < sj->ntasks; t++)
        if (sj->tasks[t].state == TK_ASSIGNED || sj->tasks[t].state == TK_RUNNING)
            sj->tasks[t].state = to == ARB_JOB_SUCCEEDED ? TK_SUCCEEDED
                                 : to == ARB_JOB_FAILED
                                     ? TK_FAILED
                                     : TK_CANCELLED; /* or stopped at its limit */
    (void)nalloc;
    sj->end_ms = st_now_ms(s);
    sj->stop = false;
    sj->stop_then = ST_THEN_CANCEL;
    st_job_say(sj, "%s", why);
    uint64_t lam =
        st_event(s,
                 to == ARB_JOB_CANCELLED   ? "job-cancelled"
                 : to == ARB_JOB_SUCCEEDED ? "job-succeeded"
                 : to == ARB_JOB_TIMEOUT   ? "job-timeout"
                                           : "job-failed",
                 sj->id, NULL, "job %llu '%s': %s", (unsigned long long)sj->id, sj->j->name, why);
    st_job_save(s, sj, lam);
    st_job_retire(s, sj);
    /* Out of the scheduler's working set: every later cycle would walk it.
     * The record stays here, as a recovered ended job's does. */
    if (!sj->own_j && arb_sched_forget(s->sched, sj->j, NULL) == 0)
        sj->own_j = true;
    if (to == ARB_JOB_CANCELLED)
        s->m_cancelled++;
    else
        s->m_finished++;
    st_kick(s);
}
