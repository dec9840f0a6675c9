/*
 * wlsubmit.h: submitting Kubernetes manifests and Slurm scripts from the
 * CLI (wlsubmit.c): translated here, posted as Arbiter's own specs.
 */
#ifndef ARB_CLI_WLSUBMIT_H
#define ARB_CLI_WLSUBMIT_H

#include <jansson.h>
#include <stdbool.h>

#include "spec/wl.h"

typedef struct cli_wl_opts {
    bool dry_run;                  /* print what the jobs would be; nothing is sent */
    bool want_json;                /* -o json */
    bool force_sbatch;             /* read it as a batch script whatever it looks like */
    const char *key;               /* Idempotency-Key stem */
    const wl_sbatch_cli_t *sbatch; /* sbatch's command line, or NULL */
    int sbatch_out;                /* 0 ids; 1 --parsable ids; 2 "Submitted batch job N" */
    json_t **ids;                  /* when not NULL: the ids created (new array) */
} cli_wl_opts_t;

/* Translate buf (file's contents) and submit, or dry-run, each job: the
 * exit code (0, EXIT_REFUSED, EXIT_UNREACHABLE). */
int cli_wl_submit(const char *file, const char *buf, size_t n, const cli_wl_opts_t *o);

#endif
