/*
 * auth.c: bearer tokens for the API, from a tokens file:
 *
 *   # TOKEN                ROLE   TEAM     [NAME]
 *   3f9c2a...              admin  ops      alice
 *   b71e04...              user   team-a   bob
 *   5d8e11...              agent  nodes    node-agent
 *
 * admin: everything. user: submit to the team's queue, see and cancel the
 * team's jobs, read nodes, queues and events. agent: report nodes and fetch
 * assignments. The file should be readable by the controller only; a
 * group- or world-readable file is accepted with a warning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"

const char *api_role_name(st_role_t r)
{
    return r == ST_ROLE_ADMIN ? "admin" : r == ST_ROLE_USER ? "user" : "agent";
}

void api_tokens_free(api_tokens_t *t)
{
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

int api_tokens_load(const char *path, api_tokens_t *t, arb_err_t *err)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int lineno = 0, rc = 0;
    api_tokens_t n = {0};
    struct stat sb;

    if (!f)
        return arb_errf(err, -errno, "tokens file '%s': %s", path, strerror(errno));
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077))
        fprintf(stderr,
                "arbiter: warning: tokens file '%s' is readable by others (mode %03o); "
                "chmod 600 it\n",
                path, (unsigned)(sb.st_mode & 0777));
    while (rc == 0 && fgets(line, sizeof line, f)) {
        char tok[256], role[32], team[256], name[256];
        char *hash = strchr(line, '#');
        lineno++;
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
        if (strlen(tok) < 16 || strlen(tok) >= sizeof n.v->token) {
            rc = arb_errf(err, -EINVAL, "%s:%d: a token must be 16..127 characters", path, lineno);
            break;
        }
        if (strlen(team) >= ST_NAME_MAX || strlen(name) >= ST_NAME_MAX) {
            rc = arb_errf(err, -EINVAL, "%s:%d: team and name must be under %d bytes", path, lineno,
                          ST_NAME_MAX);
            break;
        }
        st_role_t r = strcmp(role, "admin") == 0   ? ST_ROLE_ADMIN
                      : strcmp(role, "user") == 0  ? ST_ROLE_USER
                      : strcmp(role, "agent") == 0 ? ST_ROLE_AGENT
                                                   : 0;
        if (!r) {
            rc = arb_errf(err, -EINVAL, "%s:%d: role '%s'; use admin, user or agent", path, lineno,
                          role);
            break;
        }
        for (int i = 0; i < n.n; i++)
            if (strcmp(n.v[i].token, tok) == 0)
                rc = arb_errf(err, -EINVAL, "%s:%d: this token is already on line of another entry",
                              path, lineno);
        if (rc)
            break;
        api_token_t *v = realloc(n.v, (size_t)(n.n + 1) * sizeof *v);
        if (!v) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
            break;
        }
        n.v = v;
        memset(&n.v[n.n], 0, sizeof n.v[n.n]);
        snprintf(n.v[n.n].token, sizeof n.v[n.n].token, "%.127s", tok);
        n.v[n.n].role = r;
        snprintf(n.v[n.n].team, sizeof n.v[n.n].team, "%.63s", team);
        snprintf(n.v[n.n].name, sizeof n.v[n.n].name, "%.63s", name[0] ? name : team);
        n.n++;
    }
    fclose(f);
    if (rc == 0 && n.n == 0)
        rc = arb_errf(err, -EINVAL, "tokens file '%s' holds no token", path);
    if (rc < 0) {
        api_tokens_free(&n);
        return rc;
    }
    *t = n;
    return 0;
}

const api_token_t *api_tokens_find(const api_tokens_t *t, const char *token)
{
    const api_token_t *hit = NULL;
    size_t n = strlen(token);

    for (int i = 0; i < t->n; i++) {
        const char *a = t->v[i].token;
        size_t m = strlen(a);
        unsigned char diff = (unsigned char)(m != n);
        for (size_t k = 0; k < n && k < m; k++)
            diff |= (unsigned char)(a[k] ^ token[k]);
        if (!diff)
            hit = &t->v[i];
    }
    return hit;
}
