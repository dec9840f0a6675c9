/*
 * controller.c: `arbiter controller`: the durable daemon. It loads the
 * config and tokens, opens (and recovers) the resource manager over the
 * data directory, starts the scheduler thread and the HTTP API, writes the
 * URL it listens on to DIR/url, and runs until SIGINT or SIGTERM, when it
 * stops accepting requests, writes what is queued and exits 0. A failed
 * store commit (disk full, an I/O error) or a Lamport clock at its limit
 * makes it stop serving at once (every request, /healthz included, 503)
 * and exit 3 with the reason on stderr, within 100 ms, for a supervisor to
 * restart (systemd Restart=on-failure): a restart recovers what was
 * committed, which is all that was acknowledged.
 *
 * Crash-only: a kill -9 at any moment is safe; the next start recovers
 * from the store everything that was acknowledged.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "cli/cli.h"
#include "cli/controller_ha.h"
#include "tls/tls.h"

static int usage_to(FILE *f, int rc)
{
    fprintf(f, "usage: arbiter controller --listen HOST:PORT --data-dir DIR [--config FILE] "
               "[--tokens FILE] [--accept-rewind]\n"
               "       arbiter controller --listen HOST:PORT --store etcd://HOST:PORT[,...] "
               "--name NAME\n"
               "           [--store-prefix /arbiter] [--advertise-url URL] [--lease-ttl S] "
               "[--max-txn-ops N]   (docs/ha.md)\n"
               "       arbiter controller --api-doc     (print docs/api.md)\n"
               "TLS and limits (docs/security.md):\n"
               "  --cert-file FILE --key-file FILE   serve HTTPS with this certificate and key "
               "(arbiter init DIR)\n"
               "  --trusted-ca-file FILE             check client certificates against this CA: "
               "a certificate names its principal\n"
               "  --client-cert-auth                 every request must carry such a "
               "certificate\n"
               "  --insecure-plain-http              allow plain HTTP on an address beyond "
               "loopback (tokens in clear)\n"
               "  --max-conns N                      open connections in all (default 16384, "
               "within the open-file limit)\n"
               "  --max-conns-per-client N           connections one IP address may hold "
               "(default 256)\n");
    return rc;
}

static int usage(void)
{
    return usage_to(stderr, 2);
}

static int parse_listen(const char *s, char *host, size_t n, int *port)
{
    const char *colon = strrchr(s, ':');
    char *end;

    if (!colon || (size_t)(colon - s) >= n || colon == s)
        return -EINVAL;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535 || end == colon + 1)
        return -EINVAL;
    *port = (int)p;
    return 0;
}

static void write_url(const char *dir, const char *scheme, const char *host, int port)
{
    char path[4096], tmp[4200];
    FILE *f;

    snprintf(path, sizeof path, "%s/url", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "%s://%s:%d\n", scheme, host, port);
        if (fclose(f) == 0 && rename(tmp, path) == 0)
            return;
    }
    fprintf(stderr, "arbiter controller: cannot write %s: %s (the API serves all the same)\n", path,
            strerror(errno));
    unlink(tmp);
}

int cli_controller(int argc, char **argv)
{
    const char *listen = "127.0.0.1:7070", *dir = NULL, *config = NULL, *tokfile = NULL;
    char host[256];
    int port = 0, rc = 1;
    st_conf_t conf;
    api_tokens_t tokens = {0};
    arb_err_t err = {{0}};
    st_t *st = NULL;
    api_server_t *api = NULL;
    sigset_t set;
    ctl_ha_args_t ha = {.ttl_s = 5, .max_ops = 128};
    tls_files_t tf = {0};
    tls_server_t tls = {0};
    bool plain_ok = false;
    int max_conns = 0, per_client = 0;
    bool accept_rewind = false;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--api-doc") == 0) {
            api_doc_markdown(stdout);
            return 0;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return usage_to(stdout, 0);
        } else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
            listen = argv[++i];
        } else if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
            tokfile = argv[++i];
        } else if (strcmp(argv[i], "--accept-rewind") == 0) {
            accept_rewind = true; /* a data dir below its marker: go on from what is there */
        } else if (strcmp(argv[i], "--store") == 0 && i + 1 < argc) {
            ha.store = argv[++i];
            if (strncmp(ha.store, "etcd://", 7) != 0) { /* sqlite:DIR or DIR */
                dir = ha.store;
                ha.store = NULL;
            }
        } else if (strcmp(argv[i], "--cert-file") == 0 && i + 1 < argc) {
            tf.cert_file = argv[++i];
        } else if (strcmp(argv[i], "--key-file") == 0 && i + 1 < argc) {
            tf.key_file = argv[++i];
        } else if (strcmp(argv[i], "--trusted-ca-file") == 0 && i + 1 < argc) {
            tf.ca_file = argv[++i];
        } else if (strcmp(argv[i], "--client-cert-auth") == 0) {
            tf.client_cert_auth = true;
        } else if (strcmp(argv[i], "--insecure-plain-http") == 0) {
            plain_ok = true;
        } else if ((strcmp(argv[i], "--max-conns") == 0 ||
                    strcmp(argv[i], "--max-conns-per-client") == 0) &&
                   i + 1 < argc) {
            char *end;
            long v = strtol(argv[i + 1], &end, 10);
            if (*end || end == argv[i + 1] || v < 1 || v > 1000000) {
                fprintf(stderr, "arbiter controller: %s '%s': a count, 1..1000000\n", argv[i],
                        argv[i + 1]);
                return 2;
            }
            if (strcmp(argv[i], "--max-conns") == 0)
                max_conns = (int)v;
            else
                per_client = (int)v;
            i++;
        } else if (strcmp(argv[i], "--store-prefix") == 0 && i + 1 < argc) {
            ha.prefix = argv[++i];
        } else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
            ha.name = argv[++i];
        } else if (strcmp(argv[i], "--advertise-url") == 0 && i + 1 < argc) {
            ha.advertise = argv[++i];
        } else if ((strcmp(argv[i], "--lease-ttl") == 0 || strcmp(argv[i], "--max-txn-ops") == 0) &&
                   i + 1 < argc) {
            char *end;
            long v = strtol(argv[i + 1], &end, 10);
            bool ttl = strcmp(argv[i], "--lease-ttl") == 0;
            if (*end || end == argv[i + 1] || v < (ttl ? 5 : 2) || v > (ttl ? 3600 : 1000000)) {
                fprintf(stderr, "arbiter controller: %s '%s': %s\n", argv[i], argv[i + 1],
                        ttl ? "seconds, 5..3600 (a lease shorter than 5 s would expire during "
                              "etcd's own leader election)"
                            : "etcd's --max-txn-ops, 2..1000000 (etcd's default is 128)");
                return 2;
            }
            if (ttl)
                ha.ttl_s = (int)v;
            else
                ha.max_ops = (int)v;
            i++;
        } else {
            return usage();
        }
    }
    if (!dir && !ha.store)
        return usage();
    if (dir && ha.store) { /* one store: etcd holds everything, a data dir would be ignored */
        fprintf(stderr,
                "arbiter controller: --data-dir '%s' with --store %s: give one store "
                "(--data-dir DIR for SQLite, or --store etcd://... alone)\n",
                dir, ha.store);
        return 2;
    }
    if (parse_listen(listen, host, sizeof host, &port) < 0) {
        fprintf(stderr, "arbiter controller: --listen '%s': use HOST:PORT, e.g. 127.0.0.1:7070\n",
                listen);
        return 2;
    }
    st_conf_init(&conf);
    if (config && st_conf_load_file(config, &conf, &err) < 0) {
        fprintf(stderr, "arbiter controller: %s\n", err.msg);
        return 2;
    }
    conf.accept_rewind = accept_rewind;
    if (tokfile && api_tokens_load(tokfile, &tokens, &err) < 0) {
        fprintf(stderr, "arbiter controller: %s\n", err.msg);
        st_conf_free(&conf);
        return 2;
    }
    if (tls_server_load(&tf, &tls, &err) < 0) {
        fprintf(stderr, "arbiter controller: %s\n", err.msg);
        rc = 2;
        goto out;
    }
    bool authn = tokfile || tls.ca; /* someone must be named: a token or a certificate */
    if (!authn && !tls_is_loopback(host)) {
        fprintf(stderr,
                "arbiter controller: no --tokens and no --trusted-ca-file: the API has no "
                "authentication, so it listens on 127.0.0.1 only, not on %s\n",
                host);
        snprintf(host, sizeof host, "127.0.0.1");
    }
    if (authn && !tls.cert && !tls_is_loopback(host) && !plain_ok) {
        fprintf(stderr,
                "arbiter controller: --listen %s without TLS: bearer tokens and job env values "
                "would cross the network in clear; give --cert-file and --key-file (arbiter "
                "init DIR makes them), or --insecure-plain-http to accept that\n",
                listen);
        rc = 2;
        goto out;
    }
    const char *scheme = tls.cert ? "https" : "http";
    const char *how = tokfile && tls.client_cert_auth ? "bearer tokens and client certificates"
                      : tls.client_cert_auth          ? "client certificates required"
                      : tokfile && tls.ca             ? "bearer tokens or client certificates"
                      : tokfile                       ? "bearer tokens required"
                      : tls.ca                        ? "client certificates required"
                                                      : "NO authentication: loopback only";

    /* Signals are taken by sigwait below; every thread inherits the mask. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    if (ha.store) { /* several controllers over etcd, one leading: controller_ha.c */
        ha.host = host;
        ha.port = port;
        ha.tokens = tokfile ? &tokens : NULL;
        ha.tls = &tls;
        ha.max_conns = max_conns;
        ha.max_conns_per_client = per_client;
        ha.conf = &conf;
        ha.sigs = &set;
        rc = cli_controller_ha(&ha);
        goto out;
    }
    if (st_open(dir, &conf, &st, &err) < 0 || st_start(st, &err) < 0) {
        fprintf(stderr, "arbiter controller: %s\n", err.msg);
        goto out;
    }
    api_opts_t ao = {.host = host,
                     .port = port,
                     .tokens = tokfile ? &tokens : NULL,
                     .name = ha.name,
                     .tls = &tls,
                     .max_conns = max_conns,
                     .max_conns_per_client = per_client};
    if (api_server_start(st, &ao, &api, &err) < 0) {
        fprintf(stderr, "arbiter controller: %s\n", err.msg);
        goto out;
    }
    json_t *status = st_status(st);
    write_url(dir, scheme, host, api_server_port(api));
    fprintf(stderr,
            "arbiter controller: epoch %lld, %lld jobs and %lld nodes recovered from %s; "
            "listening on %s://%s:%d (%s)\n",
            (long long)json_integer_value(json_object_get(status, "epoch")),
            (long long)json_integer_value(json_object_get(status, "jobs")),
            (long long)json_integer_value(json_object_get(status, "nodes")), dir, scheme, host,
            api_server_port(api), how);
    json_decref(status);
    for (;;) {
        struct timespec to = {0, 100 * 1000000L};
        int sig = sigtimedwait(&set, NULL, &to);
        if (sig > 0) {
            fprintf(stderr, "arbiter controller: signal %d: stopping\n", sig);
            rc = 0;
            break;
        }
        if (st_store_status(st, &err) < 0) {
            /* Fail loudly, never a 503 loop behind a healthy /healthz: stop
             * serving and exit, for a supervisor to restart; the restart
             * recovers exactly what was committed (and acknowledged). */
            fprintf(stderr,
                    "arbiter controller: FATAL: %s; stopping with exit status 3: nothing "
                    "uncommitted was acknowledged, a restart recovers what was committed\n",
                    err.msg);
            rc = 3;
            break;
        }
    }
out:
    if (st)
        st_quiesce(st); /* long polls (events, service endpoints) answer now */
    api_server_stop(api);
    st_close(st);
    api_tokens_free(&tokens);
    tls_server_free(&tls);
    st_conf_free(&conf);
    return rc;
}
