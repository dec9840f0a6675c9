/*
 * fuzz_tokens.c: libFuzzer target for the tokens file parser
 * (src/api/auth.c, api_tokens_parse): the input is a whole file.
 *
 * Checked: no crash or sanitizer report on any input; an accepted file
 * holds at least one entry, every entry has a role of admin, user or agent,
 * and only agents are bound to a node; a refusal says where (FILE:LINE) or
 * that the file holds no token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_tokens: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    api_tokens_t t = {0};
    arb_err_t err = {{0}};

    int rc = api_tokens_parse((const char *)data, size, "tokens", &t, &err);
    if (rc == 0) {
        check(t.n > 0, "accepted with no entry");
        for (int i = 0; i < t.n; i++) {
            st_role_t r = t.v[i].role;
            check(r == ST_ROLE_ADMIN || r == ST_ROLE_USER || r == ST_ROLE_AGENT, "a bad role");
            check(r == ST_ROLE_AGENT || t.v[i].node[0] == '\0', "a node on a non-agent");
            check(memchr(t.v[i].name, '\0', sizeof t.v[i].name) != NULL, "a name not ended");
        }
        api_tokens_free(&t);
    } else {
        check(strncmp(err.msg, "tokens:", 7) == 0 || strstr(err.msg, "holds no token") ||
                  strstr(err.msg, "out of memory"),
              "a refusal that does not say where");
    }
    return 0;
}
