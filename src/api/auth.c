/*
 * auth.c: who is calling. Two kinds of credentials name a principal (a
 * role, a team, a name, and for agents the node they act as):
 *
 *   bearer tokens, from a tokens file:
 *
 *     # TOKEN                ROLE   TEAM     [NAME | NODE]
 *     3f9c2a...              admin  ops      alice
 *     b71e04...              user   team-a   bob
 *     5d8e11...              agent  nodes    gpu-node-7
 *
 *   client certificates signed by the cluster CA (`arbiter init`), checked
 *   by the TLS layer (src/tls): CN the name (an agent's node), O the role,
 *   OU the team.
 *
 * admin: everything. user: submit to the team's queue, see and cancel the
 * team's jobs, read nodes, queues and events. agent: report as, fetch the
 * assignments of and check log tickets for its own node only (the fourth
 * column of its token, or its certificate's CN): an agent token without a
 * node may reach the service routes (a balancer) but acts as no node.
 *
 * Tokens are kept as SHA-256 digests only, sorted; a presented token is
 * hashed and its digest looked up (a binary search over digests, then a
 * constant-time comparison in full): the time taken depends on the guess's
 * digest alone, never on where a guess differs from a real token or how
 * long that one is, and a file of 10,000 node tokens costs 14 steps. The file
 * should be readable by the controller only; a group- or world-readable
 * file is accepted with a warning.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "api/api.h"
#include "tls/tls.h"
#include "util/log.h"

const char *api_role_name(st_role_t r)
{
    return r == ST_ROLE_ADMIN ? "admin" : r == ST_ROLE_USER ? "user" : "agent";
}

static st_role_t role_of(const char *s)
{
    return strcmp(s, "admin") == 0   ? ST_ROLE_ADMIN
           : strcmp(s, "user") == 0  ? ST_ROLE_USER
           : strcmp(s, "agent") == 0 ? ST_ROLE_AGENT
                                     : 0;
}

static int by_hash(const void *a, const void *b)
{
    return memcmp(((const api_token_t *)a)->hash, ((const api_token_t *)b)->hash,
                  sizeof((const api_token_t *)a)->hash);
}

void api_tokens_free(api_tokens_t *t)
{
    if (t->v)
        memset(t->v, 0, (size_t)t->n * sizeof *t->v);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

int api_tokens_parse(const char *text, size_t len, const char *path, api_tokens_t *t,
                     arb_err_t *err)
{
    char line[1024];
    int lineno = 0, rc = 0;
    api_tokens_t n = {0};
    size_t off = 0;

    while (rc == 0 && off < len) {
        char tok[256], role[32], team[256], name[256];
        size_t end = off;
        while (end < len && text[end] != '\n')
            end++;
        size_t ll = end - off;
        lineno++;
        if (ll >= sizeof line) {
            rc = arb_errf(err, -EINVAL, "%s:%d: a line longer than %zu bytes", path, lineno,
                          sizeof line - 1);
            break;
        }
        memcpy(line, text + off, ll);
        line[ll] = '\0';
        off = end + 1;
        if (strlen(line) != ll) {
            rc = arb_errf(err, -EINVAL, "%s:%d: a NUL byte in the line", path, lineno);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        name[0] = '\0';
        int k = sscanf(line, "%255s %31s %255s %255s", tok, role, team, name);
        if (k <= 0)
            continue;
        if (k < 3) {
            rc = arb_errf(err, -EINVAL, "%s:%d: expected 'TOKEN ROLE TEAM [NAME]'", path, lineno);
            break;
        }
        if (strlen(tok) < 16 || strlen(tok) > 127) {
            rc = arb_errf(err, -EINVAL, "%s:%d: a token must be 16..127 characters", path, lineno);
            break;
        }
        if (strlen(team) >= ST_NAME_MAX || strlen(name) >= ST_NAME_MAX) {
            rc = arb_errf(err, -EINVAL, "%s:%d: team and name must be under %d bytes", path, lineno,
                          ST_NAME_MAX);
            break;
        }
        st_role_t r = role_of(role);
        if (!r) {
            rc = arb_errf(err, -EINVAL, "%s:%d: role '%s'; use admin, user or agent", path, lineno,
                          role);
            break;
        }
        unsigned char h[32];
        tls_sha256(tok, strlen(tok), h);
        memset(tok, 0, sizeof tok);
        api_token_t *v = realloc(n.v, (size_t)(n.n + 1) * sizeof *v);
        if (!v) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
            break;
        }
        n.v = v;
        memset(&n.v[n.n], 0, sizeof n.v[n.n]);
        memcpy(n.v[n.n].hash, h, sizeof h);
        n.v[n.n].line = lineno;
        n.v[n.n].role = r;
        snprintf(n.v[n.n].team, sizeof n.v[n.n].team, "%.63s", team);
        snprintf(n.v[n.n].name, sizeof n.v[n.n].name, "%.63s", name[0] ? name : team);
        if (r == ST_ROLE_AGENT && name[0])
            snprintf(n.v[n.n].node, sizeof n.v[n.n].node, "%.63s", name);
        else if (r == ST_ROLE_AGENT)
            n.unbound++;
        n.n++;
    }
    memset(line, 0, sizeof line);
    if (rc == 0 && n.n == 0)
        rc = arb_errf(err, -EINVAL, "tokens file '%s' holds no token", path);
    if (rc == 0) { /* by digest, for api_tokens_find; a token twice is an error */
        qsort(n.v, (size_t)n.n, sizeof *n.v, by_hash);
        for (int i = 1; i < n.n && rc == 0; i++)
            if (memcmp(n.v[i - 1].hash, n.v[i].hash, sizeof n.v[i].hash) == 0)
                rc = arb_errf(err, -EINVAL, "%s:%d: this token is already on line %d", path,
                              n.v[i - 1].line > n.v[i].line ? n.v[i - 1].line : n.v[i].line,
                              n.v[i - 1].line < n.v[i].line ? n.v[i - 1].line : n.v[i].line);
    }
    if (rc < 0) {
        api_tokens_free(&n);
        return rc;
    }
    *t = n;
    return 0;
}

int api_tokens_load(const char *path, api_tokens_t *t, arb_err_t *err)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t n = 0;
    struct stat sb;
    int rc;

    if (!f)
        return arb_errf(err, -errno, "tokens file '%s': %s", path, strerror(errno));
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077))
        arb_log(ARB_LOG_WARN, "auth",
                "tokens file '%s' is readable by others (mode %03o); chmod 600 it", path,
                (unsigned)(sb.st_mode & 0777));
    if (!(text = malloc((4u << 20) + 1))) {
        fclose(f);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    n = fread(text, 1, 4u << 20, f);
    bool whole = feof(f) && !ferror(f);
    fclose(f);
    rc = whole ? api_tokens_parse(text, n, path, t, err)
               : arb_errf(err, -EFBIG, "tokens file '%s': unreadable, or over 4 MiB", path);
    memset(text, 0, n);
    free(text);
    if (rc == 0 && t->unbound)
        arb_log(ARB_LOG_WARN, "auth",
                "%s: %d agent token%s without a node (TOKEN agent TEAM NODE) may not report as "
                "any node",
                path, t->unbound, t->unbound == 1 ? "" : "s");
    return rc;
}

const api_token_t *api_tokens_find(const api_tokens_t *t, const char *token)
{
    unsigned char h[32];
    int lo = 0, hi = t->n;

    /* By the presented token's digest: the steps taken depend on that digest
     * only, which says nothing of any real token; the match is confirmed
     * whole, in constant time. */
    tls_sha256(token, strlen(token), h);
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = memcmp(t->v[mid].hash, h, sizeof h);
        if (c == 0)
            return tls_mem_equal(t->v[mid].hash, h, sizeof h) ? &t->v[mid] : NULL;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int api_authenticate(const api_auth_conf_t *c, const char *authz, const api_cert_t *cert,
                     api_principal_t *p, char *msg, size_t n)
{
    memset(p, 0, sizeof *p);
    msg[0] = '\0';
    if (c->require_cert && (!cert || cert->state != API_CERT_OK)) {
        snprintf(msg, n,
                 "a client certificate signed by this cluster's CA is required "
                 "(--client-cert-auth)%s%s",
                 cert && cert->state == API_CERT_BAD ? ": " : "; the CLI reads ARBITER_CERT_FILE",
                 cert && cert->state == API_CERT_BAD ? cert->why : "");
        return 401;
    }
    if (authz && c->tokens) {
        const api_token_t *t = NULL;
        if (strncasecmp(authz, "Bearer ", 7) == 0)
            t = api_tokens_find(c->tokens, authz + 7);
        if (!t) {
            snprintf(msg, n, "the bearer token is not known here");
            return 401;
        }
        p->role = t->role;
        p->team = t->team;
        p->name = t->name;
        p->node = t->role == ST_ROLE_AGENT && t->node[0] ? t->node : NULL;
        return 0;
    }
    if (cert && cert->state == API_CERT_BAD) {
        snprintf(msg, n, "%s", cert->why);
        return 401;
    }
    if (cert && cert->state == API_CERT_OK) {
        st_role_t r = role_of(cert->peer.o);
        if (!r) {
            snprintf(msg, n,
                     "client certificate '%s': its O (organization) is '%s', not a role; "
                     "certificates from `arbiter init node|user` say admin, user or agent",
                     cert->peer.cn, cert->peer.o);
            return 403;
        }
        p->role = r;
        p->team = cert->peer.ou[0] ? cert->peer.ou : (r == ST_ROLE_AGENT ? "nodes" : "");
        p->name = cert->peer.cn;
        p->node = r == ST_ROLE_AGENT ? cert->peer.cn : NULL;
        return 0;
    }
    if (c->tokens || c->certs) {
        snprintf(msg, n,
                 "a valid bearer token%s is required (Authorization: Bearer TOKEN; the "
                 "CLI reads ARBITER_TOKEN)",
                 c->certs ? " or client certificate" : "");
        return 401;
    }
    /* no authentication configured: every caller is admin (loopback only) */
    p->role = ST_ROLE_ADMIN;
    p->team = "";
    p->name = "local";
    return 0;
}
