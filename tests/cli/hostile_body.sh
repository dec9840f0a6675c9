#!/bin/sh
# The controller's request bodies against hostile input (a real controller
# and agent on loopback, real HTTP): every route that reads a body (submit
# as JSON and as YAML, a node's report, its patch, cordon and drain, a
# service's load, a logs ticket) gets malformed and oversized bodies:
# empty, truncated, the wrong root, numbers past every range, invalid
# UTF-8 and NUL bytes, a UTF-16 text, nesting 100,000 deep, duplicate
# keys, and one mapping of 70,000 keys (under the 1 MiB body limit:
# libfyaml's own duplicate-key check takes about 20 minutes on it, one
# controller thread busy, src/spec/sval.c's a fraction of a second), and a
# report and a patch with tens of thousands of labels. Each is answered with a 4xx naming what is wrong, within a
# bounded time, while another client's requests are answered; afterwards
# nothing changed (no job; the node Ready, its version, labels, taints
# and schedulable as they were), and the controller still serves (a sanitizer build: no report).
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=hostile_body
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
cl_controller
CL_GPUS=2:H100
cl_agent n1
cl_wait "n1 ready" 20 cl_node_ready n1
# what an admin's change to n1 would change: its version, labels, taints, schedulable
node_admin() { curl -sf "$ARBITER_URL/v1/nodes/n1" | grep -o '"version":[0-9]*\|"labels":{[^}]*}\|"taints":\[[^]]*\]\|"schedulable":[a-z]*' | tr '\n' ' '; }

B=$T/bodies
mkdir -p "$B"
: > "$B/empty"
printf '{"name": "x", "command": ["tr' > "$B/truncated"
printf '[]' > "$B/list"
printf 'null' > "$B/null"
printf '"text"' > "$B/string"
printf '{"name": "x", "replicas": 1e999999, "lamport": 99999999999999999999999}' > "$B/numbers"
printf '{"name": "x\377\376", "command": ["true"]}' > "$B/utf8"
printf '{"name": "x\000y", "command": ["true"]}' > "$B/nul"
printf '\377\376{\000"\000a\000"\000:\000 \0001\000}\000' > "$B/utf16"
printf '{"name": "a", "name": "b", "command": ["true"]}' > "$B/dupkeys"
awk 'BEGIN { for (i = 0; i < 100000; i++) printf "["; }' > "$B/deep_list"
awk 'BEGIN { for (i = 0; i < 100000; i++) printf "{\"a\":"; }' > "$B/deep_map"
# one mapping of 70,000 keys, under 1 MiB: as JSON, and as YAML lines
awk 'BEGIN { printf "{\"name\": \"x\", \"command\": [\"true\"], \"nodeSelector\": {";
    for (i = 0; i < 70000; i++) printf "%s\"k%d\": \"v\"", (i ? ", " : ""), i; printf "}}" }' > "$B/wide_json"
awk 'BEGIN { printf "name: x\ncommand: [\"true\"]\nnodeSelector:\n";
    for (i = 0; i < 70000; i++) printf "  k%d: v\n", i }' > "$B/wide_yaml"
[ "$(wc -c < "$B/wide_json")" -le 1048576 ] || cl_fail "the wide body is over the 1 MiB limit"

# A client that keeps asking meanwhile: each request within 20 s (scaled)
lim=$((20 * ${CL_WAIT_SCALE:-1}))
(
    while :; do
        t0=$(date +%s)
        curl -sf -m "$lim" "$ARBITER_URL/v1/jobs" >/dev/null || echo "GET /v1/jobs failed or took over ${lim}s" >> "$T/other.fail"
        [ $(($(date +%s) - t0)) -le "$lim" ] || echo "GET /v1/jobs took $(($(date +%s) - t0))s" >> "$T/other.fail"
        sleep 0.2
    done
) &
OTHER=$!
CL_PIDS="$CL_PIDS $OTHER"

v0=$(node_admin)
echo "$v0" | grep -q '"schedulable":true' || cl_fail "n1 before: $v0"
n=0
# METHOD PATH CONTENT-TYPE BODY: a 4xx with an error message, within 60 s (scaled)
hit() {
    secs=$((60 * ${CL_WAIT_SCALE:-1}))
    code=$(curl -s -m "$secs" -o "$T/resp" -w '%{http_code}' -X "$1" -H "Content-Type: $3" \
        -H 'Expect:' --data-binary @"$4" "$ARBITER_URL$2") || true
    case "$code" in
    4??) ;;
    000) cl_fail "$1 $2 ($(basename "$4")): no answer within ${secs}s" ;;
    *) cl_fail "$1 $2 ($(basename "$4")): $code, not a 4xx: $(head -c 300 "$T/resp")" ;;
    esac
    grep -q '"error"' "$T/resp" || cl_fail "$1 $2 ($(basename "$4")): $code without an error: $(head -c 300 "$T/resp")"
    cl_alive "$CPID" || cl_fail "the controller died on $1 $2 ($(basename "$4"))"
    n=$((n + 1))
}
for f in "$B"/*; do
    hit POST /v1/jobs application/json "$f"
    hit POST /v1/jobs application/yaml "$f"
    hit POST /v1/nodes/n1/report application/json "$f"
    hit PATCH /v1/nodes/n1 application/json "$f"
    hit POST /v1/services/web/load application/json "$f"
    case $(basename "$f") in
    empty) ;; # an empty body is no body: these take none
    *)
        hit POST /v1/nodes/n1/cordon application/json "$f"
        hit POST /v1/nodes/n1/drain application/json "$f"
        ;;
    esac
done
# the wide bodies were read to their end: their errors name the labels' limit
for ct in application/json application/yaml; do
    f=$B/wide_json
    [ $ct = application/yaml ] && f=$B/wide_yaml
    hit POST /v1/jobs $ct "$f"
    grep -q "nodeSelector: 70000 labels; the most is 4096" "$T/resp" ||
        cl_fail "wide $ct: $(head -c 300 "$T/resp")"
done
hit POST /v1/jobs application/json "$B/dupkeys"
grep -q "duplicate.*key" "$T/resp" || cl_fail "duplicate keys: $(head -c 300 "$T/resp")"

kill "$OTHER" 2>/dev/null || true
wait "$OTHER" 2>/dev/null || true
cl_forget_pid "$OTHER"
[ ! -s "$T/other.fail" ] || cl_fail "another client was held up: $(head -n 3 "$T/other.fail")"
jobs=$(curl -sf "$ARBITER_URL/v1/jobs")
[ "$jobs" = '{"jobs":[]}' ] || cl_fail "a hostile body made a job: $jobs"
cl_node_ready n1 || cl_fail "n1 is not Ready after the hostile bodies: $($ARB nodes)"
[ "$(node_admin)" = "$v0" ] || cl_fail "a hostile body changed n1: $v0 before, $(node_admin) after"
# wide but well-formed: a node's report with 70,000 labels, an operator's
# patch of 20,000 more (each label once searched for among all the node's
# others: minutes under the state's lock); both answered within the bound
awk 'BEGIN { printf "{\"lamport\": 1, \"inventory\": {\"cpu\": \"8\", \"memory\": \"8Gi\", \"labels\": {\"rack\": \"r7\"";
    for (i = 0; i < 70000; i++) printf ", \"k%d\": \"v\"", i; printf "}}}" }' > "$B/wide_report"
awk 'BEGIN { printf "{\"labels\": {\"zone\": \"z3\"";
    for (i = 0; i < 20000; i++) printf ", \"p%d\": \"w\"", i; printf "}}" }' > "$B/wide_patch"
secs=$((60 * ${CL_WAIT_SCALE:-1}))
for step in "POST /v1/nodes/wide/report $B/wide_report" "PATCH /v1/nodes/wide $B/wide_patch"; do
    set -- $step # METHOD PATH FILE
    code=$(curl -s -m "$secs" -o "$T/resp" -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' \
        -H 'Expect:' --data-binary @"$3" "$ARBITER_URL$2") || true
    [ "$code" = 200 ] || cl_fail "$1 $2: $code (000: no answer within ${secs}s): $(head -c 300 "$T/resp")"
done
curl -sf "$ARBITER_URL/v1/nodes/wide" > "$T/wide.json"
grep -o '"labels":{[^}]*}' "$T/wide.json" | head -n 1 > "$T/wide.labels" # the effective ones
[ "$(grep -o '"k[0-9]*":"v"' "$T/wide.labels" | wc -l)" -eq 70000 ] &&
    [ "$(grep -o '"p[0-9]*":"w"' "$T/wide.labels" | wc -l)" -eq 20000 ] &&
    grep -q '"topology":{"rack":"r7","block":null,"zone":"z3"}' "$T/wide.json" ||
    cl_fail "the wide node's labels: $(grep -o '"topology":{[^}]*}' "$T/wide.json")"
job=$($ARB submit --gpus 1 --name after -- sleep 30)
cl_wait "a job after the hostile bodies to run" 20 cl_is "$job" running
echo "$NAME: ok ($n hostile bodies answered 4xx; nothing changed; the controller serves)"
