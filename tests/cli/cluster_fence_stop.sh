#!/bin/sh
# Fencing holds without a live agent (DESIGN.md invariant 4: no two live
# copies of one task, whatever state its agent is in). The agent of node
# cut is frozen with SIGSTOP while its task runs: it can neither renew its
# lease nor kill anything. The task's supervisor (src/agent/supervise.c)
# kills it when the lease it holds runs out, while the agent is still
# stopped; the controller declares the node lost and starts the next
# attempt on node other. The task is a witness (cl_witness_task): each copy
# proves at its own start, through a lock the kernel drops only when the
# last process of a copy dies and through the earlier copies' pids, that no
# other copy lives; so the order is asserted without any timing. Then the
# agent is resumed: it says its supervisor killed the task, reports it, the
# controller records what really happened (task-fenced, by the supervisor),
# and the job still has one copy, on other.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_fence_stop
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 2s, grace: 2s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
cl_agent cut
cl_wait "node cut" 10 cl_node_ready cut

# the task runs on cut first (the only node)
job=$($ARB submit --gpus 4 --name witness -- sh -c "$(cl_witness_task)")
cl_wait "job $job to run" 15 cl_is "$job" running
cl_wait "the task's pid" 5 test -s "$T/w.tpid.cut"
TPID=$(cat "$T/w.tpid.cut")
cl_alive "$TPID" || cl_fail "task pid $TPID is not running"
cl_agent other
cl_wait "node other" 10 cl_node_ready other

APID=$(cat "$T/pid.cut")
CL_CLEANUP="kill -CONT $APID 2>/dev/null || true"
kill -STOP "$APID"
stop_at=$(date +%s%N)

# Invariant 4, without the agent: the task dies while its agent is stopped.
n=0
while cl_alive "$TPID"; do
    n=$((n + 1)); [ $n -lt 600 ] || cl_fail "the stopped agent's task still runs after 60 s"
    sleep 0.1
done
dead_at=$(date +%s%N)
grep -q '^State:[[:space:]]*T' "/proc/$APID/status" ||
    cl_fail "the agent is not stopped: the kill must have come from elsewhere"
exitrec=$(cat "$T"/logs/cut/.arbiter/"$job".0.task 2>/dev/null || true)
case $exitrec in *why=lease*) ;; *) cl_fail "the supervisor's exit record says '$exitrec', not why=lease" ;; esac

# the next attempt, on other; at its start no copy of the first was alive
cl_wait "the job on node other" 30 test -s "$T/w.start.other"
started_at=$(cat "$T/w.start.other")
cl_check_one_copy 2
echo "$NAME: agent stopped at 0 ms; first copy seen dead at $(((dead_at - stop_at) / 1000000)) ms" \
    "(killed by its supervisor); second copy started at $(((started_at - stop_at) / 1000000)) ms"
$ARB events | grep -q "node-lost .*'cut'" || cl_fail "no node-lost event"

# resumed: the agent says what happened, the controller records it
kill -CONT "$APID"
CL_CLEANUP=""
cl_wait "the agent to tell" 15 grep -q "job $job task 0 (attempt 1): killed by its supervisor" \
    "$T/agent-cut.log"
cl_wait "the task-fenced event" 15 sh -c \
    "$ARB events | grep -q \"task-fenced .*job $job task 0 (attempt 1) on node 'cut' was killed by its supervisor\""
cl_wait "node cut to rejoin" 15 sh -c "$ARB events | grep -q \"node-rejoined .*'cut'\""
cl_wait "job $job running on other" 10 sh -c "$ARB job $job | grep -q 'running *node other'"
cl_check_one_copy 2
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "$NAME: ok"
