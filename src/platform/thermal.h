/*
 * platform/thermal — how hot the device runs and how near it is to being
 * slowed for it, for a thermal watcher to come (nothing acts on it yet).
 *
 * Each thermal zone has a temperature and trip points, each a temperature
 * and a type: at a passive trip the kernel (or the vendor's thermal HAL)
 * lowers the clocks of the cores the zone cools; active turns a fan on;
 * hot and critical come before shutting down. A phone's clocks dropping
 * 30-40 % after 15-20 s of inference (issue 38) is its passive trips being
 * passed. So the reading says, besides the hottest zone, the least headroom
 * of any zone to its first passive trip (the lowest passive trip
 * temperature of that zone), which turns negative once the trip is passed.
 *
 * Linux (platform/linux/platform.c) reads every zone the kernel exports
 * under /sys/class/thermal: thermal_zoneN/temp, type, trip_point_K_temp
 * and trip_point_K_type. The POSIX fallback, and a Linux without zones,
 * report known false.
 */
#ifndef OCTO_PLATFORM_THERMAL_H
#define OCTO_PLATFORM_THERMAL_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    PLAT_TRIP_OTHER = 0, /* a type this reader does not know */
    PLAT_TRIP_ACTIVE = 1,
    PLAT_TRIP_PASSIVE = 2,
    PLAT_TRIP_HOT = 3,
    PLAT_TRIP_CRITICAL = 4,
} plat_trip_type;

typedef struct {
    int64_t millicelsius;
    plat_trip_type type;
} plat_thermal_trip;

#define PLAT_THERMAL_MAX_TRIPS 12
#define PLAT_THERMAL_MAX_ZONES 64

typedef struct {
    int id;                /* N of thermal_zoneN */
    char type[24];         /* the zone's type file ("x86_pkg_temp", "cpu-thermal"); "" when absent */
    int64_t millicelsius;  /* its temperature */
    int n_trips;           /* its trip points, in the kernel's order (at most PLAT_THERMAL_MAX_TRIPS) */
    plat_thermal_trip trips[PLAT_THERMAL_MAX_TRIPS];
} plat_thermal_zone;

typedef struct {
    bool known;
    int n_zones;                  /* zones that gave a reading */
    int64_t hottest_millicelsius; /* the highest of their temperatures */
    int hottest_zone;             /* its id */
    /* The zone nearest its first passive trip. A passive trip at or below
     * 0 degrees is taken as unset (x86_pkg_temp's two writable trips read 0
     * until a daemon sets them). passive_known false: no zone has one. */
    bool passive_known;
    int passive_zone;                       /* its id */
    int64_t passive_headroom_millicelsius;  /* trip - temperature: the least of any zone's; < 0 once passed */
    bool passive_passed;                    /* headroom <= 0: the kernel cools at a temperature at or past the trip */
    int n_kept;                             /* zones[0, n_kept): the first PLAT_THERMAL_MAX_ZONES of them */
    plat_thermal_zone zones[PLAT_THERMAL_MAX_ZONES];
} plat_thermal;

plat_thermal plat_thermal_read(void);
/* The same read from ROOT/thermal_zoneN/ folders (a test's fake tree). */
plat_thermal plat_thermal_read_at(const char *root);
/* "passive", "active", "hot", "critical", "other". */
const char *plat_trip_type_name(plat_trip_type t);

#endif
