#!/bin/sh
# examples/demo-ha.sh ARBITER: `make demo-ha`: a controller failover, live.
#
#   1. a real 3-member etcd cluster on loopback ports (Debian's etcd 3.4);
#   2. three controllers c1 c2 c3 over it: one wins the leader lease, the
#      others follow (GET /v1/leader on each);
#   3. three agents with 4 fake GPUs each, started with
#      --controller c1,c2,c3, and the CLI with ARBITER_URL=c1,c2,c3: they
#      find the leader themselves (a follower answers 307 to it);
#   4. two long training jobs run, and a client keeps submitting;
#   5. kill -9 of the leader; a follower takes over when the lease runs out,
#      and the agents and the CLI move to it by themselves; the timeline of
#      the failover, merged from every controller's log;
#   6. what survived: every acknowledged job, the long tasks (same pids,
#      not restarted), the allocation check.
# Everything it starts is stopped on exit, and its files removed.
set -eu
ARB=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
NAME=demo-ha
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/ha.sh"
BOLD=$(printf '\033[1m') PLAIN=$(printf '\033[0m')
[ -t 1 ] || { BOLD=""; PLAIN=""; }
act() { printf '\n%s==== %s%s\n\n' "$BOLD" "$*" "$PLAIN"; }
stamp() { # a timeline line in the controllers' format
    printf '%s demo: %s\n' "$(date -u +%H:%M:%S.%3N)" "$*" >> "$T/timeline"
    printf '%s demo: %s\n' "$(date -u +%H:%M:%S.%3N)" "$*"
}
if [ ! -x /usr/bin/etcd ]; then
    echo "demo-ha: /usr/bin/etcd is missing; run scripts/deps.sh as root (it installs etcd-server)" >&2
    exit 1
fi
cl_init
chmod 755 "$T"

act "1. a 3-member etcd cluster on loopback"
ha_etcd 3
echo "etcd members: $HA_ETCD"

act "2. three controllers over it: one leads, two follow"
for c in c1 c2 c3; do ha_controller "$c"; done
cl_wait "a leader" 15 ha_leader
for c in c1 c2 c3; do
    printf '%s  GET /v1/leader -> %s\n' "$c" "$(curl -s "$(cat "$T/url.$c")/v1/leader")"
done

act "3. three agents and the CLI, each given every controller's URL"
ALL=$(cat "$T/url.c1"),$(cat "$T/url.c2"),$(cat "$T/url.c3")
ARBITER_URL=$ALL
CL_AGENT_URL=$ALL
export ARBITER_URL
echo "ARBITER_URL=$ARBITER_URL"
echo "arbiter agent --controller $ALL ..."
for n in n1 n2 n3; do CL_GPUS=4:H100 cl_agent "$n"; done
for n in n1 n2 n3; do cl_wait "node $n" 15 cl_node_ready "$n"; done
$ARB nodes

act "4. two long training jobs, and a client submitting all the time"
cat > "$T/train.sh" <<'EOT'
#!/bin/sh
echo $$ >> "$1/starts.$ARBITER_JOB_ID"
exec sleep 600
EOT
chmod 755 "$T/train.sh"
L1=$($ARB submit --gpus 4 --name train-a -- "$T/train.sh" "$T")
L2=$($ARB submit --gpus 2 --name train-b -- "$T/train.sh" "$T")
cl_wait "the training jobs to run" 20 sh -c "[ -s $T/starts.$L1 ] && [ -s $T/starts.$L2 ]"
echo "job $L1 runs as pid $(cat "$T/starts.$L1"), job $L2 as pid $(cat "$T/starts.$L2")"
submitter() {
    while [ ! -f "$T/stop" ]; do
        if id=$($ARB submit --gpus 0 --cpus 1 --name small -- true 2>/dev/null); then
            echo "$(date -u +%H:%M:%S.%3N) $id" >> "$T/acked"
        fi
    done
}
submitter & S=$!
CL_PIDS="$CL_PIDS $S"
acked() { [ "$(cat "$T/acked" 2>/dev/null | wc -l)" -ge "$1" ]; }
cl_wait "submissions" 20 acked 20
$ARB queue | head -6

act "5. kill -9 the leader"
OLD=$(ha_leader)
OLD_PID=$(cat "$T/pid.$OLD")
before=$(wc -l < "$T/acked")
stamp "kill -9 $OLD (pid $OLD_PID), the leader; $before submissions acknowledged so far"
t0=$(ha_now_ms)
kill -9 "$OLD_PID"
wait "$OLD_PID" 2>/dev/null || true
cl_forget_pid "$OLD_PID"
rm "$T/url.$OLD"
cl_wait "a new leader" 30 ha_leader
NEW=$(ha_leader)
stamp "$NEW serves as leader, $(( $(ha_now_ms) - t0 )) ms after the kill (lease TTL ${HA_TTL} s)"
cl_wait "submissions through the new leader" 30 acked $((before + 10))
stamp "10 more submissions acknowledged, $(( $(ha_now_ms) - t0 )) ms after the kill (the CLI found $NEW in its list)"
# Jobs the new leader recovered: ids up to N; the first id above is its first acknowledgement.
N=$(sed -n 's/.*serving as leader.* \([0-9]*\) jobs and.*/\1/p' "$T/$NEW.log" | tail -1)
first=$(awk -v n="$N" '$2 > n { print; exit }' "$T/acked")
echo "${first%% *} demo: first submission acknowledged by $NEW: job ${first#* } (jobs 1-$N were written by $OLD)" >> "$T/timeline"
echo
echo "${BOLD}The failover, from every controller's log and this script:${PLAIN}"
# the election's lines read "arbiter controller NAME ha: TIME ...": shown as "TIME ha NAME: ..."
cat "$T"/c*.log | sed -n 's/^arbiter controller \([^ ]*\) ha: \([0-9:.]*\) /\2 ha \1: /p' |
    cat - "$T/timeline" | grep -E '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} ' | sort | uniq |
    awk -v from="$(sed -n 1p "$T/timeline" | cut -c1-12)" '$1 >= from'

act "6. what survived"
touch "$T/stop"
wait "$S" 2>/dev/null || true
total=$(wc -l < "$T/acked")
$ARB queue --all -o json > "$T/all.json"
lost=0
for id in $(cut -d' ' -f2 "$T/acked"); do
    grep -q "\"id\": $id," "$T/all.json" || lost=$((lost + 1))
done
echo "acknowledged submissions: $total, lost: $lost"
for id in "$L1" "$L2"; do
    echo "job $id: $(cl_state "$id"), started $(wc -l < "$T/starts.$id") time(s), pid $(cat "$T/starts.$id") $(kill -0 "$(cat "$T/starts.$id")" 2>/dev/null && echo still running || echo GONE)"
done
for n in n1 n2 n3; do cl_wait "node $n on $NEW" 15 cl_node_ready "$n"; done
echo "allocation check on $NEW: $(curl -s "$(cat "$T/url.$NEW")/v1/check")"
$ARB nodes
echo
echo "stopping everything this demo started (controllers, agents, etcd)"
