#!/bin/sh
# The controller's Lamport clock moves by a bounded step only (DESIGN.md
# invariant 9), and a clock near its limit is recovered from.
#   1. Hostile reports: a node report whose "lamport" is the largest the API
#      takes, and one just past the allowed step (clock + 2^20), are refused
#      (422, naming the bound, carrying the controller's clock) and change
#      nothing: not the clock, not the node, no node registered. The real
#      agents then keep reporting (every report acknowledged, no fence) and
#      keep their tasks (same pids): before the bound, one such report made
#      every later real report fail and every agent fence.
#   2. A clock near its limit: the store's clock is set near 2^61 while the
#      controller is down, the agents take it up; then near 2^62. The next
#      start renumbers it (event clock-rebased, every order kept); the
#      agents, now far ahead, are refused once, take the controller's time
#      and register again; their tasks keep running (same pids), nothing is
#      fenced or lost.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_lamport
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
command -v sqlite3 >/dev/null || { echo "$NAME: no sqlite3 command; skipped"; exit 77; }

# a lease long enough to cover each controller restart: nothing may fence
printf 'scheduler: {interval: 200ms}\nnodes: {lease: 15s, grace: 1s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
cl_agent n1
cl_agent n2
cl_wait "n1 ready" 10 cl_node_ready n1
cl_wait "n2 ready" 10 cl_node_ready n2
for i in 1 2; do
    $ARB submit --gpus 4 --name "t$i" -- sh -c "echo \$\$ > $T/tpid.\$ARBITER_NODE; exec sleep 300" >/dev/null
done
cl_wait "both tasks" 15 sh -c "test -s $T/tpid.n1 && test -s $T/tpid.n2"
P1=$(cat "$T/tpid.n1")
P2=$(cat "$T/tpid.n2")

clock() { curl -sf "$ARBITER_URL/v1/status" | sed -n 's/.*"lamport": *\([0-9]*\).*/\1/p'; }
post() { # node body -> "STATUS BODY"
    curl -s -o "$T/reply" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        --data "$2" "$ARBITER_URL/v1/nodes/$1/report"
}
# the agents are alive and acknowledged: the clock moves past what it was plus n
advances() { [ "$(clock)" -gt "$(($1 + $2))" ]; }
healthy() { # no fence, no failed report, the tasks are the same processes
    ! grep -q "FENCED" "$T/agent-n1.log" "$T/agent-n2.log" || cl_fail "$1: an agent fenced"
    cl_alive "$P1" && cl_alive "$P2" || cl_fail "$1: a task died"
    [ "$(cat "$T/tpid.n1")" = "$P1" ] && [ "$(cat "$T/tpid.n2")" = "$P2" ] ||
        cl_fail "$1: a task was started again"
    ! $ARB events | grep -q "task-lost\|node-lost" || cl_fail "$1: $($ARB events | grep lost)"
}

# 1. hostile reports
c0=$(clock)
code=$(post n1 '{"lamport": 4611686018427387903, "tasks": []}')
[ "$code" = 422 ] || cl_fail "the largest lamport: $code $(cat "$T/reply")"
grep -q "ahead of the controller's clock" "$T/reply" || cl_fail "no reason: $(cat "$T/reply")"
grep -q '"lamport": *[0-9]' "$T/reply" || cl_fail "the refusal carries no clock: $(cat "$T/reply")"
c1=$(clock)
[ "$c1" -lt $((c0 + 1048576)) ] || cl_fail "the clock moved from $c0 to $c1"
code=$(post n2 "{\"lamport\": $((c1 + 1048576 + 100000)), \"tasks\": []}")
[ "$code" = 422 ] || cl_fail "a step past the bound: $code $(cat "$T/reply")"
code=$(post evil '{"lamport": 4000000000000000000, "inventory": {"cpu": "8", "memory": "8Gi", "gpus": []}}')
[ "$code" = 422 ] || cl_fail "a hostile registration: $code $(cat "$T/reply")"
$ARB nodes | grep -q "^evil " && cl_fail "the refused registration made a node"
[ "$(clock)" -lt $((c0 + 1048576)) ] || cl_fail "the clock moved: $(clock)"
# the real agents go on: 40 more ticks means about 20 acknowledged reports
cl_wait "the agents' reports" 20 advances "$(clock)" 40
healthy "after the hostile reports"
echo "$NAME: hostile reports refused; clock $c0 -> $(clock), agents and tasks unaffected"

# 2. a clock near its limit, set in the store while the controller is down
restart_with_clock() {
    kill -9 "$CPID"
    wait "$CPID" 2>/dev/null || true
    cl_forget_pid "$CPID"
    sqlite3 "$T/d/arbiter.db" "UPDATE kv SET val='$1' WHERE key='meta/clock'"
    cl_controller --config "$T/config.yaml"
}
restart_with_clock 2305843009213000000 # just under 2^61: kept, and the agents take it
[ "$(clock)" -ge 2305843009213000000 ] || cl_fail "the high clock was not kept: $(clock)"
cl_wait "the agents to take the high clock" 20 advances "$(clock)" 40
restart_with_clock 4611686018427380000 # near 2^62: renumbered at the start
$ARB events | grep -q "clock-rebased" || cl_fail "no clock-rebased event: $($ARB events | tail -3)"
[ "$(clock)" -lt 1000000 ] || cl_fail "the clock was not renumbered: $(clock)"
cl_wait "n1 to take the new time" 15 grep -q "taking the controller's clock" "$T/agent-n1.log"
cl_wait "n2 to take the new time" 15 grep -q "taking the controller's clock" "$T/agent-n2.log"
cl_wait "the agents' reports" 20 advances "$(clock)" 40
[ "$(clock)" -lt 1000000 ] || cl_fail "an agent moved the clock up again: $(clock)"
healthy "after the clock was renumbered"
cl_is 1 running && cl_is 2 running || cl_fail "the jobs: $($ARB queue)"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "$NAME: ok"
