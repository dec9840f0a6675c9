#!/bin/sh
# arbiter lb in front of LLM replicas (arb_llmemu processes, an OpenAI API
# and a vLLM-like engine with a prefix cache): requests of a tenant go where
# its context is cached (the replicas' own usage reports say how many prompt
# tokens were cached), where round robin scatters them; server-sent events
# pass through token by token; the replicas' /metrics are scraped in vLLM's,
# SGLang's and llama.cpp's names; a body that is not JSON is refused with a
# message, one over --body-max is routed without its prompt; LoRA adapter
# affinity keeps an adapter on one replica.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_infer
. "$SRC/tests/lbtest/lib.sh"

# 30 completions of 2 tenants, each with an 8000-byte (2000-token) context:
# the first of each tenant is computed, the other 28 find it cached.
start3() {
    emu e1 --speedup 10
    emu e2 --speedup 10 --metrics sglang
    emu e3 --speedup 10 --metrics llamacpp
}
start3
lb --policy inference --scrape-interval 50 --backend 127.0.0.1:$PORT_e1 \
    --backend 127.0.0.1:$PORT_e2 --backend 127.0.0.1:$PORT_e3
llm --requests 30 --tenants 2 --context-bytes 8000
[ "$(num "$OUT" ok)" = 30 ] || fail "inference: 30 answers: $OUT"
[ "$(num "$OUT" cached)" = 56000 ] || fail "inference: 28 x 2000 tokens cached: $OUT"
inf_cached=$(num "$OUT" cached)

# streamed chat: 20 tokens, each its own event at the client, spread in time
llm --chat --stream --requests 6 --conns 3 --max-tokens 20
[ "$(num "$OUT" tokens)" = 120 ] || fail "stream: 6 x 20 tokens: $OUT"
[ "$(num "$OUT" spread_min_ms)" -ge 25 ] ||
    fail "stream: tokens arrived together (buffered?), spread under 25 ms: $OUT"

# scraped: each replica's engine in its own dialect
until_true 10 sh -c "'$LBT' req --port $ADMIN_PORT --path /backends | grep -q llamacpp" || true
admin /backends >"$TMP/b"
for k in vllm sglang llamacpp; do
    grep -q "\"kind\":\"$k\"" "$TMP/b" || fail "/backends: no $k engine: $(cat "$TMP/b")"
done
admin /metrics >"$TMP/m"
grep -q '^arbiter_lb_backend_engine_kv_cache_usage{backend=' "$TMP/m" || fail "/metrics: no engine kv"
grep -q '^arbiter_lb_ttft_seconds_count{} [1-9]' "$TMP/m" || fail "/metrics: no ttft"
grep -q '^arbiter_lb_inference_requests_total{endpoint="chat"} 6$' "$TMP/m" ||
    fail "/metrics: chat requests: $(grep inference_requests "$TMP/m")"

# not JSON: 400, and the message says so
r=$("$LBT" req --port "$LB_PORT" --method POST --path /v1/completions --body-bytes 10)
echo "$r" | head -1 | grep -q 400 && echo "$r" | grep -q "not JSON" || fail "bad body: $r"
stop_lb

# over --body-max: routed without its prompt, and answered
lb --policy inference --body-max 4096 --backend 127.0.0.1:$PORT_e1 --backend 127.0.0.1:$PORT_e2
llm --requests 2 --context-bytes 8000
[ "$(num "$OUT" ok)" = 2 ] || fail "big body: $OUT"
admin /metrics | grep -q '^arbiter_lb_inference_unparsed_total 2$' ||
    fail "big body: unparsed count: $(admin /metrics | grep unparsed)"
stop_lb
for e in e1 e2 e3; do eval "stop_pid \$PID_$e"; done

# the same load through round robin, on fresh replicas: fewer tokens cached
start3
lb --policy round-robin --backend 127.0.0.1:$PORT_e1 --backend 127.0.0.1:$PORT_e2 \
    --backend 127.0.0.1:$PORT_e3
llm --requests 30 --tenants 2 --context-bytes 8000
[ "$(num "$OUT" ok)" = 30 ] || fail "round-robin: 30 answers: $OUT"
[ "$(num "$OUT" cached)" -lt "$inf_cached" ] ||
    fail "round-robin cached as much as inference ($inf_cached): $OUT"
stop_lb
for e in e1 e2 e3; do eval "stop_pid \$PID_$e"; done

# LoRA: one adapter slot per replica; once a replica has "sql-lora" loaded
# (and says so on /metrics), the adapter's requests stay there
emu l1 --speedup 10 --max-lora 1
emu l2 --speedup 10 --max-lora 1
lb --policy inference --scrape-interval 50 --backend 127.0.0.1:$PORT_l1 --backend 127.0.0.1:$PORT_l2
llm --requests 1 --model sql-lora --context-bytes 10
has_lora() {
    "$LBT" req --port "$ADMIN_PORT" --path /backends | grep -q '"lora":1'
}
until_true 10 has_lora || fail "no replica reported the adapter: $(admin /backends)"
llm --requests 12 --conns 2 --model sql-lora --context-bytes 10
[ "$(num "$OUT" ok)" = 12 ] || fail "lora: $OUT"
n=0
for e in l1 l2; do
    eval "p=\$PORT_$e"
    "$LBT" req --port "$p" --path /metrics | grep -q 'running_lora_adapters="sql-lora"' && n=$((n + 1))
done
[ $n = 1 ] || fail "lora: the adapter is loaded on $n replicas, want 1"
finish
