/*
 * chat_template — turn a list of chat messages into prompt text.
 *
 * GGUF files carry their chat template as a Jinja string
 * (tokenizer.chat_template). We do not run Jinja: we recognise the common
 * families by their markers and format them in C. An unknown or missing
 * template falls back to a plain prompt, and says so, so the caller can put
 * a warning in the stats instead of failing.
 *
 * The text never includes the BOS token: the tokenizer adds it as the
 * vocabulary says, and it must be tokenized with special tokens parsed.
 */
#ifndef OCTO_MODEL_CHAT_TEMPLATE_H
#define OCTO_MODEL_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

typedef enum {
    CHAT_PLAIN,   /* no recognised template */
    CHAT_CHATML,  /* <|im_start|>role ... <|im_end|> (Qwen, many fine-tunes) */
    CHAT_LLAMA2,  /* [INST] <<SYS>> ... <</SYS>> ... [/INST] */
    CHAT_LLAMA3,  /* <|start_header_id|>role<|end_header_id|> ... <|eot_id|> */
    CHAT_MISTRAL, /* [INST] ... [/INST] without a system block */
    CHAT_PHI3,    /* <|user|> ... <|end|> <|assistant|> */
    CHAT_GEMMA,   /* <start_of_turn>user ... <end_of_turn> <start_of_turn>model */
    CHAT_ZEPHYR,  /* <|user|> ... </s> <|assistant|> */
    CHAT_GRANITE, /* <|start_of_role|>role<|end_of_role|> ... <|end_of_text|> (Granite 3.x) */
    CHAT_DEEPSEEK2, /* User: ...\n\nAssistant: ...<｜end▁of▁sentence｜> (DeepSeek-V2 chat) */
    CHAT_TULU,    /* <|user|>\n ...\n<|assistant|>\n ...<|endoftext|> (OLMoE / Tulu instruct) */
} chat_family;

typedef struct {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content;
} chat_message;

/* The family of a template string (NULL or unknown: CHAT_PLAIN). */
chat_family chat_detect(const char *tmpl, size_t len);
const char *chat_family_name(chat_family f);

/* ERR_INVALID_ARG unless every message has content and the role system, user or assistant. */
err_code chat_check(const chat_message *msgs, int n, err_t *err);

/* Format messages, ending with the cue for the assistant's turn.
 * Returns a malloc'd NUL-terminated string in *out. */
err_code chat_format(chat_family f, const chat_message *msgs, int n, char **out, err_t *err);

#endif
