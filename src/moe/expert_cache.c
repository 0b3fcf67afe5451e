/*
 * expert_cache — see expert_cache.h.
 *
 * Every field below the mutex is shared with the I/O thread and read or
 * written under it; the reads themselves (pread, packing) run unlocked on
 * a slot marked LOADING, which nobody else touches until it is READY.
 */
#define _GNU_SOURCE
#include "expert_cache.h"
#include "core/clock.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/kernels/packed.h"
#include "expert_read.h"
#include "int2.h"
#include "policy.h"
#include "predict.h"

/* QUEUED: waiting for the I/O thread (a lookup may take it over); LOADING:
 * being read (by the I/O thread or a lookup), untouchable until READY. */
typedef enum { SLOT_EMPTY = 0, SLOT_QUEUED, SLOT_LOADING, SLOT_READY } slot_state;

typedef struct {
    uint8_t *mem;      /* slot_bytes, allocated on first use */
    int layer, expert; /* -1: empty */
    slot_state state;
    bool ahead;        /* read ahead of its layer and not looked up since */
    uint32_t ticket;   /* its queue entry's (a stale entry's differs) */
    bool counted;      /* mem is counted in n_mem */
    bool fresh;        /* read (for a lookup, not ahead) and not looked up yet: that lookup is a miss */
    bool int2;         /* holds (or is reading) the 2-bit copy, spelt out as Q4_0 */
    bool promote;      /* an int2 copy looked up again: the full expert replaces it after this layer */
    bool promoting;    /* queued or being read to replace its copy (which stays until the read begins) */
    model_mat mats[3];
    moe_slot_use use;
} slot;

struct moe_cache {
    const model *m;
    const moe_policy *policy;
    moe_reader *reader;
    moe_int2 *int2;      /* the 2-bit copies' sidecar, NULL: not in use */
    moe_int2_mode int2_mode;
    int n_promote;       /* slots marked promote */
    uint8_t *tmp;        /* packing scratch of the lookups' reads */
    bool prefetch;       /* configured */
    bool io_running;     /* the I/O thread runs: the mutex guards what follows */
    struct io_worker {
        moe_cache *c;
        pthread_t thread;
        uint8_t *tmp;    /* its packing scratch */
    } io[MOE_IO_THREADS];
    int n_io;            /* I/O threads running */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* under mu */
    slot *slots;
    int n_slots;         /* the most slots the budget ever allowed */
    int limit;           /* slots that may hold an expert now (moe_cache_set_budget), <= n_slots */
    int filled;          /* slots holding an expert, or reading one */
    int n_mem;           /* slots with memory allocated */
    int pinned;
    int32_t *where;      /* [n_layer][n_expert] slot index or -1 */
    uint32_t *named;     /* [n_layer][n_expert] the epoch that last named it (protected while current) */
    moe_slot_use *hist;  /* [n_layer][n_expert] heat and last use over the whole run, resident or not */
    uint32_t epoch;
    int *per_layer;      /* [n_layer] slots held */
    struct { int slot; uint32_t ticket; } *queue; /* reads for the I/O thread: a ring of q_cap, demand first */
    int q_head, q_len, q_cap;
    uint32_t tickets;
    bool stop;
    uint64_t now;        /* lookups so far */
    moe_cache_stats st;
};

uint64_t moe_expert_bytes(const model *m, int layer) {
    expert_extent x;
    model_expert_extent(m, layer, 0, &x);
    return x.bytes[0] + x.bytes[1] + x.bytes[2];
}

uint64_t moe_expert_bytes_max(const model *m) {
    uint64_t b = 0;
    for (int l = 0; l < m->hp.n_layer; l++) b = moe_expert_bytes(m, l) > b ? moe_expert_bytes(m, l) : b;
    return b;
}

uint64_t moe_expert_bytes_all(const model *m) {
    uint64_t b = 0;
    for (int l = 0; l < m->hp.n_layer; l++) b += moe_expert_bytes(m, l) * (uint64_t)m->hp.n_expert;
    return b;
}

uint64_t moe_cache_slot_bytes(const model *m) { return moe_reader_buffer_bytes(m); }

moe_cache_config moe_cache_config_default(void) {
    return (moe_cache_config){.prefetch = MOE_PREFETCH_AUTO, .predict_margin = MOE_PREDICT_MARGIN,
                              .int2 = MOE_INT2_AUTO};
}

/* A budget in bytes buys what slots cost (the blocks around small experts
 * included); a share is of the experts, counted. */
static int slots_for(const model *m, const moe_cache_config *c) {
    const uint64_t one = moe_reader_buffer_bytes(m), all = (uint64_t)model_moe_layers(&m->hp) * (uint64_t)m->hp.n_expert;
    uint64_t n = c->budget_bytes ? c->budget_bytes / one : c->share > 0.0 ? (uint64_t)(c->share * (double)all + 0.5) : all;
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

static void lock(moe_cache *c) {
    if (c->io_running) pthread_mutex_lock(&c->mu);
}
static void unlock(moe_cache *c) {
    if (c->io_running) pthread_mutex_unlock(&c->mu);
}

static size_t idx(const moe_cache *c, int layer, int expert) { return (size_t)layer * c->m->hp.n_expert + expert; }

/* Slot s now holds (layer, expert), about to be read (state: the caller's). */
static void claim(moe_cache *c, int s, int layer, int expert, bool ahead, slot_state state) {
    slot *sl = &c->slots[s];
    if (sl->layer >= 0) {
        c->where[idx(c, sl->layer, sl->expert)] = -1;
        c->per_layer[sl->layer]--;
        c->st.evictions++;
    } else
        c->filled++;
    if (sl->promote) c->n_promote--;
    sl->layer = layer, sl->expert = expert;
    sl->state = state;
    sl->ahead = ahead;
    sl->int2 = sl->promote = sl->promoting = false;
    const moe_slot_use *h = &c->hist[idx(c, layer, expert)];
    sl->use = (moe_slot_use){c->now, h->last_use, 0, h->heat}; /* a returning expert keeps its heat */
    c->where[idx(c, layer, expert)] = s;
    c->per_layer[layer]++;
}

/* A read into s failed, or was called off before it began: the slot is empty again. */
static void unclaim(moe_cache *c, int s) {
    slot *sl = &c->slots[s];
    if (sl->promote) c->n_promote--;
    sl->int2 = sl->promote = sl->promoting = false;
    c->where[idx(c, sl->layer, sl->expert)] = -1;
    c->per_layer[sl->layer]--;
    sl->layer = sl->expert = -1;
    sl->state = SLOT_EMPTY;
    sl->ahead = false;
    c->filled--;
}

/* The cache's invariants, asserted under the lock after every change of
 * layer, fetch and budget: a slot holds an expert exactly when it is not
 * empty and `where` points back at it; the counts (filled, per layer, with
 * memory, marked for promotion) are what the slots say. */
static void moe_cache_check(const moe_cache *c) {
    int filled = 0, with_mem = 0, promote = 0;
    for (int s = 0; s < c->n_slots; s++) {
        const slot *sl = &c->slots[s];
        assert((sl->layer >= 0) == (sl->state != SLOT_EMPTY));
        assert(sl->layer < 0 || c->where[idx(c, sl->layer, sl->expert)] == s);
        filled += sl->layer >= 0, with_mem += sl->counted, promote += sl->promote;
    }
    assert(filled == c->filled && with_mem == c->n_mem && promote == c->n_promote);
    for (int l = 0; l < c->m->hp.n_layer; l++) {
        int held = 0;
        for (int e = 0; e < c->m->hp.n_expert; e++) {
            const int32_t s = c->where[idx(c, l, e)];
            assert(s >= -1 && s < c->n_slots && (s < 0 || (c->slots[s].layer == l && c->slots[s].expert == e)));
            held += s >= 0;
        }
        assert(held == c->per_layer[l]);
    }
}

static bool is_named(const moe_cache *c, const slot *sl) {
    return c->epoch && c->named[idx(c, sl->layer, sl->expert)] == c->epoch;
}

/* The slot to fill, or -1: an empty one, else the lowest-ranked READY slot
 * that is not pinned (nor, with spare_named, protected), a layer at or
 * under its floor keeping its slots while another can give. */
static int victim_among(moe_cache *c, bool spare_named) {
    if (c->filled < c->limit) { /* room: an empty slot, one with memory first */
        int empty = -1;
        for (int s = 0; s < c->n_slots; s++)
            if (c->slots[s].state == SLOT_EMPTY && (empty < 0 || (c->slots[s].mem && !c->slots[empty].mem))) empty = s;
        if (empty >= 0) return empty;
    }
    const int floor = c->policy->layer_floor ? c->limit / (2 * model_moe_layers(&c->m->hp)) : 0;
    int best = -1, best_any = -1;
    double rank = 0.0, rank_any = 0.0;
    for (int s = 0; s < c->n_slots; s++) {
        const slot *sl = &c->slots[s];
        if (sl->state != SLOT_READY || s == c->pinned || (spare_named && is_named(c, sl))) continue;
        const double r = c->policy->rank(&sl->use, c->now);
        if (best_any < 0 || r < rank_any) best_any = s, rank_any = r;
        if (c->per_layer[sl->layer] > floor && (best < 0 || r < rank)) best = s, rank = r;
    }
    return best >= 0 ? best : best_any;
}

/* The slot a lookup fills: as victim_among, protected slots last; then a
 * read still waiting in the queue, called off; with every slot being read,
 * wait for one; a pool of one slot reuses the pinned one (the forward pass
 * has computed with it before it asks for the next). */
static int victim_for_lookup(moe_cache *c) {
    for (;;) {
        int s = victim_among(c, true);
        if (s < 0) s = victim_among(c, false);
        if (s >= 0) return s;
        bool loading = false;
        for (int i = 0; i < c->n_slots; i++) {
            if (c->slots[i].state == SLOT_QUEUED) {
                unclaim(c, i);
                return i;
            }
            loading |= c->slots[i].state == SLOT_LOADING;
        }
        if (!loading && c->pinned >= 0) return c->pinned;
        if (!c->io_running) return 0; /* unreachable: without the thread nothing is left LOADING */
        pthread_cond_wait(&c->done, &c->mu);
    }
}

/* Queue slot s for the I/O thread, a demand read before every read ahead;
 * false when the queue is full. */
static bool enqueue(moe_cache *c, int s, bool front) {
    if (c->q_len == c->q_cap) return false;
    const int at = front ? (c->q_head + c->q_cap - 1) % c->q_cap : (c->q_head + c->q_len) % c->q_cap;
    if (front) c->q_head = at;
    c->queue[at].slot = s;
    c->queue[at].ticket = c->slots[s].ticket = ++c->tickets;
    c->q_len++;
    pthread_cond_signal(&c->wake);
    return true;
}

/* The next queued read that is still wanted (-1: none): its slot becomes LOADING. */
static int dequeue(moe_cache *c) {
    while (c->q_len) {
        const int s = c->queue[c->q_head].slot;
        const uint32_t t = c->queue[c->q_head].ticket;
        c->q_head = (c->q_head + 1) % c->q_cap;
        c->q_len--;
        if (c->slots[s].state == SLOT_QUEUED && c->slots[s].ticket == t) {
            c->slots[s].state = SLOT_LOADING;
            return s;
        }
    }
    return -1;
}

/* Read slot s's expert (LOADING, this thread's) unlocked; then, locked
 * again, READY or empty. */
static err_code fill(moe_cache *c, int s, uint8_t *tmp, err_t *err) {
    slot *sl = &c->slots[s];
    const int layer = sl->layer, expert = sl->expert;
    const bool promotion = sl->promoting;
    if (promotion) sl->int2 = false; /* the copy served until now: the whole expert replaces it */
    unlock(c);
    err_code rc = ERR_OK;
    if (!sl->mem && !(sl->mem = aligned_alloc(MOE_READ_ALIGN, c->st.slot_bytes)))
        rc = err_set(err, ERR_NOMEM, "out of memory for an expert slot");
    model_mat mats[3];
    bool bad_copy = false;
    err_t e = {0};
    if (!rc && sl->int2) { /* a copy that fails its check: the expert whole instead, and no more copies */
        bad_copy = moe_int2_read(c->int2, c->m, layer, expert, sl->mem, c->st.slot_bytes, mats, &e) != ERR_OK;
        if (bad_copy) sl->int2 = false;
    }
    if (!rc && !sl->int2) rc = moe_reader_read(c->reader, layer, expert, sl->mem, tmp, mats, err);
    lock(c);
    if (bad_copy) {
        c->st.int2_errors++, c->st.int2 = false;
        snprintf(c->st.int2_why, sizeof c->st.int2_why, "off after an error: %.130s", e.msg);
    }
    if (sl->mem && !sl->counted) sl->counted = true, c->n_mem++;
    if (rc) {
        unclaim(c, s);
    } else {
        memcpy(sl->mats, mats, sizeof mats);
        sl->state = SLOT_READY;
        sl->fresh = !sl->promoting; /* a promotion done before its lookup is there in time */
        sl->promoting = false;
        const uint64_t bytes = sl->int2 ? moe_int2_record_bytes(c->m, layer)
                                        : (uint64_t)(mats[0].n_out * mats[0].row_bytes + mats[1].n_out * mats[1].row_bytes +
                                                     mats[2].n_out * mats[2].row_bytes);
        c->st.bytes_read += bytes;
        if (sl->int2) c->st.int2_loads++;
        if (promotion) c->st.int2_promotions++;
        if (sl->ahead) c->st.prefetched++, c->st.prefetch_bytes += bytes;
    }
    if (c->io_running) pthread_cond_broadcast(&c->done);
    return rc;
}

static void *io_main(void *arg) {
    struct io_worker *w = arg;
    moe_cache *c = w->c;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        int s = -1;
        while (!c->stop && (s = dequeue(c)) < 0) pthread_cond_wait(&c->wake, &c->mu);
        if (c->stop) break;
        err_t e = {0};
        fill(c, s, w->tmp, &e); /* a failure leaves the slot empty: the lookup reads it and reports */
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
        for (int i = 0; i < c->n_io; i++) pthread_join(c->io[i].thread, NULL);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->wake);
        pthread_cond_destroy(&c->done);
    }
    for (int s = 0; c->slots && s < c->n_slots; s++) free(c->slots[s].mem);
    moe_reader_close(c->reader);
    moe_int2_close(c->int2);
    free(c->slots), free(c->where), free(c->named), free(c->hist), free(c->per_layer), free(c->queue);
    free(c->tmp);
    for (int i = 0; i < MOE_IO_THREADS; i++) free(c->io[i].tmp);
    free(c);
}

/* The tables, every slot empty. */
static err_code alloc_tables(moe_cache *c, err_t *err) {
    const size_t n = (size_t)c->m->hp.n_layer * (size_t)c->m->hp.n_expert, row = PACK_ROWS * max_row_bytes(c->m);
    c->q_cap = 4 * c->n_slots + 8;
    c->slots = calloc((size_t)c->n_slots, sizeof *c->slots);
    c->where = malloc(sizeof(int32_t) * n);
    c->named = calloc(n, sizeof(uint32_t));
    c->hist = calloc(n, sizeof *c->hist);
    c->per_layer = calloc((size_t)c->m->hp.n_layer, sizeof(int));
    c->queue = malloc(sizeof *c->queue * (size_t)c->q_cap);
    c->tmp = malloc(row);
    bool io_ok = true;
    for (int i = 0; i < MOE_IO_THREADS && c->prefetch; i++) io_ok &= (c->io[i].tmp = malloc(row)) != NULL;
    if (!c->slots || !c->where || !c->named || !c->hist || !c->per_layer || !c->queue || !c->tmp || !io_ok)
        return err_set(err, ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) c->where[i] = -1;
    for (int s = 0; s < c->n_slots; s++) c->slots[s].layer = c->slots[s].expert = -1;
    return ERR_OK;
}

static err_code start_io(moe_cache *c, err_t *err) {
    if (pthread_mutex_init(&c->mu, NULL)) return err_set(err, ERR_NOMEM, "cannot make the expert cache's lock");
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->done, NULL);
    c->io_running = true; /* from here on free() stops and joins what started */
    for (int i = 0; i < MOE_IO_THREADS; i++) {
        c->io[i].c = c;
        if (pthread_create(&c->io[i].thread, NULL, io_main, &c->io[i]))
            return err_set(err, ERR_NOMEM, "cannot start the expert cache's I/O threads");
        c->n_io++;
    }
    return ERR_OK;
}

/* Opens the 2-bit copies when the mode asks for them (ON and ALL make or
 * remake a missing, stale or damaged sidecar; AUTO takes only a sound one
 * whose measured cost is at most MOE_INT2_KLD_AUTO, and only when the pool
 * cannot hold every expert), and says why in st.int2_why. */
static err_code int2_setup(moe_cache *c, const char *path, moe_int2_mode mode, err_t *err) {
    char *why = c->st.int2_why, how[160];
    const int n = sizeof c->st.int2_why;
    c->int2_mode = mode;
    if (mode == MOE_INT2_OFF) return snprintf(why, n, "off (asked)"), ERR_OK;
    const bool want = mode != MOE_INT2_AUTO;
    if (!moe_int2_applicable(c->m, how, sizeof how)) {
        if (want) return err_set(err, ERR_UNSUPPORTED, "no 2-bit copies of these experts: %s", how);
        return snprintf(why, n, "off: %s", how), ERR_OK;
    }
    if (mode == MOE_INT2_AUTO && c->n_slots >= model_moe_layers(&c->m->hp) * c->m->hp.n_expert)
        return snprintf(why, n, "off: every expert fits"), ERR_OK;
    err_t e = {0};
    err_code rc = moe_int2_open(c->m, path, &c->int2, &e);
    if (rc && want) { /* missing, stale or damaged: made again */
        rc = moe_int2_build(c->m, path, &e);
        if (!rc) rc = moe_int2_open(c->m, path, &c->int2, &e);
        if (rc) return err_set(err, rc, "the 2-bit copies: %s", e.msg);
        snprintf(how, sizeof how, "; the sidecar was made at load");
    } else if (rc) {
        return snprintf(why, n, "off: %.150s", rc == ERR_NOT_FOUND ? "no sidecar (octo moe-prep -m MODEL -f TEXT makes one)"
                                                              : e.msg), ERR_OK;
    } else
        how[0] = '\0';
    const double kld = moe_int2_kld(c->int2);
    if (mode == MOE_INT2_AUTO && !(kld >= 0.0 && kld <= MOE_INT2_KLD_AUTO)) {
        moe_int2_close(c->int2);
        c->int2 = NULL;
        if (kld < 0.0) return snprintf(why, n, "off: the sidecar's cost was never measured (octo moe-prep -f TEXT)"), ERR_OK;
        return snprintf(why, n, "off: they cost %.4f nats of KL divergence, more than %.2f", kld, MOE_INT2_KLD_AUTO),
               ERR_OK;
    }
    c->st.int2 = true;
    if (kld >= 0.0) snprintf(why, n, "on: %.4f nats of KL divergence measured%s", kld, how);
    else snprintf(why, n, "on (asked), cost not measured%s", how);
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
    c->n_slots = c->limit = slots_for(m, cfg);
    c->prefetch = cfg->prefetch != MOE_PREFETCH_OFF;
    c->st.slots = c->n_slots;
    c->st.slot_bytes = moe_reader_buffer_bytes(m);
    c->st.expert_bytes = moe_expert_bytes_all(m);
    err_code rc = moe_reader_open(m, path, true, &c->reader, err);
    if (!rc) rc = int2_setup(c, path, cfg->int2, err);
    if (!rc) rc = alloc_tables(c, err);
    if (!rc && c->prefetch) rc = start_io(c, err);
    if (rc) {
        moe_cache_free(c);
        return rc;
    }
    *out = c;
    return ERR_OK;
}

static void touch(moe_cache *c, slot *sl) {
    moe_slot_use *h = &c->hist[idx(c, sl->layer, sl->expert)];
    h->heat = moe_heat_now(h, c->now) + 1.0;
    h->last_use = c->now;
    sl->use.heat = h->heat;
    sl->use.last_use = c->now;
    sl->use.uses++;
}

/* A lookup found slot s: take over its read if it is still queued, wait for
 * it if it is being read; false when the expert is not there after all (a
 * failed read: the lookup reads it itself and reports). A read ahead done
 * in time is a hit; a read for this lookup is a miss, done early or not. */
static bool await_slot(moe_cache *c, int s, int layer, int expert, moe_status *status, err_t *err) {
    slot *sl = &c->slots[s];
    bool ahead = sl->ahead;
    const uint64_t t0 = clock_ns();
    if (sl->state == SLOT_QUEUED) { /* not begun: this lookup reads it (the queue's entry goes stale) */
        sl->state = SLOT_LOADING;
        sl->ahead = ahead = false;
        fill(c, s, c->tmp, err);
        c->st.stall_ns += clock_ns() - t0;
        *status = MOE_MISS;
    } else if (sl->state == SLOT_LOADING) {
        while (sl->state == SLOT_LOADING && sl->layer == layer && sl->expert == expert)
            pthread_cond_wait(&c->done, &c->mu);
        c->st.stall_ns += clock_ns() - t0;
        if (ahead) c->st.prefetch_late++;
        *status = MOE_MISS;
    } else if (ahead)
        c->st.prefetch_in_time++;
    else if (sl->fresh)
        *status = MOE_MISS;
    if (sl->state != SLOT_READY || sl->layer != layer || sl->expert != expert) return false;
    if (ahead) c->st.prefetch_used++;
    sl->ahead = false;
    return true;
}

/* Read (layer, expert), or its 2-bit copy, into a slot on this thread. */
static err_code read_now(moe_cache *c, int layer, int expert, bool int2, int *slot_out, err_t *err) {
    const uint64_t t0 = clock_ns(); /* waiting for a free slot is stall too */
    const int s = victim_for_lookup(c);
    claim(c, s, layer, expert, false, SLOT_LOADING);
    c->slots[s].int2 = int2;
    const err_code rc = fill(c, s, c->tmp, err);
    c->st.stall_ns += clock_ns() - t0;
    *slot_out = s;
    return rc;
}

/* Slot s (READY, about to be computed, so no one else's) read again in
 * place, whole or as its copy. */
static err_code reread(moe_cache *c, int s, bool int2, err_t *err) {
    slot *sl = &c->slots[s];
    if (sl->promote) sl->promote = false, c->n_promote--;
    sl->state = SLOT_LOADING;
    sl->int2 = int2;
    const uint64_t t0 = clock_ns();
    const err_code rc = fill(c, s, c->tmp, err);
    c->st.stall_ns += clock_ns() - t0;
    return rc;
}

/* A lookup found slot s whose precision may not be the one to serve. A
 * copy serves low lookups only: any other reads the whole expert now. A
 * copy used again (not the lookup it was read for) is served and marked
 * for promotion, or promoted now without an I/O thread. Under
 * MOE_INT2_ALL a low lookup gets the copy, any other the whole expert,
 * never promoted. On a failed read the slot is empty (*s = -1). */
static err_code settle(moe_cache *c, int *s, bool low, moe_status *status, err_t *err) {
    slot *sl = &c->slots[*s];
    const bool all = c->int2_mode == MOE_INT2_ALL && c->st.int2, again = sl->use.uses > 0;
    err_code rc = ERR_OK;
    if ((all && sl->int2 != low) || (sl->int2 && !low)) {
        rc = reread(c, *s, all && low, err);
        *status = sl->int2 ? MOE_INT2 : MOE_MISS;
    } else if (sl->int2 && !all && again && !c->io_running) {
        rc = reread(c, *s, false, err);
        *status = MOE_MISS;
        if (!rc) c->st.int2_promotions++;
    } else if (sl->int2) {
        *status = MOE_INT2;
        if (!all && again && !sl->promote) sl->promote = true, c->n_promote++;
    }
    if (rc) *s = -1;
    return rc;
}

err_code moe_cache_get(moe_cache *c, int layer, int expert, bool low, model_mat mats[3], moe_status *status,
                       err_t *err) {
    lock(c);
    c->now++;
    *status = MOE_HIT;
    const uint64_t loads = c->st.int2_loads;
    int s = c->where[idx(c, layer, expert)];
    if (s >= 0 && c->slots[s].state == SLOT_QUEUED && c->slots[s].promoting) /* its copy is still there: serve it */
        c->slots[s].state = SLOT_READY, c->slots[s].int2 = true, c->slots[s].promoting = false;
    else if (s >= 0 && c->slots[s].state == SLOT_QUEUED && !low)
        c->slots[s].int2 = false; /* a copy queued for another token: this one takes the read over, whole */
    err_code rc = ERR_OK;
    bool missed = false; /* read for this lookup (a copy included) */
    if (s >= 0 && await_slot(c, s, layer, expert, status, err)) {
        missed = *status == MOE_MISS;
        rc = settle(c, &s, low, status, err);
    } else {
        const bool copy = c->st.int2 && low;
        rc = read_now(c, layer, expert, copy, &s, err);
        *status = !rc && c->slots[s].int2 ? MOE_INT2 : MOE_MISS;
    }
    if (rc) {
        unlock(c);
        return rc; /* the slot stays empty */
    }
    slot *sl = &c->slots[s];
    sl->fresh = false;
    touch(c, sl);
    c->pinned = s;
    if (*status == MOE_MISS || missed || c->st.int2_loads != loads) c->st.misses++; /* a copy read now too */
    else c->st.hits++; /* from memory: whole, or a copy read before */
    if (*status == MOE_INT2) c->st.int2_served++;
    memcpy(mats, sl->mats, sizeof sl->mats);
    unlock(c);
    return ERR_OK;
}

/* With the I/O threads idle (nothing queued), copies marked for promotion
 * are queued to be read whole into their own slots, a few at a time: not
 * of this layer (being computed) nor the next (read ahead now). A copy
 * serves until its read begins. */
static void queue_promotions(moe_cache *c, int layer) {
    int room = c->q_len == 0 ? MOE_IO_THREADS : 0;
    for (int s = 0; c->n_promote && room && s < c->n_slots; s++) {
        slot *sl = &c->slots[s];
        if (!sl->promote || sl->state != SLOT_READY || sl->layer == layer || sl->layer == layer + 1 || s == c->pinned)
            continue;
        room--;
        sl->state = SLOT_QUEUED;
        sl->promoting = true;
        if (!enqueue(c, s, false)) { /* the queue is full: next layer */
            sl->state = SLOT_READY, sl->promoting = false;
            break;
        }
        sl->promote = false, c->n_promote--;
        sl->ahead = false;
    }
}

/* Reads ahead still queued for a layer other than this one are called off
 * (the forward pass is past them); a promotion not begun leaves its copy. */
void moe_cache_new_layer(moe_cache *c, int layer) {
    lock(c);
    if (++c->epoch == 0) { /* wrapped: forget every old mark */
        memset(c->named, 0, sizeof(uint32_t) * (size_t)c->m->hp.n_layer * (size_t)c->m->hp.n_expert);
        c->epoch = 1;
    }
    for (int s = 0; c->q_len && s < c->n_slots; s++) { /* nothing queued: nothing to call off */
        slot *sl = &c->slots[s];
        if (sl->state != SLOT_QUEUED || sl->layer == layer) continue;
        if (!sl->promoting) unclaim(c, s); /* a promotion stays queued: its copy serves until then */
    }
    if (c->io_running) queue_promotions(c, layer);
    moe_cache_check(c);
    unlock(c);
}

void moe_cache_fetch(moe_cache *c, int layer, const int32_t *experts, int n, bool ahead) {
    lock(c);
    if (!c->epoch) c->epoch = 1;
    for (int i = 0; i < n; i++) {
        if (experts[i] < 0 || experts[i] >= c->m->hp.n_expert) continue;
        const size_t at = idx(c, layer, experts[i]);
        c->named[at] = c->epoch;
        if (!c->io_running) continue;
        const int have = c->where[at];
        if (have >= 0 && i == 0 && c->slots[have].state == SLOT_QUEUED && !c->slots[have].promoting)
            c->slots[have].int2 = false; /* a copy queued for another token, chosen first here: whole */
        if (have >= 0) {
            /* predicted earlier, routed now: a demand read, to the front */
            if (!ahead && c->slots[have].state == SLOT_QUEUED && c->slots[have].ahead && enqueue(c, have, true))
                c->slots[have].ahead = false; /* once: it is a demand read now, not a read ahead */
            continue;
        }
        const int s = c->q_len < c->q_cap ? victim_among(c, true) : -1;
        if (s < 0) continue; /* every slot is wanted, or the queue is full: the lookup will read it */
        claim(c, s, layer, experts[i], ahead, SLOT_QUEUED);
        c->slots[s].int2 = c->st.int2 && !ahead && i > 0; /* routed, not first: its copy (if no token chose it first,
                                                             the lookup serves it; else reads it whole) */
        enqueue(c, s, !ahead);
    }
    moe_cache_check(c);
    unlock(c);
}

void moe_cache_set_budget(moe_cache *c, uint64_t bytes) {
    lock(c);
    uint64_t n = bytes / c->st.slot_bytes;
    if (n < (uint64_t)c->m->hp.n_expert_used) n = (uint64_t)c->m->hp.n_expert_used;
    c->limit = n < (uint64_t)c->n_slots ? (int)n : c->n_slots;
    for (int s = 0; s < c->n_slots && c->filled > c->limit; s++) /* reads not begun first */
        if (c->slots[s].state == SLOT_QUEUED) unclaim(c, s);
    while (c->filled > c->limit) {
        const int s = victim_among(c, false);
        if (s < 0) break; /* the rest are pinned or being read: the next call goes on */
        c->st.evictions++;
        unclaim(c, s);
    }
    for (int s = 0; s < c->n_slots && c->n_mem > c->limit; s++) /* give the memory back */
        if (c->slots[s].state == SLOT_EMPTY && c->slots[s].mem) {
            free(c->slots[s].mem);
            c->slots[s].mem = NULL;
            c->slots[s].counted = false;
            c->n_mem--;
        }
    moe_cache_check(c);
    unlock(c);
}

void moe_cache_stats_get(moe_cache *c, moe_cache_stats *out) {
    lock(c);
    *out = c->st;
    out->slots_used = c->n_mem;
    out->slots = c->limit;
    out->prefetching = c->io_running;
    out->direct = moe_reader_direct(c->reader);
    unlock(c);
}
