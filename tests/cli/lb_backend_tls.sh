#!/bin/sh
# arbiter lb speaks TLS to its backends (src/lb/btls.c), with certificates
# made by `arbiter init`: replicas served over HTTPS by arb_lbtest backend
# --cert-file, one of them requiring a client certificate (mTLS).
#   1. --backend-tls with the cluster CA (--cacert) and the balancer's own
#      client certificate, two loops: requests through keep-alive pooled
#      TLS connections (one connection carries many), bodies of 1 MB and
#      chunked both ways, a server-sent event
#      stream arrives event by event, health checks and /metrics scrapes
#      over TLS succeed, no TLS failure counted; responses right behind a
#      TLS 1.3 key update are read on at once (none waits for the timeout);
#   2. the mTLS replica without a client certificate: 502, refused on both
#      sides, the reason in the balancer's log, counted as a TLS failure;
#   3. a replica whose certificate is from another CA: refused ("issuer"),
#      logged, ejected, while the good replica answers every request;
#   4. the name checked: --backend-sni b1 passes (a SAN of the certificate),
#      --backend-sni other is refused; https:// names one TLS backend beside
#      a plain one, in a backends file too (re-read on SIGHUP);
#      --backend-insecure-skip-verify takes the other CA's
#      replica, and says so loudly;
#   5. usage: a key without its certificate, a CA file that is not there
#      (exit 2, the flag named); https:// without backend TLS (exit 1).
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
SRC=$2
NAME=lb_backend_tls
. "$SRC/tests/lbtest/lib.sh"
command -v curl >/dev/null 2>&1 || {
    echo "$NAME: skipped: no curl"
    exit 77
}

PKI=$TMP/pki
"$ARB" init "$PKI" --host 127.0.0.1 >/dev/null || fail "arbiter init"
"$ARB" init server b1 "$PKI" >/dev/null || fail "init server b1"
"$ARB" init user lb "$PKI" >/dev/null || fail "init user lb"
"$ARB" init "$TMP/other" >/dev/null || fail "arbiter init other"
"$ARB" init server b1 "$TMP/other" >/dev/null || fail "init server b1 (other CA)"
CA=$PKI/ca.crt
CRT=$PKI/server-b1.crt
KEY=$PKI/server-b1.key

# tbackend ID ARGS...: a replica over HTTPS (stderr in $TMP/ID.err).
tbackend() {
    id=$1
    shift
    "$LBT" backend --id "$id" --port-file "$TMP/$id.port" "$@" 2>"$TMP/$id.err" &
    eval "PID_$id=$!"
    PIDS="$PIDS $!"
    wait_for "$TMP/$id.port"
    eval "PORT_$id=$(cat "$TMP/$id.port")"
}
tbackend b1 --cert-file "$CRT" --key-file "$KEY"
tbackend b2 --cert-file "$CRT" --key-file "$KEY" --client-ca "$CA"
tbackend evil --cert-file "$TMP/other/server-b1.crt" --key-file "$TMP/other/server-b1.key"
tbackend ku --cert-file "$CRT" --key-file "$KEY" --key-update
backend plain

# stop_lb_ok: SIGTERM, and a clean exit (0: no sanitizer report, no crash)
stop_lb_ok() {
    kill -TERM "$LB_PID"
    wait "$LB_PID"
    rc=$?
    [ $rc -eq 0 ] || fail "the balancer's exit after SIGTERM: $rc: $(tail -20 "$TMP/lb.err")"
}
up_both() { [ "$(admin /backends | grep -o '"state":"up"' | wc -l)" -eq 2 ]; }
# mval PREFIX: the sum of the balancer's metric lines that start with PREFIX
mval() {
    "$LBT" req --port "$ADMIN_PORT" --path /metrics |
        awk -v p="$1" 'index($0, p) == 1 { s += $NF } END { print s + 0 }'
}
tls_fails() { mval 'arbiter_lb_backend_failures_total{backend="'"$1"'",kind="tls"}'; }

# ---- 1. TLS to both, mTLS where asked -----------------------------------------------------
lb --threads 2 --backend-tls --cacert "$CA" --backend-cert "$PKI/user-lb.crt" \
    --backend-key "$PKI/user-lb.key" --backend 127.0.0.1:$PORT_b1 --backend 127.0.0.1:$PORT_b2 \
    --health-path /healthz --health-interval 100 --scrape-path /metrics --scrape-interval 100
until_true 20 up_both || fail "both TLS replicas up: $(admin /backends) $(cat "$TMP/lb.err")"
load --conns 1 --requests 60
[ "$(num "$OUT" ok)" = 60 ] || fail "60 requests over TLS: $OUT"
echo "$OUT" | grep -q '"b1":[1-9]' && echo "$OUT" | grep -q '"b2":[1-9]' ||
    fail "both replicas answered (b2 with the balancer's client certificate): $OUT"
# bodies both ways over TLS: 1 MB by length (many records), a chunked upload, a chunked answer
r=$("$LBT" req --port "$LB_PORT" --method POST --path /echo --body-bytes 1000000)
echo "$r" | grep -q "^b[12] got 1000000$" || fail "1 MB POST over TLS: $r"
r=$("$LBT" req --port "$LB_PORT" --method PUT --path /echo --body-bytes 300000 --chunked)
echo "$r" | grep -q "^b[12] got 3[0-9]\{5\}$" || fail "chunked PUT over TLS: $r"
r=$("$LBT" req --port "$LB_PORT" --path /chunked)
echo "$r" | head -1 | grep -q 200 || fail "chunked response over TLS: $r"
# keep-alive: one pooled TLS connection carried many of the requests (each replica's count)
for i in 1 2 3 4; do "$LBT" req --port "$LB_PORT" --path /conns; done >"$TMP/conns"
for id in b1 b2; do
    k=$(sed -n "s/^$id max-per-conn \([0-9]*\) .*/\1/p" "$TMP/conns" | sort -n | tail -1)
    [ "${k:-0}" -ge 10 ] || fail "$id: pooled TLS connections reused (most requests on one: ${k:-none}): $(cat "$TMP/conns")"
done
# a stream: five events 150 ms apart reach the client one by one (spread >= 0.3 s)
curl -sN -m 20 "http://127.0.0.1:$LB_PORT/sse" | while read -r line; do
    case $line in data:*) echo "$(date +%s%N) $line" ;; esac
done >"$TMP/sse"
[ "$(grep -c 'data: tok-' "$TMP/sse")" -eq 5 ] || fail "SSE over TLS: $(cat "$TMP/sse")"
spread=$(awk 'NR == 1 { a = $1 } { b = $1 } END { print int((b - a) / 1000000) }' "$TMP/sse")
[ "$spread" -ge 300 ] || fail "SSE events arrived together (spread $spread ms): streamed, not buffered"
# health checks and scrapes over TLS
for p in $PORT_b1 $PORT_b2; do
    ok=$(mval 'arbiter_lb_backend_checks_total{backend="127.0.0.1:'$p'",result="ok"}')
    [ "$ok" -ge 2 ] || fail "health checks over TLS to $p: $ok ok"
    [ "$(tls_fails 127.0.0.1:$p)" -eq 0 ] || fail "TLS failures at $p: $(cat "$TMP/lb.err")"
done
n=$(admin /backends | grep -o '"engine":{"kind":"vllm","waiting":2' | wc -l)
[ "$n" -eq 2 ] || fail "scrapes over TLS: $n of 2 replicas' metrics: $(admin /backends)"
stop_lb_ok

# a TLS 1.3 message of TLS's own right before each response (a key update): GnuTLS
# says "again" after taking it, with the response already waiting; the balancer reads
# on (no edge comes for bytes already there): every answer in time, none timed out
lb --backend-tls --cacert "$CA" --backend 127.0.0.1:$PORT_ku --server-timeout 20000
load --conns 2 --requests 20
[ "$(num "$OUT" ok)" = 20 ] || fail "responses behind a TLS key update: $OUT"
stop_lb_ok

# ---- 2. mTLS replica, no client certificate -----------------------------------------------
: >"$TMP/b2.err"
lb --backend-tls --cacert "$CA" --backend 127.0.0.1:$PORT_b2 --retries 0
r=$("$LBT" req --port "$LB_PORT" --path /)
echo "$r" | head -1 | grep -q 502 || fail "mTLS without a client certificate: $r"
until_true 10 grep -q "handshake failed" "$TMP/b2.err" || fail "b2 refused no certificate"
grep -q "backend 127.0.0.1:$PORT_b2: TLS .*failed" "$TMP/lb.err" ||
    fail "the reason in the balancer's log: $(cat "$TMP/lb.err")"
[ "$(tls_fails 127.0.0.1:$PORT_b2)" -ge 1 ] || fail "mTLS refusal counted as a TLS failure"
stop_lb_ok

# ---- 3. another CA's certificate: refused, ejected; the good one answers ---------------------
lb --backend-tls --cacert "$CA" --eject-after 1 --eject-base 60000 \
    --backend 127.0.0.1:$PORT_evil --backend 127.0.0.1:$PORT_b1
load --conns 2 --requests 20
[ "$(num "$OUT" ok)" = 20 ] || fail "requests beside a refused replica: $OUT"
echo "$OUT" | grep -q '"evil"' && fail "the other CA's replica was sent requests: $OUT"
grep -q "backend 127.0.0.1:$PORT_evil: TLS handshake failed (proxying): certificate refused: .*issuer" \
    "$TMP/lb.err" || fail "another CA: the reason logged: $(cat "$TMP/lb.err")"
admin /backends | grep -q "\"name\":\"127.0.0.1:$PORT_evil\",\"state\":\"ejected\"" ||
    fail "the other CA's replica ejected: $(admin /backends)"
[ "$(tls_fails 127.0.0.1:$PORT_evil)" -ge 1 ] || fail "other CA counted as a TLS failure"
stop_lb_ok

# ---- 4. the name; https:// per backend; insecure ---------------------------------------------
lb --backend-tls --backend-cacert "$CA" --backend-sni b1 --backend 127.0.0.1:$PORT_b1
r=$("$LBT" req --port "$LB_PORT" --path /)
[ "$r" = "200
b1" ] || fail "--backend-sni b1 (a SAN): $r"
stop_lb_ok
lb --backend-tls --backend-cacert "$CA" --backend-sni other.example --backend 127.0.0.1:$PORT_b1
r=$("$LBT" req --port "$LB_PORT" --path /)
echo "$r" | head -1 | grep -q 502 || fail "--backend-sni other.example: $r"
grep -q "certificate refused: .*name" "$TMP/lb.err" || fail "name mismatch logged: $(cat "$TMP/lb.err")"
stop_lb_ok
lb --cacert "$CA" --backend https://127.0.0.1:$PORT_b1 --backend 127.0.0.1:$PORT_plain
load --conns 1 --requests 20
[ "$(num "$OUT" ok)" = 20 ] && echo "$OUT" | grep -q '"b1":10' && echo "$OUT" | grep -q '"plain":10' ||
    fail "https:// beside a plain backend: $OUT $(cat "$TMP/lb.err")"
stop_lb_ok
# a backends file: https:// lines, re-read on SIGHUP (a plain backend added beside)
echo "https://127.0.0.1:$PORT_b1" >"$TMP/bf"
lb --backend-cacert "$CA" --backends-file "$TMP/bf"
r=$("$LBT" req --port "$LB_PORT" --path /)
[ "$r" = "200
b1" ] || fail "https:// in a backends file: $r $(cat "$TMP/lb.err")"
printf 'https://127.0.0.1:%s\n127.0.0.1:%s\n' "$PORT_b1" "$PORT_plain" >"$TMP/bf"
kill -HUP "$LB_PID"
two() { [ "$(admin /backends | grep -o '"state":"' | wc -l)" -eq 2 ]; }
until_true 10 two || fail "reload: $(admin /backends)"
load --conns 1 --requests 20
echo "$OUT" | grep -q '"b1":1[0-9]' && echo "$OUT" | grep -q '"plain":[1-9]' ||
    fail "after the reload, TLS and plain side by side: $OUT $(cat "$TMP/lb.err")"
stop_lb_ok
lb --backend-tls --backend-insecure-skip-verify --backend 127.0.0.1:$PORT_evil
r=$("$LBT" req --port "$LB_PORT" --path /)
[ "$r" = "200
evil" ] || fail "--backend-insecure-skip-verify: $r"
grep -q "WARNING: --backend-insecure-skip-verify" "$TMP/lb.err" || fail "insecure said loudly"
stop_lb_ok

# ---- 5. usage --------------------------------------------------------------------------------
"$ARB" lb --listen 127.0.0.1:0 --backend 127.0.0.1:1 --backend-tls --backend-key "$KEY" 2>"$TMP/e"
[ $? -eq 2 ] && grep -q -- "--backend-key without --backend-cert" "$TMP/e" || fail "key alone: $(cat "$TMP/e")"
"$ARB" lb --listen 127.0.0.1:0 --backend 127.0.0.1:1 --backend-cacert "$TMP/none.crt" 2>"$TMP/e"
[ $? -eq 2 ] && grep -q -- "the backends' CA $TMP/none.crt (--backend-cacert" "$TMP/e" || fail "no CA file: $(cat "$TMP/e")"
"$ARB" lb --listen 127.0.0.1:0 --backend 127.0.0.1:1 --backend-cert "$CA" --backend-key "$KEY" 2>"$TMP/e"
[ $? -eq 2 ] && grep -q -- "--backend-cert" "$TMP/e" || fail "a key not its certificate's: $(cat "$TMP/e")"
echo "https://127.0.0.1:$PORT_b1" >"$TMP/bf"
"$ARB" lb --listen 127.0.0.1:0 --backends-file "$TMP/bf" 2>"$TMP/e"
[ $? -eq 1 ] && grep -q "https:// needs the balancer started with backend TLS" "$TMP/e" ||
    fail "https:// without backend TLS: $(cat "$TMP/e")"
finish
