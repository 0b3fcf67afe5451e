/*
 * checkpoint — a training run's whole state in one file, so a run stopped
 * by Ctrl-C, a crash or SIGKILL resumes where its last checkpoint was and
 * ends with the same bytes as a run never stopped.
 *
 * The state is the step, the adapter's values and AdamW's moments (and an
 * MoE's count of the tokens each expert was given); the data
 * order and the learning rate are functions of the step. The file also
 * holds the run's identity, a list of named numbers (the options that shape
 * the arithmetic, the data's and the model's fingerprints): a resume with
 * any of them different is refused and the first one that differs is named.
 * Written through core/atomic_write (a crash mid-write leaves the previous
 * checkpoint); read back with its checksum checked.
 */
#ifndef OCTO_TRAIN_CHECKPOINT_H
#define OCTO_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define CKPT_MAX_IDS 48

typedef struct {
    int n;
    const char *name[CKPT_MAX_IDS]; /* static strings: an option's name as the user gives it */
    double value[CKPT_MAX_IDS];
} ckpt_identity;

/* Adds name = value (ignored beyond CKPT_MAX_IDS: the caller's list is fixed). */
void ckpt_id_add(ckpt_identity *id, const char *name, double value);

typedef struct {
    int64_t step;
    size_t n;                       /* values of each array */
    float *values, *m, *v;          /* the adapter's values, AdamW's moments */
    size_t n_counts;
    int64_t *counts;                /* [n_counts] tokens routed to each expert so far (an MoE) */
} ckpt_state;

err_code ckpt_write(const char *path, const ckpt_identity *id, const ckpt_state *s, err_t *err);
/* Reads path into s (its arrays, n floats each, the caller's), after checking
 * it is whole (ERR_CORRUPT) and that its identity is id's (ERR_INVALID_ARG
 * naming the first difference). ERR_NOT_FOUND when there is no file. */
err_code ckpt_read(const char *path, const ckpt_identity *id, ckpt_state *s, err_t *err);

#endif
