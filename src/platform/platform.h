/*
 * platform — the room that asks the operating system, one header per
 * concern, so that a port (Android's bionic, iOS and macOS) and the memory
 * watcher (and the thermal one to come) have one place to look:
 *
 *   platform/mem.h      memory: usage, available, the cgroup limit, pressure
 *   platform/memwatch.h memory pressure as levels, and a thread that watches for it
 *   platform/cpu.h      cores: online, allowed, capacities, cpufreq clocks; pinning
 *                       (plat_cpuset); the CPU features the system tells or grants
 *   platform/cpuquota.h the CPU the process really has: cgroup quota, affinity, the smaller
 *   platform/perfhint.h a performance-hint session: target and actual durations of a token
 *   platform/storage.h  the kind of storage under a directory
 *   platform/thermal.h  thermal zones, their trip points, the headroom to a passive trip
 *   platform/file.h     file and memory advice, unnamed files, direct I/O
 *
 * One implementation is built (CMake's OCTO_PLATFORM): src/platform/linux/
 * (/proc, /sys, sched_getaffinity, O_TMPFILE) or src/platform/posix/ (what
 * POSIX and sysconf give, with documented "unknown" answers). The files
 * directly in src/platform/ are shared by both: octo's CPU set, the readers
 * of a tree of small kernel files (platform/sysfile.h, platform/cgroup.h),
 * which the tests also point at fake trees, and the hint session's law. The room includes nothing of octo's but
 * core/err.h; core and every layer above may include it.
 */
#ifndef OCTO_PLATFORM_PLATFORM_H
#define OCTO_PLATFORM_PLATFORM_H

/* The implementation built: "linux" or "posix". */
const char *plat_name(void);

#endif
