#!/bin/sh
# bench/ha.sh ARBITER SRC: durable submissions per second through the leader
# of three controllers over a real 3-member etcd cluster on loopback (etcd
# started with --max-txn-ops 4096, the controllers with the same), with
# `arbiter bench api` at 1, 8, 32 and 64 keep-alive clients, and the same
# against one SQLite controller for comparison. One JSON object per line,
# each with "store". Everything started is stopped on exit.
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
cl_controller
run sqlite "$ARBITER_URL"
grouping sqlite "$ARBITER_URL"
