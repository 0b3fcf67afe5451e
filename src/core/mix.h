/*
 * mix — SplitMix64's finalizer: a 64-bit value to a well-mixed one, for
 * seeded values that must be the same on every machine (an adapter's start,
 * a data order, a synthetic adapter).
 */
#ifndef OCTO_CORE_MIX_H
#define OCTO_CORE_MIX_H

#include <stdint.h>

static inline uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#endif
