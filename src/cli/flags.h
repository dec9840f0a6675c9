/*
 * flags.h: one flag table per verb, from which both the verb's parsing and
 * its usage text are made, so a flag cannot be parsed without being shown
 * in `arbiter VERB --help` (tests/cli/help_flags.sh reads these tables).
 *
 * A verb keeps its options in a struct of its own; each row of its table
 * says where in that struct a flag's value goes (offsetof), what kind of
 * value it takes, its help line and its default. fl_parse() fills the
 * struct, applies the defaults first, and gathers the positional arguments
 * at the front of argv; a bad value is refused with a message that names
 * the flag and says what to write ("--since: 'x' is not a whole number,
 * 0..9223372036854775807 (e.g. --since 0)").
 *
 *   kind         C type at off        value
 *   FL_BOOL      bool                 none: the flag sets true
 *   FL_STR       const char *         any text
 *   FL_INT       long long            a whole number in [min, max]
 *   FL_I32       int                  the same into an int (or a uint32_t, min >= 0)
 *   FL_NUM       double               a number in [min, max] ("0.9", "1e6")
 *   FL_DURATION  int64_t (ns)         util/duration's grammar: 500ms, 90s, 1h30m
 *   FL_QTY       int64_t              a Kubernetes quantity (qty: its kind)
 *   FL_CHOICE    int (index)          one of choices ("text|json")
 *   FL_LIST      fl_list_t            repeated: each use adds one value
 *
 * Parsing stops at "--" (what follows is the caller's, e.g. a job's
 * command) and, where the verb says so (stop_at_pos), at its first
 * positional argument.
 */
#ifndef ARB_CLI_FLAGS_H
#define ARB_CLI_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arbiter/arbiter.h"

typedef enum fl_kind {
    FL_BOOL,
    FL_STR,
    FL_INT,
    FL_I32,
    FL_NUM,
    FL_DURATION,
    FL_QTY,
    FL_CHOICE,
    FL_LIST,
} fl_kind_t;

#define FL_LIST_MAX 256

typedef struct fl_list {
    const char *v[FL_LIST_MAX];
    int n;
} fl_list_t;

typedef struct fl_flag {
    const char *name;   /* "--queue", or NULL for a short-only flag */
    const char *shortn; /* "-o", or NULL */
    fl_kind_t kind;
    size_t off;          /* offsetof(the verb's options struct, its field) */
    const char *metavar; /* the value's name in usage ("Q", "N", "2s"); NULL for FL_BOOL */
    const char *help;    /* one line */
    const char *def;     /* the default, as a user would write it; NULL: none (0, NULL, false) */
    long long min, max;  /* FL_INT's, FL_I32's, FL_NUM's range (both 0: any non-negative);
                            FL_DURATION's in ns
                            (max 0: any; the help says the range) */
    int qty;             /* FL_QTY's arb_qty_kind_t */
    const char *choices; /* FL_CHOICE: "text|json" (index 0 is the first) */
} fl_flag_t;

/* One row: FL_OPT(opts_t, field, "--long", "-s" or NULL, KIND, "METAVAR" or NULL, "help",
 * then any of .def = "...", .min = / .max = (FL_INT), .qty = (FL_QTY), .choices = (FL_CHOICE). */
#define FL_OPT(TYPE, FIELD, LONG, SHORT, KIND, META, HELP, ...)                                    \
    {                                                                                              \
        .name = LONG, .shortn = SHORT, .kind = KIND, .off = offsetof(TYPE, FIELD),                 \
        .metavar = META, .help = HELP, __VA_ARGS__                                                 \
    }
#define FL_END                                                                                     \
    {                                                                                              \
        .name = NULL                                                                               \
    }

typedef struct fl_verb {
    const char *name; /* "queue" */
    const char *args; /* the positionals in usage ("ID", "[NAME]", "[-- COMMAND ARGS]"), or NULL */
    const char *summary;      /* one line under the usage, or NULL */
    const fl_flag_t *flags;   /* terminated by a row with name and shortn both NULL */
    int min_pos, max_pos;     /* how many positionals (max -1: any) */
    bool stop_at_pos;         /* the first positional ends the flags (a command follows) */
    const char *more;         /* text after the flag list (examples, notes), or NULL */
    void (*more_fn)(FILE *f); /* text made at run time (the policies there are), or NULL */
} fl_verb_t;

typedef struct fl_args {
    char **pos; /* the positionals, in order (argv's own strings) */
    int npos;
    char **rest; /* after "--" or from the first positional with stop_at_pos; NULL: none */
    int nrest;
} fl_args_t;

/* Parse argv[1..argc) (argv[0] is the verb) into opts by v's table. Returns
 * 0; 1 when --help or -h was asked (print fl_usage, exit 0); -EINVAL with
 * err naming the flag and the fix. argv's array is reordered (the
 * positionals move to the front); its strings are not touched. */
int fl_parse(const fl_verb_t *v, int argc, char **argv, void *opts, fl_args_t *a, arb_err_t *err);

/* The usage made from the table: "usage: arbiter NAME [FLAGS] ARGS", one
 * line per flag with its help and default, then v->more. */
void fl_usage(const fl_verb_t *v, FILE *f);

/* The common verb prologue: parse; on --help print the usage to stdout
 * and return 0 through *rc; on an error print "arbiter NAME: MESSAGE" and
 * a pointer to --help to stderr, *rc = 2. Returns true when the verb
 * should go on. */
bool fl_run(const fl_verb_t *v, int argc, char **argv, void *opts, fl_args_t *a, int *rc);

#endif
