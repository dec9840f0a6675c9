#!/bin/sh
# No queue freeze, live (issue 12; cycle.c invariants 2 and 3).
#
# With backfill on, and again with starvation protection on, a job that no
# node can ever take stands at the head of the queue: a nodeSelector no node
# matches, more GPU memory than any GPU has, more CPU than any node. The
# jobs behind it must start, and explain must say of the head that it can
# never start, with the resource and the numbers, not that it "fits now".
# Admission's rejectUnfittable is off so that such jobs are accepted at all
# (with it on, the memory one is refused at submission).
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=sched_freeze
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/sched.sh"
command -v jq >/dev/null || { echo "$NAME: skipped: no jq (scripts/deps.sh)"; exit 77; }
cl_init

one_round() { # one_round LABEL SCHEDULER-FLOW-MAP
    for p in $CL_PIDS; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $CL_PIDS; do wait "$p" 2>/dev/null || true; done
    CL_PIDS=""
    CL_PORT=
    rm -rf "$T/d"
    printf 'scheduler: %s\nadmission: {rejectUnfittable: false}\n' "$2" > "$T/config.yaml"
    cl_controller --config "$T/config.yaml"
    CL_GPUS=4:H100 cl_agent n1 --grace 1s
    cl_wait "n1 ready" 20 cl_node_ready n1
    # three heads no node can take (a taint nothing tolerates: test_cycle.c; agents have no taints to set)
    cat > "$T/sel.yaml" <<'EOF'
name: never-selector
nodeSelector: {zone: nowhere}
timeLimit: 60s
resources: {requests: {nvidia.com/gpu: 1}}
command: [sleep, "60"]
EOF
    cat > "$T/mem.yaml" <<'EOF'
name: never-gpu-memory
timeLimit: 60s
resources: {requests: {nvidia.com/gpu: 1, nvidia.com/gpu-memory: 200Gi}}
command: [sleep, "60"]
EOF
    cat > "$T/cpu.yaml" <<'EOF'
name: never-cpu
timeLimit: 60s
resources: {requests: {nvidia.com/gpu: 1, cpu: "4096"}}
command: [sleep, "60"]
EOF
    h1=$(sc_submit "$T/sel.yaml")
    h2=$(sc_submit "$T/mem.yaml")
    h3=$(sc_submit "$T/cpu.yaml")
    sleep 3 # long past a 1s starvation threshold
    behind=$($ARB submit --gpus 2 --name behind -- sleep 3600)
    cl_wait "$1: job $behind behind the heads to run" 20 cl_is "$behind" running
    for h in $h1 $h2 $h3; do
        [ "$(sc_state "$h")" = pending ] || cl_fail "$1: job $h is $(sc_state "$h")"
        x=$(sc_explain "$h")
        [ "$(echo "$x" | jq -r .explain.never)" = true ] || cl_fail "$1: job $h: $x"
        [ "$(echo "$x" | jq -r .explain.fits_now)" = false ] || cl_fail "$1: job $h fits now? $x"
        echo "$x" | jq -r .summary | grep -q "can never start" || cl_fail "$1: job $h: $x"
        echo "$x" | jq -r .hint | grep -q "fragmented\|relax the topology" &&
            cl_fail "$1: job $h has no topology and nothing is fragmented: $x"
    done
    sc_explain "$h1" | jq -r .summary | grep -q "nodeSelector zone=nowhere" ||
        cl_fail "$1: $(sc_explain "$h1")"
    sc_explain "$h2" | jq -r .summary |
        grep -q "it needs 200Gi of GPU memory on each GPU, the largest GPU has [0-9.]*Gi" ||
        cl_fail "$1: $(sc_explain "$h2")"
    sc_explain "$h3" | jq -r .summary | grep -q "it needs 4096 CPUs, the largest node has" ||
        cl_fail "$1: $(sc_explain "$h3")"
    echo "$NAME: $1: three jobs no node can take (selector, GPU memory, CPU) hold nobody back"
}

one_round backfill "{queue: fifo, backfill: true, interval: 200ms}"
one_round starvation "{queue: priority, starvation: 1s, interval: 200ms}"
one_round fifo "{queue: fifo, interval: 200ms}"
echo "$NAME: ok"
