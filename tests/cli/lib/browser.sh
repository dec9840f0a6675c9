# tests/cli/lib/browser.sh: a real browser for the console's tests (sourced
# after lib/cluster.sh and cl_init): Debian's chromium, driven through
# chromium-driver's W3C WebDriver endpoint by arb_wd (tests/webdriver/wd.c).
#
#   br_need                  exit 77 (skipped) when chromium or chromedriver is missing
#   br_start [W H]           start chromedriver on a free port and a headless
#                            browser with a fresh profile in $T; sets WD (arb_wd) and
#                            BR (the session URL); both are stopped by cl_cleanup
#   br_stop                  close the browser (its session) now
#   br_js SCRIPT [ARG]...    run SCRIPT in the page, print its value
#   br_wait WHAT SECS SCRIPT [ARG]...
#                            wait until SCRIPT returns a truthy value (printed), else fail
#   br_try SECS SCRIPT [ARG]...
#                            the same, silent: exit status 0 or 1 (then compare and say why)
#   br_log                   the console log since the last call, appended to $T/console.log
#   br_shot NAME             a screenshot, kept as a test artefact:
#                            $ARB_ARTIFACTS (default: BUILD/artifacts)/NAME.png
#
# Nothing leaves this machine: the browser starts with every background
# fetch off, and pages come from the controller on 127.0.0.1.

br_need() {
    for b in chromedriver /usr/bin/chromium; do
        command -v "$b" >/dev/null 2>&1 || {
            echo "${NAME:-test}: skipped: $b is missing (scripts/deps.sh installs chromium chromium-driver)"
            exit 77
        }
    done
}

br_start() {
    WD=$(dirname "$ARB")/tests/arb_wd
    [ -x "$WD" ] || cl_fail "no $WD (build the tests)"
    chromedriver --port=0 > "$T/chromedriver.log" 2>&1 &
    CL_PIDS="$CL_PIDS $!"
    cl_wait "chromedriver to start" 30 grep -q "started successfully on port" "$T/chromedriver.log"
    port=$(sed -n 's/.*started successfully on port \([0-9]*\).*/\1/p' "$T/chromedriver.log")
    "$WD" "http://127.0.0.1:$port" new "$T/chrome-profile" "${1:-1400}" "${2:-900}" > "$T/session" ||
        cl_fail "could not start chromium through chromedriver: $(tail -5 "$T/chromedriver.log")"
    BR=$(sed -n 1p "$T/session")
    # The browser is stopped by its pid with the rest (cl_cleanup), and its
    # session closed first when the test ends normally (br_stop).
    bpid=$(sed -n 2p "$T/session")
    [ "${bpid:-0}" -gt 0 ] && CL_PIDS="$CL_PIDS $bpid"
}

br_stop() {
    "$WD" "$BR" quit >/dev/null 2>&1 || true
}

br_js() {
    "$WD" "$BR" js "$@"
}

br_wait() {
    what=$1 secs=$2
    shift 2
    "$WD" "$BR" wait "$secs" "$@" 2>>"$T/wd.err" || cl_fail "timed out after ${secs}s waiting for $what: $(tail -1 "$T/wd.err")"
}

br_try() { # br_try SECS SCRIPT [ARG]...: like br_wait, but only the exit status (0, 1)
    "$WD" "$BR" wait "$@" >/dev/null 2>&1
}

br_log() {
    "$WD" "$BR" log | tee -a "$T/console.log"
}

br_shot() {
    dir=${ARB_ARTIFACTS:-$(dirname "$ARB")/artifacts}
    mkdir -p "$dir"
    "$WD" "$BR" shot "$dir/$1.png" || cl_fail "screenshot $1 failed"
    head -c 8 "$dir/$1.png" | od -An -c | grep -q 'P   N   G' || cl_fail "$dir/$1.png is not a PNG"
    echo "$NAME: screenshot $dir/$1.png"
}
