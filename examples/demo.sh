#!/bin/sh
# examples/demo.sh ARBITER: the main job: the seed's case study under every policy.
set -eu
ARB=$1
DIR=$(dirname "$0")
for scen in "$DIR"/seed-case.yaml "$DIR"/seed-case-16.yaml; do
    [ -f "$scen" ] || continue
    for p in spread pack fgd; do
        echo "=== $(basename "$scen") --policy $p"
        $ARB place "$scen" --policy "$p"
    done
done
