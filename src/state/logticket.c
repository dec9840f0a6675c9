/*
 * logticket.c: short-lived tickets that let a user read one task's log
 * from the agent that holds it (`arbiter logs` from any host, the way
 * `kubectl logs` goes to the kubelet).
 *
 * Why tickets, checked by the controller: the bytes go straight from the
 * agent to the user, so the controller stays off the bulk data path, while
 * the decision "may this caller read job J's logs" stays where teams and
 * jobs are known. Three designs were weighed:
 *   - the controller proxies the bytes: simplest auth, but every log byte
 *     and every --follow poll of every user would cross the controller;
 *   - tickets signed with a key shared with each agent (checked offline):
 *     no round trip, but it needs a MAC, key distribution and rotation,
 *     and an expiry that compares the controller's clock with the agent's;
 *   - random tickets the agent checks with the controller (this file): one
 *     small request per new ticket (the agent caches a positive answer for
 *     the ticket's remaining life, counted on its own monotonic clock), no
 *     shared secret, expiry on the controller's monotonic clock only, and
 *     a ticket can be bound to exactly one job, task and node.
 *
 * A ticket is 128 random bits (getrandom), bound to (job, task, node) and
 * valid for ST_TICKET_TTL_NS from its issue. Issuing needs the right to see
 * the job (a user sees only the team's jobs, st_job_get); checking needs the
 * agent role and must name the same job, task and node. The table is small
 * (ST_TICKETS_MAX; expired tickets are dropped as new ones come), lives in
 * memory only (a restarted controller forgets its tickets; clients ask for
 * new ones), and is guarded by s->mu like everything in st_t. A ticket shown
 * is compared with each one held in full (SHA-256 of both, then every byte),
 * so the time a check takes says nothing of how close a guess came.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "state/state_int.h"
#include "tls/tls.h"

#define ST_TICKET_TTL_NS (60LL * 1000000000LL)
#define ST_TICKETS_MAX 4096

typedef struct st_lticket {
    char id[33];
    uint64_t job;
    int task;
    char node[254];
    int64_t expires; /* the controller clock, st_now_ns */
} st_lticket_t;

struct st_tickets {
    st_lticket_t v[ST_TICKETS_MAX];
    int n;
};

void st_tickets_free(st_t *s)
{
    free(s->tickets);
    s->tickets = NULL;
}

/* Drop expired tickets (keeps order irrelevant). Caller holds s->mu. */
static void prune(struct st_tickets *t, int64_t now)
{
    for (int i = 0; i < t->n;)
        if (t->v[i].expires <= now)
            t->v[i] = t->v[--t->n];
        else
            i++;
}

void st_logs_ticket_free(st_logs_ticket_t *t)
{
    free(t->logs_url);
    memset(t, 0, sizeof *t);
}

int st_logs_ticket(st_t *s, const st_who_t *who, uint64_t job, int64_t task, st_logs_ticket_t *out,
                   int64_t *ticket, arb_err_t *err)
{
    json_t *inv = NULL;
    st_job_view_t j = {0};
    st_node_view_t nd = {0};
    const char *node, *url;
    unsigned char raw[16];
    st_lticket_t e;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = st_job_get(s, who, job, &j, ticket, err)) < 0)
        return rc;
    size_t ntasks = (size_t)j.ntasks;
    if (task < 0 || (size_t)task >= ntasks) {
        rc = arb_errf(err, -ENOENT, "task %lld: job %llu has %zu task%s (0..%zu)", (long long)task,
                      (unsigned long long)job, ntasks, ntasks == 1 ? "" : "s", ntasks - 1);
        goto out;
    }
    node = j.tasks[task].node; /* borrowed: the state's names outlive the view */
    if (!node)
        node = j.tasks[task].last_node;
    if (!node) {
        rc = arb_errf(err, -EBUSY, "job %llu task %lld has not run yet: no log to read",
                      (unsigned long long)job, (long long)task);
        goto out;
    }
    if ((rc = st_node_get(s, node, &nd, ticket, err)) < 0)
        goto out;
    if (nd.inventory_json)
        inv = json_loads(nd.inventory_json, 0, NULL);
    url = json_string_value(json_object_get(inv, "logs_url"));
    if (!url || !url[0]) {
        rc = arb_errf(err, -ENOENT,
                      "node '%s' does not serve logs (its agent runs with --logs-listen off, or "
                      "is older); read them on that node, or give --log-dir for a shared "
                      "directory",
                      node);
        goto out;
    }
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        rc = arb_errf(err, -EIO, "no randomness for a ticket (getrandom failed); try again");
        goto out;
    }
    memset(&e, 0, sizeof e);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(e.id + 2 * i, 3, "%02x", raw[i]);
    e.job = job;
    e.task = (int)task;
    snprintf(e.node, sizeof e.node, "%s", node);
    pthread_mutex_lock(&s->mu);
    e.expires = st_now_ns(s) + ST_TICKET_TTL_NS;
    if (!s->tickets)
        s->tickets = calloc(1, sizeof *s->tickets);
    if (s->tickets) {
        prune(s->tickets, st_now_ns(s));
        if (s->tickets->n == ST_TICKETS_MAX) { /* full of live tickets: the oldest goes */
            int old = 0;
            for (int i = 1; i < s->tickets->n; i++)
                if (s->tickets->v[i].expires < s->tickets->v[old].expires)
                    old = i;
            s->tickets->v[old] = s->tickets->v[--s->tickets->n];
        }
        s->tickets->v[s->tickets->n++] = e;
    }
    pthread_mutex_unlock(&s->mu);
    if (!s->tickets) {
        rc = arb_errf(err, -ENOMEM, "out of memory for log tickets");
        goto out;
    }
    if (!(out->logs_url = strdup(url))) {
        rc = arb_errf(err, -ENOMEM, "out of memory for a log ticket");
        goto out;
    }
    out->job = job;
    out->task = task;
    out->node = nd.name; /* interned: outlives nd */
    snprintf(out->ticket, sizeof out->ticket, "%s", e.id);
    out->ttl_ms = ST_TICKET_TTL_NS / 1000000;
out:
    st_job_view_free(&j);
    json_decref(inv);
    st_node_view_free(&nd);
    return rc;
}

int st_logs_ticket_check(st_t *s, const char *id, uint64_t job, int64_t task, const char *node,
                         int64_t *ttl_ms, int64_t *ticket, arb_err_t *err)
{
    int rc = -EACCES;
    int64_t left = 0;
    bool other = false;

    *ttl_ms = 0;
    *ticket = 0;
    pthread_mutex_lock(&s->mu);
    int64_t now = st_now_ns(s);
    for (int i = 0; s->tickets && i < s->tickets->n; i++) {
        const st_lticket_t *e = &s->tickets->v[i];
        /* in time independent of where a guess differs (tls_secret_equal) */
        if (e->expires <= now || !tls_secret_equal(e->id, id))
            continue;
        if (e->job == job && e->task == task && !strcmp(e->node, node)) {
            rc = 0;
            left = e->expires - now;
        } else {
            other = true;
            rc = arb_errf(err, -EACCES,
                          "ticket is for job %llu task %d on node '%s', not job %llu task %lld "
                          "on node '%s'",
                          (unsigned long long)e->job, e->task, e->node, (unsigned long long)job,
                          (long long)task, node);
        }
        break;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == -EACCES && !other)
        arb_errf(err, -EACCES, "unknown or expired log ticket; ask the controller for a new one");
    if (rc == 0)
        *ttl_ms = left / 1000000;
    return rc;
}
