#!/bin/sh
# The controller end to end: a real `arbiter controller` on a free loopback
# port with bearer tokens, nodes registered over HTTP, jobs through the CLI
# verbs (submit, queue, job, explain, cancel, nodes, events), auth and
# validation errors, a clean stop and a restart that keeps everything.
# docs/api.md must be what `arbiter controller --api-doc` prints.
set -eu
ARB=$1
SRC=$2
T=$(mktemp -d /tmp/arb_ctl.XXXXXX)
PID=""
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "controller.sh: $*" >&2; [ -f "$T/log" ] && cat "$T/log" >&2; exit 1; }

$ARB controller --api-doc | diff -u "$SRC/docs/api.md" - >/dev/null ||
    fail "docs/api.md is stale: run 'build/arbiter controller --api-doc > docs/api.md'"

ADMIN=admin-token-0123456789
ALICE=alice-token-0123456789
printf '%s admin ops root\n%s user team-a alice\n' "$ADMIN" "$ALICE" > "$T/tokens"
chmod 600 "$T/tokens"

# The nodes here are registered once by hand and never report again: a lease
# far longer than the test, so that no node goes stale or NotReady on a busy
# machine (explain said "stale report" once at load 45; liveness has tests of
# its own).
printf 'nodes: {lease: 1h}\n' > "$T/config.yaml"
start() {
    rm -f "$T/d/url"
    $ARB controller --listen 127.0.0.1:0 --data-dir "$T/d" --tokens "$T/tokens" \
        --config "$T/config.yaml" 2>>"$T/log" &
    PID=$!
    i=0
    while [ ! -s "$T/d/url" ]; do
        i=$((i + 1)); [ $i -gt 100 ] && fail "controller did not start"
        sleep 0.05
    done
    ARBITER_URL=$(cat "$T/d/url"); export ARBITER_URL
}
start

# auth: no token -> 401 and exit code 1
ARBITER_TOKEN="" ; export ARBITER_TOKEN
if $ARB queue 2>"$T/err"; then fail "queue without a token succeeded"; fi
grep -q "401" "$T/err" || fail "no 401: $(cat "$T/err")"
ARBITER_TOKEN=$ADMIN

gpus='{"model": "H100", "memory": "80Gi", "nvlink": 0}'
for n in 1 2; do
    curl -sf -X POST -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/nodes/node-$n/report" \
        -d "{\"lamport\": 1, \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"labels\": {\"rack\": \"r1\"},
             \"gpus\": [$gpus, $gpus, $gpus, $gpus]}}" >/dev/null || fail "node report"
done

id=$($ARB submit --gpus 2 --cpus 4 --mem 16Gi --name train -- sleep 60)
[ "$id" = 1 ] || fail "first job id is '$id'"
cat > "$T/job.yaml" <<'YAML'
name: seed-case
resources:
  requests: {nvidia.com/gpu: 8, cpu: 32, memory: 256Gi}
  limits: {nvidia.com/gpu: 8}
YAML
if $ARB submit -f "$T/job.yaml" 2>"$T/err"; then fail "an 8-GPU task was accepted on 4-GPU nodes"; fi
grep -q "no registered node could ever hold it" "$T/err" || fail "unfittable: $(cat "$T/err")"
sed -i 's/gpu: 8/gpu: 4/g' "$T/job.yaml"
id2=$($ARB submit -f "$T/job.yaml")
id3=$($ARB submit -f "$T/job.yaml")
[ "$id2" = 2 ] && [ "$id3" = 3 ] || fail "ids $id2 $id3"
i=0
until $ARB job 1 | grep -q "state     placed"; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "job 1 not placed"; sleep 0.05
done
until $ARB job 2 | grep -q "state     placed"; do sleep 0.05; done
$ARB queue | grep -q "seed-case .*pending" || fail "queue: $($ARB queue)"
$ARB explain "$id3" | grep -q "insufficient GPUs" || fail "explain: $($ARB explain "$id3")"
$ARB explain "$id3" -o json | grep -q '"fragmentation"' || fail "explain json"
$ARB nodes | grep -q "node-1" || fail "nodes: $($ARB nodes)"
$ARB nodes -o json | grep -q '"jobs": \[' || fail "nodes json"

# malformed and invalid input: exit 1, a message with the place, nothing applied
printf '{"name": "x",\n "replicas": }' > "$T/bad.json"
if $ARB submit -f "$T/bad.json" 2>"$T/err"; then fail "malformed JSON accepted"; fi
grep -q "400: $T/bad.json:2:" "$T/err" || fail "malformed: $(cat "$T/err")"
printf 'name: x\ngpuz: 1\n' > "$T/bad.yaml"
if $ARB submit -f "$T/bad.yaml" 2>"$T/err"; then fail "unknown field accepted"; fi
grep -q "422: $T/bad.yaml:2:1: unknown field 'gpuz'" "$T/err" || fail "unknown field: $(cat "$T/err")"

# users see their team only
ARBITER_TOKEN=$ALICE
aid=$($ARB submit --gpus 1 --name mine)
$ARB queue | grep -q "mine" || fail "alice does not see her job"
if $ARB queue | grep -q "seed-case"; then fail "alice sees another team's job"; fi
if $ARB cancel 1 2>"$T/err"; then fail "alice cancelled root's job"; fi
grep -q "403" "$T/err" || fail "no 403: $(cat "$T/err")"
ARBITER_TOKEN=$ADMIN

$ARB cancel 1 | grep -q "job 1 cancelled" || fail "cancel"
$ARB events | grep -q "job-cancelled" || fail "events: $($ARB events)"
curl -sf -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/metrics" | grep -q "^arbiter_gpu_allocation_ratio" ||
    fail "metrics"

# a clean stop, a restart: everything is still there
kill -TERM "$PID"; wait "$PID" || fail "controller exited non-zero on SIGTERM"
PID=""
start
$ARB job 1 | grep -q "state     cancelled" || fail "job 1 after restart: $($ARB job 1)"
$ARB job "$aid" >/dev/null || fail "alice's job lost"
$ARB queue --all -o json | grep -q "\"id\": $id3" || fail "job $id3 lost"
curl -sf -H "Authorization: Bearer $ADMIN" "$ARBITER_URL/v1/check" | grep -q '"ok":true' || fail "check"
echo "controller: ok"
