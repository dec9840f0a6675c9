/*
 * history.c: a bounded memory of ended jobs. The controller keeps the
 * newest conf.job_history ended jobs (config jobs.history, default 10,000)
 * in memory, for lists and reads; an older one is freed, its record staying
 * in the store, where st_job_stored reads it back for `arbiter job ID` (and
 * recovery leaves it undecoded: recover.c). So memory per ended job beyond
 * the history is constant: its slot in the id table, 8 bytes.
 *
 * A job leaves memory only once its final record is durable, so a read
 * from the store never sees an older version of it: each entry remembers
 * the group committer's last ticket when it was pushed (its final record
 * was then still in the state's batch, which goes out in the next ticket,
 * under the same lock); once a later ticket is durable, so is its record.
 * Node indexes (st_node_t.held) may still name an ended job; they are swept
 * before any job is freed. Jobs are freed only by st_history_trim, which the
 * scheduler thread calls between cycles, where no caller is walking a node
 * index or holding a job (a job that ends in the middle of a report is
 * never freed under that report).
 *
 * Locking: every function here expects s->mu held (state_int.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/jobrec.h"
#include "state/state_int.h"

#define HIST_SWEEP 256 /* jobs freed at a time, at most: one sweep of the node indexes each */

typedef struct st_hist_ent {
    uint64_t id;
    int64_t after; /* the committer's last ticket when it ended */
} st_hist_ent_t;

struct st_hist {
    st_hist_ent_t *v; /* a ring, oldest at head */
    size_t cap, n, head;
};

static int hist_grow(struct st_hist *h)
{
    size_t cap = h->cap ? h->cap * 2 : 1024;
    st_hist_ent_t *v = malloc(cap * sizeof *v);

    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < h->n; i++)
        v[i] = h->v[(h->head + i) % h->cap];
    free(h->v);
    h->v = v;
    h->cap = cap;
    h->head = 0;
    return 0;
}

/* Drop every node index entry of a job that no longer holds anything
 * (what the readers of held do one node at a time; node.c). */
static void sweep_held(st_t *s)
{
    for (uint32_t n = 0; n < s->cluster.nnodes; n++) {
        st_node_t *x = &s->nodes[n];
        for (int k = 0; k < x->nheld;)
            if (x->held[k]->active_ix >= 0)
                k++;
            else
                x->held[k] = x->held[--x->nheld];
    }
}

void st_history_trim(st_t *s)
{
    struct st_hist *h = s->hist;
    if (!h)
        return;
    size_t limit = (size_t)(s->conf.job_history > 0 ? s->conf.job_history : 0), nfree = 0;
    int64_t last = s->gc ? store_gc_last(s->gc) : 0;
    bool durable = !s->gc || store_gc_done(s->gc, last), swept = false;

    while (h->n > limit && nfree < HIST_SWEEP) {
        st_hist_ent_t *e = &h->v[h->head];
        if (s->gc && !(e->after < last && durable))
            break; /* not known durable yet: a later push or trim frees it */
        st_job_t *sj = st_job_find(s, e->id);
        if (sj && sj->active_ix < 0 && !sj->svc) {
            if (!swept) {
                sweep_held(s);
                swept = true;
            }
            s->jobs[e->id] = NULL;
            st_job_free(sj);
            s->nstored++;
        }
        h->head = (h->head + 1) % h->cap;
        h->n--;
        nfree++;
    }
}

void st_history_push(st_t *s, st_job_t *sj)
{
    if (!s->hist && !(s->hist = calloc(1, sizeof *s->hist)))
        return; /* only: this job stays in memory */
    struct st_hist *h = s->hist;
    if (h->n == h->cap && hist_grow(h) < 0)
        return;
    h->v[(h->head + h->n) % h->cap] =
        (st_hist_ent_t){.id = sj->id, .after = s->gc ? store_gc_last(s->gc) : 0};
    h->n++;
}

void st_history_free(st_t *s)
{
    if (s->hist)
        free(s->hist->v);
    free(s->hist);
    s->hist = NULL;
}

int st_job_stored(st_t *s, uint64_t id, st_job_t **out, arb_err_t *err)
{
    char key[40], *val = NULL;
    size_t n = 0;
    int state = -1, rc;
    json_t *o = NULL;
    st_jobrec_t r = {0};

    *out = NULL;
    snprintf(key, sizeof key, "jobs/%020llu", (unsigned long long)id);
    if ((rc = store_get(s->store, key, &val, &n, NULL, err)) < 0) {
        if (rc == -ENOENT)
            return arb_errf(err, -ENOENT, "job %llu: no such job", (unsigned long long)id);
        return rc;
    }
    /* straight from its text where it can be (jobrec.c), through jansson where not */
    if ((rc = st_jobrec_read(&r, val, n)) > 0) {
        o = json_loadb(val, n, 0, NULL);
        if (!json_is_object(o)) {
            json_decref(o);
            free(val);
            st_jobrec_clear(&r);
            return arb_errf(err, -ENOENT,
                            "job %llu ended and its record in the store (%s) is damaged: not a "
                            "JSON object",
                            (unsigned long long)id, key);
        }
        rc = st_jobrec_from_json(&r, o);
    }
    if (rc == 0)
        rc = st_job_decode(s, &r, out, &state, err);
    else
        rc = arb_errf(err, -ENOMEM, "out of memory");
    st_jobrec_clear(&r);
    json_decref(o);
    free(val);
    if (rc > 0) {
        char why[200];
        snprintf(why, sizeof why, "%.150s", err->msg);
        return arb_errf(err, -ENOENT, "job %llu: its record in the store (%s) is damaged: %s",
                        (unsigned long long)id, key, why);
    }
    return rc;
}
