/*
 * policy — which expert leaves the cache when a new one needs its slot. One
 * file per policy and one row in the table (policy_table.c), as the KV
 * cache's policies are; the cache keeps the bookkeeping (expert_cache.c) and
 * evicts, a policy only ranks a slot from it. The expert in use is pinned by
 * the cache, and a policy may ask for a per-layer floor (a layer holding no
 * more than its share of the slots keeps them).
 */
#ifndef OCTO_MOE_POLICY_H
#define OCTO_MOE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* What the cache knows of a resident expert; times count lookups. */
typedef struct {
    uint64_t first_use; /* when it came into its slot */
    uint64_t last_use;  /* its last lookup (before it came in, too) */
    uint64_t uses;      /* lookups served by this slot since it was filled */
    double heat;        /* every lookup of this expert since the start, each fading by half every
                           MOE_HEAT_HALF_LIFE lookups (lhu): an evicted expert keeps its history */
} moe_slot_use;

#define MOE_HEAT_HALF_LIFE 4096.0

typedef struct {
    const char *name;
    bool layer_floor;   /* keep a layer's slots while it holds at most slots / (2 n_layer) */
    /* Eviction order: the lowest rank goes first. */
    double (*rank)(const moe_slot_use *u, uint64_t now);
} moe_policy;

/* The heat of a slot at time now (decayed since last_use). */
double moe_heat_now(const moe_slot_use *u, uint64_t now);

const moe_policy *moe_policy_get(int id);
int moe_policy_count(void);
/* -1 when no policy has that name */
int moe_policy_from_name(const char *name);

#endif
