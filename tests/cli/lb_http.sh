#!/bin/sh
# arbiter lb: HTTP through the proxy (bodies by length and chunked, both
# ways; HEAD), the admin endpoints, the access log, usage errors, and a
# clean stop on SIGTERM.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_http
. "$SRC/tests/lbtest/lib.sh"

backend b1
lb --policy p2c --backend 127.0.0.1:$PORT_b1 --access-log "$TMP/access.log"

r=$("$LBT" req --port "$LB_PORT" --method POST --path /echo --body-bytes 1000000)
[ "$r" = "200
b1 got 1000000" ] || fail "1 MB POST by length: $r"
r=$("$LBT" req --port "$LB_PORT" --method PUT --path /echo --body-bytes 300000 --chunked)
echo "$r" | grep -q "^b1 got 3[0-9]\{5\}$" || fail "chunked PUT: $r"
r=$("$LBT" req --port "$LB_PORT" --path /chunked)
echo "$r" | head -1 | grep -q 200 || fail "chunked response: $r"
r=$("$LBT" req --port "$LB_PORT" --method HEAD --path /)
[ "$r" = "200" ] || fail "HEAD: $r"
load --conns 8 --requests 2000
[ "$(num "$OUT" ok)" = 2000 ] || fail "keep-alive load: $OUT"

admin /metrics >"$TMP/m"
head -1 "$TMP/m" | grep -q 200 || fail "/metrics status"
grep -q '^arbiter_lb_responses_total{code="2xx"} 200[4-9]$' "$TMP/m" ||
    fail "/metrics 2xx count: $(grep responses_total "$TMP/m")"
grep -q '^arbiter_lb_request_duration_seconds_bucket{le="+Inf"}' "$TMP/m" || fail "/metrics histogram"
admin /backends | grep -q '"policy":"p2c"' || fail "/backends: $(admin /backends)"
admin /nope | head -1 | grep -q 404 || fail "unknown admin path should be 404"

kill -TERM "$LB_PID"
wait "$LB_PID"
rc=$?
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc: $(cat "$TMP/lb.err")"
grep -q '"POST /echo HTTP/1.1" 200 127.0.0.1:' "$TMP/access.log" ||
    fail "access log: $(head -3 "$TMP/access.log")"
[ "$(wc -l <"$TMP/access.log")" -ge 2004 ] || fail "access log lines: $(wc -l <"$TMP/access.log")"

# usage errors: exit 2 and a message that says what to do
"$ARB" lb >/dev/null 2>"$TMP/e"
[ $? -eq 2 ] && grep -q -- "--listen ADDR is required" "$TMP/e" || fail "no args: $(cat "$TMP/e")"
"$ARB" lb --listen 127.0.0.1:0 --backend 127.0.0.1:1 --policy nope 2>"$TMP/e"
[ $? -eq 2 ] && grep -q "unknown; use one of round-robin" "$TMP/e" || fail "bad policy: $(cat "$TMP/e")"
"$ARB" lb --listen 127.0.0.1:0 --backend nohost 2>"$TMP/e"
[ $? -eq 2 ] && grep -q "HOST:PORT" "$TMP/e" || fail "bad backend: $(cat "$TMP/e")"
"$ARB" lb --listen 127.0.0.1:0 --backend 127.0.0.1:1 --policy hash 2>"$TMP/e"
[ $? -eq 2 ] && grep -q "needs --hash-header" "$TMP/e" || fail "hash without key: $(cat "$TMP/e")"
"$ARB" lb --listen 127.0.0.1:0 --service llama --controller http://127.0.0.1:1 2>"$TMP/e"
[ $? -eq 1 ] && grep -q "service 'llama' at http://127.0.0.1:1: no controller answered: .*connect" "$TMP/e" || fail "--service: $(cat "$TMP/e")"
finish
