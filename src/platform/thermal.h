/*
 * platform/thermal — how hot the device runs, for a thermal watcher to come
 * (nothing acts on it yet).
 *
 * Linux (platform/linux/thermal.c) reads every thermal zone the kernel
 * exports under sysfs and reports the hottest. The POSIX fallback, and a
 * Linux without zones, report known false.
 */
#ifndef OCTO_PLATFORM_THERMAL_H
#define OCTO_PLATFORM_THERMAL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    bool known;
    int n_zones;                    /* zones that gave a reading */
    int64_t hottest_millicelsius;   /* the highest of their temperatures */
} plat_thermal;

plat_thermal plat_thermal_read(void);
/* The same read from ROOT/thermal_zoneN/temp files (a test's fake tree). */
plat_thermal plat_thermal_read_at(const char *root);

#endif
