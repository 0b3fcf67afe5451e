/*
 * tree — a draft token tree: what a draft model proposes when one line of
 * drafts is not the best use of a verify pass.
 *
 * Node 0 is the root: the target's last token, not a draft. Every other node
 * is a candidate for the token after its parent. A node's children are
 * ranked in the order they were drawn: rank 0 is the draft's own pick (the
 * line it keeps drafting from), ranks 1.. the next candidates, the top ones
 * by draft probability when greedy, drawn without replacement from the
 * draft's distribution when sampled (verify.h: spec_verify_tree needs to
 * know which, through q). Parents always come before their children, and a
 * node's earlier-ranked siblings before it.
 *
 * How a tree is chosen (spec_tree_select): each candidate's value is the
 * probability that verification reaches it, estimated as the product along
 * its path of the measured acceptance of nodes of that rank and draft
 * probability (spec_calib: what verification has accepted so far this
 * generation, starting from the draft's own probability). Candidates join
 * best value first, a node only after its parent and its earlier-ranked
 * siblings, until the budget; the expected tokens of a pass are then 1 plus
 * the sum of the values, which adaptive.h weighs against the pass's
 * measured cost to pick the budget.
 *
 * Layout for the target's pass (spec_tree_layout): the line of rank-0
 * children from the root comes first, so that when it is accepted the pass
 * keeps a leading run of its entries as a chain does (forward_tree's trunk);
 * an accepted path off that line is moved into place (session_accept_path).
 * A node off the line is verified only where its keys are summed as plain
 * decoding sums them (spec_tree_keep_exact), so greedy output stays plain
 * decoding's byte for byte.
 */
#ifndef OCTO_SPEC_TREE_H
#define OCTO_SPEC_TREE_H

#include <stdbool.h>
#include <stdint.h>

#define SPEC_TREE_MAX 32   /* nodes of a tree, the root included */
#define SPEC_TREE_RANKS 3  /* candidates a node's children are chosen from: the pick and 2 more */

typedef struct {
    int n;                          /* nodes, the root included */
    int32_t token[SPEC_TREE_MAX];
    int8_t parent[SPEC_TREE_MAX];   /* -1 for the root */
    int8_t rank[SPEC_TREE_MAX];     /* among its siblings, in drawing order */
    int8_t depth[SPEC_TREE_MAX];    /* the root is 0 */
    float prob[SPEC_TREE_MAX];      /* the draft's probability of the node after its parent */
    float value[SPEC_TREE_MAX];     /* the estimated probability that verification reaches it */
    /* Sampled: the distribution node i and its siblings were drawn from,
     * without replacement in rank order (the parent's draft distribution);
     * NULL: chosen deterministically (greedy, or the top candidates). */
    const float *q[SPEC_TREE_MAX];
} spec_tree;

/* Acceptance measured so far, by rank (0, or later) and draft probability,
 * and by rank alone. */
#define SPEC_CALIB_BINS 10
typedef struct {
    float tried[2][SPEC_CALIB_BINS], hit[2][SPEC_CALIB_BINS];
    float rank_tried[2], rank_hit[2];
} spec_calib;

/* The estimated probability that a node of this rank and draft probability
 * is accepted once its parent is; prob < 0: by rank alone. Sampled trees
 * are valued by rank alone: whether a drawn node joins the tree must not
 * depend on which token it is, or the nodes verified would no longer be
 * draws from q, and the rule would not be exact (test_spec's end-to-end
 * test saw the difference when nodes were valued by their probability). */
float spec_calib_estimate(const spec_calib *c, int rank, float prob);

/* Verification walked path[0..a] (node indices, path[0] = 0): every child
 * of a node on the path that verification tried is counted, greedy having
 * tried them all, sampled them in rank order up to the one it accepted. */
void spec_calib_update(spec_calib *c, const spec_tree *t, const int *path, int a, bool greedy);

/* Candidates a draft has drawn, before the budget chooses among them: the
 * same fields as a tree's nodes, with value set by the caller. */
typedef spec_tree spec_candidates;

/* Choose up to budget nodes (root excluded) from the candidates (node 0 the
 * root), best value first as above, into out, in the order they joined:
 * out's nodes 1..k are the k best choices for every k, so a caller may keep
 * a prefix. Returns the nodes chosen. */
int spec_tree_select(const spec_candidates *c, int budget, spec_tree *out);

/* Keep the first n nodes of a tree (a prefix of spec_tree_select's order). */
void spec_tree_truncate(spec_tree *t, int n);

/* The tree as the target's pass takes it: the same nodes in batch order,
 * the rank-0 line from the root first, and anc the batch's ancestry
 * (model/forward.h: forward_tree). */
void spec_tree_layout(const spec_tree *t, spec_tree *out, uint64_t *anc);
/* The length of a laid-out tree's line: its nodes 1..that are the rank-0
 * line from the root. */
int spec_tree_line(const spec_tree *t);

/* Keep only the nodes whose rows the target computes as plain decoding
 * would, bit for bit. The attention kernels sum a block's keys in tiles of
 * `tile`, a node at batch slot s and depth d sees its ancestors at their
 * slots where plain decoding would have them at 0..d, and the sums agree
 * only when each of them (the node included) falls in the same tile both
 * ways, for every phase in `phases` (bit p: some layer's first tentative
 * entry is its tile's p-th; runtime: session_tile_phases). A node that does
 * not goes, with its subtree; the rest move up, in order. The rank-0 line
 * always stays. anc is recomputed. Returns the nodes left (all of them when
 * tile is 0: nothing known of the grouping). */
int spec_tree_keep_exact(spec_tree *t, uint64_t *anc, uint32_t phases, int tile);

#endif
