#!/bin/sh
# arbiter lb's TTFT SLO and a slow replica, with real emulated LLM replicas
# (arb_llmemu):
# 1. --ttft-slo: once the balancer has measured how fast requests finish,
#    a request that finds the replica saturated (--max-inflight 1) and
#    whose expected wait exceeds the SLO is answered 429 at once, with a
#    Retry-After and a body naming the reason ("slo", --ttft-slo); the
#    replica's own counters show that it was never sent.
# 2. one replica slow (1 request at a time, 2 s each), two fine, the
#    server timeout 16 s: round robin sends the slow one a third of the
#    requests, the clients pile up there and some wait past the timeout
#    (504: the control, so that the test can fail); the inference policy
#    stops sending there once its engine queue is over --saturate-queue (4),
#    so it times out fewer than round robin (usually none: nothing should wait
#    there longer than 5 requests' time, 10 s, against round robin's 24 s):
#    every request is answered. (A replica so
#    slow that 5 requests' time exceeds the server timeout still times out:
#    the saturation bound is a count, not a time; docs/lb.md.)
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_slo
. "$SRC/tests/lbtest/lib.sh"

# served PORT: requests the emulator on PORT finished, by its own account
served() {
    metric "$1" "vllm:request_success_total"
}

# 1. the SLO: one replica, one request at a time, 10 tokens x 50 ms each
emu s1 --batch 1 --decode-ms 50
lb --policy inference --scrape-interval 50 --max-inflight 1 --ttft-slo 200 --max-queue 16 \
    --backend 127.0.0.1:$PORT_s1
# one at a time: the balancer learns the drain rate (about 2 a second, so a
# wait of at least 0.5 s for any request that must queue)
llm --requests 6 --conns 1 --max-tokens 10
[ "$(num "$OUT" ok)" = 6 ] || fail "warm-up: want 6 answers: $OUT"
# 8 at once: one runs, the others would wait >= 0.5 s > 200 ms
llm --requests 8 --conns 8 --max-tokens 10 --error-out "$TMP/err"
ok=$(num "$OUT" ok)
r429=$(num "$OUT" s429)
[ "$((ok + r429))" = 8 ] && [ "$r429" -ge 5 ] && [ "$(num "$OUT" s5xx)" = 0 ] &&
    [ "$(num "$OUT" errors)" = 0 ] || fail "burst: want 8 answers, at least 5 of them 429, no 5xx: $OUT"
[ "$(num "$OUT" retry_after)" -ge 1 ] || fail "429 without Retry-After: $OUT"
grep -q '^429 .*"reason":"slo"' "$TMP/err" && grep -q -- '--ttft-slo' "$TMP/err" ||
    fail "the 429 does not name the SLO: $(cat "$TMP/err")"
admin /metrics >"$TMP/m"
grep -q "^arbiter_lb_rejected_total{reason=\"slo\"} $r429\$" "$TMP/m" ||
    fail "want $r429 SLO rejections: $(grep rejected_total "$TMP/m")"
grep -q '^arbiter_lb_queue_dispatched_total 0$' "$TMP/m" ||
    fail "a request was queued and sent: $(grep dispatched "$TMP/m")"
# nothing rejected reached the replica: it finished exactly the answered ones
want=$((6 + ok))
[ "$(served "$PORT_s1")" = "$want" ] ||
    fail "the replica finished $(served "$PORT_s1") requests, want $want (6 + $ok answered)"
admin /backends | grep -q "\"name\":\"127.0.0.1:$PORT_s1\",[^}]*\"requests\":$want," ||
    fail "the balancer sent other than $want: $(admin /backends)"
stop_lb
stop_pid "$PID_s1"

# 2. one slow replica beside two fine ones
emu slow --batch 1 --decode-ms 250
emu f1 --speedup 10
emu f2 --speedup 10
BES="--backend 127.0.0.1:$PORT_slow --backend 127.0.0.1:$PORT_f1 --backend 127.0.0.1:$PORT_f2"
# the control: round robin gives the slow one a third, and they pile up there
lb --policy round-robin --openai --server-timeout 16000 --retries 0 $BES
llm --requests 48 --conns 12 --max-tokens 8 --context-bytes 400
RR_5XX=$(num "$OUT" s5xx)
[ "$RR_5XX" -ge 1 ] ||
    fail "control: round robin should have timed out at the slow replica: $OUT"
stop_lb
stop_pid "$PID_slow"
emu slow --batch 1 --decode-ms 250 # a fresh one: nothing left in its queue
BES="--backend 127.0.0.1:$PORT_slow --backend 127.0.0.1:$PORT_f1 --backend 127.0.0.1:$PORT_f2"
lb --policy inference --scrape-interval 50 --server-timeout 16000 --retries 0 $BES
llm --requests 48 --conns 12 --max-tokens 8 --context-bytes 400
# Every request is answered, and fewer time out than under round robin (an
# order, not a count: the policy's saturation bound is a number of queued
# requests, not a time, and a busy machine (the ASan pass) has seen one of
# 48 wait past the timeout at the slow replica; docs/lb.md, What is left).
INF_5XX=$(num "$OUT" s5xx)
[ "$(num "$OUT" errors)" = 0 ] && [ "$(($(num "$OUT" ok) + $(num "$OUT" s429) + INF_5XX))" = 48 ] ||
    fail "inference with a slow replica: want all 48 answered: $OUT"
[ "$INF_5XX" -lt "$RR_5XX" ] ||
    fail "inference timed out $INF_5XX at the slow replica, round robin $RR_5XX: $OUT"
echo "lb_slo: a slow replica: round robin timed out $RR_5XX of 48, inference $INF_5XX"
finish
