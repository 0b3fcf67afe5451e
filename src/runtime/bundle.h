/*
 * bundle — a loaded model with everything it runs with: its threads (placed
 * on the cores that suit them), its tokenizer and chat template, its draft
 * (given, found beside it as NAME.draft.gguf, or a low-precision copy of
 * itself made at load), the plan that shares one KV budget between the two,
 * and the sessions (model + cache) that generate. The public API (octo.c)
 * checks arguments and delegates here; everything the load decides by itself
 * is decided in bundle.c, and explained in the plan's reason strings.
 */
#ifndef OCTO_RUNTIME_BUNDLE_H
#define OCTO_RUNTIME_BUNDLE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "core/threadpool.h"
#include "kv/kv_cache.h"
#include "model/chat_template.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "moe/experts.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "speculative/proposer.h"

/* With no draft given: which draft to look for (the public OCTO_DRAFT_*). */
typedef enum { BUNDLE_DRAFT_NONE = -1, BUNDLE_DRAFT_AUTO = 0, BUNDLE_DRAFT_SELF = 1 } bundle_draft;

typedef struct {
    int n_ctx;                 /* 0: the model's trained context */
    kv_config kv;              /* the cache as asked (plan_make sizes its budget) */
    plan_device dev;
    int n_threads;             /* 0: as many as suit the cores */
    int draft_threads;         /* > 0: a draft gets this many cores of its own (where there is one class of
                                  cores, the last it may use; the model's threads the rest); 0: plan_place */
    const char *draft_model;   /* given: any problem with it fails the load */
    bundle_draft auto_draft;
    moe_cache_config moe;      /* an MoE model's expert cache */
    int n_sessions;            /* conversations the model serves at once (0, 1: one); the KV budget is
                                  planned for all of them and each cache takes its share */
    bool vocab_only;           /* the vocabulary alone (tokenize a file of any architecture, or none) */
    bool plan_only;            /* decide everything, make nothing: no packing, no self-draft copy, no
                                  sessions, no expert store (octo plan, octo deploy) */
    void (*warn)(void *user, const char *msg); /* what the load decided against and why (optional) */
    void *warn_user;
} bundle_options;

typedef struct {
    model *m;
    tpool *pool;               /* the model's threads (and its draft's, with one class of cores) */
    tpool *draft_pool;         /* the draft's threads on the efficiency cores, or NULL (plan_place) */
    plan_cores cores;          /* where the threads run, and why */
    session *s;
    moe_experts *experts;      /* an MoE model's expert store (the target's session uses it), else NULL */
    model *draft_m;            /* the draft model, or NULL */
    session *draft_s;
    bool draft_self;           /* draft_m is the target's own low-precision copy */
    bool draft_not_smaller;    /* draft_m (given) costs as much as the model: prompt scoring only, no speculation */
    char fit_reason[192];      /* a context smaller than asked, and why (plan_fit), or "" */
    char draft_note[320];      /* why, when it is */
    tokenizer *tok;            /* NULL when the file has no usable vocabulary */
    err_t tok_err;             /* why tok is NULL */
    chat_family chat;
    plan plan;                 /* what was decided at load (KV budgets, spill, speculation) */
    char warning[160];         /* the tokenizer's, if any */
    bool weights_packed;       /* packed at load (or would be, plan_only) */
    bool plan_only;            /* loaded with bundle_options.plan_only or vocab_only: s is NULL */
    gguf_ctx *vocab_gguf;      /* vocab_only: the file (m is NULL) */
    model self_shape;          /* plan_only: the self-draft that would be made (gguf set) */
    int n_ctx;
    char weights_reason[224];  /* packed at load, packed in the file, or mapped read-only, and why */
    /* bundle_reserve: the budgets the plan derived from free memory at load (0: given, or none) */
    uint64_t kv_derived, moe_shared_derived;
    int n_sessions;
    uint64_t reserved;         /* memory the plan gives up for what was loaded since (LoRA adapters) */
} bundle;

err_code bundle_load(const char *path, const bundle_options *o, bundle **out, err_t *err);
void bundle_free(bundle *b);
/* A self-draft copy given back under memory pressure (runtime/adapt.h):
 * the caller has freed every session's draft cache; n-gram speculation
 * stands in from the next stream, and plan.spec_reason says why. */
void bundle_forget_self_draft(bundle *b);
/* Memory the plan did not know of at load (LoRA adapters loaded since, in
 * all `bytes`): the budgets derived from free memory give it up, so that
 * the weights, the caches and it stay within what the plan had: each KV
 * cache bytes / n_sessions off its share (never below its floor), the pool
 * an MoE model's expert cache shares with the KV cache `bytes` off (never
 * below a token's experts, session.h). A budget the caller gave stays as
 * given. Called again as the bytes change (0: all back). The open sessions
 * s[0..n) (drafts among them are skipped) take it at once. */
void bundle_reserve(bundle *b, uint64_t bytes, session *const *s, int n);

/* The plan as one flat JSON object (runtime/plan_json.c; the keys are listed
 * in docs/deploy.md); returns the length it needs, like snprintf. */
size_t bundle_plan_json(const bundle *b, const plan_device *dev, char *buf, size_t cap);
/* A deploy bundle's plan.json applied to the options of its load: the context,
 * the KV budget and the expert cache, where the caller left them automatic.
 * *want_draft: whether the plan runs a draft. */
err_code bundle_plan_apply(const char *json, size_t len, bundle_options *o, bool *want_draft, err_t *err);

/* Where a model's own draft would be: NAME.draft.gguf beside NAME.gguf.
 * false when it does not fit in n. */
bool bundle_draft_beside(const char *path, char *out, size_t n);

/* The draft model as the plan sees it: the loaded one, the self-draft that
 * would be made (plan_only), or NULL. */
const model *bundle_draft_shape(const bundle *b);

/* The proposer for a stream: `asked` from the proposer table, or NULL for
 * the automatic choice (the draft model if one is loaded, else n-gram). A
 * proposer that drafts with a model runs the loaded one ("self" when it is
 * the target's copy); asking for one that is not there is an error. */
err_code bundle_proposer(const bundle *b, const proposer_ops *asked, const proposer_ops **out, err_t *err);

/* The KV figures for the stats of one conversation: its cache s, with its
 * draft cache ds's bytes added where the budget is shared (runtime/plan.h). */
typedef struct {
    kv_stats kv;               /* the target's; bytes and bytes_hot/warm/cold include the draft's */
    uint64_t draft_bytes;
    uint64_t budget_bytes;     /* the shared budget, or the full F16 caches when there is none */
} bundle_kv_stats;

/* ds NULL: no draft. */
bundle_kv_stats bundle_kv_stats_of(const bundle *b, const session *s, const session *ds);

/* Another conversation on the loaded model: its own caches (the model's and
 * the draft's, configured as the plan's), the same weights, threads and
 * expert store. The caller frees both with session_free. */
err_code bundle_session_open(const bundle *b, session **s, session **ds, err_t *err);

/* The expert store's figures since the load (all 0 for a dense model). */
experts_stats bundle_experts_stats(const bundle *b);

#endif
