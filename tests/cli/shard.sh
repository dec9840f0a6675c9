#!/bin/sh
# arbiter shard: shards on nodes by consistent hashing with bounded loads;
# each node's share, what moves when one leaves or joins; usage errors.
# Args: $1 = arbiter binary, $2 = source dir.
set -u
ARB=$1
failures=0
fail() {
    echo "shard: FAIL: $*" >&2
    failures=$((failures + 1))
}
out=$("$ARB" shard --nodes a,b,c,d,e --shards 1000 --replicas 3 -o json) || fail "exit $?"
echo "$out" | grep -q '"shards":1000,"replicas":3' || fail "json head: $out"
mm=$(echo "$out" | sed -n 's/.*"max_over_mean":\([0-9.]*\).*/\1/p')
awk "BEGIN{exit !($mm <= 1.25)}" || fail "max/mean $mm over the bound 1.25"
# every node's replicas sum to 3000, and leaving moves about its own share
echo "$out" | tr '{' '\n' | sed -n 's/.*"replicas":\([0-9]*\),"share".*"leave_moves":\([0-9]*\).*/\1 \2/p' >/tmp/arb_shard.$$
sum=$(awk '{s+=$1} END{print s}' /tmp/arb_shard.$$)
[ "$sum" = 3000 ] || fail "replicas sum to $sum, not 3000"
awk '$2 < $1 || $2 > 1.5 * $1 {exit 1}' /tmp/arb_shard.$$ || fail "leave moves: $(cat /tmp/arb_shard.$$)"
rm -f /tmp/arb_shard.$$
"$ARB" shard --nodes a,b,c --shards 10 --hash-kind maglev | grep -q "if new-node joins" || fail "text"
"$ARB" shard --nodes a,b --shards 10 --replicas 3 2>/tmp/arb_shard_err.$$
[ $? -eq 2 ] && grep -q "give 1 to 2" /tmp/arb_shard_err.$$ || fail "replicas > nodes"
"$ARB" shard --shards 10 2>/dev/null
[ $? -eq 2 ] || fail "--nodes missing should exit 2"
rm -f /tmp/arb_shard_err.$$
[ $failures -eq 0 ] || exit 1
echo "shard: ok"
