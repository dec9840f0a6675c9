#!/bin/sh
# The balancer's queue reaches the service autoscaler, end to end with real
# processes: a controller, an agent with 2 (fake) GPUs, a service of
# emulated LLM replicas (arb_llmemu, one request at a time, 0.5 s each) with
# a target of 4 requests per replica, and `arbiter lb --service --policy
# inference --max-inflight 1` in front. 8 clients: each replica holds 1 of
# ours, so in flight alone (1 per replica, a quarter of the target) would
# never scale the service; the other 7 wait in the balancer's admission
# queue, and the balancer reports them to the controller
# (POST /v1/services/NAME/load, the queue spread over the replicas), which
# scales out: the event shows the queued requests as the load, and the new
# replica takes requests once ready. Every request is answered, none 5xx.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=lb_autoscale
LBT=$(dirname "$ARB")/tests/arb_lbtest
EMU=$(dirname "$ARB")/tests/arb_llmemu
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

cl_controller
CL_GPUS=2:H100
cl_agent n1
cl_wait "n1 ready" 10 cl_node_ready n1

PORT0=$((21000 + $$ % 1000 * 10)) # below the ephemeral range; 10 apart per process
cat >"$T/web.yaml" <<EOF2
name: web
kind: service
replicas: 1
minReplicas: 1
port: $PORT0
health: /health
autoscale: {maxReplicas: 2, targetInflight: 4, window: 30s, cooldown: 1s, drainTimeout: 20s}
resources: {requests: {nvidia.com/gpu: 1, cpu: 100m, memory: 1Gi}}
command: [sh, -c, 'exec $EMU --port \$PORT --id web-\$ARBITER_REPLICA --batch 1 --decode-ms 50']
EOF2
$ARB submit -f "$T/web.yaml" >/dev/null
rows() { $ARB service web | awk '$1 ~ /^[0-9]+$/'; } # INDEX JOB STATE NODE ADDRESS READY ...
ready() { [ "$(rows | awk '$6 == "yes" && $7 == "no"' | wc -l)" -eq "$1" ]; }
cl_wait "1 ready replica" 30 ready 1

$ARB lb --listen 127.0.0.1:0 --admin 127.0.0.1:0 --service web --controller "$ARBITER_URL" \
    --policy inference --max-inflight 1 --scrape-interval 100 --max-queue 64 \
    --queue-timeout 120000 --ready-file "$T/lb.ready" 2>>"$T/lb.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "the balancer" 30 test -s "$T/lb.ready"
LBPORT=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$T/lb.ready")
ADMIN=$(sed -n 's/^admin .*:\([0-9]*\)$/\1/p' "$T/lb.ready")

# 8 clients, 40 requests of 10 tokens: 20 s of work for one replica
"$LBT" llm --port "$LBPORT" --conns 8 --requests 40 --max-tokens 10 >"$T/llm" 2>&1 &
LLM=$!
queued() { "$LBT" req --port "$ADMIN" --path /metrics | grep -q '^arbiter_lb_queued_requests [4-9]$'; }
cl_wait "requests queued at the balancer" 20 queued
cl_wait "scale out" 30 sh -c "$ARB events | grep -q 'service-scale-out .*1 -> 2 replicas'"
ev=$($ARB events | grep 'service-scale-out .*1 -> 2 replicas' | head -1)
# "load I in flight + Q queued over 1 replicas": the queue made it, not in flight
echo "$ev" | awk '{
        for (i = 1; i < NF; i++) {
            if ($(i + 1) == "in" && $(i + 2) == "flight") fl = $i
            if ($(i + 1) == "queued") q = $i
        }
        exit !(fl != "" && q != "" && fl + 0 <= 2 && q + 0 >= 4)
    }' || cl_fail "the scale-out was not for the balancer's queue: $ev"
cl_wait "2 ready replicas" 30 ready 2
cl_wait "the balancer on 2" 20 sh -c "grep 'backends changed' '$T/lb.log' | tail -1 | grep -q ', 2 backends'"
wait "$LLM" || cl_fail "the client: $(cat "$T/llm")"
grep -q '"ok":40,' "$T/llm" && grep -q '"s5xx":0,' "$T/llm" && grep -q '"errors":0,' "$T/llm" ||
    cl_fail "want 40 answers, none 5xx: $(cat "$T/llm")"
# both replicas served some (the new one after it was ready)
"$LBT" req --port "$ADMIN" --path /backends >"$T/be"
[ "$(grep -o '"requests":[1-9][0-9]*' "$T/be" | wc -l)" -ge 2 ] ||
    cl_fail "the new replica took nothing: $(cat "$T/be")"
echo "lb_autoscale: $ev"
echo "lb_autoscale: ok"
