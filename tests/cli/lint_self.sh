#!/bin/sh
# The lint (scripts/lint.sh) reads code, not prose: its self-test blanks the
# comments and string literals of a sample and must find exactly the calls
# that are code (a call in a comment, a string or across a block comment's
# lines is not one). The lint over the tree is CI's lint pass (`make lint`).
set -eu
SRC=$2
sh "$SRC/scripts/lint.sh" --self-test
