/*
 * lb.c: `arbiter lb`, the HTTP load balancer for inference replicas
 * (src/lb/proxy.h). This file only turns flags into lb_proxy_conf_t.
 *
 * Exit status: 0 after a clean stop (SIGTERM/SIGINT), 1 on a runtime error
 * (bind failed, backend unresolvable), 2 on bad usage.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "lb/proxy.h"
#include "tls/tls.h"

#define LB_USAGE                                                                                   \
    "usage: arbiter lb --listen ADDR (--backend HOST:PORT[=WEIGHT] ... | --backends-file FILE |\n" \
    "                  --service NAME --controller URL[,URL...]) [--policy P] [options]\n"         \
    "\n"                                                                                           \
    "  --policy P            round-robin (default), weighted, least-conn, hash, p2c, feedback,\n"  \
    "                        prefix, kv, inference (the default with --openai)\n"                  \
    "  --hash-header H       hash policy: key on this request header\n"                            \
    "  --hash-cookie C       hash policy: key on this cookie\n"                                    \
    "  --hash-kind K         ring (default) or maglev\n"                                           \
    "  --hash-balance C      bounded-load factor, >= 1 (default 1.25; 0 = unbounded)\n"            \
    "  --health-path PATH    active checks: GET PATH, 2xx/3xx is healthy\n"                        \
    "  --health-interval MS  (2000)  --health-timeout MS (1000)  --rise N (2)  --fall N (3)\n"     \
    "  --connect-timeout MS  (2000)  --server-timeout MS (60000)  --client-timeout MS (60000)\n"   \
    "  --pool-idle MS        pooled backend connection idle limit (10000)\n"                       \
    "  --retries N           other backends tried when a connect fails (2; idempotent only)\n"     \
    "  --eject-after N       consecutive failures that eject a backend (3; 0 = never)\n"           \
    "  --eject-base MS       first ejection's length, doubling per repeat (1000), up to\n"         \
    "  --eject-max MS        (30000)\n"                                                            \
    "  --slow-start MS       ramp a returning backend's weight up over MS (5000; 0 = off)\n"       \
    "  --max-conns N         client connections (default: what the open-file limit allows, "       \
    "raised\n"                                                                                     \
    "                        to its hard limit at start: two descriptors each)\n"                  \
    "  --maxconn N           requests in flight per backend (HAProxy's maxconn; 0 = no cap):\n"    \
    "                        more wait in the queue (--max-queue, --queue-timeout), then 429\n"    \
    "  --cert-file F         serve HTTPS on --listen with this certificate (arbiter init\n"        \
    "  --key-file K          server NAME DIR) and its key\n"                                       \
    "  --cacert FILE         the CA an https:// --controller is checked with (ARBITER_CACERT;\n"   \
    "                        its client certificate: ARBITER_CERT_FILE, ARBITER_KEY_FILE)\n"       \
    "  --admin ADDR          serve /metrics, /backends, /healthz there\n"                          \
    "  --access-log FILE     one line per request ('-' = stdout)\n"                                \
    "  --ready-file FILE     write the bound addresses there once listening\n"                     \
    "  --seed N              randomness for p2c and feedback (default: from the clock)\n"          \
    "  --threads N           event loops, one listener each on the port (SO_REUSEPORT) (1)\n"      \
    "LLM replicas (OpenAI API; on with --openai or --policy prefix, kv, inference):\n"             \
    "  --openai              read /v1/completions and /v1/chat/completions bodies to route them\n" \
    "  --body-max BYTES      bodies read whole before routing, at most (1048576)\n"                \
    "  --prefix-block BYTES  prompt block size for prefix affinity (64, ~16 tokens)\n"             \
    "  --prefix-cache N      prompt blocks the prefix index remembers (131072)\n"                  \
    "  --scrape-path PATH    the replicas' Prometheus metrics (/metrics; 'off' = none)\n"          \
    "  --scrape-interval MS  between scrapes of a replica (250)\n"                                 \
    "  --saturate-queue N    saturated: more than N waiting at the engine (4)\n"                   \
    "  --saturate-kv F       ... or KV-cache use above F, 0..1 (0.9)\n"                            \
    "  --max-inflight N      ... or N of ours in flight there (0 = no bound)\n"                    \
    "  --prefix-weight W     a whole prompt cached is worth W requests of load (8)\n"              \
    "  --lora-weight W       the LoRA adapter loaded is worth W requests (4)\n"                    \
    "  --tenant-header H     the tenant for fair queueing (X-Tenant; else the API key)\n"          \
    "  --max-queue N         requests held while every replica is saturated (256; 0 = none)\n"     \
    "  --queue-timeout MS    a held request is answered 429 after MS (30000)\n"                    \
    "  --ttft-slo MS         answer 429 at once when the expected wait exceeds MS (0 = off)\n"     \
    "SIGHUP re-reads --backends-file; SIGTERM drains and stops.\n"

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

enum {
    O_LISTEN = 256,
    O_BACKEND,
    O_BFILE,
    O_SERVICE,
    O_CONTROLLER,
    O_POLICY,
    O_HHDR,
    O_HCOOKIE,
    O_HKIND,
    O_HBAL,
    O_HPATH,
    O_HINT,
    O_HTO,
    O_RISE,
    O_FALL,
    O_CTO,
    O_STO,
    O_CLTO,
    O_POOL,
    O_RETRIES,
    O_EJA,
    O_EJB,
    O_EJM,
    O_SLOW,
    O_MAXC,
    O_MAXCONN,
    O_CERT,
    O_KEY,
    O_CACERT,
    O_ADMIN,
    O_LOG,
    O_READY,
    O_SEED,
    O_OPENAI,
    O_BODYMAX,
    O_PBLOCK,
    O_PCACHE,
    O_SCRAPE,
    O_SCRAPE_INT,
    O_SATQ,
    O_SATKV,
    O_MAXINF,
    O_WPREFIX,
    O_WLORA,
    O_TENANT,
    O_MAXQ,
    O_QTO,
    O_SLO,
    O_THREADS,
    O_HELP
};

static const struct option lb_opts[] = {
    {"listen", required_argument, 0, O_LISTEN},
    {"backend", required_argument, 0, O_BACKEND},
    {"backends-file", required_argument, 0, O_BFILE},
    {"service", required_argument, 0, O_SERVICE},
    {"controller", required_argument, 0, O_CONTROLLER},
    {"policy", required_argument, 0, O_POLICY},
    {"hash-header", required_argument, 0, O_HHDR},
    {"hash-cookie", required_argument, 0, O_HCOOKIE},
    {"hash-kind", required_argument, 0, O_HKIND},
    {"hash-balance", required_argument, 0, O_HBAL},
    {"health-path", required_argument, 0, O_HPATH},
    {"health-interval", required_argument, 0, O_HINT},
    {"health-timeout", required_argument, 0, O_HTO},
    {"rise", required_argument, 0, O_RISE},
    {"fall", required_argument, 0, O_FALL},
    {"connect-timeout", required_argument, 0, O_CTO},
    {"server-timeout", required_argument, 0, O_STO},
    {"client-timeout", required_argument, 0, O_CLTO},
    {"pool-idle", required_argument, 0, O_POOL},
    {"retries", required_argument, 0, O_RETRIES},
    {"eject-after", required_argument, 0, O_EJA},
    {"eject-base", required_argument, 0, O_EJB},
    {"eject-max", required_argument, 0, O_EJM},
    {"slow-start", required_argument, 0, O_SLOW},
    {"max-conns", required_argument, 0, O_MAXC},
    {"maxconn", required_argument, 0, O_MAXCONN},
    {"cert-file", required_argument, 0, O_CERT},
    {"key-file", required_argument, 0, O_KEY},
    {"cacert", required_argument, 0, O_CACERT},
    {"admin", required_argument, 0, O_ADMIN},
    {"access-log", required_argument, 0, O_LOG},
    {"ready-file", required_argument, 0, O_READY},
    {"seed", required_argument, 0, O_SEED},
    {"openai", no_argument, 0, O_OPENAI},
    {"body-max", required_argument, 0, O_BODYMAX},
    {"prefix-block", required_argument, 0, O_PBLOCK},
    {"prefix-cache", required_argument, 0, O_PCACHE},
    {"scrape-path", required_argument, 0, O_SCRAPE},
    {"scrape-interval", required_argument, 0, O_SCRAPE_INT},
    {"saturate-queue", required_argument, 0, O_SATQ},
    {"saturate-kv", required_argument, 0, O_SATKV},
    {"max-inflight", required_argument, 0, O_MAXINF},
    {"prefix-weight", required_argument, 0, O_WPREFIX},
    {"lora-weight", required_argument, 0, O_WLORA},
    {"tenant-header", required_argument, 0, O_TENANT},
    {"max-queue", required_argument, 0, O_MAXQ},
    {"queue-timeout", required_argument, 0, O_QTO},
    {"ttft-slo", required_argument, 0, O_SLO},
    {"threads", required_argument, 0, O_THREADS},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* An integer flag in [lo, hi]; on error prints and returns false. */
static bool int_arg(const char *flag, const char *s, long lo, long hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "arbiter lb: --%s '%s': give a whole number from %ld to %ld\n", flag, s, lo,
                hi);
        return false;
    }
    *out = (int)v;
    return true;
}

/* A number flag in [lo, hi]; on error prints and returns false. */
static bool num_arg(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "arbiter lb: --%s '%s': give a number from %g to %g\n", flag, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

int cli_lb(int argc, char **argv)
{
    lb_proxy_conf_t c;
    lb_target_t *t = NULL;
    int nt = 0, opt, rc = 2;
    const char *bfile = NULL, *service = NULL, *controller = NULL, *scrape = NULL;
    bool policy_given = false, max_conns_given = false;
    tls_client_t ctl_tls = {0}; /* the controller's CA (--cacert); the rest from the env */
    int iv;
    double dv;
    arb_err_t err = {{0}};
    const long DAY = 86400000;

    lb_proxy_conf_default(&c);
    t = calloc((size_t)argc, sizeof *t);
    if (!t)
        return 1;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", lb_opts, NULL)) != -1) {
        const char *name = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        bool ok = true;
        switch (opt) {
        case O_LISTEN:
            c.listen = optarg;
            break;
        case O_BACKEND:
            if (lb_target_parse(optarg, &t[nt], &err) < 0) {
                fprintf(stderr, "arbiter lb: %s\n", err.msg);
                goto out;
            }
            nt++;
            break;
        case O_BFILE:
            bfile = optarg;
            break;
        case O_SERVICE:
            service = optarg;
            break;
        case O_CONTROLLER:
            controller = optarg;
            break;
        case O_POLICY:
            policy_given = true;
            c.policy = lb_find(optarg);
            if (!c.policy) {
                fprintf(stderr, "arbiter lb: --policy '%s': unknown; use one of %s\n", optarg,
                        lb_names());
                goto out;
            }
            break;
        case O_HHDR:
            c.hash_header = optarg;
            break;
        case O_HCOOKIE:
            c.hash_cookie = optarg;
            break;
        case O_HKIND:
            if (strcmp(optarg, "ring") == 0) {
                c.opts.kind = LB_HASH_RING;
            } else if (strcmp(optarg, "maglev") == 0) {
                c.opts.kind = LB_HASH_MAGLEV;
            } else {
                fprintf(stderr, "arbiter lb: --hash-kind '%s': use ring or maglev\n", optarg);
                goto out;
            }
            break;
        case O_HBAL: {
            char *end;
            c.opts.balance = strtod(optarg, &end);
            if (end == optarg || *end || (c.opts.balance != 0 && c.opts.balance < 1) ||
                c.opts.balance > 100) {
                fprintf(stderr, "arbiter lb: --hash-balance '%s': give 0 (off) or 1 to 100\n",
                        optarg);
                goto out;
            }
            break;
        }
        case O_HPATH:
            if (optarg[0] != '/') {
                fprintf(stderr, "arbiter lb: --health-path '%s': must start with /\n", optarg);
                goto out;
            }
            c.health_path = optarg;
            break;
        case O_HINT:
            ok = int_arg("health-interval", optarg, 10, DAY, &c.health_interval_ms);
            break;
        case O_HTO:
            ok = int_arg("health-timeout", optarg, 1, DAY, &c.health_timeout_ms);
            break;
        case O_RISE:
            ok = int_arg("rise", optarg, 1, 100, &c.rise);
            break;
        case O_FALL:
            ok = int_arg("fall", optarg, 1, 100, &c.fall);
            break;
        case O_CTO:
            ok = int_arg("connect-timeout", optarg, 1, DAY, &c.connect_timeout_ms);
            break;
        case O_STO:
            ok = int_arg("server-timeout", optarg, 1, DAY, &c.server_timeout_ms);
            break;
        case O_CLTO:
            ok = int_arg("client-timeout", optarg, 1, DAY, &c.client_timeout_ms);
            break;
        case O_POOL:
            ok = int_arg("pool-idle", optarg, 1, DAY, &c.pool_idle_ms);
            break;
        case O_RETRIES:
            ok = int_arg("retries", optarg, 0, 7, &c.retries);
            break;
        case O_EJA:
            ok = int_arg("eject-after", optarg, 0, 1000, &c.eject_after);
            break;
        case O_EJB:
            ok = int_arg("eject-base", optarg, 1, DAY, &c.eject_base_ms);
            break;
        case O_EJM:
            ok = int_arg("eject-max", optarg, 1, DAY, &c.eject_max_ms);
            break;
        case O_SLOW:
            ok = int_arg("slow-start", optarg, 0, DAY, &c.slow_start_ms);
            break;
        case O_MAXC:
            ok = int_arg("max-conns", optarg, 1, 1000000, &c.max_conns);
            max_conns_given = true;
            break;
        case O_MAXCONN:
            ok = int_arg("maxconn", optarg, 0, 1000000, &c.maxconn);
            break;
        case O_CERT:
            c.tls_cert_file = optarg;
            break;
        case O_KEY:
            c.tls_key_file = optarg;
            break;
        case O_CACERT:
            ctl_tls.cacert = optarg;
            break;
        case O_ADMIN:
            c.admin = optarg;
            break;
        case O_LOG:
            c.access_log = optarg;
            break;
        case O_READY:
            c.ready_file = optarg;
            break;
        case O_SEED:
            c.seed = strtoull(optarg, NULL, 10);
            break;
        case O_OPENAI:
            c.openai = true;
            break;
        case O_BODYMAX:
            if ((ok = int_arg("body-max", optarg, 1024, 64 << 20, &iv)))
                c.body_max = (uint32_t)iv;
            break;
        case O_PBLOCK:
            if ((ok = int_arg("prefix-block", optarg, 4, 4096, &iv)))
                c.block_bytes = (uint32_t)iv;
            break;
        case O_PCACHE:
            if ((ok = int_arg("prefix-cache", optarg, 16, 1 << 26, &iv)))
                c.opts.prefix_entries = (uint32_t)iv;
            break;
        case O_SCRAPE:
            if (strcmp(optarg, "off") != 0 && optarg[0] != '/') {
                fprintf(stderr, "arbiter lb: --scrape-path '%s': give a path (/metrics) or off\n",
                        optarg);
                goto out;
            }
            scrape = optarg;
            break;
        case O_SCRAPE_INT:
            ok = int_arg("scrape-interval", optarg, 10, DAY, &c.scrape_interval_ms);
            break;
        case O_SATQ:
            if ((ok = num_arg("saturate-queue", optarg, 0, 1e6, &dv)))
                c.opts.sat_queue = dv;
            break;
        case O_SATKV:
            if ((ok = num_arg("saturate-kv", optarg, 0, 1, &dv)))
                c.opts.sat_kv = dv;
            break;
        case O_MAXINF:
            if ((ok = int_arg("max-inflight", optarg, 0, 1000000, &iv)))
                c.opts.max_inflight = (uint32_t)iv;
            break;
        case O_WPREFIX:
            if ((ok = num_arg("prefix-weight", optarg, 0, 1e6, &dv)))
                c.opts.w_prefix = dv;
            break;
        case O_WLORA:
            if ((ok = num_arg("lora-weight", optarg, 0, 1e6, &dv)))
                c.opts.w_lora = dv;
            break;
        case O_TENANT:
            c.tenant_header = optarg;
            break;
        case O_MAXQ:
            ok = int_arg("max-queue", optarg, 0, 1000000, &c.max_queue);
            break;
        case O_QTO:
            ok = int_arg("queue-timeout", optarg, 1, DAY, &c.queue_timeout_ms);
            break;
        case O_SLO:
            ok = int_arg("ttft-slo", optarg, 0, DAY, &c.ttft_slo_ms);
            break;
        case O_THREADS:
            ok = int_arg("threads", optarg, 1, 64, &c.threads);
            break;
        case 'h':
        case O_HELP:
            fputs(LB_USAGE, stdout);
            rc = 0;
            goto out;
        default:
            fprintf(stderr, "arbiter lb: bad option '%s' (or its value is missing)\n%s", name,
                    LB_USAGE);
            goto out;
        }
        if (!ok)
            goto out;
    }
    if (optind < argc) {
        fprintf(stderr, "arbiter lb: unexpected argument '%s'\n%s", argv[optind], LB_USAGE);
        goto out;
    }
    if (!c.listen) {
        fprintf(stderr, "arbiter lb: --listen ADDR is required (e.g. --listen 127.0.0.1:8080)\n");
        goto out;
    }
    if (!!nt + !!bfile + !!(service || controller) != 1) {
        fprintf(stderr, "arbiter lb: give the backends one way: --backend HOST:PORT (repeat), "
                        "--backends-file FILE, or --service NAME --controller URL\n");
        goto out;
    }
    if (c.policy == &lb_chash_ops && !c.hash_header && !c.hash_cookie) {
        fprintf(stderr, "arbiter lb: --policy hash needs --hash-header H or --hash-cookie C\n");
        goto out;
    }
    if (c.eject_max_ms < c.eject_base_ms)
        c.eject_max_ms = c.eject_base_ms;
    size_conns(&c, max_conns_given);
    if (c.tls_cert_file || c.tls_key_file) { /* checked now: a clear word before listening */
        tls_files_t tf = {.cert_file = c.tls_cert_file, .key_file = c.tls_key_file};
        tls_server_t ts = {0};
        if (tls_server_load(&tf, &ts, &err) < 0) {
            fprintf(stderr, "arbiter lb: %s\n", err.msg);
            goto out;
        }
        tls_server_free(&ts);
    }
    /* LLM replicas: the inference policy by default, prompts read, metrics scraped */
    if (c.openai && !policy_given)
        c.policy = &lb_inference_ops;
    if (c.policy == &lb_prefix_ops || c.policy == &lb_kv_ops || c.policy == &lb_inference_ops)
        c.openai = true;
    if (scrape)
        c.scrape_path = strcmp(scrape, "off") == 0 ? NULL : scrape;
    else if (c.policy == &lb_kv_ops || c.policy == &lb_inference_ops)
        c.scrape_path = "/metrics";
    rc = 1;
    if (service || controller) {
        if (!service || !controller) {
            fprintf(stderr, "arbiter lb: --service and --controller go together\n");
            rc = 2;
            goto out;
        }
        if (lb_source_controller(&c.source, controller, service, &ctl_tls, &err) < 0) {
            fprintf(stderr, "arbiter lb: %s\n", err.msg);
            goto out;
        }
    } else if (bfile) {
        if (lb_source_file(&c.source, bfile, &err) < 0) {
            fprintf(stderr, "arbiter lb: %s\n", err.msg);
            goto out;
        }
    } else if (lb_source_static(&c.source, t, nt, &err) < 0) {
        fprintf(stderr, "arbiter lb: %s\n", err.msg);
        goto out;
    }
    if (lb_proxy_run(&c, &err) < 0)
        fprintf(stderr, "arbiter lb: %s\n", err.msg);
    else
        rc = 0;
    lb_source_fini(&c.source);
out:
    free(t);
    return rc;
}
