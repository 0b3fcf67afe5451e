/*
 * membw — the machine's memory read bandwidth, measured.
 *
 * Decode speed is bounded by bandwidth / bytes of weights per token, so a
 * benchmark reports decode as a fraction of this roofline. The probe reads a
 * buffer much larger than the last-level cache with every thread of a pool,
 * each streaming its own slice, and keeps the best of a few passes.
 */
#ifndef OCTO_CORE_MEMBW_H
#define OCTO_CORE_MEMBW_H

#include <stddef.h>

#include "err.h"
#include "threadpool.h"

/* GB/s (1e9 bytes per second) reading `bytes` with the pool's threads; 0 on failure. */
double membw_read_gbps(tpool *pool, size_t bytes, int passes, err_t *err);

#endif
