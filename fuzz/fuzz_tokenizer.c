/*
 * fuzz_tokenizer — libFuzzer target: arbitrary bytes through the tokenizers.
 *
 * The first byte picks a vocabulary (a synthetic SentencePiece one made at
 * start-up, and the golden SPM and BPE vocabularies of ../shared when they
 * are there) and the add/parse-special flags; the rest is the text. Every id
 * must lie inside the vocabulary, and decoding the ids must give back the
 * length it reports: no crash, no read past a buffer, whatever the bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/gguf.h"
#include "model/synth.h"
#include "model/tokenizer.h"

static tokenizer *toks[4];
static gguf_ctx *files[4];
static int n_toks;

static void add(const char *path) {
    if (n_toks < 4 && gguf_open(path, &files[n_toks], NULL) == ERR_OK &&
        tokenizer_load(files[n_toks], &toks[n_toks], NULL) == ERR_OK)
        n_toks++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[256];
    snprintf(path, sizeof path, "/tmp/octo-fuzz-tok-%ld.gguf", (long)getpid());
    synth_opts o = synth_defaults();
    o.n_vocab = 400;
    if (synth_write(&o, path, NULL) == ERR_OK) add(path);
    unlink(path); /* the mapping stays */
    const char *d = getenv("OCTO_TEST_DATA");
    const char *names[] = {"llama-spm", "gpt-2", "phi-3"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/golden/tokenizer/ggml-vocab-%s.gguf", d && *d ? d : "../shared", names[i]);
        add(path);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || !n_toks) return 0;
    const tokenizer *t = toks[data[0] % n_toks];
    const bool add_special = data[0] & 16, parse_special = data[0] & 32;
    tok_list l = {0};
    if (tokenizer_encode(t, (const char *)data + 1, size - 1, add_special, parse_special, &l, NULL) == ERR_OK) {
        for (int i = 0; i < l.n; i++)
            if (l.ids[i] < 0 || l.ids[i] >= tokenizer_n_vocab(t)) __builtin_trap();
        const int need = tokenizer_decode(t, l.ids, l.n, NULL, 0);
        if (need < 0) __builtin_trap();
        char *buf = malloc((size_t)need + 1);
        if (buf && tokenizer_decode(t, l.ids, l.n, buf, need) != need) __builtin_trap();
        free(buf);
    }
    tok_list_free(&l);
    return 0;
}
