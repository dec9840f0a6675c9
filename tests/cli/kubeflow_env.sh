#!/bin/sh
# What Kubeflow's operators give a job's pods, on a live cluster (a
# controller, two agents on loopback): a TFJob's every task gets TF_CONFIG
# naming every PS and worker at a host:port of its own, and its own type
# and index; an MPIJob's launcher gets a hostfile (OMPI_MCA_orte_default_hostfile,
# I_MPI_HYDRA_HOST_FILE) with a line per worker and slotsPerWorker slots.
set -eu
ARB=$1
SRC=$2
NAME=kubeflow_env
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
cl_controller
CL_GPUS=2:H100 cl_agent n1
CL_GPUS=2:H100 cl_agent n2
cl_wait "two nodes" 20 sh -c "[ \$($ARB nodes | grep -c ' Ready ') -eq 2 ]"

cat >"$T/tf.yaml" <<'EOF'
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: tf-env}
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers:
          - name: tensorflow
            image: tensorflow/tensorflow
            command: [sh, -c, 'echo "TF=$TF_CONFIG"']
            resources: {limits: {nvidia.com/gpu: 1}}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: tensorflow
            image: tensorflow/tensorflow
            command: [sh, -c, 'echo "TF=$TF_CONFIG"']
            resources: {limits: {nvidia.com/gpu: 1}}
EOF
TF=$($ARB submit -f "$T/tf.yaml" 2>/dev/null)
cl_wait "the TFJob to succeed" 30 cl_is "$TF" succeeded
ports=""
for t in 0 1 2; do
    line=$($ARB logs "$TF" --task $t | sed -n 's/^TF=//p')
    case $t in
    0) want='"task":{"type":"ps","index":0}' ;;
    1) want='"task":{"type":"worker","index":0}' ;;
    2) want='"task":{"type":"worker","index":1}' ;;
    esac
    echo "$line" | grep -qF "$want" || cl_fail "task $t's TF_CONFIG: $line"
    echo "$line" | grep -Eq '^\{"cluster":\{"ps":\["[^"]+:[0-9]+"\],"worker":\["[^"]+:[0-9]+","[^"]+:[0-9]+"\]\},' ||
        cl_fail "task $t's cluster: $line"
    echo "$line" | grep -qF '"environment":"cloud"' || cl_fail "task $t: no environment: $line"
    case $line in *localhost*) cl_fail "task $t: a peer's host is unknown: $line" ;; esac
    here=$(echo "$line" | sed 's/"task".*//' | grep -o ':[0-9][0-9]*"' | tr -d '"' | tr '\n' ' ')
    [ -z "$ports" ] || [ "$ports" = "$here" ] || cl_fail "tasks disagree on the cluster: $line"
    ports=$here
done
[ "$(echo "$ports" | tr ' ' '\n' | sort -u | grep -c .)" -eq 3 ] || cl_fail "ports not distinct: $ports"

cat >"$T/mpi.yaml" <<'EOF'
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: mpi-env}
spec:
  slotsPerWorker: 2
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: mpi
            image: mpioperator/openmpi
            command: [sh, -c, 'echo "HF=$OMPI_MCA_orte_default_hostfile"; [ "$I_MPI_HYDRA_HOST_FILE" = "$OMPI_MCA_orte_default_hostfile" ] && cat "$OMPI_MCA_orte_default_hostfile"']
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: mpi
            image: mpioperator/openmpi
            command: [sh, -c, 'sleep 1']
            resources: {limits: {nvidia.com/gpu: 1}}
EOF
MPI=$($ARB submit -f "$T/mpi.yaml" 2>/dev/null)
cl_wait "the MPIJob to succeed" 30 cl_is "$MPI" succeeded
$ARB logs "$MPI" --task 0 >"$T/launcher.txt"
[ "$(grep -c ' slots=2$' "$T/launcher.txt")" -eq 2 ] || cl_fail "hostfile: $(cat "$T/launcher.txt")"
grep -q "^HF=/" "$T/launcher.txt" || cl_fail "no hostfile path: $(cat "$T/launcher.txt")"
echo "$NAME: ok"
