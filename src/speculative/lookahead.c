/*
 * lookahead — see lookahead.h.
 *
 * The pool maps a first token to a group of G slots of N - 1 tokens (the
 * n-gram's rest), filled in turn; groups are made on first use, so memory
 * follows the tokens seen, not the vocabulary.
 */
#include "lookahead.h"

#include <stdlib.h>
#include <string.h>

struct spec_lookahead {
    lookahead_params p;
    int n_vocab;
    int32_t level[LOOKAHEAD_MAX_N - 1][LOOKAHEAD_MAX_W]; /* the window */
    int n_levels;                                        /* filled so far (1 .. N - 1) */
    int32_t *group;   /* [n_vocab] the group of a first token, -1 none */
    int32_t *slots;   /* [n_groups][G][N - 1] */
    uint8_t *used;    /* [n_groups] slots filled (<= G) */
    uint8_t *next;    /* [n_groups] the slot the next n-gram goes to */
    int n_groups, cap_groups;
    int made, kept;
};

lookahead_params lookahead_params_default(void) { return (lookahead_params){.w = 5, .n = 3, .g = 4}; }

err_code lookahead_new(const lookahead_params *p, int n_vocab, const int32_t *ctx, int n_ctx, spec_lookahead **out,
                       err_t *err) {
    *out = NULL;
    if (p->w < 1 || p->w > LOOKAHEAD_MAX_W || p->n < 2 || p->n > LOOKAHEAD_MAX_N || p->g < 1 || p->g > LOOKAHEAD_MAX_G)
        return err_set(err, ERR_INVALID_ARG, "lookahead W %d, N %d, G %d: W must be 1..%d, N 2..%d, G 1..%d", p->w, p->n,
                       p->g, LOOKAHEAD_MAX_W, LOOKAHEAD_MAX_N, LOOKAHEAD_MAX_G);
    if (1 + (p->n - 1) * (p->w + 1) > LOOKAHEAD_MAX_BATCH)
        return err_set(err, ERR_INVALID_ARG, "lookahead W %d, N %d: a pass of %d tokens (%d at most)", p->w, p->n,
                       1 + (p->n - 1) * (p->w + 1), LOOKAHEAD_MAX_BATCH);
    if (n_ctx <= 0 || n_vocab <= 0) return err_set(err, ERR_INVALID_ARG, "lookahead needs a prompt");
    spec_lookahead *la = calloc(1, sizeof *la);
    if (!la || !(la->group = malloc(sizeof(int32_t) * (size_t)n_vocab))) {
        free(la);
        return err_set(err, ERR_NOMEM, "out of memory for the lookahead pool");
    }
    la->p = *p;
    la->n_vocab = n_vocab;
    memset(la->group, 0xFF, sizeof(int32_t) * (size_t)n_vocab);
    /* the first level: prompt tokens picked by a fixed stride (any guess will
     * do; the prompt's tokens are likelier than random ones) */
    for (int i = 0; i < p->w; i++) la->level[0][i] = ctx[(size_t)(i * 7 + 3) % (size_t)n_ctx];
    la->n_levels = 1;
    *out = la;
    return ERR_OK;
}

void lookahead_free(spec_lookahead *la) {
    if (!la) return;
    free(la->group);
    free(la->slots);
    free(la->used);
    free(la->next);
    free(la);
}

static int32_t *slot(const spec_lookahead *la, int grp, int s) {
    return la->slots + ((size_t)grp * la->p.g + s) * (size_t)(la->p.n - 1);
}

int lookahead_candidate(const spec_lookahead *la, int32_t root, int max_k, int32_t *out) {
    if (root < 0 || root >= la->n_vocab || la->group[root] < 0) return 0;
    const int grp = la->group[root];
    const int latest = (la->next[grp] + la->p.g - 1) % la->p.g;
    const int k = max_k < la->p.n - 1 ? max_k : la->p.n - 1;
    memcpy(out, slot(la, grp, latest), sizeof(int32_t) * (size_t)(k > 0 ? k : 0));
    return k > 0 ? k : 0;
}

int lookahead_window_tokens(const spec_lookahead *la) { return la->n_levels * la->p.w; }

int lookahead_layout(const spec_lookahead *la, int32_t root, const int32_t *cand, int m, int32_t *tokens,
                     uint64_t *anc, int32_t *rows, int *n_rows) {
    const int W = la->p.w;
    tokens[0] = root;
    anc[0] = 1;
    for (int j = 1; j <= m; j++) {
        tokens[j] = cand[j - 1];
        anc[j] = anc[j - 1] | 1ull << j;
        rows[j] = j;
    }
    rows[0] = 0;
    const int base = 1 + m;
    for (int l = 0; l < la->n_levels; l++)
        for (int i = 0; i < W; i++) {
            const int t = base + l * W + i;
            tokens[t] = la->level[l][i];
            /* level 0: the root and the Jacobi sequence up to this column;
             * above: the column's token one level down */
            const uint64_t below = l == 0 ? (i == 0 ? anc[0] : anc[t - 1]) : anc[t - W];
            anc[t] = below | 1ull << t;
        }
    for (int i = 0; i < W; i++) rows[base + i] = base + (la->n_levels - 1) * W + i;
    *n_rows = base + W;
    return base + la->n_levels * W;
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int j = 1; j < n; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

/* The group of first token t, made if need be; -1 when out of memory (the
 * n-gram is then dropped: the pool is a cache of guesses). */
static int group_of(spec_lookahead *la, int32_t t) {
    if (la->group[t] >= 0) return la->group[t];
    if (la->n_groups == la->cap_groups) {
        const int cap = la->cap_groups ? 2 * la->cap_groups : 256;
        int32_t *s = realloc(la->slots, sizeof(int32_t) * (size_t)cap * la->p.g * (size_t)(la->p.n - 1));
        if (!s) return -1;
        la->slots = s;
        uint8_t *u = realloc(la->used, (size_t)cap);
        if (!u) return -1;
        la->used = u;
        uint8_t *nx = realloc(la->next, (size_t)cap);
        if (!nx) return -1;
        la->next = nx;
        la->cap_groups = cap;
    }
    const int grp = la->n_groups++;
    la->used[grp] = la->next[grp] = 0;
    return la->group[t] = grp;
}

static void pool_add(spec_lookahead *la, int32_t first, const int32_t *rest) {
    const int r = la->p.n - 1;
    la->made++;
    const int grp = group_of(la, first);
    if (grp < 0) return;
    for (int s = 0; s < la->used[grp]; s++)
        if (!memcmp(slot(la, grp, s), rest, sizeof(int32_t) * (size_t)r)) {
            /* known: make it the latest by swapping it into the newest slot */
            const int latest = (la->next[grp] + la->p.g - 1) % la->p.g;
            int32_t tmp[LOOKAHEAD_MAX_N];
            memcpy(tmp, slot(la, grp, latest), sizeof(int32_t) * (size_t)r);
            memcpy(slot(la, grp, latest), rest, sizeof(int32_t) * (size_t)r);
            memcpy(slot(la, grp, s), tmp, sizeof(int32_t) * (size_t)r);
            return;
        }
    memcpy(slot(la, grp, la->next[grp]), rest, sizeof(int32_t) * (size_t)r);
    la->next[grp] = (uint8_t)((la->next[grp] + 1) % la->p.g);
    if (la->used[grp] < la->p.g) la->used[grp]++;
    la->kept++;
}

void lookahead_update(spec_lookahead *la, const float *win_logits, int n_vocab) {
    const int W = la->p.w, levels = la->p.n - 1;
    int32_t fresh[LOOKAHEAD_MAX_W];
    for (int i = 0; i < W; i++) fresh[i] = argmax(win_logits + (size_t)i * n_vocab, n_vocab);
    if (la->n_levels < levels) { /* warming up */
        memcpy(la->level[la->n_levels++], fresh, sizeof(int32_t) * (size_t)W);
        return;
    }
    for (int i = 0; i < W; i++) {
        int32_t rest[LOOKAHEAD_MAX_N];
        for (int l = 1; l < levels; l++) rest[l - 1] = la->level[l][i];
        rest[levels - 1] = fresh[i];
        pool_add(la, la->level[0][i], rest);
    }
    memmove(la->level[0], la->level[1], sizeof la->level[0] * (size_t)(levels - 1));
    memcpy(la->level[levels - 1], fresh, sizeof(int32_t) * (size_t)W);
}

void lookahead_counts(const spec_lookahead *la, int *made, int *kept) {
    *made = la->made;
    *kept = la->kept;
}
