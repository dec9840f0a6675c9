#!/bin/sh
# bench/e2e.sh ARBITER [JOBS] [RUNS]: trivial jobs end to end, Arbiter
# against Slurm, in one script (issue 20). JSON lines on stdout, progress on
# stderr. Defaults: 5000 jobs, 1 run of each side (RUNS=3 for medians).
#
#  1. slurm's cluster, set up once (bench/lib/slurm.sh, as bench/api.sh's): Debian's slurm-wlm (slurmctld, slurmd,
#     munge; installed with apt-get when missing and we are root), munged
#     with a generated key, a slurm.conf in a temp dir: 10 nodes (n01..n10)
#     of 8 CPUs and 8 GPUs each, every node its own slurmd on this host
#     (slurmd -N NAME, NodeHostname this host, its own Port, spool, pid and
#     log files through %n; Debian's 22.05 runs them), select/cons_tres,
#     proctrack/linuxproc, task/none, no accounting, sched/backfill with
#     Slurm's default scheduler parameters. The GPUs are GRES without
#     device files (gres.conf Name=gpu Count=8, no File=) where slurmd keeps
#     them (slurmd -G lists them); Slurm 22.05 drops a file-less GPU, so
#     there each GPU gets a device file of its own, a character device with
#     /dev/null's numbers (nothing opens or constrains it under task/none):
#     the nearest setup it allows ("gres" in the Slurm line). If the nodes
#     do not all come up, the closest setup replaces it: one slurmd, one
#     node of 80 CPUs and 80 GPUs ("layout" says which, and why).
#  2. RUNS times, alternately:
#     arbiter: `arbiter bench e2e --agents 10 --jobs N -o json` (its own
#       controller, SQLite with every acknowledged write fsync'd, 10 agents
#       of 8 fake GPUs, 8 client threads, one-GPU jobs of `true`, timed
#       from the first submission until every job has ended);
#     slurm: the same N jobs as N separate `sbatch --gres=gpu:1 --wrap true`
#       calls from 8 parallel workers (xargs -P 8; sbatch is Slurm's own
#       client, one process per submission), each job's output in its own
#       file (as Arbiter's tasks have theirs), timed from the first
#       submission until squeue shows none of them pending, running or
#       completing (polled every 0.1 s: the end is known to about that);
#       the jobs' final states from squeue (MinJobAge keeps them there).
#       Slurm's daemons stay up, idle, while Arbiter runs.
#  3. a summary line: each side's completed_per_s per run, the medians and
#     the ratio of the medians.
# Slurm gets a time box (SLURM_TIMEBOX_S, default 120 s + 600 s a run, for
# its setup and all its runs; a run cut by it is reported, not counted).
# When Slurm cannot run (not root, no slurm-wlm and no apt-get, the package
# or the daemons fail) a JSON line says why, Arbiter's figures are printed
# alone and the exit status is 0. The machine's load average before and
# after each run is part of each line: figures from a busy machine are what
# they are. E2E_KEEP=1 keeps the temp dir (the daemons' logs) and names it.
set -eu
ARB=$1
JOBS=${2:-5000}
RUNS=${3:-${RUNS:-1}}
AGENTS=10
GPUS=8
CLIENTS=8
BOX=${SLURM_TIMEBOX_S:-$((120 + 600 * RUNS))}
T=$(mktemp -d /tmp/arb_e2e_slurm.XXXXXX)
chmod 755 "$T"
PIDS=""
# shellcheck source=bench/lib/slurm.sh
. "$(dirname "$0")/lib/slurm.sh"
cleanup() {
    sl_stop_all
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    if [ -n "${E2E_KEEP:-}" ]; then echo "bench/e2e.sh: kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
field() { echo "$2" | sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {if (NR == 0) print "null"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
SLURM_WHY=""
no_slurm() { # WHY: Slurm cannot run; the Arbiter runs go on alone
    SLURM_WHY=$(sl_text "$1")
    sl_stop
    return 1
}

# ---- 1. slurm's cluster -----------------------------------------------------------
DEADLINE=$(($(date +%s) + BOX))
left() { l=$((DEADLINE - $(date +%s))); [ $l -gt 0 ] || l=1; echo $l; }
LAYOUT=""
write_conf() { # NODES GPUS_PER_NODE: slurm.conf and gres.conf for that layout
    sl_conf arbe2e $((JOBS * RUNS + 1000))
    printf 'GresTypes=gpu\nMinJobAge=86400\n' >>"$T/slurm.conf"
    i=1
    while [ $i -le "$1" ]; do
        sl_node "$(printf 'n%02d' $i)" $((SL_CP + i)) "$2" "$2"
        i=$((i + 1))
    done
    write_gres "$1" "$2" ""
    # Slurm 22.05 drops a file-less GPU ("Removing file-less GPU" in slurmd's
    # log; the node then reports 0 of its GPUs and is drained): when slurmd -G
    # does not list the count, each GPU gets a device file of its own, a
    # character device with /dev/null's numbers (1, 3), the nearest setup
    # Slurm allows (task/none: nothing is constrained, nothing opens them)
    rm -f "$T/gres.check"
    slurmd -G -N n01 -f "$T/slurm.conf" -L "$T/gres.check" >"$T/gres.check.out" 2>&1 || true
    if cat "$T/gres.check" "$T/gres.check.out" 2>/dev/null | grep -q "Gres Name=gpu.*Count=$2"; then
        GRES="Name=gpu Count=$2, no File= (no device files)"
        return 0
    fi
    write_gres "$1" "$2" files
    GRES="Name=gpu Count=$2 File=<one character device per GPU, /dev/null's numbers 1,3>: this Slurm drops file-less GPUs"
}
write_gres() { # NODES GPUS_PER_NODE FILES: gres.conf, with device files when FILES
    : >"$T/gres.conf"
    i=1
    while [ $i -le "$1" ]; do
        n=$(printf 'n%02d' $i)
        if [ -n "$3" ]; then
            mkdir -p "$T/dev/$n"
            g=0
            while [ $g -lt "$2" ]; do
                [ -c "$T/dev/$n/gpu$g" ] || mknod "$T/dev/$n/gpu$g" c 1 3
                g=$((g + 1))
            done
            echo "NodeName=$n Name=gpu Count=$2 File=$T/dev/$n/gpu[0-$(($2 - 1))]" >>"$T/gres.conf"
        else
            echo "NodeName=$n Name=gpu Count=$2" >>"$T/gres.conf"
        fi
        i=$((i + 1))
    done
}
start_slurm() { # NODES GPUS_PER_NODE SECS: the daemons up and every node idle, or 1
    write_conf "$1" "$2"
    names=""
    i=1
    while [ $i -le "$1" ]; do
        names="$names $(printf 'n%02d' $i)"
        i=$((i + 1))
    done
    # shellcheck disable=SC2086 # one word a node
    sl_start "$3" $names
}
setup_slurm() {
    sl_setup bench/e2e.sh $((AGENTS + 1)) "$(left)" || no_slurm "$SL_WHY" || return 1
    mkdir -p "$T/out"
    echo "bench/e2e.sh: slurm: $AGENTS slurmd of $GPUS GPUs on this host..." >&2
    if start_slurm $AGENTS $GPUS 60; then
        LAYOUT="$AGENTS nodes x $GPUS GPUs, one slurmd per node on this host"
        return 0
    fi
    many="$(sl_idle) of $AGENTS nodes idle after 60 s: $(tail -n 2 "$T/slurmctld.log" "$T/slurmd.n02.log" 2>/dev/null | tr '\n' ' ')"
    sl_stop
    for f in "$T"/slurm*.log "$T"/slurm*.out; do mv "$f" "$f.multi" 2>/dev/null || true; done
    echo "bench/e2e.sh: slurm: several slurmd on one host did not come up ($many); one node of $((AGENTS * GPUS)) GPUs instead" >&2
    if start_slurm 1 $((AGENTS * GPUS)) 60; then
        LAYOUT="1 node x $((AGENTS * GPUS)) GPUs, one slurmd: several slurmd on one host did not come up ($many)"
        LAYOUT=$(echo "$LAYOUT" | sed 's/["\\]/ /g' | tr '\t' ' ')
        return 0
    fi
    no_slurm "slurmctld/slurmd did not come up within 60 s, with 10 nodes ($many) nor with one: $(tail -n 3 "$T/slurmctld.log" "$T/slurmd.n01.log" "$T/slurmctld.out" 2>/dev/null)"
}
SLURM=0
setup_slurm && SLURM=1

# ---- 2. the runs, alternately ------------------------------------------------------
active() { squeue -h -n "$1" -t PD,R,CG,CF,S,RQ,RS,RF,SO,SI -o %i 2>/dev/null | wc -l; }
slurm_run() { # RUN: one run of the N jobs on Slurm; its JSON line, its rate in $S_RATE
    name=e2e$1
    per=$(((JOBS + CLIENTS - 1) / CLIENTS))
    echo "bench/e2e.sh: slurm run $1: $JOBS sbatch --gres=gpu:1 --wrap true from $CLIENTS workers..." >&2
    l0=$(sl_load)
    t0=$(sl_now)
    # shellcheck disable=SC2016 # the worker's own $1, $2, $i
    seq "$JOBS" | timeout "$(left)" xargs -P "$CLIENTS" -n "$per" sh -c \
        'n=$1; o=$2; shift 2; for i; do sbatch --parsable --gres=gpu:1 -J "$n" -o "$o/%j.out" --wrap true || echo "sbatch failed" >&2; done' _ "$name" "$T/out" \
        >"$T/ids.$1" 2>"$T/sbatch.err.$1" || true
    ts=$(sl_now)
    ok=$(grep -c '^[0-9]' "$T/ids.$1" || true)
    ended=1
    until [ "$(active "$name")" = 0 ]; do
        [ "$(date +%s)" -lt "$DEADLINE" ] || { ended=0; break; }
        sleep 0.1
    done
    t1=$(sl_now)
    l1=$(sl_load)
    squeue -h -n "$name" -t all -o %T >"$T/states.$1" 2>/dev/null || true
    done_ok=$(grep -c '^COMPLETED$' "$T/states.$1" || true)
    left_n=$(active "$name")
    secs=$(echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}')
    sub=$(echo "$t0 $ts" | awk '{printf "%.3f", $2 - $1}')
    S_RATE=$(echo "$done_ok $secs" | awk '{printf "%.1f", $1 / $2}')
    states=$(sort "$T/states.$1" | uniq -c | awk '{printf "%s\"%s\": %d", (NR > 1 ? ", " : ""), $2, $1}')
    printf '{"system": "slurm", "run": %d, "version": "%s", "layout": "%s", "gres": "%s", "jobs": %d, "submitted": %d, "completed": %d, "not_ended": %d, "ended_in_time": %s, "states": {%s}, "clients": %d, "submit_s": %s, "seconds": %s, "completed_per_s": %s, "load_before": %s, "load_after": %s, "method": "one sbatch --gres=gpu:1 --wrap true per job from %d parallel workers, output to a file per job; timed from the first submission until squeue shows none pending, running or completing (polled every 0.1 s)"}\n' \
        "$1" "$(sl_version)" "$LAYOUT" "$GRES" "$JOBS" "$ok" "$done_ok" "$left_n" \
        "$([ $ended = 1 ] && echo true || echo false)" "$states" "$CLIENTS" "$sub" "$secs" "$S_RATE" "$l0" "$l1" "$CLIENTS"
    [ $ended = 1 ] || {
        SLURM_WHY="the time box (SLURM_TIMEBOX_S=$BOX s) ended with $left_n jobs of run $1 not ended"
        scancel -n "$name" 2>/dev/null || true
        return 1
    }
}
A_RATES="" S_RATES="" A_CPU=""
r=1
while [ $r -le "$RUNS" ]; do
    echo "bench/e2e.sh: arbiter run $r: arbiter bench e2e --agents $AGENTS --jobs $JOBS..." >&2
    l0=$(sl_load)
    A=$($ARB bench e2e --agents $AGENTS --gpus $GPUS --clients $CLIENTS --jobs "$JOBS" -o json) || A=""
    l1=$(sl_load)
    if [ -n "$A" ]; then
        echo "$A" | sed "s/^{/{\"system\": \"arbiter\", \"run\": $r, /"
        A_RATES="$A_RATES $(field completed_per_s "$A")"
        A_CPU="$A_CPU $(field controller_cpu_ms_per_job "$A")"
    else
        printf '{"system": "arbiter", "run": %d, "failed": true, "why": "arbiter bench e2e exited non-zero (its stderr says why)", "load_before": %s, "load_after": %s}\n' "$r" "$l0" "$l1"
    fi
    if [ $SLURM = 1 ]; then
        if slurm_run $r; then
            S_RATES="$S_RATES $S_RATE"
        else # out of time: its line says so, its rate is left out, no more runs
            SLURM=0
            sl_stop
        fi
    fi
    r=$((r + 1))
done
[ -z "$SLURM_WHY" ] || printf '{"system": "slurm", "skipped": true, "why": "%s"}\n' "$SLURM_WHY"

# ---- 3. the medians ----------------------------------------------------------------
am=$(echo "$A_RATES" | median)
sm=$(echo "$S_RATES" | median)
ratio=null
[ "$am" != null ] && [ "$sm" != null ] && ratio=$(echo "$am $sm" | awk '{printf "%.2f", ($2 > 0 ? $1 / $2 : 0)}')
printf '{"e2e_summary": true, "jobs": %d, "runs": %d, "arbiter_completed_per_s": [%s], "slurm_completed_per_s": [%s], "arbiter_median": %s, "slurm_median": %s, "arbiter_controller_cpu_ms_per_job": [%s], "ratio_arbiter_over_slurm": %s, "load": %s}\n' \
    "$JOBS" "$RUNS" "$(echo "$A_RATES" | sed 's/^ //; s/ /, /g')" "$(echo "$S_RATES" | sed 's/^ //; s/ /, /g')" \
    "$am" "$sm" "$(echo "$A_CPU" | sed 's/^ //; s/ /, /g')" "$ratio" "$(sl_load)"
