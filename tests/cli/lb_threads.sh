#!/bin/sh
# arbiter lb --threads N: N event loops on one port (SO_REUSEPORT) that act
# as one balancer: connections spread over the loops; least-conn sees every
# loop's requests in flight (a slow backend is starved as with one loop);
# the counters on /metrics are the loops' sums; a reload (SIGHUP) reaches
# every loop; the inference policy's prefix index is one for all loops (a
# tenant's requests, each on a new connection and so on any loop, find its
# context cached); SIGTERM stops them all.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_threads
. "$SRC/tests/lbtest/lib.sh"

backend b1
backend b2
backend b3
backend slow --delay-ms 40
printf '127.0.0.1:%s\n127.0.0.1:%s\n127.0.0.1:%s\n' $PORT_b1 $PORT_b2 $PORT_slow >"$TMP/set"
lb --threads 3 --policy least-conn --backends-file "$TMP/set"
load --conns 32 --duration-ms 3000
ok=$(num "$OUT" ok)
[ "$(num "$OUT" errors)" = 0 ] && [ "$ok" -gt 300 ] || fail "load: $OUT"
s=$(num "$OUT" slow)
f=$(($(num "$OUT" b1) + $(num "$OUT" b2)))
[ $((s * 10)) -lt "$f" ] || fail "least-conn over 3 loops: the slow backend took $s of $ok: $OUT"
sleep 0.4 # the loops publish their counters 100 ms after their last event
admin /backends >"$TMP/b"
grep -q '"loops":3' "$TMP/b" || fail "/backends: 3 loops: $(cat "$TMP/b")"
used=$(sed -n 's/.*"accepted_by_loop":\[\([0-9,]*\)\].*/\1/p' "$TMP/b" | tr ',' '\n' | grep -vc '^0$')
[ "$used" -ge 2 ] || fail "32 connections all on one loop: $(cat "$TMP/b")"
admin /metrics >"$TMP/m"
grep -q "^arbiter_lb_responses_total{code=\"2xx\"} $ok\$" "$TMP/m" ||
    fail "/metrics sums the loops: want $ok: $(grep 'responses_total{code="2xx"' "$TMP/m")"

# reload: every loop takes the new set
printf '127.0.0.1:%s\n' $PORT_b3 >"$TMP/set"
kill -HUP "$LB_PID"
until_true 10 sh -c "'$LBT' req --port $ADMIN_PORT --path /backends | grep -q '$PORT_b3'" ||
    fail "reload not seen"
sleep 0.3 # the workers reload on their eventfd
load --conns 32 --requests 600
[ "$(num "$OUT" ok)" = 600 ] && [ "$(num "$OUT" b3)" = 600 ] || fail "after reload: all to b3: $OUT"
kill -TERM "$LB_PID"
wait "$LB_PID"
rc=$?
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc: $(cat "$TMP/lb.err")"

# the prefix index is the loops' one: 30 requests, 2 tenants, 28 cached
emu e1 --speedup 10
emu e2 --speedup 10
emu e3 --speedup 10
lb --threads 3 --policy inference --backend 127.0.0.1:$PORT_e1 --backend 127.0.0.1:$PORT_e2 \
    --backend 127.0.0.1:$PORT_e3
llm --requests 30 --tenants 2 --context-bytes 8000
[ "$(num "$OUT" ok)" = 30 ] || fail "inference: $OUT"
[ "$(num "$OUT" cached)" = 56000 ] || fail "inference over 3 loops: want 28 x 2000 tokens cached: $OUT"
finish
