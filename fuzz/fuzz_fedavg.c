/*
 * fuzz_fedavg — libFuzzer target: a fuzzed federated update, averaged with a
 * good one of the same base (train/fedavg.h).
 *
 * The base is fuzz_lora's (synth's defaults with 4 experts, 2 used: the
 * model fuzz/run.sh trains its seed updates on with `octo finetune
 * --fl-round 1`); the good update is trained here at start. Each input is
 * written to a file and averaged with the good one, into the global or an
 * aggregate (its first byte's low bit). Every input either averages or is
 * refused with a message and nothing written; never a crash, a leak, a hang
 * or a sanitizer report.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "octo.h"
#include "model/model.h"
#include "model/synth.h"
#include "train/fedavg.h"

static model *base;
static char good[64], input[64], output[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[64], data[64];
    const int pid = (int)getpid();
    snprintf(path, sizeof path, "/tmp/fuzz-fed-base-%d.gguf", pid);
    snprintf(data, sizeof data, "/tmp/fuzz-fed-data-%d.txt", pid);
    snprintf(good, sizeof good, "/tmp/fuzz-fed-good-%d.gguf", pid);
    snprintf(input, sizeof input, "/tmp/fuzz-fed-in-%d.gguf", pid);
    snprintf(output, sizeof output, "/tmp/fuzz-fed-out-%d.gguf", pid);
    synth_opts o = synth_defaults();
    o.n_expert = 4, o.n_expert_used = 2;
    FILE *f = fopen(data, "w");
    for (int i = 0; f && i < 40; i++) fputs("the cat sat on the mat ", f);
    if (!f || fclose(f) || synth_write(&o, path, NULL) || model_open(path, &base, NULL)) abort();
    octo_finetune_params p = octo_finetune_params_defaults();
    p.data = data, p.output = good, p.steps = 2, p.batch = 1, p.seq_len = 16, p.rank = 1, p.fl_round = 1;
    p.targets = "q,up"; /* the layout of the seed in fuzz/corpus/fedavg/ */
    p.fl_device = "good", p.restart = 1;
    octo_client *c = octo_client_new(NULL);
    if (!c || octo_finetune(c, path, &p, NULL)) abort();
    octo_client_free(c);
    remove(path), remove(data); /* the base is mapped: its pages stay */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fopen(input, "wb");
    if (!f) abort();
    const bool written = fwrite(data, 1, size, f) == size;
    if (fclose(f) || !written) abort();
    const char *const u[2] = {good, input};
    const fedavg_opts o = {.m = base, .updates = u, .n_updates = 2, .output = output, .partial = size && (data[0] & 1)};
    fedavg_result r;
    err_t err = {0};
    const err_code rc = fedavg_run(&o, &r, &err);
    if (rc && !err.msg[0]) __builtin_trap(); /* a refusal must say why */
    if (rc && access(output, F_OK) == 0) __builtin_trap(); /* and write nothing */
    remove(output);
    return 0;
}
