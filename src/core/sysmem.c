/*
 * sysmem — see sysmem.h. The files are parsed line by line for "Key: N kB".
 */
#include "sysmem.h"

#include <stdio.h>
#include <string.h>

static uint64_t read_kb(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(key);
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            unsigned long long v;
            if (sscanf(line + n + 1, "%llu", &v) == 1) kb = v;
            break;
        }
    fclose(f);
    return kb * 1024;
}

sysmem_usage sysmem_read(void) {
    return (sysmem_usage){
        .rss_bytes = read_kb("/proc/self/status", "VmRSS"),
        .peak_rss_bytes = read_kb("/proc/self/status", "VmHWM"),
        .pss_bytes = read_kb("/proc/self/smaps_rollup", "Pss"),
    };
}

static uint64_t read_u64(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    if (fscanf(f, "%llu", &v) != 1) v = 0; /* "max" reads as 0: no limit */
    fclose(f);
    return v;
}

uint64_t sysmem_available(void) {
    uint64_t avail = read_kb("/proc/meminfo", "MemAvailable");
    const uint64_t max = read_u64("/sys/fs/cgroup/memory.max"), cur = read_u64("/sys/fs/cgroup/memory.current");
    if (max && cur && max > cur && (avail == 0 || max - cur < avail)) avail = max - cur;
    return avail;
}
