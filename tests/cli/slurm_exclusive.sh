#!/bin/sh
# sbatch --exclusive on a live cluster (a controller, two agents on
# loopback): an exclusive job's node takes no other job's task (both small
# jobs after it all go to the other node, though its node has room), the
# read-back says exclusive, and an exclusive job waits for an empty node
# (explain says why) and starts on the one that empties (its first job
# cancelled).
set -eu
ARB=$1
SRC=$2
NAME=slurm_exclusive
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
cl_controller
CL_GPUS=4:H100 cl_agent n1
CL_GPUS=4:H100 cl_agent n2
cl_wait "two nodes" 20 sh -c "[ \$($ARB nodes | grep -c ' Ready ') -eq 2 ]"
mkdir -p "$T/w"
cd "$T/w"
node_of() { # the node of the job's first task
    $ARB job "$1" -o json | tr -d ' \n' | sed -n 's/.*"tasks":\[{[^}]*"node":"\([^"]*\)".*/\1/p'
}
cat >excl.sh <<'EOF'
#!/bin/sh
#SBATCH --exclusive -G 1 -c 1
sleep "${1:-4}"
EOF
cat >small.sh <<'EOF'
#!/bin/sh
#SBATCH -G 1 -c 1
sleep 120
EOF
X=$($ARB sbatch --parsable excl.sh 120 2>/dev/null)
cl_wait "the exclusive job to run" 20 cl_is "$X" running
XN=$(node_of "$X")
$ARB job "$X" -o json | grep -q '"exclusive": true' || cl_fail "read-back: not exclusive"
for k in 1 2; do
    Y=$($ARB sbatch --parsable small.sh 2>/dev/null)
    cl_wait "small job $k to run" 20 cl_is "$Y" running
    [ "$(node_of "$Y")" != "$XN" ] || cl_fail "small job $Y shares $XN with exclusive job $X"
done
# both nodes hold tasks now: a second exclusive job waits for an empty node
W=$($ARB sbatch --parsable excl.sh 120 2>/dev/null)
sleep 1
cl_is "$W" pending || cl_fail "exclusive job $W is $(cl_state "$W") while every node is busy"
$ARB explain "$W" >"$T/explain.txt" 2>&1 || true
grep -q "not shared" "$T/explain.txt" || cl_fail "explain: $(cat "$T/explain.txt")"
$ARB cancel "$X" >/dev/null
cl_wait "the first exclusive job to end" 30 cl_is "$X" cancelled
cl_wait "the second exclusive job to run" 30 cl_is "$W" running
[ "$(node_of "$W")" = "$XN" ] || cl_fail "exclusive job $W runs on $(node_of "$W"), not the empty $XN"
echo "$NAME: ok"
