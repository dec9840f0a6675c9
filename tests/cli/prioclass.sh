#!/bin/sh
# Priority classes from the controller's config: priorityClasses: redefines
# and adds to the built-ins; GET /v1/priorityclasses lists them; a
# submission's priorityClassName resolves through them (value, and the
# class's preemptible default, which the spec's own preemptible: beats); an
# unknown name is 422 listing the classes; a bad config is refused with its
# file, line and field path; a restart keeps the jobs' priorities.
set -eu
ARB=$1
SRC=$2
NAME=prioclass
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

cat > "$T/bad.yaml" <<'YAML'
priorityClasses:
  - {name: production}
YAML
rc=0
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/bad" --config "$T/bad.yaml" 2>"$T/err" || rc=$?
[ "$rc" != 0 ] || cl_fail "a class without a value was accepted"
grep -q "bad.yaml:2:[0-9]*: priorityClasses\[0\]: priority class 'production' needs a value" "$T/err" ||
    cl_fail "bad config message: $(cat "$T/err")"
printf 'priorityClasses:\n  - {name: x, value: 1}\n  - {name: x, value: 2}\n' > "$T/dup.yaml"
rc=0
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/bad" --config "$T/dup.yaml" 2>"$T/err" || rc=$?
[ "$rc" != 0 ] && grep -q "priority class 'x' is defined twice" "$T/err" ||
    cl_fail "duplicate class: $(cat "$T/err")"

cat > "$T/c.yaml" <<'YAML'
priorityClasses:
  - {name: production, value: 5000, preemptible: false, description: serving and deadlines}
  - {name: scavenger, value: -10, preemptible: true, description: idle GPUs only}
  - {name: high, value: 2000}
YAML
cl_controller --config "$T/c.yaml"

curl -sf "$ARBITER_URL/v1/priorityclasses" > "$T/pc" || cl_fail "GET /v1/priorityclasses"
for c in '"name": *"best-effort", *"value": *0' '"name": *"high", *"value": *2000' \
         '"name": *"production", *"value": *5000' '"name": *"scavenger", *"value": *-10'; do
    grep -q "$c" "$T/pc" || cl_fail "no $c in $(cat "$T/pc")"
done
[ "$(grep -o '"name"' "$T/pc" | wc -l)" = 7 ] || cl_fail "want 7 classes: $(cat "$T/pc")"

jp=$($ARB submit --priority production --name prod -- true)
s=$($ARB submit --priority scavenger --name scav -- true)
h=$($ARB submit --priority high --name hi -- true)
[ "$(cl_field "$jp" priority)" = 5000 ] || cl_fail "production: priority $(cl_field "$jp" priority)"
[ "$(cl_field "$s" priority)" = -10 ] || cl_fail "scavenger: priority $(cl_field "$s" priority)"
[ "$(cl_field "$h" priority)" = 2000 ] || cl_fail "redefined high: $(cl_field "$h" priority)"
[ "$(cl_field "$jp" preemptible)" = false ] || cl_fail "production preemptible $(cl_field "$jp" preemptible)"
[ "$(cl_field "$s" preemptible)" = true ] || cl_fail "scavenger preemptible $(cl_field "$s" preemptible)"
o=$(printf '{"name": "own", "priorityClassName": "scavenger", "preemptible": false}' |
    $ARB submit -f - -o json 2>&1) || cl_fail "own preemptible: $o"
echo "$o" | grep -q '"preemptible": false' || cl_fail "the spec's preemptible did not win: $o"

rc=0
$ARB submit --priority nope -- true 2>"$T/err" || rc=$?
[ "$rc" = 1 ] || cl_fail "unknown class: exit $rc"
grep -q "422: job.json:[0-9]*:[0-9]*: priorityClassName: unknown priority class 'nope'; the defined classes are best-effort (0), low (100), normal (500), high (2000), critical (10000), production (5000), scavenger (-10)" "$T/err" ||
    cl_fail "unknown class message: $(cat "$T/err")"

# A restart with the same config keeps every job's priority.
kill -TERM "$CPID"
wait "$CPID" 2>/dev/null || true
cl_forget_pid "$CPID"
cl_controller --config "$T/c.yaml"
[ "$(cl_field "$jp" priority)" = 5000 ] || cl_fail "after restart: $(cl_field "$jp" priority) $($ARB job "$jp" -o json 2>&1 | head -5)"
[ "$(cl_field "$s" state)" = pending ] || cl_fail "after restart job $s is $(cl_field "$s" state)"
echo "prioclass: ok"
