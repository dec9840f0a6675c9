#!/bin/sh
# scripts/deps.sh: install the Debian packages Arbiter's build and tests need.
#
# Called by `make` and `make test`. When every package is present it does
# nothing. When some are missing it installs them with apt-get if it runs as
# root; otherwise it prints the exact command to run and exits non-zero.
set -eu

PKGS="pkg-config libcmocka-dev libfyaml-dev"
# the gates in .ci/run: formatting (make check-format), static analysis (make cppcheck).
PKGS="$PKGS clang-format cppcheck"
# the controller: store, HTTP server, JSON, HTTP client (CLI verbs, tests).
PKGS="$PKGS libsqlite3-dev libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev curl"
# TLS: certificates and the cluster CA of `arbiter init` (libmicrohttpd's TLS is GnuTLS too).
PKGS="$PKGS libgnutls28-dev"
# tests: sqlite3 edits a stopped controller's store (cluster_lamport.sh)
PKGS="$PKGS sqlite3"
# the simulator's offline bound: an LP solved with GLPK.
PKGS="$PKGS libglpk-dev"
# the agent: NUMA and PCIe locality; iproute2 for the network-cut test (ip netns).
PKGS="$PKGS libhwloc-dev iproute2"
# the scheduling live tests (tests/cli/sched_*.sh, place_live.sh) read the API's JSON with jq.
PKGS="$PKGS jq"
# high availability: the HA tests and `make demo-ha` start real etcd clusters (etcd 3.4).
PKGS="$PKGS etcd-server"
# the console's browser tests (tests/cli/ui*.sh): Debian's chromium, driven by
# chromium-driver (same source package, so the versions always match).
PKGS="$PKGS chromium chromium-driver"
# `promtool check metrics` over every daemon's /metrics (tests/cli/metrics.sh).
PKGS="$PKGS prometheus"
# clang and its runtime are needed only for `make fuzz`.
if [ "${ARB_FUZZ:-0}" = 1 ]; then
    PKGS="$PKGS clang libclang-rt-14-dev"
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/deps.sh: missing Debian packages:$missing" >&2
    echo "run: sudo apt-get install -y$missing" >&2
    exit 1
fi

echo "scripts/deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || apt-get update
apt-get install -y -qq --no-install-recommends $missing
