/*
 * test_spec — speculative decoding:
 *
 *   - the n-gram proposer proposes what followed the longest earlier match
 *     (hand-made sequences), and nothing without one;
 *   - lossless: with greedy sampling, n-gram speculation (adaptive draft
 *     length, and fixed k = 1, 3, 8) produces exactly the token ids of plain
 *     decoding, on stories260K for 60 prompts from the TinyStories text
 *     (half of them input-grounded: a story, then its own first words again),
 *     and on synthetic dense and MoE models; drafts must actually be
 *     accepted somewhere, or the test proves nothing;
 *   - the same with a draft model (a synthetic Q8_0 target, its Q4_0 copy as
 *     the draft), with lookahead decoding (whose pool's drafts are counted
 *     apart), and with repetition and presence penalties;
 *   - tree batches: lookahead passes with candidates right, then wrong, at
 *     random lengths: the trunk's logits equal plain decoding's bit for bit,
 *     the F32 cache afterwards equals plain decoding's entry for entry, and a
 *     window row equals plain decoding of its column's sequence;
 *   - sampled verification keeps the target's distribution: spec_verify on a
 *     position-dependent toy target, the first 3 tokens' joint distribution
 *     against the exact one (chi-square, failing at p < 2e-7), with a sampled
 *     draft and with a deterministic proposer; two deliberately wrong rules
 *     fail the same test (so it has the power to see a mistake);
 *   - end to end on a synthetic model: the first 3 tokens of 4000 sampled
 *     generations (temperature, top-k, top-p, min-p and a repetition
 *     penalty) with draft, n-gram and lookahead speculation against plain decoding, a
 *     two-sample chi-square test of homogeneity at the same level;
 *   - self-draft (a Q4_0 copy made at load): lossless and accepted on
 *     stories260K, the plan's reason when it is not made, an error when asked
 *     of a Q4_0 model;
 *   - a draft with another vocabulary, one larger than the target, and a
 *     corrupt draft file are clear errors;
 *   - the draft's cache within the model's KV budget (its share, through a
 *     generation that evicts); the draft on a pool placed on other cores
 *     (cores of different capacity), lossless.
 */
#define _GNU_SOURCE /* cpu_set_t */
#include <sched.h>
#include <string.h>

#include "core/quant.h"
#include "model/grammar.h"
#include "model/json_schema.h"
#include "model/model.h"
#include "model/sampler.h"
#include "octo.h"
#include "platform/cpu.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "speculative/adaptive.h"
#include "speculative/lookahead.h"
#include "speculative/ngram.h"
#include "speculative/verify.h"
#include "spec_toy.h"
#include "t.h"
#include "util.h"

static void test_ngram(void) {
    spec_ngram *g;
    err_t err = {0};
    T_CHECK(ngram_new(64, &g, &err) == ERR_OK);
    const int32_t a[] = {5, 6, 7, 8, 9, 1, 2, 3, 5, 6, 7};
    T_CHECK(ngram_push(g, a, 11, &err) == ERR_OK);
    int32_t out[8];
    /* suffix 5 6 7 matched at the start: 8 9 1 2 follow */
    int k = ngram_propose(g, 4, out);
    T_EQ_INT(k, 4);
    T_CHECK(k == 4 && out[0] == 8 && out[1] == 9 && out[2] == 1 && out[3] == 2);
    /* the continuation stops at the end of the context */
    k = ngram_propose(g, 10, out);
    T_EQ_INT(k, 8); /* positions 3 .. 10: 8 9 1 2 3 5 6 7 */
    /* no earlier occurrence of the last token: nothing */
    const int32_t b[] = {42};
    T_CHECK(ngram_push(g, b, 1, &err) == ERR_OK);
    T_EQ_INT(ngram_propose(g, 4, out), 0);
    /* then 7: "42 7" never occurred, "7" last did at position 10, followed by 42 */
    const int32_t c7[] = {7};
    T_CHECK(ngram_push(g, c7, 1, &err) == ERR_OK);
    k = ngram_propose(g, 3, out);
    T_CHECK(k >= 1 && out[0] == 42);
    ngram_free(g);
}

typedef struct {
    int32_t *ids;
    int n;
} gen_out;

static gen_out generate_with(octo_model *m, const char *prompt, const octo_generate_params *base, octo_spec_mode spec,
                             int k, int n_tokens, octo_stats *st) {
    octo_generate_params p = *base;
    p.max_tokens = n_tokens;
    p.spec = spec;
    p.spec_k = k;
    gen_out o = {NULL, 0};
    octo_stream *s = octo_generate(m, prompt, &p);
    if (!s) {
        T_CHECKF(0, "generate: %s", octo_model_error(m));
        return o;
    }
    while (octo_stream_next(s)) {
    }
    T_CHECKF(octo_stream_status(s) == OCTO_OK, "stream: %s", octo_stream_error(s));
    const int32_t *ids;
    o.n = octo_stream_tokens(s, &ids);
    o.ids = malloc(sizeof(int32_t) * (size_t)(o.n ? o.n : 1));
    memcpy(o.ids, ids, sizeof(int32_t) * (size_t)o.n);
    octo_stream_free(s);
    if (st) *st = octo_model_stats(m);
    return o;
}

static gen_out generate(octo_model *m, const char *prompt, octo_spec_mode spec, int k, int n_tokens, octo_stats *st) {
    octo_generate_params p = octo_generate_params_defaults();
    p.temperature = 0.0f;
    return generate_with(m, prompt, &p, spec, k, n_tokens, st);
}

/* Sampled, with a seed, n-gram and lookahead drafts give plain sampling's own
 * text, token for token: a deterministic proposer's drafts are checked
 * against the target's own draws (speculative/verify.h), so neither the
 * passes nor when speculation switches itself off (by the clock) change a
 * token. Before, they drew other random numbers, and a server's two seeded
 * requests could end in different words (tests/serve/client.py, 5-8 in 30). */
static void test_seeded_sampled(const char *path, char **prompts, int n_prompts) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    const octo_spec_mode modes[] = {OCTO_SPEC_NGRAM, OCTO_SPEC_NGRAM, OCTO_SPEC_LOOKAHEAD, OCTO_SPEC_AUTO};
    const int ks[] = {2, 6, 0, 0};
    int same = 0, runs = 0;
    long proposed = 0, accepted = 0;
    for (int i = 0; m && i < n_prompts; i++) {
        octo_generate_params p = octo_generate_params_defaults();
        p.temperature = i % 2 ? 1.0f : 0.7f;
        p.top_k = i % 3 ? 0 : 40;
        p.seed = (uint64_t)i + 11;
        gen_out plain = generate_with(m, prompts[i], &p, OCTO_SPEC_NONE, 0, 48, NULL);
        for (int j = 0; j < 4; j++) {
            octo_stats st;
            gen_out o = generate_with(m, prompts[i], &p, modes[j], ks[j], 48, &st);
            const int eq = o.n == plain.n && !memcmp(o.ids, plain.ids, sizeof(int32_t) * (size_t)o.n);
            T_CHECKF(eq, "[prompt %d, seed %llu, mode %d k %d] sampled text differs from plain sampling's", i,
                     (unsigned long long)p.seed, (int)modes[j], ks[j]);
            same += eq, runs++;
            proposed += st.spec_proposed, accepted += st.spec_accepted;
            free(o.ids);
        }
        free(plain.ids);
    }
    printf("sampled with a seed: %d of %d speculative runs (n-gram k 2 and 6, lookahead, auto) give plain sampling's "
           "tokens; %ld of %ld drafts accepted\n", same, runs, accepted, proposed);
    T_CHECKF(accepted > 0 && accepted < proposed, "drafts accepted %ld of %ld: both outcomes must occur", accepted,
             proposed);
    octo_model_free(m);
    octo_client_free(c);
}

/* Generate from each prompt with and without speculation; count mismatches.
 * draft: a draft model's path (speculation by draft) or NULL (n-gram, or
 * lookahead when asked). */
static void compare_mode(const char *label, const char *path, const char *draft, octo_spec_mode mode, char **prompts,
                         int n_prompts, int n_tokens) {
    const char *proposer = mode == OCTO_SPEC_DRAFT ? "draft" : mode == OCTO_SPEC_LOOKAHEAD ? "lookahead" : "ngram";
    long pool_proposed = 0, pool_accepted = 0;
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.draft_model = draft;
    octo_model *m = octo_load_model(c, path, &mo);
    if (!m) {
        T_CHECKF(0, "[%s] load: %s", label, octo_last_error(c));
        octo_client_free(c);
        return;
    }
    const int ks[] = {0, 1, 3, 8};
    int differ = 0, runs = 0;
    long proposed = 0, accepted = 0, steps = 0, tokens = 0, off_line = 0;
    for (int i = 0; i < n_prompts; i++) {
        gen_out ref = generate(m, prompts[i], OCTO_SPEC_NONE, 0, n_tokens, NULL);
        for (size_t kk = 0; kk < sizeof ks / sizeof *ks; kk++) {
            octo_stats st;
            gen_out o = generate(m, prompts[i], mode, ks[kk], n_tokens, &st);
            T_CHECKF(!strcmp(st.spec_proposer, proposer), "[%s] proposer %s", label, st.spec_proposer);
            pool_proposed += st.lookahead_pool_proposed, pool_accepted += st.lookahead_pool_accepted;
            runs++;
            if (o.n != ref.n || memcmp(o.ids, ref.ids, sizeof(int32_t) * (size_t)o.n)) {
                differ++;
                if (differ <= 3) fprintf(stderr, "[%s] prompt %d, k %d: %d vs %d tokens differ\n", label, i, ks[kk], o.n, ref.n);
            }
            proposed += st.spec_proposed;
            accepted += st.spec_accepted;
            steps += st.spec_steps;
            tokens += o.n;
            free(o.ids);
        }
        for (int t = 0; mode == OCTO_SPEC_DRAFT && t < 3; t++) { /* trees of fixed sizes */
            octo_generate_params tp = octo_generate_params_defaults();
            tp.temperature = 0.0f;
            tp.spec_tree = (int[]){3, 8, 20}[t];
            octo_stats st;
            gen_out o = generate_with(m, prompts[i], &tp, mode, 0, n_tokens, &st);
            runs++;
            differ += o.n != ref.n || memcmp(o.ids, ref.ids, sizeof(int32_t) * (size_t)o.n);
            T_CHECKF(st.spec_tree_passes == st.spec_steps, "[%s] tree %d: %d of %d passes trees", label, tp.spec_tree,
                     st.spec_tree_passes, st.spec_steps);
            proposed += st.spec_proposed, accepted += st.spec_accepted, steps += st.spec_steps, tokens += o.n;
            off_line += st.spec_off_line;
            free(o.ids);
        }
        free(ref.ids);
    }
    printf("[%s] %d prompts x %d draft settings: %d of %d generations differ from plain decoding; "
           "%ld drafts proposed, %ld accepted (%.1f %%), %ld tokens in %ld verify passes\n",
           label, n_prompts, runs / n_prompts, differ, runs, proposed, accepted, proposed ? 100.0 * accepted / proposed : 0.0,
           tokens, steps);
    if (mode == OCTO_SPEC_DRAFT) {
        printf("[%s] of the tree passes' accepted paths, %ld left the tree's first line\n", label, off_line);
        T_CHECKF(off_line > 0, "[%s] no tree pass kept a path off its first line: moving entries went untested", label);
    }
    if (mode == OCTO_SPEC_LOOKAHEAD)
        printf("[%s] of those drafts, %ld came from the window's pool, %ld of them accepted\n", label, pool_proposed,
               pool_accepted);
    T_EQ_INT(differ, 0);
    T_CHECKF(accepted > 0, "[%s] no draft was ever accepted: the comparison proves nothing", label);
    /* greedy with penalties: each verified row must see the drafts before it */
    octo_generate_params pen = octo_generate_params_defaults();
    pen.temperature = 0.0f, pen.repeat_penalty = 1.3f, pen.presence_penalty = 0.4f, pen.repeat_last_n = 24;
    int pdiffer = 0;
    accepted = 0;
    for (int i = 0; i < n_prompts && i < 20; i++) {
        gen_out ref = generate_with(m, prompts[i], &pen, OCTO_SPEC_NONE, 0, n_tokens, NULL);
        octo_stats st;
        gen_out o = generate_with(m, prompts[i], &pen, mode, 4, n_tokens, &st);
        pdiffer += o.n != ref.n || memcmp(o.ids, ref.ids, sizeof(int32_t) * (size_t)o.n);
        accepted += st.spec_accepted;
        free(o.ids), free(ref.ids);
    }
    printf("[%s] with penalties: %d generations differ, %ld drafts accepted\n", label, pdiffer, accepted);
    T_EQ_INT(pdiffer, 0);
    T_CHECKF(accepted > 0, "[%s] penalties: no draft was ever accepted", label);
    octo_model_free(m);
    octo_client_free(c);
}

static void compare_on(const char *label, const char *path, const char *draft, char **prompts, int n_prompts,
                       int n_tokens) {
    compare_mode(label, path, draft, draft ? OCTO_SPEC_DRAFT : OCTO_SPEC_NGRAM, prompts, n_prompts, n_tokens);
}

/* 60 prompts from the TinyStories text: 30 story openings, and 30 input-grounded
 * ones (a whole story, then its first words again) */
/* Without ../shared's TinyStories text: five stories of the same kind, written for this test. */
static const char OWN_STORIES[] =
    "Once upon a time there was a little girl named Mia who loved to paint. Every morning she took her brushes to "
    "the garden and painted the flowers, the bees and the old tree. One day the rain came and washed her picture "
    "away, but Mia smiled and painted a rainbow instead.\n"
    "Tom had a red ball that he took everywhere. He played with it in the park and at the beach. One day the ball "
    "rolled into the pond and a big duck pushed it back to him. Tom laughed and said thank you to the duck, and they "
    "played together until the sun went down.\n"
    "There was a small dog named Max who was afraid of the dark. At night he hid under the bed and shook. His friend "
    "the cat showed him the moon and the stars through the window. Max saw that the night was pretty, and he was not "
    "scared anymore.\n"
    "Lily and her mom went to the store to buy apples. Lily wanted the biggest apple she could find. She looked and "
    "looked and found a shiny green one. Mom said it was sour, but Lily tried it anyway and made a funny face, and "
    "they both laughed all the way home.\n"
    "A little bird wanted to fly high like the big birds. Every day it flapped its wings and jumped from a low branch. "
    "It fell many times, but it did not give up. One sunny day the wind lifted it up, and the little bird flew over "
    "the trees and sang a happy song.\n";

/* Prompts from a text of stories, a line each: an opening, and the story then its start again. */
static int make_prompts(const char *text_path, char **prompts, int max) {
    size_t len = 0;
    unsigned char *text = text_path ? tu_read_file(text_path, &len) : NULL;
    const char *src = text ? (const char *)text : OWN_STORIES;
    if (!text) len = sizeof OWN_STORIES - 1;
    int n = 0;
    const char *line = src, *end = src + len;
    while (n + 2 <= max && line < end) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t l = nl ? (size_t)(nl - line) : (size_t)(end - line);
        if (l > 120 && l < 700) {
            prompts[n] = strndup(line, 40); /* an opening */
            char *g = malloc(l + 64);
            memcpy(g, line, l);
            memcpy(g + l, " ", 1);
            memcpy(g + l + 1, line, 30);
            g[l + 31] = 0;
            prompts[n + 1] = g; /* grounded: the story, then its start again */
            n += 2;
        }
        line = nl ? nl + 1 : end;
    }
    free(text);
    return n;
}

static void synth_model(const char *path, int experts, unsigned type) {
    synth_opts o = synth_defaults();
    o.type = type;
    o.n_embd = 128, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 256, o.n_vocab = 320, o.n_ctx = 512, o.seed = 11;
    if (experts < 0) o.type = 2 /* Q4_0 */, experts = 0; /* a draft: the same weights at lower precision */
    if (experts > 100) o.n_vocab = 330, experts = 0; /* a draft with another vocabulary */
    o.n_expert = experts, o.n_expert_used = experts ? 2 : 0;
    err_t err = {0};
    T_CHECKF(synth_write(&o, path, &err) == ERR_OK, "%s", err.msg);
}

/* ---- tree batches (lookahead decoding's passes) ---- */

static int32_t argmax_row(const float *x, int n) {
    int32_t b = 0;
    for (int j = 1; j < n; j++)
        if (x[j] > x[b]) b = j;
    return b;
}

/* Every cache entry of a, by position, equals b's bit for bit (F32 caches);
 * returns the entries that differ or that b lacks, -1 when the counts differ. */
static int caches_differ(session *a, session *b) {
    int bad = 0;
    const int dim = a->m->hp.n_head_kv * a->m->hp.head_dim;
    for (int l = 0; l < a->m->hp.n_layer; l++) {
        kv_iface ia = kv_cache_iface(a->kv), ib = kv_cache_iface(b->kv);
        const kv_span *sa, *sb;
        const int na = ia.view(ia.self, l, &sa);
        int count_a = 0, count_b = 0;
        for (int i = 0; i < na; i++) count_a += sa[i].n_tokens;
        const int nb = ib.view(ib.self, l, &sb);
        for (int i = 0; i < nb; i++) count_b += sb[i].n_tokens;
        if (count_a != count_b) return -1;
        for (int i = 0; i < na; i++)
            for (int j = 0; j < sa[i].n_tokens; j++) {
                const float *ka = (const float *)((const uint8_t *)sa[i].k + (size_t)j * sa[i].k_row_bytes);
                const float *va = (const float *)((const uint8_t *)sa[i].v + (size_t)j * sa[i].v_row_bytes);
                int found = 0;
                for (int i2 = 0; i2 < nb && !found; i2++)
                    for (int j2 = 0; j2 < sb[i2].n_tokens && !found; j2++) {
                        if (sb[i2].pos[j2] != sa[i].pos[j]) continue;
                        found = 1;
                        bad += memcmp(ka, (const uint8_t *)sb[i2].k + (size_t)j2 * sb[i2].k_row_bytes, sizeof(float) * dim) ||
                               memcmp(va, (const uint8_t *)sb[i2].v + (size_t)j2 * sb[i2].v_row_bytes, sizeof(float) * dim);
                    }
                bad += !found;
            }
    }
    return bad;
}

/* The window computes what it claims: the last column's last-level row
 * equals (to rounding) plain decoding of its sequence: the root, level 0's
 * columns, then the column's tokens on the levels above. */
static void window_check(const model *m, const session *s, const int32_t *tokens, int m_len, int W, int levels,
                         const float *row) {
    session *c = NULL;
    err_t err = {0};
    const int V = m->hp.n_vocab, base = 1 + m_len, i = W - 1;
    int32_t seq[64];
    int n = 0;
    seq[n++] = tokens[0];
    for (int c0 = 0; c0 <= i; c0++) seq[n++] = tokens[base + c0];
    for (int l = 1; l < levels; l++) seq[n++] = tokens[base + l * W + i];
    float *lg = malloc(sizeof(float) * (size_t)V);
    T_CHECK(session_new(m, 256, QT_F32, 1, &c, &err) == ERR_OK);
    T_CHECK(session_eval(c, s->tokens, s->n_past, false, lg, &err) == ERR_OK);
    T_CHECK(session_eval(c, seq, n, false, lg, &err) == ERR_OK);
    double d = 0.0, mag = 1e-30;
    for (int v = 0; v < V; v++) d = fmax(d, fabs(lg[v] - row[v])), mag = fmax(mag, fabs(lg[v]));
    printf("lookahead window: column %d at level %d (a sequence of %d) against plain decoding: relative difference %.2g\n",
           i, levels - 1, n, d / mag);
    T_CHECKF(levels == 3 && d / mag < 1e-4, "window row: levels %d, relative difference %.3g", levels, d / mag);
    free(lg);
    session_free(c);
}

/* Lookahead passes against plain decoding, through the session: each pass
 * holds the root, a candidate that is the plain continuation for a random
 * length and then (half the time) wrong, and the real lookahead window. The
 * trunk's rows must equal plain decoding's logits bit for bit, the accepted
 * length must be the candidate's correct prefix, and after every mix of
 * accepted and rejected tokens the F32 cache must equal plain decoding's,
 * entry for entry. */
static void test_tree_rollback(const char *path) {
    model *m = NULL;
    err_t err = {0};
    if (model_load(path, &m, &err)) {
        T_CHECKF(0, "%s", err.msg);
        return;
    }
    const int V = m->hp.n_vocab, N_GEN = 120;
    session *ref = NULL, *s = NULL;
    T_CHECK(session_new(m, 256, QT_F32, 1, &ref, &err) == ERR_OK && session_new(m, 256, QT_F32, 1, &s, &err) == ERR_OK);
    const int32_t prompt[6] = {5, 17, 33, 17, 5, 90};
    float *rl = malloc(sizeof(float) * (size_t)V * (N_GEN + 1)), *tl = malloc(sizeof(float) * (size_t)V * 64);
    int32_t seq[128];
    /* plain decoding: the tokens and the logits after each */
    T_CHECK(session_eval(ref, prompt, 6, false, rl, &err) == ERR_OK);
    for (int i = 0; i < N_GEN; i++) {
        seq[i] = argmax_row(rl + (size_t)i * V, V);
        T_CHECK(session_eval(ref, &seq[i], 1, false, rl + (size_t)(i + 1) * V, &err) == ERR_OK);
    }
    spec_lookahead *la = NULL;
    const lookahead_params lp = {.w = 4, .n = 4, .g = 2};
    T_CHECK(lookahead_new(&lp, V, prompt, 6, &la, &err) == ERR_OK);
    T_CHECK(session_eval(s, prompt, 6, false, tl, &err) == ERR_OK);
    rng_t r = {77};
    int done = 0, passes = 0, accepted = 0, rejected = 0, row_diff = 0, len_wrong = 0;
    while (done < N_GEN - 12) {
        /* the root is seq[done]; plain decoding's continuation is seq[done + 1 ..] */
        int32_t cand[8], tokens[64], rows[64];
        uint64_t anc[64];
        const int m_len = (int)(rng_next(&r) % 6), good = m_len ? (int)(rng_next(&r) % (uint64_t)(m_len + 1)) : 0;
        for (int j = 0; j < m_len; j++) cand[j] = j < good ? seq[done + 1 + j] : (seq[done + 1 + j] + 1 + j) % V;
        int n_rows;
        const int n = lookahead_layout(la, seq[done], cand, m_len, tokens, anc, rows, &n_rows);
        if (session_eval_tree(s, tokens, n, anc, rows, n_rows, tl, &err)) {
            T_CHECKF(0, "%s", err.msg);
            break;
        }
        /* rows 0 .. m_len: plain decoding's logits after seq[done] and the candidate's correct prefix */
        int a = 0;
        while (a < m_len && cand[a] == argmax_row(tl + (size_t)a * V, V)) a++;
        len_wrong += a != good;
        for (int j = 0; j <= a; j++) row_diff += memcmp(tl + (size_t)j * V, rl + (size_t)(done + 1 + j) * V, sizeof(float) * V) != 0;
        if (passes == 3) window_check(m, s, tokens, m_len, lp.w, lookahead_window_tokens(la) / lp.w,
                                      tl + (size_t)(m_len + lp.w) * V);
        lookahead_update(la, tl + (size_t)(m_len + 1) * V, V);
        if (session_accept(s, tokens, n, a + 1, &err)) {
            T_CHECKF(0, "%s", err.msg);
            break;
        }
        accepted += a, rejected += m_len - a;
        done += a + 1;
        passes++;
    }
    /* the reference up to the same length */
    session_truncate(ref, 6 + done);
    const int cdiff = caches_differ(s, ref);
    int made, kept;
    lookahead_counts(la, &made, &kept);
    printf("tree batches: %d passes of up to %d tokens, %d candidate tokens accepted, %d rejected; "
           "%d trunk rows differ from plain decoding, %d accepted lengths wrong, %d cache entries differ; "
           "the window made %d n-grams (%d new)\n",
           passes, 1 + 5 + lookahead_window_tokens(la), accepted, rejected, row_diff, len_wrong, cdiff, made, kept);
    T_EQ_INT(row_diff, 0);
    T_EQ_INT(len_wrong, 0);
    T_EQ_INT(cdiff, 0);
    T_CHECK(accepted > 20 && rejected > 20 && made > 0);
    lookahead_free(la);
    free(rl), free(tl);
    session_free(s), session_free(ref);
    model_free(m);
}

/* A random draft tree over the plain continuation: node u at depth d < 4
 * gets 0..3 children; when u is on plain decoding's path, one child at a
 * random rank is plain decoding's next token and the others are not. */
static void random_tree(rng_t *r, const int32_t *next_tokens, int V, spec_tree *t) {
    bool on[SPEC_TREE_MAX] = {true};
    t->n = 1;
    for (int u = 0; u < t->n; u++) {
        if (t->depth[u] >= 4) continue;
        const int c = (int)(rng_next(r) % 4), right = on[u] ? (int)(rng_next(r) % 4) : -1;
        for (int k = 0; k < c && t->n < 20; k++) {
            const int v = t->n++;
            t->parent[v] = (int8_t)u, t->rank[v] = (int8_t)k, t->depth[v] = (int8_t)(t->depth[u] + 1);
            t->q[v] = NULL, t->prob[v] = t->value[v] = 0.5f;
            on[v] = k == right;
            const int32_t want = next_tokens[t->depth[u]];
            t->token[v] = on[v] ? want : (int32_t)((want + 1 + (int32_t)(rng_next(r) % 7) + 7 * k) % V);
        }
    }
}

/* Draft trees against plain decoding, through the session: random trees
 * whose accepted path is often not their first line. The rows of the path
 * verification walks must equal plain decoding's logits bit for bit, the
 * path must be plain decoding's for as long as the tree has it, and after
 * every pass (its path's entries moved into place, session_accept_path)
 * the F32 cache must equal plain decoding's, entry for entry. */
static void test_draft_tree_paths(const char *path) {
    model *m = NULL;
    err_t err = {0};
    if (model_load(path, &m, &err)) {
        T_CHECKF(0, "%s", err.msg);
        return;
    }
    const int V = m->hp.n_vocab, N_GEN = 120;
    session *ref = NULL, *s = NULL;
    sampler *greedy = NULL;
    sampler_params sp = sampler_defaults();
    sp.temperature = 0.0f;
    T_CHECK(session_new(m, 256, QT_F32, 1, &ref, &err) == ERR_OK && session_new(m, 256, QT_F32, 1, &s, &err) == ERR_OK);
    T_CHECK(sampler_new(&sp, V, &greedy, &err) == ERR_OK);
    const int32_t prompt[6] = {5, 17, 33, 17, 5, 90};
    float *rl = malloc(sizeof(float) * (size_t)V * (N_GEN + 1)), *tl = malloc(sizeof(float) * (size_t)V * SPEC_TREE_MAX);
    float *scratch = malloc(sizeof(float) * 3 * (size_t)V);
    int32_t seq[128];
    T_CHECK(session_eval(ref, prompt, 6, false, rl, &err) == ERR_OK);
    for (int i = 0; i < N_GEN; i++) {
        seq[i] = argmax_row(rl + (size_t)i * V, V);
        T_CHECK(session_eval(ref, &seq[i], 1, false, rl + (size_t)(i + 1) * V, &err) == ERR_OK);
    }
    T_CHECK(session_eval(s, prompt, 6, false, tl, &err) == ERR_OK);
    rng_t r = {91};
    int done = 0, passes = 0, off_line = 0, accepted = 0, row_diff = 0, len_wrong = 0, dropped = 0;
    while (done < N_GEN - 8) {
        spec_tree raw = {0}, t;
        raw.token[0] = seq[done];
        raw.parent[0] = -1;
        random_tree(&r, seq + done + 1, V, &raw);
        uint64_t anc[SPEC_TREE_MAX];
        spec_tree_layout(&raw, &t, anc);
        int tile;
        const uint32_t phases = session_tile_phases(s, &tile);
        dropped += t.n - spec_tree_keep_exact(&t, anc, phases, tile);
        int expect = 0; /* plain decoding's path through the tree */
        for (int u = 0, found = 1; found;) {
            found = 0;
            for (int v = u + 1; v < t.n && !found; v++)
                if (t.parent[v] == u && t.token[v] == seq[done + 1 + expect]) found = 1, u = v, expect++;
        }
        if (session_eval_tree(s, t.token, t.n, anc, NULL, t.n, tl, &err)) {
            T_CHECKF(0, "%s", err.msg);
            break;
        }
        int walk[SPEC_TREE_MAX];
        int32_t next;
        const int a = spec_verify_tree(greedy, tl, V, &t, scratch, walk, &next);
        len_wrong += a != expect || next != seq[done + 1 + a];
        for (int j = 0; j <= a; j++)
            row_diff += memcmp(tl + (size_t)walk[j] * V, rl + (size_t)(done + 1 + j) * V, sizeof(float) * V) != 0;
        off_line += a > 0 && walk[a] != a;
        if (session_accept_path(s, t.token, t.n, walk, a + 1, &err)) {
            T_CHECKF(0, "%s", err.msg);
            break;
        }
        accepted += a;
        done += a + 1;
        passes++;
    }
    session_truncate(ref, 6 + done);
    const int cdiff = caches_differ(s, ref);
    printf("draft trees: %d passes, %d nodes accepted, %d paths off the first line, %d nodes dropped for summing their "
           "keys in other tiles than plain decoding; %d path rows differ from plain decoding, %d paths wrong, %d cache "
           "entries differ\n",
           passes, accepted, off_line, dropped, row_diff, len_wrong, cdiff);
    T_EQ_INT(row_diff, 0);
    T_EQ_INT(len_wrong, 0);
    T_EQ_INT(cdiff, 0);
    T_CHECK(off_line > 5 && accepted > 20);
    free(rl), free(tl), free(scratch);
    sampler_free(greedy);
    session_free(s), session_free(ref);
    model_free(m);
}

/* ---- statistics: chi-square tests (the toy target and the goodness of
 * fit: spec_toy.h) ---- */

/* Homogeneity of two samples of equal size over n cells: sum over cells of
 * (a - b)^2 / (a + b), cells with a + b < 10 pooled. */
static double chi2_two(const long *a, const long *b, int n, double *stat_out, int *df_out) {
    double stat = 0;
    long pa = 0, pb = 0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] + b[i] < 10) {
            pa += a[i], pb += b[i];
            continue;
        }
        stat += (double)(a[i] - b[i]) * (a[i] - b[i]) / (double)(a[i] + b[i]);
        cells++;
    }
    if (pa + pb > 0) stat += (double)(pa - pb) * (pa - pb) / (double)(pa + pb), cells++;
    *stat_out = stat;
    *df_out = cells - 1;
    return tu_chi2_sf(stat, cells - 1);
}

static void test_chi2(void) {
    /* df 2: exp(-x/2); df 1: erfc(sqrt(x/2)); the 1e-6 quantile of df 1 is 23.928 */
    T_NEAR(tu_chi2_sf(10, 2), exp(-5), 1e-14);
    T_NEAR(tu_chi2_sf(0.5, 2), exp(-0.25), 1e-14);
    T_NEAR(tu_chi2_sf(3.2, 1), erfc(sqrt(1.6)), 1e-13);
    T_NEAR(tu_chi2_sf(23.928, 1) / 1e-6, 1.0, 1e-3);
    /* even df: Q(a, z) = exp(-z) sum_{i<a} z^i / i! (a Poisson tail), here a = z = 100 */
    double term = exp(-100.0), poisson = 0;
    for (int i = 0; i < 100; i++) poisson += term, term *= 100.0 / (i + 1);
    T_NEAR(tu_chi2_sf(200, 200) / poisson, 1.0, 1e-12);
}

typedef int (*verify_fn)(sampler *, const float *, int, const int32_t *, const float *, int, float *, int32_t *);

/* WRONG rule 1: after a rejection, draw from p instead of max(0, p - q).
 * Mass p(x) min(1, p/q)... is counted twice for tokens the draft favours. */
static int wrong_resample_p(sampler *smp, const float *rows, int V, const int32_t *draft, const float *q, int k,
                            float *scratch, int32_t *next) {
    int a = 0;
    for (;; a++) {
        sampler_distribution(smp, rows + (size_t)a * V, scratch);
        if (a == k) break;
        const double qx = q ? q[(size_t)a * V + draft[a]] : 1.0;
        if (!(sampler_uniform(smp) * qx < scratch[draft[a]])) break;
    }
    *next = sampler_draw(smp, scratch);
    return a;
}

/* WRONG rule 2: the ratio upside down, min(1, q/p). (Not every slip is
 * wrong: accepting a sampled draft with probability p(x) and else drawing
 * from p without x, as for a deterministic proposer, is exact too; it only
 * accepts less often.) */
static int wrong_inverted(sampler *smp, const float *rows, int V, const int32_t *draft, const float *q, int k,
                          float *scratch, int32_t *next) {
    float *p = scratch, *r = scratch + V;
    int a = 0;
    for (;; a++) {
        sampler_distribution(smp, rows + (size_t)a * V, p);
        if (a == k) {
            *next = sampler_draw(smp, p);
            return a;
        }
        const float *qa = q + (size_t)a * V;
        const int32_t x = draft[a];
        if (sampler_uniform(smp) * p[x] < qa[x]) continue;
        for (int j = 0; j < V; j++) r[j] = p[j] > qa[j] ? p[j] - qa[j] : 0.0f;
        *next = sampler_draw(smp, r);
        if (*next < 0) *next = sampler_draw(smp, p);
        return a;
    }
}

/* p-value of the first 3 tokens of n_trials speculative runs. q_rule: 1 =
 * drafts drawn from Q (passed to the rule), 0 = a deterministic proposer
 * (always the argmax of Q, q NULL). */
static double toy_run(verify_fn rule, int sampled_draft, long n_trials, double *stat, int *df) {
    *stat = 0, *df = 0;
    toy_target tt;
    if (toy_init(&tt, 1234)) return -1;
    sampler *smp = tt.smp;
    float(*P)[TV] = tt.P, (*Q)[TV] = tt.Q, (*q)[TV] = tt.q, scratch[2 * TV];
    long count[TV * TV * TV] = {0};
    for (long n = 0; n < n_trials; n++) {
        int32_t out[3 + SPEC_MAX_K + 1];
        int pos = 0;
        while (pos < 3) {
            const int k = 3;
            int32_t d[3];
            for (int i = 0; i < k; i++) {
                if (sampled_draft) d[i] = sampler_draw(smp, q[pos + i]);
                else {
                    d[i] = 0;
                    for (int v = 1; v < TV; v++)
                        if (Q[pos + i][v] > Q[pos + i][d[i]]) d[i] = v;
                }
            }
            int32_t next;
            const int a = rule(smp, P[pos], TV, d, sampled_draft ? q[pos] : NULL, k, scratch, &next);
            for (int i = 0; i < a; i++) out[pos++] = d[i];
            out[pos++] = next;
        }
        count[(out[0] * TV + out[1]) * TV + out[2]]++;
    }
    sampler_free(smp);
    return chi2_fit(count, tt.prob, TV * TV * TV, n_trials, stat, df);
}

static void test_rejection_exact(void) {
    const long N = tu_quick() ? 50000 : 200000; /* quick: sanitizers, qemu (a wrong rule still scores chi2 > 5000) */
    struct {
        const char *name;
        verify_fn rule;
        int sampled, must_pass;
    } cases[] = {
        {"spec_verify, sampled draft", spec_verify, 1, 1},
        {"spec_verify, deterministic proposer", spec_verify, 0, 1},
        {"WRONG: resample from p", wrong_resample_p, 1, 0},
        {"WRONG: min(1, q/p)", wrong_inverted, 1, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        double stat;
        int df;
        const double pv = toy_run(cases[c].rule, cases[c].sampled, N, &stat, &df);
        toy_judge("rejection sampling", cases[c].name, pv, stat, df, N, cases[c].must_pass);
    }
}

/* ---- the same for draft trees ----
 *
 * Each pass from position pos verifies a tree: 3 children of the root, 2
 * children of the first (the line), 2 of its first, and 1 of the root's
 * second child (a path off the line), each family drawn without
 * replacement from Q at its depth (or, deterministic, Q's top ones). Node
 * rows are P at pos + depth. */

typedef int (*tree_rule)(sampler *, const float *, int, const spec_tree *, float *, int *, int32_t *);

/* Children of u in rank order (the toy builds them in that order). */
static int toy_children(const spec_tree *t, int u, int *ch) {
    int m = 0;
    for (int v = u + 1; v < t->n; v++)
        if (t->parent[v] == u) ch[m++] = v;
    return m;
}

/* The walk with a WRONG multi-candidate rule: mode 1 tries every child
 * against the node's own p (no residual after a rejection); mode 2 keeps
 * the residual but treats the children as drawn with replacement (q never
 * loses the earlier ones). */
static int wrong_tree(int mode, sampler *smp, const float *rows, int V, const spec_tree *t, float *s, int *path,
                      int32_t *next) {
    float *p = s, *r = s + V;
    int a = 0;
    path[0] = 0;
    for (int u = 0;;) {
        int ch[SPEC_TREE_MAX], v = -1;
        const int m = toy_children(t, u, ch);
        sampler_distribution(smp, rows + (size_t)u * V, p);
        for (int i = 0; i < m && v < 0; i++) {
            const int32_t x = t->token[ch[i]];
            const float *q = t->q[ch[i]];
            if (sampler_uniform(smp) * q[x] < p[x]) v = ch[i];
            else if (mode == 2) {
                double sum = 0;
                for (int j = 0; j < V; j++) sum += r[j] = p[j] > q[j] ? p[j] - q[j] : 0.0f;
                if (sum > 0) for (int j = 0; j < V; j++) p[j] = (float)(r[j] / sum);
            }
        }
        if (v < 0) {
            *next = sampler_draw(smp, p);
            break;
        }
        sampler_accept(smp, t->token[v]);
        path[++a] = u = v;
    }
    sampler_rewind(smp, a);
    return a;
}
static int wrong_same_p(sampler *smp, const float *rows, int V, const spec_tree *t, float *s, int *path, int32_t *next) {
    return wrong_tree(1, smp, rows, V, t, s, path, next);
}
static int wrong_replacement(sampler *smp, const float *rows, int V, const spec_tree *t, float *s, int *path,
                             int32_t *next) {
    return wrong_tree(2, smp, rows, V, t, s, path, next);
}

/* Add `count` children of u drawn from q without replacement (or q's top ones). */
static void toy_family(sampler *smp, spec_tree *t, int u, int count, const float *q, int sampled) {
    float left[TV];
    memcpy(left, q, sizeof left);
    for (int k = 0; k < count; k++) {
        int32_t x = 0;
        if (sampled) x = sampler_draw(smp, left);
        else
            for (int j = 1; j < TV; j++) x = left[j] > left[x] ? j : x;
        if (x < 0 || left[x] <= 0.0f) return;
        const int v = t->n++;
        t->token[v] = x, t->parent[v] = (int8_t)u, t->rank[v] = (int8_t)k, t->depth[v] = (int8_t)(t->depth[u] + 1);
        t->q[v] = sampled ? q : NULL, t->prob[v] = q[x], t->value[v] = 0.5f;
        left[x] = 0.0f;
    }
}

static double toy_tree_run(tree_rule rule, int sampled, long n_trials, double *stat, int *df) {
    *stat = 0, *df = 0;
    toy_target tt;
    if (toy_init(&tt, 4321)) return -1;
    sampler *smp = tt.smp;
    float(*P)[TV] = tt.P, (*q)[TV] = tt.q, scratch[3 * TV], rows[SPEC_TREE_MAX * TV];
    long count[TV * TV * TV] = {0};
    for (long n = 0; n < n_trials; n++) {
        int32_t out[16];
        int pos = 0;
        while (pos < 3) {
            spec_tree t = {.n = 1, .parent = {-1}};
            toy_family(smp, &t, 0, 3, q[pos], sampled);
            toy_family(smp, &t, 1, 2, q[pos + 1], sampled);
            toy_family(smp, &t, t.n - 2, 2, q[pos + 2], sampled);
            toy_family(smp, &t, 2, 1, q[pos + 1], sampled);
            for (int u = 0; u < t.n; u++) memcpy(rows + u * TV, P[pos + t.depth[u]], sizeof(float) * TV);
            int walk[SPEC_TREE_MAX];
            int32_t next;
            const int a = rule(smp, rows, TV, &t, scratch, walk, &next);
            for (int i = 1; i <= a; i++) out[pos++] = t.token[walk[i]];
            out[pos++] = next;
        }
        count[(out[0] * TV + out[1]) * TV + out[2]]++;
    }
    sampler_free(smp);
    return chi2_fit(count, tt.prob, TV * TV * TV, n_trials, stat, df);
}

static void test_tree_rejection_exact(void) {
    const long N = tu_quick() ? 50000 : 200000; /* quick: sanitizers, qemu (a wrong rule still scores chi2 > 5000) */
    struct {
        const char *name;
        tree_rule rule;
        int sampled, must_pass;
    } cases[] = {
        {"spec_verify_tree, sampled drafts", spec_verify_tree, 1, 1},
        {"spec_verify_tree, deterministic candidates", spec_verify_tree, 0, 1},
        {"WRONG: every child against the same p", wrong_same_p, 1, 0},
        {"WRONG: children as if drawn with replacement", wrong_replacement, 1, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        double stat;
        int df;
        const double pv = toy_tree_run(cases[c].rule, cases[c].sampled, N, &stat, &df);
        toy_judge("tree rejection sampling", cases[c].name, pv, stat, df, N, cases[c].must_pass);
    }
}

/* ---- end to end: sampled generation with and without speculation ---- */

static int cmp_long(const void *a, const void *b) {
    const long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The first 3 tokens of n seeded generations as one key each, sorted. */
static long *first3(octo_model *m, const char *prompt, octo_spec_mode spec, int tree, int n, int V, long *accepted,
                    long *proposed) {
    octo_generate_params p = octo_generate_params_defaults();
    p.temperature = 0.6f, p.top_k = 8, p.top_p = 0.95f, p.min_p = 0.02f, p.repeat_penalty = 1.1f;
    p.repeat_last_n = 16, p.spec_k = tree ? 0 : 3, p.spec_tree = tree;
    long *keys = malloc(sizeof(long) * (size_t)n);
    *accepted = *proposed = 0;
    for (int i = 0; i < n; i++) {
        p.seed = 1000003ull * (uint64_t)i + (uint64_t)spec + 101ull * (uint64_t)tree; /* independent runs, per arm */
        octo_stats st;
        gen_out o = generate_with(m, prompt, &p, spec, p.spec_k, 3, &st);
        long key = 0;
        for (int j = 0; j < 3; j++) key = key * (V + 1) + (j < o.n ? o.ids[j] : V); /* V: ended early */
        keys[i] = key;
        *accepted += st.spec_accepted, *proposed += st.spec_proposed;
        free(o.ids);
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_long);
    return keys;
}

/* Cell counts of two sorted key arrays over their union. */
static int merge_counts(const long *a, const long *b, int n, long *ca, long *cb) {
    int i = 0, j = 0, cells = 0;
    while (i < n || j < n) {
        const long key = j >= n || (i < n && a[i] <= b[j]) ? a[i] : b[j];
        ca[cells] = cb[cells] = 0;
        while (i < n && a[i] == key) ca[cells]++, i++;
        while (j < n && b[j] == key) cb[cells]++, j++;
        cells++;
    }
    return cells;
}

/* Token latency with a draft (octo.h, OCTO_STATS: decode_latency_*): a verify
 * pass's first token carries the pass's time, the drafts it accepted come
 * with it at 0 ms. Of the n samples, z are 0, z between the accepted drafts
 * delivered (those of the last pass may be cut off by the stop: at most k)
 * and all of them, so a percentile of rank ceil(p n / 100) <= z - k is 0 and
 * one of rank > z is a pass's time; a division of each pass's time among its
 * tokens would never give 0. */
static void test_latency_bursts(const char *path, const char *dpath) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.draft_model = dpath;
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "load: %s", octo_last_error(c));
    if (m) {
        octo_stats st;
        enum { K = 4 };
        free(generate(m, "a b c d a b c d a b", OCTO_SPEC_DRAFT, K, 64, &st).ids); /* k fixed: never switched off */
        const int n = st.decode_latency_tokens, z_min = st.spec_accepted - K, z_max = st.spec_accepted;
        T_EQ_INT(n, st.decode_tokens - 1);
        const double q[4] = {st.decode_latency_p50_ms, st.decode_latency_p90_ms, st.decode_latency_p95_ms,
                             st.decode_latency_p99_ms};
        const int pct[4] = {50, 90, 95, 99};
        for (int i = 0; i < 4; i++) {
            const int rank = (pct[i] * n + 99) / 100;
            if (rank <= z_min) T_CHECKF(q[i] == 0, "p%d = %.4f ms, rank %d of %d, %d+ zeros", pct[i], q[i], rank, n, z_min);
            if (rank > z_max) T_CHECKF(q[i] > 0, "p%d = 0, rank %d of %d, at most %d zeros", pct[i], rank, n, z_max);
        }
        printf("latency with a draft: %d tokens, %d drafts accepted in %d passes: p50 %.4f ms, p90 %.4f, p99 %.4f, "
               "max %.4f, spread %.2f\n", n, st.spec_accepted, st.spec_steps, q[0], q[1], q[3],
               st.decode_latency_max_ms, st.decode_latency_cv);
        T_CHECKF(z_min >= (n + 1) / 2, "only %d drafts accepted of %d tokens: the median's burst went untested", z_max, n);
        T_CHECK(st.decode_latency_max_ms > 0 && st.decode_latency_max_ms <= st.decode_ms && st.decode_latency_cv > 1);
    }
    octo_model_free(m);
    octo_client_free(c);
}

static void test_sampled_end_to_end(const char *path, const char *dpath) {
    if (tu_emulated()) { /* 55% of this test's time, ~210 s of CI under qemu; its sampler is the native one's */
        printf("sampled end to end: not under emulation (the native runs check it)\n");
        return;
    }
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.draft_model = dpath;
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "load: %s", octo_last_error(c));
    if (!m) {
        octo_client_free(c);
        return;
    }
    const int n = tu_quick() ? 1500 : 4000, V = octo_model_info_get(m).n_vocab; /* quick: sanitizers, qemu */
    /* a prompt that ends in the model's own greedy continuation: it goes on
     * repeating itself, so n-gram lookup has something to propose */
    char prompt[4096] = "the cat sat on the mat and the cat";
    gen_out g = generate(m, prompt, OCTO_SPEC_NONE, 0, 32, NULL);
    const size_t len = strlen(prompt);
    const int w = octo_detokenize(m, g.ids, g.n, prompt + len, (int)(sizeof prompt - len));
    T_CHECK(w > 0 && w < (int)(sizeof prompt - len));
    free(g.ids);
    long acc, prop;
    long *plain = first3(m, prompt, OCTO_SPEC_NONE, 0, n, V, &acc, &prop);
    long *ca = malloc(sizeof(long) * 2 * (size_t)n), *cb = malloc(sizeof(long) * 2 * (size_t)n);
    const octo_spec_mode modes[] = {OCTO_SPEC_DRAFT, OCTO_SPEC_DRAFT, OCTO_SPEC_NGRAM, OCTO_SPEC_LOOKAHEAD};
    const int trees[] = {0, 6, 0, 0};
    const char *names[] = {"draft", "draft trees of 6", "n-gram", "lookahead"};
    for (int k = 0; k < 4; k++) {
        long *spec = first3(m, prompt, modes[k], trees[k], n, V, &acc, &prop);
        const int cells = merge_counts(plain, spec, n, ca, cb);
        double stat;
        int df;
        const double pv = chi2_two(ca, cb, cells, &stat, &df);
        printf("sampled, %s vs plain: first 3 tokens of %d generations each, %d distinct; chi2 %.1f on %d df, "
               "p = %.3g; %ld of %ld drafts accepted\n",
               names[k], n, cells, stat, df, pv, acc, prop);
        T_CHECKF(pv > ALPHA, "sampled %s: the distribution differs from plain decoding (p = %g)", names[k], pv);
        /* both outcomes of the acceptance test must occur, or half the rule went untested */
        T_CHECKF(acc > n / 10 && prop - acc > n / 10, "sampled: %ld of %ld accepted", acc, prop);
        free(spec);
    }
    free(plain), free(ca), free(cb);
    octo_model_free(m);
    octo_client_free(c);
}

/* Self-draft: a Q4_0 copy made at load. Asked for on the trained model (too
 * small for the plan to choose it), it is lossless under greedy decoding and
 * its drafts are accepted; the plan's reasons when it is not made; asking
 * for one where the weights are already Q4_0 fails the load. */
static void test_self_draft(const char *trained, char **prompts, int n_prompts) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    octo_model *m = octo_load_model(c, trained, &mo);
    T_CHECKF(m != NULL, "load: %s", octo_last_error(c));
    if (m) {
        const octo_model_info in = octo_model_info_get(m);
        printf("self-draft, automatic, stories260K: %s\n", in.speculation);
        T_CHECK(strstr(in.speculation, "too little to be memory-bound") != NULL);
        octo_generate_params p = octo_generate_params_defaults();
        p.spec = OCTO_SPEC_SELF;
        T_CHECK(octo_generate(m, "hi", &p) == NULL && strstr(octo_model_error(m), "no self-draft"));
        octo_model_free(m);
    }
    mo.auto_draft = OCTO_DRAFT_SELF;
    m = octo_load_model(c, trained, &mo);
    T_CHECKF(m != NULL, "load with a self-draft: %s", octo_last_error(c));
    if (m) {
        printf("self-draft, asked: %s\n", octo_model_info_get(m).speculation);
        octo_generate_params gp = octo_generate_params_defaults();
        gp.temperature = 0.0f;
        for (int tree = -1; tree <= 0; tree++) { /* lines of drafts, then trees */
            gp.spec_tree = tree;
            int differ = 0;
            long proposed = 0, accepted = 0, steps = 0, tree_passes = 0;
            for (int i = 0; i < n_prompts; i++) {
                gen_out ref = generate(m, prompts[i], OCTO_SPEC_NONE, 0, 48, NULL);
                octo_stats st;
                gen_out o = generate_with(m, prompts[i], &gp, OCTO_SPEC_SELF, 0, 48, &st);
                T_CHECK(!strcmp(st.spec_proposer, "self"));
                /* proposing is counted within speculation's time, never beside it */
                T_CHECKF(st.spec_draft_ms > 0 && st.spec_draft_ms < st.spec_ms, "proposing %.3f ms of %.3f",
                         st.spec_draft_ms, st.spec_ms);
                differ += o.n != ref.n || memcmp(o.ids, ref.ids, sizeof(int32_t) * (size_t)o.n);
                proposed += st.spec_proposed, accepted += st.spec_accepted, steps += st.spec_steps;
                tree_passes += st.spec_tree_passes;
                free(o.ids), free(ref.ids);
            }
            printf("[stories260K, Q4_0 self-draft, %s] %d prompts: %d differ from plain decoding; %ld of %ld drafts "
                   "accepted in %ld verify passes (%ld of trees)\n",
                   tree ? "lines" : "trees", n_prompts, differ, accepted, proposed, steps, tree_passes);
            T_EQ_INT(differ, 0);
            if (tree) T_CHECKF(accepted * 2 > proposed && tree_passes == 0, "self-draft: only %ld of %ld accepted", accepted, proposed);
            /* a tree's nodes are mostly alternatives: what counts is the tokens a pass gives */
            else T_CHECKF(tree_passes == steps && accepted > steps, "self-draft trees: %ld accepted in %ld passes (%ld of trees)",
                          accepted, steps, tree_passes);
        }
        octo_model_free(m);
    }
    octo_client_free(c);
}

/* The draft's cache lives in the model's KV budget (runtime/plan.h): a
 * given budget is shared in whole tokens, both caches stay within their
 * shares through a generation that makes them evict, and the stats count
 * the draft's bytes in the total. */
static void test_draft_budget(const char *path, const char *dpath) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "load: %s", octo_last_error(c));
    if (!m) {
        octo_client_free(c);
        return;
    }
    const uint64_t tb = octo_model_info_get(m).kv_bytes_per_token; /* the draft has the same shape */
    octo_model_free(m);
    const int tokens = 320; /* the blocks of the anchors (64) and the recent window (128) fit, the 512-token context does not */
    const uint64_t budget = (uint64_t)tokens * 2 * tb + 100, target_share = (uint64_t)tokens * tb;
    mo.kv.budget_bytes = budget;
    m = octo_load_model(c, path, &mo); /* no draft: the whole budget is the model's */
    T_CHECK(m && !strstr(octo_model_info_get(m).kv_plan, "shared"));
    octo_model_free(m);
    mo.draft_model = dpath;
    m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "load: %s", octo_last_error(c));
    if (!m) {
        octo_client_free(c);
        return;
    }
    const octo_model_info in = octo_model_info_get(m);
    printf("KV budget with a draft: %s\n", in.kv_plan);
    T_CHECK(in.kv_budget_bytes == budget && strstr(in.kv_plan, "shared with the draft: 320 tokens"));
    octo_generate_params p = octo_generate_params_defaults();
    p.temperature = 0.0f;
    p.spec = OCTO_SPEC_DRAFT;
    p.spec_k = 4;
    p.max_tokens = 420;
    octo_stream *s = octo_generate(m, "the cat sat on the mat and the cat", &p);
    T_CHECKF(s != NULL, "generate: %s", octo_model_error(m));
    int over = 0, pieces = 0;
    uint64_t draft_peak = 0;
    while (s && octo_stream_next(s)) {
        const octo_stats st = octo_model_stats(m);
        over += st.kv_bytes > budget || st.kv_bytes - st.kv_draft_bytes > target_share ||
                st.kv_draft_bytes > budget - target_share;
        if (st.kv_draft_bytes > draft_peak) draft_peak = st.kv_draft_bytes;
        pieces++;
    }
    T_CHECK(s && octo_stream_status(s) == OCTO_OK);
    octo_stream_free(s);
    const octo_stats st = octo_model_stats(m);
    printf("KV budget with a draft: %d pieces, %d over a share; at the end %llu bytes of %llu (the draft's %llu, "
           "peak %llu), %lld entries evicted per layer; %d of %d drafts accepted\n",
           pieces, over, (unsigned long long)st.kv_bytes, (unsigned long long)st.kv_budget_bytes,
           (unsigned long long)st.kv_draft_bytes, (unsigned long long)draft_peak, (long long)st.kv_tokens_evicted,
           st.spec_accepted, st.spec_proposed);
    T_EQ_INT(over, 0);
    T_CHECK(st.kv_budget_bytes == budget && st.kv_tokens_evicted > 0);
    /* the draft's cache filled its share: it was bounded by the budget, not by a short generation */
    T_CHECKF(draft_peak > (budget - target_share) / 2, "draft cache peaked at %llu bytes", (unsigned long long)draft_peak);
    T_CHECK(st.spec_accepted > 0);
    octo_model_free(m);
    octo_client_free(c);
}

/* Cores of different capacity (runtime/plan.h): the draft computes on a
 * pool of its own placed on other cores than the model's. Placed so on this
 * machine's first two cores, greedy output equals plain decoding's, drafts
 * are accepted, and the calling thread ends with the cores it started with. */
static void test_placed_draft(const char *path, const char *dpath) {
    if (!plat_pin_available()) { /* the POSIX fallback: a placed pool is refused */
        tpool *p = NULL;
        err_t err = {0};
        const short core0 = 0;
        T_EQ_INT(tpool_new_on(1, &core0, 1, &p, &err), ERR_UNSUPPORTED);
        printf("placed draft: %s, not checked\n", err.msg);
        return;
    }
    cpu_set_t mine;
    int cores[2], n = 0;
    T_CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &mine)) cores[n++] = c;
    if (n < 2) {
        printf("placed draft: one core to run on, not checked\n");
        return;
    }
    err_t err = {0};
    model *m = NULL, *d = NULL;
    tokenizer *tok = NULL;
    tpool *mp = NULL, *dp = NULL;
    session *s = NULL, *ds = NULL;
    const short big = (short)cores[0], little = (short)cores[1];
    const kv_config plain = kv_config_plain(QT_F32);
    if (model_load(path, &m, &err) || model_load(dpath, &d, &err) || tokenizer_load(m->gguf, &tok, &err) ||
        tpool_new_on(1, &big, 1, &mp, &err) || tpool_new_on(1, &little, 1, &dp, &err) ||
        session_new_shared(m, 256, &plain, mp, &s, &err) ||
        session_new_shared(d, 256, &plain, dp, &ds, &err)) {
        T_CHECKF(0, "placed draft: %s", err.msg);
        goto out;
    }
    const int32_t prompt[] = {1, 40, 41, 42, 43, 40, 41};
    int32_t ids[2][64];
    int got[2] = {0, 0}, accepted = 0, moved = 0;
    for (int run = 0; run < 2; run++) {
        session_reset(s), session_reset(ds);
        gen_params gp = {.max_tokens = 64, .sampling = sampler_defaults(), .proposer = run ? &proposer_draft : NULL,
                         .spec_k = run ? 4 : 0, .draft = run ? ds : NULL};
        gp.sampling.temperature = 0.0f;
        generation *g = NULL;
        if (gen_start(s, tok, prompt, 7, &gp, &g, &err)) {
            T_CHECKF(0, "placed draft: %s", err.msg);
            break;
        }
        while (gen_next(g)) {
            cpu_set_t now;
            sched_getaffinity(0, sizeof now, &now);
            moved += !CPU_EQUAL(&now, &mine);
        }
        T_CHECKF(gen_error(g)->code == ERR_OK, "placed draft: %s", gen_error(g)->msg);
        const int32_t *t = gen_tokens(g, &got[run]);
        memcpy(ids[run], t, sizeof(int32_t) * (size_t)got[run]);
        if (run) accepted = gen_get_stats(g).spec_accepted;
        gen_free(g);
    }
    printf("placed draft (model on core %d, draft on core %d): %d and %d tokens, %s; %d drafts accepted; "
           "the caller left elsewhere %d times\n",
           big, little, got[0], got[1], got[0] == got[1] && !memcmp(ids[0], ids[1], sizeof(int32_t) * (size_t)got[0]) ? "identical" : "DIFFERENT",
           accepted, moved);
    T_CHECK(got[0] > 0 && got[0] == got[1] && !memcmp(ids[0], ids[1], sizeof(int32_t) * (size_t)got[0]));
    T_CHECK(accepted > 0);
    T_EQ_INT(moved, 0);
out:
    session_free(ds), session_free(s);
    tpool_free(dp), tpool_free(mp);
    tokenizer_free(tok);
    model_free(d), model_free(m);
}

/* A token the caller held back (pacing) counts in the decode time and in
 * that token's latency; before the first token it counts nowhere. */
static void test_add_wait(const char *path) {
    err_t err = {0};
    model *m = NULL;
    tokenizer *tok = NULL;
    session *s = NULL;
    generation *g = NULL;
    const int32_t prompt[] = {1, 40, 41, 42};
    gen_params gp = {.max_tokens = 3, .sampling = sampler_defaults()};
    gp.sampling.temperature = 0.0f;
    if (model_load(path, &m, &err) || tokenizer_load(m->gguf, &tok, &err) ||
        session_new(m, 64, QT_F32, 1, &s, &err) || gen_start(s, tok, prompt, 4, &gp, &g, &err)) {
        T_CHECKF(0, "add_wait: %s", err.msg);
        goto out;
    }
    gen_add_wait(g, 500); /* the prompt's: not counted */
    T_CHECK(gen_next(g) != NULL && gen_get_stats(g).decode_ms < 500);
    const double before = gen_get_stats(g).decode_ms;
    gen_add_wait(g, 500);
    T_NEAR(gen_get_stats(g).decode_ms, before + 500, 1e-9);
    while (gen_next(g)) {}
    const gen_stats st = gen_get_stats(g);
    T_CHECK(st.latency.max_ms >= 500 && st.latency.max_ms < 1000);
out:
    gen_free(g);
    session_free(s);
    tokenizer_free(tok);
    model_free(m);
}

static void test_self_draft_refused(const char *q4_path) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_SELF;
    T_CHECK(octo_load_model(c, q4_path, &mo) == NULL && strstr(octo_last_error(c), "already low-precision"));
    printf("self-draft of a Q4_0 model: %s\n", octo_last_error(c));
    mo.auto_draft = 7;
    T_CHECK(octo_load_model(c, q4_path, &mo) == NULL && strstr(octo_last_error(c), "auto_draft"));
    octo_client_free(c);
}

/* One table of proposer names (speculative/proposer_table.c) behind the
 * public modes: each name gives its enum number and back, the list ends. */
static void test_mode_names(void) {
    static const char *want[] = {"auto", "none", "ngram", "draft", "self", "lookahead"};
    for (int m = 0; m < 6; m++) {
        T_CHECKF(octo_spec_mode_name(m) && !strcmp(octo_spec_mode_name(m), want[m]), "mode %d is named %s", m,
                 octo_spec_mode_name(m) ? octo_spec_mode_name(m) : "(null)");
        T_EQ_INT(octo_spec_mode_from_name(want[m]), m);
    }
    T_EQ_INT(octo_spec_mode_from_name("lookahead"), OCTO_SPEC_LOOKAHEAD);
    T_EQ_INT(octo_spec_mode_from_name("self"), OCTO_SPEC_SELF);
    int n = 0; /* the list ends at its first NULL; every name maps back to its number */
    while (octo_spec_mode_name(n)) {
        T_EQ_INT(octo_spec_mode_from_name(octo_spec_mode_name(n)), n);
        n++;
    }
    T_CHECK(n >= 6 && n < 64 && octo_spec_mode_name(-1) == NULL && octo_spec_mode_name(n + 1) == NULL);
    T_EQ_INT(octo_spec_mode_from_name("sideways"), -1);
    T_EQ_INT(octo_spec_mode_from_name(NULL), -1);
}

/* speculative/adaptive.c: the draft length and the rule that speculation must pay. */
/* The tree budget past the largest size measured: passes of 1 to 4 tokens
 * cost one token's time, 5 cost 30 % more (the rows cost compute from there,
 * as on the Xeon with the 1.1B F16 model). A line of 11 drafts, each adding
 * 0.3 expected tokens: 4 tokens give 1.9 for 100 ms, 5 give 2.2 for 130; 12
 * would give 4.3 for about 340 ms at that slope, and the budget stays at 3
 * drafts. It chose all 11 when a size never measured was costed +2 % a token
 * over the largest measured one (148 ms for 12). */
static void test_budget_beyond(void) {
    spec_budget b;
    spec_budget_init(&b, 0);
    for (int n = 1; n <= 5; n++) spec_budget_measured(&b, n, n < 5 ? 100.0 : 130.0, 0, 0.0, 0.0, n);
    spec_tree t = {.n = 12};
    for (int i = 1; i < t.n; i++) t.value[i] = 0.3f, t.depth[i] = (int8_t)i, t.parent[i] = (int8_t)(i - 1);
    T_EQ_INT(spec_budget_choose(&b, &t), 3);
    /* where the fifth costs what the fourth does, the whole line pays */
    spec_budget_init(&b, 0);
    for (int n = 1; n <= 5; n++) spec_budget_measured(&b, n, 100.0, 0, 0.0, 0.0, n);
    T_EQ_INT(spec_budget_choose(&b, &t), 11);
}

static void test_adaptive(void) {
    spec_length l;
    spec_length_init(&l, 0);
    T_EQ_INT(l.k, 4);
    spec_length_update(&l, 31, 31); /* a window not yet full: no change */
    T_EQ_INT(l.k, 4);
    spec_length_update(&l, 1, 1);   /* 32 of 32 accepted: longer */
    T_EQ_INT(l.k, 5);
    spec_length_update(&l, 32, 15); /* 15 of 32 < 50 %: shorter */
    T_EQ_INT(l.k, 4);
    spec_length_update(&l, 32, 16); /* 16 of 32: neither */
    T_EQ_INT(l.k, 4);
    spec_length_init(&l, 7);
    spec_length_update(&l, 64, 0);  /* fixed: never changes */
    T_EQ_INT(l.k, 7);
    double s = -1, p = -1;
    /* 6 passes (12 tokens in 30 ms: 2.5 ms each) against 2 plain ones of 2 ms: off */
    spec_timing t = {.verify_passes = 6, .proposing_passes = 6, .accepted = 6, .spec_ms = 30.0, .plain_passes = 2,
                     .plain_ms = 4.0};
    T_CHECK(spec_stop(&t, 6, &s, &p));
    T_NEAR(s, 2.5, 1e-12);
    T_NEAR(p, 2.0, 1e-12);
    t.spec_ms = 20.0; /* 1.67 ms a token: it pays */
    T_CHECK(!spec_stop(&t, 6, &s, &p));
    T_CHECK(!spec_stop(&t, 8, &s, &p) && !spec_stop(&(spec_timing){.verify_passes = 9, .spec_ms = 1, .plain_passes = 1}, 6, &s, &p));
    /* three passes with drafts, none accepted: off at once, however fast */
    t = (spec_timing){.verify_passes = 3, .proposing_passes = 3, .spec_ms = 0.3};
    T_CHECK(spec_stop(&t, 6, &s, &p));
    /* the probe: every third pass is plain until two are timed */
    t = (spec_timing){.plain_passes = 1};
    T_CHECK(!spec_probe_plain(&t, 0) && !spec_probe_plain(&t, 1) && spec_probe_plain(&t, 2) && spec_probe_plain(&t, 5));
    t.plain_passes = 2;
    T_CHECK(!spec_probe_plain(&t, 2));
    test_budget_beyond();
}

/* The tokens of one generation of s under grammar g (NULL: none), with the
 * draft ds proposing (NULL: plain); *complete: the text is a whole sentence of g. */
static int grammar_run(session *s, session *ds, const tokenizer *tok, const grammar *g, const grammar_vocab *gv,
                       float temp, int tree, uint64_t seed, int32_t *out, bool *complete, int *accepted) {
    const int32_t prompt[] = {1, 403, 407, 261, 378}; /* "Once upon a time" in the 512-token vocabulary */
    err_t err = {0};
    session_reset(s);
    if (ds) session_reset(ds);
    gen_params gp = {.max_tokens = 200, .sampling = sampler_defaults(), .proposer = ds ? &proposer_draft : NULL,
                     .spec_tree = tree, .draft = ds, .grammar = g, .grammar_vocab = gv};
    gp.sampling.temperature = temp, gp.sampling.top_k = 0, gp.sampling.top_p = 1.0f, gp.sampling.min_p = 0.0f;
    gp.sampling.seed = seed;
    generation *gen = NULL;
    if (gen_start(s, tok, prompt, 5, &gp, &gen, &err)) {
        T_CHECKF(0, "grammar run: %s", err.msg);
        return 0;
    }
    char text[4096];
    size_t len = 0;
    for (const char *p; (p = gen_next(gen));) {
        const size_t k = strlen(p);
        if (len + k < sizeof text) memcpy(text + len, p, k), len += k;
    }
    T_CHECKF(gen_error(gen)->code == ERR_OK, "grammar run: %s", gen_error(gen)->msg);
    int n = 0;
    const int32_t *t = gen_tokens(gen, &n);
    memcpy(out, t, sizeof *t * (size_t)n);
    *accepted += gen_get_stats(gen).spec_accepted;
    grammar_match *m = NULL;
    *complete = grammar_match_new(g, NULL, &m, &err) == ERR_OK && grammar_match_text(m, text, len) &&
                grammar_match_complete(m);
    grammar_match_free(m);
    gen_free(gen);
    return n;
}

/* Speculation under a grammar, with the trained draft: greedy text is the
 * same as plain decoding's, in lines and in trees (a draft the grammar
 * forbids is rejected as the target rejects it), and sampled texts are
 * whole sentences of the grammar. */
static void test_grammar_draft(const char *path, const char *dpath) {
    err_t err = {0};
    model *m = NULL, *d = NULL;
    tokenizer *tok = NULL;
    grammar_vocab *gv = NULL;
    session *s = NULL, *ds = NULL;
    if (model_load(path, &m, &err) || model_load(dpath, &d, &err) || tokenizer_load(m->gguf, &tok, &err) ||
        grammar_vocab_new(tok, &gv, &err) || session_new(m, 512, QT_F32, 2, &s, &err) ||
        session_new(d, 256, QT_F32, 2, &ds, &err)) {
        T_CHECKF(0, "grammar draft: %s", err.msg);
        goto out;
    }
    const char *schemas[] = {
        ("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":20},"
         "\"age\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":99}},\"required\":[\"name\",\"age\"]}"),
        "{\"type\":\"array\",\"items\":{\"enum\":[\"the cat\",\"a dog\",\"Lily\"]},\"maxItems\":5}",
        "{\"type\":\"string\",\"maxLength\":60}"};
    int same = 0, runs = 0, complete_n = 0, sampled = 0, accepted = 0, plain_accepted = 0;
    const int n_schemas = tu_quick() ? 1 : 3, n_seeds = tu_quick() ? 3 : 10; /* quick: qemu, sanitizers */
    for (int i = 0; i < n_schemas; i++) {
        char *gbnf = NULL;
        grammar *g = NULL;
        if (json_schema_to_gbnf(schemas[i], strlen(schemas[i]), &gbnf, &err) ||
            grammar_parse(gbnf, strlen(gbnf), &g, &err)) {
            T_CHECKF(0, "grammar draft: %s", err.msg);
            free(gbnf);
            continue;
        }
        int32_t base[256], ids[256];
        bool complete;
        const int nb = grammar_run(s, NULL, tok, g, gv, 0.0f, 0, 0, base, &complete, &plain_accepted);
        complete_n += complete;
        for (int tree = -1; tree <= 0; tree++) { /* lines, then trees */
            const int n = grammar_run(s, ds, tok, g, gv, 0.0f, tree, 0, ids, &complete, &accepted);
            same += n == nb && !memcmp(ids, base, sizeof *ids * (size_t)n);
            complete_n += complete;
            runs++;
        }
        for (uint64_t seed = 0; seed < (uint64_t)n_seeds; seed++) {
            grammar_run(s, ds, tok, g, gv, 1.0f, 0, seed, ids, &complete, &accepted);
            sampled += complete;
        }
        grammar_free(g);
        free(gbnf);
    }
    printf("grammar with the trained draft: greedy identical in %d of %d runs, %d of %d greedy texts complete, "
           "%d of %d sampled complete; %d drafts accepted\n", same, runs, complete_n, 3 * n_schemas, sampled,
           n_schemas * n_seeds, accepted);
    T_CHECK(accepted > 20 * n_schemas && plain_accepted == 0);
    T_EQ_INT(same, runs);
    T_EQ_INT(complete_n, 3 * n_schemas);
    T_EQ_INT(sampled, n_schemas * n_seeds);
out:
    session_free(ds), session_free(s);
    grammar_vocab_free(gv);
    tokenizer_free(tok);
    model_free(d), model_free(m);
}

int main(void) {
    test_mode_names();
    test_adaptive();
    test_ngram();
    /* synthetic models: random weights repeat themselves a lot under greedy decoding */
    char path[512];
    char *sp[] = {"hello hello hello", "the cat sat on the mat and the cat", "a b c d a b c d a b", "xyz"};
    char dpath[512], bad[512];
    tu_tmp_path(path, sizeof path, "spec-dense.gguf");
    tu_tmp_path(dpath, sizeof dpath, "spec-draft.gguf");
    tu_tmp_path(bad, sizeof bad, "spec-badvocab.gguf");
    synth_model(path, 0, 8 /* Q8_0 */);
    synth_model(dpath, -1, 8);
    synth_model(bad, 1000, 8);
    test_self_draft_refused(dpath);
    test_tree_rollback(path);
    test_draft_tree_paths(path);
    compare_on("synthetic dense Q8_0, n-gram", path, NULL, sp, 4, 48);
    compare_mode("synthetic dense Q8_0, lookahead", path, NULL, OCTO_SPEC_LOOKAHEAD, sp, 4, 48);
    compare_on("synthetic dense Q8_0, Q4_0 draft", path, dpath, sp, 4, 48);
    /* under an emulator, what is the same C on every kernel path (the acceptance rules' statistics,
     * budgets, placement, pacing, grammars) is left to the native runs */
    if (!tu_emulated()) {
        test_chi2();
        test_rejection_exact();
        test_tree_rejection_exact();
        test_latency_bursts(path, dpath);
        test_sampled_end_to_end(path, dpath);
        test_draft_budget(path, dpath);
        test_placed_draft(path, dpath);
        test_add_wait(path);
    }
    /* bad drafts: another vocabulary, a draft larger than the target, a file that is not a model */
    {
        octo_client *c = octo_client_new(NULL);
        octo_model_options mo = octo_model_options_defaults();
        mo.draft_model = bad;
        T_CHECK(octo_load_model(c, path, &mo) == NULL && strstr(octo_last_error(c), "vocabulary"));
        printf("different vocabulary: %s\n", octo_last_error(c));
        /* a draft larger than the model is loaded (it can score prompts) but never speculates */
        mo.draft_model = path;
        octo_model *big = octo_load_model(c, dpath, &mo);
        T_CHECK(big != NULL);
        octo_generate_params gp = octo_generate_params_defaults();
        gp.max_tokens = 4;
        gp.spec = OCTO_SPEC_DRAFT;
        T_CHECK(big && octo_generate(big, "Once", &gp) == NULL && strstr(octo_model_error(big), "not smaller"));
        printf("draft larger than the model: %s\n", big ? octo_model_error(big) : "?");
        gp.spec = OCTO_SPEC_AUTO;
        octo_stream *st = big ? octo_generate(big, "Once", &gp) : NULL;
        while (st && octo_stream_next(st)) {}
        T_CHECK(st && strcmp(octo_model_stats(big).spec_proposer, "draft") != 0);
        octo_stream_free(st);
        octo_model_free(big);
        char junk[512];
        tu_tmp_path(junk, sizeof junk, "spec-junk.gguf");
        T_CHECK(tu_write_file(junk, "GGUF\3\0\0\0garbage", 15));
        mo.draft_model = junk;
        T_CHECK(octo_load_model(c, path, &mo) == NULL);
        printf("corrupt draft: %s\n", octo_last_error(c));
        remove(junk);
        octo_client_free(c);
    }
    /* no draft given: NAME.draft.gguf beside NAME.gguf is found and used by
     * OCTO_SPEC_AUTO; one that cannot serve is passed over, with the reason */
    {
        char beside[512];
        tu_tmp_path(beside, sizeof beside, "spec-dense.draft.gguf");
        octo_client *c = octo_client_new(NULL);
        const char *cases[] = {"none", "a draft", "another vocabulary", "a corrupt file"};
        const char *want[] = {"n-gram: no draft given, none at", "(found beside the model)", "vocabulary",
                              "was not used"};
        for (int k = 0; k < 4; k++) {
            remove(beside);
            if (k == 1) synth_model(beside, -1, 8);
            if (k == 2) synth_model(beside, 1000, 8);
            if (k == 3) T_CHECK(tu_write_file(beside, "GGUF\3\0\0\0garbage", 15));
            octo_model *m = octo_load_model(c, path, NULL);
            T_CHECKF(m != NULL, "[%s beside] the load failed: %s", cases[k], octo_last_error(c));
            if (!m) continue;
            const octo_model_info in = octo_model_info_get(m);
            printf("%s beside the model: %s\n", cases[k], in.speculation);
            T_CHECKF(strstr(in.speculation, want[k]) != NULL, "[%s beside] '%s'", cases[k], in.speculation);
            octo_stats st;
            free(generate(m, sp[1], OCTO_SPEC_AUTO, 0, 24, &st).ids);
            T_CHECKF(!strcmp(st.spec_proposer, k == 1 ? "draft" : "ngram"), "[%s beside] AUTO used %s", cases[k],
                     st.spec_proposer);
            octo_model_free(m);
        }
        remove(beside);
        octo_client_free(c);
    }
    remove(path), remove(dpath), remove(bad);
    tu_tmp_path(path, sizeof path, "spec-moe.gguf");
    synth_model(path, 4, 8 /* Q8_0 */);
    compare_on("synthetic MoE Q8_0, n-gram", path, NULL, sp, 4, 48);
    compare_mode("synthetic MoE Q8_0, lookahead", path, NULL, OCTO_SPEC_LOOKAHEAD, sp, 4, 48);
    remove(path);

    /* the trained model: the clone's own; its prompts from ../shared's text, else this file's stories */
    const char *d = tu_data_dir();
    char model[512], text[512];
    tu_repo_model(model, sizeof model);
    snprintf(text, sizeof text, "%s/text/tinystories-valid-head.txt", d ? d : ".");
    char *prompts[60];
    /* quick: sanitizers; emulated: qemu, where 10 prompts took 190 s of n-gram and lookahead */
    const int want = tu_emulated() ? 4 : tu_quick() || !d ? 10 : 60;
    const int n = make_prompts(d ? text : NULL, prompts, want);
    T_CHECKF(n == want, "only %d prompts from %s", n, text);
    compare_on("stories260K, n-gram", model, NULL, prompts, n, 64);
    compare_mode("stories260K, lookahead", model, NULL, OCTO_SPEC_LOOKAHEAD, prompts, n, 64);
    test_seeded_sampled(model, prompts, n < 10 ? n : 10);
    const int n_self = tu_quick() ? 5 : 30;
    test_self_draft(model, prompts, n_self < n ? n_self : n);
    char draft[512];
    snprintf(draft, sizeof draft, "%s/models/llama2xs-260k.gguf", d ? d : ".");
    if (d && !tu_emulated()) test_grammar_draft(model, draft);
    else printf("note: %s: speculation under a grammar with the trained draft was not run\n",
                d ? "under an emulator" : "no ../shared");
    for (int i = 0; i < n; i++) free(prompts[i]);
    T_DONE();
}
