#!/bin/sh
# arbiter place: the seed's case study (MISSION.md point 7) is the spec.
#
# On 32 GPUs (4 nodes x 8, one NVLink domain each) four 4-GPU jobs arrive,
# then a job needing 8 GPUs in one NVLink domain. Under spread the small
# jobs land one per node, 16 GPUs stay free at 4 per node, and the big job
# is pending with a reason naming NVLink; under pack and fgd it is placed on
# one node. seed-case-16.yaml tells the same story with 16-GPU nodes. Then
# bad input: exit 1 and FILE:LINE:COL on stderr; bad usage: exit 2.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
failures=0

if ! "$ARB" place --help >/dev/null 2>&1; then
    echo "place: FAIL: $ARB has no 'place' verb (its row in src/cli/commands.c)" >&2
    exit 1
fi

fail() {
    echo "place: FAIL: $*" >&2
    failures=$((failures + 1))
}

# run SCENARIO POLICY: the JSON of `place` in $TMP/out.json.
run() {
    if ! "$ARB" place "$SRC/examples/$1" --policy "$2" -o json >"$TMP/out.json" 2>"$TMP/err"; then
        fail "$1 --policy $2 exited non-zero: $(cat "$TMP/err")"
        return 1
    fi
}

# job NAME: the line of job NAME in $TMP/out.json (one job per line).
job() {
    grep "^{\"name\":\"$1\"," "$TMP/out.json"
}

# case SCENARIO BIGJOB NGPUS SMALLJOBS NODEPREFIX
check_case() {
    scen=$1 big=$2 ngpus=$3 small=$4 prefix=$5

    # spread: pending, fragmentation explained, 4 free GPUs on every node.
    if run "$scen" spread; then
        line=$(job "$big")
        echo "$line" | grep -q '"state":"pending"' || fail "$scen spread: $big is not pending: $line"
        echo "$line" | grep -q '"reason":{' || fail "$scen spread: $big has no reason: $line"
        echo "$line" | grep -q '"summary":"[^"]*NVLink' ||
            fail "$scen spread: the reason of $big does not mention NVLink: $line"
        echo "$line" | grep -q '"insufficient-gpus-nvlink":4' ||
            fail "$scen spread: not all 4 nodes rejected for NVLink: $line"
        echo "$line" | grep -q '"free_gpus":16\.0*,' ||
            fail "$scen spread: the reason does not say 16 GPUs are free: $line"
        grep -q "\"free_gpus\":{\"${prefix}-1\":4,\"${prefix}-2\":4,\"${prefix}-3\":4,\"${prefix}-4\":4}" \
            "$TMP/out.json" || fail "$scen spread: free GPUs are not 4 per node: $(tail -n 1 "$TMP/out.json")"
        placed=$(grep -c '"state":"placed"' "$TMP/out.json")
        [ "$placed" -eq "$small" ] || fail "$scen spread: $placed jobs placed, want $small"
        grep -q '"alloc_pct":' "$TMP/out.json" || fail "$scen spread: no alloc_pct"
    fi

    # pack and fgd: the big job gets one whole node.
    for p in pack fgd; do
        run "$scen" "$p" || continue
        line=$(job "$big")
        echo "$line" | grep -q '"state":"placed"' || fail "$scen $p: $big is not placed: $line"
        echo "$line" | grep -q "\"nodes\":\[\"${prefix}-[0-9]*\"\]" ||
            fail "$scen $p: $big is not on one node: $line"
        all=$(seq -s, 0 $((ngpus - 1)))
        echo "$line" | grep -q "\"gpus\":\[\[$all\]\]" ||
            fail "$scen $p: $big does not hold GPUs $all: $line"
        placed=$(grep -c '"state":"placed"' "$TMP/out.json")
        [ "$placed" -eq $((small + 1)) ] || fail "$scen $p: $placed jobs placed, want $((small + 1))"
    done

    # text output tells the same story.
    if "$ARB" place "$SRC/examples/$scen" --policy spread >"$TMP/out.txt" 2>"$TMP/err"; then
        grep -q "^$big  *pending .*NVLink" "$TMP/out.txt" ||
            fail "$scen text: no pending line with NVLink for $big: $(cat "$TMP/out.txt")"
        grep -q "hint:" "$TMP/out.txt" || fail "$scen text: no hint"
    else
        fail "$scen text exited non-zero: $(cat "$TMP/err")"
    fi
}

check_case seed-case.yaml tp-8gpu 8 4 node
check_case seed-case-16.yaml tp-16gpu 16 12 dgx

# The JSON parses, where python3 is there to say so.
if command -v python3 >/dev/null 2>&1; then
    "$ARB" place "$SRC/examples/seed-case.yaml" --policy spread -o json |
        python3 -c 'import json,sys; json.load(sys.stdin)' 2>"$TMP/err" ||
        fail "-o json is not valid JSON: $(tail -n 1 "$TMP/err")"
fi

# Bad input: exit 1, the location on stderr, nothing on stdout.
printf 'nodes:\n  - name: n\n    gpus: {count: 8, memory: 80Gi}\njobs:\n  - name: j\n    resources:\n      requests: {memory: 256Gx}\n' >"$TMP/bad.yaml"
"$ARB" place "$TMP/bad.yaml" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ "$rc" -eq 1 ] || fail "bad scenario: exit $rc, want 1"
grep -q "bad.yaml:7:26: jobs\[0\].resources.requests.memory: '256Gx': unknown unit" "$TMP/err" ||
    fail "bad scenario: message: $(cat "$TMP/err")"
[ -s "$TMP/out" ] && fail "bad scenario: wrote to stdout"
"$ARB" place "$SRC/examples/seed-case.yaml" --policy no-such >/dev/null 2>"$TMP/err"
rc=$?
[ "$rc" -eq 1 ] || fail "unknown policy: exit $rc, want 1"
grep -q "unknown policy 'no-such'; use one of: .*spread" "$TMP/err" ||
    fail "unknown policy: message: $(cat "$TMP/err")"
"$ARB" place "$TMP/no-such-file.yaml" >/dev/null 2>"$TMP/err"
[ $? -eq 1 ] || fail "missing file: want exit 1"
"$ARB" place >/dev/null 2>&1
[ $? -eq 2 ] || fail "no scenario: want exit 2"
"$ARB" place "$SRC/examples/seed-case.yaml" -o xml >/dev/null 2>&1
[ $? -eq 2 ] || fail "-o xml: want exit 2"

if [ "$failures" -ne 0 ]; then
    echo "place: $failures failure(s)" >&2
    exit 1
fi
echo "place: ok"
