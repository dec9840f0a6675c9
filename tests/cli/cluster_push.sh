#!/bin/sh
# Assignments pushed to agents (issue 20; docs/agent.md "The assignments
# channel"). A real controller (lease 90 s) and a real agent that reports
# only every 30 s: without the channel a new task would wait for the next
# report, up to 30 s.
#   - a job submitted after the agent registered starts within 10 s, and so
#     does a second one on the GPU the first freed (the exit is reported at
#     once, its report's cycle places the next job, the channel carries it);
#     and the two start well before the agent's next heartbeat report;
#   - fencing: an assignments poll with an epoch that is not the
#     controller's gets 409 and no assignment, at once, with or without a
#     wait; one with the right epoch gets the job placed there;
#   - identity: the node's token reads only its own node's channel (403 for
#     another node's), and a bad `wait`, `version` or `epoch` is a 400 naming it.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_push
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

ADMIN=admin-token-$$-0123456789 N1=agent-n1-token-$$-0123456789 N2=agent-n2-token-$$-0123456789
cat > "$T/tokens" <<EOF
$ADMIN admin ops root
$N1 agent nodes n1
$N2 agent nodes n2
EOF
echo "$N1" > "$T/n1.token"
chmod 600 "$T/tokens" "$T"/*.token
ARBITER_TOKEN=$ADMIN
export ARBITER_TOKEN
printf 'scheduler: {interval: 30s}\nnodes: {lease: 90s, grace: 10s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml" --tokens "$T/tokens"
CL_GPUS=1:H100
cl_agent n1 --token-file "$T/n1.token" --heartbeat 30s --lease 90s
cl_wait "n1 ready" 20 cl_node_ready n1
# the agent's reports so far (one: the registration, perhaps a second)
reports() { curl -sf -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/metrics" | sed -n 's/^arbiter_node_report_seconds_count \([0-9]*\).*/\1/p'; }
r0=$(reports)
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

t0=$(now_ms)
a=$($ARB submit --gpus 1 -- sh -c 'echo first; sleep 1')
b=$($ARB submit --gpus 1 -- sh -c 'echo second')
cl_wait "job $a to succeed within 10 s" 10 cl_is "$a" succeeded
cl_wait "job $b (on the GPU $a freed) to succeed within 10 s" 10 cl_is "$b" succeeded
t1=$(now_ms)
r1=$(reports)
echo "cluster_push: two jobs back to back on one GPU in $((t1 - t0)) ms (heartbeat 30 s); reports: $r0 -> $r1"
grep -q "job $a task 0 .*started" "$T/agent-n1.log" || cl_fail "no start of job $a in the agent's log"
grep -q "job $b task 0 .*started" "$T/agent-n1.log" || cl_fail "no start of job $b in the agent's log"
[ $((t1 - t0)) -lt 20000 ] || cl_fail "the two jobs took $((t1 - t0)) ms: not pushed"

# ---- fencing: the channel gives nothing to an agent of another epoch ----------------
epoch=$(curl -sf -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/status" | tr -d ' \n' | sed -n 's/.*"epoch":\([0-9]*\).*/\1/p')
[ -n "$epoch" ] || cl_fail "no epoch in /v1/status"
c=$($ARB submit --gpus 1 -- sleep 600)
cl_wait "job $c to run" 10 cl_is "$c" running
old=$((epoch + 7))
code=$(curl -s -o "$T/old.json" -w '%{http_code}' -m 20 -H "Authorization: Bearer $N1" \
    "$ARBITER_URL/v1/nodes/n1/assignments?wait=5&epoch=$old")
[ "$code" = 409 ] || cl_fail "a poll with epoch $old (the controller's is $epoch): $code, not 409: $(cat "$T/old.json")"
grep -q '"job"' "$T/old.json" && cl_fail "a poll with an old epoch got assignments: $(cat "$T/old.json")"
grep -q "epoch" "$T/old.json" || cl_fail "the 409 does not say why: $(cat "$T/old.json")"
code=$(curl -s -o "$T/cur.json" -w '%{http_code}' -m 20 -H "Authorization: Bearer $N1" \
    "$ARBITER_URL/v1/nodes/n1/assignments?epoch=$epoch")
[ "$code" = 200 ] || cl_fail "a poll with the controller's epoch: $code: $(cat "$T/cur.json")"
tr -d ' \n' < "$T/cur.json" | grep -q "\"job\":$c," || cl_fail "job $c not in n1's list: $(cat "$T/cur.json")"
ver=$(tr -d ' \n' < "$T/cur.json" | sed -n 's/.*"assignments_version":\([0-9]*\).*/\1/p')
[ -n "$ver" ] || cl_fail "no assignments_version: $(cat "$T/cur.json")"
# the same version: the poll waits (nothing changed) and answers at its deadline
s0=$(now_ms)
curl -sf -o /dev/null -m 20 -H "Authorization: Bearer $N1" \
    "$ARBITER_URL/v1/nodes/n1/assignments?wait=2&version=$ver&epoch=$epoch" || cl_fail "the long poll failed"
s1=$(now_ms)
[ $((s1 - s0)) -ge 1500 ] || cl_fail "a poll with the current version answered after $((s1 - s0)) ms, not at its 2 s deadline"

# ---- identity and bad input --------------------------------------------------------------
code=$(curl -s -o "$T/other.json" -w '%{http_code}' -m 10 -H "Authorization: Bearer $N2" \
    "$ARBITER_URL/v1/nodes/n1/assignments?wait=1")
[ "$code" = 403 ] || cl_fail "n2's token read n1's channel: $code: $(cat "$T/other.json")"
for q in "wait=61" "wait=x" "version=-1" "epoch=e"; do
    code=$(curl -s -o "$T/bad.json" -w '%{http_code}' -m 10 -H "Authorization: Bearer $N1" \
        "$ARBITER_URL/v1/nodes/n1/assignments?$q")
    [ "$code" = 400 ] || cl_fail "?$q: $code, not 400"
    grep -q "${q%%=*}" "$T/bad.json" || cl_fail "?$q: the error does not name the field: $(cat "$T/bad.json")"
done
$ARB cancel "$c" >/dev/null
curl -sf -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "cluster_push: ok"
