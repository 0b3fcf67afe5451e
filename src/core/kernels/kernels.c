/*
 * kernels — path selection and dispatch. See kernels.h.
 *
 * Tables are built once, under pthread_once, for every compiled path; a
 * missing entry on a SIMD path falls back to the scalar kernel for that type,
 * so every path can run every model. OCTO_CPU names a path; an unknown name
 * or one this machine cannot run falls back to the best supported path
 * (kernels_path() tells which one is in use). A path's file declares only
 * the dot products of each weight type; kernels_set pairs them with the
 * activation format the type's quant traits name and the path's quantizer.
 */
#include "kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "core/quant.h"
#include "platform/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#define OCTO_X86 1
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#define OCTO_ARM64 1
#endif

typedef struct {
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16, avxvnni, neon, dotprod, i8mm, arm_bf16, amd;
} cpu_features;

static struct {
    pthread_once_t once;
    cpu_features cpu;
    cpu_path active;
    kernel_entry table[CPU_PATH_COUNT][QT_COUNT];
    bool compiled[CPU_PATH_COUNT];
} K = {.once = PTHREAD_ONCE_INIT};

#if OCTO_X86
static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
#endif

static cpu_features detect(void) {
    cpu_features f;
    memset(&f, 0, sizeof f);
#if OCTO_X86
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) f.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    bool osxsave = c & (1u << 27), avx = c & (1u << 28);
    f.fma = c & (1u << 12);
    f.f16c = c & (1u << 29);
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xE6) == 0xE6;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx2 = avx && ymm && (b & (1u << 5));
        f.avx512f = zmm && (b & (1u << 16));
        f.avx512bw = zmm && (b & (1u << 30));
        f.avx512vl = zmm && (b & (1u << 31));
        f.avx512vnni = zmm && (c & (1u << 11));
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
        f.avxvnni = ymm && (a & (1u << 4));
        f.avx512bf16 = zmm && (a & (1u << 5));
    }
#elif OCTO_ARM64
    f.neon = true;
    f.dotprod = plat_cpu_arm_dotprod(); /* the system's to tell (platform/cpu.h) */
    f.i8mm = f.dotprod && plat_cpu_arm_i8mm();
    f.arm_bf16 = plat_cpu_arm_bf16();
#endif
    return f;
}

static bool runs(const cpu_features *f, cpu_path p) {
    switch (p) {
    case CPU_SCALAR: return true;
    case CPU_AVX2: return f->avx2 && f->fma && f->f16c;
    case CPU_AVX512: return f->avx2 && f->fma && f->f16c && f->avx512f && f->avx512bw && f->avx512vl;
    case CPU_NEON: return f->neon;
    default: return false;
    }
}

bool cpu_path_supported(cpu_path p) {
    kernels_path(); /* make sure detection ran */
    return runs(&K.cpu, p);
}

bool cpu_has_bf16_dot(void) {
    kernels_path();
    return K.cpu.avx512bf16 || K.cpu.arm_bf16;
}

bool cpu_has_int8_dot(void) {
    kernels_path();
    return K.cpu.avx512vnni || K.cpu.dotprod;
}

bool cpu_has_avx_vnni(void) {
    kernels_path();
    return K.cpu.avxvnni;
}

bool cpu_has_int8_matmul(void) {
    kernels_path();
    return K.cpu.i8mm;
}

bool cpu_prefers_hw_prefetch(void) {
    kernels_path();
    return K.cpu.amd;
}

static void init(void) {
    K.cpu = detect();
    kernels_fill_scalar(K.table[CPU_SCALAR], QT_COUNT);
    K.compiled[CPU_SCALAR] = true;
#if OCTO_X86
    kernels_fill_avx2(K.table[CPU_AVX2], QT_COUNT);
    /* Software prefetch of the weight rows: on Intel it kept a core near DRAM
     * bandwidth; on AMD Zen 4 it cost F16 decode a fifth (1.1B F16, 2
     * threads: 23.8-25.1 GB/s with it, 30.7-31.4 without, alternated) */
    kernels_fill_avx512(K.table[CPU_AVX512], QT_COUNT, K.cpu.avx512vnni, !K.cpu.amd);
    K.compiled[CPU_AVX2] = K.compiled[CPU_AVX512] = true;
#endif
#if OCTO_ARM64
    kernels_fill_neon(K.table[CPU_NEON], QT_COUNT, K.cpu.dotprod);
    K.compiled[CPU_NEON] = true;
#endif
    /* a path without a kernel for a type borrows the scalar one */
    for (int p = 1; p < CPU_PATH_COUNT; p++)
        for (int t = 0; t < QT_COUNT; t++)
            if (!K.table[p][t].dot) K.table[p][t] = K.table[CPU_SCALAR][t];

    /* the best path the machine runs, unless OCTO_CPU names another one it can run */
    K.active = CPU_SCALAR;
    for (int p = CPU_PATH_COUNT - 1; p > 0; p--)
        if (K.compiled[p] && runs(&K.cpu, (cpu_path)p)) {
            K.active = (cpu_path)p;
            break;
        }
    const char *want = getenv("OCTO_CPU");
    for (int p = 0; want && p < CPU_PATH_COUNT; p++)
        if (!strcmp(want, cpu_path_name((cpu_path)p)) && K.compiled[p] && runs(&K.cpu, (cpu_path)p))
            K.active = (cpu_path)p;
}

cpu_path kernels_path(void) {
    pthread_once(&K.once, init);
    return K.active;
}

const char *cpu_path_name(cpu_path p) {
    static const char *const names[CPU_PATH_COUNT] = {"scalar", "avx2", "avx512", "neon"};
    return (unsigned)p < CPU_PATH_COUNT ? names[p] : "?";
}

bool cpu_path_compiled(cpu_path p) {
    kernels_path();
    return (unsigned)p < CPU_PATH_COUNT && K.compiled[p];
}

const kernel_entry *kernel_get_path(cpu_path p, uint32_t type) {
    kernels_path();
    if ((unsigned)p >= CPU_PATH_COUNT || !K.compiled[p] || type >= QT_COUNT || !K.table[p][type].dot) return NULL;
    return &K.table[p][type];
}

const kernel_entry *kernel_get(uint32_t type) { return kernel_get_path(kernels_path(), type); }

void swiglu_scalar(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* A gated activation's kernel on path p: the AVX-512 or AVX2 one there, else the scalar one. */
static swiglu_fn act_path(cpu_path p, swiglu_fn (*avx512)(void), swiglu_fn (*avx2)(void), swiglu_fn scalar) {
    kernels_path();
    if ((unsigned)p >= CPU_PATH_COUNT || !K.compiled[p]) return NULL;
    const swiglu_fn f = p == CPU_AVX512 ? avx512() : p == CPU_AVX2 ? avx2() : NULL;
    return f ? f : scalar;
}

swiglu_fn kernel_swiglu_path(cpu_path p) { return act_path(p, swiglu_avx512, swiglu_avx2, swiglu_scalar); }

swiglu_fn kernel_swiglu(void) { return kernel_swiglu_path(kernels_path()); }

/* gelu(g) * u with GELU's tanh form, 0.5 x (1 + tanh(z)) = x sigmoid(2z),
 * z = sqrt(2/pi) (x + 0.044715 x^3): the sigmoid keeps it accurate where
 * 1 + tanh would cancel. */
void geglu_scalar(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = g[i], z2 = 1.5957691216057308f * (x + 0.044715f * x * x * x);
        g[i] = x / (1.0f + expf(-z2)) * u[i];
    }
}

swiglu_fn kernel_geglu_path(cpu_path p) { return act_path(p, geglu_avx512, geglu_avx2, geglu_scalar); }

swiglu_fn kernel_geglu(void) { return kernel_geglu_path(kernels_path()); }

void lowrank_scalar(const float *u, int r, const float *bt, size_t stride, size_t n, float *acc) {
    for (size_t i = 0; i < n; i++) {
        float a = 0.0f;
        for (int k = 0; k < r; k++) a = fmaf(u[k], bt[(size_t)k * stride + i], a);
        acc[i] = a;
    }
}

lowrank_fn kernel_lowrank_path(cpu_path p) {
    kernels_path();
    if ((unsigned)p >= CPU_PATH_COUNT || !K.compiled[p]) return NULL;
    const lowrank_fn f = p == CPU_AVX512 ? lowrank_avx512() : p == CPU_AVX2 ? lowrank_avx2() : NULL;
    return f ? f : lowrank_scalar;
}

lowrank_fn kernel_lowrank(void) { return kernel_lowrank_path(kernels_path()); }

void lowrank4_scalar(const float *u, size_t u_stride, int T, int r, const float *bt, size_t stride, size_t n,
                     float *acc, size_t acc_stride) {
    for (int t = 0; t < T; t++) lowrank_scalar(u + (size_t)t * u_stride, r, bt, stride, n, acc + (size_t)t * acc_stride);
}

lowrank4_fn kernel_lowrank4_path(cpu_path p) {
    kernels_path();
    if ((unsigned)p >= CPU_PATH_COUNT || !K.compiled[p]) return NULL;
    const lowrank4_fn f = p == CPU_AVX512 ? lowrank4_avx512() : p == CPU_AVX2 ? lowrank4_avx2() : NULL;
    return f ? f : lowrank4_scalar;
}

lowrank4_fn kernel_lowrank4(void) { return kernel_lowrank4_path(kernels_path()); }

void kernels_set(kernel_entry table[], int n_types, const kernel_quantizers *q, const kernel_dots *rows,
                 size_t n_rows) {
    for (size_t r = 0; r < n_rows; r++) {
        const quant_traits *tr = quant_traits_of(rows[r].type);
        if (!tr || (int)rows[r].type >= n_types) continue;
        const uint32_t at = tr->act_type;
        const act_quantize_fn fn = at == QT_Q8_0 ? q->q8_0 : at == QT_Q8_1 ? q->q8_1 : at == QT_Q8_K ? q->q8_K : NULL;
        if (!fn && at != QT_F32) continue;
        table[rows[r].type] = (kernel_entry){at, fn, rows[r].dot, rows[r].dot4, rows[r].tile, rows[r].prefill};
    }
}

size_t kernel_act_row_bytes(uint32_t act_type, int64_t n) {
    if (act_type == QT_F32) return (size_t)n * sizeof(float);
    return quant_row_bytes(act_type, n);
}
