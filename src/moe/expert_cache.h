/*
 * expert_cache — a budgeted pool of slots holding experts read from the
 * model file, the one place experts become resident when offloading.
 *
 * A lookup that finds its expert in a slot is a hit; a miss reads the
 * expert's gate, up and down from the file with pread into a slot (evicting
 * the lowest-ranked expert by the policy, src/moe/policy.h, when the pool is
 * full), drops the pages it read from the page cache so that the file does
 * not stay resident behind the budget's back, and packs the slot for the
 * kernels as the load packs every other matrix: a hit then costs nothing.
 * Slots are allocated on first use, so a load touches no expert. The slot
 * returned by the last lookup is pinned (the forward pass computes an expert
 * right after fetching it).
 */
#ifndef OCTO_MOE_EXPERT_CACHE_H
#define OCTO_MOE_EXPERT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/experts_iface.h"

typedef struct {
    uint64_t budget_bytes; /* 0 (and share 0), or more than every expert: room for all of them */
    double share;          /* > 0 (budget_bytes 0): that share of all the experts' bytes */
    int policy;            /* a row of moe/policy_table.c (0: the default, lhu) */
} moe_cache_config;

typedef struct {
    uint64_t hits, misses;
    uint64_t bytes_read;     /* from the file */
    uint64_t stall_ns;       /* time lookups waited on reads */
    uint64_t evictions;
    int slots, slots_used;
    uint64_t slot_bytes;     /* one slot: the largest expert */
    uint64_t expert_bytes;   /* every expert of the model */
} moe_cache_stats;

typedef struct moe_cache moe_cache;

/* The bytes of the largest expert (gate + up + down) and of all of them. */
uint64_t moe_expert_bytes_max(const model *m);
uint64_t moe_expert_bytes_all(const model *m);

/* path: the model's file. The pool holds budget / slot bytes experts, at
 * least n_expert_used (the smallest cache a token can run with). */
err_code moe_cache_new(const model *m, const char *path, const moe_cache_config *c, moe_cache **out, err_t *err);
void moe_cache_free(moe_cache *c);
/* The expert's matrices in its slot, read first on a miss; ERR_IO (the
 * file unreadable) or ERR_TRUNCATED (a short read) leave the cache as it
 * was, without the expert. */
err_code moe_cache_get(moe_cache *c, int layer, int expert, model_mat mats[3], bool *hit, err_t *err);
void moe_cache_stats_get(const moe_cache *c, moe_cache_stats *out);

#endif
