# tests/cli/lib/ha.sh: a real etcd cluster and several controllers for the
# HA shell tests and `make demo-ha` (sourced after lib/cluster.sh and
# cl_init; CTest registers only tests/cli/*.sh).
#
#   ha_need_etcd              exit 77 (CTest SKIP) when /usr/bin/etcd is missing
#   ha_port                   print a free loopback TCP port, reserved for this test
#                             (cl_port)
#   ha_etcd N                 start an N-member etcd cluster on free loopback ports, each
#                             with its data dir under $T/etcd; sets HA_ETCD ("h:p,h:p,...");
#                             member I's pid in $T/pid.eI, its client URL in $T/url.eI,
#                             its output in $T/eI.log (cl_fail shows it)
#   ha_controller NAME [ARGS] start `arbiter controller --store etcd://$HA_ETCD --name NAME`
#                             on a free port; its URL in $T/url.NAME, pid in $T/pid.NAME,
#                             log in $T/NAME.log
#   ha_leader                 print the NAME of the controller serving as leader (or fail)
#   ha_lb NAMES...            start `arbiter lb` in front of the controllers, sending to the
#                             one that serves as leader (health check GET
#                             /v1/leader?require=self); sets HA_LB (its URL)
#
# etcd members are stopped after the controllers (CL_CLEANUP), so that a
# controller stopping with SIGTERM can still resign and flush.

HA_TTL=${HA_TTL:-5}

ha_need_etcd() {
    if [ ! -x /usr/bin/etcd ]; then
        echo "${NAME:-test}: SKIP: /usr/bin/etcd is not installed (scripts/deps.sh installs etcd-server)"
        exit 77
    fi
}

ha_port() {
    cl_port
}

# Up and answering, or dead (ha_etcd then says so at once instead of
# waiting out the deadline).
ha_member_ready() {
    ! cl_alive "$1" || curl -sf -m 2 -X POST "$2/v3/kv/range" -d '{"key":"AA=="}'
}

ha_etcd() {
    ha_n=$1
    mkdir -p "$T/etcd"
    cluster=""
    HA_ETCD=""
    ha_i=1
    while [ "$ha_i" -le "$ha_n" ]; do
        eval "HA_CP$ha_i=$(ha_port)"
        eval "HA_PP$ha_i=$(ha_port)"
        eval "cluster=\"\${cluster:+\$cluster,}e$ha_i=http://127.0.0.1:\$HA_PP$ha_i\""
        eval "HA_ETCD=\"\${HA_ETCD:+\$HA_ETCD,}127.0.0.1:\$HA_CP$ha_i\""
        ha_i=$((ha_i + 1))
    done
    ha_i=1
    while [ "$ha_i" -le "$ha_n" ]; do
        eval "cp=\$HA_CP$ha_i pp=\$HA_PP$ha_i"
        /usr/bin/etcd --name "e$ha_i" --data-dir "$T/etcd/e$ha_i" \
            --listen-client-urls "http://127.0.0.1:$cp" --advertise-client-urls "http://127.0.0.1:$cp" \
            --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
            --initial-cluster "$cluster" --initial-cluster-state new \
            --initial-cluster-token "arb-$$-$NAME" --max-txn-ops 4096 \
            --auto-compaction-mode periodic --auto-compaction-retention 1h \
            --logger zap --log-level warn >"$T/e$ha_i.log" 2>&1 &
        echo $! >"$T/pid.e$ha_i"
        echo "http://127.0.0.1:$cp" >"$T/url.e$ha_i"
        HA_EPIDS="${HA_EPIDS:-} $!"
        ha_i=$((ha_i + 1))
    done
    CL_CLEANUP="ha_stop_etcd"
    ha_i=1
    while [ "$ha_i" -le "$ha_n" ]; do
        cl_wait "etcd member e$ha_i" 20 ha_member_ready "$(cat "$T/pid.e$ha_i")" "$(cat "$T/url.e$ha_i")"
        cl_alive "$(cat "$T/pid.e$ha_i")" || cl_fail "etcd member e$ha_i exited (its log, e$ha_i.log, is below)"
        ha_i=$((ha_i + 1))
    done
}

ha_stop_etcd() {
    for p in ${HA_EPIDS:-}; do kill -TERM "$p" 2>/dev/null || true; done
    for p in ${HA_EPIDS:-}; do wait "$p" 2>/dev/null || true; done
}

ha_controller() {
    name=$1
    shift
    port=$(ha_port)
    $ARB controller --listen "127.0.0.1:$port" --store "etcd://$HA_ETCD" --name "$name" \
        --lease-ttl "$HA_TTL" --max-txn-ops 4096 "$@" 2>>"$T/$name.log" &
    echo $! >"$T/pid.$name"
    CL_PIDS="$CL_PIDS $!"
    echo "http://127.0.0.1:$port" >"$T/url.$name"
    cl_wait "controller $name" 20 curl -sf "http://127.0.0.1:$port/healthz"
}

# The controller that serves as leader: its name on stdout, else status 1.
ha_leader() {
    for f in "$T"/url.c*; do
        u=$(cat "$f")
        if curl -sf -m 1 "$u/v1/leader?require=self" >/dev/null 2>&1; then
            basename "$f" | sed 's/^url\.//'
            return 0
        fi
    done
    return 1
}

ha_lb() {
    args=""
    for c in "$@"; do args="$args --backend $(sed 's|http://||' "$T/url.$c")"; done
    port=$(ha_port)
    # shellcheck disable=SC2086
    $ARB lb --listen "127.0.0.1:$port" $args --health-path '/v1/leader?require=self' \
        --health-interval 100 --health-timeout 500 --rise 1 --fall 1 --slow-start 0 \
        --eject-after 1 --eject-base 200 --eject-max 500 2>>"$T/lb.log" &
    CL_PIDS="$CL_PIDS $!"
    HA_LB="http://127.0.0.1:$port"
    cl_wait "the lb to reach the leader" 20 curl -sf "$HA_LB/v1/leader?require=self"
}

ha_now_ms() {
    echo $(( $(date +%s%N) / 1000000 ))
}
