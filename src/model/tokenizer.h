/*
 * tokenizer — text to token ids and back, from a GGUF file's metadata.
 *
 * Two families: SentencePiece (tokenizer.ggml.model = "llama": scores, byte
 * fallback <0xNN>, the leading-space rule) and byte-level BPE ("gpt2":
 * merges, the byte-to-unicode mapping, and the pre-tokenizer chosen by
 * tokenizer.ggml.pre). Control tokens ("<|im_end|>", "</s>") in the text are
 * recognised only when the caller asks (parse_special); otherwise their text
 * is tokenized like any other. User-defined tokens are always matched as
 * whole tokens, as llama.cpp and Hugging Face do.
 *
 * Decoding works per token: tokenizer_piece() gives a token's bytes, which
 * may be part of a UTF-8 character (byte tokens, BPE pieces). The streaming
 * layer above holds back incomplete characters; this module does not.
 */
#ifndef OCTO_MODEL_TOKENIZER_H
#define OCTO_MODEL_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/gguf.h"

typedef struct tokenizer tokenizer;

/* Build from g's metadata. g must outlive the tokenizer (strings point into it). */
err_code tokenizer_load(const gguf_ctx *g, tokenizer **out, err_t *err);
void tokenizer_free(tokenizer *t);

int tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t); /* -1 when the vocabulary has none */
int32_t tokenizer_eos(const tokenizer *t);
bool tokenizer_adds_bos(const tokenizer *t); /* tokenizer.ggml.add_bos_token (default per family) */
bool tokenizer_adds_eos(const tokenizer *t);
/* End of generation: EOS, EOT (the vocabulary's end-of-turn marker), or BOS. */
bool tokenizer_is_eog(const tokenizer *t, int32_t id);
/* A warning from loading (e.g. an unknown pre-tokenizer fell back to default), or "". */
const char *tokenizer_warning(const tokenizer *t);
/* "spm" or "bpe". */
const char *tokenizer_kind(const tokenizer *t);

/* A growable array of token ids. */
typedef struct {
    int32_t *ids;
    int n, cap;
} tok_list;
void tok_list_free(tok_list *l);
err_code tok_list_push(tok_list *l, int32_t id, err_t *err);

/*
 * Encode len bytes of text (not necessarily NUL-terminated), appending to out.
 * add_special: prepend BOS / append EOS as the vocabulary's flags say.
 * parse_special: recognise the text of control / user-defined tokens.
 */
err_code tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                          tok_list *out, err_t *err);

/*
 * The bytes of one token as text: SPM's U+2581 becomes a space, byte tokens
 * become their byte, BPE's byte-to-unicode mapping is undone. Control tokens
 * give nothing unless special is true (then their text). Writes at most cap
 * bytes and returns the piece's full length (like snprintf, without a NUL),
 * or -1 for an id outside the vocabulary.
 */
int tokenizer_piece(const tokenizer *t, int32_t id, bool special, char *buf, int cap);

/* Do a and b have the same vocabulary, piece by piece (special tokens' text included)? -1 when they
 * do; else the first id where they differ (the smaller count when one is a prefix of the other). */
int tokenizer_first_difference(const tokenizer *a, const tokenizer *b);

/*
 * The text of a whole sequence: the pieces concatenated, control tokens
 * left out, and the one space SentencePiece's leading-space rule put in front
 * of the first word removed, so that decode(encode(text)) == text. Same
 * return convention as tokenizer_piece; -1 when an id is out of range.
 */
int tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, char *buf, int cap);

/* The id whose vocabulary string is exactly s, or -1. */
int32_t tokenizer_find(const tokenizer *t, const char *s, size_t len);

#endif
