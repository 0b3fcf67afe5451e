/*
 * serve — `octo serve`: an OpenAI-compatible HTTP server over one model
 * (docs/server.md). serve.c holds the daemon (libmicrohttpd, a thread per
 * connection), the connection limits, the slots and shutdown;
 * serve_request.c reads a request (route, method, API key, the body's size
 * and shape, the JSON) without generating anything, so it can be fuzzed
 * (fuzz/fuzz_serve.c); serve_openai.c generates and answers it (cJSON),
 * streaming included.
 *
 * Slots: the model is loaded with max_sessions = --parallel N; slot 0 is the
 * model's own conversation, slots 1..N-1 are octo_sessions. A request takes a
 * free slot, waiting (queued, at most --max-queue of them) while all are
 * busy, and gives it back when its response is done or its client went away
 * (which cancels the generation). A request holds only what it needs while
 * it waits: its body and parsed JSON are freed once the fields are copied out.
 *
 * Memory per request is bounded before any parsing: the body by --max-body,
 * the JSON by --max-json-nodes and --max-json-depth, counted by a cheap scan
 * of the bytes as they arrive (a body past either is no longer kept).
 */
#ifndef OCTO_TOOLS_SERVE_H
#define OCTO_TOOLS_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "octo.h"
#include "serve_conns.h"

/* What a request may be; checked by serve_parse before anything is generated. */
typedef struct {
    const char *api_key;     /* NULL: none required */
    size_t api_key_len;
    size_t max_body;         /* bytes of a request body (413 beyond) */
    size_t max_prompt;       /* bytes of a prompt or of all messages (400 beyond) */
    long max_json_nodes;     /* values in the body's JSON (400 beyond) */
    long max_json_depth;     /* nesting of arrays and objects (400 beyond) */
    int n_lora;              /* the adapters the server runs (the ids a request may name) */
} serve_limits;

/* What /metrics reports of the requests answered (serve_metrics.c), under server.mu. */
#define SERVE_TTFT_BUCKETS 9
#define SERVE_RECENT 1024
typedef struct {
    long requests, failed, cancelled;    /* completions answered whole; ended with an error; hung up */
    long long prompt_tokens, completion_tokens;
    long ttft[SERVE_TTFT_BUCKETS + 1];   /* time to first token: per bucket (serve_metrics.c), then +Inf */
    double ttft_sum_s;
    double recent_t[SERVE_RECENT];       /* when the last requests ended (monotonic s), a ring */
    int recent_tokens[SERVE_RECENT];     /* and their completion tokens */
    int recent_at;
    double started;                      /* the server's start (monotonic s) */
} serve_counters;

typedef struct {
    octo_model *m;
    octo_session **sessions; /* [n]: NULL for slot 0 (the model's own) */
    octo_adapter *lora[OCTO_MAX_ADAPTERS]; /* --lora, --lora-scaled: every slot runs them */
    float lora_scale[OCTO_MAX_ADAPTERS]; /* every request's, unless it names its own; under mu */
    const char *lora_path[OCTO_MAX_ADAPTERS];
    int n_lora;
    bool *busy;              /* [n] */
    octo_stream **live;      /* [n]: the generation running in each slot, for shutdown to cancel */
    int n;
    int waiting, max_queue;  /* requests waiting for a slot, and how many may */
    bool stopping;           /* shutdown began: no new generation starts */
    serve_counters count;    /* for /metrics */
    pthread_mutex_t mu;      /* busy, live, waiting, stopping, count */
    pthread_cond_t freed;
    pthread_mutex_t parse_mu; /* one body parsed at a time: one JSON tree in memory */
    serve_limits lim;
    const char *model_name;  /* what /v1/models lists */
    unsigned idle_timeout_s; /* a connection idle this long is closed */
    unsigned request_timeout_s; /* a request's headers and body arrive within this (after the idle time) */
    serve_conns *conns;      /* the connections per address (serve_conns.h) */
} server;

/* ---- the slots (serve.c) ---- */

/* A slot for one request: blocks while every slot is busy; SERVE_QUEUE_FULL
 * when --max-queue requests already wait, SERVE_STOPPING once shutdown began. */
#define SERVE_QUEUE_FULL (-1)
#define SERVE_STOPPING (-2)
int serve_acquire(server *s);
void serve_release(server *s, int slot);
/* The generation running in slot (NULL: none), cancelled at once when the server is stopping. */
void serve_track(server *s, int slot, octo_stream *st);
/* Cancel every generation and wake every waiting request (shutdown). */
void serve_stop(server *s);

/* Generation in a slot (the model's own conversation or a session). */
octo_stream *serve_generate(server *s, int slot, const char *prompt, const octo_generate_params *p);
octo_stream *serve_chat(server *s, int slot, const octo_message *msgs, int n, const octo_generate_params *p);
const char *serve_error(server *s, int slot);
octo_stats serve_stats(server *s, int slot);

struct MHD_Connection;
/* True when the client of c hung up (a non-streamed request notices it between tokens). */
bool serve_client_gone(struct MHD_Connection *c);
/* Shutdown began (SIGINT or SIGTERM). */
bool serve_stopping(server *s);

/* ---- reading a request (serve_request.c) ---- */

/* A scan of a JSON text fed in pieces as it arrives: it counts what cJSON
 * would allocate before cJSON is asked to. */
typedef struct {
    long nodes;          /* values: at most 1 + the '[', '{' and ',' outside strings */
    long depth, max_depth;
    bool in_string, escape;
    int u_digits;        /* 1..4: inside a \uXXXX escape, the next digit's place; 0: not */
    bool u_zero;         /* the \u escape's digits so far are all 0 */
    bool nul;            /* a \u0000 escape or a raw NUL byte: a string C cannot hold */
} serve_json_scan;

void serve_scan(serve_json_scan *j, const char *p, size_t n);

/* A request's body as it arrives. */
typedef struct {
    char *body;          /* NULL once dropped (too large or too complex) or parsed */
    size_t len, cap;
    bool too_large;      /* past max_body: the rest was read and dropped */
    serve_json_scan scan;
} serve_upload;

void serve_upload_add(const serve_limits *l, serve_upload *u, const char *data, size_t n);
void serve_upload_free(serve_upload *u);

typedef enum { SERVE_HEALTH, SERVE_MODELS, SERVE_COMPLETIONS, SERVE_CHAT, SERVE_METRICS, SERVE_EMBEDDINGS, SERVE_PAGE,
               SERVE_LORA_LIST, SERVE_LORA_SET } serve_route;

/* What to do with a request: serve it (status 200) or answer with an error. */
typedef struct {
    unsigned status;
    serve_route route;
    const char *type, *code, *message; /* the OpenAI-style error when status != 200 (code may be NULL) */
    const char *allow;                 /* 405: the Allow header */
} serve_verdict;

#define SERVE_MAX_STOP 4

#define SERVE_MAX_TOOLS 32
#define SERVE_MAX_N 8        /* choices a request may ask for ('n') */
#define SERVE_MAX_INPUTS 64  /* texts one embeddings request may hold */

/* How a chat request's tools may be used (tool_choice). */
typedef enum { TOOLS_OFF, TOOLS_AUTO, TOOLS_REQUIRED } serve_tools;

/* A completion, chat or embeddings request, its strings copied out of the body. */
typedef struct {
    char *prompt;          /* completions: in text */
    octo_message *msgs;    /* chat: [n_msgs], strings in text or owned */
    int n_msgs;
    octo_generate_params gp; /* its grammar or json_schema, when set, owned */
    int stream;
    int n;                 /* choices (1..SERVE_MAX_N) */
    const char *stop[SERVE_MAX_STOP]; /* in text */
    int n_stop;
    serve_tools tools;     /* chat: whether the reply may (or must) be a tool call (serve_fields.c) */
    const char *tools_schema; /* chat: the calls' JSON schema, owned, until serve_tools_grammar makes it gp.grammar */
    int dropped;           /* chat: the oldest messages dropped to fit the context */
    const char *inputs[SERVE_MAX_INPUTS]; /* embeddings: the texts, owned */
    int n_inputs;
    int base64;            /* embeddings: encoding_format "base64" */
    float lora[OCTO_MAX_ADAPTERS]; /* completions: the adapters' scales ("lora"); POST /lora-adapters: the new ones */
    int has_lora;
    char *text;            /* every string in text, one after another */
    char **owned;          /* strings made for the request (joined content parts, tool calls and results,
                              the tools' system message, the grammar), freed with it */
    int n_owned, cap_owned;
    char why[400];         /* a refusal's message that names what was refused */
} request;

/* The OpenAI fields of a completion, chat or embeddings body into r (serve_fields.c);
 * a message naming the field that is wrong or not supported, or NULL. */
struct cJSON;
const char *serve_fields(const serve_limits *l, const struct cJSON *json, serve_route route, request *r);
/* Keep s (malloc'd) until request_free; NULL when out of memory (s is freed). */
char *request_own(request *r, char *s);
/* tools and tool_choice (serve_tools.c): the tools' system message and the calls' schema into r.
 * The schema's grammar is made later, by serve_tools_grammar, outside the lock that parses bodies:
 * a conversion is the request's own work (up to about a second) and must not stall /health. */
const char *serve_parse_tools(const struct cJSON *body, request *r);
/* r's tools_schema, if any, as the reply's grammar (gp.grammar); a message naming what is wrong, or NULL. */
const char *serve_tools_grammar(request *r);

/* Route, method, API key (auth: the Authorization header's auth_len bytes,
 * NULL when absent), the body's size and shape, then for the completion
 * endpoints the JSON into r (request_free it whatever the verdict). The
 * body is freed once parsed. */
serve_verdict serve_parse(const serve_limits *l, const char *method, const char *url, const char *auth, size_t auth_len,
                          serve_upload *u, request *r);
void request_free(request *r);
/* The API key of a request, from its url and Authorization header alone (serve_parse's first check):
 * status 200, or the 401 to answer before its body is read. */
serve_verdict serve_authorize(const serve_limits *l, const char *url, const char *auth, size_t auth_len);

/* ---- answering (serve_openai.c) ---- */

/* The responses the daemon queues: a JSON body, or a stream of server-sent
 * events whose reader pulls the generation. */
struct MHD_Response;
struct MHD_Response *serve_json_response(const char *json);

/* POST /v1/completions and /v1/chat/completions: r (taken over) in, a
 * response out with its HTTP status; c is watched for a hang-up. */
struct MHD_Response *serve_completion(server *s, request *r, bool chat, struct MHD_Connection *c, unsigned *status);
/* GET /v1/models */
struct MHD_Response *serve_models(server *s, unsigned *status);
/* POST /v1/embeddings: r (taken over) in (serve_embed.c); between two inputs it stops for a
 * client that hung up (c) or a server shutting down. */
struct MHD_Response *serve_embeddings(server *s, request *r, struct MHD_Connection *c, unsigned *status);
/* GET /: the chat page (serve_page.c). */
struct MHD_Response *serve_page(void);
/* octo_embed in a slot. */
int serve_embed(server *s, int slot, const char *text, float *out, int cap);
/* A chat reply that is a tool call (the default format, docs/server.md): its
 * name and arguments (JSON text) parsed out of text, malloc'd; false when it is not one. */
bool serve_tool_call(const char *text, size_t n, char **name, char **arguments);
/* ---- adapters (serve_lora.c) ---- */

/* A "lora" list ([{"id", "scale"}, ...]) into scales (an adapter not named: 0); a message, or NULL. */
const char *serve_lora_list(const serve_limits *l, const struct cJSON *list, float *scales, char *why, size_t n_why);
/* GET /lora-adapters; POST /lora-adapters (r->lora: the scales parsed). */
struct MHD_Response *serve_lora_get(server *s, unsigned *status);
struct MHD_Response *serve_lora_post(server *s, const request *r, unsigned *status);
/* The request's adapters (its "lora", else the server's scales) set on the slot before it generates. */
octo_status serve_use_lora(server *s, int slot, const request *r);

/* ---- /metrics (serve_metrics.c) ---- */

/* A completion ended: its figures (st, for SERVE_DONE) into the counters. */
typedef enum { SERVE_DONE, SERVE_FAILED, SERVE_CANCELLED } serve_outcome;
void serve_record(server *s, const octo_stats *st, serve_outcome how);
/* GET /metrics: the Prometheus text format (version 0.0.4). */
struct MHD_Response *serve_metrics(server *s);
double serve_now(void);

/* An OpenAI-style error object. */
struct MHD_Response *serve_error_response(const char *type, const char *code, const char *msg);

#endif
