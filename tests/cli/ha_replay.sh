#!/bin/sh
# Replayed agent reports (issue 7): with several controllers, a report that
# timed out on one may be re-sent to another, and the first copy may still
# arrive after a newer report was applied. A real 3-member etcd cluster and
# two controllers; the "agent" here is curl, so that the test decides what
# is sent and in which order, through the follower (307 to the leader,
# `curl -L` re-sends the POST and its body):
#   1. the node registers (lamport 10, no tasks); a job is placed on it;
#   2. a report at lamport 30 says the task runs: the job runs;
#   3. the report from lamport 20 (taken before the task started, so it
#      lists no task) arrives late: it must be answered 200 "stale": true
#      and change nothing (applied, it would end the running task);
#   4. the lamport-30 report sent again is applied (a plain retry), and a
#      newer one (lamport 40) saying the task succeeded ends the job.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=ha_replay
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/ha.sh"
ha_need_etcd
cl_init

ha_etcd 3
printf 'scheduler: {interval: 200ms}\nnodes: {lease: 20s, grace: 5s}\n' > "$T/config.yaml"
for c in c1 c2; do ha_controller "$c" --config "$T/config.yaml"; done
cl_wait "a leader" 15 ha_leader
L=$(ha_leader)
F=c1
[ "$L" = c1 ] && F=c2
L_URL=$(cat "$T/url.$L")
F_URL=$(cat "$T/url.$F")
# The CLI too starts at the follower and follows its 307.
ARBITER_URL=$F_URL,$L_URL
export ARBITER_URL

# report LAMPORT TASKS [INVENTORY]: POST through the follower; the reply in $T/reply
report() {
    inv=${3:+,\"inventory\":$3}
    code=$(curl -s -L -o "$T/reply" -w '%{http_code} %{num_redirects}' -X POST \
        "$F_URL/v1/nodes/r1/report" -d "{\"lamport\":$1,\"tasks\":$2$inv}")
    [ "$code" = "200 1" ] || cl_fail "report lamport $1: HTTP '$code' (want 200 after one 307): $(cat "$T/reply")"
}
report 10 '[]' '{"cpu":"8","memory":"16Gi","gpus":[]}'
ID=$($ARB submit --gpus 0 --cpus 1 --name replayed -- sleep 600)
placed() {
    report 11 '[]'
    grep -q "\"job\":$ID," "$T/reply"
}
cl_wait "job $ID to be assigned to r1" 20 placed
ATT=$(sed -n "s/.*\"job\":$ID,[^}]*\"attempt\":\([0-9]*\).*/\1/p" "$T/reply")
[ -n "$ATT" ] || ATT=$(sed -n "s/.*\"attempt\":\([0-9]*\)[^}]*\"job\":$ID[,}].*/\1/p" "$T/reply")
[ -n "$ATT" ] || cl_fail "no attempt in the assignment: $(cat "$T/reply")"
RUNNING="[{\"job\":$ID,\"task\":0,\"attempt\":$ATT,\"state\":\"running\"}]"
report 30 "$RUNNING"
grep -q '"stale"' "$T/reply" && cl_fail "a fresh report was called stale: $(cat "$T/reply")"
cl_wait "job $ID to run" 10 cl_is "$ID" running

# The late copy of an older report: ignored, answered harmlessly.
report 20 '[]'
grep -q '"stale":true' "$T/reply" || cl_fail "the replay was not answered stale: $(cat "$T/reply")"
if grep -q '"assignments"' "$T/reply"; then cl_fail "a stale reply carried assignments"; fi
echo "ha_replay: the replayed report got: $(cat "$T/reply")"
cl_is "$ID" running || cl_fail "the replay changed job $ID: it is $(cl_state "$ID")"
curl -sf "$L_URL/v1/nodes/r1" | grep -q '"stale_reports": *1' ||
    cl_fail "node r1 does not count one stale report: $(curl -s "$L_URL/v1/nodes/r1" | head -c 400)"

# A plain retry (same Lamport time) is applied; newer reports go on.
report 30 "$RUNNING"
grep -q '"stale"' "$T/reply" && cl_fail "a retry of the last report was called stale"
report 40 "[{\"job\":$ID,\"task\":0,\"attempt\":$ATT,\"state\":\"succeeded\",\"exit_code\":0}]"
cl_wait "job $ID to succeed" 10 cl_is "$ID" succeeded
curl -sf "$L_URL/v1/check" | grep -q '"ok":true' || cl_fail "check: $(curl -s "$L_URL/v1/check")"
echo "ha_replay: ok (a report older than one applied, sent through follower $F to leader $L, was answered stale and changed nothing; job $ID kept running, then succeeded)"
