/*
 * test_finetune — `octo finetune`'s parts and the whole, on stories260K (the
 * copy in models/; no ../shared needed):
 *
 * - a new adapter (lora_create) starts as the base exactly (B = 0: the same
 *   loss to the bit), and lora_write / lora_open give back every value
 *   bit for bit in F32 (and within F16's rounding in F16);
 * - data (train/data.h): text is cut into sequences of seq_len tokens, all
 *   counted; in chat JSONL exactly the assistants' tokens count (their text
 *   decoded back from the counted targets); bad lines are refused by number;
 * - training (octo_finetune) lowers the held-out loss of text of the same
 *   kind; the adapter it writes loads for inference (octo_adapter_load);
 * - a run stopped at step 5 and resumed from its checkpoint writes the same
 *   adapter bytes as a run never stopped; a checkpoint of other options is
 *   refused by the option's name, a damaged one as corrupt;
 * - every weight trained: a whole model GGUF that loads; distilled back
 *   towards the base, its held-out KL from the teacher falls, a stopped
 *   distillation resumes to the same bytes, a teacher of another vocabulary
 *   is refused;
 * - memory pressed throughout (the watcher's hook): every sequence
 *   computed again, the same adapter values; the same with the threads in
 *   force changed before every sequence (CPU adaptation's hook);
 * - a memory budget below what keeping every activation takes: each layer
 *   is computed again, to the same adapter bytes; below what even that
 *   takes: refused, naming the --seq-len that fits;
 * - the API's refusals: no data, an unknown target, an MoE of a gating
 *   training does not cover (qwen2moe's);
 * - an MoE's experts (synthetic, routers zero: experts 2..7 never reached):
 *   those end bit for bit as they began, the others moved, the run's
 *   tokens per expert say which, and a stopped run resumes to the same
 *   values and counts.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octo.h"
#include "core/quant.h"
#include "model/chat_template.h"
#include "model/experts_iface.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/tokenizer.h"
#include "t.h"
#include "train/backward.h"
#include "train/data.h"
#include "train/finetune.h"
#include "train/weights.h"
#include "util.h"

/* Stories of one shape: the training text and, with other names, the held-out text. */
static char *stories(const char *const *names, int n_names, int reps) {
    static const char *const shapes[] = {
        "Once upon a time there was a little %s. The %s liked to play in the park with a red ball. ",
        "One day the %s saw a big tree. The %s was happy and said hello to the tree. ",
        "The %s went home and ate a cake. Then the %s went to bed and had a good sleep.\n"};
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
    for (int r = 0; r < reps && s; r++)
        for (int i = 0; i < n_names; i++)
            for (int k = 0; k < 3; k++) len += (size_t)snprintf(s + len, cap - len, shapes[k], names[i], names[i]);
    return s;
}

static bool write_text(const char *path, const char *text) { return tu_write_file(path, text, strlen(text)); }

/* Training stories of four animals to data, held-out ones of two others to valid. */
static bool write_stories(const char *data, const char *valid) {
    const char *train_names[] = {"cat", "dog", "bird", "fish"}, *valid_names[] = {"frog", "bear"};
    char *tt = stories(train_names, 4, 4), *vt = stories(valid_names, 2, 1);
    const bool ok = tt && vt && write_text(data, tt) && write_text(valid, vt);
    free(tt), free(vt);
    return ok;
}

static bool same_files(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    const bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

static bool always(void *user) {
    (void)user;
    return true;
}

/* The threads in force changed before every sequence (as a CPU quota that comes and goes makes
 * runtime/cpu_adapt change them): 2, 1, 2, ... */
static void flip_threads(void *user) {
    tpool *p = user;
    tpool_set_active(p, tpool_active(p) == 1 ? 2 : 1);
}

/* Memory pressed throughout (finetune_opts.pressed): every sequence is computed again, and the adapter
 * ends as an unpressed run's, bit for bit; so does a run whose threads change before every sequence. */
static void test_pressed(const model *m, const tokenizer *tok) {
    char path[512];
    tu_tmp_path(path, sizeof path, "fp-train.txt");
    const char *names[] = {"cat", "dog"};
    char *tt = stories(names, 2, 2);
    T_CHECK(tt && write_text(path, tt));
    free(tt);
    err_t err = {0};
    train_data d;
    lora_adapter *a[3] = {0};
    finetune_result res[3];
    train_ctx *tc = NULL;
    T_CHECKF(train_data_load(tok, CHAT_PLAIN, path, 32, &d, &err) == ERR_OK && train_ctx_new(2, &tc, &err) == ERR_OK,
             "%s", err.msg);
    for (int i = 0; i < 3; i++) {
        lora_init_opts lo = lora_init_defaults();
        lo.rank = 2;
        finetune_opts o = finetune_defaults();
        o.steps = 3, o.batch = 2, o.opt.warmup = 1;
        if (i == 1) o.pressed = always;
        if (i == 2) o.tc = tc, o.adapt = flip_threads, o.adapt_user = train_ctx_pool(tc);
        T_CHECKF(lora_create(m, &lo, &a[i], &err) == ERR_OK &&
                     finetune_run(m, a[i], NULL, &d, &o, NULL, NULL, &res[i], &err) == ERR_OK, "%s", err.msg);
    }
    size_t n0 = 0, n1 = 0;
    const float *v0 = a[0] ? lora_values(a[0], &n0) : NULL, *v1 = a[1] ? lora_values(a[1], &n1) : NULL;
    T_CHECK(res[0].pressed == 0 && res[1].pressed == 6 && !res[1].recompute);
    T_CHECKF(v0 && v1 && n0 == n1 && !memcmp(v0, v1, n0 * sizeof(float)), "pressed: other values");
    size_t n2 = 0;
    const float *v2 = a[2] ? lora_values(a[2], &n2) : NULL;
    T_CHECKF(v0 && v2 && n0 == n2 && !memcmp(v0, v2, n0 * sizeof(float)) && train_ctx_pool(tc) &&
                 tpool_active(train_ctx_pool(tc)) == 2, "threads changing: other values");
    train_ctx_free(tc);
    lora_free(a[0]), lora_free(a[1]), lora_free(a[2]);
    train_data_free(&d);
    remove(path);
}

/* ---------------------------------------------------------------- a mixture of experts */

/* A synthetic Mixtral-gated MoE (8 experts, 2 a token) whose routers are all zero: every token takes
 * experts 0 and 1 (a tie goes to the lower index), so experts 2..7 are never reached. */
static model *zero_router_moe(const char *path) {
    char src[512];
    tu_tmp_path(src, sizeof src, "ft-moe-src.gguf");
    synth_opts so = synth_defaults();
    so.n_expert = 8, so.n_expert_used = 2;
    err_t err = {0};
    model *m = NULL, *out = NULL;
    train_weights *w = NULL;
    bool ok = synth_write(&so, src, &err) == ERR_OK && model_open(src, &m, &err) == ERR_OK &&
              train_weights_new(m, &w, &err) == ERR_OK;
    size_t n = 0;
    float *v = ok ? train_weights_values(w, &n) : NULL;
    for (int l = 0; ok && l < m->hp.n_layer; l++) {
        const model_mat *r = &train_weights_model(w)->layers[l].gate_inp;
        float *at = train_weights_grad(w, v, r);
        if (at) memset(at, 0, sizeof(float) * (size_t)(r->n_in * r->n_out));
        ok = at != NULL;
    }
    ok = ok && train_weights_write(w, NULL, path, &err) == ERR_OK && model_open(path, &out, &err) == ERR_OK;
    T_CHECKF(ok, "zero-router MoE: %s", err.msg);
    train_weights_free(w);
    model_free(m);
    remove(src);
    return out;
}

static bool stop_at_3(void *user, const finetune_progress *p) {
    (void)user;
    return p->step != 3;
}

/* Every weight of the zero-router MoE, one step (its routes are the zero routers': experts 0 and 1), weight
 * decay on: the stack slices of experts 2..7 are bit for bit the file's, those of 0 and 1 moved. */
static void test_moe_full(const model *m, const train_data *d) {
    err_t err = {0};
    train_weights *w = NULL;
    finetune_opts o = finetune_defaults();
    o.steps = 1, o.batch = 2, o.opt.warmup = 0, o.opt.weight_decay = 0.1f;
    finetune_result res;
    T_CHECKF(train_weights_new(m, &w, &err) == ERR_OK && finetune_run(m, NULL, w, d, &o, NULL, NULL, &res, &err) == ERR_OK,
             "%s", err.msg);
    int wrong = 0;
    for (int l = 0; w && l < m->hp.n_layer; l++)
        for (int e = 0; e < 8; e++) {
            model_mat before[3], after[3];
            model_expert_mats(m, l, e, before);
            model_expert_mats(train_weights_model(w), l, e, after);
            for (int i = 0; i < 3; i++) /* the file's stacks are F32 (synth) */
                wrong += !memcmp(before[i].data, after[i].data, sizeof(float) * (size_t)(before[i].n_in * before[i].n_out)) != (e >= 2);
        }
    T_CHECKF(w && wrong == 0, "every weight, one step: %d expert matrices frozen or moved against their routes", wrong);
    train_weights_free(w);
}

/* An adapter of the experts trained 6 steps (weight decay on): experts no token reached end as they
 * began, bit for bit, the others moved; the run's token counts say which; a run stopped at step 3 and
 * resumed ends with the same values and counts. */
static void test_moe_experts(void) {
    char path[512], text[512], ck[512];
    tu_tmp_path(path, sizeof path, "ft-moe.gguf");
    tu_tmp_path(text, sizeof text, "ft-moe.txt");
    tu_tmp_path(ck, sizeof ck, "ft-moe.ckpt");
    model *m = zero_router_moe(path);
    tokenizer *tok = NULL;
    err_t err = {0};
    const char *names[] = {"cat", "dog"};
    char *tt = stories(names, 2, 2);
    train_data d = {0};
    const bool ok = m && tt && write_text(text, tt) && tokenizer_load(m->gguf, &tok, &err) == ERR_OK &&
                    train_data_load(tok, CHAT_PLAIN, text, 24, &d, &err) == ERR_OK;
    free(tt);
    T_CHECKF(ok, "moe data: %s", err.msg);
    lora_adapter *a[2] = {0};
    int64_t counts[2][16] = {{0}};
    for (int i = 0; ok && i < 2; i++) {
        lora_init_opts lo = lora_init_defaults();
        lo.rank = 2, lo.kinds = (1u << LORA_GATE) | (1u << LORA_UP) | (1u << LORA_DOWN);
        finetune_opts o = finetune_defaults();
        o.steps = 6, o.batch = 2, o.opt.warmup = 1, o.opt.weight_decay = 0.1f, o.expert_tokens = counts[i];
        o.checkpoint = i ? ck : NULL;
        finetune_result res;
        T_CHECKF(lora_create(m, &lo, &a[i], &err) == ERR_OK, "%s", err.msg);
        if (i) T_EQ_INT(finetune_run(m, a[i], NULL, &d, &o, stop_at_3, NULL, &res, &err), ERR_CANCELLED);
        T_CHECKF(finetune_run(m, a[i], NULL, &d, &o, NULL, NULL, &res, &err) == ERR_OK, "%s", err.msg);
    }
    lora_adapter *fresh = NULL;
    lora_init_opts lo = lora_init_defaults();
    lo.rank = 2, lo.kinds = (1u << LORA_GATE) | (1u << LORA_UP) | (1u << LORA_DOWN);
    T_CHECK(ok && lora_create(m, &lo, &fresh, &err) == ERR_OK);
    int same = 0, moved = 0;
    for (int l = 0; fresh && a[0] && l < m->hp.n_layer; l++)
        for (int k = LORA_GATE; k <= LORA_DOWN; k++) {
            const lora_tensor *t0 = lora_find(fresh, l, (lora_kind)k), *t1 = lora_find(a[0], l, (lora_kind)k);
            const size_t ra = (size_t)t0->rank * (size_t)t0->n_in, rb = (size_t)t0->rank * t0->bt_stride;
            for (int e = 0; e < 8; e++) {
                /* A and B both: B starts at 0, so a reached expert's B must have left it */
                const bool kept = !memcmp(t0->a + e * ra, t1->a + e * ra, sizeof(float) * ra) &&
                                  !memcmp(t0->bt + e * rb, t1->bt + e * rb, sizeof(float) * rb);
                T_CHECKF(kept == (e >= 2), "layer %d kind %d expert %d: %s", l, k, e, kept ? "unchanged" : "moved");
                same += kept, moved += !kept;
                T_CHECKF((counts[0][l * 8 + e] > 0) == (e < 2), "layer %d expert %d: %lld tokens", l, e,
                         (long long)counts[0][l * 8 + e]);
            }
        }
    printf("moe: %d expert slices unchanged (never reached), %d trained; tokens of layer 0's experts 0, 1: %lld, %lld\n",
           same, moved, (long long)counts[0][0], (long long)counts[0][1]);
    size_t n0 = 0, n1 = 0;
    const float *v0 = a[0] ? lora_values(a[0], &n0) : NULL, *v1 = a[1] ? lora_values(a[1], &n1) : NULL;
    T_CHECKF(v0 && v1 && n0 == n1 && !memcmp(v0, v1, n0 * sizeof(float)) && !memcmp(counts[0], counts[1], sizeof counts[0]),
             "moe: the resumed run differs");
    lora_free(fresh), lora_free(a[0]), lora_free(a[1]);
    if (ok) test_moe_full(m, &d);
    train_data_free(&d);
    tokenizer_free(tok);
    model_free(m);
    remove(path), remove(text), remove(ck);
}

/* ---------------------------------------------------------------- the adapter */

static void test_create_write(const model *m) {
    err_t err = {0};
    lora_init_opts o = lora_init_defaults();
    o.rank = 4, o.seed = 7;
    lora_adapter *a = NULL, *back = NULL;
    T_CHECKF(lora_create(m, &o, &a, &err) == ERR_OK, "%s", err.msg);
    if (!a) return;
    const int32_t tok[12] = {1, 400, 30, 281, 9, 77, 123, 5, 88, 300, 41, 2};
    double base = 0, with = 0;
    T_CHECK(train_loss_grad(NULL, m, &(train_spec){.a = NULL, .scale = 1.0f}, tok, 12, NULL, &base, NULL, &err) == ERR_OK);
    T_CHECK(train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.0f}, tok, 12, NULL, &with, NULL, &err) == ERR_OK);
    T_CHECKF(base == with, "a new adapter changes the loss: %.9f vs %.9f", base, with);
    T_CHECK(lora_n_matrices(a) == 7 * m->hp.n_layer);
    size_t n = 0;
    float *v = lora_values(a, &n);
    for (size_t i = 0; i < n; i++) v[i] += 1e-3f * (float)((i * 2654435761u) % 2001) - 1.0f; /* B non-zero too */
    char path[512];
    tu_tmp_path(path, sizeof path, "ft-write.gguf");
    for (int f = 0; f < 2; f++) {
        const uint32_t type = f ? QT_F16 : QT_F32;
        T_CHECKF(lora_write(m, a, type, NULL, NULL, path, &err) == ERR_OK, "%s", err.msg);
        T_CHECKF(lora_open(m, path, &back, &err) == ERR_OK, "%s", err.msg);
        if (!back) continue;
        size_t nb = 0;
        const float *w = lora_values(back, &nb);
        double worst = 0.0;
        for (size_t i = 0; i < n && nb == n; i++) worst = fmax(worst, fabs((double)w[i] - v[i]) / fmax(1.0, fabs(v[i])));
        T_CHECKF(nb == n && worst <= (f ? 1e-3 : 0.0), "%s round trip: %zu of %zu values, worst relative %.3g",
                 f ? "F16" : "F32", nb, n, worst);
        printf("written and read back in %s: %zu values, worst relative difference %.3g\n", f ? "F16" : "F32", n, worst);
        lora_free(back), back = NULL;
    }
    remove(path);
    lora_free(a);
}

/* ---------------------------------------------------------------- data */

static void test_text_data(const tokenizer *tok) {
    char path[512];
    tu_tmp_path(path, sizeof path, "ft-text.txt");
    const char *names[] = {"cat", "dog"};
    char *text = stories(names, 2, 3);
    T_CHECK(text && write_text(path, text));
    train_data d;
    err_t err = {0};
    T_CHECKF(train_data_load(tok, CHAT_PLAIN, path, 32, &d, &err) == ERR_OK, "%s", err.msg);
    tok_list all = {0};
    tokenizer_encode(tok, text, strlen(text), true, false, &all, &err);
    const int whole = all.n - (all.n % 32 == 1); /* a last piece of 1 token teaches nothing: dropped */
    T_CHECKF(d.n_tokens == whole && d.n_seq == (whole + 31) / 32, "%lld tokens in %d sequences from %d tokens",
             (long long)d.n_tokens, d.n_seq, all.n);
    T_CHECK(d.n_tokens > 0 && !memcmp(d.tokens, all.ids, sizeof(int32_t) * (size_t)d.n_tokens));
    T_CHECK(d.n_counted == d.n_tokens - d.n_seq); /* all but each sequence's last */
    for (int i = 0; i < d.n_seq; i++) T_CHECK(d.start[i + 1] - d.start[i] <= 32);
    printf("text: %lld tokens, %d sequences of up to 32\n", (long long)d.n_tokens, d.n_seq);
    tok_list_free(&all);
    train_data_free(&d);
    free(text);
    remove(path);
}

static void test_chat_data(const tokenizer *tok) {
    char path[512];
    tu_tmp_path(path, sizeof path, "ft-chat.jsonl");
    const char *jsonl =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me about the cat.\"}, {\"role\": \"assistant\", "
        "\"content\": \"The cat was happy.\"}]}\n"
        "\n"
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be kind.\"}, {\"role\": \"user\", \"content\": \"Hi\"}, "
        "{\"role\": \"assistant\", \"content\": \"Hello there.\"}, {\"role\": \"user\", \"content\": \"And?\"}, "
        "{\"role\": \"assistant\", \"content\": \"The dog ran home.\"}]}\n";
    T_CHECK(write_text(path, jsonl));
    train_data d;
    err_t err = {0};
    T_CHECKF(train_data_load(tok, CHAT_PLAIN, path, 256, &d, &err) == ERR_OK, "%s", err.msg);
    T_CHECK(d.n_seq == 2 && d.n_chats == 2 && d.n_cut == 0);
    /* the counted targets of each sequence, decoded: exactly its assistants' turns */
    const char *want[2] = {"The cat was happy.", "Hello there.The dog ran home."};
    for (int s = 0; s < d.n_seq && s < 2; s++) {
        int32_t ids[256];
        int k = 0;
        for (int64_t t = d.start[s]; t + 1 < d.start[s + 1]; t++)
            if (d.mask[t]) ids[k++] = d.tokens[t + 1];
        char buf[512];
        const int len = tokenizer_decode(tok, ids, k, buf, sizeof buf - 1);
        buf[len > 0 ? len : 0] = '\0';
        /* SentencePiece puts a space before a part's first word: compare without spaces */
        char a[512], b[512];
        int na = 0, nb = 0;
        for (const char *p = buf; *p; p++) if (*p != ' ') a[na++] = *p;
        for (const char *p = want[s]; *p; p++) if (*p != ' ') b[nb++] = *p;
        a[na] = b[nb] = '\0';
        T_CHECKF(!strcmp(a, b), "conversation %d learns '%s', not '%s'", s, buf, want[s]);
    }
    printf("chat: %d conversations, %lld of %lld tokens counted\n", d.n_chats, (long long)d.n_counted, (long long)d.n_tokens);
    train_data_free(&d);
    /* cut at seq_len: the longer conversation (36 tokens) is cut, each sequence keeps a counted position */
    T_CHECKF(train_data_load(tok, CHAT_PLAIN, path, 24, &d, &err) == ERR_OK, "%s", err.msg);
    T_CHECKF(d.n_chats == 2 && d.n_cut == 1 && d.n_seq == 2, "%d conversations, %d cut, %d sequences", d.n_chats,
             d.n_cut, d.n_seq);
    for (int s = 0; s < d.n_seq; s++) {
        int counted = 0;
        for (int64_t t = d.start[s]; t < d.start[s + 1]; t++) counted += d.mask[t];
        T_CHECK(d.start[s + 1] - d.start[s] <= 24 && counted > 0);
    }
    train_data_free(&d);
    /* cut before any assistant token: nothing of it to learn, the sequence is dropped */
    T_CHECK(train_data_load(tok, CHAT_PLAIN, path, 4, &d, &err) == ERR_INVALID_ARG && strstr(err.msg, "no tokens"));
    /* hostile lines, each refused with its number */
    const char *bad[][2] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}\n{\"messages\": [", "line 2"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"only a question\"}]}\n", "no assistant"},
        {"{\"text\": \"no messages\"}\n", "\"messages\""},
        {"{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}\n", "role"},
        {"[1, 2]\n", "line 1"},
        {"\n\n", "no tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        T_CHECK(write_text(path, bad[i][0]));
        const err_code rc = train_data_load(tok, CHAT_PLAIN, path, 64, &d, &err);
        T_CHECKF(rc != ERR_OK && strstr(err.msg, bad[i][1]), "bad chat %zu: %d '%s'", i, rc, err.msg);
        printf("refused: %s\n", err.msg);
    }
    remove(path);
}

/* ---------------------------------------------------------------- training through the API */

typedef struct {
    int stop_at;
    int64_t last;
} stopper;

static int stop_cb(void *user, const octo_finetune_progress *p) {
    stopper *s = user;
    s->last = p->step;
    return s->stop_at && p->step >= s->stop_at;
}

static octo_finetune_params params(const char *data, const char *valid, const char *out) {
    octo_finetune_params p = octo_finetune_params_defaults();
    p.data = data, p.valid = valid, p.output = out;
    p.steps = 12, p.batch = 2, p.seq_len = 48, p.rank = 4, p.warmup = 2, p.lr = 3e-3f, p.checkpoint_every = 4;
    return p;
}

static void test_train_and_resume(const char *model_path) {
    char data[512], valid[512], out1[512], out2[512], ck[512];
    tu_tmp_path(data, sizeof data, "ft-train.txt");
    tu_tmp_path(valid, sizeof valid, "ft-valid.txt");
    tu_tmp_path(out1, sizeof out1, "ft-a.gguf");
    tu_tmp_path(out2, sizeof out2, "ft-b.gguf");
    tu_tmp_path(ck, sizeof ck, "ft-b.gguf.ckpt");
    T_CHECK(write_stories(data, valid));
    octo_client *c = octo_client_new(NULL);
    /* whole */
    octo_finetune_params p = params(data, valid, out1);
    stopper s = {0};
    p.on_progress = stop_cb, p.user = &s;
    octo_finetune_result r;
    T_CHECKF(octo_finetune(c, model_path, &p, &r) == OCTO_OK, "%s", octo_last_error(c));
    T_CHECKF(r.valid_after < r.valid_before - 0.05, "held-out loss %.4f -> %.4f", r.valid_before, r.valid_after);
    T_CHECK(s.last == 12 && r.steps_run == 12 && r.resumed_at == 0 && r.n_matrices == 35);
    printf("trained: loss %.4f -> %.4f, held-out %.4f -> %.4f in %.2f s\n", r.first_loss, r.last_loss,
           r.valid_before, r.valid_after, r.seconds);
    /* the adapter at inference */
    octo_model *m = octo_load_model(c, model_path, NULL);
    octo_adapter *ad = m ? octo_adapter_load(m, out1) : NULL;
    T_CHECKF(ad != NULL, "%s", m ? octo_model_error(m) : octo_last_error(c));
    octo_adapter_free(ad);
    octo_model_free(m);
    /* stopped at 5 (the checkpoint written), resumed: the same bytes */
    p = params(data, valid, out2);
    s = (stopper){.stop_at = 5};
    p.on_progress = stop_cb, p.user = &s;
    T_CHECK(octo_finetune(c, model_path, &p, &r) == OCTO_ERR_CANCELLED && strstr(octo_last_error(c), "resumes"));
    printf("stopped: %s\n", octo_last_error(c));
    /* other options: refused by name */
    octo_finetune_params q = p;
    q.lr = 2e-3f;
    T_CHECK(octo_finetune(c, model_path, &q, &r) == OCTO_ERR_INVALID_ARG && strstr(octo_last_error(c), "--lr"));
    printf("other options: %s\n", octo_last_error(c));
    q = p; /* gate for up: the same number of values, other matrices */
    q.targets = "q,k,v,o,gate,down";
    octo_finetune_params q2 = p;
    q2.targets = "q,k,v,o,up,down";
    T_CHECK(octo_finetune(c, model_path, &q, &r) == OCTO_ERR_INVALID_ARG && strstr(octo_last_error(c), "--targets up 1"));
    T_CHECK(octo_finetune(c, model_path, &q2, &r) == OCTO_ERR_INVALID_ARG && strstr(octo_last_error(c), "--targets gate 1"));
    printf("other targets: %s\n", octo_last_error(c));
    s.stop_at = 0;
    T_CHECKF(octo_finetune(c, model_path, &p, &r) == OCTO_OK, "%s", octo_last_error(c));
    T_CHECK(r.resumed_at == 5 && r.steps_run == 7);
    T_CHECKF(same_files(out1, out2), "a run stopped at 5 and resumed wrote other bytes than an unbroken one");
    FILE *f = fopen(ck, "rb");
    T_CHECKF(!f, "the checkpoint is left after the adapter was written");
    if (f) fclose(f);
    /* a damaged checkpoint */
    s.stop_at = 3;
    T_CHECK(octo_finetune(c, model_path, &p, &r) == OCTO_ERR_CANCELLED);
    size_t n = 0;
    unsigned char *b = tu_read_file(ck, &n);
    if (b && n > 100) b[n / 2] ^= 0x40;
    T_CHECK(b && tu_write_file(ck, b, n));
    free(b);
    s.stop_at = 0;
    T_CHECK(octo_finetune(c, model_path, &p, &r) == OCTO_ERR_CORRUPT);
    printf("damaged checkpoint: %s\n", octo_last_error(c));
    p.restart = 1; /* starts over: the same bytes again */
    T_CHECKF(octo_finetune(c, model_path, &p, &r) == OCTO_OK && r.resumed_at == 0 && same_files(out1, out2), "%s",
             octo_last_error(c));
    remove(data), remove(valid), remove(out1), remove(out2), remove(ck);
    octo_client_free(c);
}

/* Every weight trained (a whole model written), then distilled back towards the base: the held-out
 * loss, then the held-out KL from the teacher fall; a distillation resumed from its checkpoint ends
 * with the same bytes; an adapter on request; another vocabulary is refused. */
static void test_full_and_distill(const char *model_path) {
    char data[512], valid[512], full[512], d1[512], d2[512], ck[512], other[512];
    tu_tmp_path(data, sizeof data, "fd-train.txt");
    tu_tmp_path(valid, sizeof valid, "fd-valid.txt");
    tu_tmp_path(full, sizeof full, "fd-full.gguf");
    tu_tmp_path(d1, sizeof d1, "fd-d1.gguf");
    tu_tmp_path(d2, sizeof d2, "fd-d2.gguf");
    tu_tmp_path(ck, sizeof ck, "fd-d2.gguf.ckpt");
    tu_tmp_path(other, sizeof other, "fd-other.gguf");
    T_CHECK(write_stories(data, valid));
    octo_client *c = octo_client_new(NULL);
    /* every weight, on the text: the held-out loss falls; a whole model, loaded for inference */
    octo_finetune_params p = params(data, valid, full);
    p.full = 1, p.lr = 2e-3f;
    octo_finetune_result r;
    T_CHECKF(octo_finetune(c, model_path, &p, &r) == OCTO_OK, "%s", octo_last_error(c));
    printf("full: %d tensors, %llu values; held-out loss %.4f -> %.4f\n", r.n_matrices,
           (unsigned long long)r.adapter_values, r.valid_before, r.valid_after);
    T_CHECK(r.full == 1 && r.n_matrices == 48 && r.adapter_values > 200000);
    T_CHECKF(r.valid_after < r.valid_before - 0.05, "held-out loss %.4f -> %.4f", r.valid_before, r.valid_after);
    octo_model *m = octo_load_model(c, full, NULL);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    octo_model_free(m);
    /* that model distilled back towards the base (its teacher): the held-out KL falls */
    p = params(data, valid, d1);
    p.distill = model_path, p.steps = 8, p.lr = 2e-3f;
    T_CHECKF(octo_finetune(c, full, &p, &r) == OCTO_OK, "%s", octo_last_error(c));
    printf("distilled: KL from the teacher %.4f -> %.4f nats per token\n", r.valid_before, r.valid_after);
    T_CHECK(r.full == 1); /* a small model: every weight, unless asked otherwise */
    T_CHECKF(r.valid_before > 0.02 && r.valid_after < 0.8 * r.valid_before, "KL %.4f -> %.4f", r.valid_before,
             r.valid_after);
    /* stopped at 3 and resumed: the same bytes */
    p.output = d2;
    stopper s = {.stop_at = 3};
    p.on_progress = stop_cb, p.user = &s;
    T_CHECK(octo_finetune(c, full, &p, &r) == OCTO_ERR_CANCELLED);
    octo_finetune_params q = p;
    q.distill = NULL, q.full = 1;
    T_CHECKF(octo_finetune(c, full, &q, &r) == OCTO_ERR_INVALID_ARG && strstr(octo_last_error(c), "--distill"), "%s",
             octo_last_error(c));
    s.stop_at = 0;
    T_CHECKF(octo_finetune(c, full, &p, &r) == OCTO_OK && r.resumed_at == 3, "%s", octo_last_error(c));
    T_CHECKF(same_files(d1, d2), "a distillation stopped at 3 and resumed wrote other bytes than an unbroken one");
    /* an adapter instead, when asked */
    p = params(data, NULL, d2);
    p.distill = model_path, p.full = -1, p.steps = 2, p.restart = 1;
    T_CHECKF(octo_finetune(c, full, &p, &r) == OCTO_OK && r.full == 0 && r.n_matrices == 35, "%s", octo_last_error(c));
    /* a teacher of another vocabulary; an adapter type for a whole model */
    synth_opts so = synth_defaults();
    err_t err = {0};
    T_CHECK(synth_write(&so, other, &err) == ERR_OK);
    p.distill = other, p.full = 0;
    T_CHECKF(octo_finetune(c, full, &p, &r) == OCTO_ERR_BAD_VALUE && strstr(octo_last_error(c), "vocabulary"), "%s",
             octo_last_error(c));
    printf("another vocabulary: %s\n", octo_last_error(c));
    p.distill = model_path, p.type = "f16"; /* every weight by default here: no adapter type */
    T_CHECKF(octo_finetune(c, full, &p, &r) == OCTO_ERR_INVALID_ARG && strstr(octo_last_error(c), "F32"), "%s",
             octo_last_error(c));
    p.distill = NULL, p.full = 1, p.type = "f16";
    T_CHECK(octo_finetune(c, full, &p, &r) == OCTO_ERR_INVALID_ARG && strstr(octo_last_error(c), "F32"));
    remove(data), remove(valid), remove(full), remove(d1), remove(d2), remove(ck), remove(other);
    octo_client_free(c);
}

/* The memory budget: past what keeping every activation takes, each layer is computed again (the same
 * adapter bytes); below what even that takes, the run is refused, saying which --seq-len fits. */
static void test_budget(const char *model_path) {
    char data[512], out1[512], out2[512];
    tu_tmp_path(data, sizeof data, "fb-train.txt");
    tu_tmp_path(out1, sizeof out1, "fb-1.gguf");
    tu_tmp_path(out2, sizeof out2, "fb-2.gguf");
    const char *names[] = {"cat", "dog"};
    char *tt = stories(names, 2, 2);
    T_CHECK(tt && write_text(data, tt));
    free(tt);
    octo_client *c = octo_client_new(NULL);
    octo_finetune_params p = params(data, NULL, out1);
    p.steps = 3, p.memory_budget = 1ull << 30;
    octo_finetune_result r1, r2;
    T_CHECKF(octo_finetune(c, model_path, &p, &r1) == OCTO_OK && !r1.recompute, "%s", octo_last_error(c));
    p.output = out2, p.memory_budget = r1.activation_bytes - 1;
    T_CHECKF(octo_finetune(c, model_path, &p, &r2) == OCTO_OK && r2.recompute, "%s", octo_last_error(c));
    printf("budget: %.2f MiB keeping every activation, %.2f MiB computing each layer again\n",
           r1.activation_bytes / 1048576.0, r2.activation_bytes / 1048576.0);
    T_CHECK(r2.activation_bytes < r1.activation_bytes / 2 && r2.memory_budget == p.memory_budget);
    T_CHECKF(same_files(out1, out2), "computing each layer again changed the adapter");
    p.memory_budget = r2.activation_bytes / 2;
    T_CHECK(octo_finetune(c, model_path, &p, &r2) == OCTO_ERR_NOMEM && strstr(octo_last_error(c), "--seq-len "));
    printf("too small: %s\n", octo_last_error(c));
    remove(data), remove(out1), remove(out2);
    octo_client_free(c);
}

static void test_refusals(const char *model_path) {
    octo_client *c = octo_client_new(NULL);
    char data[512], out[512], moe[512], none[512];
    tu_tmp_path(data, sizeof data, "ft-r.txt");
    tu_tmp_path(out, sizeof out, "ft-r.gguf");
    tu_tmp_path(moe, sizeof moe, "ft-moe.gguf");
    tu_tmp_path(none, sizeof none, "ft-none.txt");
    T_CHECK(write_text(data, "Once upon a time there was a cat. The cat sat on the mat.\n"));
    octo_finetune_params p = params(data, NULL, out);
    struct {
        const char *what, *want;
        octo_status st;
    } cases[] = {{"no data", "data", OCTO_ERR_INVALID_ARG}, {"a bad target", "unknown target 'qq'", OCTO_ERR_INVALID_ARG},
                 {"a bad type", "q4_0", OCTO_ERR_INVALID_ARG}, {"a missing file", "ft-none", OCTO_ERR_NOT_FOUND},
                 {"an MoE of another gating", "Mixtral's", OCTO_ERR_UNSUPPORTED}};
    synth_opts so = synth_defaults();
    so.arch = "qwen2moe", so.n_expert = 4, so.n_expert_used = 2;
    err_t err = {0};
    T_CHECK(synth_write(&so, moe, &err) == ERR_OK);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        octo_finetune_params q = p;
        const char *model_path_i = model_path;
        if (i == 0) q.data = NULL;
        if (i == 1) q.targets = "q,qq";
        if (i == 2) q.type = "q4_0";
        if (i == 3) q.data = none;
        if (i == 4) model_path_i = moe;
        const octo_status st = octo_finetune(c, model_path_i, &q, NULL);
        T_CHECKF(st == cases[i].st && strstr(octo_last_error(c), cases[i].want), "%s: %d '%s'", cases[i].what, st,
                 octo_last_error(c));
        printf("%s: %s\n", cases[i].what, octo_last_error(c));
    }
    remove(data), remove(moe), remove(out);
    octo_client_free(c);
}

int main(void) {
    char path[512];
    tu_repo_model(path, sizeof path);
    model *m = NULL;
    err_t err = {0};
    T_CHECKF(model_open(path, &m, &err) == ERR_OK, "%s", err.msg);
    tokenizer *tok = NULL;
    if (m) T_CHECK(tokenizer_load(m->gguf, &tok, &err) == ERR_OK);
    if (m && tok) {
        test_create_write(m);
        test_text_data(tok);
        test_chat_data(tok);
        test_pressed(m, tok);
    }
    tokenizer_free(tok);
    model_free(m);
    test_train_and_resume(path);
    test_full_and_distill(path);
    test_budget(path);
    test_refusals(path);
    test_moe_experts();
    T_DONE();
}
