/*
 * test_scenario.c: the YAML scenario and job-spec loader (src/spec).
 *
 * The examples load; every field of the format lands where it should; and
 * bad input is rejected with FILE:LINE:COLUMN, the field path and a fix,
 * leaving the caller's object untouched (ASan checks nothing leaks).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/scenario.h"
#include "spec/scenario_int.h" /* scn_root_table */

/* A node block of 4 lines: jobs in the error cases start on line 5. */
#define NODES                                                                                      \
    "nodes:\n"                                                                                     \
    "  - name: n\n"                                                                                \
    "    allocatable: {cpu: 64, memory: 512Gi, rdma/hca: 4}\n"                                     \
    "    gpus: {count: 8, model: A100, memory: 80Gi}\n"
#define JOB NODES "jobs:\n  - name: j\n" /* the job's next field is on line 7 */

static int load(const char *yaml, spec_scenario_t *s, arb_err_t *err)
{
    return spec_scenario_load_mem("t.yaml", yaml, strlen(yaml), s, err);
}

static void test_examples(void **st)
{
    const char *files[] = {ARB_SOURCE_DIR "/examples/seed-case.yaml",
                           ARB_SOURCE_DIR "/examples/seed-case-16.yaml"};
    const int nodes[] = {4, 4}, gpus[] = {8, 16}, jobs[] = {5, 13};

    for (int f = 0; f < 2; f++) {
        spec_scenario_t s;
        arb_err_t err = {{0}};
        int rc = spec_scenario_load_file(files[f], &s, &err);
        if (rc != 0)
            fail_msg("%s: %s", files[f], err.msg);
        assert_int_equal(s.cluster.nnodes, nodes[f]);
        for (uint32_t i = 0; i < s.cluster.nnodes; i++) {
            char name[32];
            snprintf(name, sizeof name, "%s-%u", f ? "dgx" : "node", i + 1);
            assert_string_equal(arb_node_name(&s.cluster, &s.cluster.nodes[i]), name);
            assert_int_equal(s.cluster.nodes[i].ngpus, gpus[f]);
            assert_int_equal(arb_node_largest_nvlink_free(&s.cluster.nodes[i]), gpus[f]);
        }
        assert_int_equal(s.njobs, jobs[f]);
        assert_string_equal(s.jobs[0]->name, "train-4gpu-1");
        assert_int_equal(s.jobs[0]->groups[0].gpus, 4);
        arb_job_t *big = s.jobs[s.njobs - 1];
        assert_int_equal(big->groups[0].gpus, gpus[f]);
        assert_int_equal(big->groups[0].topo.level, ARB_TOPO_NVLINK);
        assert_true(big->groups[0].topo.required);
        assert_int_equal(big->groups[0].req.cpu_milli, 32000);
        assert_int_equal(big->groups[0].req.mem_bytes, 256LL << 30);
        assert_string_equal(s.policy, "");
        spec_scenario_free(&s);
    }
}

/* Every field of the format, read back from the model. */
static const char full_yaml[] =
    "scheduler: {policy: pack, queue: priority, backfill: true, preemption: true,\n"
    "            starvation: 2h}\n"
    "nodes:\n"
    "  - name: a\n"
    "    count: 2\n"
    "    labels: {rack: r1, block: b1, zone: z1, tier: \"\"}\n"
    "    taints: [{key: dedicated, value: infer, effect: NoSchedule}]\n"
    "    datasets: [imagenet, c4]\n"
    "    allocatable: {cpu: 128, memory: 1Ti, rdma/hca: 4}\n"
    "    gpus: {count: 8, model: A100-80G, memory: 80Gi, nvlinkDomains: 2,\n"
    "           pcieSwitches: 4, numaNodes: 2}\n"
    "  - name: b\n"
    "    condition: Draining\n"
    "    gpus:\n"
    "      - {model: L4, memory: 24Gi, nvlink: -1, pcie: 0, numa: 0}\n"
    "      - {model: L4, memory: 24Gi, pcie: 1, numa: 1}\n"
    "queues:\n"
    "  - name: team-a\n"
    "    cohort: research\n"
    "    weight: 2.5\n"
    "    nominal: {nvidia.com/gpu: 16, cpu: 128, memory: 1Ti, rdma/hca: 2}\n"
    "    borrowingLimit: {nvidia.com/gpu: 8}\n"
    "  - name: team-b\n"
    "jobs:\n"
    "  - name: train\n"
    "    queue: team-a\n"
    "    priorityClassName: high\n"
    "    preemptible: false\n"
    "    gangMin: 3\n"
    "    timeLimit: 1h30m\n"
    "    dataset: imagenet\n"
    "    nodeSelector: {rack: r1}\n"
    "    affinity:\n"
    "      required: [[{key: zone, operator: In, values: [z1, z2]},\n"
    "                  {key: gpus, operator: Gt, values: [\"4\"]}]]\n"
    "      preferred: [{weight: 50, match: [{key: rack, operator: NotIn, values: [r9]}]}]\n"
    "    tolerations: [{key: dedicated, operator: Equal, value: infer, effect: NoSchedule},\n"
    "                  {operator: Exists}]\n"
    "    gpuModels: [A100-80G]\n"
    "    groups:\n"
    "      - name: launcher\n"
    "        resources: {requests: {cpu: 500m, memory: 1Gi}}\n"
    "      - name: worker\n"
    "        replicas: 4\n"
    "        topology: {level: nvlink, mode: preferred}\n"
    "        resources:\n"
    "          requests: {nvidia.com/gpu: 2, nvidia.com/gpu-memory: 40Gi, rdma/hca: 1}\n"
    "          limits: {nvidia.com/gpu: 2, cpu: 8, memory: 64Gi, rdma/hca: 1}\n"
    "  - name: infer\n"
    "    count: 3\n"
    "    priority: -5\n"
    "    topology: node\n"
    "    resources:\n"
    "      requests: {arbiter.io/gpu-share: \"0.25\", nvidia.com/gpu-memory: 8Gi}\n";

static void test_full(void **st)
{
    spec_scenario_t s;
    arb_err_t err = {{0}};
    arb_cluster_t *c = &s.cluster;

    if (load(full_yaml, &s, &err) != 0)
        fail_msg("%s", err.msg);
    /* scheduler */
    assert_string_equal(s.policy, "pack");
    assert_int_equal(s.queue_policy, ARB_QP_PRIORITY);
    assert_true(s.backfill);
    assert_true(s.preemption);
    assert_int_equal(s.starvation_ns, 7200LL * 1000000000LL);
    /* nodes: count expands a-1, a-2 */
    assert_int_equal(c->nnodes, 3);
    arb_node_t *a1 = arb_cluster_find_node(c, "a-1"), *b = arb_cluster_find_node(c, "b");
    assert_non_null(a1);
    assert_non_null(arb_cluster_find_node(c, "a-2"));
    assert_non_null(b);
    assert_int_equal(a1->nlabels, 4);
    assert_string_equal(arb_str(&c->strs, a1->rack), "r1");
    assert_string_equal(arb_str(&c->strs, a1->zone), "z1");
    assert_string_equal(arb_str(&c->strs, arb_node_label(a1, arb_strtab_find(&c->strs, "tier"))),
                        "");
    assert_int_equal(a1->ntaints, 1);
    assert_int_equal(a1->taints[0].effect, ARB_TAINT_NO_SCHEDULE);
    assert_string_equal(arb_str(&c->strs, a1->taints[0].val), "infer");
    assert_true(arb_node_has_dataset(a1, arb_strtab_find(&c->strs, "c4")));
    assert_int_equal(a1->cap.cpu_milli, 128000);
    assert_int_equal(a1->cap.mem_bytes, 1LL << 40);
    assert_int_equal(c->ext.n, 1);
    assert_string_equal(c->ext.name[0], "rdma/hca");
    assert_int_equal(a1->cap.ext[0], 4);
    assert_int_equal(a1->ngpus, 8);
    assert_int_equal(a1->cap.gpu_milli, 8000);
    assert_int_equal(a1->gpu[0].mem_mib, 81920);
    assert_string_equal(arb_str(&c->strs, a1->gpu[7].model), "A100-80G");
    int nv[8] = {0, 0, 0, 0, 1, 1, 1, 1}, pcie[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(a1->gpu[i].nvlink, nv[i]);
        assert_int_equal(a1->gpu[i].pcie, pcie[i]);
        assert_int_equal(a1->gpu[i].numa, nv[i]);
    }
    assert_int_equal(b->state, ARB_NODE_DRAINING);
    assert_int_equal(b->ngpus, 2);
    assert_int_equal(b->gpu[1].nvlink, -1);
    assert_int_equal(b->gpu[1].pcie, 1);
    assert_int_equal(b->gpu[1].mem_mib, 24576);
    /* queues */
    assert_int_equal(s.nqueues, 2);
    assert_string_equal(arb_str(&c->strs, s.queues[0].name), "team-a");
    assert_string_equal(arb_str(&c->strs, s.queues[0].cohort), "research");
    assert_true(s.queues[0].weight > 2.49 && s.queues[0].weight < 2.51);
    assert_true(s.queues[0].has_quota);
    assert_int_equal(s.queues[0].nominal.gpu_milli, 16000);
    assert_int_equal(s.queues[0].nominal.ext[0], 2);
    assert_int_equal(s.queues[0].borrow_limit.gpu_milli, 8000);
    assert_false(s.queues[1].has_quota);
    assert_true(s.queues[1].weight == 1);
    /* the first job */
    assert_int_equal(s.njobs, 4);
    arb_job_t *j = s.jobs[0];
    assert_string_equal(j->name, "train");
    assert_int_equal(j->queue, s.queues[0].name);
    assert_int_equal(j->priority, 1000);
    assert_false(j->preemptible);
    assert_int_equal(j->gang_min, 3);
    assert_int_equal(j->time_limit_s, 5400);
    assert_string_equal(arb_str(&c->strs, j->dataset), "imagenet");
    assert_int_equal(j->nselector, 1);
    assert_string_equal(arb_str(&c->strs, j->selector[0].val), "r1");
    assert_int_equal(j->nrequired, 1);
    assert_int_equal(j->required[0].nexpr, 2);
    assert_int_equal(j->required[0].expr[0].op, ARB_OP_IN);
    assert_int_equal(j->required[0].expr[0].nvals, 2);
    assert_string_equal(arb_str(&c->strs, j->required[0].expr[0].vals[1]), "z2");
    assert_int_equal(j->required[0].expr[1].op, ARB_OP_GT);
    assert_int_equal(j->required[0].expr[1].num, 4);
    assert_int_equal(j->npreferred, 1);
    assert_int_equal(j->preferred[0].weight, 50);
    assert_int_equal(j->preferred[0].expr[0].op, ARB_OP_NOT_IN);
    assert_int_equal(j->ntolerations, 2);
    assert_false(j->tolerations[0].exists);
    assert_int_equal(j->tolerations[0].effect, ARB_TAINT_NO_SCHEDULE);
    assert_true(j->tolerations[1].exists);
    assert_int_equal(j->tolerations[1].key, 0);
    assert_int_equal(j->tolerations[1].effect, 0);
    assert_int_equal(j->nmodels, 1);
    assert_int_equal(j->ngroups, 2);
    assert_int_equal(j->ntasks, 5);
    assert_string_equal(j->groups[0].name, "launcher");
    assert_int_equal(j->groups[0].gpus, 0);
    assert_int_equal(j->groups[0].req.cpu_milli, 500);
    const arb_tgroup_t *w = &j->groups[1];
    assert_string_equal(w->name, "worker");
    assert_int_equal(w->replicas, 4);
    assert_int_equal(w->gpus, 2);
    assert_int_equal(w->req.gpu_milli, 2000);
    assert_int_equal(w->req.gpu_mem_mib, 40960);
    assert_int_equal(w->req.cpu_milli, 8000); /* a limit alone is the request */
    assert_int_equal(w->req.mem_bytes, 64LL << 30);
    assert_int_equal(w->lim.cpu_milli, 8000);
    assert_int_equal(w->req.ext[0], 1);
    assert_int_equal(w->topo.level, ARB_TOPO_NVLINK);
    assert_false(w->topo.required);
    /* a counted job of GPU shares */
    for (int i = 1; i <= 3; i++) {
        char name[24];
        snprintf(name, sizeof name, "infer-%d", i);
        assert_string_equal(s.jobs[i]->name, name);
        assert_int_equal(s.jobs[i]->priority, -5);
        assert_int_equal(s.jobs[i]->queue, 0);
        assert_int_equal(s.jobs[i]->groups[0].gpus, 0);
        assert_int_equal(s.jobs[i]->groups[0].gpu_share, 250);
        assert_int_equal(s.jobs[i]->groups[0].req.gpu_milli, 250);
        assert_int_equal(s.jobs[i]->groups[0].req.gpu_mem_mib, 8192);
        assert_int_equal(s.jobs[i]->groups[0].topo.level, ARB_TOPO_NODE);
        assert_true(s.jobs[i]->groups[0].topo.required);
        assert_string_equal(s.jobs[i]->groups[0].name, "main");
    }
    /* settings for the scheduler */
    arb_sched_conf_t conf;
    assert_int_equal(spec_scenario_conf(&s, NULL, &conf, &err), 0);
    assert_string_equal(conf.profile.name, "pack");
    assert_true(conf.backfill);
    assert_int_equal(spec_scenario_conf(&s, "spread", &conf, &err), 0);
    assert_string_equal(conf.profile.name, "spread");
    assert_int_equal(spec_scenario_conf(&s, "no-such", &conf, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "no-such"));
    spec_scenario_free(&s);
}

/* ---- bad input ------------------------------------------------------------ */

typedef struct bad {
    const char *what;
    const char *yaml;
    const char *where; /* "t.yaml:L:C: path" the message must start with */
    const char *says;  /* and a piece of text it must hold */
} bad_t;

static const bad_t bad_cases[] = {
    {"unknown key, with a suggestion", JOB "    replica: 4\n",
     "t.yaml:7:5: jobs[0]: ", "unknown field 'replica'; did you mean 'replicas'?"},
    {"unknown key, the valid list", JOB "    colour: red\n",
     "t.yaml:7:5: jobs[0]: ", "valid fields: name, queue, priority"},
    {"unknown top-level key", NODES "job: []\n", "t.yaml:5:1: ", "did you mean 'jobs'?"},
    {"bad quantity", JOB "    resources:\n      requests: {memory: 256Gx}\n",
     "t.yaml:8:26: jobs[0].resources.requests.memory: ", "'256Gx': unknown unit"},
    {"wrong type: list for a number", JOB "    replicas: [1]\n",
     "t.yaml:7:16: jobs[0].replicas: ", "expected a single value, got a list"},
    {"wrong type: mapping for a list", NODES "jobs: {name: j}\n",
     "t.yaml:5:8: jobs: ", "expected a list"},
    {"wrong type: quoted integer", JOB "    replicas: \"4\"\n",
     "t.yaml:7:16: jobs[0].replicas: ", "drop the quotes"},
    {"wrong type: boolean", JOB "    preemptible: yes\n",
     "t.yaml:7:18: jobs[0].preemptible: ", "expected true or false"},
    {"missing node name", "nodes:\n  - labels: {a: b}\n",
     "t.yaml:2:5: nodes[0]: ", "missing name:"},
    {"missing job name", NODES "jobs:\n  - replicas: 2\n",
     "t.yaml:6:5: jobs[0]: ", "missing name:"},
    {"duplicate node name", "nodes:\n  - name: a\n  - name: a\n",
     "t.yaml:3:11: nodes[1].name: ", "node 'a' already exists"},
    {"duplicate node name through count", "nodes:\n  - name: a-2\n  - {name: a, count: 2}\n",
     "t.yaml:3:12: nodes[1].name: ", "node 'a-2' already exists"},
    {"duplicate job name", NODES "jobs:\n  - name: j\n  - name: j\n",
     "t.yaml:7:11: jobs[1].name: ", "job name 'j' is used twice"},
    {"GPU share above 999m", JOB "    resources:\n      requests: {arbiter.io/gpu-share: 1500m}\n",
     "t.yaml:8:40: jobs[0].resources.requests.arbiter.io/gpu-share: ",
     "must be 1m..999m of one GPU (e.g. 500m or 0.5); use nvidia.com/gpu for whole GPUs"},
    {"GPU share of zero", JOB "    resources:\n      requests: {arbiter.io/gpu-share: 0}\n",
     "t.yaml:8:40: jobs[0].resources.requests.arbiter.io/gpu-share: ", "must be 1m..999m"},
    {"fractional nvidia.com/gpu", JOB "    resources:\n      requests: {nvidia.com/gpu: 0.5}\n",
     "t.yaml:8:34: jobs[0].resources.requests.nvidia.com/gpu: ",
     "'0.5' is not a whole number of GPUs; for a share of one GPU use arbiter.io/gpu-share: 500m"},
    {"too many GPUs per task", JOB "    resources:\n      requests: {nvidia.com/gpu: 17}\n",
     "t.yaml:8:34: jobs[0].resources.requests.nvidia.com/gpu: ", "ask for more replicas"},
    {"GPUs and a share",
     JOB "    resources:\n      requests: {nvidia.com/gpu: 1, "
         "arbiter.io/gpu-share: 500m}\n",
     "t.yaml:8:18: jobs[0].resources.requests: ", "choose one"},
    {"GPU memory without a GPU",
     JOB "    resources:\n      requests: {nvidia.com/gpu-memory: 8Gi}\n",
     "t.yaml:8:18: jobs[0].resources.requests: ", "ask for nvidia.com/gpu or arbiter.io/gpu-share"},
    {"unknown resource", JOB "    resources:\n      requests: {gpus: 1}\n",
     "t.yaml:8:18: jobs[0].resources.requests.gpus: ",
     "unknown resource 'gpus'; did you mean 'nvidia.com/gpu'?"},
    {"unknown extended resource", JOB "    resources:\n      requests: {rdma/hcb: 1}\n",
     "t.yaml:8:18: jobs[0].resources.requests.rdma/hcb: ",
     "no node offers extended resource 'rdma/hcb'; nodes offer: rdma/hca"},
    {"limit below request",
     JOB "    resources:\n      requests: {cpu: 4}\n      limits: {cpu: 2}\n",
     "t.yaml:9:16: jobs[0].resources.limits: ", "the limit of cpu is below its request"},
    {"unknown topology level", JOB "    topology: {level: rackz}\n",
     "t.yaml:7:23: jobs[0].topology.level: ",
     "unknown value 'rackz'; use one of: nvlink, node, rack, block"},
    {"NVLink topology with a GPU share",
     JOB "    topology: nvlink\n    resources:\n"
         "      requests: {arbiter.io/gpu-share: 500m}\n",
     "t.yaml:7:15: jobs[0].topology: ", "needs whole GPUs"},
    {"unknown policy", "scheduler: {policy: spreed}\n" NODES,
     "t.yaml:1:21: scheduler.policy: ", "unknown policy 'spreed'; use one of:"},
    {"unknown queue policy", "scheduler: {queue: lifo}\n" NODES,
     "t.yaml:1:20: scheduler.queue: ", "lifo"},
    {"negative replicas", JOB "    replicas: -1\n",
     "t.yaml:7:15: jobs[0].replicas: ", "-1 is out of range; use 1..100000"},
    {"gangMin above the task count", JOB "    replicas: 2\n    gangMin: 3\n",
     "t.yaml:8:14: jobs[0].gangMin: ", "gangMin must be 0..2"},
    {"priority and a class", JOB "    priority: 5\n    priorityClassName: high\n",
     "t.yaml:8:24: jobs[0].priorityClassName: ", "not both"},
    {"unknown priority class", JOB "    priorityClassName: urgent\n",
     "t.yaml:7:24: jobs[0].priorityClassName: ", "unknown priority class 'urgent'"},
    {"bad duration", JOB "    timeLimit: 1x\n",
     "t.yaml:7:16: jobs[0].timeLimit: ", "'1x' is not a duration"},
    {"In without values", JOB "    affinity: {required: [[{key: zone, operator: In}]]}\n",
     "t.yaml:7:29: jobs[0].affinity.required[0][0]: ", "In needs values:"},
    {"unknown operator",
     JOB "    affinity: {required: [[{key: zone, operator: in, values: [a]}]]}\n",
     "t.yaml:7:50: jobs[0].affinity.required[0][0].operator: ", "unknown value 'in'"},
    {"toleration without key", JOB "    tolerations: [{value: x}]\n",
     "t.yaml:7:20: jobs[0].tolerations[0]: ", "missing key:"},
    {"unknown queue", "queues:\n  - name: qa\n" JOB "    queue: qb\n",
     "t.yaml:9:12: jobs[0].queue: ", "unknown queue 'qb'"},
    {"groups and job-level resources", JOB "    resources: {}\n    groups: [{replicas: 1}]\n",
     "t.yaml:7:5: jobs[0].resources: ", "belongs inside each of groups:"},
    {"node with 17 GPUs", "nodes:\n  - name: a\n    gpus: {count: 17, memory: 1Gi}\n",
     "t.yaml:3:19: nodes[0].gpus.count: ", "17 is out of range; use 0..16"},
    {"node GPUs without memory", "nodes:\n  - name: a\n    gpus: {count: 8}\n",
     "t.yaml:3:12: nodes[0].gpus: ", "missing memory:"},
    {"GPUs in allocatable", "nodes:\n  - name: a\n    allocatable: {nvidia.com/gpu: 8}\n",
     "t.yaml:3:35: nodes[0].allocatable.nvidia.com/gpu: ", "declare a node's GPUs under gpus:"},
    {"taint effect Evict", "nodes:\n  - name: a\n    taints: [{key: k, effect: Evict}]\n",
     "t.yaml:3:31: nodes[0].taints[0].effect: ",
     "unknown value 'Evict'; use one of: NoSchedule, PreferNoSchedule, NoExecute"},
    {"unknown condition", "nodes:\n  - name: a\n    condition: Up\n",
     "t.yaml:3:16: nodes[0].condition: ", "use one of: Ready, NotReady, Draining"},
    {"alias", "nodes:\n  - name: &x a\n  - name: *x\n",
     "t.yaml:3:12: nodes[1].name: ", "anchors and aliases"},
    {"control character", "nodes:\n  - name: \"a\\x01b\"\n",
     "t.yaml:2:12: nodes[0].name: ", "control character"},
    {"empty key", "nodes:\n  - name: a\n    : x\n", "t.yaml:3:7: nodes[0]: ", "a key is empty"},
    {"empty value", "nodes:\n  - name:\n", "t.yaml:2:5: nodes[0].name: ", "has no value"},
    {"no nodes",
     NODES "jobs: []\n"
           "scheduler: {}\n",
     NULL, NULL}, /* fine: control case */
    {"missing nodes", "jobs: []\n", "t.yaml:1:1: ", "missing nodes:"},
    {"empty node list", "nodes: []\n", "t.yaml:1:1: nodes: ", "at least one node"},
    {"empty file", "", "t.yaml: ", "the file is empty"},
    {"only a comment", "# nothing\n", "t.yaml: ", "no YAML document"},
    {"root is a list", "- a\n", "t.yaml:1:3: ", "expected a mapping"},
    {"two documents", NODES "---\nnodes: []\n", "t.yaml:6:1: ", "a second YAML document"},
    {"invalid UTF-8", "nodes:\n  - name: a\xff\n", "t.yaml:2:12: ", "byte 0xff is not valid UTF-8"},
    {"invalid UTF-8 in a directive", "% Run: a ..\x81. b\n", "t.yaml:1:12: ", "not valid UTF-8"},
    {"overlong UTF-8", "nodes:\n  - name: \xc0\xaf\n", "t.yaml:2:11: ", "not valid UTF-8"},
    {"too many tasks in a job", JOB "    groups: [{replicas: 60000}, {replicas: 60000}]\n",
     "t.yaml:7:15: jobs[0].groups: ", "120000 tasks; a job has at most 100000"},
    {"YAML syntax", "nodes:\n  - name: [a\n", "t.yaml:", "YAML syntax:"},
    {"duplicate key", "nodes:\n  - name: a\n    name: b\n", "t.yaml:3:", "duplicate key"},
    {"count in the thousands beyond the limit", "nodes:\n  - {name: a, count: 10001}\n",
     "t.yaml:2:22: nodes[0].count: ", "limit"},
};

static void test_bad(void **st)
{
    int failed = 0;

    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_t *b = &bad_cases[i];
        spec_scenario_t s, before;
        arb_err_t err = {{0}};
        int rc;

        memset(&s, 0xA5, sizeof s);
        before = s;
        rc = load(b->yaml, &s, &err);
        if (!b->where) {
            if (rc != 0) {
                print_error("case '%s' should load: %s\n", b->what, err.msg);
                failed++;
            } else {
                spec_scenario_free(&s);
            }
            continue;
        }
        if (rc == 0) {
            print_error("case '%s' was accepted\n", b->what);
            spec_scenario_free(&s);
            failed++;
            continue;
        }
        if ((rc != -EINVAL && rc != -ERANGE) || strncmp(err.msg, b->where, strlen(b->where)) != 0 ||
            !strstr(err.msg, b->says)) {
            print_error("case '%s' (rc %d):\n  got  %s\n  want %s...%s\n", b->what, rc, err.msg,
                        b->where, b->says);
            failed++;
        }
        if (memcmp(&s, &before, sizeof s) != 0) {
            print_error("case '%s': the output was changed on failure\n", b->what);
            failed++;
        }
        /* A NULL error buffer is allowed and changes nothing. */
        if (load(b->yaml, &s, NULL) != rc) {
            print_error("case '%s': another result without an error buffer\n", b->what);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* One job spec, as `arbiter submit job.yaml` reads it. */
static void test_job_spec(void **st)
{
    arb_cluster_t c;
    arb_node_t *n;
    arb_job_t *j = NULL;
    arb_err_t err = {{0}};
    const char *ok = "name: infer\npriority: 7\nresources:\n  requests: {arbiter.io/gpu-share: "
                     "500m, nvidia.com/gpu-memory: 8Gi, rdma/hca: 1}\n";
    const char *counted = "name: x\ncount: 2\n";
    const char *unknown = "name: x\nresources:\n  requests: {fpga.com/xcu: 1}\n";

    arb_cluster_init(&c);
    assert_int_equal(arb_cluster_add_node(&c, "n", &n, NULL), 0);
    /* rdma/hca is not offered yet: rejected, so typos are caught */
    assert_int_equal(spec_job_load_mem("job.yaml", ok, strlen(ok), &c, &j, &err), -EINVAL);
    assert_null(j);
    assert_non_null(strstr(err.msg, "job.yaml:4:"));
    assert_non_null(strstr(err.msg, "nodes offer none"));
    assert_int_equal(arb_extnames_index(&c.ext, "rdma/hca", true), 0);
    if (spec_job_load_mem("job.yaml", ok, strlen(ok), &c, &j, &err) != 0)
        fail_msg("%s", err.msg);
    assert_string_equal(j->name, "infer");
    assert_int_equal(j->priority, 7);
    assert_int_equal(j->groups[0].gpu_share, 500);
    assert_int_equal(j->groups[0].req.ext[0], 1);
    assert_int_equal(j->ntasks, 1);
    arb_job_free(j);
    j = NULL;
    assert_int_equal(spec_job_load_mem("job.yaml", counted, strlen(counted), &c, &j, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "job.yaml:2:8: count: "));
    assert_int_equal(spec_job_load_mem("job.yaml", unknown, strlen(unknown), &c, &j, &err),
                     -EINVAL);
    if (!strstr(err.msg, "job.yaml:3:14: resources.requests.fpga.com/xcu: "))
        fail_msg("%s", err.msg);
    assert_non_null(strstr(err.msg, "nodes offer: rdma/hca"));
    assert_null(j);
    /* Names at their limits (87 bytes a job's, 63 a group's) and one past. */
    {
        char spec[512], jn[100], gn[80];
        memset(jn, 'j', sizeof jn);
        memset(gn, 'g', sizeof gn);
        for (int extra = 0; extra < 2; extra++) {
            snprintf(spec, sizeof spec, "name: %.*s\ngroups:\n  - name: %.63s\n", 87 + extra, jn,
                     gn);
            if (extra == 0) {
                if (spec_job_load_mem("job.yaml", spec, strlen(spec), &c, &j, &err) != 0)
                    fail_msg("%s", err.msg);
                assert_int_equal(strlen(j->name), 87);
                assert_int_equal(strlen(j->groups[0].name), 63);
                arb_job_free(j);
                j = NULL;
                continue;
            }
            assert_int_equal(spec_job_load_mem("job.yaml", spec, strlen(spec), &c, &j, &err),
                             -EINVAL);
            assert_string_equal(err.msg,
                                "job.yaml:1:7: name: is too long (88 characters; the most is 87)");
            snprintf(spec, sizeof spec, "name: x\ngroups:\n  - name: %.64s\n", gn);
            assert_int_equal(spec_job_load_mem("job.yaml", spec, strlen(spec), &c, &j, &err),
                             -EINVAL);
            assert_string_equal(err.msg, "job.yaml:3:11: groups[0].name: is too long (64 "
                                         "characters; the most is 63)");
            assert_null(j);
        }
    }
    arb_cluster_free(&c);
}

/* count: multiplies a small text into a large model: the budget holds. */
static void test_limits(void **st)
{
    char yaml[4096];
    size_t off;
    spec_scenario_t s;
    arb_err_t err = {{0}};

    /* 100000 jobs of about 65 values each: over the 5M-value budget. */
    off = (size_t)snprintf(yaml, sizeof yaml,
                           NODES "jobs:\n  - name: j\n    count: 100000\n"
                                 "    nodeSelector: {");
    for (int i = 0; i < 30; i++)
        off += (size_t)snprintf(yaml + off, sizeof yaml - off, "%sk%d: v", i ? ", " : "", i);
    snprintf(yaml + off, sizeof yaml - off, "}\n");
    assert_int_equal(load(yaml, &s, &err), -EINVAL);
    if (!strstr(err.msg, "t.yaml:7:12: jobs[0].count: 100000 copies of ") ||
        !strstr(err.msg, "pass the limit of 5000000 values"))
        fail_msg("%s", err.msg);
    /* The same job 1000 times is fine. */
    memcpy(strstr(yaml, "100000"), "001000", 6);
    if (load(yaml, &s, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(s.njobs, 1000);
    assert_string_equal(s.jobs[999]->name, "j-1000");
    spec_scenario_free(&s);
    /* A NUL byte inside the text. */
    assert_int_equal(spec_scenario_load_mem("t.yaml", "nodes:\n\0", 8, &s, &err), -EINVAL);
    assert_string_equal(err.msg, "t.yaml:2:1: byte 0x00 is not allowed (NUL); save the file as "
                                 "UTF-8");
}

/* Truncated and mangled copies of a real scenario never crash or leak. */
static void test_mangled(void **st)
{
    size_t len = strlen(full_yaml);
    char *buf = malloc(len + 1);

    assert_non_null(buf);
    for (size_t cut = 0; cut <= len; cut += 7) {
        spec_scenario_t s;
        if (spec_scenario_load_mem("cut.yaml", full_yaml, cut, &s, NULL) == 0)
            spec_scenario_free(&s);
    }
    for (size_t at = 0; at < len; at += 3) {
        spec_scenario_t s;
        memcpy(buf, full_yaml, len + 1);
        buf[at] = (char)(buf[at] == ':' ? ' ' : buf[at] == ' ' ? '[' : ':');
        if (spec_scenario_load_mem("mangled.yaml", buf, len, &s, NULL) == 0)
            spec_scenario_free(&s);
    }
    free(buf);
}

/* Inputs the fuzzer found that crash libfyaml 0.7.12 while it frees its
 * parser: rejected before libfyaml sees them, with a usable message. */
static void test_fuzz_regressions(void **st)
{
    static const char *const inputs[] = {
        "? ? < ? : \t?::   ",
        "? x : \t?:",
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        spec_scenario_t sc;
        arb_err_t err = {{0}};
        memset(&sc, 0, sizeof sc);
        assert_int_equal(
            spec_scenario_load_mem("crash.yaml", inputs[i], strlen(inputs[i]), &sc, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "crash.yaml:1:"));
        assert_non_null(strstr(err.msg, "tab"));
    }
}

/* The document is read by its table's rows (scn_root_table), in table
 * order whatever the file's: nodes first (they declare the extended
 * resources that quotas and jobs name), queues before the jobs that name
 * them. Every row has its reader, and `arbiter help scenario` lists each. */
static void test_root_table(void **st)
{
    static const char y[] = "jobs:\n"
                            "  - {name: j, queue: qa, resources: {requests: {rdma/hca: 1}}}\n"
                            "queues:\n"
                            "  - {name: qa, nominal: {rdma/hca: 2}}\n"
                            "scheduler: {queue: drf}\n"
                            "nodes:\n"
                            "  - {name: n, allocatable: {cpu: 1, rdma/hca: 4}}\n";
    spec_scenario_t s;
    arb_err_t err = {{0}};
    char *buf = NULL, want[128];
    size_t len = 0;
    FILE *doc = open_memstream(&buf, &len);

    (void)st;
    if (spec_scenario_load_mem("t.yaml", y, strlen(y), &s, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(s.cluster.nnodes, 1);
    assert_int_equal(s.nqueues, 1);
    assert_int_equal(s.njobs, 1);
    assert_int_equal(s.queue_policy, ARB_QP_DRF);
    assert_int_equal(s.jobs[0]->queue, s.queues[0].name);
    spec_scenario_free(&s);
    assert_non_null(doc);
    spec_scenario_doc(doc);
    fclose(doc);
    for (const sc_field_t *f = scn_root_table.fields; f->key; f++) {
        if (!f->set)
            fail_msg("scenario field %s has no reader", f->key);
        snprintf(want, sizeof want, "| `%s%s", f->key, (f->flags & SC_LIST) ? "[]" : ".");
        if (!strstr(buf, want))
            fail_msg("arbiter help scenario lacks %s", want);
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_job_spec),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_mangled),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_root_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
