#!/bin/sh
# The least-loaded score on a live cluster: a real controller with
# `policy: least-loaded` and two real agents that report their queue length
# (agent --queue-file, read at every report: what an inference server or
# sidecar would write). New GPU-sharing work goes to the node with the
# shorter queue; when the queues swap, so does the choice.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=cluster_load
. "$SRC/tests/cli/lib/cluster.sh"
cl_init

printf 'scheduler: {interval: 200ms, policy: least-loaded}\n' > "$T/config.yaml"
echo 9 > "$T/q1"
echo 0 > "$T/q2"
cl_controller --config "$T/config.yaml"
cl_agent n1 --queue-file "$T/q1"
cl_agent n2 --queue-file "$T/q2"
cl_wait "n1 ready" 10 cl_node_ready n1
cl_wait "n2 ready" 10 cl_node_ready n2

queue_of() { # NODE: the queue length the controller holds for it
    curl -sf "$ARBITER_URL/v1/nodes/$1" | tr -d ' \n' | sed -n 's/.*"queue_length":\([0-9]*\).*/\1/p'
}
queue_is() { [ "$(queue_of "$1")" = "$2" ]; }
node_of() { $ARB job "$1" -o json | tr -d ' \n' | sed -n 's/.*"tasks":\[{[^]]*"node":"\([^"]*\)".*/\1/p'; }
share_job() {
    printf 'name: %s\nresources: {requests: {arbiter.io/gpu-share: 250m}}\ncommand: [sleep, "300"]\n' "$1" > "$T/$1.yaml"
    $ARB submit -f "$T/$1.yaml"
}

cl_wait "n1's queue length" 10 queue_is n1 9
cl_wait "n2's queue length" 10 queue_is n2 0
a=$(share_job first)
cl_wait "job $a to run" 15 cl_is "$a" running
[ "$(node_of "$a")" = n2 ] || cl_fail "job $a went to $(node_of "$a"), not n2 (the shorter queue)"

echo 0 > "$T/q1"
echo 9 > "$T/q2"
cl_wait "n1's new queue length" 10 queue_is n1 0
cl_wait "n2's new queue length" 10 queue_is n2 9
b=$(share_job second)
cl_wait "job $b to run" 15 cl_is "$b" running
[ "$(node_of "$b")" = n1 ] || cl_fail "job $b went to $(node_of "$b"), not n1 (the shorter queue now)"
curl -sf "$ARBITER_URL/v1/check" | grep -q '"ok":true' || cl_fail "allocation check"
echo "cluster_load: ok"
