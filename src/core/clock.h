/*
 * clock — the monotonic clock in nanoseconds, for timing what the runtime
 * reports (stall, read and pass times).
 */
#ifndef OCTO_CORE_CLOCK_H
#define OCTO_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
