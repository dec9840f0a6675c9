/*
 * cli.h: the command table of the `arbiter` binary. Each verb is one row:
 * name, one-line help, usage, and the function that runs it. `arbiter help`
 * and the README's command list are made from this table.
 */
#ifndef ARB_CLI_H
#define ARB_CLI_H

typedef struct cli_cmd {
    const char *name;
    const char *summary;
    const char *usage;
    int (*run)(int argc, char **argv); /* argv[0] is the verb; returns exit code */
} cli_cmd_t;

/* The table, terminated by a row with name == NULL. */
extern const cli_cmd_t cli_cmds[];

int cli_help(int argc, char **argv);
int cli_version(int argc, char **argv);
int cli_bench(int argc, char **argv);
/* the controller daemon and its client verbs (controller.c, client.c) */
int cli_controller(int argc, char **argv);
int cli_submit(int argc, char **argv);
int cli_queue(int argc, char **argv);
int cli_job(int argc, char **argv);
int cli_explain(int argc, char **argv);
int cli_cancel(int argc, char **argv);
int cli_nodes(int argc, char **argv);
int cli_events(int argc, char **argv);
int cli_bench_api(int argc, char **argv);     /* `arbiter bench api` (bench_api.c) */
int cli_bench_sim(int argc, char **argv);     /* `arbiter bench sim` (bench_sim.c) */
int cli_bench_elastic(int argc, char **argv); /* `arbiter bench elastic` (bench_elastic.c) */
int cli_bench_agents(int argc, char **argv);  /* `arbiter bench agents` (bench_agents.c) */
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

#endif
