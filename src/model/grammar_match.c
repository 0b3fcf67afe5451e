/*
 * grammar_match — the pushdown automaton of a compiled grammar, and the
 * token mask it gives (grammar.h explains the approach).
 *
 * A frame is (pos, up): the element to match next, and the frame to go on
 * with when this sequence ends (NULL: the grammar's end). Frames are
 * hash-consed, so equal stacks are one pointer; a frame never points at the
 * end of a sequence (it would be its `up`), so the same stack has one form.
 * Each frame memoizes:
 *   exp   the frames it expands to whose element is a character set (rule
 *         references opened, ends of sequences closed), plus ACCEPT when the
 *         whole grammar can end here;
 *   succ  for a character-set frame, the expansion of what follows it.
 * A state is a set of character-set frames (and maybe ACCEPT). Taking a
 * character c: the union of succ(f) over the frames f whose set holds c,
 * deduplicated by an epoch mark on the frames. Work is thus done once per
 * frame, ever; after the first few tokens a step is a few set lookups.
 *
 * Frames live in an arena that grows with the grammar's reachable stacks
 * (its nesting, not the text's length, for the grammars of JSON).
 *
 * Bounds (grammar.h): a client's grammar may be ambiguous in ways that make
 * states of N stacks with N successors each (`c? c? c? ... "!"`), or
 * that grow with the text (`.{0,9}.{0,9}`). The matcher counts its work
 * (frames visited and successors scanned) for each token's mask or step
 * against GRAMMAR_MAX_WORK, and its memory against GRAMMAR_MAX_BYTES; past
 * either it stops with an error naming the rule, and only end-of-generation
 * is allowed. Expansion keeps its own stack on the heap (a chain of 2000
 * optional items is 2000 levels: too deep for a 128 KiB thread stack).
 *
 * UTF-8: the text and the tokens are bytes; the grammar is code points. A
 * state carries the bytes of a character not complete yet (a token may end
 * inside one): while it is incomplete the frames stay, pruned to those whose
 * set meets a character that starts with those bytes.
 */
#include "model/grammar_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct frame frame;
struct frame {
    int32_t pos;
    frame *up, *hnext;
    frame **exp, **succ;
    int32_t n_exp, n_succ;
    uint64_t mark;     /* the step that last took it into a state (64 bits: never wraps) */
    uint8_t has_exp, has_succ, busy; /* busy: being expanded (on the expansion stack) */
};

/* A partial UTF-8 character: its bits so far and the bytes still to come. */
typedef struct {
    uint32_t acc;
    uint8_t need, len;
} utf8_part;

typedef struct {
    frame **v;
    int32_t n, cap;
    utf8_part part;
} gstate;

/* -------------------------------------------------------- the vocabulary trie */

typedef struct {
    uint8_t byte;
    int32_t depth; /* 0: the root */
    int32_t end;   /* the node after this one's subtree (preorder) */
    int32_t tok_first, tok_n; /* tokens whose bytes end here: toks[first .. first + n) */
} tnode;

struct grammar_vocab {
    int32_t n_vocab;
    tnode *nodes;
    int32_t n_nodes, max_depth;
    int32_t *toks;        /* ids with bytes, sorted by their bytes */
    int32_t n_toks;
    char *bytes;          /* every piece, concatenated */
    int64_t *off;         /* (n_vocab + 1) a piece's bytes: bytes[off[t] .. off[t + 1]) */
    int32_t *eog;
    int32_t n_eog;
};

/* A state's mask, kept: the same state recurs (every character inside a
 * JSON string leaves the same stacks), and its mask is the costly one (most
 * of the vocabulary is walked). Keyed by the state's sorted frames. */
#define MASK_CACHE 32
typedef struct {
    uint64_t hash;
    frame **key;
    int32_t n_key;
    utf8_part part;
    uint64_t *bits;  /* ((n_vocab + 63) / 64) allowed tokens */
    uint32_t used;   /* m->tick when last used; 0: empty */
} mask_entry;

struct grammar_match {
    const grammar *g;
    const grammar_vocab *v;
    frame **table;       /* hash of frames */
    uint32_t table_mask;
    int32_t n_frames;
    char **blocks;       /* the arena */
    int32_t n_blocks, cap_blocks;
    size_t block_used, block_size;
    frame accept;        /* ACCEPT: the grammar may end here */
    uint64_t epoch;
    int64_t work;        /* frames visited for the current token (GRAMMAR_MAX_WORK) */
    size_t bytes;        /* the arena's size (GRAMMAR_MAX_BYTES) */
    struct xjob *xs;     /* expand's stack */
    frame **dd_key;      /* dedup's hash set: a slot is taken when its stamp is dd_now */
    uint32_t *dd_stamp, dd_cap, dd_now;
    int32_t n_xs, cap_xs;
    gstate hist[GRAMMAR_REWIND_MAX + 1]; /* the state, then the ones it came from */
    int32_t hist_head, hist_len;
    gstate *level;       /* (max_depth + 1) the mask's walk: the state at each trie depth */
    gstate tmp[2];
    uint8_t *allowed;    /* (n_vocab) the mask's tokens */
    mask_entry cache[MASK_CACHE]; /* the masks of recent states */
    uint32_t tick;
    frame **key;         /* a state's frames, sorted: the cache's key */
    int32_t key_cap;
    err_code rc;
    char why[256];
};

static bool mfail(grammar_match *m, err_code rc, const char *why) {
    if (m->rc == ERR_OK) {
        m->rc = rc;
        snprintf(m->why, sizeof m->why, "%s", why);
    }
    return false;
}

/* n more units of work for the current token, done at element pos; false
 * (and the matcher stopped, naming pos's rule) past GRAMMAR_MAX_WORK. */
static bool spend(grammar_match *m, int64_t n, int32_t pos) {
    if ((m->work += n) <= GRAMMAR_MAX_WORK) return true;
    char why[200];
    snprintf(why, sizeof why, "the grammar is too ambiguous near rule '%.60s': one token visited more than %d parse "
             "states", grammar_rule_name(m->g, grammar_rule_of(m->g, pos)), GRAMMAR_MAX_WORK);
    return mfail(m, ERR_UNSUPPORTED, why);
}

/* ---------------------------------------------------------------- arena */

/* NULL on failure, m->rc set. */
static void *arena_alloc(grammar_match *m, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (m->n_blocks == 0 || m->block_used + size > m->block_size) {
        const size_t bs = size > (size_t)1 << 16 ? size : (size_t)1 << 16;
        if (m->bytes + bs > GRAMMAR_MAX_BYTES) {
            char why[120];
            snprintf(why, sizeof why, "the grammar's parse states need more than %d MiB (too ambiguous?)",
                     GRAMMAR_MAX_BYTES >> 20);
            return mfail(m, ERR_UNSUPPORTED, why), NULL;
        }
        if (m->n_blocks == m->cap_blocks) {
            const int32_t cap = m->cap_blocks ? 2 * m->cap_blocks : 16;
            char **b = realloc(m->blocks, sizeof *b * (size_t)cap);
            if (!b) return mfail(m, ERR_NOMEM, "out of memory"), NULL;
            m->blocks = b;
            m->cap_blocks = cap;
        }
        if (!(m->blocks[m->n_blocks] = malloc(bs))) return mfail(m, ERR_NOMEM, "out of memory"), NULL;
        m->bytes += bs;
        m->n_blocks++;
        m->block_used = 0;
        m->block_size = bs;
    }
    void *p = m->blocks[m->n_blocks - 1] + m->block_used;
    m->block_used += size;
    return p;
}

/* ---------------------------------------------------------------- frames */

/* Every bit of both mixed into the low ones the table uses (the arena's
 * pointers share their low bits: a plain product left them alike). */
static uint32_t frame_hash(int32_t pos, const frame *up) {
    uint64_t h = (uint64_t)(uint32_t)pos * 0x9E3779B97F4A7C15ull + (uint64_t)(uintptr_t)up;
    h = (h ^ h >> 33) * 0xFF51AFD7ED558CCDull;
    h = (h ^ h >> 33) * 0xC4CEB9FE1A85EC53ull;
    return (uint32_t)(h ^ h >> 33);
}

static bool grow_table(grammar_match *m) {
    const uint32_t size = (m->table_mask + 1) * 2;
    frame **t = calloc(size, sizeof *t);
    if (!t) return false;
    for (uint32_t i = 0; i <= m->table_mask; i++)
        for (frame *f = m->table[i], *next; f; f = next) {
            next = f->hnext;
            const uint32_t h = frame_hash(f->pos, f->up) & (size - 1);
            f->hnext = t[h];
            t[h] = f;
        }
    free(m->table);
    m->table = t;
    m->table_mask = size - 1;
    return true;
}

/* The one frame (pos, up); NULL on failure (m->rc says why). */
static frame *intern(grammar_match *m, int32_t pos, frame *up) {
    const uint32_t h = frame_hash(pos, up);
    for (frame *f = m->table[h & m->table_mask]; f; f = f->hnext)
        if (f->pos == pos && f->up == up) return f;
    if (m->n_frames >= GRAMMAR_MAX_FRAMES) {
        char why[160];
        snprintf(why, sizeof why, "the grammar's parse states outgrew their bound of %d frames (an ambiguous grammar?)",
                 GRAMMAR_MAX_FRAMES);
        return mfail(m, ERR_UNSUPPORTED, why), NULL;
    }
    frame *f = arena_alloc(m, sizeof *f);
    if (!f) return NULL;
    memset(f, 0, sizeof *f);
    f->pos = pos;
    f->up = up;
    const uint32_t b = h & m->table_mask;
    f->hnext = m->table[b];
    m->table[b] = f;
    if (++m->n_frames > (int32_t)m->table_mask && !grow_table(m)) return mfail(m, ERR_NOMEM, "out of memory"), NULL;
    return f;
}

/* The frame that goes on at pos with up below: up itself (or ACCEPT) when
 * pos ends a sequence. */
static frame *frame_at(grammar_match *m, int32_t pos, frame *up) {
    if (grammar_ends_seq(m->g, pos)) return up ? up : &m->accept;
    return intern(m, pos, up);
}

static int cmp_ptr(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t) * (frame *const *)a, y = (uintptr_t) * (frame *const *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    frame **v;
    int32_t n, cap;
} fvec;

static bool fvec_add(grammar_match *m, fvec *o, frame *const *v, int32_t n) {
    if (n == 0) return true;
    if (o->n + n > o->cap) {
        const int32_t cap = (o->n + n) * 2;
        frame **p = realloc(o->v, sizeof *p * (size_t)cap);
        if (!p) return mfail(m, ERR_NOMEM, "out of memory");
        o->v = p;
        o->cap = cap;
    }
    memcpy(o->v + o->n, v, sizeof *v * (size_t)n);
    o->n += n;
    return true;
}

static bool too_many_stacks(grammar_match *m) {
    char why[120];
    snprintf(why, sizeof why, "the grammar is too ambiguous: more than %d parse stacks at once", GRAMMAR_MAX_SET);
    return mfail(m, ERR_UNSUPPORTED, why);
}

/* o deduplicated in place (first occurrences, in order): a hash set whose
 * slots are stamped per call, so it is never cleared. */
static bool dedup(grammar_match *m, fvec *o) {
    uint32_t need = 16;
    while (need < 2 * (uint32_t)o->n) need *= 2;
    if (need > m->dd_cap) {
        frame **k = malloc(sizeof *k * need);
        uint32_t *st = calloc(need, sizeof *st);
        if (!k || !st) return free(k), free(st), mfail(m, ERR_NOMEM, "out of memory");
        free(m->dd_key), free(m->dd_stamp);
        m->dd_key = k, m->dd_stamp = st, m->dd_cap = need, m->dd_now = 0;
    }
    if (++m->dd_now == 0) memset(m->dd_stamp, 0, sizeof *m->dd_stamp * m->dd_cap), m->dd_now = 1;
    const uint32_t mask = need - 1;
    int32_t n = 0;
    for (int32_t i = 0; i < o->n; i++) {
        frame *x = o->v[i];
        uint32_t h = frame_hash(0, x) & mask;
        while (m->dd_stamp[h] == m->dd_now && m->dd_key[h] != x) h = (h + 1) & mask;
        if (m->dd_stamp[h] == m->dd_now) continue;
        m->dd_stamp[h] = m->dd_now, m->dd_key[h] = x;
        o->v[n++] = x;
    }
    o->n = n;
    return true;
}

/* o, deduplicated, copied into the arena. */
static bool fvec_keep(grammar_match *m, fvec *o, frame ***out, int32_t *n_out) {
    if (o->n > 0 && !spend(m, o->n, o->v[0] == &m->accept ? 0 : o->v[0]->pos)) return false;
    if (o->n > 1 && !dedup(m, o)) return false;
    const int32_t n = o->n;
    if (n > GRAMMAR_MAX_SET) return too_many_stacks(m);
    *out = arena_alloc(m, sizeof **out * (size_t)(n > 0 ? n : 1));
    if (!*out) return false;
    if (n > 0) memcpy(*out, o->v, sizeof **out * (size_t)n);
    *n_out = n;
    return true;
}

/* A reference frame being expanded: its rule's alternatives in turn, each
 * with cont (what follows the reference) below it, their expansions
 * gathered in o. */
typedef struct xjob {
    frame *f, *cont;
    int32_t pos; /* the alternative being taken */
    fvec o;
} xjob;

/* f's expansion begun: a character-set frame (or ACCEPT) is its own; a
 * reference goes on the stack. */
static bool xpush(grammar_match *m, frame *f) {
    if (f == &m->accept || m->g->el[f->pos].kind == GE_SET) {
        fvec o = {0};
        const bool ok = fvec_add(m, &o, &f, 1) && fvec_keep(m, &o, &f->exp, &f->n_exp);
        free(o.v);
        return ok && (f->has_exp = 1);
    }
    if (f->busy) return mfail(m, ERR_UNSUPPORTED, "the grammar is left-recursive"); /* refused when compiled */
    frame *cont = f->up;
    if (!grammar_ends_seq(m->g, f->pos + 1) && !(cont = intern(m, f->pos + 1, f->up))) return false;
    if (m->n_xs == m->cap_xs) {
        const int32_t cap = m->cap_xs ? 2 * m->cap_xs : 64;
        xjob *v = realloc(m->xs, sizeof *v * (size_t)cap);
        if (!v) return mfail(m, ERR_NOMEM, "out of memory");
        m->xs = v;
        m->cap_xs = cap;
    }
    m->xs[m->n_xs++] = (xjob){f, cont, m->g->rule_start[m->g->el[f->pos].arg], {0}};
    f->busy = 1;
    return true;
}

/* The top job's next step: its current alternative's expansion gathered (or
 * that alternative's first frame pushed, to be expanded first). */
static bool xstep(grammar_match *m) {
    const grammar *g = m->g;
    xjob *j = &m->xs[m->n_xs - 1];
    frame *a = frame_at(m, j->pos, j->cont);
    if (!a) return false;
    if (!a->has_exp) return xpush(m, a); /* j may move: taken up again once a is done */
    if (!spend(m, a->n_exp, j->f->pos) || !fvec_add(m, &j->o, a->exp, a->n_exp)) return false;
    while (!grammar_ends_seq(g, j->pos)) j->pos++;
    if (g->el[j->pos++].kind == GE_ALT) return true;
    const bool ok = fvec_keep(m, &j->o, &j->f->exp, &j->f->n_exp);
    free(j->o.v);
    j->f->busy = 0;
    j->f->has_exp = ok;
    m->n_xs--;
    return ok;
}

/* f->exp: the character-set frames (and ACCEPT) f stands for. It ends: the
 * grammar has no left recursion. */
static bool expand(grammar_match *m, frame *f) {
    if (f->has_exp) return true;
    bool ok = xpush(m, f);
    while (ok && m->n_xs > 0) ok = xstep(m);
    for (; m->n_xs > 0; m->n_xs--) { /* a failure: the stack given up */
        free(m->xs[m->n_xs - 1].o.v);
        m->xs[m->n_xs - 1].f->busy = 0;
    }
    return ok;
}

/* The expansion of rule r's alternatives, each with cont below it, into o. */
static bool expand_rule(grammar_match *m, int32_t r, frame *cont, fvec *o) {
    const grammar *g = m->g;
    for (int32_t pos = g->rule_start[r];; pos++) {
        frame *a = frame_at(m, pos, cont);
        if (!a || !expand(m, a) || !fvec_add(m, o, a->exp, a->n_exp)) return false;
        while (!grammar_ends_seq(g, pos)) pos++;
        if (g->el[pos].kind == GE_END) return true;
    }
}

/* f->succ: where a character-set frame goes once its character is taken. */
static bool successors(grammar_match *m, frame *f) {
    if (f->has_succ) return true;
    frame *next = frame_at(m, f->pos + 1, f->up);
    if (!next || !expand(m, next)) return false;
    f->succ = next->exp;
    f->n_succ = next->n_exp;
    f->has_succ = 1;
    return true;
}

/* ---------------------------------------------------------------- states */

static bool state_reserve(grammar_match *m, gstate *s, int32_t n) {
    if (n <= s->cap) return true;
    const int32_t cap = n < 16 ? 16 : 2 * n;
    frame **v = realloc(s->v, sizeof *v * (size_t)cap);
    if (!v) return mfail(m, ERR_NOMEM, "out of memory");
    s->v = v;
    s->cap = cap;
    return true;
}

static bool state_copy(grammar_match *m, gstate *dst, const gstate *src) {
    if (!state_reserve(m, dst, src->n)) return false;
    if (src->n > 0) memcpy(dst->v, src->v, sizeof *src->v * (size_t)src->n);
    dst->n = src->n;
    dst->part = src->part;
    return true;
}

static bool frame_takes(const grammar_match *m, const frame *f, uint32_t lo, uint32_t hi) {
    return f != &m->accept && grammar_set_meets(m->g, m->g->el[f->pos].arg, lo, hi);
}

/* dst = src after the whole character c. */
static bool step_char(grammar_match *m, const gstate *src, uint32_t c, gstate *dst) {
    dst->n = 0;
    dst->part = (utf8_part){0};
    m->epoch++;
    if (src->n > 0 && !spend(m, src->n, src->v[0]->pos)) return false;
    for (int32_t i = 0; i < src->n; i++) {
        frame *f = src->v[i];
        if (!frame_takes(m, f, c, c)) continue;
        if (!successors(m, f) || !spend(m, f->n_succ, f->pos) || !state_reserve(m, dst, dst->n + f->n_succ))
            return false;
        for (int32_t j = 0; j < f->n_succ; j++) {
            frame *x = f->succ[j];
            if (x->mark == m->epoch) continue;
            x->mark = m->epoch;
            dst->v[dst->n++] = x;
        }
    }
    return dst->n <= GRAMMAR_MAX_SET || too_many_stacks(m);
}

/* The characters a partial sequence can still become: [lo, hi]; false when
 * none (an overlong or out-of-range start). */
static bool part_range(const utf8_part *p, uint32_t *lo, uint32_t *hi) {
    const int shift = 6 * p->need;
    const uint32_t least = p->len == 3 ? 0x800 : p->len == 4 ? 0x10000 : 0x80;
    *lo = p->acc << shift;
    *hi = *lo | ((1u << shift) - 1);
    if (*lo < least) *lo = least;
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
    if (*lo >= 0xD800 && *hi <= 0xDFFF) return false; /* only surrogates: no character */
    if (*lo < 0xD800 && *hi >= 0xD800 && *hi <= 0xDFFF) *hi = 0xD7FF;
    if (*lo >= 0xD800 && *lo <= 0xDFFF) *lo = 0xE000;
    return *lo <= *hi;
}

/* dst = src after byte b; false only on an error (an empty dst: not allowed). */
static bool step_byte(grammar_match *m, const gstate *src, uint8_t b, gstate *dst) {
    utf8_part p = src->part;
    if (p.need == 0) {
        if (b < 0x80) return step_char(m, src, b, dst);
        p.len = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
        p.need = p.len ? p.len - 1 : 0;
        p.acc = b & (0x7F >> p.len);
    } else if ((b & 0xC0) == 0x80) {
        p.acc = p.acc << 6 | (b & 0x3F);
        p.need--;
    } else {
        p.len = 0;
    }
    dst->n = 0;
    if (p.len == 0) return true; /* not UTF-8 */
    if (p.need == 0) {
        const uint32_t c = p.acc;
        const bool bad = (p.len == 3 && c < 0x800) || (p.len == 4 && (c < 0x10000 || c > 0x10FFFF)) ||
                         (c >= 0xD800 && c <= 0xDFFF);
        return bad ? true : step_char(m, src, c, dst);
    }
    uint32_t lo, hi;
    if (!part_range(&p, &lo, &hi)) return true;
    if (!state_reserve(m, dst, src->n) || (src->n > 0 && !spend(m, src->n, src->v[0]->pos))) return false;
    for (int32_t i = 0; i < src->n; i++)
        if (frame_takes(m, src->v[i], lo, hi)) dst->v[dst->n++] = src->v[i];
    dst->part = p;
    return true;
}

static gstate *current(grammar_match *m) { return &m->hist[m->hist_head]; }

static bool has_accept(const grammar_match *m, const gstate *s) {
    if (s->part.need) return false;
    for (int32_t i = 0; i < s->n; i++)
        if (s->v[i] == &m->accept) return true;
    return false;
}

bool grammar_match_complete(const grammar_match *m) { return has_accept(m, &m->hist[m->hist_head]); }

/* The state after bytes[0..n) from s, in one of m->tmp; NULL when they leave the grammar. */
static gstate *walk_bytes(grammar_match *m, const gstate *s, const char *bytes, int64_t n) {
    const gstate *from = s;
    gstate *to = NULL;
    for (int64_t i = 0; i < n; i++) {
        to = &m->tmp[from == &m->tmp[0] ? 1 : 0];
        if (!step_byte(m, from, (uint8_t)bytes[i], to) || to->n == 0) return NULL;
        from = to;
    }
    return to;
}

/* -------------------------------------------------------- lifetime */

err_code grammar_match_new(const grammar *g, const grammar_vocab *v, grammar_match **out, err_t *err) {
    if (!out) return err_set(err, ERR_INVALID_ARG, "grammar: no output pointer");
    *out = NULL;
    if (!g) return err_set(err, ERR_INVALID_ARG, "grammar: no grammar");
    grammar_match *m = calloc(1, sizeof *m);
    if (!m) return err_set(err, ERR_NOMEM, "grammar: out of memory");
    m->g = g;
    m->v = v;
    m->table_mask = 1023;
    m->table = calloc(m->table_mask + 1, sizeof *m->table);
    if (v) m->level = calloc((size_t)v->max_depth + 1, sizeof *m->level);
    if (v) m->allowed = malloc((size_t)v->n_vocab);
    m->hist_len = 1;
    bool ok = m->table && (!v || (m->level && m->allowed));
    if (ok) { /* the start: root's alternatives, with the grammar's end below them */
        fvec o = {0};
        frame **start = NULL;
        int32_t n = 0;
        ok = expand_rule(m, g->root, NULL, &o) && fvec_keep(m, &o, &start, &n) && state_reserve(m, &m->hist[0], n);
        if (ok && n > 0) memcpy(m->hist[0].v, start, sizeof *start * (size_t)n);
        if (ok) m->hist[0].n = n;
        free(o.v);
    }
    if (!ok) {
        const err_code rc = m->rc != ERR_OK ? m->rc : ERR_NOMEM;
        err_set(err, rc, "grammar: %s", m->rc != ERR_OK ? m->why : "out of memory");
        grammar_match_free(m);
        return rc;
    }
    *out = m;
    return ERR_OK;
}

void grammar_match_free(grammar_match *m) {
    if (!m) return;
    for (int32_t i = 0; i < m->n_blocks; i++) free(m->blocks[i]);
    free(m->blocks);
    free(m->table);
    for (int i = 0; i <= GRAMMAR_REWIND_MAX; i++) free(m->hist[i].v);
    if (m->level)
        for (int32_t i = 0; i <= m->v->max_depth; i++) free(m->level[i].v);
    free(m->level);
    free(m->allowed);
    for (int i = 0; i < MASK_CACHE; i++) free(m->cache[i].key), free(m->cache[i].bits);
    free(m->key);
    free(m->tmp[0].v);
    free(m->tmp[1].v);
    free(m->xs);
    free(m->dd_key);
    free(m->dd_stamp);
    free(m);
}

size_t grammar_match_memory(const grammar_match *m) {
    size_t n = m->bytes + sizeof *m + sizeof *m->table * ((size_t)m->table_mask + 1) +
               sizeof *m->xs * (size_t)m->cap_xs + (sizeof *m->dd_key + sizeof *m->dd_stamp) * m->dd_cap + sizeof *m->key * (size_t)m->key_cap;
    for (int i = 0; i <= GRAMMAR_REWIND_MAX; i++) n += sizeof *m->hist[i].v * (size_t)m->hist[i].cap;
    for (int i = 0; i < 2; i++) n += sizeof *m->tmp[i].v * (size_t)m->tmp[i].cap;
    for (int32_t i = 0; m->level && i <= m->v->max_depth; i++) n += sizeof *m->level[i].v * (size_t)m->level[i].cap;
    for (int i = 0; i < MASK_CACHE; i++)
        if (m->cache[i].bits) n += sizeof *m->cache[i].key * (size_t)m->cache[i].n_key + ((size_t)m->v->n_vocab + 63) / 8;
    if (m->allowed) n += (size_t)m->v->n_vocab;
    return n;
}

err_code grammar_match_error(const grammar_match *m, err_t *err) {
    if (m->rc == ERR_OK) return ERR_OK;
    return err_set(err, m->rc, "grammar: %s", m->why);
}

/* -------------------------------------------------------- taking text */

/* The state after s becomes the current one (the old kept for a rewind). */
static void commit(grammar_match *m, const gstate *s) {
    const int32_t next = (m->hist_head + 1) % (GRAMMAR_REWIND_MAX + 1);
    gstate *d = &m->hist[next];
    if (s) {
        if (!state_copy(m, d, s)) d->n = 0;
    } else {
        d->n = 0;
        d->part = (utf8_part){0};
    }
    m->hist_head = next;
    if (m->hist_len < GRAMMAR_REWIND_MAX + 1) m->hist_len++;
}

bool grammar_match_text(grammar_match *m, const char *text, size_t len) {
    const gstate *s = current(m);
    for (size_t i = 0; i < len && s; i++) { /* the work bound is per byte here: text has no tokens */
        m->work = 0;
        s = walk_bytes(m, s, text + i, 1);
    }
    if (len) commit(m, s);
    return s && s->n > 0;
}

static bool piece_of(const grammar_vocab *v, int32_t t, const char **bytes, int64_t *n) {
    if (!v || t < 0 || t >= v->n_vocab) return false;
    *bytes = v->bytes + v->off[t];
    *n = v->off[t + 1] - v->off[t];
    return *n > 0;
}

static bool is_eog(const grammar_vocab *v, int32_t t) {
    for (int32_t i = 0; v && i < v->n_eog; i++)
        if (v->eog[i] == t) return true;
    return false;
}

/* Only end-of-generation remains: the grammar is complete and nothing can
 * follow, or the matcher is broken (an error, a token the grammar refused). */
static bool only_eog(const grammar_match *m, const gstate *s) {
    return m->rc != ERR_OK || s->n == 0 || (s->n == 1 && s->v[0] == &m->accept);
}

bool grammar_match_allows(grammar_match *m, int32_t t) {
    const gstate *s = current(m);
    if (is_eog(m->v, t)) return has_accept(m, s) || only_eog(m, s);
    const char *bytes;
    int64_t n;
    if (m->rc != ERR_OK || !piece_of(m->v, t, &bytes, &n)) return false;
    m->work = 0;
    return walk_bytes(m, s, bytes, n) != NULL;
}

void grammar_match_accept(grammar_match *m, int32_t t) {
    const char *bytes;
    int64_t n;
    if (m->rc != ERR_OK || !piece_of(m->v, t, &bytes, &n)) {
        commit(m, NULL);
        return;
    }
    m->work = 0;
    commit(m, walk_bytes(m, current(m), bytes, n));
}

void grammar_match_rewind(grammar_match *m, int n) {
    if (n >= m->hist_len) n = m->hist_len - 1;
    if (n <= 0) return;
    m->hist_head = (m->hist_head - n % (GRAMMAR_REWIND_MAX + 1) + GRAMMAR_REWIND_MAX + 1) % (GRAMMAR_REWIND_MAX + 1);
    m->hist_len -= n;
}

/* -------------------------------------------------------- the mask */

/* A trie walk from the current state: allowed[t] for every token whose
 * bytes the grammar can take, each subtree pruned where its prefix cannot. */
static void walk_trie(grammar_match *m, uint8_t *allowed) {
    const grammar_vocab *v = m->v;
    gstate *level = m->level;
    if (!state_copy(m, &level[0], current(m))) return;
    for (int32_t i = 1; i < v->n_nodes;) {
        const tnode *nd = &v->nodes[i];
        gstate *s = &level[nd->depth];
        if (!step_byte(m, &level[nd->depth - 1], nd->byte, s)) return;
        if (s->n == 0) {
            i = nd->end;
            continue;
        }
        for (int32_t k = 0; k < nd->tok_n; k++) allowed[v->toks[nd->tok_first + k]] = 1;
        i++;
    }
}

/* m->allowed for state s: the trie walked, the end-of-generation tokens set. */
static void compute_allowed(grammar_match *m, const gstate *s) {
    const grammar_vocab *v = m->v;
    uint8_t *allowed = m->allowed;
    memset(allowed, 0, (size_t)v->n_vocab);
    m->work = 0;
    if (!only_eog(m, s)) walk_trie(m, allowed);
    if (m->rc != ERR_OK) memset(allowed, 0, (size_t)v->n_vocab); /* broken mid-walk: end the generation */
    bool eog_ok = m->rc != ERR_OK || has_accept(m, s) || only_eog(m, s);
    if (!eog_ok) { /* no token can go on (a dead end the walk found): end rather than draw from nothing */
        eog_ok = true;
        for (int32_t t = 0; t < v->n_vocab && eog_ok; t++) eog_ok = !allowed[t];
    }
    for (int32_t i = 0; i < v->n_eog; i++) allowed[v->eog[i]] = eog_ok;
}

/* s's frames sorted into m->key, and their hash; false when out of memory. */
static bool state_key(grammar_match *m, const gstate *s, uint64_t *hash) {
    if (s->n > m->key_cap) {
        frame **k = realloc(m->key, sizeof *k * (size_t)s->n);
        if (!k) return false;
        m->key = k;
        m->key_cap = s->n;
    }
    if (s->n > 0) memcpy(m->key, s->v, sizeof *s->v * (size_t)s->n);
    if (s->n > 1) qsort(m->key, (size_t)s->n, sizeof *m->key, cmp_ptr);
    uint64_t h = 0xCBF29CE484222325ull ^ ((uint64_t)s->part.acc << 8 | s->part.need);
    for (int32_t i = 0; i < s->n; i++) h = (h ^ (uint64_t)(uintptr_t)m->key[i]) * 0x100000001B3ull;
    *hash = h;
    return true;
}

static mask_entry *cache_find(grammar_match *m, const gstate *s, uint64_t h) {
    for (int i = 0; i < MASK_CACHE; i++) {
        mask_entry *e = &m->cache[i];
        if (e->used && e->hash == h && e->n_key == s->n && e->part.acc == s->part.acc && e->part.need == s->part.need &&
            (s->n == 0 || !memcmp(e->key, m->key, sizeof *e->key * (size_t)s->n)))
            return e;
    }
    return NULL;
}

/* m->allowed kept for state s in the least recently used entry; NULL when out of memory. */
static mask_entry *cache_store(grammar_match *m, const gstate *s, uint64_t h) {
    mask_entry *e = &m->cache[0];
    for (int i = 1; i < MASK_CACHE; i++)
        if (m->cache[i].used < e->used) e = &m->cache[i];
    const size_t words = ((size_t)m->v->n_vocab + 63) / 64;
    if (!e->bits && !(e->bits = malloc(sizeof *e->bits * words))) return NULL;
    frame **k = realloc(e->key, sizeof *k * (size_t)(s->n > 0 ? s->n : 1));
    if (!k) return NULL;
    e->key = k;
    if (s->n > 0) memcpy(e->key, m->key, sizeof *k * (size_t)s->n);
    e->n_key = s->n, e->part = s->part, e->hash = h;
    memset(e->bits, 0, sizeof *e->bits * words);
    for (int32_t t = 0; t < m->v->n_vocab; t++)
        if (m->allowed[t]) e->bits[t >> 6] |= 1ull << (t & 63);
    return e;
}

void grammar_match_mask(grammar_match *m, float *logits) {
    const grammar_vocab *v = m->v;
    if (!v) return;
    const gstate *s = current(m);
    uint64_t h = 0;
    const bool keyed = m->rc == ERR_OK && state_key(m, s, &h);
    mask_entry *e = keyed ? cache_find(m, s, h) : NULL;
    if (!e) {
        compute_allowed(m, s);
        e = keyed && m->rc == ERR_OK ? cache_store(m, s, h) : NULL;
    }
    if (!e) { /* an error, or no memory to keep it: from the bytes */
        for (int32_t t = 0; t < v->n_vocab; t++)
            if (!m->allowed[t]) logits[t] = -INFINITY;
        return;
    }
    e->used = ++m->tick ? m->tick : (m->tick = 1);
    for (int32_t w = 0; w * 64 < v->n_vocab; w++) {
        const uint64_t b = e->bits[w];
        if (b == ~0ull) continue;
        const int32_t end = (w + 1) * 64 < v->n_vocab ? (w + 1) * 64 : v->n_vocab;
        for (int32_t t = w * 64; t < end; t++)
            if (!(b >> (t & 63) & 1)) logits[t] = -INFINITY;
    }
}

/* -------------------------------------------------------- the vocabulary */

typedef struct {
    grammar_vocab *v;
    int32_t cap;
} vbuild;

typedef struct {
    const char *bytes;
    int64_t n;
    int32_t id;
} piece_key;

static int cmp_piece(const void *a, const void *b) {
    const piece_key *x = a, *y = b;
    const int c = memcmp(x->bytes, y->bytes, (size_t)(x->n < y->n ? x->n : y->n));
    if (c) return c;
    return x->n < y->n ? -1 : x->n > y->n ? 1 : (x->id > y->id) - (x->id < y->id);
}

/* v->toks sorted by their bytes (then id). */
static bool sort_pieces(grammar_vocab *v) {
    piece_key *k = malloc(sizeof *k * (size_t)(v->n_toks > 0 ? v->n_toks : 1));
    if (!k) return false;
    for (int32_t i = 0; i < v->n_toks; i++) {
        const int32_t t = v->toks[i];
        k[i] = (piece_key){v->bytes + v->off[t], v->off[t + 1] - v->off[t], t};
    }
    qsort(k, (size_t)v->n_toks, sizeof *k, cmp_piece);
    for (int32_t i = 0; i < v->n_toks; i++) v->toks[i] = k[i].id;
    free(k);
    return true;
}

/* Node for the tokens toks[lo..hi), which share their first depth bytes. */
static bool build_node(vbuild *b, int32_t depth, int32_t lo, int32_t hi, uint8_t byte) {
    grammar_vocab *v = b->v;
    if (v->n_nodes == b->cap) {
        const int32_t cap = b->cap ? 2 * b->cap : 1024;
        tnode *n = realloc(v->nodes, sizeof *n * (size_t)cap);
        if (!n) return false;
        v->nodes = n;
        b->cap = cap;
    }
    const int32_t me = v->n_nodes++;
    if (depth > v->max_depth) v->max_depth = depth;
    int32_t i = lo;
    while (i < hi && v->off[v->toks[i] + 1] - v->off[v->toks[i]] == depth) i++;
    v->nodes[me] = (tnode){byte, depth, 0, lo, i - lo};
    while (i < hi) {
        const uint8_t c = (uint8_t)v->bytes[v->off[v->toks[i]] + depth];
        int32_t j = i;
        while (j < hi && (uint8_t)v->bytes[v->off[v->toks[j]] + depth] == c) j++;
        if (!build_node(b, depth + 1, i, j, c)) return false;
        i = j;
    }
    v->nodes[me].end = v->n_nodes;
    return true;
}

static bool read_pieces(grammar_vocab *v, const tokenizer *tok) {
    int64_t total = 0;
    for (int32_t t = 0; t < v->n_vocab; t++) {
        const int n = tokenizer_piece(tok, t, false, NULL, 0);
        total += n > 0 ? n : 0;
    }
    v->bytes = malloc((size_t)(total > 0 ? total : 1));
    if (!v->bytes) return false;
    int64_t at = 0;
    for (int32_t t = 0; t < v->n_vocab; t++) {
        v->off[t] = at;
        const int n = tokenizer_piece(tok, t, false, v->bytes + at, (int)(total - at));
        if (n > 0) {
            at += n;
            v->toks[v->n_toks++] = t;
        }
        if (tokenizer_is_eog(tok, t)) v->eog[v->n_eog++] = t;
    }
    v->off[v->n_vocab] = at;
    return true;
}

err_code grammar_vocab_new(const tokenizer *tok, grammar_vocab **out, err_t *err) {
    if (!out) return err_set(err, ERR_INVALID_ARG, "grammar: no output pointer");
    *out = NULL;
    if (!tok) return err_set(err, ERR_INVALID_ARG, "grammar: no tokenizer");
    grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return err_set(err, ERR_NOMEM, "grammar: out of memory");
    v->n_vocab = tokenizer_n_vocab(tok);
    const size_t n = (size_t)v->n_vocab;
    v->off = malloc(sizeof *v->off * (n + 1));
    v->toks = malloc(sizeof *v->toks * n);
    v->eog = malloc(sizeof *v->eog * n);
    vbuild b = {v, 0};
    bool ok = v->off && v->toks && v->eog && read_pieces(v, tok);
    ok = ok && sort_pieces(v) && build_node(&b, 0, 0, v->n_toks, 0);
    if (!ok) {
        grammar_vocab_free(v);
        return err_set(err, ERR_NOMEM, "grammar: out of memory for the vocabulary's trie");
    }
    *out = v;
    return ERR_OK;
}

void grammar_vocab_free(grammar_vocab *v) {
    if (!v) return;
    free(v->nodes);
    free(v->toks);
    free(v->bytes);
    free(v->off);
    free(v->eog);
    free(v);
}
