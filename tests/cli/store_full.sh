#!/bin/sh
# A store that fills up fails loudly (DESIGN.md invariant 2, docs/api.md):
# the controller's data dir is on a small tmpfs that submissions fill. The
# first commit that fails stops it serving: it exits 3 with the reason on
# stderr (for a supervisor to restart) instead of answering 503 for ever
# behind a healthy /healthz. Once there is room again, the restart recovers exactly what was
# acknowledged: every job answered 201 is there, and nothing that was not
# committed is counted (the job count is the acknowledged ones, plus at
# most the one whose answer was cut off by the exit).
# Needs root and a tmpfs mount (CI runs as root); skipped (77) otherwise.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=store_full
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
mkdir "$T/mnt"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=1m tmpfs "$T/mnt" 2>/dev/null; then
    echo "$NAME: cannot mount a tmpfs here (needs root); skipped"
    exit 77
fi
CL_CLEANUP="umount $T/mnt 2>/dev/null || umount -l $T/mnt 2>/dev/null || true"

start() { # the controller over the tmpfs
    $ARB controller --listen 127.0.0.1:0 --data-dir "$T/mnt/d" 2>>"$T/controller.log" &
    CPID=$!
    CL_PIDS="$CL_PIDS $CPID"
}
rm -f "$T/mnt/d/url"
start
cl_wait "the controller to start" 20 test -s "$T/mnt/d/url"
ARBITER_URL=$(cat "$T/mnt/d/url")
export ARBITER_URL

# 60 KB of environment per job (15 values of 4000, the most a value may
# hold): a few dozen fill a megabyte
pad=$(head -c 4000 /dev/zero | tr '\0' x)
env=""
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do env="$env${env:+, }\"PAD$i\": \"$pad\""; done
printf '{"name": "filler", "resources": {"requests": {"nvidia.com/gpu": 1}}, "command": ["true"], "env": {%s}}' \
    "$env" > "$T/job.json"
: > "$T/acked"
unknown=0
n=0
while cl_alive "$CPID"; do
    n=$((n + 1))
    [ $n -le 400 ] || cl_fail "400 submissions did not fill 1 MiB"
    cr=0
    code=$(curl -s -o "$T/reply" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        --data-binary @"$T/job.json" "$ARBITER_URL/v1/jobs") || cr=$?
    case $code:$cr in
    201:0) sed -n 's/^{"id": *\([0-9]*\).*/\1/p' "$T/reply" >> "$T/acked" ;;
    503:0 | 000:7) ;;             # refused, or no longer listening: not committed
    *) unknown=$((unknown + 1)) ;; # sent, but the answer was lost (the exit cut it off)
    esac
done
wait "$CPID" && rc=0 || rc=$?
cl_forget_pid "$CPID"
[ "$rc" = 3 ] || cl_fail "the controller exited $rc, not 3, when its store filled"
grep -q "FATAL: .*full" "$T/controller.log" || cl_fail "no reason logged: $(tail -3 "$T/controller.log")"
acked=$(wc -l < "$T/acked")
[ "$acked" -gt 0 ] || cl_fail "nothing was acknowledged before the disk filled"
[ "$unknown" -le 1 ] || cl_fail "$unknown submissions got no answer"

# room again: exactly what was acknowledged comes back
mount -o remount,size=64m "$T/mnt"
rm -f "$T/mnt/d/url"
start
cl_wait "the controller to start again" 20 test -s "$T/mnt/d/url"
ARBITER_URL=$(cat "$T/mnt/d/url")
for id in $(cat "$T/acked"); do
    curl -sf "$ARBITER_URL/v1/jobs/$id" >/dev/null || cl_fail "acknowledged job $id was lost"
done
jobs=$(curl -sf "$ARBITER_URL/v1/status" | sed -n 's/.*"jobs": *\([0-9]*\).*/\1/p')
[ "$jobs" -ge "$acked" ] && [ "$jobs" -le $((acked + unknown)) ] ||
    cl_fail "$jobs jobs recovered, $acked acknowledged (+$unknown unknown)"
curl -sf "$ARBITER_URL/healthz" >/dev/null || cl_fail "not healthy after the restart"
echo "$NAME: $acked jobs acknowledged before the disk filled; the controller exited 3; all recovered"
echo "$NAME: ok"
