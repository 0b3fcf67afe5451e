/*
 * kv_plain — the uncompressed KV cache: one contiguous F32 or F16 array per
 * layer, entries in append order, every entry kept.
 *
 * It is the reference the compressed cache is measured against (KL
 * divergence, top-1 agreement) and the cache used where nothing needs
 * compressing. It implements kv_iface for the forward pass; truncate() is
 * the rollback of speculative entries.
 */
#ifndef OCTO_KV_KV_PLAIN_H
#define OCTO_KV_KV_PLAIN_H

#include <stdint.h>

#include "core/err.h"
#include "model/kv_iface.h"
#include "model/model.h"

typedef struct kv_plain kv_plain;

/* Room for n_ctx tokens per layer; type is QT_F32 or QT_F16. */
err_code kv_plain_new(const model_hparams *hp, int n_ctx, uint32_t type, kv_plain **out, err_t *err);
void kv_plain_free(kv_plain *c);

/* The interface the forward pass uses. */
kv_iface kv_plain_iface(kv_plain *c);

/* Keep only the first n entries of every layer. */
void kv_plain_truncate(kv_plain *c, int n);

#endif
