/*
 * fuzz_lb_prom.c: libFuzzer target for the model-server metrics reader
 * (src/lb/prom.c): Prometheus text exposition, as a replica's /metrics
 * answers. Checked: no crash, hang or sanitizer report; what it yields is
 * in range (counts >= 0, KV use -1 or 0..1, at most LB_MAX_LORA adapters);
 * label lookups stay within the input.
 *
 * Seed inputs: fuzz/seeds/fuzz_lb_prom/ (vLLM, SGLang, llama.cpp samples).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lb/prom.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lb_engine_t e;
    prom_result_t res;
    char v[64];

    memset(&e, 0, sizeof e);
    int known = prom_engine_parse((const char *)data, size, &e, &res);
    if (known < 0 || res.malformed < 0 || !(e.waiting >= 0) || !(e.running >= 0))
        abort();
    if (!(e.kv == -1 || (e.kv >= 0 && e.kv <= 1)))
        abort();
    if (e.nlora < 0 || e.nlora > LB_MAX_LORA || e.max_lora < 0)
        abort();
    if (prom_label((const char *)data, size, "max_lora", v, sizeof v) && strlen(v) >= sizeof v)
        abort();
    return 0;
}
