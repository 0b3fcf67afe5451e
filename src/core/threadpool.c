/*
 * threadpool — see threadpool.h.
 *
 * State machine of one job: the caller stores fn/ctx, sets `pending` to the
 * number of workers it counts, and stores the next `generation` word (the
 * job's number and that count). Each counted worker that sees a new word
 * (acquire) runs its share and decrements `pending`;
 * the caller runs share 0 and then spins until `pending` is 0. A worker spins
 * SPIN_ROUNDS times before it sleeps; the caller broadcasts the condition
 * variable only when some worker is asleep.
 */
#include "threadpool.h"

#include "platform/cpu.h"
#include "platform/perfhint.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ROUNDS 200000
/* Past this many rounds a spinning thread offers its core every 64 rounds:
 * when the pool has more threads than free cores (threads asked beyond the
 * cores, or another process busy), the thread it waits for may be the one
 * its spinning keeps off the core. With a core each, sched_yield returns at
 * once. */
#define SPIN_YIELD_AFTER 2000

static inline void spin_wait(unsigned spins) { /* unsigned: a long wait wraps, it does not overflow */
    cpu_relax();
    if (spins > SPIN_YIELD_AFTER && spins % 64 == 0) sched_yield();
}

typedef struct {
    tpool *pool;
    int ith;
    pthread_t thread;
    atomic_int tid; /* the kernel's id of the thread (0 until it runs) */
} worker;

struct tpool {
    int n;                    /* threads, caller included */
    worker *workers;          /* [n - 1] */
    tpool_fn fn;
    void *ctx;
    _Atomic uint64_t generation; /* a job's number << GEN_NTH_BITS | the threads it runs on (tpool_set_active):
                                  * one word, so a worker never reads one job's count with another's number */
    atomic_int active;        /* threads the next job runs on; workers from this one on park */
    atomic_int spin_rounds;   /* how long a worker spins before it sleeps */
    atomic_int pending;
    atomic_int sleepers;
    atomic_bool stop;
    bool pinned;              /* workers run only on `cpus` */
    plat_cpuset cpus;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t park_cv;   /* parked workers wait here: a job never wakes them */
};

/* A worker past the active count sleeps until it is needed again. The jobs
 * run meanwhile were not its own: each job's word says how many threads it
 * counted, and a job that counts a worker cannot end without it. */
static void park(tpool *p, const worker *w) {
    pthread_mutex_lock(&p->mu);
    while (w->ith >= atomic_load(&p->active) && !atomic_load(&p->stop)) pthread_cond_wait(&p->park_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

#define GEN_NTH_BITS 11 /* up to 1024 threads */
#define GEN_NTH(g) ((int)((g) & ((1u << GEN_NTH_BITS) - 1)))

static void *worker_main(void *arg) {
    worker *w = arg;
    tpool *p = w->pool;
    atomic_store(&w->tid, plat_thread_id());
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        int spins = 0;
        if (w->ith >= atomic_load_explicit(&p->active, memory_order_relaxed)) park(p, w);
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
            if (++spins < atomic_load_explicit(&p->spin_rounds, memory_order_relaxed)) {
                spin_wait(spins);
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
        const int nth = GEN_NTH(g);
        if (w->ith >= nth) continue; /* a job for fewer threads: not ours, and pending did not count us */
        p->fn(p->ctx, w->ith, nth);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

/* cpus NULL: workers run anywhere */
static err_code create(int n_threads, const plat_cpuset *cpus, tpool **out, err_t *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024) return err_set(err, ERR_INVALID_ARG, "%d threads", n_threads);
    tpool *p = calloc(1, sizeof *p);
    if (!p) return err_set(err, ERR_NOMEM, "out of memory");
    p->n = n_threads;
    if (cpus) p->pinned = true, p->cpus = *cpus;
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->active, n_threads);
    atomic_init(&p->spin_rounds, SPIN_ROUNDS);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_cond_init(&p->park_cv, NULL);
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
        if (cpus && plat_pin_thread(w->thread, cpus) != 0) {
            p->n = i + 1;
            tpool_free(p);
            return err_set(err, ERR_INVALID_ARG, "could not place worker thread %d on its cores", i);
        }
    }
    *out = p;
    return ERR_OK;
}

err_code tpool_new(int n_threads, tpool **out, err_t *err) { return create(n_threads, NULL, out, err); }

err_code tpool_new_on(int n_threads, const short *cpus, int n_cpus, tpool **out, err_t *err) {
    *out = NULL;
    if (n_cpus < 1) return err_set(err, ERR_INVALID_ARG, "no cores to place a pool on");
    plat_cpuset set, allowed;
    plat_cpuset_zero(&set);
    const bool known = plat_cpu_allowed(&allowed);
    for (int i = 0; i < n_cpus; i++) {
        if (!plat_cpuset_add(&set, cpus[i])) return err_set(err, ERR_INVALID_ARG, "no core %d", cpus[i]);
        if (known && !plat_cpuset_has(&allowed, cpus[i]))
            return err_set(err, ERR_INVALID_ARG, "core %d is not one this process may run on", cpus[i]);
    }
    if (!plat_pin_available()) return err_set(err, ERR_UNSUPPORTED, "this system cannot place threads on cores");
    return create(n_threads, &set, out, err);
}

void tpool_pin_caller(const tpool *p, tpool_affinity *prev) {
    prev->saved = 0;
    if (!p || !p->pinned) return;
    if (plat_pin_self_get(&prev->mask) != 0) return;
    if (plat_pin_self(&p->cpus) != 0) return;
    prev->saved = 1;
}

void tpool_unpin_caller(const tpool_affinity *prev) {
    if (prev->saved) plat_pin_self(&prev->mask);
}

void tpool_free(tpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cv);
    pthread_cond_broadcast(&p->park_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->workers[i - 1].thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->park_cv);
    free(p->workers);
    free(p);
}

int tpool_size(const tpool *p) { return p ? p->n : 1; }

int tpool_thread_ids(tpool *p, int *ids, int max) {
    int n = 0;
    for (int i = 1; p && i < p->n && n < max; i++) {
        const int tid = atomic_load(&p->workers[i - 1].tid);
        if (tid > 0) ids[n++] = tid;
    }
    return n;
}

int tpool_active(const tpool *p) { return p ? atomic_load(&p->active) : 1; }

int tpool_set_active(tpool *p, int n) {
    if (!p) return 1;
    n = n < 1 ? 1 : n > p->n ? p->n : n;
    pthread_mutex_lock(&p->mu);
    const int was = atomic_load(&p->active);
    atomic_store(&p->active, n);
    if (n > was) pthread_cond_broadcast(&p->park_cv);
    pthread_mutex_unlock(&p->mu);
    return n;
}

void tpool_set_spin(tpool *p, int rounds) {
    if (p) atomic_store(&p->spin_rounds, rounds < 1 ? 1 : rounds > SPIN_ROUNDS ? SPIN_ROUNDS : rounds);
}

int tpool_spin(const tpool *p) { return p ? atomic_load(&p->spin_rounds) : SPIN_ROUNDS; }

int tpool_spin_default(void) { return SPIN_ROUNDS; }

void tpool_run(tpool *p, tpool_fn fn, void *ctx) {
    const int nth = p ? atomic_load_explicit(&p->active, memory_order_relaxed) : 1;
    if (nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, nth - 1, memory_order_relaxed);
    /* seq_cst on both sides (here and the worker's sleepers++ then generation
     * load): either we see the sleeper, or it sees the new generation */
    const uint64_t g = atomic_load_explicit(&p->generation, memory_order_relaxed); /* only this thread writes it */
    atomic_store(&p->generation, ((g >> GEN_NTH_BITS) + 1) << GEN_NTH_BITS | (uint64_t)nth);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, nth);
    for (unsigned spins = 1; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) spin_wait(spins);
}

int tpool_default_threads(void) {
    cpu_classes cc;
    cpu_classes_read(NULL, &cc);
    return cpu_classes_threads(&cc);
}

int cpu_classes_threads(const cpu_classes *cc) {
    if (cc->n_eff > 0 && cc->n_perf > 0) return cc->n_perf;
    return cc->n_allowed > 0 ? cc->n_allowed : 1;
}

bool cpu_classes_split(cpu_classes *cc, int n_draft) {
    if (cc->n_eff > 0 || n_draft <= 0) return false;
    short ids[TPOOL_MAX_CPUS];
    int n = cc->n_perf;
    memcpy(ids, cc->perf, sizeof(short) * (size_t)n);
    plat_cpuset allowed;
    if (!n && plat_cpu_allowed(&allowed)) /* no capacities: the allowed cores */
        for (int c = 0; c < PLAT_MAX_CPUS && c < TPOOL_MAX_CPUS; c++)
            if (plat_cpuset_has(&allowed, c)) ids[n++] = (short)c;
    if (!n) /* nor an allowed set (the POSIX fallback): the n_allowed cores by number */
        for (int c = 0; c < cc->n_allowed && c < TPOOL_MAX_CPUS; c++) ids[n++] = (short)c;
    if (n_draft >= n) return false;
    cc->n_perf = n - n_draft;
    cc->n_eff = n_draft;
    memcpy(cc->perf, ids, sizeof(short) * (size_t)cc->n_perf);
    memcpy(cc->eff, ids + cc->n_perf, sizeof(short) * (size_t)n_draft);
    if (!cc->perf_capacity) cc->perf_capacity = cc->eff_capacity = 1024; /* equal: unknown, as the kernel's scale */
    else cc->eff_capacity = cc->perf_capacity;
    return true;
}

static int cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

void cpu_classes_read(const char *root, cpu_classes *out) {
    memset(out, 0, sizeof *out);
    int n, local_cap[TPOOL_MAX_CPUS];
    short id[TPOOL_MAX_CPUS];
    if (root) {
        n = out->n_allowed = plat_cpu_capacities_at(root, NULL, id, local_cap, TPOOL_MAX_CPUS);
    } else {
        plat_cpuset allowed;
        const bool filter = plat_cpu_allowed(&allowed);
        out->n_allowed = filter ? plat_cpuset_count(&allowed) : plat_cpu_online();
        n = plat_cpu_capacities(filter ? &allowed : NULL, id, local_cap, TPOOL_MAX_CPUS);
    }
    if (!n) return;
    int sorted[TPOOL_MAX_CPUS];
    memcpy(sorted, local_cap, sizeof(int) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
    /* the split: the largest ratio between consecutive distinct capacities */
    int threshold = sorted[0];
    double best = 1.0;
    for (int i = 1; i < n; i++)
        if (sorted[i] != sorted[i - 1] && (double)sorted[i] / sorted[i - 1] > best)
            best = (double)sorted[i] / sorted[i - 1], threshold = sorted[i];
    for (int i = 0; i < n; i++) {
        if (local_cap[i] >= threshold) {
            out->perf[out->n_perf++] = id[i];
            if (!out->perf_capacity || local_cap[i] < out->perf_capacity) out->perf_capacity = local_cap[i];
        } else {
            out->eff[out->n_eff++] = id[i];
            if (!out->eff_capacity || local_cap[i] < out->eff_capacity) out->eff_capacity = local_cap[i];
        }
    }
}
