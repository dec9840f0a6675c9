#!/bin/sh
# scripts/lint.sh: the habits STYLE.md asks for, as checks CI runs
# (.ci/run, `make lint`). Each rule prints the lines that break it.
#   1. Every timed wait goes through arb_cond_wait_until (src/util/mtime.c),
#      so none is measured on the wall clock (DESIGN invariant 5).
#   2. src/core takes time, randomness and I/O from its caller: no clock,
#      rand, stdio or getenv calls there.
#   3. Modules include only what scripts/layers.txt allows them (the
#      layering docs/architecture.md draws).
set -u
cd "$(dirname "$0")/.."
# rule NAME: the lines on stdin break rule NAME. It runs at the end of a
# pipeline (a subshell), so what it finds goes to a file read at the end.
found=$(mktemp)
trap 'rm -f "$found"' EXIT
rule() {
    out=$(cat)
    if [ -n "$out" ]; then
        echo "lint: $1:"
        echo "$out" | sed 's/^/  /'
        echo "$1" >>"$found"
    fi
}
git ls-files 'src/*.c' 'src/*.h' | grep -v '^src/util/mtime\.[ch]$' |
    xargs grep -n 'pthread_cond_timedwait' | rule "timed wait outside util/mtime.c (use arb_cond_wait_until on a cv from arb_cond_init)"
git ls-files 'src/core/*.c' |
    xargs grep -nE '\b(time|clock_gettime|gettimeofday|rand|random|srand|fopen|printf|fprintf|getenv)\s*\(' |
    grep -vE '^[^:]+:[0-9]+:\s*(/?\*|//)' | rule "src/core reaches for the clock, randomness or I/O (take them from arb_ctx_t)"
for dir in src/*/; do
    m=$(basename "$dir")
    allowed=$(sed -n "s/^$m: *//p" scripts/layers.txt)
    if [ -z "$allowed" ]; then
        echo "src/$m: not in scripts/layers.txt" | rule "a module without a layer (add it to scripts/layers.txt and docs/architecture.md)"
        continue
    fi
    [ "$allowed" = "*" ] && continue
    git ls-files "src/$m/*.c" "src/$m/*.h" | xargs -r grep -nE '^#include "[a-z]+/[a-z_]+\.h"' |
        while IFS= read -r line; do
            inc=$(echo "$line" | sed 's/.*#include "\([^"]*\)".*/\1/')
            top=${inc%%/*}
            if [ "$top" = arbiter ]; then
                case $inc in arbiter/arbiter.h | arbiter/strtab.h) top=base ;; *) top=core ;; esac
            fi
            [ "$top" = "$m" ] && continue
            case " $allowed " in *" $top "*) ;; *) echo "$line  ($m may not include $top)" ;; esac
        done | rule "an include against the layering (scripts/layers.txt)"
done
if [ -s "$found" ]; then
    echo "lint: $(wc -l <"$found") rule(s) broken"
    exit 1
fi
echo "lint: ok"
