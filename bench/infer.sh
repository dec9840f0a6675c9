#!/bin/sh
# bench/infer.sh ARBITER: `arbiter bench infer`, the three workloads, JSON
# lines on stdout: shared-prefix with HAProxy (roundrobin, leastconn) and
# every arbiter lb policy; no-prefix and mixed with the baselines that matter
# there (least-conn, HAProxy leastconn, round robin) beside kv and inference.
# Needs Debian's haproxy: as root it installs it. Knobs (environment):
# WORKLOADS ("shared-prefix no-prefix mixed"), ARGS (passed on, e.g.
# "--rates 20,30 --duration 8").
set -eu
ARB=$1
if ! command -v haproxy >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "bench/infer.sh: missing haproxy; run: sudo apt-get install -y haproxy" >&2
        exit 1
    fi
    echo "bench/infer.sh: installing haproxy" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || true
    apt-get install -y -qq --no-install-recommends haproxy >&2
fi
for wl in ${WORKLOADS:-shared-prefix no-prefix mixed}; do
    case $wl in
    shared-prefix) pols="" ;;
    *) pols="--policies haproxy-roundrobin,haproxy-leastconn,round-robin,least-conn,kv,inference" ;;
    esac
    # shellcheck disable=SC2086
    "$ARB" bench infer --workload "$wl" $pols ${ARGS:-} -o json
done
