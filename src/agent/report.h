/*
 * report.h: the agent's side of the wire format of docs/api.md (jansson):
 * the node report body (POST /v1/nodes/NAME/report) built from the
 * inventory, a telemetry sample, the executor's tasks and the Lamport time;
 * and the controller's reply ({"node", "lamport", "epoch", "assignments"})
 * parsed into assignments the executor can start.
 *
 * Units on the wire: cpu_util is a fraction 0..1; memory and GPU memory are
 * quantity strings ("16Gi", "81559Mi"); rates are bytes/s. A value the agent
 * does not know is left out rather than sent as a guess. A task killed by a
 * signal reports exit_code 128 + signal, as shells do.
 */
#ifndef ARB_AGENT_REPORT_H
#define ARB_AGENT_REPORT_H

#include <jansson.h>

#include "agent/exec.h"
#include "agent/lease.h"
#include "agent/telemetry.h"

typedef struct agent_report_in {
    uint64_t lamport;
    int64_t incarnation;           /* this life of the agent (> 0); 0: not sent */
    const agent_inv_t *inv;        /* NULL: no inventory (it did not change) */
    const agent_tel_sample_t *tel; /* NULL: no telemetry */
    const agent_exec_t *exec;      /* NULL: no tasks */
    /* With the inventory, when not NULL: where gang members reach this
     * node's tasks (MASTER_ADDR), its host name and its absolute log
     * directory (`arbiter logs` reads LOG_DIR/JOB.TASK.out there). */
    const char *address, *hostname, *log_dir;
    const char *logs_url; /* where the agent serves task logs (logserve.h); NULL none */
} agent_report_in_t;

/* The report body as a new JSON object (json_decref it), NULL on ENOMEM. */
json_t *agent_report_build(const agent_report_in_t *in);
/* The same as text (compact, one line), malloc'd: free() it. NULL on ENOMEM. */
char *agent_report_json(const agent_report_in_t *in);

/* How a task's state reads on the wire: running, succeeded, failed, lost. */
const char *agent_task_wire_state(const agent_task_t *t);

/* One assignment from the controller, ready for agent_exec_start. */
typedef struct agent_assignment {
    agent_task_ref_t ref; /* job (decimal id), task, attempt, epoch, stop */
    char name[128];       /* the job's name, for logs */
    int ntasks;
    int ngpus;
    int gpus[ARB_MAX_GPUS];
    int64_t cpu_milli, mem_bytes;
    int rank, world_size;  /* a gang member: world_size > 1; else 0 */
    char master_addr[256]; /* the gang's rendezvous (task 0's node) */
    int master_port;
    int64_t grace_ns;    /* the job's SIGTERM -> SIGKILL grace; -1: the agent's */
    int64_t limit_ns;    /* time left of its time limit when the reply was made; -1 none */
    bool elastic;        /* an elastic job: a resize notice on each new generation */
    uint32_t generation; /* elastic: bumped by the controller on every resize */
    char hosts[1024];    /* elastic: every rank's host, comma-separated; "" when they do
                            not fit (the controller sends them up to 64 ranks) */
    char **argv;         /* NULL-terminated; owned by the reply */
    char **env;          /* "KEY=VALUE", NULL-terminated; owned by the reply */
} agent_assignment_t;

typedef struct agent_reply {
    uint64_t lamport, epoch;
    int64_t lease_ns;      /* the controller's lease for this node; 0 not said */
    bool lost;             /* the controller does not know this node as live: fence */
    bool stale;            /* the controller took this report for a replay and ignored it */
    bool reregister;       /* with stale: from a life it does not know; register again */
    int64_t incarnation;   /* with reregister: the life it knows (0 none): take one above */
    bool have_assignments; /* the list below is authoritative for this node */
    uint64_t version;      /* the list's assignments_version (the long poll's); 0 not said */
    char message[256];     /* the controller's word with lost; "" none */
    int nassign;
    agent_assignment_t *assign;
} agent_reply_t;

/*
 * Parse the controller's reply (len bytes of JSON) into *out; free with
 * agent_reply_free. Every field is checked (types, ranges, job ids that can
 * name files); -EINVAL with the field path in err, nothing allocated.
 */
int agent_reply_parse(const char *json, size_t len, agent_reply_t *out, arb_err_t *err);
void agent_reply_free(agent_reply_t *r);

#endif
