#!/bin/sh
# Agents act only as their own node, secrets stay with their owners
# (DESIGN invariant 9; docs/security.md). A real controller with tokens, two
# real agents each with its node-scoped token (TOKEN agent TEAM NODE), and
# node certificates from `arbiter init` on a TLS controller:
#   - n2's token cannot report as n1 (the forged "succeeded" that once
#     killed another team's job, and requeued the rest), cannot register a
#     rogue node, cannot read n1's assignments (its commands and env); an
#     agent token bound to no node acts as none; each is 403, and nothing
#     changed: the job runs on, n1's version and GPUs are as they were, no
#     node "rogue" exists;
#   - log tickets: a ticket for n1's task checked by n2's agent (naming n1,
#     or naming itself) is 403, checked by a user is 403, a ticket is bound
#     to its job and task;
#   - a secret env value ({value, secret: true}) reaches the task; its
#     submitter and an admin read it back, another user of the same team
#     sees {"secret": true} only, a list shows no env, n2 never gets it,
#     and neither the controller's nor the agents' logs hold it; the data
#     files are mode 600;
#   - over TLS, node-1's certificate cannot report as node-2 either.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=hostile_identity
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

ADMIN=admin-token-$$-0123456789 ALICE=alice-token-$$-0123456789 CAROL=carol-token-$$-0123456789
N1=agent-n1-token-$$-0123456789 N2=agent-n2-token-$$-0123456789 ANY=agent-any-token-$$-012345
cat > "$T/tokens" <<EOF
$ADMIN admin ops root
$ALICE user team-a alice
$CAROL user team-a carol
$N1 agent nodes n1
$N2 agent nodes n2
$ANY agent nodes
EOF
echo "$N1" > "$T/n1.token"
echo "$N2" > "$T/n2.token"
chmod 600 "$T/tokens" "$T"/*.token
ARBITER_TOKEN=$ADMIN
export ARBITER_TOKEN
printf 'scheduler: {interval: 200ms}\nnodes: {lease: 3s, grace: 2s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml" --tokens "$T/tokens"
grep -q "1 agent token without a node" "$T/controller.log" || cl_fail "no warning for the unbound agent token"
CL_GPUS=2:H100
cl_agent n1 --token-file "$T/n1.token"
cl_wait "n1 ready" 10 cl_node_ready n1
# alice's job, with a secret, on n1 (the only node yet)
SECRET=s3cr3t-$$-value
cat > "$T/job.json" <<EOF
{"name": "holder", "resources": {"requests": {"nvidia.com/gpu": 1}},
 "command": ["sh", "-c", "echo \"got \$HF_TOKEN and \$PLAIN\"; exec sleep 600"],
 "env": {"HF_TOKEN": {"value": "$SECRET", "secret": true}, "PLAIN": "visible"}}
EOF
job=$(ARBITER_TOKEN=$ALICE $ARB submit -f "$T/job.json")
cl_wait "job $job to run" 15 cl_is "$job" running
cl_agent n2 --token-file "$T/n2.token"
cl_wait "n2 ready" 10 cl_node_ready n2

code() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }
nodever() { curl -s -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/nodes/$1" |
    tr -d ' \n' | sed -n 's/^{"name":"[^"]*","state":"[A-Za-z]*","version":\([0-9]*\).*/\1/p'; }
v1=$(nodever n1)
[ -n "$v1" ] || cl_fail "no version for n1"
FORGED="{\"lamport\": 999999, \"tasks\": [{\"job\": $job, \"task\": 0, \"attempt\": 1, \"state\": \"succeeded\", \"exit_code\": 0}]}"
[ "$(code -H "Authorization: Bearer $N2" -X POST -d "$FORGED" "$ARBITER_URL/v1/nodes/n1/report")" = 403 ] ||
    cl_fail "n2 reported as n1: $(cat "$T/body")"
grep -q "acts as node 'n2' only, not 'n1'" "$T/body" || cl_fail "forged: $(cat "$T/body")"
ROGUE='{"inventory": {"cpu": 64, "memory": "512Gi", "gpus": [{"model": "H100", "memory": "80Gi"}, {"model": "H100", "memory": "80Gi"}, {"model": "H100", "memory": "80Gi"}, {"model": "H100", "memory": "80Gi"}, {"model": "H100", "memory": "80Gi"}, {"model": "H100", "memory": "80Gi"}, {"model": "H100", "memory": "80Gi"}, {"model": "H100", "memory": "80Gi"}]}}'
[ "$(code -H "Authorization: Bearer $N2" -X POST -d "$ROGUE" "$ARBITER_URL/v1/nodes/rogue/report")" = 403 ] ||
    cl_fail "n2 registered a rogue node: $(cat "$T/body")"
[ "$(code -H "Authorization: Bearer $ANY" -X POST -d "$FORGED" "$ARBITER_URL/v1/nodes/n1/report")" = 403 ] ||
    cl_fail "an unbound agent token reported as n1: $(cat "$T/body")"
grep -q "bound to no node" "$T/body" || cl_fail "unbound: $(cat "$T/body")"
[ "$(code -H "Authorization: Bearer $N2" "$ARBITER_URL/v1/nodes/n1/assignments")" = 403 ] ||
    cl_fail "n2 read n1's assignments"
! grep -q "$SECRET" "$T/body" || cl_fail "n2 got n1's secret"
[ "$(code -H "Authorization: Bearer $N1" "$ARBITER_URL/v1/nodes/n1/assignments")" = 200 ] ||
    cl_fail "n1 cannot read its own assignments: $(cat "$T/body")"
grep -q "$SECRET" "$T/body" || cl_fail "n1's task would not get its secret: $(cat "$T/body")"
# nothing changed
cl_is "$job" running || cl_fail "the forged report ended job $job: $(cl_state "$job")"
[ "$(nodever n1)" = "$v1" ] || cl_fail "n1 changed: version $v1 -> $(nodever n1)"
[ "$(code -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/nodes/rogue")" = 404 ] ||
    cl_fail "a rogue node exists: $(cat "$T/body")"
$ARB nodes | grep -Eq "^n1 +Ready +1/2 " || cl_fail "n1: $($ARB nodes)"

# ---- log tickets ---------------------------------------------------------------------------
TK=$(curl -sf -X POST -H "Authorization: Bearer $ALICE" "$ARBITER_URL/v1/jobs/$job/logs-ticket?task=0" |
    sed -n 's/.*"ticket": *"\([0-9a-f]*\)".*/\1/p')
[ -n "$TK" ] || cl_fail "alice got no ticket"
chk() { code -H "Authorization: Bearer $1" "$ARBITER_URL/v1/logs/tickets/$TK?job=$2&task=0&node=$3"; }
[ "$(chk "$N1" "$job" n1)" = 200 ] || cl_fail "n1 cannot check a ticket for its task: $(cat "$T/body")"
[ "$(chk "$N2" "$job" n1)" = 403 ] || cl_fail "n2 checked a ticket as n1: $(cat "$T/body")"
[ "$(chk "$N2" "$job" n2)" = 403 ] || cl_fail "n2 checked n1's ticket as itself: $(cat "$T/body")"
[ "$(chk "$ALICE" "$job" n1)" = 403 ] || cl_fail "a user checked a ticket: $(cat "$T/body")"
[ "$(chk "$N1" "$((job + 1))" n1)" = 403 ] || cl_fail "a ticket for another job: $(cat "$T/body")"
near=$(printf '%s' "$TK" | sed 's/.$/0/')
[ "$near" != "$TK" ] || near=$(printf '%s' "$TK" | sed 's/.$/1/')
[ "$(code -H "Authorization: Bearer $N1" "$ARBITER_URL/v1/logs/tickets/$near?job=$job&task=0&node=n1")" = 403 ] ||
    cl_fail "a near-miss ticket was taken: $(cat "$T/body")"

# ---- secrets -----------------------------------------------------------------------------------
cl_wait "the task's output" 10 grep -q "^got $SECRET and visible$" "$T/logs/n1/$job.0.out"
get() { curl -s -H "Authorization: Bearer $1" "$ARBITER_URL/v1/jobs/$job" | tr -d ' \n'; }
get "$ALICE" | grep -q "\"HF_TOKEN\":{\"value\":\"$SECRET\",\"secret\":true}" ||
    cl_fail "the submitter cannot read her secret: $(get "$ALICE")"
get "$ADMIN" | grep -q "\"value\":\"$SECRET\"" || cl_fail "an admin cannot read it"
get "$CAROL" | grep -q '"HF_TOKEN":{"secret":true}' || cl_fail "carol: $(get "$CAROL")"
get "$CAROL" | grep -q '"PLAIN":"visible"' || cl_fail "carol does not see the plain value"
! get "$CAROL" | grep -q "$SECRET" || cl_fail "carol read alice's secret"
! curl -s -H "Authorization: Bearer $CAROL" "$ARBITER_URL/v1/jobs" | grep -q "$SECRET" ||
    cl_fail "a list shows the secret"
! ARBITER_TOKEN=$CAROL $ARB job "$job" -o json | grep -q "$SECRET" || cl_fail "arbiter job shows it"
[ "$(code -H "Authorization: Bearer $N2" "$ARBITER_URL/v1/nodes/n2/assignments")" = 200 ] &&
    ! grep -q "$SECRET" "$T/body" || cl_fail "n2's assignments hold the secret"
# a restart keeps it secret (it is read back from the store)
kill -TERM "$CPID"
wait "$CPID" 2>/dev/null || true
cl_forget_pid "$CPID"
cl_controller --config "$T/config.yaml" --tokens "$T/tokens"
get "$CAROL" | grep -q '"HF_TOKEN":{"secret":true}' || cl_fail "after a restart, carol: $(get "$CAROL")"
for f in "$T"/d/arbiter.db*; do
    [ "$(stat -c %a "$f")" = 600 ] || cl_fail "$f is mode $(stat -c %a "$f")"
done
[ "$(stat -c %a "$T/d")" = 700 ] || cl_fail "the data dir is mode $(stat -c %a "$T/d")"
! grep -l "$SECRET" "$T"/*.log || cl_fail "a daemon logged the secret"
bad=$(printf '{"name": "b", "resources": {"requests": {"nvidia.com/gpu": 1}}, "env": {"X": {"secret": true}}}')
[ "$(code -H "Authorization: Bearer $ALICE" -X POST -d "$bad" "$ARBITER_URL/v1/jobs")" = 422 ] ||
    cl_fail "a secret without a value: $(cat "$T/body")"
grep -q "env.X: give the value" "$T/body" || cl_fail "$(cat "$T/body")"

# ---- over TLS: node certificates -----------------------------------------------------------------
P=$T/pki
$ARB init "$P" >/dev/null && $ARB init node node-1 "$P" >/dev/null && $ARB init node node-2 "$P" >/dev/null
mkdir -p "$T/tls"
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/tls" --cert-file "$P/controller.crt" \
    --key-file "$P/controller.key" --trusted-ca-file "$P/ca.crt" 2>>"$T/controller-tls.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "the TLS controller" 20 test -s "$T/tls/url"
U=$(cat "$T/tls/url")
INV='{"inventory": {"cpu": 8, "memory": "16Gi", "gpus": []}}'
as() { n=$1; shift; code --cacert "$P/ca.crt" --cert "$P/node-$n.crt" --key "$P/node-$n.key" "$@"; }
# (the files of `arbiter init node NAME` are node-NAME.crt and .key)
[ "$(as node-1 -X POST -d "$INV" "$U/v1/nodes/node-1/report")" = 200 ] || cl_fail "node-1: $(cat "$T/body")"
[ "$(as node-1 -X POST -d "$INV" "$U/v1/nodes/node-2/report")" = 403 ] ||
    cl_fail "node-1's certificate reported as node-2: $(cat "$T/body")"
[ "$(as node-1 "$U/v1/status")" = 200 ] && grep -q '"node":"node-1"' "$T/body" ||
    cl_fail "status: $(cat "$T/body")"
[ "$(code --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "$U/v1/nodes/node-2")" = 404 ] ||
    cl_fail "node-2 exists: $(cat "$T/body")"
echo "$NAME: ok"
