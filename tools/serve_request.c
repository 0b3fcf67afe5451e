/*
 * serve_request — reading one request of `octo serve` (serve.h) without
 * generating anything: the route and its method, the API key, the body's
 * size and shape, then the OpenAI fields out of its JSON. No daemon is
 * needed, so fuzz/fuzz_serve.c calls it on arbitrary bytes.
 *
 * The body is judged before cJSON sees it. serve_scan counts, as the bytes
 * arrive, what parsing would allocate: a value is either the whole text or
 * comes after a '[', '{' or ',' outside strings, so 1 + their count bounds
 * cJSON's nodes, and the nesting of '[' and '{' bounds its recursion. A body
 * past --max-json-nodes or --max-json-depth is dropped while it is still
 * arriving; one of 1 MiB of "[0,0,..." never becomes 40 MiB of tree. The
 * scan also finds \u0000, which cJSON would decode into a C string that ends
 * there, silently cutting a prompt: such a body is refused.
 *
 * Parsing is strict where cJSON is lenient: nothing but whitespace may
 * follow the JSON object, integers must be whole (the fields themselves:
 * serve_fields.c), and the API key must match
 * the whole header value (its length from the daemon, so a NUL inside it
 * cannot end the comparison early), compared in constant time.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* ---- the scan ---- */

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* One byte inside a string. */
static void scan_string_byte(serve_json_scan *j, char c) {
    if (j->u_digits) { /* the XXXX of \uXXXX */
        j->u_zero = j->u_zero && c == '0';
        if (!is_hex(c)) j->u_digits = 0; /* not an escape cJSON takes: it will refuse the text */
        else if (j->u_digits++ == 4) {
            j->nul = j->nul || j->u_zero;
            j->u_digits = 0;
        }
    } else if (j->escape) {
        j->escape = false;
        if (c == 'u') j->u_digits = 1, j->u_zero = true;
    } else if (c == '\\') j->escape = true;
    else if (c == '"') j->in_string = false;
}

void serve_scan(serve_json_scan *j, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char c = p[i];
        if (c == '\0') j->nul = true;
        if (j->in_string) scan_string_byte(j, c);
        else if (c == '"') j->in_string = true;
        else if (c == '[' || c == '{') {
            j->nodes++;
            if (++j->depth > j->max_depth) j->max_depth = j->depth;
        } else if (c == ']' || c == '}') j->depth -= j->depth > 0;
        else if (c == ',') j->nodes++;
    }
}

/* More values or nesting than the limits allow (nodes counts the root's 1 apart). */
static bool scan_over(const serve_json_scan *j, const serve_limits *l) {
    return j->nodes + 1 > l->max_json_nodes || j->max_depth > l->max_json_depth;
}

/* ---- the body as it arrives ---- */

void serve_upload_free(serve_upload *u) {
    free(u->body);
    u->body = NULL;
    u->cap = 0;
}

/* Keep data, growing the buffer by doubling up to max_body + 1; false when out of memory. */
static bool upload_keep(const serve_limits *l, serve_upload *u, const char *data, size_t n) {
    if (u->len + n + 1 > u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 16384;
        if (cap < u->len + n + 1) cap = u->len + n + 1;
        if (cap > l->max_body + 1) cap = l->max_body + 1;
        char *b = realloc(u->body, cap);
        if (!b) return false;
        u->body = b, u->cap = cap;
    }
    memcpy(u->body + u->len, data, n);
    u->body[u->len + n] = '\0';
    return true;
}

/* Append a chunk of the body. Past max_body, or once the scan is past the
 * JSON limits, the body is dropped and the rest read without being kept. */
void serve_upload_add(const serve_limits *l, serve_upload *u, const char *data, size_t n) {
    if (u->too_large || n > l->max_body - u->len) {
        u->too_large = true;
        serve_upload_free(u);
        return;
    }
    const bool was_over = scan_over(&u->scan, l);
    if (!was_over) serve_scan(&u->scan, data, n);
    if (was_over || scan_over(&u->scan, l)) serve_upload_free(u);
    else if (!upload_keep(l, u, data, n)) u->too_large = true, serve_upload_free(u);
    u->len += n;
}

/* ---- the verdict ---- */

static serve_verdict refuse(unsigned status, const char *type, const char *code, const char *msg) {
    return (serve_verdict){.status = status, .type = type, .code = code, .message = msg};
}

/* "Bearer KEY", the whole value, compared in time independent of where it differs. */
static bool key_matches(const serve_limits *l, const char *auth, size_t n) {
    if (!l->api_key) return true;
    if (!auth || n != 7 + l->api_key_len || memcmp(auth, "Bearer ", 7)) return false;
    volatile unsigned char diff = 0;
    for (size_t i = 0; i < l->api_key_len; i++) diff |= (unsigned char)(auth[7 + i] ^ l->api_key[i]);
    return diff == 0;
}

static const struct {
    const char *url, *method;
    serve_route route;
} routes[] = {{"/health", "GET", SERVE_HEALTH},
              {"/v1/models", "GET", SERVE_MODELS},
              {"/v1/completions", "POST", SERVE_COMPLETIONS},
              {"/v1/chat/completions", "POST", SERVE_CHAT},
              {"/metrics", "GET", SERVE_METRICS},
              {"/v1/embeddings", "POST", SERVE_EMBEDDINGS},
              {"/lora-adapters", "GET", SERVE_LORA_LIST},
              {"/lora-adapters", "POST", SERVE_LORA_SET},
              {"/", "GET", SERVE_PAGE}};

static const char *parse_body(const serve_limits *l, serve_upload *u, serve_route route, request *r);

serve_verdict serve_authorize(const serve_limits *l, const char *url, const char *auth, size_t auth_len) {
    int k = -1;
    for (int i = 0; i < (int)(sizeof routes / sizeof *routes) && k < 0; i++)
        if (!strcmp(url, routes[i].url)) k = i;
    /* /health and the page need no key (the page asks for one when the API does); an unknown url does */
    if ((k < 0 || (routes[k].route != SERVE_HEALTH && routes[k].route != SERVE_PAGE)) && !key_matches(l, auth, auth_len))
        return refuse(401, "invalid_request_error", "invalid_api_key", "a valid API key is required");
    return (serve_verdict){.status = 200};
}

serve_verdict serve_parse(const serve_limits *l, const char *method, const char *url, const char *auth, size_t auth_len,
                          serve_upload *u, request *r) {
    memset(r, 0, sizeof *r);
    int k = -1;
    for (int i = 0; i < (int)(sizeof routes / sizeof *routes); i++) /* the row of this method, else any of the url */
        if (!strcmp(url, routes[i].url) && (k < 0 || !strcmp(method, routes[i].method))) k = i;
    const serve_verdict key = serve_authorize(l, url, auth, auth_len);
    if (key.status != 200) return key;
    if (k < 0) return refuse(404, "invalid_request_error", "not_found", "no such endpoint");
    if (strcmp(method, routes[k].method)) {
        serve_verdict v = refuse(405, "invalid_request_error", "method_not_allowed",
                                 !strcmp(routes[k].method, "GET") ? "this endpoint takes GET" : "this endpoint takes POST");
        v.allow = !strcmp(url, "/lora-adapters") ? "GET, POST" : routes[k].method;
        return v;
    }
    const serve_route route = routes[k].route;
    if (route != SERVE_COMPLETIONS && route != SERVE_CHAT && route != SERVE_EMBEDDINGS && route != SERVE_LORA_SET)
        return (serve_verdict){.status = 200, .route = route};
    if (u->too_large)
        return refuse(413, "invalid_request_error", "request_too_large",
                      "the request body is larger than this server takes (--max-body)");
    if (scan_over(&u->scan, l))
        return refuse(400, "invalid_request_error", NULL,
                      "the body's JSON has more values or deeper nesting than this server takes "
                      "(--max-json-nodes, --max-json-depth)");
    if (u->scan.nul) return refuse(400, "invalid_request_error", NULL, "the body holds a NUL character (\\u0000)");
    const char *why = parse_body(l, u, route, r);
    if (why) return refuse(400, "invalid_request_error", NULL, why);
    return (serve_verdict){.status = 200, .route = route};
}

/* ---- the fields ---- */

void request_free(request *r) {
    free(r->msgs);
    free(r->text);
    for (int i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->owned);
    r->msgs = NULL, r->text = NULL, r->owned = NULL, r->n_owned = r->cap_owned = 0;
}

/* The body's JSON into r; the body and the tree are freed before returning. */
static const char *parse_body(const serve_limits *l, serve_upload *u, serve_route route, request *r) {
    r->gp = octo_generate_params_defaults();
    r->gp.max_tokens = route == SERVE_CHAT ? 256 : 16; /* OpenAI's defaults */
    const char *end = NULL;
    cJSON *json = u->body ? cJSON_ParseWithLengthOpts(u->body, u->len, &end, false) : NULL;
    const bool list = route == SERVE_LORA_SET; /* llama-server's [{"id", "scale"}, ...] */
    const char *why = !json || (list ? !cJSON_IsArray(json) : !cJSON_IsObject(json))
                          ? (list ? "the body is not a JSON array of {\"id\", \"scale\"} objects" : "the body is not a JSON object")
                          : NULL;
    while (!why && end < u->body + u->len && strchr(" \t\r\n", *end) && *end) end++;
    if (!why && end != u->body + u->len) why = "the body goes on after its JSON object";
    serve_upload_free(u);
    if (!why && list) why = serve_lora_list(l, json, r->lora, r->why, sizeof r->why);
    else if (!why) why = serve_fields(l, json, route, r);
    cJSON_Delete(json);
    return why;
}
