#!/bin/sh
# arbiter agent: the node agent's command line, before the controller exists.
#
# --once prints the report body of docs/api.md (inventory + one telemetry
# sample) for fake GPUs, an inventory file, and NVML through the mock
# libnvidia-ml.so.1 built in tests/mock (found by LD_LIBRARY_PATH, as the
# real one would be); bad input exits 1 with FILE:LINE:COL and the field
# path; bad usage exits 2; the heartbeat loop prints one report per line and
# stops after --count heartbeats.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
MOCK=$(dirname "$ARB")/tests/mock/lib
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
failures=0

fail() {
    echo "agent: FAIL: $*" >&2
    failures=$((failures + 1))
}

if ! "$ARB" agent --help >/dev/null 2>&1; then
    echo "agent: FAIL: $ARB has no 'agent' verb (its row in src/cli/commands.c)" >&2
    exit 1
fi

# Fake GPUs: eight H100s in one NVLink domain.
if "$ARB" agent --name n1 --fake-gpus 8:H100 --once -o json >"$TMP/out.json" 2>"$TMP/err"; then
    for want in '"lamport":1' '"inventory":{"cpu":"' '"model":"H100","memory":"81559Mi","nvlink":0,"pcie":3,"numa":1' \
        '"telemetry":{' '"gpus":[{"index":0,"healthy":true,"util":0,"memory_used_mib":0,"temp_c":30}'; do
        grep -qF "$want" "$TMP/out.json" || fail "fake: no $want in $(cat "$TMP/out.json")"
    done
    [ "$(grep -o '"model":"H100"' "$TMP/out.json" | wc -l)" -eq 8 ] || fail "fake: not 8 GPUs"
else
    fail "fake --once exited non-zero: $(cat "$TMP/err")"
fi
"$ARB" agent --name n1 --fake-gpus 2 --once >"$TMP/out.txt" 2>&1 || fail "text --once failed"
grep -q '^GPUs (fake): 2$' "$TMP/out.txt" || fail "text: no GPU line: $(cat "$TMP/out.txt")"

# An inventory file.
printf 'labels: {rack: r7}\ngpus: {count: 4, model: A100-80G, memory: 80Gi, nvlinkDomains: 2}\n' >"$TMP/inv.yaml"
if "$ARB" agent --name n2 --inventory "$TMP/inv.yaml" --once -o json >"$TMP/out.json" 2>"$TMP/err"; then
    grep -qF '"labels":{"rack":"r7"}' "$TMP/out.json" || fail "inventory: no labels: $(cat "$TMP/out.json")"
    grep -qF '{"model":"A100-80G","memory":"81920Mi","nvlink":1,"pcie":-1,"numa":-1}' "$TMP/out.json" ||
        fail "inventory: GPU 3 wrong: $(cat "$TMP/out.json")"
else
    fail "inventory --once exited non-zero: $(cat "$TMP/err")"
fi
printf 'gpus:\n  - {model: H100, memory: 80Gx}\n' >"$TMP/bad.yaml"
"$ARB" agent --name n2 --inventory "$TMP/bad.yaml" --once >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "bad inventory: want exit 1"
grep -q "bad.yaml:2:27: gpus\[0\].memory: '80Gx': unknown unit" "$TMP/err" ||
    fail "bad inventory: message: $(cat "$TMP/err")"
[ -s "$TMP/out" ] && fail "bad inventory: wrote to stdout"

# NVML through the mock, found the way the real library is.
if [ -f "$MOCK/libnvidia-ml.so.1" ]; then
    if LD_LIBRARY_PATH="$MOCK" MOCK_NVML_GPUS="8:NVIDIA H200:143771" MOCK_NVML_NVLINK="sw:0+1+2+3,sw:4+5+6+7" \
        MOCK_NVML_PCIE="0,0,1,1,2,2,3,3" MOCK_NVML_UTIL="90,90,90,90,0,0,0,0" \
        "$ARB" agent --name g1 --once -o json >"$TMP/out.json" 2>"$TMP/err"; then
        grep -qF '{"model":"NVIDIA H200","memory":"143771Mi","nvlink":1,"pcie":3,' "$TMP/out.json" ||
            fail "nvml: GPU 7 wrong: $(cat "$TMP/out.json")"
        grep -qF '"uuid":"GPU-00000080-1111-2222-3333-444455556607"' "$TMP/out.json" || fail "nvml: uuid"
        grep -qF '{"index":0,"healthy":true,"util":90,' "$TMP/out.json" || fail "nvml: utilisation"
    else
        fail "nvml --once exited non-zero: $(cat "$TMP/err")"
    fi
    # No NVML at all: a node without GPUs, and a note on stderr.
    LD_LIBRARY_PATH=/nonexistent "$ARB" agent --name c1 --once -o json >"$TMP/out.json" 2>"$TMP/err" ||
        fail "no NVML: want exit 0"
    grep -qF '"gpus":[]' "$TMP/out.json" || fail "no NVML: GPUs listed: $(cat "$TMP/out.json")"
    grep -q "no GPUs: NVML: cannot load" "$TMP/err" || fail "no NVML: no note: $(cat "$TMP/err")"
    "$ARB" agent --name c1 --nvml-lib /nonexistent/libnvidia-ml.so.1 --once >/dev/null 2>"$TMP/err"
    [ $? -eq 1 ] || fail "--nvml-lib missing: want exit 1"
else
    echo "agent: note: $MOCK/libnvidia-ml.so.1 not built; NVML checks skipped" >&2
fi

# The heartbeat loop: one report per line, the inventory only in the first.
if "$ARB" agent --name n3 --fake-gpus 2 --count 3 --heartbeat 100ms --log-dir "$TMP/logs" \
    --cgroups none >"$TMP/loop.out" 2>"$TMP/loop.err"; then
    [ "$(wc -l <"$TMP/loop.out")" -eq 3 ] || fail "loop: not 3 reports: $(cat "$TMP/loop.out")"
    [ "$(grep -c '"inventory"' "$TMP/loop.out")" -eq 1 ] || fail "loop: inventory not only in the first"
    grep -q '"tasks":\[\]' "$TMP/loop.out" || fail "loop: no tasks list"
    grep -q 'registered (epoch 1' "$TMP/loop.err" || fail "loop: no registration: $(cat "$TMP/loop.err")"
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json,sys
for l in open(sys.argv[1]): json.loads(l)' "$TMP/loop.out" || fail "loop: not JSON lines"
    fi
else
    fail "loop exited non-zero: $(cat "$TMP/loop.err")"
fi

# Bad usage: exit 2 (a --logs-listen that is not HOST:PORT included).
for args in "--fake-gpus 8 --once" "--name x --once -o xml" "--name x --bogus" \
    "--name x --heartbeat never --once" "--name x --inventory a --fake-gpus 1 --once" \
    "--name x --controller http://127.0.0.1:1 --fake-gpus 1 --logs-listen nonsense" \
    "--name x --controller http://127.0.0.1:1 --fake-gpus 1 --logs-listen 127.0.0.1:99999"; do
    # shellcheck disable=SC2086
    "$ARB" agent $args >/dev/null 2>&1
    [ $? -eq 2 ] || fail "'agent $args': want exit 2"
done
"$ARB" agent --name x --fake-gpus 99 --once >/dev/null 2>"$TMP/err"
[ $? -eq 1 ] || fail "--fake-gpus 99: want exit 1"
grep -q -- "--fake-gpus '99': the count must be 0..16" "$TMP/err" || fail "--fake-gpus 99: $(cat "$TMP/err")"

if [ "$failures" -ne 0 ]; then
    echo "agent: $failures failure(s)" >&2
    exit 1
fi
echo "agent: ok"
