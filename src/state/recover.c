/*
 * recover.c: rebuilding the resource manager from the store at start.
 *
 * Order matters:
 *   1. meta/epoch + 1 becomes this run's epoch (written before anything is
 *      served, so every assignment made from now on carries a newer epoch
 *      than any made before the restart);
 *   2. meta/clock, the Lamport high-water mark, becomes the clock;
 *   3. nodes, in their original order, each with a fresh lease;
 *   4. jobs in id order, so the scheduler's submission order, and with it
 *      FIFO and priority tie order, is what it was; placed and running jobs
 *      re-charge their allocations through arb_node_alloc, which refuses
 *      anything over capacity: a conflicting allocation is never
 *      double-booked, the job is requeued and an event says why. A
 *      restored allocation is re-stamped with this run's epoch: this
 *      controller has re-validated it, so it is this epoch's assignment
 *      (agents refuse to start assignments of an older epoch than the
 *      newest they have seen; without the re-stamp a job placed but not
 *      yet started before the restart would never start). Tasks already
 *      running keep their attempt, so their agents keep them. A job keeps
 *      the priority (and preemptible) it was given at submission, stored in
 *      its record: a priorityClassName removed from the config since still
 *      resolves, to that value, and an event (job-priority-kept) says so;
 *   5. the event log (the newest conf.event_retention events);
 *   6. a clock past ST_LAMPORT_REBASE is renumbered, every order kept
 *      (rebase_clock).
 * All writes recovery itself makes go in one transaction before st_open
 * returns.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/jobrec.h"
#include "state/jv.h"
#include "state/state_int.h"
#include "util/log.h"

typedef struct rec_list {
    st_t *s;
    json_t **v; /* each with its store key as "_key" */
    size_t n, cap;
    bool oom;
} rec_list_t;

/*
 * A record that cannot be recovered: named by its key, counted, never
 * counted as recovered. A damaged job's id is never handed out again (its
 * key says it was used). st_recover says how many at the end, in the log
 * and as an event.
 */
static void damaged(st_t *s, const char *key, const char *why)
{
    arb_log(ARB_LOG_WARN, "store", "record '%s' is damaged (%s); skipped: what it held is lost",
            key, why);
    if (s->ndamaged < (int)(sizeof s->damaged / sizeof s->damaged[0]))
        snprintf(s->damaged[s->ndamaged], sizeof s->damaged[0], "%s", key);
    s->ndamaged++;
    if (strncmp(key, "jobs/", 5) == 0) {
        uint64_t id = strtoull(key + 5, NULL, 10);
        if (id >= s->next_id && id < UINT64_MAX / 2)
            s->next_id = id + 1;
    }
}

static const char *key_of(const json_t *o)
{
    return json_string_value(json_object_get(o, "_key")) ?: "?";
}

static int collect(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    rec_list_t *l = arg;
    json_t *o = json_loadb(val, n, 0, NULL);

    (void)rev;
    if (!json_is_object(o)) {
        json_decref(o);
        damaged(l->s, key, "not a JSON object");
        return 0;
    }
    json_object_set_new(o, "_key", json_string(key));
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        json_t **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            json_decref(o);
            l->oom = true;
            return -ENOMEM;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = o;
    return 0;
}

static void list_free(rec_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        json_decref(l->v[i]);
    free(l->v);
}

static int cmp_idx(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "idx"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "idx"));
    return x < y ? -1 : x > y;
}

static uint64_t get_u64(const json_t *o, const char *k)
{
    return (uint64_t)json_integer_value(json_object_get(o, k));
}

static int64_t meta_get(st_t *s, const char *key)
{
    char *v = NULL;
    int64_t x = 0;

    if (store_get(s->store, key, &v, NULL, NULL, NULL) == 0)
        x = strtoll(v, NULL, 10);
    free(v);
    return x;
}

/* ---- nodes -------------------------------------------------------------------------- */

static int recover_nodes(st_t *s, arb_err_t *err)
{
    rec_list_t l = {.s = s};
    int rc = store_scan(s->store, "nodes/", collect, &l, err);

    if (rc < 0 || l.oom) {
        list_free(&l);
        return rc < 0 ? rc : arb_errf(err, -ENOMEM, "out of memory");
    }
    if (l.n > 1)
        qsort(l.v, l.n, sizeof *l.v, cmp_idx);
    for (size_t i = 0; i < l.n && rc == 0; i++) {
        json_t *o = l.v[i], *inv = json_object_get(o, "inventory");
        const char *name = json_string_value(json_object_get(o, "name"));
        arb_node_t *n;
        arb_err_t e2;
        if (!name || !json_is_object(inv) || st_inventory_check(inv, &e2) < 0) {
            damaged(s, key_of(o), !name ? "no name" : "its inventory does not load");
            continue;
        }
        if ((rc = st_nodes_grow(s)) < 0 ||
            (rc = arb_cluster_add_node(&s->cluster, name, &n, err)) < 0)
            break;
        st_node_t *x = st_node_ext(s, n);
        memset(x, 0, sizeof *x);
        if ((rc = st_node_apply_inventory(s, n, inv, err)) < 0)
            break;
        x->inventory = json_incref(inv);
        snprintf(x->addr, sizeof x->addr, "%s",
                 json_string_value(json_object_get(inv, "address")) ?: "");
        x->version = get_u64(o, "version");
        json_t *op = json_object_get(o, "operator");
        x->op = json_is_object(op) ? json_deep_copy(op) : NULL;
        snprintf(x->reason, sizeof x->reason, "%s",
                 json_string_value(json_object_get(o, "reason")) ?: "");
        st_node_apply_meta(s, n);      /* its labels and taints, operators' word on top */
        x->report_mono = st_now_ns(s); /* a fresh lease */
        n->report_ns = x->report_mono;
        if (json_is_true(json_object_get(o, "drained")))
            arb_node_transition(&s->cluster, n, ARB_NODE_DRAINING, NULL);
    }
    list_free(&l);
    return rc;
}

/* ---- jobs --------------------------------------------------------------------------- */

static int job_state_of(const char *name)
{
    for (int k = 0; k < ARB_JOB_NSTATES; k++)
        if (name && strcmp(arb_job_state_name((arb_job_state_t)k), name) == 0)
            return k;
    return -1;
}

/* Re-charge the allocations of a placed or running job. On failure
 * nothing stays charged and err says why. */
static int restore_alloc(st_t *s, arb_job_t *j, const st_jobrec_t *r, const arb_ctx_t *ctx,
                         arb_err_t *err)
{
    size_t n = r->nalloc, t;
    int rc = 0;

    if (n == 0 || n > (size_t)j->ntasks || (int)n < j->gang_min)
        return arb_errf(err, -EINVAL, "the record holds %zu allocations for %d tasks", n,
                        j->ntasks);
    arb_task_alloc_t *ta = calloc(n, sizeof *ta);
    if (!ta)
        return arb_errf(err, -ENOMEM, "out of memory");
    for (t = 0; t < n && rc == 0; t++) {
        const st_rec_alloc_t *a = &r->alloc[t];
        const char *node = a->node;
        arb_node_t *nd = node ? arb_cluster_find_node(&s->cluster, node) : NULL;
        if (a->null_node) { /* an ended task's slot, holding nothing */
            ta[t].node = ARB_NO_NODE;
            continue;
        }
        if (!nd) {
            rc = arb_errf(err, -ENOENT, "task %zu: node '%s' is gone", t, node ? node : "?");
            break;
        }
        ta[t].node = nd->id;
        ta[t].gpu_mask = (uint16_t)a->mask;
        ta[t].gpu_milli = (int16_t)a->milli;
        ta[t].gpu_mem_mib = (int32_t)a->mib;
    }
    /* Bound through the scheduler, as if it had placed the job: node
     * accounting, queue usage, plugin state and indexes in one step; a
     * conflict is refused, never given out twice. */
    if (rc == 0)
        rc = arb_sched_restore(s->sched, j, ta, (int)n, ctx, err);
    free(ta);
    return rc;
}

int st_job_decode(st_t *s, const st_jobrec_t *o, st_job_t **out, int *statep, arb_err_t *err)
{
    st_job_t *sj = calloc(1, sizeof *sj);
    const char *spec = o->spec;
    int state = job_state_of(o->state);
    arb_job_t *j = NULL;
    arb_err_t perr = {{0}};

    if (!sj)
        return arb_errf(err, -ENOMEM, "out of memory");
    sj->id = o->id;
    sj->yaml = o->yaml;
    const char *core = o->core;
    if (spec) { /* a record without a compact form, or a service's: its spec stays in memory */
        sj->speclen = (uint32_t)o->speclen;
        if (!(sj->spec = malloc(sj->speclen + 1))) {
            st_job_free(sj);
            return arb_errf(err, -ENOMEM, "out of memory");
        }
        memcpy(sj->spec, spec, sj->speclen + 1);
    }
    sj->team = st_name(s, o->team);
    sj->owner = st_name(s, o->owner);
    if (!sj->team || !sj->owner || st_job_say(sj, "%s", o->message ?: "") < 0) {
        st_job_free(sj);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    sj->version = o->version;
    sj->lamport_submit = o->lamport_submit;
    sj->lamport_update = o->lamport_update;
    sj->attempt = o->attempt;
    sj->epoch = o->epoch;
    sj->submit_ms = o->submit_ms;
    sj->start_ms = o->start_ms;
    sj->end_ms = o->end_ms;
    sj->delivered = o->delivered;
    sj->stop = o->stop;
    sj->stop_then = sj->stop ? (uint8_t)o->stop_then : ST_THEN_CANCEL;
    if (sj->stop_then > ST_THEN_TIMEOUT)
        sj->stop_then = ST_THEN_FAIL;
    if ((!spec && !core) || sj->id == 0 || state < 0) {
        arb_errf(err, 0, "%s", sj->id == 0 ? "no id" : state < 0 ? "no known state" : "no spec");
        st_job_free(sj);
        return 1;
    }
    /* The priority it was given at submission (records since it is kept):
     * a priority class removed from the config since must not fail it. */
    st_prio_kept_t kept = {.priority = (int32_t)o->priority, .preemptible = o->preemptible};
    bool has_kept = o->has_priority;
    char pc[ST_PCLASS_MAX] = "";
    int prc = -EINVAL;
    if (core) { /* the compact form (jobcore.c): no spec to read */
        prc = st_core_read(&s->cluster, core, o->corelen, &j, pc, sizeof pc, &sj->dep, &perr);
        if (prc == 0) {
            sj->command = o->command ? json_incref(o->command) : NULL;
            sj->env = o->env ? json_incref(o->env) : NULL;
            sj->restartable = o->restartable;
            kept.priority = j->priority;
            kept.preemptible = j->preemptible;
            if (pc[0] && !st_prio_class_known(s, pc))
                snprintf(kept.gone, sizeof kept.gone, "%s", pc);
        }
    }
    if (prc == -ENOMEM) {
        st_job_free(sj);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    char *stored = NULL; /* its spec under specs/ID, where the form did not read */
    size_t storedlen = 0;
    if (prc < 0 && !spec && core) {
        char key[40];
        snprintf(key, sizeof key, "specs/%020llu", (unsigned long long)sj->id);
        if (store_get(s->store, key, &stored, &storedlen, NULL, NULL) == 0) {
            sj->spec = stored; /* kept: the record carries it from now on */
            sj->speclen = (uint32_t)storedlen;
            spec = stored;
        }
    }
    if (prc < 0 && spec)
        prc = st_spec_parse_kept(s, sj->spec, sj->speclen, sj->yaml, has_kept ? &kept : NULL, &j,
                                 &sj->command, &sj->env, &sj->restartable, &sj->dep, pc, &perr);
    if (prc == 0 && pc[0] && !(sj->pclass = arb_intern(&s->names, pc))) {
        arb_job_free(j);
        st_job_free(sj);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    if (prc < 0) {
        /* Neither its compact form nor its spec loads (a newer controller
         * is stricter): keep the job visible, ended. */
        j = arb_job_new("unloadable", 1);
        if (!j || arb_job_finalize(j, NULL) < 0) {
            arb_job_free(j);
            st_job_free(sj);
            return arb_errf(err, -ENOMEM, "out of memory");
        }
        st_job_say(sj, "spec no longer loads: %.200s", perr.msg);
        if (state < ARB_JOB_SUCCEEDED)
            state = ARB_JOB_FAILED;
    }
    if (o->has_time_limit) /* as resolved at submission */
        j->time_limit_s = o->time_limit_s;
    if ((has_kept || core) && kept.gone[0] && state < ARB_JOB_SUCCEEDED)
        st_event(s, "job-priority-kept", sj->id, NULL,
                 "job %llu: priority class '%s' is no longer in the config; the job keeps the "
                 "priority it was given at submission (%d)%s",
                 (unsigned long long)sj->id, kept.gone, (int)kept.priority,
                 kept.preemptible ? ", preemptible" : "");
    sj->ntasks = j->ntasks;
    sj->tasks = calloc((size_t)j->ntasks, sizeof *sj->tasks);
    if (!sj->tasks) {
        arb_job_free(j);
        st_job_free(sj);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    for (int t = 0; t < sj->ntasks && (size_t)t < o->ntasks; t++) {
        const st_rec_task_t *tk = &o->tasks[t];
        sj->tasks[t].state = (uint8_t)tk->state;
        if (sj->tasks[t].state > TK_CANCELLED)
            sj->tasks[t].state = TK_PENDING;
        if (tk->has_exit) {
            sj->tasks[t].has_exit = true;
            sj->tasks[t].exit_code = (int32_t)tk->exit_code;
        }
        const char *node = tk->node;
        const arb_node_t *nd = node ? arb_cluster_find_node(&s->cluster, node) : NULL;
        sj->tasks[t].node1 = nd ? nd->id + 1 : 0;
    }
    if (state >= ARB_JOB_SUCCEEDED) /* ended: as it ended (a pending one is the scheduler's) */
        j->state = (arb_job_state_t)state;
    sj->j = j;
    sj->own_j = true; /* until recover_job hands it to the scheduler */
    *out = sj;
    *statep = state;
    return 0;
}

static int recover_job(st_t *s, const char *key, const st_jobrec_t *r, arb_err_t *err)
{
    st_job_t *sj = NULL;
    arb_job_t *j;
    const json_t *o = r->o; /* its tree, where its extras needed one */
    int state = -1, rc = st_job_decode(s, r, &sj, &state, err);

    if (rc < 0)
        return rc;
    if (rc > 0) {
        damaged(s, key, err->msg);
        return 0;
    }
    rc = 0;
    j = sj->j;
    sj->j = NULL;
    sj->own_j = false;
    bool svc_parent = false;
    /* A service's records carry its marks (st_service_record): any other job
     * needs no second reading of its spec for them. */
    bool svc_marked = json_object_get(o, "svc_desired") || json_object_get(o, "svc_of");
    if (j && svc_marked && (rc = st_service_recover(s, sj, j, o, state, &svc_parent)) < 0) {
        arb_job_free(j);
        st_job_free(sj);
        return arb_errf(err, rc, "out of memory");
    }
    if (svc_parent && state < ARB_JOB_SUCCEEDED) { /* never the scheduler's (service.h) */
        j->state = ARB_JOB_RUNNING;
        sj->j = j;
        sj->own_j = true;
        sj->last = j->state;
        if (!j->queue)
            j->queue = arb_intern(&s->cluster.strs, "default");
        return st_job_add(s, sj);
    }
    if (state >= ARB_JOB_SUCCEEDED) { /* ended: kept for reading only */
        j->state = (arb_job_state_t)state;
        sj->j = j;
        sj->own_j = true;
        sj->last = j->state;
        if (!j->queue)
            j->queue = arb_intern(&s->cluster.strs, "default");
        if ((rc = st_job_add(s, sj)) == 0)
            st_history_push(s, sj); /* the newest of jobs.history (recover_jobs) */
        return rc;
    }
    arb_ctx_t ctx = {.now_ns = st_now_ns(s), .rng = &s->rng};
    j->ext_id = sj->id; /* messages of the core name it by its public id */
    if ((rc = arb_sched_submit(s->sched, j, &ctx, err)) < 0) {
        arb_job_free(j);
        st_job_free(sj);
        return rc;
    }
    j->submit_ns = ctx.now_ns - (st_now_ms(s) - sj->submit_ms) * 1000000LL;
    sj->j = j;
    if ((rc = st_job_add(s, sj)) < 0)
        return rc;
    if (state == ARB_JOB_PLACED || state == ARB_JOB_RUNNING) {
        arb_err_t aerr = {{0}};
        if (restore_alloc(s, j, r, &ctx, &aerr) == 0) {
            if (state == ARB_JOB_RUNNING)
                arb_job_transition(j, ARB_JOB_RUNNING, NULL);
            /* its start on this run's clock, from the wall clock of its
             * placement (this machine's): its time limit keeps counting */
            j->start_ns =
                sj->start_ms ? ctx.now_ns - (st_now_ms(s) - sj->start_ms) * 1000000LL : ctx.now_ns;
            j->resize_gen = (uint32_t)r->resize_gen; /* no spurious notice */
            sj->nalloc_seen = j->nalloc;
            for (int t = 0; t < j->nalloc; t++) /* a failed task: no more of its gang start */
                j->gang_closed |= sj->tasks[t].state == TK_FAILED;
            st_resize_recover(sj, o); /* a shrink under way goes on */
            sj->epoch = s->epoch;     /* re-stamped: see the top of this file */
            st_node_index_job(s, sj);
        } else {
            for (int t = 0; t < sj->ntasks; t++)
                sj->tasks[t].state = TK_PENDING;
            st_job_say(sj, "requeued at recovery: %.200s", aerr.msg);
            uint64_t lam = st_event(s, "job-requeued", sj->id, NULL,
                                    "job %llu: allocation not restored at recovery (%s); "
                                    "requeued",
                                    (unsigned long long)sj->id, aerr.msg);
            st_job_save(s, sj, lam);
        }
    }
    sj->last = j->state;
    return 0;
}

/*
 * The state of a job record without decoding it: the top-level "state"
 * member's value, found by walking the text (strings with their escapes,
 * nested values skipped whole); -1 when it is not found or the text is not
 * what st_job_record writes (the caller then decodes it in full, which says
 * what is wrong). About a microsecond a record, against the tens of a
 * decode: what lets recovery skip the ended jobs past the history.
 */
static size_t skip_string(const char *v, size_t n, size_t i) /* v[i] == '"'; past its end */
{
    /* quote to quote with memchr (a record's spec is most of its text, and comes
     * before its state); a quote after an odd run of backslashes is escaped */
    for (i++; i < n;) {
        const char *q = memchr(v + i, '"', n - i);
        if (!q)
            return n;
        size_t e = (size_t)(q - v), b = e;
        while (b > i && v[b - 1] == '\\')
            b--;
        if ((e - b) % 2 == 0)
            return e + 1;
        i = e + 1;
    }
    return n;
}

static int rec_state(const char *v, size_t n)
{
    size_t i = 0;
    int depth = 0;

    while (i < n && v[i] != '{')
        i++;
    for (; i < n;) {
        char c = v[i];
        if (c == '"') {
            size_t e = skip_string(v, n, i);
            if (depth == 1 && e - i == 7 && memcmp(v + i, "\"state\"", 7) == 0) {
                size_t k = e;
                while (k < n && (v[k] == ' ' || v[k] == ':'))
                    k++;
                if (k >= n || v[k] != '"')
                    return -1;
                size_t ve = skip_string(v, n, k);
                for (int st = 0; st < ARB_JOB_NSTATES; st++) {
                    const char *name = arb_job_state_name((arb_job_state_t)st);
                    size_t len = strlen(name);
                    if (ve - k == len + 2 && memcmp(v + k + 1, name, len) == 0)
                        return st;
                }
                return -1;
            }
            i = e;
        } else {
            if (c == '{' || c == '[')
                depth++;
            else if (c == '}' || c == ']')
                depth--;
            i++;
        }
    }
    return -1;
}

/*
 * Jobs stream out of the store, one record at a time, never all decoded at
 * once (a list of every record's JSON was 2.8x the controller's RSS and left
 * the heap fragmented after). Ended jobs past conf.job_history are not
 * decoded at all: only the newest job_history of them are (a ring of their
 * texts while the scan goes); every other record is kept as text in one
 * arena (a single allocation, returned whole) and decoded after the scan,
 * merged with the kept ended ones in id order, so the scheduler sees its
 * jobs in their submission order as before.
 */
typedef struct rec_txt {
    uint64_t id;
    size_t off, n; /* in the arena */
} rec_txt_t;

typedef struct rec_scan {
    st_t *s;
    char *arena; /* texts of the records to decode, NUL-separated */
    size_t used, cap;
    rec_txt_t *live; /* not ended, in key (id) order */
    size_t nlive, caplive;
    char **ring; /* ended ones: the newest conf.job_history texts */
    size_t *ringlen;
    uint64_t *ringid;
    size_t ringcap, ringn, ringhead;
} rec_scan_t;

static uint64_t id_of_key(const char *key)
{
    return strncmp(key, "jobs/", 5) == 0 ? strtoull(key + 5, NULL, 10) : 0;
}

static void note_stored(st_t *s, uint64_t id) /* an ended job left in the store */
{
    s->njobs++;
    s->nstored++;
    if (id >= s->next_id && id < UINT64_MAX / 2)
        s->next_id = id + 1;
}

static int scan_job(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    rec_scan_t *r = arg;
    uint64_t id = id_of_key(key);
    int state = rec_state(val, n);

    (void)rev;
    if (state >= ARB_JOB_SUCCEEDED && id > 0 && id < UINT64_MAX / 2) {
        if (r->ringcap == 0) {
            note_stored(r->s, id);
            return 0;
        }
        size_t k;
        if (r->ringn == r->ringcap) { /* the oldest leaves: in the store only */
            k = r->ringhead;
            note_stored(r->s, r->ringid[k]);
            free(r->ring[k]);
            r->ringhead = (r->ringhead + 1) % r->ringcap;
            r->ringn--;
        }
        k = (r->ringhead + r->ringn) % r->ringcap;
        if (!(r->ring[k] = malloc(n + 1)))
            return -ENOMEM;
        memcpy(r->ring[k], val, n);
        r->ring[k][n] = '\0';
        r->ringlen[k] = n;
        r->ringid[k] = id;
        r->ringn++;
        return 0;
    }
    if (r->used + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 1 << 20;
        while (cap < r->used + n + 1)
            cap *= 2;
        char *a = realloc(r->arena, cap);
        if (!a)
            return -ENOMEM;
        r->arena = a;
        r->cap = cap;
    }
    if (r->nlive == r->caplive) {
        size_t cap = r->caplive ? r->caplive * 2 : 1024;
        rec_txt_t *v = realloc(r->live, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        r->live = v;
        r->caplive = cap;
    }
    memcpy(r->arena + r->used, val, n);
    r->arena[r->used + n] = '\0';
    /* a record whose key is not a job id sorts as 0: decoded first, as the scan had it */
    r->live[r->nlive++] = (rec_txt_t){.id = id, .off = r->used, .n = n};
    r->used += n + 1;
    return 0;
}

/* A record read straight from its text where st_job_record wrote it
 * (jobrec.c), through a jansson tree where not (its extras, an old or odd
 * form): the same job either way. */
static int decode_one(st_t *s, st_jobrec_t *r, const char *key, const char *val, size_t n,
                      arb_err_t *err)
{
    json_t *o = NULL;
    int rc = st_jobrec_read(r, val, n);

    if (rc < 0)
        return arb_errf(err, rc, "out of memory reading the jobs");
    if (rc > 0) {
        o = json_loadb(val, n, 0, NULL);
        if (!json_is_object(o)) {
            json_decref(o);
            damaged(s, key, "not a JSON object");
            return 0;
        }
        if ((rc = st_jobrec_from_json(r, o)) < 0) {
            json_decref(o);
            return arb_errf(err, rc, "out of memory reading the jobs");
        }
    }
    rc = recover_job(s, key, r, err);
    st_jobrec_reset(r);
    json_decref(o);
    return rc;
}

static int recover_jobs(st_t *s, arb_err_t *err)
{
    rec_scan_t r = {.s = s, .ringcap = (size_t)s->conf.job_history};
    st_jobrec_t jr = {.share = st_jobrec_share_new()}; /* NULL: nothing shared */
    char key[40];
    size_t li = 0, ri = 0;
    int rc = 0;
    int64_t t0 = st_mono_ns();

    if (r.ringcap && (!(r.ring = calloc(r.ringcap, sizeof *r.ring)) ||
                      !(r.ringlen = calloc(r.ringcap, sizeof *r.ringlen)) ||
                      !(r.ringid = calloc(r.ringcap, sizeof *r.ringid)))) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = store_scan(s->store, "jobs/", scan_job, &r, err)) < 0) {
        if (rc == -ENOMEM)
            arb_errf(err, rc, "out of memory reading the jobs");
        goto out;
    }
    int64_t t1 = st_mono_ns();
    /* both lists are in id order: merge them */
    while (rc == 0 && (li < r.nlive || ri < r.ringn)) {
        size_t k = (r.ringhead + ri) % (r.ringcap ? r.ringcap : 1);
        bool take_live = ri >= r.ringn || (li < r.nlive && r.live[li].id < r.ringid[k]);
        if (take_live) {
            snprintf(key, sizeof key, "jobs/%020llu", (unsigned long long)r.live[li].id);
            rc = decode_one(s, &jr, key, r.arena + r.live[li].off, r.live[li].n, err);
            li++;
        } else {
            snprintf(key, sizeof key, "jobs/%020llu", (unsigned long long)r.ringid[k]);
            rc = decode_one(s, &jr, key, r.ring[k], r.ringlen[k], err);
            free(r.ring[k]);
            r.ring[k] = NULL;
            ri++;
        }
    }
    if (rc == 0)
        st_resize_recover_all(s);
    if (rc == 0 && (r.nlive + r.ringn + s->nstored) >= 10000) /* where a long start went */
        arb_log(ARB_LOG_INFO, "recovery",
                "jobs read from the store in %.3f s; %zu decoded and indexed in %.3f s; %llu "
                "ended ones past jobs.history left in the store",
                (double)(t1 - t0) / 1e9, r.nlive + r.ringn, (double)(st_mono_ns() - t1) / 1e9,
                (unsigned long long)s->nstored);
out:
    st_jobrec_share_free(jr.share);
    st_jobrec_clear(&jr);
    for (size_t i = 0; r.ring && i < r.ringcap; i++)
        free(r.ring[i]);
    free(r.ring);
    free(r.ringlen);
    free(r.ringid);
    free(r.arena);
    free(r.live);
    /* what decoding left free goes back to the system, not held as heap for ever */
    malloc_trim(0);
    return rc;
}

/* ---- events --------------------------------------------------------------------------- */

typedef struct ev_load {
    st_t *s;
    uint64_t dropped;
} ev_load_t;

static int load_event(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    ev_load_t *el = arg;
    st_t *s = el->s;
    uint64_t lam = strtoull(key + strlen("events/"), NULL, 10);
    st_event_t ev;

    (void)rev;
    if (st_event_decode(s, lam, val, n, &ev) < 0) {
        st_event_clear(&ev);
        return -ENOMEM;
    }
    if (s->ring_n == s->ring_cap) { /* retention shrank: drop the oldest */
        st_event_t *old = &s->ring[s->ring_head];
        char k[40];
        snprintf(k, sizeof k, "events/%020llu", (unsigned long long)old->lamport);
        store_batch_del(&s->batch, k);
        st_event_clear(old);
        s->ring_head = (s->ring_head + 1) % s->ring_cap;
        s->ring_n--;
        el->dropped++;
    }
    s->ring[(s->ring_head + s->ring_n) % s->ring_cap] = ev;
    s->ring_n++;
    if (lam > s->clock)
        s->clock = lam;
    return 0;
}

/* ---- the clock near its limit -------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* v's rank among the sorted distinct values u[0..n): 1-based. */
static uint64_t rank_of(const uint64_t *u, size_t n, uint64_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (u[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (uint64_t)lo + 1;
}

/*
 * A clock past ST_LAMPORT_REBASE (a store written before reports were
 * bounded, or years of hostile ones) is renumbered before anything is
 * served: every Lamport time the controller keeps (the retained events'
 * keys and texts, the jobs' submitted and updated times) is replaced by
 * its rank among them, which keeps every order between them, and the clock
 * goes on from the highest rank. Agents whose clocks are far ahead are
 * told so at their next report and take the new time (node.c); event
 * cursors from before are answered from the oldest event (st_events).
 * Everything is written in the recovery transaction.
 */
static int rebase_clock(st_t *s, arb_err_t *err)
{
    size_t n = 0, cap = (size_t)s->ring_n + 2 * (size_t)s->next_id, k = 0;
    uint64_t *u, old = s->clock;
    char key[40], v[32];

    if (s->clock < ST_LAMPORT_REBASE)
        return 0;
    if (!(u = malloc((cap + 1) * sizeof *u)))
        return arb_errf(err, -ENOMEM, "out of memory");
    for (int i = 0; i < s->ring_n; i++)
        u[n++] = s->ring[(s->ring_head + i) % s->ring_cap].lamport;
    for (uint64_t id = 1; id < s->next_id; id++) {
        st_job_t *sj = s->jobs[id];
        if (sj && sj->lamport_submit)
            u[n++] = sj->lamport_submit;
        if (sj && sj->lamport_update)
            u[n++] = sj->lamport_update;
    }
    qsort(u, n, sizeof *u, cmp_u64);
    for (size_t i = 0; i < n; i++) /* distinct values */
        if (k == 0 || u[i] != u[k - 1])
            u[k++] = u[i];
    /* Oldest first: each new key is at most its old one and above the
     * previous new one, so no put lands on a key still to be deleted. */
    for (int i = 0; i < s->ring_n; i++) {
        st_event_t *e = &s->ring[(s->ring_head + i) % s->ring_cap];
        uint64_t nl = rank_of(u, k, e->lamport);
        char *txt;
        snprintf(key, sizeof key, "events/%020llu", (unsigned long long)e->lamport);
        store_batch_del(&s->batch, key);
        e->lamport = nl;
        if (!e->type) /* unreadable: it leaves the log */
            continue;
        if (!(txt = st_event_record(e))) {
            free(u);
            return arb_errf(err, -ENOMEM, "out of memory");
        }
        snprintf(key, sizeof key, "events/%020llu", (unsigned long long)nl);
        store_batch_putstr(&s->batch, key, txt);
        free(txt);
    }
    for (uint64_t id = 1; id < s->next_id; id++) {
        st_job_t *sj = s->jobs[id];
        if (!sj)
            continue;
        if (sj->lamport_submit)
            sj->lamport_submit = rank_of(u, k, sj->lamport_submit);
        if (sj->lamport_update)
            sj->lamport_update = rank_of(u, k, sj->lamport_update);
        st_job_save(s, sj, 0);
    }
    free(u);
    s->clock = s->clock_hwm = (uint64_t)k;
    snprintf(v, sizeof v, "%llu", (unsigned long long)s->clock);
    store_batch_putstr(&s->batch, "meta/clock", v);
    st_event(s, "clock-rebased", 0, NULL,
             "the Lamport clock was %llu, past half its limit (%llu): renumbered to %llu, every "
             "order kept (%zu times of events and jobs); agents take the new time at their next "
             "report",
             (unsigned long long)old, (unsigned long long)ST_LAMPORT_MAX,
             (unsigned long long)s->clock, k);
    return 0;
}

int st_recover(st_t *s, arb_err_t *err)
{
    char v[32];
    ev_load_t el = {.s = s};
    int rc;

    s->epoch = (uint64_t)meta_get(s, "meta/epoch") + 1;
    snprintf(v, sizeof v, "%llu", (unsigned long long)s->epoch);
    store_batch_putstr(&s->batch, "meta/epoch", v);
    s->clock = s->clock_hwm = (uint64_t)meta_get(s, "meta/clock");
    if ((rc = store_scan(s->store, "events/", load_event, &el, err)) < 0)
        return rc;
    if (s->clock > s->clock_hwm)
        s->clock_hwm = s->clock;
    if ((rc = recover_nodes(s, err)) < 0 || (rc = recover_jobs(s, err)) < 0)
        return rc;
    if ((rc = st_idem_recover(s, err)) < 0)
        return rc;
    for (uint64_t id = 1; id < s->next_id; id++) {
        st_job_t *sj = s->jobs[id];
        if (sj && sj->lamport_update > s->clock)
            s->clock = sj->lamport_update;
    }
    if ((rc = rebase_clock(s, err)) < 0)
        return rc;
    if (s->store->rewound_from)
        st_event(s, "store-rewound", 0, NULL,
                 "the store was at revision %llu, its marker says; it opened at revision %llu: "
                 "%llu committed transactions are lost (started with --accept-rewind)",
                 (unsigned long long)s->store->rewound_from,
                 (unsigned long long)store_revision(s->store),
                 (unsigned long long)(s->store->rewound_from - store_revision(s->store)));
    if (s->ndamaged) {
        char list[600] = "";
        size_t used = 0;
        for (int i = 0; i < s->ndamaged && i < 8 && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                     s->damaged[i]);
        st_event(s, "store-damaged", 0, NULL,
                 "%d damaged store record%s skipped at recovery, what they held lost: %s%s",
                 s->ndamaged, s->ndamaged == 1 ? "" : "s", list, s->ndamaged > 8 ? ", ..." : "");
    }
    st_event(s, "controller-started", 0, NULL,
             "controller started: epoch %llu, %u nodes, %llu jobs (%d active) recovered%s",
             (unsigned long long)s->epoch, s->cluster.nnodes, (unsigned long long)s->njobs,
             s->nactive, s->ndamaged ? "; damaged records skipped (event store-damaged)" : "");
    rc = store_apply(s->store, &s->batch, NULL, err);
    store_batch_free(&s->batch);
    s->dirty = true;
    return rc;
}
