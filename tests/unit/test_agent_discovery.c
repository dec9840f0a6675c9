/*
 * test_agent_discovery.c: what the agent finds on a node (src/agent).
 *
 * The host from fixture /proc and sysfs trees; the three GPU sources: fake
 * ("8:H100"), inventory YAML (both forms, labels, overrides, and bad input
 * rejected with FILE:LINE:COL, the field path and a fix, leaving the
 * inventory untouched), and NVML through a mock libnvidia-ml.so.1 loaded
 * with dlopen (tests/mock): names, UUIDs, memory, NVLink domains direct and
 * through an NVSwitch, PCIe switches from NVML and, when NVML cannot tell,
 * from hwloc over a fixture topology, live samples, failures, and shutdown.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/discovery.h"

#define FIX ARB_SOURCE_DIR "/tests/agent"

static agent_disc_opts_t opts(void)
{
    agent_disc_opts_t o;
    memset(&o, 0, sizeof o);
    o.node_name = "n1";
    o.proc_root = FIX "/proc1";
    o.sys_root = FIX "/sys";
    o.no_hwloc = true;
    return o;
}

static void test_host_fixture(void **st)
{
    agent_inv_t inv;
    arb_err_t err = {{0}};

    memset(&inv, 0, sizeof inv);
    assert_int_equal(agent_host_read(&inv, FIX "/proc1", FIX "/sys", &err), 0);
    assert_int_equal(inv.cpus, 4);
    assert_int_equal(inv.mem_bytes, 16384000LL * 1024);
    assert_int_equal(inv.numa_nodes, 2);
    assert_string_equal(inv.cpu_model, "Fixture CPU @ 2.0GHz");

    memset(&inv, 0, sizeof inv);
    assert_int_equal(agent_host_read(&inv, "/nonexistent", "/nonexistent", &err), -ENOENT);
    assert_non_null(strstr(err.msg, "cannot count CPUs"));

    /* The real machine, with hwloc. */
    memset(&inv, 0, sizeof inv);
    assert_int_equal(agent_host_read(&inv, NULL, NULL, &err), 0);
    assert_true(inv.cpus >= 1 && inv.mem_bytes > 0);
    assert_int_equal(agent_hwloc_fill(&inv, NULL, &err), 0);
    assert_true(inv.cores >= 1 && inv.packages >= 1);
}

static void test_helpers(void **st)
{
    char b[32];
    int v[6] = {7, 7, -3, 2, 7, 2};

    assert_int_equal(agent_pci_busid_norm("00000000:17:00.0", b, sizeof b), 0);
    assert_string_equal(b, "0000:17:00.0");
    assert_int_equal(agent_pci_busid_norm("0000:AB:1F.7", b, sizeof b), 0);
    assert_string_equal(b, "0000:ab:1f.7");
    assert_int_equal(agent_pci_busid_norm("3b:00.0", b, sizeof b), 0);
    assert_string_equal(b, "0000:3b:00.0");
    assert_int_equal(agent_pci_busid_norm("17:00", b, sizeof b), -EINVAL);
    assert_int_equal(agent_pci_busid_norm("0000:17:20.0", b, sizeof b), -EINVAL);
    assert_int_equal(agent_pci_busid_norm("0000:17:00.0x", b, sizeof b), -EINVAL);
    agent_ids_compact(v, 6);
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], 0);
    assert_int_equal(v[2], -1);
    assert_int_equal(v[3], 1);
    assert_int_equal(v[4], 0);
    assert_int_equal(v[5], 1);
}

/* ---- fake ------------------------------------------------------------------------ */

static void test_fake(void **st)
{
    agent_disc_opts_t o = opts();
    agent_disc_t d, d2;
    agent_gpu_sample_t s[ARB_MAX_GPUS];
    arb_err_t err = {{0}};

    o.fake = "8:H100";
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    assert_string_equal(d.inv.gpu_source, "fake");
    assert_string_equal(d.inv.name, "n1");
    assert_int_equal(d.inv.ngpus, 8);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(d.inv.gpu[i].index, i);
        assert_string_equal(d.inv.gpu[i].model, "H100");
        assert_int_equal(d.inv.gpu[i].mem_mib, 81559);
        assert_int_equal(d.inv.gpu[i].nvlink, 0);
        assert_int_equal(d.inv.gpu[i].pcie, i / 2);
        assert_int_equal(d.inv.gpu[i].numa, i < 4 ? 0 : 1);
        assert_true(strncmp(d.inv.gpu[i].uuid, "GPU-", 4) == 0);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(d.inv.gpu[i].uuid, d.inv.gpu[j].uuid);
    }
    assert_int_equal(agent_disc_sample(&d, s, &err), 0);
    assert_int_equal(s[3].util_pct, 0);
    assert_int_equal(s[3].temp_c, 30);
    assert_int_equal(agent_fake_set(&d, 3, &(agent_gpu_sample_t){97, 71, 40000, false}), 0);
    assert_int_equal(agent_fake_set(&d, 8, &(agent_gpu_sample_t){97, 71, 40000, false}), -EINVAL);
    assert_int_equal(agent_disc_sample(&d, s, &err), 0);
    assert_int_equal(s[3].util_pct, 97);
    assert_int_equal(s[3].temp_c, 71);
    assert_int_equal(s[3].mem_used_mib, 40000);

    /* Same node, same UUIDs; another node, others. */
    assert_int_equal(agent_disc_open(&d2, &o, &err), 0);
    assert_string_equal(d.inv.gpu[5].uuid, d2.inv.gpu[5].uuid);
    agent_disc_close(&d2);
    o.node_name = "n2";
    assert_int_equal(agent_disc_open(&d2, &o, &err), 0);
    assert_string_not_equal(d.inv.gpu[5].uuid, d2.inv.gpu[5].uuid);
    agent_disc_close(&d2);
    agent_disc_close(&d);

    o.fake = "2:A100-40G";
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    assert_int_equal(d.inv.gpu[1].mem_mib, 40960);
    assert_int_equal(d.inv.gpu[1].numa, 1);
    agent_disc_close(&d);
    o.fake = "1:Custom:24Gi";
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    assert_int_equal(d.inv.gpu[0].mem_mib, 24576);
    assert_string_equal(d.inv.gpu[0].model, "Custom");
    agent_disc_close(&d);
    o.fake = "0";
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    assert_int_equal(d.inv.ngpus, 0);
    agent_disc_close(&d);

    const char *bad[] = {"17", "x", "8:", "-1", "8:H100:12Qi", "", NULL};
    for (int i = 0; bad[i]; i++) {
        o.fake = bad[i];
        memset(&err, 0, sizeof err);
        assert_true(agent_disc_open(&d, &o, &err) < 0);
        assert_non_null(strstr(err.msg, "--fake-gpus"));
    }
    /* A node needs a name. */
    o = opts();
    o.node_name = NULL;
    o.fake = "1";
    assert_int_equal(agent_disc_open(&d, &o, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--name"));
    o.gpu_source = "cuda";
    o.node_name = "n1";
    assert_int_equal(agent_disc_open(&d, &o, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "unknown GPU source 'cuda'; use one of: nvml, inventory, "
                                    "fake"));
}

/* ---- inventory --------------------------------------------------------------------- */

static int parse(const char *yaml, agent_inv_t *inv, arb_err_t *err)
{
    memset(err, 0, sizeof *err);
    return agent_inventory_parse("inv.yaml", yaml, strlen(yaml), inv, err);
}

static void test_inventory_list(void **st)
{
    static const char yaml[] =
        "name: dgx-7\n"
        "cpu: 224\n"
        "memory: 2Ti\n"
        "labels: {rack: r3, zone: z1, empty: \"\"}\n"
        "gpus:\n"
        "  - {model: H100, memory: 80Gi, nvlink: 0, pcie: 0, numa: 0, uuid: GPU-a,\n"
        "     pciBusId: \"00000000:17:00.0\"}\n"
        "  - {model: H100, memory: 80Gi, nvlink: 0, pcie: 0, numa: 0, uuid: GPU-b}\n"
        "  - {model: H100, memory: 80Gi, nvlink: 1, pcie: 1, numa: 1}\n"
        "  - {memory: 80G}\n";
    agent_inv_t inv;
    arb_err_t err;

    memset(&inv, 0, sizeof inv);
    inv.cpus = 2;
    assert_int_equal(parse(yaml, &inv, &err), 0);
    assert_string_equal(inv.name, "dgx-7");
    assert_int_equal(inv.cpus, 224);
    assert_int_equal(inv.mem_bytes, 2LL << 40);
    assert_int_equal(inv.nlabels, 3);
    assert_string_equal(inv.labels[0].key, "rack");
    assert_string_equal(inv.labels[0].val, "r3");
    assert_string_equal(inv.labels[2].val, "");
    assert_int_equal(inv.ngpus, 4);
    assert_string_equal(inv.gpu[0].uuid, "GPU-a");
    assert_string_equal(inv.gpu[0].pci_bus_id, "0000:17:00.0");
    assert_int_equal(inv.gpu[0].mem_mib, 81920);
    assert_int_equal(inv.gpu[2].nvlink, 1);
    assert_int_equal(inv.gpu[2].numa, 1);
    assert_int_equal(inv.gpu[3].nvlink, -1);
    assert_int_equal(inv.gpu[3].pcie, -1);
    assert_int_equal(inv.gpu[3].mem_mib, 76294);
    assert_string_equal(inv.gpu[3].model, "");
}

static void test_inventory_block_and_file(void **st)
{
    static const char yaml[] = "gpus: {count: 8, model: A100-80G, memory: 80Gi, nvlinkDomains: 2,\n"
                               "       pcieSwitches: 4, numaNodes: 2}\n";
    agent_disc_opts_t o = opts();
    agent_inv_t inv;
    agent_disc_t d;
    agent_gpu_sample_t s[ARB_MAX_GPUS];
    arb_err_t err;
    char path[] = "/tmp/arb-inv-XXXXXX";
    int fd;

    memset(&inv, 0, sizeof inv);
    snprintf(inv.name, sizeof inv.name, "keep");
    assert_int_equal(parse(yaml, &inv, &err), 0);
    assert_string_equal(inv.name, "keep"); /* not in the file: left as it was */
    assert_int_equal(inv.ngpus, 8);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(inv.gpu[i].nvlink, i / 4);
        assert_int_equal(inv.gpu[i].pcie, i / 2);
        assert_int_equal(inv.gpu[i].numa, i / 4);
    }

    /* Through the discovery: the host's CPUs stay, the file's GPUs come. */
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    o.inventory = path;
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    assert_string_equal(d.inv.gpu_source, "inventory");
    assert_int_equal(d.inv.cpus, 4);
    assert_int_equal(d.inv.ngpus, 8);
    assert_int_equal(agent_disc_sample(&d, s, &err), 0);
    assert_int_equal(s[0].util_pct, -1); /* no live telemetry */
    agent_disc_close(&d);
    unlink(path);

    o.inventory = "/nonexistent/inv.yaml";
    assert_int_equal(agent_disc_open(&d, &o, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/inv.yaml: cannot open"));
}

static void test_inventory_bad(void **st)
{
    static const struct {
        const char *yaml, *msg;
    } cases[] = {
        {"gpu: {count: 8}\n", "inv.yaml:1:1: unknown field 'gpu'; did you mean"},
        {"gpus:\n  - {model: H100, memory: 80Gx}\n",
         "inv.yaml:2:27: gpus[0].memory: '80Gx': unknown unit"},
        {"gpus:\n  - {model: H100}\n", "inv.yaml:2:6: gpus[0]: missing memory:"},
        {"gpus:\n  - {memory: 80Gi, nvlink: 16}\n",
         "inv.yaml:2:28: gpus[0].nvlink: 16 is out of range; use -1..15"},
        {"gpus:\n  - {memory: 80Gi, uuid: GPU-a}\n  - {memory: 80Gi, uuid: GPU-a}\n",
         "inv.yaml:3:26: gpus[1].uuid: uuid 'GPU-a' is also gpus[0]'s"},
        {"gpus:\n  - {memory: 80Gi, uuid: \"GPU a\"}\n", "gpus[0].uuid: 'GPU a' is not a GPU UUID"},
        {"gpus:\n  - {memory: 80Gi, pciBusId: 17}\n",
         "inv.yaml:2:30: gpus[0].pciBusId: '17' is not a PCI bus id"},
        {"gpus: {count: 17, memory: 80Gi}\n", "inv.yaml:1:15: gpus.count: 17 is out of range; "
                                              "use 0..16"},
        {"gpus: {count: 2}\n", "gpus: missing memory:"},
        {"gpus: {count: 2, memory: 1Gi, nvlinkDomain: 1}\n",
         "inv.yaml:1:31: gpus: unknown field 'nvlinkDomain'; did you mean 'nvlinkDomains'?"},
        {"gpus: 8\n", "inv.yaml:1:7: gpus: expected a list of GPUs or {count: N"},
        {"cpu: many\n", "inv.yaml:1:6: cpu: 'many' is not an integer"},
        {"cpu: 0\n", "cpu: 0 is out of range"},
        {"memory: 0\n", "memory: memory must be more than 0"},
        {"labels: {rack: r1, rack: r2}\n", "inv.yaml:1:20: YAML syntax: duplicate key"},
        {"labels: [a, b]\n", "labels: expected a mapping"},
        {"- a\n", "inv.yaml:1:3: expected a mapping (key: value lines) at the top"},
        {"gpus: [\n", "inv.yaml:"},
        {"", "inv.yaml: the file is empty"},
    };
    agent_inv_t inv, before;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arb_err_t err;
        memset(&inv, 0x5a, sizeof inv);
        before = inv;
        int rc = parse(cases[i].yaml, &inv, &err);
        if (rc == 0 || !strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: rc %d, message '%s', want '%s'", i, rc, err.msg, cases[i].msg);
        assert_memory_equal(&inv, &before, sizeof inv);
    }
    /* 17 list items: more than a node can hold. */
    char big[2048] = "gpus:\n";
    for (int i = 0; i < 17; i++)
        strcat(big, "  - {memory: 1Gi}\n");
    arb_err_t err;
    memset(&inv, 0, sizeof inv);
    assert_int_equal(parse(big, &inv, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "17 items; the most is 16"));
}

/* ---- NVML through the mock --------------------------------------------------------- */

static int live_inits(void)
{
    void *h = dlopen(ARB_MOCK_NVML, RTLD_NOW | RTLD_NOLOAD);
    int n = -1;

    if (h) {
        int (*f)(void) = (int (*)(void))dlsym(h, "mock_nvml_live");
        n = f ? f() : -1;
        dlclose(h);
    } else {
        n = 0; /* unloaded: nothing is live */
    }
    return n;
}

static void clear_env(void)
{
    const char *vars[] = {"MOCK_NVML_GPUS", "MOCK_NVML_NVLINK", "MOCK_NVML_PCIE", "MOCK_NVML_UTIL",
                          "MOCK_NVML_TEMP", "MOCK_NVML_USED",   "MOCK_NVML_FAIL", NULL};
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
}

static agent_disc_opts_t nvml_opts(void)
{
    agent_disc_opts_t o = opts();
    o.gpu_source = "nvml";
    o.nvml_path = ARB_MOCK_NVML;
    return o;
}

static void test_nvml_basic(void **st)
{
    agent_disc_opts_t o = nvml_opts();
    agent_disc_t d;
    agent_gpu_sample_t s[ARB_MAX_GPUS];
    arb_err_t err = {{0}};

    clear_env();
    setenv("MOCK_NVML_UTIL", "10,20,30,40", 1);
    setenv("MOCK_NVML_TEMP", "41,42,43,44", 1);
    setenv("MOCK_NVML_USED", "100,0,300,4000", 1);
    if (agent_disc_open(&d, &o, &err) != 0)
        fail_msg("%s", err.msg);
    assert_string_equal(d.inv.gpu_source, "nvml");
    assert_int_equal(d.inv.ngpus, 4);
    assert_string_equal(d.inv.gpu[0].model, "NVIDIA H100 80GB HBM3");
    assert_int_equal(d.inv.gpu[0].mem_mib, 81559);
    assert_string_equal(d.inv.gpu[2].pci_bus_id, "0000:30:00.0");
    assert_string_equal(d.inv.gpu[2].uuid, "GPU-00000030-1111-2222-3333-444455556602");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d.inv.gpu[i].nvlink, -1); /* no links */
        assert_int_equal(d.inv.gpu[i].pcie, -1);   /* no topology, no hwloc */
    }
    assert_int_equal(agent_disc_sample(&d, s, &err), 0);
    assert_int_equal(s[1].util_pct, 20);
    assert_int_equal(s[2].temp_c, 43);
    assert_int_equal(s[3].mem_used_mib, 4000);
    assert_int_equal(live_inits(), 1);
    agent_disc_close(&d);
    assert_int_equal(live_inits(), 0);
    clear_env();
}

static void test_nvml_topology(void **st)
{
    agent_disc_opts_t o = nvml_opts();
    agent_disc_t d;
    arb_err_t err = {{0}};
    static const struct {
        const char *nvlink, *pcie;
        int want_nvlink[8], want_pcie[8];
    } cases[] = {
        /* direct pairs */
        {"0-1,2-3,4-5,6-7", NULL, {0, 0, 1, 1, 2, 2, 3, 3}, {-1, -1, -1, -1, -1, -1, -1, -1}},
        /* a ring of four and a pair; 6 has no link */
        {"0-1,1-2,2-3,3-0,4-5",
         "0,0,1,1,2,2,3,3",
         {0, 0, 0, 0, 1, 1, -1, -1},
         {0, 0, 1, 1, 2, 2, 3, 3}},
        /* one NVSwitch for all: one domain */
        {"sw:0+1+2+3+4+5+6+7",
         "0,0,0,0,1,1,1,1",
         {0, 0, 0, 0, 0, 0, 0, 0},
         {0, 0, 0, 0, 1, 1, 1, 1}},
        /* two switches, two domains */
        {"sw:0+1+2+3,sw:4+5+6+7",
         "5,5,9,9,5,5,9,9",
         {0, 0, 0, 0, 1, 1, 1, 1},
         {0, 0, 1, 1, 0, 0, 1, 1}},
    };

    clear_env();
    setenv("MOCK_NVML_GPUS", "8:NVIDIA H200:143771", 1);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        setenv("MOCK_NVML_NVLINK", cases[c].nvlink, 1);
        if (cases[c].pcie)
            setenv("MOCK_NVML_PCIE", cases[c].pcie, 1);
        else
            unsetenv("MOCK_NVML_PCIE");
        if (agent_disc_open(&d, &o, &err) != 0)
            fail_msg("case %zu: %s", c, err.msg);
        assert_int_equal(d.inv.ngpus, 8);
        for (int i = 0; i < 8; i++) {
            if (d.inv.gpu[i].nvlink != cases[c].want_nvlink[i] ||
                d.inv.gpu[i].pcie != cases[c].want_pcie[i])
                fail_msg("case %zu GPU %d: nvlink %d pcie %d, want %d %d", c, i,
                         d.inv.gpu[i].nvlink, d.inv.gpu[i].pcie, cases[c].want_nvlink[i],
                         cases[c].want_pcie[i]);
        }
        agent_disc_close(&d);
    }
    clear_env();
}

/* NVML without topology calls: hwloc places the GPUs by PCI bus id. */
static void test_nvml_hwloc_locality(void **st)
{
    agent_disc_opts_t o = nvml_opts();
    agent_disc_t d;
    arb_err_t err = {{0}};
    const int numa[4] = {0, 0, 1, 1}, pcie[4] = {0, 0, 1, 2};

    clear_env();
    o.no_hwloc = false;
    o.hwloc_xml = FIX "/hwloc-2numa-4gpu.xml";
    if (agent_disc_open(&d, &o, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(d.inv.cores, 4);
    assert_int_equal(d.inv.packages, 2);
    assert_int_equal(d.inv.numa_nodes, 2);
    for (int i = 0; i < 4; i++) {
        if (d.inv.gpu[i].numa != numa[i] || d.inv.gpu[i].pcie != pcie[i])
            fail_msg("GPU %d: numa %d pcie %d, want %d %d", i, d.inv.gpu[i].numa, d.inv.gpu[i].pcie,
                     numa[i], pcie[i]);
    }
    agent_disc_close(&d);

    /* NVML's own answer wins over hwloc's for pcie; numa still from hwloc. */
    setenv("MOCK_NVML_PCIE", "3,3,3,3", 1);
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d.inv.gpu[i].pcie, 0);
        assert_int_equal(d.inv.gpu[i].numa, numa[i]);
    }
    agent_disc_close(&d);

    o.hwloc_xml = "/nonexistent.xml";
    assert_int_equal(agent_disc_open(&d, &o, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "hwloc"));
    clear_env();
}

static void test_nvml_failures(void **st)
{
    agent_disc_opts_t o = nvml_opts();
    agent_disc_t d;
    arb_err_t err = {{0}};

    clear_env();
    /* Named: failures are errors. */
    setenv("MOCK_NVML_FAIL", "init", 1);
    assert_int_equal(agent_disc_open(&d, &o, &err), -ENODEV);
    assert_non_null(strstr(err.msg, "nvmlInit_v2 failed: Driver Not Loaded"));
    assert_int_equal(live_inits(), 0);
    setenv("MOCK_NVML_FAIL", "count", 1);
    assert_int_equal(agent_disc_open(&d, &o, &err), -EIO);
    assert_non_null(strstr(err.msg, "nvmlDeviceGetCount_v2 failed"));
    assert_int_equal(live_inits(), 0); /* shut down on the way out */
    unsetenv("MOCK_NVML_FAIL");
    setenv("MOCK_NVML_GPUS", "17", 1);
    assert_int_equal(agent_disc_open(&d, &o, &err), -ERANGE);
    unsetenv("MOCK_NVML_GPUS");
    o.nvml_path = "/nonexistent/libnvidia-ml.so.1";
    assert_int_equal(agent_disc_open(&d, &o, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "cannot load /nonexistent/libnvidia-ml.so.1"));
    assert_non_null(strstr(err.msg, "--fake-gpus"));

    /* auto: a node without NVML has no GPUs, and says why. */
    o.gpu_source = NULL;
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    assert_string_equal(d.inv.gpu_source, "none");
    assert_int_equal(d.inv.ngpus, 0);
    assert_non_null(strstr(d.note, "no GPUs: NVML: cannot load"));
    agent_disc_close(&d);
    o.nvml_path = ARB_MOCK_NVML;
    setenv("MOCK_NVML_FAIL", "init", 1);
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    assert_int_equal(d.inv.ngpus, 0);
    agent_disc_close(&d);
    unsetenv("MOCK_NVML_FAIL");
    assert_int_equal(agent_disc_open(&d, &o, &err), 0);
    assert_string_equal(d.inv.gpu_source, "nvml");
    assert_int_equal(d.inv.ngpus, 4);
    agent_disc_close(&d);
    clear_env();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_fixture),
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_fake),
        cmocka_unit_test(test_inventory_list),
        cmocka_unit_test(test_inventory_block_and_file),
        cmocka_unit_test(test_inventory_bad),
        cmocka_unit_test(test_nvml_basic),
        cmocka_unit_test(test_nvml_topology),
        cmocka_unit_test(test_nvml_hwloc_locality),
        cmocka_unit_test(test_nvml_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
