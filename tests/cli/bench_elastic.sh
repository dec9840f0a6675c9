#!/bin/sh
# `arbiter bench elastic` on a small cluster: one cycle grows 100 elastic
# jobs into the 200 GPUs their blockers left (50 nodes x 8 GPUs, 100 x 2 at
# min), then 5 priority-1000 8-GPU jobs are placed by taking elastic tasks
# above min (at least 8 per preemptor); JSON with every field.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
out=$($ARB bench elastic --nodes 50 --jobs 100 --preemptors 5 -o json)
field() { echo "$out" | sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
fail() { echo "bench_elastic: FAIL: $* in $out" >&2; exit 1; }
[ "$(field grown_tasks)" = 200 ] || fail "grown_tasks"
[ "$(field placed)" = 5 ] || fail "placed"
[ "$(field shrunk_tasks)" -ge 40 ] || fail "shrunk_tasks"
[ "$(field marked_victims)" -ge 5 ] || fail "marked_victims"
for k in grow_ms preempt_ms mark_ms; do [ -n "$(field $k)" ] || fail "$k"; done
if $ARB bench elastic --nodes 0 2>/dev/null; then fail "--nodes 0 accepted"; fi
echo "bench_elastic: ok"
