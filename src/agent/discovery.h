/*
 * discovery.h: what a node has. The agent's inventory (CPUs, memory, NUMA
 * nodes, GPUs with their topology coordinates, labels) and the GPU sources
 * that fill it, as small ops structs in one table (agent_gpu_rows):
 *
 *   nvml       the NVIDIA driver's libnvidia-ml.so.1, loaded at run time with
 *              dlopen (no build-time dependency): count, UUID, model, memory,
 *              utilisation, temperature, NVLink peers, PCIe common ancestors
 *   inventory  a YAML file describing the GPUs and their topology, for nodes
 *              without NVML (gpu_inventory.c has the format)
 *   fake       "N[:MODEL[:MEMORY]]" (--fake-gpus 8:H100) for tests and demos
 *
 * CPUs and memory come from /proc and sysfs, cores, packages and NUMA
 * nodes from hwloc, and each GPU's NUMA node and PCIe switch from hwloc by
 * its PCI bus id when the row did not say (nvml without topology calls).
 * Every root (/proc, /sys, the hwloc topology) is a field of the options, so
 * tests point discovery at fixtures.
 *
 * Topology coordinates follow include/arbiter/cluster.h's arb_gpu_t: GPUs
 * with the same nvlink id talk over NVLink (-1: no NVLink, each its own
 * domain), the same pcie id share a PCIe switch, numa is the NUMA node;
 * ids are small integers local to the node, numbered in GPU order.
 *
 * Return convention: arbiter.h (0 or a negative errno, text in arb_err_t).
 */
#ifndef ARB_AGENT_DISCOVERY_H
#define ARB_AGENT_DISCOVERY_H

#include <stdio.h>

#include "arbiter/cluster.h"

#define AGENT_MAX_LABELS 16
#define AGENT_MAX_TAINTS 16
#define AGENT_MAX_DATASETS 32
#define AGENT_NAME_MAX 128 /* node names, models, label keys and values */

typedef struct agent_gpu_info {
    int index;     /* what CUDA_VISIBLE_DEVICES names (NVML order = PCI order) */
    char uuid[96]; /* "GPU-8f3c..." */
    char model[AGENT_NAME_MAX];
    char pci_bus_id[32];        /* "0000:17:00.0"; "" unknown */
    int32_t mem_mib;            /* device memory */
    int16_t numa, pcie, nvlink; /* -1 unknown / none */
} agent_gpu_info_t;

typedef struct agent_label {
    char key[AGENT_NAME_MAX], val[AGENT_NAME_MAX];
} agent_label_t;

typedef struct agent_taint {
    char key[AGENT_NAME_MAX], val[AGENT_NAME_MAX];
    char effect[20]; /* NoSchedule, PreferNoSchedule or NoExecute */
} agent_taint_t;

/* One GPU's live state. A field the source cannot read is -1. */
typedef struct agent_gpu_sample {
    int16_t util_pct; /* 0..100 */
    int16_t temp_c;
    int32_t mem_used_mib;
    bool unhealthy; /* the source says the GPU is unusable (NVML: lost from the bus,
                       or not answering at all; fake: agent_fake_set) */
} agent_gpu_sample_t;

/* What the node has. Plain data: copy it freely. */
typedef struct agent_inv {
    char name[AGENT_NAME_MAX]; /* the node's name (--name; the inventory's name: otherwise) */
    char cpu_model[AGENT_NAME_MAX];
    int cpus;            /* logical CPUs online */
    int cores, packages; /* from hwloc; 0 unknown */
    int numa_nodes;      /* at least 1 */
    int64_t mem_bytes;   /* MemTotal */
    char gpu_source[16]; /* "nvml", "inventory", "fake" or "none" */
    int ngpus;
    agent_gpu_info_t gpu[ARB_MAX_GPUS];
    int nlabels;
    agent_label_t labels[AGENT_MAX_LABELS];
    int ntaints; /* from the inventory file: the node's own (operators add theirs) */
    agent_taint_t taints[AGENT_MAX_TAINTS];
    int ndatasets; /* datasets cached on the node (data-locality scoring) */
    char datasets[AGENT_MAX_DATASETS][AGENT_NAME_MAX];
} agent_inv_t;

typedef struct agent_disc_opts {
    const char *node_name;  /* required unless the inventory names the node */
    const char *gpu_source; /* a row name or "auto"/NULL: inventory if given,
                               fake if given, else nvml, else none */
    const char *inventory;  /* the inventory row's file */
    const char *fake;       /* the fake row's "N[:MODEL[:MEMORY]]" */
    const char *nvml_path;  /* what to dlopen; NULL: "libnvidia-ml.so.1" */
    const char *proc_root;  /* NULL: "/proc" */
    const char *sys_root;   /* NULL: "/sys" */
    const char *hwloc_xml;  /* load the topology from this hwloc XML file */
    bool no_hwloc;          /* skip hwloc entirely (fixture-only tests) */
} agent_disc_opts_t;

/* A GPU source. open fills inv->gpu[] and inv->ngpus (and whatever else the
 * source knows) and keeps what sample needs in *state, freed by close.
 * sample writes inv->ngpus entries. */
typedef struct agent_gpu_ops {
    const char *name;
    const char *summary;
    int (*open)(const agent_disc_opts_t *o, agent_inv_t *inv, void **state, arb_err_t *err);
    int (*sample)(void *state, const agent_inv_t *inv, agent_gpu_sample_t *out, arb_err_t *err);
    void (*close)(void *state);
} agent_gpu_ops_t;

extern const agent_gpu_ops_t agent_gpu_nvml, agent_gpu_inventory, agent_gpu_fake;
/* The rows, NULL-terminated. */
extern const agent_gpu_ops_t *const agent_gpu_rows[];
const agent_gpu_ops_t *agent_gpu_find(const char *name);

/* A discovered node: the inventory and the open GPU source. */
typedef struct agent_disc {
    agent_inv_t inv;
    const agent_gpu_ops_t *ops; /* NULL: no GPUs */
    void *state;
    char note[256]; /* why there are no GPUs, a hwloc warning, ...; "" when none */
} agent_disc_t;

/*
 * Discover the node: host (proc/sys), hwloc, then the GPU source. On
 * success close d with agent_disc_close; on failure d holds nothing. With
 * gpu_source auto, a node where NVML cannot be loaded has no GPUs (not an
 * error; d->note says why); naming nvml makes that an error.
 */
int agent_disc_open(agent_disc_t *d, const agent_disc_opts_t *o, arb_err_t *err);
/* Live state of every GPU into out[0..d->inv.ngpus). */
int agent_disc_sample(agent_disc_t *d, agent_gpu_sample_t *out, arb_err_t *err);
void agent_disc_close(agent_disc_t *d);

/* CPUs, memory and CPU model of the host from proc_root/sys_root (NULL:
 * the real ones) into inv; NUMA nodes from sysfs. */
int agent_host_read(agent_inv_t *inv, const char *proc_root, const char *sys_root, arb_err_t *err);

/*
 * hwloc: cores and packages of the host (and NUMA nodes, when hwloc sees
 * more than sysfs did), and for each GPU with a PCI bus id whose numa or pcie
 * is still -1, the NUMA node nearest to it and its PCIe switch (the topmost
 * PCI-to-PCI bridge above it; GPUs under one switch share an id). xml: a
 * topology file instead of this machine.
 */
int agent_hwloc_fill(agent_inv_t *inv, const char *xml, arb_err_t *err);

/*
 * The inventory file format, from memory (the fuzz target's entry point).
 * name is used in messages. On success *inv gets the GPUs, labels, and the
 * name, cpu and memory when the file gives them (else leaves those fields
 * as they were); on failure *inv is untouched and err says
 * "FILE:LINE:COL: PATH: what; fix".
 */
int agent_inventory_parse(const char *name, const char *buf, size_t len, agent_inv_t *inv,
                          arb_err_t *err);
int agent_inventory_load(const char *path, agent_inv_t *inv, arb_err_t *err);
/* The inventory's fields as a Markdown table, from the tables its parser
 * checks keys with (`arbiter help inventory`, docs/reference.md). */
void agent_inventory_doc(FILE *f);

/* The fake row's spec "N[:MODEL[:MEMORY]]" (MEMORY a quantity, 80Gi). */
int agent_fake_parse(const char *spec, const char *node, agent_inv_t *inv, arb_err_t *err);
/* Set what the fake row reports for GPU i (emulation, tests); -EINVAL when
 * d's source is not fake or i is out of range. */
int agent_fake_set(agent_disc_t *d, int i, const agent_gpu_sample_t *s);

/* Emulated load on the fake row: GPUs in busy_mask show pct% busy, most of
 * their memory used and 65 C, the others idle; health as last set.
 * -EINVAL when d's source is not fake. */
int agent_fake_load(agent_disc_t *d, uint32_t busy_mask, int pct);

/* Canonical PCI bus id "dddd:bb:dd.f" (lower case) from NVML's
 * "00000000:17:00.0" and friends; -EINVAL when it is not one. */
int agent_pci_busid_norm(const char *in, char *out, size_t n);

/* Renumber ids in v[0..n) to 0, 1, ... in order of first appearance
 * (negative ids become -1): the coordinates' canonical form. */
void agent_ids_compact(int *v, int n);
/* The same over the numa, pcie or nvlink field of inv's GPUs. */
void agent_inv_compact(agent_inv_t *inv);

#endif
