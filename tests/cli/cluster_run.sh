#!/bin/sh
# A live cluster on loopback: a real controller and two real agents (fake
# GPUs) over HTTP. Jobs run and report their exit codes (0, 3, 127 for a
# command that does not exist); `arbiter logs` shows a task's output with
# CUDA_VISIBLE_DEVICES, and its stderr in the same log (--err says so); a gang spread over both nodes gets RANK, WORLD_SIZE,
# MASTER_ADDR and MASTER_PORT; a gang member whose GPUs are far less busy
# than its peer's is flagged as a straggler; a cancel stops a running task. Then kill -9
# one agent: its task comes back on the other node once the lease and the
# grace have passed (lease 2 s, grace 1 s).
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_run
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 2s, grace: 1s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
cl_agent n1
cl_agent n2 --fake-busy 10 # its GPUs look 10% busy under a task, n1's 90%: a straggler
cl_wait "n1 ready" 10 cl_node_ready n1
cl_wait "n2 ready" 10 cl_node_ready n2

# exit codes
ok=$($ARB submit --gpus 2 --name ok -- sh -c 'echo "hello from $ARBITER_NODE"; echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"')
bad=$($ARB submit --gpus 1 --name bad -- sh -c 'echo oops >&2; exit 3')
none=$($ARB submit --gpus 1 --name none -- /nonexistent/command)
cl_wait "job $ok to succeed" 15 cl_is "$ok" succeeded
cl_wait "job $bad to fail" 15 cl_is "$bad" failed
cl_wait "job $none to fail" 15 cl_is "$none" failed
$ARB job "$ok" | grep -q "succeeded .*exit 0" || cl_fail "job $ok: $($ARB job "$ok")"
$ARB job "$bad" | grep -q "failed .*exit 3" || cl_fail "job $bad: $($ARB job "$bad")"
$ARB job "$none" | grep -q "failed .*exit 127" || cl_fail "job $none: $($ARB job "$none")"

# logs, where the agent wrote them
$ARB logs "$ok" > "$T/out" || cl_fail "logs $ok"
grep -q "^hello from n[12]$" "$T/out" || cl_fail "logs: $(cat "$T/out")"
grep -Eq "^CUDA_VISIBLE_DEVICES=[0-9],[0-9]$" "$T/out" || cl_fail "logs: $(cat "$T/out")"
# stderr is in the task's one log (no .err made): --err says so, exit 1
$ARB logs "$bad" | grep -q "^oops$" || cl_fail "logs (stderr in it): $($ARB logs "$bad")"
if $ARB logs "$bad" --err >"$T/err.out" 2>"$T/err.err"; then
    cl_fail "logs --err of a merged log succeeded: $(cat "$T/err.out")"
fi
grep -q "its stderr is in its output" "$T/err.err" || cl_fail "logs --err: $(cat "$T/err.err")"

# a gang over both nodes (4 GPUs each): the rendezvous variables
gang=$($ARB submit --gpus 4 --nodes 2 --name gang -- sh -c 'echo "rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"')
cl_wait "the gang to succeed" 15 cl_is "$gang" succeeded
$ARB logs "$gang" > "$T/gang"
grep -q "^rank=0 world=2 master=127.0.0.1:[0-9][0-9]*$" "$T/gang" || cl_fail "gang: $(cat "$T/gang")"
grep -q "^rank=1 world=2 master=127.0.0.1:[0-9][0-9]*$" "$T/gang" || cl_fail "gang: $(cat "$T/gang")"
[ "$(grep -c "^==> task" "$T/gang")" -eq 2 ] || cl_fail "gang logs: $(cat "$T/gang")"

# stragglers: a running gang whose member on n2 keeps its GPUs far less busy
slow=$($ARB submit --gpus 4 --nodes 2 --name slow -- sleep 300)
cl_wait "job $slow to run" 15 cl_is "$slow" running
cl_wait "a straggler flag" 10 sh -c "$ARB explain $slow | grep -q 'straggler: task [01] on node n2 (low-gpu-utilization)'"
$ARB explain "$slow" | grep -q "on node n1" && cl_fail "n1 flagged: $($ARB explain "$slow")"
$ARB events | grep -q "task-straggler .*on node 'n2'.*10% busy, its peers' median 90%" ||
    cl_fail "no straggler event: $($ARB events | tail -3)"
$ARB cancel "$slow" >/dev/null
cl_wait "job $slow to be cancelled" 15 cl_is "$slow" cancelled

# cancel a running task: SIGTERM, reported, cancelled, GPUs free again
long=$($ARB submit --gpus 4 --name long -- sleep 300)
cl_wait "job $long to run" 15 cl_is "$long" running
$ARB cancel "$long" | grep -q "cancel requested" || cl_fail "cancel"
cl_wait "job $long to be cancelled" 15 cl_is "$long" cancelled

# kill -9 the agent running a task: it comes back on the other node
job=$($ARB submit --gpus 4 --name survivor -- sh -c 'echo "attempt on $ARBITER_NODE"; exec sleep 300')
cl_wait "job $job to run" 15 cl_is "$job" running
first=$($ARB job "$job" | sed -n 's/.*running *node \(n[12]\).*/\1/p')
[ -n "$first" ] || cl_fail "no node for job $job: $($ARB job "$job")"
kill -9 "$(cat "$T/pid.$first")"
cl_forget_pid "$(cat "$T/pid.$first")"
other=n1; [ "$first" = n1 ] && other=n2
on_other() { $ARB job "$job" | grep -q "running *node $other"; }
cl_wait "job $job to run on $other" 20 on_other
$ARB events | grep -q "node-lost .*node '$first'" || cl_fail "no node-lost event: $($ARB events | tail)"
$ARB events | grep -q "job-requeued .*job $job" || cl_fail "no requeue event"
[ "$(cl_field "$job" attempt)" = 2 ] || cl_fail "attempt $(cl_field "$job" attempt), not 2"
cl_wait "the new copy's output" 10 sh -c "$ARB logs $job | grep -q 'attempt on $other'"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "cluster_run: ok"
