/*
 * forward — the transformer forward pass over a span of tokens.
 *
 * One call runs T tokens at positions pos0 .. pos0+T-1 through every layer
 * with causal attention (each token attends to cache entries at positions <=
 * its own, the span's own keys included), writes their K/V through the
 * kv_iface, and returns logits for the rows the caller asks for. One-token
 * decode is T = 1; prefill and speculative verification are larger T.
 */
#ifndef OCTO_MODEL_FORWARD_H
#define OCTO_MODEL_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "core/threadpool.h"
#include "model/experts_iface.h"
#include "model/kv_iface.h"
#include "model/lora.h"
#include "model/model.h"

typedef struct fwd_state fwd_state;

/*
 * An observer sees what a layer computed, for tools that learn from a model's
 * activations (convert/upcycle, convert/imatrix): after each layer's
 * attention, x is its normed input (what wq, wk, wv or an MLA layer's wq_a
 * and wkv_a read) and act the heads' output before wo, [T][n_head *
 * head_dim_v]; after its FFN, x is the FFN's normed input and act (dense FFN
 * only, else NULL) the gated activations silu(gate) * up, [T][the layer's
 * w_down.n_in, n_ff but for an MoE model's dense leading layers]; at the
 * layer's end, x is the residual stream leaving it. Rows are the batch's
 * tokens in order. The observer must not keep the pointers; the forward pass
 * does not read anything it returns.
 */
typedef enum { FWD_AT_FFN, FWD_AT_LAYER_END, FWD_AT_ATTN } fwd_point;
typedef struct {
    int layer;
    fwd_point at;
    int T;
    const float *x;   /* [T][n_embd] */
    const float *act; /* FFN: [T][the layer's w_down.n_in] or NULL; attention: [T][its wo.n_in] */
} fwd_tap;
typedef void (*fwd_observer)(void *ctx, const fwd_tap *tap);

/* pool: the model's threads (borrowed; NULL runs everything on the caller's thread). */
fwd_state *fwd_state_new(const model *m, tpool *pool);
void fwd_state_free(fwd_state *st);
/* The pieces of the computation a tool that replays it needs (convert/upcycle):
 * out = x / rms(x) * weight; the top k of p[0..n) by value, ties to the lower
 * index, best first; Mixtral gating: softmax over all n scores (in place),
 * the top k, their weights renormalised to sum to 1. */
void fwd_rmsnorm(float *out, const float *x, const float *weight, int n, float eps);
void fwd_top_k(const float *p, int n, int k, int32_t *idx);
void fwd_route(float *scores, int n, int k, int32_t *chosen, float *w);

/* The adapters forward() and forward_tree() run with (NULL: none, the
 * default); set must outlive the passes. forward_batch takes each
 * sequence's own (fwd_seq.lora): rows of different adapters share the
 * base's products, each row's low-rank terms its own. */
void fwd_set_lora(fwd_state *st, const lora_set *set);

/* RoPE as the forward applies it (tools that replay the computation: the
 * training forward, train/backward.h): the angles of position pos into cs
 * (n_rot / 2 (cos, sin) pairs, the file's scaling and magnitude applied);
 * the rotation of the first n_rot dims of each of n_heads heads of one
 * token (heads head_dim apart) by them. Its transpose is the rotation with
 * every sin negated. */
void fwd_rope_angles(const model *m, int32_t pos, float *cs);
void fwd_rope_apply(float *vec, int n_heads, int head_dim, int n_rot, bool neox, const float *cs);

/* fn NULL: no observer (the default). */
void fwd_set_observer(fwd_state *st, fwd_observer fn, void *ctx);

/*
 * tokens: [n] ids; pos0: position of tokens[0].
 * out_rows: [n_out] indices into 0..n-1 whose logits to return (NULL = the
 * last row only when n_out == 1, or every row when n_out == n).
 * logits: [n_out][n_vocab].
 * experts: NULL to read experts from the model's mapping.
 */
err_code forward(fwd_state *st, const kv_iface *kv, const experts_iface *experts, const int32_t *tokens, int n,
                 int32_t pos0, const int32_t *out_rows, int n_out, float *logits, err_t *err);

/*
 * A tree batch: several continuations of the cache verified or explored in
 * one pass (lookahead decoding). anc[t] has bit s set for each batch token s
 * that token t attends to, itself included; only earlier tokens may be
 * ancestors, and n <= 64. Token t is computed at position pos0 + (its
 * ancestors - 1) while its cache entry is stored at pos0 + t, a distinct
 * slot, so that the tokens a caller keeps must be a leading run in a line
 * (anc[t] = every bit up to t): those are stored where plain decoding would
 * store them, and their rows equal plain decoding's bit for bit. Only that
 * trunk reports attention weights to the cache.
 */
err_code forward_tree(fwd_state *st, const kv_iface *kv, const experts_iface *experts, const int32_t *tokens, int n,
                      int32_t pos0, const uint64_t *anc, const int32_t *out_rows, int n_out, float *logits,
                      err_t *err);

/*
 * A batch: several sequences, each with its own cache, computed in one pass
 * (continuous batching: runtime/batch.h). Their rows go through every
 * matrix product together, so the weights are read once for all of them;
 * each sequence attends to its own cache only. A sequence's logits and
 * cache entries equal forward() of it alone bit for bit, whatever else is in
 * the batch (a tree sequence's, forward_tree's of it alone), with two exceptions: F16/BF16 weights take a prefill kernel of their
 * own (bf16 on AVX-512, a tile on AVX2) when the batch has PACKED_BF16_MIN_TOKENS rows or more
 * (core/kernels/matmul.h),
 * and the experts an experts_iface hands out may depend on the batch
 * (moe/int2.h). A failure leaves each cache with this pass's entries
 * appended or not: the caller rolls every sequence back.
 */
typedef struct {
    const kv_iface *kv;
    const int32_t *tokens;   /* [n] */
    int n;
    int32_t pos0;            /* the position of tokens[0] in its cache */
    const uint64_t *anc;     /* a tree batch's ancestry, as forward_tree's (n <= 64), or NULL: a line */
    const int32_t *out_rows; /* as forward(): [n_out] rows, or NULL */
    int n_out;
    float *logits;           /* [n_out][n_vocab] */
    const lora_set *lora;    /* its adapters (model/lora.h), or NULL: none */
} fwd_seq;
err_code forward_batch(fwd_state *st, const experts_iface *experts, const fwd_seq *seqs, int n_seqs, err_t *err);
/* Can this model's passes hold more than one sequence? (Not latent attention.) */
bool forward_batches(const model *m);
/* Is every row of a pass computed as it would be in a pass of any other
 * size? False where the weights take a prefill kernel at PACKED_BF16_MIN_TOKENS
 * rows (core/kernels/matmul.h: matmul_batch_invariant). */
bool forward_batch_invariant(const model *m);

#endif
