#!/bin/sh
# fuzz/run.sh BUILD_DIR SECONDS: run every fuzz_* executable in BUILD_DIR/fuzz
# for SECONDS each (libFuzzer -max_total_time), FUZZ_JOBS of them at a time
# (default 2: one per core of a CI machine; each target is one process). Each
# keeps a growing corpus in BUILD_DIR/fuzz/corpus/<target> and writes crash
# inputs to BUILD_DIR/fuzz/artifacts/<target>/; its log is
# BUILD_DIR/fuzz/<target>.log.
# fuzz/seeds/<target>/, where present, holds hand-made seed inputs read as a
# second corpus (JSON parsers need them: the JSON library is not instrumented,
# so the fuzzer cannot find JSON's shape by itself).
# Exits non-zero when any target finds a crash, leak or timeout, or when
# there is no target to run.
set -u

# one target: fuzz/run.sh --one SECONDS EXE (what the parallel runs call)
if [ "${1:-}" = "--one" ]; then
    secs=$2
    exe=$3
    dir=$(dirname "$exe")
    name=$(basename "$exe")
    corpus=$dir/corpus/$name
    artifacts=$dir/artifacts/$name
    log=$dir/$name.log
    mkdir -p "$corpus" "$artifacts"
    seeds=$(dirname "$0")/seeds/$name
    [ -d "$seeds" ] || seeds=
    if "$exe" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$corpus" $seeds >"$log" 2>&1; then
        runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log")
        echo "fuzz: $name ok (${runs:-?} runs in ${secs}s, corpus $(ls "$corpus" | wc -l))"
    else
        # the whole report in one write, so parallel targets do not interleave
        { echo "fuzz: $name FAILED; log $log, inputs in $artifacts/"; tail -n 40 "$log"; } >"$log.fail"
        cat "$log.fail" >&2
        exit 1
    fi
    exit 0
fi

if [ $# -ne 2 ]; then
    echo "usage: sh fuzz/run.sh BUILD_DIR SECONDS" >&2
    exit 2
fi
dir=$1/fuzz
secs=$2
jobs=${FUZZ_JOBS:-2}

list=""
for exe in "$dir"/fuzz_*; do
    [ -f "$exe" ] && [ -x "$exe" ] || continue
    rm -f "$exe.log.fail"
    list="$list $exe"
done
if [ -z "$list" ]; then
    echo "fuzz: no fuzz_* executables in $dir; build with CC=clang cmake -DFUZZ=ON" >&2
    exit 1
fi
# shellcheck disable=SC2086
printf '%s\n' $list | xargs -P "$jobs" -I{} sh "$0" --one "$secs" {}
failed=""
for exe in $list; do
    [ -f "$exe.log.fail" ] && failed="$failed $(basename "$exe")"
done
if [ -n "$failed" ]; then
    echo "fuzz: crashes in:$failed" >&2
    exit 1
fi
exit 0
