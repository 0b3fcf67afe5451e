/*
 * fuzz_serve — libFuzzer target: the request reader of `octo serve`
 * (tools/serve_request.c): route, method, API key, the body's scan and
 * limits, the JSON and its fields, without a daemon, on arbitrary bytes.
 *
 * Input: byte 0 picks the method (low 2 bits) and the URL (next 3 bits);
 * byte 1 the size of the pieces the body arrives in; then the Authorization
 * value up to the first NUL, then the body (any bytes). The limits are small
 * (a 4 KiB body, 256 values, 8 levels) so mutants cross them.
 *
 * Oracle beyond "no crash, no leak": the body fed whole and fed in pieces
 * gets the same verdict and the same fields, and a request served holds
 * what its limits allow.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/serve.h"

static const serve_limits limits = {.api_key = "k", .api_key_len = 1, .max_body = 4096, .max_prompt = 512,
                                    .max_json_nodes = 256, .max_json_depth = 8};

static serve_verdict run(const char *method, const char *url, const char *auth, size_t auth_len, const char *body,
                         size_t n, size_t piece, request *r) {
    serve_upload u = {0};
    for (size_t at = 0; at < n; at += piece) serve_upload_add(&limits, &u, body + at, n - at < piece ? n - at : piece);
    const serve_verdict v = serve_parse(&limits, method, url, auth, auth_len, &u, r);
    serve_upload_free(&u);
    return v;
}

/* The strings of a served request: equal in both, within the limits. */
static void same_request(const request *a, const request *b) {
    if (!a->prompt != !b->prompt || a->n_msgs != b->n_msgs || a->n_stop != b->n_stop || a->stream != b->stream ||
        a->gp.max_tokens != b->gp.max_tokens)
        __builtin_trap();
    if (a->prompt && (strcmp(a->prompt, b->prompt) || strlen(a->prompt) > limits.max_prompt)) __builtin_trap();
    for (int i = 0; i < a->n_msgs; i++)
        if (strcmp(a->msgs[i].role, b->msgs[i].role) || strcmp(a->msgs[i].content, b->msgs[i].content))
            __builtin_trap();
    for (int i = 0; i < a->n_stop; i++)
        if (strcmp(a->stop[i], b->stop[i]) || !a->stop[i][0]) __builtin_trap();
    if (a->n_inputs != b->n_inputs || a->tools != b->tools || !a->gp.grammar != !b->gp.grammar ||
        (a->gp.grammar && strcmp(a->gp.grammar, b->gp.grammar)))
        __builtin_trap();
    for (int i = 0; i < a->n_inputs; i++)
        if (strcmp(a->inputs[i], b->inputs[i])) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *methods[] = {"GET", "POST", "PUT", "DELETE"};
    static const char *urls[] = {"/health", "/v1/models", "/v1/completions", "/v1/chat/completions",
                                 "/v1/embeddings", "/v1/chat/completions", "/", "/v1/models/x"};
    if (size < 2) return 0;
    const char *method = methods[data[0] & 3], *url = urls[(data[0] >> 2) & 7];
    const size_t piece = (size_t)data[1] % 64 + 1;
    const char *rest = (const char *)data + 2;
    const size_t n = size - 2, auth_len = strnlen(rest, n);
    const char *body = rest + auth_len + (auth_len < n), *auth = auth_len ? rest : NULL;
    const size_t body_len = n - (size_t)(body - rest);
    request whole, pieces;
    const serve_verdict a = run(method, url, auth, auth_len, body, body_len, body_len ? body_len : 1, &whole);
    const serve_verdict b = run(method, url, auth, auth_len, body, body_len, piece, &pieces);
    if (a.status != b.status || a.route != b.route) __builtin_trap();
    if (a.status != 200 && (!a.message || !a.type)) __builtin_trap();
    if ((a.status == 405) != (a.allow != NULL)) __builtin_trap();
    if (a.status == 200 && (a.route == SERVE_COMPLETIONS || a.route == SERVE_CHAT || a.route == SERVE_EMBEDDINGS))
        same_request(&whole, &pieces);
    request_free(&whole);
    request_free(&pieces);
    return 0;
}
