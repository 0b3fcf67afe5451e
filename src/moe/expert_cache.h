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
 *
 * With prefetch on, MOE_IO_THREADS I/O threads read what moe_cache_fetch() asks for
 * while the forward pass computes: the layer's routed experts (so the
 * second is read while the first computes) and the next layer's predicted
 * ones. A lookup that finds its expert still being read waits for it. The
 * experts named since the last moe_cache_new_layer() (routed or predicted)
 * are protected: nothing read ahead evicts them, and a lookup evicts them
 * only when every other slot is in use.
 */
#ifndef OCTO_MOE_EXPERT_CACHE_H
#define OCTO_MOE_EXPERT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/experts_iface.h"
#include "moe/readahead.h"

/* Reads in flight at once: a flash device serves several faster than one
 * after another (and one read's latency hides behind the others'). */
#define MOE_IO_THREADS 2

/* The 2-bit copies (moe/int2.h). AUTO: on where the sidecar exists with a
 * measured cost of at most MOE_INT2_KLD_AUTO and the budget cannot hold
 * every expert; ON: always (the sidecar made at load if missing or stale);
 * ALL: every low-weight lookup served by its copy, never promoted (the
 * worst case, to measure the cost). */
typedef enum { MOE_INT2_OFF = 0, MOE_INT2_AUTO, MOE_INT2_ON, MOE_INT2_ALL } moe_int2_mode;

typedef struct {
    uint64_t budget_bytes; /* 0 (and share 0), or more than every expert: room for all of them */
    double share;          /* > 0 (budget_bytes 0): that share of the experts (by count: of their bytes, where
                              slots are as large as the experts; a slot also holds the blocks around them) */
    int policy;            /* a row of moe/policy_table.c (0: the default, lhu) */
    moe_prefetch prefetch; /* off: no I/O thread, every miss read when looked up (moe/readahead.h) */
    double predict_margin; /* moe/predict.h: name extra experts within this many sd of the k-th (< 0: none) */
    const char *trace;     /* a file to write one line per token and MoE layer to (NULL: none) */
    moe_int2_mode int2;
} moe_cache_config;

/* Room for every expert, lhu, read-ahead auto, the default prediction margin, 2-bit copies auto. */
moe_cache_config moe_cache_config_default(void);

/* What a lookup found. */
typedef enum { MOE_HIT = 0, MOE_MISS, MOE_INT2 } moe_status; /* INT2: served by its 2-bit copy */

typedef struct {
    uint64_t hits, misses;
    uint64_t bytes_read;     /* from the file, ahead or on demand */
    uint64_t stall_ns;       /* time lookups waited on reads */
    uint64_t evictions;
    uint64_t prefetched, prefetch_bytes; /* read ahead of their layer (moe_cache_fetch, ahead) */
    uint64_t prefetch_used;  /* ... looked up before they left */
    uint64_t prefetch_in_time, prefetch_late; /* lookups that found one ready / still reading */
    bool prefetching;        /* the I/O thread runs */
    bool direct;             /* reads bypass the page cache (O_DIRECT) */
    int slots;               /* the slots the budget allows now */
    int slots_used;          /* slots holding memory */
    uint64_t slot_bytes;     /* one slot: the largest expert, and the blocks around its matrices */
    uint64_t expert_bytes;   /* every expert of the model */
    bool int2;               /* 2-bit copies in use */
    uint64_t int2_loads;     /* copies read (their bytes are in bytes_read) */
    uint64_t int2_served;    /* lookups a copy served */
    uint64_t int2_promotions;/* copies replaced by the full expert after they were used again */
    uint64_t int2_errors;    /* copies that failed their check (the expert was read whole instead) */
    char int2_why[160];      /* why the copies are used or not */
} moe_cache_stats;

typedef struct moe_cache moe_cache;

/* The bytes of one expert of a layer (gate + up + down), of the largest, and of all of them. */
uint64_t moe_expert_bytes(const model *m, int layer);
uint64_t moe_expert_bytes_max(const model *m);
uint64_t moe_expert_bytes_all(const model *m);
/* The bytes one slot takes: the largest expert, and the blocks around its
 * matrices that direct reads need (expert_read.h). */
uint64_t moe_cache_slot_bytes(const model *m);

/* path: the model's file. The pool holds budget / slot bytes experts, at
 * least n_expert_used (the smallest cache a token can run with). */
err_code moe_cache_new(const model *m, const char *path, const moe_cache_config *c, moe_cache **out, err_t *err);
void moe_cache_free(moe_cache *c);
/* The expert's matrices in its slot, read first on a miss; ERR_IO (the
 * file unreadable) or ERR_TRUNCATED (a short read) leave the cache as it
 * was, without the expert. low: a low-weight lookup (no token chose the
 * expert first), which with 2-bit copies on a miss reads the copy; a copy
 * looked up again is promoted (by an I/O thread after this layer, else at
 * once). */
err_code moe_cache_get(moe_cache *c, int layer, int expert, bool low, model_mat mats[3], moe_status *status,
                       err_t *err);
/* A new layer's lookups begin: the experts named before are no longer
 * protected, and reads ahead still queued for other layers are called off. */
void moe_cache_new_layer(moe_cache *c, int layer);
/* Protect these experts of a layer and, with prefetch on, start reading the
 * missing ones on the I/O thread (ahead: for a later layer than the one
 * computing, counted as prefetches). Reads that no slot is free for are
 * skipped: the lookup reads them. With 2-bit copies on, a token's routed
 * experts after its first are read as copies. */
void moe_cache_fetch(moe_cache *c, int layer, const int32_t *experts, int n, bool ahead);
/* The arbiter moves the budget while the model runs (runtime/plan.h): at
 * most bytes of slots from now on (never fewer than a token's experts),
 * the lowest-ranked experts evicted and their memory freed at once. */
void moe_cache_set_budget(moe_cache *c, uint64_t bytes);
void moe_cache_stats_get(moe_cache *c, moe_cache_stats *out);

#endif
