/*
 * embed — a text's embedding from a generative model: the mean, over the
 * text's tokens, of the last layer's hidden state after the final norm (the
 * vector the output matrix reads), then scaled to unit length. This is
 * llama-server's mean pooling; OpenAI's embeddings are unit length too, so
 * a dot product is the cosine similarity.
 */
#ifndef OCTO_RUNTIME_EMBED_H
#define OCTO_RUNTIME_EMBED_H

#include "core/err.h"
#include "runtime/session.h"

/* out: [n_embd]. The session's cache is used and left empty (reset). */
err_code session_embed(session *s, const int32_t *tokens, int n, float *out, err_t *err);

#endif
