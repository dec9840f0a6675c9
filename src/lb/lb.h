/*
 * lb.h: load-balancing policies, one small file each behind one ops struct
 * (HAProxy's model): lb_rr.c, lb_wrr.c, lb_leastconn.c, lb_chash.c, lb_p2c.c,
 * lb_feedback.c, lb_prefix.c, lb_kv.c, lb_inference.c. The table of policies is in lb.c; adding a
 * policy is adding a file and a row there.
 *
 * Inference policies (lb_prefix.c, lb_kv.c, lb_inference.c) also read what each
 * model server says of itself (lb_engine_t: queue, batch, KV-cache use, LoRA
 * adapters, scraped from its /metrics) and what the request carries
 * (lb_req_t: the prompt as a chain of block hashes, the model or adapter).
 *
 * A policy is pure: no I/O, no clock, no globals. It sees an array of peers
 * that the caller owns (lb_peer_t: weight, current weight, requests in
 * flight, the last load report), and every pick gets the time and a fresh
 * random number from the caller in lb_req_t. The same peers, requests and
 * random numbers give the same picks, so unit tests and the simulator drive
 * the very code the proxy runs.
 *
 * Peer state the caller keeps current before each pick:
 *   eff       the weight to use now: the configured weight scaled down by
 *             slow start; 0 means "do not pick" (down, ejected, draining);
 *   inflight  requests this balancer has outstanding at the peer; also the
 *             load that bounded-load hashing caps (arbiter shard uses it as
 *             "shards assigned so far").
 * When the peer set itself changes (added, removed, reordered, configured
 * weight changed) the caller calls lb_policy_set again; flips of eff between
 * 0 and non-zero need no call.
 *
 * Return convention: arbiter.h. lb_pick returns a peer index >= 0, or
 * -ENOENT when no peer may be picked.
 */
#ifndef ARB_LB_H
#define ARB_LB_H

#include "arbiter/arbiter.h"

/* A replica's own report of how busy it is (from its agent, or from the
 * X-Arbiter-Load response header). at_ms == 0: no report yet. */
typedef struct lb_load {
    double queue;    /* requests waiting at the replica */
    double gpu_util; /* 0..1 */
    double inflight; /* requests in progress at the replica, all balancers */
    int64_t at_ms;   /* when the report was taken, caller's clock */
} lb_load_t;

/* What a model server says of itself on its Prometheus /metrics (vLLM,
 * SGLang, llama.cpp names: prom.h), as the caller last scraped it.
 * at_ms == 0: nothing scraped yet. inflight_at is this balancer's in-flight
 * count at the replica when the scrape was taken: requests sent since then
 * (inflight - inflight_at > 0) are counted as queued on top of `waiting`,
 * so picks between two scrapes do not all herd onto the replica that
 * looked idle at the last one. */
#define LB_MAX_LORA 16
typedef struct lb_engine {
    double waiting;             /* requests queued at the engine */
    double running;             /* requests in its running batch */
    double kv;                  /* KV-cache use, 0..1; -1 unknown */
    int max_lora;               /* adapters it can hold at once; 0 unknown */
    int nlora;                  /* adapters loaded now */
    uint64_t lora[LB_MAX_LORA]; /* their names, lb_hash64(name, len, 0) */
    uint32_t inflight_at;       /* this balancer's in flight there at the scrape */
    int64_t at_ms;              /* when it was scraped, caller's clock */
} lb_engine_t;

/* How long a replica takes per request, learnt from the requests this
 * balancer saw finish there (slo.c): ms is an EWMA of duration / requests
 * there when it was sent, itself included (exact for a replica that serves
 * one at a time, FIFO; Little's law: the time per request at the rate
 * it completes them in a steady state: the service time of a replica that
 * serves one at a time, service time / batch of one that batches). at_ms: the last
 * completion (0: none yet); busy_ms: when our requests there last went from
 * none to one. While ours are there and nothing finishes, the time since the
 * later of the two, over our requests there, bounds the estimate from below
 * (a replica that stalls is seen stalling); while none are, it decays
 * (svc_half_life_ms), so a replica left out for being slow is tried again. */
typedef struct lb_svc {
    double ms;     /* per request; 0 unknown */
    int64_t at_ms; /* the last sample */
    int64_t busy_ms;
} lb_svc_t;

typedef struct lb_peer {
    const char *name;  /* identity for hashing ("10.0.0.7:8000"); borrowed */
    uint32_t weight;   /* configured weight, >= 1 */
    uint32_t eff;      /* weight for picks now; 0 = do not pick */
    uint32_t inflight; /* outstanding requests from this balancer */
    lb_load_t load;    /* last report (feedback policy) */
    double lat_ms;     /* response time this balancer saw (peak EWMA); 0 = none yet */
    int64_t lat_at_ms; /* when lat_ms last took a sample */
    lb_engine_t eng;   /* the model server's own metrics (inference policies) */
    uint32_t prefill;  /* prompt blocks this balancer sent there that are not prefilled yet
                          (no answer byte back): the work ahead of a new request */
    lb_svc_t svc;      /* time per request there (inference policies: lb_late) */
} lb_peer_t;

/* Fold one response-time sample into a peer's lat_ms ("peak EWMA": a
 * slower sample is taken at once, a faster one pulls the average down by a
 * fifth), so a replica that turns slow is seen on its first slow answer. */
void lb_peer_latency(lb_peer_t *p, double ms, int64_t now_ms);

/* Consistent-hash table kinds. */
typedef enum lb_hash_kind { LB_HASH_RING = 0, LB_HASH_MAGLEV = 1 } lb_hash_kind_t;

typedef struct lb_opts {
    double balance;       /* bounded-load factor c (>= 1); 0 = unbounded. Default 1.25 */
    lb_hash_kind_t kind;  /* hash table kind; default ring */
    uint32_t vnodes;      /* ring points per unit of weight; default 100 */
    uint32_t maglev_m;    /* Maglev table size, a prime; default 65537 */
    int64_t half_life_ms; /* feedback: a report's weight halves every this; default 1000 */
    int64_t max_age_ms;   /* feedback: reports older than this are ignored; default 10000 */
    double w_queue;       /* feedback: cost of one queued request; default 1 */
    double w_gpu;         /* feedback: cost of a fully busy GPU, in requests; default 4 */
    /* inference policies (prefix, kv, inference) */
    double sat_queue;      /* saturated: more than this queued at the engine; default 4 */
    double sat_kv;         /* ... or KV-cache use above this (0..1) with requests
                              waiting there; default 0.9 */
    uint32_t max_inflight; /* ... or this many of ours in flight there; 0 = no bound */
    double late_ms;        /* ... or late: the predicted time to a new request's first byte there
                              (lb_predict) above this; 0 = not judged (the proxy: 3/4 of
                              --server-timeout) */
    double slo_ms;         /* ... or its predicted wait to start above this (--ttft-slo); 0 none */
    int64_t svc_half_life_ms; /* an idle replica's time per request halves every this; 10000 */
    double w_wait;            /* kv: a queued request costs 1 + this; default 1 */
    double w_kv;              /* kv: a full KV cache costs this many requests; default 4 */
    double w_prefix;          /* inference: a prompt block cached there saves this many blocks of
                                 prefill; default 1 */
    double w_lora; /* inference: the adapter loaded is worth this many blocks of prefill (a
                      free slot half); default 16 */
    uint32_t prefix_entries;  /* prefix index bound, in blocks; default 131072 */
    struct lb_pindex *pindex; /* a prefix index shared by several policies (threads);
                                 NULL: the policy makes its own. Borrowed. */
} lb_opts_t;

/* One pick's inputs. */
typedef struct lb_req {
    uint64_t key;        /* hash of the request's key (lb_hash64); hash policy */
    bool has_key;        /* false: no key in the request; the hash policy picks at random */
    uint64_t rnd;        /* a fresh uniform random 64-bit value */
    int64_t now_ms;      /* the caller's clock, for report ages */
    const uint8_t *skip; /* NULL, or one flag per peer: non-zero = leave out */
    /* inference requests (oai.h) */
    const uint64_t *blocks; /* the prompt's block chain: blocks[i] hashes blocks 0..i */
    int nblocks;
    uint64_t model; /* lb_hash64 of the model (or LoRA adapter) asked for; 0: none */
    bool admit;     /* -EBUSY rather than a saturated peer (the caller queues) */
    bool whole;     /* the answer comes whole (not streamed): its first byte is its last */
    int *matched;   /* out (NULL: not wanted): leading blocks the chosen peer was sent before */
} lb_req_t;

typedef struct lb_policy lb_policy_t;

typedef struct lb_ops {
    const char *name;
    const char *summary;
    /* Build per-policy state for p->peers / p->n (called by lb_policy_set);
     * free the previous state first. Optional. */
    int (*update)(lb_policy_t *p);
    /* Free the state. Optional. */
    void (*fini)(lb_policy_t *p);
    /* Return the index of the peer for r, or -ENOENT. */
    int (*pick)(lb_policy_t *p, const lb_req_t *r);
} lb_ops_t;

struct lb_policy {
    const lb_ops_t *ops;
    lb_opts_t opt;
    lb_peer_t *peers; /* borrowed from the caller, n entries */
    int n;
    void *st;        /* the policy's own state */
    uint64_t cursor; /* round-robin position, tie-breaking */
};

/* The table, terminated by a row with name == NULL. */
extern const lb_ops_t *const lb_policies[];

/* Find a policy by name ("round-robin", "weighted", "least-conn", "hash",
 * "p2c", "feedback", "prefix", "kv", "inference"); NULL when unknown. */
const lb_ops_t *lb_find(const char *name);
/* "round-robin, weighted, ..." for messages. */
const char *lb_names(void);

/* Fill o with the defaults. */
void lb_opts_default(lb_opts_t *o);
/* Make a policy; opts NULL means the defaults. No peers yet. */
void lb_policy_init(lb_policy_t *p, const lb_ops_t *ops, const lb_opts_t *opts);
/* Point the policy at peers[0..n) (borrowed until the next set or fini)
 * and rebuild its state. -ENOMEM leaves the policy with no peers. */
int lb_policy_set(lb_policy_t *p, lb_peer_t *peers, int n);
void lb_policy_fini(lb_policy_t *p);
/* The policy's pick for r: a peer index, or -ENOENT; -EBUSY when r->admit
 * and every pickable peer is saturated (lb_saturated; kv and inference). */
int lb_pick(lb_policy_t *p, const lb_req_t *r);

/* 64-bit hash of bytes (stable across runs and machines). */
uint64_t lb_hash64(const void *data, size_t len, uint64_t seed);
/* Mix a 64-bit value (splitmix64's finaliser). */
uint64_t lb_mix64(uint64_t x);

/* ---- helpers for the policy files ---------------------------------------- */

/* Peer i may be picked for r. */
static inline bool lb_ok(const lb_policy_t *p, const lb_req_t *r, int i)
{
    return p->peers[i].eff > 0 && !(r->skip && r->skip[i]);
}
/* Two distinct pickable peers drawn at random from r->rnd (*b == *a when
 * only one is pickable). Returns -ENOENT when none is. */
int lb_two_choices(const lb_policy_t *p, const lb_req_t *r, int *a, int *b);

/* ---- what the inference policies share (lb.c) ------------------------------ */

/* How much a report taken at `at` still counts at `now`: 2^(-age/half_life),
 * 0 past max_age_ms or when at == 0. */
double lb_decay(const lb_opts_t *o, int64_t at, int64_t now);
/* Peer i's load as the inference policies see it: its requests in total
 * (*total) and those queued at the engine (*waiting). With a fresh scrape,
 * the engine's running + waiting, plus what this balancer sent since (and
 * less what finished since); with none, this balancer's in-flight count,
 * none of it known to be queued. A half-aged scrape's figures count half;
 * what was sent since it counts whole while the scrape counts at all. */
void lb_engine_load(const lb_policy_t *p, int i, int64_t now, double *total, double *waiting);
/* kv's cost of peer i in requests: (total + 1 + w_wait * waiting + w_kv *
 * kv) x ref_eff / eff, ref_eff being the largest eff among the candidates,
 * so that equal peers cost their load in requests and a peer of half the
 * weight (or half-way through slow start) twice that. */
double lb_kv_cost(const lb_policy_t *p, int i, int64_t now, double ref_eff);
/* Is peer i saturated: queue above sat_queue, KV use above sat_kv while
 * something waits there, or max_inflight of ours there? */
bool lb_saturated(const lb_policy_t *p, int i, int64_t now);
/* The predicted time, ms, from now to r's first response byte at peer i,
 * and (*wait_ms) to its start there: requests ahead of it x the time per
 * request (lb_svc_ms). Ahead: with a scrape, the engine's queue (aged, plus
 * ours sent since) and, if there is one, the request that frees the next
 * slot; with none, each of ours in flight (as if served one at a time). A
 * whole answer (r->whole) adds its own time. 0: the time per request is
 * unknown (nothing finished there yet, nothing outstanding). */
double lb_predict(const lb_policy_t *p, int i, const lb_req_t *r, double *wait_ms);
/* Is peer i late for r: the predicted first byte past late_ms, or the
 * predicted wait past slo_ms? */
bool lb_late(const lb_policy_t *p, int i, const lb_req_t *r);
/* Saturated or late: what kv and inference leave out. */
static inline bool lb_unfit(const lb_policy_t *p, int i, const lb_req_t *r)
{
    return lb_saturated(p, i, r->now_ms) || lb_late(p, i, r);
}

/* The prefix index (lb_prefix.c): which replicas were sent which prompt
 * block chains, a bounded LRU of blocks. Thread-safe (a mutex inside), so
 * the event loops of one balancer share it. */
typedef struct lb_pindex lb_pindex_t;
/* NULL when out of memory. cap: blocks remembered (>= 16). */
lb_pindex_t *lb_pindex_new(uint32_t cap);
void lb_pindex_free(lb_pindex_t *x);
/* match[k] = how many leading blocks of the chain peer ids[k] was sent. */
void lb_pindex_match(lb_pindex_t *x, const uint64_t *blocks, int nb, const uint64_t *ids, int n,
                     int *match);
/* The chain blocks[0..nb) went to `id` at now_ms; the shortest prefixes are
 * touched last, so eviction takes chains from their tails (as a KV cache does). */
void lb_pindex_record(lb_pindex_t *x, const uint64_t *blocks, int nb, uint64_t id, int64_t now_ms);
/* Blocks remembered now. */
uint32_t lb_pindex_size(lb_pindex_t *x);

/* For the policies that use the index (lb_prefix.c; prefix, inference): its
 * update and fini; the leading blocks each peer was sent (a borrowed array of
 * p->n, valid until the next call; NULL when r has no blocks); recording the
 * pick of peer i. */
int lb_prefix_update(lb_policy_t *p);
void lb_prefix_fini(lb_policy_t *p);
const int *lb_prefix_match(lb_policy_t *p, const lb_req_t *r);
void lb_prefix_chose(lb_policy_t *p, const lb_req_t *r, int i);

/* Admission (slo.c), pure: the rate requests finish at, an EWMA over
 * windows of 1 s (0 until the first window closes: unknown), and the wait
 * (queued + 1) / rate a request queued now can expect (0 unknown). */
typedef struct lb_drain {
    int64_t at_ms;  /* the current window's start; 0 before the first event */
    uint64_t count; /* completions in it */
    double rate;    /* per second; 0 unknown */
} lb_drain_t;
void lb_drain_done(lb_drain_t *d, int64_t now_ms);
double lb_drain_rate(lb_drain_t *d, int64_t now_ms);
double lb_drain_wait_s(lb_drain_t *d, int queued, int64_t now_ms);

/* A request that finds every replica saturated (or others queued already). */
typedef enum {
    LB_ADMIT_QUEUE, /* into its tenant's line */
    LB_ADMIT_SLO,   /* 429: its expected wait exceeds the TTFT SLO */
    LB_ADMIT_FULL,  /* 429: the queue is full and its tenant has its share */
    LB_ADMIT_SHED,  /* queue it; the newest of the tenant with most queued goes (429) */
    LB_ADMIT_LATE,  /* 429: no replica is fit, and the queue would not drain in time */
} lb_admit_verdict_t;
typedef struct {
    int64_t slo_ms;   /* --ttft-slo; 0 none */
    double wait_s;    /* lb_drain_wait_s; 0 unknown (never an SLO 429) */
    int64_t limit_ms; /* how long it may wait queued (--queue-timeout); 0: no bound */
    int queued, max_queue;
    int tenants;         /* tenants with requests queued */
    int own;             /* of them, this request's tenant's */
    int biggest;         /* the most any tenant has queued */
    bool biggest_is_own; /* that tenant is this request's */
} lb_admit_in_t;
lb_admit_verdict_t lb_admit_decide(const lb_admit_in_t *in);

/* The time per request at a replica (lb_svc_t). lb_svc_sent: one of ours
 * was sent there, was_idle when none were before. lb_svc_done: one finished
 * after dur_ms, with n requests there when it was sent (itself included:
 * the engine's running + waiting, or ours). lb_svc_ms: the estimate now, with
 * `inflight` of ours there. */
void lb_svc_sent(lb_svc_t *v, const lb_opts_t *o, bool was_idle, int64_t now_ms);
void lb_svc_done(lb_svc_t *v, double dur_ms, double n, int64_t now_ms);
double lb_svc_ms(const lb_svc_t *v, const lb_opts_t *o, uint32_t inflight, int64_t now_ms);
/* What a 429 says, naming the flag behind it. */
const char *lb_admit_reason(lb_admit_verdict_t v);

extern const lb_ops_t lb_rr_ops, lb_wrr_ops, lb_leastconn_ops, lb_chash_ops, lb_p2c_ops,
    lb_feedback_ops, lb_prefix_ops, lb_kv_ops, lb_inference_ops;

#endif
