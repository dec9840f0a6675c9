/*
 * ltls.c: TLS on the balancer's listener (--cert-file, --key-file): each
 * client session gets a GnuTLS server session over its non-blocking
 * socket, and proxy.c reads and writes the client through px_crecv and
 * px_csend, which are recv and send without TLS.
 *
 * With the edge-triggered loop, a short read no longer says the socket is
 * drained (GnuTLS hands out one record at a time, and holds decrypted bytes
 * of its own): a TLS session is read until it says "again" (px_cdrained),
 * and "again" is believed only when the socket is dry (px_tls_record_recv:
 * GnuTLS also says it after a TLS 1.3 message of its own, a key update,
 * with the next record already waiting).
 * The handshake runs first, in S_HEAD, whichever way it is blocked
 * (px_tls_handshake); the client timeout bounds it like a slow head.
 * Each event loop loads its own credentials (read-only once loaded); those
 * for TLS to the backends too (px_btls_setup, btls.c).
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lb/proxy_int.h"

int px_tls_setup(px_t *px, const lb_proxy_conf_t *c, arb_err_t *err)
{
    gnutls_certificate_credentials_t cred = NULL;
    gnutls_priority_t prio = NULL;
    int rc;

    if ((rc = px_btls_setup(px, c, err)) < 0) /* TLS to the backends (btls.c) */
        return rc;
    if (!c->tls_cert_file)
        return 0;
    if ((rc = gnutls_certificate_allocate_credentials(&cred)) < 0 ||
        (rc = gnutls_certificate_set_x509_key_file2(cred, c->tls_cert_file, c->tls_key_file,
                                                    GNUTLS_X509_FMT_PEM, NULL, 0)) < 0 ||
        (rc = gnutls_priority_init(&prio, PX_TLS_PRIORITY, NULL)) < 0) {
        if (cred)
            gnutls_certificate_free_credentials(cred);
        return arb_errf(err, -EINVAL, "--cert-file %s, --key-file %s: %s", c->tls_cert_file,
                        c->tls_key_file, gnutls_strerror(rc));
    }
    px->tls_cred = cred;
    px->tls_prio = prio;
    return 0;
}

void px_tls_teardown(px_t *px)
{
    px_btls_teardown(px);
    if (px->tls_prio)
        gnutls_priority_deinit(px->tls_prio);
    if (px->tls_cred)
        gnutls_certificate_free_credentials(px->tls_cred);
    px->tls_prio = NULL;
    px->tls_cred = NULL;
}

/* GnuTLS's transport: the session's socket, never raising SIGPIPE (both
 * directions: the listener's sessions and the backend ones, btls.c). */
static ssize_t push(gnutls_transport_ptr_t p, const void *buf, size_t n)
{
    return send((int)(intptr_t)p, buf, n, MSG_NOSIGNAL);
}

static ssize_t pull(gnutls_transport_ptr_t p, void *buf, size_t n)
{
    return recv((int)(intptr_t)p, buf, n, 0);
}

void px_tls_transport(gnutls_session_t t, int fd)
{
    gnutls_transport_set_ptr(t, (gnutls_transport_ptr_t)(intptr_t)fd);
    gnutls_transport_set_push_function(t, push);
    gnutls_transport_set_pull_function(t, pull);
}

int px_tls_session(px_t *px, px_sess_t *s)
{
    gnutls_session_t t;

    if (!px->tls_cred || s->admin)
        return 0;
    if (gnutls_init(&t, GNUTLS_SERVER | GNUTLS_NONBLOCK) < 0)
        return -ENOMEM;
    if (gnutls_priority_set(t, px->tls_prio) < 0 ||
        gnutls_credentials_set(t, GNUTLS_CRD_CERTIFICATE, px->tls_cred) < 0) {
        gnutls_deinit(t);
        return -EINVAL;
    }
    px_tls_transport(t, s->fd);
    s->tls = t;
    return 0;
}

void px_tls_end(px_sess_t *s)
{
    if (s->tls)
        gnutls_deinit(s->tls);
    s->tls = NULL;
}

int px_tls_handshake(px_sess_t *s)
{
    if (!s->tls || s->tls_up)
        return 1;
    if (!s->rd && !s->wr)
        return 0;
    int rc = gnutls_handshake(s->tls);
    if (rc == GNUTLS_E_SUCCESS) {
        s->tls_up = true;
        return 1;
    }
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
        if (gnutls_record_get_direction(s->tls) == 0)
            s->rd = false;
        else
            s->wr = false;
        return 0;
    }
    return gnutls_error_is_fatal(rc) ? -1 : 0;
}

ssize_t px_tls_record_recv(gnutls_session_t t, int fd, void *buf, size_t n)
{
    char c;
    ssize_t rc;

    for (int i = 0; i < 1024; i++) {
        rc = gnutls_record_recv(t, buf, n);
        if (rc != GNUTLS_E_AGAIN && rc != GNUTLS_E_INTERRUPTED)
            return rc;
        if (gnutls_record_check_pending(t) > 0)
            continue;
        if (recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
            (errno == EAGAIN || errno == EWOULDBLOCK))
            return GNUTLS_E_AGAIN; /* dry; data, an end or an error: the next read has it */
    }
    return GNUTLS_E_UNEXPECTED_PACKET; /* a peer sending nothing but TLS's own messages */
}

static ssize_t map(ssize_t rc)
{
    if (rc >= 0)
        return rc;
    errno = rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED ? EAGAIN : EIO;
    return -1;
}

ssize_t px_crecv(px_sess_t *s, void *buf, size_t n)
{
    if (!s->tls)
        return recv(s->fd, buf, n, 0);
    ssize_t rc = px_tls_record_recv(s->tls, s->fd, buf, n);
    if (rc == GNUTLS_E_PREMATURE_TERMINATION)
        return 0; /* a client that closed without close_notify: an end */
    return map(rc);
}

ssize_t px_csend(px_sess_t *s, const void *buf, size_t n)
{
    if (!s->tls)
        return send(s->fd, buf, n, MSG_NOSIGNAL);
    return map(gnutls_record_send(s->tls, buf, n));
}

bool px_cdrained(const px_sess_t *s, size_t got, size_t want)
{
    return !s->tls && got < want && !s->hup;
}
