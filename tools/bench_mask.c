/*
 * bench_mask — `octo bench --mask-only -m VOCAB --json-schema FILE | --grammar FILE`:
 * the cost of a grammar's token mask on a vocabulary alone, no model. Any
 * GGUF with a vocabulary will do (../shared/golden/tokenizer has 32k to
 * 100k-token ones), so the figure exists for vocabularies bigger than the
 * models at hand.
 *
 * It writes documents of the grammar by drawing uniformly among the tokens
 * each mask allows (seeded; end of generation only when nothing else is
 * allowed, so documents run to their end), timing every mask and accept.
 * Reported: the mask's median, p90 and max microseconds per token, the
 * allowed tokens per step, and the documents' length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "options.h"
#include "core/gguf.h"        /* internal: the vocabulary without a model */
#include "model/grammar.h"     /* internal: the matcher timed alone */
#include "model/json_schema.h" /* internal: the schema's grammar */
#include "model/tokenizer.h"  /* internal: the vocabulary's pieces */

#define MASK_DOCS 20
#define MASK_MAX_STEPS 2000

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One document: masks timed into us[*n...], allowed tokens summed. */
static int one_document(grammar_match *m, const tokenizer *tok, float *logits, uint64_t *rng, double *us, int *n,
                        long *allowed_sum) {
    const int V = tokenizer_n_vocab(tok);
    for (int step = 0; step < MASK_MAX_STEPS; step++) {
        for (int t = 0; t < V; t++) logits[t] = 0.0f;
        const double t0 = now_us();
        grammar_match_mask(m, logits);
        us[(*n)++] = now_us() - t0;
        int allowed = 0, pick = -1, other = 0;
        for (int t = 0; t < V; t++) allowed += logits[t] == 0.0f, other += logits[t] == 0.0f && !tokenizer_is_eog(tok, t);
        *allowed_sum += allowed;
        if (other == 0) return step; /* only the end is left */
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        for (int t = 0, k = (int)((*rng >> 33) % (uint64_t)other); t < V && pick < 0; t++)
            if (logits[t] == 0.0f && !tokenizer_is_eog(tok, t) && k-- == 0) pick = t;
        grammar_match_accept(m, pick);
    }
    return MASK_MAX_STEPS;
}

int mask_bench(const cli_args *a) {
    octo_generate_params gp = a->gp;
    char *text = NULL, *gbnf = NULL;
    if (read_constraint(a->grammar_file, a->schema_file, &gp, &text)) return 1;
    err_t err = {0};
    gguf_ctx *g = NULL;
    tokenizer *tok = NULL;
    grammar_vocab *gv = NULL;
    grammar *gr = NULL;
    double *us = malloc(sizeof *us * MASK_DOCS * (MASK_MAX_STEPS + 1));
    float *logits = NULL;
    const double t_vocab = now_us();
    int rc = gguf_open(a->model, &g, &err) || tokenizer_load(g, &tok, &err) || grammar_vocab_new(tok, &gv, &err);
    const double vocab_ms = (now_us() - t_vocab) * 1e-3;
    if (!rc && gp.json_schema) rc = json_schema_to_gbnf(gp.json_schema, strlen(gp.json_schema), &gbnf, &err);
    const char *src = gbnf ? gbnf : gp.grammar;
    if (!rc) rc = grammar_parse(src, strlen(src), &gr, &err);
    if (!rc && !(logits = malloc(sizeof *logits * (size_t)tokenizer_n_vocab(tok)))) rc = err_set(&err, ERR_NOMEM, "out of memory");
    int n = 0, steps = 0;
    long allowed = 0;
    uint64_t rng = gp.seed + 1;
    for (int d = 0; d < MASK_DOCS && !rc && us; d++) {
        grammar_match *m = NULL;
        if ((rc = grammar_match_new(gr, gv, &m, &err))) break;
        steps += one_document(m, tok, logits, &rng, us, &n, &allowed);
        rc = grammar_match_error(m, &err);
        grammar_match_free(m);
    }
    if (rc || !us) rc = fail("%s", us ? err.msg : "out of memory");
    else {
        qsort(us, (size_t)n, sizeof *us, cmp_d);
        printf("vocabulary   %s: %d tokens, its trie built in %.1f ms\n"
               "documents    %d, %.1f tokens each, %.0f tokens allowed per step on average\n"
               "mask         median %.1f us per token, p90 %.1f, max %.1f (every mask of every step)\n",
               a->model, tokenizer_n_vocab(tok), vocab_ms, MASK_DOCS, (double)steps / MASK_DOCS,
               (double)allowed / n, us[n / 2], us[n * 9 / 10], us[n - 1]);
    }
    free(us), free(logits), free(gbnf), free(text);
    grammar_free(gr), grammar_vocab_free(gv), tokenizer_free(tok), gguf_close(g);
    return rc ? 1 : 0;
}
