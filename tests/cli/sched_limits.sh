#!/bin/sh
# Requests and limits as in Kubernetes, live (issue 12): the scheduler
# reserves requests; limits become the task's cgroup caps (memory and CPU);
# a request without a limit caps nothing, unless resources.capRequests says
# so; a limit below its request is refused with the field named; the GPU
# memory a task was granted reaches it as ARBITER_GPU_MEMORY_MIB (nothing
# enforces it in hardware). Skipped (77) where cgroups cannot be written.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=sched_limits
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/sched.sh"
command -v jq >/dev/null || { echo "$NAME: skipped: no jq (scripts/deps.sh)"; exit 77; }
cl_init

# the memory cap of the cgroup of process $1, in bytes ("max" when none)
mem_cap() {
    rel=$(sed -n 's/^0::\(.*\)$/\1/p' "/proc/$1/cgroup")
    if [ -n "$rel" ] && [ -r "/sys/fs/cgroup$rel/memory.max" ]; then
        cat "/sys/fs/cgroup$rel/memory.max"
        return
    fi
    rel=$(sed -n 's/^[0-9]*:[^:]*memory[^:]*:\(.*\)$/\1/p' "/proc/$1/cgroup")
    v=$(cat "/sys/fs/cgroup/memory$rel/memory.limit_in_bytes")
    [ "$v" -ge 4611686018427387904 ] && echo max || echo "$v" # v1: "unlimited" is huge
}

run_round() { # run_round CONFIG-LINE
    for p in $CL_PIDS; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $CL_PIDS; do wait "$p" 2>/dev/null || true; done
    CL_PIDS=""
    CL_PORT=
    rm -rf "$T/d" "$T"/*.pid
    printf 'scheduler: {interval: 200ms}\n%s\n' "$1" > "$T/config.yaml"
    cl_controller --config "$T/config.yaml"
    $ARB agent --name n1 --controller "$ARBITER_URL" --fake-gpus 4:H100 --log-dir "$T/logs/n1" \
        --allow-root --cgroups auto --heartbeat 250ms --grace 1s 2>>"$T/agent-n1.log" &
    CL_PIDS="$CL_PIDS $!"
    cl_wait "n1 ready" 20 cl_node_ready n1
    if grep -q "no usable cgroups\|cgroups off" "$T/agent-n1.log"; then
        echo "$NAME: skipped: $(grep -o 'no usable cgroups.*' "$T/agent-n1.log" | head -1)"
        exit 77
    fi
    cat > "$T/lim.yaml" <<EOF
name: limited
resources:
  requests: {nvidia.com/gpu: 1, cpu: 100m, memory: 64Mi}
  limits: {cpu: 500m, memory: 256Mi}
command: [sh, -c, "echo \$\$ > $T/lim.pid; exec sleep 600"]
EOF
    cat > "$T/req.yaml" <<EOF
name: requests-only
resources: {requests: {arbiter.io/gpu-share: 500m, nvidia.com/gpu-memory: 20Gi, cpu: 100m, memory: 64Mi}}
command: [sh, -c, "echo \$ARBITER_GPU_MEMORY_MIB > $T/req.gmem; echo \$\$ > $T/req.pid; exec sleep 600"]
EOF
    lim=$(sc_submit "$T/lim.yaml")
    req=$(sc_submit "$T/req.yaml")
    cl_wait "job $lim's pid" 20 test -s "$T/lim.pid"
    cl_wait "job $req's pid" 20 test -s "$T/req.pid"
}

run_round ""
[ "$(mem_cap "$(cat "$T/lim.pid")")" = 268435456 ] ||
    cl_fail "job $lim: memory cap $(mem_cap "$(cat "$T/lim.pid")"), want its limit 256Mi"
[ "$(mem_cap "$(cat "$T/req.pid")")" = max ] ||
    cl_fail "job $req: memory cap $(mem_cap "$(cat "$T/req.pid")"), want none (a request alone caps nothing)"
[ "$(cat "$T/req.gmem")" = 20480 ] || cl_fail "ARBITER_GPU_MEMORY_MIB=$(cat "$T/req.gmem"), want 20480"
echo "$NAME: limits are the caps (256Mi), a request alone is none, the granted GPU memory is told"

run_round "resources: {capRequests: true}"
[ "$(mem_cap "$(cat "$T/req.pid")")" = 67108864 ] ||
    cl_fail "capRequests: job $req: memory cap $(mem_cap "$(cat "$T/req.pid")"), want its request 64Mi"
echo "$NAME: resources.capRequests caps a request-only task at its request"

cat > "$T/bad.yaml" <<'EOF'
name: backwards
resources:
  requests: {nvidia.com/gpu: 1, memory: 1Gi}
  limits: {memory: 512Mi}
command: [sleep, "1"]
EOF
if out=$($ARB submit -f "$T/bad.yaml" 2>&1); then cl_fail "a limit below its request was accepted: $out"; fi
echo "$out" | grep -q "limits: the limit of memory is below its request" || cl_fail "refusal: $out"
echo "$NAME: ok"
