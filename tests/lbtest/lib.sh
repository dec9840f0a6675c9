# lib.sh: shared by tests/cli/lb_*.sh (sourced, not run). Starts tiny
# backends (arb_lbtest, built by CMake next to the tests) and `arbiter lb`
# on 127.0.0.1 ephemeral ports, and stops everything on exit.
# Needs: ARB (the arbiter binary), NAME (the test's name).
LBT=$(dirname "$ARB")/tests/arb_lbtest
if [ ! -x "$LBT" ]; then
    echo "$NAME: FAIL: $LBT not built (tests/CMakeLists.txt builds arb_lbtest)" >&2
    exit 1
fi
TMP=$(mktemp -d)
PIDS=""
failures=0
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

fail() {
    echo "$NAME: FAIL: $*" >&2
    failures=$((failures + 1))
}

# wait_for FILE [WORD]: until FILE exists, is non-empty (and holds WORD); 20 s at most
# (an ASan build on a loaded 2-core machine can take seconds to start a process).
wait_for() {
    i=0
    while [ ! -s "$1" ] || { [ -n "${2:-}" ] && ! grep -q "$2" "$1"; }; do
        i=$((i + 1))
        if [ $i -gt 400 ]; then
            echo "$NAME: FAIL: gave up waiting for $1" >&2
            [ -f "$TMP/lb.err" ] && cat "$TMP/lb.err" >&2
            exit 1
        fi
        sleep 0.05
    done
}

# backend ID [ARGS...]: start one; sets PORT_<ID> and PID_<ID>.
backend() {
    id=$1
    shift
    "$LBT" backend --id "$id" --port-file "$TMP/$id.port" "$@" &
    eval "PID_$id=$!"
    PIDS="$PIDS $!"
    wait_for "$TMP/$id.port"
    eval "PORT_$id=$(cat "$TMP/$id.port")"
}

# emu ID [ARGS...]: start an emulated LLM replica (arb_llmemu); sets PORT_<ID>, PID_<ID>.
EMU=$(dirname "$ARB")/tests/arb_llmemu
emu() {
    id=$1
    shift
    rm -f "$TMP/$id.port"
    "$EMU" --port-file "$TMP/$id.port" --id "$id" "$@" 2>"$TMP/$id.err" &
    eval "PID_$id=$!"
    PIDS="$PIDS $!"
    wait_for "$TMP/$id.port"
    eval "PORT_$id=$(cat "$TMP/$id.port")"
}

# stop_pid PID: stop one process we started, and wait for it.
stop_pid() {
    kill "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# llm ARGS...: OpenAI requests through the proxy (arb_lbtest llm); JSON in $OUT.
llm() {
    OUT=$("$LBT" llm --port "$LB_PORT" "$@")
}

# metric PORT NAME: the sum of a metric's series at a Prometheus endpoint.
metric() {
    "$LBT" req --port "$1" --path /metrics | awk -v n="$2" \
        'index($1, n "{") == 1 || $1 == n { s += $NF } END { print s + 0 }'
}

# until_true SECONDS CMD...: retry CMD every 50 ms for up to SECONDS.
until_true() {
    secs=$1
    shift
    i=0
    while ! "$@"; do
        i=$((i + 1))
        [ $i -gt $((secs * 20)) ] && return 1
        sleep 0.05
    done
}

# lb ARGS...: start `arbiter lb` on ephemeral ports; sets LB_PORT, ADMIN_PORT, LB_PID.
lb() {
    rm -f "$TMP/ready"
    "$ARB" lb --listen 127.0.0.1:0 --admin 127.0.0.1:0 --ready-file "$TMP/ready" "$@" \
        2>"$TMP/lb.err" &
    LB_PID=$!
    PIDS="$PIDS $!"
    wait_for "$TMP/ready" admin
    LB_PORT=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$TMP/ready")
    ADMIN_PORT=$(sed -n 's/^admin .*:\([0-9]*\)$/\1/p' "$TMP/ready")
}

stop_lb() {
    kill "$LB_PID" 2>/dev/null
    wait "$LB_PID" 2>/dev/null
}

# load ARGS...: run the load generator against the proxy; JSON in $OUT.
load() {
    OUT=$("$LBT" load --port "$LB_PORT" "$@")
}

# num JSON KEY: a number field of a JSON line.
num() {
    echo "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"
}

# admin PATH: the admin listener's answer (status line's code, then body).
admin() {
    "$LBT" req --port "$ADMIN_PORT" --path "$1"
}

finish() {
    if [ "$failures" -ne 0 ]; then
        echo "$NAME: $failures failure(s)" >&2
        exit 1
    fi
    echo "$NAME: ok"
}
