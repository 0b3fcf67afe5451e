/*
 * chat_fit — see chat_fit.h.
 *
 * A chat longer than the context keeps its system prompt (a leading "system"
 * message) and its newest messages; the question is how many of the oldest
 * others must go. Counting each message's tokens once and summing is not
 * exact: the template's text around a message, and the tokenizer's merges
 * across its edges, make the whole chat's count differ from the sum of its
 * parts. So every count here is the whole kept chat's, formatted and
 * tokenized as octo_chat does it, and only the number of counts is kept small.
 *
 * keep(k) is the system prompt and the newest k messages; its count grows
 * with k. The search gallops from the newest message, k = 1, 2, 4, ..., until
 * a chat does not fit (or every message is kept), then halves the gap between
 * the largest k that fit and the smallest that did not. Every chat it counts
 * has at most twice the messages of the largest that fits, and the counts
 * number about 2 log2 of those messages: the work follows what is kept, not
 * the length of the request. (Dropping one message at a time and counting
 * again costs a whole count per message dropped: minutes for a 1 MiB request
 * of short messages.) The answer holds for the real count: keep(k) fits and
 * keep(k + 1) does not, so dropping one message fewer would not fit.
 */
#include "chat_fit.h"

#include <stdlib.h>
#include <string.h>

err_code chat_count_tokens(const tokenizer *tok, chat_family f, const chat_message *msgs, int n, int *n_tokens,
                           err_t *err) {
    char *text = NULL;
    err_code rc = chat_format(f, msgs, n, &text, err);
    tok_list l = {0};
    if (!rc) rc = tokenizer_encode(tok, text, strlen(text), true, true, &l, err);
    *n_tokens = l.n;
    tok_list_free(&l);
    free(text);
    return rc;
}

/* The search's state: the chat, and keep(k) laid out in `kept`. */
typedef struct {
    const tokenizer *tok;
    chat_family f;
    const chat_message *msgs;
    int n, first; /* first: 1 when msgs[0] is the system prompt */
    int room;
    chat_message *kept; /* [n] */
} fit_search;

/* Whether keep(k) fits; its count in *n_tokens. */
static err_code keep_fits(const fit_search *fs, int k, bool *fits, int *n_tokens, err_t *err) {
    if (fs->first) fs->kept[0] = fs->msgs[0];
    memcpy(fs->kept + fs->first, fs->msgs + fs->n - k, sizeof *fs->kept * (size_t)k);
    err_code rc = chat_count_tokens(fs->tok, fs->f, fs->kept, fs->first + k, n_tokens, err);
    *fits = !rc && *n_tokens <= fs->room;
    return rc;
}

/* The largest k in [lo, hi) for which keep(k) fits, given that keep(lo) fits
 * and keep(hi) does not (hi may be one past every message). */
static err_code largest_fit(const fit_search *fs, int lo, int hi, int *k, err_t *err) {
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        bool fits;
        int n_tokens;
        err_code rc = keep_fits(fs, mid, &fits, &n_tokens, err);
        if (rc) return rc;
        if (fits) lo = mid;
        else hi = mid;
    }
    *k = lo;
    return ERR_OK;
}

err_code chat_fit(const tokenizer *tok, chat_family f, const chat_message *msgs, int n, int n_ctx, int reserve,
                  int *drop, err_t *err) {
    *drop = 0;
    if (reserve < 1) reserve = 1; /* a reply needs a position */
    err_code rc = chat_check(msgs, n, err); /* every message, not only those the search counts */
    if (rc) return rc;
    fit_search fs = {.tok = tok, .f = f, .msgs = msgs, .n = n, .room = n_ctx - reserve};
    fs.first = n > 1 && !strcmp(msgs[0].role, "system");
    const int others = n - fs.first; /* the messages that may go, the newest included */
    if (!(fs.kept = malloc(sizeof *fs.kept * (size_t)n))) return err_set(err, ERR_NOMEM, "out of memory");
    bool fits;
    int n_tokens, k = 1;
    rc = keep_fits(&fs, 1, &fits, &n_tokens, err);
    if (!rc && !fits)
        rc = err_set(err, ERR_CONTEXT_FULL, "%s %d tokens; the context holds %d, %d of them kept for the reply",
                     fs.first ? "the system prompt and the last message take" : "the last message alone takes",
                     n_tokens, n_ctx, reserve);
    while (!rc && fits && k < others) { /* gallop: k fits; try twice as many */
        const int next = k < others - k ? 2 * k : others;
        rc = keep_fits(&fs, next, &fits, &n_tokens, err);
        if (!rc && fits) k = next;
        else if (!rc) rc = largest_fit(&fs, k, next, &k, err);
    }
    free(fs.kept);
    if (!rc) *drop = others - k;
    return rc;
}
