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
 * AMX needs the kernel's permission (arch_prctl ARCH_REQ_XCOMP_PERM), asked
 * once; each thread loads the tile configuration before its first tile op.
 */
#include "packed.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__F16C__)

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "quant.h"

#define GROUP_BLOCK_BYTES (PACK_ROWS * 18)
#define RUN_BLOCKS 64 /* blocks unpacked at a time: 32 KiB of B tiles */

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static __thread int tiles_configured;

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

static void configure_tiles(void) {
    _tile_loadconfig(&TILES);
    tiles_configured = 1;
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
        if (!tiles_configured) configure_tiles();
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
                for (size_t o = 0; o < gbb; o += 64) /* ahead, as the VNNI kernel */
                    _mm_prefetch((const char *)((uintptr_t)g + 4096 + (uintptr_t)o), _MM_HINT_T0);
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

static const packed_entry AMX_Q4_0 = {QT_Q4_0, NULL, gemm_amx, 32, sizeof(block_q8p), "amx"};

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
    if (ok) ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
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

#else

const packed_entry *packed_amx(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
