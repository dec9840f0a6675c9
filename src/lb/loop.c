/*
 * loop.c: the event loops of `arbiter lb`: listeners, signals, the backend
 * source's watch, timers, the once-a-second notes to the source, and the
 * loop itself (epoll, edge-triggered); sessions are proxy.c's, backends
 * backend.c's. See proxy.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "lb/proxy_int.h"
#include "util/log.h"
#include "util/mtime.h"

void lb_proxy_conf_default(lb_proxy_conf_t *c)
{
    memset(c, 0, sizeof *c);
    lb_opts_default(&c->opts);
    c->policy = &lb_rr_ops;
    c->health_interval_ms = 2000;
    c->health_timeout_ms = 1000;
    c->rise = 2;
    c->fall = 3;
    c->connect_timeout_ms = 2000;
    c->client_timeout_ms = 60000;
    c->server_timeout_ms = 60000;
    c->pool_idle_ms = 10000;
    c->eject_after = 3;
    c->eject_base_ms = 1000;
    c->eject_max_ms = 30000;
    c->slow_start_ms = 5000;
    c->retries = 2;
    c->max_conns = 10000;
    c->body_max = 1 << 20;
    c->block_bytes = 64;
    c->max_blocks = 1024;
    c->scrape_interval_ms = 250;
    c->tenant_header = "X-Tenant";
    c->max_queue = 256;
    c->queue_timeout_ms = 30000;
}

void px_clock_now(px_t *px)
{
    px->now_ns = arb_mono_ns();
    px->now_ms = px->now_ns / 1000000;
}

/* ---- listeners, signals, the loop ------------------------------------------- */

static void do_accept_on(px_t *px, int lfd, bool admin)
{
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int one = 1, fd;

        if (!admin && px->nclients >= px->c->max_conns) {
            px->accept_paused = true;
            return;
        }
        fd = accept4(lfd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                px->accept_paused = !admin; /* until a session ends and frees a descriptor */
                px_own_failure(px, -errno, "accepting a client");
            }
            return;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (!admin)
            px->accepted++;
        px_sess_new(px, fd, admin, &sa);
    }
}

void px_accept(px_t *px)
{
    if (px->lfd >= 0)
        do_accept_on(px, px->lfd, false);
}

/* reuseport: several loops listen on the one port (SO_REUSEPORT; the
 * kernel spreads the connections over them). */
static int listen_on(const char *addr, bool reuseport, arb_err_t *err)
{
    struct sockaddr_storage sa;
    socklen_t len;
    int fd, one = 1, rc;

    rc = px_resolve(addr, true, &sa, &len, err);
    if (rc < 0)
        return rc;
    fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return arb_errf(err, -errno, "socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 1024) < 0) {
        rc = -errno;
        close(fd);
        return arb_errf(err, rc, "listen on %s: %s; is the port in use?", addr, strerror(-rc));
    }
    return fd;
}

static void bound_text(int fd, char *buf, size_t n)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        snprintf(buf, n, "?");
    else
        px_addr_text(&sa, buf, n);
}

static void stop(px_t *px)
{
    if (px->stopping)
        return;
    px->stopping = true;
    px->stop_deadline = px->now_ms + 5000;
    if (px->hub && px->id == 0)
        px_hub_stop(px->hub); /* the workers drain too */
    if (px->lfd >= 0) {
        close(px->lfd);
        px->lfd = -1;
    }
    if (px->afd >= 0) {
        close(px->afd);
        px->afd = -1;
    }
    /* queued requests will not be routed now: tell them */
    while (px->t_queue.head) {
        px_sess_t *q = px->t_queue.head->owner;
        px_sess_reply_text(px, q, 503, "Service Unavailable", "the balancer is stopping");
        px_sess_run(px, q);
    }
    /* idle keep-alive clients have nothing to drain: close them now */
    for (px_tnode_t *n = px->t_client.head, *next; n; n = next) {
        px_sess_t *s = n->owner;
        next = n->next;
        if (s->state == S_HEAD && s->in_len == 0)
            px_sess_close(px, s);
    }
    if (px->id == 0)
        arb_log(ARB_LOG_INFO, NULL, "stopping; draining %d connections", px->nclients);
}

static void on_signal(px_t *px)
{
    struct signalfd_siginfo si;

    while (read(px->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            arb_err_t e;
            if (px_backends_load(px, &e) < 0)
                arb_log(ARB_LOG_WARN, NULL, "reload failed, keeping the old backends: %s", e.msg);
            else
                arb_log(ARB_LOG_INFO, NULL, "reloaded, %d backends", px->npeers);
        } else {
            stop(px);
        }
    }
}

/* The source's set changed: read its fd empty, reload gracefully. */
static void on_watch(px_t *px, int fd)
{
    char buf[64];
    arb_err_t e;

    while (read(fd, buf, sizeof buf) > 0)
        ;
    if (px->hub && px->id != 0 && atomic_load(&px->hub->stop)) {
        stop(px); /* a worker: loop 0 stops */
        return;
    }
    if (px->stopping)
        return;
    if (px_backends_load(px, &e) < 0)
        arb_log(ARB_LOG_WARN, NULL, "reload failed, keeping the old backends: %s", e.msg);
    else if (px->id == 0)
        arb_log(ARB_LOG_INFO, NULL, "backends changed, %d backends", px->npeers);
}

/* Tell the source this balancer's in-flight count per backend, removed
 * ones still draining included (a replica being scaled in waits for them). */
static void note_load(px_t *px)
{
    int queued = px->nqueued;
    if (px->hub) { /* every loop's queue */
        px_snap_t t;
        px_hub_sync(px);
        px_hub_totals(px, &t);
        queued = t.nqueued;
    }
    const char **addr = calloc((size_t)px->nbes + 1, sizeof *addr);
    uint32_t *inf = calloc((size_t)px->nbes + 1, sizeof *inf);
    double *q = calloc((size_t)px->nbes + 1, sizeof *q);
    int n = 0;

    for (int i = 0; addr && inf && q && i < px->nbes; i++) {
        if (px->bes[i]->removed && px->bes[i]->inflight == 0)
            continue;
        addr[n] = px->bes[i]->name;
        /* a queue seen on a response more than 2 s ago says nothing now; the
         * node's queue from the agent is the controller's own already */
        q[n] = px->bes[i]->hdr_queue_at_ms && px->now_ms - px->bes[i]->hdr_queue_at_ms <= 2000
                   ? px->bes[i]->hdr_queue
                   : 0;
        /* the engine's own queue, when scraped lately, and a share of the
         * requests this balancer holds because every replica is saturated */
        const lb_engine_t *e = &px->bes[i]->eng;
        if (e->at_ms && px->now_ms - e->at_ms <= 2000 && e->waiting > q[n])
            q[n] = e->waiting;
        if (queued > 0 && px->npeers > 0 && !px->bes[i]->removed)
            q[n] += (double)queued / px->npeers;
        inf[n++] = px->bes[i]->sh ? atomic_load(&px->bes[i]->sh->inflight) : px->bes[i]->inflight;
    }
    if (addr && inf && q)
        px->c->source.ops->note(px->c->source.st, addr, inf, q, n);
    free(addr);
    free(inf);
    free(q);
}

/* The replicas' agent reports from the source, onto the backends of the
 * same address (removed ones included: they may still be draining). */
static void agent_loads(px_t *px)
{
    lb_agent_load_t *v = NULL;
    int n = 0;

    if (px->c->source.ops->reports(px->c->source.st, &v, &n) < 0)
        return;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < px->nbes; i++)
            if (strcmp(px->bes[i]->name, v[k].addr) == 0)
                px_backend_agent_load(px, px->bes[i], &v[k]);
    free(v);
}

static int64_t next_wake(px_t *px)
{
    int64_t t = px->now_ms + 1000;
    px_tlist_t *ls[7] = {&px->t_client, &px->t_connect, &px->t_server, &px->t_pool,
                         &px->t_check,  &px->t_scrape,  &px->t_queue};
    for (int i = 0; i < 7; i++)
        if (ls[i]->head && ls[i]->head->at < t)
            t = ls[i]->head->at;
    int64_t c = px_checks_next(px);
    if (c > 0 && c < t)
        t = c;
    c = px_scrapes_next(px);
    if (c > 0 && c < t)
        t = c;
    if (px->nqueued > 0 && px->next_pump < t)
        t = px->next_pump;
    if (px->hub && px->pub_dirty && px->next_pub < t)
        t = px->next_pub;
    return t;
}

static void expire(px_t *px)
{
    px_tnode_t *n;

    while ((n = px->t_client.head) && n->at <= px->now_ms) {
        px_timer_del(n);
        px_sess_close(px, n->owner);
    }
    while ((n = px->t_connect.head) && n->at <= px->now_ms) {
        px_sess_t *s = n->owner;
        px_timer_del(n);
        px_sess_backend_failed(px, s, F_CONNECT_TIMEOUT);
        if (s->kind != PX_DEAD)
            px_sess_run(px, s);
    }
    while ((n = px->t_server.head) && n->at <= px->now_ms) {
        px_sess_t *s = n->owner;
        px_timer_del(n);
        if (s->resp_started) {
            s->bc->be->st.timeouts++;
            px_sess_close(px, s);
        } else {
            px_sess_backend_failed(px, s, F_SERVER_TIMEOUT);
            if (s->kind != PX_DEAD)
                px_sess_run(px, s);
        }
    }
    while ((n = px->t_pool.head) && n->at <= px->now_ms) {
        px_timer_del(n);
        px_bconn_close(px, n->owner);
    }
    while ((n = px->t_check.head) && n->at <= px->now_ms) {
        px_timer_del(n);
        px_check_timeout(px, n->owner);
    }
    while ((n = px->t_scrape.head) && n->at <= px->now_ms) {
        px_timer_del(n);
        px_scrape_timeout(px, n->owner);
    }
    while ((n = px->t_queue.head) && n->at <= px->now_ms) {
        px_timer_del(n);
        px_admit_expired(px, n->owner);
    }
}

static void bury(px_t *px)
{
    px_backends_sweep(px);
    while (px->dead_s) {
        px_sess_t *s = px->dead_s;
        px->dead_s = s->next;
        free(s);
    }
    while (px->dead_b) {
        px_bconn_t *b = px->dead_b;
        px->dead_b = b->next;
        free(b);
    }
    while (px->dead_c) {
        px_check_t *c = px->dead_c;
        px->dead_c = c->next;
        free(c);
    }
    while (px->dead_sc) {
        px_scrape_t *c = px->dead_sc;
        px->dead_sc = c->next;
        arb_buf_free(&c->buf);
        free(c);
    }
}

static int write_ready(px_t *px, arb_err_t *err)
{
    char l[128], a[128] = "";
    FILE *f;

    bound_text(px->lfd, l, sizeof l);
    if (px->afd >= 0)
        bound_text(px->afd, a, sizeof a);
    arb_log(ARB_LOG_INFO, NULL, "listening on %s%s%s, policy %s, %d backends, %d loop%s", l,
            px->afd >= 0 ? ", admin on " : "", a, px->c->policy->name, px->npeers,
            px->hub ? px->hub->nloops : 1, px->hub ? "s" : "");
    if (!px->c->ready_file)
        return 0;
    f = fopen(px->c->ready_file, "w");
    if (!f)
        return arb_errf(err, -errno, "--ready-file %s: %s", px->c->ready_file, strerror(errno));
    fprintf(f, "listen %s\n", l);
    if (px->afd >= 0)
        fprintf(f, "admin %s\n", a);
    fclose(f);
    return 0;
}

/* ---- one loop: set up, run, tear down ------------------------------------------ */

/* Set up loop `id` (0: the main one: signals, admin, the source; a worker
 * listens on loop 0's bound address). */
static int px_setup(px_t *px, const lb_proxy_conf_t *c, px_hub_t *hub, int id, const char *bound,
                    arb_err_t *err)
{
    int rc;

    px->c = c;
    px->hub = hub;
    px->id = id;
    px->ep = px->lfd = px->afd = px->sfd = -1;
    px_clock_now(px);
    px->rng = c->seed ? c->seed + (uint64_t)id * 0x9e3779b97f4a7c15ULL
                      : (uint64_t)px->now_ns ^ ((uint64_t)getpid() << 32) ^ (uint64_t)id << 48;
    px->want.hdr = c->hash_header;
    px->want.cookie = c->hash_cookie;
    if (c->openai) {
        px->want.tenant = c->tenant_header;
        px->want.auth = true;
    }
    px->t_client.len_ms = c->client_timeout_ms;
    px->t_connect.len_ms = c->connect_timeout_ms;
    px->t_server.len_ms = c->server_timeout_ms;
    px->t_pool.len_ms = c->pool_idle_ms;
    px->t_check.len_ms = c->health_timeout_ms;
    px->t_scrape.len_ms = c->scrape_interval_ms > 2000 ? c->scrape_interval_ms : 2000;
    px->t_queue.len_ms = c->queue_timeout_ms;
    if ((rc = px_tls_setup(px, c, err)) < 0)
        return rc;
    lb_opts_t opts = c->opts;
    /* inference policies leave out a replica where a new request would
     * answer late: past 3/4 of the server timeout (a margin for the
     * estimate), or with a TTFT SLO a wait past it (lb_late) */
    opts.late_ms = 0.75 * c->server_timeout_ms;
    opts.slo_ms = c->ttft_slo_ms;
    px->svc_on = c->policy == &lb_kv_ops || c->policy == &lb_inference_ops;
    if (c->policy == &lb_prefix_ops || c->policy == &lb_inference_ops) {
        /* one prefix index, whatever happens to the peer set, for every loop */
        if (hub && hub->pindex) {
            opts.pindex = hub->pindex;
        } else {
            px->pindex = lb_pindex_new(opts.prefix_entries);
            if (!px->pindex)
                return arb_errf(err, -ENOMEM, "lb: out of memory for the prefix index");
            opts.pindex = px->pindex;
            if (hub)
                hub->pindex = px->pindex; /* loop 0 owns it */
        }
    }
    lb_policy_init(&px->pol, c->policy, &opts);
    if (c->access_log) {
        /* each loop its own stream on the file (O_APPEND: whole writes) */
        px->log = strcmp(c->access_log, "-") == 0 ? (hub ? fdopen(dup(STDOUT_FILENO), "a") : stdout)
                                                  : fopen(c->access_log, "a");
        if (!px->log)
            return arb_errf(err, -errno, "--access-log %s: %s", c->access_log, strerror(errno));
        setvbuf(px->log, NULL, _IOFBF, 1 << 16);
    }
    if (id != 0)
        px_hub_source(hub, id, &px->hsrc);
    rc = px_backends_load(px, err);
    if (rc < 0)
        return rc;
    px->ep = epoll_create1(EPOLL_CLOEXEC);
    if (px->ep < 0)
        return arb_errf(err, -errno, "lb: epoll: %s", strerror(errno));
    if (id == 0) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        px->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (px->sfd < 0)
            return arb_errf(err, -errno, "lb: signalfd: %s", strerror(errno));
    }
    rc = listen_on(id == 0 ? c->listen : bound, hub != NULL, err);
    if (rc < 0)
        return rc;
    px->lfd = rc;
    if (c->admin && id == 0) {
        rc = listen_on(c->admin, false, err);
        if (rc < 0) {
            arb_err_prefix(err, "--admin: ");
            return rc;
        }
        px->afd = rc;
    }
    static px_kind_t k_listen = PX_LISTEN, k_admin = PX_ADMIN_LISTEN, k_sig = PX_SIGNAL;
    static px_kind_t k_watch = PX_WATCH;
    struct epoll_event e1 = {.events = EPOLLIN | EPOLLET, .data.ptr = &k_listen};
    struct epoll_event e2 = {.events = EPOLLIN | EPOLLET, .data.ptr = &k_admin};
    struct epoll_event e3 = {.events = EPOLLIN, .data.ptr = &k_sig};
    struct epoll_event e4 = {.events = EPOLLIN, .data.ptr = &k_watch};
    const lb_source_t *src = id == 0 ? &c->source : &px->hsrc;
    /* a source that follows changes (the controller; a worker's hub): reload on its fd */
    int wfd = src->ops && src->ops->watch_fd ? src->ops->watch_fd(src->st) : -1;
    if (epoll_ctl(px->ep, EPOLL_CTL_ADD, px->lfd, &e1) < 0 ||
        (px->afd >= 0 && epoll_ctl(px->ep, EPOLL_CTL_ADD, px->afd, &e2) < 0) ||
        (px->sfd >= 0 && epoll_ctl(px->ep, EPOLL_CTL_ADD, px->sfd, &e3) < 0) ||
        (wfd >= 0 && epoll_ctl(px->ep, EPOLL_CTL_ADD, wfd, &e4) < 0))
        return arb_errf(err, -errno, "lb: epoll_ctl: %s", strerror(errno));
    return 0;
}

static const lb_source_t *px_source(const px_t *px)
{
    return px->id == 0 ? &px->c->source : &px->hsrc;
}

static int px_loop(px_t *px, arb_err_t *err)
{
    const lb_source_t *src = px_source(px);
    int wfd = src->ops->watch_fd ? src->ops->watch_fd(src->st) : -1;
    struct epoll_event evs[256];
    int64_t next_note = 0, next_reports = 0;
    bool main = px->id == 0;
    int rc = 0;

    px_checks_run(px);
    while (!(px->stopping && (px->nsess == 0 || px->now_ms >= px->stop_deadline))) {
        int64_t wake = next_wake(px);
        int timeout = wake > px->now_ms ? (int)(wake - px->now_ms) : 0;
        int n = epoll_wait(px->ep, evs, 256, timeout);
        int64_t before = px->now_ms;

        if (n < 0 && errno != EINTR) {
            rc = arb_errf(err, -errno, "lb: epoll_wait: %s", strerror(errno));
            break;
        }
        px_clock_now(px);
        if (px->now_ms != before)
            px_backends_refresh(px);
        if (n > 0)
            px->pub_dirty = true;
        if (px->hub && px->pub_dirty && px->now_ms >= px->next_pub) {
            /* at most every 100 ms, and 100 ms after the last event at the latest */
            px->next_pub = px->now_ms + 100;
            px->pub_dirty = false;
            px_hub_sync(px);
        }
        for (int i = 0; i < n; i++) {
            px_kind_t *k = evs[i].data.ptr;
            uint32_t ev = evs[i].events;
            switch (*k) {
            case PX_LISTEN:
                px_accept(px);
                break;
            case PX_ADMIN_LISTEN:
                if (px->afd >= 0)
                    do_accept_on(px, px->afd, true);
                break;
            case PX_SIGNAL:
                on_signal(px);
                break;
            case PX_CLIENT: {
                px_sess_t *s = (px_sess_t *)k;
                if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))
                    s->rd = true;
                if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                    s->wr = true;
                if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                    s->hup = true;
                px_sess_run(px, s);
                break;
            }
            case PX_BACKEND:
                px_bconn_event(px, (px_bconn_t *)k, ev);
                break;
            case PX_CHECK:
                px_check_event(px, (px_check_t *)k, ev);
                break;
            case PX_SCRAPE:
                px_scrape_event(px, (px_scrape_t *)k, ev);
                break;
            case PX_WAKE:
                break;
            case PX_WATCH:
                on_watch(px, wfd);
                break;
            case PX_DEAD:
                break;
            }
        }
        if (main && src->ops->note && px->now_ms >= next_note) {
            next_note = px->now_ms + 1000;
            note_load(px);
        }
        if (main && src->ops->reports && px->now_ms >= next_reports) {
            next_reports = px->now_ms + 1000;
            agent_loads(px);
        }
        expire(px);
        if (main) { /* loop 0 checks and scrapes for all (hub.c) */
            px_checks_run(px);
            px_scrapes_run(px);
        }
        if (px->nqueued > 0 && px->now_ms >= px->next_pump) {
            /* saturation also ends with time (reports age): look again */
            px->next_pump = px->now_ms + 20;
            px_admit_pump(px);
        }
        bury(px);
        if (px->log_dirty) {
            fflush(px->log);
            px->log_dirty = false;
        }
    }
    return rc > 0 ? 0 : rc;
}

static void px_teardown(px_t *px)
{
    if (px->ep >= 0) {
        /* close what is left (drain deadline passed) */
        for (int pass = 0; pass < 2; pass++) {
            px_tlist_t *ls[3] = {&px->t_client, &px->t_connect, &px->t_server};
            for (int i = 0; i < 3; i++)
                while (ls[i]->head)
                    px_sess_close(px, ls[i]->head->owner);
        }
        while (px->t_check.head) {
            px_tnode_t *n = px->t_check.head;
            px_timer_del(n);
            px_check_timeout(px, n->owner);
        }
        while (px->t_scrape.head) {
            px_tnode_t *n = px->t_scrape.head;
            px_timer_del(n);
            px_scrape_timeout(px, n->owner);
        }
        while (px->t_queue.head)
            px_sess_close(px, px->t_queue.head->owner);
        bury(px);
    }
    px_backends_free(px);
    bury(px);
    px_tls_teardown(px);
    lb_policy_fini(&px->pol);
    if (px->hsrc.ops)
        px->hsrc.ops->fini(px->hsrc.st);
    for (int i = 0; i < px->ntenants; i++)
        free(px->tenants[i]);
    free(px->tenants);
    if (px->lfd >= 0)
        close(px->lfd);
    if (px->afd >= 0)
        close(px->afd);
    if (px->sfd >= 0)
        close(px->sfd);
    if (px->ep >= 0)
        close(px->ep);
    if (px->log) {
        fflush(px->log);
        if (px->log != stdout)
            fclose(px->log);
    }
    for (int i = 0; i < px->nfree; i++)
        free(px->freebufs[i]);
    free(px->freebufs);
}

/* ---- the run: one loop, or N sharing a hub --------------------------------------- */

typedef struct worker {
    px_t *px;
    arb_err_t err;
    int rc;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    w->rc = px_loop(w->px, &w->err);
    return NULL;
}

int lb_proxy_run(const lb_proxy_conf_t *c, arb_err_t *err)
{
    int n = c->threads > 1 ? c->threads : 1, rc, started = 0;
    px_t *px = calloc((size_t)n, sizeof *px);
    worker_t *w = calloc((size_t)n, sizeof *w);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    px_hub_t *hub = NULL;
    sigset_t mask, old;
    char bound[128] = "";

    /* the signals go to loop 0's signalfd: blocked in every thread */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, &old);
    if (!px || !w || !th) {
        rc = arb_errf(err, -ENOMEM, "lb: out of memory");
        goto out;
    }
    if (n > PX_MAX_LOOPS) {
        rc = arb_errf(err, -EINVAL, "--threads %d: at most %d", n, PX_MAX_LOOPS);
        goto out;
    }
    if (n > 1 && (rc = px_hub_new(&hub, n, err)) < 0)
        goto out;
    for (int i = 0; i < n; i++) {
        px[i].ep = px[i].lfd = px[i].afd = px[i].sfd = -1;
        if (hub)
            hub->loops[i] = &px[i];
    }
    rc = px_setup(&px[0], c, hub, 0, NULL, err);
    if (rc < 0)
        goto out;
    bound_text(px[0].lfd, bound, sizeof bound); /* port 0 picked one: the workers take it too */
    for (int i = 1; i < n; i++) {
        rc = px_setup(&px[i], c, hub, i, bound, err);
        if (rc < 0)
            goto out;
    }
    rc = write_ready(&px[0], err);
    if (rc < 0)
        goto out;
    for (int i = 1; i < n; i++) {
        w[i].px = &px[i];
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) {
            rc = arb_errf(err, -EAGAIN, "lb: cannot start event loop %d", i);
            goto out;
        }
        started = i;
    }
    rc = px_loop(&px[0], err);
out:
    if (hub)
        px_hub_stop(hub);
    for (int i = 1; i <= started; i++) {
        pthread_join(th[i], NULL);
        if (rc == 0 && w[i].rc < 0) {
            rc = w[i].rc;
            *err = w[i].err;
        }
    }
    for (int i = n - 1; px && i >= 0; i--)
        px_teardown(&px[i]); /* loop 0 last: it owns the prefix index */
    if (px)
        lb_pindex_free(px[0].pindex);
    px_hub_free(hub);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(px);
    free(w);
    free(th);
    return rc;
}
