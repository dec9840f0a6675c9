#!/bin/sh
# examples/demo-hybrid.sh ARBITER LBTEST: `make demo-hybrid`, a hybrid
# cluster: an inference service beside training, on one set of GPUs.
#
# A live cluster on loopback: a controller (preemption on) and two agents
# of 4 GPUs each. An inference service `chat` (1..4 replicas, autoscaled on
# the requests in flight that `arbiter lb --service chat` reports; each
# replica a tiny HTTP server on $PORT) and two training gangs that fill the
# rest. Then the load rises and falls, and the run prints a timeline from
# the controller's event log: load up, the service scales out, a training
# gang is preempted whole to place its replicas, load down, the service
# drains and scales in, the training gang comes back.
#
# Everything it starts is stopped on exit (trap), and its files removed.
set -eu
ARB=$1
LBT=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") # replicas run it from their own directory
BOLD=$(printf '\033[1m') PLAIN=$(printf '\033[0m')
[ -t 1 ] || { BOLD=""; PLAIN=""; }

T=$(mktemp -d /tmp/arbiter-hybrid.XXXXXX)
chmod 755 "$T" # tasks run as 'nobody' when the agents run as root
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
START=$(date +%s)
stamp() { printf '[t+%3ss]' $(($(date +%s) - START)); }
say() { printf '%s %s%s%s\n' "$(stamp)" "$BOLD" "$*" "$PLAIN"; }
wait_for() { # wait_for WHAT SECONDS CMD...: bounded polling
    what=$1 n=$(($2 * 10))
    shift 2
    until "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        if [ "$n" -le 0 ]; then
            echo "demo-hybrid: timed out waiting for $what" >&2
            tail -n 5 "$T"/*.log >&2
            exit 1
        fi
        sleep 0.1
    done
}

printf 'scheduler: {interval: 200ms, preemption: true}\n' > "$T/config.yaml"
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/data" --config "$T/config.yaml" \
    2>>"$T/controller.log" &
PIDS="$PIDS $!"
wait_for "the controller" 20 test -s "$T/data/url"
ARBITER_URL=$(cat "$T/data/url")
export ARBITER_URL
for n in n1 n2; do
    $ARB agent --name "$n" --controller "$ARBITER_URL" --fake-gpus 4:H100 --heartbeat 250ms \
        --log-dir "$T/logs/$n" 2>>"$T/agent-$n.log" &
    PIDS="$PIDS $!"
done
wait_for "two nodes" 20 sh -c "[ \$($ARB nodes | grep -c ' Ready ') -eq 2 ]"
say "a controller and two agents (n1, n2), 4 GPUs each: $ARBITER_URL"

# the timeline: what the controller decided, as it happens (through a FIFO,
# so both ends have pids to stop)
mkfifo "$T/events"
$ARB events --watch > "$T/events" 2>/dev/null &
PIDS="$PIDS $!"
while IFS= read -r line; do
    case "$line" in
    *" service-scale-"* | *" job-preempting "* | *" replica-draining "* | *" job-running "*train*)
        printf '%s     %s\n' "$(stamp)" "$(printf '%s' "$line" | sed 's/^ *[0-9]* *[^ ]* *//')" ;;
    esac
done < "$T/events" &
PIDS="$PIDS $!"

cat > "$T/chat.yaml" <<EOF
name: chat
kind: service
replicas: 1
minReplicas: 1
port: $((20000 + $$ % 1200 * 10))
health: /healthz
priorityClassName: high
autoscale: {maxReplicas: 4, targetInflight: 2, window: 5s, cooldown: 2s, drainTimeout: 15s}
resources: {requests: {nvidia.com/gpu: 1, cpu: 100m, memory: 1Gi}}
command: [sh, -c, 'exec $LBT backend --id chat-\$ARBITER_REPLICA --port \$PORT --delay-ms 50']
EOF
svc=$($ARB submit -f "$T/chat.yaml")
say "submitted service chat (job $svc): 1..4 replicas of 1 GPU, target 2 requests in flight each"
wait_for "chat ready" 30 sh -c "$ARB service chat | grep -q ' yes '"
a=$($ARB submit --gpus 2 --nodes 2 --priority 100 --name train-a -- sleep 3600)
b=$($ARB submit --gpus 1 --nodes 3 --priority 50 --name train-b -- sleep 3600)
say "submitted training gangs train-a (job $a: 2 x 2 GPUs, priority 100), train-b (job $b: 3 x 1 GPU, priority 50)"
wait_for "training" 30 sh -c "$ARB queue | grep -q 'train-b .* running'"
$ARB lb --listen 127.0.0.1:0 --service chat --controller "$ARBITER_URL" --policy least-conn \
    --ready-file "$T/lb.ready" 2>>"$T/lb.log" &
PIDS="$PIDS $!"
wait_for "the balancer" 30 test -s "$T/lb.ready"
LBPORT=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$T/lb.ready")
say "arbiter lb --service chat on 127.0.0.1:$LBPORT; the cluster is full:"
$ARB queue | sed 's/^/          /'

say "load: 2 clients for 4 s (about 2 in flight: 1 replica is enough)"
"$LBT" load --port "$LBPORT" --conns 2 --duration-ms 4000 > "$T/load1"
say "  $(cat "$T/load1")"
say "load up: 10 clients for 10 s"
"$LBT" load --port "$LBPORT" --conns 10 --duration-ms 10000 > "$T/load2"
say "  $(cat "$T/load2")"
say "under load:"
$ARB queue | sed 's/^/          /'
$ARB service chat | sed 's/^/          /'
say "arbiter explain $b (train-b):"
$ARB explain "$b" | sed 's/^/          /'
say "load down: no clients; the service drains and scales in after its 5 s window"
wait_for "scale in" 60 sh -c "$ARB events | grep -q 'service-scale-in .* -> 1 replicas'"
wait_for "train-b back" 60 sh -c "$ARB queue | grep -q 'train-b .* running'"
say "after:"
$ARB queue | sed 's/^/          /'
say "done; stopping everything"
