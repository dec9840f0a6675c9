/*
 * etcd.h: a small etcd v3 client over etcd's JSON gateway (grpc-gateway),
 * with libcurl and jansson; no gRPC. It is what the etcd store backend
 * (store_etcd.c) and the leader election (src/ha) stand on.
 *
 * The gateway's habits, handled here so callers need not know them:
 *   - keys and values travel base64-encoded;
 *   - int64 fields (revisions, lease ids, TTLs) are JSON strings;
 *   - fields at their zero value are left out: a txn whose compares failed
 *     has no "succeeded", a keepalive of an expired lease has no "TTL", an
 *     empty range has no "kvs";
 *   - errors come back as {"error", "message", "code"} with a 4xx/5xx status.
 *
 * Members: the client holds the member list ("h:p,h:p,...") and sends each
 * request to the current member; on a connection failure, a timeout or a
 * 5xx it rotates to the next member and retries, for at most retry_ms in
 * all (a SIGKILLed etcd leader takes about 3 s to be replaced). 4xx answers
 * (a malformed request, too many ops in a txn) are not retried. Retrying
 * is safe for what this project sends: puts of whole values and txns
 * guarded by compares are idempotent; a lease granted by a request whose
 * answer was lost simply expires.
 *
 * Threads: one etcd_t is used by one thread at a time (each caller that
 * needs its own connection opens its own client). Return convention:
 * arbiter.h; -EIO when no member answered in time, -EINVAL when etcd
 * refused the request (its message in err).
 */
#ifndef ARB_ETCD_H
#define ARB_ETCD_H

#include <jansson.h>

#include "arbiter/arbiter.h"

typedef struct etcd etcd_t;

#define ETCD_MAX_MEMBERS 16

/* One key-value as range returns it. key and val are malloc'd and
 * NUL-terminated (free with etcd_kv_free). */
typedef struct etcd_kv {
    char *key, *val;
    size_t klen, vlen;
    int64_t create_rev, mod_rev, version, lease;
} etcd_kv_t;

/* Open a client for members "HOST:PORT[,HOST:PORT...]" (an "http://" in
 * front of each is allowed). Connects lazily. Free with etcd_close. */
int etcd_open(const char *members, etcd_t **out, arb_err_t *err);
void etcd_close(etcd_t *e);
/* Per-request timeout and the total time spent retrying over members. */
void etcd_set_timeouts(etcd_t *e, int request_ms, int retry_ms);
/* The member requests go to now ("http://h:p"), and how many there are. */
const char *etcd_member(const etcd_t *e);
int etcd_nmembers(const etcd_t *e);

/* POST body (taken: decref'd here) to path ("/v3/kv/range"), rotating over
 * members as above. *resp is the parsed answer (caller decrefs). */
int etcd_call(etcd_t *e, const char *path, json_t *body, json_t **resp, arb_err_t *err);

/* ---- helpers for building and reading gateway JSON ---------------------------------- */

/* New JSON strings holding base64 of bytes, and of an int64 in decimal. */
json_t *etcd_b64(const void *p, size_t n);
json_t *etcd_i64(int64_t v);
/* An int64 field (string or number); 0 when absent, as the gateway means. */
int64_t etcd_get_i64(const json_t *o, const char *field);
/* Decode base64 text into a malloc'd NUL-terminated buffer; NULL on bad input. */
char *etcd_unb64(const char *txt, size_t *n);
/* The revision in resp's "header" (0 when absent). */
int64_t etcd_header_rev(const json_t *resp);
/* The end of the range holding every key that starts with prefix (the
 * prefix with its last byte incremented; "\0" for the empty prefix, which
 * etcd reads as "to the end"). Malloc'd; *n its length. */
char *etcd_prefix_end(const char *prefix, size_t plen, size_t *n);

/* Txn operations (new references, for the arrays of etcd_txn). */
json_t *etcd_op_put(const char *key, const void *val, size_t n, int64_t lease);
json_t *etcd_op_del(const char *key);
json_t *etcd_op_get(const char *key);
/* Compare: key's create_revision == rev (0: the key does not exist). */
json_t *etcd_cmp_create(const char *key, int64_t rev);

/* ---- requests ---------------------------------------------------------------------------- */

/* One key: 0 with *kv filled (etcd_kv_free), -ENOENT when absent. *rev
 * (optional) the store's revision at the read. */
int etcd_get(etcd_t *e, const char *key, etcd_kv_t *kv, int64_t *rev, arb_err_t *err);
void etcd_kv_free(etcd_kv_t *kv);
/* One element of a range answer's "kvs" into *kv (etcd_kv_free); -EBADMSG
 * when key or value is not base64. */
int etcd_kv_parse(const json_t *j, etcd_kv_t *kv);
/* Every key starting with prefix, in key order, read in pages of `page`
 * keys at one revision (the first page's), so the scan is a snapshot. fn
 * returning non-zero stops the scan and is returned. */
typedef int (*etcd_scan_fn)(void *arg, const etcd_kv_t *kv);
int etcd_scan(etcd_t *e, const char *prefix, int page, etcd_scan_fn fn, void *arg, int64_t *rev,
              arb_err_t *err);
int etcd_put(etcd_t *e, const char *key, const void *val, size_t n, int64_t lease, int64_t *rev,
             arb_err_t *err);
int etcd_del(etcd_t *e, const char *key, arb_err_t *err);
/* A txn: compare, success and failure are arrays (taken; NULL for none).
 * *ok tells which branch ran; *resp (optional) the whole answer. */
int etcd_txn(etcd_t *e, json_t *compare, json_t *success, json_t *failure, bool *ok, json_t **resp,
             arb_err_t *err);

/* Watch one key from revision from_rev (inclusive) for up to ms: a streaming
 * POST to /v3/watch read as it arrives. 1 as soon as the key is deleted
 * (or was, at or after from_rev), 0 when ms passed without a delete (puts
 * are ignored), -EIO when the member cannot be reached (the next call tries
 * the next member), -EINVAL when etcd cancelled the watch (compacted). */
int etcd_watch_delete(etcd_t *e, const char *key, int64_t from_rev, int ms, arb_err_t *err);

/* Leases: grant (TTL in seconds), one keepalive (*ttl 0 when the lease is
 * gone), revoke (absent lease: 0). */
int etcd_lease_grant(etcd_t *e, int ttl, int64_t *id, arb_err_t *err);
int etcd_lease_keepalive(etcd_t *e, int64_t id, int64_t *ttl, arb_err_t *err);
int etcd_lease_revoke(etcd_t *e, int64_t id, arb_err_t *err);

/* ---- the store backend's location (store_etcd.c) ------------------------------------------ */

/* Check "etcd://MEMBERS[/PREFIX][?fence=REV&max-ops=N]" (or what follows
 * "etcd:") without connecting: 0, or -EINVAL naming the part and the fix. */
int store_etcd_check(const char *where, arb_err_t *err);

#endif
