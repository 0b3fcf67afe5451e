/*
 * policy — how the KV cache ranks entries for eviction. One file per policy,
 * and one row for it in the table of policies (policy_table.c); the cache
 * owns the scores and does the evicting (kv_evict.c), a policy only says how
 * attention weights fold into an entry's score and which entries go first.
 * Anchors and the newest entries are protected by the cache, not by the
 * policy.
 */
#ifndef OCTO_KV_POLICY_H
#define OCTO_KV_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    POLICY_OBSERVE_NEVER = 0, /* scores unused */
    POLICY_OBSERVE_ALWAYS,    /* every forward's weights */
    POLICY_OBSERVE_PREFILL,   /* the first forward's last snap_window queries only (SnapKV) */
} policy_observe;

typedef struct {
    const char *name;
    bool evicts;              /* false: the cache keeps everything (and has no budget) */
    policy_observe observe;
    /* POLICY_OBSERVE_ALWAYS: only a batch's last recent_multiple x recent_tokens
     * queries matter (0: all of them) */
    int recent_multiple;
    /* An entry's score after a forward whose n_queries queries gave it total weight w. */
    float (*update)(float score, float w, int n_queries, int recent_tokens);
    /* Eviction order: lower goes first. scored: the entry has been observed. */
    double (*rank)(float score, bool scored, int32_t pos);
} kv_policy;

/* A vote cast once, after the prompt (SnapKV, SpecKV: policy_snapkv.c): the
 * score is the vote; voted entries go lowest vote first, unvoted ones after
 * them, oldest first. */
float policy_vote_update(float score, float w, int n_queries, int recent_tokens);
double policy_vote_rank(float score, bool scored, int32_t pos);

/* The policy whose row in the table (policy_table.c) is id; NULL when there is none. */
const kv_policy *kv_policy_get(int id);

#endif
