#!/bin/sh
# arbiter lb under pressure (docs/lb.md, docs/security.md):
#   1. a low soft open-file limit is raised to the hard one at start: 600
#      clients at once through a limit of 256, every request answered;
#   2. under a hard limit of 256 with --max-conns 1000 (warned), 400 clients
#      at once: what the balancer cannot open is its own failure, logged, and
#      no backend is ejected for it; the next requests are all answered;
#   3. --maxconn 3: a slow backend never has more than 3 requests of ours at
#      once, and the rest wait in the queue and are answered;
#   4. a client that leaves while its backend is still working: the
#      backend's connection is closed at once (in flight drops to 0);
#   5. a bare-LF request head is answered 400 at once;
#   6. two pipelined requests behind an HTTP/1.0 backend (which closes after
#      each response) are both answered, as HTTP/1.1, on the one connection.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_pressure
. "$SRC/tests/lbtest/lib.sh"
HOS=$(dirname "$ARB")/tests/arb_hostile
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 2000 ] || {
    echo "$NAME: the open-file hard limit ($(ulimit -Hn)) is under 2,000; skipped" >&2
    exit 77
}

# lb_limit "ULIMIT ARGS" LB ARGS...: `arbiter lb` under a limit (a subshell's ulimit)
lb_limit() {
    lim=$1
    shift
    rm -f "$TMP/ready"
    # shellcheck disable=SC2086
    (ulimit $lim && exec "$ARB" lb --listen 127.0.0.1:0 --admin 127.0.0.1:0 --ready-file "$TMP/ready" \
        "$@") 2>"$TMP/lb.err" &
    LB_PID=$!
    PIDS="$PIDS $!"
    wait_for "$TMP/ready" admin
    LB_PORT=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$TMP/ready")
    ADMIN_PORT=$(sed -n 's/^admin .*:\([0-9]*\)$/\1/p' "$TMP/ready")
}
# loads N CONNS REQUESTS: N load generators at once (each at most 256 connections);
# OK and ERR are the sums
loads() {
    k=0
    while [ $k -lt "$1" ]; do
        "$LBT" load --port "$LB_PORT" --conns "$2" --requests "$3" > "$TMP/load.$k" &
        k=$((k + 1))
    done
    wait_loads "$1"
}
wait_loads() {
    k=0 OK=0 ERR=0
    while [ $k -lt "$1" ]; do
        until_true 120 test -s "$TMP/load.$k" || { fail "load $k never finished"; return; }
        OK=$((OK + $(num "$(cat "$TMP/load.$k")" ok)))
        ERR=$((ERR + $(num "$(cat "$TMP/load.$k")" errors)))
        rm -f "$TMP/load.$k"
        k=$((k + 1))
    done
}
ejected() { admin /metrics | awk '/^arbiter_lb_backend_ejections_total/ {s += $NF} END {print s + 0}'; }

backend b1
backend b2
BE="--backend 127.0.0.1:$PORT_b1 --backend 127.0.0.1:$PORT_b2 --eject-after 2 --eject-base 600000 --eject-max 600000"

# 1. soft limit 256, hard as it is: raised at start
# shellcheck disable=SC2086
lb_limit "-S -n 256" $BE
loads 3 200 1000
echo "soft limit: ok $OK, errors $ERR"
[ "$OK" = 3000 ] && [ "$ERR" = 0 ] || fail "600 clients under a soft 256: ok $OK, errors $ERR"
[ "$(ejected)" = 0 ] || fail "a backend was ejected: $(admin /backends)"
stop_lb

# 2. hard limit 256, --max-conns beyond it: our EMFILE is not a backend's failure
# shellcheck disable=SC2086
lb_limit "-n 256" $BE --max-conns 1000
grep -q "warning: --max-conns 1000: the open-file limit (256) holds 64 client connections" "$TMP/lb.err" ||
    fail "no warning for --max-conns: $(cat "$TMP/lb.err")"
loads 2 200 2000
echo "hard limit: ok $OK, errors $ERR"
[ "$(ejected)" = 0 ] || fail "our own EMFILE ejected a backend: $(admin /backends)"
grep -q "out of resources .*no backend is blamed" "$TMP/lb.err" || fail "no word of EMFILE: $(tail -3 "$TMP/lb.err")"
load --conns 2 --requests 200
[ "$(num "$OUT" ok)" = 200 ] || fail "after the fd storm: $OUT"
stop_lb

# 3. --maxconn 3 against a slow backend: at most 3 at once there, the rest queued and answered
backend b3 --delay-ms 200
lb --backend "127.0.0.1:$PORT_b3" --maxconn 3 --max-queue 100
load --conns 12 --requests 36
echo "maxconn: $OUT"
[ "$(num "$OUT" ok)" = 36 ] || fail "--maxconn 3: not all answered: $OUT"
"$LBT" req --port "$PORT_b3" --path /max > "$TMP/max"
grep -q "^max-inflight [123]$" "$TMP/max" || fail "--maxconn 3: the backend saw $(cat "$TMP/max")"
stop_lb

# 4. a client gone while the backend works: the backend's connection goes at once
backend b4 --delay-ms 20000
lb --backend "127.0.0.1:$PORT_b4" --server-timeout 60000
printf 'GET /slow HTTP/1.1\r\nHost: x\r\n\r\n' | "$HOS" send --to "127.0.0.1:$LB_PORT" --wait 300 >/dev/null
inflight0() { admin /backends | grep -q '"inflight":0,'; }
until_true 5 inflight0 || fail "the backend is still held after its client left: $(admin /backends)"
stop_lb

# 5. a bare-LF head: 400 now, not a wait for a CRLF that never comes
lb --backend "127.0.0.1:$PORT_b1"
printf 'GET / HTTP/1.1\nHost: x\n\n' | "$HOS" send --to "127.0.0.1:$LB_PORT" --wait 3000 > "$TMP/lf"
head -1 "$TMP/lf" | grep -q "^HTTP/1.1 400" || fail "bare LF: '$(head -1 "$TMP/lf")'"
stop_lb

# 6. pipelined requests behind an HTTP/1.0 backend
backend b5 --http10
lb --backend "127.0.0.1:$PORT_b5"
printf 'GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n' |
    "$HOS" send --to "127.0.0.1:$LB_PORT" --wait 3000 > "$TMP/pipe"
[ "$(grep -c '^HTTP/1.1 200' "$TMP/pipe")" = 2 ] || fail "pipelined behind HTTP/1.0: $(cat "$TMP/pipe")"
[ "$(grep -c '^X-Backend: b5' "$TMP/pipe")" = 2 ] || fail "pipelined: $(cat "$TMP/pipe")"
! grep -qi '^Connection: close' "$TMP/pipe" || fail "the backend's close reached the client: $(cat "$TMP/pipe")"
stop_lb
finish
