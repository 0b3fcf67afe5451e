/*
 * packed_amx — the packed Q4_0 GEMM on AMX tiles (Intel Sapphire Rapids and
 * later), for batches of 16 tokens or more. See packed.h.
 *
 * The packed group layout is already AMX's B-tile layout: row j of a block
 * holds weights 4j..4j+3 of each of the 16 rows. Once per group the nibbles
 * are unpacked to signed bytes (nibble - 8) for a run of blocks; then, per
 * tile of 16 tokens and per block, one TDPBSSD multiplies the tokens'
 * activation bytes (A: 16 tokens x 32 bytes, read in place from the Q8P
 * rows) by the block's weights (B: 8 x 64 bytes), giving the 16 x 16 exact
 * integer block sums, which are the integers the VNNI kernel computes
 * (there: off + sum nibble * q = sum (nibble - 8) * q). They are folded in
 * with the same fma per block, so results equal the VNNI kernel's bit for
 * bit; the tokens that do not fill a tile of 16 are left to it.
 *
 * AMX needs the system's permission (platform/cpu.h: plat_cpu_amx_permit),
 * asked once; each thread loads the tile configuration before its first
 * tile op.
 */
#include "packed.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__F16C__) && \
    defined(__AMX_BF16__) && defined(__AVX512BF16__)

#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "simd_x86.h"
#include "core/quant.h"
#include "platform/cpu.h"

#define GROUP_BLOCK_BYTES (PACK_ROWS * 18)
#define RUN_BLOCKS 64 /* blocks unpacked at a time: 32 KiB of B tiles */

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static __thread const tile_config *tiles_loaded; /* the configuration this thread's tiles hold */

/* C tiles 0..3: 16 tokens x 16 rows of int32; A tiles 4, 5: 16 tokens x 32
 * activation bytes; B tiles 6, 7: 8 groups of 4 weights x 16 rows.
 * A constant in memory: GCC may treat the stores of a local configuration
 * as dead (its ldtilecfg builtin does not say it reads all 64 bytes), and at
 * -O2 it did drop them in a test build, which then faulted at tilezero. */
static const tile_config TILES = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 32, 32, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 8, 8},
};

static void use_tiles(const tile_config *c) {
    if (tiles_loaded == c) return;
    _tile_loadconfig(c);
    tiles_loaded = c;
}

/* Q8_0: the packed block's 8 vectors are the B tile as they lie in memory */
#define GROUP_BLOCK_BYTES_Q8 (PACK_ROWS * 34)

/* Tile numbers are immediates: C tiles 0..3 (two pairs), A tiles 4, 5, B
 * tiles 6, 7. Block blk of the run: activations at b0 + blk, B tile at
 * bsrc + blk * bstride. */
#define DP(C, A, B, blk)                                                                          \
    do {                                                                                          \
        _tile_zero(C);                                                                            \
        _tile_loadd(A, a0 + (size_t)(b0 + (blk)) * sizeof(block_q8p) + offsetof(block_q8p, qs), (long)as); \
        _tile_loadd(B, bsrc + (size_t)(blk) * bstride, 64);                                       \
        _tile_dpbssd(C, A, B);                                                                    \
    } while (0)

/* acc[t] += (float)c[t][:] * (16 row scales * token t's scale), block b */
static inline __attribute__((always_inline)) void fold(__m512 acc[16], const int32_t c[16][16], const uint8_t *w,
                                                       size_t gbb, const uint8_t *a0, size_t as, int64_t b) {
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + (size_t)b * gbb)));
    for (int t = 0; t < 16; t++) {
        const block_q8p *ab = (const block_q8p *)(a0 + (size_t)t * as) + b;
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)c[t])),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(ab->d)), acc[t]);
    }
}

/* Q4_0 (q8 false: the nibbles of a run of blocks are unpacked to signed
 * bytes first) or Q8_0 (q8 true: B tiles straight from the group) */
static inline __attribute__((always_inline)) void gemm_tiles(const void *vw, int64_t n, const void *vact, size_t as,
                                                             int n_tok, float *y, size_t ys, const bool q8) {
    const uint8_t *w = vw, *act = vact;
    const size_t gbb = q8 ? GROUP_BLOCK_BYTES_Q8 : GROUP_BLOCK_BYTES;
    const int64_t nb = n / 32;
    const int full = n_tok / 16 * 16;
    if (full) {
        use_tiles(&TILES);
        __attribute__((aligned(64))) int8_t bt[RUN_BLOCKS][512];
        __attribute__((aligned(64))) int32_t c[2][4][16][16];
        for (int t = 0; t < full; t++) memset(y + (size_t)t * ys, 0, sizeof(float) * PACK_ROWS);
        const __m512i lo = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
        for (int64_t b0 = 0; b0 < nb; b0 += RUN_BLOCKS) {
            const int64_t nr = nb - b0 < RUN_BLOCKS ? nb - b0 : RUN_BLOCKS;
            const uint8_t *bsrc = q8 ? w + (size_t)b0 * gbb + 32 : (const uint8_t *)bt;
            const size_t bstride = q8 ? gbb : 512;
            for (int64_t b = 0; !q8 && b < nr; b++) {
                const uint8_t *g = w + (size_t)(b0 + b) * gbb + 32;
                prefetch_l1(g, 4096, gbb); /* ahead, as the VNNI kernel */
                for (int j = 0; j < 4; j++) {
                    const __m512i p = _mm512_loadu_si512((const void *)(g + 64 * j));
                    _mm512_store_si512((void *)(bt[b] + 64 * j), _mm512_sub_epi8(_mm512_and_si512(p, lo), eight));
                    _mm512_store_si512((void *)(bt[b] + 256 + 64 * j),
                                       _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(p, 4), lo), eight));
                }
            }
            for (int t0 = 0; t0 < full; t0 += 16) {
                __m512 acc[16];
                for (int t = 0; t < 16; t++) acc[t] = _mm512_loadu_ps(y + (size_t)(t0 + t) * ys);
                const uint8_t *a0 = act + (size_t)t0 * as;
                /* blocks in fours, software-pipelined: the products of four
                 * blocks run while the sums of the previous four, stored one
                 * round earlier, are folded in (in block order) */
                int64_t b = 0;
                int cur = 0;
                for (; b + 4 <= nr; b += 4, cur ^= 1) {
                    DP(0, 4, 6, b);
                    DP(1, 5, 7, b + 1);
                    DP(2, 4, 6, b + 2);
                    DP(3, 5, 7, b + 3);
                    if (b)
                        for (int i = 0; i < 4; i++) fold(acc, c[cur ^ 1][i], w, gbb, a0, as, b0 + b - 4 + i);
                    _tile_stored(0, c[cur][0], 64);
                    _tile_stored(1, c[cur][1], 64);
                    _tile_stored(2, c[cur][2], 64);
                    _tile_stored(3, c[cur][3], 64);
                }
                if (b)
                    for (int i = 0; i < 4; i++) fold(acc, c[cur ^ 1][i], w, gbb, a0, as, b0 + b - 4 + i);
                for (; b < nr; b++) {
                    DP(0, 4, 6, b);
                    _tile_stored(0, c[0][0], 64);
                    fold(acc, c[0][0], w, gbb, a0, as, b0 + b);
                }
                for (int t = 0; t < 16; t++) _mm512_storeu_ps(y + (size_t)(t0 + t) * ys, acc[t]);
            }
        }
    }
    if (full < n_tok) {
        const packed_entry *v = packed_avx512(q8 ? QT_Q8_0 : QT_Q4_0, true);
        v->gemm(w, n, act + (size_t)full * as, as, n_tok - full, y + (size_t)full * ys, ys);
    }
}
#undef DP

static void gemm_amx(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm_tiles(w, n, act, as, n_tok, y, ys, false);
}

static void gemm_amx_q8(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm_tiles(w, n, act, as, n_tok, y, ys, true);
}

/* ---------------------------------------------------------------- bf16 tiles
 *
 * Prefill batches (PACKED_BF16_MIN_TOKENS tokens or more) take a second
 * AMX kernel with no per-block fold: each block of a group is dequantized
 * once per batch to bf16 (d * (nibble - 8) is exact in F32, then rounded to
 * bf16 once), the activations are rounded to bf16, and TDPBF16PS sums the
 * whole row into F32 accumulator tiles that stay in place across blocks.
 * The int8 kernels above store and fold every 16 x 16 block sum; here the
 * tile unit does all the work and one dequantization serves every token of
 * the batch. The cost is exactness: results are within bf16 rounding of the
 * int8 kernels' (test_packed bounds the error against the exact dot), so the
 * forward pass keeps every batch below the threshold (decode, verification)
 * on the int8 kernels, bit-identical at any batch size.
 *
 * Loop nest, per call (a unit of groups) and batch: chunks of BF_CHUNK
 * tokens, then runs of BF_RUN blocks (a run's activations for the chunk,
 * 256 x 4 KiB, stay in L2 for every group), then pairs of groups
 * (dequantized into bt), then pairs of 16-token tiles: four accumulator
 * tiles, two A and two B tiles, so each tile loaded serves two products.
 * Accumulators are loaded from y and stored back once per run.
 */
#define BF_RUN 64    /* blocks of 32 values per run */
#define BF_CHUNK 256 /* tokens per pass */
#define BF_TAIL_STRIDE (BF_RUN * 64 + 64) /* padded: rows of a tail tile */

static const tile_config TILES_BF16 = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* F32 -> bf16 rows (round to nearest even), n a multiple of 32 */
static void act_bf16(const float *x, void *dst, int64_t n) {
    uint8_t *o = dst;
    for (int64_t i = 0; i < n; i += 32)
        _mm512_storeu_si512((void *)(o + 2 * i),
                            (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
}

/* B-tile rows 2k, 2k+1 from four F32 vectors (lane r: row r's weights
 * 4k' .. 4k'+3): row 2k holds (w0, w1) of each row r, row 2k+1 (w2, w3) */
static inline __attribute__((always_inline)) void emit_pairs(uint8_t *bt, int row, __m512 w0, __m512 w1, __m512 w2,
                                                             __m512 w3, __m512i idx) {
    _mm512_store_si512((void *)(bt + 64 * row), _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(w1, w0)));
    _mm512_store_si512((void *)(bt + 64 * (row + 1)),
                       _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(w3, w2)));
}

/* One packed block of a group (16 rows x 32 weights) as a bf16 B tile:
 * 16 rows of 64 bytes, row k holding weights 2k, 2k+1 of the 16 rows. */
static inline __attribute__((always_inline)) void dequant_block(const uint8_t *g, uint8_t *bt, bool q8) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g));
    if (q8) { /* vector j: weights 4j .. 4j+3, signed bytes */
        for (int j = 0; j < 8; j++) {
            const __m512i p = _mm512_loadu_si512((const void *)(g + 32 + 64 * j));
            __m512 w[4];
            for (int e = 0; e < 4; e++)
                w[e] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(p, 24 - 8 * e), 24)));
            emit_pairs(bt, 2 * j, w[0], w[1], w[2], w[3], idx);
        }
        return;
    }
    /* Q4_0, vector j: low nibbles weights 4j .. 4j+3, high ones 16+4j .. */
    const __m512 m8 = _mm512_mul_ps(d, _mm512_set1_ps(-8.0f)), lo = (__m512)_mm512_set1_epi32(15);
    for (int j = 0; j < 4; j++) {
        const __m512i p = _mm512_loadu_si512((const void *)(g + 32 + 64 * j));
        for (int h = 0; h < 2; h++) {
            __m512 w[4];
            for (int e = 0; e < 4; e++) { /* (nibble - 8) * d, exact before the bf16 rounding */
                const __m512i nib = _mm512_and_si512(_mm512_srli_epi32(p, 8 * e + 4 * h), (__m512i)lo);
                w[e] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(nib), d, m8);
            }
            emit_pairs(bt, 8 * h + 2 * j, w[0], w[1], w[2], w[3], idx);
        }
    }
}

/* tile numbers are immediates: accumulators 0..3 = (token tile, group)
 * (0,0) (1,0) (0,1) (1,1); A tiles 4, 5; B tiles 6, 7 */
static inline __attribute__((always_inline)) void bf16_tiles(const uint8_t *a0, size_t as0, const uint8_t *a1,
                                                             size_t as1, const uint8_t *b0, const uint8_t *b1, int nr,
                                                             bool two_t, bool two_g) {
    for (int b = 0; b < nr; b++) {
        _tile_loadd(4, a0 + 64 * (size_t)b, (long)as0);
        _tile_loadd(6, b0 + 1024 * (size_t)b, 64);
        if (two_t) _tile_loadd(5, a1 + 64 * (size_t)b, (long)as1);
        if (two_g) _tile_loadd(7, b1 + 1024 * (size_t)b, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (two_t) _tile_dpbf16ps(1, 5, 6);
        if (two_g) _tile_dpbf16ps(2, 4, 7);
        if (two_t && two_g) _tile_dpbf16ps(3, 5, 7);
    }
}

/* Accumulator tile c of token tile (rows nt <= 16 valid) and group: zero
 * on the first run, else the partial sums in y (through ct for a tail). */
#define ACC_LOAD(c, yp, nt, first, ct)                                                         \
    do {                                                                                        \
        if (first) _tile_zero(c);                                                               \
        else if ((nt) == 16) _tile_loadd(c, (yp), (long)(ys * sizeof(float)));                 \
        else {                                                                                  \
            memset(ct, 0, sizeof ct);                                                           \
            for (int t_ = 0; t_ < (nt); t_++) memcpy(ct[t_], (yp) + (size_t)t_ * ys, 64);       \
            _tile_loadd(c, ct, 64);                                                             \
        }                                                                                       \
    } while (0)
#define ACC_STORE(c, yp, nt, ct)                                                               \
    do {                                                                                        \
        if ((nt) == 16) _tile_stored(c, (yp), (long)(ys * sizeof(float)));                     \
        else {                                                                                  \
            _tile_stored(c, ct, 64);                                                            \
            for (int t_ = 0; t_ < (nt); t_++) memcpy((yp) + (size_t)t_ * ys, ct[t_], 64);       \
        }                                                                                       \
    } while (0)

/* gemm_bf16_groups' working memory (193 KiB): the caller's, 64-aligned (packed.h) */
typedef struct {
    __attribute__((aligned(64))) uint8_t bt[2][BF_RUN][1024];
    __attribute__((aligned(64))) uint8_t tail[16][BF_TAIL_STRIDE];
} bf_scratch;

static void gemm_bf16_groups(const void *vw, size_t group_bytes, int n_groups, int64_t n, const void *vact, size_t as,
                             int n_tok, float *y, size_t ys, bool q8, void *scratch) {
    const uint8_t *w = vw, *act = vact;
    const size_t gbb = q8 ? GROUP_BLOCK_BYTES_Q8 : GROUP_BLOCK_BYTES;
    const int64_t nb = n / 32;
    bf_scratch *sc = scratch;
    uint8_t(*bt)[BF_RUN][1024] = sc->bt;
    uint8_t(*tail)[BF_TAIL_STRIDE] = sc->tail;
    __attribute__((aligned(64))) float ct[16][16];
    use_tiles(&TILES_BF16);
    for (int c0 = 0; c0 < n_tok; c0 += BF_CHUNK) {
        const int nc = n_tok - c0 < BF_CHUNK ? n_tok - c0 : BF_CHUNK;
        const uint8_t *ac = act + (size_t)c0 * as;
        float *yc = y + (size_t)c0 * ys;
        const int full = nc / 16 * 16, nt_tail = nc - full;
        for (int64_t r0 = 0; r0 < nb; r0 += BF_RUN) {
            const int nr = (int)(nb - r0 < BF_RUN ? nb - r0 : BF_RUN);
            const bool first = r0 == 0;
            if (nt_tail) { /* the last tokens, zero-padded to a tile */
                memset(tail, 0, sizeof sc->tail);
                for (int t = 0; t < nt_tail; t++)
                    memcpy(tail[t], ac + (size_t)(full + t) * as + 64 * (size_t)r0, 64 * (size_t)nr);
            }
            for (int g = 0; g < n_groups; g += 2) {
                const bool two_g = g + 1 < n_groups;
                for (int k = 0; k < 1 + two_g; k++) {
                    const uint8_t *gp = w + (size_t)(g + k) * group_bytes + (size_t)r0 * gbb;
                    for (int b = 0; b < nr; b++) {
                        if (b + 4 < nr) _mm_prefetch((const char *)(gp + (size_t)(b + 4) * gbb), _MM_HINT_T0);
                        dequant_block(gp + (size_t)b * gbb, bt[k][b], q8);
                    }
                }
                for (int t0 = 0; t0 < nc; t0 += 32) {
                    const int n0 = nc - t0 < 16 ? nc - t0 : 16;
                    const int n1 = nc - t0 - 16 < 0 ? 0 : nc - t0 - 16 < 16 ? nc - t0 - 16 : 16;
                    const bool two_t = n1 > 0;
                    const uint8_t *a0 = n0 == 16 ? ac + (size_t)t0 * as + 64 * (size_t)r0 : tail[0];
                    const uint8_t *a1 = n1 == 16 ? ac + (size_t)(t0 + 16) * as + 64 * (size_t)r0 : tail[0];
                    const size_t as0 = n0 == 16 ? as : BF_TAIL_STRIDE, as1 = n1 == 16 ? as : BF_TAIL_STRIDE;
                    float *y00 = yc + (size_t)t0 * ys + (size_t)g * PACK_ROWS, *y10 = y00 + 16 * ys;
                    float *y01 = y00 + PACK_ROWS, *y11 = y10 + PACK_ROWS;
                    ACC_LOAD(0, y00, n0, first, ct);
                    if (two_t) ACC_LOAD(1, y10, n1, first, ct);
                    if (two_g) ACC_LOAD(2, y01, n0, first, ct);
                    if (two_t && two_g) ACC_LOAD(3, y11, n1, first, ct);
                    if (two_t && two_g) bf16_tiles(a0, as0, a1, as1, bt[0][0], bt[1][0], nr, true, true);
                    else if (two_t) bf16_tiles(a0, as0, a1, as1, bt[0][0], bt[1][0], nr, true, false);
                    else if (two_g) bf16_tiles(a0, as0, a1, as1, bt[0][0], bt[1][0], nr, false, true);
                    else bf16_tiles(a0, as0, a1, as1, bt[0][0], bt[1][0], nr, false, false);
                    ACC_STORE(0, y00, n0, ct);
                    if (two_t) ACC_STORE(1, y10, n1, ct);
                    if (two_g) ACC_STORE(2, y01, n0, ct);
                    if (two_t && two_g) ACC_STORE(3, y11, n1, ct);
                }
            }
        }
    }
}
#undef ACC_LOAD
#undef ACC_STORE

static void gemm_bf16_q4_0_groups(const void *w, size_t gb, int ng, int64_t n, const void *act, size_t as, int n_tok,
                                  float *y, size_t ys, void *scratch) {
    gemm_bf16_groups(w, gb, ng, n, act, as, n_tok, y, ys, false, scratch);
}
static void gemm_bf16_q8_0_groups(const void *w, size_t gb, int ng, int64_t n, const void *act, size_t as, int n_tok,
                                  float *y, size_t ys, void *scratch) {
    gemm_bf16_groups(w, gb, ng, n, act, as, n_tok, y, ys, true, scratch);
}
/* One group at a time (packed_entry.gemm; the product goes through gemm_groups): working memory of its own */
static void gemm_bf16_one(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys, bool q8) {
    bf_scratch *sc = aligned_alloc(64, sizeof *sc);
    if (sc) gemm_bf16_groups(w, 0, 1, n, act, as, n_tok, y, ys, q8, sc);
    else for (int t = 0; t < n_tok; t++) for (int r = 0; r < 16; r++) y[(size_t)t * ys + (size_t)r] = NAN; /* seen, never silent */
    free(sc);
}
static void gemm_bf16_q4_0(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm_bf16_one(w, n, act, as, n_tok, y, ys, false);
}
static void gemm_bf16_q8_0(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm_bf16_one(w, n, act, as, n_tok, y, ys, true);
}

static const packed_entry AMX_BF16_Q4_0 = {QT_Q4_0, act_bf16, gemm_bf16_q4_0, 32, 64, "amx-bf16",
                                          gemm_bf16_q4_0_groups, 64, sizeof(bf_scratch)};
static const packed_entry AMX_BF16_Q8_0 = {QT_Q8_0, act_bf16, gemm_bf16_q8_0, 32, 64, "amx-bf16",
                                          gemm_bf16_q8_0_groups, 64, sizeof(bf_scratch)};

static const packed_entry AMX_Q4_0 = {QT_Q4_0, NULL, gemm_amx, 32, sizeof(block_q8p), "amx", NULL, 0, 0};

/* CPU has AMX-TILE and AMX-INT8, the OS saves their state, and grants it to us. */
static int amx_usable(void) {
    static int state = -1; /* races are benign: every thread computes the same */
    if (state >= 0) return state;
    unsigned a, b, c, d;
    int ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25));
    if (ok) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        ok = (lo & (3u << 17)) == (3u << 17);
    }
    if (ok) ok = plat_cpu_amx_permit();
    state = ok;
    return ok;
}

const packed_entry *packed_amx(uint32_t type) {
    if ((type != QT_Q4_0 && type != QT_Q8_0) || !amx_usable()) return NULL;
    const packed_entry *v = packed_avx512(type, true);
    static packed_entry e4, e8; /* written once, the same values by any thread */
    packed_entry *e = type == QT_Q4_0 ? &e4 : &e8;
    if (!e->gemm) { /* the quantizer is the VNNI kernel's */
        *e = AMX_Q4_0;
        e->weight_type = type;
        e->quantize = v->quantize;
        e->gemm = type == QT_Q4_0 ? gemm_amx : gemm_amx_q8;
    }
    return e;
}

/* AMX-BF16 (CPUID.7.0:EDX[22]) and AVX512_BF16 (CPUID.7.1:EAX[5], for
 * vcvtne2ps2bf16) on top of what amx_usable checks */
static int bf16_usable(void) {
    unsigned a, b, c, d, a1, b1, c1, d1;
    return amx_usable() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) &&
           __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
}

const packed_entry *packed_amx_bf16(uint32_t type) {
    if ((type != QT_Q4_0 && type != QT_Q8_0) || !bf16_usable()) return NULL;
    return type == QT_Q4_0 ? &AMX_BF16_Q4_0 : &AMX_BF16_Q8_0;
}

#else

const packed_entry *packed_amx(uint32_t type) {
    (void)type;
    return NULL;
}

const packed_entry *packed_amx_bf16(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
