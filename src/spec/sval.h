/*
 * sval.h: the value layer of the YAML loaders (src/spec): a libfyaml node
 * together with the key it hangs from and its field path (sval_t), typed
 * reads of scalars, key checks, whole documents, and messages that say
 * "FILE:LINE:COLUMN: PATH: what; fix". scenario.c builds the scenario
 * format on top of it.
 *
 * Conventions: every sv_* function that can fail returns 0 or a negative
 * errno and writes the message into x->err (which may be NULL). An "empty"
 * value is a missing one, nothing after the colon, or a plain ~ or null.
 * Aliases are rejected wherever a value is read (sv_no_alias).
 *
 * libfyaml 0.7 has no public start mark for mappings and sequences, so a
 * collection's position is that of its first scalar (sv_node_mark), and a
 * value with none (an empty value, {}) is reported at its key (sval_t.hint).
 *
 * The layer knows the model (arbiter/cluster.h: quantities, the node types)
 * and no scheduler: the queues a scenario's jobs may name are held by
 * pointer only. With schema.c and schema_node.c it is a library of its own
 * (arbsval), which the agent links for its inventory file without core.
 */
#ifndef ARB_SPEC_SVAL_H
#define ARB_SPEC_SVAL_H

#include "arbiter/cluster.h"

struct arb_queue; /* arbiter/sched.h: a scenario's queues, held by pointer only */
struct fy_node;
struct fy_node_pair;
struct fy_diag;
struct fy_parser;
struct fy_document;
struct fy_mark;

#define SPEC_PATH 256 /* longest field path kept for messages */
#define SPEC_STR 256  /* longest name, label key or value, NUL included */

/* The loader's context: where messages go, and what scenario.c keeps while
 * it builds (the cluster, the queues jobs may name, the budgets). */
typedef struct sx {
    const char *file;
    arb_err_t *err;
    arb_cluster_t *c;
    bool lone_job;                  /* spec_job_*: count: is not allowed */
    const struct arb_queue *queues; /* when nqueues > 0, jobs must name one of them */
    int nqueues;
    int64_t values, tasks;                 /* spent of SPEC_MAX_VALUES, SPEC_MAX_TASKS */
    const struct spec_prio_table *classes; /* priorityClassName's table; NULL: built-ins */
} sx_t;

/* A value in the tree, the key it hangs from and its field path. */
typedef struct sval {
    struct fy_node *n;    /* may be NULL: an absent or empty value */
    struct fy_node *hint; /* where to point when n has no position */
    char path[SPEC_PATH];
} sval_t;

/* ---- positions and messages ---------------------------------------------- */

/* The position of n (its first scalar, at most depth 8 down), or NULL. */
const struct fy_mark *sv_node_mark(struct fy_node *n, int depth);
/* Put "FILE:LINE:COL: " (and "PATH: " when with_path) before x->err's text;
 * returns code. */
int sv_prefix(sx_t *x, const sval_t *v, int code, bool with_path);
/* Write "FILE:LINE:COL: PATH: " and the message; returns code. */
int sv_fail(sx_t *x, const sval_t *v, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int sv_oom(sx_t *x, const sval_t *v);
/* snprintf for paths and names: cut short, never overflowed. */
void sv_strf(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* At most 48 bytes of s for a message, control characters as '?'. */
void sv_show(char *out, size_t outn, const char *s, size_t len);
/* The name of valid (NULL-terminated) within 2 edits of s, or NULL. */
const char *sv_suggest(const char *s, size_t len, const char *const *valid);

/* ---- walking the tree ------------------------------------------------------ */

void sv_root(sval_t *v, struct fy_node *n, const char *path);
/* Item i of the list in seq: path "seq[i]". */
void sv_item(sval_t *out, const sval_t *seq, struct fy_node *item, int i);
/* The value of a pair of the mapping in map: path "map.key". */
void sv_pair(sval_t *out, const sval_t *map, struct fy_node_pair *p);
/* The text of a key that is a plain string, or NULL (empty, a collection,
 * an alias, a NUL inside). Not NUL-terminated: *len bytes. */
const char *sv_key_text(struct fy_node *k, size_t *len);
/* Find key in the mapping in map; false when absent. */
bool sv_get(const sval_t *map, const char *key, sval_t *out);
bool sv_null(const sval_t *v);
/* "a mapping", "a list", "a single value", ... for messages. */
const char *sv_kind(struct fy_node *n);
int sv_no_alias(sx_t *x, const sval_t *v);
/* The mapping in v; *is is false for an empty value (no error). */
int sv_map(sx_t *x, const sval_t *v, bool *is);
/* The item count of the list in v (0 for an empty value), at most max. */
int sv_seq(sx_t *x, const sval_t *v, int max, int *count);
/* Every key of the mapping in map is one of valid (NULL-terminated);
 * else "unknown field 'x'; did you mean 'y'? (valid: ...)". */
int sv_check_keys(sx_t *x, const sval_t *map, const char *const *valid);
/* Values in the tree under n; counting stops past cap. Aliases are not
 * followed, so this is linear in the text. */
int64_t sv_tree_size(struct fy_node *n, int depth, int64_t cap);

/* ---- typed scalars ---------------------------------------------------------- */

/* The text into buf (n bytes with the NUL). An empty value is an error
 * unless allow_empty (then ""). Control characters are rejected. */
int sv_text(sx_t *x, const sval_t *v, char *buf, size_t n, bool allow_empty);
/* The same, and unquoted; what ("an integer") is for the message. */
int sv_plain(sx_t *x, const sval_t *v, char *buf, size_t n, const char *what);
int sv_int(sx_t *x, const sval_t *v, int64_t lo, int64_t hi, int64_t *out);
int sv_int32(sx_t *x, const sval_t *v, int lo, int hi, int *out);
/* true/True/TRUE or false/False/FALSE (YAML 1.2: "yes" is a string). */
int sv_bool(sx_t *x, const sval_t *v, bool *out);
int sv_double(sx_t *x, const sval_t *v, double lo, double hi, double *out);
/* A Kubernetes quantity, quoted or not; the message names v's path. */
int sv_qty(sx_t *x, const sval_t *v, arb_qty_kind_t kind, int64_t *out);
/* A duration in the one grammar (src/util/duration.h: "500ms", "90s",
 * "1h30m", "1d", whole seconds "3600"): into ns, or whole seconds (a value
 * with a fraction of a second is refused there). */
int sv_duration_ns(sx_t *x, const sval_t *v, int64_t *ns);
int sv_duration(sx_t *x, const sval_t *v, int64_t *secs);
/* One of names[0..n) (NULL entries skipped); *out is its index. */
int sv_enum(sx_t *x, const sval_t *v, const char *const *names, int n, int *out);

/* The text of scalar node n and its length (*len), valid while its
 * document is open: what fy_node_get_scalar gives, without libfyaml
 * 0.7.12's leak on single-quoted scalars with '' (see sval.c). Every read
 * of a scalar's text from a document sv_doc_open made goes through here. */
const char *sv_scalar(struct fy_node *n, size_t *len);

/* ---- documents --------------------------------------------------------------- */

typedef struct sv_doc {
    struct fy_diag *diag;
    struct fy_parser *fyp;
    struct fy_document *doc;
    const char *buf; /* several documents: the text (the caller's) */
    size_t len;
    bool reuse; /* diag and fyp go back to this thread's spare (sval.c) on close */
} sv_doc_t;

/*
 * Parse buf[0..len) as exactly one YAML document whose root is a mapping.
 * The text must be UTF-8 without NUL bytes (checked first: libfyaml 0.7.12
 * loops forever on some invalid bytes). Syntax errors come back as
 * "NAME:LINE:COL: YAML syntax: ...", a duplicate key among them (checked
 * in n log n: libfyaml's own check is quadratic, see sval.c). On success close d with sv_doc_close;
 * on failure d holds nothing. buf must outlive d.
 */
int sv_doc_open(const char *name, const char *buf, size_t len, sv_doc_t *d, arb_err_t *err);
void sv_doc_close(sv_doc_t *d);

/* Several documents ('---'): open checks the text as sv_doc_open does and
 * sets up the parser; next loads the following document into d->doc
 * (freeing the previous one): 1, 0 at the end, or -EINVAL with the syntax
 * error. Close with sv_doc_close. A document's root may be anything. */
int sv_docs_open(const char *name, const char *buf, size_t len, sv_doc_t *d, arb_err_t *err);
int sv_docs_next(sv_doc_t *d, const char *name, arb_err_t *err);

#endif
