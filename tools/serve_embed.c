/*
 * serve_embed — POST /v1/embeddings: each input's embedding (octo_embed: the
 * mean of the last hidden state after the final norm, unit length), computed
 * in a slot like a generation. encoding_format "base64" (what the official
 * clients ask for) sends each vector's float32 bytes, little-endian, in
 * base64; "float" a JSON array.
 */
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

static char *base64(const float *v, int n) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)v; /* octo's targets are little-endian */
    const size_t len = sizeof(float) * (size_t)n, out_n = 4 * ((len + 2) / 3);
    char *out = malloc(out_n + 1), *o = out;
    for (size_t i = 0; out && i < len; i += 3) {
        const uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        *o++ = abc[x >> 18 & 63], *o++ = abc[x >> 12 & 63];
        *o++ = i + 1 < len ? abc[x >> 6 & 63] : '=';
        *o++ = i + 2 < len ? abc[x & 63] : '=';
    }
    if (out) *o = '\0';
    return out;
}

static void add_vector(cJSON *item, const float *v, int n, bool b64) {
    if (b64) {
        char *t = base64(v, n);
        cJSON_AddStringToObject(item, "embedding", t ? t : "");
        free(t);
        return;
    }
    cJSON *arr = cJSON_AddArrayToObject(item, "embedding");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(v[i]));
}

/* Each input's vector into data; the first error's message, or NULL. Between two inputs, a client
 * that hung up or a shutdown ends it (16 long inputs held the slot ~20 s for nobody, and SIGINT
 * waited for them). */
static const char *embed_all(server *s, int slot, const request *r, struct MHD_Connection *c, cJSON *data,
                             long *tokens, unsigned *status) {
    const int dim = serve_embed(s, slot, r->inputs[0], NULL, 0);
    if (dim <= 0) return serve_error(s, slot);
    float *v = malloc(sizeof *v * (size_t)dim);
    if (!v) return "out of memory";
    for (int i = 0; i < r->n_inputs; i++) {
        if (i > 0 && (serve_client_gone(c) || serve_stopping(s))) {
            *status = MHD_HTTP_SERVICE_UNAVAILABLE; /* no one reads it, or the server is going */
            return free(v), "the embeddings were stopped: the client hung up or the server is shutting down";
        }
        if (serve_embed(s, slot, r->inputs[i], v, dim) != dim) return free(v), serve_error(s, slot);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "object", "embedding");
        cJSON_AddNumberToObject(item, "index", i);
        add_vector(item, v, dim, r->base64);
        cJSON_AddItemToArray(data, item);
        int32_t ids[1];
        const int n = octo_tokenize(s->m, r->inputs[i], (int)strlen(r->inputs[i]), 1, 0, ids, 0);
        *tokens += n < 0 ? -n : n;
    }
    free(v);
    return NULL;
}

struct MHD_Response *serve_embeddings(server *s, request *r, struct MHD_Connection *c, unsigned *status) {
    const int slot = serve_acquire(s);
    if (slot < 0) {
        request_free(r);
        *status = MHD_HTTP_SERVICE_UNAVAILABLE;
        return serve_error_response("server_error", slot == SERVE_STOPPING ? "shutting_down" : "queue_full",
                                    "no conversation is free to compute in; retry later");
    }
    cJSON *o = cJSON_CreateObject(), *data;
    cJSON_AddStringToObject(o, "object", "list");
    data = cJSON_AddArrayToObject(o, "data");
    long tokens = 0;
    char why[600] = "";
    unsigned err_status = MHD_HTTP_BAD_REQUEST;
    const char *err = embed_all(s, slot, r, c, data, &tokens, &err_status);
    if (err) snprintf(why, sizeof why, "%s", err);
    serve_release(s, slot);
    request_free(r);
    if (why[0]) {
        cJSON_Delete(o);
        *status = err_status;
        return err_status == MHD_HTTP_BAD_REQUEST ? serve_error_response("invalid_request_error", NULL, why)
                                                  : serve_error_response("server_error", "cancelled", why);
    }
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)tokens);
    *status = MHD_HTTP_OK;
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    struct MHD_Response *resp = serve_json_response(text ? text : "{}");
    free(text);
    return resp;
}
