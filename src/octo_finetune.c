/*
 * octo_finetune.c — the public API's training call (octo.h: octo_finetune):
 * its arguments checked, the model opened in its file's layout, the data
 * read, a new adapter trained (train/finetune.h) and written.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octo.h"
#include "octo_internal.h"
#include "core/atomic_write.h"
#include "core/quant.h"
#include "model/chat_template.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "train/backward.h"
#include "train/data.h"
#include "train/finetune.h"

octo_finetune_params octo_finetune_params_defaults(void) {
    const finetune_opts f = finetune_defaults();
    const lora_init_opts l = lora_init_defaults();
    return (octo_finetune_params){.steps = f.steps, .batch = f.batch, .seq_len = 256, .rank = l.rank,
                                  .alpha = l.alpha, .lr = f.opt.lr, .lr_min = f.opt.lr_min, .warmup = -1,
                                  .clip = f.opt.clip, .weight_decay = f.opt.weight_decay, .seed = f.seed,
                                  .checkpoint_every = f.every};
}

/* "q,k,v,o,gate,up,down" (any of them, in any order) as lora kinds. */
static err_code parse_targets(const char *s, unsigned *kinds, err_t *err) {
    static const struct {
        const char *name;
        lora_kind kind;
    } names[] = {{"q", LORA_Q},       {"k", LORA_K},   {"v", LORA_V},      {"o", LORA_O},
                 {"gate", LORA_GATE}, {"up", LORA_UP}, {"down", LORA_DOWN}};
    *kinds = LORA_KINDS_DEFAULT;
    if (!s) return ERR_OK;
    *kinds = 0;
    for (const char *p = s; *p;) {
        const size_t n = strcspn(p, ",");
        bool known = false;
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            if (strlen(names[i].name) == n && !strncmp(p, names[i].name, n)) *kinds |= 1u << names[i].kind, known = true;
        if (!known)
            return err_set(err, ERR_INVALID_ARG, "unknown target '%.*s' (q, k, v, o, gate, up, down)", (int)n, p);
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

/* What a run holds, freed in one place. */
typedef struct {
    model *m;
    tokenizer *tok;
    train_data data, valid;
    lora_adapter *a;
    char *ckpt;
    train_ctx *tc;
} ft_run;

static void ft_free(ft_run *r) {
    train_ctx_free(r->tc);
    lora_free(r->a);
    train_data_free(&r->data), train_data_free(&r->valid);
    tokenizer_free(r->tok);
    model_free(r->m);
    free(r->ckpt);
}

static err_code open_all(ft_run *r, const char *path, const octo_finetune_params *p, unsigned kinds, err_t *err) {
    err_code rc = model_open(path, &r->m, err);
    if (rc) return err_prefix(err, "%s", path), rc;
    gguf_str tmpl = {0};
    gguf_get_str(r->m->gguf, "tokenizer.chat_template", &tmpl);
    const chat_family chat = chat_detect(tmpl.ptr, tmpl.len);
    lora_init_opts lo = {.rank = p->rank, .alpha = p->alpha, .kinds = kinds, .seed = p->seed};
    if ((rc = tokenizer_load(r->m->gguf, &r->tok, err))) return err_prefix(err, "%s", path), rc;
    if ((rc = lora_create(r->m, &lo, &r->a, err)) || (rc = train_supported(r->m, r->a, err))) return rc;
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

static void fill_result(const ft_run *r, const finetune_result *f, octo_finetune_result *out) {
    size_t n = 0;
    lora_values(r->a, &n);
    *out = (octo_finetune_result){.resumed_at = f->resumed_at, .steps_run = f->steps_run, .first_loss = f->first_loss,
                                  .last_loss = f->last_loss, .valid_before = f->valid_before,
                                  .valid_after = f->valid_after, .seconds = f->seconds, .sequences = r->data.n_seq,
                                  .tokens = r->data.n_tokens, .counted = r->data.n_counted,
                                  .conversations = r->data.n_chats, .conversations_cut = r->data.n_cut,
                                  .n_matrices = lora_n_matrices(r->a), .adapter_values = n};
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
    progress_ctx pc = {p};
    err_code rc = finetune_run(r->m, r->a, &r->data, &o, on_step, &pc, res, err);
    if (!rc) rc = lora_write(r->m, r->a, type, p->output, err);
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
    if (!rc) rc = train_ctx_new(0, &r.tc, err);
    finetune_result res = {0};
    if (!rc) rc = train_and_write(&r, &p, (uint32_t)type, &res, err);
    if (!rc && result) fill_result(&r, &res, result);
    ft_free(&r);
    return (octo_status)rc;
}
