#!/bin/sh
# The binary dispatches verbs from its table and rejects unknown ones.
set -eu
ARB=$1
$ARB help | grep -q "usage: arbiter VERB"
$ARB version | grep -q "^arbiter [0-9]"
if $ARB no-such-verb 2>/tmp/arb_help_err.$$; then echo "unknown verb accepted"; exit 1; fi
grep -q "unknown verb 'no-such-verb'" /tmp/arb_help_err.$$
rm -f /tmp/arb_help_err.$$
# every verb in the table: `VERB --help` and `help VERB` print its usage on
# stdout and exit 0 (verbs listed from `arbiter help`, so a new one is covered)
verbs=$($ARB help | sed -n '/^verbs:/,/^$/p' | awk 'NF > 1 {print $1}')
[ -n "$verbs" ] || { echo "help: no verbs listed"; exit 1; }
for v in $verbs; do
    for form in "$v --help" "help $v"; do
        # shellcheck disable=SC2086
        out=$(timeout 10 $ARB $form 2>/dev/null) || { echo "help: 'arbiter $form' exited non-zero"; exit 1; }
        echo "$out" | grep -Eq "(arbiter |usage: )$v" || { echo "help: 'arbiter $form' printed no usage: $out"; exit 1; }
    done
done
# after "--" a --help belongs to the job's command, not to the verb
if ARBITER_URL=http://127.0.0.1:1 ARBITER_RETRY_S=0 timeout 10 $ARB submit --gpus 0 -- echo --help >/dev/null 2>&1; then
    echo "help: submit -- echo --help did not try to submit"; exit 1
fi
echo "help: ok"
