#!/bin/sh
# bench/ha.sh ARBITER SRC: durable submissions per second through the leader
# of three controllers over a real 3-member etcd cluster on loopback (etcd
# started with --max-txn-ops 4096, the controllers with the same), with
# `arbiter bench api` at 1, 8, 32 and 64 keep-alive clients, and the same
# against one SQLite controller for comparison. Then the failover time:
# HA_ROUNDS (default 3) times, kill -9 the leader while a client (the CLI
# with ARBITER_URL=c1,c2,c3) keeps submitting; "leader_ms" is the time from
# the kill until another controller serves as leader, "first_ack_ms" until
# the client's first submission acknowledged by it; the killed controller is
# started again (as a follower) for the next round. One JSON object per
# line, each with "store". Everything started is stopped on exit.
set -eu
ARB=$1
SRC=$2
NAME=bench_ha
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/ha.sh"
ha_need_etcd
cl_init
ha_etcd 3
for c in c1 c2 c3; do ha_controller "$c"; done
cl_wait "a leader" 15 ha_leader
run() { # run STORE URL
    for k in 1 8 32 64; do
        j=$((k * 200))
        [ "$j" -gt 4000 ] && j=4000
        ARBITER_URL=$2 $ARB bench api --clients "$k" --jobs "$j" -o json | sed "s/^{/{\"store\": \"$1\", /"
    done
}
grouping() { # how many batches (submissions and other mutations) each txn carried
    m=$(curl -s "$2/metrics")
    c=$(echo "$m" | sed -n 's/^arbiter_store_commits_total //p')
    b=$(echo "$m" | sed -n 's/^arbiter_store_batches_total //p')
    echo "{\"store\": \"$1\", \"store_commits\": $c, \"store_batches\": $b}"
}
L=$(cat "$T/url.$(ha_leader)")
run etcd-3 "$L"
grouping etcd-3 "$L"

failover() { # one round: JSON on stdout
    ARBITER_URL=$(cat "$T/url.c1"),$(cat "$T/url.c2"),$(cat "$T/url.c3")
    export ARBITER_URL
    rm -f "$T/stop" "$T/acked"
    (while [ ! -f "$T/stop" ]; do
        id=$($ARB submit --gpus 0 --cpus 1 --name f -- true 2>/dev/null) &&
            echo "$(ha_now_ms) $id" >> "$T/acked"
    done) &
    fo_sub=$!
    cl_wait "submissions" 20 test -s "$T/acked"
    fo_old=$(ha_leader)
    fo_t0=$(ha_now_ms)
    kill -9 "$(cat "$T/pid.$fo_old")"
    wait "$(cat "$T/pid.$fo_old")" 2>/dev/null || true
    cl_forget_pid "$(cat "$T/pid.$fo_old")"
    rm "$T/url.$fo_old"
    cl_wait "a new leader" 60 ha_leader
    fo_t1=$(ha_now_ms)
    fo_new=$(ha_leader)
    # The jobs the new leader recovered are 1..N; the first id above N is its first acknowledgement.
    # (cl_wait's loop counter is n: the names here are fo_*.)
    cl_wait "$fo_new's recovery line" 20 grep -q "serving as leader" "$T/$fo_new.log"
    fo_n=$(sed -n 's/.*serving as leader.* \([0-9]*\) jobs and.*/\1/p' "$T/$fo_new.log" | tail -1)
    first() { awk -v n="$fo_n" '$2 > n + 0 { print $1; exit }' "$T/acked" | grep .; }
    cl_wait "a submission acknowledged by $fo_new" 60 first
    fo_t2=$(first)
    touch "$T/stop"
    wait "$fo_sub" 2>/dev/null || true
    echo "{\"store\": \"etcd-3\", \"failover\": \"kill -9 $fo_old\", \"lease_ttl_s\": $HA_TTL, \"leader_ms\": $((fo_t1 - fo_t0)), \"first_ack_ms\": $((fo_t2 - fo_t0))}"
    # Start it again (a new port): it follows the new leader.
    ha_controller "$fo_old"
    fo_u=$(cat "$T/url.$fo_old")
    follows() { curl -sf "$fo_u/v1/leader" | grep -q "\"leader\":\"$fo_new\""; }
    cl_wait "$fo_old to follow $fo_new" 20 follows
}
i=0
while [ "$i" -lt "${HA_ROUNDS:-3}" ]; do
    failover
    i=$((i + 1))
done
cl_controller
run sqlite "$ARBITER_URL"
grouping sqlite "$ARBITER_URL"
