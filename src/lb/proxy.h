/*
 * proxy.h: `arbiter lb`, an HTTP/1.1 reverse proxy for inference replicas.
 * One thread, one epoll loop, non-blocking sockets, edge-triggered events.
 *
 *   client --keep-alive--> [ proxy: parse head, pick (lb.h), stream ] --pooled--> backend
 *
 * It parses only what it must (http.h): the request and response heads, and
 * where each body ends; bytes are forwarded as received, bodies streamed.
 * Backend connections are pooled per backend and reused across clients.
 * Failure handling: a connect that fails or times out is retried on another
 * backend for any request (the backend saw nothing); a reused pooled
 * connection that dies, or a backend that fails before answering, is retried
 * for idempotent requests only; consecutive failures eject a backend for a backoff
 * that doubles up to a cap; active health checks (interval, rise, fall) mark
 * backends down and up; a backend that comes back gets a slow-start ramp.
 * Observability: an access log, and /metrics (Prometheus), /backends (JSON),
 * /healthz on a separate admin listener.
 *
 * For LLM replicas (openai): POST /v1/completions and /v1/chat/completions
 * bodies are read whole (up to body_max) and parsed (oai.h) before routing:
 * the prompt's block chain and the model go to the policy (prefix, kv,
 * inference); responses, server-sent events included, stream through as
 * they come. Each backend's Prometheus metrics are scraped (scrape.c, the
 * names in prom.h) for the policies. When every replica is saturated the
 * request waits in an admission queue (admit.c: bounded, fair across
 * tenants, shed with 429 and Retry-After past its bound or SLO).
 *
 * Where the backends come from is a backend source (lb_source_ops_t): a
 * static list, a file re-read on SIGHUP (graceful: in-flight requests to a
 * removed backend finish, its idle connections close), or the controller,
 * whose service endpoints it long-polls (the same graceful reload on each
 * change), reporting its in-flight counts back for autoscaling.
 */
#ifndef ARB_LB_PROXY_H
#define ARB_LB_PROXY_H

#include "lb/lb.h"
#include "tls/tls.h"

/* One backend as a source names it. */
typedef struct lb_target {
    char addr[256]; /* "host:port", "[v6]:port" */
    uint32_t weight;
    bool tls; /* named https://HOST:PORT: spoken to over TLS */
} lb_target_t;

/* Parse "[https://]HOST:PORT[=WEIGHT]". */
int lb_target_parse(const char *s, lb_target_t *t, arb_err_t *err);

/* A backend source. load() gives the current set (allocated; the caller
 * frees *out with free()). watch_fd(): an fd that turns readable when the
 * set has changed (a controller watch; the proxy reads it empty, then
 * calls load()), or -1: the set is re-read on SIGHUP. note (may be NULL):
 * once a second, this balancer's in-flight requests per backend and the
 * queue each replica reported in the last 2 s (X-Arbiter-Load; else 0), for a
 * source that reports load (the controller's autoscaler). */
/* What a replica's agent last reported, as a source passes it on (reports
 * below): at_ms is when the agent reported, on the monotonic clock in ms. */
typedef struct lb_agent_load {
    char addr[256];
    double gpu_util; /* 0..1, the replica's GPUs */
    double queue;    /* the node's queue length */
    int64_t at_ms;
} lb_agent_load_t;

/* reports (may be NULL): once a second, the load the replicas' agents last
 * reported (allocated; the caller frees *out); the proxy feeds it to the
 * feedback policy beside the X-Arbiter-Load response header, newest wins. */
typedef struct lb_source_ops {
    const char *name;
    int (*load)(void *st, lb_target_t **out, int *n, arb_err_t *err);
    int (*watch_fd)(void *st);
    void (*fini)(void *st);
    void (*note)(void *st, const char *const *addr, const uint32_t *inflight, const double *queue,
                 int n);
    int (*reports)(void *st, lb_agent_load_t **out, int *n);
    bool empty_ok; /* an empty set is a state, not an error (a service with no ready
                      replica: every request gets 503) */
} lb_source_ops_t;

typedef struct lb_source {
    const lb_source_ops_t *ops;
    void *st;
} lb_source_t;

/* A fixed list (copied). */
int lb_source_static(lb_source_t *s, const lb_target_t *t, int n, arb_err_t *err);
/* A file of HOST:PORT[=WEIGHT] lines ('#' comments), re-read on SIGHUP. */
int lb_source_file(lb_source_t *s, const char *path, arb_err_t *err);
/* The ready, not draining replicas of service `name` from the controller
 * at url (source_ctl.c): long-polls GET /v1/services/NAME and reports
 * in-flight counts to POST /v1/services/NAME/load. The first load() waits
 * up to 30 s for a ready replica. tls (borrowed for the process's life):
 * the CA an https:// controller is checked with and a client certificate;
 * what it leaves NULL comes from ARBITER_CACERT, ARBITER_CERT_FILE and
 * ARBITER_KEY_FILE. */
int lb_source_controller(lb_source_t *s, const char *url, const char *name, const tls_client_t *tls,
                         arb_err_t *err);
void lb_source_fini(lb_source_t *s);

typedef struct lb_proxy_conf {
    const char *listen;                       /* "127.0.0.1:8080"; port 0 picks one */
    const char *tls_cert_file, *tls_key_file; /* serve HTTPS on listen (NULL: plain) */
    /* TLS to the backends (btls.c): every one with backend_tls, else those named https:// */
    bool backend_tls;
    bool backend_tls_any;                   /* load client credentials (any of these is set) */
    const char *backend_cacert;             /* their CA (NULL: the system's) */
    const char *backend_cert, *backend_key; /* a client certificate for them (mTLS) */
    const char *backend_sni;                /* the name sent and checked (NULL: the host) */
    bool backend_insecure;                  /* check nothing (--backend-insecure-skip-verify) */
    const char *admin;                      /* NULL, or the admin listener's address */
    lb_source_t source;
    const lb_ops_t *policy;
    lb_opts_t opts;
    const char *hash_header; /* hash policy key: this header's value ... */
    const char *hash_cookie; /* ... or this cookie's */
    const char *health_path; /* NULL: no active checks */
    int health_interval_ms, health_timeout_ms, rise, fall;
    int connect_timeout_ms, client_timeout_ms, server_timeout_ms, pool_idle_ms;
    int eject_after; /* consecutive failures that eject; 0: never */
    int eject_base_ms, eject_max_ms;
    int slow_start_ms; /* 0: none */
    int retries;       /* other backends tried after a failed connect */
    int max_conns;     /* client connections at once (lb.c sizes it from the open-file limit) */
    int maxconn;       /* requests in flight per backend (HAProxy's maxconn); more wait in
                          the admission queue (max_queue, queue_timeout_ms); 0: no cap */
    const char *access_log; /* NULL, a path, or "-" for stdout */
    const char *ready_file; /* NULL, or where to write the bound addresses */
    uint64_t seed;          /* randomness for p2c, feedback; 0: from the clock */
    /* inference (OpenAI API requests, model-server metrics, admission) */
    bool openai;               /* read /v1/completions and /v1/chat/completions bodies */
    uint32_t body_max;         /* bodies up to this are read whole before routing */
    uint32_t block_bytes;      /* prompt block size for the prefix index */
    int max_blocks;            /* blocks hashed per prompt at most */
    const char *scrape_path;   /* NULL: no scraping; else GET this on each backend */
    int scrape_interval_ms;    /* between scrapes of one backend */
    const char *tenant_header; /* the tenant is this header, else the API key */
    int max_queue;             /* requests held when every replica is saturated; 0: none */
    int ttft_slo_ms;           /* shed when the expected wait exceeds this; 0: no SLO */
    int queue_timeout_ms;      /* a queued request is shed (429) after this */
    int threads;               /* event loops (SO_REUSEPORT, shared state: hub.c); 1 default */
} lb_proxy_conf_t;

void lb_proxy_conf_default(lb_proxy_conf_t *c);
/* Can the backend TLS settings of c be loaded (the CA, the client
 * certificate and its key)? 0, or -EINVAL with the flag and file named. */
int lb_backend_tls_check(const lb_proxy_conf_t *c, arb_err_t *err);

/* Run until SIGTERM or SIGINT (then drain for up to 5 s). Returns 0, or a
 * negative errno with text (bad address, bind failure, source error). */
int lb_proxy_run(const lb_proxy_conf_t *c, arb_err_t *err);

#endif
