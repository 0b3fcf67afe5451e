/*
 * platform/linux/perfhint — see platform/perfhint.h: the clamp law's
 * system call, sched_setattr on each thread with SCHED_FLAG_UTIL_CLAMP_MIN
 * and _MAX (policy and priority kept), and on Android the system's own
 * session first.
 *
 * struct sched_attr and the flags are written out here: glibc declares
 * neither (before 2.41) and musl neither; the layout is the kernel's ABI
 * (SCHED_ATTR_SIZE_VER1, 56 bytes, since Linux 5.3).
 */
#define _GNU_SOURCE
#include "platform/perfhint.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef __ANDROID__
#include <dlfcn.h>
#include <stdlib.h>
#endif

struct octo_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
    uint32_t sched_util_min, sched_util_max;
};
_Static_assert(sizeof(struct octo_sched_attr) == 56, "the kernel's SCHED_ATTR_SIZE_VER1");

#define OCTO_SCHED_FLAG_KEEP_POLICY 0x08
#define OCTO_SCHED_FLAG_KEEP_PARAMS 0x10
#define OCTO_SCHED_FLAG_UTIL_CLAMP_MIN 0x20
#define OCTO_SCHED_FLAG_UTIL_CLAMP_MAX 0x40

static int sched_clamp(void *ctx, int tid, unsigned util_min, unsigned util_max) {
    (void)ctx;
#ifdef SYS_sched_setattr
    struct octo_sched_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.sched_flags = OCTO_SCHED_FLAG_KEEP_POLICY | OCTO_SCHED_FLAG_KEEP_PARAMS | OCTO_SCHED_FLAG_UTIL_CLAMP_MIN |
                    OCTO_SCHED_FLAG_UTIL_CLAMP_MAX;
    a.sched_util_min = util_min;
    a.sched_util_max = util_max;
    return syscall(SYS_sched_setattr, tid, &a, 0) == 0 ? 0 : errno;
#else
    return (void)tid, (void)util_min, (void)util_max, ENOSYS;
#endif
}

#ifdef __ANDROID__
/* APerformanceHint (API 33), looked up in libandroid.so: the NDK's
 * <android/performance_hint.h> would tie the library to API 33 at link
 * time; looked up, one build runs everywhere and falls back to the clamps. */
typedef struct {
    void *session;
    int (*update)(void *session, int64_t target_ns);
    int (*report)(void *session, int64_t actual_ns);
    void (*close)(void *session);
} android_hint;

static int android_target(void *ctx, int64_t ns) { return ((android_hint *)ctx)->update(((android_hint *)ctx)->session, ns); }
static int android_report(void *ctx, int64_t ns) { return ((android_hint *)ctx)->report(((android_hint *)ctx)->session, ns); }
static void android_close(void *ctx) {
    android_hint *a = ctx;
    a->close(a->session);
    free(a);
}

/* The system's session, or NULL where it has none (before Android 13, or refused). */
static android_hint *android_open(const int *tids, int n_tids, int64_t target_ns) {
    void *lib = dlopen("libandroid.so", RTLD_NOW | RTLD_LOCAL); /* kept open: the session's calls live there */
    void *(*manager)(void) = lib ? (void *(*)(void))dlsym(lib, "APerformanceHint_getManager") : NULL;
    void *(*create)(void *, const int32_t *, size_t, int64_t) =
        lib ? (void *(*)(void *, const int32_t *, size_t, int64_t))dlsym(lib, "APerformanceHint_createSession") : NULL;
    android_hint *a = manager && create ? calloc(1, sizeof *a) : NULL;
    if (!a) return NULL;
    a->update = (int (*)(void *, int64_t))dlsym(lib, "APerformanceHint_updateTargetWorkDuration");
    a->report = (int (*)(void *, int64_t))dlsym(lib, "APerformanceHint_reportActualWorkDuration");
    a->close = (void (*)(void *))dlsym(lib, "APerformanceHint_closeSession");
    int32_t ids[PLAT_PERF_HINT_MAX_TIDS];
    for (int i = 0; i < n_tids; i++) ids[i] = tids[i];
    void *m = a->update && a->report && a->close ? manager() : NULL;
    a->session = m ? create(m, ids, (size_t)n_tids, target_ns) : NULL;
    if (!a->session) {
        free(a);
        return NULL;
    }
    return a;
}
#endif

int plat_thread_id(void) { return (int)syscall(SYS_gettid); }

err_code plat_perf_hint_open(const int *tids, int n_tids, int64_t target_ns, plat_perf_hint **out, err_t *err) {
#ifdef __ANDROID__
    android_hint *a = tids && n_tids > 0 && n_tids <= PLAT_PERF_HINT_MAX_TIDS && target_ns > 0
                          ? android_open(tids, n_tids, target_ns)
                          : NULL;
    if (a) {
        const plat_perf_hint_ops native = {.native_target = android_target, .native_report = android_report,
                                           .native_close = android_close, .ctx = a};
        const err_code rc = plat_perf_hint_open_with(&native, "APerformanceHint", tids, n_tids, target_ns, out, err);
        if (rc) android_close(a);
        return rc;
    }
#endif
    const plat_perf_hint_ops clamps = {.set_clamp = sched_clamp};
    return plat_perf_hint_open_with(&clamps, "utilization clamps (sched_setattr)", tids, n_tids, target_ns, out, err);
}
