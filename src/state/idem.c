/*
 * idem.c: Idempotency-Key on submissions (POST /v1/jobs). A client that
 * lost a reply (a timeout, a controller failover) sends the same request
 * again with the same key; the controller answers with the job the first
 * request created (200 instead of 201) instead of creating another.
 *
 * What it owns: a map from (principal, key) to job id, where the principal
 * is the caller's role, team and name (two teams may use the same key).
 * Each entry is written to the store in the same batch as the job it names
 * ("idem/HEX(PRINCIPAL)/KEY" -> "ID"), so a key is durable exactly when its
 * job is, and survives restarts (st_idem_recover reloads them).
 *
 * Retention (config api.idempotencyRetention, default 24h as Stripe's; 0
 * keeps keys for ever): a key expires when its job was submitted that long
 * ago. The age is measured on the controller's wall clock against the
 * job's recorded submit time (submit_ms). That time is for people, and
 * nothing else orders by it; expiring keys is its one other use, and a
 * clock step only makes a key live a little more or less than the
 * retention, which a client retrying within minutes never notices. An
 * expired key is deleted durably, in the batch of the work that found it:
 *   - a submission with that key (the lookup; the new job takes the key),
 *   - a sweep, at most once a minute, run by submissions with a key,
 *   - recovery (st_idem_recover skips it and deletes its record).
 * A key whose job is gone is expired too.
 *
 * Locking: every function expects the caller to hold st.mu.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"
#include "util/hash.h"

#define IDEM_KEY_MAX 128
#define IDEM_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:"

#define IDEM_SWEEP_MS 60000 /* expired keys are swept at most this often */

typedef struct idem_ent {
    char *k; /* principal '\x1f' key (owned); NULL: empty slot */
    uint64_t id;
    int64_t submit_ms; /* its job's (kept here: the job may leave memory, history.c) */
} idem_ent_t;

struct st_idem {
    idem_ent_t *v;
    size_t cap, n; /* cap a power of two; open addressing, linear probing */
    int64_t next_sweep_ms;
};

int st_idem_check(const char *key, arb_err_t *err)
{
    size_t n = strlen(key);
    if (n == 0 || n > IDEM_KEY_MAX || strspn(key, IDEM_CHARS) != n)
        return arb_errf(err, -EBADMSG,
                        "Idempotency-Key: '%.40s%s': give 1..%d letters, digits or -_.: (e.g. a "
                        "random UUID), the same for every retry of one submission",
                        key, n > 40 ? "..." : "", IDEM_KEY_MAX);
    return 0;
}

static uint64_t fnv(const char *p)
{
    return arb_hash_str(ARB_HASH_SEED, p);
}

static char *compose(const st_who_t *who, const char *key)
{
    const char *team = who->team ? who->team : "", *name = who->name ? who->name : "";
    size_t n = strlen(team) + strlen(name) + strlen(key) + 8;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%d\x1f%s\x1f%s\x1f%s", (int)who->role, team, name, key);
    return k;
}

static idem_ent_t *slot(struct st_idem *m, const char *k)
{
    size_t i = (size_t)fnv(k) & (m->cap - 1);
    while (m->v[i].k && strcmp(m->v[i].k, k) != 0)
        i = (i + 1) & (m->cap - 1);
    return &m->v[i];
}

/* Insert k (taken over) -> id, its job submitted at submit_ms; -ENOMEM
 * leaves the map as it was (k freed). */
static int insert(st_t *s, char *k, uint64_t id, int64_t submit_ms)
{
    struct st_idem *m = s->idem;

    if (!m && !(m = s->idem = calloc(1, sizeof *m))) {
        free(k);
        return -ENOMEM;
    }
    if ((m->n + 1) * 10 > m->cap * 7) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        struct st_idem g = {.v = calloc(cap, sizeof *g.v), .cap = cap};
        if (!g.v) {
            free(k);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->v[i].k)
                *slot(&g, m->v[i].k) = m->v[i];
        g.n = m->n;
        free(m->v);
        *m = g;
    }
    idem_ent_t *e = slot(m, k);
    if (e->k) {
        free(k);
    } else {
        e->k = k;
        m->n++;
    }
    e->id = id;
    e->submit_ms = submit_ms;
    return 0;
}

/* The store key of composed key k ("idem/HEX(PRINCIPAL)/KEY"; malloc'd),
 * or NULL. The principal is everything before the last '\x1f' (a key never
 * holds one). */
static char *store_key(const char *k)
{
    const char *key = strrchr(k, '\x1f');
    size_t pl, n;
    char *sk;

    if (!key)
        return NULL;
    pl = (size_t)(key - k);
    key++;
    n = 5 + 2 * pl + 1 + strlen(key) + 1;
    if (!(sk = malloc(n)))
        return NULL;
    memcpy(sk, "idem/", 5);
    for (size_t i = 0; i < pl; i++)
        snprintf(sk + 5 + 2 * i, 3, "%02x", (unsigned char)k[i]);
    snprintf(sk + 5 + 2 * pl, n - 5 - 2 * pl, "/%s", key);
    return sk;
}

/* Is job id gone (never held, or damaged)? An ended job past jobs.history
 * is not: it is in the store (history.c). */
static bool job_gone(st_t *s, uint64_t id)
{
    return !st_job_find(s, id) && !(s->nstored && id > 0 && id < s->next_id);
}

/* Has a key of job id (submitted at submit_ms, as far as the key knows)
 * outlived the retention at now_ms? The job's own time while it is in
 * memory, the key's copy once it has left. */
static bool expired(st_t *s, uint64_t id, int64_t submit_ms, int64_t now_ms)
{
    const st_job_t *sj = st_job_find(s, id);
    int64_t keep_ms = s->conf.idem_retention_ns / 1000000;

    return keep_ms > 0 && now_ms - (sj ? sj->submit_ms : submit_ms) >= keep_ms;
}

/* Queue the deletion of e's store record. */
static void forget_durably(st_t *s, const idem_ent_t *e)
{
    char *sk = store_key(e->k);
    if (sk)
        store_batch_del(&s->batch, sk);
    free(sk);
}

/* Take slot i out of m (backward-shift deletion keeps every probe chain
 * unbroken, so no tombstones). */
static void remove_at(struct st_idem *m, size_t i)
{
    size_t mask = m->cap - 1, j = i;

    free(m->v[i].k);
    m->v[i].k = NULL;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->v[j].k)
            break;
        size_t h = (size_t)fnv(m->v[j].k) & mask;
        /* j's entry may move to i unless its home lies cyclically in (i, j] */
        if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
            continue;
        m->v[i] = m->v[j];
        m->v[j].k = NULL;
        i = j;
    }
    m->n--;
}

uint64_t st_idem_find(st_t *s, const st_who_t *who, const char *key)
{
    char *k;
    uint64_t id = 0;

    if (!s->idem || !s->idem->n || !(k = compose(who, key)))
        return 0;
    idem_ent_t *e = slot(s->idem, k);
    if (e->k && (job_gone(s, e->id) || expired(s, e->id, e->submit_ms, st_now_ms(s)))) {
        forget_durably(s, e);
        remove_at(s->idem, (size_t)(e - s->idem->v));
    } else if (e->k) {
        id = e->id;
    }
    free(k);
    return id;
}

int st_idem_sweep(st_t *s, int64_t now_ms)
{
    struct st_idem *m = s->idem;
    int gone = 0;

    if (!m || !m->n || s->conf.idem_retention_ns <= 0)
        return 0;
    for (size_t i = 0; i < m->cap;) {
        if (m->v[i].k &&
            (job_gone(s, m->v[i].id) || expired(s, m->v[i].id, m->v[i].submit_ms, now_ms))) {
            forget_durably(s, &m->v[i]);
            remove_at(m, i); /* an entry may have shifted into i: look again */
            gone++;
        } else {
            i++;
        }
    }
    return gone;
}

int st_idem_put(st_t *s, const st_who_t *who, const char *key, uint64_t id)
{
    char *k = compose(who, key), *sk, v[24];
    int64_t now = st_now_ms(s);
    int rc;

    if (!k)
        return -ENOMEM;
    /* The store key: the principal in hex (any bytes a tokens file holds),
     * then the key (already restricted to IDEM_CHARS). */
    if (!(sk = store_key(k))) {
        free(k);
        return -ENOMEM;
    }
    snprintf(v, sizeof v, "%llu", (unsigned long long)id);
    rc = store_batch_putstr(&s->batch, sk, v);
    free(sk);
    if (rc < 0) {
        free(k);
        return rc;
    }
    const st_job_t *sj = st_job_find(s, id);
    if ((rc = insert(s, k, id, sj ? sj->submit_ms : now)) == 0 && now >= s->idem->next_sweep_ms) {
        s->idem->next_sweep_ms = now + IDEM_SWEEP_MS;
        st_idem_sweep(s, now);
    }
    return rc;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int load_one(void *arg, const char *key, const char *val, size_t n, uint64_t rev)
{
    st_t *s = arg;
    const char *h = key + 5, *slash = strchr(h, '/');
    size_t hl;
    char *k;
    char *end;
    unsigned long long id;

    (void)n;
    (void)rev;
    if (!slash || (hl = (size_t)(slash - h)) % 2 || st_idem_check(slash + 1, NULL) < 0)
        return 0; /* not ours: skip, never fail recovery over it */
    id = strtoull(val, &end, 10);
    if (*end || id == 0 || !(k = malloc(hl / 2 + strlen(slash) + 1)))
        return 0;
    for (size_t i = 0; i < hl / 2; i++) {
        int a = hexval(h[2 * i]), b = hexval(h[2 * i + 1]);
        if (a < 0 || b < 0) {
            free(k);
            return 0;
        }
        k[i] = (char)(a * 16 + b);
    }
    k[hl / 2] = '\x1f';
    strcpy(k + hl / 2 + 1, slash + 1);
    /* A job past jobs.history is not decoded at recovery: its key counts from
     * now, living at most the retention longer than it would have. */
    const st_job_t *sj = st_job_find(s, id);
    int64_t submit_ms = sj ? sj->submit_ms : st_now_ms(s);
    if (job_gone(s, id) || expired(s, id, submit_ms, st_now_ms(s))) { /* past retention, or gone */
        store_batch_del(&s->batch, key);
        free(k);
        return 0;
    }
    return insert(s, k, id, submit_ms) < 0 ? -ENOMEM : 0;
}

int st_idem_recover(st_t *s, arb_err_t *err)
{
    int rc = store_scan(s->store, "idem/", load_one, s, err);
    if (rc == -ENOMEM)
        return arb_errf(err, rc, "out of memory loading idempotency keys");
    return rc;
}

void st_idem_free(st_t *s)
{
    if (!s->idem)
        return;
    for (size_t i = 0; i < s->idem->cap; i++)
        free(s->idem->v[i].k);
    free(s->idem->v);
    free(s->idem);
    s->idem = NULL;
}
