/*
 * platform/linux/cpu — see platform/cpu.h: sched_getaffinity and
 * pthread_{get,set}affinity_np over a cpu_set_t copied from octo's set, the
 * capacities and cpufreq clocks under /sys/devices/system/cpu, the cpu
 * cgroup's quota (platform/cpuquota.c's reader on the system's files),
 * getauxval(AT_HWCAP) and arch_prctl(ARCH_REQ_XCOMP_PERM).
 */
#define _GNU_SOURCE /* sched_getaffinity, pthread_setaffinity_np */
#include "platform/cpu.h"
#include "platform/cpuquota.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1 << 14)
#endif
#endif

_Static_assert(sizeof(cpu_set_t) == sizeof(plat_cpuset), "plat_cpuset has a cpu_set_t's layout");

static cpu_set_t to_sys(const plat_cpuset *s) {
    cpu_set_t c;
    memcpy(&c, s, sizeof c);
    return c;
}

int plat_cpu_online(void) { return (int)sysconf(_SC_NPROCESSORS_ONLN); }

bool plat_cpu_allowed(plat_cpuset *out) {
    cpu_set_t c;
    if (sched_getaffinity(0, sizeof c, &c) != 0) return false;
    memcpy(out, &c, sizeof c);
    return true;
}

int plat_cpu_capacities(const plat_cpuset *only, short *ids, int *caps, int max) {
    return plat_cpu_capacities_at("/sys/devices/system/cpu", only, ids, caps, max);
}

int plat_cpu_freqs(const plat_cpuset *only, plat_cpu_freq *out, int max) {
    return plat_cpu_freqs_at("/sys/devices/system/cpu", only, out, max);
}

plat_cpu_budget plat_cpu_budget_read(void) {
    plat_cpuset allowed;
    return plat_cpu_budget_at("", plat_cpu_allowed(&allowed) ? plat_cpuset_count(&allowed) : 0, plat_cpu_online());
}

bool plat_pin_available(void) { return true; }

int plat_pin_thread(pthread_t t, const plat_cpuset *s) {
    const cpu_set_t c = to_sys(s);
    return pthread_setaffinity_np(t, sizeof c, &c);
}

int plat_pin_self(const plat_cpuset *s) { return plat_pin_thread(pthread_self(), s); }

int plat_pin_self_get(plat_cpuset *out) {
    cpu_set_t c;
    const int rc = pthread_getaffinity_np(pthread_self(), sizeof c, &c);
    if (!rc) memcpy(out, &c, sizeof c);
    return rc;
}

bool plat_cpu_arm_i8mm(void) {
#if defined(__aarch64__) && defined(HWCAP2_I8MM)
    return (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#else
    return false;
#endif
}

bool plat_cpu_arm_bf16(void) {
#if defined(__aarch64__) && defined(HWCAP2_BF16)
    return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#else
    return false;
#endif
}

bool plat_cpu_arm_dotprod(void) {
#if defined(__aarch64__)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
    return false;
#endif
}

bool plat_cpu_amx_permit(void) {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return false;
#endif
}
