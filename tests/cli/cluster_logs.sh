#!/bin/sh
# `arbiter logs` where the log file cannot be read: a real controller with
# bearer tokens and a real agent that serves its task logs over HTTP
# (--logs-listen, default a loopback port). The CLI is pointed at a log
# directory that does not hold the files (ARBITER_LOG_DIR, --log-dir), as on
# a host other than the node, so every byte below comes from the agent,
# with a ticket from the controller. Checks:
#   - `arbiter logs` shows a task's log: its stdout and stderr in the order
#     written, one file (LOG_DIR/JOB.TASK.out); --err says that its stderr
#     is in it, through the agent and from the file; an agent with
#     --stderr separate serves a .err of its own;
#   - --follow prints a running task's lines as they come, by offset, each
#     once, and ends when the job ends;
#   - a user of another team gets no ticket (403 naming the team), so no log;
#   - --follow goes on through a node's death (kill -9 of its agent): the
#     task's next attempt on another node is followed through that agent;
#   - the agent refuses a request without a ticket (401), with an unknown
#     one (403), a ticket for another job (403), a path that is not
#     /v1/logs/INTEGER/INTEGER (400), a bad stream (400), a log file that is
#     a symbolic link (404) or has another name (a hard link: 403);
#   - the agent reports its logs URL to the controller (inventory.logs_url).
#   - a log in the layout before one file per task (LOG_DIR/JOB/TASK.out, an
#     adopted task an older agent started) is still found, by the agent and
#     from the file.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_logs
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

ADMIN=admin-token-$$-0123456789 AGENT=agent-token-$$-0123456789 AGENT2=agent2-token-$$-0123456789
ALICE=alice-token-$$-0123456789 BOB=bobby-token-$$-0123456789
# one token per node: an agent acts as (and checks tickets for) its own node only
printf '%s admin ops root\n%s agent nodes n1\n%s agent nodes n2\n%s user team-a alice\n%s user team-b bob\n' \
    "$ADMIN" "$AGENT" "$AGENT2" "$ALICE" "$BOB" > "$T/tokens"
echo "$AGENT" > "$T/agent.token"
echo "$AGENT2" > "$T/agent2.token"
chmod 600 "$T/tokens" "$T/agent.token" "$T/agent2.token"
printf 'scheduler: {interval: 200ms}\nnodes: {lease: 2s, grace: 1s}\n' > "$T/config.yaml"
ARBITER_TOKEN=$ADMIN
export ARBITER_TOKEN
cl_controller --config "$T/config.yaml" --tokens "$T/tokens"
cl_agent n1 --token-file "$T/agent.token"
cl_wait "n1 ready" 10 cl_node_ready n1
LURL=$($ARB nodes -o json >/dev/null; curl -sf -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/nodes/n1" |
    tr -d ' \n' | sed -n 's/.*"logs_url":"\([^"]*\)".*/\1/p')
case "$LURL" in http://127.0.0.1:[0-9]*) ;; *) cl_fail "no loopback logs_url for n1: '$LURL'" ;; esac
mkdir -p "$T/elsewhere"

# a finished job: its log (both streams, in order) through the agent
done_job=$(ARBITER_TOKEN=$ALICE $ARB submit --gpus 1 --name words -- sh -c 'echo "out one"; echo "err one" >&2; echo "out two"')
cl_wait "job $done_job to succeed" 15 cl_is "$done_job" succeeded
[ -f "$T/logs/n1/$done_job.0.out" ] || cl_fail "the agent wrote no log file: $(ls "$T/logs/n1")"
[ "$(ls "$T/logs/n1")" = "$done_job.0.out" ] || cl_fail "more than one file: $(ls "$T/logs/n1")"
[ ! -e "$T/elsewhere/$done_job.0.out" ] || cl_fail "the CLI's directory holds the log"
ARBITER_TOKEN=$ALICE ARBITER_LOG_DIR=$T/elsewhere $ARB logs "$done_job" > "$T/out1" 2>"$T/err1" ||
    cl_fail "logs $done_job: $(cat "$T/err1")"
printf 'out one\nerr one\nout two\n' | cmp -s - "$T/out1" || cl_fail "logs: $(cat "$T/out1")"
# a task an agent of the layout before (LOG_DIR/JOB/TASK.out) started and
# this one adopted keeps writing there: its log is still found, through the
# agent and from the file
mkdir "$T/logs/n1/$done_job" && mv "$T/logs/n1/$done_job.0.out" "$T/logs/n1/$done_job/0.out"
ARBITER_TOKEN=$ALICE ARBITER_LOG_DIR=$T/elsewhere $ARB logs "$done_job" > "$T/out1" 2>"$T/err1" ||
    cl_fail "logs $done_job, old layout, through the agent: $(cat "$T/err1")"
printf 'out one\nerr one\nout two\n' | cmp -s - "$T/out1" || cl_fail "logs, old layout: $(cat "$T/out1")"
ARBITER_TOKEN=$ALICE $ARB logs "$done_job" --log-dir "$T/logs/n1" > "$T/out1" 2>"$T/err1" ||
    cl_fail "logs $done_job, old layout, from the file: $(cat "$T/err1")"
printf 'out one\nerr one\nout two\n' | cmp -s - "$T/out1" || cl_fail "logs, old file: $(cat "$T/out1")"
mv "$T/logs/n1/$done_job/0.out" "$T/logs/n1/$done_job.0.out" && rmdir "$T/logs/n1/$done_job"
if ARBITER_TOKEN=$ALICE $ARB logs "$done_job" --err --log-dir "$T/elsewhere" > "$T/out2" 2>"$T/err2"; then
    cl_fail "logs --err of a merged log succeeded: $(cat "$T/out2")"
fi
grep -q "its stderr is in its out stream on node 'n1'" "$T/err2" || cl_fail "logs --err: $(cat "$T/err2")"
if ARBITER_TOKEN=$ALICE $ARB logs "$done_job" --err --log-dir "$T/logs/n1" > "$T/out2" 2>"$T/err2"; then
    cl_fail "logs --err from the file succeeded: $(cat "$T/out2")"
fi
grep -q "its stderr is in its output, $T/logs/n1/$done_job.0.out" "$T/err2" ||
    cl_fail "logs --err from the file: $(cat "$T/err2")"

# another team: no ticket, no bytes
if ARBITER_TOKEN=$BOB ARBITER_LOG_DIR=$T/elsewhere $ARB logs "$done_job" > "$T/out3" 2>"$T/err3"; then
    cl_fail "team-b read team-a's log: $(cat "$T/out3")"
fi
grep -q "belongs to team 'team-a'" "$T/err3" || cl_fail "team-b: $(cat "$T/err3")"
[ ! -s "$T/out3" ] || cl_fail "team-b got bytes: $(cat "$T/out3")"

# --follow a running task: 6 lines, a quarter second apart, each shown once
slow=$(ARBITER_TOKEN=$ALICE $ARB submit --gpus 1 --name ticker -- sh -c 'for i in 1 2 3 4 5 6; do echo "tick $i"; sleep 0.25; done')
cl_wait "job $slow to run" 15 cl_is "$slow" running
ARBITER_TOKEN=$ALICE ARBITER_LOG_DIR=$T/elsewhere $ARB logs "$slow" --follow > "$T/follow" 2>"$T/ferr" &
FPID=$!
CL_PIDS="$CL_PIDS $FPID"
cl_wait "the first tick through the agent" 10 grep -q "^tick 1$" "$T/follow"
cl_wait "--follow to end with the job" 20 sh -c "! kill -0 $FPID 2>/dev/null"
wait "$FPID" || cl_fail "logs --follow exited non-zero: $(cat "$T/ferr")"
cl_forget_pid "$FPID"
printf 'tick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\n' | cmp -s - "$T/follow" ||
    cl_fail "follow: $(cat "$T/follow")"

# the agent's own checks
code() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }
[ "$(code "$LURL/v1/logs/$done_job/0")" = 401 ] || cl_fail "no ticket: $(cat "$T/body")"
[ "$(code -H "Authorization: Bearer 0123456789abcdef0123456789abcdef" "$LURL/v1/logs/$done_job/0")" = 403 ] ||
    cl_fail "unknown ticket: $(cat "$T/body")"
TK=$(curl -sf -X POST -H "Authorization: Bearer $ALICE" "$ARBITER_URL/v1/jobs/$done_job/logs-ticket?task=0" |
    sed -n 's/.*"ticket": *"\([0-9a-f]*\)".*/\1/p')
[ -n "$TK" ] || cl_fail "no ticket from the controller"
[ "$(code -H "Authorization: Bearer $TK" "$LURL/v1/logs/$done_job/0?offset=4")" = 200 ] || cl_fail "ticket: $(cat "$T/body")"
printf 'one\nerr one\nout two\n' | cmp -s - "$T/body" || cl_fail "offset 4: $(cat "$T/body")"
[ "$(code -H "Authorization: Bearer $TK" "$LURL/v1/logs/$slow/0")" = 403 ] || cl_fail "other job: $(cat "$T/body")"
grep -q "ticket is for job $done_job task 0" "$T/body" || cl_fail "other job: $(cat "$T/body")"
[ "$(code --path-as-is -H "Authorization: Bearer $TK" "$LURL/v1/logs/../../../etc/passwd")" = 400 ] ||
    cl_fail "traversal: $(cat "$T/body")"
[ "$(code -H "Authorization: Bearer $TK" "$LURL/v1/logs/$done_job/0x1")" = 400 ] || cl_fail "0x1: $(cat "$T/body")"
[ "$(code -H "Authorization: Bearer $TK" "$LURL/v1/logs/$done_job/0?stream=../x")" = 400 ] ||
    cl_fail "stream: $(cat "$T/body")"
# what is planted in the log directory leads nowhere
D=$T/logs/n1
echo secret > "$T/secret"
ln -s "$T/secret" "$D/$done_job.0.err"
[ "$(code -H "Authorization: Bearer $TK" "$LURL/v1/logs/$done_job/0?stream=err")" = 404 ] ||
    cl_fail "symlink: $(cat "$T/body")"
rm -f "$D/$done_job.0.err" && ln "$T/secret" "$D/$done_job.0.err"
[ "$(code -H "Authorization: Bearer $TK" "$LURL/v1/logs/$done_job/0?stream=err")" = 403 ] ||
    cl_fail "hard link: $(cat "$T/body")"
grep -q "other names (a hard link)" "$T/body" || cl_fail "hard link: $(cat "$T/body")"
rm -f "$D/$done_job.0.err"
# --follow through a node's death: kill -9 the agent running the task (its
# log server dies with it); the task comes back on a second node, and the
# same --follow goes on there, from that node's agent
cl_agent n2 --token-file "$T/agent2.token" --stderr separate
cl_wait "n2 ready" 10 cl_node_ready n2
mover=$(ARBITER_TOKEN=$ALICE $ARB submit --gpus 4 --name mover -- sh -c 'echo "attempt on $ARBITER_NODE"; exec sleep 300')
cl_wait "job $mover to run" 15 cl_is "$mover" running
first=$($ARB job "$mover" | sed -n 's/.*running *node \(n[12]\).*/\1/p')
[ -n "$first" ] || cl_fail "no node for job $mover: $($ARB job "$mover")"
other=n1; [ "$first" = n1 ] && other=n2
ARBITER_TOKEN=$ALICE ARBITER_LOG_DIR=$T/elsewhere $ARB logs "$mover" --follow > "$T/follow2" 2>"$T/ferr2" &
FPID=$!
CL_PIDS="$CL_PIDS $FPID"
cl_wait "the first attempt's line" 10 grep -q "^attempt on $first$" "$T/follow2"
kill -9 "$(cat "$T/pid.$first")"
cl_forget_pid "$(cat "$T/pid.$first")"
cl_wait "the second attempt's line, through $other's agent" 20 grep -q "^attempt on $other$" "$T/follow2"
kill -0 "$FPID" || cl_fail "--follow stopped: $(cat "$T/ferr2")"
$ARB cancel "$mover" >/dev/null
cl_wait "--follow to end with the cancel" 15 sh -c "! kill -0 $FPID 2>/dev/null"
wait "$FPID" || cl_fail "logs --follow exited non-zero: $(cat "$T/ferr2")"
cl_forget_pid "$FPID"
[ "$(grep -c '^attempt on' "$T/follow2")" -eq 2 ] || cl_fail "follow2: $(cat "$T/follow2")"
# n2 (--stderr separate; back, when it was the one killed; n1 cordoned): stderr in a
# .err of its own, served as the err stream
if [ "$first" = n2 ]; then
    cl_agent n2 --token-file "$T/agent2.token" --stderr separate
fi
cl_wait "n2 ready" 10 cl_node_ready n2
$ARB cordon n1 >/dev/null || cl_fail "cordon n1"
split=$(ARBITER_TOKEN=$ALICE $ARB submit --gpus 1 --name split -- sh -c 'echo "out one"; echo "err one" >&2')
cl_wait "job $split to succeed" 15 cl_is "$split" succeeded
[ -f "$T/logs/n2/$split.0.err" ] || cl_fail "n2 wrote no .err: $(ls "$T/logs/n2")"
ARBITER_TOKEN=$ALICE ARBITER_LOG_DIR=$T/elsewhere $ARB logs "$split" > "$T/out4" 2>"$T/err4" ||
    cl_fail "logs $split: $(cat "$T/err4")"
[ "$(cat "$T/out4")" = "out one" ] || cl_fail "logs $split: $(cat "$T/out4")"
ARBITER_TOKEN=$ALICE ARBITER_LOG_DIR=$T/elsewhere $ARB logs "$split" --err > "$T/out4" 2>"$T/err4" ||
    cl_fail "logs $split --err: $(cat "$T/err4")"
[ "$(cat "$T/out4")" = "err one" ] || cl_fail "logs $split --err: $(cat "$T/out4")"
echo "cluster_logs: ok"
