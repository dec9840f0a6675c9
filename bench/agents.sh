#!/bin/sh
# bench/agents.sh ARBITER [NODES] [SECONDS]: the controller under NODES
# emulated agents; a thin wrapper over `arbiter bench agents` (see
# src/cli/bench_agents.c and docs/agent.md). One JSON object on stdout,
# progress on stderr. Defaults: 1000 nodes, 30 s.
set -eu
exec "$1" bench agents --nodes "${2:-1000}" --seconds "${3:-30}" -o json
