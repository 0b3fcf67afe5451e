/*
 * platform/posix — the portable fallback of every platform/ interface, for
 * a system octo has no port for yet (-DOCTO_PLATFORM=posix): only what
 * POSIX and sysconf give, and no /proc, /sys, cpu_set_t or O_TMPFILE.
 *
 * Its answers, which the tests assert in this build: peak RSS only
 * (getrusage; RSS, exact RSS and PSS 0),
 * free memory from sysconf(_SC_AVPHYS_PAGES) where the system has it (the
 * pages free now, which leaves out the page cache Linux's MemAvailable
 * counts; else 0, unknown), no cgroup limit, pressure and temperature
 * unknown, no allowed set and no capacities (one class of cores, as many
 * as are online), no clocks and no CPU quota known (the online cores are
 * the budget), a performance hint that says "unsupported", no pinning (ENOSYS), no ARM dot product and no AMX (the
 * kernels that need nothing of the system), storage unknown, the advice POSIX
 * names (MERGE dropped), neither unnamed files nor direct I/O (the callers
 * fall back to a named file and the page cache), and folders read with
 * readdir (not async-signal-safe: platform/file.h), and a memory watcher
 * that starts "off" and never calls back (platform/memwatch.h).
 */
#include "platform/cpu.h"
#include "platform/cpuquota.h"
#include "platform/file.h"
#include "platform/mem.h"
#include "platform/memwatch.h"
#include "platform/perfhint.h"
#include "platform/platform.h"
#include "platform/storage.h"
#include "platform/thermal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- memory */

/* Peak RSS only: getrusage's ru_maxrss (KiB, bytes on Apple's systems). */
plat_mem_usage plat_mem_read_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss <= 0) return (plat_mem_usage){0};
#ifdef __APPLE__
    return (plat_mem_usage){.peak_rss_bytes = (uint64_t)ru.ru_maxrss};
#else
    return (plat_mem_usage){.peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024};
#endif
}

plat_mem_usage plat_mem_read(void) { return plat_mem_read_rss(); }
uint64_t plat_mem_rss_exact(void) { return 0; }
uint64_t plat_mem_cgroup_room(void) { return UINT64_MAX; }
uint64_t plat_mem_cgroup_headroom(void) { return UINT64_MAX; }
plat_pressure plat_mem_pressure(void) { return (plat_pressure){.known = false}; }

uint64_t plat_mem_available(void) {
#ifdef _SC_AVPHYS_PAGES
    const long pages = sysconf(_SC_AVPHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_bytes > 0) return (uint64_t)pages * (uint64_t)page_bytes;
#endif
    return 0;
}

/* ---- memory pressure: no signal. The watcher starts (ERR_OK), so the
 * runtime runs on unwatched, and says why in its source. */

struct plat_mem_watch {
    int unused;
};

err_code plat_mem_watch_start(const plat_mem_watch_config *cfg, plat_mem_watch_fn cb, void *user,
                              plat_mem_watch **out, err_t *err) {
    (void)cfg, (void)user;
    if (!cb || !out) return err_set(err, ERR_INVALID_ARG, "memory watcher: no callback or no place for it");
    *out = calloc(1, sizeof **out);
    return *out ? ERR_OK : err_set(err, ERR_NOMEM, "memory watcher: out of memory");
}

void plat_mem_watch_stop(plat_mem_watch *w) { free(w); }
const char *plat_mem_watch_source(const plat_mem_watch *w) {
    return (void)w, "off: this build has no memory pressure signal";
}
plat_mem_level plat_mem_watch_level(const plat_mem_watch *w) { return (void)w, PLAT_MEM_OK; }

/* ---- cores */

int plat_cpu_online(void) { return (int)sysconf(_SC_NPROCESSORS_ONLN); }
bool plat_cpu_allowed(plat_cpuset *out) { return (void)out, false; }
int plat_cpu_capacities(const plat_cpuset *only, short *ids, int *caps, int max) {
    return (void)only, (void)ids, (void)caps, (void)max, 0;
}
int plat_cpu_freqs(const plat_cpuset *only, plat_cpu_freq *out, int max) {
    return (void)only, (void)out, (void)max, 0;
}
/* No quota known, no allowed set: the online cores are the budget. */
plat_cpu_budget plat_cpu_budget_read(void) {
    const int online = plat_cpu_online() > 0 ? plat_cpu_online() : 0;
    return (plat_cpu_budget){.quota_state = PLAT_CPU_QUOTA_UNKNOWN, .online_cpus = online, .effective_cpus = online};
}
bool plat_pin_available(void) { return false; }
int plat_pin_thread(pthread_t t, const plat_cpuset *s) { return (void)t, (void)s, ENOSYS; }
int plat_pin_self(const plat_cpuset *s) { return (void)s, ENOSYS; }
int plat_pin_self_get(plat_cpuset *out) { return (void)out, ENOSYS; }
bool plat_cpu_arm_dotprod(void) { return false; }
bool plat_cpu_arm_i8mm(void) { return false; }
bool plat_cpu_arm_bf16(void) { return false; }
bool plat_cpu_amx_permit(void) { return false; }

/* ---- performance hint: none; the session says so and does nothing */

err_code plat_perf_hint_open(const int *tids, int n_tids, int64_t target_ns, plat_perf_hint **out, err_t *err) {
    if (!tids || n_tids < 1 || n_tids > PLAT_PERF_HINT_MAX_TIDS || target_ns <= 0)
        return err_set(err, ERR_INVALID_ARG, "performance hint: %d threads, a target of %lld ns", n_tids,
                       (long long)target_ns);
    return plat_perf_hint_open_unsupported("this build has no performance hint", out, err);
}

int plat_thread_id(void) { return 0; }

/* ---- storage, temperature */

plat_storage plat_storage_probe(const char *dir) { return (void)dir, PLAT_STORAGE_UNKNOWN; }
plat_thermal plat_thermal_read(void) { return (plat_thermal){.known = false}; }

const char *plat_name(void) { return "posix"; }

/* ---- files */

void plat_advise_file(int fd, uint64_t off, uint64_t len, plat_advice a) {
#ifdef POSIX_FADV_WILLNEED /* absent on some systems (macOS) */
    const int adv = a == PLAT_ADVICE_SEQUENTIAL ? POSIX_FADV_SEQUENTIAL
                    : a == PLAT_ADVICE_WILLNEED ? POSIX_FADV_WILLNEED
                    : a == PLAT_ADVICE_DONTNEED ? POSIX_FADV_DONTNEED
                                                : -1;
    if (adv >= 0) posix_fadvise(fd, (off_t)off, (off_t)len, adv);
#else
    (void)fd, (void)off, (void)len, (void)a;
#endif
}

void plat_advise_mem(void *addr, size_t len, plat_advice a) {
    const int adv = a == PLAT_ADVICE_SEQUENTIAL ? POSIX_MADV_SEQUENTIAL
                    : a == PLAT_ADVICE_WILLNEED ? POSIX_MADV_WILLNEED
                    : a == PLAT_ADVICE_DONTNEED ? POSIX_MADV_DONTNEED
                                                : -1;
    if (adv >= 0) posix_madvise(addr, len, adv);
}

int plat_mem_revert(void *addr, size_t len) { return (void)addr, (void)len, ENOSYS; }
int plat_exe_dir(char *buf, size_t n) { return (void)buf, (void)n, ENOSYS; }

int plat_open_unnamed(const char *dir) { return (void)dir, errno = ENOTSUP, -1; }
int plat_link_unnamed(int fd, const char *path) { return (void)fd, (void)path, errno = ENOTSUP, -1; }
int plat_dir_each(int fd, plat_dir_fn fn, void *ctx) {
    const int copy = dup(fd); /* closedir closes the descriptor it was given */
    DIR *d = copy < 0 ? NULL : fdopendir(copy);
    if (!d) {
        const int e = errno;
        if (copy >= 0) close(copy);
        return e;
    }
    rewinddir(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && fn(ctx, e->d_name)) break;
    closedir(d);
    return 0;
}

int plat_rename_exchange(const char *a, const char *b) { return (void)a, (void)b, errno = ENOSYS, -1; }

int plat_open_direct(const char *path) { return (void)path, errno = EINVAL, -1; }
