/*
 * platform/cpu — the cores: how many, which this process may run on, their
 * capacities (the kernel's measure of a core's speed, from which core/
 * threadpool.c makes classes of cores), and pinning a thread to a set.
 *
 * plat_cpuset is octo's own set of core numbers; no system type crosses
 * this interface. Linux (platform/linux/cpu.c) asks sched_getaffinity, the
 * CPU capacities the kernel exports under sysfs, and
 * pthread_setaffinity_np. The POSIX fallback knows only the count of
 * online cores (sysconf): no allowed set, no capacities, and no pinning
 * (plat_pin_available false; the pin calls fail with ENOSYS).
 */
#ifndef OCTO_PLATFORM_CPU_H
#define OCTO_PLATFORM_CPU_H

#include <pthread.h>
#include <stdbool.h>

#define PLAT_MAX_CPUS 1024
typedef struct {
    unsigned long bits[PLAT_MAX_CPUS / (8 * sizeof(unsigned long))];
} plat_cpuset;

void plat_cpuset_zero(plat_cpuset *s);
/* false: cpu is outside [0, PLAT_MAX_CPUS) and was not added */
bool plat_cpuset_add(plat_cpuset *s, int cpu);
bool plat_cpuset_has(const plat_cpuset *s, int cpu);
int plat_cpuset_count(const plat_cpuset *s);

/* The cores online (sysconf(_SC_NPROCESSORS_ONLN), as the system says it). */
int plat_cpu_online(void);
/* The cores this process may run on into *out; false when unknown. */
bool plat_cpu_allowed(plat_cpuset *out);

/* The cores that report a capacity, ascending, into ids[] and caps[] (at
 * most max), only those in *only when it is given; returns how many. */
int plat_cpu_capacities(const plat_cpuset *only, short *ids, int *caps, int max);
/* The same read from ROOT/cpuN/cpu_capacity files (a test's fake tree). */
int plat_cpu_capacities_at(const char *root, const plat_cpuset *only, short *ids, int *caps, int max);

/* Whether this build can pin threads at all. */
bool plat_pin_available(void);
/* Run thread t (plat_pin_self: the calling thread) only on the cores of
 * *s; 0, or an errno value. */
int plat_pin_thread(pthread_t t, const plat_cpuset *s);
int plat_pin_self(const plat_cpuset *s);
/* The cores the calling thread may run on now; 0, or an errno value. */
int plat_pin_self_get(plat_cpuset *out);

#endif
