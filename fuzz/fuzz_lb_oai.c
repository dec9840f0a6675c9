/*
 * fuzz_lb_oai.c: libFuzzer target for the balancer's OpenAI body reader
 * (src/lb/oai.c): the input is a request body, read as a completion and as
 * a chat. Checked: no crash, hang or sanitizer report; a failure is -EINVAL
 * with a message; a success fills at most `cap` blocks, each block counted
 * in prompt_bytes, and two parses of the same body give the same chain.
 *
 * Seed inputs: fuzz/seeds/fuzz_lb_oai/ (completions and chats, token ids).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb/oai.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t a[32], b[32];
    oai_req_t ra, rb;
    arb_err_t err;

    for (int kind = OAI_COMPLETIONS; kind <= OAI_CHAT; kind++) {
        err.msg[0] = '\0';
        int rc = oai_parse((const char *)data, size, (oai_kind_t)kind, 16, a, 32, &ra, &err);
        if (rc < 0) {
            if (rc != -EINVAL || !err.msg[0])
                abort();
            continue;
        }
        if (ra.nblocks < 0 || ra.nblocks > 32 || (size_t)ra.nblocks * 16 > ra.prompt_bytes)
            abort();
        if (oai_parse((const char *)data, size, (oai_kind_t)kind, 16, b, 32, &rb, &err) != 0 ||
            rb.nblocks != ra.nblocks || memcmp(a, b, (size_t)ra.nblocks * sizeof a[0]) != 0)
            abort();
    }
    return 0;
}
