/*
 * commands.c: the one table of `arbiter` verbs. Adding a verb is adding a
 * row here and a cli_<verb>() function in its own file.
 */
#include <stdio.h>
#include <string.h>

#include "agent/discovery.h"
#include "arbiter/arbiter.h"
#include "cli/cli.h"
#include "spec/scenario.h"
#include "state/state.h"

const cli_cmd_t cli_cmds[] = {
    {"help", "show the verbs, or one verb's usage", "arbiter help [VERB]", cli_help, false},
    {"place", "place a scenario's jobs one at a time and explain the pending ones", NULL, cli_place,
     true},
    {"sim", "replay a GPU trace through the scheduler (the FGD paper's experiment, or events)",
     NULL, cli_sim, true},
    {"bench", "benchmark the scheduler, the controller, agents, the balancer (JSON with -o json)",
     NULL, cli_bench, true},
    {"lb", "HTTP load balancer for inference replicas (round-robin ... feedback)", NULL, cli_lb,
     true},
    {"shard", "assign data shards to nodes by consistent hashing with bounded loads", NULL,
     cli_shard, true},
    {"agent", "the node agent: discovery, telemetry, task execution, self-fencing", NULL, cli_agent,
     true},
    {"supervise", "internal: the per-task supervisor the agent starts (it holds the lease)",
     "arbiter supervise --task-pid PID --exit FILE [--lease FILE] [--cgroup-v2 DIR | "
     "--cgroup-v1 DIR ...] [--time-limit-at NS --grace NS] | --zygote FD",
     cli_supervise, true},
    {"version", "print the version", "arbiter version", cli_version, false},
    {"controller", "run the controller daemon: durable state, scheduler, HTTP/JSON API", NULL,
     cli_controller, true},
    {"init", "make a cluster's CA, certificates and admin token (TLS across machines)", NULL,
     cli_init, true},
    {"submit", "submit a job (an Arbiter spec, a Kubernetes manifest, a Slurm script); prints ids",
     NULL, cli_submit, true},
    {"queue", "list pending and running jobs", NULL, cli_queue, true},
    {"job", "show one job: state, tasks, GPUs, events", NULL, cli_job, true},
    {"explain", "say why a job is pending", NULL, cli_explain, true},
    {"cancel", "cancel jobs", NULL, cli_cancel, true},
    {"nodes", "the GPU map: each node's GPUs and the job on each", NULL, cli_nodes, true},
    {"node", "one node in detail (labels, taints, telemetry, what runs); or delete it", NULL,
     cli_node, true},
    {"cordon", "stop placing tasks on a node", NULL, cli_cordon, true},
    {"uncordon", "put a cordoned or drained node back in service", NULL, cli_uncordon, true},
    {"drain", "cordon a node and evict its jobs (stopped with their grace, requeued elsewhere)",
     NULL, cli_drain, true},
    {"taint", "add or remove node taints (NoExecute evicts what does not tolerate it)", NULL,
     cli_taint, true},
    {"label", "set or remove node labels", NULL, cli_label, true},
    {"events", "the event log in Lamport order", NULL, cli_events, true},
    {"top", "a live view of the cluster, its queues, jobs and nodes (q quits)", NULL, cli_top,
     true},
    {"service", "a service job's replicas: address, ready, draining, in-flight load", NULL,
     cli_service, true},
    {"logs", "a job's task output, from the file or over HTTP from its agent", NULL, cli_logs,
     true},
    {"sbatch", "submit a Slurm batch script as sbatch reads it (also installed as `sbatch`)",
     "arbiter sbatch [SBATCH OPTIONS] [script [ARGS]] [--parsable] [--test-only] [--wrap CMD]\n"
     "       the binary named squeue, scancel, sinfo or sbatch acts as that command:\n"
     "       squeue [-u USER] [-j IDS] [-p PART] [-t STATES] [-o FORMAT] [--start] [-h];\n"
     "       scancel [ID...] [-u USER] [--state S] [-n NAME]; sinfo [-N] [-p PART] "
     "(docs/compat.md)",
     cli_sbatch, true},
    {"squeue", "Slurm's squeue over Arbiter's jobs", "arbiter squeue [squeue options]", cli_squeue,
     true},
    {"scancel", "Slurm's scancel over Arbiter's jobs", "arbiter scancel [scancel options] [ID...]",
     cli_scancel, true},
    {"sinfo", "Slurm's sinfo over Arbiter's nodes", "arbiter sinfo [-N] [-p PART]", cli_sinfo,
     true},
    {NULL, NULL, NULL, NULL, false},
};

const cli_cmd_t *cli_personality(const char *name)
{
    static const char *const names[] = {"sbatch", "squeue", "scancel", "sinfo", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(name, names[i]))
            for (const cli_cmd_t *c = cli_cmds; c->name; c++)
                if (!strcmp(c->name, name))
                    return c;
    return NULL;
}

const cli_cmd_t *cli_find(const char *name)
{
    for (const cli_cmd_t *c = cli_cmds; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

int cli_verb_help(const cli_cmd_t *c)
{
    if (c->own_help) {
        char *argv[] = {(char *)c->name, (char *)"--help", NULL};
        return c->run(2, argv);
    }
    printf("usage: %s\n\n  %s\n", c->usage, c->summary);
    return 0;
}

static void config_doc(FILE *f)
{
    st_conf_doc(f);
}

/* `arbiter help TOPIC`: the fields of a file format, printed from the
 * tables its parser reads (src/spec/schema.h), so they cannot drift. */
static const struct help_topic {
    const char *name, *summary;
    void (*print)(FILE *f);
} help_topics[] = {
    {"scenario", "the fields of a scenario (arbiter place)", spec_scenario_doc},
    {"spec", "the fields of a job spec (arbiter submit job.yaml)", spec_job_doc},
    {"config", "the keys of the controller's --config file", config_doc},
    {"inventory", "the fields of an agent's --inventory file", agent_inventory_doc},
    {NULL, NULL, NULL},
};

int cli_help(int argc, char **argv)
{
    const cli_cmd_t *c;

    if (argc > 1) {
        if ((c = cli_find(argv[1])))
            return cli_verb_help(c);
        for (const struct help_topic *t = help_topics; t->name; t++)
            if (strcmp(t->name, argv[1]) == 0) {
                printf("# %s: %s\n\n", t->name, t->summary);
                t->print(stdout);
                return 0;
            }
        fprintf(stderr, "arbiter: unknown verb or topic '%s'; run 'arbiter help' for the list\n",
                argv[1]);
        return 2;
    }
    printf("arbiter %s: resource scheduler and load balancer for AI GPU clusters\n\n"
           "usage: arbiter VERB [ARGS]\n\nverbs:\n",
           ARB_VERSION);
    for (c = cli_cmds; c->name; c++)
        printf("  %-10s %s\n", c->name, c->summary);
    printf("\nrun 'arbiter help VERB' for a verb's usage\n\ntopics (arbiter help TOPIC):\n");
    for (const struct help_topic *t = help_topics; t->name; t++)
        printf("  %-10s %s\n", t->name, t->summary);
    printf(
        "\nenvironment (client verbs: submit queue job explain cancel nodes node cordon uncordon "
        "drain\n"
        "  taint label events logs top service):\n"
        "  ARBITER_URL      the controller, or several comma-separated "
        "(http://a:7070,http://b:7070):\n"
        "                   the one that last answered first; the next after a connect error,\n"
        "                   timeout or 503; a follower's 307 followed to the leader\n"
        "  ARBITER_TOKEN    a bearer token\n"
        "  ARBITER_CACERT   the cluster CA an https:// controller (and agent) is checked with\n"
        "  ARBITER_CERT_FILE, ARBITER_KEY_FILE\n"
        "                   a client certificate to present (arbiter init user|node)\n"
        "  ARBITER_RETRY_S  how long to keep trying the controllers (default 15)\n"
        "  ARBITER_TRY_S    with several controllers, one try's limit (default 10)\n"
        "\nexit codes:\n"
        "  client verbs     0 done; 1 the controller refused (its message is printed);\n"
        "                   2 usage (a bad ARBITER_URL too); 3 no controller reached, or none\n"
        "                   leading, in ARBITER_RETRY_S\n"
        "  controller, agent, lb\n"
        "                   0 stopped by SIGTERM or SIGINT; 1 failed to start or run (message);\n"
        "                   2 usage or a bad configuration\n"
        "  other verbs      0 done; 1 failed (message); 2 usage\n");
    return 0;
}

int cli_version(int argc, char **argv)
{
    printf("arbiter %s\n", ARB_VERSION);
    return 0;
}
