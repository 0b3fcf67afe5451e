/*
 * sysmem — see sysmem.h. The files are parsed line by line for "Key: N kB".
 */
#include "sysmem.h"

#include <mntent.h>
#include <stdbool.h>
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

/* word is one of list's comma-separated words. */
static bool has_word(const char *list, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

/* The mount point of the cgroup2 hierarchy, or of the v1 hierarchy with the
 * memory controller, into out; false when there is none. getmntent reads
 * whole lines of any length and decodes escaped names. */
static bool cgroup_mount(bool v2, char *out, size_t n) {
    FILE *f = setmntent("/proc/self/mounts", "r");
    if (!f) return false;
    bool found = false;
    for (struct mntent *e; !found && (e = getmntent(f));) {
        found = v2 ? !strcmp(e->mnt_type, "cgroup2") : !strcmp(e->mnt_type, "cgroup") && has_word(e->mnt_opts, "memory");
        if (found) snprintf(out, n, "%s", e->mnt_dir);
    }
    endmntent(f);
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

/* What the process's memory cgroup (v2 memory.max, or v1
 * memory.limit_in_bytes) and its ancestors leave; UINT64_MAX: no limit. */
static uint64_t cgroup_room(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
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

uint64_t sysmem_available(void) {
    uint64_t avail = read_kb("/proc/meminfo", "MemAvailable");
    const uint64_t room = cgroup_room();
    if (room != UINT64_MAX && (avail == 0 || room < avail)) avail = room ? room : 1;
    return avail;
}
