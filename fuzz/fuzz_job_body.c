/*
 * fuzz_job_body.c: libFuzzer target for the controller's read of a job
 * spec body before its state's lock (st_spec_read, src/state/codec.c: the
 * strict JSON check, the YAML document, the controller's own keys) and for
 * src/util/jsonstrict.c, the check that lets a JSON body skip jansson's
 * tree. The input is read as a JSON body and as a YAML body.
 *
 * Checked: no crash, hang, leak or sanitizer report on any input; a failure
 * returns -EBADMSG/-EINVAL/-ENOMEM with a message that names the body
 * ("job.json"/"job.yaml", or "body:" for JSON that is not an object); and
 * whenever arb_json_sure_object is sure of the input, jansson reads it
 * strictly (duplicate keys refused) as an object: "sure" is never wrong.
 *
 * Seed inputs: fuzz/seeds/fuzz_job_body/ (the e2e bench's body, a spec with
 * every controller key, a service).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"
#include "util/jsonstrict.h"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_job_body: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

static void read_body(const char *buf, size_t n, bool yaml)
{
    st_spec_read_t *r = (st_spec_read_t *)(uintptr_t)1;
    arb_err_t err = {{0}};
    int rc = st_spec_read(buf, n, yaml, false, &r, &err);

    if (rc == 0) {
        check(r != NULL, "no read on success", NULL);
        st_spec_read_free(r);
        return;
    }
    check(r == NULL, "a read left on failure", err.msg);
    check(rc == -EBADMSG || rc == -EINVAL || rc == -ENOMEM, "unexpected code", err.msg);
    check(strncmp(err.msg, yaml ? "job.yaml" : "job.json", 8) == 0 ||
              (!yaml && strncmp(err.msg, "body:", 5) == 0) || rc == -ENOMEM,
          "message does not name the body", err.msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;

    if (size > (1u << 16))
        return 0; /* big inputs only slow the search down */
    if (arb_json_sure_object(buf, size)) {
        json_error_t je;
        json_t *v = json_loadb(buf, size, JSON_REJECT_DUPLICATES, &je);
        check(v && json_is_object(v), "sure of a text jansson refuses",
              v ? "not an object" : je.text);
        json_decref(v);
    }
    read_body(buf, size, false);
    read_body(buf, size, true);
    return 0;
}
