/*
 * generate — the generation loop behind a stream.
 *
 * A generation owns a sampler and borrows a session (model + cache) and a
 * tokenizer. gen_next() is pull-driven: the first call prefills the prompt
 * (in chunks, reporting progress and honouring cancel between chunks), and
 * each call then decodes one token, samples the next, and returns the text
 * that is complete so far. Bytes of a UTF-8 character that is not complete
 * yet are held back, so no piece ever ends inside a character; bytes that
 * cannot form a character are passed through as they are (nothing is lost).
 *
 * The prompt reuses whatever prefix of it the session's cache already holds
 * (a chat that resends its history only evaluates the new turn).
 */
#ifndef OCTO_RUNTIME_GENERATE_H
#define OCTO_RUNTIME_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "core/latency.h"
#include "model/grammar.h"
#include "model/sampler.h"
#include "model/tokenizer.h"
#include "runtime/prefill.h"
#include "runtime/session.h"
#include "speculative/proposer.h"

typedef struct {
    int max_tokens;                /* > 0 */
    sampler_params sampling;
    /* speculative decoding (lossless with any sampling: speculative/verify.h);
     * NULL: plain decoding */
    const proposer_ops *proposer;
    int spec_k;                    /* fixed draft length, never switched off (experiments); 0 = adaptive (4, then 2..10) */
    int spec_tree;                 /* a proposer with trees (proposer_ops.trees): 0 = trees when greedy, their size
                                    * adaptive, lines when sampled (speculative/adaptive.h); -1 = lines of spec_k;
                                    * 1..SPEC_TREE_MAX - 1 = trees of this many nodes, never switched off
                                    * (experiments). spec_k > 0: lines */
    session *draft;                /* a proposer that needs_lm: the draft model's session (same vocabulary) */
    int spec_ahead;                /* a draft whose session computes on threads of its own: 0 = it drafts beside
                                    * verification (speculative/ahead.h), -1 = never */
    lookahead_params lookahead;    /* lookahead: W, N, G (all 0: lookahead_params_default()) */
    prefill_params prefill;        /* the prompt with the draft (SpecKV, SpecPC): runtime/prefill.h */
    void (*on_prefill)(void *user, int done, int total); /* optional progress */
    void *user;
    /* optional: a decode step (a plain pass, or a verify pass with its
     * proposing) took ms and delivered tokens (runtime/cpu_adapt.h's hint) */
    void (*on_step)(void *step_user, double ms, int tokens);
    void *step_user;
    /* optional: the grammar the text follows, and the vocabulary as it sees it (model/grammar.h) */
    const grammar *grammar;
    const grammar_vocab *grammar_vocab;
    /* > 0: each generated token's log-probability and the top_logprobs - 1 likeliest tokens
     * (gen_logprob); needs proposer NULL. 0: none */
    int logprobs;
} gen_params;

#define GEN_MAX_TOP 20
typedef struct {
    int32_t token;
    float logprob;
    int n_top;
    int32_t top_token[GEN_MAX_TOP];
    float top_logprob[GEN_MAX_TOP];
} gen_token_lp;

typedef enum {
    GEN_RUNNING = 0,
    GEN_STOP_EOG,          /* the model ended its turn */
    GEN_STOP_MAX_TOKENS,
    GEN_STOP_CANCELLED,
    GEN_STOP_CONTEXT_FULL,
    GEN_STOP_ERROR,
} gen_stop;

/* Timings and counts of one generation. */
typedef struct {
    int prompt_tokens, prefill_tokens;
    int decode_tokens;   /* tokens generated */
    int decode_evals;    /* single-token forward passes (decode_ms covers these) */
    double prefill_ms, decode_ms, time_to_first_token_ms;
    /* speculative decoding */
    int spec_steps;      /* verify passes */
    int spec_proposed;   /* draft tokens proposed (a tree's nodes) */
    int spec_accepted;   /* of those, accepted */
    int spec_k;          /* current draft length, or a tree's nodes (0: speculation off) */
    int spec_tree_passes; /* verify passes of draft trees */
    int spec_off_line;   /* of those, passes whose accepted path left the tree's leading line */
    double spec_ms;      /* time in speculative steps: proposing and verifying */
    double spec_draft_ms; /* of spec_ms, the time proposing (the draft model's steps, a lookup) */
    int spec_off;        /* 1: switched off, a token cost more by verification than by a plain pass */
    const char *spec_proposer; /* its name (proposer_ops.name), NULL when not speculating */
    spec_proposer_stats proposer; /* the proposer's own counters (lookahead's pool) */
    double spec_ms_per_token, plain_ms_per_token; /* the figures that decided it */
    prefill_stats pre;   /* what the draft did to the prompt (runtime/prefill.h) */
    /* continuous batching (runtime/batch.h): passes this generation shared
     * with other sessions (prompt chunks and decode rows), and the sessions
     * those passes held in all (batch_peers / batch_steps: the mean batch) */
    int batch_steps, batch_peers;
    int batch_decodes;   /* of those passes, decode rows (decode_ms covers them, decode_evals does not) */
    /* Token latency: every token after the first waited for the decode work
     * done since the token before it, and that time is its sample: the plain
     * pass that computed its logits, or the whole speculative step (proposing
     * and verifying) whose pass delivered it; the other tokens that pass
     * accepted come with it, at 0 ms, as an app receives them (a burst).
     * Sampling and detokenizing are not counted (as in decode_ms), nor the
     * app's time between calls; a wait the caller adds (gen_add_wait) is. n = decode_tokens - 1, unless a sample could
     * not be kept (n 0: unknown, core/latency.h). */
    lat_summary latency;
} gen_stats;

typedef struct generation generation;

/* Checks the prompt against the context and the parameters; nothing runs yet. */
err_code gen_start(session *s, const tokenizer *tok, const int32_t *prompt, int n_prompt, const gen_params *p,
                   generation **out, err_t *err);
/* The next piece of text (valid until the next call), or NULL at the end. */
const char *gen_next(generation *g);
/* The caller held the next token back ms (cpu_adapt's pacing): counted in
 * the decode time and in that token's latency, as the app waits for it.
 * Before the first token it is the prompt's, and not counted. */
void gen_add_wait(generation *g, double ms);
/*
 * Continuous batching (runtime/batch.h): a shared step evaluates several
 * generations' rows in one pass. gen_want_rows says what the generation's
 * next call would evaluate (a decode of its last token, or with verify_rows
 * > 0 a speculative pass of at most that many rows, the proposer asked for
 * it now; or up to max_prompt
 * tokens of its prompt, the cut session_chunks_freely allows; max_prompt 0:
 * decodes only) and returns false when
 * it needs nothing, or only work of its own (a prompt with the draft). gen_rows_done hands it the
 * pass's outcome: err NULL or ERR_OK, the rows are in its session and the
 * logits in r->logits; ms is the pass's time, peers the sessions in it.
 * gen_ready: the next gen_next needs no model work; gen_unsampled: its
 * logits wait for gen_next to sample them.
 */
typedef struct {
    const int32_t *tokens;
    int n;
    float *logits; /* [n_vocab] the last row's; verify: [n_out][n_vocab] */
    bool prompt;   /* a prompt chunk (else a decode row or a verify pass) */
    bool verify;   /* a speculative verify pass: its entries tentative (session.h: session_part) */
    const uint64_t *anc;
    const int32_t *out_rows;
    int n_out;
} gen_rows;
bool gen_want_rows(generation *g, int max_prompt, int verify_rows, gen_rows *r);
/* May the generation verify drafts in a shared step, in a pass of at most
 * verify_rows rows (gen_want_rows)? Then *accepted: the drafts it has had
 * accepted per verify pass (one more, over one more pass: hopeful before it
 * knows), *k: the drafts its pass would verify. */
bool gen_spec_outlook(const generation *g, int verify_rows, double *accepted, int *k);
void gen_rows_done(generation *g, const gen_rows *r, const err_t *err, double ms, int peers);
bool gen_ready(generation *g);
/* A lone generation's prompt, one chunk (the size gen_next reads it in): true while more of it remains,
 * so that the caller may let another request start between chunks (runtime/batch.h); false when it is
 * read, or is read otherwise (with a draft: whole, in gen_next), or the generation stopped. */
bool gen_prefill_step(generation *g);
/* Is the prompt still to be read, in passes a shared step may run? */
bool gen_prompt_waits(generation *g);
session *gen_session(const generation *g);
bool gen_unsampled(generation *g);
/* Bytes of the last piece (it may contain NUL bytes when the model emits U+0000). */
int gen_piece_size(const generation *g);
/* The token the last piece came from (-1 before the first). */
int32_t gen_last_token(const generation *g);
/* Tokens generated so far; safe from any thread. */
int gen_token_count(generation *g);
/* Every token generated so far (tokens without text included); *n gets the count. */
const int32_t *gen_tokens(const generation *g, int *n);
/* Generated token i's log-probabilities (p.logprobs > 0); false when not recorded. */
bool gen_logprob(const generation *g, int i, gen_token_lp *out);
gen_stop gen_stop_reason(const generation *g);
/* ERR_OK unless the generation stopped on an error (then err says why). */
const err_t *gen_error(const generation *g);
gen_stats gen_get_stats(const generation *g);
/* Safe from any thread: the generation stops before its next token. */
void gen_cancel(generation *g);
void gen_free(generation *g);

/* Length of the longest prefix of buf[0..n) that ends on a character
 * boundary (incomplete trailing UTF-8 sequences excluded). */
int utf8_complete_prefix(const char *buf, int n);

#endif
