#!/bin/sh
# Workloads users already have, on a live cluster (a controller, two agents
# with fake GPUs, on loopback): a PyTorchJob manifest runs as one gang with
# the operator's environment; a two-node sbatch script runs with SLURM_*
# and an srun that starts each node's share of the tasks; the binary named
# sbatch, squeue, scancel and sinfo acts as those commands; a multi-document
# manifest posted as YAML to the API becomes its jobs (and a Service in it a
# warning), all refused together when one is refused; a job read back shows
# its constraints; a JSON body carries kind: service.
set -eu
ARB=$1
SRC=$2
NAME=compat
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
cl_controller
CL_GPUS=4:H100 cl_agent n1
CL_GPUS=4:H100 cl_agent n2
cl_wait "two nodes" 20 sh -c "[ \$($ARB nodes | grep -c ' Ready ') -eq 2 ]"
mkdir -p "$T/bin" "$T/work"
for c in sbatch squeue scancel sinfo; do ln -s "$ARB" "$T/bin/$c"; done

# ---- a PyTorchJob: master and workers, one gang, the operator's variables
cat >"$T/pt.yaml" <<'EOF'
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pt
  labels: {kueue.x-k8s.io/queue-name: default}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch
            command: [sh, -c, 'echo "master rank=$RANK world=$WORLD_SIZE node_rank=$PET_NODE_RANK group=$ARBITER_GROUP"']
            resources: {limits: {nvidia.com/gpu: 1}}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch
            command: [sh, -c, 'echo "worker rank=$RANK index=$ARBITER_GROUP_INDEX master=$MASTER_ADDR:$MASTER_PORT"']
            resources: {limits: {nvidia.com/gpu: 2}}
EOF
$ARB submit --dry-run -f "$T/pt.yaml" -o json >"$T/dry.json" 2>"$T/dry.err"
grep -q '"gang_min": 3' "$T/dry.json" || cl_fail "dry run: no gang of 3: $(cat "$T/dry.json")"
grep -q '"gpus": 5' "$T/dry.json" || cl_fail "dry run: not 5 GPUs"
PT=$($ARB submit -f "$T/pt.yaml" 2>"$T/submit.err")
cl_wait "the PyTorchJob to succeed" 30 cl_is "$PT" succeeded
$ARB logs "$PT" --task 0 | grep -q "master rank=0 world=3 node_rank=0 group=master" ||
    cl_fail "master's environment: $($ARB logs "$PT" --task 0)"
$ARB logs "$PT" --task 2 | grep -q "worker rank=2 index=1 master=" ||
    cl_fail "worker's environment: $($ARB logs "$PT" --task 2)"
grep -q "images are not pulled" "$T/submit.err" || cl_fail "no image warning"

# ---- an sbatch script on two nodes, through the binary named sbatch
cat >"$T/work/two.sh" <<'EOF'
#!/bin/sh
#SBATCH --job-name=two   # the name
#SBATCH -N 2 --ntasks-per-node=2
#SBATCH --gpus-per-node=1
#SBATCH -t 0:05:00
#SBATCH -o out-%j.txt
echo "batch $SLURM_JOB_ID on $SLURMD_NODENAME node $SLURM_NODEID of $SLURM_NNODES arg $1"
srun sh -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS"'
echo "hosts $(scontrol show hostnames | grep -c .)"
EOF
OUT=$(cd "$T/work" && "$T/bin/sbatch" two.sh hello 2>"$T/sbatch.err")
case $OUT in "Submitted batch job "*) ;; *) cl_fail "sbatch printed '$OUT'" ;; esac
SB=${OUT##* }
cl_wait "the batch job to succeed" 30 cl_is "$SB" succeeded
grep -q "batch $SB on n[12] node 0 of 2 arg hello" "$T/work/out-$SB.txt" ||
    cl_fail "node 0's output: $(cat "$T/work/out-$SB.txt" 2>&1)"
grep -q "task 0 of 4" "$T/work/out-$SB.txt" && grep -q "task 1 of 4" "$T/work/out-$SB.txt" ||
    cl_fail "node 0's srun tasks: $(cat "$T/work/out-$SB.txt")"
grep -q "^hosts 2$" "$T/work/out-$SB.txt" || cl_fail "SLURM_JOB_NODELIST: $(cat "$T/work/out-$SB.txt")"
$ARB logs "$SB" --task 1 | grep -q "task 3 of 4" || cl_fail "node 1's srun tasks"
ID=$(cd "$T/work" && "$T/bin/sbatch" --parsable --wrap "sleep 60" -J sleeper 2>/dev/null)
[ "$ID" -gt "$SB" ] || cl_fail "sbatch --parsable printed '$ID'"
cl_wait "the sleeper to run" 20 cl_is "$ID" running

# ---- squeue, sinfo, scancel
"$T/bin/squeue" >"$T/sq.txt"
head -1 "$T/sq.txt" | grep -q "JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)" ||
    cl_fail "squeue header: $(head -1 "$T/sq.txt")"
grep -Eq "^ +$ID +default +sleeper +[^ ]+ +R +" "$T/sq.txt" || cl_fail "squeue row: $(cat "$T/sq.txt")"
[ "$("$T/bin/squeue" -h -j "$ID" -o "%i %j %t")" = "$ID sleeper R" ] || cl_fail "squeue -o"
"$T/bin/squeue" -t all -h -o "%i %T" | grep -q "^$PT COMPLETED$" || cl_fail "squeue -t all"
"$T/bin/sinfo" | grep -Eq "^default\* +up +infinite +[0-9]+ +(idle|mix) " || cl_fail "sinfo: $("$T/bin/sinfo")"
"$T/bin/sinfo" -N -h | grep -q "^n1 " || cl_fail "sinfo -N"
"$T/bin/scancel" --state=RUNNING -n sleeper
cl_wait "the sleeper cancelled" 20 cl_is "$ID" cancelled

# ---- the API: a multi-document manifest as YAML; a ConfigMap skipped
cat >"$T/multi.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {a: b}
---
apiVersion: batch/v1
kind: Job
metadata: {name: ix}
spec:
  completions: 2
  completionMode: Indexed
  template:
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      tolerations: [{key: spot, operator: Exists}]
      containers:
      - name: c
        command: [sh, -c, 'echo index=$JOB_COMPLETION_INDEX']
        resources: {requests: {cpu: 100m, ephemeral-storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: one}
spec:
  activeDeadlineSeconds: 600
  containers: [{name: c, command: [echo, hi]}]
EOF
curl -s -H 'Content-Type: application/yaml' --data-binary @"$T/multi.yaml" \
    "$ARBITER_URL/v1/jobs" >"$T/multi.json"
grep -q '"warnings"' "$T/multi.json" && grep -q "ConfigMap 'cfg'" "$T/multi.json" ||
    cl_fail "multi: $(cat "$T/multi.json")"
IX=$(sed -n 's/.*"jobs": *\[{"id": *\([0-9]*\).*/\1/p' "$T/multi.json")
[ -n "$IX" ] || IX=$(grep -o '"id": *[0-9]*' "$T/multi.json" | head -1 | grep -o '[0-9]*$')
$ARB job "$IX" -o json >"$T/ix.json"
grep -q '"node_selector"' "$T/ix.json" && grep -q '"tolerations"' "$T/ix.json" &&
    grep -q '"ephemeral_storage": "1Gi"' "$T/ix.json" || cl_fail "read-back: $(cat "$T/ix.json")"
# one refused: none stands
cat >"$T/bad.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: ok}
spec: {containers: [{name: c, command: [echo]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec: {containers: [{name: c, command: [echo], resources: {limits: {nvidia.com/gpu: 9}}}]}
EOF
code=$(curl -s -o "$T/bad.json" -w '%{http_code}' -H 'Content-Type: application/yaml' \
    --data-binary @"$T/bad.yaml" "$ARBITER_URL/v1/jobs")
[ "$code" = 422 ] && grep -q "job 2 of 2 ('huge')" "$T/bad.json" || cl_fail "bad: $code $(cat "$T/bad.json")"
# checked whole before any is made: job 'ok' never existed (not even
# cancelled: made first and cancelled after, the scheduler could place it
# in between, and under load it did)
made=$($ARB queue --all | awk '$2 == "ok" {print $1 " " $4}')
[ -z "$made" ] || cl_fail "job 'ok' of the refused file was made: $made"

# ---- a JSON body carries kind: service
code=$(curl -s -o "$T/svc.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data '{"kind":"service","name":"web","port":18500,"replicas":1,"command":["sleep","30"]}' \
    "$ARBITER_URL/v1/jobs")
[ "$code" = 201 ] || cl_fail "JSON service: $code $(cat "$T/svc.json")"
echo "compat: ok"
