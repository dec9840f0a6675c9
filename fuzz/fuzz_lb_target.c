/*
 * fuzz_lb_target.c: libFuzzer target for the balancer's backend names,
 * lb_target_parse ("[https://]HOST:PORT[=WEIGHT]": --backend, a
 * --backends-file line). The parser is compiled into this target (the fuzz
 * build links the core libraries only). Checked: a failure names the
 * input and returns -EINVAL; a success has a non-empty address ending in
 * ":PORT" (digits), a weight of 1 to 1000, TLS exactly when the input
 * starts with https://, and parses again from its own rendering to itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb/source.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), again[320];
    lb_target_t t, u;
    arb_err_t err = {{0}};
    int rc;

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    rc = lb_target_parse(s, &t, &err);
    if (rc < 0) {
        if (rc != -EINVAL || strncmp(err.msg, "backend '", 9) != 0)
            abort();
        free(s);
        return 0;
    }
    const char *colon = strrchr(t.addr, ':');
    if (rc != 0 || !t.addr[0] || !colon || !colon[1] ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1) || t.weight < 1 || t.weight > 1000 ||
        t.tls != (strncmp(s, "https://", 8) == 0))
        abort();
    snprintf(again, sizeof again, "%s%s=%u", t.tls ? "https://" : "", t.addr, t.weight);
    if (lb_target_parse(again, &u, &err) != 0 || strcmp(u.addr, t.addr) != 0 ||
        u.weight != t.weight || u.tls != t.tls)
        abort();
    free(s);
    return 0;
}
