#!/bin/sh
# bench/lb.sh ARBITER [ARB_LBTEST]: `arbiter lb` against HAProxy 2.6 and NGINX.
#
# Each proxy runs on one thread (HAProxy nbthread 1, NGINX worker_processes 1
# with master_process off, arbiter lb as it is) in front of the same four
# NGINX backends (one NGINX, worker_processes 1, four ports, a 6-byte body),
# driven by `wrk -t1 -c64 -d${DURATION}s --latency`, all on 127.0.0.1. Then
# again with backend 4 replaced by arb_lbtest's backend with a 20 ms delay;
# then ("tls") the same four NGINX backends over HTTPS (certificates from
# `arbiter init`; arbiter lb --backend-tls with the CA, HAProxy `ssl verify
# required ca-file`), to set beside the "equal" rows of the same run.
# One JSON object per line on stdout: requests/s, p50, p99 (ms), and
# requests per CPU-second of the proxy process (utime+stime from
# /proc/PID/stat over the run). The first line notes the machine and its
# load: on a small shared machine the proxy, wrk and the backends compete
# for the same cores, so compare rows of one run, not across runs.
#
# Needs haproxy, nginx and wrk (Debian packages); as root it installs them.
# Knobs (environment): DURATION (s, default 10), SCENARIOS ("equal slow tls"),
# PROXIES ("haproxy nginx arbiter"), POLICIES (arbiter's, default all four),
# THREADS (1: HAProxy nbthread and arbiter lb --threads; wrk -t as many;
# NGINX stays at one worker, master_process off allows no more).
set -eu
ARB=$1
LBT=${2:-$(dirname "$ARB")/tests/arb_lbtest}
DURATION=${DURATION:-10}
THREADS=${THREADS:-1}

need=""
command -v haproxy >/dev/null 2>&1 || need="$need haproxy"
command -v nginx >/dev/null 2>&1 || need="$need nginx-light"
command -v wrk >/dev/null 2>&1 || need="$need wrk"
if [ -n "$need" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "bench/lb.sh: missing:$need; run: sudo apt-get install -y$need" >&2
        exit 1
    fi
    echo "bench/lb.sh: installing$need" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || true
    # policy-rc.d keeps the packages from starting a system nginx on port 80
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d.arb && chmod +x /usr/sbin/policy-rc.d.arb
    [ -e /usr/sbin/policy-rc.d ] || cp /usr/sbin/policy-rc.d.arb /usr/sbin/policy-rc.d
    apt-get install -y -qq --no-install-recommends $need >&2
    cmp -s /usr/sbin/policy-rc.d /usr/sbin/policy-rc.d.arb && rm -f /usr/sbin/policy-rc.d
    rm -f /usr/sbin/policy-rc.d.arb
fi
[ -x "$LBT" ] || { echo "bench/lb.sh: $LBT not built (make build)" >&2; exit 1; }

TMP=$(mktemp -d)
PIDS=""
CUR=""
cleanup() {
    trap - EXIT INT TERM
    for p in $PIDS $CUR; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

BASE=$((20000 + ($$ % 2400) * 4)) # below the ephemeral range (32768-)
B1=$((BASE + 1)) B2=$((BASE + 2)) B3=$((BASE + 3)) B4=$((BASE + 4))
PX=$((BASE + 10))
T1=$((BASE + 5)) T2=$((BASE + 6)) T3=$((BASE + 7)) T4=$((BASE + 8)) # the same, over TLS
TICK=$(getconf CLK_TCK)

wait_port() {
    i=0
    until "$LBT" req --port "$1" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 100 ] && { echo "bench/lb.sh: nothing listens on $1" >&2; cat "$TMP"/*.log >&2; exit 1; }
        sleep 0.05
    done
}

# The backends: one NGINX, one worker, four ports, and the same four over TLS.
mkdir -p "$TMP/be"
"$ARB" init "$TMP/pki" --host 127.0.0.1 >/dev/null && "$ARB" init server nginx "$TMP/pki" >/dev/null ||
    { echo "bench/lb.sh: arbiter init failed" >&2; exit 1; }
CA=$TMP/pki/ca.crt
TLS="ssl; ssl_certificate $TMP/pki/server-nginx.crt; ssl_certificate_key $TMP/pki/server-nginx.key"
cat >"$TMP/be/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $TMP/be/nginx.pid;
error_log $TMP/be/error.log crit;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    client_body_temp_path $TMP/be; proxy_temp_path $TMP/be; fastcgi_temp_path $TMP/be;
    uwsgi_temp_path $TMP/be; scgi_temp_path $TMP/be;
    server { listen 127.0.0.1:$B1; location / { return 200 "hello\n"; } }
    server { listen 127.0.0.1:$B2; location / { return 200 "hello\n"; } }
    server { listen 127.0.0.1:$B3; location / { return 200 "hello\n"; } }
    server { listen 127.0.0.1:$B4; location / { return 200 "hello\n"; } }
    server { listen 127.0.0.1:$T1 $TLS; location / { return 200 "hello\n"; } }
    server { listen 127.0.0.1:$T2 $TLS; location / { return 200 "hello\n"; } }
    server { listen 127.0.0.1:$T3 $TLS; location / { return 200 "hello\n"; } }
    server { listen 127.0.0.1:$T4 $TLS; location / { return 200 "hello\n"; } }
}
CONF
nginx -p "$TMP/be" -e "$TMP/be/error.log" -c "$TMP/be/nginx.conf" &
PIDS="$PIDS $!"
for p in $B1 $B2 $B3 $B4; do wait_port $p; done

# The slow backend: 20 ms more per request.
"$LBT" backend --id slow --delay-ms 20 --port-file "$TMP/slow.port" &
PIDS="$PIDS $!"
i=0
while [ ! -s "$TMP/slow.port" ]; do i=$((i + 1)); [ $i -gt 100 ] && exit 1; sleep 0.05; done
SLOW=$(cat "$TMP/slow.port")

cpu_ticks() {
    # fields 14 and 15 of /proc/PID/stat; the command name (field 2) has no spaces here
    awk '{print $14 + $15}' "/proc/$1/stat"
}

# to_ms "1.23ms" | "850.00us" | "1.02s"
to_ms() {
    echo "$1" | awk '/us$/{sub(/us$/,""); print $1/1000; next} /ms$/{sub(/ms$/,""); print $1+0; next}
                     /s$/{sub(/s$/,""); print $1*1000; next} {print $1}'
}

# run NAME POLICY SCENARIO PID: drive the proxy on $PX, print one JSON line.
run() {
    name=$1 policy=$2 scen=$3 pid=$4
    wrk -t"$THREADS" -c64 -d1s "http://127.0.0.1:$PX/" >/dev/null 2>&1 || true # warm up
    c0=$(cpu_ticks "$pid")
    wrk -t"$THREADS" -c64 -d"${DURATION}s" --latency "http://127.0.0.1:$PX/" >"$TMP/wrk.out" 2>&1
    c1=$(cpu_ticks "$pid")
    rps=$(awk '/^Requests\/sec:/{print $2}' "$TMP/wrk.out")
    reqs=$(awk '/requests in/{print $1}' "$TMP/wrk.out")
    p50=$(to_ms "$(awk '$1=="50%"{print $2}' "$TMP/wrk.out")")
    p99=$(to_ms "$(awk '$1=="99%"{print $2}' "$TMP/wrk.out")")
    non2xx=$(awk '/Non-2xx/{print $5}' "$TMP/wrk.out")
    serr=$(awk '/Socket errors/{gsub(",",""); print $4+$6+$8+$10}' "$TMP/wrk.out")
    th=$THREADS
    [ "$name" = nginx ] && th=1
    awk -v n="$name" -v pol="$policy" -v sc="$scen" -v rps="$rps" -v reqs="$reqs" -v p50="$p50" -v th="$th" \
        -v p99="$p99" -v c="$((c1 - c0))" -v tick="$TICK" -v e1="${non2xx:-0}" -v e2="${serr:-0}" \
        'BEGIN { cpu = c / tick;
                 printf "{\"bench\":\"lb\",\"proxy\":\"%s\",\"threads\":%d,\"policy\":\"%s\",\"backends\":\"%s\",", n, th, pol, sc;
                 printf "\"rps\":%.0f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"cpu_s\":%.2f,", rps, p50, p99, cpu;
                 printf "\"req_per_cpu_s\":%.0f,\"requests\":%d,\"errors\":%d}\n", (cpu > 0 ? reqs / cpu : 0), reqs, e1 + e2 }'
}

haproxy_run() { # POLICY SCENARIO B4PORT
    s1=$B1 s2=$B2 s3=$B3 s4=$3 ssl=""
    [ "$2" = tls ] && s1=$T1 s2=$T2 s3=$T3 s4=$T4 ssl="ssl verify required ca-file $CA"
    cat >"$TMP/haproxy.cfg" <<CONF
global
    nbthread $THREADS
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    option http-keep-alive
frontend fe
    bind 127.0.0.1:$PX
    default_backend be
backend be
    balance $1
    server s1 127.0.0.1:$s1 $ssl
    server s2 127.0.0.1:$s2 $ssl
    server s3 127.0.0.1:$s3 $ssl
    server s4 127.0.0.1:$s4 $ssl
CONF
    haproxy -f "$TMP/haproxy.cfg" -db >"$TMP/haproxy.log" 2>&1 &
    p=$!
    CUR=$p
    wait_port $PX
    run haproxy "$1" "$2" $p
    kill $p
    wait $p 2>/dev/null || true
}

nginx_run() { # SCENARIO B4PORT
    mkdir -p "$TMP/px"
    cat >"$TMP/px/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $TMP/px/nginx.pid;
error_log $TMP/px/error.log crit;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path $TMP/px; proxy_temp_path $TMP/px; fastcgi_temp_path $TMP/px;
    uwsgi_temp_path $TMP/px; scgi_temp_path $TMP/px;
    upstream be {
        server 127.0.0.1:$B1; server 127.0.0.1:$B2; server 127.0.0.1:$B3; server 127.0.0.1:$2;
        keepalive 128;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$PX;
        keepalive_requests 1000000;
        location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
CONF
    nginx -p "$TMP/px" -e "$TMP/px/error.log" -c "$TMP/px/nginx.conf" &
    p=$!
    CUR=$p
    wait_port $PX
    run nginx round-robin "$1" $p
    kill $p
    wait $p 2>/dev/null || true
}

arbiter_run() { # POLICY SCENARIO B4PORT
    set -- "$1" "$2" "$3" --backend 127.0.0.1:$B1 --backend 127.0.0.1:$B2 --backend 127.0.0.1:$B3 \
        --backend 127.0.0.1:$3
    [ "$2" = tls ] && set -- "$1" "$2" "$3" --backend-tls --backend-cacert "$CA" \
        --backend 127.0.0.1:$T1 --backend 127.0.0.1:$T2 --backend 127.0.0.1:$T3 --backend 127.0.0.1:$T4
    pol=$1 scen=$2
    shift 3
    "$ARB" lb --listen 127.0.0.1:$PX --threads "$THREADS" --policy "$pol" "$@" 2>"$TMP/arb.log" &
    p=$!
    CUR=$p
    wait_port $PX
    run arbiter "$pol" "$scen" $p
    kill $p
    wait $p 2>/dev/null || true
}

printf '{"bench":"lb-machine","nproc":%s,"loadavg":"%s","haproxy":"%s","nginx":"%s","duration_s":%s}\n' \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    "$(haproxy -v 2>/dev/null | head -1 | awk '{print $3}')" \
    "$(nginx -v 2>&1 | sed 's/.*nginx\///')" "$DURATION"
for scen in ${SCENARIOS:-equal slow tls}; do
    b4=$B4
    [ $scen = slow ] && b4=$SLOW
    for px in ${PROXIES:-haproxy nginx arbiter}; do
        case $px in
        haproxy) haproxy_run roundrobin $scen $b4 && haproxy_run leastconn $scen $b4 ;;
        nginx) [ $scen = tls ] || nginx_run $scen $b4 ;; # (its TLS upstreams are not set up here)
        arbiter) for pol in ${POLICIES:-round-robin least-conn p2c feedback}; do
                arbiter_run $pol $scen $b4
            done ;;
        esac
    done
done
