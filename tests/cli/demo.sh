#!/bin/sh
# `make demo` keeps working: examples/demo.sh runs its three acts (the
# scheduler alone, a live cluster under spread, then under fgd) and says
# what the seed's case study says: under spread the 8-GPU job waits, with
# the fragmentation named; under fgd it runs on one node with all 8 GPUs.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
OUT=$(mktemp /tmp/arb_demo.XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "demo: FAIL: $*" >&2; cat "$OUT" >&2; exit 1; }
sh "$SRC/examples/demo.sh" "$ARB" > "$OUT" 2>&1 || fail "examples/demo.sh exited non-zero"
sed -n '/Act 2/,/Act 3/p' "$OUT" | grep -q "^5 *tp-8gpu .*pending" || fail "act 2: tp-8gpu not pending"
sed -n '/Act 2/,/Act 3/p' "$OUT" | grep -q "insufficient GPUs in one NVLink domain" || fail "act 2: no explanation"
sed -n '/Act 2/,/Act 3/p' "$OUT" | grep -q "the free GPUs are fragmented" || fail "act 2: no hint"
sed -n '/Act 3/,$p' "$OUT" | grep -q "^5 *tp-8gpu .*running .*node-[1-4]$" || fail "act 3: tp-8gpu not running"
sed -n '/Act 3/,$p' "$OUT" | grep -q "^CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7$" || fail "act 3: no CUDA_VISIBLE_DEVICES"
sed -n '/Act 3/,$p' "$OUT" | grep -Eq "^node-[1-4] +Ready +8/8 +[0-9.]+s( +5){8}$" || fail "act 3: no node with job 5 on all 8 GPUs"
tail -5 "$OUT" | grep -Eq "^==== Done: the console of this live cluster is at http://127\.0\.0\.1:[0-9]+/ui/$" ||
    fail "the demo does not end with the console's URL"
ls -d /tmp/arbiter-demo.* 2>/dev/null | while read -r d; do
    # a demo run of this test must have removed its directory
    [ "$(stat -c %Y "$d")" -lt "$(stat -c %Y "$OUT")" ] || fail "left $d behind"
done
echo "demo: ok"
