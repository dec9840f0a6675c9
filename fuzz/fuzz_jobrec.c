/*
 * fuzz_jobrec.c: libFuzzer target for st_jobrec_read, the reader of a job's
 * store record straight from its text (src/state/jobrec.c). Checked: no
 * crash, leak or sanitizer report; a text it takes (0) is one jansson takes
 * too, and st_jobrec_from_json gives the same values from jansson's tree
 * (what recovery reads does not depend on which reader read it); a text
 * it leaves (1) leaves nothing held.
 */
#include <errno.h>
#include <stdlib.h>

#include "state/jobrec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_jobrec_t a = {0}, b = {0};
    int rc = st_jobrec_read(&a, (const char *)data, size);

    if (rc < 0 && rc != -ENOMEM)
        abort();
    if (rc == 1 && (a.command || a.env || a.ntasks || a.nalloc || a.id))
        abort();
    if (rc == 0) {
        json_t *o = json_loadb((const char *)data, size, 0, NULL);
        if (!json_is_object(o) || st_jobrec_from_json(&b, o) < 0 || !st_jobrec_same(&a, &b))
            abort();
        st_jobrec_clear(&b);
        json_decref(o);
    }
    st_jobrec_clear(&a);
    return 0;
}
