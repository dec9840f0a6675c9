#!/bin/sh
# The controller's HTTP surface against hostile clients (real processes on
# loopback; arb_hostile makes the connections no client library would):
#   - slowloris: 2,000 connections from 20 source addresses, each sending a
#     header line every second and never ending its head. Meanwhile the two
#     agents keep reporting (Ready), a third agent registers, `arbiter queue`
#     answers; every slow connection is closed by the server once its head
#     has taken 10 s (none is left open), and the controller still serves;
#   - 2,500 keep-alive agents (node ka-I each, reporting every 2 s) all
#     register and every report is answered;
#   - one address gets at most --max-conns-per-client connections at a
#     time (the rest are closed at once), and the controller still serves;
#   - request smuggling and framing: Content-Length with Transfer-Encoding
#     (either order), conflicting Content-Lengths, a header name with a
#     space, a Transfer-Encoding that is not chunked, HTTP/1.1 without Host
#     or with two, a NUL in the target (raw and %00): each is answered 400
#     once, the connection is closed, the request behind it never runs
#     (the node it would drain stays Ready, the job it would cancel runs);
#   - the fd limit: a controller under a 256-descriptor limit, 1,000
#     connections held against it from ten addresses: it stays up, says
#     how many connections it allows, and serves once they are gone.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=hostile
HOS=$(dirname "$ARB")/tests/arb_hostile
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
[ -x "$HOS" ] || cl_fail "$HOS not built (tests/CMakeLists.txt builds arb_hostile)"
if ! "$HOS" hold --to 127.0.0.1:1 --conns 1 --from 127.0.0.2 --for 0.1 >/dev/null 2>&1; then
    echo "$NAME: cannot bind 127.0.0.2 here; skipped" >&2
    exit 77
fi
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 2300 ] || {
    echo "$NAME: the open-file hard limit ($(ulimit -Hn)) is under 2,300; skipped" >&2
    exit 77
}

ADMIN=admin-token-$$-0123456789
printf '%s admin ops root\n' "$ADMIN" > "$T/tokens"
for n in n1 n2 n3; do
    printf 'agent-%s-token-%s-0123456789 agent nodes %s\n' "$n" "$$" "$n" >> "$T/tokens"
    printf 'agent-%s-token-%s-0123456789\n' "$n" "$$" > "$T/$n.token"
done
i=0
while [ $i -lt 2500 ]; do # the keep-alive agents ka-I below, each with its own node token
    echo "ka-token-$i-0123456789abcdef agent nodes ka-$i"
    i=$((i + 1))
done >> "$T/tokens"
chmod 600 "$T/tokens" "$T"/*.token
ARBITER_TOKEN=$ADMIN
export ARBITER_TOKEN
printf 'scheduler: {interval: 200ms}\nnodes: {lease: 3s, grace: 2s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml" --tokens "$T/tokens" --max-conns-per-client 150
HOSTPORT=${ARBITER_URL#http://}
CL_GPUS=2:H100
cl_agent n1 --token-file "$T/n1.token"
cl_agent n2 --token-file "$T/n2.token"
cl_wait "n1 ready" 10 cl_node_ready n1
cl_wait "n2 ready" 10 cl_node_ready n2
serves() { curl -sf -m 5 "$ARBITER_URL/healthz" | grep -q ok; }

# ---- slowloris at 2,000 connections ---------------------------------------------------------
"$HOS" slowloris --to "$HOSTPORT" --conns 2000 --from 127.0.0.2:20 --every 1000 --for 40 \
    > "$T/slow.json" 2>"$T/slow.err" &
SLOW=$!
CL_PIDS="$CL_PIDS $SLOW"
n_conns() { ls "/proc/$CPID/fd" | wc -l; }
many() { [ "$(n_conns)" -ge 1500 ]; }
cl_wait "the slow connections to be open" 15 many
for i in 1 2 3; do
    timeout 10 $ARB queue >/dev/null 2>"$T/q.err" || cl_fail "queue during slowloris: $(cat "$T/q.err")"
    cl_node_ready n1 || cl_fail "n1 not Ready during slowloris: $($ARB nodes)"
    cl_node_ready n2 || cl_fail "n2 not Ready during slowloris"
done
held=$(n_conns)
[ "$held" -ge 1500 ] || cl_fail "only $held descriptors: the attack did not hold its connections"
cl_agent n3 --token-file "$T/n3.token"
cl_wait "a new agent to register during slowloris" 10 cl_node_ready n3
wait "$SLOW" || true
cl_forget_pid "$SLOW"
cat "$T/slow.json"
grep -q '"opened": 2000, "refused": 0, "closed_by_server": 2000, "open_at_end": 0' "$T/slow.json" ||
    cl_fail "slowloris: $(cat "$T/slow.json") $(cat "$T/slow.err")"
last=$(sed -n 's/.*"last_close_s": \([0-9]*\).*/\1/p' "$T/slow.json")
[ "$last" -lt 30 ] || cl_fail "a slow head lasted ${last}s (the deadline is 10 s)"
serves || cl_fail "the controller does not serve after slowloris"
for n in n1 n2 n3; do cl_node_ready "$n" || cl_fail "$n not Ready after slowloris"; done

# ---- many keep-alive agents (2,500: beyond the thread-per-connection server's 1,000) --------------
"$HOS" agents --to "$HOSTPORT" --conns 2500 --from 127.0.0.80:20 --every 2000 --for 10 \
    --token-fmt 'ka-token-%d-0123456789abcdef' > "$T/agents.json"
cat "$T/agents.json"
grep -q '"conns": 2500, "reported": 2500, "open_at_end": 2500,' "$T/agents.json" ||
    cl_fail "keep-alive agents: $(cat "$T/agents.json")"
grep -q '"failed": 0,' "$T/agents.json" || cl_fail "keep-alive agents failed: $(cat "$T/agents.json")"
serves || cl_fail "the controller does not serve after 2,500 agents"

# ---- idle holders, and the cap on one address ---------------------------------------------
"$HOS" hold --to "$HOSTPORT" --conns 400 --from 127.0.0.40 --for 4 > "$T/hold.json"
cat "$T/hold.json"
opened=$(sed -n 's/.*"opened": \([0-9]*\).*/\1/p' "$T/hold.json")
refused=$(sed -n 's/.*"refused": \([0-9]*\).*/\1/p' "$T/hold.json")
[ "$opened" -le 150 ] && [ "$refused" -ge 250 ] ||
    cl_fail "one address held $opened connections (cap 150), $refused refused"
serves || cl_fail "the controller does not serve after the holders"

# ---- smuggling and framing: one 400, closed, nothing behind it runs ------------------------------
job=$($ARB submit --gpus 1 --name keep -- sleep 600)
cl_wait "job $job to run" 15 cl_is "$job" running
AUTH="Authorization: Bearer $ADMIN"
DRAIN="POST /v1/nodes/n1/drain HTTP/1.1\r\nHost: x\r\n$AUTH\r\nContent-Length: 0\r\n\r\n"
CANCEL="DELETE /v1/jobs/$job HTTP/1.1\r\nHost: x\r\n$AUTH\r\n\r\n"
smuggle() { # smuggle WHAT BYTES...: a 400 back, and no answer to anything behind it
    what=$1
    shift
    printf "$@" | "$HOS" send --to "$HOSTPORT" --wait 1500 > "$T/resp" || cl_fail "$what: send"
    grep -q '^HTTP/1.1 400' "$T/resp" || cl_fail "$what: $(head -1 "$T/resp")"
    # (libmicrohttpd 0.9.75 writes the status line of its own 400s twice, as
    # for the Content-Length list: still one answer, then it closes)
    ! grep '^HTTP/1' "$T/resp" | grep -qv '^HTTP/1.1 400' ||
        cl_fail "$what: the request behind it was answered: $(cat "$T/resp")"
    serves || cl_fail "$what: the controller stopped serving"
}
B=$(printf "$DRAIN" | wc -c)
smuggle "CL+TE" "POST /v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n$DRAIN"
grep -q "Content-Length together with Transfer-Encoding" "$T/resp" || cl_fail "CL+TE: $(cat "$T/resp")"
smuggle "TE+CL" "POST /v1/status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: $((B + 5))\r\n\r\n0\r\n\r\n$CANCEL"
smuggle "conflicting CL" "POST /v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: $B\r\n\r\n$DRAIN"
grep -q "several Content-Length headers that differ" "$T/resp" || cl_fail "CL CL: $(cat "$T/resp")"
smuggle "CL list" "POST /v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 0, $B\r\n\r\n$DRAIN"
smuggle "space before colon" "POST /v1/status HTTP/1.1\r\nHost: x\r\nContent-Length : $B\r\n\r\n$DRAIN"
grep -q "header name" "$T/resp" || cl_fail "space: $(cat "$T/resp")"
smuggle "TE not chunked" "POST /v1/status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n$CANCEL"
smuggle "no Host" "GET /v1/status HTTP/1.1\r\n$AUTH\r\n\r\n$DRAIN"
grep -q "without a Host header" "$T/resp" || cl_fail "no Host: $(cat "$T/resp")"
smuggle "two Hosts" "GET /v1/status HTTP/1.1\r\nHost: a\r\nHost: b\r\n$AUTH\r\n\r\n"
smuggle "raw NUL" "GET /v1/jobs/$job\000x HTTP/1.1\r\nHost: x\r\n$AUTH\r\n\r\n"
grep -q "NUL byte in the request target" "$T/resp" || cl_fail "raw NUL: $(cat "$T/resp")"
smuggle "%00" "DELETE /v1/jobs/$job%%00x HTTP/1.1\r\nHost: x\r\n$AUTH\r\n\r\n"
grep -q "NUL (%00)" "$T/resp" || cl_fail "%00: $(cat "$T/resp")"
cl_node_ready n1 || cl_fail "a smuggled drain ran: $($ARB nodes)"
cl_is "$job" running || cl_fail "a smuggled cancel ran: job $job is $(cl_state "$job")"
# a well-framed request on the same tool still works (the tests above fail for their framing)
printf "GET /v1/jobs/$job HTTP/1.1\r\nHost: x\r\n$AUTH\r\nConnection: close\r\n\r\n" |
    "$HOS" send --to "$HOSTPORT" > "$T/resp"
grep -q '^HTTP/1.1 200' "$T/resp" || cl_fail "a plain request: $(head -1 "$T/resp")"

# ---- under a small open-file limit ----------------------------------------------------------------
mkdir -p "$T/d2"
(ulimit -n 256 && exec $ARB controller --listen 127.0.0.1:0 --data-dir "$T/d2" --tokens "$T/tokens") \
    2>>"$T/controller2.log" &
C2=$!
CL_PIDS="$CL_PIDS $C2"
cl_wait "the small controller" 20 test -s "$T/d2/url"
U2=$(cat "$T/d2/url")
grep -q "open-file limit (256) allows 128 connections" "$T/controller2.log" ||
    cl_fail "no word of the fd limit: $(cat "$T/controller2.log")"
"$HOS" hold --to "${U2#http://}" --conns 1000 --from 127.0.0.50:10 --for 4 > "$T/fd.json"
cat "$T/fd.json"
cl_alive "$C2" || cl_fail "the small controller died under 1,000 connections"
ARBITER_URL=$U2 timeout 10 $ARB queue >/dev/null 2>"$T/q.err" ||
    cl_fail "the small controller does not serve after the holders: $(cat "$T/q.err")"
echo "$NAME: ok (slowloris closed at $last s; cap $opened/400; framing refused; fd limit held)"
