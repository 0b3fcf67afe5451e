/*
 * serve_openai — the OpenAI API's completions and chat completions over a
 * slot of the server (serve.h): a request read by serve_request.c in, stop
 * sequences, the response as one JSON object or as server-sent events, the
 * usage and an `octo` object of speed, speculation and KV figures. A
 * generation stops early when its client hangs up: a stream notices when a
 * write fails, a whole response by looking at the socket between tokens.
 */
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/unicode.h" /* internal: generated text as strictly valid UTF-8 */
#include "serve.h"
#include "stats.h"

/* ---- stop sequences: text is emitted only once no stop can begin in it ---- */

typedef struct {
    char *text;
    size_t len, cap, emitted;
    int hit;
} stop_filter;

/* Append piece; out and n: the text that may be emitted now. */
static void stop_feed(stop_filter *f, const request *r, const char *piece, size_t pn, const char **out, size_t *n) {
    if (f->len + pn + 1 > f->cap) {
        size_t cap = (f->len + pn + 1) * 2;
        char *t = realloc(f->text, cap);
        if (!t) pn = 0;
        else f->text = t, f->cap = cap;
    }
    memcpy(f->text + f->len, piece, pn);
    f->len += pn;
    f->text[f->len] = '\0';
    size_t upto = f->len;
    for (int i = 0; i < r->n_stop && !f->hit; i++) {
        const char *at = strstr(f->text + (f->emitted > 64 ? f->emitted - 64 : 0), r->stop[i]);
        if (at) f->hit = 1, upto = (size_t)(at - f->text);
    }
    for (int i = 0; i < r->n_stop && !f->hit; i++) /* hold back a tail that may start a stop */
        for (size_t k = strlen(r->stop[i]) - 1; k > 0; k--)
            if (k <= f->len && !strncmp(f->text + f->len - k, r->stop[i], k) && f->len - k < upto) {
                upto = f->len - k;
                break;
            }
    if (upto < f->emitted) upto = f->emitted;
    *out = f->text + f->emitted;
    *n = upto - f->emitted;
    f->emitted = upto;
}

/* ---- responses ---- */

static atomic_long g_ids;

static const char *finish_reason(octo_stream *st, const stop_filter *f) {
    if (f->hit) return "stop";
    const octo_stop_reason r = octo_stream_stop_reason(st);
    return r == OCTO_STOP_MAX_TOKENS || r == OCTO_STOP_CONTEXT_FULL ? "length" : "stop";
}

static void add_usage(server *s, cJSON *o, const octo_stats *st, int dropped) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", st->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", st->decode_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", st->prompt_tokens + st->decode_tokens);
    cJSON *x = cJSON_AddObjectToObject(o, "octo"); /* the list's serve column (OCTO_STATS, octo.h) */
    for (int pos = 1; pos <= 99; pos++) {
        const stat_row *r = stat_at(STATS_SERVE, pos);
        if (r && r->kind == STAT_TEXT) cJSON_AddStringToObject(x, stat_key(r, STATS_SERVE), stat_text(r, st));
        else if (r) cJSON_AddNumberToObject(x, stat_key(r, STATS_SERVE), stat_number(r, st));
    }
    cJSON_AddNumberToObject(x, "messages_dropped", dropped);
    pthread_mutex_lock(&s->mu);
    const int waiting = s->waiting;
    pthread_mutex_unlock(&s->mu);
    cJSON_AddNumberToObject(x, "queue_length", waiting); /* requests waiting for a conversation as this one ended */
}

/* The envelope both kinds of response share. */
static cJSON *envelope(server *s, bool chat, bool chunk, long id) {
    cJSON *o = cJSON_CreateObject();
    char buf[48];
    snprintf(buf, sizeof buf, "%s-%ld", chat ? "chatcmpl" : "cmpl", id);
    cJSON_AddStringToObject(o, "id", buf);
    cJSON_AddStringToObject(o, "object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)time(NULL));
    cJSON_AddStringToObject(o, "model", s->model_name);
    return o;
}

/* text[0..n) as a C string of valid UTF-8 (malloc'd, NULL without memory).
 * The stream holds back a character still arriving, so a piece ends at a
 * character's end; a byte that starts no character (a byte-fallback token
 * can make one) becomes U+FFFD, as strict JSON readers require. */
static char *utf8_text(const char *text, size_t n) {
    char *t = malloc(3 * n + 1);
    if (t) unicode_sanitize(text ? text : "", text ? n : 0, t);
    return t;
}

/* One choice: text (a delta when chunk) and the finish reason (NULL: still running). */
static cJSON *add_choice(cJSON *o, bool chat, bool chunk, int index, const char *text, size_t n, const char *finish) {
    cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices"), *c = cJSON_CreateObject();
    if (!choices) choices = cJSON_AddArrayToObject(o, "choices");
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", index);
    char *t = utf8_text(text, n);
    if (chat) {
        cJSON *m = cJSON_AddObjectToObject(c, chunk ? "delta" : "message");
        if (!chunk) cJSON_AddStringToObject(m, "role", "assistant");
        if (text) cJSON_AddStringToObject(m, "content", t ? t : "");
    } else {
        cJSON_AddStringToObject(c, "text", t ? t : "");
        cJSON_AddNullToObject(c, "logprobs");
    }
    free(t);
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    return c;
}

/* A token's piece: its raw bytes into buf (returns how many), as valid UTF-8 into text. */
static int token_text(octo_model *m, int32_t id, char buf[256], char text[3 * 256 + 1]) {
    int n = octo_token_piece(m, id, buf, 256);
    n = n < 0 ? 0 : n > 256 ? 256 : n;
    unicode_sanitize(buf, (size_t)n, text);
    return n;
}

/* A token's text and its bytes, as OpenAI's logprobs give them. */
static void add_token(cJSON *o, octo_model *m, int32_t id, float logprob) {
    char buf[256], text[3 * 256 + 1];
    const int n = token_text(m, id, buf, text);
    cJSON_AddStringToObject(o, "token", text);
    cJSON_AddNumberToObject(o, "logprob", logprob);
    cJSON *bytes = cJSON_AddArrayToObject(o, "bytes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)buf[i]));
}

/* /v1/completions' choice.logprobs for the stream's tokens [from, to): tokens, token_logprobs,
 * top_logprobs (an object of text: logprob a token) and text_offset (bytes into the completion). */
static void add_logprobs_legacy(cJSON *choice, server *s, octo_stream *st, int from, int to) {
    cJSON_DeleteItemFromObjectCaseSensitive(choice, "logprobs");
    cJSON *o = cJSON_AddObjectToObject(choice, "logprobs");
    cJSON *tokens = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offsets = cJSON_AddArrayToObject(o, "text_offset");
    char buf[256], text[3 * 256 + 1];
    octo_token_logprob lp;
    int offset = 0;
    for (int i = 0; i < to && octo_stream_logprob(st, i, &lp) == OCTO_OK; i++) {
        const int n = token_text(s->m, lp.token, buf, text);
        if (i >= from) {
            cJSON_AddItemToArray(tokens, cJSON_CreateString(text));
            cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp.logprob));
            cJSON_AddItemToArray(offsets, cJSON_CreateNumber(offset));
            cJSON *top = cJSON_CreateObject();
            for (int k = 0; k < lp.n_top; k++) {
                token_text(s->m, lp.top_token[k], buf, text);
                if (!cJSON_GetObjectItemCaseSensitive(top, text)) cJSON_AddNumberToObject(top, text, lp.top_logprob[k]);
            }
            cJSON_AddItemToArray(tops, top);
        }
        offset += n;
    }
}

/* choice.logprobs for the stream's tokens [from, to): chat's content list, or the completions' arrays. */
static void add_logprobs(cJSON *choice, bool chat, server *s, octo_stream *st, int from, int to) {
    if (!chat) {
        add_logprobs_legacy(choice, s, st, from, to);
        return;
    }
    cJSON *content = cJSON_AddArrayToObject(cJSON_AddObjectToObject(choice, "logprobs"), "content");
    octo_token_logprob lp;
    for (int i = from; i < to && octo_stream_logprob(st, i, &lp) == OCTO_OK; i++) {
        cJSON *e = cJSON_CreateObject(), *top;
        cJSON_AddItemToArray(content, e);
        add_token(e, s->m, lp.token, lp.logprob);
        top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; k < lp.n_top; k++) {
            cJSON *t = cJSON_CreateObject();
            add_token(t, s->m, lp.top_token[k], lp.top_logprob[k]);
            cJSON_AddItemToArray(top, t);
        }
    }
}

/* A whole chat reply that is a tool call: message.tool_calls instead of content. */
static bool as_tool_call(cJSON *choice, bool chunk, const char *text, size_t n, long id, int index) {
    char *name, *args, *t = utf8_text(text, n);
    const bool is_call = t && serve_tool_call(t, strlen(t), &name, &args);
    free(t);
    if (!is_call) return false;
    cJSON *m = cJSON_GetObjectItemCaseSensitive(choice, chunk ? "delta" : "message");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "content");
    cJSON_AddNullToObject(m, "content");
    cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls"), *call = cJSON_CreateObject();
    cJSON_AddItemToArray(calls, call);
    char call_id[48];
    snprintf(call_id, sizeof call_id, "call_%ld_%d", id, index);
    if (chunk) cJSON_AddNumberToObject(call, "index", 0);
    cJSON_AddStringToObject(call, "id", call_id);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(call, "function");
    cJSON_AddStringToObject(fn, "name", name);
    cJSON_AddStringToObject(fn, "arguments", args);
    cJSON_DeleteItemFromObjectCaseSensitive(choice, "finish_reason");
    cJSON_AddStringToObject(choice, "finish_reason", "tool_calls");
    free(name), free(args);
    return true;
}

struct MHD_Response *serve_json_response(const char *json) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(json), (void *)json, MHD_RESPMEM_MUST_COPY);
    if (r) MHD_add_response_header(r, "Content-Type", "application/json");
    return r;
}

static struct MHD_Response *json_reply(cJSON *o) {
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    struct MHD_Response *r = serve_json_response(text ? text : "{}");
    free(text);
    return r;
}

struct MHD_Response *serve_error_response(const char *type, const char *code, const char *msg) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char *text = utf8_text(msg, strlen(msg)); /* a message may quote the request, or cut it mid-character */
    cJSON_AddStringToObject(e, "message", text ? text : "");
    free(text);
    cJSON_AddStringToObject(e, "type", type);
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    cJSON_AddNullToObject(e, "param");
    return json_reply(o);
}

struct MHD_Response *serve_models(server *s, unsigned *status) {
    cJSON *o = cJSON_CreateObject(), *data = cJSON_CreateArray(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToObject(o, "data", data);
    cJSON_AddItemToArray(data, m);
    cJSON_AddStringToObject(m, "id", s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "octo");
    *status = MHD_HTTP_OK;
    return json_reply(o);
}

/* ---- streaming: the reader MHD calls pulls the next piece ---- */

typedef struct {
    server *s;
    int slot;
    bool chat;
    long id;
    struct MHD_Connection *c; /* watched for a hang-up while a reply with tools is held back */
    octo_stream *st;
    request r;
    stop_filter f;
    char *out;
    size_t out_len, out_pos;
    int lp_sent; /* tokens whose log-probabilities were sent */
    int state; /* 0: generating, 1: final chunk sent, 2: [DONE] sent */
    bool role_sent; /* a chat stream's first delta names the role, as OpenAI's does */
} sse;

/* The role in the delta of a chat stream's first chunk (whichever chunk that is). */
static void first_role(sse *e, cJSON *choice) {
    cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    if (!e->chat || e->role_sent || !delta) return;
    cJSON_AddStringToObject(delta, "role", "assistant");
    e->role_sent = true;
}

static void sse_put(sse *e, cJSON *o) {
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    free(e->out);
    e->out = NULL;
    e->out_len = e->out_pos = 0;
    if (!json) return;
    const size_t n = strlen(json) + 9; /* "data: " + json + "\n\n" + NUL */
    if ((e->out = malloc(n))) e->out_len = (size_t)snprintf(e->out, n, "data: %s\n\n", json);
    free(json);
}

/* The text held back at the end: what a stop string's prefix kept, or with
 * tools the whole reply (a call is sent whole). */
static const char *sse_rest(const sse *e, size_t *n) {
    if (e->r.tools != TOOLS_OFF) return *n = e->f.hit ? e->f.emitted : e->f.len, e->f.text ? e->f.text : "";
    const char *rest = e->f.hit ? "" : e->f.text ? e->f.text + e->f.emitted : "";
    *n = strlen(rest);
    return rest;
}

static void sse_final(sse *e) {
    cJSON *o = envelope(e->s, e->chat, true, e->id);
    if (octo_stream_status(e->st) != OCTO_OK) {
        cJSON *err = cJSON_AddObjectToObject(o, "error");
        const char *why = octo_stream_error(e->st);
        char *text = utf8_text(why, strlen(why));
        cJSON_AddStringToObject(err, "message", text ? text : "");
        free(text);
        cJSON_AddStringToObject(err, "type", "server_error");
    }
    size_t n;
    const char *rest = sse_rest(e, &n);
    cJSON *choice = add_choice(o, e->chat, true, 0, rest, n, finish_reason(e->st, &e->f));
    first_role(e, choice);
    if (e->r.tools != TOOLS_OFF) as_tool_call(choice, true, rest, n, e->id, 0);
    if (e->r.gp.logprobs) add_logprobs(choice, e->chat, e->s, e->st, e->lp_sent, octo_stream_tokens(e->st, NULL));
    const octo_stats st = serve_stats(e->s, e->slot);
    add_usage(e->s, o, &st, e->r.dropped);
    serve_record(e->s, &st, octo_stream_status(e->st) == OCTO_OK ? SERVE_DONE : SERVE_FAILED);
    sse_put(e, o);
    e->state = 1;
}

/* The next event into e->out; false at the end. */
static bool sse_next(sse *e) {
    if (e->state == 2) return false;
    if (e->state == 1) {
        free(e->out);
        e->out = strdup("data: [DONE]\n\n");
        e->out_len = e->out ? strlen(e->out) : 0, e->out_pos = 0, e->state = 2;
        return true;
    }
    const char *piece, *emit;
    size_t n;
    while ((piece = e->f.hit ? NULL : octo_stream_next(e->st))) {
        stop_feed(&e->f, &e->r, piece, (size_t)octo_stream_piece_size(e->st), &emit, &n);
        if (e->f.hit) octo_stream_cancel(e->st);
        if (e->r.tools != TOOLS_OFF) { /* the reply may be a call: sent whole at the end */
            if (serve_client_gone(e->c)) octo_stream_cancel(e->st); /* nothing is written until then */
            continue;
        }
        cJSON *o = envelope(e->s, e->chat, true, e->id);
        cJSON *choice = add_choice(o, e->chat, true, 0, emit, n, NULL);
        first_role(e, choice);
        if (e->r.gp.logprobs) {
            const int now = octo_stream_tokens(e->st, NULL);
            add_logprobs(choice, e->chat, e->s, e->st, e->lp_sent, now);
            e->lp_sent = now;
        }
        sse_put(e, o);
        return true;
    }
    sse_final(e);
    return true;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    sse *e = cls;
    (void)pos;
    while (e->out_pos >= e->out_len)
        if (!sse_next(e)) return MHD_CONTENT_READER_END_OF_STREAM;
    const size_t n = e->out_len - e->out_pos < max ? e->out_len - e->out_pos : max;
    memcpy(buf, e->out + e->out_pos, n);
    e->out_pos += n;
    return (ssize_t)n;
}

/* Done, or the client went away: the generation stops, the slot is free. */
static void sse_free(void *cls) {
    sse *e = cls;
    if (e->state < 2) octo_stream_cancel(e->st);
    if (e->state == 0) serve_record(e->s, NULL, SERVE_CANCELLED); /* its end, if it got there, is counted */
    serve_track(e->s, e->slot, NULL);
    octo_stream_free(e->st);
    serve_release(e->s, e->slot);
    request_free(&e->r);
    free(e->f.text);
    free(e->out);
    free(e);
}

/* ---- the endpoint ---- */

/* Drop the oldest messages after a system one, as many as the library counts
 * in one search for the chat to fit the context; false (the slot's error says
 * why) when even the system prompt and the last message do not fit. */
static bool drop_oldest(server *s, int slot, request *r) {
    const int drop = s->sessions[slot] ? octo_session_chat_fit(s->sessions[slot], r->msgs, r->n_msgs, 0)
                                       : octo_chat_fit(s->m, r->msgs, r->n_msgs, 0);
    if (drop < 0) return false;
    const int first = !strcmp(r->msgs[0].role, "system");
    memmove(r->msgs + first, r->msgs + first + drop, sizeof *r->msgs * (size_t)(r->n_msgs - first - drop));
    r->n_msgs -= drop;
    r->dropped += drop;
    return true;
}

/* A chat that no longer fits the context keeps going: its oldest messages are
 * dropped (the system prompt and the last message stay) and the count is reported. */
static octo_stream *start(server *s, int slot, bool chat, request *r) {
    if (serve_use_lora(s, slot, r)) return NULL;
    if (!chat) return serve_generate(s, slot, r->prompt, &r->gp);
    octo_stream *st = serve_chat(s, slot, r->msgs, r->n_msgs, &r->gp);
    if (!st && strstr(serve_error(s, slot), "the context holds") && drop_oldest(s, slot, r))
        st = serve_chat(s, slot, r->msgs, r->n_msgs, &r->gp);
    return st;
}

/* One choice of a non-streamed reply into o: the generation's whole text
 * (the client looked at between tokens: one that hung up cancels the rest),
 * as a tool call when it is one, with its log-probabilities when asked.
 * false when the generation failed. */
static bool one_choice(server *s, bool chat, long id, octo_stream *st, request *r, struct MHD_Connection *c, cJSON *o,
                       int index) {
    stop_filter f = {0};
    const char *emit;
    size_t n;
    for (const char *piece; !f.hit && (piece = octo_stream_next(st));) {
        stop_feed(&f, r, piece, (size_t)octo_stream_piece_size(st), &emit, &n);
        if (serve_client_gone(c)) octo_stream_cancel(st);
    }
    if (f.hit) octo_stream_cancel(st);
    const bool ok = octo_stream_stop_reason(st) != OCTO_STOP_ERROR;
    const size_t len = f.hit ? f.emitted : f.len;
    cJSON *choice = ok ? add_choice(o, chat, false, index, f.text ? f.text : "", len, finish_reason(st, &f)) : NULL;
    if (choice && r->tools != TOOLS_OFF) as_tool_call(choice, false, f.text ? f.text : "", len, id, index);
    if (choice && r->gp.logprobs) add_logprobs(choice, chat, s, st, 0, octo_stream_tokens(st, NULL));
    free(f.text);
    return ok;
}

/* Non-streaming: r->n choices, one generation after another in the slot
 * (seeds seed, seed + 1, ...), then one object. A generation that failed (a
 * non-finite layer, an I/O error reading experts) is a 500 with the
 * library's message, never a 200 with whatever text came before. *st is the
 * slot's stream, replaced for each choice. */
static struct MHD_Response *whole(server *s, int slot, bool chat, long id, octo_stream **st, request *r,
                                  struct MHD_Connection *c, unsigned *status) {
    cJSON *o = envelope(s, chat, false, id);
    octo_stats total = {0};
    for (int i = 0; i < r->n; i++) {
        if (i > 0) {
            serve_track(s, slot, NULL);
            octo_stream_free(*st);
            r->gp.seed++;
            if (!(*st = start(s, slot, chat, r))) break;
            serve_track(s, slot, *st);
        }
        if (!one_choice(s, chat, id, *st, r, c, o, i)) {
            cJSON_Delete(o);
            serve_record(s, NULL, SERVE_FAILED);
            *status = MHD_HTTP_INTERNAL_SERVER_ERROR;
            return serve_error_response("server_error", NULL, octo_stream_error(*st));
        }
        const octo_stats one = serve_stats(s, slot);
        if (i == 0) total = one;
        else total.decode_tokens += one.decode_tokens;
    }
    if (!*st) { /* a later choice could not start */
        cJSON_Delete(o);
        *status = MHD_HTTP_BAD_REQUEST;
        return serve_error_response("invalid_request_error", NULL, serve_error(s, slot));
    }
    add_usage(s, o, &total, r->dropped);
    const bool gone = octo_stream_stop_reason(*st) == OCTO_STOP_CANCELLED && serve_client_gone(c); /* hung up */
    serve_record(s, &total, gone ? SERVE_CANCELLED : SERVE_DONE);
    return json_reply(o);
}

/* Every slot busy and the queue full, or the server stopping: 503, try again later. */
static struct MHD_Response *busy(bool stopping, unsigned *status) {
    *status = MHD_HTTP_SERVICE_UNAVAILABLE;
    struct MHD_Response *resp =
        serve_error_response("server_error", stopping ? "shutting_down" : "queue_full",
                             stopping ? "the server is shutting down"
                                      : "every conversation is busy and the queue is full (--max-queue); retry later");
    if (resp) MHD_add_response_header(resp, "Retry-After", "1");
    return resp;
}

/* The generation could not start: the library's message, as a 400. */
static struct MHD_Response *not_started(server *s, int slot, request *r, unsigned *status) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s", serve_error(s, slot));
    serve_release(s, slot);
    request_free(r);
    *status = MHD_HTTP_BAD_REQUEST;
    return serve_error_response("invalid_request_error", strstr(msg, "context") ? "context_length_exceeded" : NULL, msg);
}

struct MHD_Response *serve_completion(server *s, request *req, bool chat, struct MHD_Connection *c, unsigned *status) {
    request r = *req;
    const int slot = serve_acquire(s);
    if (slot < 0) {
        request_free(&r);
        return busy(slot == SERVE_STOPPING, status);
    }
    octo_stream *st = start(s, slot, chat, &r);
    const long id = atomic_fetch_add(&g_ids, 1) + 1;
    if (!st) return not_started(s, slot, &r, status);
    serve_track(s, slot, st);
    *status = MHD_HTTP_OK;
    if (!r.stream) {
        struct MHD_Response *resp = whole(s, slot, chat, id, &st, &r, c, status);
        serve_track(s, slot, NULL);
        octo_stream_free(st);
        serve_release(s, slot);
        request_free(&r);
        return resp;
    }
    sse *e = calloc(1, sizeof *e);
    if (!e) {
        serve_track(s, slot, NULL);
        octo_stream_free(st);
        serve_release(s, slot);
        request_free(&r);
        *status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        return serve_error_response("server_error", NULL, "out of memory");
    }
    *e = (sse){.s = s, .slot = slot, .chat = chat, .id = id, .c = c, .st = st, .r = r};
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, e, sse_free);
    if (resp) {
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    } else sse_free(e);
    return resp;
}
