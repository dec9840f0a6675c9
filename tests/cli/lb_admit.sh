#!/bin/sh
# arbiter lb's admission control in front of LLM replicas (arb_llmemu):
# a replica whose engine queue is over --saturate-queue (seen on its
# /metrics) gets no requests while another has room, so nothing waits on it
# until a timeout; when every replica is saturated requests wait in the
# balancer's queue and go out when one has room, or are answered 429 with a
# Retry-After past --max-queue or --queue-timeout (never 5xx); a tenant over
# its fair share of a full queue loses its newest request to another tenant.
# The replicas are saturated by clients of their own, beside the balancer.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_admit
. "$SRC/tests/lbtest/lib.sh"

# flood PORT N: N long requests straight at a replica (one runs, the rest wait)
FLOODS=""
flood() {
    "$LBT" llm --port "$1" --conns "$2" --requests "$2" --max-tokens 400 --context-bytes 10 \
        >/dev/null &
    FLOODS="$FLOODS $!"
    PIDS="$PIDS $!"
}
unflood() {
    for p in $FLOODS; do stop_pid "$p"; done
    FLOODS=""
}
# waiting_at PORT N: the balancer sees more than N waiting at the replica on PORT
waiting_at() {
    "$LBT" req --port "$ADMIN_PORT" --path /metrics |
        awk -v b="127.0.0.1:$1" -v n="$2" '$1 == "arbiter_lb_backend_engine_waiting{backend=\"" b "\"}" && $2 > n { f = 1 } END { exit !f }'
}

# slow replicas: one request at a time, 50 ms per token
emu s1 --batch 1 --decode-ms 50
emu s2 --batch 1 --decode-ms 50
emu fast --speedup 10

# 1. one replica saturated: everything goes to the other, nothing times out
lb --policy inference --scrape-interval 50 --server-timeout 3000 \
    --backend 127.0.0.1:$PORT_s1 --backend 127.0.0.1:$PORT_fast
flood "$PORT_s1" 7
until_true 10 waiting_at "$PORT_s1" 4 || fail "the balancer never saw s1's queue: $(admin /metrics | grep engine_waiting)"
llm --requests 20 --conns 4 --max-tokens 8
[ "$(num "$OUT" ok)" = 20 ] && [ "$(num "$OUT" s5xx)" = 0 ] && [ "$(num "$OUT" errors)" = 0 ] ||
    fail "one saturated: want 20 answers, no 5xx: $OUT"
admin /backends | grep -q "\"name\":\"127.0.0.1:$PORT_s1\",[^}]*\"requests\":0," ||
    fail "the saturated replica got requests: $(admin /backends)"
unflood
stop_lb

# 2. every replica saturated: queue 2, 1.5 s at most; the rest 429 with Retry-After
lb --policy inference --scrape-interval 50 --max-queue 2 --queue-timeout 1500 \
    --backend 127.0.0.1:$PORT_s1 --backend 127.0.0.1:$PORT_s2
flood "$PORT_s1" 7
flood "$PORT_s2" 7
until_true 10 waiting_at "$PORT_s1" 4 && until_true 10 waiting_at "$PORT_s2" 4 ||
    fail "the balancer never saw both queues"
llm --requests 6 --conns 6 --max-tokens 4
[ "$(num "$OUT" s429)" = 6 ] && [ "$(num "$OUT" s5xx)" = 0 ] ||
    fail "all saturated: want 6 x 429, no 5xx: $OUT"
[ "$(num "$OUT" retry_after)" -ge 1 ] || fail "429 without Retry-After: $OUT"
admin /metrics >"$TMP/m"
grep -q '^arbiter_lb_rejected_total{reason="queue_full"} 4$' "$TMP/m" &&
    grep -q '^arbiter_lb_rejected_total{reason="expired"} 2$' "$TMP/m" ||
    fail "reasons: $(grep rejected_total "$TMP/m")"
stop_lb

# 3. queued, then routed when the replicas have room again
lb --policy inference --scrape-interval 50 --max-queue 8 --queue-timeout 20000 \
    --backend 127.0.0.1:$PORT_s1 --backend 127.0.0.1:$PORT_s2
until_true 10 waiting_at "$PORT_s1" 4 && until_true 10 waiting_at "$PORT_s2" 4 ||
    fail "the balancer never saw both queues"
"$LBT" llm --port "$LB_PORT" --requests 3 --conns 3 --max-tokens 2 >"$TMP/q3" &
QP=$!
queued3() { admin /metrics | grep -q '^arbiter_lb_queued_requests 3$'; }
until_true 10 queued3 || fail "3 requests should wait in the queue: $(admin /metrics | grep queued)"
# a tenant over its share: the queue holds 8; tenant a fills 5 more (8 in all),
# then tenant b's request takes the place of a's newest
"$LBT" llm --port "$LB_PORT" --requests 5 --conns 5 --max-tokens 2 --tenant-prefix a >"$TMP/qa" &
QA=$!
queued8() { admin /metrics | grep -q '^arbiter_lb_queued_requests 8$'; }
until_true 10 queued8 || fail "8 should wait: $(admin /metrics | grep queued)"
"$LBT" llm --port "$LB_PORT" --requests 1 --max-tokens 2 --tenant-prefix b >"$TMP/qb" &
QB=$!
shed1() { admin /metrics | grep -q '^arbiter_lb_rejected_total{reason="fair_share"} 1$'; }
until_true 10 shed1 || fail "no fair-share shed: $(admin /metrics | grep rejected)"
unflood
wait $QP $QA $QB
[ "$(num "$(cat "$TMP/q3")" ok)" = 3 ] || fail "queued requests: $(cat "$TMP/q3")"
[ "$(num "$(cat "$TMP/qb")" ok)" = 1 ] || fail "tenant b: $(cat "$TMP/qb")"
[ "$(num "$(cat "$TMP/qa")" ok)" = 4 ] && [ "$(num "$(cat "$TMP/qa")" s429)" = 1 ] ||
    fail "tenant a: 4 answered, 1 shed: $(cat "$TMP/qa")"
admin /metrics | grep -q '^arbiter_lb_queue_dispatched_total 8$' ||
    fail "dispatched: $(admin /metrics | grep dispatched)"
finish
