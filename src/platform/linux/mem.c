/*
 * platform/linux/mem — see platform/mem.h: the Linux readings, from /proc
 * files parsed line by line for "Key: N kB", and the cgroup files under
 * the hierarchy's mount point (found and walked by platform/memtree.c).
 */
#include "platform/mem.h"

#include "platform/memtree.h"
#include "platform/sysfile.h"

plat_mem_usage plat_mem_read_rss(void) {
    return (plat_mem_usage){
        .rss_bytes = sysfile_keyed("/proc/self/status", "VmRSS") * 1024,
        .peak_rss_bytes = sysfile_keyed("/proc/self/status", "VmHWM") * 1024,
    };
}

uint64_t plat_mem_rss_exact(void) { return sysfile_keyed("/proc/self/smaps_rollup", "Rss") * 1024; }

plat_mem_usage plat_mem_read(void) {
    plat_mem_usage u = plat_mem_read_rss();
    u.pss_bytes = sysfile_keyed("/proc/self/smaps_rollup", "Pss") * 1024;
    return u;
}

/* The tightest of the process's memory cgroup and those above it
 * (platform/memtree.h). */
uint64_t plat_mem_cgroup_room(void) {
    memtree_cgroup cg;
    return memtree_find("", &cg) ? memtree_walk(&cg, false, NULL).room : UINT64_MAX;
}

uint64_t plat_mem_cgroup_headroom(void) {
    memtree_cgroup cg;
    return memtree_find("", &cg) ? memtree_walk(&cg, true, NULL).headroom : UINT64_MAX;
}

uint64_t plat_mem_available(void) {
    uint64_t avail = sysfile_keyed("/proc/meminfo", "MemAvailable") * 1024;
    const uint64_t room = plat_mem_cgroup_room();
    if (room != UINT64_MAX && (avail == 0 || room < avail)) avail = room ? room : 1;
    return avail;
}

plat_pressure plat_mem_pressure(void) {
    plat_pressure p = {0};
    char text[512];
    if (!sysfile_text("/proc/pressure/memory", text, sizeof text)) return p; /* no PSI in this kernel */
    p.some_avg10_pct = sysfile_avg10(text, "some");
    p.full_avg10_pct = sysfile_avg10(text, "full");
    p.known = p.some_avg10_pct >= 0;
    if (p.full_avg10_pct < 0) p.full_avg10_pct = 0; /* no "full" line: read as none */
    return p;
}
