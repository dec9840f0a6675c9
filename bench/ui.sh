#!/bin/sh
# bench/ui.sh ARBITER SRC [RUNS]: the console's first paint at 1,000 nodes
# (8,000 GPUs, a few hundred jobs): a live controller, one emulated agent
# process playing the nodes (`arbiter agent --emulate 1000`), Debian's
# chromium through chromedriver. Each run loads /ui/ afresh and reads, from
# the page: when the full map was on screen (window.arbiterConsole.mapDrawnMs,
# after the first frame painted with every node), the first contentful paint,
# and how long GET /v1/nodes took. One JSON line: the runs, their medians and
# the load average; and where the time went: when the data was in
# (performance mark arbiter-fetched) and the DOM built (arbiter-drawn), all
# from the start of navigation. Also run by tests/cli/ui_scale.sh (which checks the map);
# `make bench-ui` runs it with 5 runs.
set -eu
ARB=$1
SRC=$2
RUNS=${3:-5}
NAME=${NAME:-bench_ui}
. "$SRC/tests/cli/lib/cluster.sh"
. "$SRC/tests/cli/lib/browser.sh"
br_need
cl_init

printf 'scheduler: {interval: 500ms}\nnodes: {lease: 30s}\n' > "$T/c.yaml"
cl_controller --config "$T/c.yaml"
$ARB agent --name emu --controller "$ARBITER_URL" --emulate 1000 --emulate-tasks timed \
    --fake-gpus 8:H100 --heartbeat 2s --log-dir "$T/logs/emu" --allow-root 2>>"$T/emu.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "1,000 nodes" 120 sh -c "curl -sf '$ARBITER_URL/v1/status' | grep -q '\"nodes\":1000[,}]'"
# Work on the map: 40 gangs of 4 nodes x 8 GPUs, 200 jobs of 1 to 4 GPUs.
for i in $(seq 40); do $ARB submit --gpus 8 --nodes 4 --name "gang$i" -- sleep 3600 >/dev/null; done
for i in $(seq 200); do $ARB submit --gpus $((1 + i % 4)) --name "job$i" -- sleep 3600 >/dev/null; done
cl_wait "the jobs placed" 120 sh -c "[ \$($ARB queue | grep -c ' pending ') -eq 0 ]"
bytes=$(curl -sf "$ARBITER_URL/v1/nodes" | wc -c)

br_start 1400 900
runs=""
for r in $(seq "$RUNS"); do
    "$WD" "$BR" go about:blank
    "$WD" "$BR" go "$ARBITER_URL/ui/"
    br_wait "the map (run $r)" 60 'return window.arbiterConsole && window.arbiterConsole.ready' >/dev/null
    one=$(br_js 'const f = performance.getEntriesByName("first-contentful-paint")[0];
        const n = performance.getEntriesByType("resource").find(e => e.name.endsWith("/v1/nodes"));
        const m = (k) => { const e = performance.getEntriesByName(k)[0]; return e ? Math.round(e.startTime) : -1; };
        return [Math.round(window.arbiterConsole.mapDrawnMs), f ? Math.round(f.startTime) : -1,
                n ? Math.round(n.duration) : -1, document.querySelectorAll("#map [data-gpu]").length,
                document.querySelectorAll("#map .node").length, m("arbiter-fetched"), m("arbiter-drawn")].join(" ")')
    runs="$runs$one
"
done
br_shot ui-1000
br_log > "$T/console.out"
errors=$(grep -c SEVERE "$T/console.out" || true)
br_stop
median() { # the median of column $1
    printf '%s' "$runs" | awk -v c="$1" 'NF { print $c }' | sort -n |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
col() { printf '%s' "$runs" | awk -v c="$1" 'NF { printf "%s%s", s, $c; s = "," }'; }
printf '{"bench":"ui_first_paint","nodes":%s,"gpus":%s,"jobs":240,"runs":%s,"map_drawn_ms":[%s],"median_map_drawn_ms":%s,"fcp_ms":[%s],"median_fcp_ms":%s,"median_nodes_fetch_ms":%s,"median_data_in_ms":%s,"median_dom_built_ms":%s,"nodes_json_bytes":%s,"console_errors":%s,"load1":%s}\n' \
    "$(median 5)" "$(median 4)" "$RUNS" "$(col 1)" "$(median 1)" "$(col 2)" "$(median 2)" "$(median 3)" \
    "$(median 6)" "$(median 7)" \
    "$bytes" "$errors" "$(cut -d' ' -f1 /proc/loadavg)"
