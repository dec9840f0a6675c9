/*
 * discovery.c: what a node has (see discovery.h): the host's CPUs and
 * memory from /proc and sysfs, cores and GPU locality from hwloc, the table
 * of GPU sources and the choice between them. The sources themselves are
 * one file each: gpu_nvml.c, gpu_inventory.c, gpu_fake.c.
 */
#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>

#include "agent/discovery.h"

const agent_gpu_ops_t *const agent_gpu_rows[] = {&agent_gpu_nvml, &agent_gpu_inventory,
                                                 &agent_gpu_fake, NULL};

const agent_gpu_ops_t *agent_gpu_find(const char *name)
{
    for (int i = 0; agent_gpu_rows[i]; i++)
        if (strcmp(agent_gpu_rows[i]->name, name) == 0)
            return agent_gpu_rows[i];
    return NULL;
}

/* ---- small helpers ----------------------------------------------------------- */

/* Hex digits at *p up to one of stop (or the end when stop is '\0'). */
static int hex_field(const char **p, char stop, unsigned max, unsigned *out)
{
    unsigned v = 0;
    int n = 0;

    for (; isxdigit((unsigned char)**p); (*p)++, n++) {
        if (n >= 8)
            return -1;
        v = v * 16 + (unsigned)(isdigit((unsigned char)**p)
                                    ? **p - '0'
                                    : tolower((unsigned char)**p) - 'a' + 10);
    }
    if (n == 0 || v > max || **p != stop)
        return -1;
    if (stop)
        (*p)++;
    *out = v;
    return 0;
}

int agent_pci_busid_norm(const char *in, char *out, size_t n)
{
    unsigned dom = 0, bus, dev, fn;
    const char *p = in;
    int colons = 0;

    if (!in)
        return -EINVAL;
    for (const char *q = in; *q; q++)
        colons += *q == ':';
    /* "dddddddd:bb:dd.f" (NVML), "dddd:bb:dd.f" (sysfs) or "bb:dd.f". */
    if ((colons == 2 && hex_field(&p, ':', 0xffff, &dom) < 0) || colons < 1 || colons > 2 ||
        hex_field(&p, ':', 0xff, &bus) < 0 || hex_field(&p, '.', 0x1f, &dev) < 0 ||
        hex_field(&p, '\0', 7, &fn) < 0)
        return -EINVAL;
    if (snprintf(out, n, "%04x:%02x:%02x.%x", dom, bus, dev, fn) >= (int)n)
        return -EINVAL;
    return 0;
}

void agent_ids_compact(int *v, int n)
{
    int map_from[ARB_MAX_GPUS * 4], nmap = 0;

    for (int i = 0; i < n; i++) {
        int k;
        if (v[i] < 0) {
            v[i] = -1;
            continue;
        }
        for (k = 0; k < nmap && map_from[k] != v[i]; k++)
            ;
        if (k == nmap && nmap < (int)(sizeof map_from / sizeof map_from[0]))
            map_from[nmap++] = v[i];
        v[i] = k;
    }
}

void agent_inv_compact(agent_inv_t *inv)
{
    int v[ARB_MAX_GPUS];

    for (int f = 0; f < 2; f++) { /* pcie, nvlink: numa ids are the OS's, kept */
        for (int i = 0; i < inv->ngpus; i++)
            v[i] = f == 0 ? inv->gpu[i].pcie : inv->gpu[i].nvlink;
        agent_ids_compact(v, inv->ngpus);
        for (int i = 0; i < inv->ngpus; i++) {
            if (f == 0)
                inv->gpu[i].pcie = (int16_t)v[i];
            else
                inv->gpu[i].nvlink = (int16_t)v[i];
        }
    }
}

/* Read root/rel into buf (NUL-terminated, cut at n-1); bytes read or -errno. */
static int read_small(const char *root, const char *rel, char *buf, size_t n)
{
    char path[512];
    FILE *f;
    size_t got;

    snprintf(path, sizeof path, "%s/%s", root, rel);
    f = fopen(path, "re");
    if (!f)
        return -errno;
    got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
    return (int)got;
}

/* Members of a sysfs list "0-3,8,10-11". */
static int count_list(const char *s)
{
    int total = 0;

    while (*s && !isspace((unsigned char)*s)) {
        char *end;
        long a = strtol(s, &end, 10), b;
        if (end == s)
            return -1;
        b = a;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a)
                return -1;
            s = end;
        }
        total += (int)(b - a + 1);
        if (*s == ',')
            s++;
    }
    return total;
}

/* ---- host: /proc and sysfs ------------------------------------------------------ */

int agent_host_read(agent_inv_t *inv, const char *proc_root, const char *sys_root, arb_err_t *err)
{
    char path[512], line[512], buf[256];
    FILE *f;
    int processors = 0;

    proc_root = proc_root ? proc_root : "/proc";
    sys_root = sys_root ? sys_root : "/sys";

    snprintf(path, sizeof path, "%s/cpuinfo", proc_root);
    if ((f = fopen(path, "re"))) {
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "processor", 9) == 0)
                processors++;
            if (!inv->cpu_model[0] && colon && strncmp(line, "model name", 10) == 0) {
                char *v = colon + 1;
                size_t len;
                while (*v == ' ' || *v == '\t')
                    v++;
                len = strcspn(v, "\n");
                snprintf(inv->cpu_model, sizeof inv->cpu_model, "%.*s", (int)len, v);
            }
        }
        fclose(f);
    }
    inv->cpus = processors;
    if (read_small(sys_root, "devices/system/cpu/online", buf, sizeof buf) > 0) {
        int online = count_list(buf);
        if (online > 0)
            inv->cpus = online;
    }
    if (inv->cpus <= 0)
        return arb_errf(err, -ENOENT,
                        "cannot count CPUs: neither %s/cpuinfo nor %s/devices/system/cpu/online "
                        "could be read",
                        proc_root, sys_root);

    inv->mem_bytes = 0;
    snprintf(path, sizeof path, "%s/meminfo", proc_root);
    if ((f = fopen(path, "re"))) {
        long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
                inv->mem_bytes = (int64_t)kb * 1024;
        fclose(f);
    }
    if (inv->mem_bytes <= 0)
        return arb_errf(err, -ENOENT, "cannot read MemTotal from %s/meminfo", proc_root);

    inv->numa_nodes = 1;
    if (read_small(sys_root, "devices/system/node/online", buf, sizeof buf) > 0) {
        int nodes = count_list(buf);
        if (nodes > 0)
            inv->numa_nodes = nodes;
    }
    return 0;
}

/* ---- hwloc: cores, packages, GPU locality ---------------------------------------- */

/* The topmost PCI-to-PCI bridge above o (a root port or a switch's upstream
 * port): GPUs below one of them share a PCIe switch tree. */
static hwloc_obj_t pcie_top(hwloc_obj_t o)
{
    hwloc_obj_t top = NULL;

    for (o = o->parent; o && o->type == HWLOC_OBJ_BRIDGE; o = o->parent)
        if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
            top = o;
    return top;
}

/* The NUMA node (OS index) nearest to o, or -1 when hwloc cannot tell one. */
static int pcie_numa(hwloc_topology_t t, hwloc_obj_t o, int nnuma)
{
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o);

    if (!anc || !anc->nodeset || hwloc_bitmap_iszero(anc->nodeset))
        return -1;
    if (hwloc_bitmap_weight(anc->nodeset) == 1 || nnuma == 1)
        return hwloc_bitmap_first(anc->nodeset);
    return -1; /* attached above several NUMA nodes */
}

int agent_hwloc_fill(agent_inv_t *inv, const char *xml, arb_err_t *err)
{
    hwloc_topology_t t;
    int rc = 0, nnuma, raw_pcie[ARB_MAX_GPUS];
    bool any_pcie = false;

    if (hwloc_topology_init(&t) != 0)
        return arb_errf(err, -ENOMEM, "hwloc: cannot start a topology");
    if (xml && hwloc_topology_set_xml(t, xml) != 0) {
        rc = arb_errf(err, -ENOENT, "hwloc: cannot read the topology file '%s'", xml);
        goto out;
    }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t) != 0) {
        rc = arb_errf(err, -EIO, "hwloc: cannot load the topology%s%s", xml ? " of " : "",
                      xml ? xml : "");
        goto out;
    }
    inv->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    inv->packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
    nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    if (nnuma > inv->numa_nodes)
        inv->numa_nodes = nnuma;

    for (int i = 0; i < inv->ngpus; i++) {
        agent_gpu_info_t *g = &inv->gpu[i];
        unsigned dom, bus, dev, fn;
        hwloc_obj_t o = NULL, top;

        raw_pcie[i] = g->pcie;
        if (g->pci_bus_id[0] && sscanf(g->pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4)
            o = hwloc_get_pcidev_by_busid(t, dom, bus, dev, fn);
        if (!o)
            continue;
        if (g->numa < 0)
            g->numa = (int16_t)pcie_numa(t, o, nnuma);
        if (g->pcie < 0 && (top = pcie_top(o))) {
            /* Raw ids past any the source gave, compacted below. */
            raw_pcie[i] = 1000 + (int)top->gp_index % 30000;
            any_pcie = true;
        }
    }
    if (any_pcie) {
        agent_ids_compact(raw_pcie, inv->ngpus);
        for (int i = 0; i < inv->ngpus; i++)
            inv->gpu[i].pcie = (int16_t)raw_pcie[i];
    }
out:
    hwloc_topology_destroy(t);
    return rc;
}

/* ---- the discovered node ------------------------------------------------------------ */

int agent_disc_open(agent_disc_t *d, const agent_disc_opts_t *o, arb_err_t *err)
{
    const char *src = o->gpu_source;
    bool soft = false; /* auto-chosen nvml: a node without NVML has no GPUs */
    arb_err_t e2;
    int rc;

    memset(d, 0, sizeof *d);
    rc = agent_host_read(&d->inv, o->proc_root, o->sys_root, err);
    if (rc < 0)
        return rc;
    if (!src || !strcmp(src, "auto")) {
        soft = !o->inventory && !o->fake;
        src = o->inventory ? "inventory" : o->fake ? "fake" : "nvml";
    }
    d->ops = agent_gpu_find(src);
    if (!d->ops)
        return arb_errf(err, -EINVAL, "unknown GPU source '%s'; use one of: nvml, inventory, fake",
                        src);
    snprintf(d->inv.gpu_source, sizeof d->inv.gpu_source, "%s", d->ops->name);
    memset(&e2, 0, sizeof e2);
    rc = d->ops->open(o, &d->inv, &d->state, &e2);
    if (rc < 0 && soft && (rc == -ENOENT || rc == -ENODEV)) {
        snprintf(d->note, sizeof d->note, "no GPUs: %.240s", e2.msg);
        snprintf(d->inv.gpu_source, sizeof d->inv.gpu_source, "none");
        d->inv.ngpus = 0;
        d->ops = NULL;
        d->state = NULL;
        rc = 0;
    } else if (rc < 0) {
        if (err)
            *err = e2;
        memset(d, 0, sizeof *d);
        return rc;
    }
    if (o->node_name && o->node_name[0])
        snprintf(d->inv.name, sizeof d->inv.name, "%s", o->node_name);
    if (!d->inv.name[0]) {
        rc = arb_errf(err, -EINVAL, "the node has no name; give one with --name NODE");
        goto fail;
    }
    if (!o->no_hwloc) {
        memset(&e2, 0, sizeof e2);
        if (agent_hwloc_fill(&d->inv, o->hwloc_xml, &e2) < 0) {
            if (o->hwloc_xml) { /* asked for by name: an error */
                rc = arb_errf(err, -EINVAL, "%s", e2.msg);
                goto fail;
            }
            size_t used = strlen(d->note);
            snprintf(d->note + used, sizeof d->note - used,
                     "%s%.160s; GPU NUMA/PCIe locality "
                     "unknown",
                     used ? "; " : "", e2.msg);
        }
    }
    agent_inv_compact(&d->inv);
    return 0;
fail:
    agent_disc_close(d);
    return rc;
}

int agent_disc_sample(agent_disc_t *d, agent_gpu_sample_t *out, arb_err_t *err)
{
    for (int i = 0; i < d->inv.ngpus; i++)
        out[i] = (agent_gpu_sample_t){-1, -1, -1, false};
    if (!d->ops || d->inv.ngpus == 0)
        return 0;
    return d->ops->sample(d->state, &d->inv, out, err);
}

void agent_disc_close(agent_disc_t *d)
{
    if (d->ops && d->ops->close)
        d->ops->close(d->state);
    memset(d, 0, sizeof *d);
}
