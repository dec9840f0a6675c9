/*
 * pki.c: the cluster PKI of `arbiter init` on GnuTLS: a CA, and
 * certificates it signs for the controller (TLS server, SANs), nodes (TLS
 * client for the API, TLS server for the log server; subject CN = the node's
 * name, O = agent) and users or balancers (TLS client; CN = name, O = role,
 * OU = team). Keys are ECDSA P-256, written as unencrypted PKCS#8 PEM with
 * mode 0600; certificates 0644. Nothing existing is ever overwritten.
 *
 * Validity uses the wall clock (a certificate is judged by it): from one
 * hour ago (clocks a little behind) to the given number of days.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tls/tls.h"

int pki_write_new(const char *path, const char *text, size_t n, int mode, arb_err_t *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    size_t off = 0;

    if (fd < 0)
        return arb_errf(err, -errno, "%s: %s%s", path, strerror(errno),
                        errno == EEXIST ? " (nothing was overwritten; remove it first)" : "");
    while (off < n) {
        ssize_t k = write(fd, text + off, n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = errno;
            close(fd);
            unlink(path);
            return arb_errf(err, -e, "%s: %s", path, strerror(e));
        }
        off += (size_t)k;
    }
    if (fchmod(fd, (mode_t)mode) < 0 || fsync(fd) < 0 || close(fd) < 0) {
        int e = errno;
        unlink(path);
        return arb_errf(err, -e, "%s: %s", path, strerror(e));
    }
    return 0;
}

static int gt(int rc, const char *what, arb_err_t *err)
{
    return rc < 0 ? arb_errf(err, -EIO, "%s: %s", what, gnutls_strerror(rc)) : 0;
}

static int new_key(gnutls_x509_privkey_t *k, arb_err_t *err)
{
    int rc = gt(gnutls_x509_privkey_init(k), "key", err);
    if (rc == 0)
        rc = gt(gnutls_x509_privkey_generate(*k, GNUTLS_PK_ECDSA,
                                             GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
                "generating an ECDSA P-256 key", err);
    return rc;
}

/* The fields every certificate gets: version 3, a random serial, validity,
 * its key and that key's id. */
static int base_fields(gnutls_x509_crt_t c, gnutls_x509_privkey_t k, int days, arb_err_t *err)
{
    unsigned char serial[16], id[64];
    size_t idn = sizeof id;
    time_t now = time(NULL);
    int rc;

    if ((rc = gt(gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial), "serial", err)) < 0)
        return rc;
    serial[0] &= 0x7f; /* a positive integer */
    serial[0] |= 0x01; /* and no leading zero byte */
    if ((rc = gt(gnutls_x509_crt_set_version(c, 3), "version", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_serial(c, serial, sizeof serial), "serial", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_activation_time(c, now - 3600), "validity", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_expiration_time(c, now + (time_t)days * 86400), "validity",
                 err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_key(c, k), "key", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_get_key_id(c, 0, id, &idn), "key id", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_subject_key_id(c, id, idn), "key id", err)) < 0)
        return rc;
    return 0;
}

static int dn(gnutls_x509_crt_t c, const char *oid, const char *v, arb_err_t *err)
{
    if (!v || !*v)
        return 0;
    return gt(gnutls_x509_crt_set_dn_by_oid(c, oid, 0, v, (unsigned)strlen(v)), "subject", err);
}

/* Export c and k to DIR/BASE.crt and DIR/BASE.key; neither may exist. */
static int write_pair(const char *dir, const char *base, gnutls_x509_crt_t c,
                      gnutls_x509_privkey_t k, arb_err_t *err)
{
    gnutls_datum_t cd = {0}, kd = {0};
    char cp[4096], kp[4096];
    struct stat sb;
    int rc;

    snprintf(cp, sizeof cp, "%s/%s.crt", dir, base);
    snprintf(kp, sizeof kp, "%s/%s.key", dir, base);
    if (stat(cp, &sb) == 0 || stat(kp, &sb) == 0)
        return arb_errf(err, -EEXIST, "%s/%s.crt or .key exists; nothing was overwritten", dir,
                        base);
    if ((rc = gt(gnutls_x509_crt_export2(c, GNUTLS_X509_FMT_PEM, &cd), "export", err)) < 0 ||
        (rc = gt(gnutls_x509_privkey_export2_pkcs8(k, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN,
                                                   &kd),
                 "export", err)) < 0)
        goto out;
    if ((rc = pki_write_new(kp, (const char *)kd.data, kd.size, 0600, err)) < 0)
        goto out;
    if ((rc = pki_write_new(cp, (const char *)cd.data, cd.size, 0644, err)) < 0)
        unlink(kp);
out:
    gnutls_free(cd.data);
    if (kd.data)
        gnutls_memset(kd.data, 0, kd.size);
    gnutls_free(kd.data);
    return rc;
}

int pki_ca_make(const char *dir, arb_err_t *err)
{
    gnutls_x509_crt_t c = NULL;
    gnutls_x509_privkey_t k = NULL;
    int rc;

    if ((rc = new_key(&k, err)) < 0 || (rc = gt(gnutls_x509_crt_init(&c), "certificate", err)) < 0)
        goto out;
    if ((rc = base_fields(c, k, 3650, err)) < 0 ||
        (rc = dn(c, GNUTLS_OID_X520_COMMON_NAME, "arbiter cluster CA", err)) < 0 ||
        (rc = dn(c, GNUTLS_OID_X520_ORGANIZATION_NAME, "arbiter", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_basic_constraints(c, 1, 0), "constraints", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_key_usage(c, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN),
                 "key usage", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_sign2(c, c, k, GNUTLS_DIG_SHA256, 0), "signing", err)) < 0)
        goto out;
    rc = write_pair(dir, "ca", c, k, err);
out:
    if (c)
        gnutls_x509_crt_deinit(c);
    if (k)
        gnutls_x509_privkey_deinit(k);
    return rc;
}

/* Read DIR/ca.crt and DIR/ca.key. */
static int load_ca(const char *dir, gnutls_x509_crt_t *c, gnutls_x509_privkey_t *k, arb_err_t *err)
{
    char path[4096];
    gnutls_datum_t d = {0};
    int rc;

    *c = NULL;
    *k = NULL;
    snprintf(path, sizeof path, "%s/ca.crt", dir);
    if ((rc = gnutls_load_file(path, &d)) < 0)
        return arb_errf(err, -ENOENT,
                        "%s: cannot read it (make the cluster first: arbiter init %s)", path, dir);
    if ((rc = gt(gnutls_x509_crt_init(c), "certificate", err)) == 0)
        rc = gt(gnutls_x509_crt_import(*c, &d, GNUTLS_X509_FMT_PEM), path, err);
    gnutls_free(d.data);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof path, "%s/ca.key", dir);
    if (gnutls_load_file(path, &d) < 0)
        return arb_errf(err, -ENOENT, "%s: cannot read it (the CA's key signs new certificates)",
                        path);
    if ((rc = gt(gnutls_x509_privkey_init(k), "key", err)) == 0)
        rc = gt(gnutls_x509_privkey_import2(*k, &d, GNUTLS_X509_FMT_PEM, NULL, 0), path, err);
    gnutls_memset(d.data, 0, d.size);
    gnutls_free(d.data);
    return rc;
}

int pki_leaf_make(const char *dir, const pki_leaf_t *l, arb_err_t *err)
{
    gnutls_x509_crt_t ca = NULL, c = NULL;
    gnutls_x509_privkey_t cak = NULL, k = NULL;
    unsigned char id[64];
    size_t idn = sizeof id;
    unsigned usage = GNUTLS_KEY_DIGITAL_SIGNATURE;
    int rc;

    if ((rc = load_ca(dir, &ca, &cak, err)) < 0 || (rc = new_key(&k, err)) < 0 ||
        (rc = gt(gnutls_x509_crt_init(&c), "certificate", err)) < 0)
        goto out;
    if ((rc = base_fields(c, k, l->days, err)) < 0 ||
        (rc = dn(c, GNUTLS_OID_X520_COMMON_NAME, l->cn, err)) < 0 ||
        (rc = dn(c, GNUTLS_OID_X520_ORGANIZATION_NAME, l->o, err)) < 0 ||
        (rc = dn(c, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME, l->ou, err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_basic_constraints(c, 0, -1), "constraints", err)) < 0 ||
        (rc = gt(gnutls_x509_crt_set_key_usage(c, usage), "key usage", err)) < 0)
        goto out;
    if (l->server && (rc = gt(gnutls_x509_crt_set_key_purpose_oid(c, GNUTLS_KP_TLS_WWW_SERVER, 0),
                              "purpose", err)) < 0)
        goto out;
    if (l->client && (rc = gt(gnutls_x509_crt_set_key_purpose_oid(c, GNUTLS_KP_TLS_WWW_CLIENT, 0),
                              "purpose", err)) < 0)
        goto out;
    for (int i = 0; i < l->nhosts; i++) {
        struct in_addr a;
        const char *h = l->hosts[i];
        if (inet_pton(AF_INET, h, &a) == 1)
            rc = gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_IPADDRESS, &a, sizeof a,
                                                      GNUTLS_FSAN_APPEND);
        else
            rc = gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_DNSNAME, h, (unsigned)strlen(h),
                                                      GNUTLS_FSAN_APPEND);
        if ((rc = gt(rc, "subject alternative name", err)) < 0)
            goto out;
    }
    if (gnutls_x509_crt_get_subject_key_id(ca, id, &idn, NULL) >= 0 &&
        (rc = gt(gnutls_x509_crt_set_authority_key_id(c, id, idn), "authority key id", err)) < 0)
        goto out;
    if ((rc = gt(gnutls_x509_crt_sign2(c, ca, cak, GNUTLS_DIG_SHA256, 0), "signing", err)) < 0)
        goto out;
    rc = write_pair(dir, l->base, c, k, err);
out:
    if (c)
        gnutls_x509_crt_deinit(c);
    if (ca)
        gnutls_x509_crt_deinit(ca);
    if (k)
        gnutls_x509_privkey_deinit(k);
    if (cak)
        gnutls_x509_privkey_deinit(cak);
    return rc;
}
