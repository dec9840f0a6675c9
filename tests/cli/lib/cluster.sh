# tests/cli/lib/cluster.sh: a live cluster on this machine for the shell
# tests (sourced, not run: CTest registers only tests/cli/*.sh).
#
#   . "$SRC/tests/cli/lib/cluster.sh"   (after ARB=$1 SRC=$2 NAME=...)
#   cl_init                  temp dir $T, an EXIT trap that stops everything started
#   cl_controller [ARGS]     start `arbiter controller` on 127.0.0.1 (a free port, or
#                            CL_PORT once known); sets ARBITER_URL, CPID
#   cl_agent NODE [ARGS]     start `arbiter agent --name NODE` against ARBITER_URL with
#                            fake GPUs (CL_GPUS, default 4:H100; none: ARGS say, e.g.
#                            --inventory), logs in $T/logs/NODE; its pid in $T/pid.NODE
#   cl_wait WHAT SECS CMD... poll CMD every 0.1 s until it succeeds, else fail
#   cl_port                  print a free loopback TCP port for a server that must be
#                            told its port before it starts (etcd): reserved for this
#                            test until it exits, so that tests running side by side
#                            (and one test's own servers) never draw the same one
#   cl_state ID              a job's state;  cl_field ID KEY  a top-level job field
#   cl_fail MSG              print MSG, the logs, and exit 1
#   cl_check_fenced PID CUT_NS HOW
#                            after node cut was cut off at CUT_NS (date +%s%N): its
#                            task PID must die (fenced, a FENCED line in its log)
#                            before the copy on node other starts ($T/start.other);
#                            prints the timings, HOW naming the cut
#   cl_witness_task [TAG]    a task command (for `submit -- sh -c "$(cl_witness_task)"`)
#                            that proves, at its own start, that no other copy of it is
#                            alive: it takes a lock on $T/TAG.witness that every copy holds
#                            while it lives (the kernel drops it with the last process),
#                            and checks that the pid of every earlier copy is gone; either
#                            failing goes to $T/TAG.overlap. Each start appends "NODE PID"
#                            to $T/TAG.starts; then its pid and start time (date +%s%N)
#                            go to $T/TAG.tpid.NODE and, last, $T/TAG.start.NODE (wait
#                            for that one: the others are written by then). TAG: w.
#   cl_check_one_copy N [TAG]  no overlap was seen and exactly N copies started
#
# Every wait is bounded polling; nothing sleeps a fixed time hoping it is
# enough. Processes are stopped by the pids recorded here, never by name.

cl_init() {
    T=$(mktemp -d "/tmp/arb_${NAME:-cl}.XXXXXX")
    CL_PIDS=""
    CL_CLEANUP=""
    trap cl_cleanup EXIT
    trap 'exit 1' INT TERM
    mkdir -p "$T/logs"
    ARBITER_TOKEN=${ARBITER_TOKEN:-}
    export ARBITER_TOKEN
}

cl_alive() { # a live process, not a zombie waiting for us
    [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null
}

# Stop everything started: SIGTERM (so a sanitizer build reports leaks at
# exit), up to 10 s, then SIGKILL. A sanitizer report in any log fails the test.
cl_cleanup() {
    rc=$?
    for p in $CL_PIDS; do kill -TERM "$p" 2>/dev/null || true; done
    n=100
    while [ $n -gt 0 ]; do
        alive=""
        for p in $CL_PIDS; do cl_alive "$p" && alive=1; done
        [ -z "$alive" ] && break
        n=$((n - 1))
        sleep 0.1
    done
    for p in $CL_PIDS; do kill -9 "$p" 2>/dev/null || true; done
    for p in $CL_PIDS; do wait "$p" 2>/dev/null || true; done
    [ -n "$CL_CLEANUP" ] && eval "$CL_CLEANUP"
    if [ -f "$T/ports" ]; then
        while read -r p; do rm -rf "$CL_PORT_DIR/$p"; done <"$T/ports"
    fi
    if grep -l "Sanitizer\|runtime error:" "$T"/*.log >/dev/null 2>&1; then
        echo "${NAME:-test}: FAIL: a sanitizer report:" >&2
        grep -h -A 30 "Sanitizer\|runtime error:" "$T"/*.log | head -60 >&2
        rc=1
    fi
    if [ "$rc" -eq 0 ] || [ -z "${ARB_KEEP:-}" ]; then rm -rf "$T"; else echo "kept $T" >&2; fi
    exit "$rc"
}

# Ports below Linux's ephemeral range (32768-60999), where connections take
# theirs. A port is reserved by creating $CL_PORT_DIR/PORT (mkdir is atomic
# across processes) holding the test's pid; one whose test is gone is taken
# over. A reserved port that something else already listens on is passed by.
CL_PORT_DIR=${TMPDIR:-/tmp}/arb-test-ports
cl_port() {
    mkdir -p "$CL_PORT_DIR"
    while :; do
        p=$(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000 + 20000))
        if ! mkdir "$CL_PORT_DIR/$p" 2>/dev/null; then
            owner=$(cat "$CL_PORT_DIR/$p/pid" 2>/dev/null || echo 0)
            # its test is alive (or still writing its pid), or another test took it over first
            [ "$owner" != 0 ] && ! kill -0 "$owner" 2>/dev/null || continue
            mv "$CL_PORT_DIR/$p" "$CL_PORT_DIR/$p.stale.$$" 2>/dev/null || continue
            rm -rf "$CL_PORT_DIR/$p.stale.$$"
            mkdir "$CL_PORT_DIR/$p" 2>/dev/null || continue
        fi
        echo $$ >"$CL_PORT_DIR/$p/pid"
        echo "$p" >>"$T/ports"
        if ss -Htan "sport = :$p" 2>/dev/null | grep -q .; then continue; fi
        echo "$p"
        return 0
    done
}

cl_fail() {
    [ -n "${ARB_DEBUG:-}" ] && sh -c "$ARB_DEBUG"
    echo "${NAME:-test}: FAIL: $*" >&2
    for f in "$T"/*.log; do
        [ -f "$f" ] || continue
        echo "---- $(basename "$f") (last 15 lines)" >&2
        tail -n 15 "$f" >&2
    done
    exit 1
}

# cl_wait WHAT SECS CMD...: until CMD succeeds, at least SECS seconds (times
# CL_WAIT_SCALE, which the sanitizer passes set: their builds run several
# times slower, so a deadline generous for the plain build is tight there).
cl_wait() {
    what=$1 secs=$(($2 * ${CL_WAIT_SCALE:-1}))
    shift 2
    n=$((secs * 10))
    while ! "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        [ "$n" -gt 0 ] || cl_fail "timed out after ${secs}s waiting for $what"
        sleep 0.1
    done
}

cl_forget_pid() {
    new=""
    for p in $CL_PIDS; do [ "$p" = "$1" ] || new="$new $p"; done
    CL_PIDS=$new
}

cl_controller() {
    rm -f "$T/d/url"
    $ARB controller --listen "${CL_HOST:-127.0.0.1}:${CL_PORT:-0}" --data-dir "$T/d" "$@" \
        2>>"$T/controller.log" &
    CPID=$!
    CL_PIDS="$CL_PIDS $CPID"
    cl_wait "the controller to start" 20 test -s "$T/d/url"
    ARBITER_URL=$(cat "$T/d/url")
    export ARBITER_URL
    CL_PORT=${ARBITER_URL##*:}
}

cl_agent() {
    node=$1
    shift
    gpus="--fake-gpus ${CL_GPUS:-4:H100}"
    [ "${CL_GPUS:-}" = none ] && gpus="" # the args say where its GPUs come from (--inventory)
    # shellcheck disable=SC2086
    $ARB agent --name "$node" --controller "${CL_AGENT_URL:-$ARBITER_URL}" $gpus \
        --log-dir "$T/logs/$node" --allow-root --cgroups none --heartbeat 250ms --grace 2s "$@" \
        2>>"$T/agent-$node.log" &
    echo $! > "$T/pid.$node"
    CL_PIDS="$CL_PIDS $!"
}

cl_state() {
    $ARB job "$1" 2>/dev/null | sed -n 's/^  state     \([a-z]*\).*/\1/p'
}

cl_is() { # cl_is ID STATE
    [ "$(cl_state "$1")" = "$2" ]
}

cl_node_ready() {
    $ARB nodes 2>/dev/null | grep -Eq "^$1 +Ready "
}

cl_field() { # a top-level field of the job's JSON: "key": value
    $ARB job "$1" -o json 2>/dev/null | sed -n "s/^  \"$2\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p"
}

# Never two live copies: the cut-off node's task dies before the other starts.
cl_check_fenced() {
    n=0
    while kill -0 "$1" 2>/dev/null; do
        n=$((n + 1)); [ $n -lt 400 ] || cl_fail "the cut-off agent did not fence its task in 20 s"
        sleep 0.02
    done
    dead_at=$(date +%s%N)
    cl_wait "the job on node other" 20 test -s "$T/start.other"
    started_at=$(cat "$T/start.other")
    [ "$started_at" -gt "$dead_at" ] ||
        cl_fail "the second copy started at $started_at, before the first died at $dead_at"
    grep -q "FENCED: no acknowledged heartbeat" "$T/agent-cut.log" || cl_fail "no FENCED line"
    echo "$NAME: $3 at 0 ms; first copy fenced at $(((dead_at - $2) / 1000000)) ms;" \
        "second copy started at $(((started_at - $2) / 1000000)) ms"
}

# The witness: what a copy sees at its own start, so the check needs no timing.
cl_witness_task() {
    w=$T/${1:-w}
    printf '%s' "exec 9>>$w.witness; flock -n 9 || echo \"\$ARBITER_NODE: the lock is held by a live copy\" >>$w.overlap; \
for f in $w.tpid.*; do [ -f \"\$f\" ] || continue; p=\$(cat \"\$f\"); \
[ -r /proc/\$p/stat ] && ! grep -q '^[0-9]* (.*) Z' /proc/\$p/stat && echo \"\$ARBITER_NODE: pid \$p of \$f is alive\" >>$w.overlap; done; \
echo \"\$ARBITER_NODE \$\$\" >> $w.starts; echo \$\$ > $w.tpid.\$ARBITER_NODE; date +%s%N > $w.start.\$ARBITER_NODE; exec sleep 300"
}

cl_check_one_copy() { # N [TAG]
    w=$T/${2:-w}
    [ ! -s "$w.overlap" ] || cl_fail "two live copies of one task: $(cat "$w.overlap")"
    [ "$(wc -l < "$w.starts")" -eq "$1" ] || cl_fail "$(wc -l < "$w.starts") starts, not $1: $(cat "$w.starts")"
}
