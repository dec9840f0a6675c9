/*
 * gpu_fake.c: the fake GPU source, "N[:MODEL[:MEMORY]]" (--fake-gpus 8:H100),
 * for tests, demos and emulated nodes. The GPUs look like an HGX board:
 * one NVLink domain (NVSwitch), two GPUs per PCIe switch, the first half on
 * NUMA node 0 and the second on 1. UUIDs are made from the node name and
 * the index, so they are stable across restarts and differ between nodes.
 * Telemetry is idle (0% busy, no memory used, 30 C) until agent_fake_set
 * or agent_fake_load (the agent: busy while a task holds the GPU) says
 * otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/discovery.h"
#include "util/hash.h"

typedef struct fake_state {
    int n;
    agent_gpu_sample_t s[ARB_MAX_GPUS];
} fake_state_t;

/* Device memory of models people name, MiB as nvidia-smi shows it. */
static const struct {
    const char *model;
    int32_t mib;
} fake_models[] = {
    {"H100", 81559},     {"H100-80G", 81559}, {"H200", 143771}, {"A100", 81920},
    {"A100-80G", 81920}, {"A100-40G", 40960}, {"V100", 32768},  {"L40S", 46068},
    {"B200", 183359},    {NULL, 0},
};

int agent_fake_parse(const char *spec, const char *node, agent_inv_t *inv, arb_err_t *err)
{
    char buf[256], *model, *mem, *end;
    long n;
    int64_t mib = 81559;
    agent_inv_t out = *inv;

    if (!spec || snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf)
        return arb_errf(err, -EINVAL, "--fake-gpus: give N[:MODEL[:MEMORY]], e.g. 8:H100");
    model = strchr(buf, ':');
    if (model)
        *model++ = '\0';
    mem = model ? strchr(model, ':') : NULL;
    if (mem)
        *mem++ = '\0';
    n = strtol(buf, &end, 10);
    if (end == buf || *end || n < 0 || n > ARB_MAX_GPUS)
        return arb_errf(err, -EINVAL,
                        "--fake-gpus '%s': the count must be 0..%d (N[:MODEL], "
                        "e.g. 8:H100)",
                        spec, ARB_MAX_GPUS);
    if (model && !model[0])
        return arb_errf(err, -EINVAL, "--fake-gpus '%s': empty model after ':'", spec);
    if (!model)
        model = "H100";
    for (int i = 0; fake_models[i].model; i++)
        if (strcmp(fake_models[i].model, model) == 0)
            mib = fake_models[i].mib;
    if (mem) {
        arb_err_t e2;
        int rc = arb_qty_parse(mem, ARB_QTY_MIB, "--fake-gpus memory", &mib, &e2);
        if (rc < 0)
            return arb_errf(err, rc, "--fake-gpus '%s': %s", spec, e2.msg);
        if (mib <= 0 || mib > INT32_MAX)
            return arb_errf(err, -ERANGE, "--fake-gpus '%s': memory out of range", spec);
    }
    if (strlen(model) >= sizeof out.gpu[0].model)
        return arb_errf(err, -EINVAL, "--fake-gpus: model name longer than %zu characters",
                        sizeof out.gpu[0].model - 1);
    out.ngpus = (int)n;
    for (int i = 0; i < out.ngpus; i++) {
        agent_gpu_info_t *g = &out.gpu[i];
        uint64_t h = arb_hash_str(ARB_HASH_SEED, node ? node : "");
        h = (h ^ (uint64_t)i) * 1099511628211ULL;
        memset(g, 0, sizeof *g);
        g->index = i;
        snprintf(g->model, sizeof g->model, "%s", model);
        snprintf(g->uuid, sizeof g->uuid, "GPU-fa4e%04x-%04x-%04x-%04x-%012" PRIx64,
                 (unsigned)(h >> 48), (unsigned)(h >> 32) & 0xffff, (unsigned)(h >> 16) & 0xffff,
                 (unsigned)i, (uint64_t)(h & 0xffffffffffffULL));
        g->mem_mib = (int32_t)mib;
        g->nvlink = 0;
        g->pcie = (int16_t)(i / 2);
        g->numa = (int16_t)(out.ngpus >= 2 ? i * 2 / out.ngpus : 0);
    }
    *inv = out;
    return 0;
}

static int fake_open(const agent_disc_opts_t *o, agent_inv_t *inv, void **state, arb_err_t *err)
{
    fake_state_t *st;
    int rc = agent_fake_parse(o->fake, o->node_name, inv, err);

    if (rc < 0)
        return rc;
    st = calloc(1, sizeof *st);
    if (!st)
        return arb_errf(err, -ENOMEM, "out of memory");
    st->n = inv->ngpus;
    for (int i = 0; i < st->n; i++)
        st->s[i] = (agent_gpu_sample_t){.util_pct = 0, .temp_c = 30, .mem_used_mib = 0};
    *state = st;
    return 0;
}

static int fake_sample(void *state, const agent_inv_t *inv, agent_gpu_sample_t *out, arb_err_t *err)
{
    fake_state_t *st = state;

    for (int i = 0; i < inv->ngpus && i < st->n; i++)
        out[i] = st->s[i];
    return 0;
}

static void fake_close(void *state)
{
    free(state);
}

int agent_fake_set(agent_disc_t *d, int i, const agent_gpu_sample_t *s)
{
    fake_state_t *st = d->state;

    if (d->ops != &agent_gpu_fake || !st || i < 0 || i >= st->n)
        return -EINVAL;
    st->s[i] = *s;
    return 0;
}

int agent_fake_load(agent_disc_t *d, uint32_t busy_mask, int pct)
{
    fake_state_t *st = d->state;

    if (d->ops != &agent_gpu_fake || !st)
        return -EINVAL;
    for (int i = 0; i < st->n; i++) {
        bool busy = (busy_mask >> i) & 1u;
        st->s[i].util_pct = (int16_t)(busy ? pct : 0);
        st->s[i].temp_c = (int16_t)(busy ? 65 : 30);
        st->s[i].mem_used_mib = busy ? d->inv.gpu[i].mem_mib / 10 * 8 : 0;
    }
    return 0;
}

const agent_gpu_ops_t agent_gpu_fake = {
    .name = "fake",
    .summary = "N[:MODEL[:MEMORY]] made-up GPUs (--fake-gpus 8:H100), for tests and demos",
    .open = fake_open,
    .sample = fake_sample,
    .close = fake_close,
};
