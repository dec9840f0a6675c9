#!/bin/sh
# scripts/lint.sh: the habits STYLE.md asks for, as checks CI runs
# (.ci/run, `make lint`). Each rule prints the lines that break it.
#   1. Every timed wait goes through arb_cond_wait_until (src/util/mtime.c),
#      so none is measured on the wall clock (DESIGN invariant 5).
#   2. src/core takes time, randomness and I/O from its caller: no clock,
#      rand, stdio or getenv calls there.
set -u
cd "$(dirname "$0")/.."
bad=0
rule() { # NAME: the lines given on stdin break rule NAME
    out=$(cat)
    if [ -n "$out" ]; then
        echo "lint: $1:"
        echo "$out" | sed 's/^/  /'
        bad=1
    fi
}
git ls-files 'src/*.c' 'src/*.h' | grep -v '^src/util/mtime\.[ch]$' |
    xargs grep -n 'pthread_cond_timedwait' | rule "timed wait outside util/mtime.c (use arb_cond_wait_until on a cv from arb_cond_init)"
git ls-files 'src/core/*.c' |
    xargs grep -nE '\b(time|clock_gettime|gettimeofday|rand|random|srand|fopen|printf|fprintf|getenv)\s*\(' |
    grep -vE '^[^:]+:[0-9]+:\s*(/?\*|//)' | rule "src/core reaches for the clock, randomness or I/O (take them from arb_ctx_t)"
[ "$bad" -eq 0 ] && echo "lint: ok"
exit "$bad"
