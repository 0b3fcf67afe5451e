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

#include <stdbool.h>

#include "err.h"
#include "platform/cpu.h"

typedef struct tpool tpool;
typedef void (*tpool_fn)(void *ctx, int ith, int nth);

/* n_threads counts the caller; 1 makes a pool that runs everything inline. */
err_code tpool_new(int n_threads, tpool **out, err_t *err);
void tpool_free(tpool *p);
int tpool_size(const tpool *p);
/* Run fn on every active thread of the pool (p may be NULL: run inline as 0 of 1). */
void tpool_run(tpool *p, tpool_fn fn, void *ctx);
/* The threads jobs run on, 1..tpool_size (all of them at first). Set it
 * between jobs, from the thread that runs them: the workers past it park
 * (asleep, never woken by a job) until it grows again; 1 runs every job
 * inline. Returns the count in force (clamped). The CPU the process really
 * has changes while it runs (runtime/cpu_adapt.h). */
int tpool_set_active(tpool *p, int n);
int tpool_active(const tpool *p);
/* The kernel's ids of the pool's workers (not the caller's) that have
 * started, at most max: for a performance hint's session. */
int tpool_thread_ids(tpool *p, int *ids, int max);
/* How many rounds an idle worker spins for the next job before it sleeps
 * (1..tpool_spin_default()): spinning pays on free cores and burns a CPU
 * quota that the threads doing work would have used. */
void tpool_set_spin(tpool *p, int rounds);
int tpool_spin(const tpool *p);
int tpool_spin_default(void);

/* Threads to use by default: the performance cores this process may run on
 * (cpu_classes below; every allowed core where there is one class). */
int tpool_default_threads(void);

/* Cores by capacity. Where the kernel reports cpu_capacity
 * (ROOT/cpuN/cpu_capacity; ROOT NULL = the system's, platform/cpu.h, then
 * only the CPUs this process may run on) and the capacities differ, the cores
 * split where the ratio between consecutive distinct capacities is largest:
 * efficiency cores below, performance cores above (a phone's prime and big
 * cores are both performance cores). n_eff 0: one class, or no capacities.
 * n_allowed: the CPUs this process may run on (ROOT given: n_perf + n_eff). */
#define TPOOL_MAX_CPUS PLAT_MAX_CPUS
typedef struct {
    int n_perf, n_eff, n_allowed;
    int perf_capacity, eff_capacity; /* the lowest of each class */
    short perf[TPOOL_MAX_CPUS], eff[TPOOL_MAX_CPUS];
} cpu_classes;
void cpu_classes_read(const char *root, cpu_classes *out);
/* The default thread count for those cores: the performance cores where
 * there are two classes, else every allowed core (tpool_default_threads). */
int cpu_classes_threads(const cpu_classes *cc);
/* Cores of one class split for a draft asked to have n_draft of its own:
 * the last n_draft cores this process may use become the second class
 * (eff), the others the first. false: there are two classes already, or
 * the split would leave the first empty. */
bool cpu_classes_split(cpu_classes *cc, int n_draft);

/* A pool whose workers run only on cpus[0..n_cpus); the caller (thread 0)
 * runs where it is unless pinned with tpool_pin_caller. ERR_UNSUPPORTED
 * where the platform cannot pin (platform/cpu.h: the POSIX fallback). */
err_code tpool_new_on(int n_threads, const short *cpus, int n_cpus, tpool **out, err_t *err);
/* Move the calling thread onto the pool's CPUs (nothing for a pool made by
 * tpool_new), saving where it could run before; tpool_unpin_caller puts it
 * back. Two system calls: for phases of work, not for each job. */
typedef struct {
    plat_cpuset mask;
    int saved;
} tpool_affinity;
void tpool_pin_caller(const tpool *p, tpool_affinity *prev);
void tpool_unpin_caller(const tpool_affinity *prev);

#endif
