/*
 * duration.h: the one duration grammar every parser uses (job specs,
 * scenarios, the controller config, service specs, agent and CLI flags),
 * so a value written in one place is read the same everywhere.
 *
 *   duration := SECONDS | (NUMBER UNIT)+
 *   SECONDS  := a whole number with no unit: seconds ("3600")
 *   NUMBER   := digits, optionally with a fraction ("1.5")
 *   UNIT     := ns | us | ms | s | m | h | d
 *
 * "500ms", "90s", "1h30m", "1d", "2.5h", "3600". Units may repeat and come in
 * any order (they add), as Go's time.ParseDuration and Kubernetes' durations
 * read them; a day is 24 h. No sign: nothing here is negative. The most is
 * 100 years. Slurm's own time formats ("1-02:00:00") belong to its parser
 * (src/spec/sbatch.c); `arbiter lb`'s flags that name their unit (--eject-base
 * MS) keep taking plain milliseconds.
 */
#ifndef ARB_UTIL_DURATION_H
#define ARB_UTIL_DURATION_H

#include <stdint.h>

#include "arbiter/arbiter.h"

#define ARB_DURATION_MAX_NS (100LL * 366 * 86400 * 1000000000LL)
/* The grammar in a few words, for error messages and usage text. */
#define ARB_DURATION_HELP "use e.g. 500ms, 90s, 1h30m, 1d, or whole seconds (3600)"

/* Parse s into *ns. 0, or -EINVAL (not a duration) / -ERANGE (over 100
 * years), with a message in err that quotes s and says what to write. */
int arb_duration_parse(const char *s, int64_t *ns, arb_err_t *err);

#endif
