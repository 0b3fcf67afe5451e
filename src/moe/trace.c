/*
 * trace — see trace.h.
 */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_write.h"

static const char *const status_word[3] = {" HIT", " MISS", " INT2"}; /* by moe_status */

struct moe_trace {
    atomic_file af;     /* written whole at close, like every output (never over an input) */
    FILE *f;            /* af.f while open */
    int n_layer, n_expert, k;
    int layer;          /* the layer buffered, -1: none */
    int32_t *routed;    /* [n][k] its tokens' experts */
    int n, cap;
    int8_t *status;     /* [n_expert] its lookups' statuses, -1: none yet */
    uint64_t *tokens;   /* [n_layer] tokens written per layer: the next token's index */
    bool failed;
};

err_code moe_trace_open(const char *path, int n_layer, int n_expert, int k, int slots, const char *policy,
                        moe_trace **out, err_t *err) {
    *out = NULL;
    moe_trace *t = calloc(1, sizeof *t);
    if (!t) return err_set(err, ERR_NOMEM, "out of memory");
    t->n_layer = n_layer, t->n_expert = n_expert, t->k = k, t->layer = -1;
    t->status = malloc((size_t)n_expert);
    t->tokens = calloc((size_t)n_layer, sizeof(uint64_t));
    if (!t->status || !t->tokens) {
        moe_trace_close(t);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    err_code rc = atomic_file_open(&t->af, path, err);
    if (rc) {
        moe_trace_close(t);
        err_prefix(err, "cannot write the expert trace");
        return rc;
    }
    t->f = t->af.f;
    fprintf(t->f, "# octo expert trace: layers %d experts %d used %d slots %d policy %s\n", n_layer, n_expert, k,
            slots, policy);
    fprintf(t->f, "# TOKEN LAYER then, per routed expert best first, its status (HIT MISS INT2), then the experts\n");
    *out = t;
    return ERR_OK;
}

bool moe_trace_flush(moe_trace *t) {
    if (t->layer < 0) return !t->failed;
    for (int i = 0; i < t->n; i++) {
        const int32_t *e = t->routed + (size_t)i * t->k;
        fprintf(t->f, "%llu %d", (unsigned long long)t->tokens[t->layer]++, t->layer);
        for (int j = 0; j < t->k; j++) fputs(status_word[t->status[e[j]] < 0 ? MOE_MISS : t->status[e[j]]], t->f);
        for (int j = 0; j < t->k; j++) fprintf(t->f, " %d", (int)e[j]);
        fputc('\n', t->f);
    }
    t->layer = -1;
    t->n = 0;
    if (fflush(t->f) || ferror(t->f)) t->failed = true;
    return !t->failed;
}

void moe_trace_route(moe_trace *t, int layer, const int32_t *experts, int k) {
    if (k != t->k) {
        t->failed = true; /* a line of another width would not read back */
        return;
    }
    if (layer != t->layer) {
        moe_trace_flush(t);
        t->layer = layer;
        memset(t->status, -1, (size_t)t->n_expert);
    }
    if (t->n == t->cap) {
        const int cap = t->cap ? 2 * t->cap : 64;
        int32_t *r = realloc(t->routed, sizeof(int32_t) * (size_t)cap * (size_t)t->k);
        if (!r) {
            t->failed = true; /* a line lost: the close reports it */
            return;
        }
        t->routed = r, t->cap = cap;
    }
    memcpy(t->routed + (size_t)t->n++ * t->k, experts, sizeof(int32_t) * (size_t)k);
}

void moe_trace_status(moe_trace *t, int expert, moe_status status) {
    if (expert >= 0 && expert < t->n_expert) t->status[expert] = (int8_t)status;
}

bool moe_trace_close(moe_trace *t) {
    if (!t) return true;
    bool ok = true;
    if (t->f) {
        err_t e = {0};
        ok = moe_trace_flush(t);
        if (ok) ok = atomic_file_commit(&t->af, &e) == ERR_OK;
        else atomic_file_abort(&t->af);
    }
    free(t->routed), free(t->status), free(t->tokens);
    free(t);
    return ok;
}
