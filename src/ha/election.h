/*
 * election.h: one leader among several controllers, by an etcd lease.
 *
 * A controller's role, as this module drives it (election.c has the
 * details and the invariants):
 *
 *              leader key absent            txn "create if create_revision == 0"
 *   FOLLOWER -------------------> CANDIDATE -----------------------------------> LEADER
 *      ^                              |           succeeded: term = its revision    |
 *      |   the txn failed: another    |                                             |
 *      +------------------------------+      keepalive says the lease is gone,      |
 *          won; follow it                    no keepalive answered for a TTL, or    |
 *                                            the leader key is no longer ours       v
 *                                                                             STEPPED_DOWN
 *                                                                             (final: the
 *                                                                             process exits)
 *
 * The leader key is PREFIX/leader, its value {"name", "url"}, attached to
 * the leader's lease (TTL >= 5 s): if the leader dies or pauses, the lease
 * expires, etcd deletes the key, and a follower (which watches the key)
 * becomes candidate. The term is the key's create_revision: it
 * grows with every election and is the fencing token every write of the
 * leader carries (store_etcd.c's fence=TERM).
 *
 * Return convention: arbiter.h.
 */
#ifndef ARB_HA_ELECTION_H
#define ARB_HA_ELECTION_H

#include "arbiter/arbiter.h"

typedef enum ha_role {
    HA_FOLLOWER = 0,
    HA_CANDIDATE,
    HA_LEADER,
    HA_STEPPED_DOWN,
} ha_role_t;

extern const char *const ha_role_names[]; /* "follower", ... */

typedef struct ha_conf {
    const char *members; /* etcd members "HOST:PORT[,HOST:PORT...]" */
    const char *prefix;  /* "/arbiter" */
    const char *name;    /* this controller's name (--name) */
    const char *url;     /* where clients reach it (--advertise-url) */
    int ttl_s;           /* the leader lease, seconds (>= 5) */
    int poll_ms;         /* a follower's retry interval when etcd fails (200) */
} ha_conf_t;

typedef struct ha_elect ha_elect_t;

/* Start campaigning in a thread of its own; conf's strings are copied.
 * Free with ha_stop. */
int ha_start(const ha_conf_t *conf, ha_elect_t **out, arb_err_t *err);
/* Stop the thread; a leader that has not stepped down revokes its lease,
 * so that a follower takes over at once. Frees h. */
void ha_stop(ha_elect_t *h);
ha_role_t ha_role(ha_elect_t *h);
/* This process's term (the leader key's create_revision) once LEADER. */
int64_t ha_term(ha_elect_t *h);
/* The leader as last seen: 1 when it is this process, 0 another (name,
 * url, term filled), -ENOENT none known. */
int ha_leader(ha_elect_t *h, char *name, size_t nn, char *url, size_t un, int64_t *term);
/* Why this process stepped down (empty before). */
void ha_why(ha_elect_t *h, char *buf, size_t n);
/* One timeline line in the log, "arbiter controller NAME ha: HH:MM:SS.mmm
 * ..." (UTC; util/log.h), as the election's own lines are written. */
void ha_log(ha_elect_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Step down now (the controller found its writes fenced). */
void ha_step_down(ha_elect_t *h, const char *why);

#endif
