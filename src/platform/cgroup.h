/*
 * platform/cgroup — where the process's cgroup is, for one controller: its
 * path in /proc/self/cgroup ("N:memory:/app" for a v1 hierarchy, "0::/app"
 * for cgroup2) and the hierarchy's mount point in /proc/self/mounts. The
 * memory reader (platform/memtree.c) and the CPU budget reader
 * (platform/cpuquota.c) share it. Every path takes a root prefix ("" for
 * the system's own files), so tests read fake trees with the same code.
 */
#ifndef OCTO_PLATFORM_CGROUP_H
#define OCTO_PLATFORM_CGROUP_H

#include <stdbool.h>
#include <stddef.h>

/* The process's cgroup paths from root/proc/self/cgroup: v1's for the
 * hierarchy whose controllers include controller (v1, "" when none) and
 * cgroup2's (v2, "" when none); false when the file cannot be read. */
bool cgroup_self(const char *root, const char *controller, char *v1, char *v2, size_t n);

/* The mount point of the cgroup2 hierarchy (controller NULL) or of the v1
 * hierarchy with controller, root prefix included, into out; false when
 * there is none. Lines of any length are read whole. */
bool cgroup_mount(const char *root, const char *controller, char *out, size_t n);

/* file exists in folder dir. */
bool cgroup_has(const char *dir, const char *file);

#endif
