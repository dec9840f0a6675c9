/*
 * etcd.c: the etcd v3 JSON-gateway client (etcd.h): one libcurl easy
 * handle kept alive per client, member rotation with bounded retries,
 * base64 and int64-as-string codecs, and the few requests Arbiter needs:
 * range (one key, or a prefix in pages), put, delete, txn, and leases.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/etcd.h"
#include "util/buf.h"
#include "util/mtime.h"

struct etcd {
    CURL *c;
    struct curl_slist *hdrs;
    char *members[ETCD_MAX_MEMBERS]; /* "http://h:p" */
    int n, cur;
    int request_ms, retry_ms;
    arb_buf_t rx; /* the answer being read */
    int watch;    /* etcd_watch_delete: 1 deleted, -1 cancelled, 0 nothing yet */
};

/* ---- base64 -------------------------------------------------------------------------- */

static const char b64c[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

json_t *etcd_b64(const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t olen = 4 * ((n + 2) / 3);
    char *o = malloc(olen + 1), *w = o;
    json_t *j;

    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        *w++ = b64c[(v >> 18) & 63];
        *w++ = b64c[(v >> 12) & 63];
        *w++ = i + 1 < n ? b64c[(v >> 6) & 63] : '=';
        *w++ = i + 2 < n ? b64c[v & 63] : '=';
    }
    *w = '\0';
    j = json_stringn(o, olen);
    free(o);
    return j;
}

static int b64v(int ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

char *etcd_unb64(const char *txt, size_t *n)
{
    size_t len = strlen(txt);
    char *o = malloc(len / 4 * 3 + 4);
    size_t k = 0;
    unsigned v = 0;
    int bits = 0;

    if (!o)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (txt[i] == '=')
            break;
        int d = b64v((unsigned char)txt[i]);
        if (d < 0) {
            free(o);
            return NULL;
        }
        v = (v << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (char)((v >> bits) & 0xff);
        }
    }
    o[k] = '\0';
    if (n)
        *n = k;
    return o;
}

/* ---- small JSON helpers ------------------------------------------------------------------ */

json_t *etcd_i64(int64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    return json_string(b);
}

int64_t etcd_get_i64(const json_t *o, const char *field)
{
    json_t *v = json_object_get(o, field);

    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    return 0;
}

int64_t etcd_header_rev(const json_t *resp)
{
    return etcd_get_i64(json_object_get(resp, "header"), "revision");
}

char *etcd_prefix_end(const char *prefix, size_t plen, size_t *n)
{
    char *e = malloc(plen + 1);

    if (!e)
        return NULL;
    memcpy(e, prefix, plen);
    /* Increment the last byte that is not 0xff, dropping those after it. */
    while (plen > 0 && (unsigned char)e[plen - 1] == 0xff)
        plen--;
    if (plen == 0) {
        e[0] = '\0';
        *n = 1;
        return e;
    }
    e[plen - 1] = (char)((unsigned char)e[plen - 1] + 1);
    *n = plen;
    return e;
}

json_t *etcd_op_put(const char *key, const void *val, size_t n, int64_t lease)
{
    json_t *p =
        json_pack("{s:o,s:o}", "key", etcd_b64(key, strlen(key)), "value", etcd_b64(val, n));
    if (p && lease)
        json_object_set_new(p, "lease", etcd_i64(lease));
    return p ? json_pack("{s:o}", "request_put", p) : NULL;
}

json_t *etcd_op_del(const char *key)
{
    return json_pack("{s:{s:o}}", "request_delete_range", "key", etcd_b64(key, strlen(key)));
}

json_t *etcd_op_get(const char *key)
{
    return json_pack("{s:{s:o}}", "request_range", "key", etcd_b64(key, strlen(key)));
}

json_t *etcd_cmp_create(const char *key, int64_t rev)
{
    return json_pack("{s:o,s:s,s:s,s:o}", "key", etcd_b64(key, strlen(key)), "target", "CREATE",
                     "result", "EQUAL", "create_revision", etcd_i64(rev));
}

/* ---- the client ---------------------------------------------------------------------------- */

static size_t on_data(char *p, size_t sz, size_t nm, void *arg)
{
    etcd_t *e = arg;
    return arb_buf_write_cb(p, sz, nm, &e->rx);
}

/* HOST:PORT (LEN bytes at P, a ':' known inside): a host before the last ':' and a
 * port of digits only, 1..65535 after it. */
static bool member_port_ok(const char *p, size_t len)
{
    const char *colon = p + len - 1;
    long port = 0;

    while (*colon != ':')
        colon--;
    if (colon == p || colon == p + len - 1 || p + len - colon > 6)
        return false;
    for (const char *q = colon + 1; q < p + len; q++) {
        if (*q < '0' || *q > '9')
            return false;
        port = port * 10 + (*q - '0');
    }
    return port >= 1 && port <= 65535;
}

int etcd_open(const char *members, etcd_t **out, arb_err_t *err)
{
    etcd_t *e = calloc(1, sizeof *e);
    const char *p = members;
    int rc = 0;

    if (!e)
        return arb_errf(err, -ENOMEM, "out of memory");
    e->request_ms = 2000;
    e->retry_ms = 6000;
    while (rc == 0 && p && *p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (strncmp(p, "http://", 7) == 0) {
            p += 7;
            len -= 7;
        }
        if (len == 0 || !memchr(p, ':', len) || memchr(p, '/', len) || memchr(p, '?', len))
            rc = arb_errf(err, -EINVAL,
                          "etcd member '%.*s': use HOST:PORT, e.g. 127.0.0.1:2379 (members are "
                          "separated by commas)",
                          (int)len, p);
        else if (!member_port_ok(p, len))
            rc = arb_errf(err, -EINVAL,
                          "etcd member '%.*s': the port must be a number 1..65535, e.g. "
                          "127.0.0.1:2379",
                          (int)len, p);
        else if (e->n == ETCD_MAX_MEMBERS)
            rc = arb_errf(err, -EINVAL, "etcd members: at most %d", ETCD_MAX_MEMBERS);
        else if (!(e->members[e->n] = malloc(len + 8)))
            rc = arb_errf(err, -ENOMEM, "out of memory");
        else
            snprintf(e->members[e->n++], len + 8, "http://%.*s", (int)len, p);
        p = comma ? comma + 1 : NULL;
    }
    if (rc == 0 && e->n == 0)
        rc = arb_errf(err, -EINVAL, "etcd members: none given; use HOST:PORT[,HOST:PORT...]");
    if (rc == 0 && !(e->c = curl_easy_init()))
        rc = arb_errf(err, -ENOMEM, "cannot start libcurl");
    if (rc == 0)
        e->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (rc < 0) {
        etcd_close(e);
        return rc;
    }
    curl_easy_setopt(e->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e->c, CURLOPT_HTTPHEADER, e->hdrs);
    curl_easy_setopt(e->c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e->c, CURLOPT_WRITEDATA, e);
    curl_easy_setopt(e->c, CURLOPT_TCP_NODELAY, 1L);
    *out = e;
    return 0;
}

void etcd_close(etcd_t *e)
{
    if (!e)
        return;
    if (e->c)
        curl_easy_cleanup(e->c);
    curl_slist_free_all(e->hdrs);
    for (int i = 0; i < e->n; i++)
        free(e->members[i]);
    arb_buf_free(&e->rx);
    free(e);
}

void etcd_set_timeouts(etcd_t *e, int request_ms, int retry_ms)
{
    e->request_ms = request_ms;
    e->retry_ms = retry_ms;
}

const char *etcd_member(const etcd_t *e)
{
    return e->members[e->cur];
}

int etcd_nmembers(const etcd_t *e)
{
    return e->n;
}

int etcd_call(etcd_t *e, const char *path, json_t *body, json_t **resp, arb_err_t *err)
{
    char *txt = body ? json_dumps(body, JSON_COMPACT) : NULL;
    char url[512], last[300] = "";
    int64_t deadline = arb_mono_ms() + e->retry_ms;
    int rc = -EIO, tries = 0;

    json_decref(body);
    *resp = NULL;
    if (!txt)
        return arb_errf(err, -ENOMEM, "out of memory");
    curl_easy_setopt(e->c, CURLOPT_POSTFIELDS, txt);
    curl_easy_setopt(e->c, CURLOPT_TIMEOUT_MS, (long)e->request_ms);
    curl_easy_setopt(e->c, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(e->request_ms < 1000 ? e->request_ms : 1000));
    for (;;) {
        long status = 0;
        snprintf(url, sizeof url, "%s%s", e->members[e->cur], path);
        curl_easy_setopt(e->c, CURLOPT_URL, url);
        arb_buf_reset(&e->rx);
        CURLcode cc = curl_easy_perform(e->c);
        if (e->rx.oom) {
            rc = arb_errf(err, -ENOMEM, "out of memory reading etcd's answer");
            break;
        }
        if (cc == CURLE_OK)
            curl_easy_getinfo(e->c, CURLINFO_RESPONSE_CODE, &status);
        if (cc == CURLE_OK && status < 500) {
            json_t *j = json_loadb(e->rx.p ? e->rx.p : "", e->rx.len, 0, NULL);
            if (!j) {
                rc = arb_errf(err, -EIO, "etcd %s%s: the answer is not JSON", e->members[e->cur],
                              path);
            } else if (status >= 300) {
                const char *m = json_string_value(json_object_get(j, "message"));
                if (!m)
                    m = json_string_value(json_object_get(j, "error"));
                rc = arb_errf(err, -EINVAL, "etcd %s%s: HTTP %ld: %s", e->members[e->cur], path,
                              status, m ? m : "no message");
                json_decref(j);
            } else {
                *resp = j;
                rc = 0;
            }
            break;
        }
        if (cc != CURLE_OK)
            snprintf(last, sizeof last, "%s: %s", e->members[e->cur], curl_easy_strerror(cc));
        else
            snprintf(last, sizeof last, "%s: HTTP %ld: %.200s", e->members[e->cur], status,
                     e->rx.p ? e->rx.p : "");
        e->cur = (e->cur + 1) % e->n; /* the next member */
        tries++;
        if (arb_mono_ms() >= deadline) {
            rc = arb_errf(err, -EIO,
                          "etcd: no member answered %s within %d ms (last: %s); check that the "
                          "etcd cluster is up and has a leader",
                          path, e->retry_ms, last);
            break;
        }
        if (tries % e->n == 0) { /* a whole round failed: give the cluster a moment */
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    curl_easy_setopt(e->c, CURLOPT_POSTFIELDS, NULL);
    free(txt);
    return rc;
}

/* ---- watch ---------------------------------------------------------------------------------- */

/* Look at each complete line (one gateway message) in e->rx; drop them. */
static void watch_lines(etcd_t *e)
{
    char *nl;

    while (e->watch == 0 && (nl = memchr(e->rx.p, '\n', e->rx.len)) != NULL) {
        size_t n = (size_t)(nl - e->rx.p);
        json_t *m = json_loadb(e->rx.p, n, 0, NULL);
        json_t *r = json_object_get(m, "result");
        size_t i;
        json_t *ev;

        if (json_is_true(json_object_get(r, "canceled")))
            e->watch = -1;
        json_array_foreach(json_object_get(r, "events"), i, ev)
        {
            const char *type = json_string_value(json_object_get(ev, "type"));
            if (type && strcmp(type, "DELETE") == 0) /* absent: a put */
                e->watch = 1;
        }
        json_decref(m);
        memmove(e->rx.p, nl + 1, e->rx.len - n - 1);
        e->rx.len -= n + 1;
        e->rx.p[e->rx.len] = '\0';
    }
}

static size_t on_watch(char *p, size_t sz, size_t nm, void *arg)
{
    etcd_t *e = arg;
    size_t n = on_data(p, sz, nm, arg);

    if (n == 0)
        return 0;
    watch_lines(e);
    return e->watch != 0 ? 0 : n; /* 0 ends the transfer: we know enough */
}

int etcd_watch_delete(etcd_t *e, const char *key, int64_t from_rev, int ms, arb_err_t *err)
{
    json_t *req = json_pack("{s:{s:o,s:o}}", "create_request", "key", etcd_b64(key, strlen(key)),
                            "start_revision", etcd_i64(from_rev));
    char *txt = req ? json_dumps(req, JSON_COMPACT) : NULL;
    char url[512];
    long status = 0;
    int rc;

    json_decref(req);
    if (!txt)
        return arb_errf(err, -ENOMEM, "out of memory");
    snprintf(url, sizeof url, "%s/v3/watch", e->members[e->cur]);
    curl_easy_setopt(e->c, CURLOPT_URL, url);
    curl_easy_setopt(e->c, CURLOPT_POSTFIELDS, txt);
    curl_easy_setopt(e->c, CURLOPT_TIMEOUT_MS, (long)ms);
    curl_easy_setopt(e->c, CURLOPT_CONNECTTIMEOUT_MS, (long)(ms < 1000 ? ms : 1000));
    curl_easy_setopt(e->c, CURLOPT_WRITEFUNCTION, on_watch);
    arb_buf_reset(&e->rx);
    e->watch = 0;
    CURLcode cc = curl_easy_perform(e->c);
    curl_easy_getinfo(e->c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(e->c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e->c, CURLOPT_POSTFIELDS, NULL);
    free(txt);
    if (e->watch == 1)
        rc = 1;
    else if (e->watch == -1)
        rc = arb_errf(err, -EINVAL, "etcd %s: watch on '%s' cancelled (revision %lld compacted?)",
                      e->members[e->cur], key, (long long)from_rev);
    else if (e->rx.oom)
        rc = arb_errf(err, -ENOMEM, "out of memory reading etcd's watch");
    else if (cc == CURLE_OPERATION_TIMEDOUT && status == 200)
        rc = 0; /* the stream was open all along: nothing was deleted */
    else {
        rc = arb_errf(err, -EIO, "etcd %s: watch: %s (HTTP %ld)", e->members[e->cur],
                      curl_easy_strerror(cc), status);
        e->cur = (e->cur + 1) % e->n;
    }
    return rc;
}

/* ---- requests ----------------------------------------------------------------------------------
 */

void etcd_kv_free(etcd_kv_t *kv)
{
    free(kv->key);
    free(kv->val);
    memset(kv, 0, sizeof *kv);
}

int etcd_kv_parse(const json_t *j, etcd_kv_t *kv)
{
    const char *k = json_string_value(json_object_get(j, "key"));
    const char *v = json_string_value(json_object_get(j, "value"));

    memset(kv, 0, sizeof *kv);
    kv->key = etcd_unb64(k ? k : "", &kv->klen);
    kv->val = etcd_unb64(v ? v : "", &kv->vlen);
    if (!kv->key || !kv->val) {
        etcd_kv_free(kv);
        return -EBADMSG;
    }
    kv->create_rev = etcd_get_i64(j, "create_revision");
    kv->mod_rev = etcd_get_i64(j, "mod_revision");
    kv->version = etcd_get_i64(j, "version");
    kv->lease = etcd_get_i64(j, "lease");
    return 0;
}

int etcd_get(etcd_t *e, const char *key, etcd_kv_t *kv, int64_t *rev, arb_err_t *err)
{
    json_t *resp = NULL;
    int rc = etcd_call(e, "/v3/kv/range", json_pack("{s:o}", "key", etcd_b64(key, strlen(key))),
                       &resp, err);

    if (rc < 0)
        return rc;
    if (rev)
        *rev = etcd_header_rev(resp);
    json_t *kvs = json_object_get(resp, "kvs");
    if (json_array_size(kvs) == 0)
        rc = -ENOENT;
    else if (etcd_kv_parse(json_array_get(kvs, 0), kv) < 0)
        rc = arb_errf(err, -EBADMSG, "etcd: key '%s': bad base64 in the answer", key);
    json_decref(resp);
    return rc;
}

int etcd_scan(etcd_t *e, const char *prefix, int page, etcd_scan_fn fn, void *arg, int64_t *rev,
              arb_err_t *err)
{
    size_t plen = strlen(prefix), elen = 0, klen = plen;
    char *end = etcd_prefix_end(prefix, plen, &elen);
    char *from = malloc(plen + 1);
    int64_t at = 0;
    int rc = 0;
    bool more = true;

    if (!end || !from) {
        free(end);
        free(from);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    memcpy(from, prefix, plen + 1);
    while (rc == 0 && more) {
        json_t *req = json_pack("{s:o,s:o,s:o}", "key", etcd_b64(from, klen), "range_end",
                                etcd_b64(end, elen), "limit", etcd_i64(page));
        json_t *resp = NULL;
        if (at)
            json_object_set_new(req, "revision", etcd_i64(at));
        if ((rc = etcd_call(e, "/v3/kv/range", req, &resp, err)) < 0)
            break;
        if (!at)
            at = etcd_header_rev(resp);
        more = json_is_true(json_object_get(resp, "more"));
        json_t *kvs = json_object_get(resp, "kvs");
        size_t i;
        json_t *it;
        etcd_kv_t kv = {0};
        json_array_foreach(kvs, i, it)
        {
            if (etcd_kv_parse(it, &kv) < 0) {
                rc = arb_errf(err, -EBADMSG, "etcd: bad base64 in a range answer");
                break;
            }
            rc = fn(arg, &kv);
            if (rc == 0 && i + 1 == json_array_size(kvs)) { /* the next page starts after it */
                char *nf = realloc(from, kv.klen + 2);
                if (!nf) {
                    rc = arb_errf(err, -ENOMEM, "out of memory");
                } else {
                    from = nf;
                    memcpy(from, kv.key, kv.klen);
                    from[kv.klen] = '\0'; /* key + "\0": the smallest key after it */
                    klen = kv.klen + 1;
                }
            }
            etcd_kv_free(&kv);
            if (rc != 0)
                break;
        }
        if (json_array_size(kvs) == 0)
            more = false;
        json_decref(resp);
    }
    if (rev)
        *rev = at;
    free(end);
    free(from);
    return rc;
}

int etcd_put(etcd_t *e, const char *key, const void *val, size_t n, int64_t lease, int64_t *rev,
             arb_err_t *err)
{
    json_t *req =
        json_pack("{s:o,s:o}", "key", etcd_b64(key, strlen(key)), "value", etcd_b64(val, n));
    json_t *resp = NULL;
    int rc;

    if (req && lease)
        json_object_set_new(req, "lease", etcd_i64(lease));
    rc = etcd_call(e, "/v3/kv/put", req, &resp, err);
    if (rc == 0 && rev)
        *rev = etcd_header_rev(resp);
    json_decref(resp);
    return rc;
}

int etcd_del(etcd_t *e, const char *key, arb_err_t *err)
{
    json_t *resp = NULL;
    int rc = etcd_call(e, "/v3/kv/deleterange",
                       json_pack("{s:o}", "key", etcd_b64(key, strlen(key))), &resp, err);
    json_decref(resp);
    return rc;
}

int etcd_txn(etcd_t *e, json_t *compare, json_t *success, json_t *failure, bool *ok, json_t **resp,
             arb_err_t *err)
{
    json_t *req = json_object();
    json_t *r = NULL;
    int rc;

    if (compare)
        json_object_set_new(req, "compare", compare);
    if (success)
        json_object_set_new(req, "success", success);
    if (failure)
        json_object_set_new(req, "failure", failure);
    rc = etcd_call(e, "/v3/kv/txn", req, &r, err);
    if (rc == 0)
        *ok = json_is_true(json_object_get(r, "succeeded")); /* absent: the compares failed */
    if (rc == 0 && resp)
        *resp = r;
    else
        json_decref(r);
    return rc;
}

int etcd_lease_grant(etcd_t *e, int ttl, int64_t *id, arb_err_t *err)
{
    json_t *resp = NULL;
    int rc = etcd_call(e, "/v3/lease/grant", json_pack("{s:o}", "TTL", etcd_i64(ttl)), &resp, err);

    if (rc == 0) {
        *id = etcd_get_i64(resp, "ID");
        if (*id == 0)
            rc = arb_errf(err, -EIO, "etcd lease grant: no lease ID in the answer");
    }
    json_decref(resp);
    return rc;
}

int etcd_lease_keepalive(etcd_t *e, int64_t id, int64_t *ttl, arb_err_t *err)
{
    json_t *resp = NULL;
    /* The gateway streams: one request, one {"result": {...}}, then EOF. */
    int rc =
        etcd_call(e, "/v3/lease/keepalive", json_pack("{s:o}", "ID", etcd_i64(id)), &resp, err);

    if (rc == 0)
        *ttl = etcd_get_i64(json_object_get(resp, "result"), "TTL"); /* absent: expired */
    json_decref(resp);
    return rc;
}

int etcd_lease_revoke(etcd_t *e, int64_t id, arb_err_t *err)
{
    json_t *resp = NULL;
    arb_err_t e2 = {{0}};
    int rc = etcd_call(e, "/v3/lease/revoke", json_pack("{s:o}", "ID", etcd_i64(id)), &resp, &e2);

    json_decref(resp);
    if (rc == -EINVAL && strstr(e2.msg, "not found")) /* already gone */
        return 0;
    if (rc < 0 && err)
        *err = e2;
    return rc;
}
