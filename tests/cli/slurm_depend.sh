#!/bin/sh
# Slurm's job dependencies and array throttles, honoured by a live cluster
# (a controller and an agent on loopback): afterok waits for its parent to
# succeed and shows reason Dependency meanwhile (squeue, explain, the job's
# "wait"); afterok of a failed parent stays pending as
# DependencyNeverSatisfied while afternotok of it runs; an array with %1 runs
# one element at a time (JobArrayTaskLimit for the others); singleton jobs
# of one name never overlap. Overlap is caught by a mkdir lock the scripts
# take: two at once and one of them fails.
set -eu
ARB=$1
SRC=$2
NAME=slurm_depend
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
cl_controller
CL_GPUS=4:H100 cl_agent n1
cl_wait "a node" 20 cl_node_ready n1
mkdir -p "$T/bin" "$T/w"
for c in sbatch squeue; do ln -s "$ARB" "$T/bin/$c"; done
cd "$T/w"

# A script that holds the lock ./lock for a while: two at once, one fails.
cat >locked.sh <<'EOF'
#!/bin/sh
#SBATCH -c 1
mkdir lock || { echo "overlap: lock held" >&2; exit 3; }
echo "$SLURM_JOB_ID ${SLURM_ARRAY_TASK_ID:-}" >>order.txt
sleep 1.5
rmdir lock
EOF

# ---- afterok: the child waits for its parent, and says why
# The parent runs until the test has seen the child held (./go), not for a
# fixed time: under ASan at a load of 32 its 3 s sleep ended before the
# checks below had read the child's state. (At most 60 s: a failed check
# stops the test, and the cleanup the parent.)
cat >parent.sh <<'EOF'
#!/bin/sh
#SBATCH -c 1
n=0
while [ ! -e go ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
touch parent.done
EOF
cat >child.sh <<'EOF'
#!/bin/sh
#SBATCH -c 1
[ -e parent.done ] || { echo "started before its parent ended" >&2; exit 4; }
EOF
P=$("$T/bin/sbatch" --parsable parent.sh 2>/dev/null)
C=$("$T/bin/sbatch" --parsable --dependency=afterok:"$P" child.sh 2>/dev/null)
cl_wait "the child to be held" 20 sh -c "$ARB job $C -o json | grep -q '\"wait\": \"dependency\"'"
cl_is "$C" pending || cl_fail "child is $(cl_state "$C") while its parent runs"
"$T/bin/squeue" -h -j "$C" -o "%i %t %R" | grep -q "^$C PD (Dependency)$" ||
    cl_fail "squeue reason: $("$T/bin/squeue" -h -j "$C" -o "%i %t %R")"
$ARB explain "$C" | grep -q "afterok:$P waiting" || cl_fail "explain: $($ARB explain "$C")"
$ARB job "$C" -o json | grep -q "\"dependency\": \"afterok:$P\"" || cl_fail "read-back: no dependency"
touch go
cl_wait "the child to succeed after its parent" 30 cl_is "$C" succeeded
cl_is "$P" succeeded || cl_fail "parent is $(cl_state "$P")"

# ---- a failed parent: afterok never, afternotok runs
cat >fail.sh <<'EOF'
#!/bin/sh
#SBATCH -c 1
exit 1
EOF
F=$("$T/bin/sbatch" --parsable fail.sh 2>/dev/null)
OK=$("$T/bin/sbatch" --parsable -d afterok:"$F" child.sh 2>/dev/null)
NOK=$("$T/bin/sbatch" --parsable -d "afternotok:$F" child.sh 2>/dev/null)
cl_wait "the failing parent to fail" 30 cl_is "$F" failed
cl_wait "afternotok to run" 30 cl_is "$NOK" succeeded
cl_wait "afterok to be never satisfied" 20 sh -c \
    "'$T/bin/squeue' -h -j $OK -o '%t %R' | grep -q '^PD (DependencyNeverSatisfied)$'"
$ARB explain "$OK" | grep -q "can never be met" || cl_fail "explain: $($ARB explain "$OK")"
cl_is "$OK" pending || cl_fail "afterok of a failed job is $(cl_state "$OK"), not pending"
# a dependency on a job that does not exist is refused, as sbatch refuses it
if "$T/bin/sbatch" --parsable -d afterok:99999 child.sh >/dev/null 2>"$T/nojob.err"; then
    cl_fail "a dependency on no job was accepted"
fi
grep -q "job 99999: no such job" "$T/nojob.err" || cl_fail "no-job error: $(cat "$T/nojob.err")"

# ---- an array with %1: one element at a time, the others JobArrayTaskLimit
OUT=$("$T/bin/sbatch" --array=0-3%1 locked.sh 2>/dev/null)
A=${OUT##* }
cl_wait "an element held by the throttle" 20 sh -c \
    "'$T/bin/squeue' -h -o '%t %R' | grep -q '^PD (JobArrayTaskLimit)$'"
for k in 0 1 2 3; do
    cl_wait "array element $k to succeed" 40 cl_is $((A + k)) succeeded
done
[ "$(wc -l <order.txt)" -eq 4 ] || cl_fail "array ran: $(cat order.txt)"
$ARB job "$((A + 2))" -o json | grep -q '"throttle": 1' || cl_fail "read-back: no throttle"

# ---- singleton: jobs of one name, one at a time
rm -f order.txt
S1=$("$T/bin/sbatch" --parsable -J single -d singleton locked.sh 2>/dev/null)
S2=$("$T/bin/sbatch" --parsable -J single -d singleton locked.sh 2>/dev/null)
S3=$("$T/bin/sbatch" --parsable -J single --dependency=singleton locked.sh 2>/dev/null)
for s in "$S1" "$S2" "$S3"; do
    cl_wait "singleton $s to succeed" 40 cl_is "$s" succeeded
done
[ "$(cut -d' ' -f1 order.txt | tr '\n' ' ')" = "$S1 $S2 $S3 " ] || cl_fail "singleton order: $(cat order.txt)"
echo "$NAME: ok"
