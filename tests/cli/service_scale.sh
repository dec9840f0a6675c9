#!/bin/sh
# Autoscaling and priority across kinds on a live cluster (a real
# controller, two agents of 3 GPUs, real replicas behind a real
# `arbiter lb --service`): a service of 1 replica (max 3, 2 requests in
# flight per replica, window 3 s) under load scales out; its new replicas
# cannot place, so they preempt the lower-priority of two running training
# gangs (whole; the other keeps running), and the events and explain say
# who preempted whom and why; the balancer follows to 3 replicas. The load stops: after the window the service scales in,
# draining replicas before it stops them (a client under light load sees no
# error), and the training gang runs again.
# Then a critical batch job that would need the service's last replica
# (below its minimum) cannot preempt it: it waits, and nothing is evicted.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=service_scale
LBT=$(dirname "$ARB")/tests/arb_lbtest
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms, preemption: true}\nnodes: {lease: 10s, grace: 5s}\n' > "$T/config.yaml"
# (the default lease: nothing here is about a node's death, and a 2 s lease
# once fenced every node while a busy machine delayed the controller's answers)
cl_controller --config "$T/config.yaml"
CL_GPUS=3:H100
cl_agent n1
cl_agent n2
for n in n1 n2; do cl_wait "$n ready" 10 cl_node_ready "$n"; done

PORT0=$((20000 + $$ % 1200 * 10)) # below the ephemeral range; 10 apart per process
cat > "$T/web.yaml" <<EOF2
name: web
kind: service
replicas: 1
minReplicas: 1
port: $PORT0
health: /healthz
priorityClassName: high
autoscale: {maxReplicas: 3, targetInflight: 2, window: 3s, cooldown: 1s, drainTimeout: 20s}
resources: {requests: {nvidia.com/gpu: 1, cpu: 100m, memory: 1Gi}}
command: [sh, -c, 'exec $LBT backend --id web-\$ARBITER_REPLICA --port \$PORT --delay-ms 50']
EOF2
svc=$($ARB submit -f "$T/web.yaml")
rows() { $ARB service web | awk '$1 ~ /^[0-9]+$/'; } # INDEX JOB STATE NODE ADDRESS READY ...
ready() { [ "$(rows | awk '$6 == "yes" && $7 == "no"' | wc -l)" -eq "$1" ]; }
cl_wait "1 ready replica" 20 ready 1
job0=$(rows | awk '$1 == 0 {print $2}')

# training fills the rest of the cluster: gangs of 3 and 2 one-GPU tasks
train=$($ARB submit --gpus 1 --nodes 3 --priority 100 --name train -- sleep 300)
cl_wait "training to run" 15 cl_is "$train" running
hi=$($ARB submit --gpus 1 --nodes 2 --priority 500 --name train-hi -- sleep 300)
cl_wait "training (priority 500) to run" 15 cl_is "$hi" running

$ARB lb --listen 127.0.0.1:0 --service web --controller "$ARBITER_URL" --ready-file "$T/lb.ready" \
    2>>"$T/lb.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "the balancer" 20 test -s "$T/lb.ready"
LBPORT=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$T/lb.ready")

# load: 8 connections, one request at a time each, 50 ms a request:
# about 8 in flight over 1 replica = 4x the target -> 3 (max)
"$LBT" load --port "$LBPORT" --conns 8 --duration-ms 8000 > "$T/load" 2>&1 &
LOADPID=$!
cl_wait "scale out" 15 sh -c "$ARB events | grep -q 'service-scale-out .*1 -> [23] replicas: load [0-9.]* in flight + [0-9.]* queued over 1 replicas = [0-9.]* per replica (target 2.00): recommend [23]'"
cl_wait "3 replicas wanted" 15 sh -c "$ARB events | grep -q 'service-scale-out .* -> 3 replicas'"
cl_wait "training preempted" 15 cl_is "$train" pending
cl_is "$hi" running || cl_fail "the higher-priority gang was preempted: $($ARB job "$hi")"
$ARB events > "$T/ev"
grep -q "job-preempting .*job $train 'train' (priority 100) preempted by job $svc (service 'web', priority 1000) placing replica [12] (job [0-9]*): SIGTERM to its 3 tasks" "$T/ev" ||
    cl_fail "no preemption event naming both: $(grep -i preempt "$T/ev")"
$ARB explain "$train" -o json > "$T/ex"
grep -q "preempted by job $svc (service 'web', priority 1000) placing replica" "$T/ex" ||
    cl_fail "explain: $(cat "$T/ex")"
cl_wait "3 ready replicas" 20 ready 3
cl_wait "the balancer on 3" 10 sh -c "grep 'backends changed' '$T/lb.log' | tail -1 | grep -q ', 3 backends'"
wait "$LOADPID" || cl_fail "load: $(cat "$T/load")"
grep -q '"errors":0' "$T/load" || cl_fail "load errors: $(cat "$T/load")"
for r in 0 1 2; do grep -q "\"web-$r\":[1-9]" "$T/load" || cl_fail "web-$r got nothing: $(cat "$T/load")"; done

# load down to one client (about 1 in flight): after the window, back to 1
# replica, drained first, and the client sees no error while replicas go;
# training back
"$LBT" load --port "$LBPORT" --conns 1 --duration-ms 12000 > "$T/load_in" 2>&1 &
LOADPID=$!
cl_wait "scale in" 25 sh -c "$ARB events | grep -q 'service-scale-in .* -> 1 replicas: load [0-9.]* in flight'"
$ARB events | grep -q "replica-draining .*replica [12] (job [0-9]*) draining" || cl_fail "no drain event"
cl_wait "1 replica left" 25 sh -c "[ \$($ARB service web | awk '\$1 ~ /^[0-9]+\$/' | wc -l) -eq 1 ]"
$ARB events | grep -q "scaled in, drained" || cl_fail "replicas not stopped after draining: $($ARB events | tail)"
cl_wait "the balancer on 1" 10 sh -c "grep 'backends changed' '$T/lb.log' | tail -1 | grep -q ', 1 backends'"
cl_alive "$LOADPID" || cl_fail "the client stopped before the scale-in ended; no overlap to check"
wait "$LOADPID" || cl_fail "load while scaling in: $(cat "$T/load_in")"
grep -q '"errors":0' "$T/load_in" || cl_fail "errors while scaling in: $(cat "$T/load_in")"
grep -q '"ok":[1-9]' "$T/load_in" || cl_fail "no requests while scaling in: $(cat "$T/load_in")"
cl_wait "training to run again" 20 cl_is "$train" running
cl_is "$hi" running || cl_fail "train-hi: $($ARB job "$hi")"
$ARB events | grep "job-preempt" | grep -q "job $hi " && cl_fail "train-hi was preempted: $($ARB events | grep job-preempt)"
[ "$(rows | awk '$1 == 0 {print $2}')" = "$job0" ] || cl_fail "replica 0 was replaced: $(rows)"

# below its minimum a service is never preempted: this job would need it
# (6 GPUs: both training gangs hold 5, the last replica 1)
urgent=$($ARB submit --gpus 3 --nodes 2 --priority 20000 --name urgent -- sleep 300)
cycles() { "$LBT" req --port "$CL_PORT" --path /metrics | sed -n 's/^arbiter_scheduling_cycle_seconds_count //p'; }
c0=$(cycles)
more_cycles() { [ "$(cycles)" -ge $((c0 + 5)) ]; }
cl_wait "5 scheduling cycles over the urgent job" 15 more_cycles
cl_is "$urgent" pending || cl_fail "urgent: $($ARB job "$urgent")"
cl_is "$train" running || cl_fail "training evicted for nothing: $($ARB job "$train")"
cl_is "$hi" running || cl_fail "train-hi evicted for nothing: $($ARB job "$hi")"
ready 1 || cl_fail "replica 0 not ready: $(rows)"
[ "$(rows | awk '$1 == 0 {print $2}')" = "$job0" ] || cl_fail "replica 0 preempted: $(rows)"
echo "service_scale: ok"
