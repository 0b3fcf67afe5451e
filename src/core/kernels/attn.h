/*
 * attn — the attention inner loop: up to 16 queries against a list of key
 * runs, flash-style (one pass over the keys, running max and sum, no score
 * matrix).
 *
 * The 16 queries sit in the 16 lanes of a vector (a token's query heads that
 * share one KV head, and consecutive tokens): with the queries transposed
 * once, the scores of one key for all 16 queries are hd FMAs of a broadcast
 * key element, and the running max, the exponentials and the sums are
 * lane-wise, so there is no horizontal sum anywhere. Values are accumulated
 * per query as rows (p * V[j]).
 *
 * Keys are walked in blocks of 16 counted from the start of each run; a key
 * is visible to a query when its position is <= the query's. Invisible keys
 * contribute exact zeros and a block with nothing visible changes nothing, so
 * a query's output is the same whichever other queries share its tile and
 * however many future keys a batch has appended: batch invariance again.
 */
#ifndef OCTO_CORE_KERNELS_ATTN_H
#define OCTO_CORE_KERNELS_ATTN_H

#include <stddef.h>
#include <stdint.h>

#define ATTN_LANES 16
#define ATTN_MAX_HEAD_DIM 576 /* DeepSeek-V2's latent rows: 512 + 64 */

typedef struct {
    int hd, hdv;               /* key/query and value head sizes, <= ATTN_MAX_HEAD_DIM */
    float scale;               /* applied to q.k */
    int n_q;                   /* 1 .. 16 */
    const float *q[ATTN_LANES];  /* each hd floats */
    int32_t qpos[ATTN_LANES];
    float *out[ATTN_LANES];      /* each hdv floats: softmax(q.K * scale) . V */
    /* Optional: obs[e] += the attention weight of entry e (runs in order),
     * summed over the queries whose bit is set in obs_lanes. */
    float *obs;
    uint32_t obs_lanes;
    /* Optional tree batch (tree != 0): the batch's own entries sit at
     * positions tree_pos0 .. tree_pos0 + 63, one per batch token, and lane i
     * sees the one at tree_pos0 + s only when bit s of anc[i] is set (its
     * ancestors and itself). Entries before tree_pos0 follow the causal rule
     * alone. A lane whose anc is every bit up to its own sees exactly what
     * the causal rule shows it. */
    int tree;
    int32_t tree_pos0;
    uint64_t anc[ATTN_LANES];
    /* Optional: soft-capping, each scaled score s becoming softcap *
     * tanh(s / softcap) (0: none); a sliding window, a lane seeing only the
     * window newest positions up to its own (0: none; in a tree batch
     * distances count ancestors: attn_window_sees). */
    float softcap;
    int32_t window;
} attn_queries;

#define ATTN_TREE_MAX 64

/* Does lane i see an entry at position p under the tree rule? (The causal
 * rule is checked apart.) */
static inline int attn_tree_sees(const attn_queries *q, int i, int32_t p) {
    if (!q->tree || p < q->tree_pos0 || p - q->tree_pos0 >= ATTN_TREE_MAX) return 1;
    return (int)((q->anc[i] >> (p - q->tree_pos0)) & 1u);
}

/* Does lane i see an entry at position p under the sliding window? In a
 * tree batch a lane's position is its depth (tree_pos0 + ancestors - 1) and
 * a batch entry's depth is counted among the lane's ancestors. */
static inline int attn_window_sees(const attn_queries *q, int i, int32_t p) {
    if (!q->window) return 1;
    if (!q->tree) return p > q->qpos[i] - q->window;
    const int32_t depth = q->tree_pos0 + __builtin_popcountll(q->anc[i]) - 1;
    if (p < q->tree_pos0) return p > depth - q->window;
    const int s = p - q->tree_pos0;
    if (s >= ATTN_TREE_MAX) return 1;
    const uint64_t upto = s == 63 ? ~0ull : (2ull << s) - 1;
    const int32_t pdepth = q->tree_pos0 + __builtin_popcountll(q->anc[i] & upto) - 1;
    return pdepth > depth - q->window;
}

/* Keys stored by channel (KIVI): for each channel, an fp16 step d and
 * minimum m, then one quant per entry (KC8: a byte; KC4: a nibble, entry j
 * in the low nibble of byte j/2 when j is even, else the high one);
 * value = m + d * q. Channels follow each other every k_stride bytes. */
#define ATTN_KC8 0x100
#define ATTN_KC4 0x101
/* Bytes of one channel holding cap entries (cap even). */
size_t attn_kc_channel_bytes(uint32_t type, int cap);
/* Quantize n entries (rows of dim floats, stride dim) into dim channels of cap. */
void attn_kc_quantize(uint32_t type, const float *rows, int n, int dim, int cap, uint8_t *dst);
/* Entry j of channel c, as a float. */
float attn_kc_value(uint32_t type, const uint8_t *base, size_t channel_bytes, int c, int j);

/* A run of cache entries. Rows hold every KV head; this head's keys start at
 * element k_off of a row (values at v_off). Row types: F32, F16, or the
 * quantized tiers Q8_0, Q4_0, Q4_1 (blocks of 32 along the row; a head
 * smaller than 32 shares its block with its neighbours); keys may also be
 * stored by channel (ATTN_KC8 / KC4: k points at channel 0, k_stride is the
 * channel's bytes, k_off the head's first channel). Everything is
 * dequantized 16 entries at a time inside the kernel. */
typedef struct {
    uint32_t k_type, v_type;
    const void *k, *v;   /* the first entry's row (or channel 0) */
    int k_off, v_off;
    size_t k_stride, v_stride; /* bytes between entries (between channels for KC keys) */
    const int32_t *pos;
    int n;
} attn_keys;

/* Is every entry of a block after the last query's position? Such a block
 * contributes exact zeros, so the kernels skip it before scoring it (in a
 * prefill batch, half the keys a tile walks are still in its future). */
static inline int attn_block_hidden(const int32_t *pos, int n, int32_t max_qpos) {
    for (int j = 0; j < n; j++)
        if (pos[j] <= max_qpos) return 0;
    return 1;
}

/* Elements [off, off + dim) of a row of type, as floats (the portable way). */
void attn_widen(uint32_t type, const void *row, int off, int dim, float *dst);
/* Can the kernel read rows (or, for keys, channels) of this type? */
int attn_type_supported(uint32_t type);

/* A kernel's working memory, given by its caller (the forward's per-thread
 * slots): at least ATTN_SCRATCH_BYTES, ATTN_SCRATCH_ALIGN-aligned. Not
 * thread-local storage, which a library would place on every thread of its
 * host (issue 59: 591 KiB a thread, and a 512 KiB thread could not start). */
#define ATTN_SCRATCH_BYTES ((size_t)150 * 1024) /* every path's, at any head size up to ATTN_MAX_HEAD_DIM */
#define ATTN_SCRATCH_ALIGN 64
typedef void (*attn_fn)(const attn_queries *q, const attn_keys *runs, int n_runs, void *scratch);

/* The active kernel path's implementation. */
attn_fn attn_get(void);
/* The portable one (the reference), and the AVX-512, AVX2 and NEON ones
 * (NULL when not compiled in or when this CPU cannot run them). */
void attn_portable(const attn_queries *q, const attn_keys *runs, int n_runs, void *scratch);
attn_fn attn_avx512(void);
attn_fn attn_avx2(void);
attn_fn attn_neon(void);

#endif
