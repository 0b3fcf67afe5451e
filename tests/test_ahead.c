/*
 * test_ahead — the draft drafting beside verification (speculative/ahead.h).
 *
 *   1. Exact under sampling: the draft proposer itself, over a toy draft
 *      model with a thread "of its own", lines of 3 whose next pass starts
 *      from the steps drafted beside the last one; tokens 3..5 of each run
 *      against plain decoding's exact joint. A harness that verifies the
 *      passes built from kept steps against the wrong rows must be seen.
 *   2. Halting: a pass abandoned with steps in flight keeps nothing, and the
 *      proposer is freed while its thread drafts.
 *   3. End to end on two synthetic models, the draft given a core of its own
 *      (octo_model_options.draft_threads 1): greedy output equals plain
 *      decoding's with lines and trees, the steps drafted beside are used,
 *      and a seeded sampled generation is the same twice.
 *   4. The option's errors: more draft cores than leave one for the model.
 *
 * It runs under ThreadSanitizer in .ci/run: the draft's session is evaluated
 * on its thread while the target's pass runs on the caller's.
 */
#define _GNU_SOURCE /* cpu_set_t */
#include <sched.h>
#include <string.h>

#include "model/synth.h"
#include "octo.h"
#include "platform/cpu.h"
#include "spec_toy.h"
#include "speculative/proposer.h"
#include "speculative/verify.h"
#include "t.h"
#include "util.h"

/* ---- 1. exact under sampling ---- */

/* The toy draft model: logits for each position from the target's, moved by
 * the token before, so that a step reused at the wrong depth or after the
 * wrong token would be drawn from the wrong distribution. */
typedef struct {
    spec_lm lm;
    const toy_target *tt;
    int32_t tokens[TPOS];
    int n;
} toy_lm;

static int toy_common_prefix(void *c, const int32_t *t, int n) {
    const toy_lm *d = c;
    int i = 0;
    while (i < n && i < d->n && d->tokens[i] == t[i]) i++;
    return i;
}
static void toy_truncate(void *c, int n) {
    toy_lm *d = c;
    if (n < d->n) d->n = n;
}
/* After the token at position j (0: the prompt's), logits for output position j. */
static err_code toy_eval(void *c, const int32_t *t, int n, float *logits, err_t *err) {
    toy_lm *d = c;
    if (d->n + n > TPOS) return err_set(err, ERR_INVALID_ARG, "toy draft: out of context");
    memcpy(d->tokens + d->n, t, sizeof(int32_t) * (size_t)n);
    d->n += n;
    const int j = d->n - 1, last = t[n - 1];
    for (int v = 0; v < TV; v++) logits[v] = d->tt->P[j][v] + 0.4f * (float)sin(1.3 * last + 0.7 * v);
    return ERR_OK;
}
static void toy_nothing(void *c) { (void)c; }

static void toy_lm_init(toy_lm *d, const toy_target *tt) {
    *d = (toy_lm){.tt = tt};
    d->lm = (spec_lm){.ctx = d, .n_ctx = TPOS, .common_prefix = toy_common_prefix, .truncate = toy_truncate,
                      .eval = toy_eval, .enter = toy_nothing, .leave = toy_nothing, .own_cores = true,
                      .pin = toy_nothing};
}

/* WRONG ways to use what was drafted beside verification. */
enum { RIGHT, WRONG_ROWS, WRONG_GUESS };

/* One pass from the run's sequence so far (seq[0] the prompt's token, then
 * len tokens out), as the generation loop runs it: propose a line, verify
 * it against the target's rows with the draft's guess at the token after
 * it, tell the proposer. WRONG_ROWS: a pass built from kept steps verified
 * against the distributions one row on; WRONG_GUESS: the guess taken
 * whenever the line is. Returns the tokens the pass added, -1 on an error. */
static int toy_pass(void *st, toy_target *tt, int32_t *seq, int len, int wrong) {
    spec_pass pass;
    pass.draft_tree = false; /* as the generation loop does */
    const spec_view v = {.tokens = seq, .n_past = len, .last = seq[len], .n_ctx = TPOS};
    spec_proposer_stats before, after;
    err_t err = {0};
    proposer_draft.stats(st, &before);
    if (proposer_draft.propose(st, &v, 3, &pass, &err) < 2) return -1; /* TPOS leaves room for 2 at the end */
    proposer_draft.stats(st, &after);
    float rows[(SPEC_MAX_K + 1) * TV], scratch[3 * TV], shifted[(SPEC_MAX_K + 1) * TV];
    const float *q = pass.q;
    if (wrong == WRONG_ROWS && after.ahead_used > before.ahead_used) {
        memcpy(shifted, pass.q + TV, sizeof(float) * (size_t)pass.k * TV);
        q = shifted;
    }
    for (int i = 0; i <= pass.k; i++) memcpy(rows + i * TV, tt->P[len + i], sizeof(float) * TV);
    int32_t next;
    spec_guess guess;
    const bool guessed = proposer_draft.guess(st, &guess);
    const int a = spec_verify_guess(tt->smp, rows, TV, pass.tokens + 1, q, pass.k, guessed ? &guess : NULL, scratch,
                                    &next);
    if (wrong == WRONG_GUESS && guessed && a == pass.k) next = guess.token;
    const int path[] = {0, 1, 2, 3};
    const spec_outcome o = {.logits = rows, .n_vocab = TV, .accepted = a, .path = path, .next = next};
    proposer_draft.verified(st, &pass, &o);
    for (int i = 0; i < a; i++) seq[1 + len + i] = pass.tokens[1 + i];
    seq[1 + len + a] = next;
    return a + 1;
}

static double toy_ahead_run(long n_trials, int wrong, long *used, double *stat, int *df) {
    *stat = 0, *df = 0, *used = 0;
    toy_target tt;
    if (toy_init(&tt, 777)) return -1;
    toy_lm d;
    toy_lm_init(&d, &tt);
    const spec_setup su = {.n_vocab = TV, .n_ctx = TPOS, .smp = tt.smp, .sampled = true, .lm = &d.lm, .ahead = true};
    void *st = NULL;
    err_t err = {0};
    double pv = -1;
    long count[TV * TV * TV] = {0};
    if (proposer_draft.create(&su, &st, &err)) goto out;
    long n = 0;
    for (; n < n_trials; n++) {
        int32_t seq[TPOS + SPEC_MAX_K + 2] = {0};
        int len = 0, got = 0;
        while (len < 6 && (got = toy_pass(st, &tt, seq, len, wrong)) > 0) len += got;
        if (got < 0) break;
        count[(seq[4] * TV + seq[5]) * TV + seq[6]]++;
    }
    spec_proposer_stats s;
    proposer_draft.stats(st, &s);
    *used = s.ahead_used;
    double prob[TV * TV * TV];
    for (int i = 0; i < TV * TV * TV; i++)
        prob[i] = (double)tt.p[3][i / (TV * TV)] * tt.p[4][i / TV % TV] * tt.p[5][i % TV];
    if (n == n_trials) pv = chi2_fit(count, prob, TV * TV * TV, n_trials, stat, df);
out:
    if (st) proposer_draft.free(st);
    sampler_free(tt.smp);
    return pv;
}

static void test_exact(void) {
    const long N = 20000; /* each wrong use still scores chi2 > 250 */
    const char *names[] = {"proposer_draft, sampled lines of 3, the token after coupled to the guess",
                           "WRONG: kept steps verified against the next rows", "WRONG: the guess taken with the line"};
    for (int wrong = RIGHT; wrong <= WRONG_GUESS; wrong++) {
        double stat;
        int df;
        long used;
        const double pv = toy_ahead_run(N, wrong, &used, &stat, &df);
        toy_judge("drafting beside verification", names[wrong], pv, stat, df, N, wrong == RIGHT);
        printf("  %ld draft steps drafted beside verification used\n", used);
        T_CHECKF(used > N / 4, "only %ld steps drafted beside verification were used", used);
    }
}

/* ---- 2. halting ---- */

static void test_halt(void) {
    toy_target tt;
    T_CHECK(toy_init(&tt, 99) == 0);
    toy_lm d;
    toy_lm_init(&d, &tt);
    const spec_setup su = {.n_vocab = TV, .n_ctx = TPOS, .smp = tt.smp, .sampled = true, .lm = &d.lm, .ahead = true};
    void *st = NULL;
    err_t err = {0};
    T_CHECK(proposer_draft.create(&su, &st, &err) == ERR_OK);
    int32_t seq[TPOS + 2] = {0};
    spec_pass pass;
    pass.draft_tree = false;
    const spec_view v = {.tokens = seq, .n_past = 0, .last = 0, .n_ctx = TPOS};
    spec_proposer_stats s0, s1;
    proposer_draft.stats(st, &s0);
    T_EQ_INT(proposer_draft.propose(st, &v, 3, &pass, &err), 4); /* its thread now drafts from the line's end */
    proposer_draft.halt(st);                                    /* the target failed: nothing is kept */
    memcpy(seq + 1, pass.tokens + 1, sizeof(int32_t) * 3);
    seq[4] = 0;
    const spec_view w = {.tokens = seq, .n_past = 3, .last = seq[3], .n_ctx = TPOS};
    T_CHECK(proposer_draft.propose(st, &w, 2, &pass, &err) == 3);
    proposer_draft.stats(st, &s1);
    printf("halted: %d steps dropped, %d used; the next proposal drafted %d steps itself\n",
           s1.ahead_dropped - s0.ahead_dropped, s1.ahead_used - s0.ahead_used, pass.draft_steps);
    T_EQ_INT(s1.ahead_used, s0.ahead_used);
    T_CHECK(pass.draft_steps >= 2);
    proposer_draft.free(st); /* with the second proposal's thread drafting */
    sampler_free(tt.smp);
}

/* ---- 3. end to end ---- */

static void synth(const char *path, unsigned type) {
    synth_opts o = synth_defaults();
    o.type = type;
    o.n_embd = 128, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 256, o.n_vocab = 320, o.n_ctx = 512, o.seed = 11;
    err_t err = {0};
    T_CHECKF(synth_write(&o, path, &err) == ERR_OK, "%s", err.msg);
}

static int generate(octo_model *m, const char *prompt, const octo_generate_params *p, int32_t *ids, int max,
                    octo_stats *st) {
    octo_stream *s = octo_generate(m, prompt, p);
    if (!s) return -1;
    while (octo_stream_next(s)) {
    }
    const int32_t *t;
    int n = octo_stream_status(s) == OCTO_OK ? octo_stream_tokens(s, &t) : -1;
    if (n > max) n = max;
    if (n > 0) memcpy(ids, t, sizeof(int32_t) * (size_t)n);
    octo_stream_free(s);
    *st = octo_model_stats(m);
    return n;
}

/* Greedy: lines, adaptive trees and trees of 6 against plain decoding. */
static void placed_greedy(octo_model *m) {
    const char *prompts[] = {"hello hello hello", "the cat sat on the mat and the cat", "a b c d a b c d a b", "xyz"};
    const int trees[] = {-1, 0, 6};
    int differ = 0, runs = 0, used = 0, dropped = 0, accepted = 0, proposed = 0;
    for (int i = 0; i < 4; i++) {
        octo_generate_params p = octo_generate_params_defaults();
        p.temperature = 0.0f, p.max_tokens = 48, p.spec = OCTO_SPEC_NONE;
        int32_t plain[48], spec[48];
        octo_stats st;
        const int n = generate(m, prompts[i], &p, plain, 48, &st);
        for (int t = 0; t < 3; t++) {
            p.spec = OCTO_SPEC_DRAFT, p.spec_tree = trees[t];
            const int ns = generate(m, prompts[i], &p, spec, 48, &st);
            differ += ns != n || n <= 0 || memcmp(plain, spec, sizeof(int32_t) * (size_t)n) != 0;
            used += st.spec_ahead_used, dropped += st.spec_ahead_dropped, runs++;
            accepted += st.spec_accepted, proposed += st.spec_proposed;
        }
    }
    printf("greedy, the draft on its own core: %d of %d generations differ from plain decoding; %d of %d drafts "
           "accepted; %d steps drafted beside verification used, %d dropped\n", differ, runs, accepted, proposed, used,
           dropped);
    T_EQ_INT(differ, 0);
    T_CHECK(used > 20);
}

/* Sampled: the same seed gives the same text, however far the thread got
 * with the steps that were dropped. */
static void placed_sampled(octo_model *m) {
    octo_generate_params p = octo_generate_params_defaults();
    /* peaked: the target's own draw after a line it kept matches the draft's guess often */
    p.temperature = 0.2f, p.max_tokens = 48, p.seed = 5, p.spec = OCTO_SPEC_DRAFT;
    p.spec_k = 3; /* fixed: an adaptive generation may switch speculation off by its timings */
    int32_t a[48], b[48];
    octo_stats sa, sb;
    const int na = generate(m, "the cat sat on the mat and the cat", &p, a, 48, &sa);
    const int nb = generate(m, "the cat sat on the mat and the cat", &p, b, 48, &sb);
    printf("sampled (temperature 0.2), seed 5 twice: %d and %d tokens, %s; %d and %d steps drafted beside used\n", na, nb,
           na == nb && na > 0 && !memcmp(a, b, sizeof(int32_t) * (size_t)na) ? "identical" : "DIFFERENT",
           sa.spec_ahead_used, sb.spec_ahead_used);
    T_CHECK(na == nb && na > 0 && !memcmp(a, b, sizeof(int32_t) * (size_t)na));
    T_CHECK(sa.spec_ahead_used > 0 && sa.spec_ahead_used == sb.spec_ahead_used);
}

static void test_placed(const char *path, const char *dpath) {
    cpu_set_t mine;
    const int cores = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 1;
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.draft_model = dpath;
    mo.draft_threads = cores; /* 4. none would be left for the model */
    T_CHECK(octo_load_model(c, path, &mo) == NULL && strstr(octo_last_error(c), "no core for the model"));
    printf("draft_threads %d of %d cores: %s\n", cores, cores, octo_last_error(c));
    mo.draft_threads = -1;
    T_CHECK(octo_load_model(c, path, &mo) == NULL && strstr(octo_last_error(c), "draft_threads -1"));
    if (cores < 2) {
        printf("one core to run on: drafting beside verification not checked end to end\n");
        octo_client_free(c);
        return;
    }
    mo.draft_threads = 1;
    octo_model *m = octo_load_model(c, path, &mo);
    if (!plat_pin_available()) { /* the POSIX fallback: cores of the draft's own cannot be had */
        T_CHECKF(m == NULL && strstr(octo_last_error(c), "cannot place threads"), "%s", octo_last_error(c));
        printf("draft_threads 1 where threads cannot be pinned: %s\n", octo_last_error(c));
        octo_client_free(c);
        return;
    }
    T_CHECKF(m != NULL, "load: %s", octo_last_error(c));
    if (m) {
        const octo_model_info info = octo_model_info_get(m);
        printf("placed: %d model threads, %d of the draft's own (%s)\n", info.n_threads, info.draft_threads, info.cores);
        T_EQ_INT(info.draft_threads, 1);
        T_EQ_INT(info.n_threads, cores - 1);
        placed_greedy(m);
        placed_sampled(m);
    }
    octo_model_free(m);
    octo_client_free(c);
}

int main(void) {
    test_exact();
    test_halt();
    char path[512], dpath[512];
    tu_tmp_path(path, sizeof path, "ahead-target.gguf");
    tu_tmp_path(dpath, sizeof dpath, "ahead-draft.gguf");
    synth(path, 1 /* F16 */);
    synth(dpath, 8 /* Q8_0: the same weights at lower precision, drafts the target mostly keeps */);
    test_placed(path, dpath);
    remove(path), remove(dpath);
    T_DONE();
}
