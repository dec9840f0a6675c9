#!/bin/sh
# bench/api.sh ARBITER [JOBS] [CLIENTS]: durable submissions per second,
# Arbiter against Slurm, in one script (issue 4's comparison). JSON lines
# on stdout, progress on stderr. Defaults: 20000 jobs, 32 clients.
#
#  1. arbiter: a controller on a temp dir (SQLite, synchronous=FULL: every
#     acknowledged submission is fsync'd; concurrent ones share a commit),
#     then `arbiter bench api --clients C --jobs N -o json` (C threads on
#     keep-alive HTTP connections). No agents: the jobs stay pending.
#  2. slurm (set up by bench/lib/slurm.sh, as bench/e2e.sh's): Debian's
#     slurm-wlm (slurmctld, slurmd, munge; installed with apt-get when
#     missing and we are root), a local slurm.conf in the temp dir (one node
#     = this machine, select/cons_tres, proctrack/linuxproc, task/none,
#     state and spool under the temp dir), munged with a generated key. The same N jobs go in as N separate `sbatch --hold --wrap true`
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
    sl_stop_all
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
# shellcheck source=bench/lib/slurm.sh
. "$(dirname "$0")/lib/slurm.sh"
trap cleanup EXIT
trap 'exit 1' INT TERM
skip() {
    printf '{"system": "slurm", "skipped": true, "why": "%s"}\n' "$(sl_text "$1")"
    exit 0
}

# ---- 1. arbiter -------------------------------------------------------------------
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/d" 2>"$T/controller.log" &
PIDS="$PIDS $!"
sl_wait 20 test -s "$T/d/url" || { echo "bench/api.sh: the controller did not start" >&2; cat "$T/controller.log" >&2; exit 1; }
ARBITER_URL=$(cat "$T/d/url")
export ARBITER_URL
l0=$(sl_load)
echo "bench/api.sh: arbiter: $JOBS submissions from $CLIENTS clients..." >&2
A=$($ARB bench api --clients "$CLIENTS" --jobs "$JOBS" -o json)
l1=$(sl_load)
echo "$A" | sed "s/^{/{\"system\": \"arbiter\", \"load_before\": $l0, \"load_after\": $l1, \"durable\": \"fsync per commit (synchronous=FULL), group commit\", /"
ARB_RATE=$(echo "$A" | sed -n 's/.*"submits_per_s": *\([0-9.]*\).*/\1/p')

# ---- 2. slurm ---------------------------------------------------------------------
DEADLINE=$(( $(date +%s) + BOX ))
left() { echo $(( DEADLINE - $(date +%s) )); }
sl_setup bench/api.sh 2 "$(left)" || skip "$SL_WHY"
sl_conf arbbench $((JOBS * 2 + 1000))
sl_node benchnode $((SL_CP + 1)) "$(nproc)"
sl_start 60 benchnode ||
    skip "slurmctld/slurmd did not come up within 60 s: $(tail -n 3 "$T/slurmctld.log" "$T/slurmd.benchnode.log" "$T/slurmctld.out" 2>/dev/null)"
echo "bench/api.sh: slurm: $JOBS sbatch calls from $CLIENTS workers..." >&2
per=$(( (JOBS + CLIENTS - 1) / CLIENTS ))
l0=$(sl_load)
t0=$(sl_now)
seq "$JOBS" | timeout "$(left)" xargs -P "$CLIENTS" -n "$per" sh -c \
    'for i; do sbatch --hold --parsable -o /dev/null -J bench --wrap true || echo "sbatch failed" >&2; done' _ \
    >"$T/ids" 2>"$T/sbatch.err" || true
t1=$(sl_now)
l1=$(sl_load)
ok=$(grep -c '^[0-9]' "$T/ids" || true)
failed=$((JOBS - ok))
[ "$ok" -gt 0 ] || skip "no sbatch succeeded: $(head -n 3 "$T/sbatch.err")"
queued=$(squeue -h -o %i | wc -l)
secs=$(echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}')
rate=$(echo "$ok $secs" | awk '{printf "%.1f", $1 / $2}')
printf '{"system": "slurm", "version": "%s", "jobs": %d, "ok": %d, "failed": %d, "queued": %d, "clients": %d, "seconds": %s, "submits_per_s": %s, "load_before": %s, "load_after": %s, "method": "one sbatch --hold --wrap true per job, %d parallel workers", "durable": "in slurmctld memory at acknowledgement; state saved periodically"}\n' \
    "$(sl_version)" "$JOBS" "$ok" "$failed" "$queued" "$CLIENTS" "$secs" "$rate" "$l0" "$l1" "$CLIENTS"
printf '{"ratio_arbiter_over_slurm": %s}\n' "$(echo "$ARB_RATE $rate" | awk '{printf "%.2f", $1 / $2}')"
