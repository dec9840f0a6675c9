#!/bin/sh
# Store faults fail loudly (docs/api.md, src/store/store_sqlite.c):
#   1. one controller per data dir and per port: a second controller on the
#      same dir is refused by the lock on the database file itself (there is
#      no lock file to delete), and one on another dir cannot bind the same
#      port (no SO_REUSEPORT: clients are never split between two states);
#   2. a rewound data dir: the WAL removed after a kill -9 loses committed
#      transactions; the next start refuses, naming the revisions and the
#      missing WAL, and changes nothing; --accept-rewind goes on, with an
#      event saying what was lost;
#   3. damaged records: one job record made unreadable, one with no spec;
#      the start names both keys, the recovered count is true, and the
#      damaged job's id is never handed out again.
# Args: $1 = arbiter binary, $2 = source dir.
set -eu
ARB=$1
SRC=$2
NAME=store_faults
. "$SRC/tests/cli/lib/cluster.sh"
cl_init
command -v sqlite3 >/dev/null || { echo "$NAME: no sqlite3 command; skipped"; exit 77; }

status_jobs() { curl -sf "$ARBITER_URL/v1/status" | sed -n 's/.*"jobs": *\([0-9]*\).*/\1/p'; }
stop_controller() { # SIGTERM (or -9) and wait
    kill "-${1:-TERM}" "$CPID"
    wait "$CPID" 2>/dev/null || true
    cl_forget_pid "$CPID"
}

cl_controller
for i in 1 2 3 4 5; do $ARB submit --gpus 1 --name "j$i" -- true >/dev/null; done

# 1. one controller per data dir, whatever is deleted beside the database
rm -f "$T/d/LOCK"
if $ARB controller --listen 127.0.0.1:0 --data-dir "$T/d" 2>"$T/second.log"; then
    cl_fail "a second controller opened the same data dir"
fi
grep -q "in use by another controller" "$T/second.log" || cl_fail "$(cat "$T/second.log")"
# ... and per port
if timeout 10 $ARB controller --listen "127.0.0.1:$CL_PORT" --data-dir "$T/other" \
    2>"$T/port.log"; then
    cl_fail "a second controller served the same port"
fi
grep -q "Address already in use" "$T/port.log" || cl_fail "$(cat "$T/port.log")"
[ "$(status_jobs)" = 5 ] || cl_fail "the first controller: $(status_jobs) jobs"

# 2. the WAL removed after a kill -9: the committed tail is gone
stop_controller 9
[ -s "$T/d/arbiter.db-wal" ] || cl_fail "no WAL after the kill (is the store in WAL mode?)"
rm -f "$T/d/arbiter.db-wal" "$T/d/arbiter.db-shm"
cp "$T/d/arbiter.db" "$T/db.before"
if $ARB controller --listen 127.0.0.1:0 --data-dir "$T/d" 2>"$T/rewound.log"; then
    cl_fail "a rewound data dir was served"
fi
grep -q "looks rewound: .* is at revision [0-9]*, but the marker beside it says revision [0-9]* was committed" \
    "$T/rewound.log" || cl_fail "no reason: $(cat "$T/rewound.log")"
grep -q "arbiter.db-wal) is missing" "$T/rewound.log" || cl_fail "the WAL not named: $(cat "$T/rewound.log")"
grep -q -- "--accept-rewind" "$T/rewound.log" || cl_fail "no way out named"
cmp -s "$T/d/arbiter.db" "$T/db.before" || cl_fail "the refused start changed the database"
cl_controller --accept-rewind
$ARB events | grep -q "store-rewound .*committed transactions are lost" ||
    cl_fail "no store-rewound event: $($ARB events | tail -3)"
stop_controller
cl_controller # the marker now agrees: a plain start works again
stop_controller

# 3. damaged records, named by key, not counted
rm -rf "$T/d"
cl_controller
for i in 1 2 3 4; do $ARB submit --gpus 1 --name "k$i" -- true >/dev/null; done
stop_controller
# (a job's record is in the jobs table, keyed by its number: store_sqlite.c)
sqlite3 "$T/d/arbiter.db" "UPDATE jobs SET val='{not json' WHERE id=4"
sqlite3 "$T/d/arbiter.db" "UPDATE jobs SET val='{\"id\": 2, \"state\": \"pending\"}' WHERE id=2"
cl_controller
grep -q "record 'jobs/00000000000000000004' is damaged" "$T/controller.log" ||
    cl_fail "the unreadable record not named: $(tail -5 "$T/controller.log")"
grep -q "record 'jobs/00000000000000000002' is damaged (no spec)" "$T/controller.log" ||
    cl_fail "the record without a spec not named"
grep -q "epoch [0-9]*, 2 jobs and" "$T/controller.log" || cl_fail "the count: $(tail -2 "$T/controller.log")"
[ "$(status_jobs)" = 2 ] || cl_fail "status counts $(status_jobs) jobs, 2 were recovered"
$ARB events | grep -q "store-damaged .*2 damaged store records" || cl_fail "no store-damaged event"
id=$($ARB submit --gpus 1 --name after -- true)
[ "$id" = 5 ] || cl_fail "the new job got id $id: the damaged job's id 4 must not be handed out again"
echo "$NAME: ok"
