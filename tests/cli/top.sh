#!/bin/sh
# `arbiter top`: one frame with --once against a real controller and agent
# (cluster line, queues with quota and fair share, a running job on its
# node, a pending one with its reason from explain, nodes with report age,
# and no terminal escape codes); the live loop redraws and stops cleanly on
# SIGTERM; on a pty, q and Ctrl-C quit and restore the terminal; the frame
# fits the terminal and follows its resizes (SIGWINCH); the documented exit
# codes (2 usage, 3 unreachable, 1 refused).
set -eu
ARB=$1
SRC=$2
NAME=top
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

ADMIN=admin-token-0123456789
printf '%s admin ops root\n' "$ADMIN" > "$T/tokens"
chmod 600 "$T/tokens"
cat > "$T/c.yaml" <<'YAML'
queues:
  - {name: team-a, cohort: research, weight: 1, nominal: {nvidia.com/gpu: 2}}
  - {name: team-b, cohort: research, weight: 3}
YAML
cl_controller --config "$T/c.yaml" --tokens "$T/tokens"
ARBITER_TOKEN=$ADMIN
CL_GPUS=2:H100 cl_agent n1
cl_wait "n1 Ready" 20 cl_node_ready n1

run=$($ARB submit --gpus 2 --queue team-a --name trainer -- sleep 60)
cl_wait "job $run to run" 20 cl_is "$run" running
pend=$($ARB submit --gpus 2 --queue team-b --name waiter -- true)

$ARB top --once > "$T/frame" || cl_fail "top --once failed"
has() { grep -Eq "$1" "$T/frame" || cl_fail "no /$1/ in the frame:
$(cat "$T/frame")"; }
has '^arbiter top .* lamport [0-9]+  epoch 1$'
has '^cluster  nodes 1 ready, 0 not ready  \|  GPUs 2/2 allocated \(100%\)  \|  fragmentation [0-9.]+  \|  queue 1 pending, 1 running  \|  [0-9.]+ decisions/s$'
has '^  team-a +research +2 +2 +1\.00 +0\.25 +0 +1$'
has '^  team-b +research +- +0 +0\.00 +0\.75 +1 +0$'
has "^  $run +trainer +team-a +running +0 +2  n1\$"
has "^  $pend +waiter +team-b +0 +2  0/1 nodes are available: 1 insufficient GPUs"
has '^  n1 +Ready +2/2 +[0-9]+\.[0-9]s$'
if grep -q "$(printf '\033')" "$T/frame"; then cl_fail "--once printed escape codes"; fi

# The live view without a terminal: plain frames, again and again, until SIGTERM.
$ARB top --interval 100ms < /dev/null > "$T/live" 2>&1 &
TPID=$!
CL_PIDS="$CL_PIDS $TPID"
cl_wait "three frames" 20 sh -c "[ \$(grep -c '^arbiter top' '$T/live') -ge 3 ]"
kill -TERM "$TPID"
rc=0
wait "$TPID" || rc=$?
cl_forget_pid "$TPID"
[ "$rc" = 0 ] || cl_fail "top after SIGTERM: exit $rc"

# On a terminal (a pty from script(1), util-linux): the other screen and no
# cursor while it runs; q, or Ctrl-C, quits with exit 0 and puts both back.
command -v script >/dev/null || cl_fail "script(1) (util-linux, bsdutils) is missing"
for key in q ctrl-c; do
    rm -f "$T/in" "$T/pty"
    mkfifo "$T/in"
    script -qefc "$ARB top --interval 100ms" /dev/null < "$T/in" > "$T/pty" 2>&1 &
    SPID=$!
    CL_PIDS="$CL_PIDS $SPID"
    exec 3>"$T/in"
    cl_wait "two frames on the pty ($key)" 20 sh -c "[ \$(grep -c 'arbiter top' '$T/pty') -ge 2 ]"
    if [ "$key" = q ]; then printf q >&3; else printf '\003' >&3; fi
    rc=0
    wait "$SPID" || rc=$?
    exec 3>&-
    cl_forget_pid "$SPID"
    [ "$rc" = 0 ] || cl_fail "top on a pty, $key: exit $rc"
    head -c 16 "$T/pty" | grep -q "$(printf '\033')\[?1049h" || cl_fail "$key: no alternate screen"
    tail -c 20 "$T/pty" | grep -q "$(printf '\033')\[?25h$(printf '\033')\[?1049l" ||
        cl_fail "$key: the terminal was not restored: $(tail -c 40 "$T/pty" | od -c | tail -4)"
done

# Fitting the terminal (arb_pty: a pty of a given size, resized on command):
# with 21 pending jobs an 80x24 window shows every section, the title on
# top and the nodes at the bottom, the pending list cut with "... N more",
# long lines cut at 80 columns ending in '>'; resized to 40x120 (SIGWINCH)
# it draws again at once (the interval is 30 s) and shows every pending job.
for i in $(seq 20); do $ARB submit --gpus 2 --queue team-b --name "wait$i" -- true >/dev/null; done
PTY=$(dirname "$ARB")/tests/arb_pty
rm -f "$T/ctl"
mkfifo "$T/ctl"
$PTY 24 80 "$T/tty" -- $ARB top --interval 30s < "$T/ctl" 2>"$T/pty.err" &
PTPID=$!
CL_PIDS="$CL_PIDS $PTPID"
exec 4>"$T/ctl"
frames() { awk -v RS='\033\\[H\033\\[2J' '/\(q quits\)/ { n++ } END { print n + 0 }' "$T/tty"; }
has_frames() { [ "$(frames)" -ge "$1" ]; }
last_frame() { awk -v RS='\033\\[H\033\\[2J' '/\(q quits\)/ { f = $0 } END { printf "%s", f }' "$T/tty" | tr -d '\r'; }
fits() { # ROWS COLS: the last frame fits, title first, footer last, nodes shown
    last_frame > "$T/frame.tty"
    lines=$(($(wc -l < "$T/frame.tty") + 1))
    width=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$T/frame.tty")
    [ "$lines" -le "$1" ] || cl_fail "$1x$2: $lines lines: $(cat "$T/frame.tty")"
    [ "$width" -le "$2" ] || cl_fail "$1x$2: a line of $width columns: $(cat "$T/frame.tty")"
    head -1 "$T/frame.tty" | grep -q '^arbiter top ' || cl_fail "$1x$2: the title scrolled away: $(cat "$T/frame.tty")"
    tail -1 "$T/frame.tty" | grep -q '^(q quits)$' || cl_fail "$1x$2: no footer last: $(cat "$T/frame.tty")"
    grep -q '^  n1 ' "$T/frame.tty" || cl_fail "$1x$2: the nodes are cut off: $(cat "$T/frame.tty")"
}
cl_wait "a frame on the 80x24 pty" 20 has_frames 1
fits 24 80
grep -Eq '^  \.\.\. 17 more pending \(21 in all\)$' "$T/frame.tty" || cl_fail "80x24: no cut mark: $(cat "$T/frame.tty")"
[ "$(grep -c '^  [0-9]* *wait' "$T/frame.tty")" = 4 ] || cl_fail "80x24: pending rows: $(cat "$T/frame.tty")"
grep -q "^cluster .\{71\}>\$" "$T/frame.tty" || cl_fail "80x24: the cluster line is not cut with '>': $(cat "$T/frame.tty")"
echo "resize 40 120" >&4
cl_wait "a frame after the resize (SIGWINCH)" 20 has_frames 2
fits 40 120
[ "$(grep -c '^  [0-9]* *wait' "$T/frame.tty")" = 21 ] || cl_fail "40x120: pending rows: $(cat "$T/frame.tty")"
grep -q 'more pending' "$T/frame.tty" && cl_fail "40x120: cut although it fits: $(cat "$T/frame.tty")"
echo "key q" >&4
rc=0
wait "$PTPID" || rc=$?
exec 4>&-
cl_forget_pid "$PTPID"
[ "$rc" = 0 ] || cl_fail "top on arb_pty: exit $rc $(cat "$T/pty.err")"

rc=0; $ARB top --interval 2parsecs 2>/dev/null || rc=$?
[ "$rc" = 2 ] || cl_fail "bad --interval: exit $rc"
rc=0; $ARB top --sort gpus 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -q "unknown option '--sort'" "$T/err" || cl_fail "unknown flag: exit $rc, $(cat "$T/err")"
rc=0; $ARB top --once --jobs 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -q "needs a value after '--jobs'" "$T/err" || cl_fail "--jobs without a value: exit $rc, $(cat "$T/err")"
rc=0; ARBITER_TOKEN=wrong $ARB top --once >/dev/null 2>"$T/err" || rc=$?
[ "$rc" = 1 ] && grep -q 401 "$T/err" || cl_fail "bad token: exit $rc $(cat "$T/err")"
rc=0; ARBITER_URL=http://127.0.0.1:1 ARBITER_RETRY_S=0.2 $ARB top --once >/dev/null 2>&1 || rc=$?
[ "$rc" = 3 ] || cl_fail "unreachable: exit $rc"
$ARB cancel "$run" >/dev/null
echo "top: ok"
