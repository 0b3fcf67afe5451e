/*
 * fed — a federation's files: updates and the global adapter (train/fed.h).
 */
#include "train/fed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/checksum.h"
#include "core/quant.h"
#include "platform/file.h"
#include "platform/random.h"

uint64_t fed_base_hash(const model *m) {
    uint64_t h = m->gguf->n_tensors;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const gguf_tensor *t = &m->gguf->tensors[i];
        h = checksum_bytes(t->name, strlen(t->name), h);
        h = checksum_bytes(&t->type, sizeof t->type, h);
        h = checksum_bytes(t->ne, sizeof t->ne, h);
        h = checksum_bytes(t->data, t->n_bytes, h);
    }
    return h;
}

static void hash_a(void *user, const gguf_tensor *base, int layer, const lora_tensor *t) {
    (void)base, (void)layer;
    uint64_t *h = user;
    *h = checksum_bytes(t->a, sizeof(float) * (size_t)t->n_mat * (size_t)t->rank * (size_t)t->n_in, *h);
}

uint64_t fed_a_hash(const model *m, const lora_adapter *a) {
    uint64_t h = 1;
    lora_each_pair(m, a, hash_a, &h);
    return h;
}

bool fed_ranks_are(const lora_adapter *a, int rank) {
    int lo = 0, hi = 0;
    lora_ranks(a, &lo, &hi);
    return lo == rank && hi == rank;
}

/* ---------------------------------------------------------------- keys */

err_code fed_put_meta(gguf_writer *w, const fed_meta *meta) {
    const lora_init_opts *l = &meta->layout;
    return gguf_writer_set_u32(w, "fl.round", meta->round) || gguf_writer_set_u64(w, "fl.base_hash", meta->base_hash) ||
                   gguf_writer_set_u64(w, "fl.a_hash", meta->a_hash) ||
                   gguf_writer_set_u32(w, "fl.rank", (uint32_t)l->rank) || gguf_writer_set_f32(w, "fl.alpha", l->alpha) ||
                   gguf_writer_set_u32(w, "fl.targets", l->kinds) || gguf_writer_set_u64(w, "fl.seed", l->seed) ||
                   gguf_writer_set_u64(w, "fl.tokens", meta->tokens) ||
                   gguf_writer_set_u64(w, "fl.start_hash", meta->start_hash)
               ? ERR_NOMEM
               : ERR_OK;
}

static err_code missing(err_t *err, const char *key) {
    return err_set(err, ERR_MISSING_KEY, "%s is missing (not a federation's file)", key);
}

err_code fed_meta_read(const gguf_ctx *g, fed_meta *meta, err_t *err) {
    uint32_t rank = 0, kinds = 0;
    *meta = (fed_meta){0};
    lora_init_opts *l = &meta->layout;
    if (!gguf_get_u32(g, "fl.round", &meta->round)) return missing(err, "fl.round");
    if (!gguf_get_u64(g, "fl.base_hash", &meta->base_hash)) return missing(err, "fl.base_hash");
    if (!gguf_get_u64(g, "fl.a_hash", &meta->a_hash)) return missing(err, "fl.a_hash");
    if (!gguf_get_u32(g, "fl.rank", &rank)) return missing(err, "fl.rank");
    if (!gguf_get_f32(g, "fl.alpha", &l->alpha)) return missing(err, "fl.alpha");
    if (!gguf_get_u32(g, "fl.targets", &kinds)) return missing(err, "fl.targets");
    if (!gguf_get_u64(g, "fl.seed", &l->seed)) return missing(err, "fl.seed");
    if (!gguf_get_u64(g, "fl.tokens", &meta->tokens)) return missing(err, "fl.tokens");
    if (!gguf_get_u64(g, "fl.start_hash", &meta->start_hash)) return missing(err, "fl.start_hash");
    l->rank = (int)rank, l->kinds = kinds;
    if (rank < 1 || rank > 65536 || !isfinite(l->alpha) || l->alpha < 0.0f || !kinds || kinds >> LORA_KINDS)
        return err_set(err, ERR_BAD_VALUE, "a layout of rank %u, alpha %g, targets 0x%x", rank, (double)l->alpha, kinds);
    if (meta->tokens > FED_MAX_TOKENS)
        return err_set(err, ERR_BAD_VALUE, "fl.tokens %llu: more than any federation trains on (%llu)",
                       (unsigned long long)meta->tokens, (unsigned long long)FED_MAX_TOKENS);
    return ERR_OK;
}

static err_code put_global(void *user, gguf_writer *w) { return fed_put_meta(w, user); }

err_code fed_global_write(const model *m, const lora_adapter *a, const fed_meta *meta, const char *path, err_t *err) {
    return lora_write(m, a, QT_F32, put_global, (void *)meta, path, err);
}

/* ---------------------------------------------------------------- groups */

typedef struct {
    fed_group *g; /* NULL: counting */
    int n;
} groups_ctx;

static void add_groups(void *user, const gguf_tensor *base, int layer, const lora_tensor *t) {
    groups_ctx *c = user;
    for (int64_t e = 0; e < t->n_mat; e++, c->n++) {
        if (!c->g) continue;
        fed_group *g = &c->g[c->n];
        *g = (fed_group){.t = t, .rows = base->ne[1], .layer = layer, .e = t->n_mat > 1 ? (int)e : -1};
        if (g->e < 0) snprintf(g->name, sizeof g->name, "%s.lora_b", base->name);
        else snprintf(g->name, sizeof g->name, "%s.lora_b.%d", base->name, g->e);
    }
}

err_code fed_groups(const model *m, const lora_adapter *a, fed_group **out, int *n, err_t *err) {
    groups_ctx c = {0};
    lora_each_pair(m, a, add_groups, &c);
    *n = c.n;
    if (!(*out = c.g = calloc(c.n ? (size_t)c.n : 1, sizeof(fed_group)))) return err_set(err, ERR_NOMEM, "out of memory");
    c.n = 0;
    lora_each_pair(m, a, add_groups, &c);
    return ERR_OK;
}

uint64_t fed_b_hash(const model *m, const lora_adapter *a) {
    fed_group *g = NULL;
    int n = 0;
    if (fed_groups(m, a, &g, &n, NULL)) return 0;
    int64_t most = 1;
    for (int i = 0; i < n; i++) most = g[i].rows * g[i].t->rank > most ? g[i].rows * g[i].t->rank : most;
    float *v = malloc(sizeof(float) * (size_t)most);
    uint64_t h = v ? 2 : 0;
    for (int i = 0; v && i < n; i++) {
        fed_group_b(a, &g[i], NULL, v);
        h = checksum_bytes(v, sizeof(float) * (size_t)(g[i].rows * g[i].t->rank), h);
    }
    free(v), free(g);
    return h;
}

/* The index in lora_values of group g's B^T row k, column o. */
static size_t b_at(const lora_adapter *a, const fed_group *g, int64_t k, int64_t o) {
    const lora_tensor *t = g->t;
    const size_t e = g->e < 0 ? 0 : (size_t)g->e;
    return lora_index(a, t->bt + (e * (size_t)t->rank + (size_t)k) * t->bt_stride + (size_t)o);
}

void fed_group_b(const lora_adapter *a, const fed_group *g, const float *start, float *v) {
    size_t n = 0;
    const float *x = lora_values((lora_adapter *)a, &n); /* read only */
    const int64_t r = g->t->rank;
    for (int64_t o = 0; o < g->rows; o++)
        for (int64_t k = 0; k < r; k++) {
            const size_t i = b_at(a, g, k, o);
            v[o * r + k] = start ? x[i] - start[i] : x[i];
        }
}

void fed_group_add(lora_adapter *a, const fed_group *g, const double *d) {
    size_t n = 0;
    float *x = lora_values(a, &n);
    const int64_t r = g->t->rank;
    for (int64_t o = 0; o < g->rows; o++)
        for (int64_t k = 0; k < r; k++) {
            const size_t i = b_at(a, g, k, o);
            x[i] = (float)((double)x[i] + d[o * r + k]);
        }
}

/* ---------------------------------------------------------------- a device's update */

typedef struct {
    const lora_adapter *a;
    const float *start;
    const fed_group *g;
    int *sent;    /* [tensor] its group */
    float scale;  /* the clip's (1: none) */
    double sigma; /* the noise's standard deviation (0: none) */
} update_ctx;

/* n values of N(0, sigma^2) added to v: Box-Muller over the system's random bits. */
static err_code add_noise(float *v, size_t n, double sigma, err_t *err) {
    uint64_t r[64];
    for (size_t i = 0; i < n; i += 64) {
        err_code rc = plat_random(r, sizeof r, err);
        if (rc) return rc;
        for (size_t k = 0; k < 64 && i + k < n; k += 2) {
            const double u1 = ((double)(r[k] >> 11) + 1.0) * 0x1p-53, u2 = (double)(r[k + 1] >> 11) * 0x1p-53;
            const double rad = sigma * sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
            v[i + k] += (float)(rad * cos(th));
            if (i + k + 1 < n) v[i + k + 1] += (float)(rad * sin(th));
        }
    }
    return ERR_OK;
}

static err_code fill_update(void *user, uint64_t i, void *buf, uint64_t n_bytes, err_t *err) {
    const update_ctx *c = user;
    const size_t n = (size_t)(n_bytes / sizeof(float));
    float *v = buf;
    fed_group_b(c->a, &c->g[c->sent[i]], c->start, v);
    for (size_t k = 0; c->scale != 1.0f && k < n; k++) v[k] *= c->scale;
    return c->sigma > 0 ? add_noise(v, n, c->sigma, err) : ERR_OK;
}

/* The L2 norm of the change of every group sent (sent[0..n)). */
static double update_norm(const update_ctx *c, int n, float *scratch) {
    double s = 0;
    for (int i = 0; i < n; i++) {
        const fed_group *g = &c->g[c->sent[i]];
        fed_group_b(c->a, g, c->start, scratch);
        for (int64_t k = 0; k < g->rows * g->t->rank; k++) s += (double)scratch[k] * scratch[k];
    }
    return sqrt(s);
}

/* Phi(x), the standard normal's distribution function. */
static double phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

double fed_dp_epsilon(double noise, int rounds, double delta) {
    if (!(noise > 0) || rounds < 1 || !(delta > 0 && delta < 1)) return INFINITY;
    const double mu = 2.0 * sqrt((double)rounds) / noise;
    double lo = 0, hi = 1e4; /* delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) falls with eps */
    for (int i = 0; i < 200; i++) {
        const double e = 0.5 * (lo + hi);
        const double d = phi(-e / mu + mu / 2) - exp(e + log(phi(-e / mu - mu / 2)));
        if (d > delta) lo = e;
        else hi = e;
    }
    return hi < 1e4 ? hi : INFINITY; /* beyond the search: no meaningful guarantee */
}

/* The tokens behind group g: an expert's, those routed to it; else every position trained on. */
static uint64_t group_tokens(const model *m, const fed_group *g, const int64_t *expert_tokens, uint64_t tokens) {
    if (g->e < 0 || !expert_tokens) return tokens;
    const int64_t n = expert_tokens[(size_t)g->layer * (size_t)m->hp.n_expert + (size_t)g->e];
    return n > 0 ? (uint64_t)n : 0;
}

err_code fed_update_keys(gguf_writer *w, const fed_meta *meta, const char *const *devices, uint64_t n_devices,
                         const uint64_t *weights, uint64_t n) {
    const gguf_value wv = {.type = GGUF_ARRAY, .v.arr = {.elem_type = GGUF_UINT64, .n = n, .raw = weights}};
    if (gguf_writer_set_str(w, "general.type", "fl_update") || fed_put_meta(w, meta) ||
        gguf_writer_set_arr_str(w, "fl.devices", devices, n_devices) || gguf_writer_set_value(w, "fl.weights", &wv))
        return ERR_NOMEM;
    return ERR_OK;
}

static err_code check_device(const char *d, err_t *err) {
    const size_t n = d ? strlen(d) : 0;
    bool ok = n >= 1 && n <= FED_MAX_DEVICE;
    for (size_t i = 0; ok && i < n; i++) ok = d[i] > 0x20 && d[i] < 0x7f;
    return ok ? ERR_OK : err_set(err, ERR_INVALID_ARG, "a device id is 1 to %d printable characters without spaces",
                                 FED_MAX_DEVICE);
}

/* An MoE's tokens per expert, every one (0: absent from the update): "fl.expert_tokens", u64 [n_layer][n_expert]. */
static err_code counts_key(gguf_writer *w, const model *m, const int64_t *expert_tokens) {
    const size_t n = (size_t)m->hp.n_layer * (size_t)m->hp.n_expert;
    if (!expert_tokens || !n) return ERR_OK;
    const gguf_value v = {.type = GGUF_ARRAY, .v.arr = {.elem_type = GGUF_INT64, .n = n, .raw = expert_tokens}};
    return gguf_writer_set_value(w, "fl.expert_tokens", &v);
}

/* The keys of an update's privacy. */
static err_code dp_keys(gguf_writer *w, const fed_dp *dp) {
    if (!dp || !(dp->clip > 0)) return ERR_OK;
    return gguf_writer_set_f32(w, "fl.dp_clip", dp->clip) || gguf_writer_set_f32(w, "fl.dp_noise", dp->noise) ? ERR_NOMEM
                                                                                                          : ERR_OK;
}

static err_code check_dp(const fed_dp *dp, err_t *err) {
    if (!dp) return ERR_OK;
    if (!isfinite(dp->clip) || !isfinite(dp->noise) || dp->clip < 0 || dp->noise < 0 || (dp->noise > 0 && !(dp->clip > 0)))
        return err_set(err, ERR_INVALID_ARG, "privacy: a clip norm > 0, and a noise multiplier >= 0 with it (%g, %g)",
                       (double)dp->clip, (double)dp->noise);
    return ERR_OK;
}

/* Clipping: the update's norm, and the scale that brings it to dp's clip. */
static err_code clip(update_ctx *c, int n, const fed_dp *dp, int64_t most, fed_sizes *sizes, err_t *err) {
    float *scratch = malloc(sizeof(float) * (size_t)(most > 0 ? most : 1));
    if (!scratch) return err_set(err, ERR_NOMEM, "out of memory");
    sizes->norm = update_norm(c, n, scratch);
    free(scratch);
    if (dp && dp->clip > 0 && sizes->norm > dp->clip) c->scale = (float)(dp->clip / sizes->norm);
    if (dp) c->sigma = (double)dp->noise * (double)dp->clip;
    return ERR_OK;
}

err_code fed_update_write(const model *m, const lora_adapter *a, const float *start, const int64_t *expert_tokens,
                          const fed_meta *meta, const fed_dp *dp, const char *device, const char *path,
                          fed_sizes *sizes, err_t *err) {
    err_code rc = check_device(device, err);
    if (!rc) rc = check_dp(dp, err);
    update_ctx c = {.a = a, .start = start, .scale = 1.0f};
    const bool dense = dp && dp->noise > 0; /* noised: every group, at one weight */
    int64_t most = 0;
    int n = 0;
    if (rc || (rc = fed_groups(m, a, (fed_group **)&c.g, &n, err))) return rc;
    c.sent = malloc(sizeof(int) * ((size_t)n + 1));
    uint64_t *weights = malloc(sizeof(uint64_t) * ((size_t)n + 1));
    gguf_writer *w = gguf_writer_new();
    *sizes = (fed_sizes){.groups = n};
    if (!c.sent || !weights || !w) rc = err_set(err, ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < n; i++) {
        const fed_group *g = &c.g[i];
        const uint64_t bytes = sizeof(float) * (uint64_t)g->t->rank * (uint64_t)g->rows;
        sizes->dense_bytes += bytes;
        const uint64_t tok = dense ? meta->tokens : group_tokens(m, g, expert_tokens, meta->tokens);
        if (!tok) continue;
        most = g->rows * g->t->rank > most ? g->rows * g->t->rank : most;
        const int64_t ne[2] = {g->t->rank, g->rows};
        rc = gguf_writer_add_tensor(w, g->name, QT_F32, 2, ne, NULL, err);
        weights[sizes->sent] = tok, c.sent[sizes->sent++] = i, sizes->bytes += bytes;
    }
    if (!rc && !sizes->sent) rc = err_set(err, ERR_INVALID_ARG, "no group of the adapter was trained: nothing to send");
    if (!rc && (fed_update_keys(w, meta, &device, 1, weights, (uint64_t)sizes->sent) || dp_keys(w, dp) ||
                (!dense && counts_key(w, m, expert_tokens))))
        rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = clip(&c, sizes->sent, dp, most, sizes, err);
    if (!rc) rc = gguf_writer_write(w, path, fill_update, &c, err);
    gguf_writer_free(w);
    free(weights), free(c.sent), free((void *)c.g);
    return rc;
}

/* ---------------------------------------------------------------- reading one */

float fed_value(const gguf_tensor *t, uint64_t k) {
    float x;
    memcpy(&x, (const uint8_t *)t->data + k * sizeof x, sizeof x); /* a file's bytes: any alignment */
    return x;
}

void fed_release(const gguf_ctx *g, const void *p, uint64_t n) {
    if (!g->mapped || !n) return; /* a caller's buffer is its own */
    /* the neighbours a fault maps beside its page (Linux maps up to 64 KiB around it) go too */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), around = page > 65536 ? page : 65536;
    const uintptr_t base = (uintptr_t)g->base, end = base + g->size;
    uintptr_t lo = (uintptr_t)p / around * around, hi = ((uintptr_t)p + n + around - 1) / around * around;
    lo = lo < base ? base : lo, hi = hi > end ? end : hi;
    plat_advise_mem((void *)lo, (size_t)(hi - lo), PLAT_ADVICE_DONTNEED); /* the mapping's base is page-aligned */
}

uint64_t fed_update_weight(const fed_update *u, uint64_t tensor) {
    return (uint64_t)gguf_arr_i64(u->weights, tensor);
}

static err_code read_devices(fed_update *u, err_t *err) {
    const gguf_value *d = u->devices = gguf_get_arr(u->g, "fl.devices");
    if (!d || d->v.arr.elem_type != GGUF_STRING || d->v.arr.n < 1 || d->v.arr.n > FED_MAX_DEVICES)
        return err_set(err, ERR_BAD_VALUE, "fl.devices: 1 to %d device ids", FED_MAX_DEVICES);
    for (uint64_t i = 0; i < d->v.arr.n; i++) {
        const gguf_str s = d->v.arr.strs[i];
        bool ok = s.len >= 1 && s.len <= FED_MAX_DEVICE;
        for (uint64_t k = 0; ok && k < s.len; k++) ok = s.ptr[k] > 0x20 && s.ptr[k] < 0x7f;
        if (!ok) return err_set(err, ERR_BAD_VALUE, "fl.devices: id %llu is not 1 to %d printable characters",
                                (unsigned long long)i, FED_MAX_DEVICE);
    }
    return ERR_OK;
}

/* A group's tensor name: "<base tensor>.lora_b" or "<base tensor>.lora_b.<digits>". */
static bool group_name(const char *s) {
    const char *p = strstr(s, ".lora_b");
    if (!p || p == s) return false;
    if (!p[7]) return true;
    if (p[7] != '.' || !p[8]) return false;
    for (p += 8; *p; p++)
        if (*p < '0' || *p > '9') return false;
    return true;
}

static err_code check_tensor(const fed_update *u, uint64_t i, err_t *err) {
    const gguf_tensor *t = &u->g->tensors[i];
    const uint64_t w = fed_update_weight(u, i);
    if (!group_name(t->name)) return err_set(err, ERR_BAD_VALUE, "tensor '%s' is no group's change", t->name);
    if (t->type != QT_F32 || t->n_dims != 2 || t->ne[0] != u->meta.layout.rank)
        return err_set(err, ERR_BAD_SHAPE, "tensor '%s': F32 [%d, rows] expected", t->name, u->meta.layout.rank);
    if (!w) return err_set(err, ERR_BAD_VALUE, "tensor '%s': a token count of 0 (an unreached group is absent)", t->name);
    if (w > u->meta.tokens)
        return err_set(err, ERR_BAD_VALUE, "tensor '%s': %llu tokens, more than the %llu the update trained on", t->name,
                       (unsigned long long)w, (unsigned long long)u->meta.tokens);
    for (uint64_t k = 0; k < t->n_elements; k++)
        if (!(fabsf(fed_value(t, k)) <= FED_MAX_VALUE))
            return err_set(err, ERR_BAD_VALUE, "tensor '%s': value %llu is not finite or beyond +-%g", t->name,
                           (unsigned long long)k, FED_MAX_VALUE);
    return ERR_OK;
}

static err_code read_update(fed_update *u, err_t *err) {
    gguf_str s = {0};
    if (!gguf_get_str(u->g, "general.type", &s) || !gguf_str_eq(s, "fl_update"))
        return err_set(err, ERR_BAD_VALUE, "not a federated update: general.type is not 'fl_update'");
    err_code rc = fed_meta_read(u->g, &u->meta, err);
    if (rc || (rc = read_devices(u, err))) return rc;
    if (!u->meta.round || !u->meta.tokens)
        return err_set(err, ERR_BAD_VALUE, "round %u, %llu tokens: an update is of round 1 or later, from training",
                       u->meta.round, (unsigned long long)u->meta.tokens);
    const gguf_value *w = u->weights = gguf_get_arr(u->g, "fl.weights");
    if (!w || w->v.arr.elem_type != GGUF_UINT64 || w->v.arr.n != u->g->n_tensors)
        return err_set(err, ERR_BAD_VALUE, "fl.weights: one u64 per tensor (%llu)", (unsigned long long)u->g->n_tensors);
    if (!u->g->n_tensors) return err_set(err, ERR_BAD_VALUE, "an update of no group");
    for (uint64_t i = 0; i < u->g->n_tensors && !rc; i++) rc = check_tensor(u, i, err);
    fed_release(u->g, u->g->base + u->g->data_offset, u->g->size - u->g->data_offset); /* its values: read later */
    return rc;
}

err_code fed_update_read(gguf_ctx *g, fed_update *u, err_t *err) {
    *u = (fed_update){.g = g};
    const err_code rc = read_update(u, err);
    if (rc) fed_update_close(u);
    return rc;
}

void fed_update_close(fed_update *u) {
    gguf_close(u->g);
    *u = (fed_update){0};
}
