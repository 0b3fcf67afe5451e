/*
 * merge — LoRA adapters folded into a copy of their base (`octo merge`, as
 * llama.cpp's llama-export-lora): each adapted matrix W becomes
 * W + sum_i s_i · B_i·A_i (s_i = scale_i × alpha_i / rank, model/lora.h),
 * written as F32 when W is F32 and as F16 otherwise (llama-export-lora's
 * rule); every other tensor and every key is copied as it is.
 */
#ifndef OCTO_CONVERT_MERGE_H
#define OCTO_CONVERT_MERGE_H

#include "core/err.h"

typedef struct {
    const char *base, *output;
    const char *const *adapters; /* n paths */
    const float *scales;         /* n scales (NULL: 1 each) */
    int n;
} merge_opts;

typedef struct {
    int merged;      /* tensors changed */
    int copied;      /* tensors copied as they were */
} merge_report;

err_code merge_run(const merge_opts *o, merge_report *rep, err_t *err);

#endif
