#!/bin/sh
# scripts/tsan.sh: the ThreadSanitizer pass CI runs (.ci/run, `make tsan`).
# Builds build-tsan/ with -fsanitize=thread and runs every test that has
# more than one thread in it (the controller, agents, balancer, store and
# their unit tests); the single-threaded simulator and benchmark tests are
# left to the other passes (they would only be slower here), and so are the
# scheduling core's unit tests (src/core starts no thread: core_fixture.h's
# tests domidx, gang, cycle, pendq, seed16_noise, fgdla_plan; domidx alone
# took 101 s of the pass) and the deterministic simulation test (tests/dst:
# one thread by design). A race in a
# daemon that a shell test started does not change that test's exit, so
# every process writes its reports under build-tsan/tsan/ and any report
# there fails the pass, printed whole.
set -u
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTSAN=ON >/dev/null || exit 1
cmake --build build-tsan -j "$JOBS" || exit 1
rm -rf build-tsan/tsan
mkdir -p build-tsan/tsan
# TSan's shadow memory needs the old address-space layout on kernels with
# high ASLR entropy ("unexpected memory mapping"): run without ASLR
NOASLR=""
setarch "$(uname -m)" -R true 2>/dev/null && NOASLR="setarch $(uname -m) -R"
rc=0
(cd build-tsan && TSAN_OPTIONS="log_path=$PWD/tsan/race second_deadlock_stack=1" \
    CL_WAIT_SCALE=3 $NOASLR ctest --output-on-failure -j "$JOBS" \
    -E '^(sim|sim_policy|sim_events|sim_gen|nodeclass|domidx|gang|cycle|pendq|seed16_noise|fgdla_plan|cli_sim|cli_sim_events|cli_bench_.*|dst|dst_.*)$') || rc=1
reports=$(ls build-tsan/tsan)
if [ -n "$reports" ]; then
    for f in build-tsan/tsan/*; do
        echo "=== tsan: $f"
        cat "$f"
    done
    echo "tsan: $(echo "$reports" | wc -l) process(es) reported races" >&2
    rc=1
fi
[ "$rc" -eq 0 ] && echo "tsan: ok"
exit "$rc"
