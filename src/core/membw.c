/*
 * membw — see membw.h. The buffer is written once first so every page is
 * resident (a read of an untouched anonymous page maps the zero page and
 * measures nothing). The inner loop keeps independent accumulators so loads
 * never wait on each other; on x86 with AVX2 it reads 32 bytes a load, as a
 * streaming kernel does (narrower loads measure the core, not the memory).
 */
#include "membw.h"

#include "core/kernels/kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct {
    const uint64_t *buf;
    size_t n_words;
    bool avx2;
    uint64_t sink[64];
} bw_job;

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t n_words) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 16 <= n_words; i += 16) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(p + i + 12)));
    }
    __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(x, 0) ^ (uint64_t)_mm256_extract_epi64(x, 3);
}
#endif

static void bw_read(void *ctx, int ith, int nth) {
    bw_job *j = ctx;
    size_t per = j->n_words / (size_t)nth / 16 * 16;
    const uint64_t *p = j->buf + (size_t)ith * per;
#if defined(__x86_64__)
    if (j->avx2) {
        j->sink[ith % 64] = read_avx2(p, per);
        return;
    }
#endif
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = 0; i < per; i += 8) {
        a0 += p[i]; a1 += p[i + 1]; a2 += p[i + 2]; a3 += p[i + 3];
        a4 += p[i + 4]; a5 += p[i + 5]; a6 += p[i + 6]; a7 += p[i + 7];
    }
    j->sink[ith % 64] = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double membw_read_gbps(tpool *pool, size_t bytes, int passes, err_t *err) {
    void *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        err_set(err, ERR_NOMEM, "cannot map %zu bytes for the bandwidth probe", bytes);
        return 0.0;
    }
    memset(buf, 1, bytes);
    bw_job j = {.buf = buf, .n_words = bytes / 8, .avx2 = cpu_path_supported(CPU_AVX2)};
    double best = 0.0;
    for (int i = 0; i < passes; i++) {
        double t0 = now_s();
        tpool_run(pool, bw_read, &j);
        double dt = now_s() - t0;
        size_t per = j.n_words / (size_t)tpool_size(pool) / 16 * 16;
        double gbps = (double)(per * 8 * (size_t)tpool_size(pool)) / dt / 1e9;
        if (gbps > best) best = gbps;
    }
    munmap(buf, bytes);
    return best;
}
