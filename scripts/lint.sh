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
#   4. A file of src/state uses (calls, or takes the address of) no function
#      of a file in a layer above its own (scripts/layers.txt's state.*
#      lines: ground, ops, top; state_int.h draws them).
# Rules 1 and 2 read code only: comments and the text inside string and
# character literals are blanked first (code_lines), so a comment saying
# "random" or a message naming a call breaks nothing.
#   sh scripts/lint.sh --self-test   checks the blanking, the layering and
#                                    the layer check of src/state's files
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
# file_calls DIR: every use (a call, or a function's name taken) from a file of
# DIR of a function another file of DIR defines, as `FILE:LINE: NAME DEFINER`
file_calls() {
    ls "$1"/*.c | code_lines | awk '
    {
        f = $0; sub(/:.*/, "", f); rest = substr($0, length(f) + 2)
        ln = rest; sub(/:.*/, "", ln); code = substr(rest, length(ln) + 2)
        sub(/.*\//, "", f)
        nf++; F[nf] = f; N[nf] = ln; C[nf] = code
        if (match(code, /^[A-Za-z_][A-Za-z0-9_ *]*[ *][a-z_][a-z0-9_]*\(/) && code !~ /;[ \t]*$/ &&
            code !~ /^(typedef|extern|return|else)[ \t]/) {
            h = substr(code, 1, RLENGTH - 1); name = h; sub(/.*[ *]/, "", name)
            if (h ~ /^static[ \t]/) local[f, name] = 1
            else def[name] = f
        }
    }
    END {
        for (i = 1; i <= nf; i++) {
            s = C[i]
            while (match(s, /[A-Za-z_][A-Za-z0-9_]*/)) {
                w = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
                if ((w in def) && def[w] != F[i] && !((F[i], w) in local) && !seen[F[i], w]++)
                    print F[i] ":" N[i] ": " w " " def[w]
            }
        }
    }'
}
# layer_check DIR PREFIX TABLE: the uses in file_calls DIR that go up the
# layers TABLE gives the files of DIR (lines `PREFIX.LAYER: FILE...`, the
# lowest layer first; a file may use its own layer and those below), and
# every file of DIR that has no layer.
layer_check() {
    ls "$1"/*.c | sed 's|.*/||; s|\.c$||' | while read -r f; do
        grep -qE "^$2\.[a-z]+:.* $f( |\$)" "$3" || echo "$1/$f.c: in no layer of $3"
    done
    file_calls "$1" | awk -v prefix="$2" -v table="$3" -v dir="$1" '
    BEGIN {
        while ((getline line < table) > 0) {
            if (line !~ "^" prefix "\\.[a-z]+:") continue
            n++; name = line; sub(":.*", "", name); sub(".*\\.", "", name); lname[n] = name
            sub("^[^:]*: *", "", line); k = split(line, fs, " ")
            for (i = 1; i <= k; i++) layer[fs[i] ".c"] = n
        }
    }
    {
        from = $1; sub(/:.*/, "", from); at = $1; sub(/^[^:]*:/, "", at); sub(/:$/, "", at)
        if ((from in layer) && ($3 in layer) && layer[$3] > layer[from])
            print dir "/" from ":" at ": " $2 " (" $3 ", " lname[layer[$3]] ") used from the " lname[layer[from]] " layer"
    }'
}
# include_check MODULE: the files named on stdin (of src/MODULE) against
# scripts/layers.txt, printing each include the module may not make. An
# include maps to the module of its folder; of include/arbiter/, arbiter.h
# and strtab.h are "base", resource.h and cluster.h "model" (quantities,
# the node/GPU types) and the rest "core" (the scheduler). A word of the
# allowed list with a '/' allows that one header (the agent's share of spec).
include_check() {
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
    got=$(echo "$t" | include_check agent | cut -d: -f2 | tr '\n' ' ')
    if [ "$got" != "4 5 6 " ]; then
        echo "lint self-test: agent's includes refused on lines '$got', want '4 5 6 '"
        rm -f "$t"
        exit 1
    fi
    # the value layer itself (spec/sval.h) may not reach the scheduler
    got=$(echo "$t" | include_check spec/sval.h | cut -d: -f2 | tr '\n' ' ')
    rm -f "$t"
    if [ "$got" != "4 5 6 7 " ]; then
        echo "lint self-test: spec/sval.h's includes refused on lines '$got', want '4 5 6 7 '"
        exit 1
    fi
    # the layers of a module's files: an upward use is found (a call, or a
    # function's name taken), a downward one, a comment, a string and a
    # static function of the caller's own with the same name are not; a file
    # in no layer is named
    d=$(mktemp -d)
    printf '%s\n' 't.ground: low' 't.top: high' >"$d/layers"
    printf '%s\n' 'int low_fn(int x)' '{' '    return x + 1; /* high_fn( */' '}' \
        'int low_other(void)' '{' '    return high_fn(1);' '}' 'void *low_ptr = high_ptr;' >"$d/low.c"
    printf '%s\n' 'int high_fn(int x)' '{' '    return low_fn(x) + low_other();' '}' \
        'void high_ptr(void)' '{' '}' >"$d/high.c"
    printf '%s\n' 'static int high_fn(int x)' '{' '    return x;' '}' \
        'int other(void)' '{' '    return high_fn(2); /* "high_ptr" */' '}' >"$d/stray.c"
    got=$(layer_check "$d" t "$d/layers" | sed "s|$d/||g" | tr '\n' ';')
    rm -rf "$d"
    want='stray.c: in no layer of layers;low.c:7: high_fn (high.c, top) used from the ground layer;low.c:9: high_ptr (high.c, top) used from the ground layer;'
    if [ "$got" != "$want" ]; then
        echo "lint self-test: layer check found '$got', want '$want'"
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
    git ls-files "src/$m/*.c" "src/$m/*.h" | include_check "$m" |
        rule "an include against the layering (scripts/layers.txt)"
done
layer_check src/state state scripts/layers.txt |
    rule "a file of src/state using one above it (the layers: scripts/layers.txt, state_int.h)"
# A header named in layers.txt (spec/sval.h: ...) is a layer of its own
# inside its module: it and its .c include only what its line allows.
sed -n 's|^\([a-z]*/[a-z_]*\)\.h:.*|\1|p' scripts/layers.txt | while IFS= read -r f; do
    git ls-files "src/$f.h" "src/$f.c" | include_check "$f.h"
done | rule "an include against the layering (scripts/layers.txt)"
if [ -s "$found" ]; then
    echo "lint: $(wc -l <"$found") rule(s) broken"
    exit 1
fi
echo "lint: ok"
