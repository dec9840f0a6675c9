/*
 * k8s_int.h: the parts of the Kubernetes reader (k8s.c: documents and
 * kinds; k8s_pod.c: one pod template) that they share. Not a public API.
 */
#ifndef ARB_SPEC_K8S_INT_H
#define ARB_SPEC_K8S_INT_H

#include "spec/sval.h"
#include "spec/wl.h"

#define K8S_MAX_RES 16 /* distinct resource names in one pod */
#define K8S_NAME 128

/* The reader's context: sval's (file, err) and the output. */
typedef struct kx {
    sx_t x;
    wl_t *w;
    char kind[64];       /* the document's kind, for messages */
    char api[96];        /* its apiVersion */
    bool kubeflow;       /* a Kubeflow training job: its main container is named by the kind */
    const char *mainctr; /* that name (pytorch, tensorflow, mpi, ...), or NULL */
    char named_pg[16][K8S_NAME]; /* pod groups the workloads' pod templates name (a PodGroup for */
    int nnamed_pg;               /* them is read, not "without pods") */
} kx_t;

/* A warning at v ("FILE:LINE:COL: PATH: text"). */
void kx_warn(kx_t *k, const sval_t *v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* One resource of a pod: its request and limit, summed over containers. */
typedef struct k8s_res {
    char name[64];
    arb_qty_kind_t unit;
    int64_t req, lim;
    bool has_req, has_lim;
} k8s_res_t;

/* A pod template as Arbiter sees it: one task's request, where it may
 * run, what it runs. */
typedef struct k8s_pod {
    int nres;
    k8s_res_t res[K8S_MAX_RES];
    int share_milli;           /* KAI gpu-fraction, 0 none */
    int64_t share_mib;         /* KAI gpu-memory (MiB), 0 none */
    json_t *selector;          /* {label: value} (owned) */
    json_t *required;          /* [[expr...], ...] (owned) */
    json_t *preferred;         /* [{weight, match}] (owned) */
    json_t *tolerations;       /* [...] (owned) */
    char prio[K8S_NAME];       /* priorityClassName, "" none */
    int grace;                 /* terminationGracePeriodSeconds, -1 none */
    int64_t deadline_s;        /* activeDeadlineSeconds, 0 none */
    json_t *argv;              /* the main container's command + args (owned) */
    json_t *env;               /* static variables (owned) */
    json_t *dyn;               /* variables set at start, marked text (owned) */
    bool expand;               /* argv holds marked references */
    char dir[512];             /* workingDir, "" none */
    char queue[K8S_NAME];      /* from the template's labels (Kueue, KAI), "" none */
    char topo_req[K8S_NAME];   /* Kueue podset-required-topology label key */
    char topo_pref[K8S_NAME];  /* Kueue podset-preferred-topology label key */
    char name[K8S_NAME];       /* metadata.name, "" none */
    char podgroup[K8S_NAME];   /* Kueue pod-group-name or Volcano group-name, "" none */
    char gpu_models[K8S_NAME]; /* HAMi nvidia.com/use-gputype: "A100,V100", "" any */
    int podgroup_total;        /* Kueue pod-group-total-count, 0 unknown */
    int port;                  /* the first containerPort, 0 none */
    char health[128];          /* readinessProbe.httpGet.path, "" none */
    int probe_port;            /* its port when numeric, 0 otherwise */
} k8s_pod_t;

/* Read a PodTemplateSpec (or a Pod: metadata + spec) at v into *p. ctx
 * variables (name -> marked text) are visible to $(VAR) and fieldRef
 * before the pod's own (e.g. JOB_COMPLETION_INDEX). 0 or -EINVAL. */
int k8s_pod_read(kx_t *k, const sval_t *v, const json_t *ctx, k8s_pod_t *p);
void k8s_pod_free(k8s_pod_t *p);

/* The native group {name, replicas, resources, topology} of a pod. */
json_t *k8s_pod_group(kx_t *k, const k8s_pod_t *p, const char *name, int replicas);
/* The native top-level resources of a pod ({requests, limits}). */
json_t *k8s_pod_resources(const k8s_pod_t *p);
/* Whole GPUs one task of p asks for. */
int64_t k8s_pod_gpus(const k8s_pod_t *p);

/* A Kueue topology label key as an Arbiter level ("node", "rack", "block",
 * "nvlink"), or NULL when it names none of them. */
const char *k8s_topo_level(const char *key);

/* Text of v into buf (n bytes), accepting numbers and booleans as text. */
int k8s_text(kx_t *k, const sval_t *v, char *buf, size_t n);
/* An integer that may be quoted ("4"), lo..hi. */
int k8s_int(kx_t *k, const sval_t *v, int64_t lo, int64_t hi, int64_t *out);
/* The value of label or annotation key in meta (metadata mapping), or NULL. */
const char *k8s_meta(const sval_t *meta, const char *what, const char *key, char *buf, size_t n);

#endif
