/*
 * plan — what the runtime decides by itself for a model on this device.
 *
 * KV budget (DESIGN.md): available = free memory - the weights (they become
 * resident as they are touched) - a 256 MiB safety margin, and the cache gets
 * 0.6 of it; never more than the whole context at the hot type (a budget
 * that can never bind is no budget), never less than the anchors and the
 * recent window (below that the cache cannot work; the plan says so).
 *
 * Spill (DESIGN.md: only where storage is fast): on when there is a cache
 * directory and its storage is NVMe, UFS or an SSD (device.h), or when the
 * caller forces it; never without a budget to keep.
 */
#ifndef OCTO_RUNTIME_PLAN_H
#define OCTO_RUNTIME_PLAN_H

#include <stdint.h>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/device.h"

#define PLAN_SAFETY_MARGIN (256ull << 20)

typedef enum { PLAN_SPILL_AUTO = 0, PLAN_SPILL_ON = 1, PLAN_SPILL_OFF = -1 } plan_spill;

/* What the plan is made for: the host's probe or a named profile's. */
typedef struct {
    uint64_t mem_available;  /* bytes; 0 = unknown */
    storage_kind storage;    /* of cache_dir */
    const char *cache_dir;   /* NULL = none */
    const char *device;      /* the profile's name, NULL for this host */
    plan_spill spill;
} plan_device;

typedef struct {
    kv_config kv;            /* kv.spill_dir points into the plan_device's cache_dir */
    char kv_reason[192];     /* how the budget was chosen, for inspect / stats */
    char spill_reason[128];  /* whether the cache spills, and why */
} plan;

/* The host, or profile `name` when not NULL (ERR_INVALID_ARG when unknown). */
err_code plan_device_of(const char *name, const char *cache_dir, plan_spill spill, plan_device *out, err_t *err);

/* cfg.budget_bytes 0 = derive it from dev->mem_available. */
plan plan_make(const model *m, int n_ctx, const kv_config *cfg, const plan_device *dev);

#endif
