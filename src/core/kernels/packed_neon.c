/*
 * packed_neon — the packed Q4_0, Q8_0 and Q4_K GEMMs for AArch64 (packed.h's
 * layout, the one the x86 paths read), with the dot-product extension (SDOT)
 * where the CPU has it and plain NEON otherwise.
 *
 * A 64-byte quant vector of a 16-row group is four 128-bit quarters, rows
 * 4k..4k+3, four bytes of one row in each 32-bit lane: exactly SDOT's by-
 * element form, which multiplies the four bytes of each lane by four bytes of
 * the other operand chosen by an index, and adds them to the lane. A token's
 * 32 activation bytes are two registers; vector j meets bytes 4j..4j+3, lane
 * j % 4 of one of them, without any broadcast. Per block and quarter the
 * weights are unpacked once (Q4_0's nibbles with an and and a shift; Q8_0's
 * bytes as they are: SDOT is signed by signed) for up to 4 tokens.
 *
 * Without SDOT the same lane sums are SMULL (exact int16 products) and
 * SADALP into pair sums, one pairwise add at the end of the block: the same
 * integers. As on x86, the integer sum of each (row, block) is exact and meets
 * the scales in one fma per block, in block order: the outputs are bit-
 * identical to the reference kernels (packed.c) for any number of tokens.
 *
 * A token alone (decode) walks the four quarters inside its pass over the
 * group; a batch walks one quarter at a time, four tokens at a time, so its
 * accumulators, the unpacked weights and the activations fit the 32
 * registers. Where the CPU has i8mm, batches of Q4_0 and Q8_0 take SMMLA
 * (below), two rows by two tokens an instruction.
 */
#include "packed.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <string.h>

#include "simd_neon.h"
#include "core/quant.h"

#define MAX_TILE 4
#define GROUP_BLOCK_BYTES_Q4 (PACK_ROWS * 18)
#define GROUP_BLOCK_BYTES_Q8 (PACK_ROWS * 34)
#define GROUP_SB_BYTES_Q4K (PACK_ROWS * 144)

/* bytes 4l..4l+3 of a in every lane (the lane index must be a literal) */
NEON_INLINE int8x16_t dup_lane(int8x16_t a, const int l) {
    const int32x4_t v = vreinterpretq_s32_s8(a);
    switch (l) {
    case 0: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 0));
    case 1: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 1));
    case 2: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 2));
    default: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 3));
    }
}

/* acc + (the four bytes of each lane of w) . (bytes 4l..4l+3 of a), per lane */
NEON_DOTPROD static inline int32x4_t sdot_lane_dp(int32x4_t acc, int8x16_t w, int8x16_t a, const int l) {
#if defined(NEON_SDOT_ASM)
    const int8x16_t b = dup_lane(a, l);
    __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(w), "w"(b));
    return acc;
#else
    switch (l) {
    case 0: return vdotq_laneq_s32(acc, w, a, 0);
    case 1: return vdotq_laneq_s32(acc, w, a, 1);
    case 2: return vdotq_laneq_s32(acc, w, a, 2);
    default: return vdotq_laneq_s32(acc, w, a, 3);
    }
#endif
}

/* The integer sums of one quarter: with SDOT a lane per row (s.v[0]); plain
 * NEON keeps two pair-sum vectors, rows 0-1 (s.v[0]) and 2-3 (s.v[1]),
 * folded by lane_sums. */
typedef struct {
    int32x4_t v[2];
} quad_sum;

NEON_INLINE quad_sum qs_zero(void) { return (quad_sum){{vdupq_n_s32(0), vdupq_n_s32(0)}}; }

NEON_INLINE quad_sum qs_dot(bool dp, quad_sum s, int8x16_t w, int8x16_t a, const int l) {
    if (dp) {
        s.v[0] = sdot_lane_dp(s.v[0], w, a, l);
        return s;
    }
    const int8x16_t b = dup_lane(a, l);
    s.v[0] = vpadalq_s16(s.v[0], vmull_s8(vget_low_s8(w), vget_low_s8(b)));
    s.v[1] = vpadalq_s16(s.v[1], vmull_high_s8(w, b));
    return s;
}

/* the four rows' sums (lane r: row r) */
NEON_INLINE int32x4_t lane_sums(bool dp, quad_sum s) { return dp ? s.v[0] : vpaddq_s32(s.v[0], s.v[1]); }

NEON_INLINE int8x16_t quarter(const uint8_t *v, int k) { return vld1q_s8((const int8_t *)(v + 16 * k)); }

NEON_INLINE float32x4_t quarter_scales(const uint8_t *p, int k) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(p + 8 * k))));
}

/* Q4_0 (q8 false) or Q8_0: the exact integer sums of quarter k of block g
 * with NT tokens' activation blocks */
NEON_INLINE void sums_32(bool dp, const uint8_t *g, int k, const block_q8p *const *ab, int32x4_t *s, const int NT,
                         const bool q8) {
    quad_sum acc[MAX_TILE];
    int8x16_t a0[MAX_TILE], a1[MAX_TILE];
    for (int t = 0; t < NT; t++) {
        acc[t] = qs_zero();
        a0[t] = vld1q_s8(ab[t]->qs);
        a1[t] = vld1q_s8(ab[t]->qs + 16);
    }
    if (q8) {
        for (int j = 0; j < 8; j++) {
            const int8x16_t w = quarter(g + 32 + 64 * j, k);
            for (int t = 0; t < NT; t++) acc[t] = qs_dot(dp, acc[t], w, j < 4 ? a0[t] : a1[t], j & 3);
        }
    } else {
        const uint8x16_t lo = vdupq_n_u8(0x0F);
        for (int j = 0; j < 4; j++) {
            const uint8x16_t p = vreinterpretq_u8_s8(quarter(g + 32 + 64 * j, k));
            const int8x16_t wl = vreinterpretq_s8_u8(vandq_u8(p, lo)), wh = vreinterpretq_s8_u8(vshrq_n_u8(p, 4));
            for (int t = 0; t < NT; t++) {
                acc[t] = qs_dot(dp, acc[t], wl, a0[t], j);
                acc[t] = qs_dot(dp, acc[t], wh, a1[t], j);
            }
        }
    }
    for (int t = 0; t < NT; t++) {
        s[t] = lane_sums(dp, acc[t]);
        if (!q8) s[t] = vaddq_s32(s[t], vdupq_n_s32(ab[t]->off));
    }
}

/* NT tokens against quarters k0..k0+KQ-1 of one Q4_0 or Q8_0 group */
NEON_INLINE void tile(bool dp, const uint8_t *w, int64_t nb, const uint8_t *act, size_t as, float *y, size_t ys,
                      int k0, const int KQ, const int NT, const bool q8) {
    const size_t gbb = q8 ? GROUP_BLOCK_BYTES_Q8 : GROUP_BLOCK_BYTES_Q4;
    float32x4_t acc[4][MAX_TILE];
    const block_q8p *a[MAX_TILE], *ab[MAX_TILE];
    for (int t = 0; t < NT; t++) {
        a[t] = (const block_q8p *)(act + (size_t)t * as);
        for (int k = 0; k < KQ; k++) acc[k][t] = vdupq_n_f32(0.0f);
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g = w + (size_t)b * gbb;
        for (int t = 0; t < NT; t++) ab[t] = a[t] + b;
        for (int k = 0; k < KQ; k++) {
            int32x4_t s[MAX_TILE];
            sums_32(dp, g, k0 + k, ab, s, NT, q8);
            const float32x4_t dw = quarter_scales(g, k0 + k);
            for (int t = 0; t < NT; t++)
                acc[k][t] = vfmaq_f32(acc[k][t], vcvtq_f32_s32(s[t]), vmulq_n_f32(dw, ab[t]->d));
        }
    }
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < KQ; k++) vst1q_f32(y + (size_t)t * ys + 4 * (k0 + k), acc[k][t]);
}

/* Q4_K (packed.h): per super-block and quarter, the 8 scales and mins of 4
 * rows from the three scale words (ggml's get_scale_min_k4 on 4 lanes), the
 * mins against the activation's sub-block sums, and per 64 values (chunk c)
 * two chains of 8 dot products, low nibbles (sub-block 2c) and high (2c + 1),
 * each multiplied by its sub-block's scale into isum: exact integers. */
typedef struct {
    uint32x4_t s_lo, s_hi; /* scale bytes 0..3 | 4..7 of each row's lane */
    uint32x4_t m_lo, m_hi; /* min bytes likewise */
} q4k_scales;

NEON_INLINE q4k_scales q4k_unpack(const uint8_t *g, int k) {
    const uint32x4_t m6 = vdupq_n_u32(0x3F3F3F3F), m2 = vdupq_n_u32(0x03030303), lo = vdupq_n_u32(0x0F0F0F0F);
    const uint32x4_t u0 = vreinterpretq_u32_s8(quarter(g + 64, k)), u1 = vreinterpretq_u32_s8(quarter(g + 128, k));
    const uint32x4_t u2 = vreinterpretq_u32_s8(quarter(g + 192, k));
    q4k_scales s;
    s.s_lo = vandq_u32(u0, m6);
    s.m_lo = vandq_u32(u1, m6);
    s.s_hi = vorrq_u32(vandq_u32(u2, lo), vshlq_n_u32(vandq_u32(vshrq_n_u32(u0, 6), m2), 4));
    s.m_hi = vorrq_u32(vandq_u32(vshrq_n_u32(u2, 4), lo), vshlq_n_u32(vandq_u32(vshrq_n_u32(u1, 6), m2), 4));
    return s;
}

/* byte j (0..7) of the scale or min bytes, as int32 lanes */
NEON_INLINE int32x4_t byte_of(uint32x4_t lo4, uint32x4_t hi4, const int j) {
    const uint32x4_t v = j < 4 ? lo4 : hi4;
    return vreinterpretq_s32_u32(vandq_u32(vshlq_u32(v, vdupq_n_s32(-8 * (j & 3))), vdupq_n_u32(0xFF)));
}

/* sum over sub-blocks j of min_j * s_j, s_j from the activation's msum pairs */
NEON_INLINE int32x4_t q4k_mins(const q4k_scales *sc, const block_q8kp *ab) {
    static const int pair[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    int32x4_t ms = vdupq_n_s32(0);
    for (int p = 0; p < 4; p++) {
        const uint32_t v = (uint32_t)ab->msum[p];
        ms = vmlaq_n_s32(ms, byte_of(sc->m_lo, sc->m_hi, pair[p][0]), (int16_t)(v & 0xFFFF));
        ms = vmlaq_n_s32(ms, byte_of(sc->m_lo, sc->m_hi, pair[p][1]), (int16_t)(v >> 16));
    }
    return ms;
}

NEON_INLINE void q4k_chunk(bool dp, const uint8_t *g, int k, int c, const q4k_scales *sc, const int8_t *const *q,
                           int32x4_t *isum, const int NT) {
    const uint8x16_t lo = vdupq_n_u8(0x0F);
    quad_sum s0[MAX_TILE], s1[MAX_TILE];
    for (int t = 0; t < NT; t++) s0[t] = s1[t] = qs_zero();
    for (int j = 0; j < 8; j++) {
        const uint8x16_t p = vreinterpretq_u8_s8(quarter(g + 256 + 64 * (8 * c + j), k));
        const int8x16_t wl = vreinterpretq_s8_u8(vandq_u8(p, lo)), wh = vreinterpretq_s8_u8(vshrq_n_u8(p, 4));
        for (int t = 0; t < NT; t++) {
            const int8_t *qc = q[t] + 64 * c + 16 * (j / 4);
            s0[t] = qs_dot(dp, s0[t], wl, vld1q_s8(qc), j & 3);
            s1[t] = qs_dot(dp, s1[t], wh, vld1q_s8(qc + 32), j & 3);
        }
    }
    const int32x4_t sc0 = byte_of(sc->s_lo, sc->s_hi, 2 * c), sc1 = byte_of(sc->s_lo, sc->s_hi, 2 * c + 1);
    for (int t = 0; t < NT; t++)
        isum[t] = vmlaq_s32(vmlaq_s32(isum[t], lane_sums(dp, s0[t]), sc0), lane_sums(dp, s1[t]), sc1);
}

NEON_INLINE void tile_q4k(bool dp, const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, float *y, size_t ys,
                          int k0, const int KQ, const int NT) {
    float32x4_t acc[4][MAX_TILE], accm[4][MAX_TILE];
    const block_q8kp *a[MAX_TILE];
    for (int t = 0; t < NT; t++) {
        a[t] = (const block_q8kp *)(act + (size_t)t * as);
        for (int k = 0; k < KQ; k++) acc[k][t] = accm[k][t] = vdupq_n_f32(0.0f);
    }
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *g = w + (size_t)i * GROUP_SB_BYTES_Q4K;
        for (int k = 0; k < KQ; k++) {
            const q4k_scales sc = q4k_unpack(g, k0 + k);
            const float32x4_t dw = quarter_scales(g, k0 + k), dmin = quarter_scales(g + 32, k0 + k);
            int32x4_t isum[MAX_TILE];
            const int8_t *q[MAX_TILE];
            for (int t = 0; t < NT; t++) {
                const block_q8kp *ab = a[t] + i;
                accm[k][t] = vfmaq_f32(accm[k][t], vcvtq_f32_s32(q4k_mins(&sc, ab)), vmulq_n_f32(dmin, ab->d));
                isum[t] = vdupq_n_s32(0);
                q[t] = ab->qs;
            }
            for (int c = 0; c < 4; c++) q4k_chunk(dp, g, k0 + k, c, &sc, q, isum, NT);
            for (int t = 0; t < NT; t++)
                acc[k][t] = vfmaq_f32(acc[k][t], vcvtq_f32_s32(isum[t]), vmulq_n_f32(dw, a[t][i].d));
        }
    }
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < KQ; k++)
            vst1q_f32(y + (size_t)t * ys + 4 * (k0 + k), vsubq_f32(acc[k][t], accm[k][t]));
}

/* kind: 0 Q4_0, 1 Q8_0, 2 Q4_K; KQ and NT compile-time constants */
NEON_INLINE void tile_any(bool dp, const void *w, int64_t n, const uint8_t *a, size_t as, float *y, size_t ys, int k0,
                          const int KQ, const int NT, const int kind) {
    if (kind == 2) tile_q4k(dp, w, n / QK_K, a, as, y, ys, k0, KQ, NT);
    else tile(dp, w, n / 32, a, as, y, ys, k0, KQ, NT, kind == 1);
}

/* one token: all four quarters in one pass; a batch: a quarter at a time, in
 * tiles of up to 4 tokens */
NEON_INLINE void gemm(bool dp, const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys,
                      const int kind) {
    if (n_tok == 1) {
        tile_any(dp, w, n, act, as, y, ys, 0, 4, 1, kind);
        return;
    }
    for (int t0 = 0; t0 < n_tok; t0 += MAX_TILE) {
        const uint8_t *a = (const uint8_t *)act + (size_t)t0 * as;
        float *yt = y + (size_t)t0 * ys;
        const int nt = n_tok - t0 < MAX_TILE ? n_tok - t0 : MAX_TILE;
        for (int k = 0; k < 4; k++) switch (nt) {
            case 1: tile_any(dp, w, n, a, as, yt, ys, k, 1, 1, kind); break;
            case 2: tile_any(dp, w, n, a, as, yt, ys, k, 1, 2, kind); break;
            case 3: tile_any(dp, w, n, a, as, yt, ys, k, 1, 3, kind); break;
            default: tile_any(dp, w, n, a, as, yt, ys, k, 1, 4, kind); break;
            }
    }
}

/* each kernel twice: plain NEON, and with SDOT (a target attribute on just that function) */
#define PACKED_NEON_PAIR(name, kind)                                                                                  \
    static void name(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {         \
        gemm(false, w, n, act, as, n_tok, y, ys, kind);                                                               \
    }                                                                                                                 \
    NEON_DOTPROD static void name##_dp(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y,    \
                                       size_t ys) {                                                                   \
        gemm(true, w, n, act, as, n_tok, y, ys, kind);                                                                \
    }

PACKED_NEON_PAIR(gemm_q4_0, 0)
PACKED_NEON_PAIR(gemm_q8_0, 1)
PACKED_NEON_PAIR(gemm_q4_k, 2)

/* ---- SMMLA (i8mm): two rows by two tokens an instruction.
 *
 * SMMLA multiplies a 2x8 byte matrix by the transpose of another and adds the
 * 2x2 int32 result: with rows r, r+1 of a quarter (their bytes of vectors j and
 * j+1 side by side: one zip of the two quarter registers) against tokens t,
 * t+1 (their activation bytes 4j..4j+7), one instruction makes 32 of the
 * multiply-adds SDOT makes 16 of. The sums stay in (row, token) order, [r t,
 * r t+1, r+1 t, r+1 t+1], through the fma with the matching products of
 * scales, and are unzipped into the tokens' rows at the end: the same
 * integers and the same float operations as every other kernel. Token pairs
 * only; a lone token (decode, an odd batch's last) takes the SDOT kernel,
 * which gives the same bits. Q4_K keeps SDOT. */

NEON_I8MM static inline int32x4_t mmla_i8(int32x4_t acc, int8x16_t w, int8x16_t a) { return vmmlaq_s32(acc, w, a); }

/* rows 0-1 (lo) and 2-3 (hi) of two quarter registers, each row's 4 bytes of u then of v */
NEON_INLINE void zip_rows(int8x16_t u, int8x16_t v, int8x16_t *lo, int8x16_t *hi) {
    const int32x4_t a = vreinterpretq_s32_s8(u), b = vreinterpretq_s32_s8(v);
    *lo = vreinterpretq_s8_s32(vzip1q_s32(a, b));
    *hi = vreinterpretq_s8_s32(vzip2q_s32(a, b));
}

NEON_INLINE int8x16_t pair8(const int8_t *p0, const int8_t *p1) { return vcombine_s8(vld1_s8(p0), vld1_s8(p1)); }

/* quarter k of block g against tokens a0, a1: s[0] = rows 0-1, s[1] = rows 2-3, (row, token) order */
NEON_INLINE void mm_sums(const uint8_t *g, int k, const block_q8p *a0, const block_q8p *a1, int32x4_t s[2],
                         const bool q8) {
    s[0] = s[1] = vdupq_n_s32(0);
    int8x16_t lo, hi;
    if (q8) {
        for (int j = 0; j < 8; j += 2) {
            zip_rows(quarter(g + 32 + 64 * j, k), quarter(g + 32 + 64 * (j + 1), k), &lo, &hi);
            const int8x16_t a = pair8(a0->qs + 4 * j, a1->qs + 4 * j);
            s[0] = mmla_i8(s[0], lo, a);
            s[1] = mmla_i8(s[1], hi, a);
        }
        return;
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int j = 0; j < 4; j += 2) {
        const uint8x16_t p = vreinterpretq_u8_s8(quarter(g + 32 + 64 * j, k));
        const uint8x16_t q = vreinterpretq_u8_s8(quarter(g + 32 + 64 * (j + 1), k));
        const int8x16_t al = pair8(a0->qs + 4 * j, a1->qs + 4 * j), ah = pair8(a0->qs + 16 + 4 * j, a1->qs + 16 + 4 * j);
        zip_rows(vreinterpretq_s8_u8(vandq_u8(p, m4)), vreinterpretq_s8_u8(vandq_u8(q, m4)), &lo, &hi);
        s[0] = mmla_i8(s[0], lo, al);
        s[1] = mmla_i8(s[1], hi, al);
        zip_rows(vreinterpretq_s8_u8(vshrq_n_u8(p, 4)), vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), &lo, &hi);
        s[0] = mmla_i8(s[0], lo, ah);
        s[1] = mmla_i8(s[1], hi, ah);
    }
    const int32x2_t off = {a0->off, a1->off};
    s[0] = vaddq_s32(s[0], vcombine_s32(off, off));
    s[1] = vaddq_s32(s[1], vcombine_s32(off, off));
}

/* NP token pairs against quarter k of one Q4_0 or Q8_0 group */
NEON_INLINE void tile_mm(const uint8_t *w, int64_t nb, const uint8_t *act, size_t as, float *y, size_t ys, int k,
                         const int NP, const bool q8) {
    const size_t gbb = q8 ? GROUP_BLOCK_BYTES_Q8 : GROUP_BLOCK_BYTES_Q4;
    float32x4_t acc[2][2];
    for (int p = 0; p < NP; p++) acc[p][0] = acc[p][1] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g = w + (size_t)b * gbb;
        const float32x4_t dw = quarter_scales(g, k);
        const float32x4_t d01 = vzip1q_f32(dw, dw), d23 = vzip2q_f32(dw, dw); /* each row's scale twice */
        for (int p = 0; p < NP; p++) {
            const block_q8p *a0 = (const block_q8p *)(act + (size_t)(2 * p) * as) + b;
            const block_q8p *a1 = (const block_q8p *)(act + (size_t)(2 * p + 1) * as) + b;
            int32x4_t s[2];
            mm_sums(g, k, a0, a1, s, q8);
            const float32x2_t d = {a0->d, a1->d};
            const float32x4_t dd = vcombine_f32(d, d);
            acc[p][0] = vfmaq_f32(acc[p][0], vcvtq_f32_s32(s[0]), vmulq_f32(d01, dd));
            acc[p][1] = vfmaq_f32(acc[p][1], vcvtq_f32_s32(s[1]), vmulq_f32(d23, dd));
        }
    }
    for (int p = 0; p < NP; p++) {
        vst1q_f32(y + (size_t)(2 * p) * ys + 4 * k, vuzp1q_f32(acc[p][0], acc[p][1]));
        vst1q_f32(y + (size_t)(2 * p + 1) * ys + 4 * k, vuzp2q_f32(acc[p][0], acc[p][1]));
    }
}

/* pairs of tokens on SMMLA, two pairs a pass over a quarter; a lone token on SDOT */
NEON_INLINE void gemm_mm(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys,
                         const bool q8) {
    const int pairs = n_tok / 2;
    for (int p0 = 0; p0 < pairs; p0 += 2) {
        const uint8_t *a = (const uint8_t *)act + (size_t)(2 * p0) * as;
        float *yt = y + (size_t)(2 * p0) * ys;
        for (int k = 0; k < 4; k++) {
            if (pairs - p0 >= 2) tile_mm(w, n / 32, a, as, yt, ys, k, 2, q8);
            else tile_mm(w, n / 32, a, as, yt, ys, k, 1, q8);
        }
    }
    if (n_tok & 1)
        gemm(true, w, n, (const uint8_t *)act + (size_t)(n_tok - 1) * as, as, 1, y + (size_t)(n_tok - 1) * ys, ys, q8);
}

NEON_I8MM static void gemm_q4_0_mm(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y,
                                   size_t ys) {
    gemm_mm(w, n, act, as, n_tok, y, ys, false);
}
NEON_I8MM static void gemm_q8_0_mm(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y,
                                   size_t ys) {
    gemm_mm(w, n, act, as, n_tok, y, ys, true);
}

/* the activations with this path's own quantizers (ggml's rounding) */
static void quantize_q8p(const float *x, void *dst, int64_t n) {
    packed_q8p_from(kernel_get_path(CPU_NEON, QT_Q8_0), x, dst, n);
}
static void quantize_q8kp(const float *x, void *dst, int64_t n) {
    packed_q8kp_from(kernel_get_path(CPU_NEON, QT_Q4_K), x, dst, n);
}

#define Q8P 32, sizeof(block_q8p)
#define Q8KP 256, sizeof(block_q8kp)
static const packed_entry NEON_Q4_0 = {QT_Q4_0, quantize_q8p, gemm_q4_0, Q8P, "neon", NULL, 0, 0};
static const packed_entry NEON_Q8_0 = {QT_Q8_0, quantize_q8p, gemm_q8_0, Q8P, "neon", NULL, 0, 0};
static const packed_entry NEON_Q4_K = {QT_Q4_K, quantize_q8kp, gemm_q4_k, Q8KP, "neon", NULL, 0, 0};
static const packed_entry DOT_Q4_0 = {QT_Q4_0, quantize_q8p, gemm_q4_0_dp, Q8P, "neon-dotprod", NULL, 0, 0};
static const packed_entry DOT_Q8_0 = {QT_Q8_0, quantize_q8p, gemm_q8_0_dp, Q8P, "neon-dotprod", NULL, 0, 0};
static const packed_entry DOT_Q4_K = {QT_Q4_K, quantize_q8kp, gemm_q4_k_dp, Q8KP, "neon-dotprod", NULL, 0, 0};
static const packed_entry MM_Q4_0 = {QT_Q4_0, quantize_q8p, gemm_q4_0_mm, Q8P, "neon-i8mm", NULL, 0, 0};
static const packed_entry MM_Q8_0 = {QT_Q8_0, quantize_q8p, gemm_q8_0_mm, Q8P, "neon-i8mm", NULL, 0, 0};

const packed_entry *packed_neon_i8mm(uint32_t type) {
    return type == QT_Q4_0 ? &MM_Q4_0 : type == QT_Q8_0 ? &MM_Q8_0 : NULL;
}

const packed_entry *packed_neon(uint32_t type, bool dotprod) {
    switch (type) {
    case QT_Q4_0: return dotprod ? &DOT_Q4_0 : &NEON_Q4_0;
    case QT_Q8_0: return dotprod ? &DOT_Q8_0 : &NEON_Q8_0;
    case QT_Q4_K: return dotprod ? &DOT_Q4_K : &NEON_Q4_K;
    default: return NULL;
    }
}

#else

const packed_entry *packed_neon(uint32_t type, bool dotprod) {
    (void)type;
    (void)dotprod;
    return NULL;
}

const packed_entry *packed_neon_i8mm(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
