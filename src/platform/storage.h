/*
 * platform/storage — the kind of storage a directory lives on, which tells
 * the plan whether spilling the KV cache there pays (runtime/device.h).
 *
 * Linux (platform/linux/storage.c) asks the file system's type (tmpfs and
 * ramfs are memory) and then the block device under the directory in
 * sysfs: an eMMC (mmcblk*), a rotating disk, NVMe, or another non-rotating
 * disk. The POSIX fallback cannot tell and says PLAT_STORAGE_UNKNOWN.
 */
#ifndef OCTO_PLATFORM_STORAGE_H
#define OCTO_PLATFORM_STORAGE_H

typedef enum {
    PLAT_STORAGE_UNKNOWN = 0,
    PLAT_STORAGE_NVME,
    PLAT_STORAGE_UFS,
    PLAT_STORAGE_SSD,   /* a non-rotating block device of another kind (SATA, virtio, ...) */
    PLAT_STORAGE_EMMC,
    PLAT_STORAGE_HDD,
    PLAT_STORAGE_RAM,   /* tmpfs / ramfs */
} plat_storage;

/* The storage dir lives on; PLAT_STORAGE_UNKNOWN when it cannot be told
 * (an overlay, a network file system, no dir). */
plat_storage plat_storage_probe(const char *dir);

#endif
