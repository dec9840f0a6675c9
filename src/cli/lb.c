/*
 * lb.c: `arbiter lb`, the HTTP load balancer for inference replicas
 * (src/lb/proxy.h). This file only turns flags into lb_proxy_conf_t (one
 * table, cli/flags.h).
 *
 * Exit status: 0 after a clean stop (SIGTERM/SIGINT), 1 on a runtime error
 * (bind failed, backend unresolvable), 2 on bad usage.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "lb/proxy.h"
#include "tls/tls.h"

/* The open-file limit raised to its hard limit, and --max-conns sized from
 * it: a client connection costs two descriptors (it and its backend's),
 * and listeners, pools, checks and scrapes need some more. A --max-conns
 * the limit cannot hold is kept, with a warning: what runs out then is
 * answered 503 and logged, and never blamed on a backend (proxy.c). */
static void size_conns(lb_proxy_conf_t *c, bool given)
{
    struct rlimit rl;
    long have = 1024;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t cur = rl.rlim_cur;
            rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
                rl.rlim_cur = cur;
        }
        have = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 4000000 ? 4000000 : (long)rl.rlim_cur;
    }
    long room = have > 256 ? (have - 128) / 2 : have / 4;
    if (room < 1)
        room = 1;
    if (room > 1000000)
        room = 1000000;
    if (!given) {
        c->max_conns = (int)room;
    } else if (c->max_conns > room) { /* the operator's word; said, and kept */
        fprintf(stderr,
                "arbiter lb: warning: --max-conns %d: the open-file limit (%ld) holds %ld "
                "client connections (two descriptors each); past that, clients are refused "
                "with 503 (raise ulimit -n)\n",
                c->max_conns, have, room);
    }
}

/* The balancer's flags: into its conf where they belong, the rest beside it. */
typedef struct lb_flags {
    lb_proxy_conf_t c;
    fl_list_t backends;
    const char *bfile, *service, *controller, *scrape, *policy, *balance;
    int kind, max_conns;
    long long seed;
    tls_client_t ctl_tls; /* the controller's CA (--cacert); the rest from the env */
} lb_flags_t;

#define DAY_MS 86400000
#define LF(FIELD, LONG, KIND, META, HELP, ...)                                                     \
    FL_OPT(lb_flags_t, FIELD, LONG, NULL, KIND, META, HELP, __VA_ARGS__)
#define LF_MS(FIELD, LONG, LO, HELP) LF(FIELD, LONG, FL_I32, "MS", HELP, .min = LO, .max = DAY_MS)

static const fl_flag_t lb_flag_table[] = {
    LF(c.listen, "--listen", FL_STR, "ADDR", "where clients connect (required)"),
    LF(backends, "--backend", FL_LIST, "[https://]HOST:PORT[=WEIGHT]",
       "a backend (repeat); https:// speaks TLS to it"),
    LF(bfile, "--backends-file", FL_STR, "FILE", "backends, one a line (SIGHUP re-reads it)"),
    LF(service, "--service", FL_STR, "NAME", "a service's replicas, followed from --controller"),
    LF(controller, "--controller", FL_STR, "URL[,URL...]", "the controllers (with --service)"),
    LF(policy, "--policy", FL_STR, "P",
       "round-robin (default), weighted, least-conn, hash, p2c, feedback, prefix, kv, inference "
       "(the default with --openai)"),
    LF(c.hash_header, "--hash-header", FL_STR, "H", "hash policy: key on this request header"),
    LF(c.hash_cookie, "--hash-cookie", FL_STR, "C", "hash policy: key on this cookie"),
    LF(kind, "--hash-kind", FL_CHOICE, NULL, "the consistent hash", .def = "ring",
       .choices = "ring|maglev"),
    LF(balance, "--hash-balance", FL_STR, "C", "bounded-load factor, 1..100 (1.25; 0 = unbounded)"),
    LF(c.health_path, "--health-path", FL_STR, "PATH",
       "active checks: GET PATH, 2xx/3xx is healthy"),
    LF_MS(c.health_interval_ms, "--health-interval", 10, "between checks (2000)"),
    LF_MS(c.health_timeout_ms, "--health-timeout", 1, "a check's limit (1000)"),
    LF(c.rise, "--rise", FL_I32, "N", "passed checks that make a backend healthy (2)", .min = 1,
       .max = 100),
    LF(c.fall, "--fall", FL_I32, "N", "failed checks that make it down (3)", .min = 1, .max = 100),
    LF_MS(c.connect_timeout_ms, "--connect-timeout", 1, "(2000)"),
    LF_MS(c.server_timeout_ms, "--server-timeout", 1, "(60000)"),
    LF_MS(c.client_timeout_ms, "--client-timeout", 1, "(60000)"),
    LF_MS(c.pool_idle_ms, "--pool-idle", 1, "pooled backend connection idle limit (10000)"),
    LF(c.retries, "--retries", FL_I32, "N",
       "other backends tried when a connect fails (2; idempotent only)", .min = 0, .max = 7),
    LF(c.eject_after, "--eject-after", FL_I32, "N",
       "consecutive failures that eject a backend (3; 0 = never)", .min = 0, .max = 1000),
    LF_MS(c.eject_base_ms, "--eject-base", 1,
          "first ejection's length, doubling per repeat (1000)"),
    LF_MS(c.eject_max_ms, "--eject-max", 1, "up to this (30000)"),
    LF_MS(c.slow_start_ms, "--slow-start", 0,
          "ramp a returning backend's weight up over MS (5000; 0 = off)"),
    LF(max_conns, "--max-conns", FL_I32, "N",
       "client connections (default: what the open-file limit allows, raised to its hard limit "
       "at start: two descriptors each)",
       .min = 1, .max = 1000000),
    LF(c.maxconn, "--maxconn", FL_I32, "N",
       "requests in flight per backend (HAProxy's maxconn; 0 = no cap): more wait in the queue "
       "(--max-queue, --queue-timeout), then 429",
       .min = 0, .max = 1000000),
    LF(c.tls_cert_file, "--cert-file", FL_STR, "F",
       "serve HTTPS on --listen with this certificate (arbiter init server NAME DIR)"),
    LF(c.tls_key_file, "--key-file", FL_STR, "K", "its key"),
    LF(c.backend_tls, "--backend-tls", FL_BOOL, NULL,
       "speak TLS to every backend (requests, health checks, scrapes)"),
    LF(c.backend_cacert, "--backend-cacert", FL_STR, "FILE",
       "the CA the backends' certificates must chain to (default: --cacert or ARBITER_CACERT, "
       "the cluster CA; else the system's)"),
    LF(c.backend_cert, "--backend-cert", FL_STR, "F",
       "a client certificate to present to TLS backends (mTLS; arbiter init user NAME DIR)"),
    LF(c.backend_key, "--backend-key", FL_STR, "K", "its key"),
    LF(c.backend_sni, "--backend-sni", FL_STR, "NAME",
       "the name sent to TLS backends and checked in their certificates (default: the "
       "backend's host)"),
    LF(c.backend_insecure, "--backend-insecure-skip-verify", FL_BOOL, NULL,
       "do not check the TLS backends' certificates at all (anyone on the path can read and "
       "change the traffic)"),
    LF(ctl_tls.cacert, "--cacert", FL_STR, "FILE",
       "the CA an https:// --controller is checked with (ARBITER_CACERT; its client "
       "certificate: ARBITER_CERT_FILE, ARBITER_KEY_FILE)"),
    LF(c.admin, "--admin", FL_STR, "ADDR", "serve /metrics, /backends, /healthz there"),
    LF(c.access_log, "--access-log", FL_STR, "FILE", "one line per request ('-' = stdout)"),
    LF(c.ready_file, "--ready-file", FL_STR, "FILE",
       "write the bound addresses there once listening"),
    LF(seed, "--seed", FL_INT, "N", "randomness for p2c and feedback (default: from the clock)"),
    LF(c.threads, "--threads", FL_I32, "N",
       "event loops, one listener each on the port (SO_REUSEPORT) (1)", .min = 1, .max = 64),
    LF(c.openai, "--openai", FL_BOOL, NULL,
       "LLM replicas: read /v1/completions and /v1/chat/completions bodies to route them (on "
       "with --policy prefix, kv, inference)"),
    LF(c.body_max, "--body-max", FL_I32, "BYTES", "bodies read whole before routing (1048576)",
       .min = 1024, .max = 64 << 20),
    LF(c.block_bytes, "--prefix-block", FL_I32, "BYTES",
       "prompt block size for prefix affinity (64, ~16 tokens)", .min = 4, .max = 4096),
    LF(c.opts.prefix_entries, "--prefix-cache", FL_I32, "N",
       "prompt blocks the prefix index remembers (131072)", .min = 16, .max = 1 << 26),
    LF(scrape, "--scrape-path", FL_STR, "PATH", "the replicas' Prometheus metrics (/metrics; off)"),
    LF_MS(c.scrape_interval_ms, "--scrape-interval", 10, "between scrapes of a replica (250)"),
    LF(c.opts.sat_queue, "--saturate-queue", FL_NUM, "N",
       "saturated: more than N waiting at the engine (4)", .min = 0, .max = 1000000),
    LF(c.opts.sat_kv, "--saturate-kv", FL_NUM, "F", "... or KV-cache use above F, 0..1 (0.9)",
       .min = 0, .max = 1),
    LF(c.opts.max_inflight, "--max-inflight", FL_I32, "N",
       "... or N of ours in flight there (0 = no bound)", .min = 0, .max = 1000000),
    LF(c.opts.w_prefix, "--prefix-weight", FL_NUM, "W",
       "a whole prompt cached is worth W requests of load (8)", .min = 0, .max = 1000000),
    LF(c.opts.w_lora, "--lora-weight", FL_NUM, "W",
       "the LoRA adapter loaded is worth W requests (4)", .min = 0, .max = 1000000),
    LF(c.tenant_header, "--tenant-header", FL_STR, "H",
       "the tenant for fair queueing (X-Tenant; else the API key)"),
    LF(c.max_queue, "--max-queue", FL_I32, "N",
       "requests held while every replica is saturated (256; 0 = none)", .min = 0, .max = 1000000),
    LF_MS(c.queue_timeout_ms, "--queue-timeout", 1,
          "a held request is answered 429 after MS (30000)"),
    LF(c.ttft_slo_ms, "--ttft-slo", FL_I32, "MS",
       "answer 429 at once when the expected wait exceeds MS (0 = off)", .min = 0, .max = DAY_MS),
    FL_END,
};
static const fl_verb_t lb_verb = {
    .name = "lb",
    .summary = "HTTP load balancer for inference replicas: --listen ADDR and the backends one way "
               "(--backend ..., --backends-file FILE, or --service NAME --controller URL)",
    .flags = lb_flag_table,
    .more = "SIGHUP re-reads --backends-file; SIGTERM drains and stops.",
};

/* TLS to the backends: on for all (--backend-tls) or those named https://;
 * their CA the cluster's (--cacert, ARBITER_CACERT) unless given; the
 * files loaded now, for a clear word before listening. */
static int lb_backend_tls(lb_flags_t *f, const lb_target_t *t, arb_err_t *err)
{
    lb_proxy_conf_t *c = &f->c;
    bool named = false;

    for (int i = 0; i < f->backends.n; i++)
        named |= t[i].tls;
    if (c->backend_key && !c->backend_cert)
        return arb_errf(err, -EINVAL, "--backend-key without --backend-cert: give the certificate");
    if (c->backend_insecure && c->backend_cacert)
        return arb_errf(err, -EINVAL,
                        "--backend-insecure-skip-verify and --backend-cacert: give one (a CA "
                        "to check the backends with, or none)");
    c->backend_tls_any = c->backend_tls || named || c->backend_cacert || c->backend_cert ||
                         c->backend_sni || c->backend_insecure;
    if (!c->backend_tls_any)
        return 0;
    if (!c->backend_cacert && !c->backend_insecure) {
        const char *env = getenv("ARBITER_CACERT");
        c->backend_cacert = f->ctl_tls.cacert ? f->ctl_tls.cacert : env && *env ? env : NULL;
    }
    if (c->backend_insecure)
        fprintf(stderr, "arbiter lb: WARNING: --backend-insecure-skip-verify: the backends' TLS "
                        "certificates are NOT checked; anyone between the balancer and a "
                        "backend can read and change its traffic\n");
    return lb_backend_tls_check(c, err);
}

/* What the flags say together, into c; 0, or -1 with the message printed. */
static int lb_check(lb_flags_t *f, lb_target_t *t)
{
    lb_proxy_conf_t *c = &f->c;
    arb_err_t err = {{0}};
    char *end;

    if (!c->listen) {
        fprintf(stderr, "arbiter lb: --listen ADDR is required (e.g. --listen 127.0.0.1:8080)\n");
        return -1;
    }
    for (int i = 0; i < f->backends.n; i++)
        if (lb_target_parse(f->backends.v[i], &t[i], &err) < 0) {
            fprintf(stderr, "arbiter lb: %s\n", err.msg);
            return -1;
        }
    if (f->policy && !(c->policy = lb_find(f->policy))) {
        fprintf(stderr, "arbiter lb: --policy '%s': unknown; use one of %s\n", f->policy,
                lb_names());
        return -1;
    }
    c->opts.kind = f->kind == 1 ? LB_HASH_MAGLEV : LB_HASH_RING;
    if (f->balance) {
        c->opts.balance = strtod(f->balance, &end);
        if (end == f->balance || *end || (c->opts.balance != 0 && c->opts.balance < 1) ||
            c->opts.balance > 100) {
            fprintf(stderr, "arbiter lb: --hash-balance '%s': give 0 (off) or 1 to 100\n",
                    f->balance);
            return -1;
        }
    }
    if (c->health_path && c->health_path[0] != '/') {
        fprintf(stderr, "arbiter lb: --health-path '%s': must start with /\n", c->health_path);
        return -1;
    }
    if (f->scrape && strcmp(f->scrape, "off") != 0 && f->scrape[0] != '/') {
        fprintf(stderr, "arbiter lb: --scrape-path '%s': give a path (/metrics) or off\n",
                f->scrape);
        return -1;
    }
    if (!!f->backends.n + !!f->bfile + !!(f->service || f->controller) != 1) {
        fprintf(stderr, "arbiter lb: give the backends one way: --backend HOST:PORT (repeat), "
                        "--backends-file FILE, or --service NAME --controller URL\n");
        return -1;
    }
    if (c->policy == &lb_chash_ops && !c->hash_header && !c->hash_cookie) {
        fprintf(stderr, "arbiter lb: --policy hash needs --hash-header H or --hash-cookie C\n");
        return -1;
    }
    if (c->tls_cert_file || c->tls_key_file) { /* checked now: a clear word before listening */
        tls_files_t tf = {.cert_file = c->tls_cert_file, .key_file = c->tls_key_file};
        tls_server_t ts = {0};
        if (tls_server_load(&tf, &ts, &err) < 0) {
            fprintf(stderr, "arbiter lb: %s\n", err.msg);
            return -1;
        }
        tls_server_free(&ts);
    }
    if (lb_backend_tls(f, t, &err) < 0) {
        fprintf(stderr, "arbiter lb: %s\n", err.msg);
        return -1;
    }
    if ((f->service || f->controller) && (!f->service || !f->controller)) {
        fprintf(stderr, "arbiter lb: --service and --controller go together\n");
        return -1;
    }
    return 0;
}

/* The settings the flags imply: connections sized, LLM routing, scraping. */
static void lb_settle(lb_flags_t *f)
{
    lb_proxy_conf_t *c = &f->c;

    if (c->eject_max_ms < c->eject_base_ms)
        c->eject_max_ms = c->eject_base_ms;
    if (f->max_conns)
        c->max_conns = f->max_conns;
    size_conns(c, f->max_conns != 0);
    if (f->seed)
        c->seed = (uint64_t)f->seed;
    /* LLM replicas: the inference policy by default, prompts read, metrics scraped */
    if (c->openai && !f->policy)
        c->policy = &lb_inference_ops;
    if (c->policy == &lb_prefix_ops || c->policy == &lb_kv_ops || c->policy == &lb_inference_ops)
        c->openai = true;
    if (f->scrape)
        c->scrape_path = strcmp(f->scrape, "off") == 0 ? NULL : f->scrape;
    else if (c->policy == &lb_kv_ops || c->policy == &lb_inference_ops)
        c->scrape_path = "/metrics";
}

int cli_lb(int argc, char **argv)
{
    lb_flags_t f = {0};
    lb_target_t t[FL_LIST_MAX];
    arb_err_t err = {{0}};
    int rc;

    lb_proxy_conf_default(&f.c);
    if (!fl_run(&lb_verb, argc, argv, &f, &(fl_args_t){0}, &rc))
        return rc;
    if (lb_check(&f, t) < 0)
        return 2;
    lb_settle(&f);
    if (f.service)
        rc = lb_source_controller(&f.c.source, f.controller, f.service, &f.ctl_tls, &err);
    else if (f.bfile)
        rc = lb_source_file(&f.c.source, f.bfile, &err);
    else
        rc = lb_source_static(&f.c.source, t, f.backends.n, &err);
    if (rc < 0) {
        fprintf(stderr, "arbiter lb: %s\n", err.msg);
        return 1;
    }
    rc = lb_proxy_run(&f.c, &err) < 0 ? 1 : 0;
    if (rc)
        fprintf(stderr, "arbiter lb: %s\n", err.msg);
    lb_source_fini(&f.c.source);
    return rc;
}
