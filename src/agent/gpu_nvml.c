/*
 * gpu_nvml.c: the NVML GPU source. libnvidia-ml.so.1 is loaded at run time
 * with dlopen, so the agent builds and runs on machines without NVIDIA's
 * driver; the few prototypes used are written out below from NVML's
 * documented API (no NVIDIA header is needed).
 *
 * Required: nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetUUID,
 * nvmlDeviceGetMemoryInfo. Optional (a missing one leaves its field
 * unknown): nvmlErrorString, nvmlDeviceGetUtilizationRates,
 * nvmlDeviceGetTemperature, nvmlDeviceGetPciInfo_v3, nvmlDeviceGetNvLinkState,
 * nvmlDeviceGetNvLinkRemotePciInfo_v2, nvmlDeviceGetTopologyCommonAncestor.
 *
 * Topology:
 *   nvlink  GPUs joined by an active NVLink, directly or through the same
 *           NVSwitch (a remote end that is no GPU), form one domain (union-
 *           find over link ends); GPUs without active links get -1.
 *   pcie    GPUs whose common ancestor is at most NVML_TOPOLOGY_MULTIPLE
 *           (no host bridge between them) share an id; when NVML cannot
 *           tell, hwloc fills it from the PCI bus id (discovery.c).
 *   numa    from hwloc by PCI bus id (discovery.c).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/discovery.h"

/* ---- the NVML API, as documented -------------------------------------------- */

typedef int nvmlReturn_t; /* an enum in C: int-sized */
typedef struct nvmlDevice_st *nvmlDevice_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_TEMPERATURE_GPU 0
#define NVML_FEATURE_ENABLED 1
#define NVML_TOPOLOGY_MULTIPLE 20
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

typedef struct nvmlMemory {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct nvmlUtilization {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct nvmlPciInfo {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct nvml_api {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*temp)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned int, int *);
    nvmlReturn_t (*link_remote)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
    nvmlReturn_t (*ancestor)(nvmlDevice_t, nvmlDevice_t, int *);
} nvml_api_t;

typedef struct nvml_state {
    void *lib;
    nvml_api_t f;
    int n;
    nvmlDevice_t dev[ARB_MAX_GPUS];
} nvml_state_t;

static const char *nvml_err(const nvml_state_t *st, nvmlReturn_t r)
{
    static char buf[32];
    const char *s = st->f.error_string ? st->f.error_string(r) : NULL;

    if (s)
        return s;
    snprintf(buf, sizeof buf, "NVML error %d", r);
    return buf;
}

/* Look sym up; *ok becomes false when a required one is missing. */
static void *sym(void *lib, const char *name, bool required, const char **missing)
{
    void *p = dlsym(lib, name);

    if (!p && required && !*missing)
        *missing = name;
    return p;
}

/* ---- union-find over link ends ------------------------------------------------ */

typedef struct uf {
    int parent[ARB_MAX_GPUS + ARB_MAX_GPUS * NVML_NVLINK_MAX_LINKS];
    char id[ARB_MAX_GPUS + ARB_MAX_GPUS * NVML_NVLINK_MAX_LINKS][32];
    int n;
} uf_t;

static int uf_find(uf_t *u, int i)
{
    while (u->parent[i] != i)
        i = u->parent[i] = u->parent[u->parent[i]];
    return i;
}

static void uf_union(uf_t *u, int a, int b)
{
    a = uf_find(u, a);
    b = uf_find(u, b);
    if (a != b)
        u->parent[a > b ? a : b] = a < b ? a : b;
}

/* The element for PCI end `busid`, made on first sight. */
static int uf_end(uf_t *u, const char *busid)
{
    for (int i = 0; i < u->n; i++)
        if (strcmp(u->id[i], busid) == 0)
            return i;
    if (u->n == (int)(sizeof u->parent / sizeof u->parent[0]))
        return -1;
    snprintf(u->id[u->n], sizeof u->id[0], "%s", busid);
    u->parent[u->n] = u->n;
    return u->n++;
}

static void nvlink_domains(nvml_state_t *st, agent_inv_t *inv)
{
    uf_t *u = calloc(1, sizeof *u);
    bool linked[ARB_MAX_GPUS] = {false};
    int raw[ARB_MAX_GPUS];

    if (!u)
        return;
    for (int i = 0; i < st->n; i++) { /* GPUs first: element i is GPU i */
        char own[32];
        snprintf(own, sizeof own, "gpu#%d", i); /* no bus id: matches no link end */
        uf_end(u, inv->gpu[i].pci_bus_id[0] ? inv->gpu[i].pci_bus_id : own);
    }
    for (int i = 0; i < st->n; i++) {
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            int active = 0, e;
            nvmlPciInfo_t rp;
            char busid[32];

            if (st->f.link_state(st->dev[i], l, &active) != NVML_SUCCESS ||
                active != NVML_FEATURE_ENABLED)
                continue;
            memset(&rp, 0, sizeof rp);
            if (st->f.link_remote(st->dev[i], l, &rp) != NVML_SUCCESS)
                continue;
            rp.busId[sizeof rp.busId - 1] = '\0';
            if (agent_pci_busid_norm(rp.busId, busid, sizeof busid) < 0)
                continue;
            if ((e = uf_end(u, busid)) < 0)
                continue;
            uf_union(u, i, e);
            linked[i] = true;
        }
    }
    for (int i = 0; i < st->n; i++)
        raw[i] = linked[i] ? uf_find(u, i) : -1;
    agent_ids_compact(raw, st->n);
    for (int i = 0; i < st->n; i++)
        inv->gpu[i].nvlink = (int16_t)raw[i];
    free(u);
}

static void pcie_groups(nvml_state_t *st, agent_inv_t *inv)
{
    int raw[ARB_MAX_GPUS];

    for (int i = 0; i < st->n; i++) {
        raw[i] = i;
        for (int j = 0; j < i; j++) {
            int level = 0;
            if (st->f.ancestor(st->dev[i], st->dev[j], &level) != NVML_SUCCESS)
                return; /* NVML cannot tell: hwloc's turn */
            if (level <= NVML_TOPOLOGY_MULTIPLE) {
                raw[i] = raw[j];
                break;
            }
        }
    }
    agent_ids_compact(raw, st->n);
    for (int i = 0; i < st->n; i++)
        inv->gpu[i].pcie = (int16_t)raw[i];
}

/* ---- the row ---------------------------------------------------------------------- */

static void nvml_close(void *state)
{
    nvml_state_t *st = state;

    if (!st)
        return;
    if (st->f.shutdown)
        st->f.shutdown();
    if (st->lib)
        dlclose(st->lib);
    free(st);
}

static int nvml_open(const agent_disc_opts_t *o, agent_inv_t *inv, void **state, arb_err_t *err)
{
    const char *path = o->nvml_path ? o->nvml_path : "libnvidia-ml.so.1";
    const char *missing = NULL;
    nvml_state_t *st = calloc(1, sizeof *st);
    agent_inv_t out = *inv;
    unsigned int count = 0;
    nvmlReturn_t r;
    bool inited = false;
    int rc = 0;

    if (!st)
        return arb_errf(err, -ENOMEM, "out of memory");
    st->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!st->lib) {
        const char *why = dlerror();
        rc = arb_errf(err, -ENOENT,
                      "NVML: cannot load %s (%s); install the NVIDIA driver, or "
                      "use --inventory FILE or --fake-gpus N",
                      path, why ? why : "not found");
        goto fail;
    }
    st->f.init = sym(st->lib, "nvmlInit_v2", true, &missing);
    st->f.shutdown = sym(st->lib, "nvmlShutdown", true, &missing);
    st->f.count = sym(st->lib, "nvmlDeviceGetCount_v2", true, &missing);
    st->f.handle = sym(st->lib, "nvmlDeviceGetHandleByIndex_v2", true, &missing);
    st->f.name = sym(st->lib, "nvmlDeviceGetName", true, &missing);
    st->f.uuid = sym(st->lib, "nvmlDeviceGetUUID", true, &missing);
    st->f.memory = sym(st->lib, "nvmlDeviceGetMemoryInfo", true, &missing);
    st->f.error_string = sym(st->lib, "nvmlErrorString", false, &missing);
    st->f.util = sym(st->lib, "nvmlDeviceGetUtilizationRates", false, &missing);
    st->f.temp = sym(st->lib, "nvmlDeviceGetTemperature", false, &missing);
    st->f.pci = sym(st->lib, "nvmlDeviceGetPciInfo_v3", false, &missing);
    st->f.link_state = sym(st->lib, "nvmlDeviceGetNvLinkState", false, &missing);
    st->f.link_remote = sym(st->lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", false, &missing);
    st->f.ancestor = sym(st->lib, "nvmlDeviceGetTopologyCommonAncestor", false, &missing);
    if (missing) {
        rc = arb_errf(err, -ENOSYS, "NVML: %s has no %s; the driver is too old", path, missing);
        goto fail;
    }
    r = st->f.init();
    if (r != NVML_SUCCESS) {
        rc = arb_errf(err, -ENODEV, "NVML: nvmlInit_v2 failed: %s", nvml_err(st, r));
        goto fail;
    }
    inited = true;
    r = st->f.count(&count);
    if (r != NVML_SUCCESS) {
        rc = arb_errf(err, -EIO, "NVML: nvmlDeviceGetCount_v2 failed: %s", nvml_err(st, r));
        goto fail;
    }
    if (count > ARB_MAX_GPUS) {
        rc = arb_errf(err, -ERANGE, "NVML reports %u GPUs; Arbiter handles at most %d per node",
                      count, ARB_MAX_GPUS);
        goto fail;
    }
    st->n = (int)count;
    out.ngpus = st->n;
    for (int i = 0; i < st->n; i++) {
        agent_gpu_info_t *g = &out.gpu[i];
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "", uuid[NVML_DEVICE_UUID_BUFFER_SIZE] = "";
        nvmlMemory_t mem;
        nvmlPciInfo_t pci;

        memset(g, 0, sizeof *g);
        g->index = i;
        g->numa = g->pcie = g->nvlink = -1;
        if ((r = st->f.handle((unsigned)i, &st->dev[i])) != NVML_SUCCESS ||
            (r = st->f.name(st->dev[i], name, sizeof name)) != NVML_SUCCESS ||
            (r = st->f.uuid(st->dev[i], uuid, sizeof uuid)) != NVML_SUCCESS ||
            (r = st->f.memory(st->dev[i], &mem)) != NVML_SUCCESS) {
            rc = arb_errf(err, -EIO, "NVML: GPU %d: %s", i, nvml_err(st, r));
            goto fail;
        }
        name[sizeof name - 1] = uuid[sizeof uuid - 1] = '\0';
        snprintf(g->model, sizeof g->model, "%s", name);
        snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
        g->mem_mib = (int32_t)(mem.total >> 20);
        memset(&pci, 0, sizeof pci);
        if (st->f.pci && st->f.pci(st->dev[i], &pci) == NVML_SUCCESS) {
            pci.busId[sizeof pci.busId - 1] = '\0';
            if (agent_pci_busid_norm(pci.busId, g->pci_bus_id, sizeof g->pci_bus_id) < 0)
                g->pci_bus_id[0] = '\0';
        }
    }
    if (st->f.link_state && st->f.link_remote)
        nvlink_domains(st, &out);
    if (st->f.ancestor)
        pcie_groups(st, &out);
    *inv = out;
    *state = st;
    return 0;
fail:
    if (!inited)
        st->f.shutdown = NULL;
    nvml_close(st);
    return rc;
}

static int nvml_sample(void *state, const agent_inv_t *inv, agent_gpu_sample_t *out, arb_err_t *err)
{
    nvml_state_t *st = state;

    for (int i = 0; i < st->n && i < inv->ngpus; i++) {
        nvmlUtilization_t u;
        nvmlMemory_t m;
        unsigned int t;

        nvmlReturn_t mr;
        out[i] = (agent_gpu_sample_t){-1, -1, -1, false};
        if (st->f.util && st->f.util(st->dev[i], &u) == NVML_SUCCESS)
            out[i].util_pct = (int16_t)(u.gpu > 100 ? 100 : u.gpu);
        if (st->f.temp && st->f.temp(st->dev[i], NVML_TEMPERATURE_GPU, &t) == NVML_SUCCESS)
            out[i].temp_c = (int16_t)(t > 300 ? 300 : t);
        if ((mr = st->f.memory(st->dev[i], &m)) == NVML_SUCCESS)
            out[i].mem_used_mib = (int32_t)(m.used >> 20);
        /* Fallen off the bus (an Xid 79), or answering nothing at all. */
        out[i].unhealthy = mr == NVML_ERROR_GPU_IS_LOST ||
                           (mr != NVML_SUCCESS && out[i].util_pct < 0 && out[i].temp_c < 0);
    }
    return 0;
}

const agent_gpu_ops_t agent_gpu_nvml = {
    .name = "nvml",
    .summary = "NVIDIA GPUs through libnvidia-ml.so.1, loaded at run time",
    .open = nvml_open,
    .sample = nvml_sample,
    .close = nvml_close,
};
