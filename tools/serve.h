/*
 * serve — `octo serve`: an OpenAI-compatible HTTP server over one model
 * (docs/server.md). serve.c holds the daemon (libmicrohttpd, a thread per
 * connection), routing, the API key and the slots; serve_openai.c the
 * requests and responses of the OpenAI API (cJSON), streaming included.
 *
 * Slots: the model is loaded with max_sessions = --parallel N; slot 0 is the
 * model's own conversation, slots 1..N-1 are octo_sessions. A request takes a
 * free slot, waiting (queued) while all are busy, and gives it back when its
 * response is done or its client went away (which cancels the generation).
 */
#ifndef OCTO_TOOLS_SERVE_H
#define OCTO_TOOLS_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "octo.h"

typedef struct {
    octo_model *m;
    octo_session **sessions; /* [n]: NULL for slot 0 (the model's own) */
    bool *busy;              /* [n] */
    int n;
    pthread_mutex_t mu;
    pthread_cond_t freed;
    const char *api_key;     /* NULL: none required */
    const char *model_name;  /* what /v1/models lists */
    size_t max_body;         /* bytes of a request body (413 beyond) */
    size_t max_prompt;       /* bytes of a prompt or of all messages (400 beyond) */
    long long served, failed;
} server;

/* A slot for one request: blocks while every slot is busy. */
int serve_acquire(server *s);
void serve_release(server *s, int slot);

/* Generation in a slot (the model's own conversation or a session). */
octo_stream *serve_generate(server *s, int slot, const char *prompt, const octo_generate_params *p);
octo_stream *serve_chat(server *s, int slot, const octo_message *msgs, int n, const octo_generate_params *p);
const char *serve_error(server *s, int slot);
octo_stats serve_stats(server *s, int slot);

/* The responses the daemon queues: a JSON body, or a stream of server-sent
 * events whose reader pulls the generation (serve_openai.c). */
struct MHD_Response;
struct MHD_Response *serve_json_response(const char *json);

/* POST /v1/completions and /v1/chat/completions: body (len bytes) in, a
 * response out with its HTTP status. chat selects the endpoint. */
struct MHD_Response *serve_completion(server *s, const char *body, size_t len, bool chat, unsigned *status);
/* GET /v1/models */
struct MHD_Response *serve_models(server *s, unsigned *status);
/* An OpenAI-style error object. */
struct MHD_Response *serve_error_response(const char *type, const char *code, const char *msg);

#endif
