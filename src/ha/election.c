/*
 * election.c: the leader election of election.h, one thread per
 * controller, over its own etcd client (etcd.c).
 *
 * Invariants:
 *   1. at most one process holds the leader key at a time (etcd's txn
 *      "create only if create_revision == 0" decides), and its term is that
 *      key's create_revision, larger than every earlier term;
 *   2. a LEADER renews its lease every TTL/3; it steps down when etcd says
 *      the lease is gone, when the key's create_revision is not its term,
 *      or when it has had no answer for TTL - 1 s (its lease may be gone
 *      without its knowing: better to stop serving a moment too early);
 *   3. STEPPED_DOWN is final: the process stops serving as leader and the
 *      controller exits (a supervisor restarts it as a follower). Even a
 *      leader that has not noticed yet cannot write: every write is fenced
 *      by its term (store_etcd.c).
 * Followers read the key, then watch it (a /v3/watch stream from the
 * revision they read) for up to a second: a deletion (the leader's lease
 * expired, or it resigned) wakes them at once; otherwise they read it
 * again, so a member that died under the watch costs at most a second.
 * When etcd cannot be reached they retry every poll_ms.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ha/election.h"
#include "store/etcd.h"
#include "util/log.h"
#include "util/mtime.h"

/* Safety margin on lease times: etcd's clock may run a little ahead of ours,
 * and its TTL countdown starts somewhere between our send and its answer. */
#define MARGIN_MS 500

const char *const ha_role_names[] = {"follower", "candidate", "leader", "stepped-down"};

struct ha_elect {
    char *members, *prefix, *name, *url;
    char key[256];
    int ttl_s, poll_ms, watch_ms;
    etcd_t *e;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    /* under mu */
    ha_role_t role;
    int64_t term, lease;
    int64_t valid_until;        /* LEADER: the lease is surely alive before this (monotonic ms) */
    char lname[128], lurl[256]; /* the leader as last seen */
    int64_t lterm;
    bool lknown;
    bool read_failing; /* the last read of the leader key failed (said once) */
    char why[700];
};

/* One timeline line in the daemon's log (util/log.c, subsystem "ha"): the
 * wall time first, for reading a failover across the members' logs, then
 * what happened. The member's name is the log's (arb_log_init). */
static void vsay(ha_elect_t *h, const char *fmt, va_list ap)
{
    char msg[600], tb[32];
    struct timespec ts;
    struct tm tm;

    (void)h;
    vsnprintf(msg, sizeof msg, fmt, ap);
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(tb, sizeof tb, "%H:%M:%S", &tm);
    arb_log(ARB_LOG_INFO, "ha", "%s.%03ld %s", tb, ts.tv_nsec / 1000000, msg);
}

static void say(ha_elect_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(ha_elect_t *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(h, fmt, ap);
    va_end(ap);
}

void ha_log(ha_elect_t *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(h, fmt, ap);
    va_end(ap);
}

/* Sleep up to ms, or until ha_stop. Caller holds mu. Returns h->stop. */
static bool nap(ha_elect_t *h, int ms)
{
    struct timespec ts =
        arb_deadline_ms(ms); /* monotonic: a wall-clock step cannot stall renewal */
    if (!h->stop)
        arb_cond_wait_until(&h->cv, &h->mu, &ts);
    return h->stop;
}

/* Caller holds mu. */
static void see_leader(ha_elect_t *h, const etcd_kv_t *kv)
{
    json_t *v = json_loadb(kv->val, kv->vlen, 0, NULL);
    const char *n = json_string_value(json_object_get(v, "name"));
    const char *u = json_string_value(json_object_get(v, "url"));
    bool changed = !h->lknown || h->lterm != kv->create_rev;

    snprintf(h->lname, sizeof h->lname, "%s", n ? n : "?");
    snprintf(h->lurl, sizeof h->lurl, "%s", u ? u : "");
    h->lterm = kv->create_rev;
    h->lknown = true;
    json_decref(v);
    if (changed && h->role == HA_FOLLOWER)
        say(h, "follower: the leader is %s at %s (term %lld)", h->lname, h->lurl,
            (long long)h->lterm);
}

static void step_down(ha_elect_t *h, const char *why)
{
    if (h->role == HA_STEPPED_DOWN)
        return;
    snprintf(h->why, sizeof h->why, "%s", why);
    h->role = HA_STEPPED_DOWN;
    h->lknown = false;
    say(h, "STEPPED DOWN (term %lld): %s", (long long)h->term, why);
    pthread_cond_broadcast(&h->cv);
}

/* FOLLOWER: read the key; absent: become candidate. Caller holds mu. */
static void follow(ha_elect_t *h)
{
    etcd_kv_t kv = {0};
    arb_err_t err = {{0}};

    int64_t rev = 0;
    int w = -1;

    pthread_mutex_unlock(&h->mu);
    int rc = etcd_get(h->e, h->key, &kv, &rev, &err);
    pthread_mutex_lock(&h->mu);
    if (rc == 0) {
        see_leader(h, &kv);
    } else if (rc == -ENOENT) {
        if (h->lknown)
            say(h, "the leader key is gone (%s's lease ended): campaigning", h->lname);
        h->lknown = false;
        h->role = HA_CANDIDATE;
    } else if (!h->read_failing) { /* said once, not every poll */
        say(h, "cannot read the leader key: %s", err.msg);
    }
    if (rc == 0 || rc == -ENOENT) {
        if (h->read_failing)
            say(h, "etcd answers again");
        h->read_failing = false;
    } else {
        h->read_failing = true;
    }
    etcd_kv_free(&kv);
    if (rc == 0 && !h->stop) { /* wait for the key's deletion, read it again after a while */
        pthread_mutex_unlock(&h->mu);
        w = etcd_watch_delete(h->e, h->key, rev + 1, h->watch_ms, NULL);
        pthread_mutex_lock(&h->mu);
    }
    if (h->role == HA_FOLLOWER && w < 0)
        nap(h, h->poll_ms);
}

/* CANDIDATE: a lease, then the create-if-absent txn. Caller holds mu. */
static void campaign(ha_elect_t *h)
{
    arb_err_t err = {{0}};
    int64_t lease = 0;
    json_t *resp = NULL;
    bool ok = false;
    char *val = NULL;
    int rc;

    pthread_mutex_unlock(&h->mu);
    int64_t sent = arb_mono_ms(); /* etcd starts the TTL after this */
    rc = etcd_lease_grant(h->e, h->ttl_s, &lease, &err);
    if (rc == 0) {
        json_t *v = json_pack("{s:s,s:s}", "name", h->name, "url", h->url);
        val = json_dumps(v, JSON_COMPACT);
        json_decref(v);
        json_t *cmp = json_array(), *succ = json_array(), *fail = json_array();
        json_array_append_new(cmp, etcd_cmp_create(h->key, 0));
        json_array_append_new(succ, etcd_op_put(h->key, val, strlen(val), lease));
        json_array_append_new(fail, etcd_op_get(h->key));
        rc = etcd_txn(h->e, cmp, succ, fail, &ok, &resp, &err);
    }
    if (lease && (rc < 0 || !ok)) /* lost (or unsure): give the lease back, follow */
        etcd_lease_revoke(h->e, lease, NULL);
    pthread_mutex_lock(&h->mu);
    if (rc < 0) {
        say(h, "campaign failed: %s", err.msg);
        h->role = HA_FOLLOWER;
        nap(h, h->poll_ms);
    } else if (ok) {
        h->term = etcd_header_rev(resp); /* the txn's revision: the key's create_revision */
        h->lease = lease;
        h->valid_until = sent + (int64_t)h->ttl_s * 1000 - MARGIN_MS;
        h->role = HA_LEADER;
        h->lknown = true;
        h->lterm = h->term;
        snprintf(h->lname, sizeof h->lname, "%s", h->name);
        snprintf(h->lurl, sizeof h->lurl, "%s", h->url);
        say(h, "LEADER: won the election (term %lld, lease %llx, TTL %d s)", (long long)h->term,
            (unsigned long long)lease, h->ttl_s);
    } else {
        json_t *r0 = json_object_get(json_array_get(json_object_get(resp, "responses"), 0),
                                     "response_range");
        json_t *kvj = json_array_get(json_object_get(r0, "kvs"), 0);
        h->role = HA_FOLLOWER;
        if (kvj) {
            const char *k = json_string_value(json_object_get(kvj, "key"));
            const char *v = json_string_value(json_object_get(kvj, "value"));
            etcd_kv_t kv = {0};
            kv.val = etcd_unb64(v ? v : "", &kv.vlen);
            kv.key = etcd_unb64(k ? k : "", &kv.klen);
            kv.create_rev = etcd_get_i64(kvj, "create_revision");
            if (kv.val && kv.key)
                see_leader(h, &kv);
            etcd_kv_free(&kv);
        }
    }
    json_decref(resp);
    free(val);
}

/* LEADER: renew, check, sleep TTL/3. Caller holds mu. */
static void lead(ha_elect_t *h)
{
    arb_err_t err = {{0}};
    int64_t ttl = 0, lease = h->lease, term = h->term;
    etcd_kv_t kv = {0};
    char why[600];

    pthread_mutex_unlock(&h->mu);
    int64_t sent = arb_mono_ms();
    int rc = etcd_lease_keepalive(h->e, lease, &ttl, &err);
    int rk = rc == 0 && ttl > 0 ? etcd_get(h->e, h->key, &kv, NULL, &err) : 0;
    int64_t now = arb_mono_ms();
    pthread_mutex_lock(&h->mu);
    if (h->role != HA_LEADER) {
        etcd_kv_free(&kv);
        return;
    }
    if (rc == 0 && ttl <= 0) {
        snprintf(why, sizeof why,
                 "etcd says lease %llx has expired (paused or cut off longer "
                 "than its %d s TTL); another controller may lead now",
                 (unsigned long long)lease, h->ttl_s);
        step_down(h, why);
    } else if (rc == 0 && rk == -ENOENT) {
        step_down(h, "the leader key is gone");
    } else if (rc == 0 && rk == 0 && kv.create_rev != term) {
        snprintf(why, sizeof why, "the leader key now belongs to term %lld",
                 (long long)kv.create_rev);
        step_down(h, why);
    } else if (rc == 0 && rk == 0) {
        h->valid_until = sent + ttl * 1000 - MARGIN_MS;
    } else if (now >= h->valid_until - MARGIN_MS) {
        snprintf(why, sizeof why,
                 "no keepalive answered in time: the lease may end in %lld ms (last error: %s)",
                 (long long)(h->valid_until + MARGIN_MS - now), err.msg);
        step_down(h, why);
    }
    etcd_kv_free(&kv);
    if (h->role == HA_LEADER)
        nap(h, h->ttl_s * 1000 / 3);
}

static void *elect_main(void *arg)
{
    ha_elect_t *h = arg;

    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        switch (h->role) {
        case HA_FOLLOWER:
            follow(h);
            break;
        case HA_CANDIDATE:
            campaign(h);
            break;
        case HA_LEADER:
            lead(h);
            break;
        case HA_STEPPED_DOWN:
            nap(h, 1000);
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

int ha_start(const ha_conf_t *c, ha_elect_t **out, arb_err_t *err)
{
    ha_elect_t *h;
    int rc;

    if (c->ttl_s < 5)
        return arb_errf(err, -EINVAL,
                        "--lease-ttl %d: at least 5 s (etcd itself takes about 3 s to replace a "
                        "lost etcd leader)",
                        c->ttl_s);
    if (!c->name || !*c->name || strlen(c->name) >= 64)
        return arb_errf(err, -EINVAL, "--name: give each controller a name of 1..63 characters");
    if (!c->url || strncmp(c->url, "http://", 7) != 0 || strlen(c->url) >= 200)
        return arb_errf(err, -EINVAL,
                        "--advertise-url '%s': the URL clients reach this controller at, "
                        "http://HOST:PORT",
                        c->url ? c->url : "");
    h = calloc(1, sizeof *h);
    if (!h)
        return arb_errf(err, -ENOMEM, "out of memory");
    h->members = strdup(c->members);
    h->prefix = strdup(c->prefix ? c->prefix : "/arbiter");
    h->name = strdup(c->name);
    h->url = strdup(c->url);
    h->ttl_s = c->ttl_s;
    h->poll_ms = c->poll_ms > 0 ? c->poll_ms : 200;
    h->watch_ms = 1000;
    pthread_mutex_init(&h->mu, NULL);
    arb_cond_init(&h->cv);
    if (!h->members || !h->prefix || !h->name || !h->url) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto fail;
    }
    snprintf(h->key, sizeof h->key, "%s/leader", h->prefix);
    if ((rc = etcd_open(h->members, &h->e, err)) < 0)
        goto fail;
    /* Requests must end well inside a lease, retries within a third of it. */
    etcd_set_timeouts(h->e, 1000, h->ttl_s * 1000 / 3);
    if (pthread_create(&h->thr, NULL, elect_main, h) != 0) {
        rc = arb_errf(err, -EAGAIN, "cannot start the election thread");
        goto fail;
    }
    *out = h;
    return 0;
fail:
    etcd_close(h->e);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->members);
    free(h->prefix);
    free(h->name);
    free(h->url);
    free(h);
    return rc;
}

void ha_stop(ha_elect_t *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thr, NULL);
    if (h->role == HA_LEADER) { /* hand over now rather than after a TTL */
        etcd_lease_revoke(h->e, h->lease, NULL);
        say(h, "resigned (term %lld): lease revoked", (long long)h->term);
    }
    etcd_close(h->e);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->members);
    free(h->prefix);
    free(h->name);
    free(h->url);
    free(h);
}

ha_role_t ha_role(ha_elect_t *h)
{
    pthread_mutex_lock(&h->mu);
    ha_role_t r = h->role;
    pthread_mutex_unlock(&h->mu);
    return r;
}

int64_t ha_term(ha_elect_t *h)
{
    pthread_mutex_lock(&h->mu);
    int64_t t = h->term;
    pthread_mutex_unlock(&h->mu);
    return t;
}

int ha_leader(ha_elect_t *h, char *name, size_t nn, char *url, size_t un, int64_t *term)
{
    int rc;

    pthread_mutex_lock(&h->mu);
    if (h->role == HA_LEADER && arb_mono_ms() < h->valid_until)
        rc = 1;
    else if (h->role == HA_LEADER) /* overdue renewal (paused?): perhaps no longer */
        rc = -ENOENT;
    else
        rc = h->lknown ? 0 : -ENOENT;
    if (rc >= 0) {
        snprintf(name, nn, "%s", h->lname);
        snprintf(url, un, "%s", h->lurl);
        *term = h->lterm;
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

void ha_why(ha_elect_t *h, char *buf, size_t n)
{
    pthread_mutex_lock(&h->mu);
    snprintf(buf, n, "%s", h->why);
    pthread_mutex_unlock(&h->mu);
}

void ha_step_down(ha_elect_t *h, const char *why)
{
    pthread_mutex_lock(&h->mu);
    step_down(h, why);
    pthread_mutex_unlock(&h->mu);
}
