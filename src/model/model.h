/*
 * model — a GGUF file bound to an architecture: hyperparameters from the
 * metadata, and a view of every weight the forward pass uses.
 *
 * Binding checks every tensor the architecture needs for presence, type and
 * shape, so that the forward pass can index weights without checks. Weights
 * are never copied: each model_mat points into the read-only mapping, so
 * loading costs address space, not memory, until the pages are touched.
 *
 * Supported (model/arch.c holds what each one reads and binds): `llama`
 * (Llama 1/2/3, Mistral, TinyLlama; Mixtral-style MoE when llama.expert_count
 * > 0, optionally with an always-on shared expert, ffn_{gate,up,down}_shexp of
 * expert_shared_feed_forward_length: what `octo upcycle --shared` writes),
 * `qwen2`, `qwen2moe`, `olmoe`, `granitemoe`, `phi3`, `gemma2` and
 * `deepseek2`. Their differences are data in model_hparams (scales,
 * soft-caps, norms, the gating of experts, multi-head latent attention), not
 * code paths per architecture.
 */
#ifndef OCTO_MODEL_MODEL_H
#define OCTO_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/gguf.h"
#include "core/threadpool.h"

typedef enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN2MOE, ARCH_OLMOE, ARCH_GRANITEMOE, ARCH_PHI3, ARCH_GEMMA2,
               ARCH_DEEPSEEK2 } model_arch;

typedef enum { ACT_SILU, ACT_GELU } model_act; /* the FFN's gate: silu(g)*u (SwiGLU) or gelu(g)*u (GeGLU, tanh form) */
typedef enum { GATE_SOFTMAX, GATE_SIGMOID } gate_func;

/* How an MoE layer weighs the experts it routes a token to (model/gating.c).
 * Mixtral: softmax over all router logits, the top k renormalised to sum 1. */
typedef struct {
    gate_func func;      /* probabilities from the router's logits */
    bool norm;           /* renormalise the chosen k to sum 1 */
    float scale;         /* then multiply each by this (1; deepseek2's expert_weights_scale) */
    int n_group;         /* experts in n_group groups, only the n_group_used best groups eligible (0: no groups) */
    int n_group_used;
} moe_gating;

typedef struct {
    model_arch arch;
    char arch_name[32];
    int n_vocab;
    int n_ctx_train;
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;
    int head_dim;      /* key/query head size */
    int head_dim_v;    /* value head size */
    int n_rot;         /* rotated dims per head */
    int n_ff;          /* FFN hidden size (per expert for MoE) */
    int n_expert;      /* 0 for dense */
    int n_expert_used;
    int n_ff_shexp;    /* MoE: width of the shared expert every token runs besides its routed ones; 0 none */
    float rope_freq_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    float rope_attn_factor; /* cos and sin times this (1; LongRoPE's magnitude factor, phi3) */
    int rope_ctx_orig;     /* LongRoPE: the context its short factors serve (phi3); YaRN: the trained one */
    bool rope_yarn;        /* YaRN: dims between yarn_corr[0] and [1] blend interpolated and original angles */
    float yarn_corr[2];
    bool rope_neox;        /* rotate (i, i + n_rot/2) instead of (2i, 2i+1) */
    float rms_eps;
    /* architecture features, as data (defaults: plain llama) */
    moe_gating gating;
    model_act act;
    int n_ff_dense;        /* width of the dense FFN layers of an MoE model (deepseek2's leading ones) */
    int n_layer_dense_lead;/* MoE models: the first layers are dense (deepseek2) */
    bool shexp_gated;      /* the shared expert's output times sigmoid(ffn_gate_inp_shexp . h) (qwen2moe) */
    bool qk_norm;          /* RMSNorm of q and k (attn_q_norm / attn_k_norm) before RoPE (olmoe) */
    bool post_norms;       /* RMSNorm of each sublayer's output before the residual (gemma2) */
    bool fused_qkv;        /* q, k, v are row ranges of one attn_qkv tensor (phi3) */
    bool fused_gate_up;    /* gate and up are the two halves of ffn_up (phi3) */
    float embd_scale;      /* the embedding row times this (1; gemma2 sqrt(n_embd), granite) */
    float residual_scale;  /* each sublayer's output times this (1; granite) */
    float attn_scale;      /* q.k times this (1/sqrt(head_dim) unless the file says) */
    float logit_scale;     /* logits times this (1; granite 1/logit_scale) */
    float attn_softcap;    /* scores become c*tanh(s/c) (0: none; gemma2) */
    float final_softcap;   /* logits likewise (0: none) */
    int swa_window;        /* sliding-window layers see keys s > t - window (0: none) */
    int swa_period;        /* layer il has the window when il % period == 0 (gemma2: 2); 1: every layer */
    /* multi-head latent attention (deepseek2; kv_lora_rank 0: none). The cache
     * holds per token one row: the normed latent (kv_lora_rank) and the shared
     * RoPE key part (n_rot); head_dim = qk_nope + n_rot, head_dim_v per head. */
    int q_lora_rank;       /* 0: q straight from attn_q */
    int kv_lora_rank;
} model_hparams;

/* The shape of one token's KV cache row: heads, key and value head sizes
 * (MLA caches one latent "head": kv_lora_rank + n_rot keys whose first
 * kv_lora_rank are also its values, stored once). */
typedef struct {
    int n_head_kv, head_dim, head_dim_v;
    bool values_in_keys;
} model_kv_row;
model_kv_row model_kv_row_of(const model_hparams *hp);
/* Does layer il attend through a sliding window (hp->swa_window keys)? */
bool model_layer_swa(const model_hparams *hp, int il);
/* What the architecture adds to a plain llama, as one line for inspect
 * ("gating: softmax, top-2 weights not renormalised; shared expert ..."). */
void model_features(const model_hparams *hp, char *buf, size_t n);
/* Is layer il a mixture of experts (an MoE model's leading layers may be dense)? */
bool model_layer_moe(const model_hparams *hp, int il);
/* The layers that have experts (0 for a dense model). */
int model_moe_layers(const model_hparams *hp);

/* A matrix (or a stack of n_mat matrices for MoE experts) inside the mapping.
 * Row r of matrix e starts at data + (e * n_out + r) * row_bytes. */
typedef struct {
    const void *data;
    uint32_t type;
    int64_t n_in;   /* ne[0]: row length */
    int64_t n_out;  /* ne[1]: rows */
    int64_t n_mat;  /* ne[2]: experts (1 for plain matrices) */
    size_t row_bytes;
    bool packed;    /* re-laid at load for the active path's packed kernels (core/kernels/packed.h) */
    bool shared;    /* its bytes are another tensor's too: kept in the GGUF layout (never packed) */
} model_mat;

typedef struct {
    model_mat attn_norm;        /* (n_embd) F32 */
    model_mat wq, wk, wv, wo;   /* (n_embd -> n_head*hd), (-> n_kv*hd), (-> n_kv*hdv), (n_head*hdv -> n_embd) */
    model_mat bq, bk, bv;       /* qwen2 biases, F32; data NULL when absent */
    model_mat q_norm, k_norm;   /* qk_norm: over the whole row (n_head*hd) or per head (hd); F32 */
    model_mat post_attn_norm, post_ffn_norm; /* post_norms (n_embd) F32 */
    /* MLA (wq is attn_q_b when q_lora_rank > 0) */
    model_mat wq_a, q_a_norm;   /* (n_embd -> q_lora_rank), (q_lora_rank) */
    model_mat wkv_a, kv_a_norm; /* (n_embd -> kv_lora_rank + n_rot), (kv_lora_rank) */
    model_mat wkv_b;            /* (kv_lora_rank -> n_head * (qk_nope + head_dim_v)), never packed */
    model_mat gate_inp_sh;      /* shexp_gated: (n_embd) F32 */
    model_mat expert_bias;      /* optional (n_expert) F32, added to the probabilities to choose (not to weigh) */
    model_mat ffn_norm;         /* (n_embd) F32 */
    model_mat w_gate, w_up;     /* dense: (n_embd -> n_ff); MoE: stacks of n_expert */
    model_mat w_down;           /* dense: (n_ff -> n_embd); MoE: stack */
    model_mat gate_inp;         /* MoE router (n_embd -> n_expert); data NULL for a dense layer */
    model_mat w_gate_sh, w_up_sh, w_down_sh; /* MoE shared expert (n_embd -> n_ff_shexp -> n_embd), ungated,
                                                added to the routed experts' sum; data NULL when absent */
} model_layer;

typedef struct {
    gguf_ctx *gguf;
    model_hparams hp;
    model_mat tok_embd;    /* (n_embd) rows, n_vocab of them */
    model_mat output_norm; /* (n_embd) F32 */
    model_mat output;      /* (n_embd -> n_vocab); the embedding when tied */
    model_mat rope_freqs;  /* optional (n_rot/2) frequency divisors; data NULL when absent */
    model_mat rope_long, rope_short; /* LongRoPE's two sets of divisors (phi3); model_set_context picks one */
    model_layer *layers;   /* [n_layer] */
    bool output_tied;
    uint64_t packed_bytes; /* weight bytes in the packed layout (0: all in the GGUF layout) */
    bool prepacked;        /* the file holds them packed (MODEL_LAYOUT_KEY): mapped read-only, never re-laid */
    uint64_t n_params;
    uint64_t weight_bytes;
    uint64_t weight_bytes_per_token; /* read to decode one token: every matrix once, one
                                        embedding row, and for MoE only the used experts' share */
    void *owned;           /* a requantized copy's matrices (gguf NULL: the rest is its source's) */
    uint64_t owned_bytes;
} model;

/* The context the model will run with: LongRoPE models (phi3 with
 * rope_factors_long/short) take the long factors when it exceeds
 * rope_ctx_orig, else the short ones (llama.cpp's rule; the default). */
void model_set_context(model *m, int n_ctx);

/* A file whose matrices are already in the packed layout (written by octo
 * deploy) says so: MODEL_LAYOUT_KEY = MODEL_LAYOUT_PACKED, KEY.types the
 * packed types, KEY.bytes how many bytes are packed (checked at load). */
#define MODEL_LAYOUT_KEY "octo.layout"
#define MODEL_LAYOUT_PACKED "packed16"

/* Open path, read hyperparameters, bind tensors; the weights stay in the
 * read-only mapping as the file lays them out (a packed file's are marked
 * packed; one this CPU cannot read that way is ERR_UNSUPPORTED). */
err_code model_open(const char *path, model **out, err_t *err);
/* Re-lay the matrices the active path has packed kernels for (core/kernels/packed.h):
 * faster matmuls, but the pages become private memory. No-op for a packed file. */
void model_pack(model *m);
/* Memory pressure: the packed matrices go back to the file's pages and
 * layout (platform/file.h: plat_mem_revert), their private copies freed;
 * model_pack lays them out again. Returns the bytes given back (0: nothing
 * was packed, a packed file or a copy, or the system cannot revert pages).
 * No forward pass may run meanwhile, nor on a copy that shares matrices
 * (model_requantize) until model_sync_shared. */
uint64_t model_unpack(model *m);
/* A copy's matrices shared with src take src's layout again (after
 * model_unpack or model_pack of src). */
void model_sync_shared(model *copy, const model *src);
/* The bytes model_pack would re-lay (a packed file's: those it holds packed). */
uint64_t model_packable_bytes(const model *m);
/* The dense matrices of layer l (l = -1: the output projection; up to 12,
 * some without data): what a forward pass multiplies by, experts aside. */
int model_matrices(const model *m, int l, const model_mat **out);
/* model_open then model_pack. */
err_code model_load(const char *path, model **out, err_t *err);
/* model_open over an already opened GGUF (takes ownership of g, also on failure). */
err_code model_from_gguf(gguf_ctx *g, model **out, err_t *err);
void model_free(model *m);

/* A copy of src with every layer matrix and the output quantized to `type`
 * (those already as small are shared), in memory of its own and packed for
 * the active path; norms and the embedding table stay src's, so src must
 * outlive it. For a self-draft: the same function at lower precision.
 * pool (NULL: this thread) does the conversion.
 * ERR_UNSUPPORTED when nothing would get smaller. */
err_code model_requantize(const model *src, uint32_t type, tpool *pool, model **out, err_t *err);
/* The bytes model_requantize would allocate (0: nothing converts). */
uint64_t model_requantized_bytes(const model *src, uint32_t type);
/* What such a copy reads per token: its converted matrices and the ones it
 * shares with src (a copy that converts little reads nearly all of src). */
uint64_t model_requantized_token_bytes(const model *src, uint32_t type);

/* The octo.upcycle.* keys `octo upcycle` writes, as one line into out
 * (empty when the file has none): octo_model_info.origin. */
void model_describe_origin(const model *m, char *out, size_t n);
/* "F32=9 Q4_0=29 Q6_K=1": a file's tensors counted by type, in type-id
 * order, into out: octo_model_info.tensor_types. */
void model_type_histogram(const gguf_ctx *g, char *out, size_t cap);

/* Bytes of a KV cache of n_tokens tokens with elements of type (F32/F16), as stored. */
uint64_t model_kv_bytes(const model_hparams *hp, uint64_t n_tokens, uint32_t type);

#endif
