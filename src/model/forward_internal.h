/*
 * forward_internal — what the files of the forward pass share: its state and
 * the steps each of them calls (forward.c: the pass, attention, norms, RoPE;
 * forward_ffn.c: dense and MoE FFNs; forward_mla.c: latent attention). Only
 * src/model/forward*.c include it.
 */
#ifndef OCTO_MODEL_FORWARD_INTERNAL_H
#define OCTO_MODEL_FORWARD_INTERNAL_H

#include "core/kernels/attn.h"
#include "core/kernels/matmul.h"
#include "model/forward.h"
#include "model/lora.h"

/* Below this many multiply-adds a job runs on the calling thread, as matmul's do. */
#define MIN_PARALLEL_MACS MATMUL_MIN_PARALLEL_MACS

struct fwd_state {
    const model *m;
    tpool *pool;      /* borrowed; NULL runs on the calling thread */
    int nth;
    int cap;          /* tokens the buffers hold */
    float *x;         /* (cap, n_embd) residual stream */
    float *xn;        /* (cap, n_embd) normed input of a sublayer */
    float *q;         /* (cap, n_head * head_dim) */
    float *k, *v;     /* (cap, n_head_kv * head_dim[_v]) */
    float *att;       /* (cap, n_head * head_dim_v) attention output */
    float *ffn_out;   /* (cap, n_embd) */
    float *hg, *hu;   /* (cap, n_ff) gate / up activations (dense), or one token's (MoE) */
    float *rope_cs;   /* (cap, n_rot) cos/sin pairs per token */
    float *router;    /* (n_expert) */
    float *observed;  /* attention weights for kv->observe: a row per (part, KV head, observed tile) */
    size_t observed_cap;
    attn_keys *runs;  /* (n_head_kv, n_spans) the view's spans, offset to each KV head */
    size_t runs_cap;
    matmul_ctx *mm;   /* the matrix products' scheduler and activation buffer */
    uint8_t *attn_scratch; /* (nth, ATTN_SCRATCH_BYTES), 64-aligned: each pool thread's attention working memory */
    /* MoE routing of the batch */
    int32_t *route;   /* (cap, n_expert_used) chosen experts */
    float *route_next; /* (cap, n_expert) the next layer's router logits (experts_iface.hint_next) */
    float *route_w;   /* (cap, n_expert_used) their renormalised weights */
    int32_t *members; /* (cap) tokens routed to the expert at hand */
    float *member_w;  /* (cap) their weights */
    float *xe;        /* (cap, n_embd) gathered inputs of one expert */
    float *eo;        /* (cap, n_embd) its outputs */
    /* multi-head latent attention (forward_mla.c); NULL for other models */
    float *qa;        /* (cap, n_head * (kv_lora_rank + n_rot)) the queries absorbed into the latent space */
    float *lat;       /* (cap, n_head * kv_lora_rank) attention outputs in the latent space */
    float *low;       /* (cap, max(q_lora_rank, kv_lora_rank)) a low-rank intermediate */
    float *oh;        /* (cap, head_dim_v) one head's output */
    struct fa_part *fa_parts; /* (fa_parts_cap) attention's work per sequence of a batch (forward.c) */
    int fa_parts_cap;
    struct fwd_part *parts; /* (parts_cap) the rows of a batch by sequence */
    int parts_cap;
    int32_t *pos;     /* (cap) each row's cache position */
    float *out;       /* (out_cap) a batch's logits before they go to their sequences */
    size_t out_cap;
    /* LoRA adapters (forward_lora.c): each row's set, for the pass */
    const lora_set *lora;        /* forward() and forward_tree()'s (fwd_set_lora); NULL: none */
    const lora_set **row_lora;   /* (cap) each row's set */
    bool lora_on;                /* some row's set changes something */
    int32_t *lora_rows;          /* (cap) the output rows' batch rows */
    float *lora_u;               /* a product's A·x rows */
    size_t lora_u_cap;
    fwd_observer observer; /* NULL: none */
    void *observer_ctx;
};


/* y[t] = W · x[t] for t < T. x rows are W->n_in long, y rows W->n_out. */
err_code fwd_mat_mul(fwd_state *st, const model_mat *w, const float *x, int T, float *y, err_t *err);
/* ys[i] = W_i · x[t] for n (at most MATMUL_MAX_SET) matrices of the same input */
err_code fwd_mat_mul_set(fwd_state *st, const model_mat *const *ws, int n, const float *x, int T, float *const *ys,
                         err_t *err);
/* y[t] += s · B·(A·x[t]) for each adapter of row t's set that adapts the
 * matrix (layer, kind; expert e of a stack) whose product y is: input row t
 * is the batch's row rows[t] (rows NULL: row t). A no-op for a pass without adapters. */
err_code fwd_lora(fwd_state *st, int layer, lora_kind kind, int expert, const float *x, int T, const int32_t *rows,
                  float *y, err_t *err);
/* RMSNorm of T rows of n, over the pool when there are enough (out may be x) */
void fwd_norm_rows(fwd_state *st, float *out, const float *x, const float *weight, int n, int T, float eps);

/* The rows of a pass by sequence (forward_batch): each a run of rows with
 * its own cache and positions. A tree batch (forward_tree) is one part. */
typedef struct fwd_part {
    const kv_iface *kv;
    int row0, n;          /* its rows in the pass */
    int32_t pos0;         /* the cache position of its first row */
    const uint64_t *anc;  /* a tree batch's ancestry, or NULL */
    int trunk;            /* a tree batch's leading tokens in a line (else n) */
} fwd_part;
typedef struct {
    const fwd_part *part;
    int n_parts, n;           /* n: rows in all */
    const int32_t *pos;       /* [n] each row's cache position */
} fwd_rows;

/* One attention over each part's view of a layer: its rows' queries (q,
 * [n][n_head * hd]) into out ([n][n_head * hdv]), all parts in one job. */
typedef struct {
    int n_head, n_head_kv, hd, hdv;
    const float *q;
    float *out;
    float scale, softcap;
    int32_t window;
} fwd_attn_shape;
err_code fwd_attend(fwd_state *st, const fwd_rows *r, int layer, const fwd_attn_shape *sh, err_t *err);

/* The layer's FFN of st->xn into st->ffn_out: dense, or the experts (through ex, or the mapping when NULL). */
err_code fwd_ffn(fwd_state *st, const experts_iface *ex, int layer, int T, err_t *err);
/* The next layer's router logits from st->x, handed to ex->hint_next. */
err_code fwd_predict_next(fwd_state *st, const experts_iface *ex, int layer, int T, err_t *err);
/* Latent attention of st->xn into st->ffn_out (attn_output applied); one part. */
err_code fwd_attn_mla(fwd_state *st, const fwd_rows *r, int layer, err_t *err);
/* Non-finite queries or keys (NaN or Inf scales in their projections or norms) make NaN scores, which the
 * softmax's exponent drops as if masked: the layer's output stays finite and the text changes with
 * success. Checked as they are made (before the cache keeps a key), on the bits: ERR_BAD_VALUE. */
err_code fwd_check_qk(const float *q, size_t nq, const float *k, size_t nk, int layer, int32_t pos0, err_t *err);

#endif
