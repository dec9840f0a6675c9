/*
 * sbatch_int.h: the Slurm batch script reader's parts (sbatch.c: the
 * script's directives and sbatch's option rules; sbatch_job.c: options as
 * an Arbiter job and the launcher that runs the script). Not a public API.
 */
#ifndef ARB_SPEC_SBATCH_INT_H
#define ARB_SPEC_SBATCH_INT_H

#include "spec/wl.h"

#define SB_MAX_HET 16 /* components of a heterogeneous job */
#define SB_MAX_HOSTS 4096
#define SB_STR 256

/* Where an option came from, for messages: "FILE:LINE" or "command line". */
typedef struct sb_where {
    char at[SB_STR];
} sb_where_t;

/* One component's options (a plain job has one). -1 / "" / 0: not given. */
typedef struct sb_opts {
    int nodes, nodes_max; /* -N min[-max] */
    int ntasks;           /* -n */
    int ntasks_per_node;  /* --ntasks-per-node */
    int cpus_per_task;    /* -c */
    int cpus_per_gpu;     /* --cpus-per-gpu */
    int64_t mem_mb;       /* --mem (per node, MiB); 0 with mem_all: --mem=0 */
    bool mem_all;
    int64_t mem_per_cpu_mb, mem_per_gpu_mb;
    int gpus;          /* -G total */
    int gpus_per_node; /* --gpus-per-node or --gres=gpu:N */
    int gpus_per_task;
    char gpu_type[64]; /* a typed GPU (gpu:a100:2), "" none */
    int ngres;         /* non-GPU GRES per node: gres/NAME counts */
    char gres_name[8][48];
    int64_t gres_count[8];
    int nhosts;        /* --nodelist, expanded */
    char (*hosts)[96]; /* owned */
    int nexclude;
    char (*exclude)[96];     /* owned */
    char constraint[SB_STR]; /* -C */
    bool exclusive;
    char exclusive_how[16]; /* --exclusive=user|mcs|topo; "" plain */
    int switches;           /* --switches count, 0 none */
    sb_where_t at_nodes, at_constraint, at_gres;
} sb_opts_t;

/* The job's options (component 0 carries what is job-wide). */
typedef struct sb_job {
    int ncomp;
    sb_opts_t comp[SB_MAX_HET];
    char name[SB_STR];                                 /* -J */
    char partition[SB_STR];                            /* -p */
    char account[SB_STR];                              /* -A */
    char qos[SB_STR];                                  /* -q */
    int64_t time_s;                                    /* -t; 0 unlimited, -1 not given */
    char array[SB_STR];                                /* -a */
    char dependency[SB_STR];                           /* -d */
    char output[SB_STR], error[SB_STR], input[SB_STR]; /* -o -e -i */
    char chdir[1024];                                  /* -D */
    char export_[1024];                                /* --export */
    bool no_requeue;                                   /* --no-requeue */
    bool requeue;
    int priority;                   /* --priority, INT32_MIN not given */
    bool parsable, test_only, wait; /* sbatch verb's own: --parsable, --test-only, -W */
    char wrap[4096];                /* --wrap */
    sb_where_t at_array, at_dep, at_time;
} sb_job_t;

typedef struct sbx {
    wl_t *w;
    sb_job_t *job;
    int comp; /* the component options go to */
} sbx_t;

/* Apply one option (name as written: "--nodes", "-N"; val may be NULL
 * when none was given) at where; 0 or -EINVAL with w->err set. */
int sb_option(sbx_t *s, const char *opt, const char *val, const sb_where_t *where);
/* Parse an argument vector (a directive's words, or sbatch's command line)
 * into options: 0, or -EINVAL. *consumed counts the words used (the
 * command line stops at the first word that is not an option). */
int sb_argv(sbx_t *s, int argc, char **argv, const sb_where_t *where, int *consumed);
void sb_job_init(sb_job_t *j);
void sb_job_free(sb_job_t *j);

/* Slurm time (minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED): 0 ok. */
int sb_time(const char *s, int64_t *secs);
/* Slurm memory (a number of MiB, or with K, M, G, T): 0 ok. */
int sb_mem_mb(const char *s, int64_t *mb);
/* Expand a host list ("node[01-04,07],gpu5") into out (at most max): the
 * count, or -EINVAL / -ENOSPC. */
int sb_hostlist(const char *s, char (*out)[96], int max);
/* An array spec ("0-15%4", "1,3,5", "0-20:2") into ids (at most max):
 * the count, *throttle (0 none); -EINVAL / -ENOSPC. */
int sb_array(const char *s, int *ids, int max, int *throttle);

/* The job (options read) as native specs into s->w (sbatch_job.c). */
int sb_build(sbx_t *s, const char *file, const char *script, size_t len,
             const wl_sbatch_cli_t *cli);

#endif
