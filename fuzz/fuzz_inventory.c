/*
 * fuzz_inventory.c: libFuzzer target for the agent's inventory file parser
 * (src/agent/gpu_inventory.c), from a memory buffer.
 *
 * Checked: no crash, hang or sanitizer report on any input; a failure
 * returns -EINVAL/-ERANGE/-ENOMEM, names the file in its message and leaves
 * the inventory untouched; a success yields at most ARB_MAX_GPUS GPUs with
 * positive memory, coordinates in range and unique UUIDs.
 *
 * Seed corpus: tests/agent/inventory.yaml (copy it into the corpus).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/discovery.h"

#define NAME "inv.yaml"

static void check(bool ok, const char *what, const char *msg)
{
    if (!ok) {
        fprintf(stderr, "fuzz_inventory: %s (%s)\n", what, msg ? msg : "");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agent_inv_t inv, before;
    arb_err_t err;
    int rc;

    if (size > (1u << 16))
        return 0;
    memset(&inv, 0x5A, sizeof inv);
    before = inv;
    memset(&err, 0, sizeof err);
    rc = agent_inventory_parse(NAME, (const char *)data, size, &inv, &err);
    if (rc == 0) {
        check(inv.ngpus >= 0 && inv.ngpus <= ARB_MAX_GPUS, "GPU count", NULL);
        check(inv.nlabels >= 0 && inv.nlabels <= AGENT_MAX_LABELS, "label count", NULL);
        for (int i = 0; i < inv.ngpus; i++) {
            const agent_gpu_info_t *g = &inv.gpu[i];
            check(g->mem_mib > 0, "GPU memory", g->model);
            check(g->nvlink >= -1 && g->nvlink < ARB_MAX_GPUS && g->pcie >= -1 &&
                      g->pcie < ARB_MAX_GPUS && g->numa >= -1 && g->numa <= 1023,
                  "coordinates", g->model);
            check(memchr(g->model, 0, sizeof g->model) && memchr(g->uuid, 0, sizeof g->uuid),
                  "unterminated string", NULL);
            for (int j = 0; j < i && g->uuid[0]; j++)
                check(strcmp(g->uuid, inv.gpu[j].uuid) != 0, "duplicate uuid", g->uuid);
        }
    } else {
        check(rc == -EINVAL || rc == -ERANGE || rc == -ENOMEM, "unexpected code", err.msg);
        check(strncmp(err.msg, NAME, strlen(NAME)) == 0, "message does not name the file", err.msg);
        check(memcmp(&inv, &before, sizeof inv) == 0, "inventory changed on failure", err.msg);
    }
    return 0;
}
