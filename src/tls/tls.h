/*
 * tls.h: what Arbiter needs of TLS beyond what libmicrohttpd (the
 * controller's API, the agents' log servers) and libcurl (every client) do
 * themselves, on GnuTLS; no cryptography is written here.
 *
 *   - server files (etcd's flag names: --cert-file, --key-file,
 *     --trusted-ca-file, --client-cert-auth) read into memory for
 *     libmicrohttpd's MHD_OPTION_HTTPS_MEM_*, and checked at start: a key
 *     that is not its certificate's, an expired certificate or a CA file
 *     that holds no certificate is refused with the file's name;
 *   - the identity a verified client certificate carries (tls_peer_verify):
 *     the chain checked against the trusted CA, the certificate's purpose
 *     TLS client, and its subject read as the principal (CN the name, O the
 *     role, OU the team), the way Kubernetes reads CN and O;
 *   - client files (--cacert / ARBITER_CACERT, --cert-file, --key-file) as
 *     one struct every libcurl client applies (tls_client_apply);
 *   - the cluster PKI of `arbiter init` (pki.c): a CA, the controller's
 *     server certificate with SANs, client certificates for nodes and users.
 *
 * Return convention (arbiter.h): 0 or a negative errno with text in err.
 */
#ifndef ARB_TLS_TLS_H
#define ARB_TLS_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "arbiter/arbiter.h"

/* ---- servers ------------------------------------------------------------------------ */

typedef struct tls_files {
    const char *cert_file; /* --cert-file: PEM certificate (chain) served; NULL: plain HTTP */
    const char *key_file;  /* --key-file: its PEM private key */
    const char *ca_file;   /* --trusted-ca-file: client certificates are checked against it */
    bool client_cert_auth; /* --client-cert-auth: every request needs a client certificate */
} tls_files_t;

typedef struct tls_server {
    char *cert, *key, *ca; /* PEM text, malloc'd; ca NULL without --trusted-ca-file */
    bool client_cert_auth;
} tls_server_t;

/* Read and check the files of f (cert_file NULL: *out zeroed, plain HTTP).
 * Messages name the flag and the file. Free with tls_server_free. */
int tls_server_load(const tls_files_t *f, tls_server_t *out, arb_err_t *err);
void tls_server_free(tls_server_t *t);

/* The principal a client certificate names. */
typedef struct tls_peer {
    char cn[256]; /* the node's or user's name */
    char o[64];   /* the role: admin, user or agent */
    char ou[256]; /* the team ("" when absent) */
} tls_peer_t;

/* The client certificate of a TLS session (a gnutls_session_t, as
 * libmicrohttpd's MHD_CONNECTION_INFO_GNUTLS_SESSION gives it): 1 none was
 * presented; 0 it chains to the session's trusted CA, is valid now, is
 * meant for TLS clients, and *peer holds its subject; -EACCES it is not
 * (why in err). */
int tls_peer_verify(void *session, tls_peer_t *peer, arb_err_t *err);

/* ---- clients ------------------------------------------------------------------------ */

typedef struct tls_client {
    const char *cacert;    /* CA bundle the server must chain to (NULL: the system's) */
    const char *cert_file; /* a client certificate to present (NULL: none) */
    const char *key_file;  /* its key (NULL: in cert_file) */
} tls_client_t;

/* Fill t from the environment where the caller gave nothing:
 * ARBITER_CACERT, ARBITER_CERT_FILE, ARBITER_KEY_FILE. */
void tls_client_from_env(tls_client_t *t);
/* Check the files can be read and parse (a clear error at start rather
 * than a TLS failure at the first request). */
int tls_client_check(const tls_client_t *t, arb_err_t *err);
/* Set them on a libcurl easy handle (a CURL *); t NULL or empty: nothing. */
void tls_client_apply(const tls_client_t *t, void *curl);

/* ---- listeners ---------------------------------------------------------------------- */

/* Is host (an IPv4 address) a loopback address (127.0.0.0/8)? */
bool tls_is_loopback(const char *host);

/* ---- secrets ----------------------------------------------------------------------- */

/* Do a and b hold the same text? Time independent of where they differ and
 * of either length (both are hashed with SHA-256 first, then compared
 * whole). */
bool tls_secret_equal(const char *a, const char *b);
/* SHA-256 of s into out (32 bytes). */
void tls_sha256(const char *s, size_t n, unsigned char out[32]);
/* Compare n bytes in time independent of their contents. */
bool tls_mem_equal(const void *a, const void *b, size_t n);

/* ---- the cluster PKI (pki.c) ---------------------------------------------------------- */

/* Make DIR/ca.crt and DIR/ca.key (mode 0600): a new cluster CA, ECDSA
 * P-256, valid ten years. -EEXIST when DIR already holds a CA. */
int pki_ca_make(const char *dir, arb_err_t *err);

typedef struct pki_leaf {
    const char *base;         /* files DIR/BASE.crt and DIR/BASE.key */
    const char *cn, *o, *ou;  /* subject: name, role, team (o, ou may be NULL) */
    bool server, client;      /* extended key usage: TLS server, TLS client */
    const char *const *hosts; /* subject alternative names (DNS names or IPv4) */
    int nhosts;
    int days; /* validity */
} pki_leaf_t;

/* Make a key and a certificate signed by DIR's CA (DIR/ca.crt, ca.key).
 * -EEXIST when DIR/BASE.crt exists (nothing is overwritten). */
int pki_leaf_make(const char *dir, const pki_leaf_t *l, arb_err_t *err);

/* Write text to path with mode, refusing to replace a file (O_EXCL). */
int pki_write_new(const char *path, const char *text, size_t n, int mode, arb_err_t *err);

#endif
