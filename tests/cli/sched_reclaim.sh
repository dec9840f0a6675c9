#!/bin/sh
# No preemption livelock, live (issue 12; cycle.c invariant 1).
#
# Two queues of one cohort, 4 GPUs nominal each, 4 more borrowable. Team A's
# job takes all 8 GPUs (4 borrowed) and runs; team B's job of the same
# priority arrives within B's nominal quota. B reclaims: A's job is stopped
# once (SIGTERM, its grace, SIGKILL), B's runs on its room, and A's job waits
# for quota: it is never placed back into B's room (it was, in a loop,
# thousands of times a second when not yet started, and again after every
# grace when running). The event is named a reclaim, and explain says so.
# Then the same with priority preemption under fifo order (the victim is
# older, so fifo would try it first): the preemptor runs, the victim is
# evicted once.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=sched_reclaim
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/sched.sh"
command -v jq >/dev/null || { echo "$NAME: skipped: no jq (scripts/deps.sh)"; exit 77; }
cl_init

cat > "$T/config.yaml" <<'EOF'
scheduler: {queue: priority, preemption: true, interval: 200ms}
queues:
  - {name: team-a, cohort: research, nominal: {nvidia.com/gpu: 4}, borrowingLimit: {nvidia.com/gpu: 4}}
  - {name: team-b, cohort: research, nominal: {nvidia.com/gpu: 4}, borrowingLimit: {nvidia.com/gpu: 4}}
EOF
cl_controller --config "$T/config.yaml"
CL_GPUS=8:H100 cl_agent n1 --grace 1s
cl_wait "n1 ready" 20 cl_node_ready n1

cat > "$T/a.yaml" <<'EOF'
name: a-borrows
queue: team-a
resources: {requests: {nvidia.com/gpu: 8}}
command: [sleep, "3600"]
EOF
cat > "$T/b.yaml" <<'EOF'
name: b-within
queue: team-b
resources: {requests: {nvidia.com/gpu: 4}}
command: [sleep, "3600"]
EOF
a=$(sc_submit "$T/a.yaml")
cl_wait "job $a running" 20 cl_is "$a" running
b=$(sc_submit "$T/b.yaml")
cl_wait "job $b running" 30 cl_is "$b" running
sleep 5 # ample time to loop: every cycle (200 ms) and every grace (1 s)
cl_is "$b" running || cl_fail "job $b stopped running: $($ARB job "$b")"
n=$(sc_events_n job-reclaiming "$a")
placed=$(sc_events_n job-placed "$a")
[ "$n" -eq 1 ] || cl_fail "job $a reclaimed $n times (want 1): $($ARB events | tail -8)"
[ "$placed" -eq 1 ] || cl_fail "job $a placed $placed times (want 1): $($ARB events | tail -8)"
[ "$(sc_state "$a")" = pending ] || cl_fail "job $a is $(sc_state "$a")"
$ARB events | grep -q "job-reclaiming .*job $a 'a-borrows' of queue 'team-a', which borrows above its nominal quota, quota reclaimed by job $b 'b-within' of queue 'team-b'" ||
    cl_fail "no reclaim event: $($ARB events | tail -5)"
$ARB explain "$a" | grep -q "waiting for quota: queue 'team-a' GPU quota: it needs to borrow 4 GPUs above its nominal, but its cohort has 0 GPUs idle" ||
    cl_fail "explain: $($ARB explain "$a")"
$ARB explain "$a" | grep -q "last: requeued: quota reclaimed by job $b 'b-within' of queue 'team-b', within its nominal quota" ||
    cl_fail "explain does not name the reclaim: $($ARB explain "$a")"
echo "$NAME: reclaim: job $a evicted once, job $b runs, no loop"

# Priority preemption under fifo: the older victim is tried after its preemptor.
for p in $CL_PIDS; do kill -TERM "$p" 2>/dev/null || true; done
for p in $CL_PIDS; do wait "$p" 2>/dev/null || true; done
CL_PIDS=""
CL_PORT=
rm -rf "$T/d"
printf 'scheduler: {queue: fifo, preemption: true, interval: 200ms}\n' > "$T/fifo.yaml"
cl_controller --config "$T/fifo.yaml"
CL_GPUS=8:H100 cl_agent n1 --grace 1s
cl_wait "n1 ready" 20 cl_node_ready n1
low=$($ARB submit --gpus 8 --name low -- sleep 3600)
cl_wait "job $low running" 20 cl_is "$low" running
high=$($ARB submit --gpus 8 --priority 1000 --name high -- sleep 3600)
cl_wait "job $high running" 30 cl_is "$high" running
sleep 4
cl_is "$high" running || cl_fail "job $high stopped: $($ARB job "$high")"
n=$(sc_events_n job-preempting "$low")
[ "$n" -eq 1 ] || cl_fail "job $low preempted $n times (want 1): $($ARB events | tail -8)"
[ "$(sc_events_n job-placed "$low")" -eq 1 ] || cl_fail "job $low placed again: $($ARB events | tail -8)"
echo "$NAME: ok (reclaim and fifo-order priority preemption: one eviction each, no loop)"
