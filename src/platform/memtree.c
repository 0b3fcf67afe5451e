/*
 * platform/memtree — see platform/memtree.h. Small files, each opened, read
 * whole and closed (the kernel makes them when they are read); mount lines
 * read whole however long. A poll of a v1 cgroup one level under the mount
 * point reads six small files and meminfo.
 */
#include "platform/memtree.h"

#include "platform/cgroup.h"
#include "platform/sysfile.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool memtree_path(char *buf, size_t n, const char *root, const char *path) {
    const int k = snprintf(buf, n, "%s%s", root ? root : "", path);
    return k >= 0 && (size_t)k < n;
}

/* cg's folder for the cgroup path of one hierarchy (v2 or v1's memory):
 * mount + path, else the mount point itself; false when neither has the
 * usage file. */
static bool settle(const char *root, bool v2, const char *cgpath, memtree_cgroup *cg) {
    char mnt[512];
    if (!cgroup_mount(root, v2 ? NULL : "memory", mnt, sizeof mnt)) return false;
    const char *usage = v2 ? "memory.current" : "memory.usage_in_bytes";
    const int k = snprintf(cg->dir, sizeof cg->dir, "%s%s", mnt, strcmp(cgpath, "/") ? cgpath : "");
    if (k < 0 || (size_t)k >= sizeof cg->dir || !cgroup_has(cg->dir, usage)) snprintf(cg->dir, sizeof cg->dir, "%s", mnt);
    if (!cgroup_has(cg->dir, usage)) return false;
    cg->top_len = strlen(mnt);
    cg->version = v2 ? 2 : 1;
    return true;
}

/* /proc/self/cgroup names the process's cgroup per hierarchy: "N:memory:/path"
 * for v1's memory controller, "0::/path" for cgroup2. */
bool memtree_find(const char *root, memtree_cgroup *out) {
    memset(out, 0, sizeof *out);
    char v1[1024], v2[1024];
    if (!cgroup_self(root, "memory", v1, v2, sizeof v1)) return false;
    if (*v1 && settle(root, false, v1, out)) return true;
    if (*v2 && settle(root, true, v2, out)) return true;
    memset(out, 0, sizeof *out);
    return false;
}

void memtree_fds_close(memtree_fds *fds) {
    for (int i = 0; fds && i < fds->n; i++) close(fds->e[i].fd);
    if (fds) fds->n = 0;
}

static void fds_drop(memtree_fds *fds, int i) {
    close(fds->e[i].fd);
    fds->e[i] = fds->e[--fds->n];
}

/* path's text into buf, through a kept descriptor when fds is given; a
 * descriptor that fails (its cgroup removed) is dropped and the path read
 * afresh. Files that are absent are not kept. */
static bool text_of(memtree_fds *fds, const char *path, char *buf, size_t n) {
    if (!fds) return sysfile_text(path, buf, n);
    int i = 0;
    while (i < fds->n && strcmp(fds->e[i].path, path)) i++;
    if (i == fds->n) {
        const int fd = i < MEMTREE_FDS && strlen(path) < sizeof fds->e[i].path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (fd < 0) return sysfile_text(path, buf, n);
        fds->e[i].fd = fd;
        strcpy(fds->e[i].path, path);
        fds->n++;
    }
    const ssize_t got = pread(fds->e[i].fd, buf, n - 1, 0);
    if (got <= 0) {
        fds_drop(fds, i);
        return sysfile_text(path, buf, n);
    }
    buf[got] = '\0';
    return true;
}

static uint64_t read_u64(const char *dir, const char *file, memtree_fds *fds) {
    char path[1200], text[64];
    uint64_t v = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) return 0;
    return text_of(fds, path, text, sizeof text) && sysfile_u64_text(text, &v) ? v : 0; /* v2's "max": 0, no limit */
}

/* The file pages on the LRU lists of the folder's memory.stat (v1's
 * hierarchical total_ lines, v2's own, which count the subtree); 0 when
 * they cannot be read, which overstates the pressure rather than hides it. */
static uint64_t file_pages(const char *dir, int version, memtree_fds *fds) {
    char path[1200], text[8192];
    uint64_t active = 0, inactive = 0;
    if (snprintf(path, sizeof path, "%s/memory.stat", dir) >= (int)sizeof path) return 0;
    if (!text_of(fds, path, text, sizeof text)) return 0;
    const bool v1 = version == 1;
    if (!sysfile_value(text, v1 ? "total_active_file" : "active_file", &active)) active = 0;
    if (!sysfile_value(text, v1 ? "total_inactive_file" : "inactive_file", &inactive)) inactive = 0;
    return active + inactive;
}

static double share(uint64_t limit, uint64_t usage, uint64_t file) {
    return limit ? (double)(usage > file ? usage - file : 0) / (double)limit : 0.0;
}

/* One folder's figures into f, when a limit applies there. */
static void walk_one(const char *dir, int version, bool with_file, memtree_fds *fds, memtree_figures *f) {
    const uint64_t limit = read_u64(dir, version == 1 ? "memory.limit_in_bytes" : "memory.max", fds);
    if (!limit || limit >= (1ull << 60)) return; /* none: v2 "max", v1's "unlimited" near 2^63 */
    const uint64_t usage = read_u64(dir, version == 1 ? "memory.usage_in_bytes" : "memory.current", fds);
    const uint64_t file = with_file ? file_pages(dir, version, fds) : 0, hard = usage > file ? usage - file : 0;
    const uint64_t room = usage < limit ? limit - usage : 0, head = hard < limit ? limit - hard : 0;
    if (!f->limited || share(limit, usage, file) > share(f->limit, f->usage, f->file)) {
        f->limit = limit;
        f->usage = usage;
        f->file = file;
    }
    f->room = !f->limited || room < f->room ? room : f->room;
    f->headroom = !f->limited || head < f->headroom ? head : f->headroom;
    f->limited = true;
}

memtree_figures memtree_walk(const memtree_cgroup *cg, bool with_file, memtree_fds *fds) {
    memtree_figures f = {.room = UINT64_MAX, .headroom = UINT64_MAX};
    if (!cg || !cg->version) return f;
    char dir[sizeof cg->dir];
    memcpy(dir, cg->dir, sizeof dir);
    for (;;) {
        walk_one(dir, cg->version, with_file, fds, &f);
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < cg->top_len) break;
        *slash = '\0';
    }
    return f;
}

bool memtree_psi_path(const char *root, const memtree_cgroup *cg, char *buf, size_t n) {
    char text[512];
    if (memtree_path(buf, n, root, "/proc/pressure/memory") && sysfile_text(buf, text, sizeof text)) return true;
    if (!cg || cg->version != 2) return false;
    const int k = snprintf(buf, n, "%s/memory.pressure", cg->dir);
    return k >= 0 && (size_t)k < n && sysfile_text(buf, text, sizeof text);
}

/* The system's figures from meminfo (kB), as plat_mem_reading describes. */
static bool system_figures(const char *root, memtree_fds *fds, plat_mem_reading *out) {
    char path[1024], text[4096];
    uint64_t total = 0, free_kb = 0, avail = 0;
    if (!memtree_path(path, sizeof path, root, "/proc/meminfo") || !text_of(fds, path, text, sizeof text)) return false;
    if (!sysfile_value(text, "MemTotal", &total) || !sysfile_value(text, "MemFree", &free_kb) || !total) return false;
    if (!sysfile_value(text, "MemAvailable", &avail)) avail = free_kb; /* before Linux 3.14: free pages only */
    out->limit = total * 1024;
    out->usage = free_kb < total ? (total - free_kb) * 1024 : 0;
    out->file = avail > free_kb ? (avail - free_kb) * 1024 : 0;
    if (out->file > out->usage) out->file = out->usage;
    return true;
}

static void read_psi(const char *psi_path, memtree_fds *fds, plat_mem_reading *out) {
    char text[512];
    if (!psi_path || !*psi_path || !text_of(fds, psi_path, text, sizeof text)) return;
    out->psi_some_avg10 = sysfile_avg10(text, "some");
    out->psi_some_total_us = sysfile_psi_total(text, "some");
    out->psi_full_total_us = sysfile_psi_total(text, "full");
    out->psi_full_avg10 = sysfile_avg10(text, "full");
    out->psi_known = out->psi_some_avg10 >= 0;
    if (!out->psi_known) out->psi_some_avg10 = 0;
    if (out->psi_full_avg10 < 0) out->psi_full_avg10 = 0; /* no "full" line: read as none */
}

void memtree_read(const char *root, const memtree_cgroup *cg, const char *psi_path, memtree_fds *fds,
                  plat_mem_reading *out) {
    memset(out, 0, sizeof *out);
    out->psi_some_total_us = out->psi_full_total_us = -1;
    out->cgroup_version = cg ? cg->version : 0;
    if (system_figures(root, fds, out)) out->scope = PLAT_MEM_SCOPE_SYSTEM;
    const memtree_figures f = memtree_walk(cg, true, fds);
    if (f.limited && (out->scope == PLAT_MEM_SCOPE_NONE ||
                      share(f.limit, f.usage, f.file) >= share(out->limit, out->usage, out->file))) {
        out->scope = PLAT_MEM_SCOPE_CGROUP;
        out->limit = f.limit;
        out->usage = f.usage;
        out->file = f.file;
    }
    read_psi(psi_path, fds, out);
}
