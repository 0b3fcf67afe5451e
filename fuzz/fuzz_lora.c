/*
 * fuzz_lora — libFuzzer target: a fuzzed LoRA adapter, read against a base
 * and run.
 *
 * The base is a small MoE llama (synth's defaults with 4 experts, 2 used: the
 * model fuzz/run.sh makes its seed adapters for with `octo synth --lora-for`).
 * Any byte string is opened as an adapter GGUF and bound to it; one that binds
 * runs a 3-token pass with it at two scales. Every step either works or fails
 * with a message; never a crash, a leak, a hang or a sanitizer report.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/gguf.h"
#include "core/quant.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/synth.h"
#include "runtime/session.h"

static model *base;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz-lora-base-%d.gguf", (int)getpid());
    synth_opts o = synth_defaults();
    o.n_expert = 4, o.n_expert_used = 2;
    if (synth_write(&o, path, NULL) || model_load(path, &base, NULL)) abort();
    remove(path); /* mapped: the pages stay */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_ctx *g = NULL;
    if (gguf_open_buffer(data, size, &g, NULL) != ERR_OK) return 0;
    lora_adapter *a = NULL;
    err_t err = {0};
    if (lora_from_gguf(base, g, &a, &err) != ERR_OK) { /* lora_from_gguf owns g either way */
        if (!err.msg[0]) __builtin_trap(); /* a refusal must say why */
        return 0;
    }
    session *s = NULL;
    float *logits = malloc(sizeof(float) * (size_t)base->hp.n_vocab);
    const int32_t tok[3] = {1, 50, 7};
    for (int k = 0; k < 2 && logits; k++) {
        const lora_set set = {.n = 1, .a = {a}, .scale = {k ? -2.5f : 1.0f}};
        if (session_new(base, 16, QT_F32, 1, &s, NULL) == ERR_OK && session_set_lora(s, &set, NULL) == ERR_OK) {
            err_t e = {0};
            if (session_eval(s, tok, 3, false, logits, &e) != ERR_OK && !e.msg[0]) __builtin_trap();
        }
        session_free(s);
        s = NULL;
    }
    free(logits);
    lora_free(a);
    return 0;
}
