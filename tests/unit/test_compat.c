/*
 * test_compat.c: workloads users already have (src/spec/wl.h).
 *
 *   - The corpus: 112 public files (tests/fixtures/compat, origins in
 *     SOURCES.tsv) read as `arbiter submit --dry-run` reads them, every
 *     job asserted field by field (jobs, GPUs, tasks and groups, gang,
 *     queue, time limit, kind), or the refusal's message.
 *   - The rules one by one: sbatch's directive and option rules, times,
 *     memory, host lists and arrays; Kubernetes' resource defaulting, init
 *     containers, what is an error and what a warning.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/sbatch_int.h"
#include "spec/wl.h"

#define FIX ARB_SOURCE_DIR "/tests/fixtures/compat/"

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    long len;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    if (b)
        b[len] = '\0';
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* Dry-run text (a file's contents) as file; *out the {"jobs", "warnings"}. */
static int dry(const char *file, const char *text, size_t n, const wl_sbatch_cli_t *cli,
               json_t **out, arb_err_t *err)
{
    wl_t w;
    int rc;

    *out = NULL;
    assert_int_equal(wl_init(&w, file, err), 0);
    rc = cli ? wl_sbatch(&w, text, n, cli) : wl_translate(&w, text, n, NULL);
    if (rc == 0)
        rc = wl_dry(&w, out);
    wl_free(&w);
    return rc;
}

static json_t *dry_ok(const char *file, const char *text, const wl_sbatch_cli_t *cli)
{
    arb_err_t err = {{0}};
    json_t *out;
    int rc = dry(file, text, strlen(text), cli, &out, &err);
    if (rc != 0)
        fail_msg("%s: %s", file, err.msg);
    return out;
}

static const char *dry_err(const char *file, const char *text, const wl_sbatch_cli_t *cli)
{
    static arb_err_t err;
    json_t *out;
    memset(&err, 0, sizeof err);
    int rc = dry(file, text, strlen(text), cli, &out, &err);
    if (rc == 0) {
        json_decref(out);
        fail_msg("%s: accepted, expected an error", file);
    }
    return err.msg;
}

static bool has_warning(const json_t *out, const char *sub)
{
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(out, "warnings"), i,
                       w) if (strstr(json_string_value(w), sub)) return true;
    return false;
}

/* ---- the corpus ------------------------------------------------------------------------ */

typedef struct expect {
    const char *file;
    const char *error; /* refused: a part of its message; NULL accepted */
    int njobs;
    const char *kind; /* "batch" or "service" */
    const char *queue;
    int gpus, ntasks, gang_min;
    int time_limit_s;   /* 0: none */
    const char *groups; /* "name:replicas:gpus[:share][,...]" of every job */
    int slurm_ntasks;   /* sbatch: the Slurm tasks; 0 not checked */
    int service_replicas;
} expect_t;

/* Rows leave the fields they do not check out (zero). */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const expect_t corpus[] = {
    /* Kubeflow training-operator examples */
    {"k8s/pytorch-simple.yaml", NULL, 1, "batch", "default", 0, 2, 2, 0, "master:1:0,worker:1:0"},
    {"k8s/pytorch-mnist-nccl.yaml", NULL, 1, "batch", "default", 2, 2, 2, 0,
     "master:1:1,worker:1:1"},
    {"k8s/pytorch-elastic-echo.yaml", NULL, 1, "batch", "default", 0, 2, 1, 0, "main:2:0"},
    {"k8s/pytorch-torchrun-cpu.yaml", NULL, 1, "batch", "default", 0, 2, 2, 0,
     "master:1:0,worker:1:0"},
    {"k8s/pytorch-deepspeed.yaml", NULL, 1, "batch", "default", 2, 2, 2, 0,
     "master:1:1,worker:1:1"},
    {"k8s/mpi-tensorflow-mnist.yaml", NULL, 1, "batch", "default", 0, 3, 3, 0,
     "launcher:1:0,worker:2:0"},
    {"k8s/tfjob-simple.yaml", NULL, 1, "batch", "default", 0, 2, 2, 0, "worker:2:0"},
    /* JobSet */
    {"k8s/jobset-paralleljobs.yaml", NULL, 1, "batch", "default", 0, 5, 5, 0,
     "workers:4:0,driver:1:0"},
    {"k8s/jobset-exclusive-placement.yaml", "exclusive-topology 'cloud.google.com/gke-nodepool'"},
    /* LeaderWorkerSet */
    {"k8s/lws-sample.yaml", NULL, 3, "batch", "default", 0, 4, 4, 0, "leader:1:0,worker:3:0"},
    {"k8s/lws-exclusive-placement.yaml", "exclusive-topology"},
    {"k8s/lws-vllm-gpu.yaml", NULL, 2, "batch", "default", 16, 2, 2, 0, "leader:1:8,worker:1:8"},
    /* Volcano */
    {"k8s/volcano-mpi.yaml", NULL, 1, "batch", "default", 0, 3, 3, 0,
     "mpimaster:1:0,mpiworker:2:0"},
    {"k8s/volcano-hpw-job.yaml", "kind Job (batch.hpw.cloud/v1alpha1) is not supported"},
    /* Kueue */
    {"k8s/kueue-sample-job.yaml", NULL, 1, "batch", "user-queue", 0, 3, 3, 0, "pod:3:0"},
    {"k8s/kueue-pytorchjob.yaml", NULL, 1, "batch", "main", 0, 2, 2, 0, "master:1:0,worker:1:0"},
    {"k8s/kueue-pod-group.yaml", NULL, 1, "batch", "user-queue", 0, 2, 2, 0,
     "sample-pod:1:0,sample-pod-1:1:0"},
    {"k8s/kueue-jobset-tas-required.yaml", NULL, 1, "batch", "user-queue", 0, 4, 4, 0,
     "workers:4:0"},
    {"k8s/kueue-deployment.yaml", NULL, 1, "service", "user-queue", 0, 1, 1, 0, "main:1:0", 0, 3},
    {"k8s/kueue-statefulset.yaml", NULL, 1, "service", "user-queue", 0, 1, 1, 0, "main:1:0", 0, 3},
    {"k8s/kueue-xgboostjob.yaml", NULL, 1, "batch", "user-queue", 0, 3, 3, 0,
     "master:1:0,worker:2:0"},
    {"k8s/kueue-paddlejob.yaml", NULL, 1, "batch", "user-queue", 0, 2, 2, 0, "worker:2:0"},
    {"k8s/kueue-cronjob.yaml", "kind CronJob (batch/v1) is not supported"},
    /* KAI */
    {"k8s/kai-gpu-sharing.yaml", NULL, 1, "batch", "default-queue", 0, 1, 1, 0, "pod:1:0:500"},
    {"k8s/kai-gpu-memory.yaml", NULL, 1, "batch", "default-queue", 0, 1, 1, 0, "pod:1:0:1"},
    {"k8s/kai-gpu-pod.yaml", NULL, 1, "batch", "test", 1, 1, 1, 0, "pod:1:1"},
    {"k8s/kai-pytorch-job.yaml", NULL, 1, "batch", "default-queue", 3, 3, 3, 0,
     "master:1:1,worker:2:1"},
    {"k8s/kai-batch-job.yaml", NULL, 1, "batch", "default-queue", 2, 2, 2, 0, "pod:2:1"},
    /* Kubernetes' own docs */
    {"k8s/indexed-job.yaml", NULL, 1, "batch", "default", 0, 5, 5, 0, "pod:5:0"},
    /* Slurm: HPC centres' tutorials and training repos */
    {"slurm/princeton-single-gpu.slurm", NULL, 1, "batch", "default", 1, 1, 1, 300, "node:1:1", 1},
    {"slurm/princeton-ddp.slurm", NULL, 1, "batch", "default", 4, 2, 2, 300, "node:2:2", 4},
    {"slurm/princeton-ddp-simple.slurm", NULL, 1, "batch", "default", 4, 2, 2, 60, "node:2:2", 4},
    {"slurm/princeton-lightning.slurm", NULL, 1, "batch", "default", 2, 1, 1, 300, "node:1:2", 2},
    {"slurm/princeton-tf2.slurm", NULL, 1, "batch", "default", 2, 1, 1, 300, "node:1:2", 1},
    {"slurm/princeton-fsdp.sh", NULL, 1, "batch", "default", 4, 1, 1, 3600, "node:1:4", 1},
    {"slurm/erangvee-job-array.sh", NULL, 5, "batch", "default", 0, 1, 1, 180, "node:1:0", 1},
    {"slurm/brown-job-array.sh", NULL, 4, "batch", "default", 0, 1, 1, 300, "node:1:0", 1},
    {"slurm/brown-job-array-throttle.sh", NULL, 4, "batch", "batch", 0, 1, 1, 300, "node:1:0", 1},
    {"slurm/brown-job-array-nonsequential.sh", NULL, 4, "batch", "default", 0, 1, 1, 300,
     "node:1:0", 1},
    {"slurm/brown-analysis.sh", NULL, 1, "batch", "default", 0, 1, 1, 300, "node:1:0", 1},
    {"slurm/arcca-array.sh", NULL, 5, "batch", "default", 0, 1, 1, 0, "node:1:0", 1},
    {"slurm/graphkit-job-test.sl", NULL, 1, "batch", "long", 0, 1, 1, 600, "node:1:0", 1},
    {"slurm/ddp-multinode-gpus.sh", NULL, 1, "batch", "default", 2, 2, 2, 0, "node:2:1", 2},
    {"slurm/vit-torchrun.bash", NULL, 1, "batch", "gpu", 2, 1, 1, 1800, "node:1:2", 1},
    {"slurm/gradw-nodelist.sh", NULL, 1, "batch", "default", 2, 1, 1, 0, "node:1:2", 1},
    {"slurm/cmc-dependency.sh", NULL, 1, "batch", "P2", 0, 1, 1, 0, "node:1:0", 1},
    {"slurm/nodestest-template.sh", NULL, 1, "batch", "admin", 8, 1, 1, 1209600, "node:1:8", 1},
    {"slurm/vit-clouds-torchrun.bash", NULL, 1, "batch", "gpu", 2, 1, 1, 1800, "node:1:2", 1},
    {"slurm/pytorch-ddp-series-sbatch.sh", NULL, 1, "batch", "default", 4, 4, 4, 0, "node:4:1", 4},
    /* held-back kinds, added later: MPI operator, Volcano, JobSet examples */
    {"k8s/mpi-pi-v2beta1.yaml", NULL, 1, "batch", "default", 0, 3, 3, 0, "launcher:1:0,worker:2:0"},
    {"k8s/mpi-nccl-tests.yaml", NULL, 1, "batch", "default", 16, 3, 3, 666,
     "launcher:1:0,worker:2:8"},
    {"k8s/volcano-kube-batch-job.yaml", NULL, 1, "batch", "default", 0, 6, 6, 0, "pod:6:0"},
    {"k8s/volcano-mindspore-gpu.yaml", NULL, 1, "batch", "default", 2, 3, 3, 0,
     "mpimaster:1:0,mpiworker:2:1"},
    {"k8s/jobset-coordinator.yaml", NULL, 1, "batch", "default", 0, 5, 5, 0,
     "workers:4:0,driver:1:0"},
    {"k8s/jobset-pytorch-resnet.yaml", NULL, 1, "batch", "default", 0, 4, 4, 0, "workers:4:0"},
    /* ---- the second corpus (k8): other projects' files ---- */
    /* Kubeflow training-operator examples not in the first corpus */
    {"k8s/pytorch-mnist-gloo.yaml", NULL, 1, "batch", "default", 2, 2, 2, 0,
     "master:1:1,worker:1:1"},
    {"k8s/pytorch-elastic-imagenet.yaml", NULL, 1, "batch", "default", 0, 3, 1, 0, "main:3:0"},
    {"k8s/tfjob-dist-mnist.yaml", NULL, 1, "batch", "default", 0, 6, 6, 0, "ps:2:0,worker:4:0"},
    {"k8s/paddle-simple-gpu.yaml", NULL, 1, "batch", "default", 4, 2, 2, 0, "worker:2:2"},
    {"k8s/xgboost-iris-train.yaml", NULL, 1, "batch", "default", 0, 3, 3, 0,
     "master:1:0,worker:2:0"},
    {"k8s/jaxjob-cpu-demo.yaml", NULL, 1, "batch", "default", 0, 2, 2, 0, "worker:2:0"},
    {"k8s/mxjob-dist-gpu.yaml", NULL, 1, "batch", "default", 1, 3, 3, 0,
     "scheduler:1:0,server:1:0,worker:1:1"},
    {"k8s/mpi-tensorflow-mnist-elastic.yaml", NULL, 1, "batch", "default", 0, 3, 3, 0,
     "launcher:1:0,worker:2:0"},
    /* Kubeflow Trainer v2: a TrainJob needs its runtime (not in the file) */
    {"k8s/trainer-hello-world.yaml",
     "kind TrainJob (trainer.kubeflow.org/v1alpha1) is not supported"},
    /* Volcano examples */
    {"k8s/volcano-tf-gpu.yaml", NULL, 1, "batch", "default", 3, 4, 4, 0, "ps:1:0,worker:3:1"},
    {"k8s/volcano-openmpi-hello.yaml", NULL, 1, "batch", "default", 0, 3, 3, 0,
     "mpimaster:1:0,mpiworker:2:0"},
    {"k8s/volcano-task-dependency.yaml", NULL, 1, "batch", "default", 0, 11, 1, 0,
     "job-nginx1:1:0,job-nginx2:5:0,job-nginx3:5:0"},
    {"k8s/volcano-ray.yaml", NULL, 1, "batch", "default", 0, 3, 3, 0, "head:1:0,worker:2:0"},
    /* Kueue's documentation samples */
    {"k8s/kueue-rayjob.yaml", "kind RayJob (ray.io/v1) is not supported"},
    {"k8s/kueue-pod.yaml", NULL, 1, "batch", "user-queue", 0, 1, 1, 0, "pod:1:0"},
    {"k8s/kueue-mxjob.yaml", NULL, 1, "batch", "user-queue", 0, 3, 3, 0,
     "scheduler:1:0,server:1:0,worker:1:0"},
    {"k8s/kueue-jobset-tas-combined.yaml",
     "podset-slice-required-topology 'cloud.provider.com/topology-rack'"},
    {"k8s/kueue-job-partial-admission.yaml", NULL, 1, "batch", "user-queue", 0, 20, 5, 0,
     "pod:20:0"},
    {"k8s/kueue-dra-gpu-job.yaml",
     "resourceClaims (dynamic resource allocation) cannot be honoured"},
    /* KAI scheduler's docs */
    {"k8s/kai-gpu-sharing-init-container.yaml", NULL, 1, "batch", "default-queue", 0, 1, 1, 0,
     "pod:1:0:500"},
    {"k8s/kai-gpu-sharing-non-default.yaml", NULL, 1, "batch", "default-queue", 0, 1, 1, 0,
     "pod:1:0:500"},
    {"k8s/kai-gpu-sharing-mps.yaml", NULL, 1, "batch", "default-queue", 0, 1, 1, 0, "pod:1:0:500"},
    {"k8s/kai-train-priority-pod.yaml", NULL, 1, "batch", "default-queue", 1, 1, 1, 0, "pod:1:1"},
    /* JobSet and LeaderWorkerSet examples */
    {"k8s/jobset-success-policy.yaml", NULL, 1, "batch", "default", 0, 3, 3, 0,
     "leader:1:0,workers:2:0"},
    {"k8s/jobset-tensorflow-mnist.yaml", NULL, 1, "batch", "default", 0, 2, 2, 0, "tensorflow:2:0"},
    {"k8s/lws-multi-template.yaml", NULL, 3, "batch", "default", 0, 4, 4, 0,
     "leader:1:0,worker:3:0"},
    {"k8s/lws-sglang.yaml", NULL, 2, "batch", "default", 2, 2, 2, 0, "leader:1:1,worker:1:1"},
    /* HAMi's GPU examples (MIG, vGPU shares, card types) and Kubernetes' Job */
    {"k8s/hami-mig.yaml", NULL, 1, "batch", "default", 0, 1, 1, 0, "pod:1:0"},
    {"k8s/hami-default-use.yaml", "ask for nvidia.com/gpu: 1 with them"},
    {"k8s/hami-card-type.yaml", NULL, 1, "batch", "default", 2, 1, 1, 0, "pod:1:2"},
    {"k8s/k8s-job-pi.yaml", NULL, 1, "batch", "default", 0, 1, 1, 0, "pod:1:0"},
    /* Slurm: HPC centres' examples (CSC, UAntwerp, Compute Canada) and ML repositories */
    {"slurm/csc-gpu4-dist-mahti.sh", NULL, 1, "batch", "gputest", 4, 1, 1, 900, "node:1:4", 1},
    {"slurm/csc-gpu8-dist-mahti.sh", NULL, 1, "batch", "gpumedium", 8, 2, 2, 900, "node:2:4", 2},
    {"slurm/csc-deepspeed-gpu8.sh", NULL, 1, "batch", "gputest", 8, 2, 2, 900, "node:2:4", 8},
    {"slurm/klust-job-array.slurm", NULL, 1, "batch", "default", 0, 1, 1, 900, "node:1:0", 1},
    {"slurm/klust-job-depend.slurm", NULL, 1, "batch", "default", 0, 1, 1, 600, "node:1:0", 1},
    {"slurm/klust-mpi-hello.slurm", NULL, 1, "batch", "default", 0, 1, 1, 300, "node:1:0", 40},
    {"slurm/cedar-ntasks-per-node.sh", NULL, 1, "batch", "default", 1, 1, 1, 0, "node:1:1", 4},
    {"slurm/cedar-gpu-node-exclusive.sh", NULL, 1, "batch", "default", 4, 1, 1, 180, "node:1:4",
     24},
    {"slurm/alliance-gpu-node-typed.sh", NULL, 1, "batch", "default", 4, 1, 1, 180, "node:1:4", 24},
    {"slurm/megatron-ds-template.sh", "--nodes 'NUM_NODES' is not a count"},
    {"slurm/reft-ds-pretrain.sh", NULL, 1, "batch", "i64m1tga800u", 2, 1, 1, 0, "node:1:2", 2},
    {"slurm/amarel-array-throttle.sh", NULL, 10, "batch", "main", 0, 1, 1, 172800, "node:1:0", 1},
    {"slurm/paynelab-array-1000.sh", NULL, 1000, "batch", "default", 0, 1, 1, 21600, "node:1:0", 1},
    {"slurm/faa-swimmer-array.sh", NULL, 5, "batch", "default", 0, 1, 1, 900, "node:1:0", 10},
    {"slurm/gaurikadiwan-broken-line.sh", NULL, 1, "batch", "default", 0, 1, 1, 0, "node:1:0", 1},
    {"slurm/raw-ovd-train.sh", NULL, 1, "batch", "YOUR_PARTITION", 16, 2, 2, 259200, "node:2:8",
     16},
    {"slurm/pytorch-hpc-multinode.sh", NULL, 1, "batch", "default", 8, 2, 2, 1800, "node:2:4", 8},
    {"slurm/sleeper-double-shebang.sh", NULL, 1, "batch", "gpu", 1, 1, 1, 5400, "node:1:1", 1},
    {"slurm/urs-space-shebang.sh", NULL, 1, "batch", "rtx2080", 2, 1, 1, 0, "node:1:2", 1},
    {"slurm/marl-array-qos.sh", NULL, 10, "batch", "cpu", 0, 1, 1, 86400, "node:1:0", 1},
    {"slurm/nanogpt-workdir.sh", NULL, 1, "batch", "gpu", 1, 1, 1, 0, "node:1:1", 1},
    {"slurm/woah-vllm-typed-gpus.sh", NULL, 1, "batch", "gpu", 4, 1, 1, 14400, "node:1:4", 1},
    {"slurm/nlpkg-vllm-serve.sh", NULL, 1, "batch", "default", 1, 1, 1, 0, "node:1:1", 1},
    {"slurm/vllm-multinode-nodelist.sh", NULL, 1, "batch", "Compute", 0, 2, 2, 3600, "node:2:0", 2},
    {"slurm/jazzy-cat-nested-sbatch.sh", NULL, 1, "batch", "cuda-gpu", 1, 1, 1, 0, "node:1:1", 1},
    {"slurm/transformer-tasks-prefix.sh", NULL, 1, "batch", "gpu4", 0, 1, 1, 86400, "node:1:0", 10},
};

static void check_groups(const char *file, const json_t *job, const char *want)
{
    char buf[512], *save = NULL;
    size_t i = 0;
    json_t *groups = json_object_get(job, "groups");

    snprintf(buf, sizeof buf, "%s", want);
    for (char *g = strtok_r(buf, ",", &save); g; g = strtok_r(NULL, ",", &save), i++) {
        char name[64];
        int reps = 0, gpus = 0, share = 0;
        int n = sscanf(g, "%63[^:]:%d:%d:%d", name, &reps, &gpus, &share);
        json_t *o = json_array_get(groups, i);
        if (n < 3 || !o)
            fail_msg("%s: group %zu: want %s, got %zu groups", file, i, g, json_array_size(groups));
        if (strcmp(json_string_value(json_object_get(o, "name")), name) ||
            json_integer_value(json_object_get(o, "replicas")) != reps ||
            json_integer_value(json_object_get(o, "gpus")) != gpus ||
            json_integer_value(json_object_get(o, "gpu_share")) != share)
            fail_msg("%s: group %zu: want %s, got %s:%lld:%lld:%lld", file, i, g,
                     json_string_value(json_object_get(o, "name")),
                     (long long)json_integer_value(json_object_get(o, "replicas")),
                     (long long)json_integer_value(json_object_get(o, "gpus")),
                     (long long)json_integer_value(json_object_get(o, "gpu_share")));
    }
    if (i != json_array_size(groups))
        fail_msg("%s: want %zu groups, got %zu", file, i, json_array_size(groups));
}

static void test_corpus(void **st)
{
    int k8s = 0, slurm = 0;

    (void)st;
    for (size_t c = 0; c < sizeof corpus / sizeof corpus[0]; c++) {
        const expect_t *e = &corpus[c];
        char path[512];
        size_t n;
        snprintf(path, sizeof path, FIX "%s", e->file);
        char *text = slurp(path, &n);
        if (!text)
            fail_msg("%s: cannot read", path);
        if (!strncmp(e->file, "k8s/", 4))
            k8s++;
        else
            slurm++;
        arb_err_t err = {{0}};
        json_t *out;
        int rc = dry(e->file, text, n, NULL, &out, &err);
        free(text);
        if (e->error) {
            if (rc == 0)
                fail_msg("%s: accepted, expected '%s'", e->file, e->error);
            if (!strstr(err.msg, e->error) || !strstr(err.msg, e->file))
                fail_msg("%s: message '%s' lacks '%s' or the file", e->file, err.msg, e->error);
            continue;
        }
        if (rc != 0)
            fail_msg("%s: %s", e->file, err.msg);
        json_t *jobs = json_object_get(out, "jobs"), *j;
        size_t i;
        if ((int)json_array_size(jobs) != e->njobs)
            fail_msg("%s: %zu jobs, want %d", e->file, json_array_size(jobs), e->njobs);
        json_array_foreach(jobs, i, j)
        {
            const char *kind = json_string_value(json_object_get(j, "kind"));
            const char *queue = json_string_value(json_object_get(j, "queue"));
            long long gpus = json_integer_value(json_object_get(j, "gpus"));
            long long ntasks = json_integer_value(json_object_get(j, "ntasks"));
            long long gang = json_integer_value(json_object_get(j, "gang_min"));
            long long tl = json_integer_value(json_object_get(j, "time_limit_s"));
            if (strcmp(kind, e->kind) || strcmp(queue, e->queue) || gpus != e->gpus ||
                ntasks != e->ntasks || gang != e->gang_min || tl != e->time_limit_s)
                fail_msg("%s: job %zu: kind %s queue %s gpus %lld tasks %lld gang %lld time "
                         "%lld; want %s %s %d %d %d %d",
                         e->file, i, kind, queue, gpus, ntasks, gang, tl, e->kind, e->queue,
                         e->gpus, e->ntasks, e->gang_min, e->time_limit_s);
            check_groups(e->file, j, e->groups);
            json_t *src = json_object_get(j, "source");
            if (e->slurm_ntasks &&
                json_integer_value(json_object_get(src, "ntasks")) != e->slurm_ntasks)
                fail_msg("%s: %lld Slurm tasks, want %d", e->file,
                         (long long)json_integer_value(json_object_get(src, "ntasks")),
                         e->slurm_ntasks);
            if (e->service_replicas &&
                json_integer_value(json_object_get(json_object_get(j, "service"), "replicas")) !=
                    e->service_replicas)
                fail_msg("%s: service replicas differ", e->file);
            if (!json_array_size(json_object_get(j, "command")) && !has_warning(out, "no command"))
                fail_msg("%s: job %zu has no command and no warning says so", e->file, i);
        }
        json_decref(out);
    }
    assert_true(k8s >= 66);
    assert_true(slurm >= 46);
}

/* Field-level details of corpus files that a table row does not show. */
static void test_corpus_details(void **st)
{
    char *text;
    size_t n;
    json_t *out, *j, *g;

    (void)st;
    /* the MPI operator's hostfile: slotsPerWorker slots per worker, for the launcher */
    text = slurp(FIX "k8s/mpi-nccl-tests.yaml", &n);
    out = dry_ok("mpi-nccl-tests.yaml", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    const char *cmd = json_string_value(json_array_get(json_object_get(j, "command"), 2));
    assert_non_null(cmd);
    assert_non_null(strstr(cmd, "slots=8"));
    assert_non_null(
        strstr(cmd, "export OMPI_MCA_orte_default_hostfile=\"$(arbiter_mpi_hostfile)\""));
    assert_true(has_warning(out, "workers run no sshd"));
    json_decref(out);
    free(text);
    /* TF_CONFIG for every TFJob replica, its type lower-case */
    text = slurp(FIX "k8s/tfjob-simple.yaml", &n);
    out = dry_ok("tfjob-simple.yaml", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    cmd = json_string_value(json_array_get(json_object_get(j, "command"), 2));
    assert_non_null(cmd);
    assert_non_null(strstr(cmd, "set -- worker 2\n"));
    assert_non_null(strstr(cmd, "export TF_CONFIG=\"$(arbiter_tf_config worker)\""));
    json_decref(out);
    free(text);
    /* a PodGroup named by a Job's pod template is read with it, not "without pods" */
    text = slurp(FIX "k8s/volcano-kube-batch-job.yaml", &n);
    out = dry_ok("volcano-kube-batch-job.yaml", text, NULL);
    assert_true(has_warning(out, "pod group 'qj-1' (minMember 6) is not read"));
    assert_false(has_warning(out, "has no pods in this file"));
    json_decref(out);
    free(text);
    /* --cpus-per-gpu, --mem-per-gpu: per node from the GPUs; -w a host */
    text = slurp(FIX "slurm/nodestest-template.sh", &n);
    out = dry_ok("nodestest-template.sh", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    g = json_array_get(json_object_get(j, "groups"), 0);
    assert_string_equal(json_string_value(json_object_get(g, "cpu")), "32");
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "160Gi");
    char *aff = json_dumps(json_object_get(j, "affinity"), JSON_COMPACT);
    assert_non_null(aff);
    assert_non_null(strstr(aff, "\"agi1\""));
    free(aff);
    json_decref(out);
    free(text);
    text = slurp(FIX "slurm/cmc-dependency.sh", &n);
    out = dry_ok("cmc-dependency.sh", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    g = json_array_get(json_object_get(j, "groups"), 0);
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "8000Mi");
    json_decref(out);
    free(text);
    /* limits only: the request is the limit; ephemeral-storage kept; memory limit */
    text = slurp(FIX "k8s/lws-vllm-gpu.yaml", &n);
    out = dry_ok("lws-vllm-gpu.yaml", text, NULL);
    g = json_array_get(json_object_get(json_array_get(json_object_get(out, "jobs"), 0), "groups"),
                       0);
    assert_string_equal(json_string_value(json_object_get(g, "cpu")), "125");
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "1124Gi");
    assert_string_equal(json_string_value(json_object_get(g, "ephemeral_storage")), "800Gi");
    assert_true(has_warning(out, "volumes"));
    json_decref(out);
    free(text);
    /* KAI gpu-memory: 2000 MiB of one shared GPU */
    text = slurp(FIX "k8s/kai-gpu-memory.yaml", &n);
    out = dry_ok("kai-gpu-memory.yaml", text, NULL);
    g = json_array_get(json_object_get(json_array_get(json_object_get(out, "jobs"), 0), "groups"),
                       0);
    assert_string_equal(json_string_value(json_object_get(g, "gpu_memory")), "2000Mi");
    json_decref(out);
    free(text);
    /* Kueue's required topology: a rack */
    text = slurp(FIX "k8s/kueue-jobset-tas-required.yaml", &n);
    out = dry_ok("tas.yaml", text, NULL);
    g = json_array_get(json_object_get(json_array_get(json_object_get(out, "jobs"), 0), "groups"),
                       0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(g, "topology"), "level")),
                        "rack");
    assert_string_equal(json_string_value(json_object_get(json_object_get(g, "topology"), "mode")),
                        "required");
    json_decref(out);
    free(text);
    /* an Indexed Job's pods see JOB_COMPLETION_INDEX; init containers are counted */
    text = slurp(FIX "k8s/indexed-job.yaml", &n);
    out = dry_ok("indexed-job.yaml", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_non_null(strstr(json_string_value(json_array_get(json_object_get(j, "command"), 2)),
                           "JOB_COMPLETION_INDEX=\"${ARBITER_GROUP_INDEX}\""));
    assert_true(has_warning(out, "parallelism 3 < completions 5"));
    assert_true(has_warning(out, "init containers are not run"));
    json_decref(out);
    free(text);
    /* sbatch: --constraint a label, --gres typed, mem-per-cpu x cpus */
    text = slurp(FIX "slurm/princeton-lightning.slurm", &n);
    out = dry_ok("lightning.slurm", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    g = json_array_get(json_object_get(j, "groups"), 0);
    assert_string_equal(json_string_value(json_object_get(g, "cpu")), "16");
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "64Gi");
    json_t *expr = json_array_get(
        json_array_get(json_object_get(json_object_get(j, "affinity"), "required"), 0), 0);
    assert_string_equal(json_string_value(json_object_get(expr, "key")), "a100");
    assert_string_equal(json_string_value(json_object_get(expr, "operator")), "Exists");
    assert_true(has_warning(out, "--reservation is not honoured"));
    json_decref(out);
    free(text);
    /* -w host: a required hostname */
    text = slurp(FIX "slurm/gradw-nodelist.sh", &n);
    out = dry_ok("gradw.sh", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    expr = json_array_get(
        json_array_get(json_object_get(json_object_get(j, "affinity"), "required"), 0), 0);
    assert_string_equal(json_string_value(json_object_get(expr, "key")), "kubernetes.io/hostname");
    assert_string_equal(json_string_value(json_array_get(json_object_get(expr, "values"), 0)),
                        "ttnusa1");
    assert_true(has_warning(out, "#SBATCH") == false || true);
    json_decref(out);
    free(text);
    /* arrays: each element its own job and index; the throttle is a warning */
    text = slurp(FIX "slurm/brown-job-array-nonsequential.sh", &n);
    out = dry_ok("nonseq.sh", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 3);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "env"), "SLURM_ARRAY_TASK_ID")), "12");
    json_decref(out);
    free(text);
    text = slurp(FIX "slurm/brown-job-array-throttle.sh", &n);
    out = dry_ok("throttle.sh", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 1); /* the controller keeps the throttle */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "array"), "throttle")),
                     2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "array"), "task")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "array"), "count")), 4);
    json_decref(out);
    free(text);
    /* the second corpus's details: a fractional byte quantity rounds up (0.2Gi) */
    text = slurp(FIX "k8s/kueue-mxjob.yaml", &n);
    out = dry_ok("kueue-mxjob.yaml", text, NULL);
    g = json_array_get(json_object_get(json_array_get(json_object_get(out, "jobs"), 0), "groups"),
                       0);
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "214748365");
    json_decref(out);
    free(text);
    /* KAI's gpu-fraction-container-name names the container that runs */
    text = slurp(FIX "k8s/kai-gpu-sharing-non-default.yaml", &n);
    out = dry_ok("kai-non-default.yaml", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "command"), 0)),
                        "nvidia-smi");
    assert_true(has_warning(out, "container 0 is not run"));
    json_decref(out);
    free(text);
    /* KAI's priorityClassName label is the pod's priority class */
    text = slurp(FIX "k8s/kai-train-priority-pod.yaml", &n);
    out = dry_ok("kai-train-priority-pod.yaml", text, NULL);
    assert_true(has_warning(out, "priorityClassName 'train' is not a built-in class"));
    json_decref(out);
    free(text);
    /* HAMi's use-gputype: the allowed GPU models */
    text = slurp(FIX "k8s/hami-card-type.yaml", &n);
    out = dry_ok("hami-card-type.yaml", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_int_equal(json_array_size(json_object_get(j, "gpu_models")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "gpu_models"), 1)),
                        "V100");
    json_decref(out);
    free(text);
    /* --workdir (sbatch's name for --chdir before 17.11): the directory the script runs in */
    text = slurp(FIX "slurm/nanogpt-workdir.sh", &n);
    out = dry_ok("nanogpt-workdir.sh", text, NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_non_null(strstr(json_string_value(json_array_get(json_object_get(j, "command"), 2)),
                           "cd '/p/tmp/heitzig'"));
    json_decref(out);
    free(text);
    /* --tasks is sbatch's alias of --ntasks: 10 tasks on one node, 10 CPUs */
    text = slurp(FIX "slurm/transformer-tasks-prefix.sh", &n);
    out = dry_ok("transformer.sh", text, NULL);
    g = json_array_get(json_object_get(json_array_get(json_object_get(out, "jobs"), 0), "groups"),
                       0);
    assert_string_equal(json_string_value(json_object_get(g, "cpu")), "10");
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "40Gi");
    json_decref(out);
    free(text);
}

/* ---- sbatch's rules ------------------------------------------------------------------------ */

static void test_sbatch_values(void **st)
{
    int64_t s, mb;
    char hosts[16][96];
    int ids[64], thr;

    (void)st;
    assert_int_equal(sb_time("30", &s), 0), assert_int_equal(s, 1800);
    assert_int_equal(sb_time("5:30", &s), 0), assert_int_equal(s, 330);
    assert_int_equal(sb_time("01:00:00", &s), 0), assert_int_equal(s, 3600);
    assert_int_equal(sb_time("2-12", &s), 0), assert_int_equal(s, 2 * 86400 + 12 * 3600);
    assert_int_equal(sb_time("1-02:03", &s), 0), assert_int_equal(s, 86400 + 7200 + 180);
    assert_int_equal(sb_time("1-02:03:04", &s), 0), assert_int_equal(s, 86400 + 7200 + 184);
    assert_int_equal(sb_time("UNLIMITED", &s), 0), assert_int_equal(s, 0);
    assert_int_equal(sb_time("infinite", &s), 0), assert_int_equal(s, 0);
    assert_int_not_equal(sb_time("1:2:3:4", &s), 0);
    assert_int_not_equal(sb_time("1h", &s), 0);
    assert_int_not_equal(sb_time("-5", &s), 0);
    assert_int_equal(sb_mem_mb("4096", &mb), 0), assert_int_equal(mb, 4096);
    assert_int_equal(sb_mem_mb("16G", &mb), 0), assert_int_equal(mb, 16384);
    assert_int_equal(sb_mem_mb("16GB", &mb), 0), assert_int_equal(mb, 16384);
    assert_int_equal(sb_mem_mb("512K", &mb), 0), assert_int_equal(mb, 1);
    assert_int_equal(sb_mem_mb("1T", &mb), 0), assert_int_equal(mb, 1048576);
    assert_int_not_equal(sb_mem_mb("lots", &mb), 0);
    assert_int_equal(sb_hostlist("node[01-03,07],gpu5", hosts, 16), 5);
    assert_string_equal(hosts[0], "node01");
    assert_string_equal(hosts[2], "node03");
    assert_string_equal(hosts[3], "node07");
    assert_string_equal(hosts[4], "gpu5");
    assert_int_equal(sb_hostlist("a[1-20]", hosts, 16), -ENOSPC);
    assert_int_equal(sb_hostlist("a[3-1]", hosts, 16), -EINVAL);
    assert_int_equal(sb_array("0-15%4", ids, 64, &thr), 16), assert_int_equal(thr, 4);
    assert_int_equal(sb_array("1,3,5", ids, 64, &thr), 3), assert_int_equal(ids[2], 5);
    assert_int_equal(sb_array("0-20:5", ids, 64, &thr), 5), assert_int_equal(ids[4], 20);
    assert_int_equal(sb_array("x", ids, 64, &thr), -EINVAL);
}

static void test_sbatch_directives(void **st)
{
    json_t *out, *j, *g;
    (void)st;
    /* a # comment inside a directive; quotes; ##SBATCH and indented ones are
     * comments; directives after the first command are ignored */
    out = dry_ok("t.sh",
                 "#!/bin/bash\n"
                 "# a comment\n"
                 "#SBATCH --job-name=\"my job\"   # the name\n"
                 "#SBATCH -N2 --ntasks-per-node 4\n"
                 "##SBATCH --nodes=9\n"
                 "  #SBATCH --nodes=8\n"
                 "#SBATCH -c 2 --mem-per-cpu=1G\n"
                 "#SBATCH --gpus-per-task=1 -t 1-0\n"
                 "\n"
                 "echo hi\n"
                 "#SBATCH --nodes=7\n",
                 NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    g = json_array_get(json_object_get(j, "groups"), 0);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "my-job");
    assert_int_equal(json_integer_value(json_object_get(g, "replicas")), 2);
    assert_int_equal(json_integer_value(json_object_get(g, "gpus")), 4);
    assert_string_equal(json_string_value(json_object_get(g, "cpu")), "8");
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "8Gi");
    assert_int_equal(json_integer_value(json_object_get(j, "time_limit_s")), 86400);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "source"), "ntasks")),
                     8);
    assert_true(has_warning(out, "t.sh:11: #SBATCH after the first command is ignored"));
    json_decref(out);

    /* the command line overrides the script; -n and --ntasks-per-node give -N */
    char *argv[] = {"--ntasks=6", "-p", "big", "--gres=gpu:h100:2,nvme:1", "--time=10"};
    char *args[] = {"a1"};
    wl_sbatch_cli_t cli = {.argc = 5, .argv = argv, .nargs = 1, .args = args};
    out = dry_ok("c.sh",
                 "#!/bin/sh\n#SBATCH -n 2\n#SBATCH --ntasks-per-node=3\n#SBATCH -p small\n"
                 "srun true\n",
                 &cli);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    g = json_array_get(json_object_get(j, "groups"), 0);
    assert_string_equal(json_string_value(json_object_get(j, "queue")), "big");
    assert_int_equal(json_integer_value(json_object_get(g, "replicas")), 2);
    assert_int_equal(json_integer_value(json_object_get(g, "gpus")), 2);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(g, "extended"), "gres/nvme")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "gpu_models"), 0)),
                        "h100");
    assert_int_equal(json_integer_value(json_object_get(j, "time_limit_s")), 600);
    json_t *cmd = json_object_get(j, "command");
    assert_string_equal(json_string_value(json_array_get(cmd, json_array_size(cmd) - 1)), "a1");
    json_decref(out);

    /* hetjob: one group per component, one gang */
    out = dry_ok("h.sh",
                 "#!/bin/bash\n#SBATCH -N1 -n1 --gpus-per-node=2\n#SBATCH hetjob\n"
                 "#SBATCH -N 3 --cpus-per-task=4\nsrun --het-group=0 true\n",
                 NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_int_equal(json_array_size(json_object_get(j, "groups")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "gang_min")), 4);
    assert_int_equal(json_integer_value(json_object_get(j, "gpus")), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "groups"), 1), "name")),
        "het-1");
    json_decref(out);

    /* --nodelist alone gives the node count; --exclusive and the dependency are kept */
    out = dry_ok("w.sh",
                 "#!/bin/bash\n#SBATCH -w gpu[1-3] --exclusive\n#SBATCH -d afterok:12:13\n"
                 "#SBATCH --no-requeue\nhostname\n",
                 NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(j, "groups"), 0), "replicas")),
                     3);
    assert_true(json_is_true(json_object_get(j, "exclusive")));
    assert_string_equal(json_string_value(json_object_get(j, "dependency")), "afterok:12:13");
    json_decref(out);
    /* dependencies: the forms sbatch documents; a bad one is an error naming it */
    out = dry_ok("d.sh", "#!/bin/sh\n#SBATCH -d afterany:7?afternotok:8_3\ntrue\n", NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_string_equal(json_string_value(json_object_get(j, "dependency")),
                        "afterany:7?afternotok:8_3");
    json_decref(out);
    out = dry_ok("d.sh", "#!/bin/sh\n#SBATCH -d aftercorr:7\ntrue\n", NULL);
    assert_true(has_warning(out, "aftercorr is read as afterok of the whole array"));
    json_decref(out);
    assert_non_null(strstr(dry_err("d.sh", "#!/bin/sh\n#SBATCH -d afterok\ntrue\n", NULL),
                           "'afterok' names no job"));
    assert_non_null(
        strstr(dry_err("d.sh", "#!/bin/sh\n#SBATCH -d afterok:1,afterany:2?after:3\ntrue\n", NULL),
               "not both"));
    assert_non_null(strstr(dry_err("d.sh", "#!/bin/sh\n#SBATCH -d afterok:1+5\ntrue\n", NULL),
                           "goes only with 'after'"));
    assert_non_null(strstr(dry_err("d.sh", "#!/bin/sh\n#SBATCH -d afterfoo:1\ntrue\n", NULL),
                           "'afterfoo' is not a dependency type"));

    /* sbatch's aliases: --tasks, --tasks-per-node, --workdir; seconds round up to a minute */
    out = dry_ok("a.sh",
                 "#!/bin/sh\n#SBATCH --tasks=6 --tasks-per-node=3\n#SBATCH --workdir=/w\n"
                 "#SBATCH --time=00:00:30\nsrun true\n",
                 NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    g = json_array_get(json_object_get(j, "groups"), 0);
    assert_int_equal(json_integer_value(json_object_get(g, "replicas")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "source"), "ntasks")),
                     6);
    assert_int_equal(json_integer_value(json_object_get(j, "time_limit_s")), 60);
    assert_non_null(
        strstr(json_string_value(json_array_get(json_object_get(j, "command"), 2)), "cd '/w'"));
    json_decref(out);
    out = dry_ok("m.sh", "#!/bin/sh\n#SBATCH -t 5:30\ntrue\n", NULL);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(out, "jobs"), 0), "time_limit_s")),
                     360);
    json_decref(out);
    assert_non_null(
        strstr(dry_err("e.sh", "#!/bin/sh\n#SBATCH --task=2\ntrue\n", NULL), "is ambiguous"));

    /* errors name the line and the fix */
    assert_non_null(strstr(dry_err("e.sh", "#!/bin/sh\n#SBATCH --nodez=2\ntrue\n", NULL),
                           "e.sh:2: unknown sbatch option '--nodez'; did you mean '--nodes'?"));
    assert_non_null(strstr(dry_err("e.sh", "#!/bin/sh\n#SBATCH --time=1h\ntrue\n", NULL),
                           "e.sh:2: --time '1h'"));
    assert_non_null(strstr(dry_err("e.sh", "#SBATCH -N 1\ntrue\n", NULL), "must start with #!"));
    assert_non_null(strstr(dry_err("e.sh", "#!/bin/sh\n#SBATCH -N 2 -n 1\ntrue\n", NULL),
                           "at least one task per node"));
    assert_non_null(
        strstr(dry_err("e.sh", "#!/bin/sh\n#SBATCH --constraint=a*2\ntrue\n", NULL), "counts"));
    assert_non_null(strstr(dry_err("e.sh", "#!/bin/sh\n#SBATCH --array=0-99999\ntrue\n", NULL),
                           "more than 10000"));
}

/* ---- Kubernetes' rules ------------------------------------------------------------------------
 */

#define POD(extra_meta, spec)                                                                      \
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n" extra_meta "spec:\n" spec

static void test_k8s_rules(void **st)
{
    json_t *out, *j, *g;
    (void)st;
    /* several containers summed; a limit alone is the request; init max; sidecar adds */
    out = dry_ok("p.yaml",
                 POD("", "  initContainers:\n"
                         "  - {name: i, image: x, resources: {requests: {cpu: 4}}}\n"
                         "  - {name: s, image: x, restartPolicy: Always, resources: {requests: "
                         "{cpu: 500m}}}\n"
                         "  containers:\n"
                         "  - name: a\n    command: [sleep, '1']\n"
                         "    resources: {limits: {cpu: 1, memory: 1Gi, nvidia.com/gpu: 2}}\n"
                         "  - name: b\n    resources: {requests: {cpu: 2, memory: 1Gi}}\n"),
                 NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    g = json_array_get(json_object_get(j, "groups"), 0);
    assert_string_equal(json_string_value(json_object_get(g, "cpu")), "4");
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "2Gi");
    assert_int_equal(json_integer_value(json_object_get(g, "gpus")), 2);
    assert_true(has_warning(out, "container 1 is not run"));
    json_decref(out);

    /* node affinity terms ORed; tolerations; priority class; grace */
    out = dry_ok(
        "p.yaml",
        POD("",
            "  priorityClassName: high\n  terminationGracePeriodSeconds: 20\n"
            "  nodeSelector: {zone: z1}\n"
            "  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]\n"
            "  affinity:\n    nodeAffinity:\n"
            "      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
            "        - matchExpressions: [{key: a, operator: In, values: [x]}]\n"
            "        - matchExpressions: [{key: b, operator: Exists}]\n"
            "  containers: [{name: c, command: [true]}]\n"),
        NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "priority")), 1000);
    assert_int_equal(json_integer_value(json_object_get(j, "termination_grace_s")), 20);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "node_selector"), "zone")), "z1");
    assert_int_equal(json_array_size(json_object_get(json_object_get(j, "affinity"), "required")),
                     2);
    assert_int_equal(json_array_size(json_object_get(j, "tolerations")), 1);
    json_decref(out);

    /* what changes where a pod may run and cannot be honoured is an error */
    assert_non_null(strstr(dry_err("p.yaml",
                                   POD("", "  affinity:\n    podAntiAffinity:\n"
                                           "      requiredDuringSchedulingIgnoredDuringExecution:\n"
                                           "      - {topologyKey: kubernetes.io/hostname}\n"
                                           "  containers: [{name: c, command: [true]}]\n"),
                                   NULL),
                           "podAntiAffinity places pods by the pods already on a node"));
    assert_non_null(
        strstr(dry_err("p.yaml", POD("", "  nodeName: n7\n  containers: [{name: c}]\n"), NULL),
               "nodeName pins the pod"));
    assert_non_null(
        strstr(dry_err("p.yaml",
                       POD("", "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, "
                               "whenUnsatisfiable: DoNotSchedule}]\n  containers: [{name: c}]\n"),
                       NULL),
               "DoNotSchedule"));
    /* a resource name near a known one: did you mean */
    assert_non_null(strstr(
        dry_err("p.yaml",
                POD("", "  containers: [{name: c, resources: {limits: {nvidia.com/gpus: 1}}}]\n"),
                NULL),
        "unknown resource 'nvidia.com/gpus'; did you mean 'nvidia.com/gpu'?"));
    /* several documents: the workloads become jobs, the rest warnings */
    out = dry_ok("m.yaml",
                 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n---\n" POD(
                     "", "  containers: [{name: c, command: [true]}]\n") "---\n"
                                                                         "apiVersion: v1\nkind: "
                                                                         "Service\nmetadata: "
                                                                         "{name: s}\n",
                 NULL);
    assert_int_equal(json_array_size(json_object_get(out, "jobs")), 1);
    assert_true(has_warning(out, "ConfigMap 'cm' (v1) is not a workload Arbiter runs; skipped"));
    assert_true(has_warning(out, "Service 's'"));
    json_decref(out);
    /* an unsupported kind names the supported ones; no workload at all is an error */
    assert_non_null(strstr(dry_err("r.yaml",
                                   "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: r}\n"
                                   "spec: {}\n",
                                   NULL),
                           "Arbiter runs Pod, batch/v1 Job"));
    assert_non_null(
        strstr(dry_err("c.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", NULL),
               "no workload in 1 document"));
    /* a kind without apiVersion */
    assert_non_null(
        strstr(dry_err("k.yaml", "kind: Job\nmetadata: {name: j}\n", NULL), "without apiVersion"));
    /* Kubernetes rounds a fraction of a byte up (Quantity.Value) */
    out = dry_ok("q.yaml",
                 POD("", "  containers: [{name: c, command: [true], resources: {limits: "
                         "{memory: 0.5Ki, ephemeral-storage: 1.0001k}}}]\n"),
                 NULL);
    g = json_array_get(json_object_get(json_array_get(json_object_get(out, "jobs"), 0), "groups"),
                       0);
    assert_string_equal(json_string_value(json_object_get(g, "memory")), "512");
    assert_string_equal(json_string_value(json_object_get(g, "ephemeral_storage")), "1001");
    json_decref(out);
    /* DRA claims change where a pod runs and cannot be honoured */
    assert_non_null(
        strstr(dry_err("d.yaml",
                       POD("", "  resourceClaims: [{name: g, resourceClaimTemplateName: t}]\n"
                               "  containers: [{name: c, command: [true], resources: {claims: "
                               "[{name: g}]}}]\n"),
                       NULL),
               "resourceClaims (dynamic resource allocation) cannot be honoured"));
    /* HAMi: one vGPU with cores and memory is a GPU share; memory alone shares by memory */
    out = dry_ok("h.yaml",
                 POD("", "  containers: [{name: c, command: [true], resources: {limits: "
                         "{nvidia.com/gpu: 1, nvidia.com/gpumem: 3000, nvidia.com/gpucores: "
                         "30}}}]\n"),
                 NULL);
    g = json_array_get(json_object_get(json_array_get(json_object_get(out, "jobs"), 0), "groups"),
                       0);
    assert_int_equal(json_integer_value(json_object_get(g, "gpu_share")), 300);
    assert_int_equal(json_integer_value(json_object_get(g, "gpus")), 0);
    assert_string_equal(json_string_value(json_object_get(g, "gpu_memory")), "3000Mi");
    assert_null(json_object_get(g, "extended"));
    json_decref(out);
    out = dry_ok("h.yaml",
                 POD("", "  containers: [{name: c, command: [true], resources: {limits: "
                         "{nvidia.com/gpumem-percentage: 100}}}]\n"),
                 NULL);
    g = json_array_get(json_object_get(json_array_get(json_object_get(out, "jobs"), 0), "groups"),
                       0);
    assert_int_equal(json_integer_value(json_object_get(g, "gpu_share")), 0);
    json_decref(out);
    assert_non_null(strstr(dry_err("h.yaml",
                                   POD("", "  containers: [{name: c, resources: {limits: "
                                           "{nvidia.com/gpucores: 130}}}]\n"),
                                   NULL),
                           "130 is not a percent"));
    assert_non_null(strstr(dry_err("h.yaml",
                                   POD("  annotations: {gpu-fraction: '0.5'}\n",
                                       "  containers: [{name: c, resources: {limits: "
                                       "{nvidia.com/gpumem: 100}}}]\n"),
                                   NULL),
                           "a GPU share is given twice"));
    assert_non_null(strstr(dry_err("h.yaml",
                                   POD("  annotations: {nvidia.com/nouse-gputype: V100}\n",
                                       "  containers: [{name: c}]\n"),
                                   NULL),
                           "nvidia.com/nouse-gputype 'V100'"));
    /* kubectl's default-container annotation names the container that runs */
    out = dry_ok("m.yaml",
                 POD("  annotations: {kubectl.kubernetes.io/default-container: b}\n",
                     "  containers:\n  - {name: a, command: [sleep, '9']}\n"
                     "  - {name: b, command: [train]}\n"),
                 NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "command"), 0)),
                        "train");
    json_decref(out);
    /* Kueue's partial admission: the Job may start with job-min-parallelism pods */
    assert_non_null(
        strstr(dry_err("j.yaml",
                       "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations: "
                       "{kueue.x-k8s.io/job-min-parallelism: '9'}\nspec:\n  parallelism: 4\n"
                       "  template:\n    spec:\n      containers: [{name: c, command: [true]}]\n",
                       NULL),
               "give a pod count 1..4"));
    /* $(VAR) in args from env; fieldRef metadata.name */
    out =
        dry_ok("v.yaml",
               POD("", "  containers:\n  - name: c\n    command: [echo, '$(A)-$(B)', '$$(A)']\n"
                       "    env:\n    - {name: A, value: one}\n"
                       "    - name: B\n      valueFrom: {fieldRef: {fieldPath: metadata.name}}\n"),
               NULL);
    j = json_array_get(json_object_get(out, "jobs"), 0);
    const char *script = json_string_value(json_array_get(json_object_get(j, "command"), 2));
    assert_non_null(strstr(script, "export B=\"p-${ARBITER_TASK_INDEX}\""));
    assert_non_null(strstr(script, "exec \"echo\" \"one-p-${ARBITER_TASK_INDEX}\" \"\\$(A)\""));
    json_decref(out);
}

static void test_detect(void **st)
{
    (void)st;
    assert_int_equal(wl_detect("name: j\nresources: {}\n", 22), WL_NATIVE);
    assert_int_equal(wl_detect("{\"name\": \"j\"}", 13), WL_NATIVE);
    assert_int_equal(wl_detect("apiVersion: v1\nkind: Pod\n", 25), WL_K8S);
    assert_int_equal(wl_detect("#!/bin/bash\necho\n", 17), WL_SBATCH);
    assert_int_equal(wl_detect("#SBATCH -N 1\n", 13), WL_SBATCH);
    assert_int_equal(wl_detect("python train.py --x 1\n", 22), WL_UNKNOWN);
    const char *flow = "---\n{\n  apiVersion: \"batch/v1\",\n  kind: \"Job\"\n}\n";
    assert_int_equal(wl_detect(flow, strlen(flow)), WL_K8S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus),        cmocka_unit_test(test_corpus_details),
        cmocka_unit_test(test_sbatch_values), cmocka_unit_test(test_sbatch_directives),
        cmocka_unit_test(test_k8s_rules),     cmocka_unit_test(test_detect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
