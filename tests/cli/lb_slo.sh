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
#    predicts the wait there in time (the requests ahead x the time per
#    request it learnt from the answers: first each replica answers one,
#    `timed`) and sends nothing where the answer would come past 3/4 of the
#    timeout: none times out, every request is answered 200 (or 429), the
#    slow replica is still used, and its learnt time per request says it is
#    slow.
# 3. slower still against the timeout: 1.6 s a request, a 6 s server
#    timeout; the two others 4 at once, 1.6 s each, and --max-inflight 4,
#    so that of 9 clients one at least must go to the slow one or wait: 72
#    requests, once each replica answered one. Four requests' time passes
#    the timeout, so a bound on counts (--saturate-queue 4, --max-inflight 4)
#    cannot keep it (with the time prediction off, one of 72 timed out,
#    checked); in time, none does, and the slow one keeps serving. (The
#    times were 0.8 s and 3 s: at a load of 10 with a CPU hog beside the
#    suite, late timer steps in the emulators made 9 of 72 time out; the
#    same ratios at twice the length leave them half the weight.)
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_slo
. "$SRC/tests/lbtest/lib.sh"

# timed N: rounds of 3 requests of 3 new tenants until the balancer has timed
# all N replicas (each one's svc_ms in /backends above 0), 10 rounds at most.
# The wait at a replica is predicted from its time per request, learnt from
# its answers: a replica that never answered is judged by counts alone (a
# burst at a balancer just started: docs/lb.md, What is left).
timed() {
    r=0
    while [ "$(admin /backends | grep -o '"svc_ms":[0-9.]*[1-9]' | wc -l)" -lt "$1" ]; do
        r=$((r + 1))
        [ $r -gt 10 ] && fail "the balancer did not time all $1 replicas: $(admin /backends)" && return
        llm --requests 3 --conns 3 --tenants 3 --tenant-prefix "warm$r-" --max-tokens 8 \
            --context-bytes 400
    done
}

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
timed 3
llm --requests 48 --conns 12 --max-tokens 8 --context-bytes 400
# none times out: every request answered 200 or 429
INF_5XX=$(num "$OUT" s5xx)
[ "$(num "$OUT" errors)" = 0 ] && [ "$INF_5XX" = 0 ] &&
    [ "$(($(num "$OUT" ok) + $(num "$OUT" s429)))" = 48 ] ||
    fail "inference with a slow replica: want all 48 answered 200 or 429, none 5xx: $OUT"
admin /backends >"$TMP/b"
# the slow replica: used, not ejected, and known to be slow (about 2000 ms a
# request; at least 1000 whatever the machine's load)
be_of() { # the /backends object of the backend on port $1, on a line of its own
    sed 's/{"name"/\n&/g' "$TMP/b" | grep "^{\"name\":\"127.0.0.1:$1\""
}
slow_req=$(num "$(be_of "$PORT_slow")" requests)
slow_ms=$(num "$(be_of "$PORT_slow")" svc_ms | cut -d. -f1)
[ "${slow_req:-0}" -ge 1 ] && [ "${slow_ms:-0}" -ge 1000 ] ||
    fail "the slow replica: want it sent requests and timed at >= 1000 ms: $(cat "$TMP/b")"
echo "lb_slo: a slow replica: round robin timed out $RR_5XX of 48, inference $INF_5XX" \
    "(the slow one sent $slow_req, timed at $slow_ms ms a request)"
stop_lb
stop_pid "$PID_slow"

# 3. 1.6 s a request against a 6 s server timeout
stop_pid "$PID_f1"
stop_pid "$PID_f2"
emu slow --batch 1 --decode-ms 200
emu f1 --batch 4 --decode-ms 200
emu f2 --batch 4 --decode-ms 200
BES="--backend 127.0.0.1:$PORT_slow --backend 127.0.0.1:$PORT_f1 --backend 127.0.0.1:$PORT_f2"
lb --policy inference --scrape-interval 50 --server-timeout 6000 --retries 0 --max-inflight 4 $BES
timed 3
llm --requests 72 --conns 9 --max-tokens 8 --context-bytes 400
[ "$(num "$OUT" errors)" = 0 ] && [ "$(num "$OUT" s5xx)" = 0 ] &&
    [ "$(($(num "$OUT" ok) + $(num "$OUT" s429)))" = 72 ] ||
    fail "inference, 1.6 s a request against a 6 s timeout: want 72 answered 200 or 429: $OUT"
admin /backends >"$TMP/b"
slow_req=$(num "$(be_of "$PORT_slow")" requests)
[ "${slow_req:-0}" -ge 3 ] ||
    fail "the slow replica (1.6 s) was sent $slow_req, want it kept in use (>= 3): $(cat "$TMP/b")"
echo "lb_slo: 1.6 s a request, 6 s timeout: none timed out; the slow one sent $slow_req of 72"
finish
