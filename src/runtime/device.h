/*
 * device — what the plan needs to know about the device: its memory and
 * whether its storage is fast enough to spill the KV cache to.
 *
 * On the host both are probed: memory from plat_mem_available(), storage
 * from plat_storage_probe() on the cache directory (platform/storage.h: an
 * eMMC or a rotating disk is slow; tmpfs is memory, so spilling there saves
 * nothing). A named profile (octo_client_options.device, `--device`)
 * replaces both with a known phone's, so the plan a phone would get can be
 * seen and tested here.
 */
#ifndef OCTO_RUNTIME_DEVICE_H
#define OCTO_RUNTIME_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "platform/storage.h"

/* The kinds are the platform's (PLAT_STORAGE_*). */
typedef plat_storage storage_kind;

typedef struct {
    const char *name;
    uint64_t ram_bytes;
    uint64_t os_reserve_bytes; /* what the OS and other apps keep (an assumption per platform) */
    storage_kind storage;
    int n_perf, n_eff; /* its cores: performance (prime and big) and efficiency, as cpu_classes splits them */
} device_profile;

/* A known profile by name ("pixel-8", ...), NULL when unknown. */
const device_profile *device_find(const char *name);
/* The names, comma-separated, for error messages and --help. */
const char *device_names(void);

const char *storage_name(storage_kind s);
/* Fast enough that a 64-token block read beats recomputing without it:
 * NVMe, UFS, SSD. Not eMMC, not a rotating disk, not memory, not unknown. */
bool storage_fast(storage_kind s);

#endif
