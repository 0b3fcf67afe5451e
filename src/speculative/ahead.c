/*
 * ahead — the draft drafting beside verification (ahead.h).
 *
 * One mutex and condition guard the job: the proposal starts it (state
 * RUNNING), the thread runs it and goes back to IDLE, the settling waits for
 * IDLE. `done` (the steps finished) and `stop` are atomics the two sides
 * read while a job runs; everything else is touched by one side at a time,
 * handed over through the mutex.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "speculative/ahead.h"

enum { IDLE, RUNNING, QUIT };

struct spec_ahead {
    spec_lm lm;
    sampler *smp;       /* its own: the target's window, another stream, seeded again for each job */
    uint64_t seed;
    uint64_t jobs;
    bool sampled;
    int n_vocab;
    float *logits;      /* [n_vocab] sampled: a step's logits */
    float *rows;        /* [SPEC_AHEAD_MAX * n_vocab] each step's logits (greedy) or distribution (sampled) */
    int32_t pick[SPEC_AHEAD_MAX];
    int32_t from;       /* the job */
    int pos, steps;
    atomic_int done;    /* steps finished */
    atomic_bool stop;
    bool job;           /* a job was started and not settled yet */
    bool kept;          /* settled: the steps continue what the target chose */
    int used, dropped;
    int taken;              /* depths a proposal took, not yet counted */
    float launched, kept_n; /* passes drafted beside, and of those kept (decayed) */
    int skipped;            /* passes not drafted beside since the last */
    int state;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started;
};

/* Step i: evaluate its token, pick the next one. */
static bool run_step(spec_ahead *a, int i) {
    const size_t V = (size_t)a->n_vocab;
    const int32_t tok = i == 0 ? a->from : a->pick[i - 1];
    float *row = a->rows + (size_t)i * V;
    err_t err = {0};
    if (a->lm.eval(a->lm.ctx, &tok, 1, a->sampled ? a->logits : row, &err)) return false;
    if (a->sampled) {
        sampler_distribution(a->smp, a->logits, row);
        a->pick[i] = sampler_draw(a->smp, row);
    } else {
        a->pick[i] = sampler_sample(a->smp, row);
    }
    sampler_accept(a->smp, a->pick[i]);
    return true;
}

static void *worker(void *arg) {
    spec_ahead *a = arg;
    a->lm.pin(a->lm.ctx);
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (a->state == IDLE) pthread_cond_wait(&a->cv, &a->mu);
        if (a->state == QUIT) break;
        pthread_mutex_unlock(&a->mu);
        for (int i = 0; i < a->steps && !atomic_load(&a->stop); i++) {
            if (!run_step(a, i)) break; /* the next proposal's own step will meet the error */
            pthread_mutex_lock(&a->mu);
            atomic_store(&a->done, i + 1);
            pthread_cond_broadcast(&a->cv);
            pthread_mutex_unlock(&a->mu);
        }
        pthread_mutex_lock(&a->mu);
        a->state = IDLE;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

void spec_ahead_free(spec_ahead *a) {
    if (!a) return;
    if (a->started) {
        atomic_store(&a->stop, true);
        pthread_mutex_lock(&a->mu);
        while (a->state == RUNNING) pthread_cond_wait(&a->cv, &a->mu);
        a->state = QUIT;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->thread, NULL);
    }
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    sampler_free(a->smp);
    free(a->logits);
    free(a->rows);
    free(a);
}

err_code spec_ahead_new(const spec_lm *lm, const sampler_params *sp, int n_vocab, spec_ahead **out, err_t *err) {
    *out = NULL;
    spec_ahead *a = calloc(1, sizeof *a);
    if (!a) return err_set(err, ERR_NOMEM, "out of memory");
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->lm = *lm;
    a->n_vocab = n_vocab;
    a->sampled = sp->temperature != 0.0f;
    a->seed = sp->seed ^ 0xA4EADA4EADull; /* another stream, the same for the same seed */
    err_code rc = sampler_new(sp, n_vocab, &a->smp, err);
    a->logits = malloc(sizeof(float) * (size_t)n_vocab);
    a->rows = malloc(sizeof(float) * (size_t)SPEC_AHEAD_MAX * (size_t)n_vocab);
    if (!rc && (!a->logits || !a->rows)) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc && pthread_create(&a->thread, NULL, worker, a)) rc = err_set(err, ERR_NOMEM, "no thread to draft beside");
    a->started = !rc;
    if (rc) {
        spec_ahead_free(a);
        return rc;
    }
    *out = a;
    return ERR_OK;
}

void spec_ahead_start(spec_ahead *a, const sampler *hist, int32_t from, int pos, int steps) {
    if (steps > SPEC_AHEAD_MAX) steps = SPEC_AHEAD_MAX;
    if (steps > a->lm.n_ctx - pos) steps = a->lm.n_ctx - pos; /* the steps take pos .. pos + steps - 1 */
    if (a->kept) a->dropped += atomic_load(&a->done); /* never taken */
    if (a->taken) a->dropped += 1 + a->taken;         /* taken, never counted */
    a->kept = false, a->taken = 0;
    if (steps <= 0) return;
    const float odds = (a->kept_n + 1.0f) / (a->launched + 2.0f);
    if (odds < SPEC_AHEAD_MIN_KEEP && ++a->skipped < SPEC_AHEAD_PROBE) return;
    a->skipped = 0;
    a->job = true;
    sampler_copy_history(a->smp, hist);
    /* a job's draws must not depend on how far a dropped one got */
    sampler_seed(a->smp, a->seed ^ 0xD1B54A32D192ED03ull * ++a->jobs); /* not splitmix's own step */
    a->from = from, a->pos = pos, a->steps = steps;
    atomic_store(&a->done, 0);
    atomic_store(&a->stop, false);
    pthread_mutex_lock(&a->mu);
    a->state = RUNNING;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* Wait until the thread is idle, or (first > 0) has finished `first` steps. */
static void wait_for(spec_ahead *a, int first) {
    pthread_mutex_lock(&a->mu);
    while (a->state == RUNNING && (first <= 0 || atomic_load(&a->done) < first)) pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

/* Stop after the step in flight; what was computed is dropped. */
static void drop(spec_ahead *a) {
    atomic_store(&a->stop, true);
    wait_for(a, 0);
    a->dropped += atomic_load(&a->done);
    a->kept = false;
}

/* The odds: one more pass drafted beside, kept or not. */
static void count(spec_ahead *a, bool kept) {
    a->launched += 1.0f;
    a->kept_n += kept ? 1.0f : 0.0f;
    if (a->launched > 64.0f) a->launched *= 0.5f, a->kept_n *= 0.5f;
}

void spec_ahead_settle(spec_ahead *a, bool whole, int32_t next) {
    if (!a->job) return;
    a->job = false;
    if (whole) wait_for(a, 1);
    const bool keep = whole && atomic_load(&a->done) >= 1 && a->pick[0] == next;
    count(a, keep);
    if (!keep) {
        drop(a);
        return;
    }
    if (!a->sampled) atomic_store(&a->stop, true); /* greedy: what is done is kept, the rest a proposal drafts if it
                                                      * needs it; sampled, which steps the thread drew must not depend
                                                      * on timing, so all of them are waited for */
    wait_for(a, 0);
    a->kept = true;
}

bool spec_ahead_guess(spec_ahead *a, spec_guess *out) {
    if (!a || !a->job || !a->sampled) return false;
    wait_for(a, 1);
    if (atomic_load(&a->done) < 1) return false;
    *out = (spec_guess){.token = a->pick[0], .q = a->rows};
    return true;
}

void spec_ahead_halt(spec_ahead *a) {
    if (!a || !a->job) return;
    a->job = false;
    drop(a);
}

int spec_ahead_take(spec_ahead *a, int n_past, int32_t last) {
    if (!a || !a->kept) return 0;
    a->kept = false;
    const int done = atomic_load(&a->done);
    if (n_past != a->pos + 1 || last != a->pick[0] || done < 2) {
        a->dropped += done;
        return 0;
    }
    a->taken = done - 1;
    return done - 1;
}

void spec_ahead_count(spec_ahead *a, int used) {
    if (!a || !a->taken) return;
    a->used += used ? 1 + used : 0;
    a->dropped += used ? a->taken - used : 1 + a->taken;
    a->taken = 0;
}

int32_t spec_ahead_pick(const spec_ahead *a, int d) { return a->pick[d + 1]; }
const float *spec_ahead_row(const spec_ahead *a, int d) { return a->rows + (size_t)(d + 1) * (size_t)a->n_vocab; }

void spec_ahead_counts(const spec_ahead *a, int *used, int *dropped) {
    *used = a ? a->used : 0;
    *dropped = a ? a->dropped : 0;
}
