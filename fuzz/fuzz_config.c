/*
 * fuzz_config.c: libFuzzer target for the controller's configuration
 * parser (st_conf_load_mem: scheduler, nodes, queues, priorityClasses,
 * store, events, admission).
 *
 * The input is the YAML. Checked: no crash, leak or sanitizer report; a
 * failure is a negative errno with a message that starts with the file
 * name, and leaves the configuration as it was; a success with
 * priorityClasses holds the five built-ins first and names that are
 * unique and NUL-terminated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_config: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_conf_t c, before;
    arb_err_t err = {{0}};

    st_conf_init(&c);
    before = c;
    int rc = st_conf_load_mem("fuzz.yaml", (const char *)data, size, &c, &err);
    if (rc < 0) {
        check(strncmp(err.msg, "fuzz.yaml", 9) == 0 || rc == -ENOMEM,
              "an error message without the file name");
        check(memcmp(&c, &before, sizeof c) == 0, "a failed load changed the configuration");
    } else if (c.nclasses > 0) {
        check(c.nclasses >= 5, "fewer classes than the built-ins");
        for (int i = 0; i < c.nclasses; i++) {
            check(memchr(c.classes[i].name, '\0', sizeof c.classes[i].name) != NULL,
                  "an unterminated class name");
            check(memchr(c.classes[i].description, '\0', sizeof c.classes[i].description) != NULL,
                  "an unterminated description");
            for (int k = 0; k < i; k++)
                check(strcmp(c.classes[i].name, c.classes[k].name) != 0, "a class listed twice");
        }
    }
    st_conf_free(&c);
    return 0;
}
