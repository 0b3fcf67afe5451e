/*
 * lora — LoRA adapters in llama.cpp's adapter GGUF, bound to a base model.
 *
 * An adapter file has general.type = "adapter", adapter.type = "lora",
 * general.architecture = the base's, adapter.lora.alpha, and for each matrix
 * W it adapts (any projection, the router, the output, an expert stack) two
 * tensors: "<W's name>.lora_a" of shape [n_in, r] (or [n_in, r, n_expert])
 * and "<W's name>.lora_b" of shape [r, n_out] (or [r, n_out, n_expert]).
 * With it, a product W·x becomes W·x + s · B·(A·x), s = the user's scale
 * times alpha / r (the user's scale alone when alpha is 0): llama.cpp's rule.
 *
 * Opening checks an adapter as a model file is checked (core/gguf.c: sizes
 * backed by bytes) and against the base: its architecture, every tensor's
 * name (the base must have that matrix), shape and pairing, its values
 * (finite). F32, F16, BF16 and Q8_0 tensors are read into F32 copies that
 * the forward pass (model/forward.c) multiplies with core/matmul's F32
 * kernels, whose rows never depend on the rest of a batch: a token's decode
 * and its verify row stay equal with adapters on. The base is not touched.
 *
 * A fused tensor (phi3's attn_qkv, ffn_up holding gate and up) is one
 * adapter pair whose B rows split as the base's rows do.
 */
#ifndef OCTO_MODEL_LORA_H
#define OCTO_MODEL_LORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/gguf.h"
#include "model/model.h"

/* The matrices of a layer an adapter may change (their products in model/forward*.c). */
typedef enum {
    LORA_Q, LORA_K, LORA_V, LORA_O,
    LORA_GATE, LORA_UP, LORA_DOWN,          /* dense, or an expert of a stack */
    LORA_GATE_SH, LORA_UP_SH, LORA_DOWN_SH, /* the shared expert */
    LORA_ROUTER,                            /* ffn_gate_inp */
    LORA_Q_A, LORA_KV_A,                    /* latent attention's down-projections */
    LORA_OUTPUT,                            /* the output projection (layer -1) */
    LORA_KINDS
} lora_kind;

/* One adapted matrix: per expert e (n_mat of them, 1 for a plain matrix),
 * A_e = a + e * rank * n_in ([rank][n_in]), and B_e transposed: row k of
 * B_e^T at bt + (e * rank + k) * bt_stride, its element i this matrix's
 * row i of B (bt_stride: the rows of the whole, fused, B). B·u is then a
 * sum of rank rows of B^T (core/kernels/kernels.h: kernel_lowrank). */
typedef struct {
    const float *a, *bt;
    int rank;
    int64_t n_in, n_out, n_mat;
    size_t bt_stride;
} lora_tensor;

typedef struct lora_adapter lora_adapter;

/* Read path against m. ERR_UNSUPPORTED / ERR_BAD_SHAPE / ERR_BAD_VALUE /
 * ERR_MISSING_TENSOR ... with a message naming the tensor or key at fault. */
err_code lora_open(const model *m, const char *path, lora_adapter **out, err_t *err);
/* The same from an opened GGUF (the adapter takes g, closed on failure too). */
err_code lora_from_gguf(const model *m, gguf_ctx *g, lora_adapter **out, err_t *err);
void lora_free(lora_adapter *a);

/* The base matrices a tensor name ("blk.3.attn_q.weight", "output.weight")
 * of m is, as an adapter targets them: its layer (-1: the output) and kinds
 * (a fused tensor's parts in row order); 0 when no adapter can change it. */
int lora_targets(const model *m, const char *name, int *layer, lora_kind kinds[3]);

/* layer -1 with LORA_OUTPUT: the output projection. NULL: not adapted. */
const lora_tensor *lora_find(const lora_adapter *a, int layer, lora_kind kind);
/* The factor of B·(A·x) for a user's scale: user * alpha / rank (user when alpha is 0). */
float lora_scale(const lora_adapter *a, const lora_tensor *t, float user);
float lora_alpha(const lora_adapter *a);
/* The F32 copies' bytes; the matrices adapted (a fused one counts once per part). */
uint64_t lora_bytes(const lora_adapter *a);
int lora_n_matrices(const lora_adapter *a);
/* Every value of the adapter (each A, then each B transposed: the lora_tensor
 * pointers point into it), n_values floats; writable for training. */
float *lora_values(lora_adapter *a, size_t *n_values);
/* The index in lora_values of the value at p (p one of the adapter's). */
size_t lora_index(const lora_adapter *a, const float *p);

/* The smallest and largest rank of its matrices. */
void lora_ranks(const lora_adapter *a, int *min, int *max);

/* The adapters a sequence runs with, each with the user's scale (at most
 * LORA_MAX_STACK; an entry of scale 0 is skipped, so the base's logits come
 * out bit for bit). The adapters must outlive every pass given the set. */
#define LORA_MAX_STACK 8
typedef struct {
    int n;
    const lora_adapter *a[LORA_MAX_STACK];
    float scale[LORA_MAX_STACK];
} lora_set;

/* ---- a new adapter, and writing one (model/lora_write.c) ---- */

/* The matrices adapted when nothing else is asked: every projection of attention and the FFN. */
#define LORA_KINDS_DEFAULT                                                                                             \
    ((1u << LORA_Q) | (1u << LORA_K) | (1u << LORA_V) | (1u << LORA_O) | (1u << LORA_GATE) | (1u << LORA_UP) |         \
     (1u << LORA_DOWN))

typedef struct {
    int rank;          /* 1..65536 */
    float alpha;       /* the scale is alpha / rank (0: 1) */
    unsigned kinds;    /* bit 1 << lora_kind for each kind adapted */
    uint64_t seed;     /* A's values */
} lora_init_opts;

/* Each pair of a (one per base tensor it adapts, a fused tensor's parts together), in m's tensor order:
 * the base tensor (its ne[1] the rows of B, every part's), its layer (-1: the output) and the pair's
 * first part (its a, bt and n_mat: the whole pair's). */
typedef void (*lora_pair_fn)(void *user, const gguf_tensor *base, int layer, const lora_tensor *t);
void lora_each_pair(const model *m, const lora_adapter *a, lora_pair_fn fn, void *user);

/* The values lora_create would make for o (0: none of the matrices asked for). */
uint64_t lora_count(const model *m, const lora_init_opts *o);

/* Rank 16, alpha 32, LORA_KINDS_DEFAULT, seed 1. */
lora_init_opts lora_init_defaults(void);
/* An adapter of every matrix of m (opened, not packed: its tensor names are
 * read) whose kind o->kinds holds: A ~ U(-1/sqrt(n_in), 1/sqrt(n_in)) from the
 * seed, B = 0, so it starts as the base's function exactly. */
err_code lora_create(const model *m, const lora_init_opts *o, lora_adapter **out, err_t *err);
/* More keys a writer adds beside an adapter's own. */
typedef err_code (*lora_keys_fn)(void *user, gguf_writer *w);
/* a as llama.cpp's adapter GGUF at path (core/atomic_write: all or nothing),
 * its values in type (F32, F16, BF16; Q8_0 when every row is a multiple of 32);
 * keys: more keys (NULL: none). */
err_code lora_write(const model *m, const lora_adapter *a, uint32_t type, lora_keys_fn keys, void *user,
                    const char *path, err_t *err);

/* Does the set change anything (an adapter of non-zero scale)? */
bool lora_set_active(const lora_set *s);

#endif
