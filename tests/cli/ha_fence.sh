#!/bin/sh
# The fence, end to end (issue 7): a write that reaches etcd after the term
# changed is refused by the txn's compare, and the leader steps down.
# A real 3-member etcd cluster and two controllers. The leader is started
# with the test hook ARBITER_TEST_HOLD_COMMIT (src/store/store_etcd.c): while
# $T/hold exists, its commits wait between the API's lease check and the
# txn. A submission passes the lease check and is held there; the leader's
# lease is then revoked in etcd (as when etcd ends a lease early), so the
# other controller wins a new term. Released, the held txn reaches etcd
# with the old term in its compare: etcd refuses it, the client is not
# acknowledged (503 naming the fence), the leader exits 3, and nothing of
# the job is in etcd or on the new leader.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=ha_fence
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/ha.sh"
ha_need_etcd
cl_init

ha_etcd 3
E1=$(cat "$T/url.e1")
ARB0=$ARB
ARB="env ARBITER_TEST_HOLD_COMMIT=$T/hold $ARB0"
ha_controller c1
cl_wait "c1 to lead" 15 curl -sf "$(cat "$T/url.c1")/v1/leader?require=self"
ARB=$ARB0
ha_controller c2
L_URL=$(cat "$T/url.c1")
L_PID=$(cat "$T/pid.c1")
ARBITER_URL=$L_URL $ARB submit --gpus 0 --cpus 1 --name before -- true > "$T/id.before"

# Freeze c1's commits, then send it a submission: it passes the lease check.
touch "$T/hold"
curl -s -m 60 -o "$T/held.body" -w '%{http_code}' -X POST "$L_URL/v1/jobs" \
    -d '{"name":"held-write","command":["true"],"resources":{"requests":{"cpu":"1"}}}' \
    > "$T/held.code" 2>/dev/null &
C=$!
# (Usually the held txn is the job's; if another commit of c1 came first,
# the job's waits behind it and fails with it: either way nothing lands.)
held() { grep -q "ARBITER_TEST_HOLD_COMMIT: a txn" "$T/c1.log"; }
cl_wait "c1's txn to be held before etcd" 15 held
KEYS=$(grep "ARBITER_TEST_HOLD_COMMIT: a txn" "$T/c1.log" | head -1 | sed 's/.*keys: \([^)]*\)).*/\1/')
TERM1=$(curl -s "$L_URL/v1/leader" | sed 's/.*"term":\([0-9]*\).*/\1/')

# etcd ends c1's lease: the leader key goes, c2 wins a new term.
b64() { printf '%s' "$1" | base64 -w0; }
LEASE=$(curl -s -X POST "$E1/v3/kv/range" -d "{\"key\":\"$(b64 /arbiter/leader)\"}" |
        sed -n 's/.*"lease":"\([0-9]*\)".*/\1/p')
[ -n "$LEASE" ] || cl_fail "no lease on the leader key"
curl -sf -X POST "$E1/v3/lease/revoke" -d "{\"ID\":\"$LEASE\"}" >/dev/null ||
    cl_fail "could not revoke lease $LEASE"
c2_leads() { curl -sf "$(cat "$T/url.c2")/v1/leader?require=self"; }
cl_wait "c2 to win a new term" 20 c2_leads
TERM2=$(curl -s "$(cat "$T/url.c2")/v1/leader" | sed 's/.*"term":\([0-9]*\).*/\1/')
[ "$TERM2" -gt "$TERM1" ] || cl_fail "term did not grow: $TERM1 -> $TERM2"

# Release the held txn: it reaches etcd with term TERM1 in its compare.
rm "$T/hold"
exited() { ! cl_alive "$L_PID"; }
cl_wait "c1 to step down and exit" 20 exited
rc=0
wait "$L_PID" || rc=$?
cl_forget_pid "$L_PID"
wait "$C" || true
[ "$rc" -eq 3 ] || cl_fail "c1 exited $rc, not 3 (stepped down)"
grep -q "ARBITER_TEST_HOLD_COMMIT: released; sending the txn fenced by term $TERM1" "$T/c1.log" ||
    cl_fail "c1 never sent the held txn"
code=$(cat "$T/held.code" 2>/dev/null || echo none)
[ "$code" = 503 ] || cl_fail "the held submission got HTTP $code, not 503: $(cat "$T/held.body")"
grep -q "fenced: the leader key /arbiter/leader is no longer this controller's (term $TERM1)" \
    "$T/held.body" || cl_fail "the refusal does not name the fence: $(cat "$T/held.body")"
grep -q "stepped down" "$T/c1.log" || cl_fail "c1's log does not say it stepped down"

# Nothing of the held write is visible: not in etcd, not on the new leader.
# Every record under /arbiter/data/, decoded: the acknowledged job is there, the held one not.
curl -s -X POST "$E1/v3/kv/range" \
    -d "{\"key\":\"$(b64 /arbiter/data/)\",\"range_end\":\"$(b64 /arbiter/data0)\"}" |
    grep -o '"value":"[^"]*"' | sed 's/"value":"//; s/"$//' |
    while read -r v; do printf '%s' "$v" | base64 -d; echo; done > "$T/etcd.data"
grep -q "'before' submitted" "$T/etcd.data" || cl_fail "the acknowledged job 'before' is not in etcd"
if grep -q held-write "$T/etcd.data"; then cl_fail "the fenced write landed in etcd"; fi
ARBITER_URL=$(cat "$T/url.c2") $ARB queue --all -o json > "$T/all.json"
grep -q "\"id\": $(cat "$T/id.before")," "$T/all.json" || cl_fail "acknowledged job lost"
if grep -q held-write "$T/all.json"; then cl_fail "the fenced job is on the new leader"; fi
curl -sf "$(cat "$T/url.c2")/v1/check" | grep -q '"ok":true' || cl_fail "check failed on c2"
echo "ha_fence: ok (c1's txn ($KEYS) held past its lease check; lease revoked, c2 leads with term $TERM2; the released txn fenced by term $TERM1 was refused by etcd: HTTP $code '$(head -c 160 "$T/held.body")'; c1 exited 3; nothing of it in etcd)"
