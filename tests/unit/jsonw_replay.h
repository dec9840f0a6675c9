/*
 * jsonw_replay.h: a JSON tree written back through the call-by-call writer
 * (util/jsonw.h's arb_jw_*), member by member, so that its text can be
 * compared with jansson's json_dumps of the same tree: shared by
 * tests/unit/test_jsonw.c and fuzz/fuzz_jsonw.c.
 */
#ifndef ARB_TEST_JSONW_REPLAY_H
#define ARB_TEST_JSONW_REPLAY_H

#include <jansson.h>

#include "util/jsonw.h"

static void replay(arb_jw_t *w, const json_t *v)
{
    const char *k;
    json_t *x;
    size_t i;

    switch (json_typeof(v)) {
    case JSON_OBJECT:
        arb_jw_obj(w);
        json_object_foreach((json_t *)v, k, x)
        {
            arb_jw_key(w, k);
            replay(w, x);
        }
        arb_jw_obj_end(w);
        break;
    case JSON_ARRAY:
        arb_jw_arr(w);
        json_array_foreach(v, i, x) replay(w, x);
        arb_jw_arr_end(w);
        break;
    case JSON_STRING:
        arb_jw_str(w, json_string_value(v));
        break;
    case JSON_INTEGER:
        arb_jw_int(w, json_integer_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        arb_jw_bool(w, json_is_true(v));
        break;
    case JSON_NULL:
        arb_jw_null(w);
        break;
    default: /* a real: the tree call */
        arb_jw_json(w, v);
    }
}

#endif
