#!/bin/sh
# An agent restarted with its --state reconciles with the controller: the
# task it left running is adopted (same process, same attempt) because it is
# still assigned to the node; a cancel then stops it. An agent restarted
# without state finds nothing to adopt: its task died with it, and the
# controller, seeing a task it believed running missing from the node's
# report, requeues the job, which runs again.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_restart
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 5s, grace: 1s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
cl_agent n1 --state "$T/n1.state"
cl_wait "n1 ready" 10 cl_node_ready n1

job=$($ARB submit --gpus 2 --name adoptee -- sh -c "echo \$\$ >> $T/pids; exec sleep 300")
cl_wait "job $job to run" 15 cl_is "$job" running
cl_wait "its pid" 5 test -s "$T/pids"
TPID=$(cat "$T/pids")

# kill -9 the agent: with --state its task outlives it, to be adopted
kill -9 "$(cat "$T/pid.n1")"
cl_forget_pid "$(cat "$T/pid.n1")"
kill -0 "$TPID" || cl_fail "the task died with an agent that has --state"
cl_agent n1 --state "$T/n1.state"
cl_wait "the restarted agent to adopt its task" 10 grep -q "adopted 1 task" "$T/agent-n1.log"
cl_wait "it to register again" 10 sh -c "grep -c 'registered (epoch' $T/agent-n1.log | grep -q 2"
kill -0 "$TPID" || cl_fail "the adopted task was killed"
[ "$(wc -l < "$T/pids")" -eq 1 ] || cl_fail "the task was started again"
cl_is "$job" running || cl_fail "job $job: $($ARB job "$job")"
[ "$(cl_field "$job" attempt)" = 1 ] || cl_fail "attempt $(cl_field "$job" attempt)"
$ARB cancel "$job" >/dev/null
cl_wait "job $job cancelled" 15 cl_is "$job" cancelled
cl_wait "the adopted task to be stopped" 5 sh -c "! kill -0 $TPID"

# without --state: the task dies with the agent, the controller requeues it
kill -TERM "$(cat "$T/pid.n1")"
wait "$(cat "$T/pid.n1")" 2>/dev/null || true
cl_forget_pid "$(cat "$T/pid.n1")"
: > "$T/agent-n1.log"
cl_agent n1
cl_wait "n1 back" 10 grep -q "registered (epoch" "$T/agent-n1.log"
job2=$($ARB submit --gpus 2 --name orphan -- sh -c "echo \$\$ >> $T/pids2; exec sleep 300")
cl_wait "job $job2 to run" 15 cl_is "$job2" running
cl_wait "its pid" 5 test -s "$T/pids2"
P2=$(cat "$T/pids2")
kill -9 "$(cat "$T/pid.n1")"
cl_forget_pid "$(cat "$T/pid.n1")"
cl_wait "the task to die with its agent" 5 sh -c "! kill -0 $P2"
cl_agent n1
cl_wait "the job's second attempt" 15 sh -c "[ \"\$($ARB job $job2 -o json | sed -n 's/^  \"attempt\": \([0-9]*\),/\1/p')\" = 2 ]"
cl_wait "job $job2 to run again" 15 cl_is "$job2" running
$ARB events | grep -q "task-lost .*no longer has it" || cl_fail "no task-lost event: $($ARB events | tail -5)"
echo "cluster_restart: ok"
