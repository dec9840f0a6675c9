#!/bin/sh
# Gangs whose gangMin is below their size, live (issue 12): on a node with
# room for 2 of its 4 one-GPU tasks, gangMin 2 tasks start together, the
# other two start as the first ones end (each ended task's GPU is freed at
# once), and the job succeeds only once all four have run and exited 0 (it
# used to end `succeeded` with tasks 2 and 3 never run). A failed task lets
# no more of its gang start, and the job fails.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=sched_gang
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/sched.sh"
command -v jq >/dev/null || { echo "$NAME: skipped: no jq (scripts/deps.sh)"; exit 77; }
cl_init

printf 'scheduler: {interval: 200ms}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
CL_GPUS=2:H100 cl_agent n1
cl_wait "n1 ready" 20 cl_node_ready n1

cat > "$T/g.yaml" <<EOF
name: rolling
replicas: 4
gangMin: 2
resources: {requests: {nvidia.com/gpu: 1}}
command: [sh, -c, "date +%s%N > $T/ran.\$ARBITER_TASK_INDEX; echo \$WORLD_SIZE > $T/world.\$ARBITER_TASK_INDEX; sleep 2"]
EOF
g=$(sc_submit "$T/g.yaml")
cl_wait "job $g to run" 20 cl_is "$g" running
sleep 0.5
for t in 2 3; do
    [ ! -e "$T/ran.$t" ] || cl_fail "task $t started with tasks 0 and 1: no room for it"
done
cl_wait "job $g to succeed" 40 cl_is "$g" succeeded
for t in 0 1 2 3; do
    test -s "$T/ran.$t" || cl_fail "task $t never ran"
    [ "$(cat "$T/world.$t")" = 4 ] || cl_fail "task $t: WORLD_SIZE $(cat "$T/world.$t"), not 4"
done
[ "$(cat "$T/ran.2")" -gt "$(cat "$T/ran.0")" ] || cl_fail "task 2 ran before task 0 ended"
$ARB events | grep -q "job-tasks-started .*job $g 'rolling': task 2 of 4 started as room freed\|job-tasks-started .*job $g 'rolling': tasks 2..3 of 4 started" ||
    cl_fail "no job-tasks-started event: $($ARB events | grep "job $g" | tail -6)"
echo "$NAME: job $g: 2 tasks together, 2 more as room freed, succeeded after all 4"

cat > "$T/f.yaml" <<EOF
name: breaks
replicas: 3
gangMin: 1
resources: {requests: {nvidia.com/gpu: 2}}
command: [sh, -c, "date +%s%N > $T/f.\$ARBITER_TASK_INDEX; exit 3"]
EOF
f=$(sc_submit "$T/f.yaml")
cl_wait "job $f to fail" 30 cl_is "$f" failed
sleep 1
[ -e "$T/f.0" ] || cl_fail "task 0 never ran"
[ ! -e "$T/f.1" ] || cl_fail "task 1 started after task 0 failed"
echo "$NAME: ok"
