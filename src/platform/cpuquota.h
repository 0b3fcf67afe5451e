/*
 * platform/cpuquota — the CPU the process really has: the cgroup's CPU
 * quota (issue 38), the cores its affinity mask allows, and the smaller of
 * the two. A quota of one CPU on a two-core machine halves what two threads
 * that wait for each other get: the issue measured `octo run` decoding at
 * 22 tok/s under it where one thread gives 38. This room only says what
 * the budget is; how many threads to run on it is the runtime's.
 *
 * The quota is CFS bandwidth control: in each period the cgroup's threads
 * together may run for quota microseconds, so quota / period is a number
 * of CPUs (50000 / 100000 = half a core, 150000 / 100000 = one and a half).
 * cgroup v1 (the hierarchy with the cpu controller) has it in
 * cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us; cgroup2 in cpu.max
 * ("max 100000": none; "50000 100000"). Every folder from the process's up
 * to the mount point can set one, and the tightest holds, as
 * platform/memtree.c walks memory limits. The folder of that quota (the
 * process's own when there is none) also says how often it was throttled:
 * cpu.stat's nr_periods, nr_throttled and throttled time (v1
 * throttled_time in ns, v2 throttled_usec), a measured "we ran out of
 * quota" that grows between two readings.
 *
 * Linux (platform/linux/cpu.c) reads the system's files and the affinity
 * mask; the POSIX fallback answers "unknown" (no quota known, no allowed
 * set; the online cores as the budget). The tree reader and the parsers are
 * shared by both: plain text files, which a test fakes.
 */
#ifndef OCTO_PLATFORM_CPUQUOTA_H
#define OCTO_PLATFORM_CPUQUOTA_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    PLAT_CPU_QUOTA_UNKNOWN = 0, /* no cpu cgroup found, or a quota file that does not parse */
    PLAT_CPU_QUOTA_NONE = 1,    /* the cgroup and every folder above it set none */
    PLAT_CPU_QUOTA_LIMITED = 2, /* quota_cpus holds */
} plat_cpu_quota_state;

typedef struct {
    plat_cpu_quota_state quota_state;
    int cgroup_version;           /* 1 or 2: the hierarchy read; 0: none found */
    double quota_cpus;            /* LIMITED: the tightest quota / period (0.5: half a core); else 0 */
    uint64_t quota_us, period_us; /* LIMITED: that folder's figures; else 0 */
    bool throttle_known;          /* that folder's cpu.stat read */
    uint64_t nr_periods, nr_throttled, throttled_us; /* since the cgroup was made */
    int allowed_cpus;             /* the cores the affinity mask allows; 0: unknown */
    int online_cpus;              /* the cores online; 0: unknown */
    double effective_cpus;        /* the least of quota_cpus (LIMITED), allowed_cpus (else online_cpus); 0: unknown */
} plat_cpu_budget;

/* What a quota file says: 1 a quota (*quota_us, *period_us set), 0 none
 * (v1's "-1", v2's "max"; *period_us set, *quota_us 0), -1 it does not
 * parse (then neither is set). v1 takes cpu.cfs_quota_us's and
 * cpu.cfs_period_us's texts, v2 cpu.max's. A period or quota of 0 does not
 * parse: the kernel never shows one. */
int plat_cpu_quota_parse_v1(const char *quota_text, const char *period_text, uint64_t *quota_us, uint64_t *period_us);
int plat_cpu_quota_parse_v2(const char *text, uint64_t *quota_us, uint64_t *period_us);

/* The budget of this process now. */
plat_cpu_budget plat_cpu_budget_read(void);

/* The CPU time the process has used, all its threads, in seconds (what a
 * cgroup's quota counts). */
double plat_process_cpu_s(void);
/* The same read from a tree under root (root/proc/self/cgroup,
 * root/proc/self/mounts and the cgroup folders they name: a test's fake
 * tree), with the affinity mask's and the online counts given (0: unknown). */
plat_cpu_budget plat_cpu_budget_at(const char *root, int allowed_cpus, int online_cpus);

#endif
