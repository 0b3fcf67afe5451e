/*
 * platform/thermal — see platform/thermal.h: the zones read from a tree of
 * thermal_zoneN folders (temperatures in millidegrees Celsius, possibly
 * negative), until 8 numbers in a row are missing; each zone's trip points
 * read from 0 up to the first missing one. Every system has the reader (a
 * test gives it a fake tree); only Linux points it at the kernel's.
 */
#include "platform/thermal.h"

#include "platform/sysfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *plat_trip_type_name(plat_trip_type t) {
    static const char *const names[] = {"other", "active", "passive", "hot", "critical"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "other";
}

static plat_trip_type trip_type_of(const char *text) {
    const size_t n = strcspn(text, " \t\n");
    for (int t = PLAT_TRIP_ACTIVE; t <= PLAT_TRIP_CRITICAL; t++)
        if (strlen(plat_trip_type_name((plat_trip_type)t)) == n && !strncmp(text, plat_trip_type_name((plat_trip_type)t), n))
            return (plat_trip_type)t;
    return PLAT_TRIP_OTHER;
}

/* The signed number at the start of path's text; false when absent or none
 * (a zone whose sensor fails reads as an error). */
static bool millicelsius(const char *path, int64_t *out) {
    char text[32], *end = NULL;
    if (!sysfile_text(path, text, sizeof text)) return false;
    const long long v = strtoll(text, &end, 10);
    if (end == text) return false;
    *out = v;
    return true;
}

/* Zone dir's trip points into z, from 0 up to the first without a temperature. */
static void read_trips(const char *dir, plat_thermal_zone *z) {
    char path[600], text[32];
    for (int k = 0; k < PLAT_THERMAL_MAX_TRIPS; k++) {
        plat_thermal_trip *t = &z->trips[k];
        snprintf(path, sizeof path, "%s/trip_point_%d_temp", dir, k);
        if (!millicelsius(path, &t->millicelsius)) return;
        snprintf(path, sizeof path, "%s/trip_point_%d_type", dir, k);
        t->type = sysfile_text(path, text, sizeof text) ? trip_type_of(text) : PLAT_TRIP_OTHER;
        z->n_trips = k + 1;
    }
}

/* Zone id of root into z; false when its temperature does not read. */
static bool read_zone(const char *root, int id, plat_thermal_zone *z) {
    char dir[512], path[600], text[sizeof z->type];
    memset(z, 0, sizeof *z);
    z->id = id;
    snprintf(dir, sizeof dir, "%s/thermal_zone%d", root, id);
    snprintf(path, sizeof path, "%s/temp", dir);
    if (!millicelsius(path, &z->millicelsius)) return false;
    snprintf(path, sizeof path, "%s/type", dir);
    if (sysfile_text(path, text, sizeof text)) snprintf(z->type, sizeof z->type, "%.*s", (int)strcspn(text, "\n"), text);
    read_trips(dir, z);
    return true;
}

/* z's temperature and first passive trip into the summary of t. */
static void account(plat_thermal *t, const plat_thermal_zone *z) {
    if (!t->n_zones++ || z->millicelsius > t->hottest_millicelsius) {
        t->hottest_millicelsius = z->millicelsius;
        t->hottest_zone = z->id;
    }
    bool has = false;
    int64_t trip = 0;
    for (int k = 0; k < z->n_trips; k++) {
        const plat_thermal_trip *p = &z->trips[k];
        if (p->type != PLAT_TRIP_PASSIVE || p->millicelsius <= 0 || (has && p->millicelsius >= trip)) continue;
        trip = p->millicelsius;
        has = true;
    }
    if (!has || (t->passive_known && trip - z->millicelsius >= t->passive_headroom_millicelsius)) return;
    t->passive_known = true;
    t->passive_zone = z->id;
    t->passive_headroom_millicelsius = trip - z->millicelsius;
    t->passive_passed = t->passive_headroom_millicelsius <= 0;
}

plat_thermal plat_thermal_read_at(const char *root) {
    plat_thermal t = {.known = false};
    plat_thermal_zone z;
    for (int id = 0, misses = 0; id < 256 && misses < 8; id++) {
        if (!read_zone(root, id, &z)) { /* absent, or a sensor that fails; numbering may have gaps */
            misses++;
            continue;
        }
        misses = 0;
        account(&t, &z);
        if (t.n_kept < PLAT_THERMAL_MAX_ZONES) t.zones[t.n_kept++] = z;
    }
    t.known = t.n_zones > 0;
    return t;
}
