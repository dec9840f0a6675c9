#!/bin/sh
# kill -9 the controller under load, with real agents running the jobs
# (DESIGN.md invariants 1, 2 and 4). Three agents (4 fake GPUs each) run
# short jobs that two clients keep submitting; the controller is killed
# with SIGKILL three times at varying moments and restarted on the same
# port, faster than the lease, so the agents keep their tasks. Each task
# claims its GPUs on its node for as long as it runs (a directory per
# node and GPU, with its pid): a claim already held by a live process is a
# GPU given twice. At the end every acknowledged job must have run and
# succeeded (none lost, none stuck: allocations restored at recovery are
# re-stamped with the new epoch, so their agents accept them), and the
# allocation check must pass after every restart.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_crash
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms}\nnodes: {lease: 5s, grace: 1s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
for n in a b c; do cl_agent "$n"; done
for n in a b c; do cl_wait "node $n" 10 cl_node_ready "$n"; done

mkdir -p "$T/claims"
# The task: claim each GPU (mkdir is atomic), hold it for a moment, free it.
cat > "$T/task.sh" <<'EOF'
#!/bin/sh
C=$1
for g in $(echo "$CUDA_VISIBLE_DEVICES" | tr , ' '); do
    d="$C/$ARBITER_NODE.$g"
    if ! mkdir "$d" 2>/dev/null; then
        holder=$(cat "$d/pid" 2>/dev/null || echo 0)
        if [ "$holder" != 0 ] && kill -0 "$holder" 2>/dev/null; then
            echo "GPU $g of $ARBITER_NODE given twice: job $ARBITER_JOB_ID and pid $holder" >> "$C/violations"
        fi
        mkdir -p "$d"
    fi
    echo $$ > "$d/pid"
done
sleep "0.$(( $$ % 8 + 2 ))"
for g in $(echo "$CUDA_VISIBLE_DEVICES" | tr , ' '); do rm -rf "$C/$ARBITER_NODE.$g"; done
EOF
chmod 755 "$T/task.sh"

submitter() { # submitter ID GPUS
    while [ ! -f "$T/stop" ]; do
        if id=$($ARB submit --gpus "$2" --name "c$1" -- "$T/task.sh" "$T/claims" 2>/dev/null); then
            echo "$id" >> "$T/acked.$1"
        fi
        sleep 0.05
    done
}

check() {
    curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' ||
        cl_fail "allocation check: $(curl -s "$ARBITER_URL/v1/check")"
    [ ! -s "$T/claims/violations" ] || cl_fail "$(cat "$T/claims/violations")"
    if curl -s "$ARBITER_URL/v1/events?limit=10000" | grep -q 'allocation not restored at recovery'; then
        cl_fail "an allocation could not be restored at recovery"
    fi
}

submitter 1 1 & S1=$!
submitter 2 3 & S2=$!
CL_PIDS="$CL_PIDS $S1 $S2"
for round in 1 2 3; do
    before=$(cat "$T"/acked.* 2>/dev/null | wc -l)
    cl_wait "submissions in round $round" 20 sh -c "[ \$(cat $T/acked.* 2>/dev/null | wc -l) -ge $((before + 6)) ]"
    sleep "0.$((round * 3))"
    kill -9 "$CPID"
    wait "$CPID" 2>/dev/null || true
    cl_forget_pid "$CPID"
    cl_controller --config "$T/config.yaml" # same port: the agents keep their URL
    check
done
touch "$T/stop"
wait "$S1" "$S2" 2>/dev/null || true

total=$(cat "$T"/acked.* | wc -l)
all_done() {
    $ARB queue > "$T/queue" 2>/dev/null || return 1
    grep -q "(no jobs)" "$T/queue"
}
cl_wait "every job to finish" 40 all_done
$ARB queue --all -o json > "$T/all.json"
for id in $(cat "$T"/acked.*); do
    grep -q "\"id\": $id," "$T/all.json" || cl_fail "acknowledged job $id lost"
done
bad=$($ARB queue --all | awk 'NR > 1 && $4 != "succeeded"' | head -5)
[ -z "$bad" ] || cl_fail "jobs that did not succeed: $bad"
check
fences=$(cat "$T"/agent-*.log | grep -c "FENCED" || true)
[ "$fences" -eq 0 ] || cl_fail "$fences agents fenced: a restart took longer than the lease?"
echo "cluster_crash: ok (3 kills under load, $total acknowledged jobs, all succeeded, no GPU given twice)"
