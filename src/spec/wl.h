/*
 * wl.h: workloads users already have, read as-is: Kubernetes manifests
 * (k8s.c, k8s_pod.c) and Slurm batch scripts (sbatch.c, sbatch_job.c),
 * each turned into Arbiter's own job specs (docs/scenario.md) plus
 * warnings naming every field that is not honoured. docs/compat.md has the
 * table per kind.
 *
 * The output is native specs as JSON objects, the body `POST /v1/jobs`
 * takes: the controller stores and re-reads them like any other spec, so a
 * translated job recovers, restarts and explains like one written by hand.
 * What differs between a job's task groups at run time (a PyTorchJob's
 * master and workers run different commands; an Indexed Job's pods each
 * see their index) is carried by one launcher command: `/bin/sh -c` with a
 * small script that picks the group from ARBITER_TASK_INDEX, sets the
 * environment the original system would have set (JOB_COMPLETION_INDEX,
 * SLURM_PROCID, PET_NODE_RANK, ...) and execs the group's command
 * (wl_command).
 *
 * Errors and warnings read "FILE:LINE[:COL]: PATH: what; fix". A field that
 * would change where the job may run and cannot be honoured is an error
 * (the file is refused, nothing is submitted); anything else that is not
 * honoured is a warning.
 */
#ifndef ARB_SPEC_WL_H
#define ARB_SPEC_WL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "arbiter/arbiter.h"
#include "util/buf.h"

#define WL_MAX_JOBS 10000    /* jobs out of one file (array elements included) */
#define WL_MAX_WARNINGS 200  /* warnings kept per file; a last one says how many more */
#define WL_MAX_SCRIPT 131072 /* a batch script, the most one exec argument may carry */

typedef enum wl_kind {
    WL_NATIVE,  /* Arbiter's own job spec (docs/scenario.md) */
    WL_K8S,     /* Kubernetes manifest: YAML documents with apiVersion and kind */
    WL_SBATCH,  /* a Slurm batch script (#SBATCH directives, or a #! line) */
    WL_UNKNOWN, /* none of these */
} wl_kind_t;

/* What buf looks like (cheap: a look at its first lines and keys). */
wl_kind_t wl_detect(const char *buf, size_t len);
const char *wl_kind_name(wl_kind_t k);

/* A translation in progress. */
typedef struct wl {
    const char *file; /* for messages */
    arb_err_t *err;
    json_t *jobs;     /* native specs, in submission order */
    json_t *warnings; /* strings */
    json_t *sources;  /* parallel to jobs: what each came from ({kind, name, ...}), for
                         --dry-run; never sent */
    int nwarn_lost;   /* warnings past WL_MAX_WARNINGS */
} wl_t;

int wl_init(wl_t *w, const char *file, arb_err_t *err);
void wl_free(wl_t *w);
/* A warning (printf format); duplicates are kept once. */
void wl_warn(wl_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append a spec and what it came from (both stolen; src may be NULL);
 * -ENOSPC past WL_MAX_JOBS with w->err set. */
int wl_add_job(wl_t *w, json_t *spec, json_t *src);

/*
 * sbatch's command line (sbatch.c): the options before the script, the
 * arguments after it. argv may be NULL.
 */
typedef struct wl_sbatch_cli {
    int argc;
    char **argv; /* options, as typed (before the script name) */
    int nargs;
    char **args; /* the script's arguments */
} wl_sbatch_cli_t;

/* How many of argv's words are sbatch options (and their values), by
 * sbatch's table: the script name follows them (sbatch.c). */
int wl_sbatch_nopts(int argc, char **argv);

/* Kubernetes manifest -> w->jobs (k8s.c). 0, or -EINVAL with w->err. */
int wl_k8s(wl_t *w, const char *buf, size_t len);
/* Slurm batch script (with sbatch's command line, or NULL) -> w->jobs. */
int wl_sbatch(wl_t *w, const char *buf, size_t len, const wl_sbatch_cli_t *cli);

/* Whatever buf is (wl_detect): native specs are passed through as one
 * (YAML read into JSON by the caller's rules: not here, -ENOTSUP). */
int wl_translate(wl_t *w, const char *buf, size_t len, const wl_sbatch_cli_t *cli);

/*
 * --dry-run (wl_dry.c): each job of w read by the controller's own spec
 * reader and printed as GET /v1/jobs/{id} would print what it asks for;
 * *out = {"jobs": [...], "warnings": [...]} (new). 0, or -EINVAL with
 * w->err naming the job and the field.
 */
int wl_dry(wl_t *w, json_t **out);
/* One native spec (YAML or JSON text) the same way; warnings may grow. */
int wl_dry_one(const char *name, const char *text, size_t n, json_t *warnings, json_t **out,
               arb_err_t *err);

/* ---- helpers the translators share (wl.c) ----------------------------------- */

/* What one task group runs. */
typedef struct wl_run {
    const char *group; /* group name */
    int replicas;
    json_t *argv;     /* array of strings (borrowed); empty: nothing to run */
    json_t *env;      /* object name -> string, set as given (borrowed, may be NULL) */
    json_t *dyn;      /* object name -> marked text (wl_buf_dq) set at start (borrowed, NULL) */
    const char *dir;  /* working directory, or NULL */
    bool argv_expand; /* argv holds marked references (WL_REF_OPEN) expanded at start */
} wl_run_t;

/*
 * Set spec's "command" and "env" for groups runs[0..n) (in task order).
 * One group with nothing computed at start: its argv and env as they are.
 * Otherwise the launcher script (see the file comment). prelude (may be
 * NULL) is shell text run first by every task (Slurm's shim). 0 or -ENOMEM.
 */
int wl_command(json_t *spec, const wl_run_t *runs, int n, const char *prelude);

/* s in single quotes for sh ('it'\''s'), appended to a buffer (util/buf.h). */
void wl_buf_shq(arb_buf_t *b, const char *s);
/* s in double quotes, every character literal except references the
 * translator marked as WL_REF_OPEN NAME WL_REF_CLOSE, which become ${NAME}
 * ($(...) when NAME starts with '('). */
#define WL_REF_OPEN '\x01'
#define WL_REF_CLOSE '\x02'
void wl_buf_dq(arb_buf_t *b, const char *s);

/* A string that is a valid job name (letters, digits, -_.), at most 80. */
void wl_job_name(char *out, size_t n, const char *s);

#endif
