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
 * job is, and survives restarts (st_idem_recover reloads them). Keys are
 * kept as long as their jobs are: forever, today.
 *
 * Locking: every function expects the caller to hold st.mu.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"

#define IDEM_KEY_MAX 128
#define IDEM_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:"

typedef struct idem_ent {
    char *k; /* principal '\x1f' key (owned); NULL: empty slot */
    uint64_t id;
} idem_ent_t;

struct st_idem {
    idem_ent_t *v;
    size_t cap, n; /* cap a power of two; open addressing, linear probing */
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
    uint64_t h = 1469598103934665603ULL;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
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

/* Insert k (taken over) -> id; -ENOMEM leaves the map as it was (k freed). */
static int insert(st_t *s, char *k, uint64_t id)
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
    return 0;
}

uint64_t st_idem_find(st_t *s, const st_who_t *who, const char *key)
{
    char *k;
    uint64_t id = 0;

    if (!s->idem || !s->idem->n || !(k = compose(who, key)))
        return 0;
    idem_ent_t *e = slot(s->idem, k);
    if (e->k)
        id = e->id;
    free(k);
    return id;
}

int st_idem_put(st_t *s, const st_who_t *who, const char *key, uint64_t id)
{
    char *k = compose(who, key), *sk, v[24];
    size_t pl, n;
    int rc;

    if (!k)
        return -ENOMEM;
    /* The store key: the principal in hex (any bytes a tokens file holds),
     * then the key (already restricted to IDEM_CHARS). */
    pl = strlen(k) - strlen(key) - 1;
    n = 5 + 2 * pl + 1 + strlen(key) + 1;
    if (!(sk = malloc(n))) {
        free(k);
        return -ENOMEM;
    }
    memcpy(sk, "idem/", 5);
    for (size_t i = 0; i < pl; i++)
        snprintf(sk + 5 + 2 * i, 3, "%02x", (unsigned char)k[i]);
    snprintf(sk + 5 + 2 * pl, n - 5 - 2 * pl, "/%s", key);
    snprintf(v, sizeof v, "%llu", (unsigned long long)id);
    rc = store_batch_putstr(&s->batch, sk, v);
    free(sk);
    if (rc < 0) {
        free(k);
        return rc;
    }
    return insert(s, k, id);
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
    return insert(s, k, id) < 0 ? -ENOMEM : 0;
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
