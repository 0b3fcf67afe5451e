/*
 * threadpool — see threadpool.h.
 *
 * State machine of one job: the caller stores fn/ctx, sets `pending` to the
 * number of workers, and increments `generation` (release). Each worker that
 * sees a new generation (acquire) runs its share and decrements `pending`;
 * the caller runs share 0 and then spins until `pending` is 0. A worker spins
 * SPIN_ROUNDS times before it sleeps; the caller broadcasts the condition
 * variable only when some worker is asleep.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ROUNDS 200000

typedef struct {
    tpool *pool;
    int ith;
    pthread_t thread;
} worker;

struct tpool {
    int n;                    /* threads, caller included */
    worker *workers;          /* [n - 1] */
    tpool_fn fn;
    void *ctx;
    atomic_uint generation;
    atomic_int pending;
    atomic_int sleepers;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *worker_main(void *arg) {
    worker *w = arg;
    tpool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
            if (++spins < SPIN_ROUNDS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        p->fn(p->ctx, w->ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

err_code tpool_new(int n_threads, tpool **out, err_t *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024) return err_set(err, ERR_INVALID_ARG, "%d threads", n_threads);
    tpool *p = calloc(1, sizeof *p);
    if (!p) return err_set(err, ERR_NOMEM, "out of memory");
    p->n = n_threads;
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (n_threads > 1 && !(p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers))) {
        tpool_free(p);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        worker *w = &p->workers[i - 1];
        w->pool = p;
        w->ith = i;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            p->n = i; /* only the threads created so far */
            tpool_free(p);
            return err_set(err, ERR_NOMEM, "could not start worker thread %d of %d", i, n_threads);
        }
    }
    *out = p;
    return ERR_OK;
}

void tpool_free(tpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->workers[i - 1].thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->workers);
    free(p);
}

int tpool_size(const tpool *p) { return p ? p->n : 1; }

void tpool_run(tpool *p, tpool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    /* seq_cst on both sides (here and the worker's sleepers++ then generation
     * load): either we see the sleeper, or it sees the new generation */
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) cpu_relax();
}

int tpool_default_threads(void) {
    cpu_set_t set;
    int allowed = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) allowed = CPU_COUNT(&set);
    if (allowed <= 0) allowed = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (allowed <= 0) allowed = 1;
    /* big.LITTLE: count only the cores of the highest capacity */
    int max_cap = 0, n_max = 0;
    for (int cpu = 0; cpu < 1024; cpu++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpu_capacity", cpu);
        FILE *f = fopen(path, "r");
        if (!f) {
            if (cpu == 0) break;
            continue;
        }
        int cap = 0;
        if (fscanf(f, "%d", &cap) == 1) {
            if (cap > max_cap) { max_cap = cap; n_max = 1; }
            else if (cap == max_cap) n_max++;
        }
        fclose(f);
    }
    if (n_max > 0 && n_max < allowed) return n_max;
    return allowed;
}
