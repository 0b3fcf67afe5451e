/*
 * packed — the Q4_0 group layout, its reference kernels, and dispatch.
 * See packed.h for the layout and the arithmetic.
 */
#include "packed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"
#include "gemm_bf16.h"

/* The layout rule of packed.h: per GGUF block of bb bytes (QK values), H bytes
 * of fp16 fields, then 4-byte words. */
typedef struct {
    size_t bb, head;
    int64_t qk;
} layout;

static bool layout_of(uint32_t type, layout *l) {
    switch (type) {
    case QT_Q4_0: *l = (layout){sizeof(block_q4_0), 2, 32}; return true;
    case QT_Q8_0: *l = (layout){sizeof(block_q8_0), 2, 32}; return true;
    case QT_Q4_K: *l = (layout){sizeof(block_q4_K), 4, QK_K}; return true;
    default: return false;
    }
}

bool packed_supported(uint32_t type, int64_t rows, int64_t n) {
    layout l;
    return layout_of(type, &l) && rows > 0 && rows % PACK_ROWS == 0 && n > 0 && n % l.qk == 0;
}

/* one group: GGUF rows <-> packed */
static void relay_group(const layout *l, bool pack, uint8_t *packed, uint8_t *gguf, int64_t nb) {
    const size_t row_bytes = (size_t)nb * l->bb, gbb = PACK_ROWS * l->bb;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *g = packed + (size_t)b * gbb;
        for (int r = 0; r < PACK_ROWS; r++) {
            uint8_t *blk = gguf + (size_t)r * row_bytes + (size_t)b * l->bb;
            for (size_t h = 0; h < l->head; h += 2) {
                uint8_t *p = g + PACK_ROWS * h + 2 * r;
                if (pack) memcpy(p, blk + h, 2);
                else memcpy(blk + h, p, 2);
            }
            for (size_t w = 0; w < (l->bb - l->head) / 4; w++) {
                uint8_t *p = g + PACK_ROWS * l->head + 64 * w + 4 * r;
                if (pack) memcpy(p, blk + l->head + 4 * w, 4);
                else memcpy(blk + l->head + 4 * w, p, 4);
            }
        }
    }
}

static void relay(uint32_t type, bool pack, void *w, int64_t rows, int64_t n, void *tmp) {
    layout l;
    if (!packed_supported(type, rows, n) || !layout_of(type, &l)) return;
    const int64_t nb = n / l.qk;
    const size_t group_bytes = (size_t)PACK_ROWS * (size_t)nb * l.bb;
    for (int64_t g = 0; g < rows / PACK_ROWS; g++) {
        uint8_t *p = (uint8_t *)w + (size_t)g * group_bytes;
        memcpy(tmp, p, group_bytes);
        if (pack) relay_group(&l, true, p, tmp, nb);
        else relay_group(&l, false, tmp, p, nb);
    }
}

void packed_pack(uint32_t type, void *w, int64_t rows, int64_t n, void *tmp) { relay(type, true, w, rows, n, tmp); }

void packed_unpack(uint32_t type, void *w, int64_t rows, int64_t n, void *tmp) { relay(type, false, w, rows, n, tmp); }

size_t packed_act_row_bytes(const packed_entry *e, int64_t n) {
    return (size_t)(n / e->act_block) * e->act_block_bytes + e->act_row_pad;
}

/* ---------------------------------------------------------------- reference */

void packed_q8p_from(const kernel_entry *k, const float *x, void *dst, int64_t n) {
    block_q8p *y = dst;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        block_q8_0 q;
        k->quantize(x, &q, 32);
        int32_t sum = 0;
        for (int i = 0; i < 32; i++) sum += q.qs[i];
        y[b].d = fp16_to_fp32(q.d);
        y[b].off = -8 * sum;
        memcpy(y[b].qs, q.qs, 32);
    }
}

void packed_q8kp_from(const kernel_entry *k, const float *x, void *dst, int64_t n) {
    block_q8kp *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        block_q8_K q;
        k->quantize(x, &q, QK_K);
        int32_t s[8];
        for (int j = 0; j < 8; j++) s[j] = q.bsums[2 * j] + q.bsums[2 * j + 1];
        static const int pair[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
        y[b].d = q.d;
        for (int k2 = 0; k2 < 4; k2++)
            y[b].msum[k2] = (int32_t)((uint32_t)(uint16_t)s[pair[k2][0]] | (uint32_t)(uint16_t)s[pair[k2][1]] << 16);
        memcpy(y[b].qs, q.qs, QK_K);
    }
}

static void quantize_q8kp_ref(const float *x, void *dst, int64_t n) {
    packed_q8kp_from(kernel_get_path(CPU_SCALAR, QT_Q4_K), x, dst, n);
}

static void quantize_q8p_ref(const float *x, void *dst, int64_t n) {
    packed_q8p_from(kernel_get_path(CPU_SCALAR, QT_Q8_0), x, dst, n);
}

/* Q4_0 and Q8_0: per block the exact integer dot product (Q4_0: the offset
 * term plus nibble * q; Q8_0: w * q), then one fma */
static inline void gemm_32p_ref(const void *w, int64_t n, const void *act, size_t act_stride, int n_tok, float *y,
                                size_t y_stride, bool q8) {
    const int64_t nb = n / 32;
    const size_t gbb = PACK_ROWS * (q8 ? sizeof(block_q8_0) : sizeof(block_q4_0));
    for (int t = 0; t < n_tok; t++) {
        const block_q8p *a = (const block_q8p *)((const uint8_t *)act + (size_t)t * act_stride);
        for (int r = 0; r < PACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *g = (const uint8_t *)w + (size_t)b * gbb;
                fp16_t dh;
                memcpy(&dh, g + 2 * r, 2);
                int32_t s = 0;
                if (q8)
                    for (int j = 0; j < 8; j++)
                        for (int i = 0; i < 4; i++) s += (int8_t)g[32 + 64 * j + 4 * r + i] * a[b].qs[4 * j + i];
                else {
                    s = a[b].off;
                    for (int j = 0; j < 4; j++)
                        for (int i = 0; i < 4; i++) {
                            const uint8_t q = g[32 + 64 * j + 4 * r + i];
                            s += (q & 15) * a[b].qs[4 * j + i] + (q >> 4) * a[b].qs[16 + 4 * j + i];
                        }
                }
                acc = fmaf((float)s, fp16_to_fp32(dh) * a[b].d, acc);
            }
            y[(size_t)t * y_stride + r] = acc;
        }
    }
}

static void gemm_q4_0p_ref(const void *w, int64_t n, const void *act, size_t act_stride, int n_tok, float *y,
                           size_t y_stride) {
    gemm_32p_ref(w, n, act, act_stride, n_tok, y, y_stride, false);
}

static void gemm_q8_0p_ref(const void *w, int64_t n, const void *act, size_t act_stride, int n_tok, float *y,
                           size_t y_stride) {
    gemm_32p_ref(w, n, act, act_stride, n_tok, y, y_stride, true);
}

/* Q4_K: per super-block the exact isum and msum of packed.h, two fmas */
static void gemm_q4_Kp_ref(const void *w, int64_t n, const void *act, size_t act_stride, int n_tok, float *y,
                           size_t y_stride) {
    const int64_t nb = n / QK_K;
    const size_t gbb = PACK_ROWS * sizeof(block_q4_K);
    for (int t = 0; t < n_tok; t++) {
        const block_q8kp *a = (const block_q8kp *)((const uint8_t *)act + (size_t)t * act_stride);
        for (int r = 0; r < PACK_ROWS; r++) {
            float acc = 0.0f, accm = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *g = (const uint8_t *)w + (size_t)b * gbb;
                /* row r's GGUF block back from its lanes */
                block_q4_K blk;
                memcpy(&blk.d, g + 2 * r, 2);
                memcpy(&blk.dmin, g + 32 + 2 * r, 2);
                for (int v = 0; v < 3; v++) memcpy(blk.scales + 4 * v, g + 64 + 64 * v + 4 * r, 4);
                for (int k = 0; k < 32; k++) memcpy(blk.qs + 4 * k, g + 256 + 64 * k + 4 * r, 4);
                int32_t s[8], isum = 0, msum = 0;
                for (int j = 0; j < 8; j++) {
                    uint8_t sc, m;
                    quant_k4_scale_min(blk.scales, j, &sc, &m);
                    int32_t si = 0;
                    s[j] = 0;
                    for (int l = 0; l < 32; l++) {
                        si += ((blk.qs[32 * (j / 2) + l] >> (4 * (j & 1))) & 15) * a[b].qs[32 * j + l];
                        s[j] += a[b].qs[32 * j + l];
                    }
                    isum += sc * si;
                    msum += m * s[j];
                }
                acc = fmaf((float)isum, fp16_to_fp32(blk.d) * a[b].d, acc);
                accm = fmaf((float)msum, fp16_to_fp32(blk.dmin) * a[b].d, accm);
            }
            y[(size_t)t * y_stride + r] = acc - accm;
        }
    }
}

static const packed_entry REF_Q4_0 = {QT_Q4_0, quantize_q8p_ref, gemm_q4_0p_ref, 32, sizeof(block_q8p), "reference", NULL, 0, 0};
static const packed_entry REF_Q8_0 = {QT_Q8_0, quantize_q8p_ref, gemm_q8_0p_ref, 32, sizeof(block_q8p), "reference", NULL, 0, 0};
static const packed_entry REF_Q4_K = {QT_Q4_K, quantize_q8kp_ref, gemm_q4_Kp_ref, QK_K, sizeof(block_q8kp),
                                      "reference", NULL, 0, 0};

const packed_entry *packed_ref(uint32_t type) {
    return type == QT_Q4_0 ? &REF_Q4_0 : type == QT_Q8_0 ? &REF_Q8_0 : type == QT_Q4_K ? &REF_Q4_K : NULL;
}

/* The AVX2 kernel for type: on AVX-VNNI's vpdpbusd where the CPU has it */
static const packed_entry *avx2_kernel(uint32_t type) {
    const bool pf = !cpu_prefers_hw_prefetch();
    const packed_entry *e = cpu_has_avx_vnni() ? packed_avx2(type, pf, 1) : NULL;
    return e ? e : packed_avx2(type, pf, 0);
}

const packed_entry *packed_get(uint32_t type) {
    /* OCTO_PACK=0 keeps the GGUF layout (to measure what packing buys) */
    const char *env = getenv("OCTO_PACK");
    if (env && !strcmp(env, "0")) return NULL;
    if (kernels_path() == CPU_AVX2) return avx2_kernel(type);
    if (kernels_path() == CPU_NEON) {
        const packed_entry *e = cpu_has_int8_matmul() ? packed_neon_i8mm(type) : NULL;
        return e ? e : packed_neon(type, cpu_has_int8_dot());
    }
    if (kernels_path() != CPU_AVX512) return NULL;
    /* AMX where it is offered (OCTO_AMX=0 declines it), else AVX-512, else
     * (Q8_0 without VNNI) AVX2's kernel for the same layout */
    const char *amx = getenv("OCTO_AMX");
    const packed_entry *e = cpu_has_int8_dot() && !(amx && !strcmp(amx, "0")) ? packed_amx(type) : NULL;
    if (!e) e = packed_avx512(type, cpu_has_int8_dot());
    return e ? e : avx2_kernel(type);
}

const packed_entry *packed_get_batch(uint32_t type, int n_tok) {
    const packed_entry *e = packed_get(type);
    /* AMX is AVX-512's: a path forced lower (OCTO_CPU=avx2) keeps its own kernel */
    if (!e || n_tok < PACKED_BF16_MIN_TOKENS || kernels_path() != CPU_AVX512) return e;
    /* OCTO_AMX=0 declines both AMX kernels, OCTO_AMX=int8 only this one */
    const char *amx = getenv("OCTO_AMX");
    if (amx && (!strcmp(amx, "0") || !strcmp(amx, "int8"))) return e;
    const packed_entry *b = packed_amx_bf16(type);
    return b ? b : e;
}

int packed_all(uint32_t type, const packed_entry **out, int max) {
    int n = 0;
    if (n < max && packed_ref(type)) out[n++] = packed_ref(type);
    /* AVX2's on vpmaddubsw, on AVX-VNNI, and on AVX512-VNNI's form of the same instruction */
    const bool avx2 = cpu_path_compiled(CPU_AVX2) && cpu_path_supported(CPU_AVX2);
    const bool dp_runs[3] = {avx2, avx2 && cpu_has_avx_vnni(), avx2 && cpu_path_supported(CPU_AVX512) && cpu_has_int8_dot()};
    for (int dp = 0; dp < 3; dp++)
        for (int pf = 0; pf < 2; pf++)
            if (dp_runs[dp] && packed_avx2(type, pf, dp) && n < max) out[n++] = packed_avx2(type, pf, dp);
    if (cpu_path_compiled(CPU_NEON) && cpu_path_supported(CPU_NEON)) {
        const packed_entry *e = packed_neon(type, false);
        if (e && n < max) out[n++] = e;
        if (cpu_has_int8_dot() && (e = packed_neon(type, true)) && n < max) out[n++] = e;
        if (cpu_has_int8_matmul() && (e = packed_neon_i8mm(type)) && n < max) out[n++] = e;
    }
    if (cpu_path_compiled(CPU_AVX512) && cpu_path_supported(CPU_AVX512)) {
        const packed_entry *e = packed_avx512(type, false);
        if (e && n < max) out[n++] = e;
        if (cpu_has_int8_dot() && (e = packed_avx512(type, true)) && n < max) out[n++] = e;
        if (cpu_has_int8_dot() && (e = packed_amx(type)) && n < max) out[n++] = e;
    }
    return n;
}

void packed_describe(char *buf, size_t n) {
    static const uint32_t types[] = {QT_Q4_0, QT_Q8_0, QT_Q4_K};
    enum { N_TYPES = sizeof types / sizeof *types };
    size_t len = (size_t)snprintf(buf, n, "%s", cpu_path_name(kernels_path()));
    bool said[N_TYPES] = {false}, any = false;
    for (int i = 0; i < N_TYPES && len < n; i++) {
        const packed_entry *e = packed_get(types[i]);
        if (!e || said[i]) continue;
        any = true;
        len += (size_t)snprintf(buf + len, n - len, "; packed");
        for (int j = i; j < N_TYPES && len < n; j++) {
            const packed_entry *f = packed_get(types[j]);
            if (f && !said[j] && !strcmp(f->name, e->name)) {
                said[j] = true;
                len += (size_t)snprintf(buf + len, n - len, " %s", quant_traits_of(types[j])->name);
            }
        }
        if (len < n) len += (size_t)snprintf(buf + len, n - len, ": %s", e->name);
    }
    if (!any && len < n) len += (size_t)snprintf(buf + len, n - len, "; GGUF layout");
    if (gemm_bf16_name() && len < n) snprintf(buf + len, n - len, "; f16 bf16 prefill: %s", gemm_bf16_name());
}
