/*
 * fuzz_gguf — libFuzzer target for the GGUF reader and the model binder.
 *
 * Any byte string must either open cleanly (and then every tensor's data lies
 * inside the buffer, which we touch to prove it) or fail with an error code
 * and a message; never crash, leak or read out of bounds. Opened files are
 * also bound as models, which exercises the metadata getters and the shape
 * checks on hostile values.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/gguf.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_ctx *g = NULL;
    err_t err = {0};
    if (gguf_open_buffer(data, size, &g, &err) != ERR_OK) {
        if (!err.msg[0]) __builtin_trap(); /* every failure must say why */
        return 0;
    }
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (t->n_bytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->n_bytes - 1];
    }
    (void)sink;
    model *m = NULL;
    if (model_from_gguf(g, &m, &err) == ERR_OK) model_free(m); /* model_from_gguf owns g either way */
    return 0;
}
