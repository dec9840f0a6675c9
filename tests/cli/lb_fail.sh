#!/bin/sh
# arbiter lb: failures the client must not see. A backend killed in the
# middle of a load run costs no GET an error (retried on another backend,
# then ejected); a backend that was never up is stepped over; active health
# checks take a backend out and put it back.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_fail
. "$SRC/tests/lbtest/lib.sh"

# state NAME STATE: /backends shows backend NAME in STATE, an ERE (bounded polling, 10 s)
state() {
    n=200
    until admin /backends | grep -Eq "\"name\":\"$1\",\"state\":\"$2\""; do
        n=$((n - 1))
        [ $n -gt 0 ] || { fail "$1 never went $2: $(admin /backends)"; return 1; }
        sleep 0.05
    done
}

backend b1 --die-after 300 # SIGKILLs itself at its 301st request, in the middle of the run
backend b2
backend b3

# 1. kill -9 a backend mid-load. Ejected for 10 minutes (--eject-base), so
#    /backends still shows it ejected when read however slow the machine
#    (with the default 1 s a slow run saw it back in slow start already)
lb --policy round-robin --eject-after 2 --eject-base 600000 --eject-max 600000 --backend 127.0.0.1:$PORT_b1 \
    --backend 127.0.0.1:$PORT_b2 --backend 127.0.0.1:$PORT_b3
load --conns 8 --requests 3000
echo "kill mid-load: $OUT"
[ "$(num "$OUT" errors)" = 0 ] || fail "killing a backend mid-load gave client errors: $OUT"
[ "$(num "$OUT" ok)" = 3000 ] || fail "not every request answered: $OUT"
b1=$(num "$OUT" b1)
[ "${b1:-0}" -gt 0 ] && [ "${b1:-0}" -le 300 ] || fail "b1 answers at most 300, then dies: $OUT"
admin /metrics >"$TMP/m"
grep -q "arbiter_lb_backend_ejections_total{backend=\"127.0.0.1:$PORT_b1\"} [1-9]" "$TMP/m" ||
    fail "the dead backend was not ejected: $(grep ejections "$TMP/m")"
admin /backends | grep -q "\"name\":\"127.0.0.1:$PORT_b1\",\"state\":\"ejected\"" ||
    fail "/backends does not show it ejected: $(admin /backends)"
stop_lb

# 2. a backend that is not there at all (its port refuses), POST included:
#    a failed connect is retried for any method (the backend saw nothing)
lb --policy round-robin --backend 127.0.0.1:$PORT_b1 --backend 127.0.0.1:$PORT_b2
load --conns 2 --requests 200
[ "$(num "$OUT" errors)" = 0 ] || fail "a dead backend gave client errors: $OUT"
[ "$(num "$OUT" b2)" = 200 ] || fail "the live backend should take all 200: $OUT"
r=$("$LBT" req --port "$LB_PORT" --method POST --path /echo --body-bytes 10)
echo "$r" | head -1 | grep -q 200 || fail "POST with a dead backend in the set: $r"
stop_lb

# 3. active health checks, rise 1 fall 1, no slow start
touch "$TMP/h3"
backend b4 --health-file "$TMP/h4"
touch "$TMP/h4"
lb --policy round-robin --health-path /healthz --health-interval 100 --rise 1 --fall 1 \
    --slow-start 0 --backend 127.0.0.1:$PORT_b3 --backend 127.0.0.1:$PORT_b4
load --conns 2 --requests 100
[ "$(num "$OUT" b4)" = 50 ] || fail "healthy b4 should get half: $OUT"
rm "$TMP/h4"
state "127.0.0.1:$PORT_b4" down
load --conns 2 --requests 100
[ -z "$(num "$OUT" b4)" ] || fail "b4 failed its health check but got traffic: $OUT"
admin /backends | grep -q "\"name\":\"127.0.0.1:$PORT_b4\",\"state\":\"down\"" ||
    fail "/backends does not show b4 down: $(admin /backends)"
touch "$TMP/h4"
state "127.0.0.1:$PORT_b4" "(up|slow-start)" # back in rotation (slow start 0: at full weight)
load --conns 2 --requests 100
[ "$(num "$OUT" b4)" = 50 ] || fail "b4 passed its check again but got no traffic: $OUT"
[ "$(num "$OUT" errors)" = 0 ] || fail "health checks: errors: $OUT"
stop_lb

# 4. slow start: a backend added by reload ramps up over --slow-start. The
#    ramp is 10 minutes long, so however slow the machine the load below runs
#    early in it (with 3 s a slow run saw the ramp nearly done: 160 of 400)
printf '127.0.0.1:%s\n' "$PORT_b3" >"$TMP/bf"
lb --policy least-conn --slow-start 600000 --backends-file "$TMP/bf"
printf '127.0.0.1:%s\n127.0.0.1:%s\n' "$PORT_b3" "$PORT_b4" >"$TMP/bf"
kill -HUP "$LB_PID"
state "127.0.0.1:$PORT_b4" slow-start
admin /backends | grep -q "\"name\":\"127.0.0.1:$PORT_b4\",\"state\":\"slow-start\",\"weight\":1,\"eff\":0\." ||
    fail "an added backend should start slow: $(admin /backends)"
load --conns 8 --requests 400
b4=$(num "$OUT" b4)
b3=$(num "$OUT" b3)
[ "${b4:-0}" -lt "${b3:-0}" ] || fail "a backend in slow start took ${b4:-0} of 400, the one at full weight ${b3:-0}: $OUT"
stop_lb
finish
