/*
 * expert_cache — see expert_cache.h.
 */
#define _GNU_SOURCE
#include "expert_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/packed.h"
#include "policy.h"

typedef struct {
    uint8_t *mem;      /* slot_bytes, allocated on first use */
    int layer, expert; /* -1: empty */
    model_mat mats[3];
    moe_slot_use use;
} slot;

struct moe_cache {
    const model *m;
    const moe_policy *policy;
    int fd;
    slot *slots;
    int n_slots, n_used, pinned;
    int32_t *where;    /* [n_layer][n_expert] slot index or -1 */
    int *per_layer;    /* [n_layer] slots held */
    uint8_t *tmp;      /* packing scratch */
    uint64_t now;      /* lookups so far */
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

err_code moe_cache_new(const model *m, const char *path, const moe_cache_config *c, moe_cache **out, err_t *err) {
    *out = NULL;
    const moe_policy *policy = moe_policy_get(c->policy);
    if (!policy) return err_set(err, ERR_INVALID_ARG, "no expert cache policy %d", c->policy);
    moe_cache *x = calloc(1, sizeof *x);
    if (!x) return err_set(err, ERR_NOMEM, "out of memory");
    x->m = m;
    x->policy = policy;
    x->pinned = -1;
    x->n_slots = slots_for(m, c);
    x->fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t max_row = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const model_layer *L = &m->layers[l];
        const size_t r[3] = {L->w_gate.row_bytes, L->w_up.row_bytes, L->w_down.row_bytes};
        for (int i = 0; i < 3; i++) max_row = r[i] > max_row ? r[i] : max_row;
    }
    x->slots = calloc((size_t)x->n_slots, sizeof *x->slots);
    x->where = malloc(sizeof(int32_t) * (size_t)m->hp.n_layer * (size_t)m->hp.n_expert);
    x->per_layer = calloc((size_t)m->hp.n_layer, sizeof(int));
    x->tmp = malloc((size_t)PACK_ROWS * max_row);
    err_code rc = ERR_OK;
    if (x->fd < 0) rc = err_set(err, ERR_IO, "cannot open %s to read experts: %s", path, strerror(errno));
    else if (!x->slots || !x->where || !x->per_layer || !x->tmp) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (rc) {
        moe_cache_free(x);
        return rc;
    }
    for (size_t i = 0; i < (size_t)m->hp.n_layer * (size_t)m->hp.n_expert; i++) x->where[i] = -1;
    for (int s = 0; s < x->n_slots; s++) x->slots[s].layer = x->slots[s].expert = -1;
    x->st.slots = x->n_slots;
    x->st.slot_bytes = moe_expert_bytes_max(m);
    x->st.expert_bytes = moe_expert_bytes_all(m);
    *out = x;
    return ERR_OK;
}

void moe_cache_free(moe_cache *c) {
    if (!c) return;
    for (int s = 0; c->slots && s < c->n_slots; s++) free(c->slots[s].mem);
    if (c->fd >= 0) close(c->fd);
    free(c->slots), free(c->where), free(c->per_layer), free(c->tmp);
    free(c);
}

/* The slot to fill: an empty one, else the lowest-ranked unpinned one (a
 * layer at or under its floor keeps its slots while another can give),
 * else (a pool of one slot) the pinned one: the forward pass has computed
 * with the expert it holds before it asks for the next. */
static int victim(moe_cache *c) {
    if (c->n_used < c->n_slots) return c->n_used;
    const int floor = c->policy->layer_floor ? c->n_slots / (2 * c->m->hp.n_layer) : 0;
    int best = -1, best_any = -1;
    double rank = 0.0, rank_any = 0.0;
    for (int s = 0; s < c->n_slots; s++) {
        if (c->slots[s].layer < 0) return s; /* emptied by a failed read */
        if (s == c->pinned) continue;
        const double r = c->policy->rank(&c->slots[s].use, c->now);
        if (best_any < 0 || r < rank_any) best_any = s, rank_any = r;
        if (c->per_layer[c->slots[s].layer] > floor && (best < 0 || r < rank)) best = s, rank = r;
    }
    if (best < 0) best = best_any;
    return best >= 0 ? best : c->pinned; /* one slot: the expert before is done with */
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

/* Read expert (layer, expert) into slot s and pack it. */
static err_code fill(moe_cache *c, int s, int layer, int expert, err_t *err) {
    slot *sl = &c->slots[s];
    if (!sl->mem && !(sl->mem = aligned_alloc(64, (c->st.slot_bytes + 63) / 64 * 64)))
        return err_set(err, ERR_NOMEM, "out of memory for an expert slot");
    expert_extent x;
    model_expert_extent(c->m, layer, expert, &x);
    model_mat mats[3];
    model_expert_mats(c->m, layer, expert, mats);
    const uint64_t t0 = now_ns();
    size_t at = 0;
    err_code rc = ERR_OK;
    for (int i = 0; i < 3 && !rc; i++) {
        rc = read_all(c->fd, sl->mem + at, x.bytes[i], x.offset[i], err);
        mats[i].data = sl->mem + at;
        at += x.bytes[i];
    }
    c->st.stall_ns += now_ns() - t0;
    if (rc) return rc;
    c->st.bytes_read += at;
    model_expert_pack(c->m, layer, mats, c->tmp);
    memcpy(sl->mats, mats, sizeof mats);
    return ERR_OK;
}

static void forget(moe_cache *c, int s) {
    slot *sl = &c->slots[s];
    if (sl->layer < 0) return;
    c->where[(size_t)sl->layer * c->m->hp.n_expert + sl->expert] = -1;
    c->per_layer[sl->layer]--;
    c->st.evictions++;
    sl->layer = sl->expert = -1;
}

static void touch(moe_cache *c, slot *sl) {
    sl->use.heat = moe_heat_now(&sl->use, c->now) + 1.0;
    sl->use.uses++;
    sl->use.last_use = c->now;
}

err_code moe_cache_get(moe_cache *c, int layer, int expert, model_mat mats[3], bool *hit, err_t *err) {
    const int32_t *w = &c->where[(size_t)layer * c->m->hp.n_expert + expert];
    c->now++;
    if (*w >= 0) {
        slot *sl = &c->slots[*w];
        touch(c, sl);
        memcpy(mats, sl->mats, sizeof sl->mats);
        c->pinned = *w;
        c->st.hits++;
        *hit = true;
        return ERR_OK;
    }
    *hit = false;
    const int s = victim(c);
    forget(c, s);
    err_code rc = fill(c, s, layer, expert, err);
    if (rc) return rc; /* the slot stays empty */
    slot *sl = &c->slots[s];
    sl->layer = layer;
    sl->expert = expert;
    sl->use = (moe_slot_use){c->now, c->now, 0, 0.0};
    touch(c, sl);
    c->where[(size_t)layer * c->m->hp.n_expert + expert] = s;
    c->per_layer[layer]++;
    if (s == c->n_used) c->n_used++;
    c->pinned = s;
    c->st.misses++;
    memcpy(mats, sl->mats, sizeof sl->mats);
    return ERR_OK;
}

void moe_cache_stats_get(const moe_cache *c, moe_cache_stats *out) {
    *out = c->st;
    out->slots_used = c->n_used;
}
