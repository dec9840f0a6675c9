/*
 * btls.c: TLS from the balancer to its backends (--backend-tls, or a
 * backend named https://HOST:PORT): the client side of every connection the
 * proxy opens to a backend, pooled request connections (proxy.c,
 * backend.c), health checks (backend.c) and metrics scrapes (scrape.c).
 *
 * Each event loop loads its own client credentials at start (read-only
 * once loaded): the CA the backends' certificates must chain to
 * (--backend-cacert; the cluster CA, --cacert or ARBITER_CACERT, when not
 * given; the system's without either), and a client certificate to present
 * where the backends ask for one (--backend-cert, --backend-key: mTLS).
 * A backend's certificate is checked against that CA and against the name
 * the balancer knows it by: --backend-sni NAME, else the host of its
 * address (a DNS name or an IP address, matched to the certificate's SANs).
 * SNI carries the same name (never an IP address: RFC 6066).
 * --backend-insecure-skip-verify checks nothing; it is said loudly at start.
 *
 * A handshake runs non-blocking in the event loop, on whichever event the
 * socket gives, bounded by the connect timeout (requests), the check
 * timeout or the scrape timeout. A handshake that fails, certificate
 * refused included, is a failure of that backend (the caller counts it:
 * ejection like a failed connect, a failed check, a failed scrape) and is
 * logged with GnuTLS's reason, at most once per 10 s per backend. Running
 * out of our own memory for a session is the balancer's, never the
 * backend's (-ENOMEM, the caller's px_own_failure).
 *
 * Reading: GnuTLS hands out one record at a time and keeps decrypted bytes
 * of its own, so with the edge-triggered loop a short read does not say the
 * socket is drained; a TLS connection is read until it says "again" (the
 * callers keep their readable flag until then), and "again" is believed
 * only when the socket is dry (px_tls_record_recv, ltls.c: GnuTLS also says
 * it after taking a TLS 1.3 message of its own, a session ticket or a key
 * update, with the next record already waiting: no edge would come for it). Writing: a record send
 * that returned "again" is finished by the next send (GnuTLS keeps the record), which the callers
 * make with the same bytes at the same place, or more.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lb/proxy_int.h"

int px_btls_setup(px_t *px, const lb_proxy_conf_t *c, arb_err_t *err)
{
    gnutls_certificate_credentials_t cred = NULL;
    gnutls_priority_t prio = NULL;
    int rc;

    if (!c->backend_tls_any)
        return 0;
    if ((rc = gnutls_certificate_allocate_credentials(&cred)) < 0 ||
        (rc = gnutls_priority_init(&prio, PX_TLS_PRIORITY, NULL)) < 0) {
        rc = arb_errf(err, -ENOMEM, "backend TLS: %s", gnutls_strerror(rc));
        goto out;
    }
    if (c->backend_cacert) {
        rc = gnutls_certificate_set_x509_trust_file(cred, c->backend_cacert, GNUTLS_X509_FMT_PEM);
        if (rc <= 0) {
            rc = arb_errf(
                err, -EINVAL,
                "the backends' CA %s (--backend-cacert; else --cacert, ARBITER_CACERT): %s",
                c->backend_cacert, rc == 0 ? "no certificate in it" : gnutls_strerror(rc));
            goto out;
        }
    } else if (!c->backend_insecure) {
        rc = gnutls_certificate_set_x509_system_trust(cred);
        if (rc <= 0) {
            rc = arb_errf(err, -EINVAL,
                          "backend TLS: no CA to check the backends with (the system has none): "
                          "give --backend-cacert FILE (or --cacert, ARBITER_CACERT)");
            goto out;
        }
    }
    if (c->backend_cert) {
        rc = gnutls_certificate_set_x509_key_file2(
            cred, c->backend_cert, c->backend_key ? c->backend_key : c->backend_cert,
            GNUTLS_X509_FMT_PEM, NULL, 0);
        if (rc < 0) {
            rc = arb_errf(err, -EINVAL, "--backend-cert %s, --backend-key %s: %s", c->backend_cert,
                          c->backend_key ? c->backend_key : c->backend_cert, gnutls_strerror(rc));
            goto out;
        }
    }
    px->btls_cred = cred;
    px->btls_prio = prio;
    cred = NULL;
    prio = NULL;
    rc = 0;
out:
    if (prio)
        gnutls_priority_deinit(prio);
    if (cred)
        gnutls_certificate_free_credentials(cred);
    return rc;
}

void px_btls_teardown(px_t *px)
{
    if (px->btls_prio)
        gnutls_priority_deinit(px->btls_prio);
    if (px->btls_cred)
        gnutls_certificate_free_credentials(px->btls_cred);
    px->btls_prio = NULL;
    px->btls_cred = NULL;
}

static void backend_host(const px_t *px, const px_backend_t *b, char *host, size_t n)
{
    const char *a = b->name, *e;

    if (px->c->backend_sni) {
        snprintf(host, n, "%s", px->c->backend_sni);
        return;
    }
    if (a[0] == '[') {
        a++;
        e = strchr(a, ']');
    } else {
        e = strrchr(a, ':');
    }
    size_t len = e ? (size_t)(e - a) : strlen(a);
    snprintf(host, n, "%.*s", (int)(len < n ? len : n - 1), a);
}

static bool is_ip(const char *h)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, h, buf) == 1 || inet_pton(AF_INET6, h, buf) == 1;
}

int px_btls_new(px_t *px, px_backend_t *b, int fd, gnutls_session_t *out)
{
    gnutls_session_t t;
    char *host = b->tls_host; /* GnuTLS keeps the pointer: the backend outlives the session */

    *out = NULL;
    if (!b->tls)
        return 0;
    if (!px->btls_cred || gnutls_init(&t, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_TICKETS) < 0)
        return -ENOMEM;
    backend_host(px, b, host, sizeof b->tls_host);
    if (gnutls_priority_set(t, px->btls_prio) < 0 ||
        gnutls_credentials_set(t, GNUTLS_CRD_CERTIFICATE, px->btls_cred) < 0 ||
        (!is_ip(host) && host[0] &&
         gnutls_server_name_set(t, GNUTLS_NAME_DNS, host, strlen(host)) < 0)) {
        gnutls_deinit(t);
        return -ENOMEM;
    }
    if (!px->c->backend_insecure)
        gnutls_session_set_verify_cert(t, host, 0); /* chain to the CA, and this name */
    px_tls_transport(t, fd);
    *out = t;
    return 0;
}

void px_btls_end(gnutls_session_t *t)
{
    if (*t)
        gnutls_deinit(*t);
    *t = NULL;
}

/* Why a handshake failed, in words: the certificate's verdict when it was refused. */
static void why_failed(gnutls_session_t t, int rc, char *buf, size_t n)
{
    gnutls_datum_t d = {0};

    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR &&
        gnutls_certificate_verification_status_print(gnutls_session_get_verify_cert_status(t),
                                                     GNUTLS_CRT_X509, &d, 0) == 0) {
        size_t len = strlen((const char *)d.data);
        while (len > 0 && (d.data[len - 1] == ' ' || d.data[len - 1] == '\n'))
            len--;
        snprintf(buf, n, "certificate refused: %.*s", (int)len, (const char *)d.data);
        gnutls_free(d.data);
        return;
    }
    snprintf(buf, n, "%s", gnutls_strerror(rc));
}

void px_btls_failed(px_t *px, px_backend_t *b, const char *why, const char *doing)
{
    b->st.tls_fail++;
    if (b->tls_said_ms && px->now_ms - b->tls_said_ms < 10000) {
        b->tls_unsaid++;
        return;
    }
    char more[64] = "";
    if (b->tls_unsaid)
        snprintf(more, sizeof more, " (and %llu more since the last word)",
                 (unsigned long long)b->tls_unsaid);
    fprintf(stderr, "arbiter lb: backend %s: TLS %s: %s; counted as the backend's failure%s\n",
            b->name, doing, why, more);
    b->tls_said_ms = px->now_ms ? px->now_ms : 1;
    b->tls_unsaid = 0;
}

int px_btls_handshake(px_t *px, px_backend_t *b, gnutls_session_t t, bool *rd, bool *wr,
                      const char *doing)
{
    char why[512], what[64];
    int rc = gnutls_handshake(t);

    if (rc == GNUTLS_E_SUCCESS) {
        *rd = *wr = true; /* may have bytes buffered, may write: let the next step find out */
        return 1;
    }
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
        if (gnutls_record_get_direction(t) == 0)
            *rd = false;
        else
            *wr = false;
        return 0;
    }
    if (!gnutls_error_is_fatal(rc))
        return 0; /* a warning alert: the handshake goes on with the next event */
    if (rc == GNUTLS_E_MEMORY_ERROR)
        return -ENOMEM;
    why_failed(t, rc, why, sizeof why);
    if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED)
        snprintf(why + strlen(why), sizeof why - strlen(why), ": %s",
                 gnutls_alert_get_name(gnutls_alert_get(t)));
    if (!px->c->backend_cert && gnutls_certificate_client_get_request_status(t))
        snprintf(why + strlen(why), sizeof why - strlen(why),
                 "; the backend asked for a client certificate and none is given "
                 "(--backend-cert, --backend-key)");
    snprintf(what, sizeof what, "handshake failed (%s)", doing);
    px_btls_failed(px, b, why, what);
    return -1;
}

/* GnuTLS's result as recv/send's; a TLS error (an alert: with TLS 1.3 a
 * server that wants a client certificate says so only after the client's
 * handshake is done) is EPROTO, and its code kept in *last for the reason. */
static ssize_t map(ssize_t rc, int *last)
{
    if (rc >= 0)
        return rc;
    if (rc == GNUTLS_E_PREMATURE_TERMINATION)
        return 0; /* closed without close_notify: an end, as plain HTTP would see it */
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
        errno = EAGAIN;
    } else if (rc == GNUTLS_E_MEMORY_ERROR) {
        errno = ENOMEM;
    } else if (rc == GNUTLS_E_PUSH_ERROR || rc == GNUTLS_E_PULL_ERROR) {
        errno = EIO; /* the socket's own error: a reset, as plain HTTP would see it */
    } else {
        errno = EPROTO;
        if (last)
            *last = (int)rc;
    }
    return -1;
}

ssize_t px_brecv(gnutls_session_t t, int fd, void *buf, size_t n, int *last)
{
    if (!t)
        return recv(fd, buf, n, 0);
    return map(px_tls_record_recv(t, fd, buf, n), last);
}

ssize_t px_bsend(gnutls_session_t t, int fd, const void *buf, size_t n, int *last)
{
    if (!t)
        return send(fd, buf, n, MSG_NOSIGNAL);
    return map(gnutls_record_send(t, buf, n), last);
}

void px_btls_io_failed(px_t *px, px_backend_t *b, gnutls_session_t t, int rc, const char *doing)
{
    /* TLS 1.3: a server that wants a client certificate and got none says so after the
     * client's handshake is done, and a reset can beat its alert to us */
    bool nocert = !px->c->backend_cert && gnutls_certificate_client_get_request_status(t);
    char why[384];

    if (!rc && !nocert)
        return; /* the socket's own failure: not TLS's */
    if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED || rc == GNUTLS_E_WARNING_ALERT_RECEIVED)
        snprintf(why, sizeof why, "%s: %s", gnutls_strerror(rc),
                 gnutls_alert_get_name(gnutls_alert_get(t)));
    else if (rc)
        snprintf(why, sizeof why, "%s", gnutls_strerror(rc));
    else
        snprintf(why, sizeof why, "the connection ended after the handshake");
    if (nocert)
        snprintf(why + strlen(why), sizeof why - strlen(why),
                 "; the backend asked for a client certificate and none is given "
                 "(--backend-cert, --backend-key)");
    px_btls_failed(px, b, why, doing);
}

bool px_btls_idle_ok(gnutls_session_t t, int fd)
{
    char c;

    if (!t)
        return false;
    /* a post-handshake message (a ticket) is taken here; data or an end is not ours */
    return px_tls_record_recv(t, fd, &c, 1) == GNUTLS_E_AGAIN;
}

int lb_backend_tls_check(const lb_proxy_conf_t *c, arb_err_t *err)
{
    px_t px = {0};
    int rc = px_btls_setup(&px, c, err);

    px_btls_teardown(&px);
    return rc;
}
