# tests/cli/lib/sched.sh: helpers for the scheduling live tests (sourced
# after cluster.sh; they read the API's JSON with jq):
#
#   sc_submit FILE|-       submit a spec (YAML); prints the job id
#   sc_state ID            the job's state
#   sc_where ID            "node:gpu,gpu node:gpu" for its tasks that hold something
#   sc_explain ID          the explain object (JSON) of job ID
#   sc_quiet SECS          wait until the event log stays unchanged SECS seconds (at most 60 s in all, times CL_WAIT_SCALE)
#   sc_settle ID           wait until job ID is placed or told it does not fit now, and quiet
#   sc_events_n TYPE ID    how many events of TYPE job ID has had
#
# Every wait is bounded polling, as in cluster.sh.

sc_submit() {
    $ARB submit -f "$1"
}

sc_state() {
    $ARB job "$1" -o json | jq -r .state
}

sc_where() {
    $ARB job "$1" -o json |
        jq -r '[.tasks[] | select(.node != null) | "\(.node):\(.gpus | map(tostring) | join(","))"] | join(" ")'
}

sc_explain() {
    $ARB explain "$1" -o json
}

sc_last_event() {
    $ARB events -o json 2>/dev/null | tail -n 1 | jq -r '.lamport // 0'
}

# (sh has no local variables: every helper's own are named sc_*)
sc_mono_ms() { # milliseconds on a monotonic clock (CLOCK_BOOTTIME, /proc/uptime)
    awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime
}

# The quiet time is measured on the clock, not counted in polls: a poll
# (arbiter and jq started) takes far longer than its 0.1 s sleep on a busy
# machine, and 20 polls were 10 s of the 2 s asked for (cli_place_live took
# 113-235 s for 18 jobs). Each poll asks only for events after the last one
# seen (--since), so none is missed and none is read twice; a failed poll
# starts the quiet time again.
sc_quiet() {
    sc_last=$(sc_last_event)
    [ -n "$sc_last" ] || sc_last=0
    sc_t0=$(sc_mono_ms)
    sc_calm_at=$sc_t0
    while [ $(($(sc_mono_ms) - sc_calm_at)) -lt $(($1 * 1000)) ]; do
        sleep 0.1
        if sc_new=$($ARB events --since "$sc_last" -o json 2>/dev/null); then
            sc_now=$(printf '%s\n' "$sc_new" | tail -n 1 | jq -r '.lamport // empty')
            if [ -n "$sc_now" ]; then sc_last=$sc_now; sc_calm_at=$(sc_mono_ms); fi
        else
            sc_calm_at=$(sc_mono_ms)
        fi
        [ $(($(sc_mono_ms) - sc_t0)) -lt $((60000 * ${CL_WAIT_SCALE:-1})) ] || cl_fail "the event log never went quiet"
    done
}

sc_settle() {
    sc_n2=0
    while :; do
        sc_st=$(sc_state "$1")
        case $sc_st in
        placed | running | succeeded | failed | cancelled | timeout) break ;;
        esac
        sc_x=$(sc_explain "$1")
        [ "$(echo "$sc_x" | jq -r '.explain.fits_now // false')" = false ] &&
            [ "$(echo "$sc_x" | jq -r '.explain.wait // ""')" != preempting ] && break
        sc_n2=$((sc_n2 + 1))
        [ $sc_n2 -lt 300 ] || cl_fail "job $1 never settled: $sc_x"
        sleep 0.1
    done
    sc_quiet 2
}

sc_events_n() {
    $ARB events -o json | jq -s "[.[] | select(.type == \"$1\" and .job == $2)] | length"
}
