#!/bin/sh
# bench/conns.sh ARBITER ARB_HOSTILE [CONNS] [SECONDS]: the controller serving
# CONNS (default 10,000) keep-alive agent connections at once, each a node
# reporting every 5 s (arb_hostile agents: node ka-I registers, then
# heartbeats), for SECONDS (default 40), optionally beside a slowloris of
# 2,000 connections (SLOWLORIS=1). One JSON line: the agents' figures
# (reported, ok, failed, round-trip p50/p99/max ms), the controller's
# threads, open descriptors and resident memory three quarters in, its CPU time per
# wall second, and the load average before and after (the machine is shared).
# Source addresses 127.0.0.2.. spread the agents over 50 addresses (an
# address holds at most 256 connections by default).
set -eu
ARB=$1
HOS=$2
N=${3:-10000}
S=${4:-40}
T=$(mktemp -d /tmp/arb_bench_conns.XXXXXX)
CPID=""
trap '[ -n "$CPID" ] && kill "$CPID" 2>/dev/null; wait "$CPID" 2>/dev/null; rm -rf "$T"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
$ARB controller --listen 127.0.0.1:0 --data-dir "$T/d" --max-conns $((N + 4000)) 2>"$T/c.log" &
CPID=$!
i=0
while [ ! -s "$T/d/url" ]; do
    i=$((i + 1)); [ $i -lt 200 ] || { cat "$T/c.log" >&2; exit 1; }
    sleep 0.1
done
HP=$(sed 's|http://||' "$T/d/url")
if [ "${SLOWLORIS:-0}" = 1 ]; then
    "$HOS" slowloris --to "$HP" --conns 2000 --from 127.0.0.200:20 --for "$S" >"$T/slow.json" &
    SLOW=$!
fi
ticks() { awk '{print $14 + $15}' "/proc/$CPID/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
( sleep $((S * 3 / 4)); ls "/proc/$CPID/fd" | wc -l > "$T/fds"
  awk '/^Threads:/ {print $2}' "/proc/$CPID/status" > "$T/thr"
  awk '/^VmRSS:/ {print $2}' "/proc/$CPID/status" > "$T/rss" ) &
SAMPLER=$!
"$HOS" agents --to "$HP" --conns "$N" --from 127.0.0.2:50 --every 5000 --for "$S" >"$T/agents.json"
t1=$(ticks)
wait "$SAMPLER" 2>/dev/null || true
[ -n "${SLOW:-}" ] && wait "$SLOW" 2>/dev/null || true
threads=$(cat "$T/thr") rss=$(cat "$T/rss") fds=$(cat "$T/fds")
cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$S" 'BEGIN {printf "%.2f", (b - a) / hz / s}')
printf '{"bench": "conns", "agents": %s, "controller": {"threads": %s, "fds": %s, "rss_kib": %s, "cpu_per_s": %s}, "slowloris": %s, "load_before": "%s", "load_after": "%s"}\n' \
    "$(cat "$T/agents.json")" "$threads" "$fds" "$rss" "$cpu" \
    "$([ -s "$T/slow.json" ] && cat "$T/slow.json" || echo null)" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)"
