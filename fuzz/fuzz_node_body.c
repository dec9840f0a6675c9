/*
 * fuzz_node_body.c: libFuzzer target for the API's decoders of the node
 * operations' bodies (src/api/enc_node.c): a patch's (PATCH
 * /v1/nodes/{name}, api_patch_decode) and a cordon's or drain's reason
 * (api_cordon_decode), fed what the router would hand them: the body
 * parsed as JSON with duplicate keys refused.
 *
 * Checked: no crash, hang, leak or sanitizer report on any input; a
 * refusal is -EINVAL with a message and leaves nothing allocated; a
 * success gives one edit per label and taint listed, each with a key, a
 * taint added with a known effect; a reason fits its buffer.
 *
 * Seed corpus: fuzz/seeds/fuzz_node_body (patches as `arbiter node label`
 * and `arbiter node taint` send them, reasons, and refused ones).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_node_body: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_patch_t p;
    arb_err_t err = {{0}};
    char reason[ST_REASON_MAX];
    json_t *body;

    if (size > (1u << 16))
        return 0;
    if (!(body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL)))
        return 0;
    int rc = api_patch_decode(body, &p, &err);
    if (rc < 0) {
        check(rc == -EINVAL || rc == -ENOMEM, "an error other than -EINVAL/-ENOMEM", err.msg);
        check(err.msg[0] != '\0', "a refusal without a message", NULL);
        check(!p.labels && !p.add && !p.remove, "a refusal left edits", err.msg);
    } else {
        json_t *t = json_object_get(body, "taints");
        check(p.nlabels == (int)json_object_size(json_object_get(body, "labels")), "labels lost",
              NULL);
        check(p.nadd == (int)json_array_size(json_object_get(t, "add")), "taints lost", NULL);
        check(p.nremove == (int)json_array_size(json_object_get(t, "remove")), "removals lost",
              NULL);
        for (int i = 0; i < p.nlabels; i++)
            check(p.labels[i].key && p.labels[i].key[0], "a label without a key", NULL);
        for (int i = 0; i < p.nadd; i++)
            check(p.add[i].key && p.add[i].value && st_taint_effect(p.add[i].effect),
                  "a taint added without key or effect", NULL);
        for (int i = 0; i < p.nremove; i++)
            check(p.remove[i].key && p.remove[i].effect, "a removal without a key", NULL);
    }
    api_patch_free(&p);
    memset(&err, 0, sizeof err);
    rc = api_cordon_decode(body, reason, sizeof reason, &err);
    check(rc == 0 || (rc == -EINVAL && err.msg[0]), "a cordon refusal without a message", NULL);
    check(strlen(reason) < sizeof reason && (rc == 0 || !reason[0]), "a reason left by a refusal",
          NULL);
    json_decref(body);
    return 0;
}
