/*
 * packed — the Q4_0 group layout, its reference kernels, and dispatch.
 * See packed.h for the layout and the arithmetic.
 */
#include "packed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

/* Q4_0: 16 scales, then 4 vectors of 64 bytes (row r's GGUF bytes qs[4j..4j+3] at 4r).
 * Q8_0: 16 scales, then 8 vectors of 64 bytes (row r's weights 4j..4j+3 at 4r). */
static size_t block_bytes(uint32_t type) { return type == QT_Q4_0 ? sizeof(block_q4_0) : sizeof(block_q8_0); }
static int vectors(uint32_t type) { return type == QT_Q4_0 ? 4 : 8; }

bool packed_supported(uint32_t type, int64_t rows, int64_t n) {
    return (type == QT_Q4_0 || type == QT_Q8_0) && rows > 0 && rows % PACK_ROWS == 0 && n > 0 && n % 32 == 0;
}

/* one group: GGUF rows <-> packed (both block types start with an fp16 scale, then the quants) */
static void relay_group(uint32_t type, bool pack, uint8_t *packed, uint8_t *gguf, int64_t nb) {
    const size_t bb = block_bytes(type), row_bytes = (size_t)nb * bb, gbb = PACK_ROWS * bb;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *g = packed + (size_t)b * gbb;
        for (int r = 0; r < PACK_ROWS; r++) {
            uint8_t *blk = gguf + (size_t)r * row_bytes + (size_t)b * bb;
            if (pack) memcpy(g + 2 * r, blk, 2);
            else memcpy(blk, g + 2 * r, 2);
            for (int j = 0; j < vectors(type); j++) {
                if (pack) memcpy(g + 32 + 64 * j + 4 * r, blk + 2 + 4 * j, 4);
                else memcpy(blk + 2 + 4 * j, g + 32 + 64 * j + 4 * r, 4);
            }
        }
    }
}

static void relay(uint32_t type, bool pack, void *w, int64_t rows, int64_t n, void *tmp) {
    const int64_t nb = n / 32;
    const size_t group_bytes = (size_t)PACK_ROWS * (size_t)nb * block_bytes(type);
    for (int64_t g = 0; g < rows / PACK_ROWS; g++) {
        uint8_t *p = (uint8_t *)w + (size_t)g * group_bytes;
        memcpy(tmp, p, group_bytes);
        if (pack) relay_group(type, true, p, tmp, nb);
        else relay_group(type, false, tmp, p, nb);
    }
}

void packed_pack(uint32_t type, void *w, int64_t rows, int64_t n, void *tmp) {
    if (packed_supported(type, rows, n)) relay(type, true, w, rows, n, tmp);
}

void packed_unpack(uint32_t type, void *w, int64_t rows, int64_t n, void *tmp) {
    if (packed_supported(type, rows, n)) relay(type, false, w, rows, n, tmp);
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

static void quantize_q8p_ref(const float *x, void *dst, int64_t n) {
    packed_q8p_from(kernel_get_path(CPU_SCALAR, QT_Q8_0), x, dst, n);
}

static void gemm_q4_0p_ref(const void *w, int64_t n, const void *act, size_t act_stride, int n_tok, float *y,
                           size_t y_stride) {
    const int64_t nb = n / 32;
    for (int t = 0; t < n_tok; t++) {
        const block_q8p *a = (const block_q8p *)((const uint8_t *)act + (size_t)t * act_stride);
        for (int r = 0; r < PACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *g = (const uint8_t *)w + (size_t)b * PACK_ROWS * sizeof(block_q4_0);
                fp16_t dh;
                memcpy(&dh, g + 2 * r, 2);
                int32_t s = a[b].off;
                for (int j = 0; j < 4; j++)
                    for (int i = 0; i < 4; i++) {
                        const uint8_t q = g[32 + 64 * j + 4 * r + i];
                        s += (q & 15) * a[b].qs[4 * j + i] + (q >> 4) * a[b].qs[16 + 4 * j + i];
                    }
                acc = fmaf((float)s, fp16_to_fp32(dh) * a[b].d, acc);
            }
            y[(size_t)t * y_stride + r] = acc;
        }
    }
}

/* Q8_0: the block's exact integer dot product sum w * q, then the same fma */
static void gemm_q8_0p_ref(const void *w, int64_t n, const void *act, size_t act_stride, int n_tok, float *y,
                           size_t y_stride) {
    const int64_t nb = n / 32;
    for (int t = 0; t < n_tok; t++) {
        const block_q8p *a = (const block_q8p *)((const uint8_t *)act + (size_t)t * act_stride);
        for (int r = 0; r < PACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *g = (const uint8_t *)w + (size_t)b * PACK_ROWS * sizeof(block_q8_0);
                fp16_t dh;
                memcpy(&dh, g + 2 * r, 2);
                int32_t s = 0;
                for (int j = 0; j < 8; j++)
                    for (int i = 0; i < 4; i++) s += (int8_t)g[32 + 64 * j + 4 * r + i] * a[b].qs[4 * j + i];
                acc = fmaf((float)s, fp16_to_fp32(dh) * a[b].d, acc);
            }
            y[(size_t)t * y_stride + r] = acc;
        }
    }
}

static const packed_entry REF_Q4_0 = {QT_Q4_0, quantize_q8p_ref, gemm_q4_0p_ref, "reference"};
static const packed_entry REF_Q8_0 = {QT_Q8_0, quantize_q8p_ref, gemm_q8_0p_ref, "reference"};

const packed_entry *packed_ref(uint32_t type) {
    return type == QT_Q4_0 ? &REF_Q4_0 : type == QT_Q8_0 ? &REF_Q8_0 : NULL;
}

const packed_entry *packed_get(uint32_t type) {
    /* OCTO_PACK=0 keeps the GGUF layout (to measure what packing buys) */
    const char *env = getenv("OCTO_PACK");
    if (kernels_path() != CPU_AVX512 || (env && !strcmp(env, "0"))) return NULL;
    /* AMX where it is offered (OCTO_AMX=0 declines it), else AVX-512 */
    const char *amx = getenv("OCTO_AMX");
    const packed_entry *e = cpu_has_int8_dot() && !(amx && !strcmp(amx, "0")) ? packed_amx(type) : NULL;
    return e ? e : packed_avx512(type, cpu_has_int8_dot());
}

int packed_all(uint32_t type, const packed_entry **out, int max) {
    int n = 0;
    if (n < max && packed_ref(type)) out[n++] = packed_ref(type);
    if (cpu_path_compiled(CPU_AVX512) && cpu_path_supported(CPU_AVX512)) {
        const packed_entry *e = packed_avx512(type, false);
        if (e && n < max) out[n++] = e;
        if (cpu_has_int8_dot() && (e = packed_avx512(type, true)) && n < max) out[n++] = e;
        if (cpu_has_int8_dot() && (e = packed_amx(type)) && n < max) out[n++] = e;
    }
    return n;
}
