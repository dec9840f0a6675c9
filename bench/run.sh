#!/bin/sh
# bench/run.sh ARBITER: run every benchmark; one JSON object per line on stdout.
set -eu
ARB=$1
if $ARB help bench >/dev/null 2>&1; then
    $ARB bench sched --nodes 5000 --jobs 100000 --seed 1 -o json
else
    echo '{"error":"no benchmarks built yet"}'
fi
