/*
 * test_tokenizer_bpe — byte-level BPE and the Unicode tables under it.
 *
 * - unicode: categories of code points from every class (astral ones too),
 *   whitespace, lowercase, UTF-8 decoding of good and bad bytes, and the
 *   GPT-2 byte-to-unicode mapping for all 256 bytes;
 * - pre-tokenizers: each family's word boundaries on hand-made strings
 *   derived from its regexes. The vocabulary for these is synthetic: every
 *   substring of the string is a token and every split of one is a merge,
 *   so BPE glues each word back into one token and the tokens show exactly
 *   where the pre-tokenizer cut;
 * - loading: an unknown pre-tokenizer warns and falls back, missing merges
 *   fail, ignore_merges (Llama 3), the byte and <unk> fallbacks;
 * - golden vectors (../shared/golden/tokenizer): gpt-2 and deepseek-llm,
 *   46 strings each, ids compared exactly, pieces concatenated back to the
 *   original bytes;
 * - a 20k-character word with no spaces encodes quickly (a quadratic merge
 *   loop would take far longer than the 5 s allowed, even under ASan).
 */
#include <string.h>
#include <time.h>

#include "core/gguf.h"
#include "core/unicode.h"
#include "model/tokenizer.h"
#include "model/tokenizer_impl.h" /* bpe_decode_text */
#include "t.h"
#include "util.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- unicode */

static void test_categories(void) {
    struct {
        uint32_t cp;
        unicode_gc gc;
        unsigned cls;
    } cases[] = {
        {'A', UGC_Lu, UNICODE_LETTER},          {'z', UGC_Ll, UNICODE_LETTER},
        {0x01C5, UGC_Lt, UNICODE_LETTER},       {0x02B0, UGC_Lm, UNICODE_LETTER},
        {0x4E2D, UGC_Lo, UNICODE_LETTER},       /* 中 */
        {0x20000, UGC_Lo, UNICODE_LETTER},      /* CJK extension B, inside a First/Last range */
        {0xAC00, UGC_Lo, UNICODE_LETTER},       /* 가 */
        {0x10428, UGC_Ll, UNICODE_LETTER},      /* Deseret */
        {'7', UGC_Nd, UNICODE_NUMBER},          {0x0663, UGC_Nd, UNICODE_NUMBER}, /* Arabic-Indic 3 */
        {0x00BD, UGC_No, UNICODE_NUMBER},       /* ½ */
        {0x2167, UGC_Nl, UNICODE_NUMBER},       /* Ⅷ */
        {0x1D7CE, UGC_Nd, UNICODE_NUMBER},      /* mathematical bold digit zero */
        {'!', UGC_Po, UNICODE_PUNCTUATION},     {'(', UGC_Ps, UNICODE_PUNCTUATION},
        {'_', UGC_Pc, UNICODE_PUNCTUATION},     {0x2014, UGC_Pd, UNICODE_PUNCTUATION}, /* — */
        {0x3002, UGC_Po, UNICODE_PUNCTUATION},  /* 。 */
        {'$', UGC_Sc, UNICODE_SYMBOL},          {'+', UGC_Sm, UNICODE_SYMBOL},
        {'^', UGC_Sk, UNICODE_SYMBOL},          {0x00A9, UGC_So, UNICODE_SYMBOL}, /* © */
        {0x1F999, UGC_So, UNICODE_SYMBOL},      /* 🦙 */
        {0x1F600, UGC_So, UNICODE_SYMBOL},      /* 😀 */
        {0x0301, UGC_Mn, UNICODE_MARK},         {0x0903, UGC_Mc, UNICODE_MARK},
        {0x20DD, UGC_Me, UNICODE_MARK},         {0xE0100, UGC_Mn, UNICODE_MARK}, /* variation selector 17 */
        {' ', UGC_Zs, UNICODE_SEPARATOR | UNICODE_WHITESPACE},
        {0x3000, UGC_Zs, UNICODE_SEPARATOR | UNICODE_WHITESPACE},
        {0x2028, UGC_Zl, UNICODE_SEPARATOR | UNICODE_WHITESPACE},
        {0x2029, UGC_Zp, UNICODE_SEPARATOR | UNICODE_WHITESPACE},
        {'\n', UGC_Cc, UNICODE_CONTROL | UNICODE_WHITESPACE},
        {0x0085, UGC_Cc, UNICODE_CONTROL | UNICODE_WHITESPACE},
        {0x001C, UGC_Cc, UNICODE_CONTROL},      /* not White_Space */
        {0x200B, UGC_Cf, UNICODE_CONTROL},      /* zero width space: not White_Space */
        {0xE0001, UGC_Cf, UNICODE_CONTROL},     {0xD800, UGC_Cs, UNICODE_CONTROL},
        {0xE000, UGC_Co, UNICODE_CONTROL},      {0x10FFFD, UGC_Co, UNICODE_CONTROL},
        {0x0378, UGC_Cn, UNICODE_UNDEFINED},    {0x10FFFF, UGC_Cn, UNICODE_UNDEFINED},
        {0x110000, UGC_Cn, UNICODE_UNDEFINED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        T_CHECKF(unicode_category(cases[i].cp) == cases[i].gc, "U+%04X: category %d, want %d", (unsigned)cases[i].cp,
                 (int)unicode_category(cases[i].cp), (int)cases[i].gc);
        T_CHECKF(unicode_flags(cases[i].cp) == cases[i].cls, "U+%04X: flags 0x%x, want 0x%x", (unsigned)cases[i].cp,
                 unicode_flags(cases[i].cp), cases[i].cls);
    }
    /* White_Space, all of it */
    int n_ws = 0;
    for (uint32_t c = 0; c <= UNICODE_MAX; c++) n_ws += unicode_is_whitespace(c);
    T_EQ_INT(n_ws, 25);
    T_CHECK(unicode_is_whitespace(0x200A) && !unicode_is_whitespace(0x200B) && unicode_is_whitespace(0x00A0));

    struct {
        uint32_t cp, lower;
    } lower[] = {{'A', 'a'},         {'a', 'a'},         {'5', '5'},         {0x00C0, 0x00E0}, {0x0100, 0x0101},
                 {0x0101, 0x0101},   {0x0130, 'i'},      {0x0391, 0x03B1},   {0x0416, 0x0436}, {0x212A, 'k'},
                 {0x10400, 0x10428}, {0x1E900, 0x1E922}, {0x4E2D, 0x4E2D},   {0x01C5, 0x01C6}};
    for (size_t i = 0; i < sizeof lower / sizeof *lower; i++)
        T_CHECKF(unicode_tolower(lower[i].cp) == lower[i].lower, "tolower(U+%04X) = U+%04X", (unsigned)lower[i].cp,
                 (unsigned)unicode_tolower(lower[i].cp));
}

static void test_utf8(void) {
    uint32_t cp;
    T_EQ_INT(unicode_decode("a", 1, &cp), 1);
    T_EQ_INT(cp, 'a');
    T_EQ_INT(unicode_decode("\xc3\xa9", 2, &cp), 2);
    T_EQ_INT(cp, 0xE9);
    T_EQ_INT(unicode_decode("\xe4\xb8\xad", 3, &cp), 3);
    T_EQ_INT(cp, 0x4E2D);
    T_EQ_INT(unicode_decode("\xf0\x9f\xa6\x99", 4, &cp), 4);
    T_EQ_INT(cp, 0x1F999);
    /* bad bytes are units of one byte reading as U+FFFD */
    T_EQ_INT(unicode_decode("\xff", 1, &cp), 1);
    T_EQ_INT(cp, UNICODE_REPLACEMENT);
    T_EQ_INT(unicode_decode("\x80z", 2, &cp), 1);
    T_EQ_INT(cp, UNICODE_REPLACEMENT);
    T_EQ_INT(unicode_decode("\xe4\xb8", 2, &cp), 1); /* truncated */
    T_EQ_INT(cp, UNICODE_REPLACEMENT);
    T_EQ_INT(unicode_decode("\xe4z\xad", 3, &cp), 1); /* not a continuation */
    T_EQ_INT(cp, UNICODE_REPLACEMENT);
    char b[4];
    T_EQ_INT(unicode_encode(0x1F999, b), 4);
    T_CHECK(!memcmp(b, "\xf0\x9f\xa6\x99", 4));
    T_EQ_INT(unicode_encode(0x110000, b), 0);
    /* encode/decode agree everywhere */
    int bad = 0;
    for (uint32_t c = 0; c <= UNICODE_MAX; c++) {
        int n = unicode_encode(c, b);
        uint32_t back;
        if (unicode_decode(b, (size_t)n, &back) != (size_t)n || back != c) bad++;
    }
    T_EQ_INT(bad, 0);
}

/* The strict decoder of the test, by code point: the shortest form, no surrogate, <= U+10FFFF. */
static size_t strict_len(const uint8_t *u, size_t n) {
    if (!n) return 0;
    const size_t len = u[0] < 0x80 ? 1 : u[0] >> 5 == 6 ? 2 : u[0] >> 4 == 14 ? 3 : u[0] >> 3 == 30 ? 4 : 0;
    if (!len || len > n) return 0;
    uint32_t cp = len == 1 ? u[0] : u[0] & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if (u[i] >> 6 != 2) return 0;
        cp = cp << 6 | (u[i] & 0x3Fu);
    }
    const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
    return len;
}

/* unicode_sanitize: valid text unchanged; any bytes become strictly valid UTF-8, each byte that starts no
 * character one U+FFFD, every character kept (a property test over random bytes), and some exact cases. */
static void test_sanitize(void) {
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a\xc3\xa9z", "a\xc3\xa9z"},
        {"a\xc3", "a\xef\xbf\xbd"},
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},     /* a surrogate */
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},                     /* overlong '/' */
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* past U+10FFFF */
        {"\xf0\x9f\x90\x99!", "\xf0\x9f\x90\x99!"},
        {"\xc5T\x17", "\xef\xbf\xbdT\x17"}, /* the synthetic model's text the server once sent raw */
    };
    char out[64];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const size_t n = unicode_sanitize(cases[c].in, strlen(cases[c].in), out);
        T_CHECKF(n == strlen(cases[c].out) && !strcmp(out, cases[c].out), "case %zu", c);
    }
    uint32_t r = 7;
    const uint8_t pool[] = {'a', 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
    int bad = 0, changed_valid = 0;
    long replaced = 0;
    for (int it = 0; it < 20000; it++) {
        uint8_t in[24];
        char o[3 * 24 + 1];
        r = r * 1103515245u + 12345u;
        const size_t n = (r >> 16) % 25;
        for (size_t i = 0; i < n; i++) {
            r = r * 1103515245u + 12345u;
            in[i] = (r >> 20) & 1 ? pool[(r >> 8) % sizeof pool] : (uint8_t)(r >> 8);
        }
        const size_t m = unicode_sanitize((const char *)in, n, o);
        /* the output: valid everywhere; walking input and output together, each valid input character is
         * copied and each other byte is one U+FFFD */
        size_t i = 0, j = 0;
        bool ok = strlen(o) <= m && o[m] == '\0';
        for (size_t k; ok && j < m; j += k) ok = (k = strict_len((const uint8_t *)o + j, m - j)) > 0;
        for (j = 0; ok && i < n;) {
            const size_t k = strict_len(in + i, n - i);
            if (k) ok = !memcmp(o + j, in + i, k), i += k, j += k;
            else ok = !memcmp(o + j, "\xef\xbf\xbd", 3), i++, j += 3, replaced++;
        }
        bad += !ok || j != m;
        bool valid = true;
        for (size_t a = 0, k; valid && a < n; a += k) valid = (k = strict_len(in + a, n - a)) > 0;
        changed_valid += valid && (m != n || memcmp(o, in, n));
    }
    printf("unicode_sanitize: 20000 random byte strings, %ld bytes replaced, %d outputs invalid or off\n", replaced, bad);
    T_CHECKF(bad == 0 && changed_valid == 0 && replaced > 1000, "%d bad outputs, %d valid inputs changed", bad,
             changed_valid);
}

static void test_byte_map(void) {
    int seen[324] = {0};
    int bad = 0;
    for (int v = 0; v < 256; v++) {
        uint32_t c = unicode_byte_to_cp((uint8_t)v);
        if (c >= 324 || seen[c]++ || unicode_cp_to_byte(c) != v) bad++;
        char s[4];
        int n = unicode_encode(c, s);
        /* and through the tokenizer's decoder */
        char out[4];
        if (bpe_decode_text(s, (size_t)n, out, 4) != 1 || (uint8_t)out[0] != v) bad++;
    }
    T_EQ_INT(bad, 0);
    T_EQ_INT(unicode_byte_to_cp(' '), 0x120);  /* Ġ */
    T_EQ_INT(unicode_byte_to_cp('\n'), 0x10A); /* Ċ */
    T_EQ_INT(unicode_byte_to_cp('A'), 'A');
    T_EQ_INT(unicode_byte_to_cp(0xAD), 0x143);
    T_EQ_INT(unicode_byte_to_cp(0xE9), 0xE9);
    T_EQ_INT(unicode_cp_to_byte(0x144), -1);
    T_EQ_INT(unicode_cp_to_byte(' '), -1);
    T_EQ_INT(unicode_cp_to_byte(0x4E2D), -1);
}

/* ---------------------------------------------------------------- synthetic vocabularies */

/* s in byte-to-unicode characters; returns the length written to out (room for 2n). */
static size_t map_bytes(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)unicode_encode(unicode_byte_to_cp((uint8_t)s[i]), out + k);
    return k;
}

typedef struct {
    char **v;
    size_t n, cap;
} strvec;

static void sv_add(strvec *sv, const char *s, size_t n, bool dedupe) {
    if (dedupe)
        for (size_t i = 0; i < sv->n; i++)
            if (strlen(sv->v[i]) == n && !memcmp(sv->v[i], s, n)) return;
    if (sv->n == sv->cap) {
        sv->cap = sv->cap ? 2 * sv->cap : 512;
        sv->v = realloc(sv->v, sizeof *sv->v * sv->cap);
    }
    char *c = malloc(n + 1);
    memcpy(c, s, n);
    c[n] = 0;
    sv->v[sv->n++] = c;
}

static void sv_free(strvec *sv) {
    for (size_t i = 0; i < sv->n; i++) free(sv->v[i]);
    free(sv->v);
    memset(sv, 0, sizeof *sv);
}

typedef struct {
    gguf_ctx *g;
    tokenizer *t;
    err_code rc;
    err_t err;
} vocab;

/* Write and load a BPE vocabulary; pre / merges / unk may be absent (NULL / NULL / -1). */
static vocab vocab_make(const char *name, const strvec *tokens, const strvec *merges, const char *pre, int unk) {
    vocab v = {0};
    char path[512];
    tu_tmp_path(path, sizeof path, name);
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "gpt2");
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre) gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens->v, tokens->n);
    if (merges) gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges->v, merges->n);
    if (unk >= 0) gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    v.rc = gguf_writer_write(w, path, NULL, NULL, &v.err);
    gguf_writer_free(w);
    if (!v.rc) v.rc = gguf_open(path, &v.g, &v.err);
    if (!v.rc) v.rc = tokenizer_load(v.g, &v.t, &v.err);
    unlink(path);
    return v;
}

static void vocab_free(vocab *v) {
    tokenizer_free(v->t);
    gguf_close(v->g);
}

/* The 256 byte tokens, then every substring of text; every split of a substring is a merge. */
static void closure_vocab(const char *text, strvec *tokens, strvec *merges) {
    size_t n = strlen(text);
    char *buf = malloc(4 * n + 8);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        sv_add(tokens, buf, map_bytes(&c, 1, buf), false);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 2; j <= n; j++) {
            sv_add(tokens, buf, map_bytes(text + i, j - i, buf), true);
            for (size_t k = i + 1; k < j; k++) {
                size_t a = map_bytes(text + i, k - i, buf);
                buf[a] = ' ';
                size_t b = map_bytes(text + k, j - k, buf + a + 1);
                sv_add(merges, buf, a + 1 + b, false);
            }
        }
    free(buf);
}

/* The pieces of encoding text, decoded and joined with '|' (caller frees). */
static char *pieces(const tokenizer *t, const char *text) {
    tok_list l = {0};
    err_t e;
    size_t cap = 4 * strlen(text) + 64, n = 0;
    char *s = calloc(1, cap);
    if (tokenizer_encode(t, text, strlen(text), false, false, &l, &e)) {
        snprintf(s, cap, "error: %s", e.msg);
        return s;
    }
    for (int i = 0; i < l.n; i++) {
        if (i) s[n++] = '|';
        int k = tokenizer_piece(t, l.ids[i], false, s + n, (int)(cap - n - 1));
        n += k > 0 ? (size_t)k : 0;
    }
    s[n] = 0;
    tok_list_free(&l);
    return s;
}

/* How the pre-tokenizer `pre` cuts text into words, as "w1|w2|...". */
static char *split_words(const char *pre, const char *text) {
    strvec tokens = {0}, merges = {0};
    closure_vocab(text, &tokens, &merges);
    vocab v = vocab_make("split.gguf", &tokens, &merges, pre, -1);
    sv_free(&tokens);
    sv_free(&merges);
    if (v.rc) {
        fprintf(stderr, "vocab for '%s': %s\n", pre, v.err.msg);
        return calloc(1, 1);
    }
    char *s = pieces(v.t, text);
    vocab_free(&v);
    return s;
}

static void check_split(const char *pre, const char *text, const char *want) {
    char *got = split_words(pre, text);
    T_CHECKF(!strcmp(got, want), "pre %s: \"%s\" -> \"%s\", want \"%s\"", pre, text, got, want);
    free(got);
}

static void test_pre_tokenizers(void) {
    /* GPT-2 and the families that use its regex alone */
    const char *gpt2_like[] = {"gpt-2", "mpt", "gpt-neox", "phi-2", "default"};
    for (size_t i = 0; i < sizeof gpt2_like / sizeof *gpt2_like; i++) {
        const char *p = gpt2_like[i];
        check_split(p, "Hello world", "Hello| world");
        check_split(p, "I'm  fine!!\n\n  ok", "I|'m| | fine|!!|\n\n | ok");
        check_split(p, "abc123 4567", "abc|123| 4567");
        check_split(p, "x   ", "x|   ");
        check_split(p, "don'T 've", "don|'|T| '|ve");
    }
    check_split("gpt-2", "h\xc3\xa9llo w\xc3\xb6rld \xe4\xb8\xad\xe6\x96\x87", "h\xc3\xa9llo| w\xc3\xb6rld| \xe4\xb8\xad\xe6\x96\x87");
    check_split("gpt-2", "\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99 x\t\ty", "\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99| x|\t|\t|y");
    check_split("gpt-2", "a \xe3\x80\x80 b", "a| \xe3\x80\x80| b"); /* U+3000 is whitespace */

    /* Llama 3: case-free contractions, 1-3 digits, a non-letter glued in front of letters, newlines */
    check_split("llama-bpe", "Hello World's 12345 !!\n\n  x", "Hello| World|'s| |123|45| !!\n\n| | x");
    check_split("llama-bpe", "WE'RE $hello", "WE|'RE| $|hello"); /* " $" is not [^\r\n\p{L}\p{N}]?\p{L}+ */
    check_split("llama-bpe", "a.b $c", "a|.b| $|c");
    check_split("llama-bpe", "$c", "$c");
    check_split("llama-bpe", "\t\tfoo", "\t|\tfoo");
    check_split("llama-bpe", "a\n\n\nb", "a|\n\n\n|b");
    check_split("llama-bpe", "a  \n  x", "a|  \n| | x");
    check_split("llama-bpe", "x   ", "x|   ");
    /* Qwen2: the same with single digits */
    check_split("qwen2", "Hello World's 12345 !!\n\n  x", "Hello| World|'s| |1|2|3|4|5| !!\n\n| | x");

    /* deepseek-llm: [\r\n], \s?[letters]+, \s?[punct]+, \s+$, [CJK]+, \p{N}+ in sequence */
    check_split("deepseek-llm", "Hello, world!\n12345 \xe4\xb8\xad\xe6\x96\x87" "abc",
                "Hello|,| world|!|\n|12345| |\xe4\xb8\xad\xe6\x96\x87|abc");
    check_split("deepseek-llm", "ab  ", "ab|  ");
    check_split("deepseek-llm", "x, \t", "x|,| \t");
    check_split("deepseek-llm", "caf\xc3\xa9", "caf|\xc3\xa9"); /* é is a letter, but not in [!-/:-~] */
    check_split("deepseek-llm", "\xe4\xb8\xad\xe3\x80\x80\xe6\x96\x87", "\xe4\xb8\xad|\xe3\x80\x80|\xe6\x96\x87");
    /* deepseek-coder: [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N} */
    check_split("deepseek-coder", "Hello, world! 123", "Hello|,| world|!| |1|2|3");
    /* falcon: [\p{P}$+<=>^~|`]+, then GPT-2, then [0-9]{3} */
    check_split("falcon", "Hello, world!! 1234567", "Hello|,| world|!!| |123|456|7");
    check_split("falcon", "a+b=c", "a|+|b|=|c");
    /* starcoder, refact, smollm: \p{N}, then GPT-2 */
    check_split("starcoder", "abc 123 x1", "abc| |1|2|3| x|1");
    check_split("refact", "abc 123 x1", "abc| |1|2|3| x|1");
    check_split("smollm", "abc 123 x1", "abc| |1|2|3| x|1");
}

/* ---------------------------------------------------------------- loading */

static void test_loading(void) {
    strvec tokens = {0}, merges = {0};
    closure_vocab("Hello world", &tokens, &merges);

    vocab v = vocab_make("nonsense.gguf", &tokens, &merges, "nonsense", -1);
    T_EQ_INT(v.rc, ERR_OK);
    if (!v.rc) {
        T_CHECKF(strstr(tokenizer_warning(v.t), "nonsense") != NULL, "warning: '%s'", tokenizer_warning(v.t));
        T_CHECK(!strcmp(tokenizer_kind(v.t), "bpe"));
        char *s = pieces(v.t, "Hello world");
        T_CHECKF(!strcmp(s, "Hello| world"), "got '%s'", s);
        free(s);
    }
    vocab_free(&v);

    v = vocab_make("gpt2.gguf", &tokens, &merges, "gpt-2", -1);
    T_CHECK(!v.rc && !strcmp(tokenizer_warning(v.t), ""));
    vocab_free(&v);

    v = vocab_make("nopre.gguf", &tokens, &merges, NULL, -1);
    T_CHECK(!v.rc && strstr(tokenizer_warning(v.t), "pre-tokenizer") != NULL);
    vocab_free(&v);

    v = vocab_make("nomerges.gguf", &tokens, NULL, "gpt-2", -1);
    T_EQ_INT(v.rc, ERR_MISSING_KEY);
    T_CHECK(strstr(v.err.msg, "merges") != NULL);
    vocab_free(&v);
    sv_free(&tokens);
    sv_free(&merges);

    /* ignore_merges: Llama 3 takes a word that is a token whole, even without merges to build it */
    strvec none = {0};
    char buf[16];
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        sv_add(&tokens, buf, map_bytes(&c, 1, buf), false);
    }
    sv_add(&tokens, "abc", 3, false);
    sv_add(&none, "x y", 3, false); /* one merge that never applies */
    vocab l3 = vocab_make("l3.gguf", &tokens, &none, "llama-bpe", -1);
    vocab g2 = vocab_make("g2.gguf", &tokens, &none, "gpt-2", -1);
    T_CHECK(!l3.rc && !g2.rc);
    if (!l3.rc && !g2.rc) {
        tok_list a = {0}, b = {0};
        T_EQ_INT(tokenizer_encode(l3.t, "abc", 3, false, false, &a, NULL), ERR_OK);
        T_EQ_INT(tokenizer_encode(g2.t, "abc", 3, false, false, &b, NULL), ERR_OK);
        T_CHECK(a.n == 1 && a.ids[0] == 256);
        T_CHECK(b.n == 3 && b.ids[0] == 'a' && b.ids[1] == 'b' && b.ids[2] == 'c'); /* byte b is token b */
        tok_list_free(&a);
        tok_list_free(&b);
    }
    vocab_free(&l3);
    vocab_free(&g2);
    sv_free(&tokens);

    /* a byte with no token: <unk> when the vocabulary has one, else dropped */
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        if (b == 'z') sv_add(&tokens, "<no z>", 6, false);
        else sv_add(&tokens, buf, map_bytes(&c, 1, buf), false);
    }
    sv_add(&tokens, "<unk>", 5, false);
    vocab u = vocab_make("unk.gguf", &tokens, &none, "gpt-2", 256);
    vocab d = vocab_make("drop.gguf", &tokens, &none, "gpt-2", -1);
    T_CHECK(!u.rc && !d.rc);
    if (!u.rc && !d.rc) {
        tok_list a = {0}, b = {0};
        T_EQ_INT(tokenizer_encode(u.t, "az", 2, false, false, &a, NULL), ERR_OK);
        T_EQ_INT(tokenizer_encode(d.t, "az", 2, false, false, &b, NULL), ERR_OK);
        T_CHECK(a.n == 2 && a.ids[1] == 256);
        T_CHECK(b.n == 1 && b.ids[0] == 'a');
        tok_list_free(&a);
        tok_list_free(&b);
    }
    vocab_free(&u);
    vocab_free(&d);
    sv_free(&tokens);
    sv_free(&none);
}

/* ---------------------------------------------------------------- golden vectors */

/* Encode, compare with the expected ids, decode back: returns true when both hold. */
static bool golden_case(const tokenizer *t, const char *name, int idx, const char *text, size_t len,
                        const char *expect_line) {
    tok_list l = {0};
    err_t e;
    err_code rc = tokenizer_encode(t, text, len, false, false, &l, &e);
    T_CHECKF(rc == ERR_OK, "%s #%d: %s", name, idx, e.msg);
    bool ok = rc == ERR_OK;
    /* expected ids */
    int n_want = 0, mismatch = -1;
    for (const char *p = expect_line; *p;) {
        char *endp;
        long id = strtol(p, &endp, 10);
        if (endp == p) break;
        if (mismatch < 0 && (n_want >= l.n || l.ids[n_want] != id)) mismatch = n_want;
        n_want++;
        p = endp;
    }
    if (mismatch < 0 && n_want != l.n) mismatch = n_want;
    if (mismatch >= 0) {
        ok = false;
        fprintf(stderr, "%s #%d: %d tokens, want %d; first difference at %d\n  want:%s\n  got: ", name, idx, l.n,
                n_want, mismatch, expect_line);
        for (int i = 0; i < l.n; i++) fprintf(stderr, " %d", (int)l.ids[i]);
        fputc('\n', stderr);
    }
    T_CHECKF(mismatch < 0, "%s #%d: token ids differ", name, idx);
    /* lossless: the pieces give back the text */
    char *back = malloc(len + 64);
    size_t n = 0;
    bool fits = true;
    for (int i = 0; i < l.n && fits; i++) {
        int k = tokenizer_piece(t, l.ids[i], false, back + n, (int)(len + 64 - n));
        if (k < 0 || n + (size_t)k > len + 64) fits = false;
        else n += (size_t)k;
    }
    bool same = fits && n == len && !memcmp(back, text, len);
    T_CHECKF(same, "%s #%d: decoding does not give back the text", name, idx);
    free(back);
    tok_list_free(&l);
    return ok && same;
}

static void test_golden(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/golden/tokenizer/ggml-vocab-%s.gguf", dir, name);
    gguf_ctx *g = NULL;
    tokenizer *t = NULL;
    err_t e;
    err_code rc = gguf_open(path, &g, &e);
    if (!rc) rc = tokenizer_load(g, &t, &e);
    T_CHECKF(rc == ERR_OK, "%s: %s", path, e.msg);
    if (rc) {
        gguf_close(g);
        return;
    }
    T_CHECK(!strcmp(tokenizer_kind(t), "bpe"));
    T_CHECKF(!strcmp(tokenizer_warning(t), ""), "warning: %s", tokenizer_warning(t));

    snprintf(path, sizeof path, "%s/golden/tokenizer/ggml-vocab-%s.gguf", dir, name);
    tu_vocab_vectors vv;
    T_CHECK(tu_vocab_open(&vv, path));
    int idx = 0, passed = 0;
    const char *text, *line;
    size_t len;
    while (tu_vocab_next(&vv, &text, &len, &line)) passed += golden_case(t, name, idx++, text, len, line);
    printf("%s: %d/%d golden tests pass\n", name, passed, idx);
    T_EQ_INT(idx, 46);
    T_EQ_INT(passed, idx);
    tu_vocab_close(&vv);
    tokenizer_free(t);
    gguf_close(g);
}

/* ---------------------------------------------------------------- long input */

static void long_word(const tokenizer *t, const char *name, const char *unit, size_t reps) {
    size_t ul = strlen(unit), len = ul * reps;
    char *text = malloc(len);
    for (size_t i = 0; i < reps; i++) memcpy(text + i * ul, unit, ul);
    tok_list l = {0};
    double t0 = now_s();
    err_code rc = tokenizer_encode(t, text, len, false, false, &l, NULL);
    double dt = now_s() - t0;
    T_EQ_INT(rc, ERR_OK);
    T_CHECKF(dt < 5.0, "%s: %zu x '%s' took %.2f s", name, reps, unit, dt);
    T_CHECK(l.n > 0 && (size_t)l.n <= len);
    char *back = malloc(len + 64);
    size_t n = 0;
    for (int i = 0; i < l.n; i++) {
        int k = tokenizer_piece(t, l.ids[i], false, back + n, (int)(len + 64 - n));
        if (k < 0 || n + (size_t)k > len) {
            n = len + 1;
            break;
        }
        n += (size_t)k;
    }
    T_CHECKF(n == len && !memcmp(back, text, len), "%s: %zu x '%s' does not decode back", name, reps, unit);
    printf("%s: %zu x '%s' -> %d tokens in %.3f s\n", name, reps, unit, l.n, dt);
    free(back);
    free(text);
    tok_list_free(&l);
}

static void test_long(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/golden/tokenizer/ggml-vocab-%s.gguf", dir, name);
    gguf_ctx *g = NULL;
    tokenizer *t = NULL;
    if (gguf_open(path, &g, NULL) || tokenizer_load(g, &t, NULL)) {
        T_CHECKF(0, "cannot load %s", path);
        gguf_close(g);
        return;
    }
    long_word(t, name, "a", 20000);
    long_word(t, name, " ", 20000);
    long_word(t, name, "ab", 10000);
    long_word(t, name, "\xe4\xb8\xad", 10000);
    long_word(t, name, "1", 20000);
    tokenizer_free(t);
    gguf_close(g);
}

int main(void) {
    test_categories();
    test_utf8();
    test_sanitize();
    test_byte_map();
    test_pre_tokenizers();
    test_loading();
    const char *dir = tu_data_dir();
    if (!dir) T_SKIP("no shared data folder for the golden tokenizer vectors");
    test_golden(dir, "gpt-2");
    test_golden(dir, "deepseek-llm");
    test_long(dir, "gpt-2");
    test_long(dir, "deepseek-llm");
    T_DONE();
}
