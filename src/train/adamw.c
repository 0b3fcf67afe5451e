/*
 * adamw — train/adamw.h.
 */
#include "train/adamw.h"

#include <math.h>
#include <stdlib.h>

adamw_opts adamw_defaults(void) {
    return (adamw_opts){.lr = 1e-4f, .lr_min = 1e-5f, .warmup = 10, .steps = 100, .beta1 = 0.9f, .beta2 = 0.999f,
                        .eps = 1e-8f, .weight_decay = 0.01f, .clip = 1.0f};
}

err_code adamw_init(adamw_state *s, size_t n, const adamw_opts *o, err_t *err) {
    *s = (adamw_state){.n = n};
    if (!(o->lr > 0.0f) || !(o->lr_min >= 0.0f) || o->lr_min > o->lr || !isfinite(o->lr))
        return err_set(err, ERR_INVALID_ARG, "learning rate %g (floor %g): it must be finite, > 0 and >= its floor",
                       (double)o->lr, (double)o->lr_min);
    if (o->steps < 1 || o->warmup < 0 || o->warmup > o->steps)
        return err_set(err, ERR_INVALID_ARG, "%d steps with %d of warm-up", o->steps, o->warmup);
    if (!(o->beta1 >= 0.0f && o->beta1 < 1.0f) || !(o->beta2 >= 0.0f && o->beta2 < 1.0f) || !(o->eps > 0.0f) ||
        !(o->weight_decay >= 0.0f) || !(o->clip >= 0.0f) || !isfinite(o->weight_decay) || !isfinite(o->clip))
        return err_set(err, ERR_INVALID_ARG, "AdamW's betas are in [0, 1), eps > 0, weight decay and clip >= 0");
    s->m = calloc(n ? n : 1, sizeof(float));
    s->v = calloc(n ? n : 1, sizeof(float));
    if (!s->m || !s->v) {
        adamw_free(s);
        return err_set(err, ERR_NOMEM, "out of memory for the optimizer's state of %zu values", n);
    }
    return ERR_OK;
}

void adamw_free(adamw_state *s) {
    free(s->m);
    free(s->v);
    s->m = s->v = NULL;
}

float adamw_lr(const adamw_opts *o, int64_t t) {
    if (t <= o->warmup) return o->warmup ? o->lr * (float)t / (float)o->warmup : o->lr;
    const double span = o->steps - o->warmup, done = (double)(t - o->warmup) / (span > 0 ? span : 1);
    const double f = done >= 1.0 ? 0.0 : 0.5 * (1.0 + cos(3.14159265358979323846 * done));
    return (float)(o->lr_min + (o->lr - o->lr_min) * f);
}

double adamw_step(adamw_state *s, const adamw_opts *o, float *p, const float *grad, const uint8_t *frozen) {
    double norm = 0.0;
    for (size_t i = 0; i < s->n; i++) /* what moves: frozen values' gradients do not scale the others */
        if (!frozen || !frozen[i]) norm += (double)grad[i] * grad[i];
    norm = sqrt(norm);
    const float k = o->clip > 0.0f && norm > o->clip ? (float)(o->clip / norm) : 1.0f;
    const int64_t t = ++s->step;
    const float lr = adamw_lr(o, t);
    const double c1 = 1.0 - pow(o->beta1, (double)t), c2 = 1.0 - pow(o->beta2, (double)t);
    for (size_t i = 0; i < s->n; i++) {
        if (frozen && frozen[i]) continue;
        const float g = grad[i] * k;
        s->m[i] = o->beta1 * s->m[i] + (1.0f - o->beta1) * g;
        s->v[i] = o->beta2 * s->v[i] + (1.0f - o->beta2) * g * g;
        const double mh = s->m[i] / c1, vh = s->v[i] / c2;
        p[i] -= lr * (float)(mh / (sqrt(vh) + o->eps) + o->weight_decay * p[i]);
    }
    return norm;
}
