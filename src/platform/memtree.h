/*
 * platform/memtree — inside the platform room: the process's memory cgroup
 * found in a tree of kernel files, its figures walked up the hierarchy, the
 * system's meminfo and the PSI file. What linux/mem.c (the cgroup room and
 * headroom) and the memory watcher read; every path takes a root prefix
 * ("" for the system's own files), so tests read fake trees with the same
 * code. Every system builds it; only Linux points it at /proc and /sys.
 */
#ifndef OCTO_PLATFORM_MEMTREE_H
#define OCTO_PLATFORM_MEMTREE_H

#include "platform/memwatch.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The process's memory cgroup: the v1 hierarchy with the memory controller
 * when /proc/self/cgroup names one, else cgroup2's. */
typedef struct {
    int version;    /* 1 or 2; 0: none found */
    size_t top_len; /* dir[0, top_len) is the hierarchy's mount point (root prefix included) */
    char dir[1024]; /* the process's cgroup folder, root prefix included */
} memtree_cgroup;

/* False (version 0) when there is none: no line for it in root/proc/self/cgroup,
 * its hierarchy not mounted, or its folder without a usage file (cgroup2's
 * root, or a cgroup2 without the memory controller). A folder missing under
 * the mount point (a container that mounts its own cgroup there) reads as
 * the mount point itself. */
bool memtree_find(const char *root, memtree_cgroup *out);

/* Descriptors kept open between readings (the watcher's): a kernel file
 * read again with pread at offset 0 is made anew, without the path walk,
 * open and close of each read, which cost about half of a poll (measured:
 * some 60 us a file when the poll wakes cold, 25 us kept open). Only for
 * the kernel's files: a fake tree's files are replaced by rename, which a
 * kept descriptor does not see. Zero-initialised = empty. */
#define MEMTREE_FDS 16
typedef struct {
    int n;
    struct {
        int fd;
        char path[1200];
    } e[MEMTREE_FDS];
} memtree_fds;

void memtree_fds_close(memtree_fds *fds);

typedef struct {
    bool limited;                /* a limit applies to the folder or one above it */
    uint64_t limit, usage, file; /* of the limited folder whose unreclaimable share is the highest */
    uint64_t room;               /* the least limit - usage of them (0 where usage passed the limit) */
    uint64_t headroom;           /* the least limit - (usage - file) of them */
} memtree_figures;

/* The figures of cg's folder and each one above it up to the mount point.
 * with_file false: memory.stat is not read (file 0, headroom = room).
 * fds NULL: each file opened and closed. */
memtree_figures memtree_walk(const memtree_cgroup *cg, bool with_file, memtree_fds *fds);

/* root + path into buf; false when it does not fit. */
bool memtree_path(char *buf, size_t n, const char *root, const char *path);

/* The pressure file to read: root/proc/pressure/memory where it reads, else
 * a v2 cgroup's memory.pressure; false when there is neither. */
bool memtree_psi_path(const char *root, const memtree_cgroup *cg, char *buf, size_t n);

/* One reading (events 0): cg's figures (cg may be NULL or version 0) or the
 * system's from root/proc/meminfo, whichever's share is higher, and the
 * PSI of psi_path (NULL or "": none). fds as memtree_walk's. */
void memtree_read(const char *root, const memtree_cgroup *cg, const char *psi_path, memtree_fds *fds,
                  plat_mem_reading *out);

#endif
