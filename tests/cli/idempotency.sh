#!/bin/sh
# Safe retries: POST /v1/jobs with an Idempotency-Key creates the job once
# (201), a retry with the same key from the same principal answers that job
# (200), durably (after a kill -9 and a restart too); another team's same
# key is another job; the same key with another body is refused (422).
# `arbiter submit --idempotency-key` shows it from the CLI. And If-Match on
# an agent's node report: 409 on a stale version, nothing applied.
# A real controller on loopback, real HTTP (curl).
set -eu
ARB=$1
SRC=$2
NAME=idempotency
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

ADMIN=admin-token-0123456789
ALICE=alice-token-0123456789
BOB=bob-token-0123456789
printf '%s admin ops root\n%s user team-a alice\n%s user team-b bob\n' "$ADMIN" "$ALICE" "$BOB" \
    > "$T/tokens"
chmod 600 "$T/tokens"
cl_controller --tokens "$T/tokens"
ARBITER_TOKEN=$ADMIN

post() { # TOKEN KEY BODY -> "STATUS ID" (or the error message)
    curl -s -o "$T/out" -w '%{http_code}' -X POST -H "Authorization: Bearer $1" \
        -H "Idempotency-Key: $2" -H 'Content-Type: application/json' --data "$3" \
        "$ARBITER_URL/v1/jobs" > "$T/code"
    printf '%s %s\n' "$(cat "$T/code")" "$(sed -n 's/^{"id": *\([0-9]*\),.*/\1/p' "$T/out")"
}
report() { # IFMATCH BODY -> status
    if [ -n "$1" ]; then set -- -H "If-Match: $1" --data "$2"; else set -- --data "$2"; fi
    curl -s -o "$T/rep" -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN" "$@" \
        "$ARBITER_URL/v1/nodes/n1/report"
}

# A node, so that GPU jobs are admissible.
inv='{"lamport": 1, "inventory": {"cpu": 16, "memory": "64Gi", "gpus": [{"model": "H100", "memory": "80Gi"}]}}'
[ "$(report "" "$inv")" = 200 ] || cl_fail "register: $(cat "$T/rep")"
v=$(sed -n 's/.*"version": *\([0-9]*\).*/\1/p' "$T/rep")
[ -n "$v" ] || cl_fail "the report's reply has no version: $(cat "$T/rep")"

J='{"name": "train", "resources": {"requests": {"nvidia.com/gpu": 1}}, "command": ["sleep", "60"]}'
[ "$(post "$ALICE" key-1 "$J")" = "201 1" ] || cl_fail "first keyed submit: $(cat "$T/code") $(cat "$T/out")"
[ "$(post "$ALICE" key-1 "$J")" = "200 1" ] || cl_fail "retry: $(cat "$T/code") $(cat "$T/out")"
[ "$(post "$BOB" key-1 "$J")" = "201 2" ] || cl_fail "bob's key-1 is his own: $(cat "$T/code")"
[ "$(post "$ALICE" key-2 "$J")" = "201 3" ] || cl_fail "a new key: $(cat "$T/code")"
r=$(post "$ALICE" key-1 '{"name": "other"}')
[ "${r%% *}" = 422 ] && grep -q "Idempotency-Key: 'key-1' was used for job 1 with a different body" "$T/out" ||
    cl_fail "same key, other body: $r $(cat "$T/out")"
r=$(post "$ALICE" 'bad key!' "$J")
[ "${r%% *}" = 400 ] && grep -q "Idempotency-Key: 'bad key!'" "$T/out" || cl_fail "bad key: $r $(cat "$T/out")"
n=$($ARB queue --all -o json | grep -c '"id":')
[ "$n" = 3 ] || cl_fail "$n jobs, want 3"

# The CLI: the same key twice is one job.
a=$($ARB submit --idempotency-key cli-key-7 --gpus 1 --name cli -- true)
b=$($ARB submit --idempotency-key cli-key-7 --gpus 1 --name cli -- true)
[ "$a" = 4 ] && [ "$b" = 4 ] || cl_fail "CLI retry: '$a' then '$b'"
c=$($ARB submit --gpus 1 --name cli -- true)
[ "$c" = 5 ] || cl_fail "a CLI submit without a key gets a fresh one: '$c'"
rc=0
$ARB submit --idempotency-key 'no spaces' --gpus 1 -- true 2>"$T/err" || rc=$?
[ "$rc" = 2 ] || cl_fail "bad --idempotency-key: exit $rc"

# Durable: kill -9, restart, the retries still find their jobs.
kill -9 "$CPID"
wait "$CPID" 2>/dev/null || true
cl_forget_pid "$CPID"
cl_controller --tokens "$T/tokens"
[ "$(post "$ALICE" key-1 "$J")" = "200 1" ] || cl_fail "retry after kill -9: $(cat "$T/code") $(cat "$T/out")"
[ "$(post "$BOB" key-1 "$J")" = "200 2" ] || cl_fail "bob's retry after restart: $(cat "$T/code")"
b=$($ARB submit --idempotency-key cli-key-7 --gpus 1 --name cli -- true)
[ "$b" = 4 ] || cl_fail "CLI retry after restart: '$b'"
[ "$(post "$ALICE" key-9 "$J")" = "201 6" ] || cl_fail "a new key after restart: $(cat "$T/code")"

# If-Match on the node report: the current version passes, a stale one is
# 409 and changes nothing, a bad one is 400.
[ "$(report "" '{"lamport": 2}')" = 200 ] || cl_fail "re-register: $(cat "$T/rep")"
v=$(sed -n 's/.*"version": *\([0-9]*\).*/\1/p' "$T/rep")
[ "$(report "$((v + 5))" '{"lamport": 100000}')" = 409 ] || cl_fail "stale If-Match: $(cat "$T/rep")"
grep -q "If-Match: node 'n1' is at version $v, not $((v + 5))" "$T/rep" || cl_fail "409 message: $(cat "$T/rep")"
st=$(curl -s -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/status" | sed -n 's/.*"lamport": *\([0-9]*\).*/\1/p')
[ "$st" -lt 100000 ] || cl_fail "a refused report moved the clock to $st"
[ "$(report "\"$v\"" '{"lamport": 3}')" = 200 ] || cl_fail "current If-Match: $(cat "$T/rep")"
[ "$(report 'v1' '{"lamport": 4}')" = 400 ] || cl_fail "bad If-Match: $(cat "$T/rep")"
curl -s -o "$T/rep" -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN" -H 'If-Match: 1' \
    --data "$inv" "$ARBITER_URL/v1/nodes/nobody/report" > "$T/code"
[ "$(cat "$T/code")" = 409 ] && grep -q "not registered" "$T/rep" || cl_fail "If-Match on an unknown node: $(cat "$T/rep")"
[ -z "$(curl -s -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/nodes/nobody" | grep '"name": "nobody"')" ] ||
    cl_fail "a refused registration created the node"
echo "idempotency: ok"
