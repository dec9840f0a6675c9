/*
 * depend.h: Slurm's job dependencies (sbatch --dependency; a job spec's
 * "dependency", kept by the controller): the text read into terms. Whether
 * they are met is the controller's (src/state/depend.c).
 */
#ifndef ARB_SPEC_DEPEND_H
#define ARB_SPEC_DEPEND_H

#include <stdbool.h>
#include <stdint.h>

#include "arbiter/arbiter.h"

typedef enum spec_dep_type {
    SPEC_DEP_AFTER,     /* the job started (or ended without starting) [+minutes] */
    SPEC_DEP_ANY,       /* afterany: it ended, however */
    SPEC_DEP_OK,        /* afterok: it succeeded */
    SPEC_DEP_NOTOK,     /* afternotok: it failed, timed out or was cancelled */
    SPEC_DEP_CORR,      /* aftercorr: read as afterok (every element of the array) */
    SPEC_DEP_BURST,     /* afterburstbuffer: read as afterany (no burst buffers) */
    SPEC_DEP_SINGLETON, /* no earlier job of its name and owner is still there */
} spec_dep_type_t;

#define SPEC_DEP_MAX 64 /* job ids in one dependency */

typedef struct spec_dep_term {
    uint8_t type;      /* spec_dep_type_t */
    uint64_t job;      /* the job it names; 0 for singleton */
    int32_t task;      /* ID_TASK: that array element; -1: the job (every element of an array) */
    int32_t delay_min; /* after:ID+MIN: that many minutes after it started */
} spec_dep_term_t;

typedef struct spec_dep {
    bool any; /* '?': one term met is enough; ',' (or one term): all */
    int n;
    spec_dep_term_t t[SPEC_DEP_MAX];
} spec_dep_t;

/* Read "afterok:12:13,singleton", "afterany:7?afternotok:8", "after:5+10",
 * "afterok:12_3". -EINVAL with text naming the part and the forms. */
int spec_dep_parse(const char *text, spec_dep_t *d, arb_err_t *err);

const char *spec_dep_type_name(spec_dep_type_t t);

#endif
