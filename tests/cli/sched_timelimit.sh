#!/bin/sh
# Time limits, live (issue 12): at timeLimit the task gets SIGTERM, its
# terminationGracePeriodSeconds, then SIGKILL; the job ends as `timeout`
# with an event. The deadline travels with the assignment (time_limit_ms),
# so the agent stops the task on time by itself while the controller is out
# of reach (here: stopped with SIGSTOP). A queue's defaultTimeLimit gives a
# job without one its limit; its maxTimeLimit refuses a longer one, saying so.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=sched_timelimit
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/sched.sh"
command -v jq >/dev/null || { echo "$NAME: skipped: no jq (scripts/deps.sh)"; exit 77; }
cl_init

cat > "$T/config.yaml" <<'EOF'
scheduler: {interval: 200ms}
queues:
  - {name: short, defaultTimeLimit: 2s, maxTimeLimit: 1h}
EOF
cl_controller --config "$T/config.yaml"
CL_GPUS=4:H100 cl_agent n1 --grace 5s
cl_wait "n1 ready" 20 cl_node_ready n1
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# 1. SIGTERM at the limit, the job's own grace, then SIGKILL: a task that
#    ignores SIGTERM dies 2 s after it, at 3 s + 2 s
cat > "$T/t1.yaml" <<EOF
name: stubborn
timeLimit: 3s
terminationGracePeriodSeconds: 2
resources: {requests: {nvidia.com/gpu: 1}}
command: [sh, -c, "trap 'date +%s%N > $T/t1.term' TERM; echo \$\$ > $T/t1.pid; while :; do sleep 0.1; done"]
EOF
t0=$(now_ms)
j1=$(sc_submit "$T/t1.yaml")
cl_wait "job $j1 to run" 20 cl_is "$j1" running
cl_wait "job $j1 to time out" 30 cl_is "$j1" timeout
t1=$(now_ms)
test -s "$T/t1.term" || cl_fail "job $j1's task never got SIGTERM"
pid=$(cat "$T/t1.pid")
! cl_alive "$pid" || cl_fail "job $j1's task $pid outlived its SIGKILL"
term_ms=$(($(cat "$T/t1.term") / 1000000 - t0))
[ "$term_ms" -ge 2500 ] || cl_fail "SIGTERM after $term_ms ms, before the 3 s limit"
[ $((t1 - t0)) -ge 4500 ] || cl_fail "job $j1 ended after $((t1 - t0)) ms: before its 2 s grace"
$ARB events | grep -q "job-time-limit .*job $j1 'stubborn': its time limit (3 s) was reached: SIGTERM to its 1 task, SIGKILL after 2 s" ||
    cl_fail "no job-time-limit event: $($ARB events | tail -5)"
$ARB events | grep -q "job-timeout .*job $j1 'stubborn'" || cl_fail "no job-timeout event"
echo "$NAME: job $j1: SIGTERM at ${term_ms} ms, ended timeout at $((t1 - t0)) ms (limit 3 s, grace 2 s)"

# 2. the controller out of reach: the agent stops the task at its limit itself
cat > "$T/t2.yaml" <<EOF
name: alone
timeLimit: 3s
resources: {requests: {nvidia.com/gpu: 1}}
command: [sh, -c, "echo \$\$ > $T/t2.pid; exec sleep 600"]
EOF
j2=$(sc_submit "$T/t2.yaml")
cl_wait "job $j2 to run" 20 cl_is "$j2" running
cl_wait "job $j2's pid" 10 test -s "$T/t2.pid"
pid=$(cat "$T/t2.pid")
kill -STOP "$CPID"
CL_CLEANUP="kill -CONT $CPID 2>/dev/null || true"
s0=$(now_ms)
n=0
while cl_alive "$pid"; do # well before the agent's 10 s lease would fence it
    n=$((n + 1)); [ $n -lt 80 ] || { kill -CONT "$CPID"; cl_fail "task $pid still alive 8 s after the controller stopped (limit 3 s)"; }
    sleep 0.1
done
dead=$(($(now_ms) - s0))
grep -q "FENCED" "$T/agent-n1.log" && { kill -CONT "$CPID"; cl_fail "the agent fenced instead: $(tail -3 "$T/agent-n1.log")"; }
kill -CONT "$CPID"
cl_wait "job $j2 to end as timeout" 30 cl_is "$j2" timeout
echo "$NAME: job $j2: its agent stopped it ${dead} ms after the controller went silent (limit 3 s)"

# 3. queue limits: the default given, the maximum enforced
j3=$($ARB submit --gpus 1 --queue short --name defaulted -- sleep 600)
[ "$($ARB job "$j3" -o json | jq -r .time_limit_s)" = 2 ] ||
    cl_fail "job $j3 got no default limit: $($ARB job "$j3" -o json)"
cl_wait "job $j3 to time out" 30 cl_is "$j3" timeout
cat > "$T/t4.yaml" <<'EOF'
name: too-long
queue: short
timeLimit: 2h
resources: {requests: {nvidia.com/gpu: 1}}
command: [sleep, "600"]
EOF
if out=$($ARB submit -f "$T/t4.yaml" 2>&1); then cl_fail "a 2h job was accepted: $out"; fi
echo "$out" | grep -q "timeLimit: 7200s is longer than the 3600s queue 'short' allows (maxTimeLimit); ask for at most 3600s" ||
    cl_fail "refusal: $out"
echo "$NAME: ok"
