/*
 * matmul — the scheduler of weight x activation products over the thread
 * pool. See matmul.h.
 *
 * GGUF-layout matrices: the activation rows are converted once (by the
 * pool's threads), then each thread streams its own contiguous slice of the
 * output rows, in chunks of MM_ROW_CHUNK rows over tiles of MM_TOKEN_TILE
 * tokens, with the widest kernel the type has (a tile, dot4, dot). Packed
 * matrices: units of 128 rows, see pm_work.
 */
#include "matmul.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "kernels.h"
#include "gemm_bf16.h"
#include "packed.h"
#include "core/quant.h"

#define MM_ROW_CHUNK 24   /* output rows walked together over a tile of tokens: whole tiles of 2, 3 or 4 */
#define MM_TOKEN_TILE 32  /* tokens per pass over a chunk of weight rows */

struct matmul_ctx {
    tpool *pool;      /* borrowed; NULL runs on the calling thread */
    uint8_t *act;     /* converted activation rows of the current product */
    size_t act_cap;
    uint8_t *scratch; /* per-thread re-laid weight panels (gemm_bf16) */
    size_t scratch_cap;
    uint8_t *groups_scratch; /* per-thread working memory of a packed kernel's gemm_groups, 64-aligned */
    size_t groups_scratch_cap;
};

matmul_ctx *matmul_ctx_new(tpool *pool) {
    matmul_ctx *c = calloc(1, sizeof *c);
    if (c) c->pool = pool;
    return c;
}

void matmul_ctx_free(matmul_ctx *c) {
    if (!c) return;
    free(c->act);
    free(c->scratch);
    free(c->groups_scratch);
    free(c);
}

/* ---------------------------------------------------------------- GGUF layout */

typedef struct {
    const kernel_entry *k;
    const kernel_tile *tile; /* the batch's tile kernel, or NULL */
    const uint8_t *w;     /* the matrix's first row */
    size_t row_bytes;
    int64_t n_in, n_out;
    const uint8_t *act;   /* T converted activation rows */
    size_t act_row_bytes;
    int T;
    float *y;             /* (T, n_out) */
} mm_job;

/* Rows [r, r1) by tiles of the kernel's tile_rows against the tokens
 * [t0, t1), up to tile_tokens a call, cut in even calls (5 = 3 + 2, not
 * 4 + 1: a call of one token waits on its FMA chains, and costs as much as
 * one of two). Returns the first row left. */
static int mm_tiles(const mm_job *j, int r, int r1, int t0, int t1) {
    const int R = j->tile->rows, N = j->tile->tokens;
    for (; r + R <= r1; r += R) {
        const uint8_t *row = j->w + (size_t)r * j->row_bytes;
        for (int t = t0, na; t < t1; t += na) {
            const int left = t1 - t, calls = (left + N - 1) / N;
            na = (left + calls - 1) / calls;
            float o[KERNEL_TILE_MAX_ROWS * KERNEL_TILE_MAX_TOKENS];
            j->tile->fn(row, j->row_bytes, j->act + (size_t)t * j->act_row_bytes, j->act_row_bytes, j->n_in, na, o);
            for (int q = 0; q < R; q++)
                for (int i = 0; i < na; i++) j->y[(size_t)(t + i) * j->n_out + r + q] = o[q * na + i];
        }
    }
    return r;
}

/* The first row of thread i's slice of n_out, cut at a multiple of align:
 * a prefill tile's rows (a row left out of its tiles takes dot, whose sum
 * has another order, so which rows those are must not depend on the
 * threads); 1 otherwise (any cut gives the same bits). */
static int mm_split(int64_t n_out, int i, int nth, int align) {
    if (i >= nth) return (int)n_out;
    const int64_t r = n_out * i / nth;
    return (int)(r - r % align);
}

/* Each thread streams its own contiguous slice of the rows: interleaving
 * small chunks between threads measured 15% slower decode (the hardware
 * prefetcher follows one long stream per core better than many short ones). */
static void mm_work(void *ctx, int ith, int nth) {
    mm_job *j = ctx;
    const int align = j->tile == &j->k->prefill ? j->tile->rows : 1;
    const int lo = mm_split(j->n_out, ith, nth, align), hi = mm_split(j->n_out, ith + 1, nth, align);
    for (int r0 = lo; r0 < hi; r0 += MM_ROW_CHUNK) {
        int r1 = r0 + MM_ROW_CHUNK < hi ? r0 + MM_ROW_CHUNK : hi;
        for (int t0 = 0; t0 < j->T; t0 += MM_TOKEN_TILE) {
            int t1 = t0 + MM_TOKEN_TILE < j->T ? t0 + MM_TOKEN_TILE : j->T;
            int r = r0;
            if (j->tile && t1 - t0 >= 2) r = mm_tiles(j, r, r1, t0, t1);
            for (; r < r1; r++) {
                const void *row = j->w + (size_t)r * j->row_bytes;
                int t = t0;
                if (j->k->dot4)
                    for (float o[4]; t + 4 <= t1; t += 4) {
                        j->k->dot4(row, j->act + (size_t)t * j->act_row_bytes, j->act_row_bytes, j->n_in, o);
                        for (int i = 0; i < 4; i++) j->y[(size_t)(t + i) * j->n_out + r] = o[i];
                    }
                for (; t < t1; t++)
                    j->y[(size_t)t * j->n_out + r] = j->k->dot(row, j->act + (size_t)t * j->act_row_bytes, j->n_in);
            }
        }
    }
}

/* ---------------------------------------------------------------- packed */

/* Packed matrices (core/kernels/packed.h). One job covers up to PM_MAX_MATS
 * matrices of the same input (q, k and v; gate and up): the activations are
 * converted once and the pool is woken once. The matrices' 16-row groups are
 * cut into units of PM_UNIT_GROUPS (128 rows), numbered across the matrices.
 * A decode (one token, memory-bound) gives each thread a contiguous half of
 * the units, one long stream per core. A batch (compute-bound: prefill,
 * verification) hands units out from an atomic counter, so a core the host
 * slows down no longer leaves the other idle at the end of every product;
 * within a unit the group GEMM runs over chunks of tokens, whose activations
 * (128 tokens x n_in/32 blocks of 40 bytes: at most 0.9 MB for an FFN of
 * 5632) stay in the core's L2 while the unit's weights stream by. */
#define PACKED_TOKEN_CHUNK 128
#define PM_UNIT_GROUPS 8
#define PM_MAX_MATS MATMUL_MAX_SET

typedef struct {
    const packed_entry *pe;
    int n_mats;
    const uint8_t *w[PM_MAX_MATS];
    float *y[PM_MAX_MATS];
    int64_t n_groups[PM_MAX_MATS], n_out[PM_MAX_MATS];
    int unit0[PM_MAX_MATS + 1]; /* first unit of each matrix; unit0[n_mats]: all units */
    size_t group_bytes;
    int64_t n_in;
    const uint8_t *act;
    size_t act_row_bytes;
    int T;
    uint8_t *scratch; /* gemm_groups' working memory, `per` bytes a thread */
    size_t per;
    atomic_int next; /* the next unit to take (batches) */
} pm_job;

static void pm_unit(const pm_job *j, int u, int ith) {
    int i = 0;
    while (u >= j->unit0[i + 1]) i++;
    const int64_t g0 = (int64_t)(u - j->unit0[i]) * PM_UNIT_GROUPS;
    const int ng = (int)(j->n_groups[i] - g0 < PM_UNIT_GROUPS ? j->n_groups[i] - g0 : PM_UNIT_GROUPS);
    const uint8_t *w = j->w[i] + (size_t)g0 * j->group_bytes;
    float *y = j->y[i] + (size_t)g0 * PACK_ROWS;
    if (j->pe->gemm_groups) { /* the kernel blocks over groups and tokens itself */
        j->pe->gemm_groups(w, j->group_bytes, ng, j->n_in, j->act, j->act_row_bytes, j->T, y, (size_t)j->n_out[i],
                           j->scratch ? j->scratch + (size_t)ith * j->per : NULL);
        return;
    }
    for (int t0 = 0; t0 < j->T; t0 += PACKED_TOKEN_CHUNK) {
        const int nt = j->T - t0 < PACKED_TOKEN_CHUNK ? j->T - t0 : PACKED_TOKEN_CHUNK;
        for (int g = 0; g < ng; g++)
            j->pe->gemm(w + (size_t)g * j->group_bytes, j->n_in, j->act + (size_t)t0 * j->act_row_bytes,
                        j->act_row_bytes, nt, y + (size_t)t0 * j->n_out[i] + (size_t)g * PACK_ROWS, (size_t)j->n_out[i]);
    }
}

static void pm_work(void *ctx, int ith, int nth) {
    pm_job *j = ctx;
    const int nu = j->unit0[j->n_mats];
    if (j->T == 1) {
        for (int u = nu * ith / nth; u < nu * (ith + 1) / nth; u++) pm_unit(j, u, ith);
        return;
    }
    for (int u; (u = atomic_fetch_add(&j->next, 1)) < nu;) pm_unit(j, u, ith);
}

/* ---------------------------------------------------------------- activations */

/* Activation rows converted by the pool's threads, a contiguous share each. */
typedef struct {
    act_quantize_fn fn;
    const float *x;
    int64_t n;
    uint8_t *dst;
    size_t row_bytes;
    int T;
} quant_job;

static void quant_work(void *ctx, int ith, int nth) {
    quant_job *j = ctx;
    for (int t = j->T * ith / nth; t < j->T * (ith + 1) / nth; t++)
        j->fn(j->x + (size_t)t * j->n, j->dst + (size_t)t * j->row_bytes, j->n);
}

/* c->act = T rows of x (n values each) converted by fn, row_bytes each. */
static err_code convert_rows(matmul_ctx *c, act_quantize_fn fn, const float *x, int64_t n, int T, size_t row_bytes,
                             err_t *err) {
    const size_t need = row_bytes * (size_t)T;
    if (need > c->act_cap) {
        uint8_t *p = realloc(c->act, need);
        if (!p) return err_set(err, ERR_NOMEM, "out of memory for activations");
        c->act = p;
        c->act_cap = need;
    }
    quant_job j = {fn, x, n, c->act, row_bytes, T};
    if ((int64_t)T * n < MATMUL_MIN_PARALLEL_MACS) quant_work(&j, 0, 1);
    else tpool_run(c->pool, quant_work, &j);
    return ERR_OK;
}

/* ---------------------------------------------------------------- products */

/* ys[i] = W_i · x for the n packed matrices ws (same type and input length,
 * so one kernel and one conversion of x serve them all) */
static err_code matmul_packed(matmul_ctx *c, const matmul_weight *ws, int n, const float *x, int T, float *const *ys,
                              err_t *err) {
    const matmul_weight *w0 = &ws[0];
    const packed_entry *pe = packed_get_batch(w0->type, T);
    if (!pe) return err_set(err, ERR_UNSUPPORTED, "no packed kernel for tensor type %u", w0->type);
    pm_job j = {.pe = pe, .n_mats = n, .group_bytes = (size_t)PACK_ROWS * w0->row_bytes, .n_in = w0->n_in, .T = T,
                .act_row_bytes = packed_act_row_bytes(pe, w0->n_in)};
    int64_t macs = 0;
    for (int i = 0; i < n; i++) {
        j.w[i] = ws[i].data;
        j.y[i] = ys[i];
        j.n_out[i] = ws[i].n_out;
        j.n_groups[i] = ws[i].n_out / PACK_ROWS;
        j.unit0[i + 1] = j.unit0[i] + (int)((j.n_groups[i] + PM_UNIT_GROUPS - 1) / PM_UNIT_GROUPS);
        macs += (int64_t)T * ws[i].n_out * ws[i].n_in;
    }
    atomic_init(&j.next, 0);
    err_code rc = convert_rows(c, pe->quantize, x, w0->n_in, T, j.act_row_bytes, err);
    if (rc) return rc;
    j.act = c->act;
    if (pe->scratch_bytes) { /* a thread's working memory each, kept with the context (not thread-local) */
        j.per = (pe->scratch_bytes + 63) & ~(size_t)63;
        const size_t need = (size_t)tpool_size(c->pool) * j.per;
        if (need > c->groups_scratch_cap) {
            free(c->groups_scratch);
            c->groups_scratch_cap = 0;
            if (!(c->groups_scratch = aligned_alloc(64, need))) return err_set(err, ERR_NOMEM, "out of memory for a kernel's working memory");
            c->groups_scratch_cap = need;
        }
        j.scratch = c->groups_scratch;
    }
    if (macs < MATMUL_MIN_PARALLEL_MACS) pm_work(&j, 0, 1);
    else tpool_run(c->pool, pm_work, &j);
    return ERR_OK;
}

/* ---------------------------------------------------------------- bf16 prefill */

/* F16 and BF16 matrices in prefill batches (core/kernels/gemm_bf16.h): whole chunks
 * of GEMM_BF16_ROWS rows, a contiguous run of them per thread. */
typedef struct {
    const matmul_weight *w;
    const uint16_t *act;
    size_t act_stride; /* values */
    int T;
    float *y;
    uint8_t *scratch;
    size_t scratch_bytes; /* per thread */
} bf_job;

static void bf_work(void *ctx, int ith, int nth) {
    bf_job *j = ctx;
    const int64_t n_out = j->w->n_out, chunks = (n_out + GEMM_BF16_ROWS - 1) / GEMM_BF16_ROWS;
    for (int64_t ch = chunks * ith / nth; ch < chunks * (ith + 1) / nth; ch++) {
        const int r0 = (int)(ch * GEMM_BF16_ROWS), r1 = (int)(r0 + GEMM_BF16_ROWS < n_out ? r0 + GEMM_BF16_ROWS : n_out);
        gemm_bf16_rows(j->w->data, j->w->type, j->w->row_bytes, j->w->n_in, r0, r1, j->act, j->act_stride, j->T, j->y,
                       (size_t)n_out, j->scratch + (size_t)ith * j->scratch_bytes);
    }
}

static void bf16_act(const float *x, void *dst, int64_t n) { gemm_bf16_act(x, dst, n); }

static err_code matmul_bf16(matmul_ctx *c, const matmul_weight *w, const float *x, int T, float *y, err_t *err) {
    const size_t len = (size_t)gemm_bf16_row_len(w->n_in);
    err_code rc = convert_rows(c, bf16_act, x, w->n_in, T, len * 2, err);
    if (rc) return rc;
    const int nth = c->pool ? tpool_size(c->pool) : 1;
    const size_t per = (gemm_bf16_scratch_bytes(w->n_in) + 63) & ~(size_t)63;
    if ((size_t)nth * per > c->scratch_cap) {
        uint8_t *p = realloc(c->scratch, (size_t)nth * per);
        if (!p) return err_set(err, ERR_NOMEM, "out of memory for weight panels");
        c->scratch = p;
        c->scratch_cap = (size_t)nth * per;
    }
    bf_job j = {.w = w, .act = (const uint16_t *)c->act, .act_stride = len, .T = T, .y = y, .scratch = c->scratch,
                .scratch_bytes = per};
    if (c->pool) tpool_run(c->pool, bf_work, &j);
    else bf_work(&j, 0, 1);
    return ERR_OK;
}

bool matmul_batch_invariant(const matmul_weight *w) {
    if (w->packed) return packed_get_batch(w->type, PACKED_BF16_MIN_TOKENS) == packed_get(w->type);
    const kernel_entry *k = kernel_get(w->type);
    return !gemm_bf16_supported(w->type) && !(k && k->prefill.fn);
}

/* The tile a batch of T tokens takes: prefill's from PACKED_BF16_MIN_TOKENS on. */
static const kernel_tile *mm_tile(const kernel_entry *k, int T) {
    if (T >= PACKED_BF16_MIN_TOKENS && k->prefill.fn) return &k->prefill;
    return k->tile.fn ? &k->tile : NULL;
}

err_code matmul(matmul_ctx *c, const matmul_weight *w, const float *x, int T, float *y, err_t *err) {
    if (w->packed) return matmul_packed(c, w, 1, x, T, &y, err);
    if (T >= PACKED_BF16_MIN_TOKENS && gemm_bf16_supported(w->type)) return matmul_bf16(c, w, x, T, y, err);
    const kernel_entry *k = kernel_get(w->type);
    if (!k) return err_set(err, ERR_UNSUPPORTED, "no kernel for tensor type %u", w->type);
    mm_job j = {
        .k = k, .tile = mm_tile(k, T), .w = w->data, .row_bytes = w->row_bytes, .n_in = w->n_in, .n_out = w->n_out, .T = T, .y = y,
    };
    if (k->act_type == QT_F32) {
        j.act = (const uint8_t *)x;
        j.act_row_bytes = sizeof(float) * (size_t)w->n_in;
    } else {
        j.act_row_bytes = kernel_act_row_bytes(k->act_type, w->n_in);
        err_code rc = convert_rows(c, k->quantize, x, w->n_in, T, j.act_row_bytes, err);
        if (rc) return rc;
        j.act = c->act;
    }
    if ((int64_t)T * w->n_out * w->n_in < MATMUL_MIN_PARALLEL_MACS) mm_work(&j, 0, 1);
    else tpool_run(c->pool, mm_work, &j);
    return ERR_OK;
}

err_code matmul_set(matmul_ctx *c, const matmul_weight *ws, int n, const float *x, int T, float *const *ys,
                    err_t *err) {
    bool same = n >= 1 && n <= MATMUL_MAX_SET;
    for (int i = 0; i < n; i++) same = same && ws[i].packed && ws[i].type == ws[0].type && ws[i].n_in == ws[0].n_in;
    if (same) return matmul_packed(c, ws, n, x, T, ys, err);
    err_code rc = ERR_OK;
    for (int i = 0; i < n && !rc; i++) rc = matmul(c, &ws[i], x, T, ys[i], err);
    return rc;
}
