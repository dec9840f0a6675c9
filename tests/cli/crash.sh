#!/bin/sh
# Invariants 1 and 2 under kill -9: a real controller is killed with
# SIGKILL, repeatedly, while three CLI clients submit jobs and one cancels
# them. After every restart, every job whose id a client printed (an
# acknowledged submission) must exist, and the allocation check (no GPU
# share held twice, usage adding up) must pass.
set -eu
ARB=$1
T=$(mktemp -d /tmp/arb_crash.XXXXXX)
PID=""
ROUNDS=${ARB_CRASH_ROUNDS:-5}
# One try per request: the restarted controller listens on a new port, so
# retrying the killed one (ARBITER_RETRY_S, 15 s by default) would only wait.
ARBITER_RETRY_S=0
export ARBITER_RETRY_S
cleanup() {
    touch "$T/stop"
    if [ -n "$PID" ]; then kill -9 "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "crash.sh: $*" >&2; tail -20 "$T/log" >&2 || true; exit 1; }

start() {
    rm -f "$T/d/url"
    $ARB controller --listen 127.0.0.1:0 --data-dir "$T/d" 2>>"$T/log" &
    PID=$!
    i=0
    while [ ! -s "$T/d/url" ]; do
        i=$((i + 1)); [ $i -gt 200 ] && fail "controller did not start"
        sleep 0.05
    done
    ARBITER_URL=$(cat "$T/d/url"); export ARBITER_URL
}

check() {
    curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' ||
        fail "allocation check failed: $(curl -s "$ARBITER_URL/v1/check")"
    curl -s "$ARBITER_URL/v1/jobs" > "$T/jobs.json"
    for f in "$T"/acked.*; do
        [ -f "$f" ] || continue
        while read -r id; do
            grep -q "\"id\":$id," "$T/jobs.json" || fail "acknowledged job $id lost"
        done < "$f"
    done
    if curl -s "$ARBITER_URL/v1/events?limit=10000" | grep -q 'allocation not restored at recovery'; then
        fail "an allocation could not be restored at recovery"
    fi
}

start
gpus='{"model": "A100", "memory": "80Gi", "nvlink": 0}'
for n in 1 2 3 4; do
    curl -sf -X POST "$ARBITER_URL/v1/nodes/n$n/report" \
        -d "{\"inventory\": {\"cpu\": 128, \"memory\": \"1Ti\",
             \"gpus\": [$gpus, $gpus, $gpus, $gpus, $gpus, $gpus, $gpus, $gpus]}}" >/dev/null
done

submitter() {
    while [ ! -f "$T/stop" ]; do
        if id=$($ARB submit --gpus "$2" --name "c$1" 2>/dev/null); then
            echo "$id" >> "$T/acked.$1"
        fi
    done
}
canceller() {
    while [ ! -f "$T/stop" ]; do
        id=$(tail -n 1 "$T/acked.1" 2>/dev/null || true)
        [ -n "$id" ] && $ARB cancel "$id" >/dev/null 2>&1 || true
        sleep 0.02
    done
}

r=0
total=0
while [ $r -lt "$ROUNDS" ]; do
    r=$((r + 1))
    rm -f "$T/stop"
    before=$(cat "$T"/acked.* 2>/dev/null | wc -l)
    submitter 1 1 & submitter 2 2 & submitter 3 1 & canceller &
    # under load: a few acknowledgements first (slow builds too), then a
    # kill at a varying moment
    i=0
    while [ "$(cat "$T"/acked.* 2>/dev/null | wc -l)" -lt $((before + 4)) ] && [ $i -lt 200 ]; do
        i=$((i + 1)); sleep 0.05
    done
    sleep 0.$((1 + r % 5))
    kill -9 "$PID"
    wait "$PID" 2>/dev/null || true
    touch "$T/stop"
    wait
    PID=""
    start
    check
done
total=$(cat "$T"/acked.* | wc -l)
[ "$total" -ge $((ROUNDS * 4)) ] || fail "only $total submissions were acknowledged: no load"
echo "crash: ok ($ROUNDS kills, $total acknowledged jobs, none lost, allocations consistent)"
