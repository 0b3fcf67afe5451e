/*
 * bundle — see bundle.h. The load, in order:
 *   1. the model's weights (model_load);
 *   2. its threads, placed on the performance cores when the CPU has two
 *      classes (plan_place), else everywhere;
 *   3. its tokenizer (a model without one still computes logits);
 *   4. the draft: the one given, else NAME.draft.gguf beside the model, else
 *      a Q4_0 self-draft when the plan says it pays (or when asked), else
 *      none (n-gram speculation needs no model);
 *   5. the plan with the draft, which splits the KV budget between the two
 *      caches, and the draft's threads on the efficiency cores;
 *   6. the sessions, and the chat template.
 * A draft found or made by itself that cannot serve is dropped with a
 * warning and its reason in plan.spec_reason; one that was asked for fails
 * the load.
 */
#include "bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/quant.h"

static void warn(const bundle_options *o, const char *msg) {
    if (o->warn && msg && *msg) o->warn(o->warn_user, msg);
}

/* The plan for o->n_sessions conversations of n_ctx tokens: the budget of
 * that many contexts (plan.h), each session's cache taking its share. */
static plan plan_sessions(const bundle *b, const bundle_options *o, const model *draft, int n_ctx) {
    const int n = o->n_sessions > 1 ? o->n_sessions : 1;
    const int64_t all = (int64_t)n_ctx * n;
    plan p = plan_make(b->m, draft, all > (1 << 24) ? (1 << 24) : (int)all, &o->kv, &o->dev);
    if (n > 1 && p.kv.budget_bytes) { /* each cache its share, never below what a cache needs to work */
        const uint64_t floor = kv_budget_floor(plan_kv_shape(&b->m->hp), &p.kv);
        p.kv.budget_bytes = p.kv.budget_bytes / (uint64_t)n > floor ? p.kv.budget_bytes / (uint64_t)n : floor;
        if (draft && p.draft_kv.budget_bytes) {
            const uint64_t dfloor = kv_budget_floor(plan_kv_shape(&draft->hp), &p.draft_kv);
            p.draft_kv.budget_bytes /= (uint64_t)n;
            if (p.draft_kv.budget_bytes < dfloor) p.draft_kv.budget_bytes = dfloor;
        }
        const size_t len = strlen(p.kv_reason);
        snprintf(p.kv_reason + len, sizeof p.kv_reason - len, "; split among %d sessions", n);
    }
    return p;
}

/* A context longer than the model was trained for, said once with what the
 * file's RoPE scaling does about it. */
static void warn_past_training(const model *m, const bundle_options *o, int n_ctx) {
    const model_hparams *hp = &m->hp;
    if (n_ctx <= hp->n_ctx_train) return;
    char msg[320], how[200];
    if (m->rope_long.data) snprintf(how, sizeof how, "its LongRoPE factors stretch the positions (the long set serves past %d)", hp->rope_ctx_orig);
    else if (hp->rope_yarn) snprintf(how, sizeof how, "its YaRN scaling (factor %.3g) stretches the positions", 1.0 / hp->rope_freq_scale);
    else if (hp->rope_freq_scale != 1.0f) snprintf(how, sizeof how, "its linear RoPE scaling (factor %.3g) stretches the positions", 1.0 / hp->rope_freq_scale);
    else snprintf(how, sizeof how, "the file has no RoPE scaling: positions past %d were never seen in training and the text degrades there", hp->n_ctx_train);
    snprintf(msg, sizeof msg, "context %d tokens is past the model's trained %d; %s", n_ctx, hp->n_ctx_train, how);
    warn(o, msg);
}

/* Step 1: the weights, packed when the plan says they fit beside the KV
 * cache's least; the reason says what was done. *n_ctx: the context asked
 * (0: the model's), then the one that fits (plan_fit, said as a warning). */
static err_code load_weights(bundle *b, const char *path, const bundle_options *o, int *n_ctx, err_t *err) {
    err_code rc = model_open(path, &b->m, err);
    if (rc) return rc;
    if (!*n_ctx) *n_ctx = b->m->hp.n_ctx_train;
    if ((rc = plan_fit(b->m, &o->kv, &o->dev, n_ctx, b->fit_reason, sizeof b->fit_reason, err))) return rc;
    warn(o, b->fit_reason);
    warn_past_training(b->m, o, *n_ctx);
    const uint64_t kv_least = plan_kv_least(b->m, &o->kv, *n_ctx);
    if (!plan_pack_weights(b->m, &o->dev, kv_least, b->weights_reason, sizeof b->weights_reason)) return rc;
    b->weights_packed = true;
    if (o->plan_only) return ERR_OK;
    model_pack(b->m);
    return ERR_OK;
}

/* Threads on the performance cores when there are two classes; a placement
 * the system refuses leaves them unplaced (not an error). *unplaced: then
 * nothing else is placed either. */
static err_code place_threads(bundle *b, const bundle_options *o, cpu_classes *cc, bool *unplaced, err_t *err) {
    cpu_classes_read(NULL, cc);
    if (o->plan_only && o->dev.n_perf) { /* a profile's plan: its cores, never this host's (no pool is pinned) */
        *cc = (cpu_classes){.n_perf = o->dev.n_perf, .n_eff = o->dev.n_eff, .n_allowed = o->dev.n_perf + o->dev.n_eff};
        b->cores = plan_place(cc, o->n_threads, false);
        *unplaced = false;
        return tpool_new(1, &b->pool, err);
    }
    b->cores = plan_place(cc, o->n_threads, false);
    *unplaced = false;
    if (b->cores.on_perf) {
        err_t perr = {0};
        if (tpool_new_on(b->cores.threads, cc->perf, cc->n_perf, &b->pool, &perr)) {
            *unplaced = true;
            cc->n_eff = 0;
            b->cores = plan_place(cc, o->n_threads, false);
            snprintf(b->cores.reason, sizeof b->cores.reason, "the threads could not be placed: %.120s", perr.msg);
            warn(o, b->cores.reason);
        }
    }
    return b->pool ? ERR_OK : tpool_new(b->cores.threads, &b->pool, err);
}

/* The vocabulary, when the file has a usable one; else tok_err says why. */
static void load_tokenizer(bundle *b, const bundle_options *o) {
    if (tokenizer_load(b->m->gguf, &b->tok, &b->tok_err) != ERR_OK) return;
    if (tokenizer_n_vocab(b->tok) != b->m->hp.n_vocab) {
        err_set(&b->tok_err, ERR_BAD_VALUE, "the vocabulary has %d tokens but the model %d", tokenizer_n_vocab(b->tok),
                b->m->hp.n_vocab);
        tokenizer_free(b->tok);
        b->tok = NULL;
    } else if (tokenizer_warning(b->tok)[0]) {
        snprintf(b->warning, sizeof b->warning, "%s", tokenizer_warning(b->tok));
        warn(o, b->warning);
    }
}

/* Load the draft model and check it can propose for this one: the same
 * vocabulary, token by token, and fewer weight bytes (what a draft step
 * costs). A given draft that is not smaller (any_size) is kept to score
 * prompts (runtime/prefill.h), never to speculate (bundle_proposer). */
static err_code load_draft(bundle *b, const char *path, bool any_size, err_t *err) {
    err_code rc = b->plan_only ? model_open(path, &b->draft_m, err) : model_load(path, &b->draft_m, err);
    if (rc) return rc;
    tokenizer *dt = NULL;
    rc = tokenizer_load(b->draft_m->gguf, &dt, err);
    if (!rc && (!b->tok || tokenizer_n_vocab(dt) != tokenizer_n_vocab(b->tok)))
        rc = err_set(err, ERR_BAD_VALUE, "draft %s: its vocabulary has %d tokens, the model's %d", path,
                     tokenizer_n_vocab(dt), b->tok ? tokenizer_n_vocab(b->tok) : 0);
    const int differs = rc ? -1 : tokenizer_first_difference(dt, b->tok);
    if (differs >= 0)
        rc = err_set(err, ERR_BAD_VALUE, "draft %s: token %d differs from the model's vocabulary", path, differs);
    tokenizer_free(dt);
    const bool not_smaller = !rc && b->draft_m->weight_bytes >= b->m->weight_bytes;
    if (not_smaller && any_size) {
        b->draft_not_smaller = true; /* kept: it scores prompts */
        snprintf(b->draft_note, sizeof b->draft_note, "draft %.200s is not smaller than the model (%llu weight bytes against %llu)",
                 path, (unsigned long long)b->draft_m->weight_bytes, (unsigned long long)b->m->weight_bytes);
    } else if (not_smaller)
        rc = err_set(err, ERR_INVALID_ARG, "draft %s is larger than the model: %llu weight bytes against %llu", path,
                     (unsigned long long)b->draft_m->weight_bytes, (unsigned long long)b->m->weight_bytes);
    if (rc) {
        model_free(b->draft_m);
        b->draft_m = NULL;
    }
    return rc;
}

bool bundle_draft_beside(const char *path, char *out, size_t n) {
    const size_t len = strlen(path);
    const int stem = len > 5 && !strcmp(path + len - 5, ".gguf") ? (int)(len - 5) : (int)len;
    return snprintf(out, n, "%.*s.draft.gguf", stem, path) < (int)n;
}

/* No draft given: look beside the model for NAME.draft.gguf (NAME.gguf's
 * stem). One that cannot serve (another vocabulary, larger, unreadable) is
 * passed over with a warning and the reason in the plan; n-gram stands in. */
static bool find_draft(bundle *b, const char *path, const bundle_options *o) {
    char cand[4096], *r = b->plan.spec_reason;
    const size_t rn = sizeof b->plan.spec_reason;
    if (!bundle_draft_beside(path, cand, sizeof cand)) {
        snprintf(r, rn, "n-gram: no draft given (path too long to look beside)");
        return false;
    }
    if (access(cand, R_OK) != 0) {
        snprintf(r, rn, "n-gram: no draft given, none at %.200s", cand);
        return false;
    }
    err_t derr = {0};
    if (load_draft(b, cand, false, &derr) == ERR_OK) {
        snprintf(r, rn, "draft %.200s (found beside the model)", cand);
        return true;
    }
    snprintf(r, rn, "n-gram: the draft beside the model was not used: %.180s", derr.msg);
    warn(o, r);
    return false;
}

/* Why a self-draft is made: the plan's reason, or (asked where it does not
 * pay) that it was asked for. */
static void self_reason(char *r, size_t rn, bool pays, const char *why) {
    if (pays) snprintf(r, rn, "%s", why);
    else snprintf(r, rn, "self-draft: a Q4_0 copy made at load (asked; %.150s)", why + strlen("no self-draft: "));
}

/* No draft model: a Q4_0 copy of the target when the plan says it pays and
 * fits (plan_self_draft), or whenever it can be made when asked. Only a copy
 * that was asked for and cannot be made is an error; otherwise the plan's
 * reason joins the n-gram one. */
static err_code make_self_draft(bundle *b, bool asked, const plan_device *dev, err_t *err) {
    char why[192];
    const uint64_t bytes = model_requantized_bytes(b->m, QT_Q4_0);
    const uint64_t token_bytes = bytes ? model_requantized_token_bytes(b->m, QT_Q4_0) : 0;
    const bool pays = plan_self_draft(b->m, bytes, token_bytes, &b->plan, dev, why, sizeof why);
    char *r = b->plan.spec_reason;
    const size_t rn = sizeof b->plan.spec_reason;
    if (!pays && !(asked && bytes)) {
        if (asked) return err_set(err, ERR_UNSUPPORTED, "%s", why);
        char prev[256];
        snprintf(prev, sizeof prev, "%s", r);
        snprintf(r, rn, "%.150s; %.100s", prev, why);
        return ERR_OK;
    }
    if (b->plan_only) { /* the copy's shape stands in for it: plan_make reads its hparams and bytes */
        b->self_shape = *b->m;
        b->self_shape.weight_bytes = bytes;
        b->self_shape.weight_bytes_per_token = token_bytes;
        b->draft_self = true;
        self_reason(r, rn, pays, why);
        return ERR_OK;
    }
    err_code rc = model_requantize(b->m, QT_Q4_0, b->pool, &b->draft_m, err);
    if (rc) {
        model_free(b->draft_m);
        b->draft_m = NULL;
        if (asked) return rc;
        snprintf(r, rn, "n-gram: the self-draft could not be made: %.200s", err->msg);
        err_clear(err);
        return ERR_OK;
    }
    b->draft_self = true;
    self_reason(r, rn, pays, why);
    return ERR_OK;
}

/* Step 4: the draft, if any (plan.spec_reason says which and why). */
static err_code choose_draft(bundle *b, const char *path, const bundle_options *o, err_t *err) {
    if (o->draft_model) { /* given: any problem fails the load */
        err_code rc = load_draft(b, o->draft_model, true, err);
        snprintf(b->plan.spec_reason, sizeof b->plan.spec_reason, "draft %s (given)%s", o->draft_model,
                 b->draft_not_smaller ? "; not smaller than the model: it scores prompts, it does not speculate" : "");
        if (!rc && b->draft_not_smaller) {
            char msg[320];
            snprintf(msg, sizeof msg, "%.220s: it does not speculate (n-gram drafts instead); it scores prompts only", b->draft_note);
            warn(o, msg);
        }
        return rc;
    }
    if (o->auto_draft == BUNDLE_DRAFT_NONE) {
        snprintf(b->plan.spec_reason, sizeof b->plan.spec_reason, "n-gram: no draft given, none looked for (asked)");
        return ERR_OK;
    }
    if (o->auto_draft == BUNDLE_DRAFT_SELF || !find_draft(b, path, o))
        return make_self_draft(b, o->auto_draft == BUNDLE_DRAFT_SELF, &o->dev, err);
    return ERR_OK;
}

/* A draft found or made by itself whose cache could not be made: n-gram
 * stands in, the plan goes back to one cache, the warning says why. */
static void drop_draft(bundle *b, const bundle_options *o, const cpu_classes *cc, bool unplaced, int n_ctx,
                       const char *why, char *spec_reason, size_t rn) {
    model_free(b->draft_m);
    b->draft_m = NULL;
    b->draft_self = false;
    tpool_free(b->draft_pool);
    b->draft_pool = NULL;
    if (!unplaced) b->cores = plan_place(cc, o->n_threads, false);
    snprintf(spec_reason, rn, "n-gram: the draft's cache could not be made: %.190s", why);
    warn(o, spec_reason);
    b->plan = plan_sessions(b, o, NULL, n_ctx);
}

/* Cores of one class, a draft asked to have some of its own: the last of
 * them become the draft's, and the model's pool moves to the others. */
static err_code split_cores(bundle *b, const bundle_options *o, cpu_classes *cc, err_t *err) {
    const int allowed = cc->n_perf ? cc->n_perf : cc->n_allowed;
    if (!cpu_classes_split(cc, o->draft_threads))
        return err_set(err, ERR_INVALID_ARG, "draft_threads %d leaves no core for the model (%d cores to run on)",
                       o->draft_threads, allowed);
    const plan_cores c = plan_place(cc, o->n_threads, true);
    if (!c.on_perf)
        return err_set(err, ERR_INVALID_ARG, "%d threads and draft_threads %d need %d cores (%d to run on)", c.threads,
                       o->draft_threads, c.threads + o->draft_threads, allowed);
    if (o->plan_only) return ERR_OK;
    tpool_free(b->pool);
    b->pool = NULL;
    return tpool_new_on(c.threads, cc->perf, cc->n_perf, &b->pool, err);
}

/* The split undone (the draft could not have its cores, or was dropped):
 * the model's threads back where place_threads puts them. */
static void unsplit(bundle *b, const bundle_options *o, cpu_classes *cc) {
    bool unplaced;
    err_t perr = {0};
    tpool_free(b->pool);
    b->pool = NULL;
    if (place_threads(b, o, cc, &unplaced, &perr)) warn(o, perr.msg); /* no pool: it computes on the caller */
}

/* Step 5: the plan that shares the KV budget with the draft, the draft's
 * threads on the efficiency cores (or the cores asked for), its session. */
static err_code plan_with_draft(bundle *b, const bundle_options *o, cpu_classes *cc, bool unplaced, int n_ctx,
                                char *spec_reason, size_t rn, err_t *err) {
    b->plan = plan_sessions(b, o, bundle_draft_shape(b), n_ctx);
    if (o->draft_threads > 0 && unplaced) warn(o, "draft_threads: the threads cannot be placed here");
    const bool split = o->draft_threads > 0 && !unplaced && cc->n_eff == 0;
    err_code rc = split ? split_cores(b, o, cc, err) : ERR_OK;
    if (rc) return rc;
    if (!unplaced) b->cores = plan_place(cc, o->n_threads, true);
    if (o->draft_threads > 0 && b->cores.draft_threads > o->draft_threads) b->cores.draft_threads = o->draft_threads;
    if (split)
        snprintf(b->cores.reason, sizeof b->cores.reason, "%d threads on %d cores; the draft on %d cores of its own "
                 "(draft_threads), one class of cores", b->cores.threads, cc->n_perf, cc->n_eff);
    if (o->plan_only) return ERR_OK;
    err_t derr = {0};
    if (b->cores.draft_threads && tpool_new_on(b->cores.draft_threads, cc->eff, cc->n_eff, &b->draft_pool, &derr)) {
        if (split) unsplit(b, o, cc);
        b->cores = plan_place(cc, o->n_threads, false); /* the draft computes on the model's threads */
        snprintf(b->cores.reason, sizeof b->cores.reason, "the draft's threads could not be placed: %.100s", derr.msg);
        warn(o, b->cores.reason);
    }
    const bool asked = o->draft_model || o->auto_draft == BUNDLE_DRAFT_SELF;
    rc = session_new_shared(b->draft_m, n_ctx, &b->plan.draft_kv, b->draft_pool ? b->draft_pool : b->pool,
                                     &b->draft_s, asked ? err : &derr);
    if (rc && !asked) {
        if (split && b->draft_pool) unsplit(b, o, cc);
        drop_draft(b, o, cc, unplaced, n_ctx, derr.msg, spec_reason, rn);
        rc = ERR_OK;
    }
    return rc;
}

/* A session of an MoE model fetches its experts through the one store. */
static void wire_experts(const bundle *b, session *s) {
    if (!b->experts) return;
    s->experts = moe_experts_iface(b->experts);
    s->shared_bytes = b->plan.moe_shared;
    s->token_bytes = kv_token_bytes(plan_kv_shape(&b->m->hp), b->plan.kv.hot_type);
    s->experts_least = moe_cache_slot_bytes(b->m) * (uint64_t)b->m->hp.n_expert_used;
}

err_code bundle_session_open(const bundle *b, session **s, session **ds, err_t *err) {
    *s = *ds = NULL;
    if (b->plan_only) return err_set(err, ERR_INVALID_ARG, "the model was loaded to plan only");
    err_code rc = session_new_shared(b->m, b->n_ctx, &b->plan.kv, b->pool, s, err);
    if (!rc && b->draft_s)
        rc = session_new_shared(b->draft_m, b->n_ctx, &b->plan.draft_kv, b->draft_pool ? b->draft_pool : b->pool, ds,
                                err);
    if (rc) {
        session_free(*s);
        *s = NULL;
        return rc;
    }
    wire_experts(b, *s);
    return ERR_OK;
}

/* The file's vocabulary alone: no model bound, so any architecture (or none) will do. */
static err_code load_vocab_only(bundle *b, const char *path, bundle **out, err_t *err) {
    err_code rc = gguf_open(path, &b->vocab_gguf, err);
    if (rc) err_prefix(err, "%s", path);
    if (!rc && (rc = tokenizer_load(b->vocab_gguf, &b->tok, err))) err_prefix(err, "%s", path);
    if (rc) {
        bundle_free(b);
        return rc;
    }
    *out = b;
    return ERR_OK;
}

err_code bundle_load(const char *path, const bundle_options *o, bundle **out, err_t *err) {
    *out = NULL;
    bundle *b = calloc(1, sizeof *b);
    if (!b) return err_set(err, ERR_NOMEM, "out of memory");
    b->plan_only = o->plan_only || o->vocab_only;
    if (o->vocab_only) return load_vocab_only(b, path, out, err);
    cpu_classes cc;
    bool unplaced = false;
    int n_ctx = o->n_ctx;
    err_code rc = load_weights(b, path, o, &n_ctx, err);
    if (!rc) rc = place_threads(b, o, &cc, &unplaced, err);
    if (rc) {
        bundle_free(b);
        return rc;
    }
    model_set_context(b->m, n_ctx); /* LongRoPE's factors follow the context */
    load_tokenizer(b, o);
    /* the draft first (the self-draft's decision needs the plan without one) */
    b->plan = plan_sessions(b, o, NULL, n_ctx);
    rc = choose_draft(b, path, o, err);
    char spec_reason[sizeof b->plan.spec_reason];
    memcpy(spec_reason, b->plan.spec_reason, sizeof spec_reason);
    if (!rc && b->draft_m) model_set_context(b->draft_m, n_ctx);
    if (!rc && bundle_draft_shape(b))
        rc = plan_with_draft(b, o, &cc, unplaced, n_ctx, spec_reason, sizeof spec_reason, err);
    else if (!rc && o->draft_threads > 0)
        warn(o, "draft_threads: no draft model, so no cores are set aside for one");
    memcpy(b->plan.spec_reason, spec_reason, sizeof spec_reason);
    if (b->fit_reason[0]) {
        const size_t len = strlen(b->plan.kv_reason);
        snprintf(b->plan.kv_reason + len, sizeof b->plan.kv_reason - len, "; %s", b->fit_reason);
    }
    b->n_ctx = n_ctx;
    if (!rc && !o->plan_only) rc = session_new_shared(b->m, n_ctx, &b->plan.kv, b->pool, &b->s, err);
    if (!rc && b->m->hp.n_expert > 0) {
        plan_experts(&b->plan, b->m, bundle_draft_shape(b), n_ctx, &o->moe, &o->dev);
        if (!o->plan_only && !(rc = moe_experts_new(b->m, path, &b->plan.moe, &b->experts, err)))
            wire_experts(b, b->s);
    }
    b->n_sessions = o->n_sessions > 1 ? o->n_sessions : 1;
    b->kv_derived = o->kv.budget_bytes ? 0 : b->plan.kv.budget_bytes;
    b->moe_shared_derived = b->plan.moe_shared;
    if (rc) {
        bundle_free(b);
        return rc;
    }
    gguf_str tmpl = {0, NULL};
    gguf_get_str(b->m->gguf, "tokenizer.chat_template", &tmpl);
    b->chat = chat_detect(tmpl.ptr, tmpl.len);
    *out = b;
    return ERR_OK;
}

void bundle_reserve(bundle *b, uint64_t bytes, session *const *s, int n) {
    if (b->plan_only || !b->m) return;
    b->reserved = bytes;
    if (b->kv_derived) {
        const uint64_t floor = kv_budget_floor(plan_kv_shape(&b->m->hp), &b->plan.kv);
        const uint64_t cut = bytes / (uint64_t)b->n_sessions;
        b->plan.kv.budget_bytes = b->kv_derived > floor + cut ? b->kv_derived - cut : floor;
    }
    if (b->moe_shared_derived) b->plan.moe_shared = b->moe_shared_derived > bytes ? b->moe_shared_derived - bytes : 1;
    for (int i = 0; i < n; i++) {
        if (s[i]->m != b->m) continue; /* a draft's cache: its own share, untouched */
        if (b->kv_derived) s[i]->kv_planned = b->plan.kv.budget_bytes;
        if (b->moe_shared_derived && s[i]->experts && s[i]->shared_bytes) s[i]->shared_bytes = b->plan.moe_shared;
        session_rebalance(s[i], 1);
    }
}

void bundle_free(bundle *b) {
    if (!b) return;
    tokenizer_free(b->tok);
    session_free(b->draft_s);
    model_free(b->draft_m);
    session_free(b->s);
    moe_experts_free(b->experts); /* after the session that fetched through it */
    tpool_free(b->draft_pool); /* after the sessions that compute on them */
    tpool_free(b->pool);
    model_free(b->m);
    gguf_close(b->vocab_gguf);
    free(b);
}

void bundle_forget_self_draft(bundle *b) {
    if (!b->draft_self) return;
    model_free(b->draft_m);
    b->draft_m = NULL;
    b->draft_s = NULL; /* the caller's to free, with every session's */
    b->draft_self = false;
    snprintf(b->plan.spec_reason, sizeof b->plan.spec_reason,
             "n-gram: the self-draft was given back under memory pressure");
}

const model *bundle_draft_shape(const bundle *b) {
    return b->draft_m ? b->draft_m : b->self_shape.gguf ? &b->self_shape : NULL;
}

err_code bundle_proposer(const bundle *b, const proposer_ops *asked, const proposer_ops **out, err_t *err) {
    const proposer_ops *p = asked ? asked : b->draft_s && !b->draft_not_smaller ? &proposer_draft : &proposer_ngram;
    *out = NULL;
    if (p == &proposer_self && !b->draft_self)
        return err_set(err, ERR_INVALID_ARG, "no self-draft was made at load (auto_draft OCTO_DRAFT_SELF asks): %s",
                       b->plan.spec_reason);
    if (p->needs_lm && !b->draft_s)
        return err_set(err, ERR_INVALID_ARG, "no draft model was loaded (octo_model_options.draft_model)");
    if (p->needs_lm && b->draft_not_smaller) /* AUTO passed it over above */
        return err_set(err, ERR_INVALID_ARG, "%s: a draft step would cost more than the model's", b->draft_note);
    /* "draft" and "self" both name the loaded draft: what it is decides the name */
    if (p == &proposer_draft || p == &proposer_self) p = b->draft_self ? &proposer_self : &proposer_draft;
    *out = p;
    return ERR_OK;
}

experts_stats bundle_experts_stats(const bundle *b) {
    experts_stats st = {0};
    if (b->experts) {
        const experts_iface *x = moe_experts_iface(b->experts);
        x->stats(x->self, &st);
    }
    return st;
}

bundle_kv_stats bundle_kv_stats_of(const bundle *b, const session *s, const session *ds) {
    if (!s) return (bundle_kv_stats){.budget_bytes = b->plan.kv.budget_bytes + b->plan.draft_kv.budget_bytes};
    bundle_kv_stats st = {.kv = kv_cache_stats(s->kv)};
    const kv_stats d = ds ? kv_cache_stats(ds->kv) : (kv_stats){0};
    const uint64_t full = kv_context_bytes(plan_kv_shape(&b->m->hp), b->plan.kv.hot_type, s->n_ctx) +
                          (ds ? kv_context_bytes(plan_kv_shape(&b->draft_m->hp), b->plan.kv.hot_type, s->n_ctx) : 0);
    st.budget_bytes = st.kv.budget ? st.kv.budget + d.budget : full;
    st.draft_bytes = d.bytes;
    st.kv.bytes += d.bytes;
    st.kv.bytes_hot += d.bytes_hot;
    st.kv.bytes_warm += d.bytes_warm;
    st.kv.bytes_cold += d.bytes_cold;
    return st;
}
