/*
 * tree — see tree.h.
 */
#include "tree.h"

#include <string.h>

#define CALIB_PRIOR 4.0f   /* the draft's own probability counts as this many trials */
#define CALIB_MAX 256.0f   /* a cell's trials are halved past this: recent passes weigh more */

static int calib_bin(float prob) {
    const int b = (int)(prob * SPEC_CALIB_BINS);
    return b < 0 ? 0 : b >= SPEC_CALIB_BINS ? SPEC_CALIB_BINS - 1 : b;
}

float spec_calib_estimate(const spec_calib *c, int rank, float prob) {
    const int r = rank > 0;
    if (prob < 0.0f) /* the prior: a first draft as likely as not, a later one less */
        return (c->rank_hit[r] + CALIB_PRIOR * (r ? 0.1f : 0.5f)) / (c->rank_tried[r] + CALIB_PRIOR);
    const int b = calib_bin(prob);
    return (c->hit[r][b] + CALIB_PRIOR * prob) / (c->tried[r][b] + CALIB_PRIOR);
}

static void count(float *tried, float *hit, bool h) {
    *tried += 1.0f;
    *hit += h ? 1.0f : 0.0f;
    if (*tried > CALIB_MAX) *tried *= 0.5f, *hit *= 0.5f;
}

static void calib_count(spec_calib *c, int rank, float prob, bool hit) {
    const int r = rank > 0, b = calib_bin(prob);
    count(&c->tried[r][b], &c->hit[r][b], hit);
    count(&c->rank_tried[r], &c->rank_hit[r], hit);
}

void spec_calib_update(spec_calib *c, const spec_tree *t, const int *path, int a, bool greedy) {
    for (int j = 0; j <= a; j++) {
        const int u = path[j], took = j < a ? path[j + 1] : -1;
        const int took_rank = took >= 0 ? t->rank[took] : SPEC_TREE_MAX;
        for (int v = 1; v < t->n; v++)
            if (t->parent[v] == u && (greedy || t->rank[v] <= took_rank)) calib_count(c, t->rank[v], t->prob[v], v == took);
    }
}

/* The node with the same parent and the rank before v's, or -1. */
static int earlier_sibling(const spec_candidates *c, int v) {
    for (int u = 1; u < c->n; u++)
        if (c->parent[u] == c->parent[v] && c->rank[u] == c->rank[v] - 1) return u;
    return -1;
}

static void copy_node(spec_tree *out, int i, const spec_tree *in, int v, int parent) {
    out->token[i] = in->token[v];
    out->parent[i] = (int8_t)parent;
    out->rank[i] = in->rank[v];
    out->depth[i] = in->depth[v];
    out->prob[i] = in->prob[v];
    out->value[i] = in->value[v];
    out->q[i] = in->q[v];
}

int spec_tree_select(const spec_candidates *c, int budget, spec_tree *out) {
    int map[SPEC_TREE_MAX]; /* candidate -> its index in out, -1 while not chosen */
    for (int v = 0; v < c->n; v++) map[v] = -1;
    copy_node(out, 0, c, 0, -1);
    map[0] = 0;
    out->n = 1;
    while (out->n - 1 < budget && out->n < SPEC_TREE_MAX) {
        int best = -1;
        for (int v = 1; v < c->n; v++) {
            if (map[v] >= 0 || map[c->parent[v]] < 0) continue;
            if (c->rank[v] > 0) {
                const int e = earlier_sibling(c, v);
                if (e < 0 || map[e] < 0) continue;
            }
            if (best < 0 || c->value[v] > c->value[best]) best = v;
        }
        if (best < 0) break;
        map[best] = out->n;
        copy_node(out, out->n++, c, best, map[c->parent[best]]);
    }
    return out->n - 1;
}

void spec_tree_truncate(spec_tree *t, int n) {
    if (n < t->n) t->n = n < 1 ? 1 : n;
}

void spec_tree_layout(const spec_tree *t, spec_tree *out, uint64_t *anc) {
    int order[SPEC_TREE_MAX], where[SPEC_TREE_MAX], n = 0;
    bool placed[SPEC_TREE_MAX] = {false};
    for (int u = 0; u >= 0;) { /* the rank-0 line from the root */
        order[n++] = u, placed[u] = true;
        int next = -1;
        for (int v = u + 1; v < t->n && next < 0; v++)
            if (t->parent[v] == u && t->rank[v] == 0) next = v;
        u = next;
    }
    for (int v = 1; v < t->n; v++)
        if (!placed[v]) order[n++] = v;
    for (int i = 0; i < n; i++) where[order[i]] = i;
    out->n = n;
    for (int i = 0; i < n; i++) {
        const int v = order[i], p = t->parent[v];
        copy_node(out, i, t, v, p >= 0 ? where[p] : -1);
        anc[i] = (p >= 0 ? anc[where[p]] : 0) | (uint64_t)1 << i;
    }
}

int spec_tree_line(const spec_tree *t) {
    int n = 1;
    while (n < t->n && t->parent[n] == n - 1 && t->rank[n] == 0) n++;
    return n - 1;
}

/* Node v, at batch slot `slot`, with its kept ancestors at slots where[]:
 * each falls in the tile plain decoding would put it in, for every phase. */
static bool same_tiles(const spec_tree *t, int v, int slot, const int *where, uint32_t phases, int tile) {
    for (int u = v, s = slot; u >= 0; s = t->parent[u] >= 0 ? where[t->parent[u]] : 0, u = t->parent[u])
        for (int p = 0; p < tile; p++)
            if (((phases >> p) & 1u) && (p + s) / tile != (p + t->depth[u]) / tile) return false;
    return true;
}

int spec_tree_keep_exact(spec_tree *t, uint64_t *anc, uint32_t phases, int tile) {
    if (tile <= 0) return t->n; /* nothing known of the grouping */
    int where[SPEC_TREE_MAX], n = 0;
    for (int v = 0; v < t->n; v++) {
        const int p = t->parent[v];
        where[v] = v == 0 || (where[p] >= 0 && same_tiles(t, v, n, where, phases, tile)) ? n++ : -1;
        if (where[v] < 0) continue;
        copy_node(t, where[v], t, v, p >= 0 ? where[p] : -1);
        anc[where[v]] = (p >= 0 ? anc[where[p]] : 0) | (uint64_t)1 << where[v];
    }
    t->n = n;
    return n;
}
