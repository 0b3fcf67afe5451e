/*
 * fedavg — a round's updates averaged (train/fedavg.h).
 */
#include "train/fedavg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "core/quant.h"
#include "model/lora.h"
#include "train/fed.h"

typedef struct {
    const fedavg_opts *o;
    fed_update *u;
    fed_meta meta;        /* the round's: every update's */
    lora_adapter *g;      /* the global: --from's, or the base's start */
    fed_group *groups;
    int n_groups;
    int32_t *at;          /* [update][group] the update's tensor of the group (-1: absent) */
    uint64_t *w;          /* [group] its summed weight */
    double *sum;          /* one group's sums */
    char **devices;       /* an aggregate's ids */
    uint64_t n_devices;
} avg;

static void avg_free(avg *a) {
    for (int i = 0; a->u && i < a->o->n_updates; i++) fed_update_close(&a->u[i]);
    for (uint64_t i = 0; a->devices && i < a->n_devices; i++) free(a->devices[i]);
    free(a->u), free(a->groups), free(a->at), free(a->w), free(a->sum), free(a->devices);
    lora_free(a->g);
}

static bool same_layout(const fed_meta *x, const fed_meta *y) {
    const lora_init_opts *a = &x->layout, *b = &y->layout;
    return x->a_hash == y->a_hash && a->rank == b->rank && a->alpha == b->alpha && a->kinds == b->kinds &&
           a->seed == b->seed;
}

/* Every update read and checked against itself, the base and the first. */
static err_code open_updates(avg *a, err_t *err) {
    const fedavg_opts *o = a->o;
    const uint64_t base = fed_base_hash(o->m);
    for (int i = 0; i < o->n_updates; i++) {
        gguf_ctx *g = NULL;
        err_code rc = gguf_open(o->updates[i], &g, err);
        if (!rc) rc = fed_update_read(g, &a->u[i], err);
        const fed_meta *m = &a->u[i].meta;
        if (!rc && m->base_hash != base) rc = err_set(err, ERR_BAD_VALUE, "it was trained on another base model");
        if (!rc && i && m->round != a->meta.round)
            rc = err_set(err, ERR_BAD_VALUE, "round %u, not %u as %s", m->round, a->meta.round, o->updates[0]);
        if (!rc && i && !same_layout(m, &a->meta))
            rc = err_set(err, ERR_BAD_VALUE, "another adapter layout (rank, alpha, targets, seed or A) than %s",
                         o->updates[0]);
        if (!rc && i && m->start_hash != a->meta.start_hash)
            rc = err_set(err, ERR_BAD_VALUE, "it started from another global than %s did", o->updates[0]);
        if (!rc && (i ? a->meta.tokens : 0) + m->tokens > FED_MAX_TOKENS)
            rc = err_set(err, ERR_BAD_VALUE, "the updates so far hold more tokens than a federation trains on");
        if (rc) return err_prefix(err, "update %s", o->updates[i]), rc;
        if (!i) a->meta = *m, a->meta.tokens = 0;
        a->meta.tokens += m->tokens;
        a->n_devices += a->u[i].devices->v.arr.n;
    }
    if (a->n_devices > FED_MAX_DEVICES)
        return err_set(err, ERR_BAD_VALUE, "%llu devices: at most %d behind one aggregate",
                       (unsigned long long)a->n_devices, FED_MAX_DEVICES);
    return ERR_OK;
}

/* Every device id once; kept for an aggregate. */
static err_code check_devices(avg *a, err_t *err) {
    strmap seen = {0};
    err_code rc = ERR_OK;
    if (!(a->devices = calloc(a->n_devices, sizeof(char *)))) return err_set(err, ERR_NOMEM, "out of memory");
    uint64_t k = 0;
    for (int i = 0; !rc && i < a->o->n_updates; i++)
        for (uint64_t j = 0; !rc && j < a->u[i].devices->v.arr.n; j++, k++) {
            const gguf_str s = a->u[i].devices->v.arr.strs[j];
            const int32_t was = strmap_get(&seen, s.ptr, s.len);
            if (was >= 0)
                rc = err_set(err, ERR_BAD_VALUE, "device '%.*s' sent both %s and %s", (int)s.len, s.ptr,
                             a->o->updates[was], a->o->updates[i]);
            else if (!strmap_put(&seen, s.ptr, s.len, i) || !(a->devices[k] = strndup(s.ptr, s.len)))
                rc = err_set(err, ERR_NOMEM, "out of memory");
        }
    strmap_free(&seen);
    return rc;
}

/* The layout is the updates' word until their A is checked: a rank octo_finetune can train (4096 at most), and
 * an adapter of at most 4 times the base's values (rank = the matrices' width is about 2) and 2^24 more (a
 * small model's large rank), before anything is made of it. */
static err_code check_size(const model *m, const lora_init_opts *l, err_t *err) {
    const uint64_t n = l->rank <= 4096 ? lora_count(m, l) : 0;
    if (l->rank > 4096 || n > 4 * m->n_params + (1u << 24))
        return err_set(err, ERR_BAD_VALUE, "a rank-%d adapter of these targets (%llu values against the base's %llu) "
                       "is no device's", l->rank, (unsigned long long)n, (unsigned long long)m->n_params);
    return ERR_OK;
}

/* The global the round starts from: --from's (round - 1, the same base and layout), or the base's start
 * (round 1; an aggregate, which needs only the layout). */
static err_code open_global(avg *a, err_t *err) {
    const fedavg_opts *o = a->o;
    err_code rc = ERR_OK;
    if (!o->from) { /* round 1, or an aggregate: the layout's start (B = 0), its A the round's */
        if (a->meta.round != 1 && !o->partial)
            return err_set(err, ERR_BAD_VALUE, "the updates are of round %u: give the global of round %u they started "
                           "from (--from)", a->meta.round, a->meta.round - 1);
        if (!(rc = check_size(o->m, &a->meta.layout, err))) rc = lora_create(o->m, &a->meta.layout, &a->g, err);
    } else {
        gguf_ctx *g = NULL;
        fed_meta gm;
        if (!(rc = gguf_open(o->from, &g, err)) && !(rc = fed_meta_read(g, &gm, err))) {
            if (gm.round + 1 != a->meta.round)
                rc = err_set(err, ERR_BAD_VALUE, "it is the global of round %u; the updates are of round %u", gm.round,
                             a->meta.round);
            else if (gm.base_hash != a->meta.base_hash) rc = err_set(err, ERR_BAD_VALUE, "another base model's");
            else if (!same_layout(&gm, &a->meta)) rc = err_set(err, ERR_BAD_VALUE, "another adapter layout");
        }
        if (!rc) rc = lora_from_gguf(o->m, g, &a->g, err);
        else gguf_close(g);
        if (!rc && !fed_ranks_are(a->g, a->meta.layout.rank))
            rc = err_set(err, ERR_CORRUPT, "its matrices are not all of rank %d, as fl.rank says", a->meta.layout.rank);
        if (rc) return err_prefix(err, "global %s", o->from), rc;
    }
    if (!rc && fed_a_hash(o->m, a->g) != a->meta.a_hash)
        rc = err_set(err, ERR_BAD_VALUE, "the updates' shared A (fl.a_hash) is not the global's: they did not start "
                     "from %s", o->from ? o->from : "the base (round 1)");
    if (!rc && (o->from || a->meta.round == 1) && fed_b_hash(o->m, a->g) != a->meta.start_hash)
        rc = err_set(err, ERR_BAD_VALUE, "the updates started from another global than %s (a stale round's?)",
                     o->from ? o->from : "the base (round 1)");
    return rc;
}

/* Each update's tensors placed in the global's groups, their shapes checked, the weights summed. */
static err_code index_updates(avg *a, err_t *err) {
    strmap names = {0};
    err_code rc = fed_groups(a->o->m, a->g, &a->groups, &a->n_groups, err);
    const size_t n = (size_t)a->o->n_updates * (size_t)a->n_groups;
    int64_t most = 1;
    for (int i = 0; !rc && i < a->n_groups; i++) {
        if (!strmap_put(&names, a->groups[i].name, strlen(a->groups[i].name), i)) rc = ERR_NOMEM;
        most = a->groups[i].rows > most ? a->groups[i].rows : most;
    }
    if (!rc && (!(a->at = malloc(sizeof(int32_t) * (n ? n : 1))) || !(a->w = calloc((size_t)a->n_groups + 1, 8)) ||
                !(a->sum = malloc(sizeof(double) * (size_t)most * (size_t)a->meta.layout.rank))))
        rc = ERR_NOMEM;
    if (rc == ERR_NOMEM) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) memset(a->at, 0xff, sizeof(int32_t) * n);
    for (int i = 0; !rc && i < a->o->n_updates; i++) {
        const gguf_ctx *g = a->u[i].g;
        int32_t *at = a->at + (size_t)i * (size_t)a->n_groups;
        for (uint64_t t = 0; !rc && t < g->n_tensors; t++) {
            const gguf_tensor *x = &g->tensors[t];
            const int32_t k = strmap_get(&names, x->name, strlen(x->name));
            if (k < 0) rc = err_set(err, ERR_BAD_VALUE, "tensor '%s' is no group of the adapter", x->name);
            else if (at[k] >= 0) rc = err_set(err, ERR_BAD_VALUE, "tensor '%s' twice", x->name);
            else if (x->ne[1] != a->groups[k].rows)
                rc = err_set(err, ERR_BAD_SHAPE, "tensor '%s' has %lld rows, the group %lld", x->name,
                             (long long)x->ne[1], (long long)a->groups[k].rows);
            else at[k] = (int32_t)t, a->w[k] += fed_update_weight(&a->u[i], t);
        }
        if (rc) err_prefix(err, "update %s", a->o->updates[i]);
    }
    strmap_free(&names);
    return rc;
}

/* Group k's weighted mean into a->sum; false when a value is no longer what was checked (the file changed). */
static bool group_mean(const avg *a, int k) {
    bool ok = true;
    const size_t n = (size_t)a->groups[k].rows * (size_t)a->meta.layout.rank;
    memset(a->sum, 0, sizeof(double) * n);
    for (int i = 0; i < a->o->n_updates; i++) {
        const int32_t t = a->at[(size_t)i * (size_t)a->n_groups + (size_t)k];
        if (t < 0) continue;
        const gguf_tensor *x = &a->u[i].g->tensors[t];
        const double w = (double)fed_update_weight(&a->u[i], (uint64_t)t);
        for (size_t j = 0; j < n; j++) {
            const float v = fed_value(x, j);
            ok &= fabsf(v) <= FED_MAX_VALUE;
            a->sum[j] += w * (double)v;
        }
        fed_release(a->u[i].g, x->data, x->n_bytes);
    }
    const double inv = 1.0 / (double)a->w[k];
    for (size_t j = 0; j < n; j++) a->sum[j] *= inv;
    return ok;
}

static err_code changed(const avg *a, int k, err_t *err) {
    return err_set(err, ERR_CORRUPT, "the values of '%s' changed in a file since they were checked", a->groups[k].name);
}

static err_code write_global(avg *a, err_t *err) {
    for (int k = 0; k < a->n_groups; k++) {
        if (a->w[k] && !group_mean(a, k)) return changed(a, k, err);
        if (a->w[k]) fed_group_add(a->g, &a->groups[k], a->sum);
    }
    if (!(a->meta.start_hash = fed_b_hash(a->o->m, a->g))) return err_set(err, ERR_NOMEM, "out of memory");
    return fed_global_write(a->o->m, a->g, &a->meta, a->o->output, err);
}

typedef struct {
    avg *a;
    int *sent; /* [tensor] its group */
} partial_ctx;

static err_code fill_mean(void *user, uint64_t i, void *buf, uint64_t n_bytes, err_t *err) {
    const partial_ctx *c = user;
    if (!group_mean(c->a, c->sent[i])) return changed(c->a, c->sent[i], err);
    float *v = buf;
    for (uint64_t j = 0; j < n_bytes / sizeof(float); j++) v[j] = (float)c->a->sum[j];
    return ERR_OK;
}

static err_code write_partial(avg *a, err_t *err) {
    partial_ctx c = {a, malloc(sizeof(int) * ((size_t)a->n_groups + 1))};
    uint64_t *w = malloc(sizeof(uint64_t) * ((size_t)a->n_groups + 1)), n = 0;
    gguf_writer *gw = gguf_writer_new();
    err_code rc = c.sent && w && gw ? ERR_OK : err_set(err, ERR_NOMEM, "out of memory");
    for (int k = 0; !rc && k < a->n_groups; k++) {
        if (!a->w[k]) continue;
        const int64_t ne[2] = {a->meta.layout.rank, a->groups[k].rows};
        rc = gguf_writer_add_tensor(gw, a->groups[k].name, QT_F32, 2, ne, NULL, err);
        c.sent[n] = k, w[n++] = a->w[k];
    }
    if (!rc && fed_update_keys(gw, &a->meta, (const char *const *)a->devices, a->n_devices, w, n))
        rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = gguf_writer_write(gw, a->o->output, fill_mean, &c, err);
    gguf_writer_free(gw);
    free(c.sent), free(w);
    return rc;
}

err_code fedavg_run(const fedavg_opts *o, fedavg_result *res, err_t *err) {
    *res = (fedavg_result){0};
    if (o->n_updates < 1 || !o->output) return err_set(err, ERR_INVALID_ARG, "fedavg needs updates and an output");
    avg a = {.o = o, .u = calloc((size_t)o->n_updates, sizeof(fed_update))};
    err_code rc = a.u ? open_updates(&a, err) : err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = check_devices(&a, err);
    if (!rc) rc = open_global(&a, err);
    if (!rc) rc = index_updates(&a, err);
    if (!rc) rc = o->partial ? write_partial(&a, err) : write_global(&a, err);
    if (!rc) {
        *res = (fedavg_result){.round = a.meta.round, .devices = (int)a.n_devices, .tokens = a.meta.tokens,
                               .groups = a.n_groups};
        for (int k = 0; k < a.n_groups; k++) res->groups_sent += a.w[k] > 0;
    }
    avg_free(&a);
    return rc;
}
