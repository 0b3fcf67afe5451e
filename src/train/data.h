/*
 * data — what `octo finetune` learns from, as token sequences with the
 * positions whose next token counts in the loss.
 *
 * A path is a file or a folder of them (its regular files, in name order;
 * names starting with '.' and subfolders are passed over). A file whose name
 * ends in ".jsonl" holds one conversation per line, {"messages": [{"role":
 * ..., "content": ...}, ...]} as the server takes them; any other file is
 * plain text (UTF-8).
 *
 * Text: each file is tokenized as a document (BOS first when the vocabulary
 * adds one) and cut into sequences of seq tokens (the last one shorter, kept
 * when it has 2 tokens or more); every position counts.
 *
 * Chat: each conversation is the model's chat template applied to all its
 * messages, one sequence (cut at seq tokens, and counted as cut); only the
 * assistants' turns count: their content's tokens and the end-of-turn token
 * that follows each (so the model learns to stop). Each part is tokenized as
 * generation sees it: the text up to an assistant's turn as a prompt, then
 * the turn's content on its own.
 */
#ifndef OCTO_TRAIN_DATA_H
#define OCTO_TRAIN_DATA_H

#include <stdint.h>

#include "core/err.h"
#include "model/chat_template.h"
#include "model/tokenizer.h"

typedef struct {
    int32_t *tokens;   /* [n_tokens] every sequence's tokens, one after another */
    uint8_t *mask;     /* [n_tokens] 1: the prediction of the next token of the same sequence counts */
    int64_t *start;    /* [n_seq + 1] where each sequence starts */
    int n_seq;
    int64_t n_tokens, n_counted;
    int n_files, n_chats, n_cut; /* files read; conversations; conversations cut at seq tokens */
    uint64_t fingerprint;        /* of the tokens and the mask: a checkpoint is for this data only */
} train_data;

/* ERR_IO / ERR_INVALID_ARG (a line of a .jsonl file, named) / ERR_NOMEM. */
err_code train_data_load(const tokenizer *tok, chat_family chat, const char *path, int seq, train_data *out,
                         err_t *err);
void train_data_free(train_data *d);

#endif
