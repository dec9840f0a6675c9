#!/bin/sh
# scripts/cppcheck.sh: static analysis CI runs (.ci/run, `make cppcheck`).
# cppcheck 2.10 (Debian 12) over every C file of the tree with the warning,
# performance and portability checks, POSIX's and jansson's function models
# (scripts/cppcheck/jansson.cfg teaches it jansson's iteration macros).
# Suppressions are inline, each beside its line with the reason
# (`cppcheck-suppress ID ; why`), so none outlives the code it excuses.
# Exits non-zero on any finding.
set -eu
cd "$(dirname "$0")/.."
exec cppcheck --enable=warning,performance,portability --std=c11 --inline-suppr -q \
    --library=posix --library=scripts/cppcheck/jansson.cfg -I include -I src -D_GNU_SOURCE \
    --suppress=missingIncludeSystem --error-exitcode=1 -j "${JOBS:-2}" \
    src fuzz tests/unit tests/lbtest tests/redirect tests/mock tests/webdriver tests/pty
