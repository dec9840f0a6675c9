#!/bin/sh
# kill -9 one etcd member under submission load (issue 7): a real 3-member
# etcd cluster and two controllers. The member killed is e1, the first in
# every controller's member list, so the one each client talks to: the
# clients must rotate to a live member (and when e1 was etcd's own leader,
# etcd must elect another; the test says which case it met). Submissions
# go on: more are acknowledged after the kill, the leading controller keeps
# its lease (no step-down), and every acknowledged job is there.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=ha_etcd_member
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/ha.sh"
ha_need_etcd
cl_init

ha_etcd 3
for c in c1 c2; do ha_controller "$c"; done
cl_wait "a leader" 15 ha_leader
LEAD=$(ha_leader)
ARBITER_URL=$(cat "$T/url.$LEAD")
export ARBITER_URL

submitter() {
    while [ ! -f "$T/stop" ]; do
        if id=$($ARB submit --gpus 0 --cpus 1 --name s -- true 2>/dev/null); then
            echo "$id" >> "$T/acked"
        fi
    done
}
submitter & S1=$!
CL_PIDS="$CL_PIDS $S1"
acked() { [ "$(cat "$T/acked" 2>/dev/null | wc -l)" -ge "$1" ]; }
cl_wait "submissions before the kill" 20 acked 20

# Which member is etcd's leader? (maintenance/status: header.member_id == leader)
etcd_leader() {
    for i in 1 2 3; do
        s=$(curl -sf -m 1 -X POST "$(cat "$T/url.e$i")/v3/maintenance/status" -d '{}' 2>/dev/null) || continue
        me=$(echo "$s" | sed -n 's/.*"member_id":"\([0-9]*\)".*/\1/p')
        ld=$(echo "$s" | sed -n 's/.*"leader":"\([0-9]*\)".*/\1/p')
        [ -n "$me" ] && [ "$me" = "$ld" ] && echo "$i" && return 0
    done
    return 1
}
cl_wait "etcd's leader" 10 etcd_leader
EL=$(etcd_leader)
kill -9 "$(cat "$T/pid.e1")"
killed="e1"
before=$(wc -l < "$T/acked")
cl_wait "submissions after killing e1" 20 acked $((before + 20))
touch "$T/stop"
wait "$S1" 2>/dev/null || true

total=$(wc -l < "$T/acked")
$ARB queue --all -o json > "$T/all.json"
for id in $(cat "$T/acked"); do
    grep -q "\"id\": $id," "$T/all.json" || cl_fail "acknowledged job $id lost"
done
[ "$(ha_leader)" = "$LEAD" ] || cl_fail "the leader changed: $LEAD -> $(ha_leader)"
grep -q "STEPPED DOWN" "$T/$LEAD.log" && cl_fail "$LEAD stepped down"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "check: $(curl -s "$ARBITER_URL/v1/check")"
what="a follower"
[ "$EL" = 1 ] && what="etcd's leader"
echo "ha_etcd_member: ok (etcd member $killed ($what) killed -9; $total acknowledged jobs, $((total - before)) after the kill, all present; $LEAD still leads)"
