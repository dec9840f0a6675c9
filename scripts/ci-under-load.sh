#!/bin/bash
# scripts/ci-under-load.sh [RUNS] [HOGS] [WHAT]: the "CI cannot flake" check
# (issue 18). Runs `bash .ci/run` (WHAT=ci, the default) or only the test
# suite (WHAT=test: `make test`) RUNS times in a row (default 3) with a CPU
# hog beside it (stress-ng --cpu HOGS, default 4, on this 2-core machine), and
# prints one line per run and a final verdict. Run it from a clean clone: it builds in
# the tree it is in. Needs stress-ng (Debian's stress-ng; installed here as root).
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
hogs=${2:-4}
what=${3:-ci}
case $what in
ci) cmd=(bash .ci/run) ;;
test) cmd=(make test) ;;
*)
    echo "ci-under-load: WHAT is ci or test, not '$what'" >&2
    exit 2
    ;;
esac
if ! command -v stress-ng >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends stress-ng >/dev/null
    else
        echo "ci-under-load: needs stress-ng (sudo apt-get install -y stress-ng)" >&2
        exit 2
    fi
fi
stress-ng --cpu "$hogs" --timeout 0 >/dev/null 2>&1 &
hog=$!
trap 'kill $hog 2>/dev/null' EXIT
bad=0
for i in $(seq 1 "$runs"); do
    t0=$(date +%s)
    "${cmd[@]}" >"ci-under-load.$i.log" 2>&1
    rc=$?
    echo "run $i: exit $rc, $(($(date +%s) - t0)) s, load $(cut -d' ' -f1-3 /proc/loadavg) (ci-under-load.$i.log)"
    if [ "$what" = ci ]; then
        sed -n '/^=== .ci\/run: summary/,$p' "ci-under-load.$i.log" | tail -n +2
    else
        grep -E '^[0-9]+% tests passed|\*\*\*Failed|\(Failed\)|Timeout' "ci-under-load.$i.log" | sed 's/^/  /'
    fi
    [ "$rc" -eq 0 ] || bad=$((bad + 1))
done
echo "ci-under-load: $((runs - bad)) of $runs runs of '${cmd[*]}' green with stress-ng --cpu $hogs beside them"
[ "$bad" -eq 0 ]
