/*
 * fuzz_etcd.c: libFuzzer target for what the etcd backend parses: etcd's
 * gateway answers (base64 keys and values, int64 fields as strings, range
 * answers), the member list and the store location ("etcd://..."). The
 * first byte picks which; the rest is the input. Checked: no crash or
 * sanitizer report; base64 survives decode(encode(x)) == x; a refused
 * location says what to use instead; nothing connects (clients connect
 * lazily, and nothing here sends a request).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/etcd.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_etcd: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 4;
    char *s = malloc(size);
    arb_err_t err = {{0}};
    size_t n = 0;

    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    if (mode == 0) { /* base64 from etcd, and back */
        char *raw = etcd_unb64(s, &n);
        if (raw) {
            json_t *b = etcd_b64(raw, n);
            char *again = b ? etcd_unb64(json_string_value(b), &n) : NULL;
            check(!b || (again && memcmp(again, raw, n) == 0), "base64 round trip");
            free(again);
            json_decref(b);
            free(raw);
        }
        /* encode the raw bytes, decode them back */
        json_t *e = etcd_b64(data + 1, size - 1);
        char *d = e ? etcd_unb64(json_string_value(e), &n) : NULL;
        check(!e || (d && n == size - 1 && memcmp(d, data + 1, n) == 0), "encode/decode");
        free(d);
        json_decref(e);
    } else if (mode == 1) { /* a range answer */
        json_t *j = json_loadb(s, size - 1, 0, NULL);
        size_t i;
        json_t *it;
        (void)etcd_header_rev(j);
        json_array_foreach(json_object_get(j, "kvs"), i, it)
        {
            etcd_kv_t kv = {0};
            if (etcd_kv_parse(it, &kv) == 0)
                check(kv.key && kv.val && kv.key[kv.klen] == '\0', "kv not NUL-terminated");
            etcd_kv_free(&kv);
        }
        json_decref(j);
    } else if (mode == 2) { /* a member list */
        etcd_t *e = NULL;
        int rc = etcd_open(s, &e, &err);
        check(rc == 0 || (rc == -EINVAL && err.msg[0]), "member list refused without text");
        check(rc != 0 || etcd_nmembers(e) > 0, "no members");
        etcd_close(e);
    } else { /* a store location */
        int rc = store_etcd_check(s, &err);
        check(rc == 0 || (rc == -EINVAL && err.msg[0]), "location refused without text");
    }
    free(s);
    return 0;
}
