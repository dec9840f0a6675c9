/*
 * fuzz_zygote.c: libFuzzer target for the requests the supervisors' zygote
 * reads (src/agent/zygote.c): a supervisor's argv as NUL-ended strings,
 * split by agent_zygote_args, then read as `arbiter supervise` arguments
 * (agent_sup_parse), as the new supervisor does.
 *
 * Checked: no crash, hang or sanitizer report on any input; a split request
 * has 2..max-1 strings, each inside the input and NUL-ended there, the argv
 * NULL-ended, and the strings laid end to end cover the input exactly; a
 * short table refuses rather than overruns.
 *
 * Seed corpus: fuzz/seeds/fuzz_zygote.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/supervise.h"
#include "agent/zygote.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_zygote: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf, *argv[AGENT_ZYGOTE_MAX_ARGS];
    int max = size ? 3 + data[0] % (AGENT_ZYGOTE_MAX_ARGS - 2) : AGENT_ZYGOTE_MAX_ARGS;

    if (size < 1 || size > AGENT_ZYGOTE_MSG)
        return 0;
    if (!(buf = malloc(size - 1 ? size - 1 : 1)))
        return 0;
    memcpy(buf, data + 1, size - 1);
    int argc = agent_zygote_args(buf, size - 1, argv, max);
    if (argc >= 0) {
        size_t off = 0;
        check(argc >= 2 && argc < max && argv[argc] == NULL, "a bad argument count");
        for (int i = 0; i < argc; i++) {
            check(argv[i] == buf + off, "a string not where the last one ended");
            off += strlen(argv[i]) + 1;
            check(off <= size - 1, "a string past the input");
        }
        check(off == size - 1, "input left over");
        agent_sup_args_t a;
        if (agent_sup_parse(argc, argv, &a, NULL) == 0)
            check((a.task > 1) != (a.start_fd > 2) && a.exit_path && a.ncg <= 2,
                  "parsed arguments without one task or start fd, or an exit path");
    }
    free(buf);
    return 0;
}
