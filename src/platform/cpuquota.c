/*
 * platform/cpuquota — see platform/cpuquota.h: the process's cpu cgroup
 * found as the memory reader finds its own (platform/cgroup.h), its quota
 * files read in each folder up to the mount point, and cpu.stat of the
 * folder whose quota is the tightest. A folder without quota files (the
 * v2 root, a v2 folder without the cpu controller) sets none; a quota file
 * that is there but does not parse makes the whole answer unknown, since
 * a tighter quota could hide behind it.
 */
#include "platform/cpuquota.h"

#include "platform/cgroup.h"
#include "platform/sysfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The decimal number at *p (blanks before it skipped) into *v, *p moved past
 * it; false when there is none, it overflows or a letter follows it. */
static bool number(const char **p, uint64_t *v) {
    const char *s = *p + strspn(*p, " \t");
    if (*s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    if (errno || (*end && !strchr(" \t\n", *end))) return false;
    *p = end;
    return true;
}

/* Nothing but blanks and line ends left at p. */
static bool rest_blank(const char *p) { return p[strspn(p, " \t\n")] == '\0'; }

int plat_cpu_quota_parse_v1(const char *quota_text, const char *period_text, uint64_t *quota_us, uint64_t *period_us) {
    const char *q = quota_text + strspn(quota_text, " \t"), *p = period_text;
    uint64_t period, quota = 0;
    if (!number(&p, &period) || !rest_blank(p) || !period) return -1;
    const bool none = !strncmp(q, "-1", 2) && rest_blank(q + 2);
    if (!none && (!number(&q, &quota) || !rest_blank(q) || !quota)) return -1;
    *quota_us = quota;
    *period_us = period;
    return none ? 0 : 1;
}

int plat_cpu_quota_parse_v2(const char *text, uint64_t *quota_us, uint64_t *period_us) {
    const char *q = text + strspn(text, " \t"), *p;
    uint64_t quota = 0, period;
    const bool none = !strncmp(q, "max", 3) && strchr(" \t", q[3]) && q[3];
    if (none) p = q + 3;
    else if (!number(&q, &quota) || !quota) return -1;
    else p = q;
    if (!number(&p, &period) || !rest_blank(p) || !period) return -1;
    *quota_us = quota;
    *period_us = period;
    return none ? 0 : 1;
}

/* One folder's quota: 1, 0 or -1 as the parsers say; 0 when its files are absent. */
static int folder_quota(const char *dir, int version, uint64_t *quota_us, uint64_t *period_us) {
    char path[1200], text[128], period[64];
    if (version == 2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        if (!cgroup_has(dir, "cpu.max")) return 0;
        return sysfile_text(path, text, sizeof text) ? plat_cpu_quota_parse_v2(text, quota_us, period_us) : -1;
    }
    if (!cgroup_has(dir, "cpu.cfs_quota_us")) return 0;
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    if (!sysfile_text(path, text, sizeof text)) return -1;
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    if (!sysfile_text(path, period, sizeof period)) return -1;
    return plat_cpu_quota_parse_v1(text, period, quota_us, period_us);
}

/* The folder's cpu.stat counters into b. */
static void folder_throttle(const char *dir, int version, plat_cpu_budget *b) {
    char path[1200], text[1024];
    uint64_t t = 0;
    snprintf(path, sizeof path, "%s/cpu.stat", dir);
    if (!sysfile_text(path, text, sizeof text)) return;
    b->throttle_known = sysfile_value(text, "nr_periods", &b->nr_periods) &&
                        sysfile_value(text, "nr_throttled", &b->nr_throttled) &&
                        sysfile_value(text, version == 1 ? "throttled_time" : "throttled_usec", &t);
    b->throttled_us = !b->throttle_known ? 0 : version == 1 ? t / 1000 : t;
    if (!b->throttle_known) b->nr_periods = b->nr_throttled = 0;
}

/* The process's cpu cgroup folder into dir and its mount point's length
 * into *top; the version read (0: none). v1's cpu hierarchy when
 * /proc/self/cgroup names one that is mounted, else cgroup2's. A folder
 * missing under the mount point reads as the mount point (a container's). */
static int find_folder(const char *root, char *dir, size_t n, size_t *top) {
    char v1[1024], v2[1024], mnt[512];
    if (!cgroup_self(root, "cpu", v1, v2, sizeof v1)) return 0;
    const bool is_v1 = *v1 && cgroup_mount(root, "cpu", mnt, sizeof mnt);
    if (!is_v1 && !(*v2 && cgroup_mount(root, NULL, mnt, sizeof mnt))) return 0;
    const char *rel = is_v1 ? v1 : v2;
    const int k = snprintf(dir, n, "%s%s", mnt, strcmp(rel, "/") ? rel : "");
    if (k < 0 || (size_t)k >= n || !cgroup_has(dir, ".")) snprintf(dir, n, "%s", mnt);
    *top = strlen(mnt);
    return is_v1 ? 1 : 2;
}

/* The tightest quota from dir up to the mount point into b (state NONE or
 * LIMITED, or UNKNOWN on a file that does not parse); its folder into tight. */
static void walk(char *dir, size_t top, int version, plat_cpu_budget *b, char *tight, size_t n) {
    b->quota_state = PLAT_CPU_QUOTA_NONE;
    snprintf(tight, n, "%s", dir);
    for (;;) {
        uint64_t quota = 0, period = 0;
        const int got = folder_quota(dir, version, &quota, &period);
        if (got < 0) {
            b->quota_state = PLAT_CPU_QUOTA_UNKNOWN;
            return;
        }
        const double cpus = got ? (double)quota / (double)period : 0;
        if (got && (b->quota_state == PLAT_CPU_QUOTA_NONE || cpus < b->quota_cpus)) {
            *b = (plat_cpu_budget){.quota_state = PLAT_CPU_QUOTA_LIMITED, .quota_cpus = cpus, .quota_us = quota,
                                   .period_us = period};
            snprintf(tight, n, "%s", dir);
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < top) return;
        *slash = '\0';
    }
}

plat_cpu_budget plat_cpu_budget_at(const char *root, int allowed_cpus, int online_cpus) {
    plat_cpu_budget b = {.quota_state = PLAT_CPU_QUOTA_UNKNOWN};
    char dir[1024], tight[1024];
    size_t top = 0;
    const int version = find_folder(root, dir, sizeof dir, &top);
    if (version) {
        walk(dir, top, version, &b, tight, sizeof tight);
        if (b.quota_state == PLAT_CPU_QUOTA_UNKNOWN) b = (plat_cpu_budget){.quota_state = PLAT_CPU_QUOTA_UNKNOWN};
        else folder_throttle(tight, version, &b);
        b.cgroup_version = version;
    }
    b.allowed_cpus = allowed_cpus > 0 ? allowed_cpus : 0;
    b.online_cpus = online_cpus > 0 ? online_cpus : 0;
    b.effective_cpus = b.allowed_cpus ? b.allowed_cpus : b.online_cpus;
    if (b.quota_state == PLAT_CPU_QUOTA_LIMITED && (!b.effective_cpus || b.quota_cpus < b.effective_cpus))
        b.effective_cpus = b.quota_cpus;
    return b;
}

double plat_process_cpu_s(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)) return 0;
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}
