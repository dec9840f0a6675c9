#!/bin/sh
# docs/reference.md must be what the schema tables print (scripts/reference.sh), so the
# reference cannot drift from the parsers; and `arbiter help TOPIC` lists the fields.
set -eu
ARB=$1
SRC=$2
fail() { echo "reference: $*"; exit 1; }
sh "$SRC/scripts/reference.sh" "$ARB" | diff -u "$SRC/docs/reference.md" - >/dev/null ||
    fail "docs/reference.md is stale: run 'make reference'"
$ARB help scenario | grep -q '^| `nodes\[\].gpus.count` | int | required |' || fail "help scenario: no nodes[].gpus.count"
$ARB help spec | grep -q '^| `replicas.min` | int | required |' || fail "help spec: no replicas.min"
$ARB help config | grep -q '^| `scheduler.interval` | duration | 1s |' || fail "help config: no scheduler.interval"
$ARB help inventory | grep -q '^| `gpus\[\].uuid` | string |' || fail "help inventory: no gpus[].uuid"
# a key the GPU table has only for inventories is not a scenario's
if $ARB help scenario | grep -q 'uuid'; then fail "help scenario lists a GPU's uuid"; fi
# a key the scheduler table has only for the controller is not a scenario's
if $ARB help scenario | grep -q 'scheduler.interval'; then fail "help scenario lists scheduler.interval"; fi
$ARB help | grep -q '^  scenario ' || fail "help: topics not listed"
if $ARB help no-such-topic 2>/dev/null; then fail "an unknown topic was accepted"; fi
echo "reference: ok"
