/*
 * platform/linux/storage — see platform/storage.h: statfs for memory file
 * systems, then /sys/dev/block/MAJOR:MINOR (a link to the device's sysfs
 * folder) for its name and queue/rotational.
 */
#define _GNU_SOURCE
#include "platform/storage.h"

#include "platform/sysfile.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int read_int(const char *path) {
    uint64_t v = 0;
    return sysfile_u64(path, &v) && v <= 1000000 ? (int)v : -1;
}

plat_storage plat_storage_probe(const char *dir) {
    struct statfs fs;
    if (!dir || statfs(dir, &fs)) return PLAT_STORAGE_UNKNOWN;
    if (fs.f_type == 0x01021994 /* TMPFS_MAGIC */ || fs.f_type == 0x858458f6 /* RAMFS_MAGIC */) return PLAT_STORAGE_RAM;
    struct stat st;
    if (stat(dir, &st)) return PLAT_STORAGE_UNKNOWN;
    char link[64], real[PATH_MAX], q[PATH_MAX + 32];
    snprintf(link, sizeof link, "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
    if (!realpath(link, real)) return PLAT_STORAGE_UNKNOWN; /* overlay, network, ...: no block device to ask */
    /* a partition has no queue/: its disk is the parent directory */
    snprintf(q, sizeof q, "%s/queue/rotational", real);
    if (access(q, R_OK)) {
        char *slash = strrchr(real, '/');
        if (slash) *slash = 0;
        snprintf(q, sizeof q, "%s/queue/rotational", real);
    }
    const char *name = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    if (!strncmp(name, "mmcblk", 6)) return PLAT_STORAGE_EMMC;
    const int rot = read_int(q);
    if (rot == 1) return PLAT_STORAGE_HDD;
    if (rot != 0) return PLAT_STORAGE_UNKNOWN;
    if (!strncmp(name, "nvme", 4)) return PLAT_STORAGE_NVME;
    return PLAT_STORAGE_SSD;
}
