/*
 * chat_fit — how many of a chat's oldest messages to drop so that the rest
 * fits the context (octo_chat_fit). The count is that of the whole chat as
 * octo_chat tokenizes it, so the choice is exact; chat_fit.c says why and how
 * it needs only a few such counts however many messages there are.
 */
#ifndef OCTO_RUNTIME_CHAT_FIT_H
#define OCTO_RUNTIME_CHAT_FIT_H

#include "core/err.h"
#include "model/chat_template.h"
#include "model/tokenizer.h"

/* The tokens of msgs[0..n) formatted in family f and tokenized as octo_chat
 * tokenizes a chat (BOS as the vocabulary says, special tokens parsed). */
err_code chat_count_tokens(const tokenizer *tok, chat_family f, const chat_message *msgs, int n, int *n_tokens,
                           err_t *err);

/* In *drop: the fewest of the oldest messages after a leading system message
 * to leave out so that the rest and reserve tokens (at least 1: the reply's
 * first) fit n_ctx; the newest message always stays. ERR_CONTEXT_FULL when
 * the system message and the newest alone do not fit. n >= 1. */
err_code chat_fit(const tokenizer *tok, chat_family f, const chat_message *msgs, int n, int n_ctx, int reserve,
                  int *drop, err_t *err);

#endif
