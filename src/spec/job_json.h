/*
 * job_json.h: a job's request and constraints as JSON (job_json.c), the
 * same for the controller's read-back and `arbiter submit --dry-run`.
 */
#ifndef ARB_SPEC_JOB_JSON_H
#define ARB_SPEC_JOB_JSON_H

#include <jansson.h>

#include "arbiter/sched.h"

/*
 * A new object with what j asks for: "gpus" (whole GPUs in all), "ntasks",
 * "groups" (each: name, replicas, gpus, gpu_share (thousandths of one GPU)
 * when a share, cpu, memory, gpu_memory, cpu_limit, memory_limit,
 * ephemeral_storage, extended {name: count}, topology {level, mode}),
 * "gang_min", "elastic" {min, max}, "termination_grace_s", "gpu_sharing",
 * "preemptible", "time_limit_s", "node_selector", "affinity" {required:
 * [[expr]], preferred: [{weight, match}]}, "tolerations", "gpu_models",
 * "dataset". Strings are looked up in c's table. NULL when out of memory.
 */
json_t *spec_job_json(const arb_cluster_t *c, const arb_job_t *j);

#endif
