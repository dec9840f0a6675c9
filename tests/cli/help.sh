#!/bin/sh
# The binary dispatches verbs from its table and rejects unknown ones.
set -eu
ARB=$1
$ARB help | grep -q "usage: arbiter VERB"
$ARB version | grep -q "^arbiter [0-9]"
if $ARB no-such-verb 2>/tmp/arb_help_err.$$; then echo "unknown verb accepted"; exit 1; fi
grep -q "unknown verb 'no-such-verb'" /tmp/arb_help_err.$$
rm -f /tmp/arb_help_err.$$
echo "help: ok"
