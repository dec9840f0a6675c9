#!/bin/sh
# A GPU falls off the bus under a running job: a real controller and a real
# agent whose GPUs come from NVML, through the mock libnvidia-ml.so.1
# (tests/mock), told at run time which GPUs are lost by a file it reads on
# every call (MOCK_NVML_LOST_FILE). Checks:
#   - the GPU leaves the node's capacity (gpu-unhealthy event, "healthy":
#     false), and nothing is placed on it while it is lost;
#   - a restartable job holding it is stopped and requeued whole (attempt
#     2 once it runs again), and `arbiter explain` names the GPU while the job waits;
#   - a job with `restartable: false` holding a lost GPU fails;
#   - the requeued job then runs on the healthy GPUs only;
#   - the GPU comes back healthy (gpu-healthy) and into capacity;
#   - a gang over two nodes that loses a GPU on one is stopped whole (its
#     member on the other node too), requeued, and runs again once the GPU
#     is back.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_gpu_lost
MOCK=$(dirname "$ARB")/tests/mock/lib/libnvidia-ml.so.1
. "$SRC/tests/cli/lib/cluster.sh"
if [ ! -f "$MOCK" ]; then
    echo "cluster_gpu_lost: $MOCK not built; skipped" >&2
    exit 77 # CTest: skipped
fi
cl_init

printf 'scheduler: {interval: 200ms}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml"
: > "$T/lost"
MOCK_NVML_GPUS="4:NVIDIA H100 80GB HBM3:81559" MOCK_NVML_LOST_FILE="$T/lost" \
    $ARB agent --name g1 --controller "$ARBITER_URL" --nvml-lib "$MOCK" --log-dir "$T/logs/g1" \
    --allow-root --cgroups none --heartbeat 250ms 2>>"$T/agent-g1.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "g1 ready" 10 cl_node_ready g1

# The lost list is replaced whole (written aside, then renamed): the mock
# reads it on every call, and a file truncated before it is written would
# read empty for a moment, every GPU healthy, and a GPU could come back
# (and be placed on) between two writes of this test.
set_lost() { # set_lost FILE LIST
    printf '%s\n' "$2" > "$1.new" && mv -f "$1.new" "$1"
}

gpus_of() { # the GPU indices of a job's task 0, as "a b"
    $ARB job "$1" -o json | tr -d ' \n' | sed -n 's/.*"tasks":\[{[^]]*"gpus":\[\([0-9,]*\)\].*/\1/p' | tr ',' ' '
}
healthy() { # healthy NODE GPU -> true|false, from the node's telemetry as the controller keeps it
    $ARB nodes -o json | tr -d ' \n' | grep -o "{\"index\":$2,[^}]*}" | head -1 | grep -o '"healthy":[a-z]*' | cut -d: -f2
}

cat > "$T/fragile.yaml" <<'YAML'
name: fragile
restartable: false
resources:
  requests: {nvidia.com/gpu: 2, cpu: 1, memory: 1Gi}
command: [sleep, "300"]
YAML
r=$($ARB submit --gpus 2 --cpus 1 --mem 1Gi --name sturdy -- sh -c 'echo "attempt $ARBITER_EPOCH on $CUDA_VISIBLE_DEVICES"; exec sleep 300')
f=$($ARB submit -f "$T/fragile.yaml")
cl_wait "job $r to run" 15 cl_is "$r" running
cl_wait "job $f to run" 15 cl_is "$f" running
rg=$(gpus_of "$r")
fg=$(gpus_of "$f")
[ -n "$rg" ] && [ -n "$fg" ] || cl_fail "no GPUs: $r [$rg] $f [$fg]"
lost1=${rg%% *}
[ "$(healthy g1 "$lost1")" = true ] || cl_fail "GPU $lost1 not healthy at the start: $($ARB nodes -o json)"

# 1. a GPU of the restartable job falls off the bus
set_lost "$T/lost" "$lost1"
cl_wait "GPU $lost1 unhealthy" 10 sh -c "$ARB events | grep -q \"gpu-unhealthy .*GPU $lost1 is unhealthy\""
[ "$(healthy g1 "$lost1")" = false ] || cl_fail "GPU $lost1 still healthy: $($ARB nodes -o json)"
$ARB nodes | grep -Eq "^g1 .* [0-9]*X( |\$)" || cl_fail "no X in the GPU map: $($ARB nodes)"
cl_wait "job $r requeued" 15 sh -c "$ARB events | grep -q 'job-requeued .*job $r '"
$ARB events | grep -q "task-gpu-lost .*job $r .*GPU $lost1 on node 'g1' is unhealthy" ||
    cl_fail "no task-gpu-lost event: $($ARB events | tail -5)"
# 4 GPUs - 1 lost - 2 held by the other job: it waits, and says why
cl_wait "job $r pending" 10 cl_is "$r" pending
$ARB explain "$r" | grep -q "GPU $lost1 on node 'g1' unhealthy" || cl_fail "explain: $($ARB explain "$r")"
$ARB explain "$r" -o json | tr -d ' \n' | grep -q "\"unhealthy_gpus\":\[{\"node\":\"g1\",\"gpu\":$lost1}\]" ||
    cl_fail "explain json: $($ARB explain "$r" -o json)"
cl_is "$f" running || cl_fail "job $f stopped though its GPUs are healthy: $($ARB job "$f")"

# 2. a GPU of the non-restartable job falls off too: that job fails
lost2=${fg%% *}
set_lost "$T/lost" "$lost1,$lost2"
cl_wait "job $f to fail" 15 cl_is "$f" failed
$ARB job "$f" | grep -q "GPU $lost2 on node 'g1' is unhealthy" || cl_fail "job $f: $($ARB job "$f")"

# 3. the requeued job runs on the two GPUs left, never on a lost one
cl_wait "job $r to run again" 15 cl_is "$r" running
[ "$(cl_field "$r" attempt)" = 2 ] || cl_fail "attempt $(cl_field "$r" attempt), not 2; events: $($ARB events | tail -40)"
for g in $(gpus_of "$r"); do
    [ "$g" != "$lost1" ] && [ "$g" != "$lost2" ] || cl_fail "job $r placed on lost GPU $g"
done
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
extra=$($ARB submit --gpus 1 --name extra -- sleep 300)
cl_wait "job $extra placed or explained" 10 sh -c "$ARB explain $extra | grep -q 'unhealthy'"

# 4. both GPUs come back: healthy again, in capacity again
set_lost "$T/lost" ""
cl_wait "GPU $lost1 healthy" 10 sh -c "$ARB events | grep -q \"gpu-healthy .*GPU $lost1 is healthy again\""
cl_wait "job $extra to run on a GPU back in capacity" 15 cl_is "$extra" running
[ "$(healthy g1 "$lost2")" = true ] || cl_fail "GPU $lost2 not healthy: $($ARB nodes -o json)"
$ARB cancel "$r" "$extra" >/dev/null
cl_wait "job $r cancelled" 15 cl_is "$r" cancelled
cl_wait "job $extra cancelled" 15 cl_is "$extra" cancelled

# 5. a gang over two nodes loses a GPU on one of them: stopped and
#    requeued whole, both members (a second agent, its own lost file)
: > "$T/lost2"
MOCK_NVML_GPUS="4:NVIDIA H100 80GB HBM3:81559" MOCK_NVML_LOST_FILE="$T/lost2" \
    $ARB agent --name g2 --controller "$ARBITER_URL" --nvml-lib "$MOCK" --log-dir "$T/logs/g2" \
    --allow-root --cgroups none --heartbeat 250ms 2>>"$T/agent-g2.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "g2 ready" 10 cl_node_ready g2
gang=$($ARB submit --gpus 4 --nodes 2 --name gang -- sleep 300)
cl_wait "the gang to run" 15 cl_is "$gang" running
set_lost "$T/lost2" 3
cl_wait "the gang requeued" 15 sh -c "$ARB events | grep -q 'job-requeued .*job $gang '"
$ARB events | grep -q "job-stopping .*job $gang .*GPU 3 on node 'g2' is unhealthy; stopping its 2 tasks" ||
    cl_fail "no job-stopping for the gang: $($ARB events | tail -5)"
grep -q "job $gang task [01]: stop requested" "$T/agent-g1.log" ||
    cl_fail "g1's member was not stopped: $(tail -5 "$T/agent-g1.log")"
cl_wait "the gang pending" 10 cl_is "$gang" pending
$ARB explain "$gang" | grep -q "GPU 3 on node 'g2' unhealthy" || cl_fail "explain: $($ARB explain "$gang")"
set_lost "$T/lost2" ""
cl_wait "the gang to run again" 15 cl_is "$gang" running
[ "$(cl_field "$gang" attempt)" = 2 ] || cl_fail "gang attempt $(cl_field "$gang" attempt), not 2"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "cluster_gpu_lost: ok"
