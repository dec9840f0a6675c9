#!/bin/sh
# arbiter sim: one run as JSON, a sweep, CSV, the comparison table, the SVG
# chart, and errors that name file:line:column.
set -eu
ARB=$1
SRC=$2
D=$SRC/../shared/traces/openb
T=${TMPDIR:-/tmp}/arb_sim_test.$$
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
NODES=$D/openb_node_list_gpu_node.csv
PODS=$D/openb_pod_list_default.csv

fail() { echo "sim: $*"; exit 1; }

# One run, one JSON line with every documented key.
$ARB sim --nodes "$NODES" --pods "$PODS" --policy fgd --seed 42 -o json >"$T/one.json"
[ "$(wc -l <"$T/one.json")" -eq 1 ] || fail "one run should print one line"
for k in workload policy seed total_gpus tasks_arrived tasks_failed alloc_pct frag_pct \
    frag_ratio_pct; do
    grep -q "\"$k\":" "$T/one.json" || fail "JSON lacks $k"
done
grep -q '"workload":"openb_pod_list_default","policy":"fgd","seed":42' "$T/one.json" ||
    fail "JSON names the run wrongly: $(head -c 200 "$T/one.json")"
grep -q '"total_gpus":6212' "$T/one.json" || fail "total_gpus should be 6212"
# 131 values (0..130) per array.
n=$(sed 's/.*"alloc_pct":\[\([^]]*\)\].*/\1/' "$T/one.json" | tr ',' '\n' | wc -l)
[ "$n" -eq 131 ] || fail "alloc_pct has $n values, not 131"

# A sweep: policies x seeds, one line each, same result for the same seed.
$ARB sim --nodes "$NODES" --pods "$PODS" --policy bestfit,fgd --seeds 42-43 --jobs 2 >"$T/sweep.json"
[ "$(wc -l <"$T/sweep.json")" -eq 4 ] || fail "2 policies x 2 seeds should print 4 lines"
sed -n 3p "$T/sweep.json" | sed 's/"place_s":[^,]*,"run_s":[^,]*,//' >"$T/a"
sed 's/"place_s":[^,]*,"run_s":[^,]*,//' "$T/one.json" >"$T/b"
cmp -s "$T/a" "$T/b" || fail "the same seed gave a different run"

# CSV: a header and three metrics per run; the comparison; the chart.
$ARB sim --nodes "$NODES" --pods "$PODS" --policy bestfit --seed 42 -o csv --svg "$T/c.svg" \
    >"$T/c.csv"
[ "$(wc -l <"$T/c.csv")" -eq 4 ] || fail "CSV should have a header and 3 rows"
head -1 "$T/c.csv" | grep -q '^metric,workload,policy,seed,inflate,total_gpus,tasks_arrived,tasks_failed,0,1,' ||
    fail "CSV header"
grep -q '^frag_ratio_pct,openb_pod_list_default,bestfit,42,' "$T/c.csv" || fail "CSV rows"
grep -q '^<svg xmlns' "$T/c.svg" && grep -q '</svg>' "$T/c.svg" && grep -q '<polyline' "$T/c.svg" ||
    fail "SVG chart"
grep -q 'Arrived GPU demand' "$T/c.svg" || fail "SVG axis label"
$ARB sim --nodes "$NODES" --pods "$PODS" --policy fgd,bestfit --seed 42 -o compare \
    --expected "$D/expected" >"$T/cmp.md"
grep -q '^| openb_pod_list_default | fgd | 1 |' "$T/cmp.md" || fail "comparison table"
grep -q "FGD's lead over BestFit" "$T/cmp.md" || fail "comparison lead"

# Errors: the file, line and column; usage errors exit 2.
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,6400x,1,1,T4\n' >"$T/bad.csv"
if $ARB sim --nodes "$T/bad.csv" --pods "$PODS" --policy fgd 2>"$T/err"; then
    fail "a bad node list was accepted"
fi
grep -q "bad.csv:3:4: cpu_milli '6400x' is not a whole number" "$T/err" ||
    fail "error should name file:line:column, got: $(cat "$T/err")"
set +e
$ARB sim --nodes "$NODES" --pods "$PODS" --policy fgd --bogus 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "an unknown option should exit 2, got $rc"
grep -q "unknown option '--bogus'" "$T/err" || fail "unknown option message"
if $ARB sim --nodes "$NODES" --pods "$PODS" --policy no-such-policy 2>"$T/err"; then
    fail "an unknown policy was accepted"
fi
grep -q "unknown policy 'no-such-policy'" "$T/err" || fail "unknown policy message: $(cat "$T/err")"

# The generator: --gen-out writes the workloads under the artifact's names,
# readable by --pods; a table with the bound beside two policies.
mkdir -p "$T/gen"
$ARB sim --nodes "$NODES" --pods "$PODS" --gen gpushare:60,cpu:5+gpuspec:20 --gen-out "$T/gen" \
    --spec-from "$D/openb_pod_list_gpuspec10.csv"
[ -s "$T/gen/openb_pod_list_gpushare60.csv" ] || fail "--gen-out did not write gpushare60"
[ -s "$T/gen/openb_pod_list_cpu050+gpuspec20.csv" ] || fail "--gen-out did not write the combination"
head -1 "$T/gen/openb_pod_list_gpushare60.csv" | grep -q '^name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec' ||
    fail "generated header: $(head -1 "$T/gen/openb_pod_list_gpushare60.csv")"
head -41 "$NODES" >"$T/nodes40.csv"
$ARB sim --nodes "$T/nodes40.csv" --pods "$T/gen/openb_pod_list_gpushare60.csv" \
    --policy fgd,fgd-la,bound --seeds 42-43 --jobs 1 -o table >"$T/table.md"
grep -q '^| workload | seeds | fgd | fgd-la | delta | fewer unallocated | seeds better | worst seed | bound | headroom |$' \
    "$T/table.md" || fail "table header: $(head -1 "$T/table.md")"
grep -q '^| openb_pod_list_gpushare60 | 2 |' "$T/table.md" || fail "table row: $(cat "$T/table.md")"
set +e
$ARB sim --nodes "$NODES" --pods "$PODS" --pods "$PODS" --gen cpu:5 --policy fgd 2>"$T/err"
rc=$?
$ARB sim --nodes "$NODES" --pods "$PODS" --gen gpushare:1x --policy fgd 2>>"$T/err"
rc2=$?
set -e
[ "$rc" -eq 2 ] && [ "$rc2" -eq 2 ] || fail "--gen usage errors should exit 2 ($rc, $rc2)"
grep -q "exactly one" "$T/err" || fail "two --pods with --gen: $(cat "$T/err")"
grep -q "gpushare:1x: give a percent" "$T/err" || fail "bad --gen percent: $(cat "$T/err")"
echo "sim: ok"
