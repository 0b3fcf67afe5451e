/*
 * platform/thermal — see platform/thermal.h: the zones read from a tree of
 * thermal_zoneN/temp files (millidegrees Celsius, possibly negative), until
 * 8 numbers in a row are missing. Every system has the reader (a test gives
 * it a fake tree); only Linux points it at the kernel's.
 */
#include "platform/thermal.h"

#include "platform/sysfile.h"

#include <stdio.h>
#include <stdlib.h>

plat_thermal plat_thermal_read_at(const char *root) {
    plat_thermal t = {.known = false};
    for (int zone = 0, misses = 0; zone < 256 && misses < 8; zone++) {
        char path[512], text[32];
        snprintf(path, sizeof path, "%s/thermal_zone%d/temp", root, zone);
        char *end = NULL;
        const long long mc = sysfile_text(path, text, sizeof text) ? strtoll(text, &end, 10) : 0;
        if (!end || end == text) { /* absent, or no number (a zone whose sensor fails reads as an error) */
            misses++;
            continue;
        }
        misses = 0;
        if (!t.n_zones++ || mc > t.hottest_millicelsius) t.hottest_millicelsius = mc;
    }
    t.known = t.n_zones > 0;
    return t;
}
