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
int cli_place(int argc, char **argv);
int cli_sim(int argc, char **argv);

#endif
