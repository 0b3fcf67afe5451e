/*
 * threadpool — a fixed set of worker threads, created once per model.
 *
 * tpool_run(pool, fn, ctx) calls fn(ctx, ith, nth) on every thread (the
 * caller is thread 0) and returns when all have finished. Work is handed out
 * by bumping a generation counter: workers spin on it briefly (a decode step
 * issues hundreds of small jobs a token, and waking a sleeping thread costs
 * more than the job), then sleep on a condition variable, so an idle model
 * costs no CPU. No thread is created per operation.
 */
#ifndef OCTO_CORE_THREADPOOL_H
#define OCTO_CORE_THREADPOOL_H

#include "err.h"

typedef struct tpool tpool;
typedef void (*tpool_fn)(void *ctx, int ith, int nth);

/* n_threads counts the caller; 1 makes a pool that runs everything inline. */
err_code tpool_new(int n_threads, tpool **out, err_t *err);
void tpool_free(tpool *p);
int tpool_size(const tpool *p);
/* Run fn on every thread of the pool (p may be NULL: run inline as 0 of 1). */
void tpool_run(tpool *p, tpool_fn fn, void *ctx);

/* Threads to use by default: the performance cores this process may run on
 * (cores of the highest cpu_capacity where the kernel reports capacities). */
int tpool_default_threads(void);

#endif
