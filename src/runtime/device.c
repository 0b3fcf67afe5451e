/*
 * device — see device.h.
 */
#include "device.h"

#include <string.h>

#define GIB (1ull << 30)

/* DESIGN.md's phones. The OS reserve is what we assume the system and the
 * apps around keep; an app on these phones gets about half its RAM. */
static const device_profile PROFILES[] = {
    {"iphone-15-pro", 8 * GIB, 4 * GIB, PLAT_STORAGE_NVME},
    {"iphone-14", 6 * GIB, 3 * GIB, PLAT_STORAGE_NVME},
    {"pixel-8", 8 * GIB, 4 * GIB, PLAT_STORAGE_UFS},
    {"galaxy-s24", 8 * GIB, 4 * GIB, PLAT_STORAGE_UFS},
    {"android-4gb-emmc", 4 * GIB, 2 * GIB, PLAT_STORAGE_EMMC},
};

const device_profile *device_find(const char *name) {
    for (size_t i = 0; name && i < sizeof PROFILES / sizeof *PROFILES; i++)
        if (!strcmp(name, PROFILES[i].name)) return &PROFILES[i];
    return NULL;
}

const char *device_names(void) { return "iphone-15-pro, iphone-14, pixel-8, galaxy-s24, android-4gb-emmc"; }

const char *storage_name(storage_kind s) {
    switch (s) {
    case PLAT_STORAGE_NVME: return "nvme";
    case PLAT_STORAGE_UFS: return "ufs";
    case PLAT_STORAGE_SSD: return "ssd";
    case PLAT_STORAGE_EMMC: return "emmc";
    case PLAT_STORAGE_HDD: return "hdd";
    case PLAT_STORAGE_RAM: return "ram";
    default: return "unknown";
    }
}

bool storage_fast(storage_kind s) { return s == PLAT_STORAGE_NVME || s == PLAT_STORAGE_UFS || s == PLAT_STORAGE_SSD; }
