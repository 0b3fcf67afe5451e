/*
 * tokenizer_bpe — byte-level BPE (tokenizer.ggml.model = "gpt2"), as
 * llama.cpp does it.
 *
 * Encoding a fragment of plain text takes three steps:
 *
 * 1. Pre-tokenize: cut the text into words with the regex(es) of the
 *    vocabulary's pre-tokenizer (tokenizer.ggml.pre). Each regex is a
 *    hand-written scanner over code points. Families with several regexes
 *    (deepseek, falcon, starcoder) apply them in sequence, each one to every
 *    piece the previous ones produced: the matches and the gaps between
 *    them both become pieces. The scanners reproduce llama.cpp, including
 *    where llama.cpp's own matcher differs from the regex text:
 *    - its own matchers for the GPT-2 and Llama 3 regexes: `\s+(?!\S)`
 *      leaves the last space of a run to the next word, and a run that
 *      ends the piece is taken whole (the piece's end is "not \S");
 *    - the regexes it runs with std::wregex see every non-ASCII whitespace
 *      character as \v, so such characters match \s but never an explicit
 *      range like [　-。] or [ࠀ-一];
 *    - `$` is the end of the piece being split.
 *    Text that is not valid UTF-8 is cut into units as llama.cpp does (each
 *    bad byte alone, classified as U+FFFD) but keeps its bytes, so encoding
 *    stays lossless where llama.cpp would substitute U+FFFD.
 *
 * 2. Map each word's bytes through GPT-2's byte-to-unicode table, so every
 *    byte is one printable character (space becomes "Ġ", newline "Ċ").
 *
 * 3. Merge: start from one symbol per byte and repeatedly join the adjacent
 *    pair whose "left right" string has the lowest rank in
 *    tokenizer.ggml.merges, the leftmost pair on ties. A binary heap holds
 *    the candidate pairs; a pair whose sides changed since it was queued is
 *    stale (a side is gone or its length grew) and skipped, so a word of n
 *    bytes costs O(n log n). Llama 3 first looks the whole word up in the
 *    vocabulary (ignore_merges). A final symbol that is not a token falls
 *    back to the tokens of its bytes, then to <unk>, else it is dropped.
 *
 * Decoding undoes the byte mapping per token (bpe_decode_text).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/unicode.h"
#include "tokenizer_impl.h"

/* ---------------------------------------------------------------- loading */

typedef struct {
    const char *name;
    tok_pre pre;
} pre_name;

/*
 * tokenizer.ggml.pre values, with the aliases llama.cpp gives the same
 * regexes. "default" shares PRE_DEFAULT (the GPT-2 regex) with "gpt-2";
 * llama.cpp's own "default" (a key-less legacy file) runs four regexes.
 * dbrx and smaug-bpe use Llama 3's regex; llama.cpp does not give them
 * ignore_merges, this table cannot tell them apart.
 */
static const pre_name pre_names[] = {
    {"default", PRE_DEFAULT},       {"gpt-2", PRE_DEFAULT},         {"jina-es", PRE_DEFAULT},
    {"jina-de", PRE_DEFAULT},       {"jina-v1-en", PRE_DEFAULT},    {"jina-v2-es", PRE_DEFAULT},
    {"jina-v2-de", PRE_DEFAULT},    {"jina-v2-code", PRE_DEFAULT},  {"roberta-bpe", PRE_DEFAULT},
    {"gigachat", PRE_DEFAULT},      {"jais", PRE_DEFAULT},          {"exaone4", PRE_DEFAULT},
    {"a.x-4.0", PRE_DEFAULT},       {"mellum", PRE_DEFAULT},        {"modern-bert", PRE_DEFAULT},
    {"trillion", PRE_DEFAULT},      {"granite-docling", PRE_DEFAULT},
    {"llama-bpe", PRE_LLAMA3},      {"llama3", PRE_LLAMA3},         {"llama-v3", PRE_LLAMA3},
    {"falcon3", PRE_LLAMA3},        {"pixtral", PRE_LLAMA3},        {"dbrx", PRE_LLAMA3},
    {"smaug-bpe", PRE_LLAMA3},      {"qwen2", PRE_QWEN2},           {"deepseek-r1-qwen", PRE_QWEN2},
    {"stablelm2", PRE_QWEN2},       {"megrez", PRE_QWEN2},          {"deepseek-llm", PRE_DEEPSEEK_LLM},
    {"deepseek-coder", PRE_DEEPSEEK_CODER},                         {"falcon", PRE_FALCON},
    {"starcoder", PRE_STARCODER},   {"codeshell", PRE_STARCODER},   {"command-r", PRE_STARCODER},
    {"exaone", PRE_STARCODER},      {"minerva-7b", PRE_STARCODER},  {"mpt", PRE_MPT},
    {"refact", PRE_REFACT},         {"gpt-neox", PRE_GPT_NEOX},     {"olmo", PRE_GPT_NEOX},
    {"phi-2", PRE_PHI2},            {"smollm", PRE_SMOLLM},
};

err_code bpe_load(tokenizer *t, const gguf_ctx *g, err_t *err) {
    const gguf_value *m = gguf_get_arr(g, "tokenizer.ggml.merges");
    if (!m || m->v.arr.elem_type != GGUF_STRING)
        return err_set(err, ERR_MISSING_KEY, "BPE vocabulary without merges (tokenizer.ggml.merges is missing)");
    if (m->v.arr.n > INT32_MAX)
        return err_set(err, ERR_BAD_VALUE, "tokenizer.ggml.merges has %llu entries", (unsigned long long)m->v.arr.n);
    err_code rc = str_map_init(&t->merges, (uint32_t)m->v.arr.n, err);
    /* The merge string "left right" is itself the key (both sides are
     * byte-mapped, so neither contains a space); it stays in the mapping. */
    for (uint64_t i = 0; !rc && i < m->v.arr.n; i++) {
        const gguf_str *s = &m->v.arr.strs[i];
        if (s->len > UINT32_MAX) return err_set(err, ERR_BAD_VALUE, "merge %llu is too long", (unsigned long long)i);
        rc = str_map_put(&t->merges, s->ptr, (uint32_t)s->len, (int32_t)i, err);
    }
    if (rc) return rc;

    t->pre = PRE_DEFAULT;
    gguf_str pre;
    if (!gguf_get_str(g, "tokenizer.ggml.pre", &pre)) {
        snprintf(t->warning, sizeof t->warning, "no pre-tokenizer (tokenizer.ggml.pre); using default");
        return ERR_OK;
    }
    for (size_t k = 0; k < sizeof pre_names / sizeof *pre_names; k++) {
        if (gguf_str_eq(pre, pre_names[k].name)) {
            t->pre = pre_names[k].pre;
            return ERR_OK;
        }
    }
    snprintf(t->warning, sizeof t->warning, "unknown pre-tokenizer '%.*s'; using default",
             (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
    return ERR_OK;
}

/* ---------------------------------------------------------------- decoding */

int bpe_decode_text(const char *s, size_t len, char *buf, int cap) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = unicode_decode(s + i, len - i, &cp);
        int byte = unicode_cp_to_byte(cp); /* an invalid byte reads as U+FFFD: -1, copied as is */
        if (byte >= 0) {
            if (n < (size_t)(cap > 0 ? cap : 0)) buf[n] = (char)byte;
            n++;
        } else {
            for (size_t j = 0; j < k; j++, n++)
                if (n < (size_t)(cap > 0 ? cap : 0)) buf[n] = s[i + j];
        }
        i += k;
    }
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* ---------------------------------------------------------------- pre-tokenizers */

/* The fragment as units (code points, or single bad bytes). */
typedef struct {
    size_t n;
    uint32_t *cp;   /* [n] */
    uint16_t *fl;   /* [n] unicode_flags */
    size_t *off;    /* [n + 1] byte offset of each unit; off[n] = length */
} units;

/* Piece boundaries: unit index where each piece ends, ascending. */
typedef struct {
    size_t *end;
    size_t n, cap;
} cuts;

static bool cuts_push(cuts *c, size_t end) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        size_t *p = realloc(c->end, sizeof *p * cap);
        if (!p) return false;
        c->end = p;
        c->cap = cap;
    }
    c->end[c->n++] = end;
    return true;
}

/* What a unit is to the regexes; OUT is past the end of the piece. */
enum { C_OUT, C_WS, C_LETTER, C_NUMBER, C_OTHER };

static int cls(const units *u, size_t i, size_t b) {
    if (i >= b) return C_OUT;
    unsigned f = u->fl[i];
    if (f & UNICODE_WHITESPACE) return C_WS;
    if (f & UNICODE_LETTER) return C_LETTER;
    if (f & UNICODE_NUMBER) return C_NUMBER;
    return C_OTHER;
}

static uint32_t cp_at(const units *u, size_t i, size_t b) { return i < b ? u->cp[i] : UINT32_MAX; }

/* 's 't 're 've 'm 'll 'd at p (ASCII letters; any case when fold): its length or 0. */
static size_t contraction(const units *u, size_t p, size_t b, bool fold) {
    if (u->cp[p] != '\'' || p + 1 >= b) return 0;
    uint32_t c1 = u->cp[p + 1], c2 = cp_at(u, p + 2, b);
    if (fold) {
        c1 = unicode_tolower(c1);
        c2 = c2 == UINT32_MAX ? c2 : unicode_tolower(c2);
    }
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

/*
 * GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 */
static bool split_gpt2(const units *u, size_t a, size_t b, cuts *out) {
    for (size_t p = a; p < b;) {
        size_t q = p + contraction(u, p, b, false);
        if (q == p) {
            int k = u->cp[p] == ' ' ? cls(u, p + 1, b) : cls(u, p, b);
            if (k == C_LETTER || k == C_NUMBER || k == C_OTHER) {
                q = p + (u->cp[p] == ' ');
                while (cls(u, q, b) == k) q++;
            } else {
                size_t w = 0; /* \s+(?!\S): a run followed by more text gives up its last space */
                while (cls(u, p + w, b) == C_WS) w++;
                q = w > 1 && p + w < b ? p + w - 1 : p + (w ? w : 1);
            }
        }
        if (!cuts_push(out, q)) return false;
        p = q;
    }
    return true;
}

/*
 * Llama 3 (max_digits 3):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Qwen2 is the same with \p{N} (max_digits 1).
 */
static bool split_llama3(const units *u, size_t a, size_t b, size_t max_digits, cuts *out) {
    for (size_t p = a; p < b;) {
        uint32_t c = u->cp[p];
        int k = cls(u, p, b);
        size_t q = p + contraction(u, p, b, true);
        if (q > p) {
            /* contraction */
        } else if (c != '\r' && c != '\n' && k != C_NUMBER && (k == C_LETTER || cls(u, p + 1, b) == C_LETTER)) {
            q = p + 1; /* one non-letter in front, or the first letter */
            while (cls(u, q, b) == C_LETTER) q++;
        } else if (k == C_NUMBER) {
            while (cls(u, q, b) == C_NUMBER && q - p < max_digits) q++;
        } else if ((c == ' ' ? cls(u, p + 1, b) : k) == C_OTHER) {
            q = p + (c == ' ');
            while (cls(u, q, b) == C_OTHER) q++;
            while (q < b && (u->cp[q] == '\r' || u->cp[q] == '\n')) q++;
        } else {
            size_t w = 0, nl_end = 0;
            for (; cls(u, p + w, b) == C_WS; w++)
                if (u->cp[p + w] == '\r' || u->cp[p + w] == '\n') nl_end = p + w + 1;
            if (nl_end) q = nl_end;                 /* \s*[\r\n]+ */
            else if (w > 1 && p + w < b) q = p + w - 1; /* \s+(?!\S) */
            else q = p + (w ? w : 1);               /* \s+ */
        }
        if (!cuts_push(out, q)) return false;
        p = q;
    }
    return true;
}

/* An explicit range class as llama.cpp's std::wregex sees it: non-ASCII
 * whitespace has become \v and is in none of them. */
typedef struct {
    uint32_t lo, hi;
} cp_range;

static bool in_ranges(const units *u, size_t i, const cp_range *r, size_t n) {
    uint32_t c = u->cp[i];
    if (c >= 0x80 && (u->fl[i] & UNICODE_WHITESPACE)) return false;
    for (size_t k = 0; k < n; k++)
        if (c >= r[k].lo && c <= r[k].hi) return true;
    return false;
}

/* deepseek-llm's letters: the cased letters of some Unicode version, as listed in its regex. */
static const cp_range ds_letters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6}, {0x00F8, 0x01BA},
    {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373}, {0x0376, 0x0377}, {0x037B, 0x037D},
    {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A}, {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5},
    {0x03F7, 0x0481}, {0x048A, 0x052F}, {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4},
    {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC},
    {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124},
    {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E},
    {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};
/* [!-/:-~！-／：-～‘-‟　-。] */
static const cp_range ds_punct[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};
/* [一-龥ࠀ-一가-퟿] */
static const cp_range ds_cjk[] = {{0x0800, 0x4E00}, {0x4E00, 0x9FA5}, {0xAC00, 0xD7FF}};

#define N_RANGES(r) (sizeof(r) / sizeof *(r))

/* The splitters; a pre-tokenizer is a list of them applied in order. */
typedef enum {
    SPLIT_END,
    SPLIT_GPT2,
    SPLIT_LLAMA3,
    SPLIT_QWEN2,
    SPLIT_NEWLINE,      /* [\r\n] */
    SPLIT_DS_LETTERS,   /* \s?[deepseek letters]+ */
    SPLIT_DS_PUNCT,     /* \s?[!-/:-~！-／：-～‘-‟　-。]+ */
    SPLIT_TRAILING_WS,  /* \s+$ */
    SPLIT_DS_CJK,       /* [一-龥ࠀ-一가-퟿]+ */
    SPLIT_NUMBERS,      /* \p{N}+ */
    SPLIT_NUMBER,       /* \p{N} */
    SPLIT_LETTERS,      /* \s?\p{L}+ */
    SPLIT_PUNCTS,       /* \s?\p{P}+ */
    SPLIT_FALCON_PUNCT, /* [\p{P}\$\+<=>\^~\|`]+ */
    SPLIT_DIGITS3,      /* [0-9][0-9][0-9] */
} split_kind;

#define MAX_SPLITS 7
static const split_kind pre_splits[][MAX_SPLITS] = {
    [PRE_DEFAULT] = {SPLIT_GPT2},
    [PRE_LLAMA3] = {SPLIT_LLAMA3},
    [PRE_QWEN2] = {SPLIT_QWEN2},
    [PRE_DEEPSEEK_LLM] = {SPLIT_NEWLINE, SPLIT_DS_LETTERS, SPLIT_DS_PUNCT, SPLIT_TRAILING_WS, SPLIT_DS_CJK,
                          SPLIT_NUMBERS},
    [PRE_DEEPSEEK_CODER] = {SPLIT_NEWLINE, SPLIT_LETTERS, SPLIT_PUNCTS, SPLIT_DS_CJK, SPLIT_NUMBER},
    [PRE_FALCON] = {SPLIT_FALCON_PUNCT, SPLIT_GPT2, SPLIT_DIGITS3},
    [PRE_STARCODER] = {SPLIT_NUMBER, SPLIT_GPT2},
    [PRE_MPT] = {SPLIT_GPT2},
    [PRE_REFACT] = {SPLIT_NUMBER, SPLIT_GPT2},
    [PRE_GPT_NEOX] = {SPLIT_GPT2},
    [PRE_PHI2] = {SPLIT_GPT2},
    [PRE_SMOLLM] = {SPLIT_NUMBER, SPLIT_GPT2},
};

static bool is_ws(const units *u, size_t i) { return (u->fl[i] & UNICODE_WHITESPACE) != 0; }
static bool is_letter(const units *u, size_t i) { return (u->fl[i] & UNICODE_LETTER) != 0; }
static bool is_number(const units *u, size_t i) { return (u->fl[i] & UNICODE_NUMBER) != 0; }
static bool is_punct(const units *u, size_t i) { return (u->fl[i] & UNICODE_PUNCTUATION) != 0; }
static bool is_ascii_digit(const units *u, size_t i) { return u->cp[i] >= '0' && u->cp[i] <= '9'; }

static bool in_class(split_kind kind, const units *u, size_t i) {
    switch (kind) {
    case SPLIT_NEWLINE: return u->cp[i] == '\r' || u->cp[i] == '\n';
    case SPLIT_DS_LETTERS: return in_ranges(u, i, ds_letters, N_RANGES(ds_letters));
    case SPLIT_DS_PUNCT: return in_ranges(u, i, ds_punct, N_RANGES(ds_punct));
    case SPLIT_DS_CJK: return in_ranges(u, i, ds_cjk, N_RANGES(ds_cjk));
    case SPLIT_NUMBERS: case SPLIT_NUMBER: return is_number(u, i);
    case SPLIT_LETTERS: return is_letter(u, i);
    case SPLIT_PUNCTS: return is_punct(u, i);
    case SPLIT_FALCON_PUNCT: {
        uint32_t c = u->cp[i];
        return is_punct(u, i) || (c < 0x80 && strchr("$+<=>^~|`", (int)c) && c != 0);
    }
    case SPLIT_DIGITS3: return is_ascii_digit(u, i);
    default: return false;
    }
}

/* Length of the match of a class-based regex at p (0: none), within [p, b). */
static size_t match_at(split_kind kind, const units *u, size_t p, size_t b) {
    size_t q = p;
    switch (kind) {
    case SPLIT_NEWLINE: case SPLIT_NUMBER: /* one unit */
        return in_class(kind, u, p) ? 1 : 0;
    case SPLIT_DIGITS3:
        return p + 3 <= b && is_ascii_digit(u, p) && is_ascii_digit(u, p + 1) && is_ascii_digit(u, p + 2) ? 3 : 0;
    case SPLIT_DS_LETTERS: case SPLIT_DS_PUNCT: case SPLIT_LETTERS: case SPLIT_PUNCTS: /* \s?[..]+ */
        if (is_ws(u, q) && q + 1 < b && in_class(kind, u, q + 1)) q++;
        /* fall through */
    default: /* [..]+ */
        while (q < b && in_class(kind, u, q)) q++;
        return q - p;
    }
}

/* One regex over the piece [a, b): matches and the gaps between them become pieces. */
static bool split_piece(split_kind kind, const units *u, size_t a, size_t b, cuts *out) {
    switch (kind) {
    case SPLIT_GPT2: return split_gpt2(u, a, b, out);
    case SPLIT_LLAMA3: return split_llama3(u, a, b, 3, out);
    case SPLIT_QWEN2: return split_llama3(u, a, b, 1, out);
    case SPLIT_TRAILING_WS: { /* \s+$: the whitespace run that ends the piece */
        size_t s = b;
        while (s > a && is_ws(u, s - 1)) s--;
        return (s == a || s == b || cuts_push(out, s)) && cuts_push(out, b);
    }
    default: break;
    }
    size_t last = a;
    for (size_t p = a; p < b;) {
        size_t m = match_at(kind, u, p, b);
        if (!m) {
            p++;
            continue;
        }
        if (p > last && !cuts_push(out, p)) return false;
        p += m;
        if (!cuts_push(out, p)) return false;
        last = p;
    }
    return last == b || cuts_push(out, b);
}

/* Pre-tokenize the units into words; *words holds their end indices. */
static err_code pre_tokenize(const tokenizer *t, const units *u, cuts *words, err_t *err) {
    cuts a = {0}, b = {0};
    err_code rc = ERR_OK;
    if (!cuts_push(&a, u->n)) rc = err_set(err, ERR_NOMEM, "out of memory for pre-tokenization");
    size_t pre = (size_t)t->pre < sizeof pre_splits / sizeof *pre_splits ? (size_t)t->pre : PRE_DEFAULT;
    for (int s = 0; !rc && s < MAX_SPLITS && pre_splits[pre][s] != SPLIT_END; s++) {
        b.n = 0;
        for (size_t i = 0, start = 0; i < a.n && !rc; start = a.end[i++])
            if (!split_piece(pre_splits[pre][s], u, start, a.end[i], &b))
                rc = err_set(err, ERR_NOMEM, "out of memory for pre-tokenization");
        cuts tmp = a;
        a = b;
        b = tmp;
    }
    free(b.end);
    if (rc) {
        free(a.end);
        return rc;
    }
    *words = a;
    return ERR_OK;
}

/* ---------------------------------------------------------------- merging */

typedef struct {
    int32_t prev, next; /* neighbours, -1 at the ends */
    uint32_t start;     /* offset in the mapped word */
    uint32_t len;       /* bytes of mapped text; 0 once merged into the left neighbour */
} bpe_sym;

typedef struct {
    int32_t rank;
    int32_t left, right;
    uint32_t len; /* left.len + right.len when queued */
} bpe_pair;

/* Scratch space reused across the words of a fragment. */
typedef struct {
    char *map;         /* the word in byte-to-unicode characters */
    bpe_sym *sym;
    bpe_pair *heap;
    char *key;         /* "left right" */
    size_t map_cap, sym_cap, heap_cap, key_cap, heap_n;
    char byte_utf8[256][2]; /* byte-to-unicode, as UTF-8 */
    uint8_t byte_len[256];
} bpe_work;

/* p with room for need elements (*cap updated), or NULL (p is then still valid). */
static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(p, c * elem);
    if (q) *cap = c;
    return q;
}

static bool pair_less(const bpe_pair *x, const bpe_pair *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->left < y->left);
}

static void heap_push(bpe_work *w, bpe_pair p) {
    size_t i = w->heap_n++;
    while (i > 0 && pair_less(&p, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = p;
}

static bpe_pair heap_pop(bpe_work *w) {
    bpe_pair top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* Queue the pair (left, right) when "left right" is a merge. */
static void try_pair(const tokenizer *t, bpe_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const bpe_sym *l = &w->sym[left], *r = &w->sym[right];
    memcpy(w->key, w->map + l->start, l->len);
    w->key[l->len] = ' ';
    memcpy(w->key + l->len + 1, w->map + r->start, r->len);
    int32_t rank = str_map_get(&t->merges, w->key, l->len + 1 + r->len);
    if (rank >= 0) heap_push(w, (bpe_pair){rank, left, right, l->len + r->len});
}

static err_code emit_bytes(const tokenizer *t, const bpe_work *w, const uint8_t *bytes, size_t n, tok_list *out,
                           err_t *err) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = tokenizer_find(t, w->byte_utf8[bytes[i]], w->byte_len[bytes[i]]);
        if (id < 0) id = t->unk;
        if (id >= 0) {
            err_code rc = tok_list_push(out, id, err);
            if (rc) return rc;
        }
    }
    return ERR_OK;
}

/* BPE over one word of raw bytes. */
static err_code encode_word(const tokenizer *t, bpe_work *w, const uint8_t *bytes, size_t n, tok_list *out,
                            err_t *err) {
    if (n > INT32_MAX / 2) return err_set(err, ERR_INVALID_ARG, "a word of %zu bytes is too long to tokenize", n);
    char *map = grow(w->map, &w->map_cap, 2 * n, 1);
    if (map) w->map = map;
    char *key = grow(w->key, &w->key_cap, 2 * n + 1, 1);
    if (key) w->key = key;
    bpe_sym *sym = grow(w->sym, &w->sym_cap, n, sizeof *w->sym);
    if (sym) w->sym = sym;
    bpe_pair *heap = grow(w->heap, &w->heap_cap, 3 * n, sizeof *w->heap);
    if (heap) w->heap = heap;
    if (!map || !key || !sym || !heap) return err_set(err, ERR_NOMEM, "out of memory for BPE");
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bpe_sym *s = &w->sym[i];
        s->prev = (int32_t)i - 1;
        s->next = i + 1 < n ? (int32_t)i + 1 : -1;
        s->start = m;
        s->len = w->byte_len[bytes[i]];
        memcpy(w->map + m, w->byte_utf8[bytes[i]], s->len);
        m += s->len;
    }
    if (t->pre == PRE_LLAMA3) { /* ignore_merges: a word that is a token stays whole */
        int32_t id = tokenizer_find(t, w->map, m);
        if (id >= 0) return tok_list_push(out, id, err);
    }

    w->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) try_pair(t, w, (int32_t)i, (int32_t)i + 1);
    while (w->heap_n) {
        bpe_pair p = heap_pop(w);
        bpe_sym *l = &w->sym[p.left], *r = &w->sym[p.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != p.len) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = p.left;
        /* each merge queues at most two pairs: the heap never outgrows 3n */
        try_pair(t, w, l->prev, p.left);
        try_pair(t, w, p.left, l->next);
    }

    for (int32_t i = 0; i >= 0; i = w->sym[i].next) {
        const bpe_sym *s = &w->sym[i];
        int32_t id = tokenizer_find(t, w->map + s->start, s->len);
        err_code rc;
        if (id >= 0) rc = tok_list_push(out, id, err);
        else { /* symbol i covers bytes [i, next) */
            size_t end = s->next >= 0 ? (size_t)s->next : n;
            rc = emit_bytes(t, w, bytes + i, end - (size_t)i, out, err);
        }
        if (rc) return rc;
    }
    return ERR_OK;
}

/* ---------------------------------------------------------------- encoding */

static err_code decode_units(const char *text, size_t len, units *u, err_t *err) {
    u->cp = malloc(sizeof *u->cp * (len ? len : 1));
    u->fl = malloc(sizeof *u->fl * (len ? len : 1));
    u->off = malloc(sizeof *u->off * (len + 1));
    if (!u->cp || !u->fl || !u->off) return err_set(err, ERR_NOMEM, "out of memory for %zu bytes of text", len);
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        u->off[n] = i;
        i += unicode_decode(text + i, len - i, &u->cp[n]);
        u->fl[n] = (uint16_t)unicode_flags(u->cp[n]);
    }
    u->off[n] = len;
    u->n = n;
    return ERR_OK;
}

err_code bpe_encode(const tokenizer *t, const char *text, size_t len, tok_list *out, err_t *err) {
    if (len == 0) return ERR_OK;
    units u = {0};
    cuts words = {0};
    bpe_work *w = calloc(1, sizeof *w);
    err_code rc = w ? ERR_OK : err_set(err, ERR_NOMEM, "out of memory for BPE");
    if (!rc) rc = decode_units(text, len, &u, err);
    if (!rc) rc = pre_tokenize(t, &u, &words, err);
    if (!rc) {
        for (int b = 0; b < 256; b++) {
            char s[4];
            int k = unicode_encode(unicode_byte_to_cp((uint8_t)b), s); /* U+0021..U+0143: 1 or 2 bytes */
            memcpy(w->byte_utf8[b], s, 2);
            w->byte_len[b] = (uint8_t)k;
        }
    }
    for (size_t i = 0, start = 0; !rc && i < words.n; start = words.end[i++]) {
        size_t a = u.off[start], b = u.off[words.end[i]];
        if (b > a) rc = encode_word(t, w, (const uint8_t *)text + a, b - a, out, err);
    }
    if (w) {
        free(w->map);
        free(w->sym);
        free(w->heap);
        free(w->key);
        free(w);
    }
    free(words.end);
    free(u.cp);
    free(u.fl);
    free(u.off);
    return rc;
}
