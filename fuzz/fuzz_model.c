/*
 * fuzz_model — libFuzzer target: a fuzzed model file, loaded and run.
 *
 * Any byte string that opens as a model of small shape (the fuzzer's
 * mutants of the tiny seeds) is bound, tokenized, and asked for a few
 * tokens: a prompt through the forward pass, the KV cache, the sampler and
 * the detokenizer. Every step either works or fails with a message; never a
 * crash, a leak, a hang or a sanitizer report. Larger shapes are skipped:
 * the point is hostile values, not big matrices.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/gguf.h"
#include "core/quant.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "runtime/generate.h"
#include "runtime/session.h"

static int small(const model *m) {
    const model_hparams *hp = &m->hp;
    return m->weight_bytes <= (4u << 20) && hp->n_vocab <= 4096 && hp->n_embd <= 512 && hp->n_layer <= 4 &&
           hp->n_ff <= 1024 && hp->n_head <= 16;
}

static void run(const model *m, const tokenizer *tok) {
    session *s = NULL;
    if (session_new(m, 24, QT_F16, 1, &s, NULL)) return;
    tok_list l = {0};
    if (tokenizer_encode(tok, "ab c\xc3\xa9", 6, true, false, &l, NULL) == ERR_OK && l.n > 0 && l.n < 16) {
        gen_params gp = {.max_tokens = 4, .sampling = sampler_defaults(), .proposer = NULL};
        generation *g = NULL;
        err_t err = {0};
        if (gen_start(s, tok, l.ids, l.n, &gp, &g, &err) == ERR_OK) {
            while (gen_next(g)) {
            }
            if (gen_error(g)->code && !gen_error(g)->msg[0]) __builtin_trap(); /* a failure must say why */
            gen_free(g);
        } else if (!err.msg[0]) {
            __builtin_trap();
        }
    }
    tok_list_free(&l);
    session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_ctx *g = NULL;
    if (gguf_open_buffer(data, size, &g, NULL) != ERR_OK) return 0;
    model *m = NULL;
    err_t err = {0};
    if (model_from_gguf(g, &m, &err) != ERR_OK) { /* model_from_gguf owns g either way */
        if (!err.msg[0]) __builtin_trap();
        return 0;
    }
    tokenizer *tok = NULL;
    if (small(m) && tokenizer_load(m->gguf, &tok, NULL) == ERR_OK && tokenizer_n_vocab(tok) == m->hp.n_vocab)
        run(m, tok);
    tokenizer_free(tok);
    model_free(m);
    return 0;
}
