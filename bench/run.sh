#!/bin/sh
# bench/run.sh ARBITER: run every benchmark; one JSON object per line on stdout.
#  1. placement at the target size (5,000 nodes, 100,000 jobs, default profile),
#     then the same 100,000 decisions under a backlog of 1,000,000 queued jobs
#     (--decisions: the rest stay queued; flat in the queue: cpu_ns_per_decision_tenths
#     alike; decisions differ a little, since FGD weighs the queued jobs' shapes);
#  2. node classes vs a full scan of every node, side by side on the same cluster and
#     job stream (pack profile, 5,000 jobs, so the full scan stays short);
#  3. one scheduling cycle over 10,000 queued jobs on 1,000 nodes (priority order);
#  4. elastic jobs: one cycle growing 2,000 of them, one preempting for 100 jobs (shrinks);
#  5. a live controller under 5,000 emulated agents (arbiter bench agents, 30 s);
#  6. a controller restart over 100,000 stored jobs, a tenth pending (arbiter bench recover:
#     recover_s from exec to serving, rss_mb_before empty, rss_mb_after recovered);
#  7. trivial jobs end to end (arbiter bench e2e): a controller and 10 real agents of 8 fake
#     GPUs each on loopback, 1,000 jobs of `true` from 8 clients (the issue's figure is
#     --jobs 5000); completed_per_s and controller_cpu_ms_per_job;
#  8. submissions against a growing backlog (arbiter bench backlog: its own controller,
#     SQLite, no agents, so every job stays pending): submits/s per chunk of 10,000,
#     20,000 jobs here (BACKLOG_JOBS; the figure is --jobs 100000);
#  9. the simulator's events mode, overloaded (docs/sim.md): 30,000 Poisson arrivals at
#     20/s, a priority cycle at every event, through the core's pending-job index
#     (place_s: CPU seconds, run_s: wall; about 8 s here, 270 s before the index);
# 10. reading one job spec, the body of 7. (arbiter bench spec): ns of CPU per read for
#     the JSON check, the YAML document and the whole spec reader, and per whole
#     submission into a controller's state without HTTP (issue 20).
set -eu
ARB=$1
D=$(dirname "$0")/../../shared/traces/openb
$ARB bench sched --nodes 5000 --jobs 100000 --seed 1 -o json
$ARB bench sched --nodes 5000 --jobs 1000000 --decisions 100000 --seed 1 -o json
$ARB bench sched --nodes 5000 --jobs 5000 --seed 2 --policy pack -o json
$ARB bench sched --nodes 5000 --jobs 5000 --seed 2 --policy pack --full-scan -o json
$ARB bench cycle --nodes 1000 --jobs 10000 --seed 3 --queue priority -o json
$ARB bench elastic --nodes 1000 --jobs 2000 --preemptors 100 -o json
$ARB bench agents --nodes 5000 --seconds 30 -o json
$ARB bench recover --jobs 100000 -o json
$ARB bench e2e --agents 10 --jobs 1000 -o json
$ARB bench backlog --jobs "${BACKLOG_JOBS:-20000}" -o json
$ARB bench spec -o json
if [ -d "$D" ]; then
    $ARB sim --mode events --nodes "$D/openb_node_list_gpu_node.csv" \
        --pods "$D/openb_pod_list_default.csv" --policy fgd --queue priority \
        --arrivals poisson:20 --durations "$D/openb_pod_list_default.csv" --tasks 30000 \
        --jobs 1 -o json | sed 's/,"series":.*/}/'
fi
