/*
 * platform/linux/mem — see platform/mem.h: the Linux readings, from /proc
 * files parsed line by line for "Key: N kB", and the cgroup files under
 * the hierarchy's mount point.
 */
#include "platform/mem.h"

#include "platform/sysfile.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static uint64_t read_u64(const char *path) {
    uint64_t v = 0;
    return sysfile_u64(path, &v) ? v : 0; /* "max" reads as 0: no limit */
}

/* word is one of list's comma-separated words. */
static bool has_word(const char *list, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

/* The mount point of the cgroup2 hierarchy, or of the v1 hierarchy with the
 * memory controller, into out; false when there is none. Lines of any
 * length are read whole (overlay mounts can pass 4 KiB). */
static bool cgroup_mount(bool v2, char *out, size_t n) {
    FILE *f = fopen("/proc/self/mounts", "re");
    if (!f) return false;
    char *line = NULL, *fld[4];
    size_t cap = 0;
    bool found = false;
    while (!found && getline(&line, &cap, f) > 0) {
        if (sysfile_fields(line, fld, 4) < 4) continue;
        found = v2 ? !strcmp(fld[2], "cgroup2") : !strcmp(fld[2], "cgroup") && has_word(fld[3], "memory");
        if (found) snprintf(out, n, "%s", fld[1]);
    }
    free(line);
    fclose(f);
    return found;
}

/* The room left under the limits of dir and each cgroup above it, down to
 * root: limit - usage of the tightest one; UINT64_MAX when none is set. */
static uint64_t room_along(char *dir, size_t root_len, const char *limit_file, const char *usage_file) {
    uint64_t room = UINT64_MAX;
    char path[1024];
    for (;;) {
        snprintf(path, sizeof path, "%s/%s", dir, limit_file);
        const uint64_t max = read_u64(path); /* "max" (v2) reads as 0; v1's "unlimited" is near 2^63 */
        snprintf(path, sizeof path, "%s/%s", dir, usage_file);
        const uint64_t cur = read_u64(path);
        if (max && max < (1ull << 60)) room = cur < max ? (max - cur < room ? max - cur : room) : 0;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < root_len) break;
        *slash = '\0';
    }
    return room;
}

/* /proc/self/cgroup names the process's cgroup per hierarchy ("0::/path" for v2). */
uint64_t plat_mem_cgroup_room(void) {
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return UINT64_MAX;
    char line[1024], dir[1536];
    uint64_t room = UINT64_MAX;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctrl = c1 + 1, *path = c2 + 1;
        const bool v2 = !*ctrl, v1 = !v2 && has_word(ctrl, "memory");
        char mnt[512];
        if ((!v2 && !v1) || !cgroup_mount(v2, mnt, sizeof mnt)) continue;
        snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(path, "/") ? path : "");
        const uint64_t r = v2 ? room_along(dir, strlen(mnt), "memory.max", "memory.current")
                              : room_along(dir, strlen(mnt), "memory.limit_in_bytes", "memory.usage_in_bytes");
        room = r < room ? r : room;
    }
    fclose(f);
    return room;
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
