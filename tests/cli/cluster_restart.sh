#!/bin/sh
# An agent restarted during a task takes it over through its supervisor
# (src/agent/supervise.h), which holds the task while no agent runs, for at
# most the lease: three restarts, each within the lease, each asserting
# that the task kept its process (same pid) and attempt, and that nothing
# ran twice (the task is a witness, cl_witness_task: a second copy would
# find the first's lock held and its pid alive):
#   1. kill -9 of an agent with --state, started again with it;
#   2. kill -9 of an agent without --state, started again without it (the
#      supervisors' records in the log directory are enough);
#   3. a stop (SIGTERM) of an agent started with --keep-tasks, started
#      again (without --keep-tasks a stop kills the tasks).
# A cancel then stops the adopted task, and its exit status comes through
# its supervisor (143: SIGTERM), although the task is not the restarted
# agent's child. Tasks whose agent does not come back in time are fenced by
# their supervisors: tests/cli/cluster_fence_kill.sh.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_restart
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 10s, grace: 1s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"

registered() { # the agent of n1 registered N times
    [ "$(grep -c 'registered (epoch' "$T/agent-n1.log")" -ge "$1" ]
}

cl_agent n1 --state "$T/n1.state"
cl_wait "n1 ready" 10 cl_node_ready n1
job=$($ARB submit --gpus 2 --name adoptee -- sh -c "$(cl_witness_task)")
cl_wait "job $job to run" 15 cl_is "$job" running
cl_wait "its pid" 5 test -s "$T/w.tpid.n1"
TPID=$(cat "$T/w.tpid.n1")
regs=1

restart() { # how, then the new agent's extra args
    how=$1
    shift
    apid=$(cat "$T/pid.n1")
    case $how in
    kill) kill -9 "$apid" ;;
    stop) kill -TERM "$apid" ;;
    esac
    while cl_alive "$apid"; do sleep 0.05; done
    wait "$apid" 2>/dev/null || true
    cl_forget_pid "$apid"
    cl_agent n1 "$@"
    regs=$((regs + 1))
    cl_wait "the restarted agent to adopt its task" 10 sh -c \
        "[ \$(grep -c 'adopted 1 task' $T/agent-n1.log) -ge $((regs - 1)) ]"
    cl_wait "it to register again" 10 registered $regs
    cl_alive "$TPID" || cl_fail "$how: the adopted task was killed"
    cl_check_one_copy 1
    cl_is "$job" running || cl_fail "$how: job $job: $($ARB job "$job")"
    [ "$(cl_field "$job" attempt)" = 1 ] || cl_fail "$how: attempt $(cl_field "$job" attempt)"
    echo "$NAME: $how $*: task $TPID adopted"
}

restart kill --state "$T/n1.state"
restart kill --keep-tasks # no state; and the next stop leaves its tasks
restart stop
$ARB cancel "$job" >/dev/null
cl_wait "job $job cancelled" 15 cl_is "$job" cancelled
cl_wait "the adopted task to be stopped" 5 sh -c "! kill -0 $TPID"
cl_wait "its end through its supervisor" 10 grep -q \
    "job $job task 0 (attempt 1) ended: signal Terminated" "$T/agent-n1.log"
cl_check_one_copy 1
echo "cluster_restart: ok"
