/*
 * finetune — the training loop (train/finetune.h).
 */
#include "train/finetune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checksum.h"
#include "core/clock.h"
#include "core/mix.h"
#include "model/experts_iface.h"
#include "train/backward.h"
#include "train/checkpoint.h"

finetune_opts finetune_defaults(void) {
    finetune_opts o = {.steps = 100, .batch = 4, .opt = adamw_defaults(), .seed = 1, .scale = 1.0f, .every = 10,
                       .resume = true};
    o.opt.lr = 1e-3f, o.opt.lr_min = 1e-4f;
    return o;
}

/* ---------------------------------------------------------------- the data order */

typedef struct {
    int *perm;      /* [n_seq] the current epoch's order */
    int64_t epoch;  /* whose (-1: none yet) */
    int n;
    uint64_t seed;
} order;

/* The sequence at position k of the endless order (an epoch's permutation, Fisher-Yates from the seed). */
static int seq_at(order *o, int64_t k) {
    const int64_t e = k / o->n;
    if (e != o->epoch) {
        for (int i = 0; i < o->n; i++) o->perm[i] = i;
        uint64_t s = mix64(o->seed ^ mix64((uint64_t)e));
        for (int i = o->n - 1; i > 0; i--) {
            s = mix64(s);
            const int j = (int)(s % (uint64_t)(i + 1)), t = o->perm[i];
            o->perm[i] = o->perm[j], o->perm[j] = t;
        }
        o->epoch = e;
    }
    return o->perm[k % o->n];
}

/* ---------------------------------------------------------------- identity */

/* The base's tensors: names, types, shapes and each one's first 4 KiB (two fine-tunes of one
 * architecture differ there): the same base, or not. */
uint64_t finetune_model_fingerprint(const model *m) {
    uint64_t h = (uint64_t)m->gguf->n_tensors;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const gguf_tensor *t = &m->gguf->tensors[i];
        h = checksum_bytes(t->name, strlen(t->name), h);
        h = checksum_bytes(t->ne, sizeof t->ne, h ^ t->type);
        h = checksum_bytes(t->data, t->n_bytes < 4096 ? t->n_bytes : 4096, h);
    }
    return h;
}

/* Whether the adapter changes matrices of kind k (--targets). */
static bool adapts(const model *m, const lora_adapter *a, lora_kind k) {
    for (int l = -1; a && l < m->hp.n_layer; l++)
        if (lora_find(a, l, k)) return true;
    return false;
}

/* Each kind in the identity by name: a resume with other --targets is refused naming the matrix. */
static void add_targets(ckpt_identity *id, const model *m, const lora_adapter *a) {
    static const char *const names[LORA_KINDS] = {
        [LORA_Q] = "--targets q",       [LORA_K] = "--targets k",       [LORA_V] = "--targets v",
        [LORA_O] = "--targets o",       [LORA_GATE] = "--targets gate", [LORA_UP] = "--targets up",
        [LORA_DOWN] = "--targets down", [LORA_ROUTER] = "--targets router"};
    for (int k = 0; k < LORA_KINDS; k++)
        if (names[k]) ckpt_id_add(id, names[k], adapts(m, a, (lora_kind)k));
}

static void add_u64(ckpt_identity *id, const char *hi, const char *lo, uint64_t v) {
    ckpt_id_add(id, hi, (double)(v >> 32));
    ckpt_id_add(id, lo, (double)(v & 0xffffffffu));
}

static ckpt_identity identity(const model *m, const lora_adapter *a, const train_data *d, const finetune_opts *o,
                              size_t n_values) {
    ckpt_identity id = {0};
    int rmin = 0, rmax = 0;
    if (a) lora_ranks(a, &rmin, &rmax);
    ckpt_id_add(&id, "--steps", o->steps), ckpt_id_add(&id, "--batch", o->batch);
    add_u64(&id, "--seed hi", "--seed lo", o->seed), ckpt_id_add(&id, "--scale", o->scale);
    ckpt_id_add(&id, "--lr", o->opt.lr), ckpt_id_add(&id, "--lr-min", o->opt.lr_min);
    ckpt_id_add(&id, "--warmup", o->opt.warmup), ckpt_id_add(&id, "--clip", o->opt.clip);
    ckpt_id_add(&id, "--weight-decay", o->opt.weight_decay), ckpt_id_add(&id, "beta1", o->opt.beta1);
    ckpt_id_add(&id, "beta2", o->opt.beta2), ckpt_id_add(&id, "eps", o->opt.eps);
    ckpt_id_add(&id, "--full", !a), ckpt_id_add(&id, "--rank", rmax), ckpt_id_add(&id, "--alpha", a ? lora_alpha(a) : 0);
    add_targets(&id, m, a);
    ckpt_id_add(&id, "trained values", (double)n_values);
    add_u64(&id, "--distill target hi", "--distill target lo", o->teacher ? o->teacher_id : 0);
    ckpt_id_add(&id, "data sequences", d->n_seq), ckpt_id_add(&id, "data tokens", (double)d->n_tokens);
    add_u64(&id, "data fingerprint hi", "data fingerprint lo", d->fingerprint);
    add_u64(&id, "model fingerprint hi", "model fingerprint lo", finetune_model_fingerprint(m));
    ckpt_id_add(&id, "A frozen (--fl-round)", o->freeze_a);
    add_u64(&id, "--from hi", "--from lo", o->start_id);
    return id;
}

/* ---------------------------------------------------------------- the loop */

/* The loss of sequence i of d under sp, the gradient added to grad (NULL: none); soft: room for a
 * teacher's distributions (n_seq tokens x n_vocab), used when o has a teacher. */
static err_code seq_loss(const model *m, train_spec sp, const train_data *d, const finetune_opts *o, int i,
                         float *soft, double *loss, float *grad, err_t *err) {
    const int64_t s = d->start[i];
    const int n = (int)(d->start[i + 1] - s);
    if (o->teacher) {
        err_code rc = o->teacher(o->teacher_user, d->tokens + s, n, soft, err);
        if (rc) return err_prefix(err, "the distillation target"), rc;
        sp.soft = soft;
    }
    return train_loss_grad(o->tc, m, &sp, d->tokens + s, n, d->mask + s, loss, grad, err);
}

static int longest_seq(const train_data *d) {
    int64_t longest = 2;
    for (int i = 0; i < d->n_seq; i++)
        if (d->start[i + 1] - d->start[i] > longest) longest = d->start[i + 1] - d->start[i];
    return (int)longest;
}

static float *soft_buffer(const model *m, const train_data *d, const finetune_opts *o) {
    return malloc(o->teacher ? sizeof(float) * (size_t)longest_seq(d) * (size_t)m->hp.n_vocab : sizeof(float));
}

/* A sequence of n tokens' training memory: its activations, and a teacher's distributions. */
static uint64_t seq_bytes(const model *m, const finetune_opts *o, int n, bool recompute) {
    const uint64_t act = train_activation_bytes(m, n, true, recompute);
    return act == UINT64_MAX ? act : act + (o->teacher ? 4ull * (uint64_t)n * m->hp.n_vocab : 0);
}

/* Keep every activation, or compute each layer again, within the budget; else refuse, saying what fits. */
static err_code plan_memory(const model *m, const train_data *d, const finetune_opts *o, finetune_result *res,
                            err_t *err) {
    const int n = longest_seq(d);
    const uint64_t kept = seq_bytes(m, o, n, false), again = seq_bytes(m, o, n, true);
    res->recompute = o->keep_bytes && kept > o->keep_bytes;
    res->activation_bytes = res->recompute ? again : kept;
    if (!res->recompute || !o->limit_bytes || again <= o->limit_bytes) return ERR_OK;
    int fits = 0;
    for (int lo = 2, hi = n; lo <= hi;) { /* the longest sequence that would fit */
        const int mid = lo + (hi - lo) / 2;
        if (seq_bytes(m, o, mid, true) <= o->limit_bytes) fits = mid, lo = mid + 1;
        else hi = mid - 1;
    }
    char what[64] = "nothing fits: free memory, or train a smaller model";
    if (fits) snprintf(what, sizeof what, "--seq-len %d fits", fits);
    return err_set(err, ERR_NOMEM, "a sequence of %d tokens needs %.1f MiB to train even with each layer computed "
                   "again, and %.1f MiB are free for it: %s", n, again / 1048576.0, o->limit_bytes / 1048576.0, what);
}

err_code finetune_eval(const model *m, const train_spec *sp, const train_data *d, const finetune_opts *o,
                       int max_seq, double *loss, err_t *err) {
    const int n = max_seq > 0 && max_seq < d->n_seq ? max_seq : d->n_seq;
    double sum = 0.0;
    int used = 0;
    float *soft = soft_buffer(m, d, o);
    err_code rc = soft ? ERR_OK : err_set(err, ERR_NOMEM, "out of memory for the target's distributions");
    for (int i = 0; i < n && !rc; i++) {
        double l = 0.0;
        rc = seq_loss(m, *sp, d, o, i, soft, &l, NULL, err);
        if (rc == ERR_INVALID_ARG) { /* a sequence with nothing counted */
            err_clear(err);
            rc = ERR_OK;
            continue;
        }
        if (!rc) sum += l, used++;
    }
    free(soft);
    *loss = used ? sum / used : NAN;
    return rc;
}

typedef struct {
    const model *m;  /* what the passes go through (full training: the weights' view) */
    train_spec sp;
    adamw_state st;
    float *grad, *soft;
    int64_t *counts, *step_counts; /* an MoE: [n_layer][n_expert] tokens per expert, the run's and a step's */
    uint8_t *frozen;               /* [n values] this step's unreached experts' values (an MoE), or NULL */
    order ord;
    ckpt_identity id;
    ckpt_state ck;
} run_state;

static err_code check_opts(const train_data *d, const finetune_opts *o, err_t *err) {
    if (o->steps < 1 || o->batch < 1 || o->every < 1)
        return err_set(err, ERR_INVALID_ARG, "steps, batch and the checkpoint interval must be 1 or more (%d, %d, %d)",
                       o->steps, o->batch, o->every);
    if (!(o->scale > 0.0f) || !isfinite(o->scale)) return err_set(err, ERR_INVALID_ARG, "scale %g", (double)o->scale);
    if (d->n_seq < 1) return err_set(err, ERR_INVALID_ARG, "no training sequences");
    return ERR_OK;
}

/* One step's mean loss, its gradient averaged over the batch into r->grad. */
static err_code batch_grad(const train_data *d, const finetune_opts *o, run_state *r, int64_t step, double *loss,
                           int64_t *tokens, int64_t *pressed, err_t *err) {
    memset(r->grad, 0, sizeof(float) * r->st.n);
    if (r->step_counts) memset(r->step_counts, 0, sizeof(int64_t) * r->ck.n_counts);
    *loss = 0.0;
    for (int j = 0; j < o->batch; j++) {
        const int i = seq_at(&r->ord, step * o->batch + j);
        const int64_t s = d->start[i], n = d->start[i + 1] - s;
        double l = 0.0;
        train_spec sp = r->sp;
        sp.expert_tokens = r->step_counts;
        if (o->adapt) o->adapt(o->adapt_user);
        if (!sp.recompute && o->pressed && o->pressed(o->pressed_user)) sp.recompute = true, ++*pressed;
        err_code rc = seq_loss(r->m, sp, d, o, i, r->soft, &l, r->grad, err);
        if (rc) return rc;
        *loss += l / o->batch;
        for (int64_t t = s; t < s + n; t++) *tokens += d->mask[t];
    }
    const float inv = 1.0f / (float)o->batch;
    for (size_t i = 0; i < r->st.n; i++) r->grad[i] *= inv;
    return ERR_OK;
}

/* Marks [at, at + n) of the values frozen. */
static void mark(uint8_t *frozen, size_t at, size_t n) { memset(frozen + at, 1, n); }

/* Expert e of layer l's values: its slices of the adapter's stacks, or of the trained stacks. */
static void mark_expert(const run_state *r, int l, int e, uint8_t *frozen) {
    const lora_adapter *a = r->sp.a;
    for (int k = LORA_GATE; a && k <= LORA_DOWN; k++) {
        const lora_tensor *t = lora_find(a, l, (lora_kind)k);
        if (!t || t->n_mat < 2) continue;
        const size_t ra = (size_t)t->rank * (size_t)t->n_in, rb = (size_t)t->rank * t->bt_stride;
        mark(frozen, lora_index(a, t->a + (size_t)e * ra), ra);
        mark(frozen, lora_index(a, t->bt + (size_t)e * rb), rb);
    }
    model_mat mats[3];
    model_expert_mats(r->m, l, e, mats);
    for (int i = 0; r->sp.w && i < 3; i++) {
        const float *g = train_weights_grad(r->sp.w, r->grad, &mats[i]);
        if (g) mark(frozen, (size_t)(g - r->grad), (size_t)(mats[i].n_in * mats[i].n_out));
    }
}

/* Every A of the adapter (finetune_opts' freeze_a). */
static void mark_a(void *user, const gguf_tensor *base, int layer, const lora_tensor *t) {
    (void)base, (void)layer;
    const run_state *r = user;
    mark(r->frozen, lora_index(r->sp.a, t->a), (size_t)t->n_mat * (size_t)t->rank * (size_t)t->n_in);
}

/* This step's frozen values: the experts its counts (added to the run's) did not reach, and every A when
 * they are frozen. */
static const uint8_t *unreached(run_state *r, bool freeze_a) {
    if (!r->frozen) return NULL;
    memset(r->frozen, 0, r->ck.n);
    if (freeze_a) lora_each_pair(r->m, r->sp.a, mark_a, r);
    const int X = r->m->hp.n_expert;
    for (size_t i = 0; i < r->ck.n_counts; i++) {
        r->counts[i] += r->step_counts[i];
        if (!r->step_counts[i]) mark_expert(r, (int)(i / (size_t)X), (int)(i % (size_t)X), r->frozen);
    }
    return r->frozen;
}

static err_code save(const finetune_opts *o, run_state *r, int64_t step, err_t *err) {
    if (!o->checkpoint) return ERR_OK;
    r->ck.step = step;
    return ckpt_write(o->checkpoint, &r->id, &r->ck, err);
}

/* Resume from the checkpoint when asked and there is one; *from is its step (0: none). */
static err_code start(const finetune_opts *o, run_state *r, int64_t *from, err_t *err) {
    *from = 0;
    if (!o->checkpoint || !o->resume) return ERR_OK;
    err_code rc = ckpt_read(o->checkpoint, &r->id, &r->ck, err);
    if (rc == ERR_NOT_FOUND) return err_clear(err), ERR_OK;
    if (rc) return rc;
    if (r->ck.step < 0 || r->ck.step > o->steps)
        return err_set(err, ERR_CORRUPT, "checkpoint %s: step %lld of %d", o->checkpoint, (long long)r->ck.step, o->steps);
    *from = r->st.step = r->ck.step;
    return ERR_OK;
}

static void report(const finetune_opts *o, finetune_progress *p, uint64_t t0, int64_t done) {
    p->elapsed_s = (double)(clock_ns() - t0) / 1e9;
    p->tokens_per_s = p->elapsed_s > 0 ? (double)p->tokens / p->elapsed_s : 0.0;
    p->eta_s = done > 0 ? p->elapsed_s / (double)done * (double)(o->steps - p->step) : NAN;
}

static err_code loop(const train_data *d, const finetune_opts *o, run_state *r, finetune_fn progress, void *user,
                     finetune_result *res, err_t *err) {
    adamw_opts opt = o->opt;
    opt.steps = o->steps;
    const uint64_t t0 = clock_ns();
    finetune_progress p = {.steps = o->steps, .resumed_at = res->resumed_at, .valid_before = res->valid_before};
    err_code rc = ERR_OK;
    for (int64_t s = res->resumed_at; s < o->steps && !rc; s++) {
        if ((rc = batch_grad(d, o, r, s, &p.loss, &p.tokens, &res->pressed, err))) break;
        p.grad_norm = adamw_step(&r->st, &opt, r->ck.values, r->grad, unreached(r, o->freeze_a));
        p.lr = adamw_lr(&opt, r->st.step);
        p.step = s + 1;
        if (res->steps_run++ == 0) res->first_loss = p.loss;
        res->last_loss = p.loss;
        report(o, &p, t0, res->steps_run);
        const bool go_on = !progress || progress(user, &p);
        if (!go_on || (p.step % o->every == 0 && p.step < o->steps)) rc = save(o, r, p.step, err);
        if (!rc && !go_on) {
            rc = o->checkpoint ? err_set(err, ERR_CANCELLED, "stopped after step %lld of %d; the checkpoint %s resumes it",
                                         (long long)p.step, o->steps, o->checkpoint)
                               : err_set(err, ERR_CANCELLED, "stopped after step %lld of %d (no checkpoint)",
                                         (long long)p.step, o->steps);
        }
    }
    res->seconds = (double)(clock_ns() - t0) / 1e9;
    return rc;
}

/* The positions every step of the run goes through: its order replayed (ord's permutation reused). */
static int64_t positions(const train_data *d, const finetune_opts *o, order *ord) {
    ord->epoch = -1;
    int64_t n = 0;
    for (int64_t k = 0; k < (int64_t)o->steps * o->batch; k++) {
        const int i = seq_at(ord, k);
        n += d->start[i + 1] - d->start[i];
    }
    return n;
}

/* An MoE's counts (in the checkpoint) and the frozen mask (an MoE's, or frozen A's); true when out of memory. */
static bool expert_state(run_state *r, bool freeze_a) {
    const model_hparams *hp = &r->m->hp;
    if (freeze_a && !hp->n_expert) return !(r->frozen = malloc(r->ck.n ? r->ck.n : 1));
    if (!hp->n_expert) return false;
    r->ck.n_counts = (size_t)hp->n_layer * (size_t)hp->n_expert;
    r->ck.counts = r->counts = calloc(r->ck.n_counts, sizeof(int64_t));
    r->step_counts = calloc(r->ck.n_counts, sizeof(int64_t));
    r->frozen = malloc(r->ck.n ? r->ck.n : 1);
    return !r->counts || !r->step_counts || !r->frozen;
}

err_code finetune_run(const model *m, lora_adapter *a, train_weights *w, const train_data *d,
                      const finetune_opts *o, finetune_fn progress, void *user, finetune_result *res, err_t *err) {
    *res = (finetune_result){.valid_before = NAN, .valid_after = NAN, .first_loss = NAN, .last_loss = NAN};
    err_code rc = check_opts(d, o, err);
    if (!rc && !a == !w) rc = err_set(err, ERR_INVALID_ARG, "finetune trains an adapter or the weights: one of them");
    if (!rc && o->freeze_a && !a) rc = err_set(err, ERR_INVALID_ARG, "only an adapter's A can be frozen");
    if (rc) return rc;
    if ((rc = plan_memory(w ? train_weights_model(w) : m, d, o, res, err))) return rc;
    run_state r = {.m = w ? train_weights_model(w) : m, .sp = {.a = a, .scale = o->scale, .w = w, .recompute = res->recompute},
                   .ord = {.epoch = -1, .n = d->n_seq, .seed = o->seed}};
    r.ck.values = a ? lora_values(a, &r.ck.n) : train_weights_values(w, &r.ck.n);
    r.id = identity(m, a, d, o, r.ck.n);
    adamw_opts opt = o->opt;
    opt.steps = o->steps;
    if ((rc = adamw_init(&r.st, r.ck.n, &opt, err))) return rc;
    r.ck.m = r.st.m, r.ck.v = r.st.v;
    r.grad = malloc(sizeof(float) * (r.ck.n ? r.ck.n : 1));
    r.ord.perm = malloc(sizeof(int) * (size_t)d->n_seq);
    r.soft = soft_buffer(m, d, o);
    if (!r.grad || !r.ord.perm || !r.soft || expert_state(&r, o->freeze_a)) rc = err_set(err, ERR_NOMEM, "out of memory for training %zu values", r.ck.n);
    if (!rc) rc = start(o, &r, &res->resumed_at, err);
    if (!rc && o->valid && !res->resumed_at) rc = finetune_eval(r.m, &r.sp, o->valid, o, 0, &res->valid_before, err);
    if (!rc) rc = loop(d, o, &r, progress, user, res, err);
    if (!rc && o->valid) rc = finetune_eval(r.m, &r.sp, o->valid, o, 0, &res->valid_after, err);
    if (!rc) res->positions = positions(d, o, &r.ord);
    if (!rc && o->expert_tokens && r.counts) memcpy(o->expert_tokens, r.counts, sizeof(int64_t) * r.ck.n_counts);
    adamw_free(&r.st);
    free(r.grad), free(r.ord.perm), free(r.soft), free(r.counts), free(r.step_counts), free(r.frozen);
    return rc;
}
