#!/bin/sh
# `arbiter bench backlog` end to end, small: it starts its own controller
# (SQLite on a temp dir, loopback), submits 600 jobs in chunks of 200 from 4
# clients, and reports one rate per chunk with the first, the last and the
# controller's CPU per chunk (and its scheduler thread's); bad flags are
# refused with exit 2.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
out=$($ARB bench backlog --jobs 600 --chunk 200 --clients 4 -o json 2>/dev/null)
fail() { echo "bench_backlog: FAIL: $* in $out" >&2; exit 1; }
field() { echo "$out" | sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
rates=$(echo "$out" | sed -n 's/.*"chunk_rates":\[\([0-9.,]*\)\].*/\1/p')
[ "$(echo "$rates" | tr ',' '\n' | grep -c '^[0-9][0-9.]*$')" = 3 ] || fail "three chunk rates"
cpus=$(echo "$out" | sed -n 's/.*"chunk_cpu_s":\[\([0-9.,]*\)\].*/\1/p')
[ "$(echo "$cpus" | tr ',' '\n' | grep -c .)" = 3 ] || fail "three chunk CPU figures"
scpus=$(echo "$out" | sed -n 's/.*"chunk_sched_cpu_s":\[\([0-9.,]*\)\].*/\1/p')
[ "$(echo "$scpus" | tr ',' '\n' | grep -c .)" = 3 ] || fail "three scheduler-thread CPU figures"
[ "$(field first_rate)" = "$(echo "$rates" | cut -d, -f1)" ] || fail "first_rate"
[ "$(field last_rate)" = "$(echo "$rates" | cut -d, -f3)" ] || fail "last_rate"
for k in p50_ms p99_ms load_before last_over_first rss_mb_before rss_mb_after; do [ -n "$(field $k)" ] || fail "$k"; done
echo "$out" | grep -q '"target_met":\(true\|false\)' || fail "target_met"
echo "$out" | grep -q '"bytes_per_pending_job":-\{0,1\}[0-9]' || fail "bytes_per_pending_job"
rc=0
$ARB bench backlog --chunk 0 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--chunk 0 exit $rc, want 2"
rc=0
$ARB bench backlog --bogus 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--bogus exit $rc, want 2"
echo "bench_backlog: ok"
