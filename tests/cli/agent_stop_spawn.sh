#!/bin/sh
# The agent's spawn of supervisors, and its stop with tasks running
# (issue 20; docs/agent.md "Starting tasks"). CI runs this under every
# build, ThreadSanitizer's too (scripts/tsan.sh): a spawn whose child ran in
# the agent's memory once reset the signal handlers TSan keeps there, and a
# TSan-built agent then ignored SIGTERM. A real controller and a real agent
# with 12 fake GPUs:
#   - 8 one-GPU tasks run; each is the child of a supervisor whose parent is
#     the agent, and every child of the agent is a supervisor
#     (arbiter-supervise): the agent never forks a copy of itself;
#   - 4 more are begun with their starts slowed (each task sleeps 3 s before
#     its exec: ARBITER_AGENT_START_DELAY_MS), and the agent gets SIGTERM
#     while they are starting and the 8 run: it exits within 30 s, and none
#     of its tasks (running or starting) is left.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=agent_stop_spawn
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

build=plain
grep -q __tsan_init "$ARB" 2>/dev/null && build=ThreadSanitizer
grep -q __asan_init "$ARB" 2>/dev/null && build=AddressSanitizer

cl_controller
CL_GPUS=12:H100
ARBITER_AGENT_START_DELAY_MS=3000 cl_agent n1
cl_wait "n1 ready" 30 cl_node_ready n1
APID=$(cat "$T/pid.n1")
mkdir -p "$T/marks"

submit() {
    $ARB submit --gpus 1 -- sh -c "echo \$\$ > '$T/marks/'\$ARBITER_JOB_ID; exec sleep 600"
}
for i in $(seq 1 8); do submit >/dev/null; done
eight() { [ "$(ls "$T/marks" | wc -l)" -ge 8 ]; }
cl_wait "8 tasks running" 60 eight

ppid_of() { sed 's/.*) [A-Za-z] \([0-9]*\) .*/\1/' "/proc/$1/stat"; }
for f in "$T"/marks/*; do
    p=$(cat "$f")
    sup=$(ppid_of "$p")
    [ "$(ppid_of "$sup")" = "$APID" ] ||
        cl_fail "task $p: its parent $sup is not a child of the agent $APID"
    tr '\0' '\n' < "/proc/$sup/cmdline" | grep -q '^--start$' || cl_fail "task $p: its parent $sup is not a supervisor given --start"
done
for d in /proc/[0-9]*; do
    [ "$(ppid_of "${d#/proc/}" 2>/dev/null)" = "$APID" ] || continue
    exe=$(readlink "$d/exe" 2>/dev/null || echo gone)
    case "$exe" in
    */arbiter-supervise | */arbiter | gone) ;;
    *) cl_fail "the agent has a child ${d#/proc/} that is not a supervisor: $exe" ;;
    esac
    [ "$exe" = gone ] || tr '\0' '\n' < "$d/cmdline" | grep -q '^supervise$' ||
        cl_fail "the agent's child ${d#/proc/} ($exe) is not a supervisor: $(tr '\0' ' ' < "$d/cmdline")"
done

# 4 more, their starts slowed; SIGTERM while they start and the 8 run
for i in 1 2 3 4; do submit >/dev/null; done
cl_wait "12 tasks placed on n1" 30 sh -c "[ \"\$(ls '$T/logs/n1/.arbiter' | grep -c '\\.task\$')\" -ge 12 ]"
kill -TERM "$APID"
cl_wait "the agent ($build build) to stop on SIGTERM with 12 tasks" 30 sh -c "! kill -0 $APID 2>/dev/null || grep -q '^[0-9]* (.*) Z' /proc/$APID/stat"
for f in "$T"/marks/*; do
    p=$(cat "$f")
    cl_wait "task pid $p to be gone after the agent's stop" 30 sh -c "! kill -0 $p 2>/dev/null"
done
echo "agent_stop_spawn ($build build): tasks under supervisors the agent spawned; stopped on SIGTERM with 8 running and 4 starting, none left"
