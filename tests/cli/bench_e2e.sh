#!/bin/sh
# arbiter bench e2e: a small run (2 agents of 2 fake GPUs, 40 jobs of `true`)
# of the benchmark that starts its own controller and real agents. It checks
# that the JSON has sane fields, not the speed: every job submitted and
# succeeded, a positive rate, the controller's CPU per job, the agents'
# split, their reports and the lists the channel pushed (some: at most 4
# tasks run at once, so most of the 40 arrive through it); with --push-wait
# off no list is pushed and the jobs still all end; the JSON says where the
# agents' logs were (a directory of their own in the temp dir, removed at
# the end) and that they made one entry per job there (a task's log file:
# no directory, no second file); with --agent-logs the agents' files go
# under the given directory and leave nothing there. Bad usage exits 2 and
# names the flag.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
T=$(mktemp -d /tmp/arb_bench_e2e_test.XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
fail() {
    echo "bench_e2e: FAIL: $*" >&2
    cat "$T/err" >&2
    exit 1
}

$ARB bench e2e --agents 0 >/dev/null 2>"$T/err"
[ $? -eq 2 ] || fail "--agents 0: want exit 2"
grep -q -- "--agents 0: use 1..64" "$T/err" || fail "--agents 0: message"
$ARB bench e2e --jobs x >/dev/null 2>"$T/err"
[ $? -eq 2 ] || fail "--jobs x: want exit 2"
grep -q -- "--jobs: 'x' is not a whole number" "$T/err" || fail "--jobs x: message"

field() { # a number after "KEY": in the JSON (the first one)
    printf '%s' "$J" | tr -d ' ' | grep -o "\"$1\":[-0-9.e]*" | head -1 | cut -d: -f2
}
between() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; }

$ARB bench e2e --agents 2 --gpus 2 --jobs 40 --clients 4 --timeout 120 -o json >"$T/out" 2>"$T/err" ||
    fail "exit $?: $(cat "$T/out")"
J=$(cat "$T/out")
printf '%s' "$J" | grep -q '"bench": "e2e"' || fail "no bench name: $J"
[ "$(field submitted)" = 40 ] || fail "submitted: $J"
[ "$(field failed)" = 0 ] || fail "failed: $J"
[ "$(field submit_failed)" = 0 ] || fail "submit_failed: $J"
between "$(field completed_per_s)" 0.01 100000 || fail "completed_per_s: $J"
between "$(field controller_cpu_ms_per_job)" 0 1000 || fail "controller_cpu_ms_per_job: $J"
between "$(field supervisor_and_task_cpu_ms_per_job)" 0 1000 || fail "supervisor_and_task_cpu_ms_per_job: $J"
between "$(field zygote_cpu_ms_per_job)" 0 1000 || fail "zygote_cpu_ms_per_job: $J"
between "$(field reports)" 1 100000 || fail "reports: $J"
between "$(field pushed_lists)" 1 100000 || fail "pushed_lists (the channel brought none): $J"
between "$(field task_start_ms)" 0.001 60000 || fail "task_start_ms: $J"
printf '%s' "$J" | grep -q '"push": true' || fail "push: $J"
logs=$(printf '%s' "$J" | sed -n 's/.*"agent_logs": "\([^"]*\)".*/\1/p')
case "$logs" in /tmp/arb_bench_e2e.*/logs.*) ;; *) fail "agent_logs: $J" ;; esac
[ ! -e "$logs" ] || fail "agent_logs: left behind: $logs"
printf '%s' "$J" | grep -q '"agent_logs_removed": true' || fail "agent_logs_removed: $J"
printf '%s' "$J" | grep -Eq '"agent_logs_spread": (true|false)' || fail "agent_logs_spread: $J"
# on ext4 (which honours FS_TOPDIR_FL) the logs' directory is spread
if [ "$(stat -f -c %T /tmp)" = ext2/ext3 ]; then
    printf '%s' "$J" | grep -q '"agent_logs_spread": true' || fail "agent_logs_spread on ext4: $J"
fi
[ "$(field agent_log_entries_per_job)" = 1.00 ] || fail "agent_log_entries_per_job (one file a task): $J"
# the write path's counters: some commits, every submission's reply held
# for its commit (each one waits for its own), no more held than were
# counted in all
between "$(field commits_per_job)" 0.001 1000 || fail "commits_per_job: $J"
between "$(field store_batches_per_job)" 1 1000 || fail "store_batches_per_job: $J"
between "$(field held_submit_per_job)" 0.001 1 || fail "held_submit_per_job: $J"
between "$(field held_report_per_job)" 0 1000 || fail "held_report_per_job: $J"
awk -v a="$(field held_replies_per_job)" -v s="$(field held_submit_per_job)" \
    -v r="$(field held_report_per_job)" 'BEGIN { exit !(a + 0.0005 >= s + r) }' ||
    fail "held_replies_per_job less than its parts: $J"

$ARB bench e2e --agents 1 --gpus 2 --jobs 10 --push-wait off --timeout 120 -o json >"$T/out" 2>"$T/err" ||
    fail "--push-wait off: exit $?: $(cat "$T/out")"
J=$(cat "$T/out")
[ "$(field failed)" = 0 ] || fail "--push-wait off: failed: $J"
[ "$(field pushed_lists)" = 0 ] || fail "--push-wait off: lists were pushed: $J"
printf '%s' "$J" | grep -q '"push": false' || fail "--push-wait off: push: $J"
# --agent-logs DIR: the agents' log directories under DIR, gone afterwards
mkdir "$T/logs"
$ARB bench e2e --agents 1 --gpus 2 --jobs 10 --agent-logs "$T/logs" --timeout 120 -o json \
    >"$T/out" 2>"$T/err" || fail "--agent-logs: exit $?: $(cat "$T/out")"
J=$(cat "$T/out")
[ "$(field failed)" = 0 ] || fail "--agent-logs: failed: $J"
printf '%s' "$J" | grep -q "\"agent_logs\": \"$T/logs/arb_bench_e2e_logs\." || fail "--agent-logs: not in the JSON: $J"
[ "$(field agent_log_entries_per_job)" = 1.00 ] || fail "--agent-logs: agent_log_entries_per_job: $J"
[ -z "$(ls -A "$T/logs")" ] || fail "--agent-logs: left behind: $(ls -A "$T/logs")"
$ARB bench e2e --agents 1 --jobs 1 --agent-logs "$T/no/such" >/dev/null 2>"$T/err"
[ $? -eq 1 ] || fail "--agent-logs to a missing directory: want exit 1"
grep -q -- "--agent-logs $T/no/such: cannot make a directory there" "$T/err" ||
    fail "--agent-logs to a missing directory: message"
echo "bench_e2e: ok"
