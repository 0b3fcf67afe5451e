/*
 * serve_fields — the OpenAI fields of a request body (serve.h), read out of
 * its cJSON tree into a request whose strings outlive the tree.
 *
 * Every field the endpoint knows is listed; any other is a 400 that names it
 * (never ignored: a client that asks for what octo does not do must hear it).
 *
 * Chat messages: content is a string, or an array of parts of which only
 * text parts are taken (joined by newlines); an assistant message's
 * tool_calls and a tool message's result become text in the default tool
 * format (serve_tools.c), which every chat template can carry:
 *   a call        <tool_call>{"name": ..., "arguments": {...}}</tool_call>
 *   a result      a user message <tool_response>...</tool_response>
 * Tools themselves: serve_tools.c.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "model/json_schema.h" /* internal: json_object's grammar (json_any_gbnf) */
#include "serve.h"

char *request_own(request *r, char *s) {
    if (s && r->n_owned == r->cap_owned) {
        const int cap = r->cap_owned ? 2 * r->cap_owned : 8;
        char **o = realloc(r->owned, sizeof *o * (size_t)cap);
        if (o) r->owned = o, r->cap_owned = cap;
    }
    if (!s || r->n_owned == r->cap_owned) return free(s), NULL;
    return r->owned[r->n_owned++] = s;
}

static bool known(const cJSON *body, const char *const *names, const char **unknown) {
    const cJSON *e;
    cJSON_ArrayForEach(e, body) {
        bool ok = false;
        for (int i = 0; names[i] && !ok; i++) ok = !strcmp(e->string, names[i]);
        if (!ok) return *unknown = e->string, false;
    }
    return true;
}

/* The first field of body no endpoint of this kind knows: a message naming it, or NULL. */
static const char *unknown_field(const cJSON *body, serve_route route, request *r) {
    /* OpenAI's fields, llama-server's sampling fields (top_k, min_p, repeat_penalty, grammar), and
     * fields that change nothing here (store, metadata, service_tier, reasoning_effort, user) */
#define SAMPLING_FIELDS                                                                                               \
    "model", "max_tokens", "temperature", "top_p", "seed", "n", "stop", "stream", "stream_options",                  \
        "frequency_penalty", "presence_penalty", "user", "prompt_compress", "top_k", "min_p", "repeat_penalty",       \
        "grammar", "logit_bias", "store", "metadata", "service_tier", "reasoning_effort", "logprobs", "lora"
    static const char *const chat[] = {SAMPLING_FIELDS, "messages", "max_completion_tokens", "response_format",
                                       "tools", "tool_choice", "parallel_tool_calls", "top_logprobs", NULL};
    static const char *const completion[] = {SAMPLING_FIELDS, "prompt", NULL};
#undef SAMPLING_FIELDS
    static const char *const embeddings[] = {"model", "input", "encoding_format", "user", NULL};
    const char *bad = NULL;
    if (known(body, route == SERVE_CHAT ? chat : route == SERVE_EMBEDDINGS ? embeddings : completion, &bad)) return NULL;
    snprintf(r->why, sizeof r->why, "'%.60s' is not supported by octo serve on this endpoint (docs/server.md)", bad);
    return r->why;
}

/* A number field in [lo, hi] (whole when integer), or def when absent; -1 when present but not such a number. */
static int num_field(const cJSON *o, const char *k, double lo, double hi, bool integer, double def, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    *out = def;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi)) return -1;
    if (integer && (double)(long long)v->valuedouble != v->valuedouble) return -1;
    *out = v->valuedouble;
    return 0;
}

static const char *parse_stop(const cJSON *body, request *r) {
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(body, "stop");
    if (!stop || cJSON_IsNull(stop)) return NULL;
    if (cJSON_IsString(stop)) {
        if (stop->valuestring[0]) r->stop[r->n_stop++] = stop->valuestring;
        return NULL;
    }
    if (!cJSON_IsArray(stop) || cJSON_GetArraySize(stop) > SERVE_MAX_STOP) return "'stop' is a string or up to 4 strings";
    const cJSON *e;
    cJSON_ArrayForEach(e, stop) {
        if (!cJSON_IsString(e)) return "'stop' is a string or up to 4 strings";
        if (e->valuestring[0]) r->stop[r->n_stop++] = e->valuestring;
    }
    return NULL;
}

/* ---- chat messages ---- */

/* Text parts joined by newlines (owned by r); why not in *why. */
static const char *join_parts(const cJSON *parts, request *r, const char **why) {
    size_t n = 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, parts) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type"), *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
            return *why = "only text content parts are supported ({\"type\": \"text\", \"text\": ...})", NULL;
        n += strlen(text->valuestring) + 1;
    }
    char *out = request_own(r, malloc(n)), *at = out;
    if (!out) return *why = "out of memory", NULL;
    cJSON_ArrayForEach(p, parts) { /* a running end, not strcat: a body of many parts stays linear */
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        const size_t k = strlen(t);
        if (at > out) *at++ = '\n';
        memcpy(at, t, k);
        at += k;
    }
    *at = '\0';
    return out;
}

/* An assistant message's tool calls after its text, in the default format. */
static const char *with_calls(const char *content, const cJSON *calls, request *r, const char **why) {
    char *out = strdup(content);
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(name) || !cJSON_IsString(args)) {
            free(out);
            return *why = "a tool call needs function.name and function.arguments (a string)", NULL;
        }
        cJSON *quoted = cJSON_CreateString(name->valuestring); /* the name as a JSON string, escaped */
        char *qn = quoted ? cJSON_PrintUnformatted(quoted) : NULL;
        cJSON_Delete(quoted);
        const size_t n = (out ? strlen(out) : 0) + (qn ? strlen(qn) : 0) + strlen(args->valuestring) + 64;
        char *more = out && qn ? realloc(out, n) : NULL;
        if (!more) return free(out), free(qn), *why = "out of memory", NULL;
        out = more;
        snprintf(out + strlen(out), n - strlen(out), "<tool_call>{\"name\": %s, \"arguments\": %s}</tool_call>", qn,
                 args->valuestring[0] ? args->valuestring : "{}");
        free(qn);
    }
    if (!(out = request_own(r, out))) *why = "out of memory";
    return out;
}

/* One message's role and content as the template reads them. */
static const char *one_message(const cJSON *e, request *r, octo_message *m) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role"), *content = cJSON_GetObjectItemCaseSensitive(e, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(e, "tool_calls");
    const char *why = NULL, *text = NULL;
    if (!cJSON_IsString(role)) return "each message needs a string 'role'";
    if (cJSON_IsString(content)) text = content->valuestring;
    else if (cJSON_IsArray(content)) text = join_parts(content, r, &why);
    else if ((!content || cJSON_IsNull(content)) && cJSON_IsArray(calls)) text = "";
    else return "each message needs 'content': a string or an array of text parts";
    if (text && cJSON_IsArray(calls)) text = with_calls(text, calls, r, &why);
    if (text && !strcmp(role->valuestring, "tool")) { /* a result: the user's turn, tagged */
        char *t = request_own(r, malloc(strlen(text) + 40));
        if (t) sprintf(t, "<tool_response>\n%s\n</tool_response>", text);
        text = t;
        if (!t) why = "out of memory";
        *m = (octo_message){"user", text};
        return why;
    }
    /* OpenAI's "developer" messages are what the chat templates call "system" */
    *m = (octo_message){strcmp(role->valuestring, "developer") ? role->valuestring : "system", text};
    return why;
}

static const char *parse_messages(const cJSON *body, request *r, size_t *bytes) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages"), *e;
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) < 1) return "'messages' must be a non-empty array";
    r->msgs = calloc((size_t)cJSON_GetArraySize(msgs) + 1, sizeof *r->msgs); /* + 1: the tools' system message */
    if (!r->msgs) return "out of memory";
    cJSON_ArrayForEach(e, msgs) {
        const char *why = one_message(e, r, &r->msgs[r->n_msgs]);
        if (why) return why;
        *bytes += strlen(r->msgs[r->n_msgs++].content);
    }
    return NULL;
}

static const char *parse_prompt(const cJSON *body, request *r, size_t *bytes) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
    if (!cJSON_IsString(p)) return "'prompt' must be a string";
    r->prompt = p->valuestring;
    *bytes = strlen(p->valuestring);
    return NULL;
}

/* ---- sampling ---- */

/* A seed nobody can predict: the OS's random source (a clock only if that fails). */
static uint64_t new_seed(void) {
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) == (ssize_t)sizeof seed) return seed;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000007u ^ (uint64_t)t.tv_nsec;
}

static const char *parse_penalties(const cJSON *body, octo_generate_params *gp) {
    double v;
    if (num_field(body, "frequency_penalty", -2, 2, false, 0, &v)) return "'frequency_penalty' must be within [-2, 2]";
    gp->frequency_penalty = (float)v;
    if (num_field(body, "presence_penalty", -2, 2, false, 0, &v)) return "'presence_penalty' must be within [-2, 2]";
    gp->presence_penalty = (float)v;
    return NULL;
}

/* The sampling fields into gp; a message when one is out of range. */
static const char *parse_sampling(const cJSON *body, request *r) {
    octo_generate_params *gp = &r->gp;
    double v;
    const char *max_name = cJSON_GetObjectItemCaseSensitive(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (num_field(body, max_name, 1, 1 << 20, true, gp->max_tokens, &v)) return "'max_tokens' must be a positive integer";
    gp->max_tokens = (int)v;
    if (num_field(body, "temperature", 0, 2, false, 1.0, &v)) return "'temperature' must be within [0, 2]";
    gp->temperature = (float)v;
    if (num_field(body, "top_p", 1e-6, 1, false, 1.0, &v)) return "'top_p' must be within (0, 1]";
    gp->top_p = (float)v;
    /* OpenAI's sampling is temperature and top_p only; llama-server's fields add the rest */
    if (num_field(body, "top_k", -1, 1 << 24, true, 0, &v)) return "'top_k' must be an integer >= 0 (0 or -1: off)";
    gp->top_k = v > 0 ? (int)v : 0;
    if (num_field(body, "min_p", 0, 1, false, 0, &v)) return "'min_p' must be within [0, 1]";
    gp->min_p = (float)v;
    if (num_field(body, "repeat_penalty", 1e-6, 10, false, 1.0, &v)) return "'repeat_penalty' must be within (0, 10] (1: off)";
    gp->repeat_penalty = (float)v;
    if (num_field(body, "seed", 0, 9007199254740991.0, true, -1, &v)) return "'seed' must be a non-negative integer";
    gp->seed = v >= 0 ? (uint64_t)v : new_seed(); /* none given: a new one each request */
    if (num_field(body, "n", 1, SERVE_MAX_N, true, 1, &v)) return "'n' must be within 1..8";
    r->n = (int)v;
    /* octo's own: the share of the prompt the model reads, the draft dropping the rest (SpecPC) */
    if (num_field(body, "prompt_compress", 0, 1, false, 0, &v)) return "'prompt_compress' must be within [0, 1] (0: off)";
    gp->prompt_compress = (float)v;
    return parse_penalties(body, gp);
}

/* /v1/completions' logprobs: how many likeliest tokens to give beside each token's own (null: none) */
static const char *parse_logprobs_legacy(const cJSON *body, octo_generate_params *gp) {
    double v;
    if (num_field(body, "logprobs", 0, OCTO_MAX_TOP_LOGPROBS, true, -1, &v)) return "'logprobs' must be within 0..20";
    gp->logprobs = v >= 0;
    gp->top_logprobs = v > 0 ? (int)v : 0;
    return NULL;
}

static const char *parse_logprobs(const cJSON *body, octo_generate_params *gp) {
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(body, "logprobs");
    double v;
    if (lp && !cJSON_IsBool(lp) && !cJSON_IsNull(lp)) return "'logprobs' must be true or false";
    gp->logprobs = cJSON_IsTrue(lp);
    if (num_field(body, "top_logprobs", 0, OCTO_MAX_TOP_LOGPROBS, true, 0, &v)) return "'top_logprobs' must be within 0..20";
    gp->top_logprobs = (int)v;
    if (gp->top_logprobs && !gp->logprobs) return "'top_logprobs' needs 'logprobs': true";
    return NULL;
}

/* ---- structured output ---- */

static const char *parse_response_format(const cJSON *body, request *r) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(body, "response_format");
    if (!rf || cJSON_IsNull(rf)) return NULL;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsString(type)) return "'response_format' needs a 'type'";
    if (!strcmp(type->valuestring, "text")) return NULL;
    if (!strcmp(type->valuestring, "json_object")) {
        r->gp.grammar = json_any_gbnf();
        return NULL;
    }
    if (strcmp(type->valuestring, "json_schema")) return "'response_format' type is text, json_object or json_schema";
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema)) return "'response_format.json_schema.schema' must be a schema";
    /* strict or not, the output follows the schema: octo has no looser mode */
    if (!(r->gp.json_schema = request_own(r, cJSON_PrintUnformatted(schema)))) return "out of memory";
    return NULL;
}

/* llama-server's GBNF 'grammar', alone: a response_format or tools constrain the output their own way. */
static const char *parse_grammar(const cJSON *body, request *r) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(body, "grammar");
    if (!g || cJSON_IsNull(g) || (cJSON_IsString(g) && !g->valuestring[0])) return NULL;
    if (!cJSON_IsString(g)) return "'grammar' must be a string of GBNF (docs/structured-output.md)";
    if (r->gp.grammar || r->gp.json_schema || r->tools_schema) return "'grammar' cannot be combined with 'response_format' or 'tools'";
    if (!(r->gp.grammar = request_own(r, strdup(g->valuestring)))) return "out of memory";
    return NULL;
}

/* Fields that change nothing on a local server, checked for their type: store (nothing is stored),
 * metadata, service_tier, reasoning_effort (no reasoning mode); logit_bias only when empty. */
static const char *parse_ignored(const cJSON *body) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, "logit_bias");
    if (v && !cJSON_IsNull(v) && (!cJSON_IsObject(v) || v->child))
        return "'logit_bias' with entries is not supported by octo serve (an empty object is accepted)";
    v = cJSON_GetObjectItemCaseSensitive(body, "store");
    if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v)) return "'store' must be true or false";
    v = cJSON_GetObjectItemCaseSensitive(body, "metadata");
    if (v && !cJSON_IsNull(v) && !cJSON_IsObject(v)) return "'metadata' must be an object";
    v = cJSON_GetObjectItemCaseSensitive(body, "service_tier");
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) return "'service_tier' must be a string";
    v = cJSON_GetObjectItemCaseSensitive(body, "reasoning_effort");
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) return "'reasoning_effort' must be a string";
    return NULL;
}

/* The fields of a JSON object's members into r. */
static const char *parse_completion(const serve_limits *l, const cJSON *json, bool chat, request *r) {
    size_t bytes = 0;
    const char *why = chat ? parse_messages(json, r, &bytes) : parse_prompt(json, r, &bytes);
    if (!why && bytes > l->max_prompt) why = "the prompt is longer than this server takes (--max-prompt)";
    if (!why) why = parse_sampling(json, r);
    if (!why) why = parse_stop(json, r);
    if (!why) why = chat ? parse_logprobs(json, &r->gp) : parse_logprobs_legacy(json, &r->gp);
    if (!why && chat) why = parse_response_format(json, r);
    if (!why && chat) why = serve_parse_tools(json, r);
    if (!why) why = parse_grammar(json, r);
    const cJSON *lora = cJSON_GetObjectItemCaseSensitive(json, "lora");
    if (!why && lora && !cJSON_IsNull(lora)) {
        why = serve_lora_list(l, lora, r->lora, r->why, sizeof r->why);
        r->has_lora = 1;
    }
    if (!why) why = parse_ignored(json);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(json, "stream");
    if (!why && st && !cJSON_IsBool(st) && !cJSON_IsNull(st)) why = "'stream' must be true or false";
    r->stream = cJSON_IsTrue(st);
    /* stream_options (include_usage) is accepted: the usage comes in the final chunk anyway */
    if (!why && r->stream && r->n > 1) why = "'n' above 1 is not supported with 'stream'";
    return why;
}

static const char *parse_embeddings(const serve_limits *l, const cJSON *json, request *r) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(json, "input"), *e;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(json, "encoding_format");
    if (fmt && !cJSON_IsNull(fmt) && (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64"))))
        return "'encoding_format' is float or base64";
    r->base64 = cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "base64");
    size_t bytes = 0;
    if (cJSON_IsString(in)) r->inputs[r->n_inputs++] = in->valuestring, bytes = strlen(in->valuestring);
    else if (cJSON_IsArray(in) && cJSON_GetArraySize(in) >= 1 && cJSON_GetArraySize(in) <= SERVE_MAX_INPUTS) {
        cJSON_ArrayForEach(e, in) {
            if (!cJSON_IsString(e)) return "'input' holds strings (token arrays are not supported)";
            r->inputs[r->n_inputs++] = e->valuestring;
            bytes += strlen(e->valuestring);
        }
    } else {
        return "'input' is a string or an array of 1..64 strings";
    }
    return bytes > l->max_prompt ? "the input is longer than this server takes (--max-prompt)" : NULL;
}

/* Copy s to *at, moving *at past it; returns the copy. */
static char *keep(char **at, const char *s) {
    const size_t n = strlen(s) + 1;
    char *copy = memcpy(*at, s, n);
    *at += n;
    return copy;
}

/* Move every string the request uses out of the JSON tree into r->text, so the tree can go. */
static const char *own_strings(request *r) {
    size_t n = 1 + (r->prompt ? strlen(r->prompt) + 1 : 0);
    for (int i = 0; i < r->n_msgs; i++) n += strlen(r->msgs[i].role) + strlen(r->msgs[i].content) + 2;
    for (int i = 0; i < r->n_stop; i++) n += strlen(r->stop[i]) + 1;
    for (int i = 0; i < r->n_inputs; i++) n += strlen(r->inputs[i]) + 1;
    char *at = r->text = malloc(n);
    if (!at) return "out of memory";
    if (r->prompt) r->prompt = keep(&at, r->prompt);
    for (int i = 0; i < r->n_msgs; i++) r->msgs[i] = (octo_message){keep(&at, r->msgs[i].role), keep(&at, r->msgs[i].content)};
    for (int i = 0; i < r->n_stop; i++) r->stop[i] = keep(&at, r->stop[i]);
    for (int i = 0; i < r->n_inputs; i++) r->inputs[i] = keep(&at, r->inputs[i]);
    return NULL;
}

/* [{"id": N, "scale": X}, ...] into scales[n] (every adapter not named: 0). */
const char *serve_lora_list(const serve_limits *l, const cJSON *list, float *scales, char *why, size_t n_why) {
    if (!cJSON_IsArray(list)) return "'lora' must be an array of {\"id\", \"scale\"} objects";
    for (int i = 0; i < OCTO_MAX_ADAPTERS; i++) scales[i] = 0.0f;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *sc = cJSON_GetObjectItemCaseSensitive(e, "scale");
        if (!cJSON_IsObject(e) || !cJSON_IsNumber(id) || (sc && !cJSON_IsNumber(sc)))
            return "each adapter is an object {\"id\": N, \"scale\": X}";
        const double v = id->valuedouble, s = sc ? sc->valuedouble : 0.0;
        if (v != (double)(int)v || v < 0 || v >= l->n_lora) {
            snprintf(why, n_why, "no adapter has id %.6g (the server runs %d: GET /lora-adapters lists them)", v, l->n_lora);
            return why;
        }
        if (!(s >= -1e6 && s <= 1e6)) return "an adapter's scale must be a number within -1e6..1e6";
        scales[(int)v] = (float)s;
    }
    return NULL;
}

const char *serve_fields(const serve_limits *l, const cJSON *json, serve_route route, request *r) {
    const char *why = unknown_field(json, route, r);
    r->n = 1;
    if (!why) why = route == SERVE_EMBEDDINGS ? parse_embeddings(l, json, r)
                                              : parse_completion(l, json, route == SERVE_CHAT, r);
    return why ? why : own_strings(r);
}
