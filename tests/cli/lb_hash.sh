#!/bin/sh
# arbiter lb --policy hash: a key stays on one backend while that backend
# stays; when a backend leaves (graceful reload of the backends file on
# SIGHUP), only its keys move, and no request fails during the reload.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_hash
. "$SRC/tests/lbtest/lib.sh"

backend b1
backend b2
backend b3
printf '127.0.0.1:%s\n127.0.0.1:%s\n127.0.0.1:%s\n' "$PORT_b1" "$PORT_b2" "$PORT_b3" >"$TMP/bf"

for kind in ring maglev; do
    # unbounded: strict stickiness under concurrency
    lb --policy hash --hash-header X-User --hash-kind $kind --hash-balance 0 \
        --backends-file "$TMP/bf"
    load --conns 4 --requests 3000 --keys 300 --map-out "$TMP/m1"
    [ "$(num "$OUT" keys_split)" = 0 ] || fail "$kind: keys seen on two backends: $OUT"
    [ "$(num "$OUT" errors)" = 0 ] || fail "$kind: errors: $OUT"
    for b in b1 b2 b3; do
        [ "$(num "$OUT" $b)" -gt 600 ] || fail "$kind: $b got too few keys: $OUT"
    done
    # b2 leaves
    printf '127.0.0.1:%s\n127.0.0.1:%s\n' "$PORT_b1" "$PORT_b3" >"$TMP/bf2"
    cp "$TMP/bf" "$TMP/bf.orig"
    mv "$TMP/bf2" "$TMP/bf"
    kill -HUP "$LB_PID"
    wait_for "$TMP/lb.err" "reloaded, 2 backends" # the new set is in force
    load --conns 4 --requests 3000 --keys 300 --map-out "$TMP/m2"
    [ "$(num "$OUT" errors)" = 0 ] || fail "$kind: errors after reload: $OUT"
    [ -z "$(num "$OUT" b2)" ] || fail "$kind: b2 left but still got traffic: $OUT"
    moved_wrong=$(join "$TMP/m1" "$TMP/m2" | awk '$2 != $3 && $2 != "b2"' | wc -l)
    # the ring moves only the leaver's keys; Maglev a few more (within 2x of 1/N)
    allowed=0
    [ $kind = maglev ] && allowed=30
    [ "$moved_wrong" -le $allowed ] ||
        fail "$kind: $moved_wrong keys moved off backends that stayed (allowed $allowed)"
    grep -q "reloaded, 2 backends" "$TMP/lb.err" || fail "$kind: no reload message: $(cat "$TMP/lb.err")"
    stop_lb
    mv "$TMP/bf.orig" "$TMP/bf"
done

# bounded loads (c = 1.25), one request at a time: still sticky
lb --policy hash --hash-header X-User --backends-file "$TMP/bf"
load --conns 1 --requests 600 --keys 100
[ "$(num "$OUT" keys_split)" = 0 ] || fail "bounded, serial: keys split: $OUT"
# a reload with a bad file keeps the old set
echo "not-an-address" >"$TMP/bf"
kill -HUP "$LB_PID"
wait_for "$TMP/lb.err" "reload failed, keeping the old backends"
load --conns 2 --requests 100 --keys 10
[ "$(num "$OUT" errors)" = 0 ] || fail "after a bad reload: $OUT"
stop_lb
finish
