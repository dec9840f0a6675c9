/*
 * fuzz_load_body.c: libFuzzer target for the API's decoder of a balancer's
 * load report (POST /v1/services/{name}/load; src/api/enc_service.c,
 * api_load_decode), fed what the router would hand it: the body parsed as
 * JSON with duplicate keys refused.
 *
 * Checked: no crash, hang, leak or sanitizer report on any input; a
 * refusal is -EINVAL with a message and allocates nothing; a success gives
 * one entry per listed replica, each with an address and counts in
 * 0..1e9.
 *
 * Seed corpus: fuzz/seeds/fuzz_load_body (reports as `arbiter lb
 * --service` sends them, and refused ones).
 */
#include <stdio.h>
#include <stdlib.h>

#include "api/api_int.h"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_load_body: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_replica_load_t *v = NULL;
    arb_err_t err = {{0}};
    json_t *body;
    int n = -1;

    if (size > (1u << 16))
        return 0;
    if (!(body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL)))
        return 0;
    int rc = api_load_decode(body, &v, &n, &err);
    if (rc < 0) {
        check(rc == -EINVAL || rc == -ENOMEM, "an error other than -EINVAL/-ENOMEM", err.msg);
        check(err.msg[0] != '\0', "a refusal without a message", NULL);
        check(v == NULL && n == 0, "a refusal left entries", err.msg);
    } else {
        check(n == (int)json_array_size(json_object_get(body, "replicas")), "entries lost", NULL);
        for (int i = 0; i < n; i++) {
            check(v[i].address != NULL, "an entry without an address", NULL);
            check(v[i].inflight >= 0 && v[i].inflight <= 1e9, "inflight out of range", NULL);
            check(v[i].queue >= 0 && v[i].queue <= 1e9, "queue out of range", NULL);
        }
    }
    free(v);
    json_decref(body);
    return 0;
}
