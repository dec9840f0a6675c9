#!/bin/sh
# GET /v1/leader on a single SQLite controller (itself, term = its epoch);
# an HA controller whose etcd cannot be reached (it serves as a follower
# that knows no leader: 503 with Retry-After, /healthz still ok, a clean
# SIGTERM); and the controller's HA flags refused with the fix named.
# Needs no etcd. Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=ha_flags
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/ha.sh"
cl_init

# A single controller names itself.
cl_controller --name solo
got=$(curl -s "$ARBITER_URL/v1/leader")
echo "$got" | grep -q "\"leader\":\"solo\",\"url\":\"$ARBITER_URL\",\"term\":1,.*\"serving\":true" ||
    cl_fail "single controller's /v1/leader: $got"
curl -sf "$ARBITER_URL/v1/leader?require=self" >/dev/null || cl_fail "require=self refused on the only controller"

# An HA controller with no etcd: a follower that knows no leader.
dead=$(ha_port)
port=$(ha_port)
U="http://127.0.0.1:$port"
$ARB controller --listen "127.0.0.1:$port" --store "etcd://127.0.0.1:$dead" --name lonely \
    2>>"$T/lonely.log" &
P=$!
CL_PIDS="$CL_PIDS $P"
cl_wait "the lonely controller" 20 curl -sf "$U/healthz"
code=$(curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' "$U/v1/jobs")
[ "$code" = 503 ] || cl_fail "no leader: /v1/jobs answered $code"
grep -qi '^Retry-After: 1' "$T/hdr" || cl_fail "no Retry-After: $(cat "$T/hdr")"
grep -q "no leader is known" "$T/body" || cl_fail "body: $(cat "$T/body")"
code=$(curl -s -o "$T/body" -w '%{http_code}' "$U/v1/leader")
[ "$code" = 503 ] || cl_fail "no leader: /v1/leader answered $code"
cl_wait "the log to say etcd cannot be read" 10 grep -q "cannot read the leader key" "$T/lonely.log"
[ "$(grep -c "cannot read the leader key" "$T/lonely.log")" -eq 1 ] || cl_fail "the failure is logged every poll"
kill -TERM "$P"
rc=0
wait "$P" || rc=$?
cl_forget_pid "$P"
[ "$rc" -eq 0 ] || cl_fail "SIGTERM: exit $rc"

# Bad flags: exit 2, nothing started, the message names the flag and the fix.
bad() { # bad WANT ARGS...
    want=$1
    shift
    if $ARB controller --listen 127.0.0.1:0 "$@" 2>"$T/err"; then cl_fail "accepted: $*"; fi
    grep -q -- "$want" "$T/err" || cl_fail "for '$*' expected '$want', got: $(cat "$T/err")"
}
bad "needs --name" --store "etcd://127.0.0.1:$dead"
bad "at least 5\|5..3600" --store "etcd://127.0.0.1:$dead" --name x --lease-ttl 2
bad "max-txn-ops" --store "etcd://127.0.0.1:$dead" --name x --max-txn-ops 1
bad "HOST:PORT" --store "etcd://nohostport" --name x
bad "advertise-url" --store "etcd://127.0.0.1:$dead" --name x --advertise-url 127.0.0.1:1
bad "store-prefix" --store "etcd://127.0.0.1:$dead" --name x --store-prefix arbiter
bad "port must be a number 1..65535" --store "etcd://127.0.0.1:99999" --name x
bad "port must be a number 1..65535" --store "etcd://127.0.0.1:$dead,127.0.0.1:2379x" --name x
bad "port must be a number 1..65535" --store "etcd://:2379" --name x
bad "give one store" --store "etcd://127.0.0.1:$dead" --name x --data-dir "$T/unused"
[ ! -e "$T/unused" ] || cl_fail "--data-dir with --store etcd: the data dir was created"
echo "ha_flags: ok (single controller names itself; no etcd: 503 + Retry-After, one log line, clean stop; 10 bad flag sets refused)"
