/*
 * nvml_mock.c: a stand-in for NVIDIA's libnvidia-ml.so.1 with the calls the
 * agent's NVML GPU source makes (src/agent/gpu_nvml.c), so the dlopen path
 * runs in tests on machines without GPUs. nvmlInit_v2 reads the machine it
 * pretends to be from the environment:
 *
 *   MOCK_NVML_GPUS    "N[:NAME[:MiB]]", default "4:NVIDIA H100 80GB HBM3:81559";
 *                     GPU i sits at PCI bus id 0000:XX:00.0 with XX = 0x10 * (i + 1)
 *   MOCK_NVML_NVLINK  comma list: "a-b" a direct NVLink between GPUs a and b,
 *                     "sw:a+b+c" those GPUs each linked to one NVSwitch
 *   MOCK_NVML_PCIE    per-GPU PCIe switch ids "0,0,1,1": the common ancestor
 *                     of two GPUs is SINGLE when equal, else SYSTEM; unset:
 *                     nvmlDeviceGetTopologyCommonAncestor is NOT_SUPPORTED
 *   MOCK_NVML_UTIL, MOCK_NVML_TEMP, MOCK_NVML_USED   per-GPU lists (%, C, MiB)
 *   MOCK_NVML_FAIL    "init": nvmlInit_v2 fails (driver not loaded)
 *                     "count": nvmlDeviceGetCount_v2 fails
 *   MOCK_NVML_LOST_FILE  a file read again on every memory, utilisation and
 *                     temperature call: a comma list of GPU indices that have
 *                     "fallen off the bus" (those calls answer
 *                     NVML_ERROR_GPU_IS_LOST, as after an Xid 79). A test
 *                     writes it to lose a GPU at run time and empties it to
 *                     bring the GPU back; no file: every GPU is present.
 *
 * mock_nvml_live() tells tests how many inits were not shut down.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXG 32
#define MAXL 18

typedef struct nvmlPciInfo {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct gpu {
    int index;
    unsigned bus;
    unsigned util, temp, used_mib;
    int pcie; /* -1: topology not supported */
    int nlinks;
    unsigned link_bus[MAXL]; /* remote end of each active link */
} gpu_t;

static struct {
    int n, live;
    char name[96];
    unsigned long long mem_mib;
    const char *fail;
    gpu_t g[MAXG];
} M;

static void list(const char *env, unsigned *dst, size_t stride)
{
    const char *s = getenv(env);

    for (int i = 0; s && *s && i < MAXG; i++) {
        char *end;
        unsigned long v = strtoul(s, &end, 0);
        if (end == s)
            break;
        *(unsigned *)((char *)dst + stride * i) = (unsigned)v;
        s = *end == ',' ? end + 1 : end;
    }
}

static void add_link(int a, unsigned remote_bus)
{
    if (a >= 0 && a < M.n && M.g[a].nlinks < MAXL)
        M.g[a].link_bus[M.g[a].nlinks++] = remote_bus;
}

static int configure(void)
{
    const char *s = getenv("MOCK_NVML_GPUS"), *p;
    int sw = 0;

    memset(&M.g, 0, sizeof M.g);
    M.n = 4;
    snprintf(M.name, sizeof M.name, "NVIDIA H100 80GB HBM3");
    M.mem_mib = 81559;
    if (s) {
        char buf[256], *name, *mem;
        snprintf(buf, sizeof buf, "%s", s);
        name = strchr(buf, ':');
        if (name)
            *name++ = '\0';
        mem = name ? strchr(name, ':') : NULL;
        if (mem)
            *mem++ = '\0';
        M.n = atoi(buf);
        if (name)
            snprintf(M.name, sizeof M.name, "%s", name);
        if (mem)
            M.mem_mib = strtoull(mem, NULL, 10);
    }
    if (M.n < 0 || M.n > MAXG)
        M.n = MAXG;
    for (int i = 0; i < M.n; i++) {
        M.g[i].index = i;
        M.g[i].bus = 0x10 * (unsigned)(i + 1);
        M.g[i].pcie = -1;
        M.g[i].temp = 30;
    }
    list("MOCK_NVML_UTIL", &M.g[0].util, sizeof(gpu_t));
    list("MOCK_NVML_TEMP", &M.g[0].temp, sizeof(gpu_t));
    list("MOCK_NVML_USED", &M.g[0].used_mib, sizeof(gpu_t));
    if (getenv("MOCK_NVML_PCIE"))
        list("MOCK_NVML_PCIE", (unsigned *)&M.g[0].pcie, sizeof(gpu_t));
    for (p = getenv("MOCK_NVML_NVLINK"); p && *p;) {
        int a, b, used = 0;
        if (strncmp(p, "sw:", 3) == 0) {
            unsigned swbus = 0xe0 + (unsigned)sw++;
            p += 3;
            while (sscanf(p, "%d%n", &a, &used) == 1) {
                for (int k = 0; k < 2; k++) /* two links to the switch */
                    add_link(a, swbus);
                p += used;
                if (*p != '+')
                    break;
                p++;
            }
        } else if (sscanf(p, "%d-%d%n", &a, &b, &used) == 2) {
            if (a >= 0 && a < M.n && b >= 0 && b < M.n) {
                add_link(a, M.g[b].bus);
                add_link(b, M.g[a].bus);
            }
            p += used;
        } else {
            break;
        }
        if (*p == ',')
            p++;
    }
    M.fail = getenv("MOCK_NVML_FAIL");
    return 0;
}

/* ---- the API ------------------------------------------------------------- */

typedef gpu_t *nvmlDevice_t;

int mock_nvml_live(void)
{
    return M.live;
}

const char *nvmlErrorString(int r)
{
    switch (r) {
    case 0:
        return "Success";
    case 2:
        return "Invalid Argument";
    case 3:
        return "Not Supported";
    case 9:
        return "Driver Not Loaded";
    default:
        return "Unknown Error";
    }
}

int nvmlInit_v2(void)
{
    configure();
    if (M.fail && strcmp(M.fail, "init") == 0)
        return 9;
    M.live++;
    return 0;
}

int nvmlShutdown(void)
{
    if (M.live == 0)
        return 1; /* uninitialized */
    M.live--;
    return 0;
}

int nvmlDeviceGetCount_v2(unsigned int *n)
{
    if (!M.live)
        return 1;
    if (M.fail && strcmp(M.fail, "count") == 0)
        return 999;
    *n = (unsigned)M.n;
    return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (!M.live)
        return 1;
    if (i >= (unsigned)M.n)
        return 2;
    *d = &M.g[i];
    return 0;
}

int nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
    if (strlen(M.name) >= len)
        return 7; /* insufficient size */
    snprintf(name, len, "%s", M.name);
    return 0;
}

int nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
    if (len < 80)
        return 7;
    snprintf(uuid, len, "GPU-0000%04x-1111-2222-3333-4444555566%02x", d->bus, d->index);
    return 0;
}

#define NVML_ERROR_GPU_IS_LOST 15

/* Is d listed in MOCK_NVML_LOST_FILE right now? Read on every call so that
 * a test can flip it while the agent runs. */
static int lost(nvmlDevice_t d)
{
    const char *path = getenv("MOCK_NVML_LOST_FILE");
    char buf[256], *p, *end;
    size_t k;
    FILE *f;

    if (!path || !(f = fopen(path, "re")))
        return 0;
    k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    for (p = buf; *p;) {
        long v = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        if (v == d->index)
            return 1;
        p = end;
    }
    return 0;
}

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    if (lost(d))
        return NVML_ERROR_GPU_IS_LOST;
    m->total = M.mem_mib << 20;
    m->used = (unsigned long long)d->used_mib << 20;
    m->free = m->total - m->used;
    return 0;
}

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    if (lost(d))
        return NVML_ERROR_GPU_IS_LOST;
    u->gpu = d->util;
    u->memory = d->util / 2;
    return 0;
}

int nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    if (sensor != 0)
        return 2;
    if (lost(d))
        return NVML_ERROR_GPU_IS_LOST;
    *t = d->temp;
    return 0;
}

static void fill_pci(nvmlPciInfo_t *p, unsigned bus)
{
    memset(p, 0, sizeof *p);
    p->bus = bus;
    p->pciDeviceId = 0x233010de;
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", bus);
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", bus);
}

int nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    fill_pci(p, d->bus);
    return 0;
}

int nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *active)
{
    if (link >= MAXL)
        return 2;
    *active = (int)link < d->nlinks;
    return 0;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t *p)
{
    if ((int)link >= d->nlinks)
        return 2;
    fill_pci(p, d->link_bus[link]);
    return 0;
}

int nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level)
{
    if (a->pcie < 0 || b->pcie < 0)
        return 3; /* not supported */
    *level = a == b ? 0 : a->pcie == b->pcie ? 10 : 50;
    return 0;
}
