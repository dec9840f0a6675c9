#!/bin/sh
# Every long flag a verb's source parses is shown in that verb's usage: `arbiter help VERB`
# (generated from the command table in src/cli/commands.c) or `arbiter VERB --help`.
# A flag added to the code without its usage line fails here, naming the verb and the flag.
# The flags are read from the source (strcmp'd "--flag" strings, getopt_long tables), so
# the check follows the code without a list kept by hand.
set -eu
ARB=$1
SRC=$2
T=$(mktemp -d /tmp/arb_help_flags.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0

# usage text of one or more verbs (help VERB and VERB --help; exit codes do not matter)
usage_of() {
    for v in "$@"; do
        $ARB help "$v" 2>&1 || true
        timeout 10 $ARB "$v" --help 2>&1 || true
    done
}

# check VERBS -- FILES: each flag parsed in FILES appears in the usage of VERBS
check() {
    verbs=""
    while [ "$1" != "--" ]; do verbs="$verbs $1"; shift; done
    shift
    # shellcheck disable=SC2086
    usage_of $verbs >"$T/usage"
    for f in "$@"; do
        grep -o '"--[a-z][a-z0-9-]*"' "$SRC/$f" | tr -d '"' >>"$T/flags" || true
        # getopt_long tables: {"name", required_argument, ...}
        grep -o '{"[a-z][a-z0-9-]*", *[a-z_]*argument' "$SRC/$f" |
            sed 's/{"\([^"]*\)".*/--\1/' >>"$T/flags" || true
    done
    [ -s "$T/flags" ] || { echo "help_flags: no flags found in $*"; fail=1; }
    for fl in $(sort -u "$T/flags"); do
        case $fl in --help | --output) continue ;; esac # --output is -o's long spelling
        if ! grep -q -- "$fl\b" "$T/usage"; then
            echo "help_flags: arbiter$verbs parses $fl but its usage does not show it"
            fail=1
        fi
    done
    rm -f "$T/flags"
}

check place -- src/cli/place.c
check sim -- src/cli/sim.c
# the bench modes: each parses with a flag table of its own (src/cli/flags.h);
# `arbiter bench MODE --help` prints it and exits 0, shows every flag of the
# table (the "--flag" strings of its FL_OPT rows: a bench that starts daemons
# names their flags too, in the argv it builds), and no flag is parsed by hand
check_bench() { # MODE FILE
    mode=$1
    f=$2
    grep -A1 'FL_OPT(' "$SRC/$f" | grep -o '"--[a-z][a-z0-9-]*"' | tr -d '"' >"$T/tflags" || true
    rc=0
    timeout 10 $ARB bench "$mode" --help >"$T/usage" 2>&1 || rc=$?
    [ "$rc" = 0 ] || { echo "help_flags: arbiter bench $mode --help exits $rc, want 0"; fail=1; }
    grep -q "^usage: arbiter bench $mode " "$T/usage" ||
        { echo "help_flags: arbiter bench $mode --help prints no usage line"; fail=1; }
    [ -s "$T/tflags" ] || { echo "help_flags: no flag table found in $f"; fail=1; }
    for fl in $(sort -u "$T/tflags"); do
        grep -q -- "$fl\b" "$T/usage" ||
            { echo "help_flags: arbiter bench $mode parses $fl but its usage does not show it"; fail=1; }
    done
    if grep -n 'strcmp(argv\[i\], "-\|strcmp(o, "-\|strcmp(a, "-' "$SRC/$f"; then
        echo "help_flags: $f parses flags by hand beside its table"
        fail=1
    fi
}
for m in sched:bench cycle:bench api:bench_api sim:bench_sim elastic:bench_elastic \
    agents:bench_agents e2e:bench_e2e backlog:bench_backlog infer:bench_infer recover:bench_recover; do
    check_bench "${m%%:*}" "src/cli/${m#*:}.c"
done
# and `arbiter bench --help` lists the modes (exit 0)
$ARB bench --help >"$T/usage" 2>&1 || { echo "help_flags: arbiter bench --help fails"; fail=1; }
for m in sched cycle api sim elastic agents e2e backlog infer recover; do
    grep -q "^  $m " "$T/usage" || { echo "help_flags: arbiter bench --help omits $m"; fail=1; }
done
check lb -- src/cli/lb.c
check agent -- src/cli/agent.c
check supervise -- src/cli/supervise.c src/agent/supervise.c
check node cordon uncordon drain taint label -- src/cli/node.c
check controller -- src/cli/controller.c
check init -- src/cli/init.c
check submit queue events -- src/cli/client.c
check top -- src/cli/top.c
check logs -- src/cli/logs.c
check shard -- src/cli/shard.c

[ "$fail" = 0 ] || exit 1
echo "help_flags: ok"
