/*
 * platform/cpu — the cores: how many, which this process may run on, their
 * capacities (the kernel's measure of a core's speed, from which core/
 * threadpool.c makes classes of cores), and pinning a thread to a set; and
 * the CPU features the kernels can have only from the system (x86's CPUID
 * they read themselves: core/kernels/kernels.c).
 *
 * Their clocks where the system reports them (cpufreq), and the CPU the
 * process may use by its cgroup's quota (platform/cpuquota.h).
 *
 * plat_cpuset is octo's own set of core numbers; no system type crosses
 * this interface. Linux (platform/linux/cpu.c) asks sched_getaffinity, the
 * CPU capacities the kernel exports under sysfs, pthread_setaffinity_np,
 * the auxiliary vector (getauxval: AArch64's dot product) and arch_prctl
 * (AMX's tile state). The POSIX fallback knows only the count of online
 * cores (sysconf): no allowed set, no capacities, no pinning
 * (plat_pin_available false; the pin calls fail with ENOSYS), and neither
 * feature (NEON without SDOT, no AMX: the kernels that need nothing of the
 * system).
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

/* A core's clock as cpufreq reports it, in kHz; 0 where a file is absent. A
 * policy cap below the hardware's maximum (cap_khz < max_khz) is how a
 * thermal governor or a power HAL slows a core. */
typedef struct {
    short cpu;
    unsigned cur_khz; /* scaling_cur_freq: the clock now (the last the governor asked for) */
    unsigned cap_khz; /* scaling_max_freq: the most the policy allows now */
    unsigned max_khz; /* cpuinfo_max_freq: the most the core can run */
} plat_cpu_freq;

/* The cores that report a frequency (any of the three files), ascending,
 * into out (at most max), only those in *only when it is given; returns how
 * many. 0: the system reports none (no cpufreq, as in many virtual machines
 * and containers): unknown, not an error. */
int plat_cpu_freqs(const plat_cpuset *only, plat_cpu_freq *out, int max);
/* The same read from ROOT/cpuN/cpufreq/ files (a test's fake tree). */
int plat_cpu_freqs_at(const char *root, const plat_cpuset *only, plat_cpu_freq *out, int max);

/* Whether this build can pin threads at all. */
bool plat_pin_available(void);
/* Run thread t (plat_pin_self: the calling thread) only on the cores of
 * *s; 0, or an errno value. */
int plat_pin_thread(pthread_t t, const plat_cpuset *s);
int plat_pin_self(const plat_cpuset *s);
/* The cores the calling thread may run on now; 0, or an errno value. */
int plat_pin_self_get(plat_cpuset *out);

/* AArch64's dot-product extension (SDOT/UDOT, ARMv8.2), as the system
 * reports it (Linux: HWCAP_ASIMDDP); false on other CPUs and when unknown. */
bool plat_cpu_arm_dotprod(void);
/* Does the AArch64 CPU have the int8 matrix multiply (SMMLA, ARMv8.6 "i8mm")? */
bool plat_cpu_arm_i8mm(void);
/* The BFloat16 extension (BFDOT, BFMMLA; ARMv8.6 "bf16"; Linux: HWCAP2_BF16)? */
bool plat_cpu_arm_bf16(void);
/* Ask the system for AMX's tile state, which x86-64 Linux grants a process
 * only on request (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
 * before its first tile instruction; true when granted (asking again is
 * harmless), false when refused, on other CPUs and where unknown. Whether
 * the CPU has AMX at all is CPUID's (core/kernels/packed_amx.c). */
bool plat_cpu_amx_permit(void);

#endif
