/*
 * packed_avx2 — the packed Q4_0, Q8_0 and Q4_K GEMMs for AVX2 (packed.h's
 * layout, the one AVX-512 reads: a bundle packed on either host loads on the
 * other).
 *
 * A 64-byte quant vector of a 16-row group is two 256-bit halves, rows 0..7
 * and 8..15, four bytes per row in each 32-bit lane. A batch walks a group
 * one half at a time (a token alone both halves in one pass, so decode
 * streams the group once): for each half and each tile of up to 4 tokens, the
 * weights of every block are unpacked once and meet each token's four
 * activation bytes (broadcast to the 8 lanes) in vpmaddubsw, unsigned weight
 * bytes times signed activation bytes, summed in pairs to int16. Then
 * vpmaddwd against ones (or against the Q4_K sub-block scale) sums the pairs
 * to int32: lane r holds row r's exact integer dot product with the block,
 * the integer the reference computes. Converted to float, it meets the rows'
 * scales times the token's in one fma per block, in block order, as the
 * reference does: the outputs are bit-identical to it and to the AVX-512
 * kernels, for any number of tokens.
 *
 * No saturation, by bounds: Q4_0 and Q4_K nibbles are at most 15 and the
 * activations at most 127 (Q8_0) or 128 (Q8_K) in magnitude, so a pair sum is
 * at most 3840 and eight of them, added in int16, 30720 < 32767. Q8_0's
 * weights are signed: vpmaddubsw takes |w| and the activation with w's sign
 * (vpsignb), a pair at most 2 * 128 * 127 = 32512, widened at once.
 *
 * With AVX-VNNI (Alder Lake and later Intel cores, Zen 5) the Q4_0 and Q8_0
 * kernels take vpdpbusd on ymm: the four products of a lane summed into its
 * int32 in one instruction, where vpmaddubsw, vpmaddwd and an add take
 * three. The integer sums are the same, so are the outputs, bit for bit.
 * This CPU family's VEX form cannot run here (nor under qemu 7.2), so the
 * same kernels are also built on AVX512-VNNI's EVEX form of the instruction
 * on ymm (dp 2), which the tests run where AVX-512 has VNNI: one source, two
 * encodings of one operation. (Q4_K keeps vpmaddubsw: its sub-block scales
 * multiply the int16 sums.)
 */
#include "packed.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include "simd_x86.h"
#include "core/quant.h"

#define MAX_TILE 4
#define GROUP_BLOCK_BYTES_Q4 (PACK_ROWS * 18)
#define GROUP_BLOCK_BYTES_Q8 (PACK_ROWS * 34)
#define GROUP_SB_BYTES_Q4K (PACK_ROWS * 144)
/* decode asks for the group's bytes this far ahead (the AVX-512 kernels' figure) */
#define PREFETCH 4096

typedef int32_t __attribute__((may_alias, aligned(1))) i32_any;

/* four activation bytes in every lane */
ALWAYS_INLINE __m256i bcast4(const int8_t *p) { return _mm256_set1_epi32(*(const i32_any *)p); }

ALWAYS_INLINE __m256i half_load(const uint8_t *p, int h) { return _mm256_loadu_si256((const __m256i *)(p + 32 * h)); }

/* the 8 fp16 scales of half h of a 16-row field at p */
ALWAYS_INLINE __m256 half_scales(const uint8_t *p, int h) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * h)));
}

/* A batch asks for the group ahead into L2 (simd_x86.h: prefetch_batch); a
 * decode PREFETCH bytes ahead into L1, but not on AMD (pf false), whose
 * hardware prefetcher does better alone: the widened 1.1B Q4_0 on Zen 4's
 * AVX2 path decoded at 44.0-55.3 tokens/s without, 29.4-30.3 with (alternated,
 * 3 rounds). */
ALWAYS_INLINE void prefetch_group(const uint8_t *g, size_t bytes, int h, const int NT, const bool pf) {
    if (h) return; /* the second half reads what the first brought in */
    if (NT > 1) prefetch_batch(g, bytes);
    else if (pf) prefetch_l1(g, PREFETCH, bytes);
}

/* acc + each lane's four u8 x s8 products: vpdpbusd, dp 1 in AVX-VNNI's VEX
 * form, dp 2 in AVX512-VNNI's EVEX form (inline assembly: no target options,
 * the caller picks by the CPU) */
ALWAYS_INLINE __m256i dpbusd(__m256i acc, __m256i u, __m256i s, const int dp) {
    if (dp == 1) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
    else __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
    return acc;
}

/* Q4_0 on vpdpbusd: the same integer sums in int32 from the start */
ALWAYS_INLINE void sums_q4_0_dp(const uint8_t *g, int h, const block_q8p *const *ab, __m256i *s, const int NT,
                                const int dp) {
    const __m256i lo = _mm256_set1_epi8(0x0F);
    for (int t = 0; t < NT; t++) s[t] = _mm256_set1_epi32(ab[t]->off);
    for (int j = 0; j < 4; j++) {
        const __m256i p = half_load(g + 32 + 64 * j, h);
        const __m256i wl = _mm256_and_si256(p, lo), wh = _mm256_and_si256(_mm256_srli_epi16(p, 4), lo);
        for (int t = 0; t < NT; t++) {
            s[t] = dpbusd(s[t], wl, bcast4(ab[t]->qs + 4 * j), dp);
            s[t] = dpbusd(s[t], wh, bcast4(ab[t]->qs + 16 + 4 * j), dp);
        }
    }
}

/* Q4_0: the exact integer sums of block g with NT tokens' activation blocks */
ALWAYS_INLINE void sums_q4_0(const uint8_t *g, int h, const block_q8p *const *ab, __m256i *s, const int NT,
                             const int dp) {
    if (dp) {
        sums_q4_0_dp(g, h, ab, s, NT, dp);
        return;
    }
    const __m256i lo = _mm256_set1_epi8(0x0F);
    __m256i s16[MAX_TILE];
    for (int t = 0; t < NT; t++) s16[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        const __m256i p = half_load(g + 32 + 64 * j, h);
        const __m256i wl = _mm256_and_si256(p, lo), wh = _mm256_and_si256(_mm256_srli_epi16(p, 4), lo);
        for (int t = 0; t < NT; t++) {
            const __m256i a = _mm256_maddubs_epi16(wl, bcast4(ab[t]->qs + 4 * j));
            const __m256i b = _mm256_maddubs_epi16(wh, bcast4(ab[t]->qs + 16 + 4 * j));
            s16[t] = _mm256_add_epi16(s16[t], _mm256_add_epi16(a, b));
        }
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < NT; t++) s[t] = _mm256_add_epi32(_mm256_madd_epi16(s16[t], ones), _mm256_set1_epi32(ab[t]->off));
}

/* Q8_0 on vpdpbusd: the weights made unsigned (w + 128, one xor for all the
 * tokens), the sum started at -128 * sum(a) = 16 * off: the same integers */
ALWAYS_INLINE void sums_q8_0_dp(const uint8_t *g, int h, const block_q8p *const *ab, __m256i *s, const int NT,
                                const int dp) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int t = 0; t < NT; t++) s[t] = _mm256_set1_epi32(16 * ab[t]->off);
    for (int j = 0; j < 8; j++) {
        const __m256i wu = _mm256_xor_si256(half_load(g + 32 + 64 * j, h), flip);
        for (int t = 0; t < NT; t++) s[t] = dpbusd(s[t], wu, bcast4(ab[t]->qs + 4 * j), dp);
    }
}

/* Q8_0: the same with signed weights */
ALWAYS_INLINE void sums_q8_0(const uint8_t *g, int h, const block_q8p *const *ab, __m256i *s, const int NT,
                             const int dp) {
    if (dp) {
        sums_q8_0_dp(g, h, ab, s, NT, dp);
        return;
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < NT; t++) s[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i w = half_load(g + 32 + 64 * j, h), aw = _mm256_abs_epi8(w);
        for (int t = 0; t < NT; t++) {
            const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(ab[t]->qs + 4 * j), w));
            s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p, ones));
        }
    }
}

/* NT tokens against halves h0..h0+NH-1 of one Q4_0 or Q8_0 group (rows 8h..8h+7 each) */
ALWAYS_INLINE void tile(const uint8_t *w, int64_t nb, const uint8_t *act, size_t as, float *y, size_t ys, int h0,
                        const int NH, const int NT, const bool q8, const bool pf, const int dp) {
    const size_t gbb = q8 ? GROUP_BLOCK_BYTES_Q8 : GROUP_BLOCK_BYTES_Q4;
    __m256 acc[2][MAX_TILE];
    const block_q8p *a[MAX_TILE], *ab[MAX_TILE];
    for (int t = 0; t < NT; t++) {
        a[t] = (const block_q8p *)(act + (size_t)t * as);
        for (int h = 0; h < NH; h++) acc[h][t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g = w + (size_t)b * gbb;
        prefetch_group(g, gbb, h0, NT, pf);
        for (int t = 0; t < NT; t++) ab[t] = a[t] + b;
        for (int h = h0; h < h0 + NH; h++) {
            __m256i s[MAX_TILE];
            if (q8) sums_q8_0(g, h, ab, s, NT, dp);
            else sums_q4_0(g, h, ab, s, NT, dp);
            const __m256 dw = half_scales(g, h);
            for (int t = 0; t < NT; t++)
                acc[h - h0][t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, _mm256_set1_ps(ab[t]->d)), acc[h - h0][t]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int h = 0; h < NH; h++) _mm256_storeu_ps(y + (size_t)t * ys + 8 * (h0 + h), acc[h][t]);
}

/* Q4_K (packed.h): per super-block the 8 scales and mins of 8 rows from the
 * three scale words (ggml's get_scale_min_k4 on 8 lanes at once), the mins
 * against the activation's sub-block sums in vpmaddwd, and per 64 values two
 * int16 chains of 8 vpmaddubsw (low and high nibbles, sub-blocks 2c and
 * 2c + 1) whose pairs vpmaddwd sums with the sub-block's scale: isum exact. */
typedef struct {
    __m256i s_lo, s_hi; /* scale bytes 0..3 | 4..7 of each row's lane */
    __m256i M[4];       /* the mins as int16 pairs (m0, m2), (m1, m3), (m4, m6), (m5, m7) */
} q4k_scales;

ALWAYS_INLINE q4k_scales q4k_unpack(const uint8_t *g, int h) {
    const __m256i m6 = _mm256_set1_epi8(0x3F), m2 = _mm256_set1_epi8(0x03), lo = _mm256_set1_epi8(0x0F);
    const __m256i pairs = _mm256_set1_epi32(0x00FF00FF);
    const __m256i u0 = half_load(g + 64, h), u1 = half_load(g + 128, h), u2 = half_load(g + 192, h);
    q4k_scales k;
    k.s_lo = _mm256_and_si256(u0, m6);
    k.s_hi = _mm256_or_si256(_mm256_and_si256(u2, lo), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), m2), 4));
    const __m256i m_lo = _mm256_and_si256(u1, m6);
    const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), lo),
                                         _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), m2), 4));
    k.M[0] = _mm256_and_si256(m_lo, pairs);
    k.M[1] = _mm256_and_si256(_mm256_srli_epi32(m_lo, 8), pairs);
    k.M[2] = _mm256_and_si256(m_hi, pairs);
    k.M[3] = _mm256_and_si256(_mm256_srli_epi32(m_hi, 8), pairs);
    return k;
}

/* byte `byte` of each lane of S, in both int16 halves of the lane */
ALWAYS_INLINE __m256i scale_pair(__m256i S, int byte) {
    const __m256i v = _mm256_and_si256(_mm256_srli_epi32(S, 8 * byte), _mm256_set1_epi32(0xFF));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* isum of 64 values (chunk c) of super-block g for NT tokens, added to isum */
ALWAYS_INLINE void q4k_chunk(const uint8_t *g, int h, int c, const q4k_scales *k, const int8_t *const *q, __m256i *isum,
                             const int NT) {
    const __m256i lo = _mm256_set1_epi8(0x0F);
    __m256i s0[MAX_TILE], s1[MAX_TILE];
    for (int t = 0; t < NT; t++) s0[t] = s1[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i p = half_load(g + 256 + 64 * (8 * c + j), h);
        const __m256i wl = _mm256_and_si256(p, lo), wh = _mm256_and_si256(_mm256_srli_epi16(p, 4), lo);
        for (int t = 0; t < NT; t++) {
            s0[t] = _mm256_add_epi16(s0[t], _mm256_maddubs_epi16(wl, bcast4(q[t] + 64 * c + 4 * j)));
            s1[t] = _mm256_add_epi16(s1[t], _mm256_maddubs_epi16(wh, bcast4(q[t] + 64 * c + 32 + 4 * j)));
        }
    }
    const __m256i S = c < 2 ? k->s_lo : k->s_hi;
    const __m256i sc0 = scale_pair(S, 2 * (c & 1)), sc1 = scale_pair(S, 2 * (c & 1) + 1);
    for (int t = 0; t < NT; t++)
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(s0[t], sc0), _mm256_madd_epi16(s1[t], sc1)));
}

/* NT tokens against halves h0..h0+NH-1 of one Q4_K group */
ALWAYS_INLINE void tile_q4k(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, float *y, size_t ys, int h0,
                            const int NH, const int NT, const bool pf) {
    __m256 acc[2][MAX_TILE], accm[2][MAX_TILE];
    const block_q8kp *a[MAX_TILE];
    for (int t = 0; t < NT; t++) {
        a[t] = (const block_q8kp *)(act + (size_t)t * as);
        for (int h = 0; h < NH; h++) acc[h][t] = accm[h][t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *g = w + (size_t)i * GROUP_SB_BYTES_Q4K;
        prefetch_group(g, GROUP_SB_BYTES_Q4K, h0, NT, pf);
        for (int h = h0; h < h0 + NH; h++) {
            const q4k_scales k = q4k_unpack(g, h);
            const __m256 dw = half_scales(g, h), dmin = half_scales(g + 32, h);
            __m256i isum[MAX_TILE];
            const int8_t *q[MAX_TILE];
            for (int t = 0; t < NT; t++) {
                const block_q8kp *ab = a[t] + i;
                __m256i ms = _mm256_setzero_si256();
                for (int m = 0; m < 4; m++) ms = _mm256_add_epi32(ms, _mm256_madd_epi16(k.M[m], _mm256_set1_epi32(ab->msum[m])));
                accm[h - h0][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(dmin, _mm256_set1_ps(ab->d)), accm[h - h0][t]);
                isum[t] = _mm256_setzero_si256();
                q[t] = ab->qs;
            }
            for (int c = 0; c < 4; c++) q4k_chunk(g, h, c, &k, q, isum, NT);
            for (int t = 0; t < NT; t++)
                acc[h - h0][t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, _mm256_set1_ps(a[t][i].d)), acc[h - h0][t]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int h = 0; h < NH; h++)
            _mm256_storeu_ps(y + (size_t)t * ys + 8 * (h0 + h), _mm256_sub_ps(acc[h][t], accm[h][t]));
}

/* kind: 0 Q4_0, 1 Q8_0, 2 Q4_K; NH, NT and dp (0: vpmaddubsw, else dpbusd's)
 * compile-time constants in each case */
ALWAYS_INLINE void tile_any(const void *w, int64_t n, const uint8_t *a, size_t as, float *y, size_t ys, int h0,
                            const int NH, const int NT, const int kind, const bool pf, const int dp) {
    if (kind == 2) tile_q4k(w, n / QK_K, a, as, y, ys, h0, NH, NT, pf);
    else tile(w, n / 32, a, as, y, ys, h0, NH, NT, kind == 1, pf, dp);
}

/* one token: both halves in one pass over the group (decode streams it once);
 * a batch: a half at a time, in tiles of up to 4 tokens */
ALWAYS_INLINE void gemm(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys,
                        const int kind, const bool pf, const int dp) {
    if (n_tok == 1) {
        tile_any(w, n, act, as, y, ys, 0, 2, 1, kind, pf, dp);
        return;
    }
    for (int t0 = 0; t0 < n_tok; t0 += MAX_TILE) {
        const uint8_t *a = (const uint8_t *)act + (size_t)t0 * as;
        float *yt = y + (size_t)t0 * ys;
        const int nt = n_tok - t0 < MAX_TILE ? n_tok - t0 : MAX_TILE;
        for (int h = 0; h < 2; h++) switch (nt) {
            case 1: tile_any(w, n, a, as, yt, ys, h, 1, 1, kind, pf, dp); break;
            case 2: tile_any(w, n, a, as, yt, ys, h, 1, 2, kind, pf, dp); break;
            case 3: tile_any(w, n, a, as, yt, ys, h, 1, 3, kind, pf, dp); break;
            default: tile_any(w, n, a, as, yt, ys, h, 1, 4, kind, pf, dp); break;
            }
    }
}

/* each kernel with and without decode's software prefetch, and Q4_0 and Q8_0
 * on each form of vpdpbusd (dpbusd above) */
#define PACKED_AVX2_FN(name, kind, pf, dp)                                                                           \
    static void name(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {         \
        gemm(w, n, act, as, n_tok, y, ys, kind, pf, dp);                                                              \
    }
#define PACKED_AVX2_SET(name, kind, dp)                                                                              \
    PACKED_AVX2_FN(name, kind, true, dp)                                                                              \
    PACKED_AVX2_FN(name##_hw, kind, false, dp)

PACKED_AVX2_SET(gemm_q4_0, 0, 0)
PACKED_AVX2_SET(gemm_q8_0, 1, 0)
PACKED_AVX2_SET(gemm_q4_k, 2, 0)
PACKED_AVX2_SET(gemm_q4_0_vex, 0, 1)
PACKED_AVX2_SET(gemm_q8_0_vex, 1, 1)
PACKED_AVX2_SET(gemm_q4_0_evex, 0, 2)
PACKED_AVX2_SET(gemm_q8_0_evex, 1, 2)

/* the activations with this path's own quantizers (ggml's rounding) */
static void quantize_q8p(const float *x, void *dst, int64_t n) {
    packed_q8p_from(kernel_get_path(CPU_AVX2, QT_Q8_0), x, dst, n);
}
static void quantize_q8kp(const float *x, void *dst, int64_t n) {
    packed_q8kp_from(kernel_get_path(CPU_AVX2, QT_Q4_K), x, dst, n);
}

#define Q8P 32, sizeof(block_q8p)
#define Q8KP 256, sizeof(block_q8kp)
#define ENTRIES(sfx, pfx, label)                                                                                     \
    {{QT_Q4_0, quantize_q8p, gemm_q4_0##sfx, Q8P, label, NULL, 0, 0},                                                  \
     {QT_Q8_0, quantize_q8p, gemm_q8_0##sfx, Q8P, label, NULL, 0, 0},                                                  \
     {QT_Q4_K, quantize_q8kp, gemm_q4_k##pfx, Q8KP, label, NULL, 0, 0}}
/* [dp][prefetch][Q4_0, Q8_0, Q4_K]; a form of vpdpbusd has no Q4_K kernel of
 * its own (packed_avx2 never hands out those rows' Q4_K entries) */
static const packed_entry AVX2[3][2][3] = {
    {ENTRIES(_hw, _hw, "avx2"), ENTRIES(, , "avx2-prefetch")},
    {ENTRIES(_vex_hw, _hw, "avx2-vnni"), ENTRIES(_vex, , "avx2-vnni-prefetch")},
    {ENTRIES(_evex_hw, _hw, "avx2-vnni-evex"), ENTRIES(_evex, , "avx2-vnni-evex-prefetch")},
};
#undef ENTRIES

const packed_entry *packed_avx2(uint32_t type, bool prefetch, int dp) {
    const int i = type == QT_Q4_0 ? 0 : type == QT_Q8_0 ? 1 : type == QT_Q4_K ? 2 : -1;
    if (i < 0 || dp < 0 || dp > 2) return NULL;
    if (i == 2 && dp) return NULL; /* Q4_K: the dp 0 kernel */
    return &AVX2[dp][prefetch][i];
}

#else

const packed_entry *packed_avx2(uint32_t type, bool prefetch, int dp) {
    (void)type;
    (void)prefetch;
    (void)dp;
    return NULL;
}

#endif
