#!/bin/sh
# bench/run.sh ARBITER: run every benchmark; one JSON object per line on stdout.
#  1. the scheduler at the target size (5,000 nodes, 100,000 jobs);
#  2. node classes vs a full scan of every node, side by side on the same
#     cluster and job stream (10,000 jobs, so the full scan stays short).
set -eu
ARB=$1
$ARB bench sched --nodes 5000 --jobs 100000 --seed 1 -o json
$ARB bench sched --nodes 5000 --jobs 10000 --seed 2 -o json
$ARB bench sched --nodes 5000 --jobs 10000 --seed 2 --full-scan -o json
