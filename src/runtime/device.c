/*
 * device — see device.h.
 */
#define _GNU_SOURCE
#include "device.h"

#include "core/sysfile.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define GIB (1ull << 30)

/* DESIGN.md's phones. The OS reserve is what we assume the system and the
 * apps around keep; an app on these phones gets about half its RAM. */
static const device_profile PROFILES[] = {
    {"iphone-15-pro", 8 * GIB, 4 * GIB, STORAGE_NVME},
    {"iphone-14", 6 * GIB, 3 * GIB, STORAGE_NVME},
    {"pixel-8", 8 * GIB, 4 * GIB, STORAGE_UFS},
    {"galaxy-s24", 8 * GIB, 4 * GIB, STORAGE_UFS},
    {"android-4gb-emmc", 4 * GIB, 2 * GIB, STORAGE_EMMC},
};

const device_profile *device_find(const char *name) {
    for (size_t i = 0; name && i < sizeof PROFILES / sizeof *PROFILES; i++)
        if (!strcmp(name, PROFILES[i].name)) return &PROFILES[i];
    return NULL;
}

const char *device_names(void) { return "iphone-15-pro, iphone-14, pixel-8, galaxy-s24, android-4gb-emmc"; }

const char *storage_name(storage_kind s) {
    switch (s) {
    case STORAGE_NVME: return "nvme";
    case STORAGE_UFS: return "ufs";
    case STORAGE_SSD: return "ssd";
    case STORAGE_EMMC: return "emmc";
    case STORAGE_HDD: return "hdd";
    case STORAGE_RAM: return "ram";
    default: return "unknown";
    }
}

bool storage_fast(storage_kind s) { return s == STORAGE_NVME || s == STORAGE_UFS || s == STORAGE_SSD; }

static int read_int(const char *path) {
    uint64_t v = 0;
    return sysfile_u64(path, &v) && v <= 1000000 ? (int)v : -1;
}

storage_kind storage_probe(const char *dir) {
    struct statfs fs;
    if (!dir || statfs(dir, &fs)) return STORAGE_UNKNOWN;
    if (fs.f_type == 0x01021994 /* TMPFS_MAGIC */ || fs.f_type == 0x858458f6 /* RAMFS_MAGIC */) return STORAGE_RAM;
    struct stat st;
    if (stat(dir, &st)) return STORAGE_UNKNOWN;
    char link[64], real[PATH_MAX], q[PATH_MAX + 32];
    snprintf(link, sizeof link, "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
    if (!realpath(link, real)) return STORAGE_UNKNOWN; /* overlay, network, ...: no block device to ask */
    /* a partition has no queue/: its disk is the parent directory */
    snprintf(q, sizeof q, "%s/queue/rotational", real);
    if (access(q, R_OK)) {
        char *slash = strrchr(real, '/');
        if (slash) *slash = 0;
        snprintf(q, sizeof q, "%s/queue/rotational", real);
    }
    const char *name = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    if (!strncmp(name, "mmcblk", 6)) return STORAGE_EMMC;
    const int rot = read_int(q);
    if (rot == 1) return STORAGE_HDD;
    if (rot != 0) return STORAGE_UNKNOWN;
    if (!strncmp(name, "nvme", 4)) return STORAGE_NVME;
    return STORAGE_SSD;
}
