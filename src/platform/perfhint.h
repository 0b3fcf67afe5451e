/*
 * platform/perfhint — a performance-hint session (issue 38): told the
 * target duration of a unit of work (a token) and the actual duration of
 * each, the system gives the session's threads the clocks and cores that
 * keep the work on time, as Android's APerformanceHint does for frames.
 * On phones it steadies token latency: the issue cites p95 latency variance
 * cut from +-40 % to +-12 %. One session per generation, used from one
 * thread at a time (the generating one); the caller says what the target
 * is, this room only passes it on.
 *
 * Linux: utilization clamps (sched_setattr with SCHED_FLAG_UTIL_CLAMP_MIN
 * and _MAX on each thread). A clamp's util_min tells schedutil to run the
 * thread's core at least that share of its top speed (0-1024) and the
 * scheduler to place it on a core that big. The control law, run at each
 * reported duration against the target:
 *
 *   actual > target + 5 %             util_min += 128 (at most 1024), at once
 *   actual < target - 20 %, 3 times   util_min -= 64 (at least 0), then count again
 *   in between                        hold (the band is the hysteresis)
 *
 * Up fast, because a late token is what the user sees; down slowly,
 * because a boost given back too soon makes the next token late again.
 * util_max stays 1024: the hint only ever raises the floor, so it never
 * makes octo slower than the kernel would on its own. The clamps are set
 * only when util_min changes; closing sets 0 / 1024 back.
 *
 * Kernels built without CONFIG_UCLAMP_TASK answer EOPNOTSUPP (this test
 * machine's does), older ones EINVAL or ENOSYS, and a sandbox may answer
 * EPERM: the session then says "unsupported: <why>" and every call is a
 * no-op. Opening fails only on bad arguments or memory, never because the
 * system has no hint: the caller runs on unhinted, and can say why.
 *
 * Android (behind __ANDROID__, compiled only with the NDK): the system's
 * own session, APerformanceHint_createSession (API 33, looked up in
 * libandroid.so at run time so one build runs on older systems too), to
 * which the target and each duration are passed as they are; where it is
 * absent or refuses, the clamps as on Linux (an app's sched_setattr is
 * usually refused there: then "unsupported").
 *
 * The POSIX fallback's sessions say "unsupported: this build has no
 * performance hint". The clamp law is shared by both builds and takes its
 * system call through plat_perf_hint_ops, which a test replaces.
 */
#ifndef OCTO_PLATFORM_PERFHINT_H
#define OCTO_PLATFORM_PERFHINT_H

#include "core/err.h"

#include <stdbool.h>
#include <stdint.h>

#define PLAT_PERF_HINT_MAX_TIDS 64
#define PLAT_UCLAMP_MAX 1024

/* The law's constants (the table above). */
#define PLAT_PERF_HINT_UP_MARGIN_PCT 5
#define PLAT_PERF_HINT_DOWN_MARGIN_PCT 20
#define PLAT_PERF_HINT_DOWN_AFTER 3
#define PLAT_PERF_HINT_STEP_UP 128
#define PLAT_PERF_HINT_STEP_DOWN 64

typedef struct plat_perf_hint plat_perf_hint;

/* What a session calls on the system. set_clamp sets thread tid's
 * utilization clamps (0-1024 each); 0, or an errno value. The optional
 * native_* calls forward to a system's own session (Android's); NULL for a
 * clamp session. ctx is passed back to each. */
typedef struct {
    int (*set_clamp)(void *ctx, int tid, unsigned util_min, unsigned util_max);
    int (*native_target)(void *ctx, int64_t target_ns);
    int (*native_report)(void *ctx, int64_t actual_ns);
    void (*native_close)(void *ctx);
    void *ctx;
} plat_perf_hint_ops;

/* A session for the threads tids[0, n_tids) (the kernel's thread ids,
 * gettid()), with the target duration of one unit of work in ns, on this
 * build's system. ERR_INVALID_ARG (no threads, more than
 * PLAT_PERF_HINT_MAX_TIDS, a target <= 0), ERR_NOMEM; else ERR_OK with a
 * session that may say "unsupported". */
err_code plat_perf_hint_open(const int *tids, int n_tids, int64_t target_ns, plat_perf_hint **out, err_t *err);

/* The same, calling ops instead of the system: the clamp law when
 * ops->set_clamp is given (first called at open with util_min 0), else the
 * native calls; named is the status text of a supported session. For the
 * systems' implementations and the tests. An errno from set_clamp, at open
 * or later, makes the session "unsupported: utilization clamps: <why>",
 * but ESRCH, which drops that thread (it has exited) and keeps the others.
 * A native call's error is passed over: the system's session decides. */
err_code plat_perf_hint_open_with(const plat_perf_hint_ops *ops, const char *named, const int *tids, int n_tids,
                                  int64_t target_ns, plat_perf_hint **out, err_t *err);

/* A session that answers "unsupported: why" (the systems without a hint). */
err_code plat_perf_hint_open_unsupported(const char *why, plat_perf_hint **out, err_t *err);

/* The calling thread's id as a session takes it (Linux: gettid); 0 where
 * the system has none (the POSIX fallback). */
int plat_thread_id(void);

/* A new target (ns, > 0; others are ignored). */
void plat_perf_hint_update_target(plat_perf_hint *h, int64_t target_ns);
/* The actual duration of the last unit of work (ns, > 0; others are ignored). */
void plat_perf_hint_report(plat_perf_hint *h, int64_t actual_ns);
/* Gives the clamps back and frees the session (NULL: nothing). */
void plat_perf_hint_close(plat_perf_hint *h);

bool plat_perf_hint_supported(const plat_perf_hint *h);
/* What the session does: "utilization clamps (sched_setattr)", "APerformanceHint"
 * or "unsupported: <why>". */
const char *plat_perf_hint_status(const plat_perf_hint *h);
/* The util_min the clamp law has set now (0 for other sessions). */
unsigned plat_perf_hint_util_min(const plat_perf_hint *h);

#endif
