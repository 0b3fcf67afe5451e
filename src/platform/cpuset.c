/*
 * platform/cpuset — the parts of platform/cpu.h every system shares: octo's
 * set of cores (a bit per core, word by word as the kernel's masks are, so
 * the Linux side copies it to a cpu_set_t whole), the capacities read
 * from a tree of cpuN/cpu_capacity files and the clocks from its
 * cpuN/cpufreq/ folders.
 */
#include "platform/cpu.h"

#include "platform/sysfile.h"

#include <stdio.h>
#include <string.h>

#define WORD_BITS (8 * sizeof(unsigned long))

void plat_cpuset_zero(plat_cpuset *s) { memset(s, 0, sizeof *s); }

bool plat_cpuset_add(plat_cpuset *s, int cpu) {
    if (cpu < 0 || cpu >= PLAT_MAX_CPUS) return false;
    s->bits[(unsigned)cpu / WORD_BITS] |= 1ul << ((unsigned)cpu % WORD_BITS);
    return true;
}

bool plat_cpuset_has(const plat_cpuset *s, int cpu) {
    return cpu >= 0 && cpu < PLAT_MAX_CPUS && (s->bits[(unsigned)cpu / WORD_BITS] >> ((unsigned)cpu % WORD_BITS) & 1);
}

int plat_cpuset_count(const plat_cpuset *s) {
    int n = 0;
    for (size_t w = 0; w < sizeof s->bits / sizeof *s->bits; w++) n += __builtin_popcountl(s->bits[w]);
    return n;
}

int plat_cpu_capacities_at(const char *root, const plat_cpuset *only, short *ids, int *caps, int max) {
    int n = 0, misses = 0;
    for (int cpu = 0; cpu < PLAT_MAX_CPUS && misses < 64 && n < max; cpu++) {
        char path[512];
        snprintf(path, sizeof path, "%s/cpu%d/cpu_capacity", root, cpu);
        uint64_t c = 0;
        if (!sysfile_u64(path, &c)) { /* offline or absent; numbering may have gaps */
            misses++;
            continue;
        }
        misses = 0;
        const bool ok = c > 0 && c < 1000000;
        if (!ok || (only && !plat_cpuset_has(only, cpu))) continue;
        ids[n] = (short)cpu;
        caps[n++] = (int)c;
    }
    return n;
}

/* One cpufreq file of a core in kHz; 0 when absent or no number. */
static unsigned freq_file(const char *root, int cpu, const char *file) {
    char path[512];
    uint64_t khz = 0;
    snprintf(path, sizeof path, "%s/cpu%d/cpufreq/%s", root, cpu, file);
    return sysfile_u64(path, &khz) && khz < 1000000000u ? (unsigned)khz : 0;
}

int plat_cpu_freqs_at(const char *root, const plat_cpuset *only, plat_cpu_freq *out, int max) {
    int n = 0, misses = 0;
    for (int cpu = 0; cpu < PLAT_MAX_CPUS && misses < 64 && n < max; cpu++) {
        const plat_cpu_freq f = {.cpu = (short)cpu,
                                 .cur_khz = freq_file(root, cpu, "scaling_cur_freq"),
                                 .cap_khz = freq_file(root, cpu, "scaling_max_freq"),
                                 .max_khz = freq_file(root, cpu, "cpuinfo_max_freq")};
        if (!f.cur_khz && !f.cap_khz && !f.max_khz) { /* no cpufreq, offline, or past the last core */
            misses++;
            continue;
        }
        misses = 0;
        if (!only || plat_cpuset_has(only, cpu)) out[n++] = f;
    }
    return n;
}
