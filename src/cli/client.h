/*
 * client.h: what the client verbs (client.c, logs.c) share: one HTTP
 * request to the controller at ARBITER_URL with ARBITER_TOKEN, and the
 * exit codes they document.
 */
#ifndef ARB_CLI_CLIENT_H
#define ARB_CLI_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "tls/tls.h"

#define EXIT_REFUSED 1     /* the controller refused the request */
#define EXIT_USAGE 2       /* bad usage */
#define EXIT_UNREACHABLE 3 /* the controller could not be reached */

/* One request: the HTTP status, or -1 when the controller cannot be
 * reached (message printed). *out (optional) gets the parsed JSON reply or
 * NULL; *raw (optional) the body as it came (free it). */
long cli_http(const char *method, const char *path, const char *body, size_t n, const char *ctype,
              json_t **out, char **raw);
/* The same with one extra header line ("Idempotency-Key: K"; NULL none). */
long cli_http_hdr(const char *method, const char *path, const char *body, size_t n,
                  const char *ctype, const char *extra, json_t **out, char **raw);
/* The TLS files of the environment (ARBITER_CACERT, ARBITER_CERT_FILE,
 * ARBITER_KEY_FILE), read and checked once; a bad one exits 2 with why. */
const tls_client_t *cli_tls(void);
/* Print the controller's error message from reply; returns EXIT_REFUSED. */
int cli_refused(long status, json_t *reply);

#endif
