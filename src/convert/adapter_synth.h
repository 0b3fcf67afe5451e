/*
 * adapter_synth — a LoRA adapter with seeded random factors for a base model
 * (`octo synth --lora-for MODEL`), in llama.cpp's adapter GGUF: for tests,
 * for benchmarks of the adapters' cost, and as a starting point to train.
 */
#ifndef OCTO_CONVERT_ADAPTER_SYNTH_H
#define OCTO_CONVERT_ADAPTER_SYNTH_H

#include <stdint.h>

#include "core/err.h"
#include "model/lora.h"

typedef struct {
    int rank;            /* >= 1 */
    float alpha;         /* adapter.lora.alpha (0: none written, the scale alone) */
    uint32_t type;       /* F32, F16, BF16 or Q8_0 (rank and row lengths multiples of 32) */
    unsigned kinds;      /* the kinds adapted, bit 1 << lora_kind (0: q k v o gate up down) */
    float std;           /* B's values ~ U(-std, std) * sqrt(3); A's likewise / sqrt(n_in) */
    uint64_t seed;
} adapter_synth_opts;

adapter_synth_opts adapter_synth_defaults(void);
/* Every matrix of base whose kind o->kinds holds gets a pair. */
err_code adapter_synth(const char *base, const adapter_synth_opts *o, const char *out, err_t *err);

#endif
