#!/bin/sh
# examples/elastic-trainer.sh: the shape of an elastic training task under
# Arbiter (docs/agent.md, "Grace periods and resize notices"). It reads its
# size from ARBITER_RESIZE_FILE at start and again on SIGUSR1 (a resize: a
# real trainer would re-form its process group here), and on SIGTERM writes
# a checkpoint and exits before the job's terminationGracePeriodSeconds run
# out (after that the agent sends SIGKILL).
#   arbiter submit -f examples/elastic-job.yaml
state=${CHECKPOINT_DIR:-.}/checkpoint.$ARBITER_JOB_ID
step=0
[ -s "$state" ] && step=$(cat "$state")

read_size() {
    world=$(sed -n 's/^world_size=//p' "$ARBITER_RESIZE_FILE")
    rank=$(sed -n 's/^rank=//p' "$ARBITER_RESIZE_FILE")
    gen=$(sed -n 's/^generation=//p' "$ARBITER_RESIZE_FILE")
    echo "step $step: rank $rank of $world (generation $gen)"
}
checkpoint() {
    [ "$rank" = 0 ] && echo "$step" > "$state"
    echo "step $step: checkpoint written; leaving"
    exit 0
}
trap read_size USR1
trap checkpoint TERM
read_size
while [ "$step" -lt "${STEPS:-600}" ]; do
    step=$((step + 1))
    sleep 1 # one training step
done
checkpoint
