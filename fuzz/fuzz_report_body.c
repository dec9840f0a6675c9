/*
 * fuzz_report_body.c: libFuzzer target for the API's decoder of an agent's
 * report (POST /v1/nodes/{name}/report; src/api/enc_report.c,
 * api_report_decode), fed what the router would hand it: the body parsed
 * as JSON with duplicate keys refused.
 *
 * Checked: no crash, hang, leak or sanitizer report on any input; a
 * refusal is -EINVAL with a message and leaves nothing allocated; a
 * success gives one task per listed task (job >= 1, task >= 0, a known
 * state), one GPU entry per telemetry GPU (index in range), and the
 * inventory and telemetry as JSON text that reads back equal to what was
 * sent.
 *
 * Seed corpus: fuzz/seeds/fuzz_report_body (reports as src/agent/report.c
 * sends them, a replay's, and refused ones).
 */
#include <stdio.h>
#include <stdlib.h>

#include "api/api_int.h"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_report_body: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

/* The text reads back as the member it came from (null or absent: none). */
static void same_text(const json_t *body, const char *key, const char *txt)
{
    json_t *v = json_object_get(body, key);

    if (!v || json_is_null(v)) {
        check(txt == NULL, "a text for an absent member", key);
        return;
    }
    check(txt != NULL, "no text for a member", key);
    json_t *back = json_loads(txt, 0, NULL);
    check(back && json_equal(back, v), "the text does not read back equal", key);
    json_decref(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_report_t r;
    arb_err_t err = {{0}};
    json_t *body;

    if (size > (1u << 16))
        return 0;
    if (!(body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL)))
        return 0;
    int rc = api_report_decode(body, &r, &err);
    if (rc < 0) {
        check(rc == -EINVAL || rc == -ENOMEM, "an error other than -EINVAL/-ENOMEM", err.msg);
        check(err.msg[0] != '\0', "a refusal without a message", NULL);
        check(!r.tasks && !r.gpus && !r.inventory && !r.telemetry && r.ntasks == 0 && r.ngpus == 0,
              "a refusal left something", err.msg);
    } else {
        json_t *tasks = json_object_get(body, "tasks");
        json_t *tel = json_object_get(body, "telemetry");
        check(r.ntasks == (int)json_array_size(tasks), "tasks lost", NULL);
        check(r.has_tasks == json_is_array(tasks), "the task list's presence", NULL);
        for (int i = 0; i < r.ntasks; i++) {
            check(r.tasks[i].job >= 1, "a task without a job", NULL);
            check(r.tasks[i].task >= 0 && r.tasks[i].task <= INT32_MAX, "a task out of range",
                  NULL);
            check(r.tasks[i].state <= ST_RT_LOST, "an unknown task state", NULL);
        }
        check(r.ngpus == (int)json_array_size(json_object_get(tel, "gpus")), "GPUs lost", NULL);
        for (int i = 0; i < r.ngpus; i++) {
            check(r.gpus[i].index >= 0 && r.gpus[i].index < ARB_MAX_GPUS, "a GPU index", NULL);
            check(!r.gpus[i].has_util || (r.gpus[i].util >= 0 && r.gpus[i].util <= 100),
                  "a GPU's util", NULL);
        }
        check(!r.has_lamport || (r.lamport >= 0 && (uint64_t)r.lamport <= ST_LAMPORT_MAX),
              "lamport out of range", NULL);
        same_text(body, "inventory", r.inventory);
        same_text(body, "telemetry", r.telemetry);
    }
    api_report_free(&r);
    json_decref(body);
    return 0;
}
