/*
 * octo.c — the public API: argument checks, error strings, and the mapping
 * from public types to the runtime's. Nothing here computes; it only checks
 * and delegates.
 */
#include "octo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/quant.h"
#include "core/sysmem.h"
#include "model/model.h"
#include "runtime/session.h"

/* The public status numbers are the internal error codes. */
_Static_assert((int)OCTO_ERR_CANCELLED == (int)ERR_CANCELLED && (int)ERR_COUNT_ == OCTO_ERR_CANCELLED + 1,
               "octo_status and err_code must list the same codes");
_Static_assert((int)OCTO_ERR_TENSOR_BOUNDS == (int)ERR_TENSOR_BOUNDS && (int)OCTO_ERR_BAD_SHAPE == (int)ERR_BAD_SHAPE,
               "octo_status and err_code must agree");

struct octo_client {
    octo_client_options opts;
    err_t err;
};

struct octo_model {
    octo_client *client;
    model *m;
    session *s;
    octo_model_options opts;
    err_t err;
};

const char *octo_status_name(octo_status status) { return err_code_name((err_code)status); }

octo_client_options octo_client_options_defaults(void) { return (octo_client_options){.n_threads = 0}; }

octo_client *octo_client_new(const octo_client_options *opts) {
    octo_client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->opts = opts ? *opts : octo_client_options_defaults();
    return c;
}

void octo_client_free(octo_client *c) { free(c); }

const char *octo_last_error(const octo_client *c) { return c ? c->err.msg : "no client"; }
octo_status octo_last_status(const octo_client *c) { return c ? (octo_status)c->err.code : OCTO_ERR_INVALID_ARG; }

octo_model_options octo_model_options_defaults(void) {
    return (octo_model_options){.n_ctx = 0, .kv_type = OCTO_KV_F32};
}

octo_model *octo_load_model(octo_client *c, const char *path, const octo_model_options *opts) {
    if (!c) return NULL;
    err_clear(&c->err);
    if (!path) {
        err_set(&c->err, ERR_INVALID_ARG, "no model path given");
        return NULL;
    }
    octo_model *om = calloc(1, sizeof *om);
    if (!om) {
        err_set(&c->err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    om->client = c;
    om->opts = opts ? *opts : octo_model_options_defaults();
    if (om->opts.n_ctx < 0 || (om->opts.kv_type != OCTO_KV_F32 && om->opts.kv_type != OCTO_KV_F16)) {
        err_set(&c->err, ERR_INVALID_ARG, "bad model options (n_ctx %d, kv_type %d)", om->opts.n_ctx,
                (int)om->opts.kv_type);
        free(om);
        return NULL;
    }
    err_code rc = model_load(path, &om->m, &c->err);
    if (!rc)
        rc = session_new(om->m, om->opts.n_ctx, om->opts.kv_type == OCTO_KV_F16 ? QT_F16 : QT_F32, &om->s, &c->err);
    if (rc) {
        octo_model_free(om);
        return NULL;
    }
    return om;
}

void octo_model_free(octo_model *om) {
    if (!om) return;
    session_free(om->s);
    model_free(om->m);
    free(om);
}

const char *octo_model_error(const octo_model *om) { return om ? om->err.msg : "no model"; }

octo_model_info octo_model_info_get(const octo_model *om) {
    octo_model_info info;
    memset(&info, 0, sizeof info);
    if (!om) return info;
    const model *m = om->m;
    const model_hparams *hp = &m->hp;
    memcpy(info.arch, hp->arch_name, sizeof info.arch);
    info.n_vocab = hp->n_vocab;
    info.n_ctx_train = hp->n_ctx_train;
    info.n_embd = hp->n_embd;
    info.n_layer = hp->n_layer;
    info.n_head = hp->n_head;
    info.n_head_kv = hp->n_head_kv;
    info.head_dim = hp->head_dim;
    info.n_ff = hp->n_ff;
    info.n_expert = hp->n_expert;
    info.n_expert_used = hp->n_expert_used;
    info.rope_freq_base = hp->rope_freq_base;
    info.rope_freq_scale = hp->rope_freq_scale;
    info.rms_eps = hp->rms_eps;
    info.output_tied = m->output_tied;
    info.n_tensors = m->gguf->n_tensors;
    info.n_params = m->n_params;
    info.file_bytes = m->gguf->size;
    info.weight_bytes = m->weight_bytes;
    info.kv_bytes_per_token = model_kv_bytes(hp, 1, om->opts.kv_type == OCTO_KV_F16 ? QT_F16 : QT_F32);
    info.n_ctx = om->s->n_ctx;
    /* type histogram, in type-id order */
    uint64_t count[QT_COUNT] = {0};
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++)
        if (m->gguf->tensors[i].type < QT_COUNT) count[m->gguf->tensors[i].type]++;
    size_t off = 0;
    for (uint32_t t = 0; t < QT_COUNT; t++) {
        if (!count[t]) continue;
        char name[16];
        const char *n = quant_traits_of(t)->name;
        size_t i = 0;
        for (; n[i] && i + 1 < sizeof name; i++) name[i] = (char)(n[i] >= 'a' && n[i] <= 'z' ? n[i] - 32 : n[i]);
        name[i] = '\0';
        int w = snprintf(info.tensor_types + off, sizeof info.tensor_types - off, "%s%s=%llu", off ? " " : "", name,
                         (unsigned long long)count[t]);
        if (w < 0 || (size_t)w >= sizeof info.tensor_types - off) break;
        off += (size_t)w;
    }
    return info;
}

octo_status octo_eval(octo_model *om, const int32_t *tokens, int n, float *logits, octo_logits_mode mode) {
    if (!om) return OCTO_ERR_INVALID_ARG;
    err_clear(&om->err);
    if (!tokens || !logits || (mode != OCTO_LOGITS_LAST && mode != OCTO_LOGITS_ALL))
        return (octo_status)err_set(&om->err, ERR_INVALID_ARG, "octo_eval: tokens and logits are required");
    return (octo_status)session_eval(om->s, tokens, n, mode == OCTO_LOGITS_ALL, logits, &om->err);
}

int octo_n_past(const octo_model *om) { return om ? om->s->n_past : 0; }

void octo_reset(octo_model *om) {
    if (om) session_reset(om->s);
}

octo_memory octo_memory_usage(void) {
    sysmem_usage u = sysmem_read();
    return (octo_memory){.rss_bytes = u.rss_bytes, .peak_rss_bytes = u.peak_rss_bytes, .pss_bytes = u.pss_bytes};
}
