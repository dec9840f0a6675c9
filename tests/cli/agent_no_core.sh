#!/bin/sh
# The agent stands on the model, not on the scheduler: libarbagent.a and
# the libraries it links (arbsval, arbmodel, ...) leave no symbol undefined
# that src/core or the rest of src/spec defines, so a program linking the
# agent needs neither arbcore nor arbspec (CMakeLists.txt links it to
# neither). `make lint` checks the includes (scripts/layers.txt); this
# checks what the linker would pull in.
set -eu
BIN=$1
B=$(dirname "$BIN")
for lib in arbagent arbsval arbmodel arbcore arbspec; do
    [ -f "$B/lib$lib.a" ] || { echo "no $B/lib$lib.a: not a CMake build tree"; exit 77; }
done
command -v nm >/dev/null || { echo "no nm here"; exit 77; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
nm -g --defined-only "$B/libarbcore.a" "$B/libarbspec.a" 2>/dev/null |
    awk 'NF == 3 { print $3 }' | sort -u >"$t/sched"
[ -s "$t/sched" ] || { echo "FAIL: no symbols read from libarbcore.a"; exit 1; }
nm -u "$B/libarbagent.a" "$B/libarbsval.a" "$B/libarbmodel.a" 2>/dev/null |
    awk '{ print $NF }' | sort -u >"$t/wanted"
comm -12 "$t/sched" "$t/wanted" >"$t/both"
if [ -s "$t/both" ]; then
    echo "FAIL: the agent (or its value layer, or the model) calls into the scheduler:"
    sed 's/^/  /' "$t/both"
    exit 1
fi
echo "agent_no_core: ok ($(wc -l <"$t/wanted") symbols the agent takes, none from the scheduler)"
