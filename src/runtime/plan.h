/*
 * plan — what the runtime decides by itself for a model on this device.
 *
 * KV budget (DESIGN.md): available = free memory - the weights (they become
 * resident as they are touched) - a 256 MiB safety margin, and the cache gets
 * 0.6 of it; never more than the whole context at the hot type (a budget
 * that can never bind is no budget), never less than the anchors and the
 * recent window (below that the cache cannot work; the plan says so).
 *
 * A draft model's cache lives in the same budget (DESIGN.md: one budget).
 * With a draft, its weights are reserved beside the target's, and the
 * budget (derived or given) is shared in proportion to the two models'
 * bytes per cached token, in whole tokens: both caches then keep the same
 * span of context. The draft's cache takes the target's tiers and policy;
 * it never spills (one spill file per model, and a draft that lost an entry
 * only proposes worse, never wrongly).
 *
 * Self-draft (speculative decoding's third choice, after a draft given and
 * one found beside the model): a copy of the target at low precision, made
 * at load, when it pays and fits. It pays when the target is memory-bound
 * (at least PLAN_SELF_MIN_BYTES read per token) and the copy reads at most
 * PLAN_SELF_MAX_COST of its bytes per token: with acceptance 0.8 and k = 4,
 * (1 - a^5) / ((1 - a)(1 + 4c)) is 1.6x at c = 0.28 (a Q4_0 copy of F16) but
 * 1.1x at c = 0.53 (of Q8_0). It fits when the weights, the copy, the KV
 * budget and the safety margin are within free memory.
 *
 * Cores. Where the CPU has cores of different capacity (core/threadpool.h:
 * cpu_classes), the model's threads run on the performance cores and a
 * draft model's on the efficiency cores, in a pool of its own: drafting is
 * many small sequential passes that a little core runs at a fraction of the
 * power, and verification is the batch that needs the big ones. A thread
 * count asked for beyond the performance cores is not placed. With one
 * class of cores nothing is placed, and the draft shares the model's pool.
 *
 * Experts (a Mixture-of-Experts model): experts are not resident weights;
 * they live in the expert cache (moe/expert_cache.h), read from the file as
 * tokens need them. The weights the plan reserves are the rest (attention,
 * norms, routers, embeddings, output, shared experts). What free memory
 * leaves after those and a margin (the safety margin, or a quarter of free
 * memory where that is less: a small device has no 256 MiB to spare, and
 * the forward pass's buffers and the mapped weights' pages must still fit)
 * holds every expert and the whole KV cache, or it is a pool the two
 * share: the KV cache takes what it uses (within its own budget), the
 * expert cache the rest, at least a token's experts. Before each pass the
 * session gives the expert cache what the KV cache leaves (session.h), so
 * as the context grows the expert cache shrinks first, and the KV cache
 * evicts only at its own budget. A draft model's weights and its whole KV
 * cache are set aside before the pool. The memory free comes from the
 * device, the process's cgroup limit included (platform/mem.h).
 *
 * Weights (a dense model's, or an MoE model's resident ones): re-laid at
 * load for the packed kernels (core/kernels/packed.h) when they fit, i.e. they and
 * the safety margin are within free memory; the re-laid pages are the
 * process's own and cannot be dropped. When they do not fit they stay in the
 * read-only mapping in the file's layout: slower matmuls, but pages the OS
 * reads back from the file instead of killing the process, so a model larger
 * than memory runs. A deploy bundle's weights are packed in the file and
 * mapped read-only either way.
 *
 * Spill (DESIGN.md: only where storage is fast): on when there is a cache
 * directory and its storage is NVMe, UFS or an SSD (device.h), or when the
 * caller forces it; never without a budget to keep.
 */
#ifndef OCTO_RUNTIME_PLAN_H
#define OCTO_RUNTIME_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "moe/expert_cache.h"
#include "runtime/device.h"

#define PLAN_SAFETY_MARGIN (256ull << 20)
#define PLAN_SELF_MIN_BYTES (256ull << 20)
#define PLAN_SELF_MAX_COST 0.35

typedef enum { PLAN_SPILL_AUTO = 0, PLAN_SPILL_ON = 1, PLAN_SPILL_OFF = -1 } plan_spill;

/* Where the threads run (see Cores above). */
typedef struct {
    int threads;       /* the model's pool */
    bool on_perf;      /* its workers on the performance cores only */
    int draft_threads; /* 0: a draft computes on the model's pool; else on a pool of the efficiency cores */
    char reason[160];
} plan_cores;

/* threads_asked 0 = cpu_classes_threads(cc). */
plan_cores plan_place(const cpu_classes *cc, int threads_asked, bool has_draft);

/* What the plan is made for: the host's probe or a named profile's. */
typedef struct {
    uint64_t mem_available;  /* bytes; 0 = unknown */
    storage_kind storage;    /* of cache_dir */
    const char *cache_dir;   /* NULL = none */
    const char *device;      /* the profile's name, NULL for this host */
    int n_perf, n_eff;       /* the profile's cores (0: this host's, as cpu_classes reads them) */
    plan_spill spill;
} plan_device;

typedef struct {
    kv_config kv;            /* kv.spill_dir points into the plan_device's cache_dir */
    kv_config draft_kv;      /* the draft model's cache (plan_make with a draft) */
    char kv_reason[256];     /* how the budget was chosen, for inspect / stats */
    char spill_reason[128];  /* whether the cache spills, and why */
    char spec_reason[256];   /* the proposer speculative decoding uses, and why */
    moe_cache_config moe;    /* an MoE model's expert cache (plan_experts): its largest size */
    uint64_t moe_shared;     /* bytes it shares with the KV cache, which takes what it uses first (0: none) */
    char moe_reason[256];    /* its size, and why */
} plan;

/* The host, or profile `name` when not NULL (ERR_INVALID_ARG when unknown). */
err_code plan_device_of(const char *name, const char *cache_dir, plan_spill spill, plan_device *out, err_t *err);

/* A model's shape as its KV cache sees it (the kv layer knows no model). */
kv_shape plan_kv_shape(const model_hparams *hp);

/* cfg.budget_bytes 0 = derive it from dev->mem_available; given, it is the
 * budget of both caches together. draft NULL = no draft model. */
plan plan_make(const model *m, const model *draft, int n_ctx, const kv_config *cfg, const plan_device *dev);

/* Size the expert cache of an MoE model (see Experts above), from the
 * caller's config: a budget or share given is kept. */
void plan_experts(plan *p, const model *m, const model *draft, int n_ctx, const moe_cache_config *given,
                  const plan_device *dev);

/* The KV memory a cache of k cannot do with less of, for a context of
 * n_ctx: the floor (anchors and recent window, kv_budget_floor) when its
 * policy evicts, else the whole context at the hot type. The one floor the
 * plan, the split among sessions and the fallbacks below all use. */
uint64_t plan_kv_least(const model *m, const kv_config *k, int n_ctx);

/* The least memory the model runs in, its weights mapped read-only (pages
 * read from the file as each layer needs them): plan_kv_least, the largest
 * layer's resident weights (the pages one pass needs at once) and the
 * forward pass's buffers for a batch of PLAN_LEAST_BATCH tokens, a row of
 * logits and a MiB of the rest. */
#define PLAN_LEAST_BATCH 64
uint64_t plan_least_bytes(const model *m, const kv_config *k, int n_ctx);

/* Fallbacks when memory is short (the plan never refuses what can run):
 * a cache that never evicts gets a smaller context, in whole 64-token
 * blocks, when its whole context and plan_least_bytes's rest exceed free
 * memory; why says so. ERR_NOMEM only when even the least memory is more
 * than free memory, naming both. *n_ctx is the context to run with. */
err_code plan_fit(const model *m, const kv_config *k, const plan_device *dev, int *n_ctx, char *why, size_t n,
                  err_t *err);

/* Weights that stay resident: all of them for a dense model, all but the
 * experts for an MoE one. */
uint64_t plan_resident_weights(const model *m);

/* Should the weights be packed at load (see Weights above)? They are when
 * they, the safety margin and kv_least (plan_kv_least) fit in free memory;
 * otherwise they stay mapped and the KV cache keeps its budget. Writes why. */
bool plan_pack_weights(const model *m, const plan_device *dev, uint64_t kv_least, char *why, size_t n);

/* Should a self-draft be made, a copy of copy_bytes that reads
 * copy_token_bytes per token (its own matrices and those it shares with the
 * model: model_requantized_token_bytes)? Writes the reason either way. */
bool plan_self_draft(const model *m, uint64_t copy_bytes, uint64_t copy_token_bytes, const plan *p,
                     const plan_device *dev, char *why, size_t n);

#endif
