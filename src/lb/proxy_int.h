/*
 * proxy_int.h: the proxy's private types, shared by proxy.c (event loop and
 * client sessions), backend.c (backends, pools, health, ejection, reload)
 * and admin.c (metrics, access log). Not for use outside src/lb.
 *
 * Ownership: px_t owns every session, backend connection, health check and
 * backend. Objects closed while events for them may still sit in the current
 * epoll batch are marked dead and freed at the end of the loop iteration.
 */
#ifndef ARB_LB_PROXY_INT_H
#define ARB_LB_PROXY_INT_H

#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>

#include "lb/http.h"
#include "lb/oai.h"
#include "lb/proxy.h"
#include "util/buf.h"

#define PX_BUF 16384 /* per-direction buffer; a request or response head must fit */
#define PX_TLS_PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2" /* both TLS sides */

/* The kind of object behind an epoll event; the first member of each. */
typedef enum px_kind {
    PX_DEAD = 0,
    PX_LISTEN,
    PX_ADMIN_LISTEN,
    PX_SIGNAL,
    PX_CLIENT,
    PX_BACKEND,
    PX_CHECK,
    PX_WATCH,
    PX_SCRAPE,
    PX_WAKE
} px_kind_t;

/* Timers: one list per timeout length. Re-arming moves a node to the tail,
 * so each list stays sorted by deadline and expiry looks at heads only. */
typedef struct px_tlist px_tlist_t;
typedef struct px_tnode {
    struct px_tnode *prev, *next;
    px_tlist_t *list;
    int64_t at;  /* deadline, ms */
    void *owner; /* the object (its first member is a px_kind_t) */
} px_tnode_t;
struct px_tlist {
    px_tnode_t *head, *tail;
    int64_t len_ms;
};

typedef struct px_stats {
    uint64_t requests, resp[6], connect_fail, io_fail, timeouts, ejections, retries;
    uint64_t checks_ok, checks_bad, bytes_out;
    uint64_t tls_fail;       /* handshakes to the backend that failed (btls.c), any connection */
    uint64_t lat_bucket[15]; /* see admin.c: px_lat_le */
    double lat_sum;
} px_stats_t;

typedef struct px_bconn px_bconn_t;
typedef struct px_check px_check_t;
typedef struct px_scrape px_scrape_t;
typedef struct px_hub px_hub_t;

#define PX_MAX_LOOPS 64

/* One backend as every event loop shares it (hub.c, --threads N > 1): what
 * a loop must see of the others' doing to pick consistently. The atomics
 * any loop updates; the rest under hub->mu. */
typedef struct px_shared_be {
    char name[256];
    atomic_uint inflight;             /* requests in flight there, all loops */
    atomic_uint prefill;              /* prompt blocks not yet prefilled there, all loops */
    atomic_bool hc_up;                /* the active checks' verdict (loop 0 checks) */
    atomic_llong eject_until;         /* the latest ejection by any loop, ms */
    atomic_ullong eng_ver;            /* bumped with each scrape (loop 0 scrapes) */
    atomic_llong svc_us;              /* lb_svc_t of all loops: ms x 1000, */
    atomic_llong svc_at_ms;           /* at_ms, */
    atomic_llong svc_busy_ms;         /* busy_ms (written under hub->mu) */
    lb_engine_t eng;                  /* hub->mu */
    char engine[16];                  /* hub->mu */
    uint64_t scrapes_ok, scrapes_bad; /* hub->mu */
    px_stats_t st[PX_MAX_LOOPS];      /* each loop's counters for it, published (hub->mu) */
    int refs;                         /* loops holding it (hub->mu) */
} px_shared_be_t;

typedef struct px_backend {
    char name[256];
    struct sockaddr_storage sa;
    socklen_t salen;
    uint32_t weight;
    int peer;          /* index in px->peers; -1 once removed */
    bool removed;      /* draining: no new requests, freed when refs drop to 0 */
    bool hc_up;        /* active checks' verdict; true without checks */
    int hc_ok, hc_bad; /* consecutive check results */
    int64_t hc_next;   /* ms */
    px_check_t *hc;    /* the check in flight */
    int fails;         /* consecutive failures (passive) */
    int ejections;     /* consecutive ejections, for the backoff */
    int64_t eject_until;
    int64_t up_since; /* slow start origin; 0 = none */
    px_bconn_t *idle; /* pooled connections, LIFO */
    int nidle;
    uint32_t inflight;
    uint32_t eff; /* last weight published to the policy */
    lb_load_t load;
    int64_t queue_at_ms, gpu_at_ms; /* when load.queue / load.gpu_util were last set, by
                                       either source (header, agent): newest wins */
    double hdr_queue;               /* the queue the replica's own header said, and when: what */
    int64_t hdr_queue_at_ms;        /* note() forwards to the autoscaler (never the node's) */
    double lat_ms;                  /* response time, peak EWMA (lb_peer_latency) */
    int64_t lat_at_ms;
    lb_engine_t eng; /* the model server's /metrics, last scrape (scrape.c) */
    char engine[16]; /* whose metric names it speaks ("vllm"), "" unknown */
    px_scrape_t *sc; /* the scrape in flight */
    int64_t sc_next; /* ms */
    uint64_t scrapes_ok, scrapes_bad;
    double ttft_ms;   /* time to the first response byte of inference requests, EWMA */
    uint32_t prefill; /* prompt blocks sent here not prefilled yet (lb_peer_t.prefill) */
    lb_svc_t svc;     /* time per request (admit.c: px_svc_*; sh->svc_* with several loops) */
    px_stats_t st;
    int refs;            /* busy + idle connections + the check */
    px_shared_be_t *sh;  /* its shared record (several loops), or NULL */
    bool tls;            /* spoken to over TLS (btls.c) */
    char tls_host[256];  /* the name its certificate is checked against (btls.c) */
    int64_t tls_said_ms; /* when a TLS failure was last logged; 0 never */
    uint64_t tls_unsaid; /* TLS failures since */
    int64_t eject_seen;  /* sh->eject_until last acted on (slow start after it) */
    bool hc_seen;        /* sh->hc_up last seen (slow start when it turns up) */
    uint64_t eng_ver;    /* sh->eng_ver last copied */
} px_backend_t;

struct px_bconn {
    px_kind_t kind; /* PX_BACKEND */
    int fd;
    gnutls_session_t tls; /* a TLS backend's session (btls.c); NULL plain */
    bool tls_up;          /* its handshake is done */
    px_backend_t *be;
    struct px_sess *s; /* NULL while pooled */
    bool rd, wr, hup, connected, reused;
    px_bconn_t *next, *prev; /* pool links; next: graveyard link once dead */
    bool pooled;
    px_tnode_t t; /* pool idle timer */
};

/* A scrape of a backend's metrics (scrape.c): GET, read to close. */
struct px_scrape {
    px_kind_t kind; /* PX_SCRAPE */
    int fd;
    gnutls_session_t tls; /* a TLS backend's session (btls.c); NULL plain */
    bool tls_up;
    px_backend_t *be;
    bool connected, reading;
    arb_buf_t buf; /* the request, then the reply (util/buf.h; at most 1 MiB) */
    uint32_t sent;
    px_tnode_t t;
    px_scrape_t *next; /* graveyard */
};

struct px_check {
    px_kind_t kind; /* PX_CHECK */
    int fd;
    gnutls_session_t tls; /* a TLS backend's session (btls.c); NULL plain */
    bool tls_up;
    px_backend_t *be;
    bool connected, reading;
    uint32_t sent, len; /* sending: bytes sent of len; reading: len bytes read */
    char buf[1024];
    px_tnode_t t;
    px_check_t *next; /* graveyard */
};

typedef enum px_state {
    S_HEAD = 0, /* reading a request head */
    S_BODY,     /* an OpenAI request: reading its body before routing it */
    S_QUEUED,   /* every replica saturated: waiting in the admission queue (admit.c) */
    S_CONNECT,  /* waiting for a backend connection */
    S_FWD,      /* request and response streaming */
    S_REPLY,    /* writing a reply of our own, then close or keep */
} px_state_t;

typedef struct px_tenant px_tenant_t;

/* What routing knows of an OpenAI request (oai.h), per session. */
typedef struct px_infer {
    oai_kind_t kind; /* OAI_NONE: not an inference request */
    bool parsed;     /* the body was read and parsed */
    bool stream;
    bool first_byte;  /* a response body byte reached the client (TTFT taken) */
    uint64_t model;   /* lb_hash64 of the model name; 0 none */
    uint64_t tenant;  /* lb_hash64 of the tenant header or the API key; 0 anonymous */
    uint64_t *blocks; /* the prompt's block chain (malloc, c->max_blocks) */
    int nblocks;
    uint32_t charge;   /* blocks the picked backend has to prefill for it (px_prefill) */
    uint32_t charged;  /* of which added to the attached backend's prefill count */
    int64_t queued_ns; /* when it entered the admission queue */
} px_infer_t;

typedef struct px_sess {
    px_kind_t kind; /* PX_CLIENT */
    int fd;
    gnutls_session_t tls; /* --cert-file: the client's TLS session (ltls.c); NULL plain */
    bool tls_up;          /* its handshake is done */
    bool admin;           /* on the admin listener */
    px_state_t state;
    bool rd, wr, hup; /* client readiness */
    px_tnode_t t;
    char *in; /* client bytes; the current request starts at in[0] */
    uint32_t in_len, in_cap, req_end, req_sent;
    bool in_malloc;  /* in was grown past PX_BUF to hold an OpenAI body (malloc) */
    bool replayable; /* in[0..req_end) is the whole request so far */
    http_head_t req;
    http_body_t reqb;
    char *out; /* bytes for the client */
    uint32_t out_cap, out_len, out_sent, resp_off;
    bool resp_started; /* a response byte reached the client buffer */
    bool resp_head;    /* the final response head is parsed */
    http_head_t resp;
    http_body_t respb;
    bool bc_reusable;
    bool keep;       /* keep the client connection after this reply */
    bool out_malloc; /* out is an admin reply from malloc, not a pool buffer */
    px_bconn_t *bc;
    px_backend_t *tried[8];
    int ntried, reuse_retries;
    int64_t t0_ns, t_att_ns; /* request head parsed; attached to a backend */
    double svc_n;            /* requests at that backend as it was sent, itself included */
    int status;
    char what[128]; /* "METHOD target" for the access log (the head may be gone) */
    struct sockaddr_storage peer;
    px_infer_t inf;
    struct px_sess *qnext; /* admission queue, per tenant (admit.c) */
    struct px_sess *next;  /* graveyard */
} px_sess_t;

/* A tenant with requests in the admission queue (admit.c). */
struct px_tenant {
    uint64_t id;
    px_sess_t *head, *tail;
    int n;
};

typedef struct px_admit_stats {
    uint64_t queued, dispatched, rejected_full, rejected_share, rejected_slo, rejected_late,
        expired;
    uint64_t ttft_bucket[15];
    double ttft_sum;
    uint64_t infer_requests[3]; /* by oai_kind_t */
    uint64_t parse_errors, unparsed;
} px_admit_stats_t;

typedef struct px {
    const lb_proxy_conf_t *c;
    gnutls_certificate_credentials_t tls_cred; /* --cert-file (ltls.c); NULL: plain */
    gnutls_priority_t tls_prio;
    gnutls_certificate_credentials_t btls_cred; /* TLS to backends (btls.c); NULL: none */
    gnutls_priority_t btls_prio;
    int ep, lfd, afd, sfd;
    int64_t now_ms, now_ns;
    uint64_t rng;
    lb_policy_t pol;
    lb_peer_t *peers; /* the policy's view: backends not removed */
    int npeers;
    uint8_t *skip;       /* npeers flags, scratch for picks */
    px_backend_t **pmap; /* peer index -> backend */
    px_backend_t **bes;  /* every backend, removed ones until drained */
    int nbes;
    px_tlist_t t_client, t_connect, t_server, t_pool, t_check, t_scrape, t_queue;
    int nsess, nclients;
    bool accept_paused, stopping;
    int64_t stop_deadline;
    px_sess_t *dead_s;
    px_bconn_t *dead_b;
    px_check_t *dead_c;
    char **freebufs; /* PX_BUF buffers for reuse */
    int nfree, capfree;
    FILE *log;
    bool log_dirty;
    http_want_t want;
    uint64_t accepted, retries, no_backend, bad_requests;
    uint64_t own_failures;  /* our own resource failures (EMFILE, ...): no backend blamed */
    uint64_t client_aborts; /* clients gone before their response: backend connection closed */
    int64_t own_said_ms;    /* when the last own failure was logged */
    uint64_t own_unsaid;    /* own failures since then */
    px_stats_t total;
    /* inference (oai.h, scrape.c, admit.c) */
    lb_pindex_t *pindex;   /* the prefix index the policy uses (shared by the loops) */
    px_tenant_t **tenants; /* those with queued requests; ntenants of them */
    int ntenants, captenants, tcursor, nqueued;
    bool pumping; /* px_admit_pump is running (a kicked session must not re-enter it) */
    int64_t next_pump;
    lb_drain_t drain; /* inference requests finished per second (Retry-After, SLO; slo.c) */
    bool svc_on;      /* the policy judges replicas by time (kv, inference): px_svc_* */
    px_admit_stats_t ad;
    px_scrape_t *dead_sc;
    /* several loops (hub.c): NULL with one */
    px_hub_t *hub;
    int id;           /* 0: the main loop (signals, admin, checks, scrapes, the source) */
    int64_t next_pub; /* when this loop next publishes its counters */
    bool pub_dirty;   /* events since the last publication */
    lb_source_t hsrc; /* a worker's backend source: the hub's copy of the main loop's set */
} px_t;

/* What a loop's counters say, published for the admin listener (hub.c). */
typedef struct px_snap {
    px_stats_t total;
    px_admit_stats_t ad;
    uint64_t accepted, retries, no_backend, bad_requests;
    int nclients, nqueued;
} px_snap_t;

struct px_hub {
    pthread_mutex_t mu;
    int nloops;
    px_t *loops[PX_MAX_LOOPS];
    int wake[PX_MAX_LOOPS]; /* eventfds: a worker's backend set changed, or stop */
    atomic_bool stop;
    lb_target_t *targets; /* the main loop's set, for the workers (mu) */
    int ntargets;
    px_shared_be_t **bes; /* (mu) */
    int nbes, capbes;
    px_snap_t snap[PX_MAX_LOOPS]; /* (mu) */
    lb_pindex_t *pindex;
};

/* hub.c */
int px_hub_new(px_hub_t **out, int nloops, arb_err_t *err);
void px_hub_free(px_hub_t *h);
/* The shared record of backend `name` (made on first use), and letting it go. */
px_shared_be_t *px_hub_be(px_hub_t *h, const char *name);
void px_hub_be_put(px_hub_t *h, px_shared_be_t *sb);
/* The main loop's set changed: keep a copy, wake the workers. */
void px_hub_publish(px_hub_t *h, const lb_target_t *t, int n);
/* A worker's backend source (reads the hub's copy; watch_fd its eventfd). */
void px_hub_source(px_hub_t *h, int id, lb_source_t *s);
/* Tell every worker to stop. */
void px_hub_stop(px_hub_t *h);
/* Publish this loop's counters (every 100 ms, and before the admin answers);
 * copy what the main loop scraped into this loop's backends. */
void px_hub_sync(px_t *px);
/* Sums over the loops, for the admin: totals, one backend's counters. */
void px_hub_totals(px_t *px, px_snap_t *out);
void px_hub_backend_stats(px_t *px, const px_backend_t *b, px_stats_t *out);

/* TLS on the listener (ltls.c). px_tls_setup loads --cert-file/--key-file
 * for one loop; px_tls_session gives a client session its TLS (0, or
 * -errno); px_tls_handshake: 1 done (or plain), 0 waiting, -1 failed;
 * px_crecv/px_csend are recv/send over it; px_cdrained: may a read of got
 * bytes out of want clear the readable flag (plain short reads only). */
int px_tls_setup(px_t *px, const lb_proxy_conf_t *c, arb_err_t *err);
void px_tls_teardown(px_t *px);
int px_tls_session(px_t *px, px_sess_t *s);
void px_tls_end(px_sess_t *s);
int px_tls_handshake(px_sess_t *s);
ssize_t px_crecv(px_sess_t *s, void *buf, size_t n);
ssize_t px_csend(px_sess_t *s, const void *buf, size_t n);
bool px_cdrained(const px_sess_t *s, size_t got, size_t want);

/* TLS to the backends (btls.c). px_btls_setup loads the client credentials
 * for one loop (px_tls_setup calls it); px_btls_new: a client session over
 * fd for backend b when b->tls (*out NULL for a plain one; -ENOMEM, ours);
 * px_btls_handshake: 1 done (rd, wr set), 0 waiting (the blocked direction
 * cleared), -1 failed (logged, counted in b's tls_fail: the caller fails
 * the backend), -ENOMEM ours; px_brecv/px_bsend: recv/send over it (t NULL:
 * plain; a TLS error is errno EPROTO, its GnuTLS code in *last, for
 * px_btls_io_failed to count and log with its reason); px_btls_idle_ok: a pooled connection turned
 * readable and what came was TLS's own (a ticket), not data or an end; px_btls_failed: count and
 * log a TLS failure of b (at most once per 10 s). */
int px_btls_setup(px_t *px, const lb_proxy_conf_t *c, arb_err_t *err);
void px_btls_teardown(px_t *px);
int px_btls_new(px_t *px, px_backend_t *b, int fd, gnutls_session_t *out);
void px_btls_end(gnutls_session_t *t);
int px_btls_handshake(px_t *px, px_backend_t *b, gnutls_session_t t, bool *rd, bool *wr,
                      const char *doing);
ssize_t px_brecv(gnutls_session_t t, int fd, void *buf, size_t n, int *last);
ssize_t px_bsend(gnutls_session_t t, int fd, const void *buf, size_t n, int *last);
void px_btls_io_failed(px_t *px, px_backend_t *b, gnutls_session_t t, int rc, const char *doing);
bool px_btls_idle_ok(gnutls_session_t t, int fd);
/* gnutls_record_recv that says GNUTLS_E_AGAIN only when the socket is dry (ltls.c):
 * after a TLS 1.3 message of TLS's own (a ticket, a key update) GnuTLS says "again"
 * with the next record already waiting, and an edge-triggered loop gets no event for it. */
ssize_t px_tls_record_recv(gnutls_session_t t, int fd, void *buf, size_t n);
/* Set a session's transport to the socket fd (send without SIGPIPE, recv). */
void px_tls_transport(gnutls_session_t t, int fd);
void px_btls_failed(px_t *px, px_backend_t *b, const char *why, const char *doing);

/* addresses (source.c): "host:port"; passive allows an empty host. */
int px_resolve(const char *addr, bool passive, struct sockaddr_storage *sa, socklen_t *len,
               arb_err_t *err);
void px_addr_text(const struct sockaddr_storage *sa, char *buf, size_t n);

/* sessions (proxy.c), for the loop (loop.c) */
enum { F_CONNECT, F_CONNECT_TIMEOUT, F_IO, F_BAD_RESPONSE, F_SERVER_TIMEOUT, F_TLS };
void px_sess_new(px_t *px, int fd, bool admin, const struct sockaddr_storage *peer);
void px_sess_close(px_t *px, px_sess_t *s);
void px_sess_run(px_t *px, px_sess_t *s);
void px_sess_backend_failed(px_t *px, px_sess_t *s, int why);
void px_sess_reply_text(px_t *px, px_sess_t *s, int code, const char *reason, const char *msg);
/* Is -err a failure of this process's own resources (open files, buffers,
 * memory, local ports) rather than of the peer? Such failures are logged
 * (px_own_failure, at most one line per 10 s) and never count against a
 * backend. */
bool px_own_errno(int err);
void px_own_failure(px_t *px, int err, const char *doing);
void px_bconn_event(px_t *px, px_bconn_t *bc, uint32_t ev);
/* the loop (loop.c): accept what is pending (accepting resumes after a close) */
void px_accept(px_t *px);
void px_clock_now(px_t *px);

/* timers (proxy.c) */
void px_timer_set(px_t *px, px_tlist_t *l, px_tnode_t *n);
void px_timer_del(px_tnode_t *n);

/* buffers (proxy.c) */
char *px_buf_get(px_t *px);
void px_buf_put(px_t *px, char *b);

/* backends (backend.c) */
int px_backends_load(px_t *px, arb_err_t *err);
void px_backends_refresh(px_t *px);
void px_backends_free(px_t *px);
int px_pick(px_t *px, px_sess_t *s, px_backend_t **out);
px_bconn_t *px_pool_take(px_t *px, px_backend_t *b);
px_bconn_t *px_bconn_open(px_t *px, px_backend_t *b, int *err);
void px_bconn_close(px_t *px, px_bconn_t *bc);
void px_bconn_release(px_t *px, px_bconn_t *bc);
void px_backend_ok(px_t *px, px_backend_t *b);
void px_backend_failed(px_t *px, px_backend_t *b);
void px_backend_load_report(px_t *px, px_backend_t *b, const http_head_t *h);
/* The load the replica's agent reported (lb_source_ops_t.reports). */
void px_backend_agent_load(px_t *px, px_backend_t *b, const lb_agent_load_t *l);
void px_backend_latency(px_t *px, px_backend_t *b, double ms);
void px_inflight(px_t *px, px_backend_t *b, int d);
/* s's prompt is prefilled at its backend, or s leaves it: its charge off the count. */
void px_prefill_done(px_t *px, px_sess_t *s, px_backend_t *b);
void px_prefill_add(px_t *px, px_backend_t *b, int64_t d);
void px_backend_unref(px_t *px, px_backend_t *b);
void px_backends_sweep(px_t *px);
void px_checks_run(px_t *px);
void px_check_event(px_t *px, px_check_t *hc, uint32_t ev);
void px_check_timeout(px_t *px, px_check_t *hc);
int64_t px_checks_next(const px_t *px);

/* scrapes of the model servers' metrics (scrape.c) */
void px_scrapes_run(px_t *px);
int64_t px_scrapes_next(const px_t *px);
void px_scrape_event(px_t *px, px_scrape_t *sc, uint32_t ev);
void px_scrape_timeout(px_t *px, px_scrape_t *sc);

/* admission (admit.c). px_admit: s is routed now, or queued, or answered 429;
 * px_admit_pump: dispatch what the queue may now (after a completion, a
 * scrape, on a timer); px_admit_remove: s leaves the queue (closed). */
void px_admit(px_t *px, px_sess_t *s);
void px_admit_pump(px_t *px);
void px_admit_pump_but(px_t *px, px_sess_t *self);
void px_admit_remove(px_t *px, px_sess_t *s);
void px_admit_expired(px_t *px, px_sess_t *s);
void px_admit_done(px_t *px); /* an inference request finished (the drain rate) */
/* The time per request at b (lb_svc_t): one of s's kind sent there (before
 * it counts in flight); s finished there (or timed out: its duration a
 * lower bound), while it still counts; peer i's view of it (several loops). */
void px_svc_sent(px_t *px, px_sess_t *s, px_backend_t *b);
void px_svc_done(px_t *px, px_sess_t *s, px_backend_t *b);
void px_svc_view(px_t *px, int i);
/* b's time per request now, ms (0 unknown), as the policy sees it (/backends). */
double px_svc_ms(px_t *px, const px_backend_t *b);

/* proxy.c, for admit.c: route s now (0), or -EBUSY when every replica is
 * saturated (s untouched); a reply of our own with extra header lines. */
int px_sess_assign(px_t *px, px_sess_t *s);
/* Run s's state machine now: it was moved on from outside its own events
 * (routed from the queue, answered 429), and its sockets' edges are spent. */
void px_sess_kick(px_t *px, px_sess_t *s);
void px_sess_reply(px_t *px, px_sess_t *s, int code, const char *reason, const char *ctype,
                   const char *extra, const char *body);

/* admin, log (admin.c) */
char *px_admin_reply(px_t *px, const http_head_t *req, size_t *len);
void px_log(px_t *px, px_sess_t *s, px_backend_t *b);
void px_stats_response(px_stats_t *st, int status, double secs);
void px_stats_ttft(px_admit_stats_t *st, double secs);

#endif
