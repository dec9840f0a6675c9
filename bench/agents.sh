#!/bin/sh
# bench/agents.sh ARBITER [NODES] [SECONDS]: the controller under NODES
# emulated agents (`arbiter agent --emulate`, 8 fake GPUs each, one report a
# second each), measured over SECONDS after every node has registered:
#   controller_cpu_cores   the controller's CPU time / wall time (1.0 = one core)
#   report_server_ms       mean time the API spent on one report, and the
#                          histogram bucket holding the 99th percentile
#   report_round_trip_ms   what the agents saw: p50, p99 (from the emulator)
#   submit_to_running_ms   jobs submitted during the window (1 GPU, `sleep 2`):
#                          p50, p99 from submission to all tasks running,
#                          by the controller's event times
# One JSON object on stdout; progress on stderr. Defaults: 1000 nodes, 30 s.
set -eu
ARB=$1
NODES=${2:-1000}
SECS=${3:-30}
JOBS=100
T=$(mktemp -d /tmp/arb_bench_agents.XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
wait_for() {
    n=$(($2 * 10)) what=$1
    shift 2
    until "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        [ $n -gt 0 ] || { echo "bench/agents.sh: timed out: $what" >&2; exit 1; }
        sleep 0.1
    done
}

$ARB controller --listen 127.0.0.1:0 --data-dir "$T/d" 2>"$T/controller.log" &
CPID=$!
PIDS="$PIDS $CPID"
wait_for "controller" 20 test -s "$T/d/url"
URL=$(cat "$T/d/url")
export ARBITER_URL=$URL
echo "bench/agents.sh: $NODES emulated nodes against $URL" >&2
$ARB agent --name emu --controller "$URL" --emulate "$NODES" --fake-gpus 8:H100 \
    --duration $((SECS + 60))s --log-dir "$T/logs" --allow-root -o json >"$T/emu.json" \
    2>"$T/emu.log" &
EPID=$!
PIDS="$PIDS $EPID"
registered() { curl -sf "$URL/v1/status" | grep -q "\"nodes\":$NODES,"; }
wait_for "$NODES nodes to register" 120 registered
sleep 3 # let the first reports' registrations settle out of the window

metric() { curl -sf "$URL/metrics" | awk -v k="$1" '$1 == k {print $2}'; }
buckets() { curl -sf "$URL/metrics" | grep '^arbiter_node_report_seconds_bucket'; }
ticks() { awk '{print $14 + $15}' "/proc/$CPID/stat"; }
HZ=$(getconf CLK_TCK)
sum0=$(metric arbiter_node_report_seconds_sum)
cnt0=$(metric arbiter_node_report_seconds_count)
buckets > "$T/b0"
L0=$(curl -sf "$URL/v1/status" | sed -n 's/.*"lamport":\([0-9]*\).*/\1/p')
c0=$(ticks)
w0=$(date +%s%N)
# jobs spread over the window
i=0
while [ $i -lt $JOBS ]; do
    $ARB submit --gpus 1 --name probe -- sleep 2 >/dev/null
    i=$((i + 1))
    sleep "$(awk -v s="$SECS" -v j="$JOBS" 'BEGIN {printf "%.3f", s / j * 0.8}')"
done
now=$(date +%s%N)
left=$(( (w0 + SECS * 1000000000 - now) / 1000000 ))
[ $left -gt 0 ] && sleep "$(awk -v m="$left" 'BEGIN {printf "%.3f", m / 1000}')"
c1=$(ticks)
w1=$(date +%s%N)
sum1=$(metric arbiter_node_report_seconds_sum)
cnt1=$(metric arbiter_node_report_seconds_count)
buckets > "$T/b1"
# submission to running, from the controller's event log (its wall clock, ms)
$ARB events -o json --since "$L0" > "$T/events.json" 2>/dev/null || true
lat=$(awk '
    function ms(s,  a, b) { split(s, a, "T"); split(a[2], b, /[:Z]/); return ((b[1] * 60 + b[2]) * 60 + b[3]) * 1000 }
    {
        if (!match($0, /"job":[0-9]+/)) next
        id = substr($0, RSTART + 6, RLENGTH - 6)
        if (!match($0, /"time":"[^"]*"/)) next
        t = ms(substr($0, RSTART + 8, RLENGTH - 9))
        if ($0 ~ /"type":"job-submitted"/) sub_t[id] = t
        else if ($0 ~ /"type":"job-running"/ && (id in sub_t)) { n++; d[n] = t - sub_t[id] }
    }
    END {
        if (!n) { print "null"; exit }
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (d[j] < d[i]) { x = d[i]; d[i] = d[j]; d[j] = x }
        p50 = d[int((n - 1) * 0.5) + 1]; p99 = d[int((n - 1) * 0.99) + 1]
        printf "{\"jobs\": %d, \"p50\": %.0f, \"p99\": %.0f, \"max\": %.0f}", n, p50, p99, d[n]
    }' "$T/events.json")
p99b=$(paste "$T/b0" "$T/b1" | awk -v n="$((cnt1 - cnt0))" '{
        split($1, a, "\""); le = a[2]; c = $4 - $2
        if (!done && c >= 0.99 * n) { print (le == "+Inf" ? "null" : le * 1000); done = 1 }
    }')
kill "$EPID" 2>/dev/null || true
wait "$EPID" 2>/dev/null || true
PIDS=$CPID
rt=$(sed -n 's/.*"round_trip_ms": \({[^}]*}\).*/\1/p' "$T/emu.json")
awk -v nodes="$NODES" -v secs="$(( (w1 - w0) / 1000000 ))" -v c="$((c1 - c0))" -v hz="$HZ" \
    -v s0="$sum0" -v s1="$sum1" -v n0="$cnt0" -v n1="$cnt1" -v p99b="$p99b" -v rt="$rt" \
    -v lat="$lat" 'BEGIN {
        wall = secs / 1000
        printf "{\"bench\": \"agents\", \"nodes\": %d, \"heartbeat_s\": 1, \"window_s\": %.1f, ", nodes, wall
        printf "\"reports_per_s\": %.0f, \"controller_cpu_cores\": %.3f, ", (n1 - n0) / wall, c / hz / wall
        printf "\"report_server_ms\": {\"mean\": %.3f, \"p99_bucket\": %s}, ", (s1 - s0) / (n1 - n0) * 1000, p99b
        printf "\"report_round_trip_ms\": %s, \"submit_to_running_ms\": %s}\n", rt == "" ? "null" : rt, lat
    }'
