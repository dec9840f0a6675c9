#!/bin/sh
# Defaults that hold, live (issue 12):
#   - with queues configured, a job without queue: goes to 'default', the
#     quota-less queue (it used to be refused);
#   - the staleness filter acts by default: a node silent for more than
#     half its lease (5 s of 10 s) gets no new work and explain names it,
#     before the lease makes it NotReady (the default used to be 30 s, past
#     lease + grace: it never acted).
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=sched_defaults
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/sched.sh"
command -v jq >/dev/null || { echo "$NAME: skipped: no jq (scripts/deps.sh)"; exit 77; }
cl_init

cat > "$T/config.yaml" <<'EOF'
queues:
  - {name: team-a, nominal: {nvidia.com/gpu: 2}}
EOF
cl_controller --config "$T/config.yaml"
CL_GPUS=2:H100 cl_agent n1
cl_wait "n1 ready" 20 cl_node_ready n1

# no queue: 'default'
id=$($ARB submit --gpus 1 --name plain -- sleep 600) || cl_fail "a job without queue was refused"
[ "$($ARB job "$id" -o json | jq -r .queue)" = default ] || cl_fail "job $id queue: $($ARB job "$id" -o json | jq -r .queue)"
cl_wait "job $id running" 20 cl_is "$id" running
if out=$($ARB submit --gpus 1 --queue nope --name stray -- sleep 1 2>&1); then cl_fail "queue nope accepted: $out"; fi
echo "$out" | grep -q "queue: 'nope' is not configured (queues: team-a, and 'default', the quota-less queue of jobs without queue:)" ||
    cl_fail "refusal: $out"
echo "$NAME: a job without queue: runs in 'default'"

# default staleness: half the lease
big=$($ARB submit --gpus 2 --name waits -- sleep 600)
kill -STOP "$(cat "$T/pid.n1")"
CL_CLEANUP="kill -CONT $(cat "$T/pid.n1") 2>/dev/null || true"
t0=$(date +%s)
k=0
until $ARB explain "$big" | grep -q "left out for a stale report: n1 (last report"; do
    k=$((k + 1))
    [ $k -lt 80 ] || { kill -CONT "$(cat "$T/pid.n1")"; cl_fail "n1 not stale after 8 s: $($ARB explain "$big")"; }
    sleep 0.1
done
t1=$(date +%s)
# "stale report" is said only of a Ready node (a NotReady one is "not
# ready"): the node was stale before the lease made it NotReady. (A second
# call to `arbiter nodes` here could come after the lease on a loaded machine.)
kill -CONT "$(cat "$T/pid.n1")"
echo "$NAME: ok (n1 stale after $((t1 - t0)) s of silence, still Ready: staleness acts before the lease)"
