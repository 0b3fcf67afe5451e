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

typedef struct {
    generation *g;
    gen_rows r;
} member;

/* What a step may hold. invariant: every row is computed as alone in a pass
 * of any size (model/forward.h: forward_batch_invariant); else a pass with
 * decode or verify rows stays under PACKED_BF16_MIN_TOKENS rows, and a
 * prompt never shares one (its rows would take another kernel than alone). */
typedef struct {
    member mb[BATCH_MAX];
    int k, decoding, rows;
    bool invariant;
} step_plan;

/* Prompt rows a step whose decode rows and verify passes take `taken` rows may add: the time budget's. */
static int prompt_budget(const batch_state *b, int taken) {
    if (!taken) return PROMPT_ROWS_ALONE;
    const double step = 2.0 * b->decode_ms > BATCH_STEP_MS ? 2.0 * b->decode_ms : BATCH_STEP_MS;
    int rows = b->row_ms > 0.0 ? (int)((step - b->decode_ms) / b->row_ms) : PROMPT_MIN;
    return rows < PROMPT_MIN ? PROMPT_MIN : rows > PROMPT_ALONE ? PROMPT_ALONE : rows;
}

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

/* Every decode row due, a verify pass where it pays. */
static void add_decoders(const batch_state *b, generation *const *g, int n, step_plan *p) {
    for (int i = 0; i < n && p->k < BATCH_MAX; i++)
        if (gen_want_rows(g[i], 0, 0, &p->mb[p->k].r)) p->mb[p->k++].g = g[i], p->decoding++;
    p->rows = p->decoding;
    for (int i = 0; i < p->k && p->decoding > 1; i++) { /* alone, a generation speculates in its own gen_next */
        const int room = p->invariant ? SPEC_MAX_PASS : PACKED_BF16_MIN_TOKENS - p->rows;
        if (!verify_pays(b, p->mb[i].g, p->decoding, room)) continue;
        if (gen_want_rows(p->mb[i].g, 0, room, &p->mb[i].r)) {
            p->rows += p->mb[i].r.n - 1;
            continue;
        }
        memmove(&p->mb[i], &p->mb[i + 1], sizeof *p->mb * (size_t)(p->k - i - 1)); /* its proposer failed */
        p->k--, i--, p->decoding--, p->rows--;
    }
}

static bool in_plan(const step_plan *p, const generation *g) {
    for (int i = 0; i < p->k; i++)
        if (p->mb[i].g == g) return true;
    return false;
}

/* Prompt chunks within the budget; true when a prompt waits that could not go. */
static bool add_prompts(const batch_state *b, generation *const *g, int n, step_plan *p) {
    const bool alone_only = !p->invariant; /* a prompt alone in its pass, as it is read alone */
    int budget = alone_only && p->k ? 0 : prompt_budget(b, p->rows);
    bool left_out = false;
    for (int i = 0; i < n && p->k < BATCH_MAX; i++) {
        if (in_plan(p, g[i])) continue; /* a prompt's turn took it already */
        const int max = alone_only && p->k ? 0 : budget < PROMPT_ALONE ? budget : PROMPT_ALONE;
        if (gen_want_rows(g[i], max, 0, &p->mb[p->k].r) && p->mb[p->k].r.prompt) {
            budget -= p->mb[p->k].r.n;
            p->mb[p->k++].g = g[i];
        } else if (gen_prompt_waits(g[i])) {
            left_out = true;
        }
    }
    return left_out;
}

/* The step's members. A prompt that could not go beside the decode rows
 * (its cache needs the cut it would have alone, larger than the budget; or
 * weights whose kernel changes with the pass's size) has the next step: its
 * whole chunk, with the decode rows where they are computed as alone in a
 * pass of any size, else by itself. Neither waits for the other to finish. */
static void gather(batch_state *b, generation *const *g, int n, step_plan *p) {
    const bool turn = b->prompt_turn;
    b->prompt_turn = false;
    p->k = p->decoding = p->rows = 0;
    if (!turn || p->invariant) add_decoders(b, g, n, p);
    for (int i = 0; turn && i < n && p->k < BATCH_MAX; i++)
        if (gen_want_rows(g[i], PROMPT_ALONE, 0, &p->mb[p->k].r) && p->mb[p->k].r.prompt) {
            p->rows += p->mb[p->k].r.n;
            p->mb[p->k++].g = g[i];
            break;
        }
    b->prompt_turn = add_prompts(b, g, n, p) && p->decoding > 0;
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
static void learn(batch_state *b, double ms, int extra_rows, int decoding) {
    if (!decoding) return; /* a prompt's pass alone says nothing of a decode step */
    if (!extra_rows) {
        b->decode_ms = ms;
        return;
    }
    double per = (ms - b->decode_ms) / extra_rows;
    if (per <= 0.0) per = ms / extra_rows / 4.0;
    b->row_ms = b->row_ms > 0.0 ? 0.7 * b->row_ms + 0.3 * per : per;
}

/* Run the planned step; its figures into b. */
static void run(batch_state *b, step_plan *p) {
    session_part parts[BATCH_MAX];
    int rows = 0, prompt_rows = 0, verify = 0;
    for (int i = 0; i < p->k; i++) {
        const gen_rows *r = &p->mb[i].r;
        parts[i] = (session_part){.s = gen_session(p->mb[i].g), .tokens = r->tokens, .n = r->n, .logits = r->logits,
                                  .tentative = r->verify, .anc = r->anc, .out_rows = r->out_rows, .n_out = r->n_out};
        rows += r->n;
        prompt_rows += r->prompt ? r->n : 0;
        verify += r->verify;
    }
    err_t e = {0};
    const double t0 = now_ms();
    if (session_eval_batch(parts, p->k, &e)) {
        b->retried++;
        one_by_one(p->mb, p->k);
        return;
    }
    const double ms = now_ms() - t0;
    for (int i = 0; i < p->k; i++) gen_rows_done(p->mb[i].g, &p->mb[i].r, NULL, ms, p->k);
    learn(b, ms, rows - p->k, p->decoding);
    b->steps += p->k > 1;
    b->sessions += p->k > 1 ? p->k : 0;
    b->prompt_rows += p->k > 1 ? prompt_rows : 0;
    b->verify_passes += verify;
    b->last_sessions = p->k;
    if (p->k > b->max_sessions) b->max_sessions = p->k;
}

int batch_step(batch_state *b, generation *const *g, int n, const generation *caller, bool *served) {
    *served = false;
    if (n < 2 || !forward_batches(gen_session(g[0])->m)) return 0;
    step_plan p = {.invariant = forward_batch_invariant(gen_session(g[0])->m)};
    gather(b, g, n, &p);
    /* one member: a prompt's chunk between the others' steps, or a verify
     * pass already proposed; a lone decode row is the caller's own work */
    if (p.k == 0 || (p.k == 1 && !p.mb[0].r.prompt && !p.mb[0].r.verify)) return 0;
    for (int i = 0; i < p.k; i++) *served |= p.mb[i].g == caller;
    run(b, &p);
    return p.k;
}

bool batch_gather(generation *const *g, const bool *asking, int n) {
    for (int i = 0; i < n; i++)
        if (asking[i] && gen_unsampled(g[i])) return true;
    return false;
}
