#!/bin/sh
# Self-fencing across a real network cut (DESIGN.md invariant 4: no two live
# copies of one task). An agent runs in a network namespace this test
# makes, joined to the host by a veth pair; the controller listens on the
# host end (with bearer tokens, since it is not loopback). A task runs
# there; the veth is cut. The agent must kill the task (fence) when its
# lease runs out, and the controller may start the task's next attempt on
# the other node only after that: the test records when the first copy
# died and when the second started, and requires the order. Then the link
# comes back: the fenced agent registers again, and the job still has one
# copy. Needs root and `ip netns` (CI runs as root); skipped otherwise, where
# cluster_fence_port.sh (a blocked port instead of a cut veth) still runs.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_fence
. "$SRC/tests/cli/lib/cluster.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1; then
    echo "cluster_fence: SKIPPED: needs root and ip (iproute2) for a network namespace"
    exit 77 # CTest: skipped
fi
NS=arbt$$
VH=avh$$
VN=avn$$
NET=10.213.$(($$ % 250)).
if ! ip netns add "$NS" 2>/dev/null; then
    echo "cluster_fence: SKIPPED: cannot make a network namespace here"
    exit 77 # CTest: skipped
fi
cl_init
CL_CLEANUP="ip link del $VH 2>/dev/null; ip netns del $NS 2>/dev/null"
ip link add "$VH" type veth peer name "$VN"
ip link set "$VN" netns "$NS"
ip addr add "${NET}1/30" dev "$VH"
ip link set "$VH" up
ip netns exec "$NS" ip addr add "${NET}2/30" dev "$VN"
ip netns exec "$NS" ip link set "$VN" up
ip netns exec "$NS" ip link set lo up

ADMIN=admin-token-fence-0123456789
AGENT=agent-token-fence-0123456789 AGENT2=agent2-token-fence-0123456789
# one token per node: an agent acts as its own node only (docs/security.md)
printf '%s admin ops root\n%s agent nodes cut\n%s agent nodes other\n' "$ADMIN" "$AGENT" "$AGENT2" \
    > "$T/tokens"
printf '%s\n' "$AGENT" > "$T/agent.token"
printf '%s\n' "$AGENT2" > "$T/agent2.token"
chmod 600 "$T/tokens" "$T/agent.token" "$T/agent2.token"
# grace 2 s: twice the minimum, so a loaded CI machine cannot blur the order
printf 'scheduler: {interval: 200ms}\nnodes: {lease: 2s, grace: 2s}\n' > "$T/config.yaml"
CL_HOST=${NET}1
ARBITER_TOKEN=$ADMIN
# plain HTTP on the veth (a test network of its own): said explicitly
cl_controller --config "$T/config.yaml" --tokens "$T/tokens" --insecure-plain-http

# the agent inside the namespace: its only way to the controller is the veth
ip netns exec "$NS" $ARB agent --name cut --controller "$ARBITER_URL" --token-file "$T/agent.token" \
    --fake-gpus 4:H100 --log-dir "$T/logs/cut" --allow-root --cgroups none --heartbeat 250ms \
    2>>"$T/agent-cut.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "the namespaced node" 10 cl_node_ready cut

# the task runs there first (the only node), recording its pid and start time
job=$($ARB submit --gpus 4 --name fenced -- sh -c \
    "echo \$\$ > $T/pid.\$ARBITER_NODE.\$ARBITER_EPOCH; date +%s%N > $T/start.\$ARBITER_NODE; exec sleep 300")
cl_wait "job $job to run" 15 cl_is "$job" running
# non-empty: the shell creates the file before it writes the pid (one write)
cl_wait "the task's pid" 5 sh -c "cat $T/pid.cut.* 2>/dev/null | grep -q ."
TPID=$(cat "$T"/pid.cut.*)
kill -0 "$TPID" || cl_fail "task pid $TPID is not running"

# a second node on the host side, ready to take it
CL_AGENT_URL=$ARBITER_URL
cl_agent other --token-file "$T/agent2.token"
cl_wait "node other" 10 cl_node_ready other

ip link set "$VH" down
cut_at=$(date +%s%N)
# the first copy must die (fenced) before the second starts
cl_check_fenced "$TPID" "$cut_at" cut

# the link comes back: the fenced agent registers again, one copy runs
ip link set "$VH" up
cl_wait "node cut to rejoin" 15 sh -c "$ARB events | grep -q \"node-rejoined .*'cut'\""
cl_wait "node cut ready" 10 cl_node_ready cut
$ARB job "$job" | grep -q "running *node other" || cl_fail "job moved: $($ARB job "$job")"
[ "$(ls "$T"/pid.cut.* | wc -l)" -eq 1 ] || cl_fail "the task started again on the fenced node"
curl -sf -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/check" | grep -q '"ok":true' ||
    cl_fail "allocation check"
echo "cluster_fence: ok"
