/*
 * fuzz_service_spec.c: libFuzzer target for the service keys of a job spec
 * (src/spec/service_spec.c), from a memory buffer.
 *
 * Checked: no crash, hang or sanitizer report on any input; a failure
 * returns -EINVAL/-ERANGE/-ENOMEM with a message naming the file; a
 * success that says "service" has a port and replica counts in range, and
 * leaves none of the service keys in the mapping.
 *
 * Seed inputs: fuzz/seeds/fuzz_service_spec/ (a service and a batch spec).
 */
#include <libfyaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/service_spec.h"

#define NAME "fuzz.yaml"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_service_spec: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const keys[] = {"kind", "port", "health", "minReplicas", "autoscale"};
    arb_cluster_t c;
    arb_err_t err;
    sv_doc_t d;
    spec_service_t svc;

    if (size > (1u << 14))
        return 0;
    memset(&err, 0, sizeof err);
    if (sv_doc_open(NAME, (const char *)data, size, &d, &err) < 0)
        return 0;
    arb_cluster_init(&c);
    sx_t x = {.file = NAME, .err = &err, .c = &c, .lone_job = true};
    struct fy_node *root = fy_document_root(d.doc);
    int rc = spec_service_take(&x, root, &svc);
    if (rc < 0) {
        check(rc == -EINVAL || rc == -ERANGE || rc == -ENOMEM, "unexpected code", err.msg);
        check(strncmp(err.msg, NAME, strlen(NAME)) == 0, "message does not name the file", err.msg);
    } else if (svc.is) {
        check(svc.port >= 1 && svc.port <= 65535, "port out of range", NULL);
        check(svc.replicas >= 1 && svc.min >= 0, "replica counts", NULL);
        check(!svc.autoscale || (svc.as.min >= 1 && svc.as.max >= svc.as.min), "bounds", NULL);
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
            check(!fy_node_mapping_lookup_by_string(root, keys[i], FY_NT), "key left behind",
                  keys[i]);
    }
    sv_doc_close(&d);
    arb_cluster_free(&c);
    return 0;
}
