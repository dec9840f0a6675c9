/*
 * prom.h: a model server's Prometheus /metrics, read for the inference
 * policies: requests waiting and running, KV-cache use, LoRA adapters
 * loaded. One table (prom.c) maps the names that vLLM, SGLang and the
 * llama.cpp server export onto lb_engine_t (lb.h):
 *
 *   field      vLLM                                    SGLang                   llama.cpp server
 *   waiting    vllm:num_requests_waiting               sglang:num_queue_reqs
 * llamacpp:requests_deferred running    vllm:num_requests_running sglang:num_running_reqs
 * llamacpp:requests_processing kv (0..1)  vllm:kv_cache_usage_perc (V1), sglang:token_usage
 * llamacpp:kv_cache_usage_ratio vllm:gpu_cache_usage_perc (V0) lora
 * vllm:lora_requests_info{max_lora, running_lora_adapters, waiting_lora_adapters}
 *
 * (The Gateway API Inference Extension's model-server protocol names the
 * same vLLM gauges and the LoRA info series, whose value is a timestamp: the
 * series with the largest one is the current.) Several series of one name
 * (labels per model, per data-parallel rank) add up for waiting and
 * running; KV use takes the largest (the bottleneck rank).
 *
 * The parser takes the text exposition format (version 0.0.4): comment and
 * blank lines are skipped, a malformed line is skipped and counted, never
 * fatal; it copies nothing and allocates nothing.
 */
#ifndef ARB_LB_PROM_H
#define ARB_LB_PROM_H

#include "lb/lb.h"

typedef struct prom_result {
    int known;       /* series of the table's names seen */
    int malformed;   /* lines that did not parse */
    char engine[16]; /* "vllm", "sglang", "llamacpp" (the first known name's), or "" */
} prom_result_t;

/* Parse n bytes of exposition text into *e (waiting, running, kv (-1 when
 * no series gave it), max_lora, nlora, lora; at_ms and inflight_at are the
 * caller's). Returns the number of known series (0: nothing useful). */
int prom_engine_parse(const char *txt, size_t n, lb_engine_t *e, prom_result_t *res);

/* One series, as the parser calls back: name, the label text between the
 * braces (escapes kept), the value. Exposed for the fuzz target and tests. */
typedef void (*prom_series_fn)(const char *name, size_t nlen, const char *labels, size_t llen,
                               double value, void *arg);
/* Returns the number of malformed lines. */
int prom_parse(const char *txt, size_t n, prom_series_fn fn, void *arg);
/* The value of label `key` in a label text, unescaped into out (NUL-ended,
 * cut to outsz); false when absent or malformed. */
bool prom_label(const char *labels, size_t llen, const char *key, char *out, size_t outsz);

#endif
