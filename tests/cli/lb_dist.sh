#!/bin/sh
# arbiter lb: how each policy spreads requests over real backends.
# Round robin gives each backend exactly its turn; smooth weighted round
# robin exactly its weight; least-conn, p2c and feedback starve a backend
# that is 40 ms slower than its peers, where round robin keeps feeding it.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_dist
. "$SRC/tests/lbtest/lib.sh"

backend b1
backend b2
backend b3
backend slow --delay-ms 40

lb --policy round-robin --backend 127.0.0.1:$PORT_b1 --backend 127.0.0.1:$PORT_b2 \
    --backend 127.0.0.1:$PORT_b3
load --conns 4 --requests 300
for b in b1 b2 b3; do
    [ "$(num "$OUT" "$b")" = 100 ] || fail "round-robin: $b should get 100 of 300: $OUT"
done
stop_lb

lb --policy weighted --backend 127.0.0.1:$PORT_b1=3 --backend 127.0.0.1:$PORT_b2=1
load --conns 4 --requests 400
[ "$(num "$OUT" b1)" = 300 ] && [ "$(num "$OUT" b2)" = 100 ] ||
    fail "weighted 3:1: want 300/100: $OUT"
stop_lb

# The slow backend under round robin: a third of the requests.
lb --policy round-robin --backend 127.0.0.1:$PORT_b1 --backend 127.0.0.1:$PORT_b2 \
    --backend 127.0.0.1:$PORT_slow
load --conns 12 --duration-ms 1000
rr_slow=$(num "$OUT" slow)
rr_ok=$(num "$OUT" ok)
stop_lb
[ "$(num "$OUT" errors)" = 0 ] || fail "round-robin with a slow backend: errors: $OUT"
echo "round-robin: slow backend got $rr_slow of $rr_ok"

for pol in least-conn p2c feedback; do
    lb --policy "$pol" --backend 127.0.0.1:$PORT_b1 --backend 127.0.0.1:$PORT_b2 \
        --backend 127.0.0.1:$PORT_slow
    load --conns 12 --duration-ms 1000
    stop_lb
    s=$(num "$OUT" slow)
    ok=$(num "$OUT" ok)
    echo "$pol: slow backend got ${s:-0} of $ok"
    [ "$(num "$OUT" errors)" = 0 ] || fail "$pol: errors: $OUT"
    # under 10% of requests, and more requests served in total than round robin
    [ "${s:-0}" -lt $((ok / 10)) ] || fail "$pol: slow backend share too large: $OUT"
    [ "$ok" -gt "$rr_ok" ] || fail "$pol: served $ok, round robin $rr_ok: $OUT"
done
finish
