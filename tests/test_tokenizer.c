/*
 * test_tokenizer — SentencePiece vocabularies and the shared tokenizer code.
 *
 * Every test string of the llama-spm and phi-3 vectors in ../shared encodes
 * to exactly the reference ids and decodes back to the text (after the one
 * leading space SentencePiece adds); the golden prompts of stories260K
 * encode to the ids llama.cpp used; special tokens are parsed only when
 * asked; pieces never lose bytes.
 */
#include <stdint.h>

#include "core/gguf.h"
#include "model/tokenizer.h"
#include "t.h"
#include "util.h"

static tokenizer *load(const char *path, gguf_ctx **g) {
    err_t err = {0};
    tokenizer *t = NULL;
    if (gguf_open(path, g, &err)) {
        T_CHECKF(0, "%s: %s", path, err.msg);
        return NULL;
    }
    if (tokenizer_load(*g, &t, &err)) {
        T_CHECKF(0, "%s: %s", path, err.msg);
        gguf_close(*g);
        return NULL;
    }
    return t;
}

/* Concatenated pieces of ids. Returns a malloc'd buffer and its length. */
static char *decode(const tokenizer *t, const int32_t *ids, int n, size_t *len) {
    size_t cap = 64, k = 0;
    char *out = malloc(cap);
    for (int i = 0; i < n; i++) {
        char piece[256];
        int m = tokenizer_piece(t, ids[i], false, piece, sizeof piece);
        if (m < 0 || m > (int)sizeof piece) m = 0;
        while (k + (size_t)m > cap) out = realloc(out, cap *= 2);
        memcpy(out + k, piece, (size_t)m);
        k += (size_t)m;
    }
    *len = k;
    return out;
}

static void run_vectors(const char *dir, const char *vocab) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, vocab);
    gguf_ctx *g;
    tokenizer *t = load(p, &g);
    if (!t) return;
    T_CHECK(!strcmp(tokenizer_kind(t), "spm"));
    snprintf(p, sizeof p, "%s/%s", dir, vocab);
    tu_vocab_vectors vv;
    T_CHECK(tu_vocab_open(&vv, p));
    int n_tests = 0, n_ok = 0, n_roundtrip = 0;
    const char *text, *line;
    size_t len;
    while (tu_vocab_next(&vv, &text, &len, &line)) {
        int32_t want[4096];
        int n_want = 0;
        for (const char *q = line; *q;) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q) break;
            want[n_want++] = (int32_t)v;
            q = e;
        }
        tok_list got = {0};
        err_t err = {0};
        T_EQ_INT(tokenizer_encode(t, text, len, false, false, &got, &err), ERR_OK);
        int same = got.n == n_want && (n_want == 0 || !memcmp(got.ids, want, sizeof(int32_t) * (size_t)n_want));
        if (!same) {
            fprintf(stderr, "%s test %d: '%.*s' got", vocab, n_tests, (int)(len > 60 ? 60 : len), text);
            for (int i = 0; i < got.n && i < 20; i++) fprintf(stderr, " %d", got.ids[i]);
            fprintf(stderr, " want %s\n", line);
        }
        n_ok += same;
        /* decoding gives the text back, after the leading space SentencePiece adds */
        size_t dl;
        char *d = decode(t, got.ids, got.n, &dl);
        int rt = len == 0 ? dl == 0 : (dl == len + 1 && d[0] == ' ' && !memcmp(d + 1, text, len));
        if (!rt) fprintf(stderr, "%s test %d: decode differs\n", vocab, n_tests);
        n_roundtrip += rt;
        free(d);
        tok_list_free(&got);
        n_tests++;
    }
    printf("%s: %d/%d encode exactly, %d/%d decode back\n", vocab, n_ok, n_tests, n_roundtrip, n_tests);
    T_EQ_INT(n_tests, 46);
    T_EQ_INT(n_ok, n_tests);
    T_EQ_INT(n_roundtrip, n_tests);
    tu_vocab_close(&vv);
    tokenizer_free(t);
    gguf_close(g);
}

static void test_golden_prompts(const char *data) {
    char p[1024];
    snprintf(p, sizeof p, "%s/models/stories260K.gguf", data);
    gguf_ctx *g;
    tokenizer *t = load(p, &g);
    if (!t) return;
    T_EQ_INT(tokenizer_bos(t), 1);
    T_EQ_INT(tokenizer_eos(t), 2);
    T_CHECK(tokenizer_adds_bos(t));
    static const char *cases[] = {"stories260k-once", "stories260k-park", "dense-f32"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        snprintf(p, sizeof p, "%s/golden/cases/%s.txt", data, cases[c]);
        size_t n;
        char *m = (char *)tu_read_file(p, &n);
        if (!m) continue;
        m = realloc(m, n + 1);
        m[n] = '\0';
        char *prompt = strstr(m, "\nprompt: ") + 9, *ids = strstr(m, "\nprompt_tokens: ") + 16;
        *strchr(prompt, '\n') = '\0';
        *strchr(ids, '\n') = '\0';
        tok_list got = {0};
        T_EQ_INT(tokenizer_encode(t, prompt, strlen(prompt), true, false, &got, NULL), ERR_OK);
        char buf[4096] = "";
        for (int i = 0; i < got.n; i++) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%d", i ? " " : "", got.ids[i]);
        T_CHECKF(!strcmp(buf, ids), "%s: got '%s' want '%s'", cases[c], buf, ids);
        tok_list_free(&got);
        free(m);
    }
    /* control tokens: text only when parsed, pieces empty unless asked */
    tok_list a = {0}, b = {0};
    const char *s = "Hi</s>there";
    T_EQ_INT(tokenizer_encode(t, s, strlen(s), false, true, &a, NULL), ERR_OK);
    T_EQ_INT(tokenizer_encode(t, s, strlen(s), false, false, &b, NULL), ERR_OK);
    int has_eos_a = 0, has_eos_b = 0;
    for (int i = 0; i < a.n; i++) has_eos_a |= a.ids[i] == 2;
    for (int i = 0; i < b.n; i++) has_eos_b |= b.ids[i] == 2;
    T_CHECK(has_eos_a && !has_eos_b);
    char piece[16];
    T_EQ_INT(tokenizer_piece(t, 2, false, piece, sizeof piece), 0);
    T_EQ_INT(tokenizer_piece(t, 2, true, piece, sizeof piece), 4);
    T_EQ_INT(tokenizer_piece(t, 512, false, piece, sizeof piece), -1);
    T_CHECK(tokenizer_is_eog(t, 2) && tokenizer_is_eog(t, 1) && !tokenizer_is_eog(t, 0) && !tokenizer_is_eog(t, 300));
    /* a byte token decodes to its raw byte; a piece longer than the buffer reports its length */
    int32_t nl = tokenizer_find(t, "<0x0A>", 6);
    T_CHECK(nl >= 0 && tokenizer_piece(t, nl, false, piece, sizeof piece) == 1 && piece[0] == '\n');
    /* multi-byte text with no such token falls back to bytes and decodes back */
    const char *u = "caf\xc3\xa9 \xe2\x82\xac";
    tok_list c = {0};
    T_EQ_INT(tokenizer_encode(t, u, strlen(u), false, false, &c, NULL), ERR_OK);
    size_t dl;
    char *d = decode(t, c.ids, c.n, &dl);
    T_CHECK(dl == strlen(u) + 1 && !memcmp(d + 1, u, strlen(u)));
    free(d);
    tok_list_free(&a);
    tok_list_free(&b);
    tok_list_free(&c);
    tokenizer_free(t);
    gguf_close(g);
}

int main(void) {
    const char *data = tu_data_dir();
    if (!data) T_SKIP("no shared data folder (set OCTO_TEST_DATA)");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/golden/tokenizer", data);
    run_vectors(dir, "ggml-vocab-llama-spm.gguf");
    run_vectors(dir, "ggml-vocab-phi-3.gguf");
    test_golden_prompts(data);
    T_DONE();
}
