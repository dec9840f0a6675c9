/*
 * probe.c: the controller's health prober for service replicas. A thread
 * that every 500 ms takes, under the state lock, the list of running
 * replicas (address and health path), probes them without the lock (HTTP
 * GET, 1 s limit each; 2xx is healthy), and hands each verdict back to
 * service.c (st_service_probed) under the lock. A replica with no health
 * path is ready once its task runs. Two failures in a row make a replica
 * unready; one success makes it ready.
 *
 * Why the controller probes: one place, no change to the agents' report
 * protocol. Balancers keep their own active checks as the second line.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "state/service.h"
#include "state/state_int.h"

#define PROBE_EVERY_MS 500
#define PROBE_LIMIT_MS 1000

typedef struct probe {
    uint64_t parent, child;
    int index;
    bool running;
    char addr[80], path[128];
} probe_t;

static int64_t ms_left(int64_t deadline)
{
    int64_t l = (deadline - st_mono_ns()) / 1000000;
    return l > 0 ? l : 0;
}

/* GET path from addr ("host:port"): true on a 2xx answer within the limit. */
static bool http_ok(const char *addr, const char *path)
{
    char host[80], *colon, req[256], buf[64];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int64_t deadline = st_mono_ns() + PROBE_LIMIT_MS * 1000000LL;
    bool ok = false;
    size_t got = 0;
    int fd = -1;

    snprintf(host, sizeof host, "%s", addr);
    colon = strrchr(host, ':');
    if (!colon)
        return false;
    *colon = '\0';
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || !res)
        return false;
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto out;
    if (connect(fd, res->ai_addr, res->ai_addrlen) < 0 && errno != EINPROGRESS)
        goto out;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, (int)ms_left(deadline)) != 1)
        goto out;
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr)
        goto out;
    int n =
        snprintf(req, sizeof req,
                 "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: arbiter-probe\r\n\r\n", path, addr);
    if (n <= 0 || (size_t)n >= sizeof req || send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        goto out;
    while (got < 12) {
        p.events = POLLIN;
        if (poll(&p, 1, (int)ms_left(deadline)) != 1)
            goto out;
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0)
            goto out;
        got += (size_t)r;
    }
    buf[got] = '\0';
    ok = strncmp(buf, "HTTP/1.", 7) == 0 && buf[9] == '2';
out:
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return ok;
}

static void *probe_main(void *arg)
{
    st_t *s = arg;
    probe_t *v = NULL;
    int n = 0, cap = 0;

    pthread_mutex_lock(&s->mu);
    while (!s->probe_stop) {
        n = 0;
        /* services only: with none ever attached, no walk of the backlog */
        for (int i = 0; s->nsvc_ever && i < s->nactive; i++) {
            st_job_t *p = s->active[i];
            if (!p->svc)
                continue;
            for (int k = 0; k < p->svc->nrep; k++) {
                st_replica_t *r = &p->svc->rep[k];
                st_job_t *c = r->job ? st_job_find(s, r->job) : NULL;
                if (!c || !r->addr[0] || r->draining ||
                    (c->j->state != ARB_JOB_RUNNING && c->j->state != ARB_JOB_PLACED))
                    continue;
                if (n == cap) {
                    int nc = cap ? cap * 2 : 32;
                    probe_t *nv = realloc(v, (size_t)nc * sizeof *nv);
                    if (!nv)
                        break;
                    v = nv;
                    cap = nc;
                }
                probe_t *e = &v[n++];
                e->parent = p->id;
                e->child = c->id;
                e->index = k;
                e->running = c->tasks[0].state == TK_RUNNING;
                snprintf(e->addr, sizeof e->addr, "%s", r->addr);
                snprintf(e->path, sizeof e->path, "%s", p->svc->conf.health);
            }
        }
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++) {
            bool ok = v[i].running && (!v[i].path[0] || http_ok(v[i].addr, v[i].path));
            pthread_mutex_lock(&s->mu);
            st_service_probed(s, v[i].parent, v[i].index, v[i].child, ok);
            pthread_mutex_unlock(&s->mu);
        }
        /* Sleep in short steps (not on s->kick: a signal meant for the
         * scheduler thread must never wake this one instead). */
        for (int k = 0; k < PROBE_EVERY_MS / 50; k++) {
            struct timespec ts = {0, 50 * 1000000L};
            pthread_mutex_lock(&s->mu);
            bool stop = s->probe_stop;
            pthread_mutex_unlock(&s->mu);
            if (stop)
                break;
            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    free(v);
    return NULL;
}

int st_probe_start(st_t *s)
{
    s->probe_stop = false;
    if (pthread_create(&s->probe_thr, NULL, probe_main, s) != 0)
        return -EAGAIN;
    s->probe_running = true;
    return 0;
}

void st_probe_stop(st_t *s)
{
    if (!s->probe_running)
        return;
    pthread_mutex_lock(&s->mu);
    s->probe_stop = true;
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->probe_thr, NULL);
    s->probe_running = false;
}
