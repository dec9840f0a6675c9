#!/bin/sh
# scripts/lint.sh: the habits STYLE.md asks for, as checks CI runs
# (.ci/run, `make lint`). Each rule prints the lines that break it.
#   1. Every timed wait goes through arb_cond_wait_until (src/util/mtime.c),
#      so none is measured on the wall clock (DESIGN invariant 5), and the
#      monotonic clock is read through arb_mono_ns/arb_mono_ms only (one
#      helper, not one per file).
#   2. src/core (and the model under it, src/model) takes time, randomness
#      and I/O from its caller: no clock, rand, stdio or getenv calls there.
#   3. Modules include only what scripts/layers.txt allows them (the
#      layering docs/architecture.md draws); a header listed there on its
#      own (spec/sval.h) is held to its own line.
# Rules 1 and 2 read code only: comments and the text inside string and
# character literals are blanked first (code_lines), so a comment saying
# "random" or a message naming a call breaks nothing.
#   sh scripts/lint.sh --self-test   checks the blanking and the layering
#                                    (tests/cli/lint_self.sh)
set -u
cd "$(dirname "$0")/.."
# code_lines: for the files named on stdin, each line as `FILE:LINE:code`
# (like grep -n), with comments (/* */ across lines, //) and the insides of
# "..." and '...' turned to spaces, so line numbers and columns stay those
# of the file.
code_lines() {
    xargs -r awk '
    FNR == 1 { inc = 0 }
    {
        s = $0; n = length(s); out = ""; q = ""; i = 1
        while (i <= n) {
            c = substr(s, i, 1); d = substr(s, i, 2)
            if (inc) {
                if (d == "*/") { inc = 0; out = out "  "; i += 2 } else { out = out " "; i++ }
                continue
            }
            if (q != "") {
                if (c == "\\") { out = out "  "; i += 2; continue }
                if (c == q) { q = ""; out = out c } else out = out " "
                i++
                continue
            }
            if (d == "/*") { inc = 1; out = out "  "; i += 2; continue }
            if (d == "//") break
            if (c == "\"" || c == "\047") q = c
            out = out c; i++
        }
        print FILENAME ":" FNR ":" out
    }'
}
# layer_check MODULE: the files named on stdin (of src/MODULE) against
# scripts/layers.txt, printing each include the module may not make. An
# include maps to the module of its folder; of include/arbiter/, arbiter.h
# and strtab.h are "base", resource.h and cluster.h "model" (quantities,
# the node/GPU types) and the rest "core" (the scheduler). A word of the
# allowed list with a '/' allows that one header (the agent's share of spec).
layer_check() {
    allowed=$(sed -n "s|^$1: *||p" scripts/layers.txt)
    xargs -r grep -nE '^#include "[a-z]+/[a-z_]+\.h"' /dev/null |
        while IFS= read -r line; do
            inc=$(echo "$line" | sed 's/.*#include "\([^"]*\)".*/\1/')
            top=${inc%%/*}
            if [ "$top" = arbiter ]; then
                case $inc in
                arbiter/arbiter.h | arbiter/strtab.h) top=base ;;
                arbiter/resource.h | arbiter/cluster.h) top=model ;;
                *) top=core ;;
                esac
            fi
            [ "$top" = "${1%%/*}" ] && [ "${1#*/}" = "$1" ] && continue
            [ "$inc" = "$1" ] && continue
            case " $allowed " in *" $top "* | *" $inc "*) ;; *) echo "$line  ($1 may not include $inc)" ;; esac
        done
}
if [ "${1:-}" = --self-test ]; then
    t=$(mktemp)
    cat >"$t" <<'END'
/* random( in a comment */
int a = rand(); // time( after code
const char *m = "call random(3) \" still time( in the string";
/* a comment
   over lines: printf( here */ int b = printf("%d", 1);
char q = '"'; int c = getenv("X") != 0; /* " */
#define LOG "fprintf(" // getenv(
END
    got=$(echo "$t" | code_lines | grep -E '\b(time|rand|random|printf|fprintf|getenv)\s*\(' |
        cut -d: -f2 | tr '\n' ' ')
    if [ "$got" != "2 5 6 " ]; then
        echo "lint self-test: calls found on lines '$got', want '2 5 6 '"
        rm -f "$t"
        exit 1
    fi
    # the layering: the agent takes the model and the value layer of spec,
    # never the scheduler (core's headers, or spec's scenario over them)
    cat >"$t" <<'END'
#include "arbiter/cluster.h"
#include "arbiter/resource.h"
#include "spec/sval.h"
#include "arbiter/sched.h"
#include "spec/scenario.h"
#include "core/sched_int.h"
#include "agent/exec.h"
END
    got=$(echo "$t" | layer_check agent | cut -d: -f2 | tr '\n' ' ')
    if [ "$got" != "4 5 6 " ]; then
        echo "lint self-test: agent's includes refused on lines '$got', want '4 5 6 '"
        rm -f "$t"
        exit 1
    fi
    # the value layer itself (spec/sval.h) may not reach the scheduler
    got=$(echo "$t" | layer_check spec/sval.h | cut -d: -f2 | tr '\n' ' ')
    rm -f "$t"
    if [ "$got" != "4 5 6 7 " ]; then
        echo "lint self-test: spec/sval.h's includes refused on lines '$got', want '4 5 6 7 '"
        exit 1
    fi
    echo "lint self-test: ok"
    exit 0
fi
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
git ls-files 'src/*.c' 'src/*.h' | grep -v '^src/util/mtime\.[ch]$' | code_lines |
    grep 'pthread_cond_timedwait' | rule "timed wait outside util/mtime.c (use arb_cond_wait_until on a cv from arb_cond_init)"
git ls-files 'src/*.c' 'src/*.h' | grep -v '^src/util/' | code_lines |
    grep 'clock_gettime *( *CLOCK_MONOTONIC' | rule "a monotonic clock read outside src/util (use arb_mono_ns or arb_mono_ms, util/mtime.h)"
git ls-files 'src/core/*.c' 'src/model/*.c' | code_lines |
    grep -E '\b(time|clock_gettime|gettimeofday|rand|random|srand|fopen|printf|fprintf|getenv)\s*\(' | rule "src/core or src/model reaches for the clock, randomness or I/O (take them from arb_ctx_t)"
for dir in src/*/; do
    m=$(basename "$dir")
    allowed=$(sed -n "s/^$m: *//p" scripts/layers.txt)
    if [ -z "$allowed" ]; then
        echo "src/$m: not in scripts/layers.txt" | rule "a module without a layer (add it to scripts/layers.txt and docs/architecture.md)"
        continue
    fi
    [ "$allowed" = "*" ] && continue
    git ls-files "src/$m/*.c" "src/$m/*.h" | layer_check "$m" |
        rule "an include against the layering (scripts/layers.txt)"
done
# A header named in layers.txt (spec/sval.h: ...) is a layer of its own
# inside its module: it and its .c include only what its line allows.
sed -n 's|^\([a-z]*/[a-z_]*\)\.h:.*|\1|p' scripts/layers.txt | while IFS= read -r f; do
    git ls-files "src/$f.h" "src/$f.c" | layer_check "$f.h"
done | rule "an include against the layering (scripts/layers.txt)"
if [ -s "$found" ]; then
    echo "lint: $(wc -l <"$found") rule(s) broken"
    exit 1
fi
echo "lint: ok"
