#!/bin/sh
# A controller restart in the middle of an elastic job's shrink: a real
# controller (preemption on) and a real agent with 4 fake GPUs. An elastic
# job {min: 2, max: 4} runs 4 ranks that ignore SIGTERM (so the shrink lasts
# its 6 s grace, until SIGKILL). A higher-priority job needs 2 GPUs: the
# job is marked to shrink 4 -> 2. The controller is stopped and started
# again on the same data directory while ranks 2 and 3 are still in their
# grace, and started once the agent has killed them. The mark survives: after the restart the job still shrinks
# (resized 4 -> 2 for the urgent job, once ranks 2 and 3 are killed), ranks
# 0 and 1 run on untouched, the elastic job is never preempted whole nor
# restarted, and the urgent job runs.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=elastic_restart
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms, preemption: true, queue: priority}\nnodes: {lease: 30s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
cl_agent n1 --lease 30s # the controller is down for the grace (6 s): no fencing
cl_wait "n1 ready" 10 cl_node_ready n1

ev_lamport() { # TYPE ID [TEXT]: lamport of the first such event of job ID
    $ARB events -o json | tr '{' '\n' |
        grep "\"type\":\"$1\"" | grep "\"job\":$2[,}]" | grep "${3:-}" |
        sed -n 's/.*"lamport":\([0-9]*\).*/\1/p' | head -1
}
has_event() { [ -n "$(ev_lamport "$@")" ]; }
current() { $ARB job "$1" -o json | tr -d ' \n' | sed -n 's/.*"elastic":{[^}]*"current":\([0-9]*\).*/\1/p'; }
is_current() { [ "$(current "$1")" = "$2" ]; }

D=$T/el
mkdir -p "$D"
cat > "$T/el.sh" <<'EOF'
#!/bin/sh
# A rank that notes its start and its resize notices (SIGUSR1: the
# world size from ARBITER_RESIZE_FILE) and SIGTERM, on which it goes on:
# only SIGKILL ends it.
d=$1 i=$ARBITER_TASK_INDEX
echo $$ >> "$d/start.$i"
trap 'grep "^world_size=" "$ARBITER_RESIZE_FILE" >> "$d/notice.$i"' USR1
trap 'echo term > "$d/term.$i"' TERM
while :; do sleep 0.1; done
EOF
cat > "$T/el.yaml" <<EOF
name: trainer
replicas: {min: 2, max: 4}
resources: {requests: {nvidia.com/gpu: 1}}
terminationGracePeriodSeconds: 6
command: [sh, "$T/el.sh", "$D"]
EOF
el=$($ARB submit -f "$T/el.yaml")
cl_wait "the elastic job to run with 4" 15 is_current "$el" 4
cl_wait "ranks 0..3 to start" 10 test -s "$D/start.0" -a -s "$D/start.1" -a -s "$D/start.2" -a -s "$D/start.3"

hi=$($ARB submit --gpus 2 --priority 1000 --name urgent -- sleep 300)
cl_wait "the shrink mark" 15 has_event job-shrinking "$el" "shrinking 4 -> 2 for job $hi 'urgent'"
cl_wait "ranks 2 and 3 to get SIGTERM" 10 test -s "$D/term.2" -a -s "$D/term.3"
has_event job-resized "$el" "resized 4 -> 2" && cl_fail "shrunk before the restart: the test saw no restart mid-shrink"

kill -TERM "$CPID"
wait "$CPID" 2>/dev/null || true
cl_forget_pid "$CPID"
# while the controller is down the agent ends the grace: SIGKILL to ranks 2
# and 3. The new controller learns of their end from the agent's first
# report, before its first cycle could mark anything again: only the
# persisted mark says these exits are the shrink, not failures.
cl_wait "ranks 2 and 3 to be killed after their grace" 20 sh -c "! kill -0 $(cat "$D/start.2") 2>/dev/null && ! kill -0 $(cat "$D/start.3") 2>/dev/null"
cl_controller --config "$T/config.yaml" # same port: the agent keeps its URL

cl_wait "the shrink to finish after the restart" 30 has_event job-resized "$el" "resized 4 -> 2: tasks 2..3 stopped for job $hi 'urgent'"
cl_wait "the urgent job to run" 15 cl_is "$hi" running
cl_is "$el" running || cl_fail "the elastic job is $(cl_state "$el"): $($ARB events | tail -8)"
[ "$(current "$el")" = 2 ] || cl_fail "the elastic job has $(current "$el") tasks, not 2"
has_event job-preempting "$el" && cl_fail "the elastic job was preempted whole: $($ARB events | grep preempt)"
[ "$($ARB events | grep -c "job-shrinking .*job $el 'trainer'")" = 1 ] ||
    cl_fail "the shrink was announced again: $($ARB events | grep job-shrinking)"
for i in 0 1; do
    [ "$(wc -l < "$D/start.$i")" = 1 ] || cl_fail "rank $i was restarted: $($ARB events)"
    kill -0 "$(cat "$D/start.$i")" || cl_fail "rank $i is gone"
    test -e "$D/term.$i" && cl_fail "rank $i got SIGTERM"
done
cl_wait "rank 0's notice of the shrink" 15 grep -q "^world_size=2$" "$D/notice.0"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
$ARB cancel "$el" "$hi" >/dev/null
cl_wait "the elastic job to end" 30 cl_is "$el" cancelled
cl_wait "the urgent job to end" 20 cl_is "$hi" cancelled
echo "elastic_restart: ok"
