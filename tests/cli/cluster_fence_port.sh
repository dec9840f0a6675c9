#!/bin/sh
# Self-fencing across a blocked port, for machines where a network
# namespace cannot be made (not root, no iproute2): cluster_fence.sh's
# story without root. The agent reaches the controller only through a
# relay on its own loopback port (a real `arbiter lb`, round robin over the
# one controller, no health checks, never ejecting); the test blocks that
# port by freezing the relay (SIGSTOP): connections are accepted by the
# kernel and then nothing answers, as with a cut cable that drops packets.
# The agent must kill its task (fence) when its lease runs out, and the
# controller may start the task's next attempt on the other node only
# after that: the test records when the first copy died and when the
# second started, and requires the order. Then the port opens again
# (SIGCONT): the fenced agent registers again, and the job still has one
# copy. Runs as any user.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_fence_port
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

# grace 2 s: twice the minimum, so a loaded CI machine cannot blur the order
printf 'scheduler: {interval: 200ms}\nnodes: {lease: 2s, grace: 2s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"

# the relay: the agent's only way to the controller
$ARB lb --listen 127.0.0.1:0 --backend "127.0.0.1:$CL_PORT" --ready-file "$T/relay.ready" \
    --eject-after 0 --slow-start 0 --retries 0 --connect-timeout 1000 2>>"$T/relay.log" &
RPID=$!
CL_PIDS="$CL_PIDS $RPID"
CL_CLEANUP="kill -CONT $RPID 2>/dev/null || true"
cl_wait "the relay" 10 grep -q '^listen ' "$T/relay.ready"
RELAY=http://127.0.0.1:$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$T/relay.ready")

CL_AGENT_URL=$RELAY
cl_agent cut
cl_wait "node cut, through the relay" 10 cl_node_ready cut

# the task runs there first (the only node), recording its pid and start time
job=$($ARB submit --gpus 4 --name fenced -- sh -c \
    "echo \$\$ > $T/pid.\$ARBITER_NODE.\$ARBITER_EPOCH; date +%s%N > $T/start.\$ARBITER_NODE; exec sleep 300")
cl_wait "job $job to run" 15 cl_is "$job" running
# non-empty: the shell creates the file before it writes the pid (one write)
cl_wait "the task's pid" 5 sh -c "cat $T/pid.cut.* 2>/dev/null | grep -q ."
TPID=$(cat "$T"/pid.cut.*)
kill -0 "$TPID" || cl_fail "task pid $TPID is not running"

# a second node, straight to the controller, ready to take it
CL_AGENT_URL=$ARBITER_URL
cl_agent other
cl_wait "node other" 10 cl_node_ready other

kill -STOP "$RPID"
cut_at=$(date +%s%N)
# the first copy must die (fenced) before the second starts
cl_check_fenced "$TPID" "$cut_at" blocked

# the port opens again: the fenced agent registers again, one copy runs
kill -CONT "$RPID"
cl_wait "node cut to rejoin" 15 sh -c "$ARB events | grep -q \"node-rejoined .*'cut'\""
cl_wait "node cut ready" 10 cl_node_ready cut
# the task started on other before the port opened; its agent's next report
# says so (until then the controller shows it assigned): wait for that, then
# check it stayed there
cl_wait "job $job running on other" 10 sh -c "$ARB job $job | grep -q 'running *node other'"
[ "$(ls "$T"/pid.cut.* | wc -l)" -eq 1 ] || cl_fail "the task started again on the fenced node"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "cluster_fence_port: ok"
