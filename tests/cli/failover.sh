#!/bin/sh
# Clients with several controller URLs (issue 7's contract, the client side):
# a CLI and an agent given "DEAD,LIVE" work; a follower stand-in
# (tests/redirect/arb_redirect) that answers 307 to the live controller
# gets the CLI's submit (a POST with its body and Idempotency-Key re-sent)
# and the agent's report through; one that answers 503 (no leader) is
# skipped, and alone it makes the CLI give up after ARBITER_RETRY_S with
# exit code 3; one that accepts and never answers is left after one try's
# limit (ARBITER_TRY_S); one that creates the job and dies before answering
# makes the CLI retry elsewhere with the same Idempotency-Key: one job. All processes are real, all HTTP on loopback.
set -eu
ARB=$1
SRC=$2
NAME=failover
RED=$(dirname "$ARB")/tests/arb_redirect
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
[ -x "$RED" ] || cl_fail "no $RED (built by tests/CMakeLists.txt)"

cl_controller
LIVE=$ARBITER_URL

# Followers: F1 redirects to the live controller, F2 has no leader. A dead
# port: F3's, once F3 has stopped.
redirector() { # NAME ARGS...
    n=$1
    shift
    "$RED" --port-file "$T/$n.port" --log "$T/$n.req" "$@" 2>>"$T/$n.log" &
    CL_PIDS="$CL_PIDS $!"
    echo $! > "$T/$n.pid"
    cl_wait "$n to listen" 10 test -s "$T/$n.port"
}
redirector f1 --to "$LIVE"
redirector f2 --no-leader
redirector f3 --no-leader
F1=http://127.0.0.1:$(cat "$T/f1.port")
F2=http://127.0.0.1:$(cat "$T/f2.port")
DEAD=http://127.0.0.1:$(cat "$T/f3.port")
kill -TERM "$(cat "$T/f3.pid")"
cl_wait "f3 to stop" 10 sh -c "! kill -0 $(cat "$T/f3.pid") 2>/dev/null"
cl_forget_pid "$(cat "$T/f3.pid")"
curl -s -o /dev/null "$DEAD/healthz" && cl_fail "the dead port answers"

# 1. A dead URL first: the CLI moves on to the live one.
ARBITER_URL="$DEAD,$LIVE"
export ARBITER_URL
id1=$($ARB submit --gpus 1 --name via-dead -- true) || cl_fail "submit with DEAD,LIVE failed"
[ "$id1" = 1 ] || cl_fail "first job id '$id1'"
$ARB queue | grep -q via-dead || cl_fail "queue with DEAD,LIVE does not show the job"

# 2. Through a follower that answers 307: the POST and its body reach the leader.
ARBITER_URL="$F1"
id2=$($ARB submit --gpus 1 --name via-redirect --queue default -- echo hi) ||
    cl_fail "submit through a 307 failed"
[ "$id2" = 2 ] || cl_fail "second job id '$id2'"
ARBITER_URL=$LIVE
[ "$(cl_field 2 name)" = via-redirect ] || cl_fail "the redirected POST lost its body"
grep -q "^POST /v1/jobs [1-9][0-9]* idem=[0-9a-f]\{32\}$" "$T/f1.req" ||
    cl_fail "the follower did not see the POST with a body and a key: $(cat "$T/f1.req")"
ARBITER_URL="$F1" $ARB job 2 -o json | grep -q '"name": "via-redirect"' || cl_fail "GET via 307"
curl -s "$F1/v1/leader" | grep -q "\"url\": \"$LIVE\"" || cl_fail "GET /v1/leader on the stand-in"

# 3. A 503 (no leader) is skipped; alone, the CLI gives up after ARBITER_RETRY_S: exit 3.
ARBITER_URL="$F2,$LIVE" $ARB nodes >/dev/null || cl_fail "503 then LIVE failed"
rc=0
ARBITER_URL="$F2" ARBITER_RETRY_S=1 $ARB queue 2>"$T/err" || rc=$?
[ "$rc" = 3 ] || cl_fail "no leader: exit $rc, want 3"
grep -q "no leader elected yet" "$T/err" || cl_fail "no leader: message: $(cat "$T/err")"
rc=0
ARBITER_URL="$DEAD" ARBITER_RETRY_S=0.5 $ARB queue 2>"$T/err" || rc=$?
[ "$rc" = 3 ] || cl_fail "dead controller: exit $rc, want 3"
grep -q "no controller answered" "$T/err" || cl_fail "dead: message: $(cat "$T/err")"
rc=0
ARBITER_URL="$LIVE,ftp://x" $ARB queue 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -q "ARBITER_URL: 'ftp://x' is not an http" "$T/err" ||
    cl_fail "a bad URL in the list: exit $rc: $(cat "$T/err")"

# 3a. ARBITER_RETRY_S bounds the retrying, not one request: a long-poll
#     (events --watch, wait=30) outlives a 0.2 s budget and still gets its event.
ARBITER_URL=$LIVE ARBITER_RETRY_S=0.2 $ARB events --watch -o json > "$T/watch" 2>"$T/watch.err" &
WPID=$!
CL_PIDS="$CL_PIDS $WPID"
cl_wait "the watch's first events" 10 grep -q job-submitted "$T/watch"
sleep 1 # longer than the budget: the watch is now inside a long-poll
wid=$(ARBITER_URL=$LIVE $ARB submit --name late -- true)
cl_wait "the watch to see job $wid" 20 grep -q "job $wid 'late' submitted" "$T/watch"
kill -0 "$WPID" || cl_fail "the watch died: $(cat "$T/watch.err")"
kill -TERM "$WPID"
wait "$WPID" 2>/dev/null || true
cl_forget_pid "$WPID"

# 3b. A controller that accepts but never answers (stopped): after one try's
#     limit (ARBITER_TRY_S) the next URL answers, even when that is past
#     ARBITER_RETRY_S: the first pass visits every URL.
redirector hang --hang
HANG=http://127.0.0.1:$(cat "$T/hang.port")
id3=$(ARBITER_URL="$HANG,$LIVE" ARBITER_TRY_S=0.5 ARBITER_RETRY_S=0.1 $ARB submit --gpus 1 --name via-hang -- true) ||
    cl_fail "submit with HANG,LIVE failed"
[ "$id3" = 4 ] || cl_fail "fourth job id '$id3'"
grep -q "^HELD" "$T/hang.req" || cl_fail "the hanging controller was not tried first"

# 3c. A leader that created the job and died before answering: the CLI tries
#     the next controller with the same Idempotency-Key and gets that job
#     (200), not a second one.
redirector drop --drop-reply "$LIVE"
DROP=http://127.0.0.1:$(cat "$T/drop.port")
n0=$(ARBITER_URL=$LIVE $ARB queue --all -o json | grep -c '"id":')
id5=$(ARBITER_URL="$DROP,$LIVE" $ARB submit --gpus 1 --name lost-reply -- true) ||
    cl_fail "submit with DROP,LIVE failed"
grep -q "^POST /v1/jobs [1-9][0-9]* idem=[0-9a-f]\{32\} forwarded=201 reply=dropped$" "$T/drop.req" ||
    cl_fail "the first try did not create the job: $(cat "$T/drop.req")"
n1=$(ARBITER_URL=$LIVE $ARB queue --all -o json | grep -c '"id":')
[ "$n1" = $((n0 + 1)) ] || cl_fail "a lost reply and its retry made $((n1 - n0)) jobs, want 1"
[ "$(ARBITER_URL=$LIVE cl_field "$id5" name)" = lost-reply ] || cl_fail "job $id5 is not the retried one"

# 4. An agent given DEAD, the 503 follower and the redirecting one registers,
#    renews its lease through them and runs both jobs.
CL_AGENT_URL="$DEAD,$F2,$F1" cl_agent n1
cl_wait "n1 Ready through the followers" 20 cl_node_ready n1
cl_wait "job 1 to succeed" 20 cl_is 1 succeeded
cl_wait "job 2 to succeed" 20 cl_is 2 succeeded
cl_wait "job 4 to succeed" 20 cl_is 4 succeeded
cl_wait "job $id5 to succeed" 20 cl_is "$id5" succeeded
grep -q "^POST /v1/nodes/n1/report [1-9]" "$T/f1.req" || cl_fail "no report came through f1"
# Its reports kept coming (lamport grows) and it never fenced.
l1=$($ARB nodes -o json | grep -c '"name": "n1"')
[ "$l1" = 1 ] || cl_fail "n1 listed $l1 times"
r1=$(grep -c "^POST /v1/nodes/n1/report" "$T/f1.req")
cl_wait "more reports through f1" 10 sh -c "[ \$(grep -c '^POST /v1/nodes/n1/report' '$T/f1.req') -gt $r1 ]"
grep -qi "fenc" "$T/agent-n1.log" && cl_fail "the agent fenced: $(grep -i fenc "$T/agent-n1.log")"
cl_node_ready n1 || cl_fail "n1 not Ready"
echo "failover: ok"
