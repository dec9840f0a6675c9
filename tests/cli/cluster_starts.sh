#!/bin/sh
# Concurrent task starts (issue 20; docs/agent.md "Starting tasks"). A real
# controller and a real agent with 16 fake GPUs whose every task start is
# slowed by 3 s before its exec (ARBITER_AGENT_START_DELAY_MS, a test hook
# in the task, forked by its supervisor). 16 one-GPU jobs started one after
# another, each waiting for its execs, would take 48 s or more:
#   - all 16 tasks are running (each has written its marker file, as a real
#     process) within 30 s of their submission, so the starts overlapped;
#   - the agent's loop was never held by them: its lease (4 s) ran through
#     the starts without a fence, and the node stayed Ready;
#   - a start that fails at its exec (a relative command that is not there,
#     found only by the exec) is reported at once as exit 127, and the job fails;
#   - cancelling the 16 ends every one of them (no task process left).
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_starts
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'nodes: {lease: 4s, grace: 2s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
CL_GPUS=16:H100
ARBITER_AGENT_START_DELAY_MS=3000 cl_agent n1 --lease 4s
cl_wait "n1 ready" 20 cl_node_ready n1
mkdir -p "$T/marks"

ids=""
for i in $(seq 1 16); do
    id=$($ARB submit --gpus 1 -- sh -c "echo \$\$ > '$T/marks/'\$ARBITER_JOB_ID; exec sleep 600")
    ids="$ids $id"
done
all_marked() { [ "$(ls "$T/marks" | wc -l)" -ge 16 ]; }
cl_wait "all 16 tasks running (each start slowed by 3 s: 48 s one at a time)" 30 all_marked
for id in $ids; do cl_is "$id" running || cl_fail "job $id is $(cl_state "$id"), not running"; done
cl_node_ready n1 || cl_fail "n1 is not Ready after the starts"
grep -q FENCED "$T/agent-n1.log" && cl_fail "the agent fenced during the starts (its loop was held)"

# a start that fails at the exec: reported as 127, the job fails
bad=$($ARB submit --gpus 0 -- ./no-such-command-here)
cl_wait "job $bad to fail" 30 cl_is "$bad" failed
$ARB job "$bad" -o json | grep -q '"exit_code": 127' || cl_fail "job $bad: no exit code 127: $($ARB job "$bad" -o json)"
grep -q "job $bad task 0: cannot start './no-such-command-here' (exec): No such file" "$T/agent-n1.log" ||
    cl_fail "the agent's log does not say why job $bad did not start"

# cancel: every task ends, nothing of them is left
# shellcheck disable=SC2086
$ARB cancel $ids >/dev/null
for id in $ids; do cl_wait "job $id to end" 30 sh -c "! $ARB job $id | grep -q 'state     running'"; done
for f in "$T"/marks/*; do
    p=$(cat "$f")
    cl_wait "task pid $p to be gone" 20 sh -c "! kill -0 $p 2>/dev/null"
done
grep -q FENCED "$T/agent-n1.log" && cl_fail "the agent fenced"
echo "cluster_starts: 16 slowed starts ran at once; a failed exec reported 127; all cancelled"
