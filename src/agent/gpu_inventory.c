/*
 * gpu_inventory.c: the inventory GPU source, a YAML file that says what a
 * node without NVML has (or overrides what the host shows, for emulation):
 *
 *   name: node-1                  # optional; --name wins
 *   cpu: 64                       # optional: logical CPUs (else /proc, sysfs)
 *   memory: 512Gi                 # optional (else /proc/meminfo)
 *   labels: {rack: r1, zone: z1}  # optional, at most 16
 *   taints:                       # optional, at most 16 (operators add theirs: arbiter taint)
 *     - {key: maintenance, value: "2024-06", effect: NoExecute}  # or NoSchedule, PreferNoSchedule
 *   datasets: [imagenet, c4]      # optional: cached here, at most 32
 *   gpus:                         # optional; the scenario format's two forms:
 *     - {model: H100, memory: 80Gi, nvlink: 0, pcie: 0, numa: 0,
 *        uuid: GPU-5f1c..., pciBusId: "0000:17:00.0"}   # uuid, pciBusId optional
 *   # or
 *   gpus: {count: 8, model: H100, memory: 80Gi,
 *          nvlinkDomains: 1, pcieSwitches: 4, numaNodes: 2}
 *
 * Errors say "FILE:LINE:COL: FIELD.PATH: what; fix" through src/spec/sval.h;
 * unknown fields are errors that list the valid ones. The parser never
 * crashes on any input (fuzz/fuzz_inventory.c). The GPUs have no live
 * telemetry: samples are all -1 (unknown).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "agent/discovery.h"
#include "spec/schema_node.h"
#include "spec/sval.h"

#define INV_MAX_FILE (1 << 20)
#define INV_MAX_VALUES 10000

/* The inventory's fields are the scenario's node table (spec/schema_node.h)
 * in SC_CTX_INVENTORY: its own rows (cpu, memory, name; labels, taints and
 * datasets with the agent's limits) and the shared one (gpus), each read by
 * its row (spec_node_read) into the sinks below. */

_Static_assert(SPEC_INV_NAME == AGENT_NAME_MAX, "the shared tables hold the agent's names");
_Static_assert(SPEC_INV_UUID == sizeof(((agent_gpu_info_t *)0)->uuid), "and its GPU UUIDs");
_Static_assert(SPEC_INV_MAX_LABELS == AGENT_MAX_LABELS && SPEC_INV_MAX_TAINTS == AGENT_MAX_TAINTS &&
                   SPEC_INV_MAX_DATASETS == AGENT_MAX_DATASETS,
               "and as many labels, taints and datasets as it keeps");

void agent_inventory_doc(FILE *f)
{
    sc_doc_markdown(f, &spec_node_table, SC_CTX_INVENTORY | SC_CTX_DOC, "");
}

static int uuid_check(sx_t *x, const sval_t *f, const char *u)
{
    for (const char *p = u; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-')
            return sv_fail(x, f, -EINVAL,
                           "'%s' is not a GPU UUID (letters, digits and '-', "
                           "e.g. GPU-5f1c2a3b-...)",
                           u);
    return 0;
}

/* src into dst[n]; the rows hold the inventory's names to SPEC_INV_NAME - 1
 * bytes, so nothing is cut. */
static void put_name(char *dst, size_t n, const char *src)
{
    size_t len = strnlen(src, n - 1);

    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* ---- the inventory's sinks: the node table's rows read every field
 * (spec_node_read), these keep them in the agent_inv_t ------------------- */

static int inv_label(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const char *key, const char *val)
{
    agent_inv_t *inv = rd->dst;
    agent_label_t *l = &inv->labels[rd->nlabels]; /* the row holds them to AGENT_MAX_LABELS */

    for (int j = 0; j < rd->nlabels; j++)
        if (strcmp(inv->labels[j].key, key) == 0)
            return sv_fail(x, v, -EINVAL, "label '%s' given twice", key);
    put_name(l->key, sizeof l->key, key);
    put_name(l->val, sizeof l->val, val);
    inv->nlabels = rd->nlabels + 1;
    return 0;
}

static int inv_taint(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_taint_t *st)
{
    agent_inv_t *inv = rd->dst;
    agent_taint_t *t = &inv->taints[rd->ntaints];

    (void)x;
    (void)v;
    put_name(t->key, sizeof t->key, st->key);
    put_name(t->val, sizeof t->val, st->val);
    snprintf(t->effect, sizeof t->effect, "%s", spec_taint_effects[st->effect]);
    inv->ntaints = rd->ntaints + 1;
    return 0;
}

static int inv_dataset(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const char *name)
{
    agent_inv_t *inv = rd->dst;

    (void)x;
    (void)v;
    put_name(inv->datasets[rd->ndatasets], sizeof inv->datasets[0], name);
    inv->ndatasets = rd->ndatasets + 1;
    return 0;
}

/* GPU rd->ngpus; a listed one's uuid and pciBusId are checked here, unique
 * among the GPUs before it. */
static int inv_gpu(sx_t *x, const sval_t *v, spec_node_rd_t *rd, const spec_gpu_t *sg)
{
    agent_inv_t *inv = rd->dst;
    int i = rd->ngpus, rc;
    agent_gpu_info_t *g = &inv->gpu[i];
    sval_t f;

    memset(g, 0, sizeof *g);
    g->index = i;
    snprintf(g->model, sizeof g->model, "%s", sg->model);
    g->mem_mib = (int32_t)sg->mem_mib;
    g->nvlink = (int16_t)sg->nvlink;
    g->pcie = (int16_t)sg->pcie;
    g->numa = (int16_t)sg->numa;
    if (sg->uuid[0] && sv_get(v, "uuid", &f)) {
        memcpy(g->uuid, sg->uuid, sizeof g->uuid); /* the same size */
        if ((rc = uuid_check(x, &f, g->uuid)) < 0)
            return rc;
        for (int j = 0; j < i; j++)
            if (strcmp(inv->gpu[j].uuid, g->uuid) == 0)
                return sv_fail(x, &f, -EINVAL, "uuid '%s' is also gpus[%d]'s; UUIDs are unique",
                               g->uuid, j);
    }
    if (sg->pci_bus_id[0] && sv_get(v, "pciBusId", &f)) {
        if (agent_pci_busid_norm(sg->pci_bus_id, g->pci_bus_id, sizeof g->pci_bus_id) < 0)
            return sv_fail(x, &f, -EINVAL,
                           "'%s' is not a PCI bus id; write it like \"0000:17:00.0\"",
                           sg->pci_bus_id);
        for (int j = 0; j < i; j++)
            if (strcmp(inv->gpu[j].pci_bus_id, g->pci_bus_id) == 0)
                return sv_fail(x, &f, -EINVAL, "PCI bus id %s is also gpus[%d]'s", g->pci_bus_id,
                               j);
    }
    inv->ngpus = i + 1;
    return 0;
}

static const spec_node_ops_t inv_ops = {
    .label = inv_label,
    .taint = inv_taint,
    .dataset = inv_dataset,
    .gpu = inv_gpu,
};

int agent_inventory_parse(const char *name, const char *buf, size_t len, agent_inv_t *inv,
                          arb_err_t *err)
{
    spec_node_rd_t rd;
    sv_doc_t d;
    sx_t x;
    sval_t root;
    agent_inv_t *out;
    int rc;

    memset(&x, 0, sizeof x);
    x.file = name;
    x.err = err;
    if ((rc = sv_doc_open(name, buf, len, &d, err)) < 0)
        return rc;
    out = malloc(sizeof *out);
    if (!out) {
        rc = arb_errf(err, -ENOMEM, "%s: out of memory", name);
        goto out;
    }
    *out = *inv;
    out->nlabels = 0;
    out->ntaints = 0;
    out->ndatasets = 0;
    out->ngpus = 0;
    sv_root(&root, fy_document_root(d.doc), "");
    if (sv_tree_size(root.n, 0, INV_MAX_VALUES) > INV_MAX_VALUES) {
        rc = arb_errf(err, -EINVAL, "%s: more than %d values; an inventory is small", name,
                      INV_MAX_VALUES);
        goto out;
    }
    /* What the file leaves out keeps what the host shows. */
    memset(&rd, 0, sizeof rd);
    rd.ops = &inv_ops;
    rd.dst = out;
    rd.ctx = SC_CTX_INVENTORY;
    snprintf(rd.name, sizeof rd.name, "%s", out->name);
    rd.cpus = out->cpus;
    rd.mem_bytes = out->mem_bytes;
    if ((rc = sc_check_keys(&x, &root, &spec_node_table, SC_CTX_INVENTORY)) < 0 ||
        (rc = spec_node_read(&x, &root, &rd)) < 0)
        goto out;
    put_name(out->name, sizeof out->name, rd.name);
    out->cpus = rd.cpus;
    out->mem_bytes = rd.mem_bytes;
    *inv = *out;
out:
    free(out);
    sv_doc_close(&d);
    return rc;
}

int agent_inventory_load(const char *path, agent_inv_t *inv, arb_err_t *err)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t len;
    int rc;

    if (!f)
        return arb_errf(err, -errno, "%s: cannot open: %s", path, strerror(errno));
    buf = malloc(INV_MAX_FILE + 1);
    if (!buf) {
        fclose(f);
        return arb_errf(err, -ENOMEM, "%s: out of memory", path);
    }
    len = fread(buf, 1, INV_MAX_FILE + 1, f);
    if (ferror(f))
        rc = arb_errf(err, -EIO, "%s: read error", path);
    else if (len > INV_MAX_FILE)
        rc = arb_errf(err, -EFBIG, "%s: larger than %d KiB; an inventory is small", path,
                      INV_MAX_FILE >> 10);
    else
        rc = agent_inventory_parse(path, buf, len, inv, err);
    fclose(f);
    free(buf);
    return rc;
}

static int inv_open(const agent_disc_opts_t *o, agent_inv_t *inv, void **state, arb_err_t *err)
{
    *state = NULL;
    if (!o->inventory)
        return arb_errf(err, -EINVAL, "the inventory GPU source needs a file (--inventory FILE)");
    return agent_inventory_load(o->inventory, inv, err);
}

static int inv_sample(void *state, const agent_inv_t *inv, agent_gpu_sample_t *out, arb_err_t *err)
{
    for (int i = 0; i < inv->ngpus; i++)
        out[i] = (agent_gpu_sample_t){-1, -1, -1, false};
    return 0;
}

static void inv_close(void *state)
{
}

const agent_gpu_ops_t agent_gpu_inventory = {
    .name = "inventory",
    .summary = "GPUs and topology from a YAML file (--inventory FILE), no live telemetry",
    .open = inv_open,
    .sample = inv_sample,
    .close = inv_close,
};
