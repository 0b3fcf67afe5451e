/*
 * membw — see membw.h. The buffer is written once first so every page is
 * resident (a read of an untouched anonymous page maps the zero page and
 * measures nothing). The inner loop keeps eight independent accumulators so
 * the compiler emits wide loads without a dependency chain.
 */
#include "membw.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct {
    const uint64_t *buf;
    size_t n_words;
    uint64_t sink[64];
} bw_job;

static void bw_read(void *ctx, int ith, int nth) {
    bw_job *j = ctx;
    size_t per = j->n_words / (size_t)nth / 8 * 8;
    const uint64_t *p = j->buf + (size_t)ith * per;
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
    bw_job j = {.buf = buf, .n_words = bytes / 8};
    double best = 0.0;
    for (int i = 0; i < passes; i++) {
        double t0 = now_s();
        tpool_run(pool, bw_read, &j);
        double dt = now_s() - t0;
        size_t per = j.n_words / (size_t)tpool_size(pool) / 8 * 8;
        double gbps = (double)(per * 8 * (size_t)tpool_size(pool)) / dt / 1e9;
        if (gbps > best) best = gbps;
    }
    munmap(buf, bytes);
    return best;
}
