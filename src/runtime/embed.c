/*
 * embed — see embed.h. The hidden states are seen through the forward
 * pass's observer (model/forward.h) at the last layer's end, normed as the
 * output matrix would read them, and summed as the chunks go by.
 */
#include "runtime/embed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward.h"

typedef struct {
    const model *m;
    double *sum;  /* [n_embd] */
    float *row;   /* [n_embd] one normed row */
    int rows;
} pooling;

static void observe(void *ctx, const fwd_tap *tap) {
    pooling *p = ctx;
    const model_hparams *hp = &p->m->hp;
    if (tap->at != FWD_AT_LAYER_END || tap->layer != hp->n_layer - 1) return;
    for (int t = 0; t < tap->T; t++) {
        fwd_rmsnorm(p->row, tap->x + (size_t)t * hp->n_embd, p->m->output_norm.data, hp->n_embd, hp->rms_eps);
        for (int i = 0; i < hp->n_embd; i++) p->sum[i] += p->row[i];
        p->rows++;
    }
}

err_code session_embed(session *s, const int32_t *tokens, int n, float *out, err_t *err) {
    const model_hparams *hp = &s->m->hp;
    if (n <= 0) return err_set(err, ERR_INVALID_ARG, "nothing to embed: the text has no tokens");
    if (n > s->n_ctx) return err_set(err, ERR_CONTEXT_FULL, "the text has %d tokens; the context holds %d", n, s->n_ctx);
    pooling p = {s->m, calloc((size_t)hp->n_embd, sizeof(double)), malloc(sizeof(float) * (size_t)hp->n_embd), 0};
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    err_code rc = p.sum && p.row && logits ? ERR_OK : err_set(err, ERR_NOMEM, "out of memory");
    session_reset(s);
    if (!rc) {
        fwd_set_observer(s->fwd, observe, &p);
        rc = session_eval(s, tokens, n, false, logits, err);
        fwd_set_observer(s->fwd, NULL, NULL);
    }
    session_reset(s); /* the cache holds the text, which no conversation continues */
    if (!rc && p.rows != n) rc = err_set(err, ERR_UNSUPPORTED, "the last layer's hidden states were not seen");
    double norm = 0.0;
    for (int i = 0; !rc && i < hp->n_embd; i++) norm += (p.sum[i] / n) * (p.sum[i] / n);
    norm = norm > 0.0 ? 1.0 / sqrt(norm) : 0.0;
    for (int i = 0; !rc && i < hp->n_embd; i++) out[i] = (float)(p.sum[i] / n * norm);
    free(p.sum), free(p.row), free(logits);
    return rc;
}
