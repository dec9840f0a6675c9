#!/bin/sh
# The cluster across machines, on loopback: every link TLS, every party with
# its own certificate from `arbiter init` (docs/security.md).
#   - arbiter init makes the CA, the controller's certificate (SANs), an admin
#     certificate and token; init node NAME one per agent; init user for a
#     user of team-a and for the balancer; keys 0600, nothing overwritten;
#   - plain HTTP beyond loopback is refused without --insecure-plain-http
#     (the controller with tokens; an agent's log server, below);
#   - the controller serves HTTPS with --client-cert-auth: no certificate,
#     or one of another CA, or the controller's own (not a client's), is 401;
#   - four agents (the seed's nodes: 8 GPUs in one NVLink domain) report
#     with their node certificates; the README's main job (the seed's case
#     study under fgd: four 4-GPU jobs, then the 8-GPU tensor-parallel job)
#     is submitted by the team-a user with hers; the 8-GPU job runs on one
#     node, and `arbiter logs` reads CUDA_VISIBLE_DEVICES=0..7 from that
#     node's log server over HTTPS (a ticket checked over TLS);
#   - a node's certificate cannot report as another node (403, nothing
#     applied);
#   - a service of two replicas, and `arbiter lb --service` following it
#     over TLS with the balancer's client certificate, terminating TLS on its
#     own listener with a server certificate (init server): HTTPS requests
#     reach both replicas; plain HTTP to that port gets nothing.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_tls
LBT=$(dirname "$ARB")/tests/arb_lbtest
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
P=$T/pki

# ---- arbiter init ----------------------------------------------------------------------
$ARB init "$P" --host 127.0.0.1 > "$T/init.out" || cl_fail "init: $(cat "$T/init.out")"
for n in 1 2 3 4; do $ARB init node "node-$n" "$P" >/dev/null || cl_fail "init node-$n"; done
$ARB init user alice "$P" --team team-a >/dev/null || cl_fail "init user alice"
$ARB init user balancer "$P" --team team-a >/dev/null || cl_fail "init user balancer"
$ARB init server lb "$P" >/dev/null || cl_fail "init server lb"
for k in ca controller admin node-node-1 user-alice; do
    [ "$(stat -c %a "$P/$k.key")" = 600 ] || cl_fail "$k.key is mode $(stat -c %a "$P/$k.key")"
done
[ "$(stat -c %a "$P/tokens")" = 600 ] || cl_fail "tokens is mode $(stat -c %a "$P/tokens")"
if $ARB init "$P" >/dev/null 2>"$T/err"; then cl_fail "init over an existing CA"; fi
grep -q "nothing was overwritten" "$T/err" || cl_fail "init again: $(cat "$T/err")"
if $ARB init node node-1 "$P" >/dev/null 2>"$T/err"; then cl_fail "init node twice"; fi
if $ARB init node "../x" "$P" >/dev/null 2>"$T/err"; then cl_fail "init node ../x"; fi

# ---- plain HTTP beyond loopback: refused unless said ------------------------------------
if $ARB controller --listen 0.0.0.0:0 --data-dir "$T/plain" --tokens "$P/tokens" 2>"$T/err"; then
    cl_fail "a plain-HTTP controller on 0.0.0.0 started"
fi
grep -q "without TLS.*--insecure-plain-http" "$T/err" || cl_fail "plain: $(cat "$T/err")"
$ARB controller --listen 0.0.0.0:0 --data-dir "$T/plain" --tokens "$P/tokens" \
    --insecure-plain-http 2>>"$T/plain.log" &
PLAIN=$!
CL_PIDS="$CL_PIDS $PLAIN"
cl_wait "the explicitly plain controller" 20 test -s "$T/plain/url"
kill -TERM "$PLAIN"
wait "$PLAIN" || cl_fail "the plain controller did not stop cleanly"
cl_forget_pid "$PLAIN"
if $ARB controller --listen 127.0.0.1:0 --data-dir "$T/x" --cert-file "$P/controller.crt" \
    --key-file "$P/node-node-1.key" 2>"$T/err"; then cl_fail "a key of another certificate was taken"; fi
grep -q "its key" "$T/err" || cl_fail "mismatched key: $(cat "$T/err")"

# ---- the controller: HTTPS, client certificates required ----------------------------------
printf 'scheduler: {policy: fgd, interval: 250ms}\nnodes: {lease: 3s, grace: 2s}\n' > "$T/config.yaml"
cl_controller --config "$T/config.yaml" --cert-file "$P/controller.crt" \
    --key-file "$P/controller.key" --trusted-ca-file "$P/ca.crt" --client-cert-auth
case "$ARBITER_URL" in https://127.0.0.1:*) ;; *) cl_fail "url: $ARBITER_URL" ;; esac
ARBITER_CACERT=$P/ca.crt
export ARBITER_CACERT
code() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }
[ "$(code --cacert "$P/ca.crt" "$ARBITER_URL/v1/status")" = 401 ] ||
    cl_fail "no client certificate: $(cat "$T/body")"
grep -q "client certificate signed by this cluster's CA is required" "$T/body" || cl_fail "$(cat "$T/body")"
$ARB init "$T/other" >/dev/null
[ "$(code --cacert "$P/ca.crt" --cert "$T/other/admin.crt" --key "$T/other/admin.key" \
    "$ARBITER_URL/v1/status")" = 401 ] || cl_fail "another CA's admin: $(cat "$T/body")"
[ "$(code --cacert "$P/ca.crt" --cert "$P/controller.crt" --key "$P/controller.key" \
    "$ARBITER_URL/v1/status")" = 401 ] || cl_fail "a server certificate as a client: $(cat "$T/body")"
# the CLI checks the controller: without the CA, no request goes out
if env -u ARBITER_CACERT ARBITER_CERT_FILE="$P/admin.crt" ARBITER_KEY_FILE="$P/admin.key" \
    ARBITER_RETRY_S=0 $ARB nodes >/dev/null 2>"$T/err"; then cl_fail "no CA, yet the CLI went on"; fi
grep -q "ARBITER_CACERT" "$T/err" || cl_fail "no CA: $(cat "$T/err")"

# ---- four agents, each with its node's certificate -------------------------------------------
cat > "$T/node.yaml" <<'EOF'
cpu: 128
memory: 1Ti
gpus: {count: 8, model: A100-SXM4-80G, memory: 80Gi, nvlinkDomains: 1, pcieSwitches: 4,
       numaNodes: 2}
EOF
for n in 1 2 3 4; do
    $ARB agent --name "node-$n" --controller "$ARBITER_URL" --inventory "$T/node.yaml" \
        --cacert "$P/ca.crt" --cert-file "$P/node-node-$n.crt" --key-file "$P/node-node-$n.key" \
        --log-dir "$T/logs/node-$n" --allow-root --cgroups none --heartbeat 250ms --grace 2s \
        2>>"$T/agent-node-$n.log" &
    CL_PIDS="$CL_PIDS $!"
done
admin() { ARBITER_CERT_FILE=$P/admin.crt ARBITER_KEY_FILE=$P/admin.key $ARB "$@"; }
alice() { ARBITER_CERT_FILE=$P/user-alice.crt ARBITER_KEY_FILE=$P/user-alice.key $ARB "$@"; }
four() { [ "$(admin nodes | grep -c ' Ready ')" -eq 4 ]; }
cl_wait "four nodes over TLS" 20 four
grep -q "task logs served at https://127.0.0.1:" "$T/agent-node-1.log" ||
    cl_fail "node-1's log server is not HTTPS: $(cat "$T/agent-node-1.log")"
# an agent whose log server would listen beyond loopback in clear: refused
if timeout 20 $ARB agent --name node-9 --controller "$ARBITER_URL" --fake-gpus 1 --cacert "$P/ca.crt" \
    --log-dir "$T/logs/node-9" --allow-root --cgroups none --logs-listen 0.0.0.0:0 --count 1 \
    2>"$T/err"; then cl_fail "a plain log server on 0.0.0.0 started"; fi
grep -q "without TLS.*--insecure-plain-http" "$T/err" || cl_fail "plain log server: $(cat "$T/err")"

# ---- the README's main job: the seed's case study under fgd ---------------------------------
cat > "$T/train-4gpu.yaml" <<'EOF'
name: train-4gpu
resources:
  requests: {nvidia.com/gpu: 4, cpu: 16, memory: 128Gi}
command: [sleep, "3600"]
EOF
cat > "$T/tp-8gpu.yaml" <<'EOF'
name: tp-8gpu
topology: {level: nvlink, mode: required}
resources:
  requests: {nvidia.com/gpu: 8, cpu: 32, memory: 256Gi}
command: [sh, -c, 'env | grep -E "^(CUDA_VISIBLE_DEVICES|ARBITER_NODE)=" | sort; exec sleep 3600']
EOF
placed() { admin job "$1" | grep -q 'state     \(placed\|running\)'; }
for i in 1 2 3 4; do
    id=$(alice submit -f "$T/train-4gpu.yaml") || cl_fail "submit train $i"
    cl_wait "job $id placed" 20 placed "$id" # the seed's order: each placed before the next
done
TP=$(alice submit -f "$T/tp-8gpu.yaml") || cl_fail "submit tp-8gpu"
is_running() { admin job "$1" | grep -q 'state     running'; }
cl_wait "tp-8gpu to run" 30 is_running "$TP"
node=$(admin job "$TP" -o json | tr -d ' \n' | sed -n 's/.*"tasks":\[{[^]]*"node":"\([^"]*\)".*/\1/p')
case "$node" in node-[1-4]) ;; *) cl_fail "tp-8gpu's node: '$node'" ;; esac
mkdir -p "$T/elsewhere"
has_log() { alice logs "$TP" --log-dir "$T/elsewhere" 2>/dev/null | grep -q "^CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7$"; }
cl_wait "tp-8gpu's log through its node's HTTPS log server" 20 has_log
alice logs "$TP" --log-dir "$T/elsewhere" | grep -q "^ARBITER_NODE=$node$" || cl_fail "logs: node"
[ "$(admin nodes | grep -Ec "^node-[1-4] +Ready +8/8 ")" -eq 3 ] || cl_fail "fgd packing: $(admin nodes)"

# ---- a node's certificate is its identity --------------------------------------------------
v2=$(admin nodes -o json | tr -d ' \n' | sed -n 's/.*"name":"node-2","state":"[A-Za-z]*","version":\([0-9]*\).*/\1/p')
row2=$(admin nodes | awk '$1 == "node-2" {print $2, $3}')
[ "$(code --cacert "$P/ca.crt" --cert "$P/node-node-1.crt" --key "$P/node-node-1.key" -X POST \
    -d '{"tasks": [], "inventory": {"cpu": 1, "memory": "1Gi", "gpus": []}}' \
    "$ARBITER_URL/v1/nodes/node-2/report")" = 403 ] || cl_fail "node-1 reported as node-2: $(cat "$T/body")"
grep -q "acts as node 'node-1' only" "$T/body" || cl_fail "$(cat "$T/body")"
[ "$(code --cacert "$P/ca.crt" --cert "$P/node-node-1.crt" --key "$P/node-node-1.key" \
    "$ARBITER_URL/v1/nodes/node-2/assignments")" = 403 ] || cl_fail "node-1 read node-2's assignments"
v2b=$(admin nodes -o json | tr -d ' \n' | sed -n 's/.*"name":"node-2","state":"[A-Za-z]*","version":\([0-9]*\).*/\1/p')
[ -n "$v2" ] && [ "$v2" = "$v2b" ] || cl_fail "node-2 changed: version $v2 -> $v2b"
[ "$(admin nodes | awk '$1 == "node-2" {print $2, $3}')" = "$row2" ] ||
    cl_fail "node-2 changed: $row2 -> $(admin nodes)"

# ---- a service and a balancer with its own certificate --------------------------------------
PORT0=$((20000 + $$ % 1200 * 10 + 3))
cat > "$T/web.yaml" <<EOF2
name: web
kind: service
replicas: 2
port: $PORT0
health: /healthz
resources: {requests: {nvidia.com/gpu: 1, cpu: 1, memory: 1Gi}}
command: [sh, -c, 'exec $LBT backend --id web-\$ARBITER_REPLICA --port \$PORT']
EOF2
alice submit -f "$T/web.yaml" >/dev/null || cl_fail "submit the service"
ready2() { [ "$(alice service web | awk '$1 ~ /^[0-9]+$/ && $6 == "yes"' | wc -l)" -eq 2 ]; }
cl_wait "2 ready replicas" 30 ready2
env -u ARBITER_CACERT ARBITER_CERT_FILE=$P/user-balancer.crt ARBITER_KEY_FILE=$P/user-balancer.key \
    $ARB lb --listen 127.0.0.1:0 --service web --controller "$ARBITER_URL" --ready-file "$T/lb.ready" \
    --cacert "$P/ca.crt" \
    --cert-file "$P/server-lb.crt" --key-file "$P/server-lb.key" 2>>"$T/lb.log" &
CL_PIDS="$CL_PIDS $!"
cl_wait "the balancer" 20 test -s "$T/lb.ready"
LBPORT=$(sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$T/lb.ready")
: > "$T/via-lb"
i=0
while [ $i -lt 40 ]; do
    curl -sf --cacert "$P/ca.crt" "https://127.0.0.1:$LBPORT/" >> "$T/via-lb" || cl_fail "HTTPS via the balancer"
    i=$((i + 1))
done
[ "$(grep -c '^web-[01]$' "$T/via-lb")" = 40 ] || cl_fail "via the balancer: $(sort "$T/via-lb" | uniq -c)"
for r in 0 1; do grep -q "^web-$r$" "$T/via-lb" || cl_fail "web-$r unused: $(sort "$T/via-lb" | uniq -c)"; done
if curl -sf -m 5 "http://127.0.0.1:$LBPORT/" >/dev/null 2>&1; then cl_fail "plain HTTP to the TLS listener"; fi
echo "$NAME: ok (TLS everywhere; tp-8gpu on $node; node identity held; balancer over TLS)"
