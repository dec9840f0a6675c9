#!/bin/sh
# examples/demo.sh ARBITER: the main job (`make demo`), the seed's case study.
#
#   Act 1  the scheduler alone: `arbiter place` on the seed's scenarios under
#          every policy.
#   Act 2  a live cluster on loopback: a controller (policy spread) and four
#          agents, each a node with 8 GPUs in one NVLink domain (the seed's
#          32-GPU cluster, GPUs described by an inventory file). The case
#          study goes in through the CLI: four 4-GPU training jobs, then the
#          8-GPU tensor-parallel job, which stays pending; `arbiter explain`
#          says why.
#   Act 3  the same cluster and jobs under the fragmentation-aware policy
#          (fgd; a second controller run): the 8-GPU job is placed on one
#          node, its task prints CUDA_VISIBLE_DEVICES to its log (`arbiter
#          logs`), and `arbiter nodes` draws the GPU map.
#   Last   the URL of the fgd cluster's web console (/ui/); on a terminal
#          the cluster stays up until Enter.
#
# Everything it starts is stopped on exit (trap), and its files removed.
set -eu
ARB=$1
DIR=$(cd "$(dirname "$0")" && pwd)
BOLD=$(printf '\033[1m') PLAIN=$(printf '\033[0m')
[ -t 1 ] || { BOLD=""; PLAIN=""; }

act() { printf '\n%s==== %s%s\n\n' "$BOLD" "$*" "$PLAIN"; }
say() { printf '%s$ %s%s\n' "$BOLD" "$*" "$PLAIN"; }
run() { say "arbiter $*"; $ARB "$@"; }

# ---- Act 1 -------------------------------------------------------------------------
act "Act 1: the scheduler alone (arbiter place), the seed's scenarios under each policy"
for scen in "$DIR"/seed-case.yaml "$DIR"/seed-case-16.yaml; do
    [ -f "$scen" ] || continue
    for p in spread pack fgd; do
        echo "=== $(basename "$scen") --policy $p"
        $ARB place "$scen" --policy "$p"
    done
done

# ---- the live cluster ------------------------------------------------------------------
T=$(mktemp -d /tmp/arbiter-demo.XXXXXX)
chmod 755 "$T" # tasks run as 'nobody' when the agents run as root
PIDS=""
stop_all() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    PIDS=""
}
cleanup() {
    stop_all
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() { # wait_for WHAT SECONDS CMD...: bounded polling
    what=$1 n=$(($2 * 10))
    shift 2
    until "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        if [ "$n" -le 0 ]; then
            echo "demo: timed out waiting for $what; logs in $T" >&2
            tail -n 5 "$T"/*.log >&2
            trap - EXIT
            stop_all
            exit 1
        fi
        sleep 0.1
    done
}

# The seed's node: 8 GPUs in one NVLink domain, 4 PCIe switches, 2 NUMA nodes.
cat > "$T/node.yaml" <<'EOF'
cpu: 128
memory: 1Ti
labels: {rack: r1, block: b1, zone: z1}
gpus: {count: 8, model: A100-SXM4-80G, memory: 80Gi, nvlinkDomains: 1, pcieSwitches: 4,
       numaNodes: 2}
EOF
# The seed's jobs: four 4-GPU training jobs, then tensor parallelism on 8 GPUs
# that must share one NVLink domain (the seed's resource block).
cat > "$T/train-4gpu.yaml" <<'EOF'
name: train-4gpu
resources:
  requests: {nvidia.com/gpu: 4, cpu: 16, memory: 128Gi}
  limits: {nvidia.com/gpu: 4}
command: [sleep, "3600"]
EOF
cat > "$T/tp-8gpu.yaml" <<'EOF'
name: tp-8gpu
topology: {level: nvlink, mode: required}
resources:
  requests: {nvidia.com/gpu: 8, cpu: 32, memory: 256Gi}
  limits: {nvidia.com/gpu: 8}
command: [sh, -c, 'echo "tp-8gpu on $ARBITER_NODE:"; env | grep -E "^(CUDA_VISIBLE_DEVICES|ARBITER_JOB_ID|ARBITER_NODE)=" | sort; exec sleep 3600']
EOF

cluster() { # cluster POLICY: a controller and four agents
    mkdir -p "$T/$1"
    printf 'scheduler: {policy: %s, interval: 250ms}\n' "$1" > "$T/$1/config.yaml"
    say "arbiter controller --listen 127.0.0.1:0 --data-dir $T/$1/data --config config.yaml  # policy: $1"
    $ARB controller --listen 127.0.0.1:0 --data-dir "$T/$1/data" --config "$T/$1/config.yaml" \
        2>>"$T/controller-$1.log" &
    PIDS="$PIDS $!"
    wait_for "the controller" 20 test -s "$T/$1/data/url"
    ARBITER_URL=$(cat "$T/$1/data/url")
    export ARBITER_URL
    say "arbiter agent --name node-N --controller $ARBITER_URL --inventory node.yaml  # N = 1..4"
    for n in 1 2 3 4; do
        $ARB agent --name "node-$n" --controller "$ARBITER_URL" --inventory "$T/node.yaml" \
            --heartbeat 500ms --log-dir "$T/$1/logs/node-$n" 2>>"$T/agent-$1-$n.log" &
        PIDS="$PIDS $!"
    done
    wait_for "four nodes" 20 sh -c "[ \$($ARB nodes | grep -c ' Ready ') -eq 4 ]"
}

submit_case() {
    for i in 1 2 3 4; do
        say "arbiter submit -f train-4gpu.yaml"
        $ARB submit -f "$T/train-4gpu.yaml"
        # the seed's arrival order: each job is placed before the next comes
        wait_for "job $i placed" 20 sh -c "$ARB job $i | grep -q 'state     \(placed\|running\)'"
    done
    say "arbiter submit -f tp-8gpu.yaml"
    TP=$($ARB submit -f "$T/tp-8gpu.yaml")
    echo "$TP"
}

# ---- Act 2 -------------------------------------------------------------------------
act "Act 2: a live cluster (1 controller, 4 agents x 8 GPUs) under the spread policy"
cluster spread
run nodes
submit_case
for i in 1 2 3 4; do
    wait_for "job $i to run" 20 sh -c "$ARB job $i | grep -q 'state     running'"
done
wait_for "a cycle to consider job $TP" 10 sh -c "$ARB explain $TP | grep -q 'insufficient'"
run queue
run explain "$TP"
run nodes
say "(stopping the spread cluster)"
stop_all

# ---- Act 3 -------------------------------------------------------------------------
act "Act 3: the same jobs under the fragmentation-aware policy (fgd)"
cluster fgd
submit_case
wait_for "job $TP to run" 20 sh -c "$ARB job $TP | grep -q 'state     running'"
wait_for "its output" 10 sh -c "$ARB logs $TP | grep -q CUDA_VISIBLE_DEVICES"
run queue
run logs "$TP"
run nodes

# ---- the console ---------------------------------------------------------------------
# The fgd cluster's web console: its URL (with the token, when the controller
# wants one), checked to be served before it is printed. On a terminal the
# cluster stays up until Enter; otherwise (CI, a pipe) it stops at once.
console="$ARBITER_URL/ui/${ARBITER_TOKEN:+#token=$ARBITER_TOKEN}"
curl -sf -o /dev/null "$ARBITER_URL/ui/" || { echo "demo: the console is not served at $console" >&2; exit 1; }
act "Done: the console of this live cluster is at $console"
[ -n "${ARBITER_TOKEN:-}" ] || echo "(no token needed: this controller runs without --tokens)"
if [ -t 0 ] && [ -t 1 ]; then
    printf 'open it in a browser; press Enter to stop the controller and the agents '
    read -r _ || true
else
    echo "stopping the controller and the agents"
fi
