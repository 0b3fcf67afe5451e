/*
 * octo serve — see serve.h. The daemon and its connection limits, the
 * slots and their bounded queue, the options, and shutdown: SIGINT or
 * SIGTERM cancels every generation in flight, lets each reply end (a
 * stream's final chunk and [DONE]), then stops the daemon.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "notes.h"
#include "options.h"
#include "serve.h"

/* ---- slots ---- */

int serve_acquire(server *s) {
    pthread_mutex_lock(&s->mu);
    int slot = s->stopping ? SERVE_STOPPING : SERVE_QUEUE_FULL;
    for (int i = 0; i < s->n && !s->stopping && slot < 0; i++)
        if (!s->busy[i]) slot = i;
    if (slot == SERVE_QUEUE_FULL && s->waiting < s->max_queue) { /* queued until a response is done */
        s->waiting++;
        while (!s->stopping && slot < 0) {
            pthread_cond_wait(&s->freed, &s->mu);
            for (int i = 0; i < s->n && slot < 0; i++)
                if (!s->busy[i]) slot = i;
        }
        s->waiting--;
        if (s->stopping) slot = SERVE_STOPPING;
    }
    if (slot >= 0) s->busy[slot] = true;
    pthread_mutex_unlock(&s->mu);
    return slot;
}

void serve_release(server *s, int slot) {
    pthread_mutex_lock(&s->mu);
    s->busy[slot] = false;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->mu);
}

void serve_track(server *s, int slot, octo_stream *st) {
    pthread_mutex_lock(&s->mu);
    s->live[slot] = st;
    if (st && s->stopping) octo_stream_cancel(st);
    pthread_mutex_unlock(&s->mu);
}

bool serve_stopping(server *s) {
    pthread_mutex_lock(&s->mu);
    const bool stopping = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return stopping;
}

void serve_stop(server *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    for (int i = 0; i < s->n; i++)
        if (s->live[i]) octo_stream_cancel(s->live[i]);
    pthread_cond_broadcast(&s->freed);
    pthread_mutex_unlock(&s->mu);
}

octo_stream *serve_generate(server *s, int slot, const char *prompt, const octo_generate_params *p) {
    return s->sessions[slot] ? octo_session_generate(s->sessions[slot], prompt, p) : octo_generate(s->m, prompt, p);
}

octo_stream *serve_chat(server *s, int slot, const octo_message *msgs, int n, const octo_generate_params *p) {
    return s->sessions[slot] ? octo_session_chat(s->sessions[slot], msgs, n, p) : octo_chat(s->m, msgs, n, p);
}

const char *serve_error(server *s, int slot) {
    return s->sessions[slot] ? octo_session_error(s->sessions[slot]) : octo_model_error(s->m);
}

int serve_embed(server *s, int slot, const char *text, float *out, int cap) {
    return s->sessions[slot] ? octo_session_embed(s->sessions[slot], text, out, cap) : octo_embed(s->m, text, out, cap);
}

octo_stats serve_stats(server *s, int slot) {
    return s->sessions[slot] ? octo_session_stats(s->sessions[slot]) : octo_model_stats(s->m);
}

/* ---- requests ---- */

bool serve_client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info) return false;
    char byte;
    const ssize_t n = recv(info->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    if (!r) return MHD_NO;
    const enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result refused(struct MHD_Connection *c, const serve_verdict *v) {
    struct MHD_Response *r = serve_error_response(v->type, v->code, v->message);
    if (r && v->allow) MHD_add_response_header(r, "Allow", v->allow);
    return queue(c, v->status, r);
}

/* The request's Authorization header (its length from the daemon: a NUL inside it does not end it). */
static const char *authorization(struct MHD_Connection *c, size_t *len) {
    const char *auth = NULL;
    *len = 0;
    if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION,
                                      strlen(MHD_HTTP_HEADER_AUTHORIZATION), &auth, len) != MHD_YES)
        auth = NULL, *len = 0;
    return auth;
}

static enum MHD_Result route(server *s, struct MHD_Connection *c, const char *url, const char *method, serve_upload *u) {
    size_t auth_len;
    const char *auth = authorization(c, &auth_len);
    request r;
    pthread_mutex_lock(&s->parse_mu);
    serve_verdict v = serve_parse(&s->lim, method, url, auth, auth_len, u, &r);
    pthread_mutex_unlock(&s->parse_mu);
    /* the tools' grammar is this request's own work (up to about a second): on its own thread, not under the
     * lock every request parses under (/health, /metrics and the others would wait for it) */
    const char *why = v.status == MHD_HTTP_OK ? serve_tools_grammar(&r) : NULL;
    if (why) v = (serve_verdict){.status = MHD_HTTP_BAD_REQUEST, .type = "invalid_request_error", .message = why};
    if (v.status != MHD_HTTP_OK) {
        request_free(&r);
        return refused(c, &v);
    }
    unsigned status = MHD_HTTP_OK;
    if (v.route == SERVE_HEALTH) return queue(c, status, serve_json_response("{\"status\":\"ok\"}"));
    if (v.route == SERVE_METRICS) return queue(c, status, serve_metrics(s));
    if (v.route == SERVE_PAGE) return queue(c, status, serve_page());
    if (v.route == SERVE_EMBEDDINGS) {
        struct MHD_Response *resp = serve_embeddings(s, &r, c, &status);
        return queue(c, status, resp);
    }
    if (v.route == SERVE_LORA_LIST) return queue(c, status, serve_lora_get(s, &status));
    if (v.route == SERVE_LORA_SET) {
        struct MHD_Response *resp = serve_lora_post(s, &r, &status);
        request_free(&r);
        return queue(c, status, resp);
    }
    if (v.route == SERVE_MODELS) {
        struct MHD_Response *resp = serve_models(s, &status);
        return queue(c, status, resp);
    }
    /* MHD counts no idleness while this handler runs: waiting for a slot and
     * generating are not cut by --idle-timeout (tests/serve/attack.py checks) */
    struct MHD_Response *resp = serve_completion(s, &r, v.route == SERVE_CHAT, c, &status);
    return queue(c, status, resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls) {
    (void)version;
    server *s = cls;
    serve_upload *u = *con_cls;
    if (!u) { /* the headers: make room for the body */
        if (!(u = calloc(1, sizeof *u))) return MHD_NO;
        *con_cls = u;
        serve_conns_busy(s->conns, c, true);
        size_t auth_len;
        const char *auth = authorization(c, &auth_len);
        /* a wrong key is answered now: its body is never read (MHD closes the connection after the 401) */
        const serve_verdict v = serve_authorize(&s->lim, url, auth, auth_len);
        return v.status == MHD_HTTP_OK ? MHD_YES : refused(c, &v);
    }
    if (*data_size) {
        serve_upload_add(&s->lim, u, data, *data_size);
        *data_size = 0;
        return MHD_YES;
    }
    serve_conns_handling(s->conns, c); /* whole: answering it is not cut by the request timeout */
    return route(s, c, url, method, u);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)why;
    server *s = cls;
    serve_conns_busy(s->conns, c, false);
    serve_upload *u = *con_cls;
    if (u) serve_upload_free(u);
    free(u);
    *con_cls = NULL;
}

/* ---- the command ---- */

/* serve's options (the table's rows for it, their values in a->serve): a model, one way to the key. */
static int parse_args(int argc, char **argv, cli_args *a) {
    *a = cli_defaults();
    a->serve.host = "127.0.0.1", a->serve.port = 8080, a->serve.parallel = 1, a->serve.max_body = 1 << 20;
    a->serve.max_prompt = 256 << 10, a->serve.max_queue = 16, a->serve.max_json_nodes = 1 << 16;
    a->serve.max_json_depth = 64, a->serve.max_connections = 256, a->serve.max_per_ip = 32;
    a->serve.idle_timeout_s = 10, a->serve.request_timeout_s = 30;
    const int rc = cli_parse(CMD_SERVE, argc, argv, a);
    if (rc) return rc;
    if (a->serve.api_key && a->serve.api_key_file) return usage_error("serve takes --api-key or --api-key-file, not both");
    return a->model || !cli_default_model(&a->model, "serve") ? 0 : 2;
}

/* A key is printable ASCII without spaces: what a client can send in a header whole. */
static int check_key(const char *key, size_t len, const char *from) {
    if (!len) return usage_error("serve: the API key from %s is empty", from);
    for (size_t i = 0; i < len; i++)
        if (key[i] <= ' ' || key[i] > '~')
            return usage_error("serve: the API key from %s must be printable ASCII without spaces", from);
    return 0;
}

/* The API key: --api-key, else the first line of --api-key-file, else
 * $OCTO_API_KEY (the latter two keep it out of the process list); *owned:
 * what to free. */
static int load_api_key(const cli_args *a, serve_limits *l, char **owned) {
    *owned = NULL;
    const char *key = a->serve.api_key, *from = "--api-key";
    size_t len = key ? strlen(key) : 0;
    if (a->serve.api_key_file) {
        if (read_text_file(a->serve.api_key_file, owned, &len)) return 1;
        key = *owned, from = "--api-key-file";
        if (strlen(key) != len) return usage_error("serve: %s holds a NUL byte", a->serve.api_key_file);
        while (len && (key[len - 1] == '\n' || key[len - 1] == '\r')) len--;
    } else if (!key && getenv("OCTO_API_KEY")) {
        key = getenv("OCTO_API_KEY"), from = "OCTO_API_KEY";
        len = strlen(key);
    }
    if (key && check_key(key, len, from)) return 2;
    l->api_key = key, l->api_key_len = len;
    return 0;
}

/* The model with --parallel slots: its own conversation and parallel - 1 sessions. */
static int open_slots(server *s, const cli_args *a, octo_client *c) {
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = (int)a->n_ctx;
    mo.moe = a->mo.moe;
    mo.max_sessions = (int)a->serve.parallel;
    if (!(s->m = octo_load_model(c, a->model, &mo))) return fail("%s", octo_last_error(c));
    s->n = (int)a->serve.parallel;
    s->sessions = calloc((size_t)s->n, sizeof *s->sessions);
    s->busy = calloc((size_t)s->n, sizeof *s->busy);
    s->live = calloc((size_t)s->n, sizeof *s->live);
    if (!s->sessions || !s->busy || !s->live) return fail("out of memory");
    for (int i = 1; i < s->n; i++)
        if (!(s->sessions[i] = octo_session_new(s->m))) return fail("%s", octo_model_error(s->m));
    for (int i = 0; i < a->lora.n; i++) {
        if (!(s->lora[i] = octo_adapter_load(s->m, a->lora.path[i]))) return fail("%s", octo_model_error(s->m));
        s->lora_path[i] = a->lora.path[i];
        s->lora_scale[s->n_lora++] = a->lora.scale[i];
    }
    if (s->n_lora && octo_set_adapters(s->m, s->lora, s->lora_scale, s->n_lora))
        return fail("%s", octo_model_error(s->m));
    for (int i = 1; s->n_lora && i < s->n; i++)
        if (octo_session_set_adapters(s->sessions[i], s->lora, s->lora_scale, s->n_lora))
            return fail("%s", octo_session_error(s->sessions[i]));
    s->lim.n_lora = s->n_lora;
    return 0;
}

static void close_slots(server *s) {
    for (int i = 0; i < s->n_lora; i++) octo_adapter_free(s->lora[i]);
    for (int i = 1; s->sessions && i < s->n; i++) octo_session_free(s->sessions[i]);
    octo_model_free(s->m);
    free(s->sessions);
    free(s->busy);
    free(s->live);
}

/* A thread per connection (poll, so descriptors past 1024 work), at most
 * --max-connections of them and --max-connections-per-ip from one address
 * (serve_conns.c: past it, the address's oldest idle one makes room), each
 * closed after --idle-timeout seconds without traffic. */
#define SERVE_CONN_SLACK 64 /* connections shut down for room, not yet closed by their threads */
static struct MHD_Daemon *start_daemon(server *s, const cli_args *a) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)a->serve.port)};
    if (inet_pton(AF_INET, a->serve.host, &addr.sin_addr) != 1) {
        fail("serve: --host %s is not an IPv4 address", a->serve.host);
        return NULL;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, serve_conns_accept, s->conns,
        on_request, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)a->serve.idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)a->serve.max_connections + SERVE_CONN_SLACK, /* serve_conns_accept keeps --max-connections */ MHD_OPTION_NOTIFY_CONNECTION, serve_conns_notify, s->conns, MHD_OPTION_END);
    if (!d) fail("serve: cannot listen on %s:%ld (in use, or not allowed)", a->serve.host, a->serve.port);
    return d;
}

static void init_server(server *s, const cli_args *a) {
    *s = (server){.max_queue = (int)a->serve.max_queue, .idle_timeout_s = (unsigned)a->serve.idle_timeout_s,
                  .request_timeout_s = (unsigned)a->serve.request_timeout_s};
    s->lim = (serve_limits){.max_body = (size_t)a->serve.max_body, .max_prompt = (size_t)a->serve.max_prompt,
                            .max_json_nodes = a->serve.max_json_nodes, .max_json_depth = a->serve.max_json_depth};
    const char *base = strrchr(a->model, '/');
    s->model_name = base ? base + 1 : a->model;
    s->count.started = serve_now();
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->parse_mu, NULL);
    pthread_cond_init(&s->freed, NULL);
}

/* The generations serve_stop cancelled end as any other does, a stream with its final chunk and
 * [DONE], before the daemon closes their connections: until every slot is released (a response is
 * released once it is written), at most SERVE_DRAIN_S seconds for a client that stopped reading. */
#define SERVE_DRAIN_S 3
static void drain_slots(server *s) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SERVE_DRAIN_S;
    pthread_mutex_lock(&s->mu);
    for (bool busy = true; busy;) {
        busy = false;
        for (int i = 0; i < s->n; i++) busy = busy || s->busy[i];
        if (busy && pthread_cond_timedwait(&s->freed, &s->mu, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Serve until SIGINT or SIGTERM, which every other thread blocks (they inherit
 * the mask), then cancel what runs, let it end, and stop the daemon. */
static void serve_until_signal(server *s, struct MHD_Daemon *d, const sigset_t *stop) {
    int sig = -1;
    const struct timespec second = {.tv_sec = 1};
    while (sig < 0) { /* once a second: requests trickled past their time are closed */
        sig = sigtimedwait(stop, NULL, &second);
        if (sig < 0) serve_conns_sweep(s->conns, (double)s->idle_timeout_s + s->request_timeout_s);
    }
    fprintf(stderr, "octo serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    serve_stop(s);
    drain_slots(s);
    MHD_stop_daemon(d);
}

int cmd_serve(int argc, char **argv) {
    cli_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    server s;
    init_server(&s, &a);
    char *key = NULL;
    if ((rc = load_api_key(&a, &s.lim, &key))) return free(key), rc;
    const char *host = a.serve.host;
    if (!s.lim.api_key && strcmp(host, "127.0.0.1") && strcmp(host, "localhost") && strcmp(host, "::1"))
        note("serve: listening on %s without an API key: anyone who can reach this machine can use the model "
             "(--api-key-file FILE sets one)", host);
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    signal(SIGINT, SIG_DFL); /* not ignored, even when started in the background by a shell */
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_BLOCK, &stop, &old); /* before any thread starts: the model's pool, the daemon's */
    signal(SIGPIPE, SIG_IGN);                /* a client that hangs up is not the server's end */
    octo_client_options co = octo_client_options_defaults();
    co.log = note_log; /* the library's warnings (a context past training, a template missing): once on stderr */
    octo_client *c = octo_client_new(&co);
    rc = c ? open_slots(&s, &a, c) : fail("out of memory");
    if (!rc && !(s.conns = serve_conns_new((unsigned)a.serve.max_per_ip, (unsigned)a.serve.max_connections))) rc = fail("out of memory");
    struct MHD_Daemon *d = rc ? NULL : start_daemon(&s, &a);
    if (!rc && d) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        fprintf(stderr, "octo serve: %s on http://%s:%u (%ld parallel, OpenAI API under /v1)\n", s.model_name, a.serve.host,
                info ? info->port : (unsigned)a.serve.port, a.serve.parallel);
        serve_until_signal(&s, d, &stop);
    } else if (!rc) rc = 1;
    close_slots(&s);
    serve_conns_free(s.conns);
    octo_client_free(c);
    free(key);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
