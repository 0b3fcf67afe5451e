/*
 * octo_finetune.c — the public API's training call (octo.h: octo_finetune):
 * its arguments checked, the model opened in its file's layout, the data
 * read, a new adapter trained (train/finetune.h) and written.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octo.h"
#include "octo_internal.h"
#include "core/atomic_write.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/quant.h"
#include "model/chat_template.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "platform/mem.h"
#include "platform/memwatch.h"
#include "platform/random.h"
#include "train/backward.h"
#include "train/data.h"
#include "train/fed.h"
#include "train/finetune.h"
#include "train/weights.h"
#include "runtime/cpu_adapt.h"
#include "runtime/session.h"

octo_finetune_params octo_finetune_params_defaults(void) {
    const finetune_opts f = finetune_defaults();
    const lora_init_opts l = lora_init_defaults();
    return (octo_finetune_params){.steps = f.steps, .batch = f.batch, .seq_len = 256, .rank = l.rank,
                                  .alpha = l.alpha, .lr = f.opt.lr, .lr_min = f.opt.lr_min, .warmup = -1,
                                  .clip = f.opt.clip, .weight_decay = f.opt.weight_decay, .seed = f.seed,
                                  .checkpoint_every = f.every};
}

/* "q,k,v,o,gate,up,down,router" (any of them, in any order) as lora kinds. */
static err_code parse_targets(const char *s, unsigned *kinds, err_t *err) {
    static const struct {
        const char *name;
        lora_kind kind;
    } names[] = {{"q", LORA_Q},       {"k", LORA_K},   {"v", LORA_V},      {"o", LORA_O},
                 {"gate", LORA_GATE}, {"up", LORA_UP}, {"down", LORA_DOWN}, {"router", LORA_ROUTER}};
    *kinds = LORA_KINDS_DEFAULT;
    if (!s) return ERR_OK;
    *kinds = 0;
    for (const char *p = s; *p;) {
        const size_t n = strcspn(p, ",");
        bool known = false;
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            if (strlen(names[i].name) == n && !strncmp(p, names[i].name, n)) *kinds |= 1u << names[i].kind, known = true;
        if (!known)
            return err_set(err, ERR_INVALID_ARG, "unknown target '%.*s' (q, k, v, o, gate, up, down, router)", (int)n, p);
        p += n + (p[n] == ',');
    }
    return *kinds ? ERR_OK : err_set(err, ERR_INVALID_ARG, "no target matrices given");
}

static err_code check_params(const octo_finetune_params *p, err_t *err) {
    if (!p->data || !p->output) return err_set(err, ERR_INVALID_ARG, "finetune needs the data and the output's path");
    if (p->steps < 1 || p->batch < 1 || p->seq_len < 2 || p->seq_len > 1 << 20 || p->rank < 1 || p->rank > 4096 ||
        p->checkpoint_every < 1 || p->warmup < -1)
        return err_set(err, ERR_INVALID_ARG, "finetune: steps %d, batch %d, seq_len %d, rank %d, checkpoint_every %d, "
                       "warmup %d out of range", p->steps, p->batch, p->seq_len, p->rank, p->checkpoint_every, p->warmup);
    if (p->fl_round < 0 || (p->fl_from && !p->fl_round))
        return err_set(err, ERR_INVALID_ARG, "finetune: a global to start from is given with a round (fl_round %d)",
                       p->fl_round);
    if (p->fl_round && (p->distill || p->full > 0))
        return err_set(err, ERR_INVALID_ARG, "finetune: a federated round trains an adapter (no distillation, no --full)");
    if (p->fl_round && p->type)
        return err_set(err, ERR_INVALID_ARG, "finetune: a federated round writes an update, its values F32: no adapter type");
    if (p->fl_round > 1 && !p->fl_from)
        return err_set(err, ERR_INVALID_ARG, "finetune: round %d starts from round %d's global (--from)", p->fl_round,
                       p->fl_round - 1);
    if (p->fl_clip < 0 || p->fl_noise < 0 || !(p->fl_delta >= 0 && p->fl_delta < 1) || !isfinite(p->fl_clip) ||
        !isfinite(p->fl_noise) || ((p->fl_clip > 0 || p->fl_noise > 0) && !p->fl_round) || (p->fl_noise > 0 && !(p->fl_clip > 0)))
        return err_set(err, ERR_INVALID_ARG, "finetune: privacy is an update's (a round), a clip norm > 0 with any noise, "
                       "0 <= delta < 1 (clip %g, noise %g, delta %g)", (double)p->fl_clip, (double)p->fl_noise,
                       (double)p->fl_delta);
    if (p->warmup > p->steps)
        return err_set(err, ERR_INVALID_ARG, "finetune: a warm-up of %d steps is longer than the run's %d", p->warmup,
                       p->steps);
    const float f[] = {p->alpha, p->lr, p->lr_min, p->clip, p->weight_decay};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (!isfinite(f[i]) || f[i] < 0.0f)
            return err_set(err, ERR_INVALID_ARG, "finetune: alpha, lr, lr_min, clip and weight_decay are numbers >= 0");
    if (!(p->lr > 0.0f) || p->lr_min > p->lr)
        return err_set(err, ERR_INVALID_ARG, "finetune: lr %g must be above 0 and at least lr_min %g", (double)p->lr,
                       (double)p->lr_min);
    return ERR_OK;
}

/* The distillation target: octo's inference forward of it over each sequence. */
typedef struct {
    model *m;
    session *s;
} teacher;

/* What a run holds, freed in one place. */
typedef struct {
    model *m;
    tokenizer *tok;
    train_data data, valid;
    lora_adapter *a;
    train_weights *w;
    teacher t;
    char *ckpt;
    train_ctx *tc;
    uint64_t budget; /* the activations' (finetune_opts' limit) */
    plat_mem_watch *watch;
    atomic_int level; /* the watcher's last plat_mem_level */
    int64_t *expert_tokens; /* an MoE: [n_layer][n_expert] the run's tokens per expert */
    cpu_adapt_state cpu;    /* the training pool's threads, for the CPU there is */
    int32_t *expert_mark;   /* the same as the output's training.expert_tokens (saturated) */
    fed_meta fl;            /* a federated round's (fl_round): the layout, the base, the round */
    float *fl_start;        /* the adapter's values at the start */
    fed_sizes sizes;        /* the update's */
} ft_run;

static void ft_free(ft_run *r) {
    plat_mem_watch_stop(r->watch);
    train_ctx_free(r->tc);
    session_free(r->t.s);
    model_free(r->t.m);
    lora_free(r->a);
    train_weights_free(r->w);
    train_data_free(&r->data), train_data_free(&r->valid);
    tokenizer_free(r->tok);
    model_free(r->m);
    free(r->ckpt), free(r->expert_tokens), free(r->expert_mark), free(r->fl_start);
}

/* The target's next-token distributions over tokens (finetune_teacher). */
static err_code teach(void *user, const int32_t *tokens, int n, float *probs, err_t *err) {
    teacher *t = user;
    session_reset(t->s);
    err_code rc = session_eval(t->s, tokens, n, true, probs, err);
    const int V = t->m->hp.n_vocab;
    for (int i = 0; !rc && i < n; i++) {
        float *z = probs + (size_t)i * V;
        double mx = -INFINITY, sum = 0.0;
        for (int k = 0; k < V; k++) mx = z[k] > mx ? z[k] : mx;
        for (int k = 0; k < V; k++) sum += exp((double)z[k] - mx);
        for (int k = 0; k < V; k++) z[k] = (float)(exp((double)z[k] - mx) / sum);
    }
    return rc;
}

/* The target loaded for inference, its vocabulary the model's, token by token; its session's threads
 * are training's too (they take turns). */
static err_code open_teacher(ft_run *r, const char *path, int seq_len, err_t *err) {
    err_code rc = model_load(path, &r->t.m, err);
    tokenizer *tt = NULL;
    if (!rc) rc = tokenizer_load(r->t.m->gguf, &tt, err);
    if (rc) return err_prefix(err, "distillation target %s", path), rc;
    const int differs = tokenizer_first_difference(r->tok, tt);
    tokenizer_free(tt);
    if (differs >= 0)
        return err_set(err, ERR_BAD_VALUE, "distillation target %s: its vocabulary differs from the model's at token %d",
                       path, differs);
    if (r->t.m->hp.n_vocab != r->m->hp.n_vocab)
        return err_set(err, ERR_BAD_VALUE, "distillation target %s: its output has %d tokens, the model's %d", path,
                       r->t.m->hp.n_vocab, r->m->hp.n_vocab);
    if ((rc = session_new(r->t.m, seq_len, QT_F32, 0, &r->t.s, err))) return rc;
    return train_ctx_new_on(r->t.s->pool, &r->tc, err);
}

/* A federated round's start: round 1 from the base (lo's layout), a later one from the previous global, whose
 * layout, base and shared A it checks; the values at the start kept (the update is their change). */
static err_code open_round(ft_run *r, const octo_finetune_params *p, const lora_init_opts *lo, err_t *err) {
    err_code rc = ERR_OK;
    r->fl = (fed_meta){.round = (uint32_t)p->fl_round, .base_hash = fed_base_hash(r->m), .layout = *lo};
    if (!p->fl_from) rc = lora_create(r->m, lo, &r->a, err);
    else {
        gguf_ctx *g = NULL;
        fed_meta gm;
        if (!(rc = gguf_open(p->fl_from, &g, err)) && !(rc = fed_meta_read(g, &gm, err))) {
            if (gm.round + 1 != r->fl.round)
                rc = err_set(err, ERR_BAD_VALUE, "it is the global of round %u, not of round %u", gm.round, r->fl.round - 1);
            else if (gm.base_hash != r->fl.base_hash) rc = err_set(err, ERR_BAD_VALUE, "it adapts another base model");
        }
        if (!rc) r->fl.layout = gm.layout, rc = lora_from_gguf(r->m, g, &r->a, err);
        else gguf_close(g);
        if (!rc && fed_a_hash(r->m, r->a) != gm.a_hash) rc = err_set(err, ERR_CORRUPT, "its A is not what fl.a_hash says");
        if (!rc && !fed_ranks_are(r->a, gm.layout.rank))
            rc = err_set(err, ERR_CORRUPT, "its matrices are not all of rank %d, as fl.rank says", gm.layout.rank);
        if (rc) return err_prefix(err, "global %s", p->fl_from), rc;
    }
    size_t n = 0;
    const float *v = rc ? NULL : lora_values(r->a, &n);
    if (!rc && !(r->fl_start = malloc(sizeof(float) * (n ? n : 1)))) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) memcpy(r->fl_start, v, sizeof(float) * n), r->fl.a_hash = fed_a_hash(r->m, r->a);
    if (!rc && !(r->fl.start_hash = fed_b_hash(r->m, r->a))) rc = err_set(err, ERR_NOMEM, "out of memory");
    return rc;
}

static bool wants_full(const octo_finetune_params *p, const model *m) {
    return p->full > 0 || (p->full == 0 && p->distill && m->n_params <= 64u * 1000 * 1000);
}

static err_code open_all(ft_run *r, const char *path, const octo_finetune_params *p, unsigned kinds, err_t *err) {
    err_code rc = model_open(path, &r->m, err);
    if (rc) return err_prefix(err, "%s", path), rc;
    gguf_str tmpl = {0};
    gguf_get_str(r->m->gguf, "tokenizer.chat_template", &tmpl);
    const chat_family chat = chat_detect(tmpl.ptr, tmpl.len);
    lora_init_opts lo = {.rank = p->rank, .alpha = p->alpha, .kinds = kinds, .seed = p->seed};
    if ((rc = tokenizer_load(r->m->gguf, &r->tok, err))) return err_prefix(err, "%s", path), rc;
    if (wants_full(p, r->m)) {
        if (!(rc = train_supported(r->m, NULL, err))) rc = train_weights_new(r->m, &r->w, err);
    } else if (!(rc = p->fl_round ? open_round(r, p, &lo, err) : lora_create(r->m, &lo, &r->a, err)))
        rc = train_supported(r->m, r->a, err);
    if (rc) return rc;
    if (p->distill && (rc = open_teacher(r, p->distill, p->seq_len, err))) return rc;
    if ((rc = train_data_load(r->tok, chat, p->data, p->seq_len, &r->data, err))) return rc;
    if (p->valid && (rc = train_data_load(r->tok, chat, p->valid, p->seq_len, &r->valid, err)))
        return err_prefix(err, "held-out data"), rc;
    return ERR_OK;
}

typedef struct {
    const octo_finetune_params *p;
} progress_ctx;

static bool on_step(void *user, const finetune_progress *f) {
    const progress_ctx *c = user;
    if (!c->p->on_progress) return true;
    const octo_finetune_progress p = {.step = f->step, .steps = f->steps, .loss = f->loss, .lr = f->lr,
                                      .grad_norm = f->grad_norm, .tokens = f->tokens, .elapsed_s = f->elapsed_s,
                                      .tokens_per_s = f->tokens_per_s, .eta_s = f->eta_s, .resumed_at = f->resumed_at};
    return c->p->on_progress(c->p->user, &p) == 0;
}

/* The values trained: the adapter's, or every weight's. */
static size_t trained_values(const ft_run *r) {
    size_t n = 0;
    if (r->a) lora_values(r->a, &n);
    else train_weights_values(r->w, &n);
    return n;
}

/* An MoE's count of experts (layers x experts each); 0 for a dense model. */
static size_t expert_slots(const model *m) { return (size_t)m->hp.n_layer * (size_t)m->hp.n_expert; }

static void fill_result(const ft_run *r, const octo_finetune_params *p, const finetune_result *f,
                        octo_finetune_result *out) {
    const size_t n = trained_values(r);
    *out = (octo_finetune_result){.resumed_at = f->resumed_at, .steps_run = f->steps_run, .first_loss = f->first_loss,
                                  .last_loss = f->last_loss, .valid_before = f->valid_before,
                                  .valid_after = f->valid_after, .seconds = f->seconds, .sequences = r->data.n_seq,
                                  .tokens = r->data.n_tokens, .counted = r->data.n_counted,
                                  .conversations = r->data.n_chats, .conversations_cut = r->data.n_cut,
                                  .n_matrices = r->a ? lora_n_matrices(r->a) : train_weights_tensors(r->w),
                                  .adapter_values = n, .full = r->w != NULL, .recompute = f->recompute,
                                  .activation_bytes = f->activation_bytes, .memory_budget = r->budget,
                                  .pressed = f->pressed, .threads = r->cpu.threads,
                                  .thread_changes = (int)r->cpu.changes};
    for (size_t i = 0; r->expert_tokens && i < expert_slots(r->m); i++) out->experts_reached += r->expert_tokens[i] > 0;
    out->experts = r->expert_tokens ? (int)expert_slots(r->m) : 0;
    out->fl_groups = r->sizes.groups, out->fl_groups_sent = r->sizes.sent;
    out->fl_bytes = r->sizes.bytes, out->fl_dense_bytes = r->sizes.dense_bytes, out->fl_norm = r->sizes.norm;
    const double delta = p->fl_delta > 0 ? p->fl_delta : 1e-5;
    out->fl_epsilon = fed_dp_epsilon(p->fl_noise, 1, delta);
    out->fl_epsilon_rounds = fed_dp_epsilon(p->fl_noise, p->fl_round, delta);
}

/* An MoE's record of the experts its training reached, for the output: "training.expert_tokens", i32
 * [n_layer * n_expert] layer by layer (saturated at 2^31 - 1); key NULL for a dense model. */
static gguf_i32_array expert_mark(ft_run *r) {
    const size_t n = expert_slots(r->m);
    if (!r->expert_tokens || !(r->expert_mark = malloc(sizeof(int32_t) * n))) return (gguf_i32_array){0};
    for (size_t i = 0; i < n; i++) r->expert_mark[i] = r->expert_tokens[i] > INT32_MAX ? INT32_MAX : (int32_t)r->expert_tokens[i];
    return (gguf_i32_array){.key = "training.expert_tokens", .v = r->expert_mark, .n = n};
}

static err_code put_mark(void *user, gguf_writer *w) {
    const gguf_i32_array *m = user;
    return m->key ? gguf_writer_set_arr_i32(w, m->key, m->v, m->n) : ERR_OK;
}

/* A random device id (fl_device not given), from the system's generator: it tells nothing of the data, and
 * two rounds' ids of one device nothing of each other. */
static err_code device_id(char id[FED_MAX_DEVICE + 1], err_t *err) {
    uint64_t h[2];
    err_code rc = plat_random(h, sizeof h, err);
    if (!rc) snprintf(id, FED_MAX_DEVICE + 1, "%016llx%016llx", (unsigned long long)h[0], (unsigned long long)h[1]);
    return rc;
}

/* The adapter (an MoE's with the tokens each expert had), the whole model, or a federated round's update. */
static err_code write_output(ft_run *r, const octo_finetune_params *p, uint32_t type, const finetune_result *res,
                             err_t *err) {
    if (p->fl_round) {
        char id[FED_MAX_DEVICE + 1];
        err_code rc = p->fl_device ? ERR_OK : device_id(id, err);
        if (rc) return rc;
        r->fl.tokens = (uint64_t)res->positions;
        const fed_dp dp = {.clip = p->fl_clip, .noise = p->fl_noise};
        return fed_update_write(r->m, r->a, r->fl_start, r->expert_tokens, &r->fl, &dp,
                                p->fl_device ? p->fl_device : id, p->output, &r->sizes, err);
    }
    gguf_i32_array mark = expert_mark(r);
    if (expert_slots(r->m) && !mark.key) return err_set(err, ERR_NOMEM, "out of memory");
    return r->w ? train_weights_write(r->w, &mark, p->output, err)
                : lora_write(r->m, r->a, type, put_mark, &mark, p->output, err);
}

static void on_memory(void *user, plat_mem_level level, const plat_mem_reading *reading) {
    (void)reading;
    atomic_store(&((ft_run *)user)->level, (int)level);
}

/* Before each sequence: the CPU the process has now (a quota, a hot device: runtime/cpu_adapt.h). */
static void adapt_cpu(void *user) {
    ft_run *r = user;
    cpu_adapt_poll(&r->cpu, train_ctx_pool(r->tc), (double)clock_ns() / 1e9);
}

/* Pressed from MODERATE up: the watcher asks caches that cost I/O to shrink; a sequence's activations
 * are such (they are computed again instead). */
static bool pressed(void *user) { return atomic_load(&((ft_run *)user)->level) >= PLAT_MEM_MODERATE; }

/* The budget for a sequence's activations: given, or what is free now (90 % of it) less the trained state
 * (values, AdamW's two moments, a gradient, an MoE's frozen mask) and, to keep every activation, less the weights too (else
 * their pages are read again from the file as the kernel takes them back). */
static void budget(const ft_run *r, const octo_finetune_params *p, finetune_opts *o) {
    if (p->memory_budget) {
        o->keep_bytes = o->limit_bytes = p->memory_budget;
        return;
    }
    const uint64_t avail = plat_mem_available() / 10 * 9;
    const uint64_t state = (r->m->hp.n_expert ? 17ull : 16ull) * trained_values(r); /* an MoE: its frozen mask */
    const uint64_t weights = r->m->weight_bytes + (r->t.m ? r->t.m->weight_bytes : 0);
    if (!avail) return; /* unknown: no limit */
    o->limit_bytes = avail > state ? avail - state : 1;
    o->keep_bytes = avail > state + weights ? avail - state - weights : 1;
}

static err_code train_and_write(ft_run *r, const octo_finetune_params *p, uint32_t type, finetune_result *res,
                                err_t *err) {
    finetune_opts o = finetune_defaults();
    o.steps = p->steps, o.batch = p->batch, o.seed = p->seed, o.every = p->checkpoint_every, o.resume = !p->restart;
    o.opt.lr = p->lr, o.opt.lr_min = p->lr_min, o.opt.clip = p->clip;
    o.opt.warmup = p->warmup >= 0 ? p->warmup : p->steps / 10 < 100 ? p->steps / 10 : 100;
    o.opt.weight_decay = p->weight_decay;
    o.checkpoint = r->ckpt;
    o.valid = p->valid ? &r->valid : NULL;
    o.tc = r->tc;
    budget(r, p, &o);
    r->budget = o.limit_bytes;
    err_t ignored = {0}; /* unwatched, training runs on as before */
    if (!plat_mem_watch_start(NULL, on_memory, r, &r->watch, &ignored)) o.pressed = pressed, o.pressed_user = r;
    if (train_ctx_pool(r->tc)) {
        cpu_adapt_init(&r->cpu, train_ctx_pool(r->tc), false);
        o.adapt = adapt_cpu, o.adapt_user = r;
    }
    if (r->t.s) o.teacher = teach, o.teacher_user = &r->t, o.teacher_id = finetune_model_fingerprint(r->t.m);
    progress_ctx pc = {p};
    const size_t n_counts = expert_slots(r->m);
    if (n_counts && !(r->expert_tokens = o.expert_tokens = calloc(n_counts, sizeof(int64_t))))
        return err_set(err, ERR_NOMEM, "out of memory");
    o.freeze_a = p->fl_round > 0;
    size_t n_start = 0;
    if (p->fl_from) lora_values(r->a, &n_start), o.start_id = checksum_bytes(r->fl_start, sizeof(float) * n_start, 1);
    err_code rc = finetune_run(r->m, r->a, r->w, &r->data, &o, on_step, &pc, res, err);
    if (!rc) rc = write_output(r, p, type, res, err);
    if (rc) return rc;
    remove(r->ckpt); /* the adapter holds what it held */
    return ERR_OK;
}

octo_status octo_finetune(octo_client *client, const char *model_path, const octo_finetune_params *params,
                          octo_finetune_result *result) {
    if (!client) return OCTO_ERR_INVALID_ARG;
    err_t *err = api_client_err(client);
    const octo_finetune_params p = params ? *params : octo_finetune_params_defaults();
    unsigned kinds = 0;
    const int type = p.type ? quant_type_from_name(p.type) : (int)QT_F32;
    err_code rc = model_path ? check_params(&p, err) : err_set(err, ERR_INVALID_ARG, "finetune needs a model's path");
    if (!rc && type != QT_F32 && type != QT_F16 && type != QT_BF16 && type != QT_Q8_0)
        rc = err_set(err, ERR_INVALID_ARG, "adapter type '%s': f32, f16, bf16 or q8_0", p.type);
    if (!rc) rc = parse_targets(p.targets, &kinds, err);
    if (!rc) rc = atomic_file_check(p.output, err);
    ft_run r = {0};
    const char *ck = p.checkpoint;
    if (!rc && !ck && (r.ckpt = malloc(strlen(p.output) + 6))) sprintf(r.ckpt, "%s.ckpt", p.output);
    else if (!rc && ck) r.ckpt = strdup(ck);
    if (!rc && !r.ckpt) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = open_all(&r, model_path, &p, kinds, err);
    if (!rc && r.w && p.type)
        rc = err_set(err, ERR_INVALID_ARG, "every weight is trained (--full, or distilling a small model) and written "
                     "in F32: no adapter type (or --adapter)");
    if (!rc && !r.tc) rc = train_ctx_new(0, &r.tc, err);
    finetune_result res = {0};
    if (!rc) rc = train_and_write(&r, &p, (uint32_t)type, &res, err);
    if (!rc && result) fill_result(&r, &p, &res, result);
    ft_free(&r);
    return (octo_status)rc;
}
