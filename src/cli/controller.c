/*
 * controller.c: `arbiter controller`: its flags, read by one table into the
 * daemon's settings; src/daemon/controller.c makes the plan of what starts
 * (the store, the scheduler, the API, the election over etcd) and runs it
 * until SIGINT or SIGTERM (docs/ha.md, docs/security.md).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "daemon/controller.h"

typedef struct ctl_flags {
    dmn_ctl_settings_t s;
    long long max_conns, per_client, ttl_s, max_ops;
    bool api_doc;
} ctl_flags_t;

#define CF(FIELD, LONG, KIND, META, HELP, ...)                                                     \
    FL_OPT(ctl_flags_t, FIELD, LONG, NULL, KIND, META, HELP, __VA_ARGS__)

static const fl_flag_t ctl_flag_table[] = {
    CF(s.listen, "--listen", FL_STR, "HOST:PORT", "the API's address", .def = "127.0.0.1:7070"),
    CF(s.data_dir, "--data-dir", FL_STR, "DIR", "the SQLite store (one controller)"),
    CF(s.store, "--store", FL_STR, "etcd://HOST:PORT[,...]",
       "etcd: several controllers, one leading (a DIR here is --data-dir)"),
    CF(s.name, "--name", FL_STR, "NAME", "this controller's name, unique among those on etcd"),
    CF(s.config, "--config", FL_STR, "FILE", "queues, quotas, scheduler settings (docs/config.md)"),
    CF(s.tokens, "--tokens", FL_STR, "FILE",
       "bearer tokens and their roles (arbiter init makes it)"),
    CF(s.accept_rewind, "--accept-rewind", FL_BOOL, NULL,
       "a data dir older than its marker: go on from what is there"),
    CF(s.prefix, "--store-prefix", FL_STR, "/arbiter", "etcd's key prefix"),
    CF(s.advertise, "--advertise-url", FL_STR, "URL",
       "the URL followers send clients to (default: the one listened on)"),
    CF(ttl_s, "--lease-ttl", FL_INT, "S",
       "the leader's lease, seconds (a lease shorter than 5 s would expire during etcd's own "
       "leader election)",
       .def = "5", .min = 5, .max = 3600),
    CF(max_ops, "--max-txn-ops", FL_INT, "N", "etcd's --max-txn-ops, what etcd was started with",
       .def = "128", .min = 2, .max = 1000000),
    CF(s.tls.cert_file, "--cert-file", FL_STR, "FILE",
       "serve HTTPS with this certificate (arbiter init DIR)"),
    CF(s.tls.key_file, "--key-file", FL_STR, "FILE", "its private key"),
    CF(s.tls.ca_file, "--trusted-ca-file", FL_STR, "FILE",
       "check client certificates against this CA: a certificate names its principal"),
    CF(s.tls.client_cert_auth, "--client-cert-auth", FL_BOOL, NULL,
       "every request must carry such a certificate"),
    CF(s.plain_ok, "--insecure-plain-http", FL_BOOL, NULL,
       "allow plain HTTP on an address beyond loopback (tokens in clear)"),
    CF(max_conns, "--max-conns", FL_INT, "N",
       "open connections in all (default 16384, within the open-file limit)", .min = 1,
       .max = 1000000),
    CF(per_client, "--max-conns-per-client", FL_INT, "N",
       "connections one IP address may hold (default 256)", .min = 1, .max = 1000000),
    CF(api_doc, "--api-doc", FL_BOOL, NULL, "print the API's reference (docs/api.md) and exit"),
    FL_END,
};
static const fl_verb_t ctl_verb = {
    .name = "controller",
    .summary = "run the controller daemon: durable state, scheduler, HTTP/JSON API",
    .flags = ctl_flag_table,
    .more = "One store: --data-dir DIR (SQLite), or --store etcd://HOST:PORT[,...] --name NAME\n"
            "for several controllers of which one leads (docs/ha.md). TLS and limits:\n"
            "docs/security.md.",
};

int cli_controller(int argc, char **argv)
{
    ctl_flags_t f = {0};
    fl_args_t a = {0};
    dmn_ctl_plan_t plan;
    arb_err_t err = {{0}};
    sigset_t set;
    int rc;

    dmn_ctl_settings_init(&f.s);
    if (!fl_run(&ctl_verb, argc, argv, &f, &a, &rc))
        return rc;
    if (f.api_doc) {
        api_doc_markdown(stdout);
        return 0;
    }
    if (f.s.store && strncmp(f.s.store, "etcd://", 7) != 0) { /* sqlite:DIR or DIR */
        f.s.data_dir = f.s.store;
        f.s.store = NULL;
    }
    f.s.max_conns = (int)f.max_conns;
    f.s.max_conns_per_client = (int)f.per_client;
    f.s.ttl_s = (int)f.ttl_s;
    f.s.max_ops = (int)f.max_ops;
    if (dmn_ctl_plan(&f.s, &plan, &err) < 0) {
        fprintf(stderr, "arbiter controller: %s\n", err.msg);
        return 2;
    }
    if (plan.note[0])
        fprintf(stderr, "arbiter controller: %s\n", plan.note);
    /* Signals are taken by sigwait in the daemon; every thread inherits the mask. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    rc = dmn_ctl_run(&plan, &set);
    dmn_ctl_plan_free(&plan);
    return rc;
}
