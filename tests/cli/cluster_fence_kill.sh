#!/bin/sh
# Fencing holds after the agent dies (DESIGN.md invariant 4): kill -9 of an
# agent leaves its task to its supervisor, which kills it when the lease
# runs out, before the controller may start it elsewhere. Twice: an agent
# with --state, then one without. Each task is a witness (cl_witness_task):
# every copy proves at its own start, through a lock that only the death of
# the earlier copy releases and through that copy's pid, that no other copy
# lives; so the order is asserted without any timing. Each agent is then
# started again, after its task moved: it finds the task's supervisor gone
# and its exit record (with or without --state), reports that the
# supervisor fenced it, and the controller records it (task-fenced).
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_fence_kill
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 2s, grace: 2s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"

# one round: agent CUT (its extra args after the tag) runs a witness, dies by
# kill -9, and the job goes to node OTHER, started once CUT runs the task
round() {
    tag=$1 cut=$2 other=$3
    shift 3
    cl_agent "$cut" "$@"
    cl_wait "node $cut" 10 cl_node_ready "$cut"
    job=$($ARB submit --gpus 4 --name "$tag" -- sh -c "$(cl_witness_task "$tag")")
    cl_wait "job $job to run" 15 cl_is "$job" running
    cl_wait "the task's pid" 5 test -s "$T/$tag.tpid.$cut"
    tpid=$(cat "$T/$tag.tpid.$cut")
    cl_alive "$tpid" || cl_fail "task pid $tpid is not running"
    cl_agent "$other"
    cl_wait "node $other" 10 cl_node_ready "$other"
    apid=$(cat "$T/pid.$cut")
    kill -9 "$apid"
    cl_forget_pid "$apid"
    killed_at=$(date +%s%N)
    cl_wait "the job on node $other" 30 test -s "$T/$tag.start.$other"
    started_at=$(cat "$T/$tag.start.$other")
    cl_check_one_copy 2 "$tag"
    exitrec=$(cat "$T/logs/$cut/.arbiter/$job.0.task" 2>/dev/null || true)
    case $exitrec in *why=lease*) ;; *) cl_fail "$cut: the exit record says '$exitrec', not why=lease" ;; esac
    echo "$NAME: $tag: agent killed at 0 ms; second copy started at" \
        "$(((started_at - killed_at) / 1000000)) ms; the first was killed by its supervisor"
    # started again: it reports what its supervisor did
    cl_agent "$cut" "$@"
    cl_wait "$cut to tell" 15 grep -q "job $job task 0 (attempt 1): killed by its supervisor" \
        "$T/agent-$cut.log"
    cl_wait "the task-fenced event" 15 sh -c \
        "$ARB events | grep -q \"task-fenced .*job $job task 0 (attempt 1) on node '$cut' was killed by its supervisor\""
    cl_wait "job $job running on $other" 10 sh -c "$ARB job $job | grep -q 'running *node $other'"
    cl_check_one_copy 2 "$tag"
}

round state cut1 other1 --state "$T/cut1.state"
# the second job must go to cut2: other1's GPUs hold the first, cut1 takes no more
curl -sf -X POST "$ARBITER_URL/v1/nodes/cut1/drain" >/dev/null || cl_fail "drain cut1"
round nostate cut2 other2
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "$NAME: ok"
