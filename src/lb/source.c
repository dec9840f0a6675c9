/*
 * source.c: where the proxy's backends come from (lb_source_ops_t), and
 * address parsing. Three sources:
 *   static      the --backend list, fixed;
 *   file        a file of HOST:PORT[=WEIGHT] lines, re-read on SIGHUP;
 *   controller  the ready replicas of a service job, followed from the
 *               controller (source_ctl.c; --controller takes one URL or
 *               several, comma-separated, as every client does).
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/failover.h"
#include "lb/proxy_int.h"

int lb_target_parse(const char *spec, lb_target_t *t, arb_err_t *err)
{
    const char *s = spec;
    const char *eq = strrchr(s, '='), *colon;
    size_t n = eq ? (size_t)(eq - s) : strlen(s);

    memset(t, 0, sizeof *t);
    t->weight = 1;
    if (strncmp(s, "https://", 8) == 0) { /* this one over TLS (btls.c) */
        t->tls = true;
        s += 8;
        n -= n >= 8 ? 8 : n;
    }
    if (n == 0 || n >= sizeof t->addr)
        return arb_errf(err, -EINVAL, "backend '%s': give [https://]HOST:PORT[=WEIGHT]", spec);
    memcpy(t->addr, s, n);
    t->addr[n] = '\0';
    colon = strrchr(t->addr, ':');
    if (!colon || colon == t->addr || !colon[1] ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return arb_errf(err, -EINVAL, "backend '%s': no port; give HOST:PORT[=WEIGHT]", spec);
    if (eq) {
        char *end;
        long w = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || *end || w < 1 || w > 1000)
            return arb_errf(err, -EINVAL, "backend '%s': weight '%s': give 1 to 1000", spec,
                            eq + 1);
        t->weight = (uint32_t)w;
    }
    return 0;
}

int px_resolve(const char *addr, bool passive, struct sockaddr_storage *sa, socklen_t *len,
               arb_err_t *err)
{
    char host[256], *port;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
    int rc;

    if (strlen(addr) >= sizeof host)
        return arb_errf(err, -EINVAL, "address '%s' is too long", addr);
    strcpy(host, addr);
    if (host[0] == '[') {
        char *rb = strchr(host, ']');
        if (!rb || rb[1] != ':')
            return arb_errf(err, -EINVAL, "address '%s': give [IPv6]:PORT", addr);
        *rb = '\0';
        port = rb + 2;
        memmove(host, host + 1, strlen(host + 1) + 1);
    } else {
        port = strrchr(host, ':');
        if (!port)
            return arb_errf(err, -EINVAL, "address '%s': give HOST:PORT", addr);
        *port++ = '\0';
    }
    if (!*port || strspn(port, "0123456789") != strlen(port) || atoi(port) > 65535)
        return arb_errf(err, -EINVAL, "address '%s': port '%s' is not 0-65535", addr, port);
    if (!*host && !passive)
        return arb_errf(err, -EINVAL, "address '%s': no host", addr);
    if (passive)
        hints.ai_flags |= AI_PASSIVE;
    rc = getaddrinfo(*host ? host : NULL, port, &hints, &res);
    if (rc != 0 || !res)
        return arb_errf(err, -ENOENT, "address '%s': %s", addr, gai_strerror(rc));
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

void px_addr_text(const struct sockaddr_storage *sa, char *buf, size_t n)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        snprintf(buf, n, "%s:%u", ip, ntohs(s4->sin_port));
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
        snprintf(buf, n, "[%s]:%u", ip, ntohs(s6->sin6_port));
    } else {
        snprintf(buf, n, "unix");
    }
}

/* ---- static ------------------------------------------------------------------ */

typedef struct list_st {
    lb_target_t *t;
    int n;
} list_st_t;

static int list_load(void *st, lb_target_t **out, int *n, arb_err_t *err)
{
    list_st_t *l = st;
    *out = malloc((size_t)(l->n ? l->n : 1) * sizeof **out);
    if (!*out)
        return arb_errf(err, -ENOMEM, "out of memory");
    memcpy(*out, l->t, (size_t)l->n * sizeof **out);
    *n = l->n;
    return 0;
}

static int no_watch(void *st)
{
    return -1;
}

static void list_fini(void *st)
{
    list_st_t *l = st;
    free(l->t);
    free(l);
}

static const lb_source_ops_t static_ops = {"static", list_load, no_watch, list_fini,
                                           NULL,     NULL,      false};

int lb_source_static(lb_source_t *s, const lb_target_t *t, int n, arb_err_t *err)
{
    list_st_t *l = calloc(1, sizeof *l);
    if (l)
        l->t = malloc((size_t)(n ? n : 1) * sizeof *t);
    if (!l || !l->t) {
        free(l);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    memcpy(l->t, t, (size_t)n * sizeof *t);
    l->n = n;
    s->ops = &static_ops;
    s->st = l;
    return 0;
}

/* ---- file ---------------------------------------------------------------------- */

static int file_load(void *st, lb_target_t **out, int *n, arb_err_t *err)
{
    const char *path = st;
    FILE *f = fopen(path, "r");
    char line[512];
    lb_target_t *t = NULL;
    int cnt = 0, cap = 0, lineno = 0, rc = 0;

    if (!f)
        return arb_errf(err, -errno, "backends file %s: %s", path, strerror(errno));
    while (fgets(line, sizeof line, f)) {
        char *p = line, *e;
        lineno++;
        while (*p == ' ' || *p == '\t')
            p++;
        e = p + strcspn(p, "#\r\n");
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        *e = '\0';
        if (!*p)
            continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            lb_target_t *nt = realloc(t, (size_t)cap * sizeof *nt);
            if (!nt) {
                rc = arb_errf(err, -ENOMEM, "out of memory");
                break;
            }
            t = nt;
        }
        rc = lb_target_parse(p, &t[cnt], err);
        if (rc < 0) {
            arb_err_prefix(err, "%s:%d: ", path, lineno);
            break;
        }
        cnt++;
    }
    fclose(f);
    if (rc < 0) {
        free(t);
        return rc;
    }
    *out = t;
    *n = cnt;
    return 0;
}

static void file_fini(void *st)
{
    free(st);
}

static const lb_source_ops_t file_ops = {"file", file_load, no_watch, file_fini, NULL, NULL, false};

int lb_source_file(lb_source_t *s, const char *path, arb_err_t *err)
{
    char *p = strdup(path);
    if (!p)
        return arb_errf(err, -ENOMEM, "out of memory");
    s->ops = &file_ops;
    s->st = p;
    return 0;
}

void lb_source_fini(lb_source_t *s)
{
    if (s->ops && s->ops->fini)
        s->ops->fini(s->st);
    memset(s, 0, sizeof *s);
}
