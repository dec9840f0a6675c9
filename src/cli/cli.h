/*
 * cli.h: the command table of the `arbiter` binary. Each verb is one row:
 * name, one-line help, usage, and the function that runs it. `arbiter help`
 * and the README's command list are made from this table. A verb that parses
 * with a flag table (cli/flags.h) prints its usage from that table on --help
 * (own_help) and leaves usage NULL here.
 */
#ifndef ARB_CLI_H
#define ARB_CLI_H

#include <stdbool.h>

typedef struct cli_cmd {
    const char *name;
    const char *summary;
    const char *usage; /* NULL where run makes it from its flag table (cli/flags.h; own_help) */
    int (*run)(int argc, char **argv); /* argv[0] is the verb; returns exit code */
    bool own_help;                     /* run prints its full usage on --help and exits 0; else the
                                          dispatcher prints usage for `VERB --help` (cli_verb_help) */
} cli_cmd_t;

/* `arbiter VERB --help` and `arbiter help VERB`: the verb's usage on stdout,
 * exit 0 (the verb's own, fuller text where it has one). */
int cli_verb_help(const cli_cmd_t *c);
/* The row of verb name; NULL when there is none. */
const cli_cmd_t *cli_find(const char *name);

/* The table, terminated by a row with name == NULL. */
extern const cli_cmd_t cli_cmds[];

int cli_help(int argc, char **argv);
int cli_version(int argc, char **argv);
int cli_bench(int argc, char **argv);
/* the controller daemon and its client verbs (controller.c, client.c) */
int cli_controller(int argc, char **argv);
int cli_init(int argc, char **argv); /* the cluster CA, certificates, tokens (init.c) */
int cli_submit(int argc, char **argv);
int cli_queue(int argc, char **argv);
int cli_job(int argc, char **argv);
int cli_explain(int argc, char **argv);
int cli_cancel(int argc, char **argv);
int cli_nodes(int argc, char **argv);
/* node operations, as kubectl and scontrol (node.c) */
int cli_node(int argc, char **argv);
int cli_cordon(int argc, char **argv);
int cli_uncordon(int argc, char **argv);
int cli_drain(int argc, char **argv);
int cli_taint(int argc, char **argv);
int cli_label(int argc, char **argv);
int cli_events(int argc, char **argv);
int cli_bench_api(int argc, char **argv);     /* `arbiter bench api` (bench_api.c) */
int cli_bench_sim(int argc, char **argv);     /* `arbiter bench sim` (bench_sim.c) */
int cli_bench_elastic(int argc, char **argv); /* `arbiter bench elastic` (bench_elastic.c) */
int cli_bench_agents(int argc, char **argv);  /* `arbiter bench agents` (bench_agents.c) */
int cli_bench_e2e(int argc, char **argv);     /* `arbiter bench e2e` (bench_e2e.c) */
int cli_bench_infer(int argc, char **argv);   /* `arbiter bench infer` (bench_infer.c) */
int cli_bench_recover(int argc, char **argv); /* `arbiter bench recover` (bench_recover.c) */
int cli_bench_spec(int argc, char **argv);    /* `arbiter bench spec` (bench_spec.c) */
int cli_bench_backlog(int argc, char **argv); /* `arbiter bench backlog` (bench_backlog.c) */
int cli_place(int argc, char **argv);
int cli_sim(int argc, char **argv);
/* the load balancer and shard maps (lb.c, shard.c) */
int cli_lb(int argc, char **argv);
int cli_shard(int argc, char **argv);
/* the node agent (agent.c) */
int cli_agent(int argc, char **argv);
int cli_supervise(int argc, char **argv); /* the per-task supervisor the agent starts */
int cli_logs(int argc, char **argv);      /* a job's task output (logs.c) */
int cli_top(int argc, char **argv);       /* the live view (top.c) */
int cli_service(int argc, char **argv);   /* a service's replicas (service.c) */
/* the Slurm commands (slurm.c): also the binary's names sbatch, squeue, scancel, sinfo */
int cli_sbatch(int argc, char **argv);
int cli_squeue(int argc, char **argv);
int cli_scancel(int argc, char **argv);
int cli_sinfo(int argc, char **argv);
/* the verb a binary named name stands for (argv[0] personalities), or NULL */
const cli_cmd_t *cli_personality(const char *name);

#endif
