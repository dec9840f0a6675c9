#!/bin/sh
# SIGSTOP the leading controller past its lease, then SIGCONT (issue 7): a
# real 3-member etcd cluster and two controllers. While the leader is
# stopped its lease expires and the other controller takes over; a job is
# submitted to the new leader, and another one is sent to the stopped
# leader, and a read (the kernel queues the connections). On SIGCONT the
# old leader cannot write: the request it then handles is not acknowledged
# (its lease is overdue, and every commit is a txn fenced by its term) and
# its job never appears; the read is not answered from its stale memory;
# it steps down and exits 3, saying why; the new leader goes on.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=ha_pause
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/ha.sh"
ha_need_etcd
cl_init

ha_etcd 3
for c in c1 c2; do ha_controller "$c"; done
cl_wait "a leader" 15 ha_leader
OLD=$(ha_leader)
OLD_URL=$(cat "$T/url.$OLD")
OLD_PID=$(cat "$T/pid.$OLD")
ARBITER_URL=$OLD_URL $ARB submit --gpus 0 --cpus 1 --name before -- true > "$T/id.before"

kill -STOP "$OLD_PID"
other() { ldr=$(ha_leader) && [ "$ldr" != "$OLD" ]; }
cl_wait "another leader while $OLD is stopped" $((HA_TTL + 5)) other
NEW=$(ha_leader)
NEW_URL=$(cat "$T/url.$NEW")
ARBITER_URL=$NEW_URL $ARB submit --gpus 0 --cpus 1 --name after -- true > "$T/id.after"
# A write sent to the stopped (deposed) leader: answered only after SIGCONT.
curl -s -m 30 -o "$T/deposed.body" -w '%{http_code}' -X POST "$OLD_URL/v1/jobs" \
    -d '{"name":"from-deposed","command":["true"],"resources":{"requests":{"cpu":"1"}}}' \
    > "$T/deposed.code" 2>/dev/null &
C=$!
# And a read: it must not be answered from the deposed leader's memory either.
curl -s -m 30 -o "$T/read.body" -w '%{http_code}' "$OLD_URL/v1/jobs?state=active" \
    > "$T/read.code" 2>/dev/null &
R=$!
conns() { [ "$(ss -Htn state established "( dport = :${OLD_URL##*:} )" | wc -l)" -ge 2 ]; }
cl_wait "the requests to reach $OLD's socket" 10 conns
kill -CONT "$OLD_PID"

exited() { ! cl_alive "$OLD_PID"; }
cl_wait "$OLD to step down and exit" 15 exited
rc=0
wait "$OLD_PID" || rc=$?
cl_forget_pid "$OLD_PID"
wait "$C" || true
wait "$R" || true
[ "$rc" -eq 3 ] || cl_fail "$OLD exited $rc, not 3 (stepped down)"
grep -q "stepped down" "$T/$OLD.log" || cl_fail "$OLD's log does not say it stepped down"
code=$(cat "$T/deposed.code" 2>/dev/null || echo none)
[ "$code" != 201 ] || cl_fail "the deposed leader acknowledged a job: $(cat "$T/deposed.body")"
echo "ha_pause: the deposed leader answered HTTP $code: $(head -c 300 "$T/deposed.body" 2>/dev/null)"
rcode=$(cat "$T/read.code" 2>/dev/null || echo none)
[ "$rcode" != 200 ] || cl_fail "the deposed leader answered a read from memory: $(cat "$T/read.body")"
echo "ha_pause: the deposed leader answered a read with HTTP $rcode: $(head -c 300 "$T/read.body" 2>/dev/null)"

# The new leader holds both acknowledged jobs, not the deposed one's.
ARBITER_URL=$NEW_URL $ARB queue --all -o json > "$T/all.json"
for f in before after; do
    grep -q "\"id\": $(cat "$T/id.$f")," "$T/all.json" || cl_fail "acknowledged job '$f' lost"
done
if grep -q from-deposed "$T/all.json"; then cl_fail "a write of the deposed leader landed"; fi
[ "$(ha_leader)" = "$NEW" ] || cl_fail "$NEW no longer leads"
curl -sf "$NEW_URL/v1/check" | grep -q '"ok":true' || cl_fail "check: $(curl -s "$NEW_URL/v1/check")"
why=$(grep "stepped down" "$T/$OLD.log" | tail -1 | sed 's/.*stepped down (\(.*\)); exiting.*/\1/')
echo "ha_pause: ok ($OLD stopped past its ${HA_TTL} s lease; $NEW took over; after SIGCONT the deposed leader's request got HTTP $code, nothing of it landed, and it exited 3: $why)"
