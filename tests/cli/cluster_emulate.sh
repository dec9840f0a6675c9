#!/bin/sh
# `arbiter agent --emulate K` against a real controller: one process plays
# three nodes (emu-1..emu-3, 8 fake GPUs each) whose tasks are timed, not
# processes (--emulate-tasks timed): a gang over all three nodes running
# `sleep 1` runs and succeeds, its log says no process ran, a `sleep 300`
# is cancelled at once (exit 143), and no process of either was started
# (the emulator has no children). Then the same with real processes
# (the default): the task's output is its own.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_emulate
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
$ARB agent --name emu --controller "$ARBITER_URL" --emulate 3 --emulate-tasks timed \
    --heartbeat 250ms --log-dir "$T/logs/emu" --allow-root 2>>"$T/emu.log" &
EPID=$!
CL_PIDS="$CL_PIDS $EPID"
for n in 1 2 3; do cl_wait "emu-$n ready" 10 cl_node_ready "emu-$n"; done

gang=$($ARB submit --gpus 8 --nodes 3 --name gang -- sleep 1)
cl_wait "the gang to run" 10 cl_is "$gang" running
[ -z "$(ps -o pid= --ppid "$EPID")" ] || cl_fail "the emulator started processes: $(ps -o pid,args --ppid "$EPID")"
cl_wait "the gang to succeed" 10 cl_is "$gang" succeeded
$ARB logs "$gang" --task 0 | grep -q '^\[arbiter: emulated task, no process: sleep \.\.\. for 1.000 s\]$' ||
    cl_fail "log: $($ARB logs "$gang" --task 0)"

long=$($ARB submit --gpus 8 --name long -- sleep 300)
cl_wait "job $long to run" 10 cl_is "$long" running
$ARB cancel "$long" >/dev/null
cl_wait "job $long cancelled" 10 cl_is "$long" cancelled
$ARB job "$long" | grep -q "exit 143" || cl_fail "job $long: $($ARB job "$long")"

# usage: --emulate-tasks goes with --emulate, and is real or timed
$ARB agent --name x --emulate-tasks timed >/dev/null 2>"$T/err" && cl_fail "accepted without --emulate"
grep -q "go with --emulate K" "$T/err" || cl_fail "message: $(cat "$T/err")"
$ARB agent --name x --emulate 2 --emulate-tasks fast >/dev/null 2>"$T/err" && cl_fail "accepted 'fast'"
grep -q "use real (processes) or timed" "$T/err" || cl_fail "message: $(cat "$T/err")"

# real processes (the default); the stopped emulator's nodes are drained
# so that nothing waits for their lease to run out
kill -TERM "$EPID"
wait "$EPID" || cl_fail "the emulator exited $?"
cl_forget_pid "$EPID"
for n in 1 2 3; do curl -sf -X POST "$ARBITER_URL/v1/nodes/emu-$n/drain" >/dev/null; done
$ARB agent --name real --controller "$ARBITER_URL" --emulate 1 --heartbeat 250ms \
    --log-dir "$T/logs/real" --allow-root 2>>"$T/emu-real.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "real-1 ready" 10 cl_node_ready real-1
job=$($ARB submit --gpus 1 --name real -- sh -c 'echo "pid $$ on $ARBITER_NODE"')
cl_wait "job $job to succeed" 15 cl_is "$job" succeeded
$ARB logs "$job" | grep -q '^pid [0-9]* on real-1$' || cl_fail "real log: $($ARB logs "$job")"
echo "cluster_emulate: ok"
