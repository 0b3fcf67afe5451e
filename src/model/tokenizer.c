/*
 * tokenizer — vocabulary loading, special tokens and dispatch. See tokenizer.h.
 *
 * The vocabulary strings stay in the GGUF mapping; a hash map from string to
 * id serves both families. Encoding first splits the text at special tokens
 * (only when the caller asks to parse them), then hands each plain fragment
 * to the family's encoder. For SentencePiece the leading-space rule applies
 * to a fragment that starts the text or follows a special token, as in
 * llama.cpp.
 */
#include "tokenizer_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- str_map */

static uint32_t hash_bytes(const char *s, uint32_t n) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

err_code str_map_init(str_map *m, uint32_t expected, err_t *err) {
    memset(m, 0, sizeof *m);
    uint32_t cap = 16;
    while (cap < expected * 2 + 16) cap *= 2;
    m->cap = cap;
    m->cap_values = expected ? expected : 16;
    m->slot = calloc(cap, sizeof *m->slot);
    m->key = malloc(sizeof *m->key * m->cap_values);
    m->key_len = malloc(sizeof *m->key_len * m->cap_values);
    m->value = malloc(sizeof *m->value * m->cap_values);
    if (!m->slot || !m->key || !m->key_len || !m->value) {
        str_map_free(m);
        return err_set(err, ERR_NOMEM, "out of memory for the vocabulary");
    }
    return ERR_OK;
}

void str_map_free(str_map *m) {
    free(m->slot);
    free(m->key);
    free(m->key_len);
    free(m->value);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

static bool str_map_grow(str_map *m) {
    uint32_t cap = m->cap * 2;
    int32_t *slot = calloc(cap, sizeof *slot);
    if (!slot) return false;
    for (uint32_t i = 0; i < m->n_values; i++) {
        uint32_t h = hash_bytes(m->key[i], m->key_len[i]) & (cap - 1);
        while (slot[h]) h = (h + 1) & (cap - 1);
        slot[h] = (int32_t)i + 1;
    }
    free(m->slot);
    m->slot = slot;
    m->cap = cap;
    return true;
}

err_code str_map_put(str_map *m, const char *key, uint32_t len, int32_t value, err_t *err) {
    if ((m->n_values + 1) * 2 > m->cap && !str_map_grow(m)) return err_set(err, ERR_NOMEM, "out of memory");
    uint32_t h = hash_bytes(key, len) & (m->cap - 1);
    for (; m->slot[h]; h = (h + 1) & (m->cap - 1)) {
        uint32_t i = (uint32_t)m->slot[h] - 1;
        if (m->key_len[i] == len && !memcmp(m->key[i], key, len)) return ERR_OK; /* first wins */
    }
    if (m->n_values == m->cap_values) {
        uint32_t c = m->cap_values * 2;
        const char **k = realloc(m->key, sizeof *k * c);
        if (k) m->key = k;
        uint32_t *kl = realloc(m->key_len, sizeof *kl * c);
        if (kl) m->key_len = kl;
        int32_t *v = realloc(m->value, sizeof *v * c);
        if (v) m->value = v;
        if (!k || !kl || !v) return err_set(err, ERR_NOMEM, "out of memory");
        m->cap_values = c;
    }
    uint32_t i = m->n_values++;
    m->key[i] = key;
    m->key_len[i] = len;
    m->value[i] = value;
    m->slot[h] = (int32_t)i + 1;
    m->n++;
    return ERR_OK;
}

int32_t str_map_get(const str_map *m, const char *key, uint32_t len) {
    if (!m->cap) return -1;
    for (uint32_t h = hash_bytes(key, len) & (m->cap - 1); m->slot[h]; h = (h + 1) & (m->cap - 1)) {
        uint32_t i = (uint32_t)m->slot[h] - 1;
        if (m->key_len[i] == len && !memcmp(m->key[i], key, len)) return m->value[i];
    }
    return -1;
}

/* ---------------------------------------------------------------- tok_list */

void tok_list_free(tok_list *l) {
    free(l->ids);
    memset(l, 0, sizeof *l);
}

err_code tok_list_push(tok_list *l, int32_t id, err_t *err) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        int32_t *p = realloc(l->ids, sizeof *p * (size_t)cap);
        if (!p) return err_set(err, ERR_NOMEM, "out of memory for tokens");
        l->ids = p;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return ERR_OK;
}

/* ---------------------------------------------------------------- loading */

static int32_t special_id(const gguf_ctx *g, const char *key, int32_t def, int n_vocab) {
    uint32_t v;
    if (!gguf_get_u32(g, key, &v)) return def;
    return v < (uint32_t)n_vocab ? (int32_t)v : -1;
}

static bool get_flag(const gguf_ctx *g, const char *key, bool def) {
    bool b;
    return gguf_get_bool(g, key, &b) ? b : def;
}

/* Longest text first, so that "<|im_end|>" wins over "<|im". */
static void sort_specials(tokenizer *t) {
    /* insertion sort: no global state, and there are few specials */
    for (int i = 1; i < t->n_specials; i++) {
        int32_t x = t->specials[i];
        int j = i - 1;
        while (j >= 0 && (t->text[t->specials[j]].len < t->text[x].len ||
                          (t->text[t->specials[j]].len == t->text[x].len && t->specials[j] > x))) {
            t->specials[j + 1] = t->specials[j];
            j--;
        }
        t->specials[j + 1] = x;
    }
}

err_code tokenizer_load(const gguf_ctx *g, tokenizer **out, err_t *err) {
    *out = NULL;
    gguf_str model_name;
    if (!gguf_get_str(g, "tokenizer.ggml.model", &model_name))
        return err_set(err, ERR_MISSING_KEY, "the model has no tokenizer (tokenizer.ggml.model is missing)");
    tok_family fam;
    if (gguf_str_eq(model_name, "llama")) fam = TOK_SPM;
    else if (gguf_str_eq(model_name, "gpt2")) fam = TOK_BPE;
    else
        return err_set(err, ERR_UNSUPPORTED, "tokenizer '%.*s' is not supported (llama/SentencePiece, gpt2/BPE)",
                       (int)(model_name.len > 32 ? 32 : model_name.len), model_name.ptr);
    const gguf_value *toks = gguf_get_arr(g, "tokenizer.ggml.tokens");
    if (!toks || toks->v.arr.elem_type != GGUF_STRING)
        return err_set(err, ERR_MISSING_KEY, "tokenizer.ggml.tokens is missing or not a string array");
    if (toks->v.arr.n == 0 || toks->v.arr.n > (1u << 24))
        return err_set(err, ERR_BAD_VALUE, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)toks->v.arr.n);
    const int n = (int)toks->v.arr.n;
    const gguf_value *scores = gguf_get_arr(g, "tokenizer.ggml.scores");
    const gguf_value *types = gguf_get_arr(g, "tokenizer.ggml.token_type");
    if (scores && (scores->v.arr.n != (uint64_t)n || !scores->v.arr.raw))
        return err_set(err, ERR_BAD_VALUE, "tokenizer.ggml.scores has %llu entries for %d tokens",
                       (unsigned long long)scores->v.arr.n, n);
    if (types && (types->v.arr.n != (uint64_t)n || !types->v.arr.raw))
        return err_set(err, ERR_BAD_VALUE, "tokenizer.ggml.token_type has %llu entries for %d tokens",
                       (unsigned long long)types->v.arr.n, n);

    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return err_set(err, ERR_NOMEM, "out of memory");
    t->family = fam;
    t->n_vocab = n;
    t->text = toks->v.arr.strs;
    t->score = malloc(sizeof(float) * (size_t)n);
    t->type = malloc(sizeof(int32_t) * (size_t)n);
    t->specials = malloc(sizeof(int32_t) * (size_t)n);
    err_code rc = ERR_OK;
    if (!t->score || !t->type || !t->specials) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = str_map_init(&t->vocab, (uint32_t)n, err);
    for (int i = 0; !rc && i < n; i++) {
        t->score[i] = scores ? (float)gguf_arr_f64(scores, (uint64_t)i) : 0.0f;
        t->type[i] = types ? (int32_t)gguf_arr_i64(types, (uint64_t)i) : TOKEN_NORMAL;
        if (t->text[i].len > UINT32_MAX) rc = err_set(err, ERR_BAD_VALUE, "token %d is too long", i);
        else rc = str_map_put(&t->vocab, t->text[i].ptr, (uint32_t)t->text[i].len, i, err);
        if (t->type[i] == TOKEN_CONTROL || t->type[i] == TOKEN_USER_DEFINED)
            if (t->text[i].len > 0) t->specials[t->n_specials++] = i;
    }
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    sort_specials(t);
    for (int i = 0; i < t->n_specials; i++) {
        int32_t id = t->specials[i];
        t->special_first[(uint8_t)t->text[id].ptr[0]] |= t->type[id] == TOKEN_USER_DEFINED ? 2 : 1;
    }

    bool spm = fam == TOK_SPM;
    t->bos = special_id(g, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, n);
    t->eos = special_id(g, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, n);
    t->unk = special_id(g, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
    t->pad = special_id(g, "tokenizer.ggml.padding_token_id", -1, n);
    t->eot = special_id(g, "tokenizer.ggml.eot_token_id", -1, n);
    if (t->eot < 0) {
        /* vocabularies that end a chat turn with their own marker */
        static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                                "<EOT>", "<|end_of_text|>"};
        for (size_t k = 0; k < sizeof eot_texts / sizeof *eot_texts && t->eot < 0; k++) {
            int32_t id = tokenizer_find(t, eot_texts[k], strlen(eot_texts[k]));
            if (id >= 0 && id != t->eos && t->type[id] == TOKEN_CONTROL) t->eot = id;
        }
    }
    t->add_bos = get_flag(g, "tokenizer.ggml.add_bos_token", spm);
    t->add_eos = get_flag(g, "tokenizer.ggml.add_eos_token", false);
    t->add_space_prefix = get_flag(g, "tokenizer.ggml.add_space_prefix", spm);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_token[b] = tokenizer_find(t, s, 6);
    }
    t->nl = spm ? t->byte_token['\n'] : tokenizer_find(t, "\xc4\x8a", 2);
    if (fam == TOK_BPE) rc = bpe_load(t, g, err);
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return ERR_OK;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    str_map_free(&t->vocab);
    str_map_free(&t->merges);
    free(t->score);
    free(t->type);
    free(t->specials);
    free(t);
}

int tokenizer_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
bool tokenizer_adds_bos(const tokenizer *t) { return t->add_bos && t->bos >= 0; }
bool tokenizer_adds_eos(const tokenizer *t) { return t->add_eos && t->eos >= 0; }
const char *tokenizer_warning(const tokenizer *t) { return t->warning; }
const char *tokenizer_kind(const tokenizer *t) { return t->family == TOK_SPM ? "spm" : "bpe"; }

/* BOS counts too: a model that emits it has finished one text and is starting
 * another (llama2.c-family models delimit stories with BOS, never EOS). */
bool tokenizer_is_eog(const tokenizer *t, int32_t id) {
    return id >= 0 && (id == t->eos || id == t->eot || id == t->bos);
}

int32_t tokenizer_find(const tokenizer *t, const char *s, size_t len) {
    return len > UINT32_MAX ? -1 : str_map_get(&t->vocab, s, (uint32_t)len);
}


/* ---------------------------------------------------------------- encode */

/* The special token whose text starts at s (longest first), or -1. Without
 * parse_special only user-defined tokens count: like llama.cpp (and Hugging
 * Face's added tokens) they are always split out of the text. */
static int32_t special_at(const tokenizer *t, const char *s, size_t left, bool parse_special) {
    /* most positions start no special token: one table lookup rules them out */
    uint8_t can = t->special_first[(uint8_t)s[0]];
    if (!(can & (parse_special ? 3 : 2))) return -1;
    for (int i = 0; i < t->n_specials; i++) {
        if (!parse_special && t->type[t->specials[i]] != TOKEN_USER_DEFINED) continue;
        const gguf_str *x = &t->text[t->specials[i]];
        if (x->len <= left && (uint8_t)x->ptr[0] == (uint8_t)s[0] && !memcmp(x->ptr, s, x->len)) return t->specials[i];
    }
    return -1;
}

static err_code encode_fragment(const tokenizer *t, const char *s, size_t n, bool first, tok_list *out, err_t *err) {
    if (n == 0) return ERR_OK;
    if (t->family == TOK_SPM) return spm_encode(t, s, n, t->add_space_prefix && first, out, err);
    return bpe_encode(t, s, n, out, err);
}

err_code tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                          tok_list *out, err_t *err) {
    err_code rc = ERR_OK;
    if (add_special && tokenizer_adds_bos(t)) rc = tok_list_push(out, t->bos, err);
    size_t start = 0;
    bool first = true; /* SPM: a fragment that begins the text or follows a special token gets the space prefix */
    if (t->n_specials) {
        for (size_t i = 0; !rc && i < len;) {
            int32_t id = special_at(t, text + i, len - i, parse_special);
            if (id < 0) {
                i++;
                continue;
            }
            rc = encode_fragment(t, text + start, i - start, first, out, err);
            if (!rc) rc = tok_list_push(out, id, err);
            i += t->text[id].len;
            start = i;
            first = true;
        }
    }
    if (!rc) rc = encode_fragment(t, text + start, len - start, first, out, err);
    if (!rc && add_special && tokenizer_adds_eos(t)) rc = tok_list_push(out, t->eos, err);
    return rc;
}

/* ---------------------------------------------------------------- decode */

static int put_bytes(char *buf, int cap, const char *s, int n) {
    if (cap > 0) memcpy(buf, s, (size_t)(n < cap ? n : cap));
    return n;
}

int tokenizer_first_difference(const tokenizer *a, const tokenizer *b) {
    const int na = tokenizer_n_vocab(a), nb = tokenizer_n_vocab(b);
    for (int i = 0; i < na && i < nb; i++) {
        char x[256], y[256];
        const int nx = tokenizer_piece(a, i, true, x, sizeof x), ny = tokenizer_piece(b, i, true, y, sizeof y);
        if (nx != ny || (nx > 0 && memcmp(x, y, (size_t)(nx < (int)sizeof x ? nx : (int)sizeof x)))) return i;
    }
    return na == nb ? -1 : (na < nb ? na : nb);
}

int tokenizer_piece(const tokenizer *t, int32_t id, bool special, char *buf, int cap) {
    if (id < 0 || id >= t->n_vocab) return -1;
    const gguf_str *s = &t->text[id];
    int type = t->type[id];
    if (type == TOKEN_CONTROL || type == TOKEN_UNUSED) return special ? put_bytes(buf, cap, s->ptr, (int)s->len) : 0;
    if (type == TOKEN_USER_DEFINED) return put_bytes(buf, cap, s->ptr, (int)s->len);
    if (t->family == TOK_BPE) return bpe_decode_text(s->ptr, s->len, buf, cap);
    /* SentencePiece */
    if (type == TOKEN_BYTE && s->len == 6) {
        unsigned v;
        char hex[3] = {s->ptr[3], s->ptr[4], '\0'};
        if (sscanf(hex, "%2x", &v) == 1) {
            char c = (char)v;
            return put_bytes(buf, cap, &c, 1);
        }
    }
    if (type == TOKEN_UNKNOWN) return put_bytes(buf, cap, "\xe2\x96\x85", 3); /* ▅, as llama.cpp shows <unk> */
    int n = 0;
    for (uint64_t i = 0; i < s->len;) {
        if (i + 3 <= s->len && !memcmp(s->ptr + i, "\xe2\x96\x81", 3)) { /* U+2581 is a space */
            if (n < cap) buf[n] = ' ';
            n++;
            i += 3;
        } else {
            if (n < cap) buf[n] = s->ptr[i];
            n++;
            i++;
        }
    }
    return n;
}

int tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, char *buf, int cap) {
    int total = 0;
    bool first = true;
    for (int i = 0; i < n; i++) {
        char tmp[256];
        int m = tokenizer_piece(t, ids[i], false, tmp, sizeof tmp);
        if (m < 0) return -1;
        if (m == 0) continue;
        const char *src = tmp;
        if (m > (int)sizeof tmp) { /* a very long piece: ask again straight into the output */
            if (total < cap) tokenizer_piece(t, ids[i], false, buf + total, cap - total);
            total += m;
            first = false;
            continue;
        }
        if (first && t->family == TOK_SPM && t->add_space_prefix && src[0] == ' ') {
            src++;
            m--;
        }
        first = false;
        for (int k = 0; k < m; k++, total++)
            if (total < cap) buf[total] = src[k];
    }
    return total;
}
