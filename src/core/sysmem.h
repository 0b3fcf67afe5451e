/*
 * sysmem — what the process costs in memory, read from /proc.
 *
 * RSS and peak RSS from /proc/self/status (VmRSS, VmHWM), PSS from
 * /proc/self/smaps_rollup where the kernel has it. A value the system does
 * not provide reads as 0.
 */
#ifndef OCTO_CORE_SYSMEM_H
#define OCTO_CORE_SYSMEM_H

#include <stdint.h>

typedef struct {
    uint64_t rss_bytes;
    uint64_t peak_rss_bytes;
    uint64_t pss_bytes;
} sysmem_usage;

/* All three. PSS walks the process's page tables (milliseconds with a
 * large model mapped, far more under AddressSanitizer's shadow memory). */
sysmem_usage sysmem_read(void);
/* RSS and peak RSS only (pss_bytes 0): cheap enough to read per token. */
sysmem_usage sysmem_read_rss(void);

/* Memory this process could still get: MemAvailable, lowered to what its
 * memory cgroup and the cgroups above it leave (limit less usage, page
 * cache included: v2 memory.max / memory.current, v1 memory.limit_in_bytes /
 * memory.usage_in_bytes) when one applies; 0 when unknown. */
uint64_t sysmem_available(void);

#endif
