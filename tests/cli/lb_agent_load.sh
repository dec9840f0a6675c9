#!/bin/sh
# The feedback policy on what the agents report (issue 6): a real
# controller, two agents of one GPU each, a service of two replicas (one
# per node) behind a real `arbiter lb --service`. Agent n1 makes the GPU
# its replica holds look 95% busy (--fake-busy 95), n2 reports it idle.
# The endpoints carry each replica's agent-reported load (gpu_util, queue,
# age_ms); the balancer takes it (its /backends shows gpu 0.95 for the busy
# replica although the replica's own X-Arbiter-Load header carries no GPU
# figure), and the feedback policy sends the busy replica fewer requests
# than the idle one. The same load through round-robin splits evenly, so
# the order check can fail.
#
# Why an order and not a ratio: feedback weighs the agent's report by its
# age (halved every second), and the balancer fetches it once a second.
# On a loaded machine those fetches and the agents' heartbeats run late, the
# report ages, and for a while the busy replica costs little more than the
# idle one (whose own response header counts its request in flight): an
# exact share depends on how late they ran (once: "116 of 300, want <= 60").
# What holds at any load is the order: fewer to the busy replica than to
# the idle one. The exact decision on given loads, ages and latencies is
# tested without a clock in tests/unit/test_lb_policies.c.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=lb_agent_load
LBT=$(dirname "$ARB")/tests/arb_lbtest
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 10s, grace: 5s}\n' > "$T/config.yaml"
# (the default lease: nothing here is about a node's death, and a 2 s lease
# once fenced every node while a busy machine delayed the controller's answers)
cl_controller --config "$T/config.yaml"
CL_GPUS=1:H100
cl_agent n1 --fake-busy 95
cl_agent n2 --fake-busy 0
for n in n1 n2; do cl_wait "$n ready" 10 cl_node_ready "$n"; done

PORT0=$((21000 + $$ % 1200 * 10)) # below the ephemeral range; 10 apart per process
cat > "$T/web.yaml" <<EOF2
name: web
kind: service
replicas: 2
port: $PORT0
health: /healthz
resources: {requests: {nvidia.com/gpu: 1, cpu: 100m, memory: 1Gi}}
command: [sh, -c, 'exec $LBT backend --id web-\$ARBITER_REPLICA --port \$PORT --delay-ms 5']
EOF2
$ARB submit -f "$T/web.yaml" > /dev/null
rows() { $ARB service web | awk '$1 ~ /^[0-9]+$/'; } # INDEX JOB STATE NODE ADDRESS READY ...
ready() { [ "$(rows | awk '$6 == "yes" && $7 == "no"' | wc -l)" -eq 2 ]; }
cl_wait "2 ready replicas" 30 ready
busy=$(rows | awk '$4 == "n1" {print $1}')
idle=$(rows | awk '$4 == "n2" {print $1}')
[ -n "$busy" ] && [ -n "$idle" ] || cl_fail "want one replica per node: $(rows)"
baddr=$(rows | awk '$4 == "n1" {print $5}')
iaddr=$(rows | awk '$4 == "n2" {print $5}')

# the endpoints carry the agent's report: the busy replica's GPU near 0.95,
# the idle one's 0
load_of() { # the replica's "load" object, one line
    $ARB service web -o json | tr -d ' \n' | sed -n "s/.*\"address\":\"$1\",\"load\":{\([^}]*\)}.*/\1/p"
}
agent_busy() { load_of "$baddr" | grep -q '"gpu_util":0\.9[0-9]*,"queue":0,"age_ms":[0-9]*$'; }
cl_wait "the agent's report in the endpoints" 15 agent_busy
load_of "$iaddr" | grep -q '"gpu_util":0\.0*,"queue":0,"age_ms":[0-9]*$' ||
    cl_fail "the idle replica's load: $($ARB service web -o json)"

# share POLICY: start a balancer, wait until it holds the agent's report,
# send N requests one at a time, print the busy replica's count
share() {
    rm -f "$T/lb.ready"
    $ARB lb --listen 127.0.0.1:0 --admin 127.0.0.1:0 --service web --controller "$ARBITER_URL" \
        --policy "$1" --ready-file "$T/lb.ready" 2>>"$T/lb.log" &
    LBPID=$!
    CL_PIDS="$CL_PIDS $LBPID"
    cl_wait "the balancer ($1)" 20 test -s "$T/lb.ready"
    LBPORT=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$T/lb.ready")
    ADPORT=$(sed -n 's/^admin .*:\([0-9]*\)$/\1/p' "$T/lb.ready")
    cl_wait "the balancer to hold the agent's report ($1)" 15 sh -c \
        "'$LBT' req --port $ADPORT --path /backends | grep -q '\"name\":\"$baddr\"[^}]*\"gpu\":0.9'"
    "$LBT" load --port "$LBPORT" --conns 1 --requests $N > "$T/load.$1" 2>&1 ||
        cl_fail "load ($1): $(cat "$T/load.$1")"
    grep -q '"errors":0' "$T/load.$1" || cl_fail "load errors ($1): $(cat "$T/load.$1")"
    "$LBT" req --port "$ADPORT" --path /backends > "$T/backends.$1"
    kill -TERM "$LBPID"
    rc=0
    wait "$LBPID" || rc=$?
    [ "$rc" = 0 ] || cl_fail "the balancer ($1) did not stop cleanly (exit $rc): $(tail "$T/lb.log")"
    sed -n "s/.*\"web-$busy\":\([0-9]*\).*/\1/p" "$T/load.$1"
}
N=200
fb=$(share feedback)
rr=$(share round-robin)
echo "lb_agent_load: busy replica (GPU 95%) got ${fb:-0} of $N with feedback, ${rr:-0} of $N with round-robin"
# feedback: the busy replica gets fewer than the idle one (an order, not a share)
[ $((2 * ${fb:-0})) -lt "$N" ] ||
    cl_fail "feedback: the busy replica got $fb of $N (want fewer than the idle one): $(cat "$T/load.feedback") $(cat "$T/backends.feedback")"
# round-robin alternates over the two, whatever the load
[ $((2 * ${rr:-0})) -ge $((N - 2)) ] && [ $((2 * ${rr:-0})) -le $((N + 2)) ] ||
    cl_fail "round-robin: the busy replica got $rr of $N (want half): $(cat "$T/load.round-robin")"
echo "lb_agent_load: ok"
