/*
 * tls.c: TLS files for servers and clients, the identity in a client
 * certificate, and constant-time comparison of secrets (see tls.h). All
 * cryptography is GnuTLS's; libmicrohttpd and libcurl run the handshakes.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tls/tls.h"

/* A whole file into a NUL-terminated buffer (at most 1 MiB: a PEM chain). */
static int slurp(const char *flag, const char *path, char **out, arb_err_t *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0;
    int rc = 0;

    *out = NULL;
    if (!f)
        return arb_errf(err, -errno, "%s '%s': %s", flag, path, strerror(errno));
    if (!(buf = malloc((1u << 20) + 1))) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    n = fread(buf, 1, 1u << 20, f);
    if (ferror(f) || !feof(f)) {
        rc = arb_errf(err, -EFBIG, "%s '%s': unreadable, or larger than 1 MiB", flag, path);
        goto out;
    }
    buf[n] = '\0';
    if (n == 0 || strlen(buf) != n || !strstr(buf, "-----BEGIN ")) {
        rc = arb_errf(err, -EINVAL, "%s '%s': not a PEM file (no -----BEGIN line)", flag, path);
        goto out;
    }
    *out = buf;
    buf = NULL;
out:
    free(buf);
    fclose(f);
    return rc;
}

/* The certificates of a PEM text: how many (0: none), and the earliest
 * expiry among them. */
static int count_certs(const char *pem, time_t *first_expiry)
{
    gnutls_x509_crt_t *list = NULL;
    unsigned n = 0;
    gnutls_datum_t d = {(unsigned char *)(uintptr_t)pem, (unsigned)strlen(pem)};

    if (gnutls_x509_crt_list_import2(&list, &n, &d, GNUTLS_X509_FMT_PEM, 0) < 0)
        return 0;
    *first_expiry = 0;
    for (unsigned i = 0; i < n; i++) {
        time_t e = gnutls_x509_crt_get_expiration_time(list[i]);
        if (i == 0 || e < *first_expiry)
            *first_expiry = e;
        gnutls_x509_crt_deinit(list[i]);
    }
    gnutls_free(list);
    return (int)n;
}

/* Do cert (PEM) and key (PEM) belong together? GnuTLS checks the pair. */
static int pair_check(const char *cflag, const char *cpath, const char *cert, const char *key,
                      arb_err_t *err)
{
    gnutls_certificate_credentials_t cred;
    gnutls_datum_t c = {(unsigned char *)(uintptr_t)cert, (unsigned)strlen(cert)};
    gnutls_datum_t k = {(unsigned char *)(uintptr_t)key, (unsigned)strlen(key)};
    int rc;

    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return arb_errf(err, -ENOMEM, "out of memory");
    rc = gnutls_certificate_set_x509_key_mem2(cred, &c, &k, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (rc < 0)
        return arb_errf(err, -EINVAL, "%s '%s' and its key: %s (give the key made with it)", cflag,
                        cpath, gnutls_strerror(rc));
    return 0;
}

void tls_server_free(tls_server_t *t)
{
    if (!t)
        return;
    free(t->cert);
    free(t->key);
    free(t->ca);
    memset(t, 0, sizeof *t);
}

int tls_server_load(const tls_files_t *f, tls_server_t *out, arb_err_t *err)
{
    tls_server_t t = {0};
    time_t exp = 0;
    int rc = 0;

    memset(out, 0, sizeof *out);
    if (!f->cert_file && !f->key_file) {
        if (f->ca_file || f->client_cert_auth)
            return arb_errf(err, -EINVAL,
                            "--trusted-ca-file and --client-cert-auth need TLS: give "
                            "--cert-file and --key-file too");
        return 0;
    }
    if (!f->cert_file || !f->key_file)
        return arb_errf(err, -EINVAL, "give both --cert-file and --key-file (TLS), or neither");
    if (f->client_cert_auth && !f->ca_file)
        return arb_errf(err, -EINVAL,
                        "--client-cert-auth needs --trusted-ca-file (the CA client "
                        "certificates are checked against: ca.crt of `arbiter init`)");
    if ((rc = slurp("--cert-file", f->cert_file, &t.cert, err)) < 0 ||
        (rc = slurp("--key-file", f->key_file, &t.key, err)) < 0 ||
        (f->ca_file && (rc = slurp("--trusted-ca-file", f->ca_file, &t.ca, err)) < 0))
        goto out;
    if (count_certs(t.cert, &exp) == 0) {
        rc = arb_errf(err, -EINVAL, "--cert-file '%s': holds no certificate", f->cert_file);
        goto out;
    }
    if (exp < time(NULL)) { /* wall clock: what the certificate itself is judged by */
        rc = arb_errf(err, -EINVAL, "--cert-file '%s': expired; make a new one (arbiter init)",
                      f->cert_file);
        goto out;
    }
    if ((rc = pair_check("--cert-file", f->cert_file, t.cert, t.key, err)) < 0)
        goto out;
    if (t.ca && count_certs(t.ca, &exp) == 0) {
        rc = arb_errf(err, -EINVAL, "--trusted-ca-file '%s': holds no certificate", f->ca_file);
        goto out;
    }
    t.client_cert_auth = f->client_cert_auth;
    *out = t;
    return 0;
out:
    tls_server_free(&t);
    return rc;
}

/* One attribute of a certificate's subject ("" when absent). */
static void dn_get(gnutls_x509_crt_t c, const char *oid, char *buf, size_t n)
{
    size_t len = n;
    buf[0] = '\0';
    if (gnutls_x509_crt_get_dn_by_oid(c, oid, 0, 0, buf, &len) < 0)
        buf[0] = '\0';
    buf[n - 1] = '\0';
}

int tls_peer_verify(void *session, tls_peer_t *peer, arb_err_t *err)
{
    gnutls_session_t s = session;
    unsigned n = 0, status = 0;
    const gnutls_datum_t *certs;
    gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                     .data = (unsigned char *)(uintptr_t)GNUTLS_KP_TLS_WWW_CLIENT};
    gnutls_x509_crt_t c;
    int rc;

    memset(peer, 0, sizeof *peer);
    if (!s || !(certs = gnutls_certificate_get_peers(s, &n)) || n == 0)
        return 1;
    if ((rc = gnutls_certificate_verify_peers(s, &purpose, 1, &status)) < 0)
        return arb_errf(err, -EACCES, "client certificate: %s", gnutls_strerror(rc));
    if (status) {
        gnutls_datum_t txt = {0};
        gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &txt, 0);
        arb_errf(err, -EACCES,
                 "client certificate refused: %s (use one signed by this cluster's CA for "
                 "a TLS client: arbiter init node|user)",
                 txt.data ? (const char *)txt.data : "not trusted");
        gnutls_free(txt.data);
        return -EACCES;
    }
    if (gnutls_x509_crt_init(&c) < 0)
        return arb_errf(err, -ENOMEM, "out of memory");
    if ((rc = gnutls_x509_crt_import(c, &certs[0], GNUTLS_X509_FMT_DER)) < 0) {
        gnutls_x509_crt_deinit(c);
        return arb_errf(err, -EACCES, "client certificate: %s", gnutls_strerror(rc));
    }
    dn_get(c, GNUTLS_OID_X520_COMMON_NAME, peer->cn, sizeof peer->cn);
    dn_get(c, GNUTLS_OID_X520_ORGANIZATION_NAME, peer->o, sizeof peer->o);
    dn_get(c, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME, peer->ou, sizeof peer->ou);
    gnutls_x509_crt_deinit(c);
    if (!peer->cn[0])
        return arb_errf(err, -EACCES, "client certificate: its subject has no CN (a name)");
    return 0;
}

void tls_client_from_env(tls_client_t *t)
{
    const char *v;
    if (!t->cacert && (v = getenv("ARBITER_CACERT")) && *v)
        t->cacert = v;
    if (!t->cert_file && (v = getenv("ARBITER_CERT_FILE")) && *v)
        t->cert_file = v;
    if (!t->key_file && (v = getenv("ARBITER_KEY_FILE")) && *v)
        t->key_file = v;
}

int tls_client_check(const tls_client_t *t, arb_err_t *err)
{
    char *ca = NULL, *cert = NULL, *key = NULL;
    time_t exp;
    int rc = 0;

    if (t->cacert) {
        if ((rc = slurp("--cacert", t->cacert, &ca, err)) < 0)
            goto out;
        if (count_certs(ca, &exp) == 0) {
            rc = arb_errf(err, -EINVAL, "--cacert '%s': holds no certificate", t->cacert);
            goto out;
        }
    }
    if (t->key_file && !t->cert_file) {
        rc = arb_errf(err, -EINVAL, "--key-file without --cert-file: give the certificate too");
        goto out;
    }
    if (t->cert_file) {
        if ((rc = slurp("--cert-file", t->cert_file, &cert, err)) < 0 ||
            (rc = slurp("--key-file", t->key_file ? t->key_file : t->cert_file, &key, err)) < 0)
            goto out;
        rc = pair_check("--cert-file", t->cert_file, cert, key, err);
    }
out:
    free(ca);
    free(cert);
    free(key);
    return rc;
}

void tls_client_apply(const tls_client_t *t, void *curl)
{
    CURL *h = curl;

    if (!t)
        return;
    if (t->cacert)
        curl_easy_setopt(h, CURLOPT_CAINFO, t->cacert);
    if (t->cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, t->cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, t->key_file ? t->key_file : t->cert_file);
    }
}

bool tls_is_loopback(const char *host)
{
    struct in_addr a;
    return host && inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

void tls_sha256(const char *s, size_t n, unsigned char out[32])
{
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, s, n, out) < 0)
        memset(out, 0, 32); /* cannot happen with SHA-256; never equal to a real digest by luck */
}

bool tls_mem_equal(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(x[i] ^ y[i]);
    return d == 0;
}

bool tls_secret_equal(const char *a, const char *b)
{
    unsigned char ha[32], hb[32];
    tls_sha256(a, strlen(a), ha);
    tls_sha256(b, strlen(b), hb);
    return tls_mem_equal(ha, hb, sizeof ha);
}
