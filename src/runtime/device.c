/*
 * device — see device.h.
 */
#include "device.h"

#include <string.h>

#define GIB (1ull << 30)

/* DESIGN.md's phones. The OS reserve is what we assume the system and the
 * apps around keep; an app on these phones gets about half its RAM. Cores
 * from the makers' specifications: A17 Pro and A15 2 + 4; Tensor G3 1 X3
 * + 4 A715 (performance) + 4 A510; Exynos 2400 1 X4 + 5 A720 + 4 A520; a
 * budget SoC of the 4 GB class (Helio G85) 2 A75 + 6 A55. */
static const device_profile PROFILES[] = {
    {"iphone-15-pro", 8 * GIB, 4 * GIB, PLAT_STORAGE_NVME, 2, 4},
    {"iphone-14", 6 * GIB, 3 * GIB, PLAT_STORAGE_NVME, 2, 4},
    {"pixel-8", 8 * GIB, 4 * GIB, PLAT_STORAGE_UFS, 5, 4},
    {"galaxy-s24", 8 * GIB, 4 * GIB, PLAT_STORAGE_UFS, 6, 4},
    {"android-4gb-emmc", 4 * GIB, 2 * GIB, PLAT_STORAGE_EMMC, 2, 6},
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
