#!/bin/sh
# examples/demo-compat.sh ARBITER: the workloads users already have
# (`make demo-compat`), on a live cluster of a controller and two agents
# with four fake GPUs each.
#
#   Act 1  what a file becomes, without a controller: the Kubeflow
#          training-operator's PyTorchJob example and Princeton's DDP sbatch
#          script (tests/fixtures/compat, as published), by `arbiter submit
#          --dry-run`.
#   Act 2  that PyTorchJob, submitted as-is: master and worker start as one
#          gang and rendezvous. Arbiter runs no images, so the node must hold
#          what the image held: the demo stages the example image's entry
#          script (/opt/mnist/src/mnist.py) as a small stand-in that meets
#          its peers at MASTER_ADDR:MASTER_PORT, and removes it at the end.
#   Act 3  Brown CCV's job-array script, as published, through the binary
#          named sbatch: four elements, each writing %x-%A_%a.out; then
#          squeue, sinfo and scancel as Slurm users type them.
#
# Everything it starts is stopped on exit, and its files removed.
set -eu
ARB=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
DIR=$(cd "$(dirname "$0")/.." && pwd)
FIX=$DIR/tests/fixtures/compat
BOLD=$(printf '\033[1m') PLAIN=$(printf '\033[0m')
[ -t 1 ] || { BOLD=""; PLAIN=""; }
act() { printf '\n%s==== %s%s\n\n' "$BOLD" "$*" "$PLAIN"; }
say() { printf '%s$ %s%s\n' "$BOLD" "$*" "$PLAIN"; }

T=$(mktemp -d /tmp/arbiter-compat.XXXXXX)
chmod 755 "$T"
PIDS="" STAGED=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    [ -n "$STAGED" ] && rm -rf "$STAGED"
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
wait_for() { # wait_for WHAT SECONDS CMD...
    what=$1 n=$(($2 * 10))
    shift 2
    until "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        if [ "$n" -le 0 ]; then
            echo "demo-compat: timed out waiting for $what" >&2
            tail -n 5 "$T"/*.log >&2
            exit 1
        fi
        sleep 0.1
    done
}
state() { $ARB job "$1" | sed -n 's/^  state     \([a-z]*\).*/\1/p'; }
is() { [ "$(state "$1")" = "$2" ]; }

act "Act 1: what the files become (arbiter submit --dry-run, no controller)"
say "arbiter submit --dry-run -f pytorch-simple.yaml   # kubeflow/training-operator examples/pytorch/simple.yaml"
$ARB submit --dry-run -f "$FIX/k8s/pytorch-simple.yaml"
say "arbiter submit --dry-run -f princeton-ddp.slurm   # PrincetonUniversity/multi_gpu_training 02_pytorch_ddp/job.slurm"
$ARB submit --dry-run -f "$FIX/slurm/princeton-ddp.slurm"

act "The cluster: a controller and two agents with 4 GPUs each"
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/data" 2>>"$T/controller.log" &
PIDS="$PIDS $!"
wait_for "the controller" 20 test -s "$T/data/url"
ARBITER_URL=$(cat "$T/data/url")
export ARBITER_URL
for n in 1 2; do
    $ARB agent --name "node-$n" --controller "$ARBITER_URL" --fake-gpus 4:H100 --allow-root \
        --cgroups none --heartbeat 500ms --log-dir "$T/logs/node-$n" 2>>"$T/agent-$n.log" &
    PIDS="$PIDS $!"
done
wait_for "two nodes" 20 sh -c "[ \$($ARB nodes | grep -c ' Ready ') -eq 2 ]"
say "arbiter nodes"
$ARB nodes

act "Act 2: the PyTorchJob, as published"
if [ ! -e /opt/mnist ] && mkdir -p /opt/mnist/src 2>/dev/null; then
    STAGED=/opt/mnist
    cat >/opt/mnist/src/mnist.py <<'EOF'
# A stand-in for the example image's script: it meets its peers as
# torch.distributed's env:// rendezvous would (RANK, WORLD_SIZE, MASTER_*).
import os, socket, sys, time
rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "29500"))
print(f"rank {rank} of {world} ({os.environ.get('ARBITER_GROUP')}), master {addr}:{port}, args {sys.argv[1:]}", flush=True)
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port)); s.listen(world)
    peers = [s.accept()[0].recv(64).decode() for _ in range(world - 1)]
    print("rendezvous complete:", ", ".join(["rank 0"] + peers), flush=True)
else:
    for _ in range(100):
        try:
            c = socket.create_connection((addr, port)); c.sendall(f"rank {rank}".encode()); break
        except OSError:
            time.sleep(0.1)
print("epoch 1 done", flush=True)
EOF
    echo "(staged the image's entry script: /opt/mnist/src/mnist.py)"
else
    echo "(/opt/mnist exists or cannot be made here; the tasks run whatever is there)"
fi
say "arbiter submit -f pytorch-simple.yaml"
PT=$($ARB submit -f "$FIX/k8s/pytorch-simple.yaml" 2>"$T/warnings.txt")
echo "$PT"
sed 's/^/  /' "$T/warnings.txt"
wait_for "the PyTorchJob to end" 60 sh -c "$ARB job $PT | grep -Eq 'state     (succeeded|failed)'"
say "arbiter job $PT"
$ARB job "$PT" | head -12
say "arbiter logs $PT --task 0; arbiter logs $PT --task 1"
$ARB logs "$PT" --task 0
$ARB logs "$PT" --task 1
is "$PT" succeeded || { echo "demo-compat: the PyTorchJob did not succeed" >&2; exit 1; }

act "Act 3: Brown CCV's job-array script through 'sbatch', then squeue, sinfo, scancel"
mkdir -p "$T/bin" "$T/work"
for c in sbatch squeue scancel sinfo; do ln -s "$ARB" "$T/bin/$c"; done
PATH=$T/bin:$PATH
export PATH
cp "$FIX/slurm/brown-job-array.sh" "$T/work/job-array.sh"
cd "$T/work"
say "sbatch job-array.sh     # brown-ccv/slurm job_arrays/job-array.sh"
OUT=$(sbatch job-array.sh 2>"$T/sbatch-warnings.txt")
echo "$OUT"
FIRST=${OUT##* }
for id in $FIRST $((FIRST + 1)) $((FIRST + 2)) $((FIRST + 3)); do
    wait_for "array element $id" 30 is "$id" succeeded
done
say "squeue -t all"
squeue -t all
say "ls; cat arrayjob-${FIRST}_*.out"
ls
cat arrayjob-"$FIRST"_*.out
say "sbatch --wrap 'sleep 300' -J sleeper; squeue; sinfo; scancel -n sleeper"
S=$(sbatch --parsable --wrap 'sleep 300' -J sleeper 2>/dev/null)
wait_for "the sleeper to run" 20 is "$S" running
squeue
sinfo
scancel -n sleeper
wait_for "the sleeper cancelled" 20 is "$S" cancelled
squeue -j "$S" -o "%.8i %.10j %.10T"
echo
echo "demo-compat: done"
