/*
 * test_lora — LoRA adapters (model/lora.h, the forward's low-rank terms,
 * convert/merge.h, convert/adapter_synth.h).
 *
 * - Against an independent computation: a model's logits with adapters on
 *   equal (within F32 rounding) those of the model `octo merge` writes from
 *   the same base and adapters (the base's matrices plus s·B·A, computed
 *   row by row from the file's values), on a dense llama, an MoE with
 *   experts and router adapted, phi3's fused q/k/v and gate/up, qwen2moe's
 *   shared expert and deepseek2's latent attention; ranks 8 and 64, F32,
 *   F16, BF16 and Q8_0 adapters; two stacked at scales 0.5 and 1.5.
 * - Scale 0 gives the base's logits bit for bit.
 * - A token's logits decoded one at a time equal its row of a whole-prompt
 *   pass (speculation's verify) bit for bit with adapters on; a batch of
 *   sessions with different adapters (and one with none) equals each alone.
 * - Hostile adapters are refused with the reason.
 * - Through the C API: an adapter no conversation holds is dropped under
 *   memory pressure and read again when set; one in use stays; the text
 *   with it equals the text before the drop.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/adapter_synth.h"
#include "convert/merge.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/synth.h"
#include "octo.h"
#include "runtime/session.h"
#include "t.h"
#include "util.h"

#define ALL_KINDS ((1u << LORA_KINDS) - 1)
#define N_TOK 9

static const int32_t PROMPT[N_TOK] = {1, 45, 97, 3, 260, 12, 77, 150, 8};

/* The logits of every row of the prompt (malloc'd), with set (NULL: none). */
static float *logits_of(const model *m, const lora_set *set, bool one_by_one) {
    err_t err = {0};
    session *s = NULL;
    const size_t V = (size_t)m->hp.n_vocab;
    float *out = malloc(sizeof(float) * V * N_TOK);
    bool ok = out && session_new(m, 64, QT_F32, 2, &s, &err) == ERR_OK && session_set_lora(s, set, &err) == ERR_OK;
    if (ok && one_by_one)
        for (int t = 0; t < N_TOK && ok; t++) ok = session_eval(s, PROMPT + t, 1, false, out + t * V, &err) == ERR_OK;
    else if (ok)
        ok = session_eval(s, PROMPT, N_TOK, true, out, &err) == ERR_OK;
    T_CHECKF(ok, "logits: %s", err.msg);
    session_free(s);
    if (!ok) free(out);
    return ok ? out : NULL;
}

static double max_diff(const float *a, const float *b, size_t n, double *scale) {
    double d = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    *scale = s;
    return d;
}

static bool synth_model(const char *arch, int n_expert, const char *path) {
    synth_opts o = synth_defaults();
    o.arch = arch;
    o.n_expert = n_expert;
    o.n_expert_used = n_expert ? 2 : 0;
    o.weight_std = 0.08f;
    err_t err = {0};
    const bool ok = synth_write(&o, path, &err) == ERR_OK;
    T_CHECKF(ok, "synth %s: %s", arch, err.msg);
    return ok;
}

static bool synth_adapter(const char *base, int rank, uint32_t type, uint64_t seed, const char *path) {
    adapter_synth_opts o = adapter_synth_defaults();
    o.rank = rank, o.type = type, o.seed = seed, o.kinds = ALL_KINDS, o.std = 0.3f, o.alpha = (float)rank / 2;
    err_t err = {0};
    const bool ok = adapter_synth(base, &o, path, &err) == ERR_OK;
    T_CHECKF(ok, "adapter for %s: %s", base, err.msg);
    return ok;
}

/* The adapters at scales on base, against the merged copy. */
static void check_merge(const char *what, const char *base, const char *const *ad, const float *scales, int n) {
    char merged[512];
    tu_tmp_path(merged, sizeof merged, "merged.gguf");
    err_t err = {0};
    model *m = NULL, *mm = NULL;
    lora_adapter *la[LORA_MAX_STACK] = {0};
    lora_set set = {.n = n};
    merge_report rep;
    const merge_opts mo = {.base = base, .output = merged, .adapters = ad, .scales = scales, .n = n};
    bool ok = model_load(base, &m, &err) == ERR_OK;
    for (int i = 0; ok && i < n; i++) {
        ok = lora_open(m, ad[i], &la[i], &err) == ERR_OK;
        set.a[i] = la[i], set.scale[i] = scales[i];
    }
    ok = ok && merge_run(&mo, &rep, &err) == ERR_OK && model_load(merged, &mm, &err) == ERR_OK;
    T_CHECKF(ok, "[%s] %s", what, err.msg);
    if (ok) {
        T_CHECKF(rep.merged > 0, "[%s] nothing merged", what);
        float *with = logits_of(m, &set, false), *plain = logits_of(m, NULL, false), *ref = logits_of(mm, NULL, false);
        const size_t total = (size_t)m->hp.n_vocab * N_TOK;
        double scale, moved;
        if (with && ref && plain) {
            const double d = max_diff(with, ref, total, &scale);
            moved = max_diff(with, plain, total, &scale);
            T_CHECKF(d <= 2e-4 * (1.0 + scale), "[%s] adapters against the merged model: %.3g (logits up to %.3g)", what,
                     d, scale);
            T_CHECKF(moved > 50 * d && moved > 1e-2, "[%s] the adapters hardly change the logits (%.3g)", what, moved);
        }
        free(with), free(plain), free(ref);
    }
    for (int i = 0; i < n; i++) lora_free(la[i]);
    model_free(mm);
    model_free(m);
    remove(merged);
}

/* Every architecture's adaptable matrices, each type, ranks 8 and 64, and a stack. */
static void test_against_merge(void) {
    static const struct {
        const char *arch;
        int experts;
    } archs[] = {{"llama", 0}, {"llama", 4}, {"phi3", 0}, {"qwen2moe", 4}, {"deepseek2", 4}, {"gemma2", 0}};
    static const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q8_0};
    char base[512], a1[512], a2[512];
    tu_tmp_path(base, sizeof base, "base.gguf");
    tu_tmp_path(a1, sizeof a1, "a1.gguf");
    tu_tmp_path(a2, sizeof a2, "a2.gguf");
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
        if (!synth_model(archs[i].arch, archs[i].experts, base)) continue;
        for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
            const int rank = types[k] == QT_Q8_0 ? 32 : (k % 2 ? 64 : 8);
            if (!synth_adapter(base, rank, types[k], 11 + k, a1)) continue;
            char what[96];
            snprintf(what, sizeof what, "%s%s, rank %d %s", archs[i].arch, archs[i].experts ? " moe" : "", rank,
                     quant_traits_of(types[k])->name);
            check_merge(what, base, (const char *const[]){a1}, (const float[]){1.0f}, 1);
        }
        if (synth_adapter(base, 8, QT_F32, 5, a1) && synth_adapter(base, 16, QT_F16, 6, a2)) {
            char what[96];
            snprintf(what, sizeof what, "%s: two stacked at 0.5 and 1.5", archs[i].arch);
            check_merge(what, base, (const char *const[]){a1, a2}, (const float[]){0.5f, 1.5f}, 2);
        }
    }
    remove(base), remove(a1), remove(a2);
}

/* Scale 0: the base bit for bit; decode rows equal a whole pass's rows; a batch of different sets equals each alone. */
static void test_exactness(void) {
    char base[512], a1[512], a2[512];
    tu_tmp_path(base, sizeof base, "xbase.gguf");
    tu_tmp_path(a1, sizeof a1, "xa1.gguf");
    tu_tmp_path(a2, sizeof a2, "xa2.gguf");
    err_t err = {0};
    model *m = NULL;
    lora_adapter *l1 = NULL, *l2 = NULL;
    bool ok = synth_model("llama", 4, base) && synth_adapter(base, 8, QT_F16, 1, a1) &&
              synth_adapter(base, 16, QT_F32, 2, a2);
    ok = ok && model_load(base, &m, &err) == ERR_OK && lora_open(m, a1, &l1, &err) == ERR_OK &&
         lora_open(m, a2, &l2, &err) == ERR_OK;
    T_CHECKF(ok, "exactness: %s", err.msg);
    if (!ok) goto out;
    const size_t V = (size_t)m->hp.n_vocab;
    const lora_set zero = {.n = 2, .a = {l1, l2}, .scale = {0.0f, 0.0f}}, on = {.n = 2, .a = {l1, l2}, .scale = {1.0f, -0.7f}};
    const lora_set one = {.n = 1, .a = {l2}, .scale = {2.0f}};
    float *base_l = logits_of(m, NULL, false), *zero_l = logits_of(m, &zero, false);
    float *whole = logits_of(m, &on, false), *steps = logits_of(m, &on, true);
    if (base_l && zero_l) T_CHECK(memcmp(base_l, zero_l, sizeof(float) * V * N_TOK) == 0);
    if (whole && steps) T_CHECKF(memcmp(whole, steps, sizeof(float) * V * N_TOK) == 0, "decode rows differ from a whole pass's");
    /* a batch: sessions with on, one and none, twins alone */
    const lora_set *sets[3] = {&on, &one, NULL};
    session *s[3] = {0};
    float *lb[3] = {0};
    session_part parts[3];
    bool made = session_new(m, 64, QT_F32, 2, &s[0], &err) == ERR_OK;
    for (int i = 0; i < 3 && made; i++) {
        made = (i == 0 || session_new_shared(m, 64, &(kv_config){0}, s[0]->pool, &s[i], &err) == ERR_OK) &&
               session_set_lora(s[i], sets[i], &err) == ERR_OK && (lb[i] = malloc(sizeof(float) * V));
        if (made) made = session_eval(s[i], PROMPT, 4 + i, false, lb[i], &err) == ERR_OK;
    }
    T_CHECKF(made, "batch sessions: %s", err.msg);
    int32_t next[3] = {5, 9, 13};
    for (int i = 0; made && i < 3; i++) parts[i] = (session_part){.s = s[i], .tokens = &next[i], .n = 1, .logits = lb[i]};
    if (made) T_CHECKF(session_eval_batch(parts, 3, &err) == ERR_OK, "batch: %s", err.msg);
    for (int i = 0; made && i < 3; i++) { /* the same sequence alone */
        session *t = NULL;
        float *la = malloc(sizeof(float) * V), *tmp = malloc(sizeof(float) * V);
        int32_t seq[8];
        memcpy(seq, PROMPT, sizeof(int32_t) * (size_t)(4 + i));
        seq[4 + i] = next[i];
        bool fine = la && tmp && session_new(m, 64, QT_F32, 2, &t, &err) == ERR_OK &&
                    session_set_lora(t, sets[i], &err) == ERR_OK && session_eval(t, seq, 4 + i, false, tmp, &err) == ERR_OK &&
                    session_eval(t, seq + 4 + i, 1, false, la, &err) == ERR_OK;
        T_CHECKF(fine, "twin %d: %s", i, err.msg);
        if (fine) T_CHECKF(memcmp(la, lb[i], sizeof(float) * V) == 0, "session %d's logits batched differ from alone", i);
        session_free(t);
        free(la), free(tmp);
    }
    for (int i = 2; i >= 0; i--) session_free(s[i]), free(lb[i]);
    free(base_l), free(zero_l), free(whole), free(steps);
out:
    lora_free(l1), lora_free(l2);
    model_free(m);
    remove(base), remove(a1), remove(a2);
}

/* ---------------------------------------------------------------- hostile adapters */

typedef struct {
    const char *name;
    uint32_t type;
    int64_t ne[3];
    float value; /* every value */
} t_spec;

static err_code write_adapter(const char *path, const char *gtype, const char *arch, const t_spec *ts, int n) {
    gguf_writer *w = gguf_writer_new();
    err_t err = {0};
    if (gtype) gguf_writer_set_str(w, "general.type", gtype);
    gguf_writer_set_str(w, "general.architecture", arch);
    gguf_writer_set_str(w, "adapter.type", "lora");
    gguf_writer_set_f32(w, "adapter.lora.alpha", 4.0f);
    err_code rc = ERR_OK;
    for (int i = 0; i < n && !rc; i++) {
        const int64_t count = ts[i].ne[0] * ts[i].ne[1] * ts[i].ne[2];
        float *v = malloc(sizeof(float) * (size_t)count);
        uint8_t *q = malloc(quant_row_bytes(ts[i].type, ts[i].ne[0]) * (size_t)(count / ts[i].ne[0]) + 64);
        for (int64_t k = 0; k < count; k++) v[k] = ts[i].value * (float)((k % 7) - 3);
        const size_t rb = quant_row_bytes(ts[i].type, ts[i].ne[0]);
        for (int64_t r = 0; r < count / ts[i].ne[0]; r++)
            quant_quantize_row(ts[i].type, v + r * ts[i].ne[0], q + (size_t)r * rb, ts[i].ne[0]);
        if (ts[i].value != ts[i].value) memcpy(q, &ts[i].value, 4); /* a NaN kept as it is (F32) */
        rc = gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].ne[2] > 1 ? 3 : 2, ts[i].ne, q, &err);
        free(v), free(q);
    }
    if (!rc) rc = gguf_writer_write(w, path, NULL, NULL, &err);
    gguf_writer_free(w);
    return rc;
}

static void expect_refused(const model *m, const char *what, const char *gtype, const char *arch, const t_spec *ts,
                           int n, err_code want, const char *says) {
    char path[512];
    tu_tmp_path(path, sizeof path, "hostile.gguf");
    if (write_adapter(path, gtype, arch, ts, n)) {
        T_CHECKF(0, "[%s] could not write the adapter", what);
        return;
    }
    err_t err = {0};
    lora_adapter *a = NULL;
    const err_code rc = lora_open(m, path, &a, &err);
    T_CHECKF(rc == want && a == NULL && strstr(err.msg, says), "[%s] rc %d (want %d): '%s' (want '%s')", what, rc, want,
             err.msg, says);
    lora_free(a);
    remove(path);
}

static void test_hostile(void) {
    char base[512];
    tu_tmp_path(base, sizeof base, "hbase.gguf");
    err_t err = {0};
    model *m = NULL;
    if (!synth_model("llama", 0, base) || model_load(base, &m, &err)) {
        T_CHECKF(0, "hostile: %s", err.msg);
        return;
    }
    const int64_t E = m->hp.n_embd, Q = (int64_t)m->hp.n_head * m->hp.head_dim;
    const t_spec good[2] = {{"blk.0.attn_q.weight.lora_a", QT_F32, {E, 4, 1}, 0.01f},
                            {"blk.0.attn_q.weight.lora_b", QT_F32, {4, Q, 1}, 0.01f}};
    char path[512];
    tu_tmp_path(path, sizeof path, "good.gguf");
    lora_adapter *a = NULL;
    T_CHECKF(write_adapter(path, "adapter", "llama", good, 2) == ERR_OK && lora_open(m, path, &a, &err) == ERR_OK &&
                 lora_n_matrices(a) == 1 && lora_find(a, 0, LORA_Q) && !lora_find(a, 1, LORA_Q),
             "a good adapter: %s", err.msg);
    if (a) T_NEAR(lora_scale(a, lora_find(a, 0, LORA_Q), 2.0f), 2.0f * 4.0f / 4.0f, 0);
    lora_free(a);
    remove(path);
    expect_refused(m, "general.type", "model", "llama", good, 2, ERR_BAD_VALUE, "not 'adapter'");
    expect_refused(m, "no general.type", NULL, "llama", good, 2, ERR_MISSING_KEY, "general.type");
    expect_refused(m, "architecture", "adapter", "qwen2", good, 2, ERR_BAD_VALUE, "'qwen2', the model is 'llama'");
    expect_refused(m, "missing B", "adapter", "llama", good, 1, ERR_MISSING_TENSOR, "no 'blk.0.attn_q.weight.lora_b'");
    t_spec bad[2] = {good[0], good[1]};
    bad[0].ne[0] = E + 32;
    expect_refused(m, "shape", "adapter", "llama", bad, 2, ERR_BAD_SHAPE, "another base shape");
    bad[0] = good[0], bad[1].ne[0] = 5;
    expect_refused(m, "ranks", "adapter", "llama", bad, 2, ERR_BAD_SHAPE, "rank");
    bad[1] = good[1], bad[0].value = NAN;
    expect_refused(m, "NaN", "adapter", "llama", bad, 2, ERR_BAD_VALUE, "not a finite number");
    bad[0] = good[0], bad[0].type = bad[1].type = QT_Q4_0, bad[1].ne[0] = 32, bad[0].ne[1] = 32;
    expect_refused(m, "type", "adapter", "llama", bad, 2, ERR_UNSUPPORTED, "F32, F16, BF16 and Q8_0");
    const t_spec far[2] = {{"blk.99.attn_q.weight.lora_a", QT_F32, {E, 4, 1}, 0.01f},
                           {"blk.99.attn_q.weight.lora_b", QT_F32, {4, Q, 1}, 0.01f}};
    expect_refused(m, "layer", "adapter", "llama", far, 2, ERR_MISSING_TENSOR, "does not have");
    const t_spec emb[2] = {{"token_embd.weight.lora_a", QT_F32, {E, 4, 1}, 0.01f},
                           {"token_embd.weight.lora_b", QT_F32, {4, 300, 1}, 0.01f}};
    expect_refused(m, "embedding", "adapter", "llama", emb, 2, ERR_UNSUPPORTED, "token embedding");
    const t_spec odd[1] = {{"blk.0.attn_q.weight.lora_c", QT_F32, {E, 4, 1}, 0.01f}};
    expect_refused(m, "suffix", "adapter", "llama", odd, 1, ERR_BAD_VALUE, "not a LoRA tensor");
    expect_refused(m, "empty", "adapter", "llama", good, 0, ERR_BAD_VALUE, "no LoRA tensors");
    const t_spec norm[2] = {{"blk.0.attn_norm.weight.lora_a", QT_F32, {E, 4, 1}, 0.01f},
                            {"blk.0.attn_norm.weight.lora_b", QT_F32, {4, 1, 1}, 0.01f}};
    expect_refused(m, "a norm", "adapter", "llama", norm, 2, ERR_UNSUPPORTED, "cannot apply LoRA");
    /* a truncated file */
    tu_tmp_path(path, sizeof path, "cut.gguf");
    if (write_adapter(path, "adapter", "llama", good, 2) == ERR_OK) {
        size_t size = 0;
        unsigned char *bytes = tu_read_file(path, &size);
        T_CHECK(bytes && tu_write_file(path, bytes, size - 100));
        T_CHECKF(lora_open(m, path, &a, &err) != ERR_OK && a == NULL, "a truncated adapter loaded");
        free(bytes);
    }
    remove(path);
    model_free(m);
    remove(base);
}

/* The greedy text of 16 tokens in the model's own conversation. */
static void text_of(octo_model *m, char *out, size_t cap) {
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = 16, gp.temperature = 0.0f, gp.spec = OCTO_SPEC_NONE;
    octo_stream *st = octo_generate(m, "Once upon a time", &gp);
    size_t n = 0;
    out[0] = '\0';
    for (const char *p; st && (p = octo_stream_next(st)) && n + strlen(p) < cap; n += strlen(p)) strcat(out, p);
    T_CHECKF(st && octo_stream_status(st) == OCTO_OK, "generate: %s", st ? octo_stream_error(st) : octo_model_error(m));
    octo_stream_free(st);
}

static void test_api_pressure(void) {
    char base[512], a1[512], a2[512];
    tu_tmp_path(base, sizeof base, "pbase.gguf");
    tu_tmp_path(a1, sizeof a1, "pa1.gguf");
    tu_tmp_path(a2, sizeof a2, "pa2.gguf");
    if (!synth_model("llama", 0, base) || !synth_adapter(base, 8, QT_F16, 3, a1) || !synth_adapter(base, 4, QT_F32, 4, a2))
        return;
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.memory_watch = -1; /* the app's signal only */
    octo_model *m = c ? octo_load_model(c, base, &mo) : NULL;
    octo_adapter *x = m ? octo_adapter_load(m, a1) : NULL, *y = m ? octo_adapter_load(m, a2) : NULL;
    T_CHECKF(x && y, "load: %s", m ? octo_model_error(m) : octo_last_error(c));
    if (!x || !y) goto out;
    const octo_adapter_info ix = octo_adapter_info_get(x), iy = octo_adapter_info_get(y);
    T_CHECK(ix.rank_min == 8 && ix.rank_max == 8 && ix.n_matrices > 0 && ix.alpha == 4.0f && ix.bytes > 0);
    char plain[512], with[512], again[512];
    text_of(m, plain, sizeof plain);
    T_EQ_INT(octo_set_adapters(m, &y, NULL, 1), OCTO_OK);
    text_of(m, with, sizeof with);
    T_CHECKF(strcmp(plain, with) != 0, "the adapter changes nothing: %s", with);
    T_EQ_INT(octo_model_stats(m).adapter_bytes, ix.bytes + iy.bytes);
    T_EQ_INT(octo_model_trim(m, OCTO_TRIM_LOW), OCTO_OK); /* x is held by no one: dropped; y is in use */
    octo_stats st = octo_model_stats(m);
    T_EQ_INT(st.mem_released_adapter_bytes, ix.bytes);
    T_EQ_INT(st.adapter_bytes, iy.bytes);
    text_of(m, again, sizeof again);
    T_CHECKF(!strcmp(with, again), "with the adapter after a trim: %s, before %s", again, with);
    T_EQ_INT(octo_set_adapters(m, &x, (const float[]){0.0f}, 1), OCTO_OK); /* read again */
    T_EQ_INT(octo_model_stats(m).adapter_bytes, ix.bytes + iy.bytes);
    text_of(m, again, sizeof again);
    T_CHECKF(!strcmp(plain, again), "scale 0 after reading again: %s, the base %s", again, plain);
    T_EQ_INT(octo_set_adapters(m, &x, (const float[]){NAN}, 1), OCTO_ERR_INVALID_ARG);
    T_EQ_INT(octo_set_adapters(m, NULL, NULL, 9), OCTO_ERR_INVALID_ARG);
    octo_adapter_free(x); /* in use: kept until the conversation sets others */
    text_of(m, again, sizeof again);
    T_CHECK(!strcmp(plain, again));
    T_EQ_INT(octo_set_adapters(m, NULL, NULL, 0), OCTO_OK);
    T_EQ_INT(octo_model_stats(m).adapter_bytes, iy.bytes);
out:
    octo_model_free(m);
    octo_adapter_free(y); /* after its model: only freed */
    octo_client_free(c);
    remove(base), remove(a1), remove(a2);
}

/* The adapters' bytes come off a KV budget the plan derived from free memory, and go back when freed. */
static void test_api_plan(void) {
    char base[512], a1[512];
    tu_tmp_path(base, sizeof base, "qbase.gguf");
    tu_tmp_path(a1, sizeof a1, "qa1.gguf");
    if (!synth_model("llama", 0, base) || !synth_adapter(base, 64, QT_F32, 5, a1)) return;
    octo_client_options co = octo_client_options_defaults();
    co.device = "android-4gb-emmc"; /* 2 GiB free: a 4M-token context's cache gets a budget that binds */
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = 1 << 22, mo.memory_watch = -1, mo.max_sessions = 2;
    octo_model *m = c ? octo_load_model(c, base, &mo) : NULL;
    T_CHECKF(m, "load: %s", c ? octo_last_error(c) : "no client");
    if (!m) goto out;
    const uint64_t before = octo_model_stats(m).kv_budget_bytes;
    octo_adapter *a = octo_adapter_load(m, a1);
    T_CHECKF(a, "adapter: %s", octo_model_error(m));
    if (a) {
        const uint64_t bytes = octo_adapter_info_get(a).bytes;
        T_CHECK(before > 0 && bytes > 0);
        T_EQ_INT(octo_model_stats(m).kv_budget_bytes, before - bytes / 2); /* two sessions' shares */
        octo_adapter_free(a);
        T_EQ_INT(octo_model_stats(m).kv_budget_bytes, before);
    }
    octo_model_free(m);
out:
    octo_client_free(c);
    remove(base), remove(a1);
}

int main(void) {
    test_api_plan();
    test_api_pressure();
    test_hostile();
    test_exactness();
    test_against_merge();
    T_DONE();
}
