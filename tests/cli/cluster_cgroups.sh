#!/bin/sh
# Two clusters on one machine, each with an agent named node-1 running its
# job 1 task 0 in real cgroups: each agent keeps its tasks' cgroups in its
# own subtree (arbiter/NODE-HASH/JOB.TASK), so cancelling cluster A's job 1
# leaves cluster B's job 1 running. (They used to share arbiter/1.0, and
# A's stop killed the whole cgroup, B's task with it: the demo's "no node
# with job 5 on all 8 GPUs" when two test runs overlapped.) An agent that
# restarts uses the same subtree. Skipped (77) where cgroups cannot be
# written (not root, read-only cgroupfs).
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_cgroups
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\n' > "$T/config.yaml"
# cluster B: a second controller and its own node-1
mkdir -p "$T/b"
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/b/d" --config "$T/config.yaml" \
    2>>"$T/controller-b.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "controller B" 20 test -s "$T/b/d/url"
URL_B=$(cat "$T/b/d/url")
# cluster A (ARBITER_URL)
cl_controller --config "$T/config.yaml"
URL_A=$ARBITER_URL

agent() { # agent CLUSTER URL: node-1 of that cluster, with cgroups
    $ARB agent --name node-1 --controller "$2" --fake-gpus 4:H100 --log-dir "$T/$1/logs" \
        --allow-root --cgroups auto --heartbeat 250ms --grace 2s 2>>"$T/agent-$1.log" &
    CL_PIDS="$CL_PIDS $!"
    echo $! > "$T/pid.$1"
}
agent a "$URL_A"
mkdir -p "$T/b/logs"
agent b "$URL_B"
cl_wait "A's node-1" 20 cl_node_ready node-1
cl_wait "B's node-1" 20 sh -c "ARBITER_URL=$URL_B $ARB nodes | grep -Eq '^node-1 +Ready '"
cl_wait "agent a's start" 20 grep -q "registered" "$T/agent-a.log"
if grep -q "no usable cgroups\|cgroups off" "$T/agent-a.log"; then
    echo "cluster_cgroups: skipped: $(grep -o 'no usable cgroups.*' "$T/agent-a.log" | head -1)"
    exit 77
fi

for c in a b; do
    url=$URL_A
    [ $c = b ] && url=$URL_B
    id=$(ARBITER_URL=$url $ARB submit --gpus 1 --name "job-$c" -- \
        sh -c "echo \$\$ > $T/$c.pid; exec sleep 3600")
    [ "$id" = 1 ] || cl_fail "cluster $c: job id $id, wanted 1 (the same name in both)"
    cl_wait "cluster $c job 1 running" 20 sh -c "ARBITER_URL=$url $ARB job 1 | grep -q 'state     running'"
    cl_wait "cluster $c task's pid" 10 test -s "$T/$c.pid"
done
PA=$(cat "$T/a.pid")
PB=$(cat "$T/b.pid")
# the tasks' cgroups: the same job and task, each under its own agent's subtree
grep -q "/arbiter/node-1-[0-9a-f]*/1\.0$" "/proc/$PA/cgroup" ||
    cl_fail "task A's cgroups: $(cat "/proc/$PA/cgroup")"
[ "$(grep /arbiter/ "/proc/$PA/cgroup")" != "$(grep /arbiter/ "/proc/$PB/cgroup")" ] ||
    cl_fail "both tasks in the same cgroups: $(grep /arbiter/ "/proc/$PA/cgroup")"

# cancel A's job: its agent kills A's task and its cgroup, and nothing else
ARBITER_URL=$URL_A $ARB cancel 1 >/dev/null
cl_wait "cluster A job 1 cancelled" 20 sh -c "ARBITER_URL=$URL_A $ARB job 1 | grep -q 'state     cancelled'"
! cl_alive "$PA" || cl_fail "task A (pid $PA) outlived its cancel"
cl_alive "$PB" || cl_fail "cluster B's task (pid $PB) died with cluster A's job 1"
ARBITER_URL=$URL_B $ARB job 1 | grep -q 'state     running' ||
    cl_fail "cluster B job 1: $(ARBITER_URL=$URL_B $ARB job 1)"

# A restarted agent uses the same subtree (it adopts its tasks' cgroups by name)
SCOPE_B=$(sed -n 's|.*/arbiter/\(node-1-[0-9a-f]*\)/1\.0$|\1|p' "/proc/$PB/cgroup" | head -1)
kill -TERM "$(cat "$T/pid.b")"
cl_wait "agent b to stop" 20 sh -c "! kill -0 $(cat "$T/pid.b") 2>/dev/null"
cl_forget_pid "$(cat "$T/pid.b")"
agent b "$URL_B"
cl_wait "agent b registered again" 20 sh -c "[ \$(grep -c registered $T/agent-b.log) -ge 2 ]"
id=$(ARBITER_URL=$URL_B $ARB submit --gpus 1 --name again -- sh -c "echo \$\$ > $T/b2.pid; exec sleep 3600")
cl_wait "cluster B job $id's pid" 20 test -s "$T/b2.pid"
grep -q "/arbiter/$SCOPE_B/$id\.0$" "/proc/$(cat "$T/b2.pid")/cgroup" ||
    cl_fail "restarted agent b: $(cat "/proc/$(cat "$T/b2.pid")/cgroup"), wanted $SCOPE_B"
echo "cluster_cgroups: ok"
