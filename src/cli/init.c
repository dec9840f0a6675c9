/*
 * init.c: `arbiter init`: the credentials of a cluster that spans machines
 * (docs/security.md), made with GnuTLS (src/tls/pki.c):
 *
 *   arbiter init DIR [--host NAME ...]
 *       DIR/ca.crt, ca.key          the cluster CA (every client trusts ca.crt)
 *       DIR/controller.crt, .key    the controller's TLS certificate; its names
 *                                   (SANs) are the --host values, localhost and
 *                                   127.0.0.1
 *       DIR/admin.crt, .key         an admin's client certificate (CN admin, O admin)
 *       DIR/tokens, admin.token     an admin bearer token (--tokens DIR/tokens)
 *   arbiter init node NAME DIR [--host NAME ...]
 *       DIR/node-NAME.crt, .key     a node's certificate: CN NAME, O agent; a TLS
 *                                   client (reports) and server (its log server,
 *                                   names: NAME, the --host values, localhost,
 *                                   127.0.0.1)
 *   arbiter init user NAME DIR [--role user|admin|agent] [--team TEAM]
 *       DIR/user-NAME.crt, .key     a client certificate for the CLI or a balancer
 *   arbiter init server NAME DIR [--host NAME ...]
 *       DIR/server-NAME.crt, .key   a TLS server certificate (no role): what
 *                                   `arbiter lb --cert-file` serves
 *
 * Keys are written 0600, nothing is ever overwritten, and DIR is made 0700
 * when it does not exist.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "tls/tls.h"

#define INIT_MAX_HOSTS 32

typedef struct init_opts {
    fl_list_t hosts;
    int role;
    const char *team;
} init_opts_t;

static const char *const init_roles[] = {"user", "admin", "agent"};

static const fl_flag_t init_flags[] = {
    FL_OPT(init_opts_t, hosts, "--host", NULL, FL_LIST, "NAME",
           "a DNS name or IPv4 address the certificate is valid for (repeat; localhost and "
           "127.0.0.1 are always in)"),
    FL_OPT(init_opts_t, role, "--role", NULL, FL_CHOICE, NULL,
           "init user: the role the certificate names (O)", .def = "user",
           .choices = "user|admin|agent"),
    FL_OPT(init_opts_t, team, "--team", NULL, FL_STR, "TEAM",
           "init user: the team it names (OU; default team default)"),
    FL_END,
};
static const fl_verb_t init_verb = {
    .name = "init",
    .args = "DIR | node NAME DIR | user NAME DIR | server NAME DIR",
    .summary = "make a cluster's CA, certificates and admin token (TLS across machines)",
    .flags = init_flags,
    .min_pos = 1,
    .max_pos = 3,
    .more = "  DIR               the cluster's credentials: ca.crt (give it to every client: "
            "--cacert,\n"
            "                    ARBITER_CACERT), ca.key (keep it secret), controller.crt/.key, "
            "admin.crt/.key,\n"
            "                    tokens and admin.token (an admin bearer token)\n"
            "  node NAME DIR     node-NAME.crt/.key for the agent of node NAME (its identity: it "
            "may\n"
            "                    report as NAME only) and its log server\n"
            "  user NAME DIR     user-NAME.crt/.key: a client certificate (default role user, "
            "team default)\n"
            "  server NAME DIR   server-NAME.crt/.key: a TLS server certificate (arbiter lb "
            "--cert-file)"};

/* Node, user and team names: letters, digits, '-', '_', '.'; 1..63. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '.' || s[0] == '-')
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n;
}

static bool host_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < 254 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") == n;
}

static int make_dir(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0)
        return S_ISDIR(sb.st_mode) ? 0 : -ENOTDIR;
    return mkdir(dir, 0700) == 0 ? 0 : -errno;
}

/* The cluster: CA, controller, admin certificate, admin token. */
static int init_cluster(const char *dir, const char *const *hosts, int nhosts)
{
    arb_err_t err = {{0}};
    char path[4096], tok[65], line[128];
    unsigned char rnd[32];
    pki_leaf_t ctl = {.base = "controller",
                      .cn = "controller",
                      .server = true,
                      .hosts = hosts,
                      .nhosts = nhosts,
                      .days = 825};
    pki_leaf_t adm = {
        .base = "admin", .cn = "admin", .o = "admin", .ou = "ops", .client = true, .days = 825};
    int rc;

    if ((rc = pki_ca_make(dir, &err)) < 0) {
        fprintf(stderr, "arbiter init: %s\n", err.msg);
        return 1;
    }
    if ((rc = pki_leaf_make(dir, &ctl, &err)) < 0 || (rc = pki_leaf_make(dir, &adm, &err)) < 0) {
        fprintf(stderr, "arbiter init: %s\n", err.msg);
        return 1;
    }
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        fprintf(stderr, "arbiter init: getrandom: %s\n", strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(tok + 2 * i, 3, "%02x", rnd[i]);
    int n = snprintf(line, sizeof line, "%s admin ops admin\n", tok);
    snprintf(path, sizeof path, "%s/tokens", dir);
    if (pki_write_new(path, line, (size_t)n, 0600, &err) < 0) {
        fprintf(stderr, "arbiter init: %s\n", err.msg);
        return 1;
    }
    snprintf(path, sizeof path, "%s/admin.token", dir);
    n = snprintf(line, sizeof line, "%s\n", tok);
    if (pki_write_new(path, line, (size_t)n, 0600, &err) < 0) {
        fprintf(stderr, "arbiter init: %s\n", err.msg);
        return 1;
    }
    printf("arbiter init: the cluster's credentials are in %s:\n"
           "  ca.crt           the cluster CA: every client checks the controller with it\n"
           "                   (--cacert FILE or ARBITER_CACERT)\n"
           "  ca.key           the CA's key: keep it secret (it signs new nodes)\n"
           "  controller.crt   the controller's certificate, for",
           dir);
    for (int i = 0; i < nhosts; i++)
        printf(" %s", hosts[i]);
    printf("\n  admin.crt        an admin's client certificate (ARBITER_CERT_FILE, "
           "ARBITER_KEY_FILE)\n"
           "  tokens           the tokens file with an admin token (admin.token)\n"
           "next:\n"
           "  arbiter controller --listen 0.0.0.0:7070 --data-dir DATA --cert-file "
           "%s/controller.crt \\\n"
           "      --key-file %s/controller.key --trusted-ca-file %s/ca.crt --tokens %s/tokens\n"
           "  arbiter init node NODE %s     (for each node)\n",
           dir, dir, dir, dir, dir);
    return 0;
}

/* The positionals: DIR, or KIND NAME DIR; the flags that go with KIND. */
static int init_args(const fl_args_t *a, const init_opts_t *o, const char **kind, const char **name,
                     const char **dir)
{
    static const char *const kinds[] = {"node", "user", "server"};

    *kind = *name = NULL;
    if (a->npos == 1) {
        *dir = a->pos[0];
    } else if (a->npos == 3) {
        for (int k = 0; k < 3; k++)
            if (!strcmp(a->pos[0], kinds[k]))
                *kind = kinds[k];
        *name = a->pos[1];
        *dir = a->pos[2];
    }
    if (!*dir || (a->npos == 3 && !*kind)) {
        fprintf(stderr, "arbiter init: give DIR, or node|user|server NAME DIR; run 'arbiter "
                        "init --help' for the usage\n");
        return 2;
    }
    if ((o->role || o->team) && (!*kind || strcmp(*kind, "user"))) {
        fprintf(stderr, "arbiter init: --role and --team go with init user NAME DIR\n");
        return 2;
    }
    for (int k = 0; k < o->hosts.n; k++)
        if (!host_ok(o->hosts.v[k]) || k == INIT_MAX_HOSTS) {
            fprintf(stderr,
                    "arbiter init: --host '%s': a DNS name or an IPv4 address (at most %d)\n",
                    o->hosts.v[k], INIT_MAX_HOSTS);
            return 2;
        }
    if (o->team && !name_ok(o->team)) {
        fprintf(stderr, "arbiter init: --team '%s': letters, digits, '-', '_', '.'\n", o->team);
        return 2;
    }
    return 0;
}

/* One certificate (node, user or server) signed by DIR's CA. */
static int init_leaf(const char *kind, const char *name, const char *dir, const char *role,
                     const char *team, const char *const *hosts, int nhosts)
{
    arb_err_t err = {{0}};
    char base[80];
    const char *names[INIT_MAX_HOSTS + 3];
    int nn = 0;
    bool node = !strcmp(kind, "node"), server = !strcmp(kind, "server");
    snprintf(base, sizeof base, "%s-%s", kind, name);
    if (node || server) { /* reached by its name, too (a node: its log server) */
        names[nn++] = name;
        for (int k = 0; k < nhosts; k++)
            if (strcmp(hosts[k], name))
                names[nn++] = hosts[k];
    }
    pki_leaf_t l = {.base = base,
                    .cn = name,
                    .o = server ? NULL
                         : node ? "agent"
                                : role,
                    .ou = server ? NULL
                          : node ? "nodes"
                          : team ? team
                                 : "default",
                    .server = node || server,
                    .client = !server,
                    .hosts = names,
                    .nhosts = nn,
                    .days = 825};
    if (pki_leaf_make(dir, &l, &err) < 0) {
        fprintf(stderr, "arbiter init: %s\n", err.msg);
        return 1;
    }
    if (server)
        printf(
            "arbiter init: %s/%s.crt and .key: a TLS server certificate for %s\n"
            "  arbiter lb --listen 0.0.0.0:8443 --cert-file %s/%s.crt --key-file %s/%s.key ...\n",
            dir, base, name, dir, base, dir, base);
    else if (node)
        printf("arbiter init: %s/%s.crt and .key: node '%s' (acts as that node only)\n"
               "  arbiter agent --name %s --controller https://CONTROLLER:7070 --cacert %s/ca.crt "
               "\\\n      --cert-file %s/%s.crt --key-file %s/%s.key\n",
               dir, base, name, name, dir, dir, base, dir, base);
    else
        printf(
            "arbiter init: %s/%s.crt and .key: %s '%s' of team '%s'\n"
            "  ARBITER_CACERT=%s/ca.crt ARBITER_CERT_FILE=%s/%s.crt ARBITER_KEY_FILE=%s/%s.key\n",
            dir, base, role, name, l.ou, dir, dir, base, dir, base);
    return 0;
}

int cli_init(int argc, char **argv)
{
    const char *hosts[INIT_MAX_HOSTS + 2];
    int nhosts = 0;
    const char *kind, *name, *dir = NULL, *role, *team;
    init_opts_t o = {0};
    fl_args_t a = {0};
    int rc;

    if (!fl_run(&init_verb, argc, argv, &o, &a, &rc))
        return rc;
    if ((rc = init_args(&a, &o, &kind, &name, &dir)) != 0)
        return rc;
    role = init_roles[o.role];
    team = o.team;
    for (; nhosts < o.hosts.n; nhosts++)
        hosts[nhosts] = o.hosts.v[nhosts];
    if (name && !name_ok(name)) {
        fprintf(stderr,
                "arbiter init: %s name '%s': letters, digits, '-', '_' and '.', at most 63 "
                "(the name it acts as)\n",
                kind, name);
        return 2;
    }
    if (!kind || strcmp(kind, "user")) { /* server certificates: local names always */
        hosts[nhosts++] = "localhost";
        hosts[nhosts++] = "127.0.0.1";
    }
    if ((rc = make_dir(dir)) < 0) {
        fprintf(stderr, "arbiter init: %s: %s\n", dir, strerror(-rc));
        return 1;
    }
    if (!kind)
        return init_cluster(dir, hosts, nhosts);
    return init_leaf(kind, name, dir, role, team, hosts, nhosts);
}
