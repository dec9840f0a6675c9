#!/bin/sh
# arbiter bench agents: a small run (50 emulated nodes, a 3 s window, 5
# jobs) of the benchmark that starts its own controller and emulator. It
# checks that the JSON has sane fields, not the speed: every node reported
# (about 50 reports/s), the controller's CPU share, the API's and the
# agents' report times, and all 5 jobs measured from submission to running.
# The verb exits non-zero when a child it started does not exit 0 on
# SIGTERM (a sanitizer's leak report included). Bad usage exits 2.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
T=$(mktemp -d /tmp/arb_bench_agents_test.XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
fail() {
    echo "bench_agents: FAIL: $*" >&2
    cat "$T/err" >&2
    exit 1
}

$ARB bench agents --nodes 0 >/dev/null 2>"$T/err"
[ $? -eq 2 ] || fail "--nodes 0: want exit 2"
grep -q -- "--nodes 0: use 1..100000" "$T/err" || fail "--nodes 0: message"
$ARB bench agents --seconds x >/dev/null 2>"$T/err"
[ $? -eq 2 ] || fail "--seconds x: want exit 2"

$ARB bench agents --nodes 50 --seconds 3 --jobs 5 -o json >"$T/out" 2>"$T/err" ||
    fail "exit $?: $(cat "$T/out")"
J=$(cat "$T/out")
field() { # a number after "KEY": in the JSON (the first one)
    printf '%s' "$J" | tr -d ' ' | grep -o "\"$1\":[-0-9.e]*" | head -1 | cut -d: -f2
}
between() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; }
printf '%s' "$J" | grep -q '"bench": "agents"' || fail "no bench name: $J"
[ "$(field nodes)" = 50 ] || fail "nodes: $J"
between "$(field window_s)" 2.9 30 || fail "window_s: $J"
between "$(field register_s)" 0 120 || fail "register_s: $J"
# 50 nodes, one report a second each (a task starting or ending adds one)
between "$(field reports_per_s)" 25 100 || fail "reports_per_s: $J"
between "$(field controller_cpu_cores)" 0 64 || fail "controller_cpu_cores: $J"
printf '%s' "$J" | tr -d ' ' | grep -q '"report_server_ms":{"mean":[0-9.]*,"p99_bucket":[0-9.]*}' ||
    fail "report_server_ms: $J"
printf '%s' "$J" | tr -d ' ' | grep -Eq '"report_round_trip_ms":\{"p50":[0-9.]+,"p90":[0-9.]+,"p99":[0-9.]+,"max":[0-9.]+\}' ||
    fail "report_round_trip_ms: $J"
between "$(field p50)" 0.001 60000 || fail "round trip p50: $J"
printf '%s' "$J" | tr -d ' ' | grep -Eq '"submit_to_running_ms":\{"jobs":5,"ran":5,"p50":[0-9]+,"p99":[0-9]+,"max":[0-9]+\}' ||
    fail "submit_to_running_ms: $J"
printf '%s' "$J" | grep -Eq '"targets_met": (true|false)' || fail "targets_met: $J"
grep -q "all 50 nodes registered" "$T/err" || fail "progress lines"
echo "bench_agents: ok: $J"
