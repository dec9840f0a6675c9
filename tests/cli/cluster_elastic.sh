#!/bin/sh
# Elastic training and preemption with a grace period, on a live cluster: a
# real controller (preemption on) and two real agents with 4 fake GPUs each,
# over HTTP on loopback.
#
# Elastic: a job with replicas {min: 2, max: 4} starts with 2 tasks when
# only 2 GPUs are free, grows to 4 when a blocker ends (the running tasks
# get SIGUSR1 and a rewritten ARBITER_RESIZE_FILE with world_size=4, the new
# ones start with WORLD_SIZE=4), and shrinks back to 2 under a
# higher-priority job before it would be preempted whole: ranks 2 and 3 get
# SIGTERM, and the preemptor is placed only after they have exited.
#
# Grace: a 2-task job whose tasks catch SIGTERM, write a checkpoint and go
# on running is preempted with terminationGracePeriodSeconds: 3. Its tasks
# live on after SIGTERM, are killed after the grace (they never exit on
# their own), and the preemptor is placed only after that (event order).
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_elastic
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms, preemption: true, queue: priority}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
cl_agent n1
cl_agent n2
cl_wait "n1 ready" 10 cl_node_ready n1
cl_wait "n2 ready" 10 cl_node_ready n2

# lamport of the first event of TYPE that mentions job ID
ev_lamport() { # TYPE ID [TEXT]
    $ARB events -o json | tr '{' '\n' |
        grep "\"type\":\"$1\"" | grep "\"job\":$2[,}]" | grep "${3:-}" |
        sed -n 's/.*"lamport":\([0-9]*\).*/\1/p' | head -1
}
has_event() { [ -n "$(ev_lamport "$@")" ]; }
current() { $ARB job "$1" -o json | tr -d ' \n' | sed -n 's/.*"elastic":{[^}]*"current":\([0-9]*\).*/\1/p'; }
is_current() { [ "$(current "$1")" = "$2" ]; }

# ---- elastic ----------------------------------------------------------------
D=$T/el
mkdir -p "$D"
cat > "$T/el.sh" <<'EOF'
#!/bin/sh
# An elastic "trainer": says what it was started with, copies its resize
# file on SIGUSR1, leaves on SIGTERM.
d=$1 i=$ARBITER_TASK_INDEX
echo "rank=$RANK world=$WORLD_SIZE" > "$d/start.$i"
cp "$ARBITER_RESIZE_FILE" "$d/initial.$i"
trap 'cp "$ARBITER_RESIZE_FILE" "$d/n.$i.tmp"; mv "$d/n.$i.tmp" "$d/notice.$i"' USR1
trap 'echo term > "$d/term.$i"; exit 0' TERM
while :; do sleep 0.1; done
EOF
b1=$($ARB submit --gpus 4 --name blocker1 -- sleep 300)
cl_wait "blocker1 to run" 15 cl_is "$b1" running
b2=$($ARB submit --gpus 2 --name blocker2 -- sleep 300)
cl_wait "blocker2 to run" 15 cl_is "$b2" running
cat > "$T/el.yaml" <<EOF
name: trainer
replicas: {min: 2, max: 4}
resources: {requests: {nvidia.com/gpu: 1}}
terminationGracePeriodSeconds: 5
command: [sh, "$T/el.sh", "$D"]
EOF
el=$($ARB submit -f "$T/el.yaml")
cl_wait "the elastic job to run" 15 cl_is "$el" running
[ "$(current "$el")" = 2 ] || cl_fail "started with $(current "$el") tasks, not its min 2"
cl_wait "ranks 0 and 1 to start" 10 test -s "$D/initial.1" -a -s "$D/initial.0"
grep -q "^rank=1 world=2$" "$D/start.1" || cl_fail "rank 1 env: $(cat "$D/start.1")"
grep -q "^world_size=2$" "$D/initial.0" || cl_fail "resize file: $(cat "$D/initial.0")"
grep -q "^generation=" "$D/initial.0" || cl_fail "resize file: $(cat "$D/initial.0")"

# grow: the blocker ends, capacity frees
$ARB cancel "$b1" >/dev/null
cl_wait "blocker1 to end" 15 cl_is "$b1" cancelled
cl_wait "the job to grow to 4" 15 is_current "$el" 4
$ARB job "$el" | grep -q "elastic   4 tasks now, min 2, max 4" || cl_fail "job: $($ARB job "$el")"
$ARB job "$el" | grep -q "grace     5s" || cl_fail "job: $($ARB job "$el")"
cl_wait "a resize event 2 -> 4" 10 has_event job-resized "$el" "resized 2 -> 4: capacity freed on n[12]"
cl_wait "rank 0's resize notice" 15 grep -q "^world_size=4$" "$D/notice.0"
cl_wait "rank 1's resize notice" 15 grep -q "^world_size=4$" "$D/notice.1"
grep -q "^rank=1$" "$D/notice.1" || cl_fail "notice: $(cat "$D/notice.1")"
[ "$(grep -c "^hosts=.*,.*,.*," "$D/notice.0")" = 1 ] || cl_fail "hosts: $(cat "$D/notice.0")"
cl_wait "rank 3 to start" 10 test -s "$D/start.3"
grep -q "^rank=3 world=4$" "$D/start.3" || cl_fail "rank 3 env: $(cat "$D/start.3")"
grep -q "resized: world size 4" "$T"/agent-n*.log || cl_fail "no resize line in the agents' logs"

# shrink: a higher-priority job needs 4 GPUs of one node; the elastic job's
# ranks 2 and 3 are the cheapest victims (blocker2 is not touched)
hi=$($ARB submit --gpus 4 --priority 1000 --name urgent -- sleep 300)
cl_wait "the shrink mark" 15 has_event job-shrinking "$el" "shrinking 4 -> 2 for job $hi 'urgent'"
cl_wait "the job to shrink to 2" 20 is_current "$el" 2
cl_wait "the urgent job to run" 15 cl_is "$hi" running
test -s "$D/term.2" -a -s "$D/term.3" || cl_fail "ranks 2, 3 got no SIGTERM"
test -e "$D/term.0" -o -e "$D/term.1" && cl_fail "rank 0 or 1 was stopped"
cl_is "$b2" running || cl_fail "blocker2 was touched: $(cl_state "$b2")"
cl_is "$el" running || cl_fail "the elastic job is $(cl_state "$el")"
shrunk=$(ev_lamport job-resized "$el" "resized 4 -> 2: tasks 2..3 stopped for job $hi")
placed=$(ev_lamport job-placed "$hi")
[ -n "$shrunk" ] && [ -n "$placed" ] || cl_fail "events: $($ARB events | tail -8)"
[ "$shrunk" -lt "$placed" ] || cl_fail "job $hi placed (lamport $placed) before the shrink ($shrunk)"
cl_wait "rank 0's notice of the shrink" 15 grep -q "^world_size=2$" "$D/notice.0"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
$ARB cancel "$el" "$hi" "$b2" >/dev/null
cl_wait "the elastic job to end" 20 cl_is "$el" cancelled
cl_wait "the urgent job to end" 20 cl_is "$hi" cancelled
cl_wait "blocker2 to end" 20 cl_is "$b2" cancelled

# ---- preemption with a grace period ---------------------------------------------
G=$T/grace
mkdir -p "$G"
cat > "$T/ckpt.sh" <<'EOF'
#!/bin/sh
# Catches SIGTERM, writes a checkpoint, and goes on: only SIGKILL ends it.
d=$1 i=$ARBITER_TASK_INDEX
echo $$ > "$d/pid.$i"
trap 'echo "checkpoint of rank $i" > "$d/ckpt.$i"; touch "$d/termed.$i"' TERM
while :; do
    [ -e "$d/termed.$i" ] && echo alive >> "$d/after.$i"
    sleep 0.1
done
EOF
cat > "$T/victim.yaml" <<EOF
name: victim
replicas: 2
resources: {requests: {nvidia.com/gpu: 4}}
terminationGracePeriodSeconds: 3
command: [sh, "$T/ckpt.sh", "$G"]
EOF
v=$($ARB submit -f "$T/victim.yaml")
cl_wait "the victim to run" 15 cl_is "$v" running
cl_wait "its tasks to start" 10 test -s "$G/pid.0" -a -s "$G/pid.1"
p=$($ARB submit --gpus 4 --priority 1000 --name preemptor -- sleep 300)
cl_wait "the preemption event" 15 has_event job-preempting "$v" "preempted by job $p 'preemptor' (priority 1000)"
$ARB events | grep -q "job-preempting .*SIGKILL after 3 s grace" || cl_fail "events: $($ARB events | tail -3)"
cl_wait "the checkpoints" 15 test -s "$G/ckpt.0" -a -s "$G/ckpt.1"
# the tasks live on after SIGTERM for 3 s: the preemptor says what it waits for
# (unless the grace has already run out on a very slow machine)
$ARB explain "$p" > "$T/explain" 2>&1 || true
cl_is "$p" running || grep -q "its victims are stopping: job $v 'victim' (preempted whole)" "$T/explain" ||
    cl_is "$p" running || cl_fail "explain: $(cat "$T/explain")"
cl_wait "the victim to be requeued" 30 has_event job-requeued "$v"
cl_wait "the preemptor to run" 15 cl_is "$p" running
grep -q "checkpoint of rank 1" "$G/ckpt.1" || cl_fail "ckpt: $(cat "$G/ckpt.1")"
test -s "$G/after.0" -a -s "$G/after.1" || cl_fail "the tasks did not live on after SIGTERM"
for i in 0 1; do
    cl_alive "$(cat "$G/pid.$i")" && cl_fail "rank $i (pid $(cat "$G/pid.$i")) still runs"
done
requeued=$(ev_lamport job-requeued "$v")
placed=$(ev_lamport job-placed "$p")
[ "$requeued" -lt "$placed" ] || cl_fail "preemptor placed (lamport $placed) before the victim's tasks ended ($requeued)"
cl_is "$v" pending || cl_fail "the victim is $(cl_state "$v"), not pending"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "cluster_elastic: ok"
