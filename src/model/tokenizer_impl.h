/*
 * tokenizer_impl — the vocabulary shared by tokenizer.c (loading, specials,
 * dispatch), tokenizer_spm.c and tokenizer_bpe.c. Not for other modules.
 */
#ifndef OCTO_MODEL_TOKENIZER_IMPL_H
#define OCTO_MODEL_TOKENIZER_IMPL_H

#include "model/tokenizer.h"

/* tokenizer.ggml.token_type values */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4, TOKEN_UNUSED = 5, TOKEN_BYTE = 6 };

typedef enum { TOK_SPM, TOK_BPE } tok_family;

/* Pre-tokenizers of byte-level BPE, selected by tokenizer.ggml.pre. */
typedef enum {
    PRE_DEFAULT,       /* "default", "gpt-2" and unknown values */
    PRE_LLAMA3,        /* "llama-bpe" (Llama 3) */
    PRE_QWEN2,
    PRE_DEEPSEEK_LLM,
    PRE_DEEPSEEK_CODER,
    PRE_FALCON,
    PRE_STARCODER,
    PRE_MPT,
    PRE_REFACT,
    PRE_GPT_NEOX,
    PRE_PHI2,
    PRE_SMOLLM,
} tok_pre;

/* Open-addressing hash from byte strings to int32 values. */
typedef struct {
    uint32_t cap;      /* power of two */
    uint32_t n;
    int32_t *slot;     /* value index + 1, 0 = empty */
    const char **key;  /* per value index */
    uint32_t *key_len;
    int32_t *value;
    uint32_t n_values, cap_values;
    char *arena;       /* owned copies of keys that do not point into the GGUF */
    size_t arena_n, arena_cap;
} str_map;

err_code str_map_init(str_map *m, uint32_t expected, err_t *err);
void str_map_free(str_map *m);
/* key must stay valid (it is not copied); returns ERR_NOMEM on failure. */
err_code str_map_put(str_map *m, const char *key, uint32_t len, int32_t value, err_t *err);
/* value or -1 */
int32_t str_map_get(const str_map *m, const char *key, uint32_t len);

struct tokenizer {
    tok_family family;
    tok_pre pre;
    int n_vocab;
    gguf_str *text;     /* [n_vocab] vocabulary strings (into the GGUF mapping) */
    float *score;       /* [n_vocab] SPM scores (0 when absent) */
    int32_t *type;      /* [n_vocab] token types (TOKEN_NORMAL when absent) */
    str_map vocab;      /* text -> id */
    str_map merges;     /* BPE: "left right" -> rank (keys point into the GGUF's merge strings) */
    int32_t bos, eos, eot, unk, pad, nl;
    int32_t byte_token[256]; /* SPM: id of <0xNN>, -1 when absent */
    bool add_bos, add_eos, add_space_prefix;
    int32_t *specials;  /* ids of control / user-defined tokens, longest text first */
    int n_specials;
    uint8_t special_first[256]; /* bit 1: a control token starts with this byte; bit 2: a user-defined one */
    char warning[160];
};

/* Family encoders over text without special tokens; they append to out. */
err_code spm_encode(const tokenizer *t, const char *text, size_t len, bool add_space_prefix, tok_list *out,
                    err_t *err);
err_code bpe_encode(const tokenizer *t, const char *text, size_t len, tok_list *out, err_t *err);
/* BPE: parse tokenizer.ggml.merges into t->merges and select t->pre from
 * tokenizer.ggml.pre (an unknown value: PRE_DEFAULT and a warning in t->warning). */
err_code bpe_load(tokenizer *t, const gguf_ctx *g, err_t *err);
/* BPE: a vocabulary string's bytes (undo byte-to-unicode); returns length written (<= cap) or full length. */
int bpe_decode_text(const char *s, size_t len, char *buf, int cap);

#endif
