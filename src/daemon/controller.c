/*
 * controller.c: the controller assembled (controller.h): the plan made from
 * the settings, then the SQLite controller run. It opens (and recovers) the
 * resource manager over the data directory, starts the scheduler thread
 * and the HTTP API, writes the URL it listens on to DIR/url, and runs until
 * SIGINT or SIGTERM, when it stops accepting requests, writes what is
 * queued and exits 0. A failed store commit (disk full, an I/O error) or a
 * Lamport clock at its limit makes it stop serving at once (every request,
 * /healthz included, 503) and exit 3 with the reason on stderr, within
 * 100 ms, for a supervisor to restart (systemd Restart=on-failure): a
 * restart recovers what was committed, which is all that was acknowledged.
 *
 * Crash-only: a kill -9 at any moment is safe; the next start recovers
 * from the store everything that was acknowledged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/controller.h"
#include "util/log.h"

void dmn_ctl_settings_init(dmn_ctl_settings_t *s)
{
    memset(s, 0, sizeof *s);
    s->listen = "127.0.0.1:7070";
    s->ttl_s = 5;
    s->max_ops = 128;
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

/* etcd://MEMBERS[/PREFIX][?...] and --store-prefix, --name: the election's part of the plan */
static int plan_etcd(const dmn_ctl_settings_t *s, dmn_ctl_plan_t *p, arb_err_t *err)
{
    const char *m = s->store + strlen("etcd://");
    size_t ml = strcspn(m, "/?");

    if (ml == 0 || ml >= sizeof p->members)
        return arb_errf(err, -EINVAL, "--store '%s': use etcd://HOST:PORT[,HOST:PORT...]",
                        s->store);
    memcpy(p->members, m, ml);
    p->members[ml] = '\0';
    if (s->prefix)
        snprintf(p->prefix, sizeof p->prefix, "%s", s->prefix);
    else if (m[ml] == '/' && m[ml + 1])
        snprintf(p->prefix, sizeof p->prefix, "%.*s", (int)strcspn(m + ml, "?"), m + ml);
    else
        snprintf(p->prefix, sizeof p->prefix, "/arbiter");
    if (p->prefix[0] != '/' || strchr(p->prefix, '?') || strlen(p->prefix) < 2)
        return arb_errf(err, -EINVAL, "--store-prefix '%s': a key prefix such as /arbiter",
                        p->prefix);
    if (!s->name)
        return arb_errf(err, -EINVAL,
                        "--store etcd://... needs --name NAME, unique among the controllers "
                        "sharing the etcd cluster");
    p->store = DMN_STORE_ETCD;
    return 0;
}

/* Who may call, and whether the address must move to loopback. */
static int plan_auth(const dmn_ctl_settings_t *s, dmn_ctl_plan_t *p, arb_err_t *err)
{
    const tls_server_t *t = &p->tls;
    bool authn = p->has_tokens || t->ca; /* someone must be named: a token or a certificate */

    if (!authn && !tls_is_loopback(p->host)) {
        snprintf(p->note, sizeof p->note,
                 "no --tokens and no --trusted-ca-file: the API has no authentication, so it "
                 "listens on 127.0.0.1 only, not on %s",
                 p->host);
        snprintf(p->host, sizeof p->host, "127.0.0.1");
        p->moved_to_loopback = true;
    }
    if (authn && !t->cert && !tls_is_loopback(p->host) && !s->plain_ok)
        return arb_errf(err, -EINVAL,
                        "--listen %s without TLS: bearer tokens and job env values would cross "
                        "the network in clear; give --cert-file and --key-file (arbiter init "
                        "DIR makes them), or --insecure-plain-http to accept that",
                        s->listen);
    p->scheme = t->cert ? "https" : "http";
    p->auth = p->has_tokens && t->client_cert_auth ? "bearer tokens and client certificates"
              : t->client_cert_auth                ? "client certificates required"
              : p->has_tokens && t->ca             ? "bearer tokens or client certificates"
              : p->has_tokens                      ? "bearer tokens required"
              : t->ca                              ? "client certificates required"
                                                   : "NO authentication: loopback only";
    return 0;
}

int dmn_ctl_plan(const dmn_ctl_settings_t *s, dmn_ctl_plan_t *p, arb_err_t *err)
{
    int rc = -EINVAL;

    memset(p, 0, sizeof *p);
    st_conf_init(&p->conf);
    if (!s->data_dir && !s->store) {
        arb_errf(err, -EINVAL,
                 "give a store: --data-dir DIR (SQLite) or --store etcd://HOST:PORT --name NAME");
        goto out;
    }
    if (s->data_dir &&
        s->store) { /* one store: etcd holds everything, a data dir would be ignored */
        arb_errf(err, -EINVAL,
                 "--data-dir '%s' with --store %s: give one store (--data-dir DIR for SQLite, "
                 "or --store etcd://... alone)",
                 s->data_dir, s->store);
        goto out;
    }
    if (parse_listen(s->listen, p->host, sizeof p->host, &p->port) < 0) {
        arb_errf(err, -EINVAL, "--listen '%s': use HOST:PORT, e.g. 127.0.0.1:7070", s->listen);
        goto out;
    }
    if (s->config && st_conf_load_file(s->config, &p->conf, err) < 0)
        goto out;
    p->conf.accept_rewind = s->accept_rewind;
    if (s->tokens && api_tokens_load(s->tokens, &p->tokens, err) < 0)
        goto out;
    p->has_tokens = s->tokens != NULL;
    if (tls_server_load(&s->tls, &p->tls, err) < 0)
        goto out;
    if (plan_auth(s, p, err) < 0)
        goto out;
    p->store = DMN_STORE_SQLITE;
    p->data_dir = s->data_dir;
    if (s->store && plan_etcd(s, p, err) < 0)
        goto out;
    p->name = s->name;
    p->advertise = s->advertise;
    p->ttl_s = s->ttl_s;
    p->max_ops = s->max_ops;
    p->max_conns = s->max_conns;
    p->max_conns_per_client = s->max_conns_per_client;
    rc = 0;
out:
    if (rc < 0)
        dmn_ctl_plan_free(p);
    return rc;
}

void dmn_ctl_plan_free(dmn_ctl_plan_t *p)
{
    api_tokens_free(&p->tokens);
    tls_server_free(&p->tls);
    st_conf_free(&p->conf);
    memset(&p->tokens, 0, sizeof p->tokens);
    memset(&p->tls, 0, sizeof p->tls);
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
    arb_log(ARB_LOG_WARN, NULL, "cannot write %s: %s (the API serves all the same)", path,
            strerror(errno));
    unlink(tmp);
}

/* Until a signal (0) or a failed store (3). */
static int serve(st_t *st, const sigset_t *sigs)
{
    arb_err_t err = {{0}};

    for (;;) {
        struct timespec to = {0, 100 * 1000000L};
        int sig = sigtimedwait(sigs, NULL, &to);
        if (sig > 0) {
            arb_log(ARB_LOG_INFO, NULL, "signal %d: stopping", sig);
            return 0;
        }
        if (st_store_status(st, &err) < 0) {
            /* Fail loudly, never a 503 loop behind a healthy /healthz: stop
             * serving and exit, for a supervisor to restart; the restart
             * recovers exactly what was committed (and acknowledged). */
            arb_log(ARB_LOG_ERROR, NULL,
                    "FATAL: %s; stopping with exit status 3: nothing uncommitted was "
                    "acknowledged, a restart recovers what was committed",
                    err.msg);
            return 3;
        }
    }
}

int dmn_ctl_run(dmn_ctl_plan_t *p, const sigset_t *sigs)
{
    arb_err_t err = {{0}};
    st_t *st = NULL;
    api_server_t *api = NULL;
    int rc = 1;

    if (p->store == DMN_STORE_ETCD) /* several controllers over etcd, one leading */
        return dmn_ctl_run_ha(p, sigs);
    if (st_open(p->data_dir, &p->conf, &st, &err) < 0 || st_start(st, &err) < 0) {
        arb_log(ARB_LOG_ERROR, NULL, "%s", err.msg);
        goto out;
    }
    api_opts_t ao = {.host = p->host,
                     .port = p->port,
                     .tokens = p->has_tokens ? &p->tokens : NULL,
                     .name = p->name,
                     .tls = &p->tls,
                     .max_conns = p->max_conns,
                     .max_conns_per_client = p->max_conns_per_client};
    if (api_server_start(st, &ao, &api, &err) < 0) {
        arb_log(ARB_LOG_ERROR, NULL, "%s", err.msg);
        goto out;
    }
    st_status_t status;
    st_status(st, &status);
    write_url(p->data_dir, p->scheme, p->host, api_server_port(api));
    arb_log(ARB_LOG_INFO, NULL,
            "epoch %lld, %lld jobs and %lld nodes recovered from %s; listening on %s://%s:%d (%s)",
            (long long)status.epoch, (long long)status.jobs, (long long)status.nodes, p->data_dir,
            p->scheme, p->host, api_server_port(api), p->auth);
    rc = serve(st, sigs);
out:
    if (st)
        st_quiesce(st); /* long polls (events, service endpoints) answer now */
    api_server_stop(api);
    st_close(st);
    return rc;
}
