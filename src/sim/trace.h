/*
 * trace.h: the simulator's inputs, read from CSV: the cluster's nodes, the
 * task list (Alibaba cluster-trace-gpu-v2023 "openb" columns) and the FGD
 * artifact's published results (expected/analysis_*_discrete.csv).
 *
 * Columns are found by name in the header, so extra columns and any order
 * are accepted. Every error names the file, the line and the column
 * (1-based character position of the field) and the column's name:
 *
 *   pods.csv:12:17: cpu_milli '12x' is not a whole number
 *
 * Also: a durations file (for synthetic arrivals) and a topology file
 * (racks, blocks and NVLink domains of the nodes; format in docs/sim.md).
 *
 * Ownership: the *_load and *_parse functions fill a caller-owned struct
 * with arrays the struct then owns; free them with the matching *_free.
 */
#ifndef ARB_SIM_TRACE_H
#define ARB_SIM_TRACE_H

#include "arbiter/arbiter.h"

#define SIM_NAME_MAX 64
#define SIM_MODEL_MAX 32
#define SIM_SPEC_MAX 128
#define SIM_NPCT 131 /* arrived-demand percent 0..130 */
#define SIM_LABEL_MAX 32
#define SIM_PRIO_UNSET INT32_MIN

typedef struct sim_node {
    char name[SIM_NAME_MAX];
    int64_t cpu_milli;
    int64_t memory_mib;
    int gpus;
    char model[SIM_MODEL_MAX];
    int line; /* in its file, for later messages */
    /* Topology (sim_topo_apply); empty / -1 when none. */
    char rack[SIM_LABEL_MAX], block[SIM_LABEL_MAX];
    int8_t nvlink[16]; /* NVLink domain of each GPU, local to the node */
} sim_node_t;

typedef struct sim_task {
    char name[SIM_NAME_MAX];
    int64_t cpu_milli;
    int64_t memory_mib;
    int num_gpu;                                 /* 0..16 */
    int gpu_milli;                               /* per GPU; below 1000 only when num_gpu is 1 */
    char gpu_spec[SIM_SPEC_MAX];                 /* allowed models, '|'-separated; "" any */
    int64_t creation_s, deletion_s, scheduled_s; /* -1 when absent */
    /* Optional columns (events mode and gangs). */
    char qos[16];              /* the trace's QoS class: LS, BE, Guaranteed, Burstable */
    char queue[SIM_LABEL_MAX]; /* "" : the QoS class is the queue */
    int32_t priority;          /* SIM_PRIO_UNSET: from the QoS class */
    int replicas;              /* tasks of one gang job; 1 */
    int8_t topo_level;         /* arb_topo_level_t the gang's tasks share; 0 none */
    bool topo_required;        /* false: only preferred */
    int line;
} sim_task_t;

typedef struct sim_nodes {
    sim_node_t *v;
    int n;
} sim_nodes_t;

typedef struct sim_tasks {
    char workload[SIM_NAME_MAX * 2]; /* file name without directory and .csv */
    sim_task_t *v;
    int n;
} sim_tasks_t;

/* One row of a published *_discrete.csv: a value per arrived percent
 * (NaN where the artifact wrote none). */
typedef struct sim_expect_row {
    char workload[SIM_NAME_MAX * 2];
    char policy[32]; /* as published: "06-FGD" */
    double tune;
    int seed;
    int total_gpus;
    double v[SIM_NPCT];
} sim_expect_row_t;

typedef struct sim_expect {
    sim_expect_row_t *v;
    int n;
} sim_expect_t;

/* Parse a node list (columns sn, cpu_milli, memory_mib, gpu, model) from
 * buf[0..len); fname names it in messages. 0 or -EINVAL/-ENOMEM with text. */
int sim_nodes_parse(const char *buf, size_t len, const char *fname, sim_nodes_t *out,
                    arb_err_t *err);
int sim_nodes_load(const char *path, sim_nodes_t *out, arb_err_t *err);
void sim_nodes_free(sim_nodes_t *n);

/* Parse a task list (columns name, cpu_milli, memory_mib, num_gpu,
 * gpu_milli; optional gpu_spec, creation_time, deletion_time,
 * scheduled_time; others ignored). */
int sim_tasks_parse(const char *buf, size_t len, const char *fname, sim_tasks_t *out,
                    arb_err_t *err);
int sim_tasks_load(const char *path, sim_tasks_t *out, arb_err_t *err);
void sim_tasks_free(sim_tasks_t *t);

/* Durations for synthetic arrivals, in seconds: a CSV with a `duration`
 * column, or a task list (deletion_time - scheduled_time of every task that
 * has both). 0 or -EINVAL/-ENOMEM with text naming file:line:column. */
typedef struct sim_durations {
    int64_t *v;
    int n;
} sim_durations_t;

int sim_durations_parse(const char *buf, size_t len, const char *fname, sim_durations_t *out,
                        arb_err_t *err);
int sim_durations_load(const char *path, sim_durations_t *out, arb_err_t *err);
void sim_durations_free(sim_durations_t *d);

/* Apply a topology file (columns node, and any of rack, block, nvlink) to
 * nodes: each row sets the fields it gives on every node whose name
 * matches its `node` glob; later rows override earlier ones. Checks that a
 * row matches some node and that an NVLink list has one entry per GPU.
 * 0 or -EINVAL with text naming file:line:column. */
int sim_topo_parse(const char *buf, size_t len, const char *fname, sim_nodes_t *nodes,
                   arb_err_t *err);
int sim_topo_load(const char *path, sim_nodes_t *nodes, arb_err_t *err);

/* Parse a published result table (workload, sc_policy, tune, seed,
 * total_gpus, 0..130). */
int sim_expect_parse(const char *buf, size_t len, const char *fname, sim_expect_t *out,
                     arb_err_t *err);
int sim_expect_load(const char *path, sim_expect_t *out, arb_err_t *err);
void sim_expect_free(sim_expect_t *e);

/* Read a whole file into a NUL-terminated buffer (free() it). */
int sim_read_file(const char *path, char **buf, size_t *len, arb_err_t *err);

#endif
