/*
 * platform/mem — what the operating system says about memory: what this
 * process costs, what it could still get, and how hard the system is
 * pressed.
 *
 * Linux (platform/linux/mem.c) reads /proc: RSS and peak RSS from the
 * process's status (VmRSS, VmHWM), PSS and an exact RSS from smaps_rollup
 * where the kernel has it, MemAvailable from meminfo, the memory cgroup's limit and usage,
 * and pressure from PSI. The POSIX fallback (platform/posix/posix.c) knows
 * the peak RSS alone (getrusage; RSS, exact RSS and PSS 0), free memory from sysconf where it has _SC_AVPHYS_PAGES, no
 * cgroup limit (room and headroom UINT64_MAX), and no pressure. A value the system does not provide reads
 * as 0 (or "unknown" where 0 is a reading).
 */
#ifndef OCTO_PLATFORM_MEM_H
#define OCTO_PLATFORM_MEM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    uint64_t rss_bytes;
    uint64_t peak_rss_bytes;
    uint64_t pss_bytes;
} plat_mem_usage;

/* All three. PSS walks the process's page tables (milliseconds with a
 * large model mapped, far more under AddressSanitizer's shadow memory). */
plat_mem_usage plat_mem_read(void);
/* RSS and peak RSS only (pss_bytes 0): cheap enough to read per token. */
plat_mem_usage plat_mem_read_rss(void);
/* RSS counted from the page tables (Linux: smaps_rollup's Rss), exact where
 * rss_bytes (VmRSS, kept in per-CPU counters) can lag by hundreds of KiB: as
 * costly as PSS. 0 when unknown (no smaps_rollup, the POSIX fallback). */
uint64_t plat_mem_rss_exact(void);

/* Memory this process could still get: the system's available memory,
 * lowered to what plat_mem_cgroup_room leaves when a limit applies; 0 when
 * unknown. */
uint64_t plat_mem_available(void);

/* What the process's memory cgroup and the cgroups above it leave (limit
 * less usage, page cache included: v2 memory.max / memory.current, v1
 * memory.limit_in_bytes / memory.usage_in_bytes), of the tightest;
 * UINT64_MAX when no limit applies or none can be known. */
uint64_t plat_mem_cgroup_room(void);

/* What the same cgroups would leave once the kernel dropped their page
 * cache: limit less what cannot be reclaimed, usage less the file pages on
 * the LRU lists (v1 memory.stat total_active_file + total_inactive_file,
 * v2 active_file + inactive_file), of the tightest; UINT64_MAX when no
 * limit applies or none can be known. A cgroup filled by the page cache of
 * a mapped model has no room but all this headroom: it is what a budget
 * may count on (platform/memwatch.h says how pressed it is). */
uint64_t plat_mem_cgroup_headroom(void);

/* Memory pressure: the share of the last 10 s in which some task (some)
 * or every task (full) waited for memory, in percent. known false: the
 * system does not say (Linux without PSI, the POSIX fallback). */
typedef struct {
    bool known;
    double some_avg10_pct, full_avg10_pct;
} plat_pressure;
plat_pressure plat_mem_pressure(void);

#endif
