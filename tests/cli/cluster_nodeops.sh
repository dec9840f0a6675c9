#!/bin/sh
# Node operations, as kubectl and scontrol have them (src/cli/node.c,
# src/state/nodeops.c), on a live cluster: a controller and two agents, n1
# described by an inventory file (labels, a taint, a dataset), n2 with fake
# GPUs. Each check names what it guards:
#   - `arbiter node NAME` shows state, labels, taints, datasets, topology,
#     live telemetry and what runs there, in text and -o json;
#   - label and taint (kubectl's syntax; --overwrite), kept by the
#     controller over the inventory's across an agent restart and a
#     controller kill -9; an inventory taint an operator removed stays
#     removed;
#   - cordon --reason keeps new tasks off, uncordon lets them on; drain
#     evicts what runs (stopped, requeued, run on the other node);
#   - NoExecute evicts a job that does not tolerate it and keeps one that
#     does, set by an operator or by the agent's inventory file (changed
#     while the task runs);
#   - If-Match: a change against an old version is refused and changes
#     nothing;
#   - node names are DNS-1123 labels;
#   - a lost node shows as Lost; `node delete` refuses a Ready node, takes a
#     Lost one (its GPUs leave the totals), and its agent registers anew.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_nodeops
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 2s, grace: 1s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
inventory() { # the n1 inventory file, with an extra taint line (or none)
    cat > "$T/n1.yaml" <<EOF
labels: {rack: r1, zone: z1}
taints:
  - {key: gpu-type, value: h100, effect: PreferNoSchedule}
$1
datasets: [imagenet]
gpus: {count: 4, model: H100, memory: 80Gi}
EOF
}
inventory ""
CL_GPUS=none cl_agent n1 --inventory "$T/n1.yaml" --keep-tasks # a restart keeps its tasks
cl_wait "n1" 10 cl_node_ready n1
node_json() { $ARB node "$1" -o json; }
has() { node_json "$1" | grep -q -- "$2"; }

# the detail view, from the inventory file and the live reports
job=$($ARB submit --gpus 1 --name first -- sleep 300)
cl_wait "job $job to run" 15 cl_is "$job" running
cl_wait "telemetry" 10 sh -c "$ARB node n1 | grep -q '^Telemetry:    cpu'"
$ARB node n1 > "$T/n1.txt"
for want in "State:        Ready (schedulable)" "Labels:       rack=r1, zone=z1" \
    "Taints:       gpu-type=h100:PreferNoSchedule" "Datasets:     imagenet" \
    "Topology:     rack r1, block -, zone z1" "^  0   H100" "^  $job .*first .*running"; do
    grep -q -- "$want" "$T/n1.txt" || cl_fail "node view lacks '$want': $(cat "$T/n1.txt")"
done
node_json n1 | grep -q '"running": \[' || cl_fail "no running list in -o json"

# labels and taints; --overwrite as kubectl
$ARB label n1 team=ml >/dev/null
$ARB label n1 rack=r2 2>"$T/err" && cl_fail "a label changed without --overwrite"
grep -q "give --overwrite" "$T/err" || cl_fail "$(cat "$T/err")"
$ARB label n1 rack=r2 --overwrite zone- >/dev/null
$ARB taint n1 dedicated=infer:NoSchedule gpu-type- >/dev/null
$ARB taint n1 'bad key=x:NoSchedule' 2>"$T/err" && cl_fail "a bad taint key was taken"
grep -q "taint key 'bad key'" "$T/err" || cl_fail "$(cat "$T/err")"
$ARB taint n1 nope:NoSchedule- 2>"$T/err" && cl_fail "removing a taint n1 lacks succeeded"
line() { $ARB node "$1" | grep "^$2:"; } # one line of the node view
check_overlay() { # what operators set holds: $1 names the moment
    l=$(line n1 Labels)
    [ "$l" = "Labels:       rack=r2, team=ml" ] || cl_fail "$1: $l"
    t=$(line n1 Taints)
    [ "$t" = "Taints:       dedicated=infer:NoSchedule" ] || cl_fail "$1: $t"
}
check_overlay "set"
# ... across an agent restart (the inventory is sent again) and a controller kill -9
kill -TERM "$(cat "$T/pid.n1")"
wait "$(cat "$T/pid.n1")" 2>/dev/null || true
cl_forget_pid "$(cat "$T/pid.n1")"
CL_GPUS=none cl_agent n1 --inventory "$T/n1.yaml" --keep-tasks
cl_wait "n1 back" 10 sh -c "grep -c 'registered (epoch' $T/agent-n1.log | grep -q 2"
check_overlay "after the agent restarted"
kill -9 "$CPID"
wait "$CPID" 2>/dev/null || true
cl_forget_pid "$CPID"
cl_controller --config "$T/config.yaml"
check_overlay "after the controller restarted"
$ARB taint n1 dedicated- >/dev/null
cl_is "$job" running || cl_fail "job $job did not survive the restarts: $($ARB job "$job")"

# If-Match: a change against an old version changes nothing
v=$(node_json n1 | sed -n 's/^  "version": \([0-9]*\),/\1/p')
code=$(curl -s -o "$T/reply" -w '%{http_code}' -X PATCH -H "If-Match: $((v - 1))" \
    --data '{"labels": {"late": "yes"}}' "$ARBITER_URL/v1/nodes/n1")
[ "$code" = 409 ] || cl_fail "an old If-Match: $code $(cat "$T/reply")"
line n1 Labels | grep -q late && cl_fail "the refused change was applied"

# names are DNS-1123 labels
code=$(curl -s -o "$T/reply" -w '%{http_code}' -X POST \
    --data '{"inventory": {"cpu": "1", "memory": "1Gi"}}' "$ARBITER_URL/v1/nodes/Bad_Name/report")
[ "$code" = 422 ] && grep -q "DNS-1123" "$T/reply" || cl_fail "a bad node name: $code $(cat "$T/reply")"

# cordon: nothing new there; uncordon: placed
$ARB uncordon n1 >/dev/null # (a no-op: it is in service)
$ARB cordon n1 --reason "disk swap" >/dev/null
has n1 '"reason": "cordoned by [^"]*: disk swap"' || cl_fail "no reason: $(node_json n1 | grep reason)"
$ARB nodes | grep -q "^n1 *Draining" || cl_fail "n1 not shown cordoned"
j2=$($ARB submit --gpus 1 --name waits -- sleep 300)
cl_wait "job $j2 to be considered" 10 sh -c "$ARB explain $j2 | grep -q ."
cl_is "$j2" pending || cl_fail "job $j2 went to a cordoned node: $($ARB job "$j2")"
$ARB uncordon n1 >/dev/null
cl_wait "job $j2 to run on n1" 15 cl_is "$j2" running

# drain: what runs there is evicted and runs on n2
CL_GPUS=4:H100 cl_agent n2
cl_wait "n2" 10 cl_node_ready n2
$ARB drain n1 --reason "reboot" > "$T/drain.txt"
grep -q "2 jobs evicted" "$T/drain.txt" || cl_fail "drain: $(cat "$T/drain.txt")"
cl_wait "both jobs to run on n2" 30 sh -c \
    "$ARB job $job | grep -q 'running *node n2' && $ARB job $j2 | grep -q 'running *node n2'"
$ARB events | grep -q "job-evicted .*job $job .*evicted from node 'n1'" || cl_fail "no job-evicted event"
$ARB uncordon n1 >/dev/null

# NoExecute: a job that does not tolerate it is evicted, one that does stays
$ARB cancel "$job" "$j2" >/dev/null
cl_wait "n2 free" 20 sh -c "$ARB job $job | grep -q cancelled && $ARB job $j2 | grep -q cancelled"
$ARB cordon n2 >/dev/null
cat > "$T/tol.yaml" <<'EOF'
name: tolerant
replicas: 1
resources: {requests: {nvidia.com/gpu: 1}}
tolerations: [{key: evict, operator: Exists, effect: NoExecute}, {key: dedicated, operator: Exists}]
command: [sleep, "300"]
EOF
cat > "$T/intol.yaml" <<'EOF'
name: intolerant
replicas: 1
resources: {requests: {nvidia.com/gpu: 1}}
tolerations: [{key: dedicated, operator: Exists}]
command: [sleep, "300"]
EOF
tol=$($ARB submit -f "$T/tol.yaml")
intol=$($ARB submit -f "$T/intol.yaml")
cl_wait "both on n1" 15 sh -c "$ARB job $tol | grep -q 'running *node n1' && $ARB job $intol | grep -q 'running *node n1'"
$ARB taint n1 evict=now:NoExecute >/dev/null
cl_wait "the intolerant job evicted" 20 sh -c "$ARB events | grep -q 'job-evicted .*job $intol '"
cl_wait "it to be requeued" 20 sh -c "$ARB job $intol | grep -q 'state *pending'"
$ARB events | grep -q "job-evicted .*job $tol " && cl_fail "the tolerating job was evicted"
cl_is "$tol" running || cl_fail "the tolerating job: $($ARB job "$tol")"
$ARB taint n1 evict:NoExecute- >/dev/null
cl_wait "the intolerant job back on n1" 20 sh -c "$ARB job $intol | grep -q 'running *node n1'"
# ... and from the agent's inventory file, changed while tasks run there
inventory "  - {key: maint, value: now, effect: NoExecute}"
apid=$(cat "$T/pid.n1")
kill -TERM "$apid"; wait "$apid" 2>/dev/null || true; cl_forget_pid "$apid"
CL_GPUS=none cl_agent n1 --inventory "$T/n1.yaml" --keep-tasks
cl_wait "the inventory's NoExecute to evict" 20 sh -c "$ARB events | grep -q \"job-evicted .*job $intol .*from its agent's inventory\""
line n1 Taints | grep -q "maint=now:NoExecute" || cl_fail "the inventory taint: $(line n1 Taints)"

# Lost, and delete
$ARB node delete n1 2>"$T/err" && cl_fail "a Ready node was deleted"
grep -q "only a NotReady or Lost node is deleted" "$T/err" || cl_fail "$(cat "$T/err")"
$ARB cancel "$tol" "$intol" >/dev/null 2>&1 || true
cl_wait "n1 empty" 20 sh -c "$ARB job $tol | grep -q cancelled"
apid=$(cat "$T/pid.n1")
kill -9 "$apid"; cl_forget_pid "$apid"
cl_wait "n1 Lost" 20 sh -c "$ARB nodes | grep -q '^n1 *Lost'"
nodes_before=$(curl -sf "$ARBITER_URL/v1/status" | sed -n 's/.*"nodes": *\([0-9]*\).*/\1/p')
$ARB node delete n1 -o json | grep -q '"name": "n1"' || cl_fail "delete of the Lost node"
$ARB nodes | grep -q "^n1 " && cl_fail "the deleted node is still listed"
[ "$(curl -sf "$ARBITER_URL/v1/status" | sed -n 's/.*"nodes": *\([0-9]*\).*/\1/p')" = $((nodes_before - 1)) ] ||
    cl_fail "the node count did not go down"
$ARB events | grep -q "node-deleted .*'n1'" || cl_fail "no node-deleted event"
inventory ""
CL_GPUS=none cl_agent n1 --inventory "$T/n1.yaml"
cl_wait "n1 registered anew" 15 cl_node_ready n1
line n1 Labels | grep -q team && cl_fail "the deleted node's operator labels came back"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "$NAME: ok"
