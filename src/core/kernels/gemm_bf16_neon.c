/*
 * gemm_bf16_neon — gemm_bf16.h's kernel on ARM's BF16 extension (BFMMLA;
 * ARMv8.6, e.g. Cortex-A510/A710/X2 and later, Neoverse V1/N2, Apple M2),
 * chosen only where the system reports it (platform/cpu.h).
 *
 * BFMMLA multiplies a 2 x 4 bf16 matrix by a 4 x 2 one into a 2 x 2 F32
 * sum: 16 multiply-adds an instruction, where an F32 FMA does 4. The rows of
 * a call (up to 32) are re-laid as row pairs, each group of 4 values
 * (k = 4g .. 4g + 3) of a pair one 128-bit vector; 8 tokens at a time are
 * re-laid the same way as 4 token pairs. A register tile is 4 row pairs x 4
 * token pairs: 16 accumulators, 4 + 4 loads and 16 BFMMLA per group of 4
 * values (256 multiply-adds). Each output is summed over its groups in
 * order, the instruction's two pairs in order within a group: the
 * arithmetic gemm_bf16.c's reference models.
 */
#include "gemm_bf16.h"

#include <string.h>

#include "core/quant.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "simd_neon.h"

#define TILE_ROWS 8   /* 4 row pairs */
#define TILE_TOKENS 8 /* 4 token pairs */

/* Groups of 4 values in a row of n (the activations' row, n rounded up to even, zero-padded). */
static int64_t groups(int64_t n) { return (gemm_bf16_row_len(n) + 3) / 4; }

/* Four F32 (as bits) to bf16 as gemm_bf16_round rounds: nearest even, denormals as zero, NaN quiet. */
NEON_INLINE uint16x4_t bf16x4(uint32x4_t u) {
    const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
    const uint32x4_t den = vceqq_u32(vandq_u32(u, vdupq_n_u32(0x7f800000u)), vdupq_n_u32(0));
    u = vbslq_u32(den, vandq_u32(u, vdupq_n_u32(0x80000000u)), u);
    const uint32x4_t r = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fffu), vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1))));
    return vshrn_n_u32(vbslq_u32(nan, vorrq_u32(u, vdupq_n_u32(0x00400000u)), r), 16);
}

static void act_bf16(const float *x, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, bf16x4(vreinterpretq_u32_f32(vld1q_f32(x + i))));
    for (; i < n; i++) dst[i] = gemm_bf16_round(x[i]);
    if (n & 1) dst[n] = 0;
}

/* One weight row as bf16 into out, zero-padded to len values. */
static void row_bf16(const uint8_t *row, uint32_t type, int64_t n, int64_t len, uint16_t *out) {
    int64_t i = 0;
    if (type == QT_BF16) {
        memcpy(out, row, (size_t)n * 2);
        i = n;
    } else {
        for (; i + 4 <= n; i += 4) {
            uint16_t h[4];
            memcpy(h, row + 2 * i, 8);
            vst1_u16(out + i, bf16x4(vreinterpretq_u32_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))))));
        }
        for (; i < n; i++) {
            fp16_t h;
            memcpy(&h, row + 2 * i, sizeof h);
            out[i] = gemm_bf16_round(fp16_to_fp32(h));
        }
    }
    memset(out + i, 0, sizeof(uint16_t) * (size_t)(len - i));
}

/* Where value 4g of row (or token) s of a tile of 8 goes: pair s / 2's vector for group g, half s % 2. */
static size_t slot(int64_t g, int s) { return ((size_t)g * 4 + (size_t)(s / 2)) * 8 + (size_t)(s % 2) * 4; }

/* Rows 0..rows-1 (at most 32) as tiles of 8 rows, each G groups of 4 vectors; rows past the end are zeros. */
static void make_panel(const uint8_t *w, uint32_t type, size_t row_bytes, int64_t n, int rows, int64_t G,
                       uint16_t *panel, uint16_t *rowbuf) {
    const int tiles = (rows + TILE_ROWS - 1) / TILE_ROWS;
    for (int r = 0; r < tiles * TILE_ROWS; r++) {
        if (r < rows) row_bf16(w + (size_t)r * row_bytes, type, n, 4 * G, rowbuf);
        else memset(rowbuf, 0, sizeof(uint16_t) * (size_t)(4 * G));
        uint16_t *tile = panel + (size_t)(r / TILE_ROWS) * (size_t)G * 32;
        for (int64_t g = 0; g < G; g++) memcpy(tile + slot(g, r % TILE_ROWS), rowbuf + 4 * g, 8);
    }
}

/* nt (1..8) tokens' rows of len values (act_stride apart) laid as 4 token pairs; missing tokens are zeros. */
static void lay_tokens(const uint16_t *act, size_t act_stride, int64_t len, int nt, int64_t G, uint16_t *xt) {
    for (int s = 0; s < TILE_TOKENS; s++)
        for (int64_t g = 0; g < G; g++) {
            int64_t have = s < nt ? len - 4 * g : 0;
            have = have > 4 ? 4 : have;
            uint16_t *d = xt + slot(g, s);
            if (have > 0) memcpy(d, act + (size_t)s * act_stride + 4 * g, sizeof(uint16_t) * (size_t)have);
            else have = 0;
            memset(d + have, 0, sizeof(uint16_t) * (size_t)(4 - have));
        }
}

/* 8 rows x np token pairs; stores the first nr rows and nt tokens at y[t * ys + r]. */
NEON_BF16 NEON_INLINE void tile(const uint16_t *pw, const uint16_t *px, int64_t G, int np, float *y, size_t ys, int nr,
                                int nt) {
    float32x4_t acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int p = 0; p < np; p++) acc[i][p] = vdupq_n_f32(0.0f);
    for (int64_t g = 0; g < G; g++, pw += 32, px += 32) {
        bfloat16x8_t w[4];
        for (int i = 0; i < 4; i++) w[i] = vld1q_bf16((const bfloat16_t *)(const void *)(pw + 8 * i));
        for (int p = 0; p < np; p++) {
            const bfloat16x8_t x = vld1q_bf16((const bfloat16_t *)(const void *)(px + 8 * p));
            for (int i = 0; i < 4; i++) acc[i][p] = vbfmmlaq_f32(acc[i][p], w[i], x);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int p = 0; p < np; p++) { /* lanes: (row 2i, token 2p), (2i, 2p + 1), (2i + 1, 2p), (2i + 1, 2p + 1) */
            float v[4];
            vst1q_f32(v, acc[i][p]);
            for (int l = 0; l < 4; l++) {
                const int r = 2 * i + l / 2, t = 2 * p + l % 2;
                if (r < nr && t < nt) y[(size_t)t * ys + (size_t)r] = v[l];
            }
        }
}

NEON_BF16 static void tile_any(const uint16_t *pw, const uint16_t *px, int64_t G, float *y, size_t ys, int nr, int nt) {
    switch ((nt + 1) / 2) { /* a constant count per case: the tile's loops unroll into registers */
    case 1: tile(pw, px, G, 1, y, ys, nr, nt); break;
    case 2: tile(pw, px, G, 2, y, ys, nr, nt); break;
    case 3: tile(pw, px, G, 3, y, ys, nr, nt); break;
    default: tile(pw, px, G, 4, y, ys, nr, nt); break;
    }
}

/* the panel (32 rows), a tile of 8 tokens and one converted row, each G groups of 4 values; 64 for alignment */
static size_t scratch_bytes(int64_t n) { return (size_t)groups(n) * 4 * (GEMM_BF16_ROWS + TILE_TOKENS + 1) * 2 + 64; }

static void rows_bfmmla(const void *w, uint32_t type, size_t row_bytes, int64_t n, int r0, int r1,
                        const uint16_t *act, size_t act_stride, int T, float *y, size_t y_stride, void *scratch) {
    const int64_t G = groups(n);
    uint16_t *panel = (uint16_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint16_t *xt = panel + (size_t)G * 4 * GEMM_BF16_ROWS, *rowbuf = xt + (size_t)G * 4 * TILE_TOKENS;
    const int rows = r1 - r0;
    make_panel((const uint8_t *)w + (size_t)r0 * row_bytes, type, row_bytes, n, rows, G, panel, rowbuf);
    for (int t = 0; t < T; t += TILE_TOKENS) {
        const int nt = T - t < TILE_TOKENS ? T - t : TILE_TOKENS;
        lay_tokens(act + (size_t)t * act_stride, act_stride, gemm_bf16_row_len(n), nt, G, xt);
        for (int q = 0; q * TILE_ROWS < rows; q++) {
            const int nr = rows - q * TILE_ROWS < TILE_ROWS ? rows - q * TILE_ROWS : TILE_ROWS;
            tile_any(panel + (size_t)q * (size_t)G * 32, xt, G, y + (size_t)t * y_stride + r0 + q * TILE_ROWS, y_stride,
                     nr, nt);
        }
    }
}

static const gemm_bf16_impl IMPL = {"neon-bfmmla", GEMM_BF16_SUM_PAIRS_ODD, act_bf16, scratch_bytes, rows_bfmmla};
const gemm_bf16_impl *gemm_bf16_neon(void) { return &IMPL; }

#else /* not AArch64 */

const gemm_bf16_impl *gemm_bf16_neon(void) { return NULL; }

#endif
