#!/bin/sh
# bench/api.sh ARBITER [JOBS] [CLIENTS]: durable submissions per second,
# Arbiter against Slurm, in one script (issue 4's comparison). JSON lines
# on stdout, progress on stderr. Defaults: 20000 jobs, 32 clients.
#
#  1. arbiter: a controller on a temp dir (SQLite, synchronous=FULL: every
#     acknowledged submission is fsync'd; concurrent ones share a commit),
#     then `arbiter bench api --clients C --jobs N -o json` (C threads on
#     keep-alive HTTP connections). No agents: the jobs stay pending.
#  2. slurm: Debian's slurm-wlm (slurmctld, slurmd, munge; installed with
#     apt-get when missing and we are root), a local slurm.conf in the temp
#     dir (one node = this machine, select/cons_tres, proctrack/linuxproc,
#     task/none, state and spool under the temp dir), munged with a generated
#     key. The same N jobs go in as N separate `sbatch --hold --wrap true`
#     calls from C parallel workers (xargs -P): one submission per job, as
#     Arbiter's benchmark does, not one job array (a single RPC for all,
#     which would measure nothing comparable); --hold keeps them pending,
#     as Arbiter's are. Slurm acknowledges a submission once it is in
#     slurmctld's memory and saves its state periodically, not per job.
#  3. the ratio of the two submits/s.
# Slurm gets a fixed time box (SLURM_TIMEBOX_S, default 600 s for setup
# and submissions); when it cannot run, the script says why in a JSON line
# and prints Arbiter's figures alone. The machine's load average before
# and after each run is part of each line: figures from a busy machine
# are what they are.
set -eu
ARB=$1
JOBS=${2:-20000}
CLIENTS=${3:-32}
BOX=${SLURM_TIMEBOX_S:-600}
T=$(mktemp -d /tmp/arb_bench_api.XXXXXX)
chmod 755 "$T"
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
wait_for() { # WHAT SECS CMD...: bounded polling
    n=$(($2 * 10)) what=$1
    shift 2
    until "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        [ $n -gt 0 ] || return 1
        sleep 0.1
    done
}
load() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
free_port() { # a port nothing answers on now (curl exit 7: connection refused)
    p=$(( $(od -An -N2 -tu2 /dev/urandom) % 20000 + 30000 ))
    while :; do
        rc=0
        curl -s -o /dev/null --connect-timeout 1 "http://127.0.0.1:$p/" || rc=$?
        [ "$rc" = 7 ] && break
        p=$((p + 1))
    done
    echo "$p"
}
skip() {
    printf '{"system": "slurm", "skipped": true, "why": "%s"}\n' "$(echo "$1" | sed 's/["\\]/ /g' | tr '\n' ' ')"
    exit 0
}

# ---- 1. arbiter -------------------------------------------------------------------
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/d" 2>"$T/controller.log" &
PIDS="$PIDS $!"
wait_for "controller" 20 test -s "$T/d/url" || { echo "bench/api.sh: the controller did not start" >&2; cat "$T/controller.log" >&2; exit 1; }
ARBITER_URL=$(cat "$T/d/url")
export ARBITER_URL
l0=$(load)
echo "bench/api.sh: arbiter: $JOBS submissions from $CLIENTS clients..." >&2
A=$($ARB bench api --clients "$CLIENTS" --jobs "$JOBS" -o json)
l1=$(load)
echo "$A" | sed "s/^{/{\"system\": \"arbiter\", \"load_before\": $l0, \"load_after\": $l1, \"durable\": \"fsync per commit (synchronous=FULL), group commit\", /"
ARB_RATE=$(echo "$A" | sed -n 's/.*"submits_per_s": *\([0-9.]*\).*/\1/p')

# ---- 2. slurm ---------------------------------------------------------------------
DEADLINE=$(( $(date +%s) + BOX ))
left() { echo $(( DEADLINE - $(date +%s) )); }
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "bench/api.sh: installing slurmctld, slurmd, slurm-client, munge..." >&2
        DEBIAN_FRONTEND=noninteractive timeout "$(left)" apt-get install -y --no-install-recommends \
            slurmctld slurmd slurm-client munge >"$T/apt.log" 2>&1 ||
            skip "apt-get install slurmctld slurmd slurm-client munge failed: $(tail -n 2 "$T/apt.log")"
    else
        skip "slurm-wlm is not installed and this is not root with apt-get: install slurmctld slurmd slurm-client munge"
    fi
fi
mkdir -p "$T/munge" "$T/state" "$T/spool"
chmod 755 "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$T/munge/munge.key"
munged --key-file="$T/munge/munge.key" --socket="$T/munge/munge.sock" \
    --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
    --seed-file="$T/munge/seed" --force 2>"$T/munged.err" ||
    skip "munged did not start: $(cat "$T/munged.err") $(tail -n 2 "$T/munge/munged.log" 2>/dev/null)"
wait_for "munged" 10 test -s "$T/munge/munged.pid" || skip "munged wrote no pid file"
PIDS="$PIDS $(cat "$T/munge/munged.pid")"
CP=$(free_port)
DP=$(free_port)
[ "$DP" = "$CP" ] && DP=$((CP + 1))
HOST=$(hostname -s)
cat > "$T/slurm.conf" <<CONF
ClusterName=arbbench
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CP
SlurmdPort=$DP
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MaxJobCount=$((JOBS * 2 + 1000))
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=benchnode NodeAddr=127.0.0.1 NodeHostname=$HOST CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=bench Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
SLURM_CONF=$T/slurm.conf
export SLURM_CONF
slurmctld -D -i -f "$T/slurm.conf" >"$T/slurmctld.out" 2>&1 &
PIDS="$PIDS $!"
slurmd -D -N benchnode -f "$T/slurm.conf" >"$T/slurmd.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "slurm's node idle" 60 sh -c 'sinfo -h -o %T | grep -q idle' ||
    skip "slurmctld/slurmd did not come up within 60 s: $(tail -n 3 "$T/slurmctld.log" "$T/slurmd.log" "$T/slurmctld.out" 2>/dev/null)"
echo "bench/api.sh: slurm: $JOBS sbatch calls from $CLIENTS workers..." >&2
per=$(( (JOBS + CLIENTS - 1) / CLIENTS ))
l0=$(load)
t0=$(now)
seq "$JOBS" | timeout "$(left)" xargs -P "$CLIENTS" -n "$per" sh -c \
    'for i; do sbatch --hold --parsable -o /dev/null -J bench --wrap true || echo "sbatch failed" >&2; done' _ \
    >"$T/ids" 2>"$T/sbatch.err" || true
t1=$(now)
l1=$(load)
ok=$(grep -c '^[0-9]' "$T/ids" || true)
failed=$((JOBS - ok))
[ "$ok" -gt 0 ] || skip "no sbatch succeeded: $(head -n 3 "$T/sbatch.err")"
queued=$(squeue -h -o %i | wc -l)
secs=$(echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}')
rate=$(echo "$ok $secs" | awk '{printf "%.1f", $1 / $2}')
printf '{"system": "slurm", "version": "%s", "jobs": %d, "ok": %d, "failed": %d, "queued": %d, "clients": %d, "seconds": %s, "submits_per_s": %s, "load_before": %s, "load_after": %s, "method": "one sbatch --hold --wrap true per job, %d parallel workers", "durable": "in slurmctld memory at acknowledgement; state saved periodically"}\n' \
    "$(sbatch --version | awk '{print $2}')" "$JOBS" "$ok" "$failed" "$queued" "$CLIENTS" "$secs" "$rate" "$l0" "$l1" "$CLIENTS"
printf '{"ratio_arbiter_over_slurm": %s}\n' "$(echo "$ARB_RATE $rate" | awk '{printf "%.2f", $1 / $2}')"
