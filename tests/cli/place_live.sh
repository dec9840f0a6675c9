#!/bin/sh
# One engine: every example scenario (examples/*.yaml with nodes:) through
# `arbiter place` and through a live controller with real agents, and the
# placements compared job by job (nodes and GPUs of every task).
#
# place replays the scenario through the controller's own cycle on a
# virtual clock; --export writes the controller config, the agents'
# inventories and the job specs it used. The live run starts that
# controller, the agents one at a time in file order (so node order, and
# with it every tie, is the same), then submits the jobs in arrival order,
# each left to settle (placed, or told it does not fit now, and the event
# log quiet) before the next. Then every job must sit on the same nodes and
# GPUs as place said, and every pending job be pending in both.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=place_live
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/sched.sh"
command -v jq >/dev/null || { echo "place_live: skipped: no jq (scripts/deps.sh)"; exit 77; }
cl_init

nscen=0
for scen in "$SRC"/examples/*.yaml; do
    grep -q '^nodes:' "$scen" || continue # a job spec, not a scenario
    nscen=$((nscen + 1))
    base=$(basename "$scen" .yaml)
    W="$T/$base"
    mkdir -p "$W/exp" "$W/logs"
    $ARB place "$scen" -o json --export "$W/exp" >"$W/place.json" 2>"$W/place.err" ||
        cl_fail "$base: place failed: $(cat "$W/place.err")"

    rm -rf "$T/d"
    cl_controller --config "$W/exp/controller.yaml"
    for inv in "$W"/exp/node-*.yaml; do
        node=$(sed -n 's/^name: //p' "$inv")
        $ARB agent --name "$node" --controller "$ARBITER_URL" --inventory "$inv" \
            --log-dir "$W/logs/$node" --allow-root --cgroups none --heartbeat 250ms --grace 1s \
            2>>"$T/agent-$node.log" &
        CL_PIDS="$CL_PIDS $!"
        cl_wait "$base: node $node registered" 20 cl_node_ready "$node"
    done
    k=0
    for spec in "$W"/exp/job-*.yaml; do
        k=$((k + 1))
        id=$(sc_submit "$spec") || cl_fail "$base: submit $spec refused"
        sc_settle "$id"
    done
    # compare
    k=0
    for spec in "$W"/exp/job-*.yaml; do
        k=$((k + 1))
        name=$(sed -n 's/^name: //p' "$spec" | head -1)
        want=$(jq -r --arg n "$name" '.jobs[] | select(.name == $n) |
            [range(0; .nodes | length) as $i | "\(.nodes[$i]):\(.gpus[$i] | map(tostring) | join(","))"] | join(" ")' \
            "$W/place.json")
        wstate=$(jq -r --arg n "$name" '.jobs[] | select(.name == $n) | .state' "$W/place.json")
        got=$(sc_where "$k")
        gstate=$(sc_state "$k")
        case $gstate in placed | running) gstate=placed ;; esac
        [ "$wstate" = "$gstate" ] ||
            cl_fail "$base: job $name is $gstate live but $wstate in place ($(sc_explain "$k" | jq -r .summary))"
        [ "$want" = "$got" ] || cl_fail "$base: job $name live on [$got], place said [$want]"
    done
    echo "$NAME: $base: $k jobs, the same placements in place and live"
    for p in $CL_PIDS; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $CL_PIDS; do wait "$p" 2>/dev/null || true; done
    CL_PIDS=""
    CL_PORT=
done
[ "$nscen" -gt 0 ] || cl_fail "no example scenario found"
echo "$NAME: ok ($nscen scenarios)"
