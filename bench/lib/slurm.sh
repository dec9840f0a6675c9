# bench/lib/slurm.sh: a local Slurm for the benchmarks that run against it
# (bench/api.sh, bench/e2e.sh), sourced, not run. The caller sets T (its
# temp dir, mode 755) and stops what this starts (sl_stop_all in its EXIT
# trap). Every failure returns 1 with SL_WHY saying why, in text fit for a
# JSON string; the caller decides to skip or go on without Slurm.
#
#   sl_wait SECS CMD...     poll CMD every 0.1 s until it succeeds, else 1
#   sl_load, sl_now         the 1-minute load average; the time (s.ns)
#   sl_text TEXT            TEXT on one line with no quote or backslash
#   sl_free_ports N         the first of N consecutive ports no socket uses
#                           now (ss), below the kernel's ephemeral range, so
#                           no outgoing connection takes one meanwhile
#   sl_setup WHO PORTS SECS Debian's slurm-wlm there (slurmctld, slurmd,
#                           slurm-client, munge: apt-get installs them, in
#                           SECS at most, when missing and we are root),
#                           root (slurmd starts jobs), munged up on $T/munge
#                           with a generated key; SL_HOST, SL_CP (the first
#                           of PORTS free ports: slurmctld's, then the
#                           slurmd's) and SLURM_CONF ($T/slurm.conf,
#                           exported) set. WHO names the script in progress
#                           lines (stderr).
#   sl_conf CLUSTER MAXJOBS $T/slurm.conf's common part: one slurmctld on
#                           127.0.0.1, munge, root, state/spool/pid/log files
#                           under $T (per node through %n), select/cons_tres,
#                           proctrack/linuxproc, task/none, sched/backfill,
#                           no accounting, one partition "bench" of every
#                           node; the caller appends its own lines
#   sl_node NAME PORT CPUS [GPUS]  one node's line (its slurmd's port; GPUS as
#                           GRES gpu) and its spool dir
#   sl_start SECS NAME...   slurmctld and a slurmd per node NAME (state
#                           cleared), every node idle within SECS, else 1
#   sl_idle                 how many nodes are idle now
#   sl_stop                 stop slurmctld and the slurmd (munged stays)
#   sl_stop_all             and munged
#   sl_version              sbatch's version

SL_PIDS=""
SL_MUNGE_PID=""
SL_WHY=""

sl_wait() {
    n=$(($1 * 10))
    shift
    until "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        [ $n -gt 0 ] || return 1
        sleep 0.1
    done
}
sl_load() { cut -d' ' -f1 /proc/loadavg; }
sl_now() { date +%s.%N; }
sl_text() { echo "$1" | sed 's/["\\]/ /g' | tr '\n\t' '  ' | sed 's/ *$//'; }
sl_fail() { # WHY: 1, with SL_WHY set
    # shellcheck disable=SC2034 # the caller reads it
    SL_WHY=$(sl_text "$1")
    return 1
}

sl_free_ports() {
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    ss -Htan 2>/dev/null | awk '{n = split($4, a, ":"); print a[n]}' | sort -un >"$T/ports.used"
    while :; do
        b=$(($(od -An -N2 -tu2 /dev/urandom) % (lo - 10000 - $1) + 10000))
        hit=$(awk -v b="$b" -v e=$((b + $1 - 1)) '$1 >= b && $1 <= e' "$T/ports.used" | head -n 1)
        [ -z "$hit" ] && {
            echo "$b"
            return
        }
    done
}

sl_setup() {
    if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 ||
        ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "$1: installing slurmctld, slurmd, slurm-client, munge..." >&2
            DEBIAN_FRONTEND=noninteractive timeout "$3" apt-get install -y \
                --no-install-recommends slurmctld slurmd slurm-client munge >"$T/apt.log" 2>&1 ||
                sl_fail "apt-get install slurmctld slurmd slurm-client munge failed: $(tail -n 2 "$T/apt.log")" ||
                return 1
        else
            sl_fail "slurm-wlm is not installed and this is not root with apt-get: install slurmctld slurmd slurm-client munge" ||
                return 1
        fi
    fi
    [ "$(id -u)" = 0 ] || sl_fail "slurmd must run as root to start jobs (this is uid $(id -u))" || return 1
    mkdir -p "$T/munge"
    chmod 755 "$T/munge"
    dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2>/dev/null
    chmod 400 "$T/munge/munge.key"
    munged --key-file="$T/munge/munge.key" --socket="$T/munge/munge.sock" \
        --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
        --seed-file="$T/munge/seed" --force 2>"$T/munged.err" ||
        sl_fail "munged did not start: $(cat "$T/munged.err") $(tail -n 2 "$T/munge/munged.log" 2>/dev/null)" ||
        return 1
    sl_wait 10 test -s "$T/munge/munged.pid" || sl_fail "munged wrote no pid file" || return 1
    SL_MUNGE_PID=$(cat "$T/munge/munged.pid")
    SL_HOST=$(hostname -s)
    SL_CP=$(sl_free_ports "$2")
    SLURM_CONF=$T/slurm.conf
    export SLURM_CONF
}

sl_conf() {
    cat >"$T/slurm.conf" <<CONF
ClusterName=$1
SlurmctldHost=$SL_HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$SL_CP
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.%n.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MaxJobCount=$2
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PartitionName=bench Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

sl_node() {
    echo "NodeName=$1 NodeAddr=127.0.0.1 NodeHostname=$SL_HOST Port=$2 CPUs=$3 RealMemory=1000${4:+ Gres=gpu:$4} State=UNKNOWN" >>"$T/slurm.conf"
    mkdir -p "$T/spool/$1"
}

sl_idle() { sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$' || true; }

sl_start() {
    secs=$1
    shift
    rm -rf "$T/state"
    mkdir -p "$T/state"
    slurmctld -D -i -f "$T/slurm.conf" >"$T/slurmctld.out" 2>&1 &
    SL_PIDS="$SL_PIDS $!"
    for n in "$@"; do
        slurmd -D -N "$n" -f "$T/slurm.conf" >"$T/slurmd.$n.out" 2>&1 &
        SL_PIDS="$SL_PIDS $!"
    done
    sl_wait "$secs" sh -c "[ \$(sinfo -h -N -o '%N %T' | grep -c ' idle\$') -ge $# ]"
}

sl_stop() {
    for p in $SL_PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $SL_PIDS; do wait "$p" 2>/dev/null || true; done
    SL_PIDS=""
}

sl_stop_all() {
    sl_stop
    [ -z "$SL_MUNGE_PID" ] || kill "$SL_MUNGE_PID" 2>/dev/null || true
    SL_MUNGE_PID=""
}

sl_version() { sbatch --version | awk '{print $2}'; }
