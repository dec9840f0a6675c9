#!/bin/sh
# Service jobs on a live cluster (a real controller, three real agents,
# real replica processes, a real `arbiter lb --service`): a service of 3
# replicas (tests/lbtest backends listening on $PORT) becomes ready and the
# balancer spreads requests over all three; kill -9 a replica's process: it
# fails, comes back after its backoff, and the balancer follows (it leaves
# the set, then returns); kill -9 the agent of a node holding a replica: the
# replica is placed on another node once the node is lost (lease 2 s, grace
# 1 s), and the balancer follows; bad service specs are refused with the
# field named; cancelling the service stops every replica and leaves the
# balancer answering 503; a balancer for no such service refuses to start.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=service
LBT=$(dirname "$ARB")/tests/arb_lbtest
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 2s, grace: 1s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
CL_GPUS=2:H100
cl_agent n1
cl_agent n2
cl_agent n3
for n in n1 n2 n3; do cl_wait "$n ready" 10 cl_node_ready "$n"; done

# bad specs: the field and the fix, nothing submitted
printf 'name: bad\nkind: service\nreplicas: 2\ncommand: [sleep, "9"]\n' > "$T/bad1.yaml"
$ARB submit -f "$T/bad1.yaml" 2>"$T/err" && cl_fail "a service without a port was accepted"
grep -q "a service needs port" "$T/err" || cl_fail "bad1: $(cat "$T/err")"
printf 'name: bad\nkind: daemon\nport: 9\ncommand: [sleep, "9"]\n' > "$T/bad2.yaml"
$ARB submit -f "$T/bad2.yaml" 2>"$T/err" && cl_fail "kind daemon was accepted"
grep -q "kind 'daemon': use batch (the default) or service" "$T/err" || cl_fail "bad2: $(cat "$T/err")"
printf 'name: bad\nport: 9000\ncommand: [sleep, "9"]\n' > "$T/bad3.yaml"
$ARB submit -f "$T/bad3.yaml" 2>"$T/err" && cl_fail "a port on a batch job was accepted"
grep -q "only a service has 'port'; add kind: service" "$T/err" || cl_fail "bad3: $(cat "$T/err")"
$ARB queue | grep -q "^(no jobs)$" || cl_fail "a bad spec left a job: $($ARB queue)"

PORT0=$((20000 + $$ % 1200 * 10)) # below the ephemeral range; 10 apart per process
cat > "$T/web.yaml" <<EOF2
name: web
kind: service
replicas: 3
port: $PORT0
health: /healthz
priorityClassName: high
resources: {requests: {nvidia.com/gpu: 1, cpu: 1, memory: 1Gi}}
command: [sh, -c, 'echo \$\$ > $T/pid.web-\$ARBITER_REPLICA; exec $LBT backend --id web-\$ARBITER_REPLICA --port \$PORT']
EOF2
svc=$($ARB submit -f "$T/web.yaml")
rows() { $ARB service web | awk '$1 ~ /^[0-9]+$/'; } # INDEX JOB STATE NODE ADDRESS READY ...
ready() { [ "$(rows | awk '$6 == "yes"' | wc -l)" -eq "$1" ]; }
cl_wait "3 ready replicas" 20 ready 3
$ARB service web > "$T/svc" || cl_fail "arbiter service web"
grep -q "^service web (job $svc): 3 replicas (min 3), port $PORT0, health /healthz" "$T/svc" ||
    cl_fail "service: $(cat "$T/svc")"

$ARB lb --listen 127.0.0.1:0 --service web --controller "$ARBITER_URL" --ready-file "$T/lb.ready" \
    2>>"$T/lb.log" &
LBPID=$!
CL_PIDS="$CL_PIDS $LBPID"
cl_wait "the balancer" 20 test -s "$T/lb.ready"
LBPORT=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$T/lb.ready")
load() { "$LBT" load --port "$LBPORT" --conns 3 --requests "$1"; }
load 300 > "$T/l1"
grep -q '"ok":300,"errors":0' "$T/l1" || cl_fail "load: $(cat "$T/l1")"
for r in 0 1 2; do grep -q "\"web-$r\":100" "$T/l1" || cl_fail "web-$r not balanced: $(cat "$T/l1")"; done

# kill -9 replica 1's process: restarted (new job), and the balancer follows
job1=$(rows | awk '$1 == 1 {print $2}')
$ARB job "$svc" | grep -q "^  service   3 replicas (min 3), port $PORT0: arbiter service web$" ||
    cl_fail "job $svc: $($ARB job "$svc")"
$ARB job "$job1" | grep -q "^  service   replica 1 of service 'web' (job $svc)$" ||
    cl_fail "job $job1: $($ARB job "$job1")"
$ARB job "$job1" -o json | grep -q "\"PORT\": \"$((PORT0 + 1))\"" || cl_fail "PORT: $($ARB job "$job1" -o json)"
pid=$(cat "$T/pid.web-1") # written by the replica's own shell before it execs
kill -9 "$pid" || cl_fail "no process $pid for replica 1"
cl_wait "replica 1 to fail" 15 sh -c "$ARB events | grep -q \"replica-restarting .*replica 1 (job $job1) failed, exit 137; restart 1 in 1.0 s\""
cl_wait "the balancer to drop replica 1" 10 grep -q "backends changed, 2 backends" "$T/lb.log"
back1() { rows | awk -v j="$job1" '$1 == 1 && $2 != j && $6 == "yes"' | grep -q .; }
cl_wait "replica 1 to come back" 20 back1
cl_wait "the balancer to take it back" 10 sh -c "grep 'backends changed' '$T/lb.log' | tail -1 | grep -q ', 3 backends'"
load 300 > "$T/l2"
grep -q '"ok":300,"errors":0' "$T/l2" || cl_fail "load after restart: $(cat "$T/l2")"
grep -q '"web-1":100' "$T/l2" || cl_fail "web-1 not back in the set: $(cat "$T/l2")"

# kill -9 the agent of replica 0's node: the replica moves to another node
node0=$(rows | awk '$1 == 0 {print $4}')
kill -9 "$(cat "$T/pid.$node0")"
cl_forget_pid "$(cat "$T/pid.$node0")"
# the lost agent's replica processes die with it (an agent's tasks are its
# own process groups: stop them as the node's death would)
kill -9 "$(cat "$T/pid.web-0")" 2>/dev/null || true
moved0() { rows | awk -v n="$node0" '$1 == 0 && $4 != n && $4 != "-" && $6 == "yes"' | grep -q .; }
cl_wait "replica 0 elsewhere" 30 moved0
$ARB events | grep -q "node '$node0'.*lost" || cl_fail "no node-lost event: $($ARB events | tail -5)"
cl_wait "the balancer with 3 backends" 10 sh -c "grep 'backends changed' '$T/lb.log' | tail -1 | grep -q ', 3 backends'"
load 300 > "$T/l3"
grep -q '"ok":300,"errors":0' "$T/l3" || cl_fail "load after the node died: $(cat "$T/l3")"
for r in 0 1 2; do grep -q "\"web-$r\":100" "$T/l3" || cl_fail "web-$r: $(cat "$T/l3")"; done

# cancel the service: every replica stops, then the service
$ARB cancel "$svc" >/dev/null
cl_wait "the service to end" 20 cl_is "$svc" cancelled
$ARB queue | grep -q "^(no jobs)$" || cl_fail "replicas left: $($ARB queue)"
# the balancer empties its set and answers 503 (no backend), not 502 from
# replicas that are gone
cl_wait "the balancer with 0 backends" 15 sh -c "grep 'backends changed' '$T/lb.log' | tail -1 | grep -q ', 0 backends'"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$LBPORT/")
[ "$code" = 503 ] || cl_fail "lb with the service gone answered $code, not 503"
# a balancer for a service that does not exist refuses to start, naming it
$ARB lb --listen 127.0.0.1:0 --service nosuch --controller "$ARBITER_URL" 2>"$T/err" &&
    cl_fail "lb --service nosuch started"
grep -q "service 'nosuch' at .*: no such running service" "$T/err" || cl_fail "nosuch: $(cat "$T/err")"

# SIGTERM stops the balancer cleanly: exit 0, not death by the signal (its watch
# threads must block it too)
kill -TERM "$LBPID"
rc=0
wait "$LBPID" || rc=$?
cl_forget_pid "$LBPID"
[ "$rc" = 0 ] || cl_fail "lb --service: SIGTERM gave exit $rc, not 0: $(tail -3 "$T/lb.log")"
echo "service: ok"
