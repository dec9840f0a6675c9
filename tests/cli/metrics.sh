#!/bin/sh
# /metrics of every daemon passes `promtool check metrics` (Debian's
# prometheus: a HELP and a TYPE for every family, Prometheus' naming rules):
# the controller with an agent and a running job, and `arbiter lb` with one
# backend up and one down. Then what people chart: the controller's per-GPU
# gauges (labels node, gpu, model: utilisation, memory used and total,
# temperature, health, allocation) and per-node gauges (CPU, memory,
# network and disk rates), and the balancer's backend state as one series per
# state (1 for the state it is in), not a label of backend_up.
# Skipped (77) without promtool (scripts/deps.sh installs prometheus).
set -eu
ARB=$1
SRC=$2
NAME=metrics
command -v promtool >/dev/null 2>&1 || {
    echo "metrics: skipped: promtool is missing (scripts/deps.sh installs prometheus)"
    exit 77
}
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

lint() { # lint FILE WHAT: promtool must find nothing to say
    promtool check metrics < "$1" > "$T/lint" 2>&1 || cl_fail "$2: promtool check metrics: $(cat "$T/lint")"
    [ ! -s "$T/lint" ] || cl_fail "$2: promtool: $(cat "$T/lint")"
}

printf 'scheduler: {interval: 200ms}\n' > "$T/c.yaml"
cl_controller --config "$T/c.yaml"
CL_GPUS=2:H100 cl_agent n1
cl_wait "n1 Ready" 20 cl_node_ready n1
j=$($ARB submit --gpus 1 --name busy -- sleep 120)
cl_wait "job $j to run" 20 cl_is "$j" running
# the agent's next report carries the busy GPU's telemetry
cl_wait "GPU telemetry in /metrics" 20 sh -c \
    "curl -sf '$ARBITER_URL/metrics' | grep -q '^arbiter_gpu_temperature_celsius{node=\"n1\",gpu=\"1\",model=\"H100\"} '"
curl -sf "$ARBITER_URL/metrics" > "$T/controller.prom"
lint "$T/controller.prom" controller

has() { grep -Eq "$1" "$2" || cl_fail "no /$1/ in $2: $(grep -E "$3" "$2" | head -20)"; }
gpu='\{node="n1",gpu="[01]",model="H100"\}'
for f in arbiter_gpu_utilization_ratio arbiter_gpu_memory_used_bytes arbiter_gpu_memory_total_bytes \
    arbiter_gpu_temperature_celsius arbiter_gpu_healthy arbiter_gpu_allocated_ratio; do
    has "^# HELP $f .+" "$T/controller.prom" "$f"
    has "^# TYPE $f gauge$" "$T/controller.prom" "$f"
    [ "$(grep -Ec "^$f$gpu [0-9.e+]+$" "$T/controller.prom")" = 2 ] ||
        cl_fail "$f: not one sample per GPU: $(grep "^$f" "$T/controller.prom")"
done
# the job's GPU is allocated, the other free; both healthy; 80 GiB of memory each
alloc=$(grep -Ec '^arbiter_gpu_allocated_ratio\{node="n1",gpu="[01]",model="H100"\} 1$' "$T/controller.prom")
free=$(grep -Ec '^arbiter_gpu_allocated_ratio\{node="n1",gpu="[01]",model="H100"\} 0$' "$T/controller.prom")
[ "$alloc $free" = "1 1" ] || cl_fail "allocation: $(grep '^arbiter_gpu_allocated_ratio' "$T/controller.prom")"
[ "$(grep -Ec '^arbiter_gpu_healthy\{node="n1",gpu="[01]",model="H100"\} 1$' "$T/controller.prom")" = 2 ] || cl_fail "health"
total=$(sed -n 's/^arbiter_gpu_memory_total_bytes{node="n1",gpu="0",model="H100"} //p' "$T/controller.prom")
[ "$total" -gt $((70 * 1024 * 1024 * 1024)) ] || cl_fail "GPU memory total: $total"
for f in cpu_utilization_ratio memory_used_bytes memory_allocatable_bytes network_receive_bytes_per_second \
    network_transmit_bytes_per_second disk_read_bytes_per_second disk_write_bytes_per_second; do
    has "^# HELP arbiter_node_$f .+" "$T/controller.prom" "node_$f"
    has "^arbiter_node_$f\\{node=\"n1\"\\} [0-9.e+]+$" "$T/controller.prom" "node_$f"
done

# The same telemetry over the last minutes (the console's charts), and a clear 404.
curl -sf "$ARBITER_URL/v1/nodes/n1/telemetry" > "$T/tel.json" || cl_fail "GET /v1/nodes/n1/telemetry"
grep -q '"node":"n1"' "$T/tel.json" && grep -q '"samples":\[{"age_s":' "$T/tel.json" &&
    grep -q '"cpu_util":' "$T/tel.json" || cl_fail "telemetry history: $(cat "$T/tel.json")"
code=$(curl -s -o "$T/tel404" -w '%{http_code}' "$ARBITER_URL/v1/nodes/nope/telemetry")
[ "$code" = 404 ] && grep -q "node 'nope': no such node" "$T/tel404" || cl_fail "unknown node: $code $(cat "$T/tel404")"

# arbiter lb: one backend up, one refusing connections (down after its checks).
LBT=$(dirname "$ARB")/tests/arb_lbtest
"$LBT" backend --id b1 --port-file "$T/b1.port" 2>>"$T/lbtest.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "backend b1" 20 test -s "$T/b1.port"
b1=127.0.0.1:$(cat "$T/b1.port")
dead=127.0.0.1:1
$ARB lb --listen 127.0.0.1:0 --admin 127.0.0.1:0 --ready-file "$T/lb.ready" --backend "$b1" \
    --backend "$dead" --health-path / --health-interval 100 2>>"$T/lb.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "the balancer" 20 grep -q '^admin ' "$T/lb.ready"
admin=$(sed -n 's/^admin //p' "$T/lb.ready")
state() { curl -sf "http://$admin/metrics" | grep -q "^arbiter_lb_backend_state{backend=\"$1\",state=\"$2\"} 1$"; }
cl_wait "$dead down" 20 state "$dead" down
cl_wait "$b1 up" 20 state "$b1" up
curl -sf "http://$admin/metrics" > "$T/lb.prom"
lint "$T/lb.prom" "arbiter lb"
[ "$(grep -c '^# HELP arbiter_lb_' "$T/lb.prom")" = "$(grep -c '^# TYPE arbiter_lb_' "$T/lb.prom")" ] ||
    cl_fail "lb: HELP and TYPE counts differ"
grep -q 'arbiter_lb_backend_up{.*state=' "$T/lb.prom" && cl_fail "lb: the state is still a label of backend_up"
has "^arbiter_lb_backend_up\\{backend=\"$dead\"\\} 0$" "$T/lb.prom" backend_up
has "^arbiter_lb_backend_up\\{backend=\"$b1\"\\} 1$" "$T/lb.prom" backend_up
# one series per state and backend, exactly one of them 1
[ "$(grep -c "^arbiter_lb_backend_state{backend=\"$dead\",state=\"[a-z-]*\"} [01]$" "$T/lb.prom")" = 5 ] ||
    cl_fail "lb: backend_state series: $(grep backend_state "$T/lb.prom")"
[ "$(grep -c "^arbiter_lb_backend_state{backend=\"$dead\",state=\"[a-z-]*\"} 1$" "$T/lb.prom")" = 1 ] ||
    cl_fail "lb: one state at a time: $(grep backend_state "$T/lb.prom")"

# arbiter lb in front of an LLM replica (--openai, scraping its /metrics):
# the inference and engine families pass too, after a request went through
EMU=$(dirname "$ARB")/tests/arb_llmemu
"$EMU" --port-file "$T/emu.port" --id e1 --speedup 10 2>>"$T/emu.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "the replica" 20 test -s "$T/emu.port"
rm -f "$T/lb2.ready"
$ARB lb --listen 127.0.0.1:0 --admin 127.0.0.1:0 --ready-file "$T/lb2.ready" --openai \
    --scrape-interval 100 --backend "127.0.0.1:$(cat "$T/emu.port")" 2>>"$T/lb2.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "the inference balancer" 20 grep -q '^admin ' "$T/lb2.ready"
admin2=$(sed -n 's/^admin //p' "$T/lb2.ready")
port2=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$T/lb2.ready")
curl -sf -m 20 "http://127.0.0.1:$port2/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"m","prompt":"hello","max_tokens":4}' >/dev/null || cl_fail "lb --openai: no answer"
scraped() { curl -sf "http://$admin2/metrics" | grep -q '^arbiter_lb_backend_engine_running{'; }
cl_wait "the replica's metrics scraped" 20 scraped
curl -sf "http://$admin2/metrics" > "$T/lb2.prom"
lint "$T/lb2.prom" "arbiter lb --openai"
[ "$(grep -c '^# HELP arbiter_lb_' "$T/lb2.prom")" = "$(grep -c '^# TYPE arbiter_lb_' "$T/lb2.prom")" ] ||
    cl_fail "lb --openai: HELP and TYPE counts differ"
has '^arbiter_lb_inference_requests_total\{endpoint="completions"\} 1$' "$T/lb2.prom" inference_requests
$ARB cancel "$j" >/dev/null
echo "metrics: ok"
