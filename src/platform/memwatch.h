/*
 * platform/memwatch — memory pressure as levels, and a thread that watches
 * for it (issue 37): the runtime gives memory back by level (LOW: private
 * copies of weights; MODERATE: the expert cache; CRITICAL: the KV cache)
 * and grows back when pressure has been gone a while. This room only says
 * how pressed memory is; what to drop, and when to grow, is the runtime's.
 *
 * What counts as pressure. A memory cgroup whose limit is filled by page
 * cache is not pressed: the kernel drops clean file pages for free. The
 * pressure is the share of the limit that cannot be reclaimed, usage less
 * the file pages on the LRU lists (v1 memory.stat total_active_file +
 * total_inactive_file, v2 active_file + inactive_file; shared memory and
 * tmpfs stay counted, as they cannot be dropped without swap), and the
 * stalls PSI measures. Without a cgroup limit the same share is taken of
 * the whole system (MemTotal - MemAvailable of MemTotal); with one, the
 * tighter of the two.
 *
 * Linux (platform/linux/memwatch.c) reads the process's memory cgroup (v1
 * memory.limit_in_bytes / usage_in_bytes / stat, v2 memory.max / current
 * / stat, up the hierarchy to the mount point), /proc/meminfo and
 * /proc/pressure/memory (a v2 cgroup's memory.pressure when the system file
 * is missing); its watcher arms a PSI trigger and, on cgroup v1, a
 * memory.pressure_level eventfd, and re-reads the figures every poll_ms.
 * The POSIX fallback (platform/posix/posix.c) has no signal: its watcher
 * starts "off" (ERR_OK, source "off: this build has no memory pressure
 * signal") and never calls back, so the runtime runs on, unwatched. The
 * tree reader (plat_mem_reading_at) and the level functions are shared by
 * both builds: plain text files, which a test fakes.
 */
#ifndef OCTO_PLATFORM_MEMWATCH_H
#define OCTO_PLATFORM_MEMWATCH_H

#include "core/err.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    PLAT_MEM_OK = 0,       /* nothing to give back; growing is allowed after a while */
    PLAT_MEM_LOW = 1,      /* give back what is cheap to get again (private copies of weights) */
    PLAT_MEM_MODERATE = 2, /* and shrink caches that cost I/O to refill (experts) */
    PLAT_MEM_CRITICAL = 3, /* and what costs compute to rebuild (the KV cache): the kernel kills next */
} plat_mem_level;

/* Which figures limit, usage and file are. */
typedef enum {
    PLAT_MEM_SCOPE_NONE = 0,   /* none known (no cgroup limit, no /proc/meminfo) */
    PLAT_MEM_SCOPE_SYSTEM = 1, /* the whole system: /proc/meminfo */
    PLAT_MEM_SCOPE_CGROUP = 2, /* the process's memory cgroup, or the one above it whose share is the highest */
} plat_mem_scope;

typedef struct {
    plat_mem_scope scope;
    int cgroup_version; /* 1 or 2 when a memory cgroup was found (even without a limit), else 0 */
    /* Bytes. CGROUP: the limit, the usage (page cache included) and the file
     * pages of that usage the kernel can drop. SYSTEM: MemTotal, MemTotal -
     * MemFree, MemAvailable - MemFree (so usage - file = MemTotal -
     * MemAvailable). usage - file is what cannot be reclaimed. */
    uint64_t limit, usage, file;
    /* PSI avg10 in percent: the share of the last ~10 s in which some task,
     * or every task, waited for memory. psi_known false: no PSI. */
    bool psi_known;
    double psi_some_avg10, psi_full_avg10;
    /* PSI's totals: microseconds some / every task waited since boot; -1:
     * unknown. The watcher turns them into the share of the last second,
     * and takes it for avg10 when it is lower: once the stalls stop, the
     * level falls within a second rather than as avg10 decays (about 20 s
     * from 15 % to under 5 %, measured after issue 37's scenario). */
    int64_t psi_some_total_us, psi_full_total_us;
    /* Wake-ups from the kernel's push signals in the hold window (the PSI
     * trigger's window, 1 s by default) before this reading: the PSI trigger
     * fired, the v1 memory.pressure_level eventfd ("medium") fired. Always 0
     * from plat_mem_reading_at, which arms nothing. */
    unsigned psi_events, vmpressure_events;
} plat_mem_reading;

/* The share of the limit that cannot be reclaimed, in percent (0 when the
 * scope is NONE or the limit 0; above 100 when usage passed the limit). */
double plat_mem_unreclaimable_pct(const plat_mem_reading *r);

/*
 * The level of a reading: the highest any row gives.
 *
 *   signal                                       LOW     MODERATE  CRITICAL   (defaults)
 *   unreclaimable share of the limit (pct)       >= 75   >= 85     >= 93
 *   PSI some avg10 (pct)                         >= 10   -         -
 *   PSI full avg10 (pct)                         -       >= 5      >= 15
 *   the PSI trigger fired in the hold window     psi_event_level: LOW
 *   >= 8 vmpressure events in the hold window    vmpressure_event_level: MODERATE
 *
 * Why these. The share is the signal that tracks what the kernel will do:
 * at 100 % it has nothing left to drop and kills. An app taking memory at
 * 180 MiB/s fills the last 25 % of a 1400 MiB cgroup in about 2 s, the
 * last 7 % in half a second, so LOW leaves the runtime time to give back
 * its private copies (enough, in issue 37's scenario, for the other app's
 * 900 MiB), and CRITICAL is the last poll or few before the kill. PSI says
 * tasks already wait: some 10 % of the time is slow, not yet dangerous
 * (LOW); every task waiting (full) is thrashing. Measured on a v1 cgroup
 * (tests/memwatch_real.sh), PSI's 10 s averages barely moved before the
 * kill, and its trigger fired near a 92 % share; vmpressure sends an event
 * (even "critical") as soon as reclaim starts, with 63 % unreclaimable,
 * then nothing until the kill is near, when dozens come: one event alone
 * is no pressure, and taking it for LOW would make a runtime that grows
 * back (and so reclaims page cache) give back again at once.
 *
 * A level is left only when the share has fallen release_pct (3) below
 * the threshold it crossed, or to half of it if that is higher
 * (plat_mem_level_after): the runtime's giving back should not flap at an
 * edge. PSI and the events have no such margin: avg10 moves slowly, and an
 * event holds for its window. A threshold of 0 (or a level of OK for the
 * events) turns its row off.
 */
typedef struct {
    double low_pct, moderate_pct, critical_pct; /* the unreclaimable share */
    double release_pct;                         /* hysteresis on the way down, share points */
    double psi_some_low_pct;                    /* PSI some avg10 that gives LOW */
    double psi_full_low_pct, psi_full_moderate_pct, psi_full_critical_pct; /* the first 0 (off) by default */
    plat_mem_level psi_event_level, vmpressure_event_level;
    unsigned vmpressure_min_events; /* vmpressure events in the hold window that count (0 or 1: any) */
} plat_mem_thresholds;

/* The table's defaults. */
plat_mem_thresholds plat_mem_thresholds_default(void);

/* The level of r alone (pure: no state, no I/O). */
plat_mem_level plat_mem_level_of(const plat_mem_reading *r, const plat_mem_thresholds *t);
/* The level after prev: up at once, down only as far as the share less
 * release_pct allows (pure). The watcher uses this one. */
plat_mem_level plat_mem_level_after(plat_mem_level prev, const plat_mem_reading *r, const plat_mem_thresholds *t);
/* "ok", "low", "moderate", "critical". */
const char *plat_mem_level_name(plat_mem_level level);

/* One reading of the files under root (NULL or "": the system's own; else a
 * test's fake tree, every absolute path prefixed with it): the memory
 * cgroup named by root/proc/self/cgroup, found through root/proc/self/mounts
 * (the v1 hierarchy with the memory controller, else cgroup2), then
 * root/proc/meminfo and root/proc/pressure/memory. Events are 0. false
 * when nothing could be read (scope NONE and no PSI): *out then says so. */
bool plat_mem_reading_at(const char *root, plat_mem_reading *out);

/* ---- the watcher */

typedef struct {
    unsigned poll_ms;                      /* re-read the figures this often; 0: 100 ms; at most an hour */
    const plat_mem_thresholds *thresholds; /* NULL: plat_mem_thresholds_default() */
    const char *root;                      /* NULL: the system; else a fake tree, as plat_mem_reading_at */
    /* The PSI trigger written to the pressure file ("some 100000 1000000":
     * 100 ms of stall within 1 s); NULL: that default, or where the kernel
     * refuses it (no CAP_SYS_RESOURCE: windows of whole 2 s only) "some
     * 200000 2000000". The armed trigger's window is also how long a push
     * event holds its level. */
    const char *psi_trigger;
    bool poll_only; /* arm neither the PSI trigger nor the eventfd: poll alone (tests) */
} plat_mem_watch_config;

typedef struct plat_mem_watch plat_mem_watch;

/* Called on the watcher's thread when the level changes, and at every poll
 * while it is not OK (so the runtime may escalate what it gives back, or
 * see it did enough). r is valid during the call only. cb must return
 * promptly and must not call plat_mem_watch_stop. */
typedef void (*plat_mem_watch_fn)(void *user, plat_mem_level level, const plat_mem_reading *r);

/* Starts the watcher thread (cfg NULL: all defaults). The process's
 * cgroup is found once, here (a process moved to another later is watched
 * in the old one). Without a cgroup limit the poll reads the system's
 * MemAvailable; when there is nothing at all to read (no memory cgroup, no
 * /proc/meminfo, no PSI; the POSIX build) it still succeeds, with no
 * thread and a source that starts "off: ", so the runtime runs on
 * unwatched; *out is always to be stopped. The trigger and the eventfd are
 * never armed on a plain file (a fake tree). Idle, it costs one wake-up a
 * poll: measured on a 2-core VM, 0.13 % of a core at 100 ms (some 130 us a
 * poll, five or six small files read). Errors: ERR_INVALID_ARG (cb or out NULL,
 * a bad trigger, a poll over an hour), ERR_NOMEM, ERR_IO (no thread or
 * eventfd could be made). */
err_code plat_mem_watch_start(const plat_mem_watch_config *cfg, plat_mem_watch_fn cb, void *user,
                              plat_mem_watch **out, err_t *err);
/* Stops the thread (promptly: it is woken, not waited out) and frees w; NULL is ignored. */
void plat_mem_watch_stop(plat_mem_watch *w);
/* A sentence: which signals the watcher uses ("cgroup v1 limit ... polled
 * every 100 ms, PSI trigger ..., vmpressure eventfd ..."), or "off: <why>". */
const char *plat_mem_watch_source(const plat_mem_watch *w);
/* The level the watcher last saw (OK when off). */
plat_mem_level plat_mem_watch_level(const plat_mem_watch *w);

#endif
