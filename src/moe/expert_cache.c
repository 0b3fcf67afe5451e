/*
 * expert_cache — see expert_cache.h.
 *
 * Every field below the mutex is shared with the I/O thread and read or
 * written under it; the reads themselves (pread, packing) run unlocked on
 * a slot marked LOADING, which nobody else touches until it is READY.
 */
#define _GNU_SOURCE
#include "expert_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/packed.h"
#include "policy.h"
#include "predict.h"

typedef enum { SLOT_EMPTY = 0, SLOT_LOADING, SLOT_READY } slot_state;

typedef struct {
    uint8_t *mem;      /* slot_bytes, allocated on first use */
    int layer, expert; /* -1: empty */
    slot_state state;
    bool ahead;        /* read ahead of its layer and not looked up since */
    model_mat mats[3];
    moe_slot_use use;
} slot;

struct moe_cache {
    const model *m;
    const moe_policy *policy;
    int fd;
    uint8_t *tmp, *io_tmp; /* packing scratch: the caller's, the I/O thread's */
    bool prefetch;       /* configured */
    bool io_running;     /* the I/O thread runs: the mutex guards what follows */
    pthread_t io;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* under mu */
    slot *slots;
    int n_slots, n_used, pinned;
    int32_t *where;      /* [n_layer][n_expert] slot index or -1 */
    uint32_t *named;     /* [n_layer][n_expert] the epoch that last named it (protected while current) */
    uint32_t epoch;
    int *per_layer;      /* [n_layer] slots held */
    int *queue;          /* slots waiting for the I/O thread, a ring of n_slots */
    int q_head, q_len;
    bool stop;
    uint64_t now;        /* lookups so far */
    moe_cache_stats st;
};

static uint64_t expert_bytes(const model *m, int layer) {
    expert_extent x;
    model_expert_extent(m, layer, 0, &x);
    return x.bytes[0] + x.bytes[1] + x.bytes[2];
}

uint64_t moe_expert_bytes_max(const model *m) {
    uint64_t b = 0;
    for (int l = 0; l < m->hp.n_layer; l++) b = expert_bytes(m, l) > b ? expert_bytes(m, l) : b;
    return b;
}

uint64_t moe_expert_bytes_all(const model *m) {
    uint64_t b = 0;
    for (int l = 0; l < m->hp.n_layer; l++) b += expert_bytes(m, l) * (uint64_t)m->hp.n_expert;
    return b;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

moe_cache_config moe_cache_config_default(void) {
    return (moe_cache_config){.prefetch = true, .predict_margin = MOE_PREDICT_MARGIN};
}

static int slots_for(const model *m, const moe_cache_config *c) {
    const uint64_t one = moe_expert_bytes_max(m), all = (uint64_t)m->hp.n_layer * (uint64_t)m->hp.n_expert;
    const uint64_t budget = c->budget_bytes ? c->budget_bytes
                            : c->share > 0.0 ? (uint64_t)(c->share * (double)moe_expert_bytes_all(m))
                                             : 0;
    uint64_t n = budget && one ? budget / one : all;
    if (n > all) n = all;
    if (n < (uint64_t)m->hp.n_expert_used) n = (uint64_t)m->hp.n_expert_used;
    return (int)n;
}

static size_t max_row_bytes(const model *m) {
    size_t max_row = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const model_layer *L = &m->layers[l];
        const size_t r[3] = {L->w_gate.row_bytes, L->w_up.row_bytes, L->w_down.row_bytes};
        for (int i = 0; i < 3; i++) max_row = r[i] > max_row ? r[i] : max_row;
    }
    return max_row;
}

static err_code read_all(int fd, uint8_t *dst, size_t n, uint64_t off, err_t *err) {
    size_t done = 0;
    while (done < n) {
        const ssize_t r = pread(fd, dst + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return err_set(err, ERR_IO, "reading an expert from the model file failed: %s", strerror(errno));
        if (r == 0)
            return err_set(err, ERR_TRUNCATED, "the model file ends inside an expert (byte %llu of %zu read)",
                           (unsigned long long)done, n);
        done += (size_t)r;
    }
#ifdef POSIX_FADV_DONTNEED
    posix_fadvise(fd, (off_t)off, (off_t)n, POSIX_FADV_DONTNEED); /* the slot holds it now */
#endif
    return ERR_OK;
}

/* Read the expert a LOADING slot names into it and pack it (unlocked: the
 * slot is this reader's); *bytes: what was read. */
static err_code read_expert(moe_cache *c, slot *sl, uint8_t *tmp, uint64_t *bytes, err_t *err) {
    if (!sl->mem && !(sl->mem = aligned_alloc(64, (c->st.slot_bytes + 63) / 64 * 64)))
        return err_set(err, ERR_NOMEM, "out of memory for an expert slot");
    expert_extent x;
    model_expert_extent(c->m, sl->layer, sl->expert, &x);
    model_mat mats[3];
    model_expert_mats(c->m, sl->layer, sl->expert, mats);
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        err_code rc = read_all(c->fd, sl->mem + at, x.bytes[i], x.offset[i], err);
        if (rc) return rc;
        mats[i].data = sl->mem + at;
        at += x.bytes[i];
    }
    model_expert_pack(c->m, sl->layer, mats, tmp);
    memcpy(sl->mats, mats, sizeof mats);
    *bytes = at;
    return ERR_OK;
}

static size_t idx(const moe_cache *c, int layer, int expert) { return (size_t)layer * c->m->hp.n_expert + expert; }

/* Slot s now holds (layer, expert), about to be read. */
static void claim(moe_cache *c, int s, int layer, int expert, bool ahead) {
    slot *sl = &c->slots[s];
    if (sl->layer >= 0) {
        c->where[idx(c, sl->layer, sl->expert)] = -1;
        c->per_layer[sl->layer]--;
        c->st.evictions++;
    }
    sl->layer = layer, sl->expert = expert;
    sl->state = SLOT_LOADING;
    sl->ahead = ahead;
    sl->use = (moe_slot_use){c->now, c->now, 0, 0.0};
    c->where[idx(c, layer, expert)] = s;
    c->per_layer[layer]++;
    if (s == c->n_used) c->n_used++;
}

/* A read into s failed: the slot is empty again. */
static void unclaim(moe_cache *c, int s) {
    slot *sl = &c->slots[s];
    c->where[idx(c, sl->layer, sl->expert)] = -1;
    c->per_layer[sl->layer]--;
    sl->layer = sl->expert = -1;
    sl->state = SLOT_EMPTY;
    sl->ahead = false;
}

static bool is_named(const moe_cache *c, const slot *sl) {
    return c->epoch && c->named[idx(c, sl->layer, sl->expert)] == c->epoch;
}

/* The slot to fill, or -1: an empty one, else the lowest-ranked READY slot
 * that is not pinned (nor, with spare_named, protected), a layer at or
 * under its floor keeping its slots while another can give. */
static int victim_among(moe_cache *c, bool spare_named) {
    if (c->n_used < c->n_slots) return c->n_used;
    const int floor = c->policy->layer_floor ? c->n_slots / (2 * c->m->hp.n_layer) : 0;
    int best = -1, best_any = -1;
    double rank = 0.0, rank_any = 0.0;
    for (int s = 0; s < c->n_slots; s++) {
        const slot *sl = &c->slots[s];
        if (sl->state == SLOT_EMPTY) return s;
        if (sl->state != SLOT_READY || s == c->pinned || (spare_named && is_named(c, sl))) continue;
        const double r = c->policy->rank(&sl->use, c->now);
        if (best_any < 0 || r < rank_any) best_any = s, rank_any = r;
        if (c->per_layer[sl->layer] > floor && (best < 0 || r < rank)) best = s, rank = r;
    }
    return best >= 0 ? best : best_any;
}

/* The slot a lookup fills: as victim_among, protected slots last; with every
 * slot reading, wait for one; a pool of one slot reuses the pinned one (the
 * forward pass has computed with it before it asks for the next). */
static int victim_for_lookup(moe_cache *c) {
    for (;;) {
        int s = victim_among(c, true);
        if (s < 0) s = victim_among(c, false);
        if (s >= 0) return s;
        if (c->pinned >= 0 && c->slots[c->pinned].state == SLOT_READY) {
            bool loading = false;
            for (int i = 0; i < c->n_slots; i++) loading |= c->slots[i].state == SLOT_LOADING;
            if (!loading) return c->pinned;
        }
        if (!c->io_running) return c->pinned >= 0 ? c->pinned : 0; /* unreachable: only a read ahead is ever LOADING */
        pthread_cond_wait(&c->done, &c->mu);
    }
}

static void *io_main(void *arg) {
    moe_cache *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && !c->q_len) pthread_cond_wait(&c->wake, &c->mu);
        if (c->stop) break;
        const int s = c->queue[c->q_head];
        c->q_head = (c->q_head + 1) % c->n_slots;
        c->q_len--;
        slot *sl = &c->slots[s];
        pthread_mutex_unlock(&c->mu);
        err_t e = {0};
        uint64_t bytes = 0;
        const err_code rc = read_expert(c, sl, c->io_tmp, &bytes, &e);
        pthread_mutex_lock(&c->mu);
        if (rc) unclaim(c, s); /* the lookup reads it again and reports the error */
        else {
            sl->state = SLOT_READY;
            c->st.bytes_read += bytes;
            if (sl->ahead) c->st.prefetched++, c->st.prefetch_bytes += bytes;
        }
        pthread_cond_broadcast(&c->done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void moe_cache_free(moe_cache *c) {
    if (!c) return;
    if (c->io_running) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_broadcast(&c->wake);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->io, NULL);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->wake);
        pthread_cond_destroy(&c->done);
    }
    for (int s = 0; c->slots && s < c->n_slots; s++) free(c->slots[s].mem);
    if (c->fd >= 0) close(c->fd);
    free(c->slots), free(c->where), free(c->named), free(c->per_layer), free(c->queue);
    free(c->tmp), free(c->io_tmp);
    free(c);
}

/* The tables, every slot empty. */
static err_code alloc_tables(moe_cache *c, err_t *err) {
    const size_t n = (size_t)c->m->hp.n_layer * (size_t)c->m->hp.n_expert, row = PACK_ROWS * max_row_bytes(c->m);
    c->slots = calloc((size_t)c->n_slots, sizeof *c->slots);
    c->where = malloc(sizeof(int32_t) * n);
    c->named = calloc(n, sizeof(uint32_t));
    c->per_layer = calloc((size_t)c->m->hp.n_layer, sizeof(int));
    c->queue = malloc(sizeof(int) * (size_t)c->n_slots);
    c->tmp = malloc(row);
    c->io_tmp = c->prefetch ? malloc(row) : NULL;
    if (!c->slots || !c->where || !c->named || !c->per_layer || !c->queue || !c->tmp || (c->prefetch && !c->io_tmp))
        return err_set(err, ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) c->where[i] = -1;
    for (int s = 0; s < c->n_slots; s++) c->slots[s].layer = c->slots[s].expert = -1;
    return ERR_OK;
}

static err_code start_io(moe_cache *c, err_t *err) {
    if (pthread_mutex_init(&c->mu, NULL)) return err_set(err, ERR_NOMEM, "cannot make the expert cache's lock");
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->done, NULL);
    if (pthread_create(&c->io, NULL, io_main, c)) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->wake);
        pthread_cond_destroy(&c->done);
        return err_set(err, ERR_NOMEM, "cannot start the expert cache's I/O thread");
    }
    c->io_running = true;
    return ERR_OK;
}

err_code moe_cache_new(const model *m, const char *path, const moe_cache_config *cfg, moe_cache **out, err_t *err) {
    *out = NULL;
    const moe_policy *policy = moe_policy_get(cfg->policy);
    if (!policy) return err_set(err, ERR_INVALID_ARG, "no expert cache policy %d", cfg->policy);
    moe_cache *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, ERR_NOMEM, "out of memory");
    c->m = m;
    c->policy = policy;
    c->pinned = -1;
    c->n_slots = slots_for(m, cfg);
    c->prefetch = cfg->prefetch;
    c->st.slots = c->n_slots;
    c->st.slot_bytes = moe_expert_bytes_max(m);
    c->st.expert_bytes = moe_expert_bytes_all(m);
    c->fd = open(path, O_RDONLY | O_CLOEXEC);
    err_code rc = c->fd < 0 ? err_set(err, ERR_IO, "cannot open %s to read experts: %s", path, strerror(errno))
                            : ERR_OK;
    if (!rc) rc = alloc_tables(c, err);
    if (!rc && c->prefetch) rc = start_io(c, err);
    if (rc) {
        moe_cache_free(c);
        return rc;
    }
    *out = c;
    return ERR_OK;
}

static void lock(moe_cache *c) {
    if (c->io_running) pthread_mutex_lock(&c->mu);
}
static void unlock(moe_cache *c) {
    if (c->io_running) pthread_mutex_unlock(&c->mu);
}

static void touch(moe_cache *c, slot *sl) {
    sl->use.heat = moe_heat_now(&sl->use, c->now) + 1.0;
    sl->use.uses++;
    sl->use.last_use = c->now;
}

/* A lookup found slot s: wait for it if it is being read; false when that
 * read failed (the slot is gone). */
static bool await_slot(moe_cache *c, int s, int layer, int expert, moe_status *status) {
    slot *sl = &c->slots[s];
    if (sl->state == SLOT_LOADING) {
        const uint64_t t0 = now_ns();
        const bool ahead = sl->ahead;
        while (sl->state == SLOT_LOADING && sl->layer == layer && sl->expert == expert)
            pthread_cond_wait(&c->done, &c->mu);
        c->st.stall_ns += now_ns() - t0;
        if (ahead) c->st.prefetch_late++;
        *status = MOE_MISS;
    } else if (sl->ahead)
        c->st.prefetch_in_time++;
    if (sl->state != SLOT_READY || sl->layer != layer || sl->expert != expert) return false;
    if (sl->ahead) c->st.prefetch_used++;
    sl->ahead = false;
    return true;
}

/* Read (layer, expert) into a slot on this thread. */
static err_code read_now(moe_cache *c, int layer, int expert, int *slot_out, err_t *err) {
    const int s = victim_for_lookup(c);
    claim(c, s, layer, expert, false);
    unlock(c);
    const uint64_t t0 = now_ns();
    uint64_t bytes = 0;
    const err_code rc = read_expert(c, &c->slots[s], c->tmp, &bytes, err);
    const uint64_t dt = now_ns() - t0;
    lock(c);
    c->st.stall_ns += dt;
    if (rc) {
        unclaim(c, s);
        if (c->io_running) pthread_cond_broadcast(&c->done);
        return rc;
    }
    c->slots[s].state = SLOT_READY;
    c->st.bytes_read += bytes;
    *slot_out = s;
    return ERR_OK;
}

err_code moe_cache_get(moe_cache *c, int layer, int expert, model_mat mats[3], moe_status *status, err_t *err) {
    lock(c);
    c->now++;
    *status = MOE_HIT;
    int s = c->where[idx(c, layer, expert)];
    if (s < 0 || !await_slot(c, s, layer, expert, status)) {
        *status = MOE_MISS;
        const err_code rc = read_now(c, layer, expert, &s, err);
        if (rc) {
            unlock(c);
            return rc; /* the slot stays empty */
        }
    }
    slot *sl = &c->slots[s];
    touch(c, sl);
    c->pinned = s;
    if (*status == MOE_HIT) c->st.hits++;
    else c->st.misses++;
    memcpy(mats, sl->mats, sizeof sl->mats);
    unlock(c);
    return ERR_OK;
}

void moe_cache_new_layer(moe_cache *c) {
    lock(c);
    if (++c->epoch == 0) { /* wrapped: forget every old mark */
        memset(c->named, 0, sizeof(uint32_t) * (size_t)c->m->hp.n_layer * (size_t)c->m->hp.n_expert);
        c->epoch = 1;
    }
    unlock(c);
}

void moe_cache_fetch(moe_cache *c, int layer, const int32_t *experts, int n, bool ahead) {
    lock(c);
    if (!c->epoch) c->epoch = 1;
    for (int i = 0; i < n; i++) {
        if (experts[i] < 0 || experts[i] >= c->m->hp.n_expert) continue;
        c->named[idx(c, layer, experts[i])] = c->epoch;
        if (!c->io_running || c->where[idx(c, layer, experts[i])] >= 0) continue;
        const int s = victim_among(c, true);
        if (s < 0) continue; /* every slot is wanted: the lookup will read it */
        claim(c, s, layer, experts[i], ahead);
        c->queue[(c->q_head + c->q_len++) % c->n_slots] = s;
        pthread_cond_signal(&c->wake);
    }
    unlock(c);
}

void moe_cache_stats_get(moe_cache *c, moe_cache_stats *out) {
    lock(c);
    *out = c->st;
    out->slots_used = c->n_used;
    out->prefetching = c->io_running;
    unlock(c);
}
