#!/bin/sh
# arbiter sim --mode events: JSON and CSV per (policy, queue, seed), the
# chart, Poisson arrivals deterministic by seed, gangs with a topology file,
# errors that name file:line:column, usage errors (exit 2), and bench sim.
set -eu
ARB=$1
SRC=$2
D=$SRC/../shared/traces/openb
T=${TMPDIR:-/tmp}/arb_sim_events.$$
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fail() { echo "sim_events: $*"; exit 1; }

cat >"$T/nodes.csv" <<'CSV'
sn,cpu_milli,memory_mib,gpu,model
n0,16000,65536,2,T4
n1,16000,65536,2,T4
CSV
cat >"$T/pods.csv" <<'CSV'
name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time
a,1000,1024,2,1000,BE,0,100,0
b,1000,1024,2,1000,BE,5,105,5
c,1000,1024,2,1000,BE,10,60,10
d,1000,1024,1,1000,LS,15,25,15
CSV

# Three queue policies: one line each, with every documented key.
$ARB sim --mode events --nodes "$T/nodes.csv" --pods "$T/pods.csv" --policy fgd \
    --queue fifo,priority,drf >"$T/q.json"
[ "$(wc -l <"$T/q.json")" -eq 3 ] || fail "3 queue policies should print 3 lines"
for k in mode queue jobs started completed abandoned unschedulable waiting_at_end pending_max \
    gpu_util_pct wait_s jct_s gangs series t_s alloc_pct pending; do
    grep -q "\"$k\":" "$T/q.json" || fail "JSON lacks $k"
done
# a and b fill both nodes until 100 and 105. fifo: c (2 GPUs) goes at 100,
# d behind it at 105: waits 0 0 90 90. priority: d (LS) goes first at 100
# on a's node, so c waits for b's: waits 0 0 95 85.
sed -n 1p "$T/q.json" | grep -q '"queue":"fifo".*"wait_s":{"n":4,"mean":45.0,"p50":0.0,"p99":90.0' ||
    fail "fifo waits: $(sed -n 1p "$T/q.json" | head -c 400)"
sed -n 2p "$T/q.json" | grep -q '"queue":"priority".*"wait_s":{"n":4,"mean":45.0,"p50":0.0,"p99":95.0' ||
    fail "priority waits: $(sed -n 2p "$T/q.json" | head -c 400)"

# CSV: a header and one row per run; the chart.
$ARB sim --mode events --nodes "$T/nodes.csv" --pods "$T/pods.csv" --policy fgd,bestfit \
    -o csv --svg "$T/ev.svg" >"$T/ev.csv"
[ "$(wc -l <"$T/ev.csv")" -eq 3 ] || fail "CSV should have a header and 2 rows"
head -1 "$T/ev.csv" | grep -q '^workload,policy,queue,seed,jobs,started,' || fail "CSV header"
grep -q '<polyline' "$T/ev.svg" && grep -q 'Jobs waiting' "$T/ev.svg" || fail "events SVG"

# The real trace, compressed: every task runs.
$ARB sim --mode events --nodes "$D/openb_node_list_gpu_node.csv" \
    --pods "$D/openb_pod_list_default.csv" --policy fgd --compress 1000 >"$T/real.json"
grep -q '"jobs":8152,"started":8152,"completed":8152' "$T/real.json" ||
    fail "trace replay: $(head -c 300 "$T/real.json")"

# Poisson: the same seed gives the same run, another seed another one.
P="--mode events --nodes $D/openb_node_list_gpu_node.csv --pods $D/openb_pod_list_default.csv
   --policy fgd --arrivals poisson:2/s --durations $D/openb_pod_list_default.csv --tasks 3000"
strip() { sed 's/"place_s":[^,]*,"run_s":[^,]*,//' "$1"; }
# shellcheck disable=SC2086
$ARB sim $P --seed 5 >"$T/p1.json"
# shellcheck disable=SC2086
$ARB sim $P --seed 5 >"$T/p2.json"
# shellcheck disable=SC2086
$ARB sim $P --seed 6 >"$T/p3.json"
[ "$(strip "$T/p1.json")" = "$(strip "$T/p2.json")" ] || fail "same seed, different Poisson run"
[ "$(strip "$T/p1.json")" != "$(strip "$T/p3.json")" ] || fail "another seed, same Poisson run"
grep -q '"tasks_arrived":3000' "$T/p1.json" || fail "--tasks 3000"

# Gangs in racks from a topology file.
awk -F, 'NR==1{print "node,rack,nvlink"; next} {printf "%s,r%02d,%s\n",$1,int((NR-2)/16),($4==8?"4":"all")}' \
    "$D/openb_node_list_gpu_node.csv" >"$T/topo.csv"
# shellcheck disable=SC2086
$ARB sim $P --seed 5 --topology "$T/topo.csv" --gangs 8:2:rack --policy default >"$T/g.json"
grep -q '"gang_racks":1.00' "$T/g.json" || fail "required-rack gangs span one rack: $(grep -o '"gang[^]]*' "$T/g.json" | head -c 300)"

# Topology file errors name file, line and column.
printf 'node,rack,nvlink\nn0,r1,0|1|2\n' >"$T/badtopo.csv"
if $ARB sim --nodes "$T/nodes.csv" --pods "$T/pods.csv" --policy fgd --topology "$T/badtopo.csv" \
    2>"$T/err"; then
    fail "a bad topology file was accepted"
fi
grep -q "badtopo.csv:2:7: nvlink '0|1|2' lists 3 GPU domains, but node 'n0'" "$T/err" ||
    fail "topology error: $(cat "$T/err")"
printf 'node,rack\nnope,r1\n' >"$T/badtopo.csv"
$ARB sim --nodes "$T/nodes.csv" --pods "$T/pods.csv" --policy fgd --topology "$T/badtopo.csv" \
    2>"$T/err" && fail "an unknown node was accepted"
grep -q "badtopo.csv:2:1: node 'nope' matches no node" "$T/err" || fail "$(cat "$T/err")"

# Usage errors exit 2.
usage() {
    set +e
    "$ARB" sim --nodes "$T/nodes.csv" --pods "$T/pods.csv" --policy fgd "$@" 2>"$T/err"
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || fail "$* should exit 2, got $rc"
    grep -q "$want" "$T/err" || fail "$*: $(head -1 "$T/err")"
}
want="need --mode events" usage --queue drf
want="go together" usage --mode events --arrivals poisson:1
want="give G:N:LEVEL" usage --mode events --gangs 8:4:moon
want="use fifo, priority or drf" usage --mode events --queue lifo
want="poisson:RATE" usage --mode events --arrivals uniform:3 --durations "$T/pods.csv"

# bench sim: tasks per second, from a trace directory.
$ARB bench sim --traces "$D" --seeds 42 -o json >"$T/b.json"
grep -q '"bench":"sim","workload":"default","policy":"fgd","seeds":1' "$T/b.json" &&
    grep -q '"tasks_per_s":[1-9]' "$T/b.json" || fail "bench sim: $(cat "$T/b.json")"
$ARB bench sim --traces "$T/none" 2>"$T/err" && fail "bench sim without traces succeeded"
grep -q "give --traces DIR" "$T/err" || fail "bench sim error: $(cat "$T/err")"
echo "sim_events: ok"
