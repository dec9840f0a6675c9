/*
 * jv.h: typed reads of JSON values (jansson) with field paths in every
 * message, for request bodies that are not job specs (node reports,
 * drains): "inventory.gpus[2].memory: '80Gx': unknown unit ...".
 *
 * Conventions: functions return 0 or a negative errno and write the message
 * into err; a missing optional field leaves *out untouched and returns 0.
 * Type errors and unknown fields are -EINVAL (the API answers 422).
 */
#ifndef ARB_STATE_JV_H
#define ARB_STATE_JV_H

#include <jansson.h>

#include "arbiter/resource.h"

#define JV_PATH 256

/* Path of a member / an item, for messages: "a.b", "a[3]". */
void jv_path_key(char *out, const char *base, const char *key);
void jv_path_idx(char *out, const char *base, size_t i);

/* v must be an object whose keys are all in valid (NULL-terminated). */
int jv_object(const json_t *v, const char *path, const char *const *valid, arb_err_t *err);
/* Optional typed members of object o (path is o's path). */
int jv_int(const json_t *o, const char *key, const char *path, int64_t lo, int64_t hi, int64_t *out,
           arb_err_t *err);
int jv_bool(const json_t *o, const char *key, const char *path, bool *out, arb_err_t *err);
int jv_num(const json_t *o, const char *key, const char *path, double lo, double hi, double *out,
           arb_err_t *err);
/* A string of at most n-1 bytes, no control characters. */
int jv_str(const json_t *o, const char *key, const char *path, char *buf, size_t n, arb_err_t *err);
/* A Kubernetes quantity given as a string ("256Gi") or a JSON integer. */
int jv_qty(const json_t *o, const char *key, const char *path, arb_qty_kind_t kind, int64_t *out,
           arb_err_t *err);
/* The member key of o when it is of type t (JSON_OBJECT, JSON_ARRAY), NULL
 * when absent or null; -EINVAL when it has another type. */
int jv_member(const json_t *o, const char *key, const char *path, json_type t, json_t **out,
              arb_err_t *err);

/* ISO 8601 UTC text of a wall-clock time in milliseconds (for people only). */
void jv_time(int64_t wall_ms, char *buf, size_t n);

#endif
