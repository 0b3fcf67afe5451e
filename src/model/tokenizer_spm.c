/*
 * tokenizer_spm — SentencePiece (BPE-by-score) encoding, as llama.cpp does it
 * for `tokenizer.ggml.model = llama` vocabularies.
 *
 * Spaces become U+2581 ("▁"), and a fragment that begins the text gets one
 * in front (the leading-space rule), so "Hello" and " Hello" differ. The
 * text is split into UTF-8 characters; then, repeatedly, the adjacent pair
 * whose concatenation is in the vocabulary with the highest score is merged
 * (ties to the leftmost). A priority queue holds the candidate pairs; a pair
 * whose sides changed since it was queued is stale and skipped. Symbols left
 * that are not in the vocabulary fall back to their bytes (<0xNN> tokens),
 * or to <unk> when the vocabulary has no byte tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

typedef struct {
    int prev, next;  /* neighbours in the linked list, -1 at the ends */
    const char *text;
    size_t len;      /* 0 once merged into its left neighbour */
} symbol;

typedef struct {
    int left, right;
    float score;
    size_t len;      /* the pair's combined length when queued */
} bigram;

typedef struct {
    bigram *b;
    int n, cap;
} heap;

/* a ranks above b: higher score, then leftmost */
static int above(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(heap *h, bigram x) {
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        bigram *p = realloc(h->b, sizeof *p * (size_t)cap);
        if (!p) return 0;
        h->b = p;
        h->cap = cap;
    }
    int i = h->n++;
    while (i > 0 && above(&x, &h->b[(i - 1) / 2])) {
        h->b[i] = h->b[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->b[i] = x;
    return 1;
}

static bigram heap_pop(heap *h) {
    bigram top = h->b[0], last = h->b[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && above(&h->b[c + 1], &h->b[c])) c++;
        if (!above(&h->b[c], &last)) break;
        h->b[i] = h->b[c];
        i = c;
    }
    if (h->n) h->b[i] = last;
    return top;
}

static int utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 1;
}

/* Queue the pair (left, right) when their concatenation is a token. */
static int try_pair(const tokenizer *t, const symbol *sym, int left, int right, heap *h) {
    if (left < 0 || right < 0) return 1;
    size_t len = sym[left].len + sym[right].len; /* the two are adjacent in the text */
    int32_t id = tokenizer_find(t, sym[left].text, len);
    if (id < 0) return 1;
    return heap_push(h, (bigram){left, right, t->score[id], len});
}

err_code spm_encode(const tokenizer *t, const char *text, size_t len, bool add_space_prefix, tok_list *out,
                    err_t *err) {
    /* escape: optional leading space, spaces as U+2581 */
    size_t n_spaces = add_space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) n_spaces += text[i] == ' ';
    size_t cap = len + 2 * n_spaces + 1;
    char *s = malloc(cap);
    symbol *sym = malloc(sizeof *sym * cap);
    heap h = {0};
    err_code rc = ERR_OK;
    if (!s || !sym) {
        rc = err_set(err, ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
        goto done;
    }
    size_t n = 0;
    if (add_space_prefix) { memcpy(s, "\xe2\x96\x81", 3); n = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(s + n, "\xe2\x96\x81", 3); n += 3; }
        else s[n++] = text[i];
    }

    /* one symbol per UTF-8 character */
    int n_sym = 0;
    for (size_t i = 0; i < n;) {
        size_t l = (size_t)utf8_len((unsigned char)s[i]);
        if (l > n - i) l = n - i;
        sym[n_sym] = (symbol){n_sym - 1, -1, s + i, l};
        if (n_sym) sym[n_sym - 1].next = n_sym;
        n_sym++;
        i += l;
    }
    for (int i = 0; i + 1 < n_sym; i++)
        if (!try_pair(t, sym, i, i + 1, &h)) goto oom;

    /* merge the best pair until none is left */
    while (h.n) {
        bigram b = heap_pop(&h);
        symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.len) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!try_pair(t, sym, l->prev, b.left, &h) || !try_pair(t, sym, b.left, l->next, &h)) goto oom;
    }

    /* emit: a token, or its bytes */
    for (int i = 0; i >= 0 && i < n_sym && !rc; i = sym[i].next) {
        int32_t id = tokenizer_find(t, sym[i].text, sym[i].len);
        if (id >= 0) {
            rc = tok_list_push(out, id, err);
            continue;
        }
        for (size_t k = 0; k < sym[i].len && !rc; k++) {
            int32_t b = t->byte_token[(unsigned char)sym[i].text[k]];
            if (b < 0) b = t->unk;
            if (b >= 0) rc = tok_list_push(out, b, err);
        }
    }
    goto done;
oom:
    rc = err_set(err, ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
done:
    free(s);
    free(sym);
    free(h.b);
    return rc;
}
