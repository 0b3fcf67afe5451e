/*
 * platform/linux/platform — the Linux room's small answers: its name and
 * the kernel's thermal zones (read by platform/thermal.c's reader).
 */
#include "platform/platform.h"
#include "platform/thermal.h"

const char *plat_name(void) { return "linux"; }

plat_thermal plat_thermal_read(void) { return plat_thermal_read_at("/sys/class/thermal"); }
