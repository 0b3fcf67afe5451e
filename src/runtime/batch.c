/*
 * batch — see batch.h.
 */
#include "batch.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/kernels/packed.h"
#include "runtime/session.h"

#define BATCH_MAX 64          /* sessions in one step */
#define PROMPT_ALONE 256      /* a prompt chunk in a step without decode rows (as gen_next's own) */
#define PROMPT_ROWS_ALONE 512 /* prompt rows in such a step, in all */
#define PROMPT_MIN 16         /* the smallest chunk the time budget gives */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void batch_init(batch_state *b) { *b = (batch_state){0}; }

/* Prompt rows a step whose decode rows and verify passes take `taken`
 * rows may add: the time budget's, and below the bf16 kernel's threshold so
 * those rows are computed as alone (batch.h). */
static int prompt_budget(const batch_state *b, int taken) {
    if (!taken) return PROMPT_ROWS_ALONE;
    const double step = 2.0 * b->decode_ms > BATCH_STEP_MS ? 2.0 * b->decode_ms : BATCH_STEP_MS;
    int rows = b->row_ms > 0.0 ? (int)((step - b->decode_ms) / b->row_ms) : PROMPT_MIN;
    if (rows < PROMPT_MIN) rows = PROMPT_MIN;
    const int exact = PACKED_BF16_MIN_TOKENS - 1 - taken;
    return rows < exact ? rows : exact;
}

typedef struct {
    generation *g;
    gen_rows r;
} member;

/* Does a verify pass of g pay in a step of K decoding sessions? Its k
 * drafts add k rows that all K wait for: it pays when the drafts it gets
 * accepted per pass outweigh them, a * T0 > K * k * r, with T0 the measured
 * decode step and r the measured cost of a row beyond a session's first
 * (batch.h). Before both are measured, it verifies (and so measures). */
static bool verify_pays(const batch_state *b, const generation *g, int K, int room) {
    double a;
    int k;
    if (!gen_spec_outlook(g, room, &a, &k)) return false;
    if (b->decode_ms <= 0.0 || b->row_ms <= 0.0) return true;
    return a * b->decode_ms > (double)K * (double)k * b->row_ms;
}

/* The step's members: every decode row due (a verify pass where it pays),
 * then prompt chunks within the budget. */
static int gather(const batch_state *b, generation *const *g, int n, member *mb) {
    int k = 0, decoding = 0;
    for (int i = 0; i < n && k < BATCH_MAX; i++)
        if (gen_want_rows(g[i], 0, 0, &mb[k].r)) mb[k++].g = g[i], decoding++;
    int rows = decoding; /* a verify pass's rows stay under the bf16 threshold with the rest (batch.h) */
    for (int i = 0; i < k && decoding > 1; i++) { /* alone, a generation speculates in its own gen_next */
        const int room = PACKED_BF16_MIN_TOKENS - rows;
        if (!verify_pays(b, mb[i].g, decoding, room)) continue;
        if (gen_want_rows(mb[i].g, 0, room, &mb[i].r)) {
            rows += mb[i].r.n - 1;
            continue;
        }
        memmove(&mb[i], &mb[i + 1], sizeof *mb * (size_t)(k - i - 1)); /* its proposer failed: it stopped */
        k--, i--, decoding--, rows--;
    }
    int budget = prompt_budget(b, rows);
    for (int i = 0; i < n && k < BATCH_MAX && budget > 0; i++) {
        const int chunk = decoding ? budget : (budget < PROMPT_ALONE ? budget : PROMPT_ALONE);
        if (!gen_want_rows(g[i], chunk, 0, &mb[k].r) || !mb[k].r.prompt) continue;
        budget -= mb[k].r.n;
        mb[k++].g = g[i];
    }
    return k;
}

/* The pass failed: each member alone, so only the one at fault fails. */
static void one_by_one(member *mb, int k) {
    for (int i = 0; i < k; i++) {
        err_t e = {0};
        const gen_rows *r = &mb[i].r;
        session *s = gen_session(mb[i].g);
        const double t0 = now_ms();
        if (r->verify) session_eval_tree(s, r->tokens, r->n, r->anc, r->out_rows, r->n_out, r->logits, &e);
        else session_eval(s, r->tokens, r->n, false, r->logits, &e);
        gen_rows_done(mb[i].g, r, &e, now_ms() - t0, 1);
    }
}

/* The step's time into the measured costs: a decode step's, and the cost
 * of a row beyond each session's first (a prompt's, a verify pass's). */
static void learn(batch_state *b, double ms, int extra_rows) {
    if (!extra_rows) {
        b->decode_ms = ms;
        return;
    }
    double per = (ms - b->decode_ms) / extra_rows;
    if (per <= 0.0) per = ms / extra_rows / 4.0;
    b->row_ms = b->row_ms > 0.0 ? 0.7 * b->row_ms + 0.3 * per : per;
}

int batch_step(batch_state *b, generation *const *g, int n) {
    member mb[BATCH_MAX];
    const int k = gather(b, g, n, mb);
    if (k < 2) return 0;
    session_part parts[BATCH_MAX];
    int rows = 0, prompt_rows = 0, verify = 0;
    for (int i = 0; i < k; i++) {
        const gen_rows *r = &mb[i].r;
        parts[i] = (session_part){.s = gen_session(mb[i].g), .tokens = r->tokens, .n = r->n, .logits = r->logits,
                                  .tentative = r->verify, .anc = r->anc, .out_rows = r->out_rows, .n_out = r->n_out};
        rows += r->n;
        prompt_rows += r->prompt ? r->n : 0;
        verify += r->verify;
    }
    err_t e = {0};
    const double t0 = now_ms();
    if (session_eval_batch(parts, k, &e)) {
        b->retried++;
        one_by_one(mb, k);
    } else {
        const double ms = now_ms() - t0;
        for (int i = 0; i < k; i++) gen_rows_done(mb[i].g, &mb[i].r, NULL, ms, k);
        learn(b, ms, rows - k);
    }
    b->steps++;
    b->sessions += k;
    b->rows += rows;
    b->prompt_rows += prompt_rows;
    b->verify_passes += verify;
    b->last_sessions = k;
    if (k > b->max_sessions) b->max_sessions = k;
    return k;
}

bool batch_gather(generation *const *g, const bool *asking, int n) {
    for (int i = 0; i < n; i++)
        if (asking[i] && gen_unsampled(g[i])) return true;
    return false;
}
