/*
 * schema.h: one table per object of the YAML formats (a scenario's
 * scheduler settings and queues, the controller config's sections), each
 * field with its key, type, default, range, help and where its value goes.
 * From the one table come the parse (sc_walk: unknown keys with a "did you
 * mean", types, ranges, the value written through the table), the defaults
 * (sc_init) and the reference (sc_doc_markdown: `arbiter help scenario`,
 * `arbiter help config`, docs/api.md), so what the docs say and what the
 * parser takes cannot drift apart.
 *
 * One table may serve several formats: a field's ctx names the formats
 * (SC_CTX_*) it exists in (0: all), and a key may appear twice with
 * different contexts when, say, its default differs (a scenario's queue
 * order is fifo, the controller's priority). In a format a field does not
 * exist in, its key is an unknown field like any other.
 *
 * Rules between fields are rows of the table too (SC_RULE): a rule row's
 * check runs where it sits, after the fields above it are read and before
 * those below (table order is read order), with the object as read so far:
 * priority: or priorityClassName:, not both; gangMin within the job's
 * tasks; an NVLink topology needs whole GPUs (a rule may also complete
 * what it checks: a resource with only a limit requests its limit). A
 * field whose reader needs the fields above it, or writes more than one
 * member, is SC_WHOLE: its set() gets the whole object. So every field is
 * read by its row (its type or its setter), every rule is a row, and the
 * reference lists both (sc_doc_markdown: the fields, then "Rules between
 * fields").
 *
 * Values are read with the value layer (sval.h), so every message is
 * "FILE:LINE:COL: PATH: what; fix".
 */
#ifndef ARB_SPEC_SCHEMA_H
#define ARB_SPEC_SCHEMA_H

#include <stddef.h>
#include <stdio.h>

#include "spec/sval.h"

/* The formats a table serves. */
#define SC_CTX_SCENARIO 1u  /* a scenario file (spec/scenario.h) */
#define SC_CTX_CONFIG 2u    /* the controller's --config (state/config.c) */
#define SC_CTX_INVENTORY 4u /* an agent's --inventory (agent/gpu_inventory.c) */
#define SC_CTX_DOC 0x100u   /* with another: rows only the reference shows (a second form) */

typedef enum sc_type {
    SC_STR,      /* char[size] at off */
    SC_INT,      /* int64_t (size 8) or int (size 4) at off, lo..hi */
    SC_DOUBLE,   /* double at off, dlo..dhi */
    SC_BOOL,     /* bool at off */
    SC_DURATION, /* int64_t ns at off (seconds with SC_SECONDS), lo..hi in ns */
    SC_ENUM,     /* int-sized enum at off: the index of the name in names[] */
    SC_QTY,      /* int64_t at off, a Kubernetes quantity of kind qty */
    SC_OBJECT,   /* a mapping read with sub's table into the object at off; with set,
                    set() reads it (sub documents it and checks its keys) */
    SC_CUSTOM,   /* set() reads the value (lists, resource maps, names) */
    SC_RULE,     /* not a field: a rule between fields, check(x, map, obj) run here;
                    key names the fields it ties (for the docs), help says the rule */
} sc_type_t;

/* Field flags. */
#define SC_REQUIRED 1u /* absent: "missing KEY:" (with help) */
#define SC_EMPTY_OK 2u /* SC_STR: an empty value is ""; SC_ENUM: it leaves the default */
#define SC_SECONDS 4u  /* SC_DURATION: whole seconds into the int64_t */
#define SC_LIST 8u     /* SC_CUSTOM: a list (of sub's objects): "key[]" in the docs */
#define SC_HAND                                                                                    \
    16u /* read by the object that holds this one (a jobs[] item's count: repeats the              \
           item, so the list reads it): sc_walk and sc_init pass it by (its key is still           \
           checked, its row still documented) */
#define SC_WHOLE                                                                                   \
    32u /* set() gets the whole object, not obj + off: a field read into several members,          \
           or by the fields above it (a job's replicas, resources, topology: its one group) */

struct sc_table;

typedef struct sc_field {
    const char *key;
    sc_type_t type;
    size_t off;  /* where in the object (SC_OBJECT: the sub-object) */
    size_t size; /* SC_STR: the buffer; SC_INT: 4 or 8 */
    int64_t lo, hi;
    double dlo, dhi;
    const char *const *names; /* SC_ENUM, nnames of them (NULL entries skipped) */
    int nnames;
    arb_qty_kind_t qty;
    const struct sc_table *sub; /* SC_OBJECT; SC_CUSTOM lists of objects, for docs */
    /* SC_CUSTOM (and SC_OBJECT with a reader of its own): read v into obj
     * + off (SC_WHOLE: obj). Any type: check (after the value is written,
     * with the whole object) may refuse it with a message of its own.
     * SC_RULE: check(x, map, obj), map the object's mapping. */
    int (*set)(sx_t *x, const sval_t *v, void *obj);
    int (*check)(sx_t *x, const sval_t *v, void *obj);
    const char *range_msg; /* out of lo..hi: this, else "must be LO..HI" */
    const char *missing;   /* SC_REQUIRED and absent: this, else "missing KEY: (help)" */
    const char *def;       /* the default in the field's own syntax; NULL: none */
    const char *def_doc;   /* the default as the docs say it, when not def */
    const char *type_doc;  /* the type as the docs say it, when not the type's name */
    const char *help;
    unsigned flags; /* SC_* above */
    unsigned ctx;   /* SC_CTX_* the field exists in; 0: every one */
} sc_field_t;

typedef struct sc_table {
    const char *name;         /* the object, for messages and docs */
    const sc_field_t *fields; /* ends with a NULL key */
    /* After every row: a check of the whole object (may be NULL); a rule
     * the reference should say is an SC_RULE row instead. */
    int (*check)(sx_t *x, const sval_t *map, void *obj, unsigned ctx);
} sc_table_t;

/*
 * Read the mapping in map into obj through t, in format ctx: every key
 * must be a field of t in ctx ("unknown field 'x'; did you mean 'y'?
 * (valid: ...)"), each value of its type and range; an empty value (no
 * mapping) is no fields. Fields are read in table order, absent ones keep
 * what obj has (see sc_init). 0 or a negative errno with the message in
 * x->err; on failure obj may be partly written (walk into a copy).
 */
int sc_walk(sx_t *x, const sval_t *map, const sc_table_t *t, unsigned ctx, void *obj);

/* sc_walk without its key check, for an object sized by one of its values
 * (a job's groups live in the job's own allocation): the caller checks the
 * keys (sc_check_keys), makes obj to size, then walks its fields. */
int sc_walk_fields(sx_t *x, const sval_t *map, const sc_table_t *t, unsigned ctx, void *obj);

/* Only the key check of sc_walk, for an object whose fields are read by
 * hand (in an order of their own, or with rules between them). */
int sc_check_keys(sx_t *x, const sval_t *map, const sc_table_t *t, unsigned ctx);

/* Write every default of t in ctx into obj (sub-tables too): 0, or
 * -EINVAL when a table's default does not parse (a bug, said in err). */
int sc_init(const sc_table_t *t, unsigned ctx, void *obj, arb_err_t *err);

/* The reference of t in ctx as Markdown table rows "| `PREFIX.key` | type
 * | default | help |" (sub-tables as PREFIX.key.sub, lists as key[].sub;
 * SC_CUSTOM fields with a sub-table get their own row, then the sub's). */
void sc_doc_rows(FILE *f, const sc_table_t *t, unsigned ctx, const char *prefix);
/* The same with the table's header row, then, when t or a table under it
 * has rules, "Rules between fields:" and one item "- `PREFIX` (KEY): HELP"
 * each (sc_doc_rules). */
void sc_doc_markdown(FILE *f, const sc_table_t *t, unsigned ctx, const char *prefix);
/* The rules of t and the tables under it as those items; how many. */
int sc_doc_rules(FILE *f, const sc_table_t *t, unsigned ctx, const char *prefix);

/* The row of key in t in ctx (not a rule), or NULL: a setter's own row,
 * for the limits (hi, size) its format gives it. */
const sc_field_t *sc_find(const sc_table_t *t, const char *key, unsigned ctx);

/* The keys of t in ctx into names (at most max - 1, NULL-terminated). */
int sc_keys(const sc_table_t *t, unsigned ctx, const char **names, int max);

#endif
