#!/bin/sh
# Explain that is never wrong, live (issue 12; the trial cycle of cycle.c):
#   - no node registered: said so, not "0/0 nodes are available";
#   - a gang: how many of its tasks fit now and where;
#   - a job held by fifo order: "held behind job N (queue order fifo)",
#     not "fits now";
#   - a memory blocker with the numbers;
#   - a stale node left out and named, its GPUs not counted free.
# (Never-fitting jobs with their numbers: sched_freeze.sh; quotas in GPUs and
# reclaim named as such: sched_reclaim.sh.)
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=sched_explain
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/sched.sh"
command -v jq >/dev/null || { echo "$NAME: skipped: no jq (scripts/deps.sh)"; exit 77; }
cl_init

# a long lease beside a short staleness: a stopped node stays stale (not
# yet NotReady) for 27 s, room for the checks below on a loaded machine
printf 'scheduler: {queue: fifo, interval: 200ms}\nnodes: {lease: 30s, staleness: 3s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
x() { sc_explain "$1" | jq -r .summary; }

# no node at all
early=$($ARB submit --gpus 1 --cpus 1 --mem 1Gi --name early -- sleep 600)
x "$early" | grep -q "no node is registered yet: job 'early' is placed once a node that can hold it joins" ||
    cl_fail "explain with no node: $(x "$early")"
x "$early" | grep -q "0/0" && cl_fail "0/0 nodes: $(x "$early")"
$ARB cancel "$early" >/dev/null

for n in n1 n2; do
    printf 'cpu: 16\nmemory: 64Gi\ngpus: {count: 4, model: H100, memory: 80Gi}\n' > "$T/$n.yaml"
    $ARB agent --name "$n" --controller "$ARBITER_URL" --inventory "$T/$n.yaml" --log-dir "$T/logs/$n" \
        --allow-root --cgroups none --heartbeat 250ms 2>>"$T/agent-$n.log" &
    echo $! > "$T/pid.$n"
    CL_PIDS="$CL_PIDS $!"
    cl_wait "$n ready" 20 cl_node_ready "$n"
done
h1=$($ARB submit --gpus 1 --cpus 1 --mem 40Gi --name hog1 -- sleep 600)
cl_wait "hog1 running" 20 cl_is "$h1" running
h2=$($ARB submit --gpus 1 --cpus 1 --mem 40Gi --name hog2 -- sleep 600)
cl_wait "hog2 running" 20 cl_is "$h2" running
[ "$(sc_where "$h1" | cut -d: -f1)" != "$(sc_where "$h2" | cut -d: -f1)" ] ||
    cl_fail "both hogs on one node: $(sc_where "$h1") $(sc_where "$h2")"

# a gang that does not fit whole: per-group counts
cat > "$T/gang.yaml" <<'EOF'
name: gang
groups:
  - name: worker
    replicas: 4
    resources: {requests: {nvidia.com/gpu: 2, cpu: 1, memory: 1Gi}}
command: [sleep, "600"]
EOF
g=$(sc_submit "$T/gang.yaml")
sc_settle "$g"
x "$g" | grep -q "group 'worker' (4 tasks x 2 GPUs): 2 of 4 tasks fit now: node n[12] takes 1, node n[12] takes 1" ||
    cl_fail "gang explain: $(x "$g")"
[ "$(sc_explain "$g" | jq -r .explain.tasks.fit_now)" = 2 ] || cl_fail "gang json: $(sc_explain "$g")"

# behind the fifo head: it would fit, but is held
small=$($ARB submit --gpus 1 --cpus 1 --mem 1Gi --name small -- sleep 600)
sc_settle "$small"
[ "$(sc_state "$small")" = pending ] || cl_fail "job $small is $(sc_state "$small") behind a blocked fifo head"
x "$small" | grep -q "it fits now, but is held behind job $g 'gang' (queue order fifo)" ||
    cl_fail "fifo explain: $(x "$small")"
[ "$(sc_explain "$small" | jq -r .explain.fits_now)" = false ] || cl_fail "fits_now: $(sc_explain "$small")"
[ "$(sc_explain "$small" | jq -r .explain.held_by.job)" = "$g" ] || cl_fail "held_by: $(sc_explain "$small")"

# a memory blocker, with the numbers (and still behind the head)
mem=$($ARB submit --gpus 1 --cpus 1 --mem 30Gi --name mem -- sleep 600)
sc_settle "$mem"
x "$mem" | grep -q "2 insufficient memory (needs 30Gi, the most free on one node 24Gi)" ||
    cl_fail "memory explain: $(x "$mem")"

# a stale node: left out, named, its GPUs not free (the gang, which needs
# both nodes, cannot start on the fresh one alone: it holds nobody back
# meanwhile, and says why)
kill -STOP "$(cat "$T/pid.n2")"
CL_CLEANUP="kill -CONT $(cat "$T/pid.n2") 2>/dev/null || true"
# a report sent just before the stop may still land late (the controller
# is busy): wait until the report is 4 s old and explain has said stale
# twice, half a second apart. Every check reads one explanation of each job
# (taken while n2 is stale), so none depends on how long the others took.
k=0
calm=0
while [ $calm -lt 2 ]; do
    if [ "$($ARB nodes -o json | jq '[.nodes[] | select(.name == "n2") | .report_age_s >= 4] | all')" = true ] &&
        ej=$(sc_explain "$mem") && echo "$ej" | jq -r .summary | grep -q 'stale report (n2, last report'; then
        calm=$((calm + 1))
    else calm=0; fi
    k=$((k + 1))
    [ $k -lt 60 ] || { kill -CONT "$(cat "$T/pid.n2")"; cl_fail "n2 never stale: $($ARB nodes) $(x "$mem")"; }
    sleep 0.5
done
gj=$(sc_explain "$g")
kill -CONT "$(cat "$T/pid.n2")"
es=$(echo "$ej" | jq -r .summary)
echo "$es" | grep -q "1 node(s) with a stale report (n2, last report [0-9]* s ago: left out)" ||
    cl_fail "stale explain: $es"
echo "$es" | grep -q "1 insufficient memory (needs 30Gi, the most free on one node 2[34]Gi)" ||
    { $ARB nodes >&2; echo "$ej" >&2; echo "$gj" >&2; cl_fail "stale explain: $es"; }
[ "$(echo "$ej" | jq -r .explain.stale_nodes)" = 1 ] || cl_fail "stale json: $ej"
echo "$gj" | jq -r .summary | grep -q "can never start as it is: .*; left out for a stale report: n2 (last report [0-9]* s ago)" ||
    cl_fail "gang with a stale node: $(echo "$gj" | jq -r .summary)"
echo "$NAME: ok"
