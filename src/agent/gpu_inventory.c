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
 * in SC_CTX_INVENTORY: its own rows (cpu, memory, name) and the shared ones
 * (labels, taints, datasets, gpus). */

_Static_assert(SPEC_INV_NAME == AGENT_NAME_MAX, "the shared tables hold the agent's names");
_Static_assert(SPEC_INV_UUID == sizeof(((agent_gpu_info_t *)0)->uuid), "and its GPU UUIDs");

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

/* gpus: [{model, memory, nvlink, pcie, numa, uuid, pciBusId}, ...], through
 * the scenario format's table; the ids are checked here. */
static int parse_gpu_list(sx_t *x, const sval_t *v, agent_inv_t *inv)
{
    int count, rc = sv_seq(x, v, ARB_MAX_GPUS, &count);
    void *it = NULL;

    for (int i = 0; rc == 0 && i < count; i++) {
        agent_gpu_info_t *g = &inv->gpu[i];
        spec_gpu_t sg;
        arb_err_t ierr;
        sval_t e, f;
        bool is;

        sv_item(&e, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &e, &is)) < 0)
            return rc;
        if (!is)
            return sv_fail(x, &e, -EINVAL, "a GPU needs at least memory: (e.g. 80Gi)");
        memset(&sg, 0, sizeof sg);
        if ((rc = sc_init(&spec_gpu_table, SC_CTX_INVENTORY, &sg, &ierr)) < 0)
            return sv_fail(x, &e, rc, "%s", ierr.msg);
        if ((rc = sc_walk(x, &e, &spec_gpu_table, SC_CTX_INVENTORY, &sg)) < 0)
            return rc;
        memset(g, 0, sizeof *g);
        g->index = i;
        snprintf(g->model, sizeof g->model, "%s", sg.model);
        g->mem_mib = (int32_t)sg.mem_mib;
        g->nvlink = (int16_t)sg.nvlink;
        g->pcie = (int16_t)sg.pcie;
        g->numa = (int16_t)sg.numa;
        if (sv_get(&e, "uuid", &f)) {
            memcpy(g->uuid, sg.uuid, sizeof g->uuid); /* the same size */
            if ((rc = uuid_check(x, &f, g->uuid)) < 0)
                return rc;
            for (int j = 0; j < i; j++)
                if (strcmp(inv->gpu[j].uuid, g->uuid) == 0)
                    return sv_fail(x, &f, -EINVAL,
                                   "uuid '%s' is also gpus[%d]'s; UUIDs are "
                                   "unique",
                                   g->uuid, j);
        }
        if (sv_get(&e, "pciBusId", &f)) {
            if (agent_pci_busid_norm(sg.pci_bus_id, g->pci_bus_id, sizeof g->pci_bus_id) < 0)
                return sv_fail(x, &f, -EINVAL,
                               "'%s' is not a PCI bus id; write it like "
                               "\"0000:17:00.0\"",
                               sg.pci_bus_id);
            for (int j = 0; j < i; j++)
                if (strcmp(inv->gpu[j].pci_bus_id, g->pci_bus_id) == 0)
                    return sv_fail(x, &f, -EINVAL, "PCI bus id %s is also gpus[%d]'s",
                                   g->pci_bus_id, j);
        }
    }
    if (rc == 0)
        inv->ngpus = count;
    return rc;
}

/* gpus: {count, model, memory, nvlinkDomains, pcieSwitches, numaNodes},
 * through the scenario format's table. */
static int parse_gpu_block(sx_t *x, const sval_t *v, agent_inv_t *inv)
{
    spec_gpus_t gs;
    int rc = spec_gpus_read(x, v, SC_CTX_INVENTORY, &gs);

    if (rc < 0)
        return rc;
    for (int i = 0; i < gs.count; i++) {
        agent_gpu_info_t *g = &inv->gpu[i];
        memset(g, 0, sizeof *g);
        g->index = i;
        snprintf(g->model, sizeof g->model, "%s", gs.model);
        g->mem_mib = (int32_t)gs.mem_mib;
        /* Equal runs, as in scenarios: 8 GPUs, 2 domains -> 0000 1111. */
        g->nvlink = (int16_t)(gs.dom[0] ? i * gs.dom[0] / gs.count : -1);
        g->pcie = (int16_t)(gs.dom[1] ? i * gs.dom[1] / gs.count : -1);
        g->numa = (int16_t)(gs.dom[2] ? i * gs.dom[2] / gs.count : -1);
    }
    inv->ngpus = gs.count;
    return 0;
}

static int parse_labels(sx_t *x, const sval_t *v, agent_inv_t *inv)
{
    void *it = NULL;
    struct fy_node_pair *p;
    bool is;
    int rc = sv_map(x, v, &is), n = 0;

    if (rc < 0 || !is)
        return rc;
    while ((p = fy_node_mapping_iterate(v->n, &it))) {
        agent_label_t *l = &inv->labels[n];
        size_t klen = 0;
        const char *k = sv_key_text(fy_node_pair_key(p), &klen);
        sval_t f;

        sv_pair(&f, v, p);
        if (n == AGENT_MAX_LABELS)
            return sv_fail(x, &f, -EINVAL, "more than %d labels", AGENT_MAX_LABELS);
        if (!k)
            return sv_fail(x, &f, -EINVAL, "a label key must be a plain string");
        if (klen >= sizeof l->key)
            return sv_fail(x, &f, -EINVAL, "label key longer than %zu characters",
                           sizeof l->key - 1);
        for (size_t i = 0; i < klen; i++)
            if (iscntrl((unsigned char)k[i]))
                return sv_fail(x, &f, -EINVAL, "label key with a control character");
        memcpy(l->key, k, klen);
        l->key[klen] = '\0';
        if ((rc = sv_text(x, &f, l->val, sizeof l->val, true)) < 0)
            return rc;
        for (int j = 0; j < n; j++)
            if (strcmp(inv->labels[j].key, l->key) == 0)
                return sv_fail(x, &f, -EINVAL, "label '%s' given twice", l->key);
        n++;
    }
    inv->nlabels = n;
    return 0;
}

static int parse_taints(sx_t *x, const sval_t *v, agent_inv_t *inv)
{
    void *it = NULL;
    int n, rc = sv_seq(x, v, AGENT_MAX_TAINTS, &n);

    for (int i = 0; rc == 0 && i < n; i++) {
        agent_taint_t *t = &inv->taints[i];
        spec_taint_t st;
        sval_t tv;
        bool is;
        sv_item(&tv, v, fy_node_sequence_iterate(v->n, &it), i);
        memset(&st, 0, sizeof st);
        if ((rc = sv_map(x, &tv, &is)) < 0)
            return rc;
        if (!is)
            return sv_fail(x, &tv, -EINVAL, "a taint needs key: and effect:");
        if ((rc = sc_walk(x, &tv, &spec_taint_table, SC_CTX_INVENTORY, &st)) < 0)
            return rc;
        /* the table holds both to SPEC_INV_NAME - 1 bytes */
        memcpy(t->key, st.key, sizeof t->key - 1);
        t->key[sizeof t->key - 1] = '\0';
        memcpy(t->val, st.val, sizeof t->val - 1);
        t->val[sizeof t->val - 1] = '\0';
        snprintf(t->effect, sizeof t->effect, "%s", spec_taint_effects[st.effect]);
    }
    if (rc == 0)
        inv->ntaints = n;
    return rc;
}

static int parse_datasets(sx_t *x, const sval_t *v, agent_inv_t *inv)
{
    void *it = NULL;
    int n, rc = sv_seq(x, v, AGENT_MAX_DATASETS, &n);

    for (int i = 0; rc == 0 && i < n; i++) {
        sval_t dv;
        sv_item(&dv, v, fy_node_sequence_iterate(v->n, &it), i);
        rc = sv_text(x, &dv, inv->datasets[i], sizeof inv->datasets[i], false);
    }
    if (rc == 0)
        inv->ndatasets = n;
    return rc;
}

int agent_inventory_parse(const char *name, const char *buf, size_t len, agent_inv_t *inv,
                          arb_err_t *err)
{
    sv_doc_t d;
    sx_t x;
    sval_t root, f;
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
    if ((rc = sc_check_keys(&x, &root, &spec_node_table, SC_CTX_INVENTORY)) < 0)
        goto out;
    if (sv_get(&root, "name", &f) && (rc = sv_text(&x, &f, out->name, sizeof out->name, false)) < 0)
        goto out;
    if (sv_get(&root, "cpu", &f) && (rc = sv_int32(&x, &f, 1, SPEC_INV_MAX_CPUS, &out->cpus)) < 0)
        goto out;
    if (sv_get(&root, "memory", &f)) {
        int64_t bytes;
        if ((rc = sv_qty(&x, &f, ARB_QTY_BYTES, &bytes)) < 0)
            goto out;
        if (bytes <= 0) {
            rc = sv_fail(&x, &f, -ERANGE, "memory must be more than 0");
            goto out;
        }
        out->mem_bytes = bytes;
    }
    if (sv_get(&root, "labels", &f) && (rc = parse_labels(&x, &f, out)) < 0)
        goto out;
    if (sv_get(&root, "taints", &f) && !sv_null(&f) && (rc = parse_taints(&x, &f, out)) < 0)
        goto out;
    if (sv_get(&root, "datasets", &f) && !sv_null(&f) && (rc = parse_datasets(&x, &f, out)) < 0)
        goto out;
    if (sv_get(&root, "gpus", &f) && !sv_null(&f)) {
        if ((rc = sv_no_alias(&x, &f)) < 0)
            goto out;
        if (fy_node_is_sequence(f.n))
            rc = parse_gpu_list(&x, &f, out);
        else if (fy_node_is_mapping(f.n))
            rc = parse_gpu_block(&x, &f, out);
        else
            rc = sv_fail(&x, &f, -EINVAL,
                         "expected a list of GPUs or {count: N, model: M, "
                         "memory: 80Gi}, got %s",
                         sv_kind(f.n));
        if (rc < 0)
            goto out;
    }
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
