/*
 * scrape.c: the model servers' own signals. Every scrape_interval_ms the
 * proxy GETs each backend's metrics path (/metrics) on a connection of its
 * own (Connection: close, read to the end, 1 MiB at most), parses it with
 * the table in prom.h (vLLM, SGLang, llama.cpp names) and stores what it
 * says on the backend (px_backend_t.eng) and the policy's peer: requests
 * waiting and running, KV-cache use, LoRA adapters. Each result carries its
 * time (eng.at_ms, this process's monotonic clock) and this balancer's
 * in-flight count at that moment (eng.inflight_at), so the policies age it
 * as they age the agents' reports (lb_decay: half-life, then ignored past
 * max_age) and correct it for what was sent since (lb_engine_load).
 *
 * A backend whose metrics carry none of the table's names, or that fails to
 * answer, is scraped 10x less often and keeps no signals (the policies then
 * judge it on in-flight counts alone). Scrapes are as non-blocking as the
 * rest of the loop: connect, send, read on epoll events, a timeout list;
 * to a TLS backend (btls.c) the handshake runs between connect and send.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "lb/prom.h"
#include "lb/proxy_int.h"

#define SC_MAX (1u << 20)

static void scrape_done(px_t *px, px_scrape_t *sc, bool ok)
{
    px_backend_t *b = sc->be;
    const lb_proxy_conf_t *c = px->c;
    lb_engine_t e = {0};
    prom_result_t res = {0};

    px_timer_del(&sc->t);
    px_btls_end(&sc->tls);
    close(sc->fd);
    sc->kind = PX_DEAD;
    sc->next = px->dead_sc;
    px->dead_sc = sc;
    b->sc = NULL;
    if (ok) {
        http_head_t h;
        int rc = http_parse_response(sc->buf.p, sc->buf.len, &h);
        ok = rc > 0 && h.status == 200;
        if (ok) {
            char *body = sc->buf.p + rc;
            size_t n = sc->buf.len - (size_t)rc;
            if (h.chunked)
                n = http_dechunk(body, n, body); /* in place: data never outruns framing */
            ok = prom_engine_parse(body, n, &e, &res) > 0;
        }
    }
    if (ok) {
        e.at_ms = px->now_ms;
        /* in flight from this balancer at that moment: every loop's */
        e.inflight_at = b->sh ? atomic_load(&b->sh->inflight) : b->inflight;
        b->eng = e;
        snprintf(b->engine, sizeof b->engine, "%s", res.engine);
        if (b->peer >= 0)
            px->peers[b->peer].eng = e;
        b->scrapes_ok++;
        if (b->sh) { /* for the other loops (hub.c copies it into theirs) */
            pthread_mutex_lock(&px->hub->mu);
            b->sh->eng = e;
            memcpy(b->sh->engine, b->engine, sizeof b->engine);
            b->sh->scrapes_ok = b->scrapes_ok;
            b->sh->scrapes_bad = b->scrapes_bad;
            atomic_fetch_add(&b->sh->eng_ver, 1);
            pthread_mutex_unlock(&px->hub->mu);
        }
        b->sc_next = px->now_ms + c->scrape_interval_ms;
        if (px->nqueued > 0)
            px_admit_pump(px); /* a replica may have left saturation */
    } else {
        b->scrapes_bad++;
        b->sc_next = px->now_ms + 10 * (int64_t)c->scrape_interval_ms;
    }
    px_backend_unref(px, b);
}

static void scrape_start(px_t *px, px_backend_t *b)
{
    px_scrape_t *sc = calloc(1, sizeof *sc);
    int fd;

    b->sc_next = px->now_ms + px->c->scrape_interval_ms;
    if (!sc)
        return;
    sc->buf.max = SC_MAX;
    arb_buf_printf(&sc->buf,
                   "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: arbiter-lb-scrape\r\n"
                   "Accept: text/plain\r\nConnection: close\r\n\r\n",
                   px->c->scrape_path, b->name);
    if (sc->buf.oom) {
        arb_buf_free(&sc->buf);
        free(sc);
        return;
    }
    sc->kind = PX_SCRAPE;
    sc->be = b;
    sc->t.owner = sc;
    fd = socket(b->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        arb_buf_free(&sc->buf);
        free(sc);
        return;
    }
    sc->fd = fd;
    b->sc = sc;
    b->refs++;
    px_timer_set(px, &px->t_scrape, &sc->t);
    if (px_btls_new(px, b, fd, &sc->tls) < 0) { /* ours (memory): tried again next time */
        px_own_failure(px, -ENOMEM, "starting a metrics scrape");
        scrape_done(px, sc, false);
        return;
    }
    if (connect(fd, (struct sockaddr *)&b->sa, b->salen) < 0 && errno != EINPROGRESS) {
        scrape_done(px, sc, false);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = sc};
    if (epoll_ctl(px->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        scrape_done(px, sc, false);
}

void px_scrapes_run(px_t *px)
{
    if (!px->c->scrape_path || px->stopping)
        return;
    for (int i = 0; i < px->nbes; i++) {
        px_backend_t *b = px->bes[i];
        if (!b->removed && !b->sc && px->now_ms >= b->sc_next)
            scrape_start(px, b);
    }
}

int64_t px_scrapes_next(const px_t *px)
{
    int64_t t = 0;
    if (!px->c->scrape_path)
        return 0;
    for (int i = 0; i < px->nbes; i++) {
        const px_backend_t *b = px->bes[i];
        if (!b->removed && !b->sc && (t == 0 || b->sc_next < t))
            t = b->sc_next;
    }
    return t;
}

void px_scrape_timeout(px_t *px, px_scrape_t *sc)
{
    scrape_done(px, sc, false);
}

void px_scrape_event(px_t *px, px_scrape_t *sc, uint32_t ev)
{
    if (!sc->connected) {
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        if (getsockopt(sc->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr) {
            scrape_done(px, sc, false);
            return;
        }
        sc->connected = true;
    }
    if (sc->tls && !sc->tls_up) { /* TLS first (btls.c) */
        bool rd = true, wr = true;
        int hs = px_btls_handshake(px, sc->be, sc->tls, &rd, &wr, "metrics scrape");
        if (hs == -ENOMEM)
            px_own_failure(px, hs, "in a metrics scrape's TLS handshake");
        if (hs < 0) {
            scrape_done(px, sc, false);
            return;
        }
        if (hs == 0)
            return;
        sc->tls_up = true;
    }
    int last = 0; /* a TLS error's code (btls.c) */
    while (!sc->reading) {
        ssize_t n = px_bsend(sc->tls, sc->fd, sc->buf.p + sc->sent, sc->buf.len - sc->sent, &last);
        if (n > 0) {
            sc->sent += (uint32_t)n;
            if (sc->sent == sc->buf.len) {
                sc->reading = true; /* the buffer now holds the reply */
                arb_buf_reset(&sc->buf);
            }
            continue;
        }
        if (n < 0 && errno == EAGAIN)
            return;
        if (sc->tls)
            px_btls_io_failed(px, sc->be, sc->tls, last, "metrics scrape failed");
        scrape_done(px, sc, false);
        return;
    }
    for (;;) {
        /* room to read into: up to 16 KiB more, never past 1 MiB in all */
        size_t want = SC_MAX - sc->buf.len < 16384 ? SC_MAX - sc->buf.len : 16384;
        if (want == 0 || arb_buf_reserve(&sc->buf, want) < 0) {
            scrape_done(px, sc, false); /* over 1 MiB of metrics: not for us */
            return;
        }
        size_t room = sc->buf.cap - sc->buf.len - 1; /* the NUL's byte kept */
        if (room > SC_MAX - sc->buf.len)
            room = SC_MAX - sc->buf.len;
        ssize_t n = px_brecv(sc->tls, sc->fd, sc->buf.p + sc->buf.len, room, &last);
        if (n > 0) {
            sc->buf.len += (size_t)n;
            sc->buf.p[sc->buf.len] = '\0';
            continue;
        }
        if (n < 0 && errno == EAGAIN)
            return;
        if (sc->tls && n < 0)
            px_btls_io_failed(px, sc->be, sc->tls, last, "metrics scrape failed");
        scrape_done(px, sc, n == 0); /* the end: the server closed after its answer */
        return;
    }
}
